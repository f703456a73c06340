"""docs/metrics.md's vocabulary: the checker itself, and every JSON (and series CSV) the simulator and
the runner write, produced here on small runs. The Rust outputs (`polycc flows`/`stats --json`,
`--log-json`, polycc-tune's) are checked by the Rust tests `*_names_carry_their_units` with the same
vocabulary (`polycc_control::vocabulary`)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
import tempfile
import unittest
from pathlib import Path

from runner import cli, runs
from runner.sim_backend import DEFAULT_SIM

from tests.vocabulary import Vocabulary, documented, header_violations, violations

TINY = """
name = "vocabulary"
duration_s = 4
repetitions = 1
[link]
bandwidth_mbps = 10
rtt_ms = 20
bw_changes = [{ at_s = 2, bandwidth_mbps = 5 }]
[flows]
count = 2
[competitor]
kernel = "cubic"
[[scheme]]
name = "fused"
agent = ["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--fusion", "max"]
[[scheme]]
name = "bbr"
kernel = "bbr"
[[target]]
metric = "loss_frac"
scheme = "fused"
op = "<="
value = 0.5
"""


class CheckerTest(unittest.TestCase):
    def test_the_documented_vocabulary_has_every_part(self):
        v = documented()
        self.assertIn("_mbps", v.suffixes)
        self.assertIn("_frac", v.suffixes)
        self.assertIn("jain_index", v.names)
        self.assertIn("flow", v.names)
        self.assertIn("_pct", v.forbidden)

    def test_units_named_quantities_and_non_numbers_pass(self):
        ok = {
            "goodput_mbps": 9.5, "rtt_min_us": None, "loss_frac": 0.02, "jain_index": 0.9, "flow": 3,
            "policy": "vivace", "converged": True, "per_rtt": {"throughput_mbps": [1.0, 2.0]},
            "ratios": {"8": {"cpu_ratio": 1.2}}, "modules": {"/lib/ccp.ko": {"fallback_entries_count": 0}},
        }
        self.assertEqual(violations(ok, Vocabulary(["_mbps", "_us", "_frac", "_ratio", "_count"], ["jain_index", "flow"], ["_pct"])), [])
        self.assertEqual(violations(ok | {"modules": {}}), [])

    def test_a_map_keyed_by_data_takes_its_keys_unit(self):
        self.assertEqual(violations({"fusion_win_frac": {"bbr": 0.75, "cubic": 0.25}}), [])
        v = violations({"fusion_win_frac": {"bbr": 75.0}, "wins": {"bbr": 3}})
        self.assertEqual(len(v), 2, v)
        self.assertTrue(v[0].startswith(".fusion_win_frac.bbr:") and "not a fraction" in v[0], v)
        self.assertTrue(v[1].startswith(".wins.bbr:") and "no unit suffix" in v[1], v)

    def test_a_bare_name_a_percentage_a_fraction_over_one_and_mbit_fail(self):
        bad = {"goodput": 1.0, "flows": [{"loss_pct": 2.0}], "x": {"loss_frac": 2.0}, "bw_mbit": 20, "ok": True}
        v = violations(bad)
        self.assertEqual(len(v), 4, v)
        self.assertTrue(any(e.startswith(".goodput:") and "no unit" in e for e in v), v)
        self.assertTrue(any(e.startswith(".flows[].loss_pct:") and "_pct" in e for e in v), v)
        self.assertTrue(any(e.startswith(".x.loss_frac:") and "percentage" in e for e in v), v)
        self.assertTrue(any(e.startswith(".bw_mbit:") for e in v), v)
        self.assertEqual(header_violations(["time_s", "throughput_mbit", "rtt"]),
                         ["column throughput_mbit: `throughput_mbit` ends in `_mbit`, which JSON never uses (docs/metrics.md)",
                          "column rtt: `rtt` has no unit suffix and is not a named quantity, count or identifier (docs/metrics.md)"])


@unittest.skipUnless(DEFAULT_SIM.exists(), f"{DEFAULT_SIM} not built (cargo build --release -p polycc-sim)")
class OutputsTest(unittest.TestCase):
    def test_polycc_sim_json_and_series_name_their_units(self):
        with tempfile.TemporaryDirectory() as d:
            series = Path(d) / "s.csv"
            r = subprocess.run([str(DEFAULT_SIM), "--alg", "vivace", "--flows", "2", "--competitor", "cubic",
                                "--bw-change", "2s:10mbit", "--loss", "0.01", "--duration", "4s", "--json",
                                "--series", str(series)], capture_output=True, text=True, check=True)
            summary = json.loads(r.stdout)
            header = series.read_text().splitlines()[0].split(",")
        self.assertIn("loss_frac", summary)
        self.assertIn("sent_packets", summary["flows"][0])
        self.assertEqual(violations(summary), [], summary)
        self.assertEqual(header_violations(header), [], header)

    def test_every_json_the_runner_writes_names_its_units(self):
        with tempfile.TemporaryDirectory() as d:
            scenario = Path(d) / "vocabulary.toml"
            scenario.write_text(TINY)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                rc = cli.main([str(scenario), "--full", "--out", str(Path(d) / "results"), "--no-progress"])
            self.assertEqual(rc, 0)
            folder = next((Path(d) / "results" / "vocabulary").iterdir())
            written = sorted(folder.rglob("*.json"))
            self.assertGreaterEqual(len(written), 3, written)  # config.json and a run per scheme
            for path in written:
                doc = json.loads(path.read_text())
                with self.subTest(path.name):
                    self.assertEqual(violations(doc), [], path.name)
            run = json.loads(next(folder.glob("runs/*fused*.json")).read_text())
            self.assertIn("loss_frac", run["metrics"])
            self.assertIn("per_rtt", run["extra"])
            for path in folder.rglob("*.csv"):
                with open(path) as f:
                    header = next(csv.reader(f))
                self.assertEqual(header_violations(header), [], path.name)
            self.assert_old_names_read(next(folder.glob("runs/*fused*.json")))

    def test_sock_diag_samples_name_their_units(self):
        """diag.py's rows (the guest runner's `ss` samples, startup.py's timelines), parsed from a
        kernel message built as the kernel sends it."""
        import socket

        from runner import diag
        from tests.test_vm_parse import diag_msg

        row = diag.parse_msg(diag_msg(40000, 5201, "10.77.0.2", 120_500, 50, 123_456), socket.inet_aton("10.77.0.2"))
        self.assertEqual(violations(dict(row, t_s=0.1)), [])
        self.assertEqual(row["acked_bytes"], 123_456)

    def assert_old_names_read(self, path: Path):
        """A run written before docs/metrics.md's names (`goodput_mbit`, `loss`) loads as the same record."""
        new = json.loads(path.read_text())
        old = {"goodput_mbit" if k == "goodput_mbps" else "capacity_mbit" if k == "capacity_mbps" else
               "loss" if k == "loss_frac" else k: v for k, v in new.items()}
        old["flows"] = [{k.replace("_mbps", "_mbit"): v for k, v in f.items()} for f in new["flows"]]
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / path.name).write_text(json.dumps(old))
            (Path(d) / path.with_suffix(".csv").name).write_text(path.with_suffix(".csv").read_text())
            again = runs.load_run(Path(d) / path.name)
        self.assertEqual(again.to_json(), runs.load_run(path).to_json())
        self.assertTrue(again.series)


if __name__ == "__main__":
    unittest.main()
