"""The guest's fidelity (runner/fidelity.py): the invalid-run rule, the stall sampler's and the module's
numbers, and the guest's rerun of a round whose link fell short (with the runs and probes faked)."""

from __future__ import annotations

import json
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

from runner import cli, fidelity, guest, runs, scenario, vm_backend


def probe(ratio: float | None, at_s: float = 0.0) -> dict:
    if ratio is None:
        return {"set_mbps": 20.0, "at_s": at_s, "error": "iperf3: unable to connect"}
    goodput = ratio * 20.0 * 1448 / 1514
    return {"set_mbps": 20.0, "at_s": at_s, "goodput_mbps": goodput, "wire_ratio": ratio}


class InvalidRunRuleTest(unittest.TestCase):
    def test_goodput_is_counted_at_the_wire(self):
        # 18 Mbit/s of payload in 1448-byte segments is 18.82 Mbit/s of 1514-byte frames: 94.1 % of 20.
        self.assertAlmostEqual(fidelity.wire_ratio(18.0, 20.0), 18.0 * 1514 / 1448 / 20.0)
        self.assertAlmostEqual(fidelity.wire_ratio(18.0, 20.0), 0.9410, places=4)

    def test_a_round_counts_only_when_every_probe_reaches_90_percent(self):
        self.assertEqual(fidelity.round_verdict([probe(0.95), probe(0.90)]), (True, ""))
        valid, why = fidelity.round_verdict([probe(0.95), probe(0.85)])
        self.assertFalse(valid)
        self.assertIn("85.0 % of its set rate", why)
        self.assertIn("under 90 %", why)
        valid, why = fidelity.round_verdict([probe(0.95), probe(None)])
        self.assertFalse(valid)
        self.assertIn("unable to connect", why)
        self.assertFalse(fidelity.round_verdict([None, probe(0.95)])[0])

    def test_an_invalid_raw_run_is_recorded_and_left_out(self):
        sc = scenario.load(scenario.find("polycc-s1"))
        rec = runs.new_record(sc, "vm", sc.cells()[0], sc.schemes[0], 0, 1)
        verdict = {"probes": [probe(0.95), probe(0.85)], "valid": False, "why": "link delivered 85.0 %", "attempt": 2}
        raw = {
            "flows": [{"flow": 0, "start_s": 0.0, "iperf": {"end": {"sum_received": {"bytes": 1, "bits_per_second": 8},
                                                                  "sum_sent": {"bytes": 1}}}}],
            "fidelity": verdict,
            "guest": {"stalls": {"samples": 10, "p50_ms": 0.1, "p99_ms": 4.0, "max_ms": 80.0, "stalls_over_50ms": 1}},
        }
        vm_backend.parse_raw(raw, rec)
        self.assertEqual(rec.invalid, "link delivered 85.0 %")
        self.assertFalse(rec.usable)
        self.assertIsNone(rec.error)  # not a failed run: a measurement that does not count


class ParsingTest(unittest.TestCase):
    def test_ipc_rtt_parameter(self):
        self.assertEqual(
            fidelity.parse_ipc_rtt("count 1234 p50 45 p95 120 p99 5000\n"),
            {"count": 1234, "p50_us": 45, "p95_us": 120, "p99_us": 5000},  # no cap assumed on the values
        )
        self.assertIsNone(fidelity.parse_ipc_rtt("count 0 p50 0 p95 0 p99 0\n"))  # no agent reports
        self.assertIsNone(fidelity.parse_ipc_rtt(""))

    def test_stall_summary_from_wake_up_times(self):
        # 200 sleeps of 10 ms: 196 on time, three 5 ms late, one 60 ms late.
        late_ms = [0.0] * 196 + [5.0, 5.0, 5.0, 60.0]
        wakes, t = [100.0], 100.0
        for x in late_ms:
            t += fidelity.SLEEP_S + x / 1000
            wakes.append(t)
        s = fidelity.stall_summary(wakes)
        self.assertEqual(s, {"samples": 200, "p50_ms": 0.0, "p99_ms": 5.0, "max_ms": 60.0, "stalls_over_50ms": 1})
        self.assertIsNone(fidelity.stall_summary([1.0]))

    def test_stall_sampler_thread_runs_and_stops(self):
        sampler = fidelity.StallSampler(sleep_s=0.001)
        for _ in range(200):
            if len(sampler.wakes) >= 5:
                break
            time.sleep(0.005)
        s = sampler.stop()
        self.assertGreaterEqual(s["samples"], 4)
        self.assertGreaterEqual(s["max_ms"], 0.0)

    def test_pressure_stall_information(self):
        full = "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        before = "some avg10=1.50 avg60=0.80 avg300=0.20 total=1000000\n" + full
        after = "some avg10=9.00 avg60=2.00 avg300=0.50 total=3000000\n" + full
        self.assertEqual(fidelity.parse_psi(before)["some"]["avg10"], 1.5)
        self.assertEqual(fidelity.parse_psi(before)["full"]["total"], 0.0)
        self.assertAlmostEqual(fidelity.psi_delta(before, after, 10.0), 0.2)  # 2 s of 10 waiting for a CPU
        self.assertIsNone(fidelity.psi_delta("", after, 10.0))


class GuestRerunTest(unittest.TestCase):
    """guest.run_round with the link, the probes and the runs faked: what it writes and reruns."""

    def run_round(self, ratios: list[float], retry_s: float) -> tuple[Path, list[str]]:
        d = Path(tempfile.mkdtemp())
        probes = iter(probe(x, at_s=i) for i, x in enumerate(ratios))
        calls: list[str] = []

        def run_one(run, raw_dir, state):
            calls.append(run["id"])
            out = {"id": run["id"], "flows": []}
            (raw_dir / f"{run['id']}.json").write_text(json.dumps(out))
            return out

        plan = [{"id": f"s__r0__{n}", "round": "s/base/r0", "link": {}} for n in ("fused", "bbr", "cubic")]
        state = {"t_boot": 0.0, "retry_s_left": retry_s}
        with (
            mock.patch.object(guest, "ensure_link"),
            mock.patch.object(guest, "log"),
            mock.patch.object(guest, "link_probe", side_effect=lambda *a: next(probes)),
            mock.patch.object(guest, "run_one", side_effect=run_one),
        ):
            for rnd in guest.rounds(plan):
                guest.run_round(rnd, d, state, True, "1-3/3")
        return d, calls

    def test_a_short_link_reruns_the_round_and_keeps_the_first_attempt_aside(self):
        d, calls = self.run_round([0.95, 0.85, 0.94, 0.96], retry_s=600)
        self.assertEqual(len(calls), 6)  # the round twice
        final = json.loads((d / "s__r0__bbr.json").read_text())["fidelity"]
        self.assertTrue(final["valid"])
        self.assertEqual(final["attempt"], 1)
        self.assertEqual([p["wire_ratio"] for p in final["probes"]], [0.94, 0.96])  # the rerun probes afresh
        first = json.loads((d / "invalid" / "s__r0__bbr.attempt1.json").read_text())["fidelity"]
        self.assertFalse(first["valid"])
        self.assertIn("85.0 %", first["why"])
        notes = cli.rerun_notes(d / "invalid")
        self.assertEqual([n[0] for n in notes], ["s__r0__bbr", "s__r0__cubic", "s__r0__fused"])
        self.assertIn("attempt 1 was invalid (link delivered 85.0 %", notes[0][1])

    def test_without_retry_budget_the_invalid_round_stays_invalid(self):
        d, calls = self.run_round([0.95, 0.85], retry_s=0)
        self.assertEqual(len(calls), 3)
        final = json.loads((d / "s__r0__cubic.json").read_text())["fidelity"]
        self.assertFalse(final["valid"])
        self.assertFalse(final["rerun"])
        self.assertFalse((d / "invalid").exists())

    def test_retries_are_bounded(self):
        d, calls = self.run_round([0.5] * 20, retry_s=1e9)
        self.assertEqual(len(calls), 3 * (1 + fidelity.MAX_ROUND_RETRIES))
        self.assertEqual(len(list((d / "invalid").glob("*.json"))), 3 * fidelity.MAX_ROUND_RETRIES)
        self.assertFalse(json.loads((d / "s__r0__fused.json").read_text())["fidelity"]["valid"])

    def test_rounds_group_consecutive_runs(self):
        plan = [
            {"id": "a", "round": "x"},
            {"id": "b", "round": "x"},
            {"id": "ipc", "ipc_bench": True},
            {"id": "c", "round": "y"},
        ]
        self.assertEqual([[r["id"] for r in g] for g in guest.rounds(plan)], [["a", "b"], ["ipc"], ["c"]])


if __name__ == "__main__":
    unittest.main()
