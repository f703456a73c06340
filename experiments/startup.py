#!/usr/bin/env python3
"""Where a flow's first seconds go: per-flow startup timelines on the real kernel path.

    python3 experiments/startup.py [--devs 70] [--seconds 12] [--schemes fused,bbr,...] [--reps 1]

Boots the QEMU guest, loads ccp.ko and, on the demo link (20 Mbit/s, RTT 100 ms +/- DEV ms of ACK
jitter, one-BDP buffer), runs each scheme once per rep while sampling the sender's socket every
100 ms through sock_diag (the runner's diag.py: cwnd, bytes acked, retransmits, RTT). Agent schemes
run polycc-portus with --log-json, so the timeline also has the agent's side: CREATE, the first
report and every installed window and rate. Prints, per scheme and rep, the time to 80 % of the
link (from iperf's launch until the data connection's delivered rate over 500 ms reaches 80 %) and the milestones of the first second;
results/startup/timeline-*.json holds everything.
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
sys.path.insert(0, str(ROOT / "experiments"))
from kernel_job import run_in_guest  # noqa: E402

RATE_MBIT, DATA_DELAY_MS, MEAN_RTT_MS = 20, 15, 100
from runner.bins import bin_path  # noqa: E402
from runner.guest import RCV, RCV_IP, SND, Sampler  # noqa: E402
from runner.metrics import time_to_rate  # noqa: E402
SAMPLE_S = 0.1
WINDOW_S = 0.5
AGENT_SCHEMES = {
    "fused": ["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--fusion", "max", "--fuse-on", "cwnd"],
    "agent-bbr": ["--alg", "bbr"],
    "agent-cubic": ["--alg", "cubic"],
    "agent-reno": ["--alg", "reno"],
    "vivace": ["--alg", "vivace"],
    "copa": ["--alg", "copa"],
}
KERNEL_SCHEMES = {"bbr": "bbr", "cubic": "cubic", "reno": "reno"}
def data_socket(rows: list[dict]) -> list[dict]:
    """The samples of iperf3's data connection: the socket that delivered the most (the other is
    its control connection)."""
    by_port: dict = {}
    for r in rows:
        by_port.setdefault(r.get("sport"), []).append(r)
    return max(by_port.values(), key=lambda v: v[-1].get("acked_bytes", 0)) if by_port else []


def time_to_fraction(rows: list[dict], fraction: float, link_mbps: float = RATE_MBIT,
                     start: float | None = None) -> float | None:
    """Seconds from `start` (on the samples' clock: the sender's launch, so that connecting and
    the agent's CREATE count) or else the data connection's first sample, until its delivered rate
    over the last WINDOW_S first reaches `fraction` of the link (runner.metrics.time_to_rate)."""
    rows = data_socket(rows)
    points = [(r["t_s"], r.get("acked_bytes", 0)) for r in rows]
    return time_to_rate(points, fraction * link_mbps * 1e6 / 8, WINDOW_S, origin=start)


def run_one(scheme: str, seconds: int, results: Path, tag: str) -> dict:
    agent = None
    log_path = results / f"agent-{tag}.jsonl"
    if scheme in AGENT_SCHEMES:
        err = open(results / f"agent-{tag}.log", "w")
        agent = subprocess.Popen([str(bin_path("polycc-portus")), "--ipc", "netlink",
                                  "--log-json", str(log_path), *AGENT_SCHEMES[scheme]], stdout=err, stderr=err)
        time.sleep(1.0)
    cc = "ccp" if scheme in AGENT_SCHEMES else KERNEL_SCHEMES[scheme]
    subprocess.run(["sh", "-c", "echo x > /sys/module/ccp/parameters/ipc_rtt_us"], capture_output=True)
    sampler = Sampler(SAMPLE_S, results / f"diag-{tag}.jsonl")
    t0 = time.time()
    mono0 = time.monotonic()
    out = subprocess.run(["ip", "netns", "exec", SND, "iperf3", "-c", RCV_IP, "-C", cc, "-t", str(seconds),
                          "-i", "0.5", "-J"], capture_output=True, text=True)
    samples, s0 = sampler.stop()
    rows = [dict(x, t_s=x["t_s"] + s0 - mono0) for x in samples]
    ipc = Path("/sys/module/ccp/parameters/ipc_rtt_us").read_text().strip()
    agent_events = []
    if agent:
        agent.terminate()
        agent.wait(timeout=10)
        if log_path.exists():
            for line in log_path.read_text().splitlines():
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                e["t_s"] = e.get("unix_ms", 0) / 1000 - t0
                agent_events.append(e)
    r = json.loads(out.stdout)
    per_interval = [iv["sum"]["bits_per_second"] / 1e6 for iv in r["intervals"]]
    return {"scheme": scheme, "tag": tag, "samples": rows, "agent": agent_events, "ipc_rtt_us": ipc,
            "goodput_mbps": r["end"]["sum_received"]["bits_per_second"] / 1e6,
            "retransmits": r["end"]["sum_sent"].get("retransmits", 0), "iperf_intervals_mbps": per_interval,
            "t80_s": time_to_fraction(rows, 0.8, start=0.0)}


def in_guest(args: argparse.Namespace) -> int:
    results = Path(os.environ["POLYCC_VM_RESULTS"])
    subprocess.run(["modprobe", "tcp_bbr"], check=True)
    subprocess.run(["modprobe", "tcp_diag"], check=False)
    subprocess.run(["rmmod", "ccp"], capture_output=True)
    subprocess.run(["insmod", os.environ["POLYCC_CCP_KO"]], check=True)
    for dev in args.devs:
        env = dict(os.environ, SND=SND, RCV=RCV, RATE_MBIT=str(RATE_MBIT), DELAY_MS=str(DATA_DELAY_MS),
                   ACK_DELAY_MS=str(MEAN_RTT_MS - DATA_DELAY_MS), ACK_JITTER_MS=str(dev))
        subprocess.run([str(ROOT / "experiments" / "vm" / "dumbbell.sh"), "up"], env=env, check=True)
        subprocess.run(["ip", "netns", "exec", RCV, "iperf3", "-s", "-D"], check=True)
        time.sleep(0.5)
        for rep in range(args.reps):
            for scheme in args.schemes:
                tag = f"{scheme}-dev{dev}-{rep}"
                print(f"[startup] {tag}", flush=True)
                res = run_one(scheme, args.seconds, results, tag)
                res["dev_ms"] = dev
                (results / f"timeline-{tag}.json").write_text(json.dumps(res))
                time.sleep(1.0)
        subprocess.run([str(ROOT / "experiments" / "vm" / "dumbbell.sh"), "down"], env=env)
    return 0


def summarize(results: Path) -> None:
    for path in sorted(results.glob("timeline-*.json")):
        d = json.loads(path.read_text())
        s = d["samples"]
        creates = [e for e in d["agent"] if e.get("event") == "create"]
        reports = [e for e in d["agent"] if e.get("event") == "report"]
        first = ""
        if creates:
            first = (f" create@{creates[0]['t_s']:.2f}s cwnd0={creates[0].get('cwnd_bytes')} B"
                     f" rate0={creates[0].get('rate_bytes_per_sec')} B/s")
        if reports:
            first += f" report1@{reports[0]['t_s']:.2f}s reports={len(reports)}"
        t80 = time_to_fraction(s, 0.8, start=0.0)
        print(f"{d['tag']:<24} goodput {d['goodput_mbps']:6.2f} retx {d['retransmits']:5} "
              f"t80 {'-' if t80 is None else f'{t80:.2f}s'}  ipc[{d['ipc_rtt_us']}]{first}")
        iv = " ".join(f"{x:.1f}" for x in d["iperf_intervals_mbps"][:12])
        print(f"   iperf 0.5 s: {iv}")
        data = data_socket(s)
        marks = [x for x in data if x["t_s"] <= data[0]["t_s"] + 3.0][::4] if data else []
        print("   cwnd (packets): " + " ".join(f"{x['t_s']:.1f}:{x.get('cwnd_packets', 0):.0f}" for x in marks))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devs", type=int, nargs="+", default=[70])
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--schemes", default="fused,agent-bbr,agent-cubic,bbr,cubic")
    ap.add_argument("--summary", type=Path, help="print the summary of an earlier results folder")
    ap.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.schemes = args.schemes.split(",")
    if args.summary:
        summarize(args.summary)
        return 0
    if args.in_guest:
        return in_guest(args)
    results = ROOT / "results" / "startup" / time.strftime("%Y%m%d-%H%M%S")
    results.mkdir(parents=True, exist_ok=True)
    n = len(args.devs) * args.reps * len(args.schemes)
    rc = run_in_guest(["python3", "experiments/startup.py", "--in-guest", "--seconds", str(args.seconds),
                       "--reps", str(args.reps), "--schemes", ",".join(args.schemes),
                       "--devs", *map(str, args.devs)], results, 180 + n * (args.seconds + 6))
    summarize(results)
    print(f"results: {results}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
