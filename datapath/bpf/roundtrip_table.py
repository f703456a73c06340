#!/usr/bin/env python3
"""The report-to-update round-trip table of docs/bpf-datapath.md, from what the bench printed.

    cargo bench -p polycc-agent --bench bpf_roundtrip > target/bench-bpf-roundtrip.jsonl
    python3 datapath/bpf/roundtrip_table.py target/bench-bpf-roundtrip.jsonl --table FILE

(both in `make bench-bpf`). Reads the bench's JSON lines (one per datapath) and writes the table as
experiments/results_table.py's file; `experiments/publish.py keep-table FILE bpf-roundtrip` shows
it in the page. Exits 1 naming what is missing when a line is not the bench's.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import results_table  # noqa: E402

BAR_P95_US = 30.0  # the CCP paper's report-to-update p95


def rows(lines: list[str]) -> list[list[str]]:
    out = []
    for line in lines:
        if not line.strip().startswith("{"):
            continue
        d = json.loads(line)
        if d.get("datapath") == "bpf":
            a = d["agent"]
            label = "BPF ring buffer + map write" + (f", `--bpf-busy-poll-us {d['busy_poll_us']}`" if d.get("busy_poll_us") else "")
            if d.get("agent_cpu") is not None:
                label += f" `--cpu {d['agent_cpu']}`, flows on the other CPUs"

            n, p50, p95, p99 = a["round_trips"], a["p50_us"], a["p95_us"], a["p99_us"]
        else:
            label = {"unix": "unix socket (baseline)"}.get(d["datapath"], d["datapath"].replace("_", " "))
            n, p50, p95, p99 = d["round_trips"], d["p50_us"], d["p95_us"], d["p99_us"]
        met = "yes" if p95 is not None and p95 < BAR_P95_US else "no"
        cores = d.get("agent_cores")
        out.append([label, f"{n:,}", f"{p50:.1f} µs", f"{p95:.1f} µs", f"{p99:.1f} µs", met,
                    "-" if cores is None else f"{cores:.2f}"])
    if not out:
        raise SystemExit("roundtrip_table: no bench lines (run as root: the bpf half needs CAP_BPF)")
    return out


def main() -> int:
    columns = ["datapath", "round trips", "p50", "p95", "p99", f"p95 < {BAR_P95_US:g} µs (CCP's bar)",
               "agent CPU (cores)"]
    return results_table.convert(__doc__, rows, columns, "make bench-bpf (cargo bench -p polycc-agent --bench "
                                 "bpf_roundtrip; datapath/bpf/roundtrip_table.py)")


if __name__ == "__main__":
    sys.exit(main())
