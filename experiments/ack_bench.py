#!/usr/bin/env python3
"""ACK-path benchmark: what ccp.ko costs per ACK, against in-kernel Reno on the same path.

    python3 experiments/ack_bench.py [--flows 8] [--seconds 10] [--reps 3] [--ko OTHER.ko ...]

In the QEMU guest (2 vCPUs): two network namespaces joined by a bare veth pair (no qdisc, no
delay), so throughput is bound by the CPUs that process packets and ACKs. FLOWS iperf3 flows for
SECONDS, REPS times each, in a shuffled order per rep: in-kernel Reno (the baseline) and ccp under
polycc-portus running Reno for every module given (default datapath/ccp.ko; --ko adds more, e.g.
an older build to compare).
The flows' ACKs land on both vCPUs at once, so a lock shared between flows on the ACK path
shows up as a lower ratio. Prints aggregate goodput per rep and each module's median / the
baseline's median. Under QEMU's software emulation (TCG) the absolute figures are far below
hardware's and move with the host's load: read the ratios, measured in the same boot.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments" / "vm"))
from kernel_job import run_in_guest  # noqa: E402
sys.path.insert(0, str(ROOT / "experiments"))
from runner.bins import bin_path  # noqa: E402

SND, RCV = "ack-snd", "ack-rcv"
SND_IP, RCV_IP = "10.78.0.1", "10.78.0.2"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


def path_up() -> None:
    sh("modprobe", "veth")
    for ns in (SND, RCV):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "link", "add", "ack-s", "netns", SND, "type", "veth", "peer", "name", "ack-r", "netns", RCV)
    for ns, dev, ip in ((SND, "ack-s", SND_IP), (RCV, "ack-r", RCV_IP)):
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
        # MTU-sized packets, as on a real link: an ACK per one or two segments, not per 64 KB.
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")


def goodput_mbps(cc: str, flows: int, seconds: int) -> float:
    r = sh("ip", "netns", "exec", SND, "iperf3", "-c", RCV_IP, "-C", cc, "-P", str(flows), "-t", str(seconds),
           "-J", check=False)
    if r.returncode != 0:
        raise RuntimeError(f"iperf3 -C {cc} failed: {r.stdout[-400:]} {r.stderr[-400:]}")
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6


def in_guest(args: argparse.Namespace) -> int:
    results = Path(os.environ["POLYCC_VM_RESULTS"])
    modules = args.ko or [os.environ.get("POLYCC_CCP_KO", str(ROOT / "datapath" / "ccp.ko"))]
    path_up()
    sh("ip", "netns", "exec", RCV, "iperf3", "-s", "-D")
    time.sleep(0.5)
    out: dict = {"kernel": os.uname().release, "cpus": os.cpu_count(), "flows": args.flows,
                 "duration_s": args.seconds, "reno_goodput_mbps": []}
    # Reps interleave the schemes in a shuffled order, so a change in the host's load, or a
    # scheme's place in the sequence, touches them alike.
    out["modules"] = {ko: {"ccp_goodput_mbps": [], "fallback_entries": 0} for ko in modules}
    order = [None, *modules]  # None: in-kernel Reno
    for rep in range(args.reps):
        random.Random(rep).shuffle(order)
        for ko in order:
            if ko is None:
                out["reno_goodput_mbps"].append(goodput_mbps("reno", args.flows, args.seconds))
                continue
            sh("rmmod", "ccp", check=False)
            sh("insmod", ko)
            with open(results / f"agent-{Path(ko).stem}-{rep}.log", "w") as log:
                agent = subprocess.Popen([str(bin_path("polycc-portus")), "--ipc", "netlink",
                                          "--alg", "reno"], stdout=log, stderr=log)
                time.sleep(1.0)
                out["modules"][ko]["ccp_goodput_mbps"].append(goodput_mbps("ccp", args.flows, args.seconds))
                agent.terminate()
                agent.wait(timeout=10)
            # Flows the agent did not drive would measure the in-kernel fallback, not the agent.
            out["modules"][ko]["fallback_entries"] += int(
                Path("/sys/module/ccp/parameters/fallback_entries").read_text())
            sh("rmmod", "ccp")
    (results / "ack-bench.json").write_text(json.dumps(out, indent=2))
    return 0


def on_host(args: argparse.Namespace) -> int:
    results = ROOT / "results" / "ack-bench"
    results.mkdir(parents=True, exist_ok=True)
    (results / "ack-bench.json").unlink(missing_ok=True)
    cmd = ["python3", "experiments/ack_bench.py", "--in-guest", "--flows", str(args.flows),
           "--seconds", str(args.seconds), "--reps", str(args.reps)]
    for ko in args.ko:
        cmd += ["--ko", str(Path(ko).resolve())]
    budget = (1 + max(1, len(args.ko))) * args.reps * (args.seconds + 5) + 240
    rc = run_in_guest(cmd, results, budget)
    path = results / "ack-bench.json"
    if rc != 0 or not path.exists():
        print(f"ack bench: the guest run failed (exit {rc}); logs in {results}", file=sys.stderr)
        return rc or 1
    r = json.loads(path.read_text())
    base = statistics.median(r["reno_goodput_mbps"])
    print(f"\n## ACK path (QEMU TCG guest, Linux {r['kernel']}, {r['cpus']} vCPU, {r['flows']} flows x "
          f"{r['duration_s']} s, bare veth)\n")
    print("| scheme | goodput per rep, Mbit/s | median | / in-kernel Reno | fallback entries |")
    print("|---|---|---|---|---|")
    print(f"| in-kernel reno (baseline) | {', '.join(f'{x:.0f}' for x in r['reno'])} | {base:.0f} | 1.00 | |")
    for ko, m in r["modules"].items():
        med = statistics.median(m["ccp_goodput_mbps"])
        print(f"| ccp + agent reno ({Path(ko).name}) | {', '.join(f'{x:.0f}' for x in m['ccp'])} | {med:.0f} | "
              f"{med / base:.2f} | {m['fallback_entries']} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ko", action="append", default=[], help="a ccp.ko to measure (repeatable; default: $POLYCC_CCP_KO)")
    ap.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.flows < 1 or args.seconds < 1 or args.reps < 1:
        ap.error("--flows, --seconds and --reps must be positive")
    return in_guest(args) if args.in_guest else on_host(args)


if __name__ == "__main__":
    sys.exit(main())
