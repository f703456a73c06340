"""The metrics the runner reports, computed the same way for every backend from a run's series.

Definitions (stated once, used by the report):
- goodput: receiver-side bytes delivered over the run, all the scheme's flows, in Mbit/s (a
  scenario's [competitor] flow is not the scheme's: loss, delay, Jain's index and convergence leave it
  out too).
- share against the competitor: S / (S + C), S the goodput of the scheme's flows and C the
  competitor's over the time all of them ran: their lifetime goodputs when every flow starts at 0
  (the shipped scenarios), else the series' throughput from the last flow's start to the run's end
  (`share`). competitor_mbps: the competitor's lifetime goodput.
- p95 delay: the 95th percentile of the RTT samples (simulator: one per report; guest: `ss` srtt
  samples every sampling interval); Pantheon uses one-way per-packet delay, we use RTT.
- Jain's index J = (sum x)^2 / (n sum x^2) over per-flow steady-state goodput (the second half of the
  time all flows are active).
- convergence after a bandwidth step: the first 0.5 s bin after the step from which the binned total
  throughput stays within +/-10 % of the new capacity for 2 s; queue convergence: the first bin from
  which the binned RTT stays within base RTT + one base RTT (the queue within one new BDP) for 2 s.
- per-RTT throughput and queueing delay (fidelity): the series cut into base-RTT bins; throughput is
  the mean of the bin's throughput samples, queueing delay the bin's mean RTT minus the base RTT.
- time to a fraction of the link (ramp): from the flow's start until the rate delivered over the
  last `window_s` first reaches the fraction (`time_to_rate`; the demo's 1 s bins and the startup
  timelines' 100 ms sock_diag samples both go through it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

CONV_BIN_S = 0.5
CONV_BAND = 0.10
CONV_HOLD_S = 2.0

# Per-run metrics a [[target]] may name (medians over repetitions are compared).
RUN_METRICS = (
    "goodput_mbps",
    "utilization",
    "p95_delay_ms",
    "mean_rtt_ms",
    "loss_frac",
    "jain_index",
    "convergence_s",
    "queue_convergence_s",
    "rtt_tput_median_mbps",
    "qdelay_p95_ms",
    "cpu_s",
    "cpu_ratio",
    "competitor_mbps",
    "share",
)
# The metrics only a scenario with a [competitor] has.
COMPETITOR_METRICS = ("competitor_mbps", "share")

# Distribution metrics (per-RTT series, percentile): the fidelity table pools the per-RTT
# distribution over the cell's repetitions (CCP's fidelity method); a target on them reads each
# repetition's own distribution, as every target is judged on every rep (report.judge).
POOLED = {"rtt_tput_median_mbps": ("throughput_mbps", 50), "qdelay_p95_ms": ("qdelay_ms", 95)}


def time_to_rate(points: Sequence[tuple[float, float]], target_per_s: float, window_s: float,
                 origin: float | None = None) -> float | None:
    """Seconds from `origin` (default: the first point) until the amount delivered over the last
    `window_s` first reaches `target_per_s`. `points` are (time s, cumulative amount), in time
    order; a window counts once it spans at least 80 % of `window_s`."""
    if not points:
        return None
    start = points[0][0] if origin is None else origin
    j = 0
    for t, amount in points:
        while points[j][0] < t - window_s:
            j += 1
        t0, a0 = points[j]
        if t - t0 >= 0.8 * window_s and (amount - a0) / (t - t0) >= target_per_s:
            return t - start
    return None


def share(own_mbps: float | None, other_mbps: float | None) -> float | None:
    """own / (own + other): the fraction of what two parties delivered that went to the first."""
    if own_mbps is None or other_mbps is None or own_mbps + other_mbps <= 0:
        return None
    return own_mbps / (own_mbps + other_mbps)


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0-100, linear interpolation); None when there are no values."""
    xs = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if xs.size == 0:
        return None
    return float(np.percentile(xs, q))


def jain_index(xs: Sequence[float]) -> float | None:
    """(sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one flow has everything."""
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def bin_series(
    times: Sequence[float],
    values: Sequence[float],
    width: float,
    start: float = 0.0,
    end: float | None = None,
    weights: Sequence[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Means of `values` in bins [start + k width, start + (k+1) width), weighted by `weights` when given;
    bins without samples are NaN. Returns (bin start times, means)."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    wt = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    if end is None:
        end = float(t.max()) if t.size else start
    n = max(math.ceil((end - start) / width - 1e-9), 0)
    edges = start + width * np.arange(n + 1)
    if n == 0:
        return edges[:0], np.zeros(0)
    idx = np.floor((t - start) / width).astype(int)
    ok = (idx >= 0) & (idx < n) & np.isfinite(v) & np.isfinite(wt)
    sums = np.bincount(idx[ok], weights=v[ok] * wt[ok], minlength=n)
    counts = np.bincount(idx[ok], weights=wt[ok], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), np.nan)
    return edges[:-1], means


def first_stable(bin_starts: np.ndarray, ok: np.ndarray, width: float, hold_s: float) -> float | None:
    """The start of the first bin from which `ok` holds for hold_s (ceil(hold/width) bins in a row)."""
    need = max(math.ceil(hold_s / width - 1e-9), 1)
    run = 0
    for i, good in enumerate(ok):
        run = run + 1 if good else 0
        if run >= need:
            return float(bin_starts[i - need + 1])
    return None


def convergence_time(
    times: Sequence[float],
    throughput_mbps: Sequence[float],
    step_s: float,
    target_mbps: float,
    end_s: float,
    width: float = CONV_BIN_S,
    band: float = CONV_BAND,
    hold_s: float = CONV_HOLD_S,
) -> float | None:
    """Seconds after `step_s` until the binned throughput stays within +/-band of target for hold_s."""
    starts, means = bin_series(times, throughput_mbps, width, step_s, end_s)
    ok = np.abs(means - target_mbps) <= band * target_mbps
    t = first_stable(starts, ok, width, hold_s)
    return None if t is None else t - step_s


def queue_convergence_time(
    times: Sequence[float],
    rtt_ms: Sequence[float],
    step_s: float,
    base_rtt_ms: float,
    end_s: float,
    width: float = CONV_BIN_S,
    hold_s: float = CONV_HOLD_S,
) -> float | None:
    """Seconds after `step_s` until the binned RTT stays at or below 2 x base RTT (queue <= one BDP) for hold_s."""
    starts, means = bin_series(times, rtt_ms, width, step_s, end_s)
    ok = means <= 2.0 * base_rtt_ms
    t = first_stable(starts, ok, width, hold_s)
    return None if t is None else t - step_s


def per_rtt(
    times: Sequence[float],
    throughput_mbps: Sequence[float],
    rtt_ms: Sequence[float],
    base_rtt_ms: float,
    start_s: float,
    end_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-RTT (base RTT bins) throughput in Mbit/s and queueing delay in ms, NaN bins dropped. Each
    throughput sample covers the time since the previous one, so a bin's throughput is the samples' mean
    weighted by their intervals: bytes over time, however unevenly the samples came."""
    w = base_rtt_ms / 1000.0
    t = np.asarray(times, dtype=float)
    dt = np.diff(t, prepend=t[0] - (np.median(np.diff(t)) if t.size > 1 else w)) if t.size else t
    _, tput = bin_series(times, throughput_mbps, w, start_s, end_s, weights=np.maximum(dt, 0.0))
    _, rtt = bin_series(times, rtt_ms, w, start_s, end_s)
    qd = np.maximum(rtt - base_rtt_ms, 0.0)
    return tput[np.isfinite(tput)], qd[np.isfinite(qd)]


def pct_diff(value: float | None, reference: float | None) -> float | None:
    """100 (value - reference) / reference."""
    if value is None or reference is None or reference == 0:
        return None
    return 100.0 * (value - reference) / reference


@dataclass(frozen=True)
class Ellipse:
    """A 1-sigma covariance ellipse in (log10 delay, throughput) space."""

    center_log_delay: float
    center_tput: float
    width: float  # full axis length along the first eigenvector (2 sigma)
    height: float  # full axis length along the second eigenvector
    angle_deg: float  # of the first axis, counter-clockwise from the x axis


def sigma_ellipse(delays_ms: Sequence[float], tputs: Sequence[float]) -> Ellipse | None:
    """The 1-sigma ellipse of points (log10 delay, throughput): center the mean, axes 2 sqrt(eigenvalues)
    of the covariance, as in the Remy/MOCC throughput-delay plots. None with fewer than 2 points."""
    if len(delays_ms) < 2:
        return None
    x = np.log10(np.asarray(delays_ms, dtype=float))
    y = np.asarray(tputs, dtype=float)
    cov = np.cov(np.vstack([x, y]))
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(vals)[::-1]
    vals, vecs = np.maximum(vals[order], 0.0), vecs[:, order]
    angle = math.degrees(math.atan2(vecs[1, 0], vecs[0, 0]))
    return Ellipse(float(x.mean()), float(y.mean()), 2 * math.sqrt(vals[0]), 2 * math.sqrt(vals[1]), angle)


def median_spread(values: Iterable[float | None]) -> tuple[float | None, float | None, float | None, int]:
    """(median, 25th, 75th percentile, n) of the values that are not None."""
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return None, None, None, 0
    return float(np.median(xs)), float(np.percentile(xs, 25)), float(np.percentile(xs, 75)), len(xs)


def cdf(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their empirical CDF (i / n)."""
    xs = np.sort(np.asarray(values, dtype=float))
    return xs, np.arange(1, xs.size + 1) / max(xs.size, 1)
