"""experiments/run's driver: plan the runs, run them on a backend, write the report (the flags:
runner/args.py).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from . import report
from . import runs as runs_mod
from . import scenario as scen
from .progress import Progress
from .runs import RunRecord
from .scenario import Scenario, ScenarioError

from .args import EXIT_BACKEND, EXIT_BAD_INPUT, EXIT_RUNS_FAILED, EXIT_TARGETS, ROOT, parse_args  # noqa: F401


def load_scenarios(a: argparse.Namespace) -> list[Scenario]:
    out = []
    for name in a.scenarios:
        sc = scen.load(scen.find(name))
        if not a.full:
            if a.cell:
                sc.only_cells(a.cell)  # a name the file lacks, before "not in the quick subset"
                quick = {dict(c.params)["cell"] for c in sc.quick_variant().named_cells}
                for n in a.cell:
                    if n not in quick:
                        raise ScenarioError(f"{sc.path.name}: --cell {n}: not in the [quick] subset "
                                            f"({', '.join(sorted(quick))}); add --full to run it")
            sc = sc.quick_variant()
        if a.cell:
            sc = sc.only_cells(a.cell)
        if a.reps:
            sc = replace(sc, repetitions=a.reps)
        if a.duration:
            sc = replace(sc, duration_s=a.duration)
        if a.datapath:
            if a.backend != "vm":
                raise ScenarioError("--datapath chooses the guest's datapath: it needs --backend vm")
            sc = replace(sc, schemes=tuple(replace(s, datapath=a.datapath) if s.agent else s for s in sc.schemes))
        length = (
            f"--duration {sc.duration_s:g}" if a.duration
            else f"duration_s = {sc.duration_s:g}" if a.full
            else f"quick mode's {sc.duration_s:g} s; --full runs the scenario's length"
        )
        for field, why in sc.timing_problems():
            raise ScenarioError(f"{sc.path.name}: {field}: {why} ({length})")
        out.append(sc)
    return out


def make_backend(a: argparse.Namespace):
    if a.backend == "sim":
        from .sim_backend import DEFAULT_SIM, SimBackend

        return SimBackend(a.sim or DEFAULT_SIM)
    from .vm_backend import VmBackend

    return VmBackend()


def git_commit() -> str | None:
    r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or None


def git_dirty() -> bool:
    """Tracked files differ from the commit: the binaries may hold code no commit has yet."""
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True)
    return bool(r.stdout.strip())


def check_schemes(sc: Scenario, backend) -> None:
    """Ask the backend's binary whether it runs each scheme; a name it does not know (`--pilot
    bbbr`) or a flag it does not have is a mistake in the file, refused before anything runs with
    the binary's message, which lists the accepted names (one source: the algorithm registry)."""
    for i, s in enumerate(sc.schemes):
        why = backend.unsupported(s)
        if why is not None:
            field_path = f"scheme[{i}].agent" if s.agent else f"scheme[{i}].kernel"
            raise ScenarioError(f"{sc.path.name}: {field_path} ({s.name}): {why}")


def plan(sc: Scenario, backend) -> list[tuple]:
    """Every run of the scenario as (cell, scheme, record): cells, then repetitions, then schemes."""
    check_schemes(sc, backend)
    work = []
    for cell in sc.cells():
        for rep in range(sc.repetitions):
            for s in sc.schemes:
                rec = runs_mod.new_record(sc, backend.name, cell, s, rep, sc.seed + rep)
                work.append((cell, s, rec))
    return work


def prepare(a: argparse.Namespace, sc: Scenario, backend, stamp: str):
    """The scenario's runs and its results folder; None when the backend cannot run it."""
    if a.backend == "sim" and sc.kind == "overhead":
        print(
            f"experiments/run: {sc.name}: CPU overhead is measured on the kernel path only "
            "(--backend vm); skipped on the simulator",
            file=sys.stderr,
        )
        return None
    work = plan(sc, backend)
    out = a.out / sc.name / f"{stamp}-{a.backend}"
    return sc, work, out


def finish_record(rec: RunRecord, sc: Scenario, cell) -> RunRecord:
    link = cell.link
    draws = [c for c in rec.extra.get("changes_applied", []) if "rtt_ms" in c]
    if draws:  # the guest's random redraws: utilization against what was drawn
        rec.capacity_mbps = runs_mod.capacity_mbps(
            link.bandwidth_mbps, [(c["at_s"], c["bandwidth_mbps"]) for c in draws], rec.duration_s
        )
    if not link.bw_changes:
        return runs_mod.finish(rec, None, None)
    step_s, mbit = link.bw_changes[-1].at_s, link.bw_changes[-1].bandwidth_mbps
    applied = [c for c in rec.extra.get("changes_applied", []) if "scheduled_s" in c and "rtt_ms" not in c]
    if applied:  # the guest's measured step time (tc starts late under TCG)
        step_s = applied[-1]["at_s"]
    return runs_mod.finish(rec, step_s, mbit)


def main(argv: list[str] | None = None) -> int:
    try:
        a = parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if a.in_guest:
        from .guest import main as guest_main

        return guest_main(a.in_guest)
    if a.report:
        return rereport(a.report)
    if a.list:
        for p in sorted(scen.SCENARIO_DIR.glob("*.toml")):
            try:
                sc = scen.load(p)
                print(f"{sc.name:18s} {sc.kind:10s} {sc.description.strip().splitlines()[0] if sc.description else ''}")
            except ScenarioError as e:
                print(f"{p.stem:18s} INVALID: {e}")
        return 0
    try:
        scenarios = load_scenarios(a)
    except ScenarioError as e:
        print(f"experiments/run: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        backend = make_backend(a)
    except Exception as e:  # SimError / VmError: a missing binary
        print(f"experiments/run: {e}", file=sys.stderr)
        if a.check:
            print("experiments/run: the schemes' algorithms and flags were not checked", file=sys.stderr)
        return EXIT_BACKEND
    if a.check:
        for sc in scenarios:
            try:
                check_schemes(sc, backend)
            except ScenarioError as e:
                print(f"experiments/run: {e}", file=sys.stderr)
                return EXIT_BAD_INPUT
            n = len(sc.cells()) * len(sc.schemes) * sc.repetitions
            print(
                f"{sc.path.name}: ok ({len(sc.cells())} cells x {len(sc.schemes)} schemes x {sc.repetitions} reps = {n} runs)"
            )
        return 0
    stamp = time.strftime("%Y%m%d-%H%M%S")
    # The commit the runs start from: a guest run lasts hours, and commits made meanwhile did not
    # build the binaries it runs (config.json named such a later commit until 2026-11-26).
    commit, dirty = git_commit(), git_dirty()
    command = "experiments/run " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]))
    jobs = []
    try:
        for sc in scenarios:
            jobs.append(prepare(a, sc, backend, stamp))
    except ScenarioError as e:
        print(f"experiments/run: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    jobs = [j for j in jobs if j is not None]
    for _, _, out in jobs:
        (out / "runs").mkdir(parents=True, exist_ok=True)
    progress = Progress({sc.name: [sc.duration_s] * len(work) for sc, work, _ in jobs}, disable=a.no_progress)
    notes: dict[str, list[str]] = {sc.name: [] for sc, *_ in jobs}
    if a.backend == "sim":
        for sc, work, out in jobs:
            run_sim(sc, work, backend, out, progress)
    else:
        rc = run_vm(a, jobs, backend, progress, notes, stamp)
        if rc is not None:
            progress.close()
            return rc
    progress.close()
    any_failed, any_missed = False, False
    for sc, work, out in jobs:
        recs = [rec for _, _, rec in work]
        (out / "config.json").write_text(
            json.dumps(
                {
                    "scenario": sc.name,
                    "file": str(sc.path),
                    "backend": a.backend,
                    "full": a.full,
                    "command": command,
                    "commit": commit,
                    "dirty": dirty,
                    "duration_s": sc.duration_s,
                    "repetitions": sc.repetitions,
                    "cells": [c.key for c in sc.cells()],
                    "schemes": [s.name for s in sc.schemes],
                    "notes": notes[sc.name],
                    "scenario_toml": sc.path.read_text(),
                },
                indent=1,
            )
        )
        path, targets = report.write_report(sc, recs, {}, out, a.backend, command, notes[sc.name])
        if sc.kind == "matrix":
            write_matrix(a, sc, recs, out, path)
        failed = [r for r in recs if r.error]
        any_failed |= bool(failed)
        if sc.demo:
            print_demo(sc, recs, out)
        invalid = sum(1 for r in recs if r.invalid)
        print(
            f"\n{sc.name}: {len(recs) - len(failed)}/{len(recs)} runs"
            + (f" ({invalid} invalid: the link fell short of its rate; left out)" if invalid else "")
            + f" -> {path}"
        )
        for tr in targets:
            any_missed |= tr.met is not True  # --require-targets: an inconclusive target is not met either
            print(target_line(tr))
        for r in failed[:5]:
            print(f"  run {r.run_id} failed: {r.error}")
    print("\n".join(where_written([(sc.name, out) for sc, _, out in jobs])))
    if any_failed:
        return EXIT_RUNS_FAILED
    if any_missed and a.require_targets:
        return EXIT_TARGETS
    return 0


def where_written(folders: list[tuple[str, Path]]) -> list[str]:
    """The run's last lines: each scenario's report and plots, so a long run ends saying where its
    results went (issue 20)."""
    lines = ["", "Results written to:"]
    for name, out in folders:
        lines.append(f"  {name}: {out / 'report.md'}")
        plots = sorted(p.name for p in out.glob("*.png"))
        if plots:
            lines.append(f"    plots in {out}/: {', '.join(plots)}")
    return lines


def target_line(tr: report.TargetResult) -> str:
    """One target's verdict on the terminal: met, NOT MET, inconclusive (too few or disagreeing
    reps: the note says which) or n/a (not evaluated)."""
    status = {"yes": "met", "**no**": "NOT MET", "-": "n/a"}.get(report.verdict(tr), report.verdict(tr))
    return f"  target {tr.target.describe()} [{tr.cell}]: {report.fmt(tr.value, 3)} {status} {tr.note}"


def run_sim(sc: Scenario, work: list[tuple], backend, out: Path, progress: Progress | None = None) -> list[RunRecord]:
    """Run `work` (plan()'s list) on the simulator backend into `out`."""
    if progress is not None:
        progress.start(sc.name)
    for cell, s, rec in work:
        try:
            backend.run(sc, cell, s, rec, out)
            finish_record(rec, sc, cell)
        except Exception as e:
            rec.error = f"{type(e).__name__}: {e}"
        runs_mod.write_run(rec, out / "runs")
        if progress is not None:
            progress.step(sc.name, f"{cell.key} {s.name}")
    return [rec for _, _, rec in work]


def write_matrix(a: argparse.Namespace, sc: Scenario, recs: list[RunRecord], out: Path, report_path: Path) -> None:
    """A matrix scenario: on the vm backend, the same cells, schemes and repetitions on the
    simulator now (into out/sim/), and again at each cell's measured guest pacing (into
    out/sim-guest-paced/, when the guest runs carry pacing probes), then the per-cell tables and
    the heat maps (runner/matrix.py)."""
    from .sim_backend import DEFAULT_SIM, SimBackend, guest_pacing

    guest = None
    sim = recs
    sim_paced, pacing = None, None
    if a.backend == "vm":
        guest = recs
        sim_backend = SimBackend(a.sim or DEFAULT_SIM)
        work = plan(sc, sim_backend)
        (out / "sim" / "runs").mkdir(parents=True, exist_ok=True)
        sim = run_sim(sc, work, sim_backend, out / "sim")
        pacing = guest_pacing(recs) or None
        if pacing:
            paced_backend = SimBackend(a.sim or DEFAULT_SIM, pacing_efficiency=pacing)
            (out / "sim-guest-paced" / "runs").mkdir(parents=True, exist_ok=True)
            sim_paced = run_sim(sc, plan(sc, paced_backend), paced_backend, out / "sim-guest-paced")
    lines = matrix_lines(sc, a.backend, guest, sim, out, sim_paced, pacing)
    with report_path.open("a") as f:
        f.write("\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


def matrix_lines(sc: Scenario, backend: str, guest: list[RunRecord] | None, sim: list[RunRecord],
                 out: Path | None, sim_paced: list[RunRecord] | None = None,
                 pacing: dict[str, float] | None = None) -> list[str]:
    """The matrix section of report.md: per-cell tables, and the heat maps when `out` is given;
    `sim_paced` and `pacing`: the simulator's runs at the guest's pacing and that pacing per cell."""
    from . import matrix

    table = matrix.rows([c.key for c in sc.cells()], [(s.name, s.label(backend)) for s in sc.schemes], guest, sim,
                        sim_paced)
    links = {c.key: report.describe_link(c.link) for c in sc.cells()}
    lines = matrix.section(table, links, guest is not None, pacing if sim_paced else None)
    if guest is not None and out is not None:
        png = matrix.heatmap(table, out / "matrix-heatmap.png")
        lines += [f"![guest / simulator]({png.name})", ""]
        if sim_paced:
            png = matrix.heatmap(table, out / "matrix-heatmap-guest-paced.png", paced=True)
            lines += [f"![guest / simulator at the guest's pacing]({png.name})", ""]
    return lines


def print_demo(sc: Scenario, recs: list[RunRecord], out: Path) -> None:
    """The demo's summary on the terminal: per cell, the numbers, sparklines, the guest's fidelity, the plot."""
    from . import demo

    for cell, schemes in report.by_cell(recs).items():
        runs = [r for rs in schemes.values() for r in rs]
        print(f"\n## {sc.name}, {cell}: {report.link_text(sc)}; {sc.repetitions} x {sc.duration_s:g} s per scheme\n")
        print("\n".join(demo.format_summary(demo.summarize(sc.demo, cell, runs))))
        if any("fidelity" in r.extra or "guest" in r.extra for r in runs):
            print("\nguest fidelity:")
            print("\n".join(report.guest_fidelity_lines(runs)))
        plot = out / f"goodput-per-second-{report._safe(cell)}.png"
        if plot.exists():
            print(f"\nper-second goodput plot: {plot}")


@dataclass
class Folder:
    """A results folder read back: its scenario (as run), runs, and for a matrix on the vm backend
    the simulator's runs of the same cells (sim/runs) and, where it ran, those at the guest's
    pacing (sim-guest-paced/runs)."""

    sc: Scenario
    config: dict
    recs: list[RunRecord]
    sim: list[RunRecord] | None
    sim_paced: list[RunRecord] | None = None


def _load_runs(runs_dir: Path, sc: Scenario) -> list[RunRecord]:
    cells = {c.key: c for c in sc.cells()} | {c.key: c for c in sc.quick_variant().cells()}
    recs = []
    for p in runs_dir.glob("*.json"):
        rec = runs_mod.load_run(p)
        if not rec.error and rec.cell in cells:
            finish_record(rec, sc, cells[rec.cell])
        recs.append(rec)
    # The order of the original run: cells as the scenario sweeps them, then repetitions, then schemes.
    cell_order = {k: i for i, k in enumerate(cells)}
    scheme_order = {s.name: i for i, s in enumerate(sc.schemes)}
    recs.sort(key=lambda r: (cell_order.get(r.cell, len(cell_order)), r.rep, scheme_order.get(r.scheme, 0)))
    return recs


def load_folder(folder: Path) -> Folder:
    """Recompute a results folder's metrics from its runs (JSON + series CSV). Raises ScenarioError,
    or OSError/KeyError/ValueError when `folder` is not one experiments/run wrote."""
    config = json.loads((folder / "config.json").read_text())
    text = runs_mod.renamed_scenario(config["scenario_toml"])  # written before docs/metrics.md's names?
    sc = scen.parse(__import__("tomllib").loads(text), Path(config["file"]))
    sc = replace(sc, duration_s=config["duration_s"], repetitions=config["repetitions"])
    if sc.named_cells and config.get("cells"):  # a quick run's subset, or a piece run with --cell
        sc = replace(sc, named_cells=tuple(c for c in sc.named_cells if c.key in config["cells"]))
    sim = sim_paced = None
    if sc.kind == "matrix" and config["backend"] == "vm" and (folder / "sim" / "runs").is_dir():
        sim = _load_runs(folder / "sim" / "runs", sc)
        if (folder / "sim-guest-paced" / "runs").is_dir():
            sim_paced = _load_runs(folder / "sim-guest-paced" / "runs", sc)
    return Folder(sc, config, _load_runs(folder / "runs", sc), sim, sim_paced)


def folder_report(f: Folder, out: Path, plots: bool = True) -> tuple[Path, list]:
    """Write `out`/report.md for a loaded folder, as the run wrote it (with its matrix section)."""
    path, targets = report.write_report(f.sc, f.recs, f.config.get("skipped", {}), out, f.config["backend"],
                                        f.config["command"], list(f.config.get("notes", [])), plots=plots)
    if f.sc.kind == "matrix":
        guest = f.recs if f.config["backend"] == "vm" else None
        sim = f.sim if guest is not None else f.recs
        if sim is not None:
            from .sim_backend import guest_pacing

            pacing = guest_pacing(guest) if guest and f.sim_paced else None
            lines = matrix_lines(f.sc, f.config["backend"], guest, sim, out if plots else None, f.sim_paced, pacing)
            with path.open("a") as fh:
                fh.write("\n" + "\n".join(lines) + "\n")
    return path, targets


def rereport(folder: Path) -> int:
    """`--report FOLDER`: recompute a results folder's metrics from its runs and rewrite its report."""
    try:
        f = load_folder(folder)
    except (OSError, KeyError, ValueError) as e:
        print(f"experiments/run: {folder}: not a results folder ({e})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ScenarioError as e:
        print(f"experiments/run: {folder}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    path, targets = folder_report(f, folder)
    print(f"{f.sc.name}: {len(f.recs)} runs -> {path}")
    for tr in targets:
        print(target_line(tr))
    return 0


def run_vm(a, jobs, backend, progress: Progress, notes, stamp) -> int | None:
    from . import vm_backend as vm

    planned, index = [], {}
    for sc, work, out in jobs:
        for cell, s, rec in work:
            d = vm.plan_run(sc, cell, s, rec)
            d["id"] = f"{sc.name}__{rec.run_id}"
            index[d["id"]] = (sc, cell, rec, out)
            planned.append(d)
    ipc = a.ipc_messages
    if ipc is None:
        ipc = 100_000 if a.full else 20_000
    if not any(sc.kind == "overhead" for sc, *_ in jobs):
        ipc = 0
    guest_dir = a.out / f"vm-{stamp}"
    guest_dir.mkdir(parents=True, exist_ok=True)
    if ipc:
        progress.add("ipc-bench", 60.0)
    if jobs:
        progress.start(jobs[0][0].name)

    def seen(run_id: str) -> None:  # the guest's ids: SCENARIO__RUN, and ipc-bench
        name, _, what = run_id.partition("__")
        progress.step(name, what[:50])

    vm.wait_for_guest_lock()
    rc, loads = backend.run_all(
        planned,
        guest_dir,
        seen,
        ipc_messages=ipc or None,
        one_cpu=not a.guest_all_cpus,
        agent_cpu=a.agent_cpu,
        link_probe=not a.no_link_probe,
        retry_budget_s=a.retry_budget,
    )
    raw_dir = guest_dir / "raw"
    missing = 0
    for run_id, (sc, cell, rec, out) in index.items():
        p = raw_dir / f"{run_id}.json"
        if not p.exists():
            rec.error = f"no result from the guest (guest exit {rc}; logs in {guest_dir})"
            missing += 1
        else:
            vm.parse_raw(json.loads(p.read_text()), rec)
            if not rec.error:
                finish_record(rec, sc, cell)
        rec.extra["host_load"] = {  # 1-minute load averages: at the boot, as the run's file appeared, at the end
            "start": loads["start"][0],
            "run": loads.get(run_id, [None])[0],
            "end": loads["end"][0],
        }
        runs_mod.write_run(rec, out / "runs")
    reruns = rerun_notes(raw_dir / "invalid")
    ipc_path = raw_dir / "ipc-bench.json"
    kernels = sorted({rec.extra["guest_kernel"] for _, _, rec, _ in index.values() if "guest_kernel" in rec.extra})
    for sc, work, out in jobs:
        notes[sc.name].append(
            f"Guest run folder (plan, raw measurements, agent logs): `{guest_dir}`; guest exit {rc}"
            + (f"; guest kernel {', '.join(kernels)}" if kernels else "")
            + ("." if a.guest_all_cpus else "; every process of the runs pinned to vCPU 0"
               + (", the agent to vCPU 1." if a.agent_cpu == 1 else " (the agent too)."))
        )
        notes[sc.name] += [n for run_id, n in reruns if run_id.startswith(f"{sc.name}__")]
        if sc.kind == "overhead" and ipc_path.exists():
            doc = json.loads(ipc_path.read_text())
            if "ipc_bench" in doc and work:
                work[0][2].extra["ipc_bench"] = doc["ipc_bench"]
                runs_mod.write_run(work[0][2], out / "runs")
    if missing == len(index) and index:
        print(f"experiments/run: the guest produced no results (exit {rc}); see {guest_dir}", file=sys.stderr)
        return EXIT_BACKEND
    return None


def rerun_notes(invalid_dir: Path) -> list[tuple[str, str]]:
    """(run id, note) for each run of an invalid attempt that the guest reran (raw/invalid/ID.attemptN.json)."""
    out = []
    for p in sorted(invalid_dir.glob("*.json")):
        run_id, _, attempt = p.stem.rpartition(".attempt")
        try:
            why = json.loads(p.read_text()).get("fidelity", {}).get("why", "?")
        except (OSError, ValueError):
            why = "?"
        out.append((run_id, f"Rerun: `{run_id}` attempt {attempt} was invalid ({why}); kept in `{p}`."))
    return out
