"""The demo's summary: a fused scheme against its members, per repetition (`make demo`, demo.toml).

A scenario with a [demo] table names its fused scheme and the members fused in it. Per cell:
- goodput per repetition and the median, per scheme (receiver side, usable runs only: a run on a
  link that fell short of its rate, fidelity.py, is left out), and the median TCP retransmissions
  per run (`retx`, guest runs; the bar in docs is also "no more than twice the lossier member's");
- fused / best member: the fused median over the better member median;
- whether fused >= `bar` x the best member on every repetition, pairing runs of the same repetition
  (the runner interleaves the schemes, so a repetition's runs share the host's load);
- time to `ramp_fraction` of the link: the end of the first 1 s bin from the flow's start whose
  goodput reaches that fraction of the link rate, per repetition, and the median over repetitions
  (a run that never got there counts as never, and the median may then be never);
- a sparkline per scheme of the median (over repetitions) per-second goodput, from 0 to the link rate;
- the guest's fidelity over the cell's runs (link probes, CPU stalls, IPC round trips, host load).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from .metrics import time_to_rate
from .runs import RunRecord, per_second_mbps
from .scenario import DemoSpec

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], top: float) -> str:
    """One character per value, the eight block heights spanning 0..top (clipped)."""
    out = []
    for v in values:
        x = min(max(v / top, 0.0), 1.0) if top > 0 and v is not None and math.isfinite(v) else 0.0
        out.append(SPARK[min(int(x * len(SPARK)), len(SPARK) - 1)])
    return "".join(out)


def time_to_fraction(per_second: list[float], link_mbps: float, fraction: float) -> float | None:
    """Seconds from the flow's start to the end of the first 1 s bin at or above fraction x link_mbps."""
    points = [(0.0, 0.0)]
    for k, v in enumerate(per_second):
        points.append((k + 1.0, points[-1][1] + v))
    return time_to_rate(points, fraction * link_mbps, 1.0, origin=0.0)


def median_series(series: list[list[float]]) -> list[float]:
    """The per-second median over repetitions, as long as the shortest repetition."""
    series = [s for s in series if s]
    if not series:
        return []
    n = min(len(s) for s in series)
    return [statistics.median(s[k] for s in series) for k in range(n)]


def median_time(times: list[float | None]) -> float | None:
    """The median with never (None) as infinitely late; None when that median is never."""
    if not times:
        return None
    med = statistics.median(math.inf if t is None else t for t in times)
    return None if math.isinf(med) else med


@dataclass
class SchemeSummary:
    name: str
    label: str
    goodput: dict[int, float]  # repetition -> Mbit/s, usable runs only
    ramp_s: dict[int, float | None]  # repetition -> time to ramp_fraction of the link
    median_mbps: float | None
    median_ramp_s: float | None
    series: list[float]  # median per-second goodput over repetitions
    median_retransmits: float | None = None  # guest runs: TCP retransmissions per run, median


@dataclass
class DemoSummary:
    cell: str
    link_mbps: float
    spec: DemoSpec
    reps: list[int]  # every repetition planned
    schemes: dict[str, SchemeSummary]
    best_member: str | None
    ratio: float | None  # fused median / best member median
    rep_ratios: dict[int, float]  # fused / best member, repetitions where both are usable
    every_rep: bool | None  # fused >= bar x best member on every repetition (None: no pair to judge)
    left_out: list[str] = field(default_factory=list)  # runs not counted, and why
    why_missing: dict[tuple[str, int], str] = field(default_factory=dict)  # (scheme, rep) -> failed/invalid/skipped


def summarize(spec: DemoSpec, cell: str, runs: list[RunRecord]) -> DemoSummary:
    """The demo's numbers for one cell's runs (every scheme and repetition)."""
    link = runs[0].capacity_mbps
    order = list(dict.fromkeys(r.scheme for r in runs))
    schemes = {}
    for name in order:
        rs = [r for r in runs if r.scheme == name and r.usable and r.goodput_mbps is not None]
        series = {r.rep: per_second_mbps(r) for r in rs}
        ramp = {rep: time_to_fraction(s, link, spec.ramp_fraction) for rep, s in series.items()}
        goodput = {r.rep: r.goodput_mbps for r in rs}
        retx = [r.extra["retransmits"] for r in rs if r.extra.get("retransmits") is not None]
        schemes[name] = SchemeSummary(
            name,
            next(r.scheme_label for r in runs if r.scheme == name),
            goodput,
            ramp,
            statistics.median(goodput.values()) if goodput else None,
            median_time(list(ramp.values())),
            median_series(list(series.values())),
            statistics.median(retx) if retx else None,
        )
    members = [m for m in spec.members if m in schemes and schemes[m].median_mbps is not None]
    best = max(members, key=lambda m: schemes[m].median_mbps) if members else None
    fused = schemes.get(spec.fused)
    ratio, rep_ratios, every = None, {}, None
    if best and fused and fused.median_mbps is not None and schemes[best].median_mbps:
        ratio = fused.median_mbps / schemes[best].median_mbps
        b = schemes[best].goodput
        rep_ratios = {rep: g / b[rep] for rep, g in sorted(fused.goodput.items()) if b.get(rep)}
        every = all(x >= spec.bar for x in rep_ratios.values()) if rep_ratios else None
    left_out = [f"{r.scheme} rep {r.rep + 1}: {r.error or r.invalid or r.skipped}" for r in runs if not r.usable]
    why_missing = {
        (r.scheme, r.rep): "failed" if r.error else ("invalid" if r.invalid else "skipped")
        for r in runs
        if not r.usable
    }
    return DemoSummary(
        cell, link, spec, sorted({r.rep for r in runs}), schemes, best, ratio, rep_ratios, every, left_out, why_missing
    )


def _f(v: float | None, digits: int = 2, none: str = "-") -> str:
    return none if v is None else f"{v:.{digits}f}"


def _t(v: float | None) -> str:
    return "never" if v is None else f"{v:g}"


def format_summary(s: DemoSummary) -> list[str]:
    """The summary as text lines (the terminal's and report.md's)."""
    spec = s.spec
    pct = f"{100 * spec.ramp_fraction:g} %"
    width = max([len(x.label) for x in s.schemes.values()] + [6])
    head = f"{'scheme':<{width}}  " + "".join(f"{'rep ' + str(r + 1):>8}" for r in s.reps)
    L = [
        "goodput Mbit/s (receiver side), and time to " + pct + f" of {s.link_mbps:g} Mbit/s (s from the flow's start):",
        "",
        head + f"{'median':>9}{'retx':>7}   time to {pct}: per rep -> median",
    ]
    for x in s.schemes.values():
        cells = "".join(f"{_f(x.goodput.get(r), none=s.why_missing.get((x.name, r), '-')):>8}" for r in s.reps)
        ramps = ", ".join(_t(x.ramp_s[r]) if r in x.ramp_s else "-" for r in s.reps)
        retx = _f(x.median_retransmits, 0)
        L.append(f"{x.label:<{width}}  {cells}{_f(x.median_mbps):>9}{retx:>7}   [{ramps}] -> {_t(x.median_ramp_s)}")
    L.append("")
    fused = s.schemes.get(spec.fused)
    if s.best_member and fused:
        best = s.schemes[s.best_member]
        L.append(
            f"fused / best member ({best.label}, median {_f(best.median_mbps)} Mbit/s): {_f(s.ratio, 3)}"
        )
        per = "  ".join(f"rep {r + 1} {_f(s.rep_ratios.get(r), 3)}" for r in s.reps)
        answer = "n/a (no repetition with both runs valid)" if s.every_rep is None else ("yes" if s.every_rep else "no")
        n_pairs = len(s.rep_ratios)
        L.append(
            f"fused >= {spec.bar:g} x best member on every rep: {answer}"
            + (f" ({n_pairs} of {len(s.reps)} reps judged; {per})" if s.rep_ratios else "")
        )
    else:
        L.append("fused / best member: n/a (a scheme has no usable run)")
    L += ["", f"per-second goodput, median over reps (one character per second, 0 to {s.link_mbps:g} Mbit/s):"]
    for x in s.schemes.values():
        L.append(f"{x.label:<{width}}  {sparkline(x.series, s.link_mbps)}")
    if s.left_out:
        L += ["", "left out of the numbers above:"] + [f"  {x}" for x in s.left_out]
    return L
