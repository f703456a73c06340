#!/usr/bin/env python3
"""The main demo on the real kernel path: PolyCC's fused policy against in-kernel BBR and CUBIC.

    python3 experiments/kernel_demo.py [--devs 70] [--seconds 20] [--repeats 1]     (`make demo`)

Boots the QEMU guest (experiments/vm/polycc-vm), loads ccp.ko, and over one emulated link,
20 Mbit/s, RTT 100 ms +/- DEV ms (jitter on the ACK path, bunched without reordering: ACK
aggregation), one-BDP buffer, runs in turn:
  fused   polycc-portus --alg fused --pilot bbr --copilot cubic --fusion max   (iperf3 -C ccp)
  bbr     in-kernel BBR                                                         (iperf3 -C bbr)
  cubic   in-kernel CUBIC                                                       (iperf3 -C cubic)
and prints a goodput table (receiver side). Results and logs go to results/kernel-demo/.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments" / "vm"))
from kernel_job import run_in_guest  # noqa: E402
RATE_MBIT, DATA_DELAY_MS, MEAN_RTT_MS = 20, 15, 100
SND, RCV, RCV_IP = "demo-snd", "demo-rcv", "10.77.0.2"
FUSED = ["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--fusion", "max", "--fuse-on", "cwnd"]


def in_guest(args: argparse.Namespace) -> int:
    results = Path(os.environ["POLYCC_VM_RESULTS"])
    module = os.environ.get("POLYCC_CCP_KO", str(ROOT / "datapath" / "ccp.ko"))
    agent_bin = ROOT / "target" / "release" / "polycc-portus"
    subprocess.run(["modprobe", "tcp_bbr"], check=True)
    subprocess.run(["rmmod", "ccp"], capture_output=True)
    subprocess.run(["insmod", module], check=True)
    rows = []
    for dev in args.devs:
        env = dict(os.environ, SND=SND, RCV=RCV, RATE_MBIT=str(RATE_MBIT), DELAY_MS=str(DATA_DELAY_MS),
                   ACK_DELAY_MS=str(MEAN_RTT_MS - DATA_DELAY_MS), ACK_JITTER_MS=str(dev))
        subprocess.run([str(ROOT / "experiments" / "vm" / "dumbbell.sh"), "up"], env=env, check=True)
        subprocess.run(["ip", "netns", "exec", RCV, "iperf3", "-s", "-D"], check=True)
        time.sleep(0.5)
        for rep in range(args.repeats):
            for scheme, cc in (("fused(bbr+cubic,max cwnd)", "ccp"), ("bbr (kernel)", "bbr"), ("cubic (kernel)", "cubic")):
                agent = None
                if cc == "ccp":
                    log = open(results / f"agent-dev{dev}-{rep}.log", "w")
                    agent = subprocess.Popen([str(agent_bin), "--ipc", "netlink", *FUSED], stdout=log, stderr=log)
                    time.sleep(1.0)
                print(f"[demo] +/-{dev} ms, {scheme}, run {rep + 1}/{args.repeats}", flush=True)
                out = subprocess.run(["ip", "netns", "exec", SND, "iperf3", "-c", RCV_IP, "-C", cc,
                                      "-t", str(args.seconds), "-J"], capture_output=True, text=True)
                if agent:
                    agent.terminate()
                    agent.wait(timeout=10)
                r = json.loads(out.stdout)
                (results / f"iperf-dev{dev}-{cc}-{rep}.json").write_text(out.stdout)
                stream = r["end"]["streams"][0]["sender"]
                rows.append({"dev_ms": dev, "scheme": scheme, "run": rep,
                             "goodput_mbit": r["end"]["sum_received"]["bits_per_second"] / 1e6,
                             "mean_rtt_ms": stream.get("mean_rtt", 0) / 1000,
                             "retransmits": r["end"]["sum_sent"].get("retransmits", 0)})
        subprocess.run([str(ROOT / "experiments" / "vm" / "dumbbell.sh"), "down"], env=env)
    (results / "kernel-demo.json").write_text(json.dumps({"kernel": os.uname().release, "runs": rows}, indent=2))
    subprocess.run(["rmmod", "ccp"])
    return 0


def on_host(args: argparse.Namespace) -> int:
    results = ROOT / "results" / "kernel-demo"
    results.mkdir(parents=True, exist_ok=True)
    (results / "kernel-demo.json").unlink(missing_ok=True)
    per_run = 3 * (args.seconds + 3)
    timeout = 120 + len(args.devs) * args.repeats * per_run
    rc = run_in_guest(["python3", "experiments/kernel_demo.py", "--in-guest", "--seconds", str(args.seconds),
                       "--repeats", str(args.repeats), "--devs", *map(str, args.devs)], results, timeout)
    path = results / "kernel-demo.json"
    if rc != 0 or not path.exists():
        print(f"kernel demo: the guest run failed (exit {rc}); logs in {results}", file=sys.stderr)
        return rc or 1
    doc = json.loads(path.read_text())
    rows = doc["runs"]
    print(f"\n## Kernel path (QEMU guest, Linux {doc['kernel']}): {RATE_MBIT} Mbit/s, RTT {MEAN_RTT_MS} ms +/- dev "
          f"(ACK aggregation), 1 BDP buffer, {args.seconds} s per run\n")
    print("| RTT deviation | scheme | goodput Mbit/s | utilization | mean RTT ms | retransmits | x kernel BBR |")
    print("|---|---|---|---|---|---|---|")
    for dev in args.devs:
        cell = {}
        for scheme in dict.fromkeys(r["scheme"] for r in rows):
            rs = [r for r in rows if r["dev_ms"] == dev and r["scheme"] == scheme]
            cell[scheme] = {k: statistics.median(r[k] for r in rs) for k in ("goodput_mbit", "mean_rtt_ms", "retransmits")}
        bbr = cell.get("bbr (kernel)", {}).get("goodput_mbit") or float("nan")
        for scheme, c in cell.items():
            print(f"| +/-{dev} ms | {scheme} | {c['goodput_mbit']:.2f} | {c['goodput_mbit'] / RATE_MBIT:.3f} | "
                  f"{c['mean_rtt_ms']:.1f} | {c['retransmits']:.0f} | {c['goodput_mbit'] / bbr:.2f} |")
    print(f"\nraw results: {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devs", type=int, nargs="+", default=[70], help="RTT deviations in ms (default 70)")
    ap.add_argument("--seconds", type=int, default=20, help="seconds per run (default 20)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per cell (median shown)")
    ap.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    return in_guest(args) if args.in_guest else on_host(args)


if __name__ == "__main__":
    sys.exit(main())
