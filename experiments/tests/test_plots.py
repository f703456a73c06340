"""The report's plots, inspected as matplotlib figures built from synthetic runs (issue 20)."""

from __future__ import annotations

import unittest

import matplotlib.pyplot as plt
import numpy as np

from runner import report, runs, scenario


def run(sc, cell, scheme_name: str, rep: int, goodput: float = 10.0, p95_ms: float = 60.0) -> runs.RunRecord:
    """A run of `scheme_name` with a 10 s series (one flow, a sample every 0.1 s) and the metrics
    the throughput-delay plot reads."""
    scheme = next(s for s in sc.schemes if s.name == scheme_name)
    rec = runs.new_record(sc, "sim", cell, scheme, rep, rep)
    rec.duration_s = 10.0
    t = np.arange(0.05, 10.0, 0.1)
    rec.series = [(float(x), 0, goodput + rep, 50_000.0, 40.0 + rep, 60_000.0) for x in t]
    rec.metrics = {"goodput_mbps": goodput, "p95_delay_ms": p95_ms}
    return rec


class TputDelayTest(unittest.TestCase):
    def test_ellipses_of_high_variance_near_zero_stay_on_the_positive_axes(self):
        sc = scenario.load(scenario.find("polycc-s1"))
        cell = sc.cells()[0]
        # Goodputs 0.1-9 Mbit/s: the 1-sigma ellipse's throughput axis reaches about -2 Mbit/s.
        recs = [
            run(sc, cell, "bbr", rep, goodput=g, p95_ms=d)
            for rep, (g, d) in enumerate(((0.1, 40.0), (9.0, 45.0), (0.2, 300.0), (0.3, 50.0)))
        ]
        fig = report.tput_delay_figure(cell.key, {"bbr": recs})
        try:
            (ax,) = fig.axes
            self.assertGreaterEqual(min(ax.get_ylim()), 0.0)
            self.assertGreater(min(ax.get_xlim()), 0.0)  # a log axis: above zero
            for line in ax.get_lines():
                self.assertGreaterEqual(np.min(line.get_ydata()), 0.0, line.get_gid())
        finally:
            plt.close(fig)


class TimeSeriesTest(unittest.TestCase):
    def test_one_line_per_rep_per_scheme_and_a_median(self):
        sc = scenario.load(scenario.find("polycc-s1"))
        cell = sc.cells()[0]
        schemes = {name: [run(sc, cell, name, rep) for rep in range(3)] for name in ("fused", "bbr")}
        fig = report.timeseries_figure(cell.key, schemes)
        try:
            tput, inflight, rtt = fig.axes
            for ax in (tput, inflight, rtt):
                gids = [line.get_gid() for line in ax.get_lines()]
                for name in schemes:
                    for rep in range(3):
                        self.assertEqual(gids.count(f"{name} rep {rep}"), 1, (ax.get_ylabel(), gids))
            gids = [line.get_gid() for line in tput.get_lines()]
            for name in schemes:
                self.assertEqual(gids.count(f"{name} median"), 1)
            median = next(line for line in tput.get_lines() if line.get_gid() == "fused median")
            # Reps at 10, 11 and 12 Mbit/s: the median line is the middle one, drawn bold.
            self.assertAlmostEqual(float(np.median(median.get_ydata()[2:])), 11.0)
            rep0 = next(line for line in tput.get_lines() if line.get_gid() == "fused rep 0")
            self.assertGreater(median.get_linewidth(), rep0.get_linewidth())
            self.assertNotIn("first repetition", tput.get_title())
        finally:
            plt.close(fig)


if __name__ == "__main__":
    unittest.main()
