"""The kernel-parity matrix: named cells, the per-cell comparison, the heat map, and the simulator end to end."""

from __future__ import annotations

import contextlib
import io
import tempfile
import textwrap
import unittest
from pathlib import Path

from runner import cli, matrix, scenario
from runner.runs import RunRecord

CELLS = """
name = "m"
kind = "matrix"
duration_s = 8
[link]
bandwidth_mbps = 20
rtt_ms = 40
buffer_bdp = 1
[[cell]]
name = "base"
[[cell]]
name = "shallow"
bandwidth_mbps = 50
buffer_packets = 6
[[cell]]
name = "step"
bw_changes = [{ at_s = 3, bandwidth_mbps = 10 }]
[quick]
cells = ["shallow"]
[[scheme]]
name = "cubic"
agent = ["--alg", "cubic"]
[[scheme]]
name = "kernel-cubic"
kernel = "cubic"
[[target]]
metric = "utilization"
scheme = "cubic"
op = ">="
value = 0.5
where = { cell = ["base"] }
"""


def load_text(text: str) -> scenario.Scenario:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.toml"
        p.write_text(textwrap.dedent(text))
        return scenario.load(p)


def record(cell: str, scheme: str, util: float, rep: int = 0, retx: int | None = None, qd: float = 5.0) -> RunRecord:
    r = RunRecord("m", "vm", cell, {"cell": cell.split("=")[1]}, scheme, scheme, rep, None, 10, 20, 40)
    r.metrics = {"utilization": util, "qdelay_p95_ms": qd, "loss_frac": 0.01}
    if retx is not None:
        r.extra["retransmits"] = retx
    return r


class CellsTest(unittest.TestCase):
    def test_named_cells_override_the_base_link_and_the_quick_set_selects_some(self):
        sc = load_text(CELLS)
        cells = {c.key: c.link for c in sc.cells()}
        self.assertEqual(list(cells), ["cell=base", "cell=shallow", "cell=step"])
        self.assertEqual((cells["cell=base"].bandwidth_mbps, cells["cell=base"].buffer_bdp), (20, 1))
        shallow = cells["cell=shallow"]
        self.assertEqual((shallow.bandwidth_mbps, shallow.rtt_ms, shallow.buffer_packets, shallow.buffer_bdp),
                         (50, 40, 6, None), "the cell's buffer replaces the base's")
        self.assertEqual(cells["cell=step"].bw_changes[0].bandwidth_mbps, 10)
        self.assertEqual([c.key for c in sc.quick_variant().cells()], ["cell=shallow"])
        self.assertEqual(sc.targets[0].where, {"cell": ("base",)})

    def test_bad_cells_are_rejected_naming_the_cell_and_field(self):
        for extra, needle in (
            ('[[cell]]\nname = "base"', "cell[3].name: 'base' is used twice"),
            ('[[cell]]\nname = "bad"\nloss_frac = 2', "cell[3] (bad)"),
            ('[[cell]]\nname = "a b"', "cell[3].name"),
            ('[[cell]]\nname = "x"\nwarp = 1', "cell[3] (x)"),
            ('[sweep]\nrtt_ms = [10, 20]', "either [sweep] or [[cell]]"),
        ):
            text = CELLS.replace("[quick]", extra + "\n[quick]")
            with self.subTest(extra=extra), self.assertRaises(scenario.ScenarioError) as e:
                load_text(text)
            self.assertIn(needle, str(e.exception))
        with self.assertRaises(scenario.ScenarioError) as e:
            load_text(CELLS.replace('cells = ["shallow"]', 'cells = ["nope"]'))
        self.assertIn("quick.cells[0]: no [[cell]] named 'nope'", str(e.exception))

    def test_cell_runs_a_matrix_in_pieces_and_refuses_a_cell_it_lacks(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "m.toml"
            p.write_text(textwrap.dedent(CELLS))

            def load(*flags):
                return cli.load_scenarios(cli.parse_args([*flags, str(p)]))[0]

            self.assertEqual([c.key for c in load("--full", "--cell", "step", "--cell", "base").cells()],
                             ["cell=base", "cell=step"], "the file's order")
            self.assertEqual([c.key for c in load("--cell", "shallow").cells()], ["cell=shallow"])
            for flags, needle in ((["--full", "--cell", "nope"], "--cell nope: no such cell; cells: base, shallow, step"),
                                  (["--cell", "nope"], "--cell nope: no such cell"),
                                  (["--cell", "base"], "--cell base: not in the [quick] subset (shallow); add --full")):
                with self.subTest(flags=flags), self.assertRaises(scenario.ScenarioError) as e:
                    load(*flags)
                self.assertIn(needle, str(e.exception))
            with self.assertRaises(scenario.ScenarioError) as e:
                cli.load_scenarios(cli.parse_args(["--cell", "x", "polycc-s1"]))
            self.assertIn("--cell picks [[cell]] tables by name; this scenario has none", str(e.exception))

    def test_agent_cpu_is_refused_where_it_would_do_nothing(self):
        for argv in (["--agent-cpu", "1", "matrix"], ["--backend", "vm", "--guest-all-cpus", "--agent-cpu", "1", "matrix"]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(cli.main(argv), 2)
            self.assertIn("--agent-cpu places the agent beside runs pinned to vCPU 0", err.getvalue())
        self.assertEqual(cli.parse_args(["--backend", "vm", "--agent-cpu", "1", "matrix"]).agent_cpu, 1)

    def test_the_agent_gets_a_vcpu_of_its_own_unless_told_otherwise(self):
        self.assertEqual(cli.parse_args(["--backend", "vm", "matrix"]).agent_cpu, 1)
        self.assertEqual(cli.parse_args(["--backend", "vm", "--agent-cpu", "0", "matrix"]).agent_cpu, 0)
        self.assertIsNone(cli.parse_args(["--backend", "vm", "--guest-all-cpus", "matrix"]).agent_cpu)
        self.assertIsNone(cli.parse_args(["matrix"]).agent_cpu, "the simulator has no vCPUs")

    def test_the_shipped_matrix_has_the_issues_cells_and_schemes(self):
        sc = scenario.load(scenario.find("matrix"))
        self.assertEqual(len(sc.cells()), 7)
        self.assertGreaterEqual(sc.repetitions, 3)
        self.assertTrue(30 <= sc.duration_s <= 60)
        names = {s.name for s in sc.schemes}
        for n in ("reno", "cubic", "vegas", "bbr", "copa", "allegro", "vivace", "mocc-throughput", "mocc-latency",
                  "fused-bbr-cubic", "fused-bbr-copa", "fused-vivace-cubic", "kernel-reno", "kernel-cubic",
                  "kernel-bbr"):
            self.assertIn(n, names)
        self.assertEqual(len(sc.quick_variant().cells()), 4)


class RowsTest(unittest.TestCase):
    def test_guest_median_minimum_and_ratio_against_the_simulator(self):
        guest = [record("cell=a", "cubic", u, rep=i, retx=x) for i, (u, x) in enumerate([(0.9, 10), (0.6, 30), (0.8, 20)])]
        guest.append(record("cell=a", "cubic", 0.1, rep=3))
        guest[-1].invalid = "link delivered 80 %"  # left out
        sim = [record("cell=a", "cubic", u, rep=i) for i, u in enumerate([0.95, 1.0, 0.99])]
        t = matrix.rows(["cell=a"], [("cubic", "cubic")], guest, sim)
        r = t["cell=a"][0]
        self.assertEqual((r.guest_median, r.guest_min, r.guest_runs, r.sim, r.retransmits), (0.8, 0.6, 3, 0.99, 20))
        self.assertAlmostEqual(r.ratio, 0.8 / 0.99)
        lines = "\n".join(matrix.section(t, {"cell=a": "20 Mbit/s"}, with_guest=True))
        self.assertIn("| cubic | 0.800 | 0.600 | 3 | 0.990 | 0.81 | no | 5.0 | 20 |", lines)
        # Within the band is parity; a missing side has no ratio.
        t2 = matrix.rows(["cell=a"], [("cubic", "cubic"), ("bbr", "bbr")], [record("cell=a", "cubic", 0.92)], sim)
        self.assertIn("| cubic | 0.920 | 0.920 | 1 | 0.990 | 0.93 | yes |", "\n".join(matrix.section(t2, {}, True)))
        self.assertIsNone(t2["cell=a"][1].ratio)

    def test_the_heat_map_has_one_square_per_scheme_and_cell(self):
        import matplotlib.image as mpimg

        sim = [record(f"cell={c}", s, 1.0) for c in "ab" for s in ("x", "y", "z")]
        guest = [record(f"cell={c}", s, 0.5) for c in "ab" for s in ("x", "y")]
        t = matrix.rows(["cell=a", "cell=b"], [("x", "x"), ("y", "y"), ("z", "z")], guest, sim)
        with tempfile.TemporaryDirectory() as d:
            p = matrix.heatmap(t, Path(d) / "h.png")
            img = mpimg.imread(p)
        self.assertGreater(img.shape[0], 100)
        self.assertGreater(img.shape[1], 100)
        self.assertEqual([r.ratio for r in t["cell=b"]], [0.5, 0.5, None])


class GuestPacingTest(unittest.TestCase):
    def test_each_cell_gets_the_median_of_its_usable_pacing_probes(self):
        from runner.sim_backend import guest_pacing

        recs = []
        for i, w in enumerate([0.86, 0.90, 0.88]):
            recs.append(record("cell=a", "cubic", 0.8, rep=i))
            recs[-1].extra["pacing_probe"] = {"cap_mbps": 10.0, "wire_ratio": w}
        bad = record("cell=a", "cubic", 0.1, rep=3)
        bad.extra["pacing_probe"] = {"wire_ratio": 0.2}
        bad.invalid = "link delivered 80 %"  # left out, probe and all
        over = record("cell=b", "cubic", 0.9)
        over.extra["pacing_probe"] = {"wire_ratio": 1.013}  # the link's rounding: exact
        failed = record("cell=c", "cubic", 0.9)
        failed.extra["pacing_probe"] = {"cap_mbps": 10.0, "error": "iperf3 failed"}
        self.assertEqual(guest_pacing([*recs, bad, over, failed, record("cell=d", "cubic", 0.9)]),
                         {"cell=a": 0.88, "cell=b": 1.0})

    def test_the_simulator_at_the_guests_pacing_has_its_own_columns_and_heat_map(self):
        import matplotlib.image as mpimg

        guest = [record("cell=a", "x", 0.5), record("cell=a", "y", 0.9)]
        sim = [record("cell=a", "x", 1.0), record("cell=a", "y", 1.0)]
        paced = [record("cell=a", "x", 0.55), record("cell=a", "y", 0.95)]
        for r in paced:
            r.extra["pacing_efficiency"] = 0.87
        t = matrix.rows(["cell=a"], [("x", "x"), ("y", "y")], guest, sim, paced)
        self.assertAlmostEqual(t["cell=a"][0].ratio_paced, 0.5 / 0.55)
        lines = "\n".join(matrix.section(t, {}, True, {"cell=a": 0.87}))
        self.assertIn("Guest pacing (probe median): 0.870", lines)
        self.assertIn("| x | 0.500 | 0.500 | 1 | 1.000 | 0.50 | no | 0.550 | 0.91 |", lines)
        # Without a paced run the table is the plain one.
        self.assertNotIn("sim at guest pacing", "\n".join(matrix.section(t, {}, True)))
        with tempfile.TemporaryDirectory() as d:
            img = mpimg.imread(matrix.heatmap(t, Path(d) / "h.png", paced=True))
        self.assertGreater(img.shape[0], 100)

    def test_the_simulator_runs_a_cell_at_the_pacing_it_is_given(self):
        from runner.sim_backend import SimBackend

        sc = load_text(CELLS)
        cell = next(c for c in sc.cells() if c.key == "cell=base")
        cubic = next(s for s in sc.schemes if s.name == "kernel-cubic")

        def rec():
            r = record("cell=base", "kernel-cubic", 0)
            r.seed = 1
            return r

        with tempfile.TemporaryDirectory() as d:
            exact = SimBackend().run(sc, cell, cubic, rec(), Path(d))
            paced = SimBackend(pacing_efficiency={"cell=base": 0.8}).run(sc, cell, cubic, rec(), Path(d))
            other = SimBackend(pacing_efficiency={"cell=shallow": 0.8}).run(sc, cell, cubic, rec(), Path(d))
        self.assertEqual(paced.extra["command"][-2:], ["--pacing-efficiency", "0.8000"])
        self.assertEqual(paced.extra["pacing_efficiency"], 0.8)
        self.assertNotIn("--pacing-efficiency", exact.extra["command"] + other.extra["command"])


class GuestPacedTwinTest(unittest.TestCase):
    def test_a_vm_matrix_runs_the_simulator_again_at_each_cells_guest_pacing(self):
        import argparse
        import dataclasses
        import json

        from runner.sim_backend import SimBackend

        sc = dataclasses.replace(load_text(CELLS), repetitions=1)
        # The guest's runs: what the vm backend records, a pacing probe per run (0.8 in "base").
        guest = []
        for cell, s, rec in cli.plan(sc, SimBackend()):
            rec.backend = "vm"
            rec.metrics = {"utilization": 0.5, "qdelay_p95_ms": 5.0, "loss_frac": 0.0}
            if cell.key == "cell=base":
                rec.extra["pacing_probe"] = {"cap_mbps": 10.0, "wire_ratio": 0.8}
            guest.append(rec)
        with tempfile.TemporaryDirectory() as d:
            out = Path(d)
            report_path = out / "report.md"
            report_path.write_text("")
            a = argparse.Namespace(backend="vm", sim=None)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cli.write_matrix(a, sc, guest, out, report_path)
            report = report_path.read_text()
            paced = [json.loads(p.read_text()) for p in (out / "sim-guest-paced" / "runs").glob("*.json")]
            self.assertTrue((out / "matrix-heatmap-guest-paced.png").is_file())
        self.assertIn("Guest pacing (probe median): 0.800", report)
        self.assertIn("sim at guest pacing", report)
        # A cell without a probe shows no second figure (it ran exactly).
        step = report[report.index("### cell=step"):]
        row = next(line for line in step.splitlines() if line.startswith("| cubic |"))
        self.assertEqual(row.split("|")[8:10], [" - ", " - "], row)
        # Every cell ran again; only the probed one at the guest's pacing.
        by_cell = {}
        for p in paced:
            by_cell.setdefault(p["cell"], set()).add(p["extra"].get("pacing_efficiency"))
        self.assertEqual(by_cell, {"cell=base": {0.8}, "cell=shallow": {None}, "cell=step": {None}})


class SimEndToEndTest(unittest.TestCase):
    def test_the_matrix_runs_on_the_simulator_with_one_table_per_cell(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "m.toml"
            p.write_text(textwrap.dedent(CELLS))
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                rc = cli.main(["--full", "--no-progress", "--out", d, str(p)])
            self.assertEqual(rc, 0)
            report = next(Path(d).glob("m/*-sim/report.md")).read_text()
        # Every report names the command and the date its runs were made.
        self.assertRegex(report, r"Command: `experiments/run .*`, run \d{4}-\d{2}-\d{2} \d{2}:\d{2}")
        for cell in ("cell=base", "cell=shallow", "cell=step"):
            self.assertIn(f"### {cell}:", report)
        # Agent CUBIC on the 20 Mbit/s 40 ms cell uses the link, as the simulator's CUBIC does.
        row = next(line for line in report.splitlines() if line.startswith("| cubic |") and "0." in line)
        self.assertGreater(float(row.split("|")[2]), 0.8, row)


if __name__ == "__main__":
    unittest.main()
