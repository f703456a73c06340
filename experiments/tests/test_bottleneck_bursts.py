"""experiments/vm/bottleneck_bursts.py on tcpdump's text (no guest or capture needed)."""

from __future__ import annotations

import importlib.util
import unittest
from pathlib import Path

PATH = Path(__file__).resolve().parents[1] / "vm" / "bottleneck_bursts.py"
spec = importlib.util.spec_from_file_location("bottleneck_bursts", PATH)
bursts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bursts)

# As `tcpdump -r X -n -tt -S --time-stamp-precision=nano` prints a 64-byte capture.
DATA = ("1795919338.125891060 IP 10.77.0.1.54834 > 10.77.0.2.5201: Flags [.], seq 2097005579:2097007027, "
        "ack 892156370, win 502, options [nop,nop,TS [|tcp]>")
ACK = "1795919338.137928170 IP 10.77.0.2.5201 > 10.77.0.1.54834: Flags [.], ack 2097007027, win 509, options [nop,nop,TS [|tcp]>"


class BottleneckBursts(unittest.TestCase):
    def test_a_data_packets_size_is_its_sequence_range_and_an_ack_has_none(self):
        m = bursts.LINE.match(DATA)
        self.assertEqual((m[2], int(m[3]), int(m[7]) - int(m[6]), int(m[8])), ("10.77.0.1", 54834, 1448, 892156370))
        m = bursts.LINE.match(ACK)
        self.assertEqual((m[2], m[6], int(m[8])), ("10.77.0.2", None, 2097007027))

    def test_clumps_split_where_the_gap_is_at_least_the_threshold(self):
        t = [0.0, 10e-6, 20e-6, 1e-3, 1.01e-3, 5e-3]
        self.assertEqual(bursts.clumps(t, 60e-6), [3, 2, 1])
        self.assertEqual(bursts.clumps(t, 2e-3), [5, 1])

    def test_percentiles_are_order_statistics(self):
        xs = list(range(1, 101))
        self.assertEqual((bursts.pct(xs, 0.5), bursts.pct(xs, 0.9), bursts.pct(xs, 1.0)), (51, 91, 100))


if __name__ == "__main__":
    unittest.main()
