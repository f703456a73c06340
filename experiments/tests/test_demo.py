"""The demo's summary (runner/demo.py) on synthetic per-second series, with the numbers asserted."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

from runner import demo, report, runs, scenario

LINK_MBIT = 20.0


def ramp(seconds_to_full: int, level: float, n: int = 30) -> list[float]:
    """A per-second series climbing linearly to `level` over `seconds_to_full` seconds, then flat."""
    return [round(min(level, level * (k + 1) / seconds_to_full), 4) for k in range(n)]


def demo_runs(goodput: dict[str, list[float]], series: dict[str, list[list[float]]]) -> list[runs.RunRecord]:
    sc = scenario.load(scenario.find("demo"))
    cell = sc.cells()[0]
    out = []
    for rep in range(3):
        for s in sc.schemes:  # interleaved, as the runner plans them
            rec = runs.new_record(sc, "vm", cell, s, rep, 1 + rep)
            rec.goodput_mbps = goodput[s.name][rep]
            rec.extra["retransmits"] = {"fused": 40, "bbr": 300, "cubic": 20}[s.name] + rep
            rec.extra["per_second_mbps"] = series[s.name][rep]
            out.append(rec)
    return out


# 80 % of the link is 16 Mbit/s: fused gets there in its 4th, 3rd and 5th second; BBR in its 2nd, never
# (it collapses) and 3rd; CUBIC climbs slowly: 8th, 11th and 9th.
SERIES = {
    "fused": [ramp(4, 19.0), ramp(3, 19.0), ramp(5, 19.0)],
    "bbr": [ramp(2, 17.0), [2.0] * 30, ramp(3, 17.0)],
    "cubic": [ramp(9, 18.0), ramp(12, 18.0), ramp(10, 18.0)],
}


class DemoSummaryTest(unittest.TestCase):
    def summary(self, goodput, series=SERIES, invalid=(), failed=()):
        recs = demo_runs(goodput, series)
        for r in recs:
            if (r.scheme, r.rep) in invalid:
                r.invalid = "link delivered 84.0 % of its set rate (CUBIC probe 16.07 Mbit/s), under 90 %"
            if (r.scheme, r.rep) in failed:
                r.error = "polycc-portus exited at start (101)"
        sc = scenario.load(scenario.find("demo"))
        return demo.summarize(sc.demo, "base", recs), recs

    def test_ratio_every_rep_and_time_to_80_percent(self):
        s, _ = self.summary({"fused": [18.0, 17.0, 18.5], "bbr": [10.0, 12.0, 9.0], "cubic": [17.5, 17.2, 18.0]})
        self.assertEqual(s.best_member, "cubic")  # median 17.5 beats BBR's 10
        self.assertAlmostEqual(s.ratio, 18.0 / 17.5)
        self.assertEqual([round(x, 4) for x in s.rep_ratios.values()], [1.0286, 0.9884, 1.0278])
        self.assertTrue(s.every_rep)
        f, b, c = (s.schemes[n] for n in ("fused", "bbr", "cubic"))
        self.assertEqual(f.ramp_s, {0: 4.0, 1: 3.0, 2: 5.0})  # rep 1: 19 x 3/4 = 14.25 < 16 <= 19 at 4 s
        self.assertEqual(f.median_ramp_s, 4.0)
        self.assertEqual(b.ramp_s, {0: 2.0, 1: None, 2: 3.0})
        self.assertEqual(b.median_ramp_s, 3.0)  # never counts as the latest
        self.assertEqual(c.ramp_s, {0: 8.0, 1: 11.0, 2: 9.0})
        self.assertEqual(c.median_ramp_s, 9.0)
        text = "\n".join(demo.format_summary(s))
        self.assertIn("fused >= 0.95 x best member on every rep: yes (3 of 3 reps judged;", text)
        bbr_line = next(line for line in text.splitlines() if line.startswith("bbr (kernel)"))
        self.assertTrue(bbr_line.endswith("    301   [2, never, 3] -> 3"), bbr_line)  # median retransmits 301

    def test_one_rep_under_the_bar_is_a_no(self):
        s, _ = self.summary({"fused": [18.0, 16.0, 18.5], "bbr": [10.0, 12.0, 9.0], "cubic": [17.5, 17.2, 18.0]})
        self.assertAlmostEqual(s.rep_ratios[1], 16.0 / 17.2)  # 0.930 < 0.95
        self.assertFalse(s.every_rep)
        text = "\n".join(demo.format_summary(s))
        self.assertIn("fused >= 0.95 x best member on every rep: no (3 of 3 reps judged;", text)
        self.assertIn("rep 2 0.930", text)
        self.assertIn("fused / best member (cubic (kernel), median 17.50 Mbit/s): 1.029", text)

    def test_an_invalid_run_is_left_out_of_medians_and_pairs(self):
        s, _ = self.summary(
            {"fused": [18.0, 17.0, 18.5], "bbr": [10.0, 12.0, 9.0], "cubic": [17.5, 17.2, 30.0]},
            invalid={("cubic", 2)},
        )
        self.assertEqual(s.schemes["cubic"].goodput, {0: 17.5, 1: 17.2})
        self.assertAlmostEqual(s.schemes["cubic"].median_mbps, 17.35)
        self.assertEqual(sorted(s.rep_ratios), [0, 1])  # rep 3 has no CUBIC run to pair with
        self.assertTrue(s.every_rep)
        text = "\n".join(demo.format_summary(s))
        self.assertIn("(2 of 3 reps judged;", text)
        cubic_line = next(line for line in text.splitlines() if line.startswith("cubic (kernel)"))
        self.assertIn("   17.50   17.20 invalid    17.35", cubic_line)
        self.assertIn("cubic rep 3: link delivered 84.0 %", text)

    def test_a_failed_fused_run_is_not_judged_and_says_failed(self):
        s, _ = self.summary(
            {"fused": [18.0, 17.0, 18.5], "bbr": [10.0, 12.0, 9.0], "cubic": [17.5, 17.2, 18.0]},
            failed={("fused", 0), ("fused", 1), ("fused", 2)},
        )
        self.assertIsNone(s.ratio)
        self.assertIsNone(s.every_rep)
        text = "\n".join(demo.format_summary(s))
        self.assertIn("fused >= 0.95 x best member on every rep: n/a (no repetition with both runs valid)", text)
        fused_line = next(line for line in text.splitlines() if line.startswith("fused "))
        self.assertIn("  failed  failed  failed        -", fused_line)

    def test_sparkline_of_the_median_series(self):
        self.assertEqual(demo.sparkline([0, 2.5, 5, 10, 17.5, 20, 25], 20.0), "▁▂▃▅███")
        self.assertEqual(demo.median_series([[1, 5, 9], [3, 4], [2, 6, 7]]), [2, 5])
        s, _ = self.summary({"fused": [18.0, 17.0, 18.5], "bbr": [10.0, 12.0, 9.0], "cubic": [17.5, 17.2, 18.0]})
        # fused's median over its three reps, second by second (rep 1's ramp sits between the others)
        self.assertEqual(s.schemes["fused"].series[:5], [4.75, 9.5, 14.25, 19.0, 19.0])
        self.assertEqual(len(s.schemes["fused"].series), 30)
        self.assertEqual(demo.sparkline(s.schemes["fused"].series[:5], LINK_MBIT), "▂▄▆██")

    def test_median_time_counts_never_as_late(self):
        self.assertEqual(demo.median_time([3.0, None, 5.0]), 5.0)
        self.assertIsNone(demo.median_time([3.0, None, None]))

    def test_report_has_the_summary_and_the_per_second_plot(self):
        sc = scenario.load(scenario.find("demo"))
        _, recs = self.summary({"fused": [18.0, 17.0, 18.5], "bbr": [10.0, 12.0, 9.0], "cubic": [17.5, 17.2, 18.0]})
        for r in recs:
            runs.finish(r, None, None)
        with tempfile.TemporaryDirectory() as d:
            path, _ = report.write_report(sc, recs, {}, Path(d), "vm", "experiments/run --backend vm demo", [])
            text = path.read_text()
            self.assertIn("## Demo summary: base", text)
            self.assertIn("fused >= 0.95 x best member on every rep: yes", text)
            self.assertGreater((Path(d) / "goodput-per-second-base.png").stat().st_size, 10_000)


if __name__ == "__main__":
    unittest.main()
