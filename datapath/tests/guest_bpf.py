#!/usr/bin/env python3
"""The BPF datapath (`polycc-portus --datapath bpf`, no module) on the guest's emulated link, run as
root inside a QEMU guest whose kernel has BTF and struct_ops links (Debian's 6.12: the 6.1 guest's
kernel predates BPF links for struct_ops):

    POLYCC_VM_KERNEL=6.12.117+deb12-amd64 experiments/vm/polycc-vm run --results DIR -- \\
        python3 datapath/tests/guest_bpf.py

The host-side runner (datapath/tests/test_e2e.py --datapath bpf) asserts on DIR/e2e.json.
Scenarios, on guest_e2e.py's netem link (20 Mbit/s, 40 ms, one-BDP buffer):
  bpf_link    agent --datapath bpf + iperf3 -C polycc_bpf: utilization, the flow's reports seen
  bpf_kill    SIGKILL the agent mid-flow: the flow goes on in BPF's fallback (never frozen)
  bpf_ecn     1 % of packets CE-marked instead of dropped: the agent's CUBIC against in-kernel CUBIC
  bpf_random_loss  the same link dropping 1 % at random: the agent's CUBIC against in-kernel CUBIC
  bpf_reorder 5 % of data packets held 15 ms: the agent's CUBIC against in-kernel CUBIC, with the
              kernel's undos and those the agent was told of
  bpf_many_flows  64 flows (two packets of window each): the agent's CUBIC against in-kernel CUBIC,
              in timeouts and retransmitted segments (a loss episode's window reduced in step
              with the ACKs, as the kernel's PRR does)
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from guest_e2e import (AGENT, LINK_MBIT, RESULTS, Agent, cubic_against_kernel, dmesg, flows_seen, goodput_mbps,
                       interval_mbps, iperf, kernel_errors, reorder_against_kernel, run_scenarios,
                       scenario_many_flows, setup_link, sh)

CC = "polycc_bpf"


def registered() -> bool:
    return CC in sh("cat /proc/sys/net/ipv4/tcp_available_congestion_control").stdout


def bpf_agent(name: str, args: list[str]) -> Agent:
    # Private maps: nothing pinned outlives the scenario.
    agent = Agent(name, ["--bpf-no-pin", *args], ipc="bpf")
    deadline = time.time() + 10
    while not registered():
        if time.time() > deadline:
            agent.kill()
            raise RuntimeError(f"{CC} not registered 10 s after the agent started; see agent-{name}.log")
        time.sleep(0.1)
    return agent


def scenario_bpf_link() -> dict:
    agent = bpf_agent("bpf-link", ["--alg", "cubic"])
    result = iperf(10, cc=CC)
    agent.kill()
    recs = agent.records()
    return {
        "goodput_mbps": goodput_mbps(result),
        "link_mbps": LINK_MBIT,
        "utilization": goodput_mbps(result) / LINK_MBIT,
        "flows_created": len(flows_seen(recs)),
        "reports": len(recs),
        "unregistered_after_exit": not registered(),
    }


def scenario_bpf_kill() -> dict:
    kill_at = 3.0
    agent = bpf_agent("bpf-kill", ["--alg", "cubic", "--fallback-timeout-ms", "200"])
    before = dmesg()

    def killer():
        time.sleep(kill_at)
        agent.proc.send_signal(signal.SIGKILL)

    t = threading.Thread(target=killer)
    t.start()
    result = iperf(12, cc=CC)
    t.join()
    agent.kill()
    after = dmesg()[len(before):]
    return {
        "before_kill_mbps": interval_mbps(result, 1.0, kill_at),
        "after_kill_mbps": interval_mbps(result, kill_at + 1.0),
        "after_kill_utilization": interval_mbps(result, kill_at + 1.0) / LINK_MBIT,
        "kernel_errors": kernel_errors(after),
    }


SCENARIOS = {"bpf_link": scenario_bpf_link, "bpf_kill": scenario_bpf_kill,
             "bpf_ecn": lambda: cubic_against_kernel("bpf-ecn", bpf_agent, CC, ecn=True),
             "bpf_random_loss": lambda: cubic_against_kernel("bpf-random-loss", bpf_agent, CC, ecn=False),
             "bpf_reorder": lambda: reorder_against_kernel("bpf-reorder", bpf_agent, CC, fused=False),
             "bpf_many_flows": lambda: scenario_many_flows(start_agent=bpf_agent, cc=CC)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=list(SCENARIOS), help="run only these scenarios")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary: dict = {"kernel": os.uname().release, "datapath": "bpf",
                     "btf": os.path.exists("/sys/kernel/btf/vmlinux")}
    if os.geteuid() != 0:
        print("guest_bpf: run as root inside the guest (experiments/vm/polycc-vm run -- ...)", file=sys.stderr)
        return 2
    if not AGENT.exists():
        print(f"guest_bpf: {AGENT} missing: cargo build --release -p polycc-agent", file=sys.stderr)
        return 2
    setup_link()
    run_scenarios(SCENARIOS, args.only or list(SCENARIOS), summary)
    summary["final_kernel_errors"] = kernel_errors(dmesg())
    (RESULTS / "e2e.json").write_text(json.dumps(summary, indent=2))
    (RESULTS / "dmesg.txt").write_text(dmesg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
