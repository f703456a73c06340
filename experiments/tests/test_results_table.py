"""experiments/results_table.py and the benchmarks that write through it: a table file is checked
when written and read, and the round-trip bench's lines become the table docs/bpf-datapath.md shows."""
import json
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
sys.path.insert(0, str(ROOT / "datapath" / "bpf"))
import results_table  # noqa: E402
import loopback_table  # noqa: E402
import roundtrip_table  # noqa: E402

BENCH = [
    '{"datapath":"unix","round_trips":100000,"p50_us":6.0,"p95_us":6.3,"p99_us":7.8,"unanswered_2s":0}',
    "warning: some cargo noise",
    '{"datapath":"bpf","busy_poll_us":200,"seconds":17.2,"agent":{"round_trips":122653,"p50_us":5.298,'
    '"p95_us":49.379,"p99_us":76.223,"reports":122766,"fallbacks":0}}',
]


class ResultsTableTest(unittest.TestCase):
    def test_the_round_trip_bench_becomes_a_table_judged_against_the_bar(self):
        rows = roundtrip_table.rows(BENCH)
        self.assertEqual(rows[0], ["unix socket (baseline)", "100,000", "6.0 µs", "6.3 µs", "7.8 µs", "yes"])
        self.assertEqual(rows[1][0], "BPF ring buffer + map write, `--bpf-busy-poll-us 200`")
        self.assertEqual(rows[1][3:], ["49.4 µs", "76.2 µs", "no"])
        with self.assertRaises(SystemExit):
            roundtrip_table.rows(["nothing from the bench"])

    def test_the_loopback_bench_becomes_medians_with_their_rounds(self):
        text = [
            "rep 0                      cubic (in-kernel):  30.61 Gbit/s",
            "rep 1                      cubic (in-kernel):  29.98 Gbit/s",
            "rep 0    polycc_bpf cubic, min report 200 us:  26.15 Gbit/s",
            "rep 1    polycc_bpf cubic, min report 200 us:  30.15 Gbit/s",
            "median                      cubic (in-kernel):  30.29 Gbit/s = 1.00 x in-kernel CUBIC",
            "median    polycc_bpf cubic, min report 200 us:  28.15 Gbit/s = 0.93 x in-kernel CUBIC",
        ]
        self.assertEqual(loopback_table.rows(text), [
            ["cubic (in-kernel)", "30.3", "1.00", "30.61, 29.98"],
            ["polycc_bpf cubic, min report 200 us", "28.1", "0.93", "26.15, 30.15"],
        ])
        with self.assertRaises(SystemExit):
            loopback_table.rows(["skipped: not root"])

    def test_a_table_is_written_with_its_command_date_and_commit_and_checked(self):
        with tempfile.TemporaryDirectory() as d:
            path = results_table.write(Path(d) / "t.json", ["a", "b"], [[1, 2.5]], command="bench --x")
            doc = results_table.check(json.loads(path.read_text()))
            self.assertEqual((doc["command"], doc["rows"]), ("bench --x", [["1", "2.5"]]))
            self.assertRegex(doc["run_utc"], r"^\d{4}-\d\d-\d\d \d\d:\d\d$")
            self.assertEqual(results_table.markdown(doc)[:3], ["| a | b |", "|---|---|", "| 1 | 2.5 |"])
            with self.assertRaisesRegex(results_table.TableError, "one per column"):
                results_table.write(Path(d) / "bad.json", ["a", "b"], [[1]])
            with self.assertRaisesRegex(results_table.TableError, "`commit`"):
                results_table.check({"command": "x", "run_utc": "y", "columns": [], "rows": []})


if __name__ == "__main__":
    unittest.main()
