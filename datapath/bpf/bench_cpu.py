#!/usr/bin/env python3
"""CPU cost of polycc_bpf + polycc-portus against in-kernel CUBIC on loopback (issue 17).

For each flow count (1, 8, 64, 512) and scheme, iperf3 runs that many loopback flows for
--seconds (TCP_MAXSEG 1448, so per-packet costs are those of a 1500-byte path), and CPU is read
twice: system-wide busy time from /proc/stat (everything, the TCP stack's softirq work included;
other load on the machine shows up here too, so check `load1` in the output) and the processes'
own utime+stime (iperf3 clients and servers, and the agent). Loopback is CPU-bound, so the two
schemes move different amounts of data: the figure compared is CPU seconds per GB moved, and the
ratio polycc_bpf / cubic (issue 17's bar: <= 2). Goodput at 1 flow says whether a loopback flow
is held back. A single 5 s loopback run is bimodal on a shared 2-vCPU host (64 in-kernel CUBIC
flows moved 14.6 or 36-39 Gbit/s, run to run), so each cell runs --rounds times (default 3) with
the schemes alternating which goes first, and the ratios compared are those of the two schemes'
medians; each round's ratio is listed too.

Run as root after `cargo build --release -p polycc-agent`:
    python3 datapath/bpf/bench_cpu.py [--flows 1 8 64 512] [--seconds 5] [--rounds 3] [--out FILE] [--table FILE]
Writes one JSON object (and prints a table); --table writes the table docs/bpf-datapath.md shows
(experiments/results_table.py; `experiments/publish.py keep-table FILE bpf-cpu` puts it there).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import results_table  # noqa: E402
sys.path.insert(0, str(ROOT / "experiments"))
from runner.bins import bin_path  # noqa: E402

AGENT = bin_path("polycc-portus")
CA_BPF = "polycc_bpf"
MAX_STREAMS_PER_IPERF = 128
BASE_PORT = 5400


@dataclass
class Args:
    flows: list[int]
    """Flow counts to measure."""
    seconds: float
    """Length of each iperf3 run."""
    alg: str
    """The agent's policy (--alg) for polycc_bpf flows."""
    rounds: int
    """Runs of each scheme at each flow count, alternating which scheme goes first."""
    out: Path | None
    """Where to write the JSON results."""


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process and its reaped children, seconds."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


def registered() -> bool:
    text = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
    return CA_BPF in text.split()


def run_one(scheme: str, flows: int, a: Args) -> dict:
    agent = None
    if scheme == CA_BPF:
        agent = subprocess.Popen(
            [str(AGENT), "--datapath", "bpf", "--bpf-no-pin", "--alg", a.alg, "--log-level", "error",
             "--control-socket", f"/tmp/polycc-bench-cpu-{os.getpid()}.sock"],
            stdin=subprocess.DEVNULL)
        for _ in range(100):
            if registered():
                break
            time.sleep(0.1)
        else:
            agent.kill()
            raise SystemExit("polycc-portus --datapath bpf did not register polycc_bpf")
    groups = [min(MAX_STREAMS_PER_IPERF, flows - i) for i in range(0, flows, MAX_STREAMS_PER_IPERF)]
    servers = [subprocess.Popen(["iperf3", "-s", "-1", "-p", str(BASE_PORT + i)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for i in range(len(groups))]
    time.sleep(0.5)
    b0, t0 = busy_jiffies()
    agent_cpu0 = proc_cpu_s(agent.pid) if agent else 0.0
    clients = [subprocess.Popen(["iperf3", "-c", "127.0.0.1", "-p", str(BASE_PORT + i), "-P", str(n),
                                 "-t", str(a.seconds), "-M", "1448", "-C", scheme, "-J"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for i, n in enumerate(groups)]
    outs, procs_cpu = [], 0.0
    for c in clients:
        out, _ = c.communicate(timeout=a.seconds + 60)
        outs.append(json.loads(out))
    for s in servers:
        s.wait(timeout=30)
    b1, t1 = busy_jiffies()
    # Reaped children's times: ours (clients, servers) through resource usage.
    ru = os.times()
    procs_cpu = ru.children_user + ru.children_system
    agent_cpu = (proc_cpu_s(agent.pid) - agent_cpu0) if agent else 0.0
    if agent:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=10)
    received = sum(o["end"]["sum_received"]["bytes"] for o in outs)
    retrans = sum(o["end"]["sum_sent"].get("retransmits", 0) for o in outs)
    hz = os.sysconf("SC_CLK_TCK")
    busy_s = (b1 - b0) / hz
    return {
        "scheme": scheme, "flows": flows, "duration_s": a.seconds, "received_bytes": received,
        "goodput_gbps": received * 8 / a.seconds / 1e9, "retransmits": retrans,
        "busy_cpu_s": busy_s, "agent_cpu_s": agent_cpu, "iperf_cpu_s_cumulative": procs_cpu,
        "cpu_s_per_gb": busy_s / (received / 1e9) if received else None,
        "load1": os.getloadavg()[0],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flows", type=int, nargs="+", default=[1, 8, 64, 512])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--alg", default="cubic")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path)
    p.add_argument("--table", type=Path, help="write the results table for the docs (experiments/results_table.py)")
    ns = p.parse_args()
    if ns.rounds < 1:
        raise SystemExit(f"--rounds {ns.rounds}: at least 1")
    a = Args(flows=ns.flows, seconds=ns.seconds, alg=ns.alg, rounds=ns.rounds, out=ns.out)
    if os.geteuid() != 0:
        raise SystemExit("skipped: not root (registering a BPF tcp_congestion_ops needs CAP_BPF, CAP_NET_ADMIN)")
    if not AGENT.exists():
        raise SystemExit(f"{AGENT} missing: cargo build --release -p polycc-agent")
    rows = []
    for rnd in range(a.rounds):
        for n in a.flows:
            for scheme in (("cubic", CA_BPF) if rnd % 2 == 0 else (CA_BPF, "cubic")):
                r = run_one(scheme, n, a)
                r["round"] = rnd
                rows.append(r)
                print(f"round {rnd + 1} {scheme:>10} {n:4d} flows: {r['goodput_gbps']:6.2f} Gbit/s"
                      f"  busy {r['busy_cpu_s']:5.2f} s  {r['cpu_s_per_gb']:.3f} CPU-s/GB"
                      f"  agent {r['agent_cpu_s']:.2f} s  load1 {r['load1']:.1f}", flush=True)
    ratios = summarize(rows, a.flows)
    for n in a.flows:
        q = ratios[n]
        print(f"{n:4d} flows: polycc_bpf/cubic CPU per GB {q['cpu_per_gb_ratio']:.2f}x (rounds:"
              f" {', '.join(f'{x:.2f}' for x in q['cpu_per_gb_ratio_rounds'])}),"
              f" goodput {q['goodput_ratio']:.2f}x")
    result = {"alg": a.alg, "rounds": a.rounds, "rows": rows, "ratios": ratios}
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    if ns.table:
        results_table.write(ns.table, *table(rows, ratios, a.flows))


def median_of(rows: list[dict], scheme: str, flows: int, key: str) -> float:
    return statistics.median(r[key] for r in rows if r["flows"] == flows and r["scheme"] == scheme)


def summarize(rows: list[dict], flows: list[int]) -> dict:
    """Per flow count: each scheme's medians over the rounds, their ratios, and each round's CPU
    ratio."""
    out = {}
    for n in flows:
        per_round = []
        for rnd in sorted({r["round"] for r in rows}):
            c = next(r for r in rows if r["flows"] == n and r["scheme"] == "cubic" and r["round"] == rnd)
            b = next(r for r in rows if r["flows"] == n and r["scheme"] == CA_BPF and r["round"] == rnd)
            per_round.append(b["cpu_s_per_gb"] / c["cpu_s_per_gb"])
        m = {f"{scheme}_{key}": median_of(rows, scheme, n, key)
             for scheme in ("cubic", CA_BPF) for key in ("goodput_gbps", "cpu_s_per_gb", "agent_cpu_s")}
        out[n] = {
            **m,
            "cpu_per_gb_ratio": m[f"{CA_BPF}_cpu_s_per_gb"] / m["cubic_cpu_s_per_gb"],
            "goodput_ratio": m[f"{CA_BPF}_goodput_gbps"] / m["cubic_goodput_gbps"],
            "cpu_per_gb_ratio_rounds": per_round,
        }
    return out


def table(rows: list[dict], ratios: dict, flows: list[int]) -> tuple[list[str], list[list[str]], list[str]]:
    """The docs' table: per flow count, the medians over rounds of goodput and CPU per GB of both
    schemes, their ratios, and each round's CPU ratio."""
    cols = ["flows", "CUBIC Gbit/s", "polycc_bpf Gbit/s", "goodput ratio", "CPU-s/GB CUBIC",
            "CPU-s/GB polycc_bpf", "CPU ratio (bar <= 2)", "CPU ratio per round", "agent CPU"]
    out = []
    for n in flows:
        q = ratios[n]
        out.append([n, f"{q['cubic_goodput_gbps']:.1f}", f"{q[CA_BPF + '_goodput_gbps']:.1f}",
                    f"{q['goodput_ratio']:.2f}", f"{q['cubic_cpu_s_per_gb']:.3f}",
                    f"{q[CA_BPF + '_cpu_s_per_gb']:.3f}", f"{q['cpu_per_gb_ratio']:.2f}",
                    ", ".join(f"{x:.2f}" for x in q["cpu_per_gb_ratio_rounds"]),
                    f"{q[CA_BPF + '_agent_cpu_s']:.2f} s"])
    loads = [r["load1"] for r in rows]
    rounds = len({r["round"] for r in rows})
    return cols, out, [f"Medians over {rounds} rounds (schemes alternating which runs first); host load"
                       f" average (1 min) during the runs: {min(loads):.1f}-{max(loads):.1f}."]


if __name__ == "__main__":
    main()
