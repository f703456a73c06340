"""experiments/run: scenarios on the simulator or the real kernel path, with a report and plots.

    experiments/run [--backend sim|vm] [--full] [--reps N] [--duration S] [--cell NAME]... [--out DIR] SCENARIO...
    experiments/run --list
    experiments/run --check SCENARIO...        # validate the files and the schemes' flags only

SCENARIO is a name under experiments/scenarios/ (polycc-s1) or a path to a TOML file. Without
--full each scenario's [quick] overrides apply (fewer cells, repetitions, seconds: `make
experiments`); --full runs the paper-length settings. Results go to OUT/<scenario>/<timestamp>-<backend>/
(OUT defaults to results/, which git ignores): runs/*.json and runs/*.csv per run, report.md, PNG
plots, config.json. The vm backend runs every selected scenario in one guest boot.

Exit status: 0 done (targets are reported, not enforced, unless --require-targets); 2 bad flags or
scenario file (the message names the file and field), or a scheme the backend's binary refuses (an
unknown algorithm, pilot, copilot or fusion name: the message lists the accepted ones); 3 backend
unavailable (binary missing, guest failed to boot); 4 some runs failed; 5 --require-targets and a
target was not met or inconclusive.
"""

from __future__ import annotations

# The command line alone, with nothing but the standard library: `experiments/run --help` and
# flag errors work before numpy, matplotlib and tqdm are installed (issue 20).

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXIT_BAD_INPUT, EXIT_BACKEND, EXIT_RUNS_FAILED, EXIT_TARGETS = 2, 3, 4, 5


def version() -> str:
    """The workspace's version (Cargo.toml), which every polycc binary's --version prints too."""
    m = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text())
    return m.group(1) if m else "unknown"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="experiments/run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("scenarios", nargs="*", help="scenario names or TOML paths")
    ap.add_argument("--backend", choices=("sim", "vm"), default="sim", help="simulator (default) or QEMU guest")
    ap.add_argument("--full", action="store_true", help="paper-length settings instead of the [quick] ones")
    ap.add_argument("--reps", type=int, help="override the repetitions per cell")
    ap.add_argument("--duration", type=float, help="override the seconds per run")
    ap.add_argument(
        "--cell",
        action="append",
        metavar="NAME",
        help="run only this [[cell]] of the scenario (repeatable): a long matrix in pieces, "
        "each kept on its own and joined by experiments/publish.py's summary (NAME+NAME)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "results", help="results root (default results/)")
    ap.add_argument("--sim", type=Path, help="polycc-sim binary (default $POLYCC_BIN_DIR/polycc-sim, else target/release/polycc-sim)")
    ap.add_argument(
        "--ipc-messages",
        type=int,
        default=None,
        help="vm, overhead scenarios: IPC benchmark round trips (default 20000 quick, 100000 --full; 0: skip)",
    )
    ap.add_argument(
        "--guest-all-cpus",
        action="store_true",
        help="vm: let the runs use both vCPUs; by default every process of the runs is pinned to vCPU 0, "
        "because veth queues packets on the sending CPU and two vCPUs reorder the ACK path (0.5-1.8 %% of "
        "datagrams in the UDP probe)",
    )
    ap.add_argument(
        "--agent-cpu",
        type=int,
        choices=(0, 1),
        help="vm: the vCPU polycc-portus runs on while the runs are pinned to vCPU 0 (default 1: a vCPU of "
        "its own, as on a host with more than one core; 0: beside the flows' packets, where under TCG it "
        "answered Vivace's reports at p95 15-45 ms instead of 1.2-1.3; see docs/kernel-parity.md)",
    )
    ap.add_argument(
        "--no-link-probe",
        action="store_true",
        help="vm: no CUBIC probe of the link around each round, so no invalid runs and no reruns (faster)",
    )
    ap.add_argument(
        "--retry-budget",
        type=float,
        metavar="S",
        help="vm: guest seconds allowed for rerunning rounds whose link fell short of its rate "
        "(default: a quarter of the planned run time, at least one round)",
    )
    ap.add_argument(
        "--report",
        metavar="FOLDER",
        type=Path,
        help="recompute the metrics and rewrite report.md and the plots of a results folder, no runs",
    )
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--check", action="store_true", help="validate the scenario files, and the schemes' flags with the backend's binary, and exit")
    ap.add_argument("--require-targets", action="store_true", help="exit 5 when a target is not met or inconclusive")
    ap.add_argument("--datapath", choices=("ccp", "bpf"),
                    help="run every agent scheme through this datapath in the guest: ccp (ccp.ko) or bpf "
                         "(polycc_bpf, no module; boots the 6.12 guest); default: each scheme's own (ccp)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--version", action="version", version=f"experiments/run (polycc {version()})")
    ap.add_argument("--in-guest", metavar="PLAN", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.reps is not None and a.reps < 1:
        ap.error("--reps must be at least 1")
    if a.duration is not None and a.duration <= 0:
        ap.error("--duration must be positive")
    if a.agent_cpu is not None and (a.backend != "vm" or a.guest_all_cpus):
        ap.error("--agent-cpu places the agent beside runs pinned to vCPU 0: it needs --backend vm, "
                 "without --guest-all-cpus")
    if a.agent_cpu is None and a.backend == "vm" and not a.guest_all_cpus:
        a.agent_cpu = 1
    if not a.scenarios and not a.list and not a.in_guest and not a.report:
        ap.error("name at least one scenario (or --list)")
    return a
