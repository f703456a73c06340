"""experiments/run's progress bars: the whole run's ETA (runner/progress.py)."""

from __future__ import annotations

import unittest

from runner.progress import Progress


class ProgressTest(unittest.TestCase):
    def test_the_whole_runs_eta_weighs_runs_by_their_planned_seconds(self):
        now = [0.0]
        p = Progress({"s1": [60.0, 60.0], "s2": [15.0] * 4}, disable=True, clock=lambda: now[0])
        self.assertEqual(p.overall(), "all: 0/6 runs, ETA ?")
        now[0] = 30.0  # one 60 s run took 30 s: 120 planned seconds left take 60 s
        p.step("s1", "base fused")
        self.assertEqual(p.overall(), "all: 1/6 runs, ETA 01:00")
        p.step("s1")
        p.step("s2")  # the next scenario's bar: 135 of the 180 planned seconds done
        now[0] = 75.0
        self.assertEqual(p.overall(), "all: 3/6 runs, ETA 00:25")  # 75 s for 135 planned: 45 left take 25 s
        p.close()


if __name__ == "__main__":
    unittest.main()
