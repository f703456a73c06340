"""The guest rows' judgement (datapath/tests/test_e2e.py's checks) on the records CI wrote, so a
change to a row's rule is tested on the host without booting the guest."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "datapath" / "tests"))
import test_e2e  # noqa: E402


def verdict(summary: dict, prefix: str) -> list[bool]:
    return [ok for name, ok, _ in test_e2e.checks(summary) if name.startswith(prefix)]


def startup(reps: list[tuple[float, float | None, float | None]]) -> dict:
    """A startup record from (fused, in-kernel BBR, in-kernel CUBIC) t80 per rep, as guest_e2e writes it."""
    rows = []
    for fused, bbr, cubic in reps:
        best = min(t or 8 for t in (bbr, cubic))
        rows.append({"fused": {"t80_s": fused}, "bbr": {"t80_s": bbr}, "cubic": {"t80_s": cubic},
                     "best_member_t80_s": best})
    med = {k: sorted(r[k]["t80_s"] or 8 for r in rows)[len(rows) // 2] for k in ("bbr", "cubic")}
    return {"startup": {"reps": rows, "member_median_t80_s": med, "best_member_median_t80_s": min(med.values()),
                        "sample_s": 0.1}}


# CI of 50465f7 (2026-12-03): the middle rep was 1.44x its own BBR draw.
CI_STOP_61 = [(1.97, 1.95, 2.67), (2.59, 1.80, 1.85), (1.94, 3.01, 4.36)]
# CI of bcaafb1: the first rep's BBR never reached 80 %, its CUBIC took 4.27 s.
CI_BCAAFB1 = [(2.85, None, 4.27), (2.48, 2.03, 6.47), (2.51, 1.96, 5.03)]


def test_the_startup_row_holds_on_both_ci_runs_that_failed_it():
    assert verdict(startup(CI_STOP_61), "startup") == [True]
    assert verdict(startup(CI_BCAAFB1), "startup") == [True]


def test_the_startup_row_fails_a_fused_rep_slower_than_both_references():
    reps = copy.deepcopy(CI_STOP_61)
    reps[1] = (2.9, 1.80, 1.85)  # 1.49x the median 1.95 s, 1.61x its own rep
    assert verdict(startup(reps), "startup") == [False]
    assert verdict(startup(CI_STOP_61[:2]), "startup") == [False]  # fewer than 3 reps


def hang(cwnds: tuple[int, int], srtt_ms: float, resumed_mbps: float) -> dict:
    rate = 10 * 1448 * 8 / srtt_ms / 1e3
    return {"agent_hang": {"stopped_ratio": 5.0, "samples": 17, "cwnd_min_packets": cwnds[0],
                           "cwnd_max_packets": cwnds[1], "srtt_mean_ms": srtt_ms,
                           "window_rate_at_srtt_mbps": rate, "resumed_at_srtt_ratio": resumed_mbps / rate,
                           "counters": {"fallback_entries": 1, "ready_sent": 0, "agents_gone": 0}}}


def test_agent_hang_reads_a_slow_guest_as_the_window_held_and_a_wrong_window_as_a_miss():
    # CI's 2.08 Mbit/s: 10 packets at a 56 ms round trip holds the window.
    assert verdict(hang((10, 10), 56.0, 2.08), "agent_hang") == [True, True]
    # The same goodput at the 40 ms set is a window of 7 packets: the kernel's cwnd says so.
    assert verdict(hang((7, 10), 40.0, 2.08), "agent_hang") == [True, False]
