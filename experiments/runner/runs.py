"""One run's record, shared by the backends: raw measurements in, the report's metrics out.

A backend fills a `RunRecord` (per-flow goodput, the series, loss, extras) and `finish` computes the
metrics of `metrics.py` from it, so the simulator and the guest are judged by the same code. A
scenario's [competitor] flow is one more FlowResult (`competitor=True`) whose series rows carry its
flow id (after the scheme's flows); the backends leave it out of goodput_mbps and loss_frac, and `finish`
out of every other metric but competitor_mbps and share.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import metrics as m
from .scenario import Cell, Scenario, Scheme

SERIES_FIELDS = ("time_s", "flow", "throughput_mbps", "inflight_bytes", "rtt_ms", "cwnd_bytes")


@dataclass
class FlowResult:
    id: int
    start_s: float
    goodput_mbps: float  # over the flow's lifetime, receiver side
    steady_mbps: float | None  # over the second half of the time all flows are active
    competitor: bool = False  # the scenario's [competitor] flow, not one of the scheme's


@dataclass
class RunRecord:
    scenario: str
    backend: str
    cell: str
    params: dict[str, Any]
    scheme: str
    scheme_label: str
    rep: int
    seed: int | None
    duration_s: float
    capacity_mbps: float  # time-averaged link capacity (the optimum)
    base_rtt_ms: float
    flows: list[FlowResult] = field(default_factory=list)
    goodput_mbps: float | None = None
    loss_frac: float | None = None
    series: list[tuple] = field(default_factory=list)  # rows as SERIES_FIELDS
    metrics: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # backend-specific: reordering, cpu, sim summary
    skipped: str | None = None  # why the run did not happen (unsupported scheme)
    error: str | None = None
    invalid: str | None = None  # why its measurement does not count (the guest's link fell short, fidelity.py)

    @property
    def usable(self) -> bool:
        """Ran, without error, on a link that delivered its rate: what medians and plots take."""
        return not self.error and not self.skipped and not self.invalid

    @property
    def run_id(self) -> str:
        safe = "".join(c if c.isalnum() or c in "-_.=," else "_" for c in f"{self.cell}__{self.scheme}__r{self.rep}")
        return safe

    def competitor_flows(self) -> list[FlowResult]:
        return [f for f in self.flows if f.competitor]

    def own_series(self) -> list[tuple]:
        """The series rows of the scheme's own flows (without the competitor's)."""
        ids = {f.id for f in self.competitor_flows()}
        return [r for r in self.series if r[1] not in ids] if ids else self.series

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("series")
        return d


def finish(rec: RunRecord, bw_step_s: float | None, bw_after_mbps: float | None) -> RunRecord:
    """Compute the report's metrics from the record's measurements (in place; returns rec)."""
    mt: dict[str, Any] = {}
    mt["goodput_mbps"] = rec.goodput_mbps
    mt["utilization"] = rec.goodput_mbps / rec.capacity_mbps if rec.goodput_mbps is not None else None
    mt["loss_frac"] = rec.loss_frac
    series = rec.own_series()
    rows = (
        np.asarray([r for r in series if r[4] is not None and math.isfinite(r[4])], dtype=float)
        if series
        else np.zeros((0, 6))
    )
    rtts = rows[:, 4] if rows.size else np.zeros(0)
    mt["p95_delay_ms"] = m.percentile(rtts, 95)
    mt["mean_rtt_ms"] = float(rtts.mean()) if rtts.size else None
    steady = [f.steady_mbps for f in rec.flows if f.steady_mbps is not None and not f.competitor]
    mt["jain_index"] = m.jain_index(steady) if len(steady) > 1 else None
    comp = rec.competitor_flows()
    mt["competitor_mbps"] = sum(f.goodput_mbps for f in comp) if comp else None
    mt["share"] = competitor_share(rec) if comp else None
    mt["convergence_s"] = mt["queue_convergence_s"] = None
    if bw_step_s is not None and rows.size:
        t_tot, tput_tot = total_throughput(series, m.CONV_BIN_S, rec.duration_s)
        mt["convergence_s"] = m.convergence_time(t_tot, tput_tot, bw_step_s, bw_after_mbps, rec.duration_s)
        mt["queue_convergence_s"] = m.queue_convergence_time(
            rows[:, 0], rows[:, 4], bw_step_s, rec.base_rtt_ms, rec.duration_s
        )
    # Per-RTT distributions of flow 0 after the first fifth of its life (slow start left out; in the guest
    # the flow connects 0.5-3 s after the run starts).
    mt["rtt_tput_median_mbps"] = mt["qdelay_p95_ms"] = None
    if rows.size:
        f0 = rows[rows[:, 1] == 0]
        if f0.size:
            first = float(f0[0, 0])
            end = first + rec.duration_s
            tput, qd = m.per_rtt(f0[:, 0], f0[:, 2], f0[:, 4], rec.base_rtt_ms, first + rec.duration_s / 5, end)
            mt["rtt_tput_median_mbps"] = float(np.median(tput)) if tput.size else None
            mt["qdelay_p95_ms"] = m.percentile(qd, 95)
            rec.extra["per_rtt"] = {
                "throughput_mbps": [round(x, 4) for x in tput.tolist()],
                "qdelay_ms": [round(x, 3) for x in qd.tolist()],
            }
    cpu = rec.extra.get("cpu")
    mt["cpu_s"] = cpu.get("total_s") if cpu else None
    mt["cpu_ratio"] = None  # filled by the report against the kernel baseline of the same cell
    rec.metrics = mt
    return rec


def competitor_share(rec: RunRecord) -> float | None:
    """metrics.py's share: the scheme's goodput over its own and the competitor's, over the time all
    flows ran. Every flow from 0: the lifetime goodputs (receiver side); a later start: the series'
    throughput from the last start to the run's end (sender side in the guest, per report in the
    simulator), as the lifetime goodputs would count time one side had the link alone."""
    comp = rec.competitor_flows()
    start = max((f.start_s for f in rec.flows), default=0.0)
    if start <= 0:
        return m.share(rec.goodput_mbps, sum(f.goodput_mbps for f in comp))
    ids = {f.id for f in comp}
    own = window_mbps(rec.own_series(), start, rec.duration_s)
    other = window_mbps([r for r in rec.series if r[1] in ids], start, rec.duration_s)
    return m.share(own, other)


def window_mbps(series: list[tuple], start_s: float, end_s: float) -> float | None:
    """The rows' flows' throughput over [start_s, end_s), summed: each flow's samples averaged with
    the time since its previous sample as weight (what it delivered over the window's time)."""
    if end_s <= start_s:
        return None
    rows = np.asarray([(r[0], r[1], r[2]) for r in series if r[2] is not None], dtype=float)
    total, seen = 0.0, False
    for f in np.unique(rows[:, 1]) if rows.size else ():
        fr = rows[rows[:, 1] == f]
        fr = fr[np.argsort(fr[:, 0], kind="stable")]
        dt = np.diff(fr[:, 0], prepend=fr[0, 0])
        _, mean = m.bin_series(fr[:, 0], fr[:, 2], end_s - start_s, start_s, end_s, weights=dt)
        if mean.size and math.isfinite(mean[0]):
            total, seen = total + float(mean[0]), True
    return total if seen else None


def total_throughput(series: list[tuple], width: float, end_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The sum over flows of each flow's binned throughput (a flow's empty bin counts as 0 once it has
    started), as (bin centres, Mbit/s): what the bottleneck delivers."""
    rows = np.asarray([(r[0], r[1], r[2]) for r in series if r[2] is not None], dtype=float)
    if rows.size == 0:
        return np.zeros(0), np.zeros(0)
    total = None
    for f in np.unique(rows[:, 1]):
        fr = rows[rows[:, 1] == f]
        starts, means = m.bin_series(fr[:, 0], fr[:, 2], width, 0.0, end_s)
        first = np.argmax(np.isfinite(means)) if np.isfinite(means).any() else len(means)
        means = np.where(np.isfinite(means), means, 0.0)
        means[:first] = 0.0
        total = means if total is None else total + means
    return starts + width / 2, total


def per_second_mbps(rec: RunRecord) -> list[float]:
    """Goodput of the scheme's flows in 1 s bins from the flow's start: the guest's from bytes acked
    (vm_backend.per_second_mbps), otherwise from the series' throughput samples."""
    if "per_second_mbps" in rec.extra:
        return list(rec.extra["per_second_mbps"])
    _, tput = total_throughput(rec.own_series(), 1.0, rec.duration_s)
    return [round(float(x), 4) for x in tput]


def write_run(rec: RunRecord, folder: Path) -> None:
    """runs/<id>.json (metrics and measurements) and runs/<id>.csv (the series)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{rec.run_id}.json").write_text(json.dumps(rec.to_json(), indent=1, default=_jsonable))
    if rec.series:
        with open(folder / f"{rec.run_id}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(SERIES_FIELDS)
            w.writerows(rec.series)


def read_series(folder: Path, rec: RunRecord) -> list[tuple]:
    """The run's series CSV, or its gzipped copy (a folder kept under docs/results: experiments/publish.py)."""
    path = folder / f"{rec.run_id}.csv"
    if not path.exists() and path.with_suffix(".csv.gz").exists():
        opener, path = gzip.open, path.with_suffix(".csv.gz")
    elif path.exists():
        opener = open
    else:
        return []
    with opener(path, "rt") as f:
        r = csv.reader(f)
        next(r, None)
        return [tuple(float(x) if x not in ("", "None") else None for x in row) for row in r]


def load_run(path: Path) -> RunRecord:
    """A run written by write_run (its JSON and, beside it, its series CSV)."""
    d = json.loads(path.read_text())
    d.pop("metrics", None)
    old = "goodput_mbit" in d
    if old:
        d = _under_new_names(d)
    flows = [FlowResult(**f) for f in d.pop("flows", [])]
    rec = RunRecord(**d, flows=flows)
    rec.extra.pop("per_rtt", None)
    rec.series = read_series(path.parent, rec)
    if old:  # the cell's key names the scenario's fields: renamed after its series were found by it
        rec.cell = renamed_scenario(rec.cell)
    return rec


# Before docs/metrics.md's names (2026-11-26), for `--report` on an older results folder: the
# run's fields, old name -> new ...
OLD_NAMES = {"goodput_mbit": "goodput_mbps", "capacity_mbit": "capacity_mbps", "steady_mbit": "steady_mbps",
             "loss": "loss_frac", "mbit": "bandwidth_mbps", "per_second_mbit": "per_second_mbps"}
# ... and in the scenario file the folder keeps (config.json) and the cells' keys.
OLD_SCENARIO_NAMES = ((r"\b(\w+)_mbit\b", r"\1_mbps"), (r"\bmbit(\s*=)", r"bandwidth_mbps\1"),
                      (r"\bloss(\s*=)", r"loss_frac\1"), (r'(metric\s*=\s*)"loss"', r'\1"loss_frac"'),
                      (r'(metric\s*=\s*)"jain"', r'\1"jain_index"'))


def renamed_scenario(text: str) -> str:
    """A scenario file (or a cell's key) written before docs/metrics.md's names, under them; a current
    one is unchanged."""
    for old, new in OLD_SCENARIO_NAMES:
        text = re.sub(old, new, text)
    return text


def _under_new_names(d: dict) -> dict:
    """A run's JSON written before docs/metrics.md's names, under them."""

    def renamed(x: dict) -> dict:
        return {OLD_NAMES.get(k, k): v for k, v in x.items()}

    d = renamed(d)
    d["flows"] = [renamed(f) for f in d.get("flows", [])]
    d["params"] = {renamed_scenario(k): v for k, v in d.get("params", {}).items()}
    extra = d["extra"] = renamed(d.get("extra", {}))
    if "changes_applied" in extra:
        extra["changes_applied"] = [renamed(c) for c in extra["changes_applied"]]
    return d


def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def new_record(sc: Scenario, backend: str, cell: Cell, scheme: Scheme, rep: int, seed: int | None) -> RunRecord:
    link = cell.link
    cap = capacity_mbps(link.bandwidth_mbps, [(c.at_s, c.bandwidth_mbps) for c in link.bw_changes], sc.duration_s)
    return RunRecord(
        sc.name,
        backend,
        cell.key,
        dict(cell.params),
        scheme.name,
        scheme.label(backend),
        rep,
        seed,
        sc.duration_s,
        cap,
        link.rtt_ms,
    )


def capacity_mbps(initial: float, changes: list[tuple[float, float]], duration_s: float) -> float:
    """Time-averaged capacity under step changes."""
    t, bw, acc = 0.0, initial, 0.0
    for at, new in changes:
        at = min(at, duration_s)
        acc += bw * (at - t)
        t, bw = at, new
    acc += bw * max(duration_s - t, 0.0)
    return acc / duration_s
