"""The runner's metrics on synthetic inputs whose answers are known."""

from __future__ import annotations

import math
import unittest

import numpy as np
from runner import metrics as m
from runner import runs


class JainTest(unittest.TestCase):
    def test_equal_shares_are_perfectly_fair(self):
        self.assertAlmostEqual(m.jain_index([5.0, 5.0, 5.0, 5.0]), 1.0)

    def test_one_flow_with_everything_is_one_over_n(self):
        self.assertAlmostEqual(m.jain_index([8.0, 0.0, 0.0, 0.0]), 0.25)

    def test_two_to_one_split(self):
        # (2 + 1)^2 / (2 (4 + 1)) = 9 / 10
        self.assertAlmostEqual(m.jain_index([2.0, 1.0]), 0.9)

    def test_no_flows_or_no_traffic_is_undefined(self):
        self.assertIsNone(m.jain_index([]))
        self.assertIsNone(m.jain_index([0.0, 0.0]))


class PercentileTest(unittest.TestCase):
    def test_p95_of_1_to_100(self):
        self.assertAlmostEqual(m.percentile(range(1, 101), 95), 95.05)

    def test_ignores_missing_values(self):
        self.assertAlmostEqual(m.percentile([None, 10.0, float("nan"), 20.0], 50), 15.0)
        self.assertIsNone(m.percentile([], 95))

    def test_median_spread(self):
        med, lo, hi, n = m.median_spread([1.0, 2.0, 3.0, 4.0, None])
        self.assertEqual((med, lo, hi, n), (2.5, 1.75, 3.25, 4))


def step_series(step_s: float, settle_s: float, end_s: float, dt: float = 0.1):
    """20 Mbit/s until the step, 15 until step + settle, then 10 +/- 0.4 (inside the 10 % band)."""
    t = np.arange(dt / 2, end_s, dt)
    v = np.where(t < step_s, 20.0, np.where(t < step_s + settle_s, 15.0, 10.0 + 0.4 * np.sin(7 * t)))
    return t, v


class ConvergenceTest(unittest.TestCase):
    def test_throughput_settles_three_seconds_after_the_step(self):
        t, v = step_series(5.0, 3.0, 20.0)
        self.assertAlmostEqual(m.convergence_time(t, v, 5.0, 10.0, 20.0), 3.0)

    def test_a_blip_shorter_than_the_hold_time_does_not_count(self):
        t, v = step_series(5.0, 3.0, 20.0)
        v = v.copy()
        v[(t > 9.0) & (t < 9.5)] = 5.0  # 1 s after settling: out of band for one bin
        self.assertAlmostEqual(m.convergence_time(t, v, 5.0, 10.0, 20.0), 4.5)

    def test_never_within_band(self):
        t = np.arange(0.05, 20, 0.1)
        self.assertIsNone(m.convergence_time(t, np.full(t.size, 12.0), 5.0, 10.0, 20.0))

    def test_queue_convergence_when_rtt_drops_below_two_base_rtts(self):
        t = np.arange(0.05, 20, 0.1)
        rtt = np.where(t < 9.0, 300.0, 150.0)
        self.assertAlmostEqual(m.queue_convergence_time(t, rtt, 5.0, 100.0, 20.0), 4.0)

    def test_total_throughput_sums_flows_per_bin(self):
        rows = [(0.05 + 0.1 * i, f, 5.0, 0, 50.0, 0) for i in range(100) for f in (0, 1)]
        _, total = runs.total_throughput(rows, 0.5, 10.0)
        self.assertEqual(len(total), 20)
        self.assertTrue(np.allclose(total, 10.0))

    def test_time_averaged_capacity(self):
        # 20 Mbit/s for 5 s, then 10 for 15 s: (100 + 150) / 20
        self.assertAlmostEqual(runs.capacity_mbps(20.0, [(5.0, 10.0)], 20.0), 12.5)


class PerRttTest(unittest.TestCase):
    def test_constant_flow(self):
        t = np.arange(0.01, 10, 0.02)
        tput, qd = m.per_rtt(t, np.full(t.size, 10.0), np.full(t.size, 140.0), 100.0, 2.0, 10.0)
        self.assertEqual(tput.size, 80)  # 8 s of 100 ms bins
        self.assertTrue(np.allclose(tput, 10.0))
        self.assertTrue(np.allclose(qd, 40.0))

    def test_uneven_samples_weigh_by_their_interval(self):
        # One 100 ms bin: 90 ms at 10 Mbit/s in three samples, then ~10 ms at 100 Mbit/s (a late sample's
        # burst): 0.9 + 0.99 Mbit in 0.0999 s, about 18.9 Mbit/s, not the plain mean 32.5.
        tput, _ = m.per_rtt([0.03, 0.06, 0.09, 0.0999], [10.0, 10.0, 10.0, 100.0], [50.0] * 4, 100.0, 0.0, 0.1)
        self.assertEqual(tput.size, 1)
        self.assertAlmostEqual(tput[0], (0.9 + 0.0099 * 100) / 0.0999)

    def test_pct_diff(self):
        self.assertAlmostEqual(m.pct_diff(10.5, 10.0), 5.0)
        self.assertIsNone(m.pct_diff(1.0, 0.0))


class EllipseTest(unittest.TestCase):
    def test_axis_aligned_cross(self):
        # log10 delays 10^0.5, 10^1.5 (at 10 Mbit/s) and 10^1 (at 8 and 12 Mbit/s):
        # var(log delay) = 0.5 / 3, var(throughput) = 8 / 3, no covariance.
        delays = [10**0.5, 10**1.5, 10.0, 10.0]
        tputs = [10.0, 10.0, 8.0, 12.0]
        e = m.sigma_ellipse(delays, tputs)
        self.assertAlmostEqual(e.center_log_delay, 1.0)
        self.assertAlmostEqual(e.center_tput, 10.0)
        self.assertAlmostEqual(e.width, 2 * math.sqrt(8 / 3))
        self.assertAlmostEqual(e.height, 2 * math.sqrt(0.5 / 3))
        self.assertAlmostEqual(abs(e.angle_deg) % 180, 90.0)

    def test_correlated_points_tilt_the_ellipse(self):
        delays = [10.0, 100.0, 1000.0]
        tputs = [1.0, 2.0, 3.0]  # log delay and throughput rise together, slope 1
        e = m.sigma_ellipse(delays, tputs)
        self.assertAlmostEqual(e.angle_deg % 180, 45.0)
        self.assertAlmostEqual(e.height, 0.0, places=6)
        self.assertAlmostEqual(e.width, 2 * math.sqrt(2.0))  # var 1 on each axis, along the diagonal: 2

    def test_one_point_has_no_ellipse(self):
        self.assertIsNone(m.sigma_ellipse([10.0], [1.0]))



class TimeToRateTest(unittest.TestCase):
    # 100 ms samples of cumulative bytes: 1 MB/s for 1 s, then 3 MB/s.
    POINTS = [(0.1 * k, 1e5 * k if k <= 10 else 1e6 + 3e5 * (k - 10)) for k in range(41)]

    def test_the_window_must_reach_the_rate(self):
        # Over [0.9, 1.4] s: 0.1 MB at 1 MB/s + 1.2 MB at 3 MB/s = 2.6 MB/s; [0.8, 1.3] s gives 2.2.
        self.assertAlmostEqual(m.time_to_rate(self.POINTS, 2.4e6, 0.5), 1.4)
        self.assertIsNone(m.time_to_rate(self.POINTS, 3.1e6, 0.5))

    def test_origin_shifts_the_answer_and_a_short_window_does_not_count(self):
        self.assertAlmostEqual(m.time_to_rate(self.POINTS, 2.4e6, 0.5, origin=-0.7), 2.1)
        # Two samples 0.1 s apart never make a 0.5 s window.
        self.assertIsNone(m.time_to_rate([(0.0, 0.0), (0.1, 1e9)], 1.0, 0.5))

if __name__ == "__main__":
    unittest.main()
