"""The kernel-parity matrix (issue 15): every cell's guest figures beside the simulator's.

A `kind = "matrix"` scenario names its links as [[cell]] tables (experiments/scenarios/matrix.toml).
`experiments/run --backend vm matrix` runs them in the guest and then, in the same invocation, the
same cells, schemes, durations and repetitions on the simulator (seconds of CPU), into
`<out>/sim/`; report.md gains one table per cell (guest median and minimum utilization, the
simulator's median, guest / simulator, the guest's p95 queueing delay and retransmits) and
`matrix-heatmap.png` (schemes x cells, guest / simulator, 1 = parity). `--backend sim matrix`
writes the simulator's tables alone: without guest runs there is no ratio and no heat map.

The guest's pacing timers fire late under emulation, and a constant pacing rate delivers 0.75-0.98
of itself with the host's load (docs/kernel-parity.md), where a real host and the simulator pace
exactly. So the vm backend runs the simulator a second time at each cell's measured pacing
(`polycc-sim --pacing-efficiency`, the median of the guest's pacing probes in that cell), into
`<out>/sim-guest-paced/`: each table gains that figure and guest / it, and
`matrix-heatmap-guest-paced.png` shows it, so what the guest's pacing alone costs a rate-based
scheme is on the simulator's side too.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from .runs import RunRecord

# Guest / simulator goodput within this band is parity (issue 15: "within 10 % of the simulator's").
PARITY_BAND = 0.10


@dataclass
class Row:
    scheme: str
    label: str
    guest_median: float | None  # utilization of the cell's capacity
    guest_min: float | None
    guest_runs: int
    sim: float | None
    qdelay_p95_ms: float | None  # guest median
    retransmits: float | None  # guest median per run
    sim_qdelay_p95_ms: float | None
    sim_loss_pct: float | None
    # The simulator at the cell's measured guest pacing (None: not run).
    sim_paced: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.guest_median is None or not self.sim:
            return None
        return self.guest_median / self.sim

    @property
    def ratio_paced(self) -> float | None:
        if self.guest_median is None or not self.sim_paced:
            return None
        return self.guest_median / self.sim_paced


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _by_cell_scheme(recs: list[RunRecord]) -> dict[str, dict[str, list[RunRecord]]]:
    out: dict[str, dict[str, list[RunRecord]]] = {}
    for r in recs:
        if r.usable:
            out.setdefault(r.cell, {}).setdefault(r.scheme, []).append(r)
    return out


def rows(cells: list[str], schemes: list[tuple[str, str]], guest: list[RunRecord] | None,
         sim: list[RunRecord], sim_paced: list[RunRecord] | None = None) -> dict[str, list[Row]]:
    """One row per scheme per cell; `schemes` are (name, label) in scenario order; `sim_paced`, the
    simulator's runs at the guest's measured pacing, when there are any."""
    g = _by_cell_scheme(guest or [])
    s = _by_cell_scheme(sim)
    # Only runs that were given a pacing: a cell without a probe ran exactly again, nothing new.
    sp = _by_cell_scheme([r for r in sim_paced or [] if r.extra.get("pacing_efficiency") is not None])
    out: dict[str, list[Row]] = {}
    for cell in cells:
        out[cell] = []
        for name, label in schemes:
            gr = g.get(cell, {}).get(name, [])
            sr = s.get(cell, {}).get(name, [])
            util = [r.metrics.get("utilization") for r in gr]
            util = [u for u in util if u is not None]
            sim_loss = _median([r.metrics.get("loss_frac") for r in sr])
            out[cell].append(Row(
                scheme=name,
                label=label,
                guest_median=statistics.median(util) if util else None,
                guest_min=min(util) if util else None,
                guest_runs=len(util),
                sim=_median([r.metrics.get("utilization") for r in sr]),
                qdelay_p95_ms=_median([r.metrics.get("qdelay_p95_ms") for r in gr]),
                retransmits=_median([r.extra.get("retransmits") for r in gr]),
                sim_qdelay_p95_ms=_median([r.metrics.get("qdelay_p95_ms") for r in sr]),
                sim_loss_pct=None if sim_loss is None else 100 * sim_loss,
                sim_paced=_median([r.metrics.get("utilization") for r in sp.get(cell, {}).get(name, [])]),
            ))
    return out


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def section(table: dict[str, list[Row]], cell_links: dict[str, str], with_guest: bool,
            cell_pacing: dict[str, float] | None = None) -> list[str]:
    """`cell_pacing`: per cell, the guest pacing the simulator's second run was given (the tables
    then show that run too)."""
    paced = cell_pacing is not None
    L = ["## Matrix: guest against the simulator, cell by cell", ""]
    if with_guest:
        L += [
            "Utilization of each cell's capacity. Guest: median and minimum over the valid repetitions (a run on a",
            "link that delivered under 90 % of its rate is left out, see Guest fidelity); simulator: median over the",
            f"same number of seeds. Parity: guest / simulator within +/-{100 * PARITY_BAND:.0f} %. Queueing delay",
            "and retransmits are the guest's medians (p95 of per-RTT queueing delay; TCP retransmissions per run).",
            "",
        ]
        if paced:
            L += [
                "Simulator at the guest's pacing: the same seeds with each paced packet leaving at the fraction of its",
                "rate the guest's pacing probe delivered in that cell (in-kernel CUBIC capped at half the link; the",
                "guest's timers fire late under emulation, a real host's do not), `polycc-sim --pacing-efficiency`.",
                "",
            ]
    for cell, rs in table.items():
        L += [f"### {cell}: {cell_links.get(cell, '')}", ""]
        if with_guest:
            head = ["scheme", "guest median", "guest min", "runs", "simulator", "guest / sim", "parity"]
            if paced:
                L += [f"Guest pacing (probe median): {_f((cell_pacing or {}).get(cell))}", ""]
                head += ["sim at guest pacing", "guest / it"]
            head += ["p95 qdelay (ms)", "retransmits"]
            L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for r in rs:
                parity = "-" if r.ratio is None else ("yes" if abs(r.ratio - 1) <= PARITY_BAND else "no")
                cells = [r.label, _f(r.guest_median), _f(r.guest_min), str(r.guest_runs), _f(r.sim), _f(r.ratio, 2), parity]
                if paced:
                    cells += [_f(r.sim_paced), _f(r.ratio_paced, 2)]
                cells += [_f(r.qdelay_p95_ms, 1), _f(r.retransmits, 0)]
                L.append("| " + " | ".join(cells) + " |")
        else:
            L += ["| scheme | simulator utilization | p95 qdelay (ms) | loss (%) |", "|---|---|---|---|"]
            for r in rs:
                L.append(f"| {r.label} | {_f(r.sim)} | {_f(r.sim_qdelay_p95_ms, 1)} | {_f(r.sim_loss_pct, 2)} |")
        L.append("")
    return L


def summary(tables: list[dict[str, list[Row]]]) -> list[str]:
    """One line per scheme, one column per cell: the guest's median utilization and, in brackets,
    guest / simulator; with several runs of the same matrix (`tables`, e.g. through two datapaths),
    each run's guest median side by side, then the first run's simulator figure."""
    first = tables[0]
    cells = list(first)
    head = "guest (guest / sim)" if len(tables) == 1 else " / ".join(["guest"] * len(tables)) + " / sim"
    L = ["| scheme | " + " | ".join(f"{c.removeprefix('cell=')}: {head}" for c in cells) + " |",
         "|---|" + "---|" * len(cells)]
    for row in first[cells[0]] if cells else []:
        out = []
        for c in cells:
            rs = [next((r for r in t.get(c, []) if r.scheme == row.scheme), None) for t in tables]
            if len(tables) == 1:
                out.append(f"{_f(rs[0].guest_median if rs[0] else None)} ({_f(rs[0].ratio if rs[0] else None, 2)})")
            else:
                out.append(" / ".join(_f(r.guest_median if r else None) for r in rs) + f" / {_f(rs[0].sim if rs[0] else None)}")
        L.append(f"| {row.label} | " + " | ".join(out) + " |")
    return L


def heatmap(table: dict[str, list[Row]], path: Path, paced: bool = False) -> Path:
    """Schemes (rows) x cells (columns), colour = guest / simulator on a diverging map centred
    on 1, each square labelled with its ratio; grey where either side has no figure. `paced`:
    against the simulator at the guest's pacing instead."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    cells = list(table)
    labels = [r.label for r in table[cells[0]]] if cells else []
    z = np.full((len(labels), len(cells)), np.nan)
    for j, cell in enumerate(cells):
        for i, r in enumerate(table[cell]):
            ratio = r.ratio_paced if paced else r.ratio
            if ratio is not None:
                z[i, j] = ratio
    fig, ax = plt.subplots(figsize=(3.0 + 1.3 * len(cells), 1.4 + 0.42 * len(labels)))
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="#dddddd")
    # Colours saturate at 0 and 2 (the numbers say how far); parity is white.
    im = ax.imshow(np.ma.masked_invalid(z), cmap=cmap, norm=TwoSlopeNorm(vcenter=1.0, vmin=0.0, vmax=2.0), aspect="auto")
    for i in range(len(labels)):
        for j in range(len(cells)):
            ax.text(j, i, "-" if np.isnan(z[i, j]) else f"{z[i, j]:.2f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(cells)), cells, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    title = "guest / simulator at the guest's pacing" if paced else "guest / simulator"
    ax.set_title(f"{title} (1 = parity)", fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
