#!/usr/bin/env python3
"""The "loopback flow not held back" table of docs/bpf-datapath.md, from what the bench printed.

    cargo bench -p polycc-agent --bench bpf_loopback > target/bench-bpf-loopback.txt
    python3 datapath/bpf/loopback_table.py target/bench-bpf-loopback.txt --table FILE

(both in `make bench-bpf`). Reads the bench's `median NAME: X Gbit/s = R x in-kernel CUBIC` lines
and the per-rep lines and writes experiments/results_table.py's file; `experiments/publish.py
keep-table FILE bpf-loopback` shows it in the page.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import results_table  # noqa: E402

MEDIAN = re.compile(r"^median\s+(.+?):\s+([\d.]+) Gbit/s = ([\d.]+) x in-kernel CUBIC$")
REP = re.compile(r"^rep (\d+)\s+(.+?):\s+([\d.]+) Gbit/s$")


def rows(lines: list[str]) -> list[list[str]]:
    reps: dict[str, list[str]] = {}
    for line in lines:
        m = REP.match(line.strip())
        if m:
            reps.setdefault(m.group(2), []).append(m.group(3))
    out = []
    for line in lines:
        m = MEDIAN.match(line.strip())
        if m:
            name, gbps, ratio = m.groups()
            out.append([name, f"{float(gbps):.1f}", f"{float(ratio):.2f}", ", ".join(reps.get(name, []))])
    if not out:
        raise SystemExit("loopback_table: no `median` lines (run as root: the bench registers polycc_bpf)")
    return out


def main() -> int:
    columns = ["scheme", "median Gbit/s", "x in-kernel CUBIC", "per round (Gbit/s)"]
    return results_table.convert(__doc__, rows, columns, "make bench-bpf (cargo bench -p polycc-agent --bench "
                                 "bpf_loopback; datapath/bpf/loopback_table.py)")


if __name__ == "__main__":
    sys.exit(main())
