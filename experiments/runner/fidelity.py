"""The guest's own fidelity: is the emulated link delivering its rate, and were the emulated CPUs there?

Every vm run carries three measurements of the guest that ran it, beside the host's load average:
- link: one in-kernel CUBIC flow (iperf3 -C cubic) on the same link, in the same boot, before and
  after each round (one repetition of every scheme of a cell). Its receiver-side goodput after slow
  start, counted at the wire (payload + Ethernet, IP and TCP headers, which tbf's rate also counts),
  against the link's set rate. The probe measures the emulation's rate, not CUBIC: the ACK-path
  jitter and random loss are off and the buffer at least one BDP while it runs (with +/-70 ms of ACK
  aggregation one CUBIC flow filled only 76-85 % of a healthy 20 Mbit/s link in 8 s). A round whose
  probe before or after is under MIN_LINK_RATIO is invalid: its runs are rerun (at most
  MAX_ROUND_RETRIES times, and only inside the retry budget), and runs that stay invalid are left out
  of the medians.
- CPU stalls: a thread sleeping SLEEP_S in a loop during each run; a wake-up later than asked is a
  stall (the host did not run the vCPU, or TCG fell behind): p50 / p99 / max of the extra delay.
  /proc/pressure/cpu is read too when the kernel has PSI on (Debian's 6.1 needs `psi=1`).
- IPC: ccp.ko's /sys/module/ccp/parameters/ipc_rtt_us ("count N p50 X p95 Y p99 Z", report ->
  agent update round trips in us), reset before each agent run and read after it.

Standard library only: the guest half (guest.py) imports it under TCG.
"""

from __future__ import annotations

import math
import re
import threading
import time

PROBE_S = 10  # the CUBIC probe's length, of which the first PROBE_OMIT_S are left out (slow start)
PROBE_OMIT_S = 2
# The pacing probe's cap, as a fraction of the link: below it, so the link is not what limits it.
PACING_PROBE_FRACTION = 0.5
MIN_LINK_RATIO = 0.90  # a round whose link delivers less than this of its set rate is invalid
MAX_ROUND_RETRIES = 2
MSS_BYTES = 1448
# Bytes on the wire per full segment beyond its payload, as tbf counts skb->len on a veth: Ethernet
# header 14, IPv4 20, TCP 20 + 12 of timestamps. A link at rate R carries at most R x 1448 / 1514 of goodput.
HEADER_BYTES = 14 + 20 + 32
SLEEP_S = 0.010  # the stall sampler's sleep
STALL_MS = 50.0  # a wake-up this much late counts as a stall in `stalls_over_50ms`

IPC_RTT_PARAM = "/sys/module/ccp/parameters/ipc_rtt_us"
PSI_CPU = "/proc/pressure/cpu"


def wire_ratio(goodput_mbps: float, set_mbps: float, mss_bytes: int = MSS_BYTES) -> float:
    """The link's delivered rate at the wire, as a fraction of its set rate."""
    return goodput_mbps * (mss_bytes + HEADER_BYTES) / mss_bytes / set_mbps


def round_verdict(probes: list[dict | None], min_ratio: float = MIN_LINK_RATIO) -> tuple[bool, str]:
    """Whether a round's runs count: every probe that brackets it delivered at least min_ratio of the
    set rate. A probe that failed (no number) makes the round invalid too: the link was not shown to work."""
    for p in probes:
        if p is None or p.get("wire_ratio") is None:
            err = (p or {}).get("error", "no probe")
            return False, f"link probe failed ({err})"
        if p["wire_ratio"] < min_ratio:
            return False, (
                f"link delivered {100 * p['wire_ratio']:.1f} % of its set rate "
                f"(CUBIC probe {p['goodput_mbps']:.2f} Mbit/s), under {100 * min_ratio:.0f} %"
            )
    return True, ""


IPC_RE = re.compile(r"count\s+(\d+)\s+p50\s+(\d+)\s+p95\s+(\d+)\s+p99\s+(\d+)")


def parse_ipc_rtt(text: str) -> dict | None:
    """ccp.ko's "count N p50 X p95 Y p99 Z" (us) -> a dict; None when unreadable or empty (no agent
    reports), since percentiles of nothing read as 0 there."""
    m = IPC_RE.search(text or "")
    if not m:
        return None
    count, p50, p95, p99 = map(int, m.groups())
    if count == 0:
        return None
    return {"count": count, "p50_us": p50, "p95_us": p95, "p99_us": p99}


def parse_psi(text: str) -> dict[str, dict[str, float]]:
    """/proc/pressure/cpu ("some avg10=0.12 avg60=0.05 avg300=0.01 total=12345", and a "full" line on
    newer kernels) -> {"some": {"avg10": 0.12, ..., "total": 12345.0}, ...}."""
    out: dict[str, dict[str, float]] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if not parts or parts[0] not in ("some", "full"):
            continue
        vals = {}
        for kv in parts[1:]:
            k, _, v = kv.partition("=")
            try:
                vals[k] = float(v)
            except ValueError:
                pass
        out[parts[0]] = vals
    return out


def psi_delta(before: str, after: str, wall_s: float) -> float | None:
    """The fraction of the wall time some task waited for a CPU, from two reads of /proc/pressure/cpu."""
    a, b = parse_psi(before).get("some", {}), parse_psi(after).get("some", {})
    if "total" not in a or "total" not in b or wall_s <= 0:
        return None
    return (b["total"] - a["total"]) / 1e6 / wall_s


def _pct(xs: list[float], q: float) -> float:
    """The q-th percentile of a sorted list, nearest rank (the smallest value with q % at or below it)."""
    return xs[min(len(xs), max(1, math.ceil(q / 100 * len(xs)))) - 1]


def stall_summary(wakes: list[float], sleep_s: float = SLEEP_S) -> dict | None:
    """A sleeping loop's wake-up times (monotonic s) -> how late each wake-up came beyond the sleep asked,
    in ms: p50, p99, max, and how many were later than STALL_MS."""
    if len(wakes) < 2:
        return None
    late = sorted(max((b - a - sleep_s) * 1000.0, 0.0) for a, b in zip(wakes, wakes[1:]))
    return {
        "samples": len(late),
        "p50_ms": round(_pct(late, 50), 3),
        "p99_ms": round(_pct(late, 99), 3),
        "max_ms": round(late[-1], 3),
        "stalls_over_50ms": sum(1 for x in late if x > STALL_MS),
    }


class StallSampler:
    """A daemon thread sleeping SLEEP_S in a loop, keeping its wake-up times; stop() summarizes them."""

    def __init__(self, sleep_s: float = SLEEP_S):
        self.sleep_s = sleep_s
        self.wakes: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.wakes.append(time.monotonic())
            time.sleep(self.sleep_s)

    def stop(self) -> dict | None:
        self._stop.set()
        self._thread.join(timeout=5)
        return stall_summary(self.wakes, self.sleep_s)
