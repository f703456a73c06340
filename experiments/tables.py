#!/usr/bin/env python3
"""The measured tables in docs/ that tests and benchmarks print, rebuilt by running them.

    python3 experiments/tables.py              list the tables, their commands and pages
    python3 experiments/tables.py NAME...      run each table's command, keep what it measured as
                                               docs/results/NAME/table.json and rebuild the pages
    python3 experiments/tables.py --all        every table (make tables; tens of minutes: benchmarks)

Each command prints its table's rows as `results-table NAME ORDER<TAB>cell...` lines
(experiments/results_table.py); the columns are this file's. A page shows the kept table in a
`<!-- results: NAME json -->` block (experiments/publish.py), under the command, date and commit
that made it, so no figure in those tables is typed by hand. A command that several tables share
runs once. Its whole output is kept beside the run in target/tables/, for the lines around a row.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import publish  # noqa: E402
import results_table  # noqa: E402


@dataclass(frozen=True)
class Table:
    command: str
    columns: tuple[str, ...]
    page: str
    # Exit statuses that still measured the whole table (a target tool exits 1 on a missed target;
    # a test that prints its rows before it judges them fails with 101).
    measured_rcs: tuple[int, ...] = (0,)


TABLES: dict[str, Table] = {
    "pcc-targets": Table(
        "cargo test -q --release -p polycc-sim --test targets -- --nocapture --test-threads=1 vivace unified emergency",
        ("case (100 Mbit/s, 30 ms, 1 BDP unless said)", "target", "Vivace", "CUBIC"), "docs/pcc.md"),
    "tune-gains": Table(
        "cargo test -q --release -p polycc-tune --test targets -- --nocapture --test-threads=1 tuning_beats",
        ("scenario (`tune/examples/`)", "reward (per Mbit/s, ms of p75 RTT, % loss)",
         "default Vivace: reward (Mbit/s, ms, loss %)", "learned: reward (Mbit/s, ms, loss %)", "gain"),
        "docs/tune.md"),
    "tune-rewards": Table(
        "POLYCC_TUNE_SEEDS=3,1,2 cargo test -q --release -p polycc-tune --test targets -- --nocapture pacifist",
        ("reward", "per Mbit/s, ms, %", "seed 3: Mbit/s, ms, %", "seed 1", "seed 2", "learned (ss exit, latency filter)"),
        "docs/tune.md", measured_rcs=(0, 101)),
    "policy-rules": Table(
        "cargo bench -q -p polycc-agent --bench policy_rules",
        ("", "measured", "bar"), "docs/agent.md"),
    "bench": Table(
        "make bench", ("benchmark", "result", "target"), "docs/testing.md"),
    "mocc-targets": Table(
        "cargo run -q --release -p polycc-gym --bin mocc-targets -- --model onnx/mocc.onnx",
        ("case", "target", "measured", "met"), "docs/mocc.md", measured_rcs=(0, 1)),
    "mocc-judge": Table(
        "PYTHONPATH=onnx/python python3 -m mocc.judge --model onnx/mocc.onnx --links 30 --start window --out onnx/runs/judge --no-progress",
        ("row", "target", "measured", "met"), "docs/mocc.md", measured_rcs=(0, 1)),
}


def run(command: str, log: Path, measured_rcs: tuple[int, ...] = (0,)) -> list[str]:
    """Run `command` in the repository, its output shown and kept in `log`; its lines."""
    print(f"tables: running `{command}` (output in {log.relative_to(ROOT)})", flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        p = subprocess.Popen(command, shell=True, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            sys.stdout.write(line)
            out.write(line)
        rc = p.wait()
    if rc not in measured_rcs:
        raise publish.PublishError(f"`{command}` exited {rc}: no table kept (see {log})")
    return log.read_text().splitlines()


def make(names: list[str], kept: Path = publish.KEPT) -> list[Path]:
    outputs: dict[str, list[str]] = {}
    done = []
    for name in names:
        t = TABLES[name]
        if t.command not in outputs:
            outputs[t.command] = run(t.command, ROOT / "target" / "tables" / f"{name}.txt", t.measured_rcs)
        try:
            rows = results_table.rows(outputs[t.command], name, len(t.columns))
        except ValueError as e:
            raise publish.PublishError(f"`{t.command}`: {e}") from e
        with tempfile.TemporaryDirectory() as tmp:
            f = results_table.write(Path(tmp) / "table.json", list(t.columns), rows, command=t.command)
            done.append(publish.keep_table(f, name, kept))
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="experiments/tables.py", description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"one of: {', '.join(TABLES)}")
    ap.add_argument("--all", action="store_true", help="every table")
    a = ap.parse_args(argv)
    unknown = [n for n in a.names if n not in TABLES]
    if unknown or (a.all and a.names):
        ap.error(f"unknown table {', '.join(unknown)} (tables: {', '.join(TABLES)})" if unknown
                 else "--all or names, not both")
    names = list(TABLES) if a.all else a.names
    if not names:
        for n, t in TABLES.items():
            print(f"{n:<14} {t.page:<18} {t.command}")
        return 0
    try:
        for d in make(names):
            print(f"tables: kept {d.relative_to(ROOT)}")
        return publish.main([])
    except (publish.PublishError, OSError) as e:
        print(f"tables: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
