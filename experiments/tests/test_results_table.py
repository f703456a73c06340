"""experiments/results_table.py and the benchmarks that write through it: a table file is checked
when written and read, and the round-trip bench's lines become the table docs/bpf-datapath.md shows."""
import json
import sys
import tempfile
import unittest
import unittest.mock
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
    '{"datapath":"bpf","busy_poll_us":200,"agent_cpu":1,"seconds":17.0,"agent":{"round_trips":120000,'
    '"p50_us":4.1,"p95_us":12.25,"p99_us":40.0,"reports":120100,"fallbacks":0}}',
    '{"datapath":"bpf","busy_poll_us":2000,"agent_cpu":null,"agent_cores":0.992,"seconds":17.0,'
    '"agent":{"round_trips":120000,"p50_us":2.5,"p95_us":4.1,"p99_us":8.0,"reports":120100,"fallbacks":0}}',
]


class ResultsTableTest(unittest.TestCase):
    def test_the_round_trip_bench_becomes_a_table_judged_against_the_bar(self):
        rows = roundtrip_table.rows(BENCH)
        self.assertEqual(rows[0], ["unix socket (baseline)", "100,000", "6.0 µs", "6.3 µs", "7.8 µs", "yes", "-"])
        self.assertEqual(rows[1][0], "BPF ring buffer + map write, `--bpf-busy-poll-us 200`")
        self.assertEqual(rows[1][3:], ["49.4 µs", "76.2 µs", "no", "-"])
        self.assertEqual(rows[2][0], "BPF ring buffer + map write, `--bpf-busy-poll-us 200` `--cpu 1`, flows on the other CPUs")
        self.assertEqual(rows[2][3:], ["12.2 µs", "40.0 µs", "yes", "-"])
        # With the agent's CPU over the run, in cores: busy polling costs one.
        self.assertEqual(rows[3][0], "BPF ring buffer + map write, `--bpf-busy-poll-us 2000`")
        self.assertEqual(rows[3][3:], ["4.1 µs", "8.0 µs", "yes", "0.99"])
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


class PrintedRowsTest(unittest.TestCase):
    """Tests and benchmarks print their table's rows (`results-table NAME ORDER<TAB>cells`);
    experiments/tables.py runs them and keeps what they printed."""

    def test_rows_are_collected_in_their_order_whatever_else_the_command_printed(self):
        out = ["   Compiling polycc-sim", "test a ... results-table pcc 2\tb\t2.0", "results-table pcc 1\ta\t1.0",
               "results-table pccx 1\tnot\tthis", "results-table other 1\tnor\tthis"]
        self.assertEqual(results_table.rows(out, "pcc", 2), [["a", "1.0"], ["b", "2.0"]])

    def test_a_wrong_row_is_an_error_that_names_it(self):
        with self.assertRaisesRegex(ValueError, "row 1 has 1 cells, the table 2 columns"):
            results_table.rows(["results-table t 1\tonly"], "t", 2)
        with self.assertRaisesRegex(ValueError, "two rows numbered 1"):
            results_table.rows(["results-table t 1\ta\tb", "results-table t 1\tc\td"], "t", 2)
        with self.assertRaisesRegex(ValueError, "no row printed"):
            results_table.rows(["test result: ok"], "t", 2)
        with self.assertRaisesRegex(ValueError, "not a number"):
            results_table.rows(["results-table t x\ta\tb"], "t", 2)

    def test_tables_runs_the_command_and_keeps_what_it_printed(self):
        import tables
        fake = {"t": tables.Table("printf 'noise\\nresults-table t 2\\tb\\t20\\nresults-table t 1\\ta\\t10\\n'",
                                  ("name", "value"), "docs/x.md"),
                "bad": tables.Table("echo results-table bad 1; exit 3", ("a",), "docs/x.md"),
                "missed": tables.Table("echo 'results-table missed 1\tNO'; exit 1", ("met",), "docs/x.md", (0, 1))}
        with tempfile.TemporaryDirectory() as d, unittest.mock.patch.dict(tables.TABLES, fake, clear=True):
            [kept] = tables.make(["t"], Path(d))
            doc = json.loads((kept / "table.json").read_text())
            self.assertEqual(doc["rows"], [["a", "10"], ["b", "20"]])
            self.assertEqual(doc["command"], fake["t"].command)
            with self.assertRaisesRegex(Exception, "exited 3: no table kept"):
                tables.make(["bad"], Path(d))
            # A target tool that exits 1 on a missed target still measured its table.
            self.assertEqual(len(tables.make(["missed"], Path(d))), 1)

    def test_every_registered_table_is_kept_and_shown_on_its_page(self):
        import tables
        for name, t in tables.TABLES.items():
            self.assertTrue((ROOT / "docs" / "results" / name / "table.json").is_file(), f"{name}: not kept")
            self.assertIn(f"<!-- results: {name} json -->", (ROOT / t.page).read_text(), f"{name}: not on {t.page}")
