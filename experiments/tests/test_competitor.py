"""A scenario's [competitor] flow: split out of the scheme's metrics by both backends, its share, the
report's column and the targets on it, from synthetic measurements (no guest or simulator needed)."""

from __future__ import annotations

import tempfile
import unittest
from dataclasses import replace
from pathlib import Path

from runner import report, runs, scenario, sim_backend, vm_backend
from tests.test_report import record
from tests.test_scenarios import COMPETING, load_text
from tests.test_vm_parse import iperf


def sample(t: float, acked: int, dport: int, rtt_ms: float) -> dict:
    return {"t_s": t, "sport": 40000 + dport, "dport": dport, "rtt_ms": rtt_ms, "mss_bytes": 1448, "cwnd_packets": 50,
            "unacked_packets": 40, "acked_bytes": acked}


class CompetitorMetricsTest(unittest.TestCase):
    def guest_record(self) -> runs.RunRecord:
        sc = load_text(COMPETING)
        cell = sc.cells()[0]
        rec = runs.new_record(sc, "vm", cell, sc.schemes[0], 0, 1)
        rec.duration_s = 10.0
        return rec

    def test_guest_raw_run_splits_the_competitor_out(self):
        # 10 s: the scheme's flow 10 Mbit/s (RTT 120.5 ms, 100 retransmits), the CUBIC competitor on the
        # next port 8 Mbit/s (RTT 300 ms, 50 retransmits).
        samples = [
            s
            for i in range(100)
            for s in (sample(0.1 * i, 125_000 * i, 5201, 120.5), sample(0.1 * i, 100_000 * i, 5202, 300.0))
        ]
        comp = {"flow": 1, "start_s": 0.0, "competitor": True, "iperf": iperf(10_000_000, 10.0, 50, 10_100_000)}
        raw = {
            "flows": [{"flow": 0, "start_s": 0.0, "iperf": iperf(12_500_000, 10.0, 100, 12_600_000)}, comp],
            "ss": samples,
            "ss_t0_offset_s": 0.0,
        }
        rec = vm_backend.parse_raw(raw, self.guest_record())
        runs.finish(rec, None, None)
        self.assertIsNone(rec.error)
        self.assertAlmostEqual(rec.goodput_mbps, 10.0)  # the scheme's flow alone, not 18
        self.assertAlmostEqual(rec.loss_frac, 100 * 1448 / 12_600_000)
        self.assertEqual(rec.extra["competitor_retransmits"], 50)
        self.assertEqual([(f.id, f.competitor) for f in rec.flows], [(0, False), (1, True)])
        mt = rec.metrics
        self.assertAlmostEqual(mt["competitor_mbps"], 8.0)
        self.assertAlmostEqual(mt["share"], 10.0 / 18.0)
        self.assertAlmostEqual(mt["utilization"], 10.0 / 20.0)
        self.assertAlmostEqual(mt["p95_delay_ms"], 120.5)  # the competitor's 300 ms samples left out
        self.assertAlmostEqual(mt["mean_rtt_ms"], 120.5)
        self.assertIsNone(mt["jain_index"])  # one flow of the scheme's: no fairness among its flows
        self.assertEqual(rec.extra["per_second_mbps"], [10.0] * 9)
        # The competitor's rows stay in the series under its flow id, for the plots.
        self.assertEqual(sum(1 for r in rec.series if r[1] == 1), 100)
        self.assertAlmostEqual(next(r[2] for r in rec.series if r[1] == 1 and r[2] is not None), 8.0)
        self.assertEqual(len(rec.own_series()), 100)
        # A rebuilt report (--report) reads the same from the saved run.
        with tempfile.TemporaryDirectory() as d:
            runs.write_run(rec, Path(d))
            again = runs.finish(runs.load_run(Path(d) / f"{rec.run_id}.json"), None, None)
        self.assertAlmostEqual(again.metrics["share"], 10.0 / 18.0)
        self.assertAlmostEqual(again.metrics["p95_delay_ms"], 120.5)

    def test_a_failed_competitor_fails_the_run(self):
        raw = {
            "flows": [
                {"flow": 0, "start_s": 0.0, "iperf": iperf(12_500_000, 10.0, 0, 12_500_000)},
                {"flow": 1, "start_s": 0.0, "competitor": True, "error": "unable to connect"},
            ]
        }
        rec = vm_backend.parse_raw(raw, self.guest_record())
        self.assertEqual(rec.error, "competitor flow 1: iperf3: unable to connect")

    def test_late_competitor_share_counts_only_the_time_both_ran(self):
        # The scheme's flow: 10 Mbit/s alone for 5 s, then 6 beside the competitor's 4. Lifetime
        # goodputs would say 8 / (8 + 4) = 0.667; over the 5 s both ran it is 6 / (6 + 4).
        rec = self.guest_record()
        ts = [0.05 + 0.1 * i for i in range(100)]
        rec.series = [(t, 0, 10.0 if t < 5 else 6.0, 0, 100.0, 0) for t in ts]
        rec.series += [(t, 1, 4.0, 0, 400.0, 0) for t in ts if t > 5]
        rec.flows = [runs.FlowResult(0, 0.0, 8.0, None), runs.FlowResult(1, 5.0, 4.0, None, competitor=True)]
        rec.goodput_mbps = 8.0
        runs.finish(rec, None, None)
        self.assertAlmostEqual(rec.metrics["share"], 0.6)
        self.assertAlmostEqual(rec.metrics["competitor_mbps"], 4.0)
        self.assertAlmostEqual(rec.metrics["p95_delay_ms"], 100.0)

    def test_simulator_summary_totals_of_the_schemes_flows(self):
        # polycc-sim totals every flow; the scheme's are the first ones, the competitor the last.
        flows = [
            {"id": 0, "start_s": 0.0, "goodput_mbps": 10.0, "sent_packets": 1000, "dropped_packets": 10},
            {"id": 1, "start_s": 10.0, "goodput_mbps": 6.0, "sent_packets": 500, "dropped_packets": 20},
        ]
        mbit, loss = sim_backend.own_totals(flows, 30.0)
        self.assertAlmostEqual(mbit, (10.0 * 30 + 6.0 * 20) / 30)  # bytes over the time from the first start
        self.assertAlmostEqual(loss, 30 / 1500)


class CompetitorReportTest(unittest.TestCase):
    def test_share_target_is_met_by_the_ratio_or_by_the_bound(self):
        sc = scenario.load(scenario.find("fusion-share"))
        cell = sc.cells()[0]
        # rep 0: fused 0.50 vs BBR 0.55 (ratio 0.91: met); rep 1: 0.58 vs 0.40 (ratio 1.45, but 0.58 <= 0.6:
        # met); rep 2: 0.70 vs 0.65 (ratio 1.08 and above 0.6: not met).
        fused, bbr = (0.50, 0.58, 0.70), (0.55, 0.40, 0.65)
        recs = [record(sc, cell, "fused", r, "sim", share=fused[r]) for r in range(3)]
        recs += [record(sc, cell, "bbr", r, "sim", share=bbr[r]) for r in range(3)]
        (tr,) = report.evaluate_targets(sc, recs, {})
        self.assertFalse(tr.met)
        self.assertAlmostEqual(tr.value, 0.70 / 0.65)  # the failing rep's ratio
        self.assertIn("per rep: 0.909 (share 0.500), 1.450 (share 0.580), 1.077 (share 0.700)", tr.note)
        recs[2].metrics["share"] = 0.60
        (tr,) = report.evaluate_targets(sc, recs, {})
        self.assertTrue(tr.met)
        self.assertAlmostEqual(tr.value, 0.58 / 0.40)  # every rep met: the largest ratio

    def test_report_table_has_the_share_column(self):
        sc = scenario.load(scenario.find("fusion-share")).quick_variant()
        cell = sc.cells()[0]
        recs = [
            record(sc, cell, "fused", 0, "sim", goodput_mbps=11.0, share=0.55, competitor_mbps=9.0, utilization=0.55),
            record(sc, cell, "bbr", 0, "sim", goodput_mbps=8.0, share=0.4, competitor_mbps=12.0, utilization=0.4),
        ]
        with tempfile.TemporaryDirectory() as d:
            path, _ = report.write_report(sc, recs, {}, Path(d), "sim", "experiments/run fusion-share", [])
            text = path.read_text()
        self.assertIn(
            "| cell | scheme | runs | goodput (Mbit/s) | share vs cubic (sim model of kernel) | "
            "cubic (sim model of kernel) (Mbit/s) | utilization |",
            text,
        )
        self.assertIn("| rtt_dev_ms=0 | fused | 1/1 | 11.00 | 0.550 | 9.00 | 0.550 |", text)
        self.assertIn("| rtt_dev_ms=0 | bbr (sim model of kernel) | 1/1 | 8.00 | 0.400 | 12.00 | 0.400 |", text)
        self.assertIn("sharing the link with one cubic (sim model of kernel) flow from 0 s", text)
        self.assertIn("In-kernel baselines and the competitor run the simulator's model", text)
        header = next(line for line in text.splitlines() if line.startswith("| cell | scheme"))
        rule = text.splitlines()[text.splitlines().index(header) + 1]
        self.assertEqual(header.count("|"), rule.count("|"))


if __name__ == "__main__":
    unittest.main()
