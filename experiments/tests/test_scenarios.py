"""Scenario files: the shipped ones load; bad ones are rejected with the file and field named."""

from __future__ import annotations

import contextlib
import io
import tempfile
import textwrap
import unittest
from pathlib import Path

from runner import cli, scenario

GOOD = """
name = "t"
duration_s = 10
[link]
bandwidth_mbps = 20
rtt_ms = 100
[sweep]
rtt_dev_ms = [0, 70]
[[scheme]]
name = "fused"
agent = ["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic"]
[[scheme]]
name = "bbr"
kernel = "bbr"
[[target]]
metric = "goodput_mbps"
scheme = "fused"
baseline = "bbr"
op = ">="
value = 1.8
where = { rtt_dev_ms = [70] }
"""


def load_text(text: str) -> scenario.Scenario:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "bad.toml"
        p.write_text(textwrap.dedent(text))
        return scenario.load(p)


class ShippedScenariosTest(unittest.TestCase):
    def test_every_shipped_scenario_loads_with_its_quick_variant(self):
        names = sorted(p.stem for p in scenario.SCENARIO_DIR.glob("*.toml"))
        for required in (
            "polycc-s1",
            "polycc-s2",
            "pcc-loss",
            "pcc-shallow",
            "pcc-changing",
            "mocc-objectives",
            "mocc-fairness",
            "fidelity",
            "overhead",
        ):
            self.assertIn(required, names)
        for n in names:
            sc = scenario.load(scenario.find(n))
            q = sc.quick_variant()
            self.assertLessEqual(
                q.duration_s * q.repetitions * len(q.cells()), sc.duration_s * sc.repetitions * len(sc.cells()), n
            )

    def test_s1_sweeps_five_deviations_and_three_schemes(self):
        sc = scenario.load(scenario.find("polycc-s1"))
        self.assertEqual([dict(c.params)["rtt_dev_ms"] for c in sc.cells()], [0, 20, 40, 70, 100])
        self.assertEqual([s.name for s in sc.schemes], ["fused", "bbr", "cubic"])
        self.assertEqual(sc.cells()[3].link.rtt_dev_ms, 70)

    def test_overhead_cells_are_flow_counts(self):
        sc = scenario.load(scenario.find("overhead"))
        self.assertEqual([dict(c.params)["flows"] for c in sc.cells()], [1, 2, 4, 8, 16, 32, 64])

    def test_buffer_in_bytes(self):
        sc = load_text(GOOD)
        self.assertEqual(sc.link.buffer_in_bytes(), 250_000)  # 1 BDP of 20 Mbit/s x 100 ms


class BadScenarioTest(unittest.TestCase):
    def assertRejected(self, text: str, *fragments: str):
        with self.assertRaises(scenario.ScenarioError) as cm:
            load_text(text)
        msg = str(cm.exception)
        self.assertTrue(msg.startswith("bad.toml: "), msg)
        for f in fragments:
            self.assertIn(f, msg)

    def test_good_one_loads(self):
        sc = load_text(GOOD)
        self.assertEqual(len(sc.cells()), 2)
        self.assertEqual(sc.targets[0].where, {"rtt_dev_ms": (70.0,)})

    def test_unknown_link_field(self):
        self.assertRejected(
            GOOD.replace("bandwidth_mbps = 20", "bandwith_mbps = 20"), "link.bandwith_mbps", "unknown field"
        )

    def test_unknown_kernel_baseline(self):
        self.assertRejected(GOOD.replace('kernel = "bbr"', 'kernel = "vegas"'), "scheme[1].kernel", "bbr, cubic, reno")

    def test_scheme_with_both_agent_and_kernel(self):
        self.assertRejected(
            GOOD.replace('kernel = "bbr"', 'kernel = "bbr"\nagent = ["--alg", "bbr"]'), "scheme[1]", "exactly one"
        )

    def test_kernel_pacing_cap_paces_a_kernel_scheme_at_most_at_its_rate_in_the_guest_only(self):
        from runner import runs, sim_backend, vm_backend

        sc = load_text(GOOD.replace('kernel = "bbr"', 'kernel = "bbr"\nkernel_pacing_cap_mbps = 25'))
        bbr = sc.schemes[1]
        self.assertEqual((bbr.kernel_paced, bbr.kernel_pacing_cap_mbps), (True, 25.0))
        self.assertEqual(bbr.label("vm"), "bbr (kernel, paced at most 25 Mbit/s)")
        cell = sc.cells()[0]
        plan = vm_backend.plan_run(sc, cell, bbr, runs.new_record(sc, "vm", cell, bbr, 0, 1))
        self.assertEqual((plan["kernel"], plan["kernel_pacing_cap_mbps"]), ("bbr", 25.0))
        # The simulator refuses it before running anything (it has no model of the kernel's pacing).
        self.assertIn("--backend vm", sim_backend.SimBackend.unsupported(None, bbr))
        for bad in ("0", "-3", '"25mbit"', "true"):
            self.assertRejected(GOOD.replace('kernel = "bbr"', f'kernel = "bbr"\nkernel_pacing_cap_mbps = {bad}'),
                                "scheme[1].kernel_pacing_cap_mbps", "Mbit/s above 0")
        self.assertRejected(
            GOOD.replace('"--copilot", "cubic"]', '"--copilot", "cubic"]\nkernel_pacing_cap_mbps = 25'),
            "scheme[0].kernel_pacing_cap_mbps", "only for kernel schemes")

    def test_kernel_paced_is_a_kernel_schemes_switch_and_reaches_the_guest_plan(self):
        from runner import runs, vm_backend

        sc = load_text(GOOD.replace('kernel = "bbr"', 'kernel = "bbr"\nkernel_paced = true'))
        bbr = sc.schemes[1]
        self.assertTrue(bbr.kernel_paced)
        self.assertEqual(bbr.label("vm"), "bbr (kernel, paced)")
        self.assertEqual(bbr.label("sim"), "bbr (sim model of kernel, unpaced)")  # the simulator does not pace it
        cell = sc.cells()[0]
        plan = vm_backend.plan_run(sc, cell, bbr, runs.new_record(sc, "vm", cell, bbr, 0, 1))
        self.assertEqual((plan["kernel"], plan.get("kernel_paced")), ("bbr", True))
        unpaced = load_text(GOOD)
        plan = vm_backend.plan_run(
            unpaced, cell, unpaced.schemes[1], runs.new_record(unpaced, "vm", cell, unpaced.schemes[1], 0, 1)
        )
        self.assertNotIn("kernel_paced", plan)
        self.assertRejected(
            GOOD.replace('kernel = "bbr"', 'kernel = "bbr"\nkernel_paced = "yes"'), "scheme[1].kernel_paced", "true or false"
        )
        self.assertRejected(
            GOOD.replace('"--copilot", "cubic"]', '"--copilot", "cubic"]\nkernel_paced = true'),
            "scheme[0].kernel_paced",
            "only for kernel schemes",
        )

    def test_a_kernel_scheme_says_when_it_is_the_simulators_model(self):
        """Issue 20: simulated BBR was labelled 'bbr (kernel)'."""
        from runner import runs

        sc = load_text(GOOD)
        fused, bbr = sc.schemes
        self.assertEqual((bbr.label("vm"), bbr.label("sim")), ("bbr (kernel)", "bbr (sim model of kernel)"))
        self.assertEqual((fused.label("vm"), fused.label("sim")), ("fused", "fused"))
        cell = sc.cells()[0]
        self.assertEqual(runs.new_record(sc, "sim", cell, bbr, 0, 1).scheme_label, "bbr (sim model of kernel)")
        self.assertEqual(runs.new_record(sc, "vm", cell, bbr, 0, 1).scheme_label, "bbr (kernel)")

    def test_agent_flags_the_runner_sets(self):
        self.assertRejected(
            GOOD.replace('"--copilot", "cubic"]', '"--copilot", "cubic", "--log-json", "x"]'),
            "scheme[0].agent",
            "--log-json",
        )

    def test_wrong_types_and_ranges(self):
        self.assertRejected(GOOD.replace("duration_s = 10", 'duration_s = "10"'), "duration_s", "a number")
        self.assertRejected(GOOD.replace("rtt_ms = 100", "rtt_ms = -5"), "link.rtt_ms", "> 0")
        self.assertRejected(GOOD.replace("[0, 70]", "[0, 170]"), "sweep.rtt_dev_ms", "at most link.rtt_ms")
        self.assertRejected(GOOD + "\n[flows]\ncount = 3\nstagger_s = 6\n", "flows.stagger_s", "after the run ends")

    def test_target_naming_a_missing_scheme_or_metric(self):
        self.assertRejected(GOOD.replace('baseline = "bbr"', 'baseline = "cubic"'), "target[0].baseline", "cubic")
        self.assertRejected(GOOD.replace('baseline = "bbr"', 'baseline = ["bbr", "cubic"]'), "target[0].baseline", "cubic")
        self.assertRejected(GOOD.replace('baseline = "bbr"', 'baseline = []'), "target[0].baseline", "a list of them")
        self.assertRejected(GOOD.replace('baseline = "bbr"', 'baseline = 3'), "target[0].baseline", "got 3")
        self.assertRejected(GOOD.replace('metric = "goodput_mbps"', 'metric = "goodput"'), "target[0].metric")
        self.assertRejected(GOOD.replace("where = { rtt_dev_ms", "where = { loss_frac"), "target[0].where.loss_frac")
        every = 'value = 1.8\nevery_rep = {}'
        # Every target is judged on every rep (issue 20): `every_rep = true` from older files is
        # accepted, and asking for the median is refused.
        for v in ("false", '"yes"'):
            self.assertRejected(GOOD.replace("value = 1.8", every.format(v)), "target[0].every_rep", "every repetition")
        pooled = GOOD.replace('metric = "goodput_mbps"', 'metric = "qdelay_p95_ms"').replace("value = 1.8", every.format("true"))
        self.assertEqual(load_text(pooled).targets[0].metric, "qdelay_p95_ms")

    def test_no_schemes(self):
        self.assertRejected('name = "t"\n', "scheme", "no [[scheme]]")

    def test_invalid_toml(self):
        self.assertRejected("name = \n", "not valid TOML")

    def test_cli_exits_2_naming_the_field(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "bad.toml"
            p.write_text(
                GOOD.replace("buffer", "x").replace("rtt_ms = 100", "rtt_ms = 100\nbuffer_bdp = 1\nbuffer_packets = 5")
            )
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                rc = cli.main([str(p), "--out", d])
            self.assertEqual(rc, cli.EXIT_BAD_INPUT)
            self.assertIn("bad.toml: link.buffer_packets: give one of", err.getvalue())

    def test_cli_unknown_scenario_name(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(["no-such-scenario"])
        self.assertEqual(rc, cli.EXIT_BAD_INPUT)
        self.assertIn("known: ", err.getvalue())


COMPETING = GOOD + """
[competitor]
kernel = "cubic"
"""


class CompetitorTest(unittest.TestCase):
    assertRejected = BadScenarioTest.assertRejected

    def test_competitor_table_defaults_to_a_start_at_zero(self):
        sc = load_text(COMPETING)
        self.assertEqual(sc.competitor, scenario.Competitor("cubic", 0.0))
        self.assertEqual(sc.competitor.label("vm"), "cubic (kernel)")
        self.assertEqual(sc.competitor.label("sim"), "cubic (sim model of kernel)")
        self.assertEqual(load_text(COMPETING + "start_s = 2.5\n").competitor.start_s, 2.5)
        self.assertIsNone(load_text(GOOD).competitor)
        self.assertEqual(sc.quick_variant().competitor, sc.competitor)

    def test_competitor_errors_name_the_field(self):
        self.assertRejected(COMPETING.replace('kernel = "cubic"\n', 'kernel = "vegas"\n'), "competitor.kernel", "'vegas'", "bbr, cubic, reno")
        self.assertRejected(GOOD + "[competitor]\nstart_s = 1\n", "competitor.kernel", "missing")
        self.assertRejected(COMPETING + "start = 1\n", "competitor.start", "unknown field", "kernel, start_s")
        self.assertRejected(COMPETING + "start_s = -1\n", "competitor.start_s", ">= 0")
        self.assertRejected(COMPETING + "start_s = 10\n", "competitor.start_s", "duration_s = 10")
        quick = COMPETING.replace("[competitor]", "[quick]\nduration_s = 4\n[competitor]") + "start_s = 5\n"
        self.assertRejected(quick, "competitor.start_s", "quick.duration_s = 4")
        self.assertRejected(COMPETING.replace('name = "t"', 'name = "t"\nkind = "fidelity"'), "competitor", "throughput")
        self.assertRejected(GOOD + '[competitor]\nkernel = ["cubic"]\n', "competitor.kernel")

    def test_share_targets_need_a_competitor_and_or_value_a_baseline(self):
        share = COMPETING.replace('metric = "goodput_mbps"', 'metric = "share"')
        self.assertEqual(load_text(share).targets[0].metric, "share")
        self.assertRejected(share.replace('[competitor]\nkernel = "cubic"', ""), "target[0].metric", "needs a [competitor]")
        with_or = share.replace("value = 1.8", "value = 1\nor_value = 0.6")
        t = load_text(with_or).targets[0]
        self.assertEqual(t.or_value, 0.6)
        self.assertEqual(t.describe(), "share(fused) / share(bbr) >= 1 or share(fused) >= 0.6 on every rep where rtt_dev_ms in [70]")
        self.assertRejected(with_or.replace('baseline = "bbr"\n', ""), "target[0].or_value", "only with a baseline")
        self.assertRejected(with_or.replace('op = ">="', 'op = "within"'), "target[0].or_value", "op >= or <=")
        self.assertRejected(with_or.replace("or_value = 0.6", 'or_value = "0.6"'), "target[0].or_value", "a number")

    def test_the_guest_plan_carries_the_competitor_and_a_port_for_it(self):
        from runner import guest, runs, vm_backend

        sc = load_text(COMPETING + "start_s = 2\n[flows]\ncount = 2\nstagger_s = 3\n")
        cell = sc.cells()[0]
        plan = vm_backend.plan_run(sc, cell, sc.schemes[0], runs.new_record(sc, "vm", cell, sc.schemes[0], 0, 1))
        self.assertEqual(plan["competitor"], {"kernel": "cubic", "start_s": 2.0})
        self.assertEqual(vm_backend.flow_ports(plan), 3)  # two flows and the competitor: three iperf3 servers
        # Launch order: flow 0 at 0 s (ccp: an agent scheme), the competitor (flow id 2, port 5203) at 2 s,
        # flow 1 at 3 s.
        self.assertEqual(guest.flow_starts(plan), [(0, 0.0, "ccp", False), (2, 2.0, "cubic", True), (1, 3.0, "ccp", False)])
        bbr = vm_backend.plan_run(sc, cell, sc.schemes[1], runs.new_record(sc, "vm", cell, sc.schemes[1], 0, 1))
        self.assertEqual([x[2] for x in guest.flow_starts(bbr)], ["bbr", "cubic", "bbr"])
        plain = load_text(GOOD)
        plan = vm_backend.plan_run(plain, cell, plain.schemes[0], runs.new_record(plain, "vm", cell, plain.schemes[0], 0, 1))
        self.assertNotIn("competitor", plan)
        self.assertEqual(vm_backend.flow_ports(plan), 1)
        self.assertEqual(guest.flow_starts(plan), [(0, 0.0, "ccp", False)])

    def test_a_bpf_datapath_scheme_runs_polycc_bpf_in_the_612_guest(self):
        """Issue 17: every agent scheme through the BPF datapath in the guest, per scheme or --datapath bpf."""
        from runner import guest, runs, vm_backend

        text = GOOD.replace('name = "fused"\n', 'name = "fused"\ndatapath = "bpf"\n')
        sc = load_text(text)
        fused, bbr = sc.schemes
        self.assertEqual((fused.datapath, fused.label("vm"), fused.label("sim"), bbr.label("vm")),
                         ("bpf", "fused (bpf)", "fused", "bbr (kernel)"))
        cell = sc.cells()[0]
        plan = vm_backend.plan_run(sc, cell, fused, runs.new_record(sc, "vm", cell, fused, 0, 1))
        self.assertEqual((plan["datapath"], guest.flow_starts(plan)), ("bpf", [(0, 0.0, "polycc_bpf", False)]))
        kernel = vm_backend.plan_run(sc, cell, bbr, runs.new_record(sc, "vm", cell, bbr, 0, 1))
        self.assertNotIn("datapath", kernel)
        self.assertEqual(vm_backend.VmBackend.guest_env([kernel]), {})
        guest_env = vm_backend.VmBackend.guest_env([plan, kernel])
        self.assertEqual((guest_env["POLYCC_VM_KERNEL"], guest_env["POLYCC_VM_TCG_THREAD"]), ("6.12", "single"))
        self.assertRejected(GOOD.replace('kernel = "bbr"\n', 'kernel = "bbr"\ndatapath = "bpf"\n'),
                            "scheme[1].datapath", "only for agent schemes")
        self.assertRejected(text.replace('datapath = "bpf"', 'datapath = "ebpf"'), "scheme[0].datapath", "'ebpf'")
        # --datapath bpf: every agent scheme, and only with the guest.
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "t.toml"
            p.write_text(GOOD)
            a = cli.parse_args([str(p), "--backend", "vm", "--datapath", "bpf"])
            self.assertEqual([s.datapath for s in cli.load_scenarios(a)[0].schemes], ["bpf", "ccp"])
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(cli.main([str(p), "--datapath", "bpf", "--out", d]), cli.EXIT_BAD_INPUT)
            self.assertIn("--datapath chooses the guest's datapath: it needs --backend vm", err.getvalue())

    def test_the_simulator_gets_the_competitor_flags(self):
        from runner import sim_backend

        self.assertEqual(
            sim_backend.competitor_flags(load_text(COMPETING + "start_s = 2.5\n")),
            ["--competitor", "cubic", "--competitor-start", "2.5s"],
        )
        self.assertEqual(sim_backend.competitor_flags(load_text(GOOD)), [])

    def test_shipped_fusion_share_scenario(self):
        sc = scenario.load(scenario.find("fusion-share"))
        self.assertEqual(sc.competitor, scenario.Competitor("cubic", 0.0))
        self.assertEqual([dict(c.params)["rtt_dev_ms"] for c in sc.cells()], [0, 20, 70, 100])
        self.assertEqual((sc.duration_s, sc.repetitions, sc.link.bandwidth_mbps, sc.link.rtt_ms), (60, 3, 20, 100))
        q = sc.quick_variant()
        self.assertEqual([dict(c.params)["rtt_dev_ms"] for c in q.cells()], [0, 70])
        self.assertEqual((q.duration_s, q.repetitions), (30, 1))
        self.assertEqual([s.name for s in sc.schemes], ["fused", "bbr"])
        (t,) = sc.targets
        self.assertEqual(t.describe(), "share(fused) / share(bbr) <= 1 or share(fused) <= 0.6 on every rep")
        self.assertIn("Issue 21's row", sc.description)

    def test_duration_override_before_the_competitor_starts_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "bad.toml"
            p.write_text(COMPETING + "start_s = 5\n")
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                rc = cli.main([str(p), "--duration", "4", "--out", d])
            self.assertEqual(rc, cli.EXIT_BAD_INPUT)
            self.assertIn("bad.toml: competitor.start_s: 5 s is not before the run's end (--duration 4)", err.getvalue())

    def test_duration_override_before_a_bandwidth_change_or_a_flow_start_is_refused(self):
        """Issue 20: `--duration` shorter than a step or a stagger let every run fail at the backend."""
        step = GOOD.replace("rtt_ms = 100\n", "rtt_ms = 100\nbw_changes = [{ at_s = 5, bandwidth_mbps = 10 }]\n")
        stagger = GOOD + "[flows]\ncount = 3\nstagger_s = 3\n"
        for text, duration, needle in [
            (step, "5", "bad.toml: link.bw_changes[0].at_s: 5 s is not before the run's end (--duration 5)"),
            (stagger, "6", "bad.toml: flows.stagger_s: the last flow starts at 6 s, not before the run's end (--duration 6)"),
        ]:
            with tempfile.TemporaryDirectory() as d:
                p = Path(d) / "bad.toml"
                p.write_text(text)
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    rc = cli.main([str(p), "--full", "--duration", duration, "--out", d])
                self.assertEqual(rc, cli.EXIT_BAD_INPUT, err.getvalue())
                self.assertIn(needle, err.getvalue())


if __name__ == "__main__":
    unittest.main()
