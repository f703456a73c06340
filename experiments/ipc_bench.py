#!/usr/bin/env python3
"""IPC benchmark: report -> agent update round trips through ccp.ko, beside a unix-socket baseline.

    python3 experiments/ipc_bench.py [--messages 100000]           (`make bench-kernel`)

In the QEMU guest: loads ccp.ko, runs polycc-portus with a report every millisecond, drives 4 ccp
flows over a 100 Mbit/s veth link (1 ms each way) until the module has timed MESSAGES round trips
(the module stamps each report when it leaves and matches it with the agent's update for that
flow, which answers reports in order: netlink out, the agent's decision, netlink back;
/sys/module/ccp/parameters/ipc_rtt_us), then runs
polycc-ipc-baseline (a unix datagram ping-pong of the same message sizes) in the same guest.
Prints p50/p95 of both and their ratio. The CCP paper's bar, on bare metal: p95 < 30 us.
Under QEMU's software emulation every figure is several times slower than on hardware.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments" / "vm"))
from kernel_job import run_in_guest  # noqa: E402
sys.path.insert(0, str(ROOT / "experiments"))
from runner.bins import bin_path  # noqa: E402
PARAM = Path("/sys/module/ccp/parameters/ipc_rtt_us")


def read_hist() -> dict:
    f = PARAM.read_text().split()
    return {f[i]: int(f[i + 1]) for i in range(0, len(f), 2)}


def in_guest(args: argparse.Namespace) -> int:
    results = Path(os.environ["POLYCC_VM_RESULTS"])
    module = os.environ.get("POLYCC_CCP_KO", str(ROOT / "datapath" / "ccp.ko"))
    env = dict(os.environ, SND="ipc-snd", RCV="ipc-rcv", RATE_MBIT="100", DELAY_MS="1")
    subprocess.run([str(ROOT / "experiments" / "vm" / "dumbbell.sh"), "up"], env=env, check=True)
    subprocess.run(["rmmod", "ccp"], capture_output=True)
    subprocess.run(["insmod", module], check=True)
    log = open(results / "agent.log", "w")
    agent = subprocess.Popen([str(bin_path("polycc-portus")), "--ipc", "netlink", "--alg", "reno",
                              "--report-interval", "1ms", "--log-level", "info"], stdout=log, stderr=log)
    time.sleep(1.0)
    PARAM.write_text("0")
    subprocess.run(["ip", "netns", "exec", "ipc-rcv", "iperf3", "-s", "-D"], check=True)
    time.sleep(0.5)
    t0 = time.time()
    rounds = 0
    while read_hist()["count"] < args.messages and time.time() - t0 < args.max_seconds:
        subprocess.run(["ip", "netns", "exec", "ipc-snd", "iperf3", "-c", "10.77.0.2", "-C", "ccp", "-P", "4", "-t", "30"],
                       capture_output=True)
        rounds += 1
    kernel = read_hist()
    agent.terminate()
    agent.wait(timeout=10)
    base = subprocess.run([str(bin_path("polycc-ipc-baseline")), str(args.messages)],
                          capture_output=True, text=True, check=True)
    out = {"kernel_netlink": kernel, "unix_baseline": json.loads(base.stdout), "iperf_rounds": rounds,
           "kernel": os.uname().release, "cpus": os.cpu_count()}
    (results / "ipc-bench.json").write_text(json.dumps(out, indent=2))
    subprocess.run(["rmmod", "ccp"])
    return 0


def on_host(args: argparse.Namespace) -> int:
    results = ROOT / "results" / "ipc-bench"
    results.mkdir(parents=True, exist_ok=True)
    (results / "ipc-bench.json").unlink(missing_ok=True)
    rc = run_in_guest(["python3", "experiments/ipc_bench.py", "--in-guest", "--messages", str(args.messages),
                       "--max-seconds", str(args.max_seconds)], results, args.max_seconds + 240)
    path = results / "ipc-bench.json"
    if rc != 0 or not path.exists():
        print(f"ipc bench: the guest run failed (exit {rc}); logs in {results}", file=sys.stderr)
        return rc or 1
    r = json.loads(path.read_text())
    k, u = r["kernel_netlink"], r["unix_baseline"]
    print(f"\n## IPC round trip (QEMU TCG guest, Linux {r['kernel']}, {r['cpus']} vCPU)\n")
    print("| path | messages | p50 us | p95 us | p95 / baseline |")
    print("|---|---|---|---|---|")
    print(f"| report -> update through ccp.ko + polycc-portus (netlink) | {k['count']} | {k['p50']} | {k['p95']} | "
          f"{k['p95'] / max(u['p95_us'], 1e-9):.2f} |")
    print(f"| unix datagram ping-pong, same sizes (baseline) | {u['messages']} | {u['p50_us']:.1f} | {u['p95_us']:.1f} | 1.00 |")
    if k["count"] < args.messages:
        print(f"\nnote: only {k['count']} round trips within {args.max_seconds} s")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--max-seconds", type=int, default=240, help="stop driving flows after this long")
    ap.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    return in_guest(args) if args.in_guest else on_host(args)


if __name__ == "__main__":
    sys.exit(main())
