#!/usr/bin/env python3
"""End-to-end tests of ccp.ko and polycc-portus, run as root inside the QEMU guest.

(Over 800 lines on purpose: the guest runs this one file with its stock python3 and nothing on
its import path, so the scenarios and their small helpers travel together.)

    experiments/vm/polycc-vm run --results DIR -- python3 datapath/tests/guest_e2e.py [--only NAME]

Each scenario writes its measurements into DIR/e2e.json (and its logs beside it); the host-side
runner (datapath/tests/test_e2e.py) asserts on them, so a failed assertion shows the numbers.
Scenarios:
  link        agent + iperf3 -C ccp over netem 20 Mbit/s, 40 ms: utilization, CREATE and reports seen
  pinned      the agent pins cwnd to 10 packets: the kernel's cwnd, goodput vs 10 MSS / measured RTT
  agent_kill  SIGKILL the agent mid-flow: goodput after the kill (fallback), kernel log clean,
              a restarted agent controls a new flow
  quiet_agent an agent that answers nothing for 12 s keeps the flow at its pinned window
  agent_hang  SIGSTOP the agent for 5 s: the flow falls back, and returns to it on SIGCONT
  agent_restart SIGKILL the agent and start another mid-flow: per-interval goodput, and the
              new agent adopts the flow at its current window
  scale       10,100 concurrent ccp flows with max_flows=10000: a CREATE per slot, the rest
              in-kernel and counted, the agent's memory and CPU per flow, all slots freed, rmmod
  many_flows  64 flows on the link, the agent's CUBIC against the kernel's: timeouts, retransmissions
  stress      64 flows for 60 s while the agent is killed and restarted 10 times, its policy
              rule is replaced 100 times and an unprivileged process floods netlink
  hostile     a message and an agent from an unprivileged process, then a corpus of malformed
              messages (over the module's transport: --ipc genl, its default, or usersock)
  vivace_loss Vivace through the agent on 50 Mbit/s, 30 ms, 1 % loss, beside in-kernel CUBIC
  ecn         1 % of packets CE-marked instead of dropped: the agent's CUBIC against in-kernel CUBIC
  random_loss the same link dropping 1 % at random, ECN off: the agent's CUBIC against in-kernel CUBIC
  policies    --policy rules: flows to 5201 and 5202 run Reno and fused BBR+CUBIC at once, as
              `polycc flows --json` shows while they run
  ipv6        a v6 flow matched by a v6 rule beside a v4 flow on the default, as `polycc flows`
              shows them
  startup     fused BBR+CUBIC's time to 80 % of the link against in-kernel BBR and CUBIC
  reorder     5 % of data packets held 15 ms: the agent's CUBIC and fused BBR+CUBIC against the
              kernel's CUBIC and BBR, with the kernel's undos and those the agent was told of
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import tomllib
from collections import Counter
from pathlib import Path

from guest_hostile import (HOSTILE_CORPUS, flood_result, nl_send, read_errno, select_ccp_errno,
                           start_flood, update_fields)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(os.environ.get("POLYCC_VM_RESULTS", "/tmp/polycc-e2e"))
MODULE = Path(os.environ.get("POLYCC_CCP_KO", ROOT / "datapath" / "ccp.ko"))
sys.path.insert(0, str(ROOT / "experiments"))
from runner.bins import bin_path  # noqa: E402

AGENT = Path(os.environ.get("POLYCC_AGENT") or bin_path("polycc-portus"))
POLYCC = AGENT.with_name("polycc")

STRESS_SECONDS = 60  # --stress-seconds
SND, RCV = "polycc-snd", "polycc-rcv"
SND_IP, RCV_IP = "10.77.0.1", "10.77.0.2"
SND_IP6, RCV_IP6 = "fd77::1", "fd77::2"  # experiments/vm/dumbbell.sh's defaults
LINK_MBIT, ONE_WAY_MS = 20, 20
# The link scenario's own one-off iperf3 server (setup_link's daemons hold 5201 and 5202).
LINK_PORT = 5210
MSS = 1448
# The module's transport (its ipc parameter): genl, its default, or usersock (portus 0.9's).
IPC = "genl"
KERNEL_ERRORS = ("BUG:", "WARNING:", "Oops", "general protection", "Call Trace", "KASAN", "UBSAN")


def sh(cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, check=check, text=True, capture_output=True, **kw)


def log(msg: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def dmesg() -> str:
    return sh("dmesg", check=False).stdout


def kernel_errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(k in line for k in KERNEL_ERRORS)]


# ---- set-up -----------------------------------------------------------------------------------

def setup_link(rate_mbps: int = LINK_MBIT, one_way_ms: int = ONE_WAY_MS, loss_pct: float = 0.0,
               ack_delay_ms: int | None = None, ack_jitter_ms: int = 0, ecn: bool = False) -> None:
    """experiments/vm/dumbbell.sh: a router's tbf at `rate_mbps` with a one-BDP buffer, the RTT
    (2 x one_way_ms, or one_way_ms + ack_delay_ms) as netem delay on the ACK path, optionally with
    a jitter (ACK aggregation, no reordering); with `ecn` the data path's random loss marks
    ECN-capable packets CE instead of dropping them."""
    env = dict(os.environ, SND=SND, RCV=RCV, SND_IP=SND_IP, RCV_IP=RCV_IP,
               RATE_MBIT=str(rate_mbps), DELAY_MS=str(one_way_ms), LOSS_PCT=str(loss_pct),
               ECN="1" if ecn else "0",
               ACK_DELAY_MS=str(one_way_ms if ack_delay_ms is None else ack_delay_ms),
               ACK_JITTER_MS=str(ack_jitter_ms))
    r = subprocess.run([str(ROOT / "experiments" / "vm" / "dumbbell.sh"), "up"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"dumbbell.sh up: {r.stderr.strip()}")
    sh(f"ip netns exec {RCV} iperf3 -s -D -p 5201")
    sh(f"ip netns exec {RCV} iperf3 -s -D -p 5202")
    wait_listening(RCV, 5201)
    wait_listening(RCV, 5202)


def wait_listening(ns: str, port: int, timeout_s: float = 60.0) -> None:
    """Wait until a server in `ns` listens on `port` (under emulation and host load, a server
    started a second ago may not be up yet: a fixed sleep made the client's connect race it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sh(f"ip netns exec {ns} ss -Hltn 'sport = :{port}'", check=False).stdout.strip():
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} in {ns} after {timeout_s:.0f} s")


def insmod(params: str = "") -> None:
    sh("rmmod ccp", check=False)
    r = sh(f"insmod {MODULE} ipc={IPC} {params}", check=False)
    if r.returncode != 0:
        raise RuntimeError(f"insmod {MODULE}: {r.stderr.strip()}")


class Agent:
    """polycc-portus on netlink, logging one JSON record per report."""

    def __init__(self, name: str, args: list[str], ipc: str = "netlink", cpu: int | None = None):
        """`cpu`: run the agent there whatever this process's own CPUs (one_vcpu() keeps those to 0)."""
        self.log_json = RESULTS / f"agent-{name}.jsonl"
        self.stderr = open(RESULTS / f"agent-{name}.log", "w")
        self.proc = subprocess.Popen(
            [str(AGENT), "--ipc", ipc, "--log-json", str(self.log_json), *args],
            stdout=self.stderr, stderr=subprocess.STDOUT,
            preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})))
        time.sleep(1.0)
        if self.proc.poll() is not None:
            raise RuntimeError(f"agent exited at start ({self.proc.returncode}); see {self.stderr.name}")

    def records(self) -> list[dict]:
        if not self.log_json.exists():
            return []
        out = []
        for line in self.log_json.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut by SIGKILL
        return out

    def kill(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.stderr.close()


def iperf(seconds: int, cc: str = "ccp", port: int = 5201, interval: float = 0.5,
          server_output: bool = False, host: str = RCV_IP) -> dict:
    extra = " --get-server-output" if server_output else ""
    r = sh(f"ip netns exec {SND} iperf3 -c {host} -p {port} -C {cc} -t {seconds} -i {interval} -J{extra}",
           check=False, timeout=seconds + 60)
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"iperf3 failed: {r.stderr.strip() or r.stdout[-500:]}")


def iperfs_at_once(seconds: int, flows: dict[str, dict], during=None) -> dict:
    """One iperf3 client per entry of `flows` (label -> `iperf` keyword arguments), all at once,
    `during()` run meanwhile. Returns each label's result, or the RuntimeError its client raised."""
    results: dict = {}

    def run(label: str, kw: dict) -> None:
        try:
            results[label] = iperf(seconds, **kw)
        except RuntimeError as e:
            results[label] = e

    threads = [threading.Thread(target=run, args=(label, kw)) for label, kw in flows.items()]
    for t in threads:
        t.start()
    if during:
        during()
    for t in threads:
        t.join()
    return results


def window_rate_mbps(packets: int, rtt_ms: float) -> float:
    """What a window of `packets` MSS-sized segments sends per round trip of `rtt_ms`, in Mbit/s."""
    return packets * MSS * 8 / (rtt_ms / 1000) / 1e6


def goodput_mbps(result: dict) -> float:
    return result["end"]["sum_received"]["bits_per_second"] / 1e6


def interval_mbps(result: dict, start_s: float, end_s: float | None = None) -> float:
    """Mean throughput of iperf3's intervals that start in [start_s, end_s)."""
    xs = [i["sum"]["bits_per_second"] for i in result["intervals"]
          if i["sum"]["start"] >= start_s and (end_s is None or i["sum"]["start"] < end_s)]
    return sum(xs) / len(xs) / 1e6 if xs else 0.0


def retransmits_after(result: dict, start_s: float) -> int:
    """The sender's retransmissions in iperf3's intervals that start at or after start_s."""
    return sum(i["sum"].get("retransmits", 0) for i in result["intervals"] if i["sum"]["start"] >= start_s)


def flows_seen(records: list[dict]) -> set:
    return {r.get("flow") for r in records if r.get("flow") is not None}


# ---- scenarios --------------------------------------------------------------------------------

def scenario_link() -> dict:
    from runner import fidelity  # noqa: E402  (the runner's reader of the module's histogram)
    from runner.guest import reset_ipc_rtt  # noqa: E402

    # The experiment runner's layout: the flows' packets on vCPU 0, the agent on vCPU 1. The agent
    # then answers a report on the other vCPU while the sending one is still between handing the
    # report to netlink and timing it: before ccp.ko timed a report ahead of sending it, that
    # update found no report to pair with and every later one paired with the report before its
    # own, one report interval late (CUBIC read 34.8 ms on a 30 ms link in every such run).
    two = (os.cpu_count() or 1) > 1
    agent = Agent("link", ["--alg", "cubic", *(["--cpu", "1"] if two else [])])
    with one_vcpu():
        reset_ipc_rtt()
        result = iperf_pinned(10, LINK_PORT)
        first = fidelity.parse_ipc_rtt(Path(fidelity.IPC_RTT_PARAM).read_text()) or {}
        # A second flow on the slots the first one freed: its round trips must pair each update
        # with its own report. libccp's close is a MEASURE with no fields, sent after the slot was
        # freed; counted as a report, it left one unanswered entry that every later flow on the
        # slot paired its updates with, one report interval (about an RTT) late.
        reset_ipc_rtt()
        iperf_pinned(4, LINK_PORT)
        reused = fidelity.parse_ipc_rtt(Path(fidelity.IPC_RTT_PARAM).read_text()) or {}
    agent.kill()
    recs = agent.records()
    return {
        "goodput_mbps": goodput_mbps(result),
        "link_mbps": LINK_MBIT,
        "utilization": goodput_mbps(result) / LINK_MBIT,
        "flows_created": len(flows_seen(recs)),
        "reports": len(recs),
        "mean_rtt_ms": result["end"]["streams"][0]["sender"].get("mean_rtt", 0) / 1000,
        "agent_on_own_vcpu": two,
        "ipc_reports": first.get("count", 0),
        "ipc_p50_us": first.get("p50_us", -1),
        "reused_slot_ipc_reports": reused.get("count", 0),
        "reused_slot_ipc_p50_us": reused.get("p50_us", -1),
        "rtt_ms": 2 * ONE_WAY_MS,
    }


def iperf_pinned(seconds: int, port: int) -> dict:
    """iperf(seconds) against a one-off server started here, so that it runs where this process
    may (the daemons of setup_link run anywhere)."""
    srv = subprocess.Popen(["ip", "netns", "exec", RCV, "iperf3", "-s", "-1", "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        return iperf(seconds, port=port)
    finally:
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()


def iperf_with_diag(label: str, seconds: int, from_s: float, at_launch=None, **iperf_kw) -> tuple[dict, list[dict]]:
    """iperf(seconds) with the kernel's view of the data connection sampled every 200 ms
    (sock_diag, written to RESULTS/<label>.diag.jsonl): the iperf result and the samples from
    `from_s` seconds into the run (the control connection, a few bytes, left out). `at_launch`
    is called just before iperf starts: a sampler takes a second or more to come up under TCG,
    so anything timed against the flow starts there."""
    from runner.guest import Sampler  # noqa: E402

    sh("modprobe tcp_diag", check=False)
    sampler = Sampler(0.2, RESULTS / f"{label}.diag.jsonl", sender_ns=SND, dst=RCV_IP)
    if at_launch:
        at_launch()
    launch = time.monotonic()
    result = iperf(seconds, **iperf_kw)
    rows, s0 = sampler.stop()
    start = launch - s0 + from_s
    return result, [r for r in rows if r["t_s"] >= start and r.get("acked_bytes", 0) > 1_000_000]


def window_at_srtt(cwnd_pkts: int, samples: list[dict]) -> dict:
    """A pinned window's rate at the round trip the guest measured (sock_diag's srtt: the netem
    delay plus the guest's own processing, a few ms under TCG and more under host load), beside
    the kernel's cwnd over the same samples."""
    cwnds = [r["cwnd_packets"] for r in samples]
    srtt_ms = sum(r["rtt_ms"] for r in samples) / len(samples) if samples else 2 * ONE_WAY_MS
    return {"samples": len(cwnds), "cwnd_min_packets": min(cwnds, default=None),
            "cwnd_max_packets": max(cwnds, default=None), "srtt_mean_ms": round(srtt_ms, 2),
            "srtt_max_ms": max((r["rtt_ms"] for r in samples), default=None),
            "window_rate_at_srtt_mbps": round(window_rate_mbps(cwnd_pkts, srtt_ms), 3)}


def scenario_pinned() -> dict:
    """The agent pins 10 packets. The kernel's cwnd must be 10 on every sample, and goodput that
    window's rate at the measured round trip: at the 40 ms set (the row until 2026-12-03) the
    guest's own delay under host load read as the window failing (CI: 0.84x, a 47.5 ms round
    trip)."""
    cwnd_pkts, settle_s = 10, 2.0
    agent = Agent("pinned", ["--pin-cwnd", str(cwnd_pkts)])
    result, samples = iperf_with_diag("pinned", 10, settle_s)
    agent.kill()
    window = window_at_srtt(cwnd_pkts, samples)
    expected = window_rate_mbps(cwnd_pkts, 2 * ONE_WAY_MS)
    measured = interval_mbps(result, settle_s)  # after the first RTTs
    return {"cwnd_packets": cwnd_pkts, "expected_mbps": expected, "goodput_mbps": measured,
            "goodput_ratio": measured / expected,
            "goodput_at_srtt_ratio": measured / window["window_rate_at_srtt_mbps"], **window,
            "reports": len(agent.records())}


def scenario_agent_kill() -> dict:
    kill_at = 3.0
    agent = Agent("kill", ["--alg", "cubic"])
    before = dmesg()
    out: dict = {}

    def killer():
        time.sleep(kill_at)
        agent.proc.send_signal(signal.SIGKILL)

    t = threading.Thread(target=killer)
    t.start()
    result = iperf(12)
    t.join()
    agent.kill()
    after = dmesg()[len(before):] if dmesg().startswith(before[:200]) else dmesg()
    out["before_kill_mbps"] = interval_mbps(result, 1.0, kill_at)
    out["after_kill_mbps"] = interval_mbps(result, kill_at)
    out["after_kill_utilization"] = out["after_kill_mbps"] / LINK_MBIT
    out["kernel_errors"] = kernel_errors(after)

    restarted = Agent("restart", ["--alg", "reno"])
    result2 = iperf(5, port=5202)
    restarted.kill()
    recs = restarted.records()
    out["restart_created_flows"] = len(flows_seen(recs))
    out["restart_reports"] = len(recs)
    out["restart_goodput_mbps"] = goodput_mbps(result2)
    return out


def intervals_mbps(result: dict) -> list[tuple[float, float]]:
    """(start s, Mbit/s) of every iperf3 interval, as the receiver counted them when the run has
    the server's output (the sender's count is what the application wrote into the socket)."""
    server = result.get("server_output_json") or result
    return [(i["sum"]["start"], i["sum"]["bits_per_second"] / 1e6) for i in server["intervals"]]


def series_mean(result: dict, start_s: float, end_s: float = 1e9) -> float:
    xs = [m for t, m in intervals_mbps(result) if start_s <= t < end_s]
    return sum(xs) / len(xs) if xs else 0.0


def counters(*names: str) -> dict:
    """Module counters by name; one the module does not have (an older build) reads -1."""
    return {n: module_counter(n) if Path(f"/sys/module/ccp/parameters/{n}").exists() else -1
            for n in names}


def delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in before}


LIVENESS_COUNTERS = ("fallback_entries", "ready_sent", "agents_gone")


def scenario_quiet_agent() -> dict:
    """An agent that pins 20 packets and then answers no report of the flow for 12 s.
    What it must keep is the window: the kernel's cwnd from sock_diag every 200 ms. Goodput per
    second follows it only as far as the guest keeps time: under host load a receiver's second
    can hold 0.7x of its bytes and the next one the rest (CI, 2026-11-27), so the per-second
    series is reported, its mean over the quiet seconds checked, and its worst second only
    against a stall floor."""
    cwnd_pkts, quiet_after_s, seconds = 20, 2, 14
    agent = Agent("quiet", ["--pin-cwnd", str(cwnd_pkts), "--quiet-after", f"{quiet_after_s}s"])
    before = counters(*LIVENESS_COUNTERS)
    # Samples from one second into the quiet period to the end of the run.
    result, samples = iperf_with_diag("quiet_agent", seconds, quiet_after_s + 1, interval=1.0, server_output=True)
    after = counters(*LIVENESS_COUNTERS)
    agent.kill()
    expected = window_rate_mbps(cwnd_pkts, 2 * ONE_WAY_MS)
    quiet = [m for t, m in intervals_mbps(result) if t >= quiet_after_s + 1]
    window = window_at_srtt(cwnd_pkts, samples)
    at_srtt = window["window_rate_at_srtt_mbps"]
    return {"expected_mbps": expected, "quiet_s": seconds - quiet_after_s, **window,
            "quiet_series_mbps": [round(m, 2) for m in quiet],
            "quiet_mean_ratio": sum(quiet) / len(quiet) / at_srtt,
            "quiet_min_ratio": min(quiet) / at_srtt, "quiet_max_ratio": max(quiet) / at_srtt,
            "counters": delta(before, after), "reports": len(agent.records())}


def scenario_agent_hang() -> dict:
    """SIGSTOP a pinning agent at 3 s, SIGCONT at 8 s. Once resumed, what the agent must hold
    again is the window: the kernel's cwnd from sock_diag, and goodput at that window's rate at
    the round trip the guest measured. Against the 40 ms set (the row until 2026-12-03) a guest
    slowed by host load read as the agent failing: CI, 2.08 Mbit/s steady for 3 s against
    2.90 (0.72x), which at 10 packets is a 56 ms round trip."""
    cwnd_pkts, stop_at, cont_at = 10, 3.0, 8.0
    agent = Agent("hang", ["--pin-cwnd", str(cwnd_pkts)])
    before = counters(*LIVENESS_COUNTERS)

    def stopper():
        time.sleep(stop_at)
        agent.proc.send_signal(signal.SIGSTOP)
        time.sleep(cont_at - stop_at)
        agent.proc.send_signal(signal.SIGCONT)

    t = threading.Thread(target=stopper)
    result, samples = iperf_with_diag("agent_hang", 13, cont_at + 2, at_launch=t.start, interval=1.0,
                                      server_output=True)
    t.join()
    after = counters(*LIVENESS_COUNTERS)
    agent.kill()
    pinned = window_rate_mbps(cwnd_pkts, 2 * ONE_WAY_MS)
    window = window_at_srtt(cwnd_pkts, samples)
    resumed = series_mean(result, cont_at + 2)
    return {"pinned_mbps": pinned,
            "series_mbps": [round(m, 2) for _, m in intervals_mbps(result)],
            "stopped_ratio": series_mean(result, stop_at + 2, cont_at) / pinned,
            "resumed_mbps": round(resumed, 3), "resumed_ratio": resumed / pinned,
            "resumed_at_srtt_ratio": resumed / window["window_rate_at_srtt_mbps"], **window,
            "counters": delta(before, after)}


def scenario_agent_restart() -> dict:
    """CUBIC through the agent; SIGKILL at 4 s, a new agent at 8 s; iperf3 runs 16 s."""
    kill_at, restart_at = 4.0, 8.0
    agent = Agent("restart-a", ["--alg", "cubic"])
    before = counters(*LIVENESS_COUNTERS)
    holder: dict = {}

    def restarter():
        time.sleep(kill_at)
        agent.proc.send_signal(signal.SIGKILL)
        t0 = time.time()
        while time.time() - t0 < 2.0 and counters("agents_gone")["agents_gone"] == before["agents_gone"]:
            time.sleep(0.01)
        holder["gone_latency_s"] = round(time.time() - t0, 3)
        time.sleep(max(0.0, restart_at - kill_at - (time.time() - t0)))
        holder["agent"] = Agent("restart-b", ["--alg", "cubic"])

    t = threading.Thread(target=restarter)
    t.start()
    result = iperf(16, interval=1.0, server_output=True)
    t.join()
    after = counters(*LIVENESS_COUNTERS)
    agent.kill()
    second = holder["agent"]
    second.kill()
    creates = [r for r in second.records() if r.get("event") == "create"]
    series = intervals_mbps(result)
    before_restart = [m for s, m in series if restart_at - 2 <= s < restart_at]
    after_restart = [m for s, m in series if restart_at <= s]
    return {
        "series_mbps": [round(m, 2) for _, m in series],
        "after_kill_min_utilization": min(m for s, m in series if s >= kill_at) / LINK_MBIT,
        "before_restart_mbps": sum(before_restart) / len(before_restart),
        "after_restart_min_mbps": min(after_restart),
        "adopted_init_cwnd_packets": [c.get("init_cwnd_bytes", 0) / MSS for c in creates],
        "adopted_installed_cwnd_packets": [c.get("cwnd_bytes", 0) / MSS for c in creates],
        "gone_latency_s": holder.get("gone_latency_s"),
        "counters": delta(before, after),
    }


def control_request(path: Path, request: dict) -> dict:
    """One request to the agent's control socket (a JSON line each way); {} when it fails."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(5)
            c.connect(str(path))
            c.sendall((json.dumps(request) + "\n").encode())
            return json.loads(c.makefile().readline() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}


def many_flows_run(where: str, alg: str, flows: int, seconds: int, start_agent=None,
                   cc: str = "ccp") -> tuple[dict, dict]:
    """`flows` flows for `seconds` of the kernel's `alg` (where="kernel"), ccp.ko's in-module
    fallback with no agent ("fallback"), or the agent's `alg` ("agent", through datapath `cc`,
    its agent started by `start_agent(name, args)`; ccp.ko's by default): the utilization, the
    poorest flow's share of a fair share, timeouts and retransmitted segments, and every nstat
    counter of the sender's namespace that moved (the kernel's names). Also
    experiments/many_flows.py's."""
    from runner.guest import counters as nstat  # noqa: E402

    agent = (start_agent or Agent)(f"{where}-{alg}", ["--alg", alg]) if where == "agent" else None
    before = nstat(SND)
    r = sh(f"ip netns exec {SND} iperf3 -c {RCV_IP} -C {alg if where == 'kernel' else cc} -P {flows} -t {seconds} -J",
           check=False, timeout=seconds + 120)
    after = nstat(SND)
    if agent:
        agent.kill()
    time.sleep(2)  # the last flows' FINs
    moved = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    try:
        totals = sorted(st["sender"]["bits_per_second"] / 1e6 for st in json.loads(r.stdout)["end"]["streams"])
    except (json.JSONDecodeError, KeyError) as e:
        return {"iperf_error": f"{e}: {r.stderr[-300:]}"}, moved
    sent, retransmitted = moved.get("TcpOutSegs", 0), moved.get("TcpRetransSegs", 0)
    recoveries, failed = moved.get("TcpExtTCPSackRecovery", 0), moved.get("TcpExtTCPSackRecoveryFail", 0)
    return {"utilization": sum(totals) / LINK_MBIT, "min_stream_fair_ratio": totals[0] / (LINK_MBIT / flows),
            "timeout_events": moved.get("TcpExtTCPTimeouts", 0), "retransmitted_packets": retransmitted,
            "sent_packets": sent, "retransmitted_frac": retransmitted / max(1, sent),
            # Fast recoveries that ended in a timeout anyway (their ACK clock stopped).
            "recovery_events": recoveries, "recovery_timeout_frac": failed / max(1, recoveries)}, moved


def scenario_many_flows(flows: int = 64, seconds: int = 20, start_agent=None, cc: str = "ccp") -> dict:
    """64 flows share the link (about two packets of window each): the agent's CUBIC against the
    kernel's, one after the other, in timeouts and retransmitted segments (nstat) and in the
    poorest flow's share. Restarting from the initial window after a timeout, as the agent did
    until 2026-12-02, doubled the timeouts and retransmitted 2.4x the kernel's segments."""
    return {"flows": flows, "duration_s": seconds,
            **{f"{where}_cubic": many_flows_run(where, "cubic", flows, seconds, start_agent, cc)[0]
               for where in ("kernel", "agent")}}


def stream_timeline(rows: list[dict], sport: int | None) -> dict:
    """One socket's sock_diag samples as columns (seconds since the sampler started)."""
    mine = [r for r in rows if r["sport"] == sport]
    keys = ("t_s", "ca_state", "cwnd_packets", "unacked_packets", "lost_packets", "retransmits",
            "rto_ms", "rto_backoff_events", "since_data_sent_ms", "pacing_rate_bytes_per_sec", "rtt_ms")
    return {"sport": sport, **{k: [r.get(k) for r in mine] for k in keys}}


def scenario_stress(algs: tuple[str, ...] = ("reno", "cubic", "vegas", "bbr")) -> dict:
    """Issue 16's stress run: 64 flows for 60 s (--stress-seconds); the agent SIGKILLed and
    restarted 10 times, its policy rule replaced 100 times through the control socket (cycling
    through `algs`), an unprivileged flood throughout. A shorter run keeps those rates (30 s: 5
    restarts, 50 changes)."""
    seconds, flows = STRESS_SECONDS, 64
    restarts, changes = round(10 * seconds / 60), round(100 * seconds / 60)
    policy = RESULTS / "stress.toml"
    policy.write_text('[[rule]]\nid = 1\ndst_ports = "5201"\npolicy = "cubic"\n')
    policy.chmod(0o600)
    control = Path("/run/polycc-e2e/stress.sock")
    args = ["--alg", "reno", "--policy", str(policy), "--control-socket", str(control)]
    before_dmesg = dmesg()
    before = counters(*LIVENESS_COUNTERS, "refused_unprivileged", "refused_messages")
    state: dict = {"agent": Agent("stress-0", args), "restarts": 0, "ok_changes": 0, "failed_changes": 0,
                   "policy_at_s": []}
    done = threading.Event()

    start = time.time()

    def restarter():
        for i in range(restarts):  # at 5, 10, ... 50 s (each restart takes ~1 s)
            if done.wait(max(0.0, start + (i + 1) * (seconds - 10) / restarts - time.time())):
                return
            state["agent"].proc.send_signal(signal.SIGKILL)
            state["agent"].kill()
            state["agent"] = Agent(f"stress-{i + 1}", args)
            state["restarts"] += 1

    def changer():
        i = 0
        while state["ok_changes"] < changes and not done.is_set():
            alg = algs[i % len(algs)]
            t = time.time()
            if i % 10 == 0:  # the CLI, as a user runs it (a process each: ~0.5 s in the guest)
                ok = sh(f"{POLYCC} --socket {control} policy replace 1 --dst-port 5201 --alg {alg} --apply-live",
                        check=False).returncode == 0
            else:  # the same request straight to the control socket, so 100 fit in the run
                ok = control_request(control, {"cmd": "policy_replace", "id": 1, "apply_live": True,
                                               "rule": {"dst_ports": "5201", "policy": alg}}).get("ok") is True
            state.setdefault("change_s", []).append(time.time() - t)
            if ok:
                state["ok_changes"] += 1
                state["policy_at_s"].append([round(time.time() - start, 1), alg])
                i += 1
                # Spread over the first 80 % of the run; behind schedule (a loaded host makes
                # each change slower), the next goes at once.
                time.sleep(max(0.0, start + state["ok_changes"] * 0.8 * seconds / changes - time.time()))
            else:  # the agent is restarting: try again shortly
                state["failed_changes"] += 1
                time.sleep(0.05)

    from runner.guest import Sampler  # noqa: E402

    sh("modprobe tcp_diag", check=False)
    # Every socket's tcp_info each second: where a starving flow is stuck (a timeout's backoff,
    # its pacing rate, its window) is then in e2e.json, not a question for the next run.
    sampler = Sampler(1.0, RESULTS / "stress.diag.jsonl", sender_ns=SND, dst=RCV_IP)
    flood = start_flood(seconds, IPC, state["agent"].proc.pid)
    threads = [threading.Thread(target=restarter), threading.Thread(target=changer)]
    for t in threads:
        t.start()
    result = sh(f"ip netns exec {SND} iperf3 -c {RCV_IP} -C ccp -P {flows} -t {seconds} -i 5 -J",
                check=False, timeout=seconds + 120)
    done.set()
    for t in threads:
        t.join()
    diag_rows, _ = sampler.stop()
    flood_out = flood_result(flood)
    after = counters(*LIVENESS_COUNTERS, "refused_unprivileged", "refused_messages")
    state["agent"].kill()
    out: dict = {"duration_s": seconds, "planned_restart_events": restarts, "planned_changes": changes,
                 "restarts": state["restarts"], "ok_changes": state["ok_changes"],
                 "failed_changes": state["failed_changes"], "flood": flood_out,
                 # Each change is a `polycc` process: on a loaded host the guest runs fewer.
                 "mean_change_s": round(sum(state.get("change_s", [0])) / max(1, len(state.get("change_s", []))), 2),
                 "counters": delta(before, after)}
    try:
        run = json.loads(result.stdout)
        per5 = [i["sum"]["bits_per_second"] / 1e6 for i in run["intervals"]]
        totals = [st["sender"]["bits_per_second"] / 1e6 for st in run["end"]["streams"]]
        fair = LINK_MBIT / flows
        # The five poorest streams, each with its 5 s series as fractions of a fair share: when
        # one starves, which seconds (a restart, a policy change) it lost.
        series = {st["socket"]: [] for st in run["intervals"][0]["streams"]}
        for interval in run["intervals"]:
            for st in interval["streams"]:
                series[st["socket"]].append(round(st["bits_per_second"] / 1e6 / fair, 2))
        poorest = sorted(zip(totals, (st["sender"]["socket"] for st in run["end"]["streams"])))[:5]
        ports = {c["socket"]: c["local_port"] for c in run["start"]["connected"]}
        out.update({"streams": len(totals), "min_5s_utilization": min(per5) / LINK_MBIT,
                    "per_5s_utilization": [round(v / LINK_MBIT, 3) for v in per5],
                    "utilization": sum(totals) / LINK_MBIT,
                    "min_stream_fair_ratio": min(totals) / fair,
                    "poorest_streams_5s_fair_ratios": [series.get(sock, []) for _, sock in poorest],
                    "poorest_streams_diag": [stream_timeline(diag_rows, ports.get(sock)) for _, sock in poorest],
                    "policy_at_s": state["policy_at_s"]})
    except (json.JSONDecodeError, KeyError, ValueError) as e:
        out["iperf_error"] = f"{e}: {result.stderr[-300:]}"
    # The policy file: still the one rule, with the last policy applied, and its mode kept.
    rules = tomllib.loads(policy.read_text()).get("rule", [])
    out["policy_file_mode"] = oct(policy.stat().st_mode & 0o777)
    out["policy_file_ok"] = (len(rules) == 1 and rules[0].get("id") == 1
                             and bool(state["policy_at_s"]) and rules[0].get("policy") == state["policy_at_s"][-1][1])
    # Closed flows release their slots once their sockets are gone (TIME_WAIT ones hold no
    # congestion control); 64 closing at once drain what their buffers still hold over the 20 Mbit/s
    # link first: a few seconds, and once in CI (usersock run) more than 20.
    t0 = time.time()
    while time.time() - t0 < 60 and module_counter("active_flows") > 0:
        time.sleep(0.2)
    out["remaining_flows"] = module_counter("active_flows")
    out["slots_freed_s"] = round(time.time() - t0, 1)
    rm = sh("rmmod ccp", check=False)
    out["rmmod_rc"] = rm.returncode
    out["rmmod_err"] = rm.stderr.strip()
    out["kernel_errors"] = kernel_errors(dmesg()[len(before_dmesg):])
    # The next scenario needs the module back; a module still in use is this scenario's finding
    # (remaining_flows, rmmod_rc above), not an exception that hides it.
    try:
        insmod()
    except RuntimeError as e:
        out["reload_error"] = str(e)
    return out


# Issue 16 item 5: a server draining any number of connections in one thread, and a client that
# opens argv[1] ccp connections, sends a little on each, prints {"opened_sockets", "ccp_sockets"} and holds them
# all open until its standard input closes.
SCALE_SERVER = (
    "import resource,selectors,socket\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE,(65536,65536))\n"
    "sel=selectors.DefaultSelector();s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
    "s.bind(('0.0.0.0',5301));s.listen(4096);s.setblocking(False);sel.register(s,selectors.EVENT_READ)\n"
    "while True:\n"
    "  for k,_ in sel.select():\n"
    "    if k.fileobj is s:\n"
    "      c,_=s.accept();c.setblocking(False);sel.register(c,selectors.EVENT_READ)\n"
    "    else:\n"
    "      try: d=k.fileobj.recv(65536)\n"
    "      except OSError: d=b''\n"
    "      if not d: sel.unregister(k.fileobj);k.fileobj.close()\n"
)
SCALE_CLIENT = (
    "import json,resource,selectors,socket,sys\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE,(65536,65536))\n"
    "n,ip=int(sys.argv[1]),sys.argv[2];ss=[];ok=0\n"
    "for b in range(0,n,500):\n"  # connects in parallel, 500 at a time: one RTT per batch
    "  sel=selectors.DefaultSelector()\n"
    "  for i in range(b,min(n,b+500)):\n"
    "    s=socket.socket();s.setsockopt(socket.IPPROTO_TCP,socket.TCP_CONGESTION,b'ccp');s.setblocking(False)\n"
    "    s.connect_ex((ip,5301));sel.register(s,selectors.EVENT_WRITE)\n"
    "  left=len(sel.get_map())\n"
    "  while left:\n"
    "    for k,_ in sel.select(timeout=30):\n"
    "      s=k.fileobj;sel.unregister(s);left-=1\n"
    "      if s.getsockopt(socket.SOL_SOCKET,socket.SO_ERROR)==0:\n"
    "        s.send(b'x'*2000);ss.append(s)\n"
    "        ok+=s.getsockopt(socket.IPPROTO_TCP,socket.TCP_CONGESTION,16).rstrip(b'\\0')==b'ccp'\n"
    "print(json.dumps({'opened_sockets':len(ss),'ccp_sockets':ok}),flush=True)\n"
    "sys.stdin.read()\n"
    "for s in ss: s.close()\n"
)


def proc_usage(pid: int) -> tuple[int, float]:
    """(resident bytes, CPU seconds) of a process."""
    rss = next(int(line.split()[1]) * 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return rss, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scenario_scale(slots: int = 1_000, extra: int = 100) -> dict:
    """`slots` + `extra` concurrent ccp flows with max_flows=`slots`: every one opens, the agent
    gets a CREATE per slot, the rest run in-kernel Reno and are counted; the agent's memory and
    CPU per flow; every slot free again once they close."""
    insmod(f"max_flows={slots}")
    agent = Agent("scale", ["--alg", "reno"])
    srv = subprocess.Popen(["ip", "netns", "exec", RCV, "python3", "-c", SCALE_SERVER],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(RCV, 5301)
    rss0, cpu0 = proc_usage(agent.proc.pid)
    before = counters("table_full", "fallback_entries", "send_enobufs", "agents_gone")
    t0 = time.time()
    client = subprocess.Popen(["ip", "netns", "exec", SND, "python3", "-c", SCALE_CLIENT, str(slots + extra), RCV_IP],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: dict = {"slots": slots, "flows": slots + extra}
    try:
        out.update(json.loads(client.stdout.readline() or "{}"))
        out["open_s"] = round(time.time() - t0, 1)
        # The agent's CREATEs trail the opens: wait until they stop coming.
        last, t_last = -1, time.time()
        while time.time() - t_last < 5 and time.time() - t0 < 300:
            n = len({r.get("flow") for r in agent.records() if r.get("event") == "create"})
            if n != last:
                last, t_last = n, time.time()
            time.sleep(1)
        out["agent_created_flows"] = last
        out["active_flows"] = module_counter("active_flows")
        rss1, cpu1 = proc_usage(agent.proc.pid)
        out["agent_rss_mib"] = round(rss1 / 2**20, 1)
        out["agent_per_flow_bytes"] = round((rss1 - rss0) / max(1, last))
        out["agent_cpu_per_flow_us"] = round((cpu1 - cpu0) * 1e6 / max(1, last))
    finally:
        client.stdin.close()
        client.wait(timeout=120)
    out["counters"] = delta(before, counters("table_full", "fallback_entries", "send_enobufs", "agents_gone"))
    t1 = time.time()
    while time.time() - t1 < 120 and module_counter("active_flows") > 0:
        time.sleep(0.5)
    out["remaining_flows"] = module_counter("active_flows")
    out["slots_freed_s"] = round(time.time() - t1, 1)
    srv.kill()
    agent.kill()
    rm = sh("rmmod ccp", check=False)
    out["rmmod_rc"] = rm.returncode
    if rm.returncode == 0:  # else the module stays, and the assertions say why
        insmod()
    return out


MODULE_PARAMS = Path("/sys/module/ccp/parameters")


def module_counter(name: str) -> int:
    return int((MODULE_PARAMS / name).read_text())


def scenario_hostile() -> dict:
    before = dmesg()
    out: dict = {}
    refused0, unpriv0 = module_counter("refused_messages"), module_counter("refused_unprivileged")
    # An unprivileged sender: the module must refuse it (netlink may let it send).
    out["unprivileged_send_errno"] = nl_send(update_fields(1, [(2, 4, 1)]), IPC, as_user=65534)
    time.sleep(0.2)
    new = dmesg()[len(before):]
    out["unprivileged_refused_logged"] = "without CAP_NET_ADMIN" in new
    out["unprivileged_refused_messages"] = module_counter("refused_unprivileged") - unpriv0
    # An unprivileged agent is told at start, not left running with every message refused.
    r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", str(AGENT),
                        "--ipc", "netlink", "--control-socket", "/tmp/polycc-unprivileged.sock"],
                       capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    out["unprivileged_agent_rc"] = r.returncode
    out["unprivileged_agent_says_why"] = "CAP_NET_ADMIN" in r.stderr
    # Issue 16 K7: any user could pick "ccp" and fill the module's flow table.
    out["unprivileged_select_errno"] = select_ccp_errno(65534)
    # Issue 16 K6: counters and the IPC histogram are root's (reading it walks the histogram).
    out["unprivileged_read_errno"] = {n: read_errno(f"/sys/module/ccp/parameters/{n}", 65534)
                                      for n in ("ipc_rtt_us", "sent_messages", "refused_messages")}
    # Sent: usersock takes a datagram without a word (0); genl answers each refusal (EINVAL).
    sent, errnos = 0, Counter()
    for name, msg in HOSTILE_CORPUS.items():
        e = nl_send(msg, IPC)
        errnos[e] += 1
        sent += e in (0, 22)
    time.sleep(0.5)
    new = dmesg()[len(before):]
    # Issue 16 K9: every message of a datagram is read, not only the first.
    if nl_send([HOSTILE_CORPUS["short"], HOSTILE_CORPUS["garbage_type"], HOSTILE_CORPUS["socket_id_zero"]], IPC) in (0, 22):
        sent += 3
    out["corpus_errnos"] = {str(k): v for k, v in errnos.items()}
    out["corpus_messages"] = len(HOSTILE_CORPUS) + 3
    out["corpus_sent_messages"] = sent
    out["logged_refusal_messages"] = new.count("refused an agent message")
    out["refused_messages"] = module_counter("refused_messages") - refused0
    out["kernel_errors"] = kernel_errors(new)
    # The module still works: a flow through an agent afterwards.
    agent = Agent("after-hostile", ["--alg", "cubic"])
    result = iperf(4)
    agent.kill()
    out["after_goodput_mbps"] = goodput_mbps(result)
    out["after_reports"] = len(agent.records())
    return out


def scenario_vivace_loss() -> dict:
    """Issue 5's kernel row: Vivace via the agent on 50 Mbit/s, 30 ms, 1 % random loss, beside
    in-kernel CUBIC on the same link."""
    rate, loss = 50, 1.0
    setup_link(rate, 15, loss)
    try:
        # POLYCC_E2E_VIVACE_ARGS: extra agent flags for experiments (e.g. --report-interval=30ms).
        agent = Agent("vivace", ["--alg", "vivace", *os.environ.get("POLYCC_E2E_VIVACE_ARGS", "").split()])
        viv = iperf(20)
        agent.kill()
        cub = iperf(20, cc="cubic")
    finally:
        setup_link()
    records = agent.records()
    return {"link_mbps": rate, "loss_frac": loss / 100,
            "vivace_mbps": goodput_mbps(viv), "vivace_utilization": goodput_mbps(viv) / rate,
            "cubic_mbps": goodput_mbps(cub), "cubic_utilization": goodput_mbps(cub) / rate,
            "vivace_reports": sum(r.get("event") == "report" for r in records),
            **whole_ms_rtt_minima(records), **vivace_diagnostics(records)}


def scenario_ecn() -> dict:
    return cubic_against_kernel("ecn", Agent, "ccp", ecn=True)


def scenario_random_loss() -> dict:
    return cubic_against_kernel("random-loss", Agent, "ccp", ecn=False)


def cubic_against_kernel(name: str, start_agent, cc: str, ecn: bool) -> dict:
    """The agent's CUBIC through datapath `cc`, then in-kernel CUBIC, where the bottleneck drops 1 %
    of the packets at random or, with `ecn` (issue 17's contract), marks them CE instead. Marks:
    with cong_control set the kernel's CWR state leaves the window to the agent, so a mark that did
    not reach it was never answered. Losses: parity with the kernel where windows are small.
    30 s each: at ~15 packets a window a 1 % mark or loss comes every few round trips, so 12 s
    past slow start held only ~50 reductions and each flow's mean swung by ~10 % on its own
    (agent/kernel 0.74-1.36 over 14 CI draws, and 1.61 once, with the kernel at its lowest, 3.65
    Mbit/s, and the agent at its highest, 5.86); 27 s cut that by 1.5x (0.88-1.20 over 8 draws,
    both datapaths, 2026-11-29).
    Both flows run at once, to ports 5201 and 5202: each is held by its marks or losses to ~3-4
    Mbit/s, so together they leave the 20 Mbit/s link's queue empty and neither limits the other,
    the pair sees the same host load (the guest's pacing and timers swing with it), and the
    scenario takes 30 s instead of 60."""
    mark_pct = 1.0
    seconds = 30
    setup_link(loss_pct=mark_pct, ecn=ecn)
    try:
        sh(f"ip netns exec {SND} sysctl -qw net.ipv4.tcp_ecn={1 if ecn else 0}")
        # The data path's random loss drops 1 % of the SYNs too (a SYN is not ECN-capable, so it is
        # dropped, not marked), and Linux retransmits a SYN without ECN's setup flags unless
        # tcp_ecn_fallback is off: about one flow in a hundred then ran without ECN, and its marks
        # were drops the agent never saw as marks (CI, 2026-12-01: ce_packets 0, 74 retransmits).
        sh(f"ip netns exec {SND} sysctl -qw net.ipv4.tcp_ecn_fallback={0 if ecn else 1}")
        dropped_before = module_counter("tsval_rtt_dropped") if (MODULE_PARAMS / "tsval_rtt_dropped").exists() else None
        agent = start_agent(name, ["--alg", "cubic"])
        results = iperfs_at_once(seconds, {"ours": {"cc": cc, "port": 5201}, "kernel": {"cc": "cubic", "port": 5202}})
        agent.kill()
    finally:
        setup_link()
    for label, r in results.items():
        if isinstance(r, Exception):
            raise RuntimeError(f"{name}: the {label} flow: {r}")
    ours, kernel = results["ours"], results["kernel"]
    records = agent.records()
    reports = [r for r in records if r.get("event") == "report"]
    return {"link_mbps": LINK_MBIT, "mark_frac": mark_pct / 100,
            "agent_mbps": goodput_mbps(ours), "kernel_mbps": goodput_mbps(kernel),
            # Past slow start, whose end (the first mark or loss, and the overshoot into the
            # buffer before it) is a draw for either flow.
            "agent_after_3s_mbps": interval_mbps(ours, 3.0), "kernel_after_3s_mbps": interval_mbps(kernel, 3.0),
            "agent_after_3s_retransmitted_packets": retransmits_after(ours, 3.0),
            "kernel_after_3s_retransmitted_packets": retransmits_after(kernel, 3.0),
            "agent_retransmitted_packets": ours["end"]["sum_sent"].get("retransmits", -1),
            "kernel_retransmitted_packets": kernel["end"]["sum_sent"].get("retransmits", -1),
            "ce_packets": sum(r.get("ce_packets", 0) for r in reports),
            "acked_packets": sum(r.get("acked_packets", 0) for r in reports),
            "marked_reports": sum(r.get("ce_packets", 0) > 0 for r in reports),
            "reports": len(reports), **whole_ms_rtt_minima(records),
            **({"tsval_rtt_dropped_events": module_counter("tsval_rtt_dropped") - dropped_before}
               if dropped_before is not None else {})}


def data_flow_records(records: list[dict]) -> list[dict]:
    """The agent's records of the flow with the most reports: iperf3's data connection, not its
    control connection."""
    flows = Counter(r["flow"] for r in records if r.get("event") == "report")
    data_flow = flows.most_common(1)[0][0] if flows else None
    return [r for r in records if r.get("flow") == data_flow]


def whole_ms_rtt_minima(records: list[dict]) -> dict:
    """The data flow's reports whose RTT minimum is a whole number of milliseconds. Where Karn's
    rule leaves an ACK no precise RTT sample (it covers a retransmission), Linux falls back to now -
    TSecr in millisecond TSval units, truncated; the datapaths keep such samples from the agent
    (docs/datapath.md, "RTT samples"). Before, on a 1 % loss link a 30 ms path's minimum read
    exactly 30.000 ms, under any real sample, in 4-5 % of Copa's reports; a precise minimum is a
    whole millisecond about one time in a thousand."""
    minima = [r["rtt_min_us"] for r in data_flow_records(records)
              if r.get("event") == "report" and r.get("rtt_samples")]
    return {"rtt_reports": len(minima), "whole_ms_rtt_min_reports": sum(m % 1000 == 0 for m in minima)}


def vivace_diagnostics(records: list[dict]) -> dict:
    """What the agent's --log-json says about the Vivace flow: its MI decisions by kind (brakes
    among them), the median report interval, and how much of the rate it set the flow delivered
    (the emulated guest's pacing falls short of high rates under host load)."""
    records = data_flow_records(records)
    events = Counter(r.get("trace", {}).get("event", "?") for r in records if r.get("event") == "mi")
    reports = [r for r in records if r.get("event") == "report" and r.get("rate_bytes_per_sec")]
    intervals = sorted(r["interval_us"] for r in reports)
    acked = sum(r["acked_bytes"] for r in reports)
    set_bytes = sum(r["rate_bytes_per_sec"] * r["interval_us"] / 1e6 for r in reports)
    return {"mi_events": dict(events),
            "median_report_interval_ms": intervals[len(intervals) // 2] / 1e3 if intervals else None,
            "delivered_over_set_ratio": acked / set_bytes if set_bytes else None,
            "load1": os.getloadavg()[0]}


def flows_under_rules(name: str, rules: str, flows: dict[str, tuple[str, int]]) -> tuple[dict, dict, list, "Agent"]:
    """An agent (default cubic) with the policy file `rules`, and one 8 s iperf3 flow per entry
    of `flows` (label -> (host, port)) at once; `polycc flows --json` is read 4 s in. Returns
    the iperf3 results by label, polycc's exit status and stderr, the flows it showed, and the
    (stopped) agent."""
    policy = RESULTS / f"{name}.toml"
    policy.write_text(rules)
    control = Path(f"/run/polycc-e2e/{name}.sock")
    agent = Agent(name, ["--alg", "cubic", "--policy", str(policy), "--control-socket", str(control)])
    shown = None

    def read_flows() -> None:
        nonlocal shown
        time.sleep(4.0)
        shown = sh(f"{POLYCC} --socket {control} flows --json", check=False)

    done = iperfs_at_once(8, {label: {"host": host, "port": port} for label, (host, port) in flows.items()}, read_flows)
    # A flow whose client failed is left out: the rows judge its goodput as nothing.
    results = {label: r for label, r in done.items() if not isinstance(r, Exception)}
    agent.kill()
    try:
        rows = json.loads(shown.stdout)
    except json.JSONDecodeError:
        rows = []
    return results, {"polycc_rc": shown.returncode, "polycc_stderr": shown.stderr.strip()}, rows, agent


def row_to_port(rows: list, port: int) -> dict:
    """The `polycc flows` row of the flow to `port` ({} when it was not shown)."""
    return next((f for f in rows if f.get("dst", "").endswith(f":{port}")), {})


def scenario_policies() -> dict:
    """Two flows to different ports at once get the policies of the rules their ports match;
    `polycc flows --json` (the control socket) is read while both run."""
    rules = ('[[rule]]\ndst_ports = "5201"\npolicy = "reno"\n\n'
             '[[rule]]\ndst_ports = "5202"\n'
             'policy = { fused = { pilot = { alg = "bbr" }, copilots = [{ alg = "cubic" }] } }\n')
    results, out, rows, _ = flows_under_rules("policies", rules, {"5201": (RCV_IP, 5201), "5202": (RCV_IP, 5202)})
    for port in (5201, 5202):
        f = row_to_port(rows, port)
        out[str(port)] = {k: f.get(k) for k in ("policy", "rule", "pilot", "copilots", "cwnd_bytes",
                                                 "rate_bytes_per_sec", "reports", "throughput_bytes_per_sec")}
        out[str(port)]["goodput_mbps"] = goodput_mbps(results[str(port)]) if str(port) in results else 0.0
    out["shown_flows"] = len(rows)
    return out


def scenario_ipv6() -> dict:
    """A flow over IPv6 matched by a v6 rule, beside a v4 flow on the default policy; `polycc
    flows --json` read while both run."""
    rules = '[[rule]]\ndst = "fd77::/64"\npolicy = "reno"\n'
    results, out, rows, agent = flows_under_rules("ipv6", rules, {"v6": (RCV_IP6, 5201), "v4": (RCV_IP, 5202)})
    for name, port in (("v6", 5201), ("v4", 5202)):
        f = row_to_port(rows, port)
        out[name] = {k: f.get(k) for k in ("src", "dst", "policy", "rule", "reports")}
        out[name]["goodput_mbps"] = goodput_mbps(results[name]) if name in results else 0.0
    creates = [r for r in agent.records() if r.get("event") == "create"]
    out["created_dsts"] = sorted({r.get("dst", "") for r in creates})
    return out


# 20 Mbit/s, RTT 100 ms (the demo's split: 15 ms data, 85 ms ACK path) with +/-20 ms of ACK jitter.
# Not the demo's +/-70 ms: there an early RTT sample near the path's 30 ms floor decides whether
# BBR's Startup stalls (target 2.885 bw min_rtt under the ~140 ms the window must cover), for
# in-kernel BBR in 9 of 21 reps and for the fused flow's BBR member alike, so "every rep against an
# independent run" fails for in-kernel BBR against itself in ~57 % of 3-rep runs
# (docs/kernel-parity.md). At +/-20 ms the floor is 80 ms and no draw stalls Startup.
STARTUP_DATA_MS, STARTUP_ACK_MS, STARTUP_JITTER_MS = 15, 85, 20
STARTUP_SECONDS, STARTUP_REPS = 8, 3
FUSED = ["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--fusion", "max", "--fuse-on", "cwnd"]


def reorder_events() -> int:
    """The sender namespace's TCP reorder counters (nstat's TcpExt*Reorder*), summed."""
    return tcp_counters("Reorder")


def kernel_undos() -> int:
    """The sender namespace's undo counters (nstat's TcpExt*Undo*: full, partial, DSACK and
    loss undos, not TCPDSACKIgnoredNoUndo), summed: each an undo of the flow's reduction."""
    return tcp_counters("Undo", but="NoUndo")


def tcp_counters(part: str, but: str = "") -> int:
    """nstat's counters in the sender namespace whose names hold `part` (and not `but`), summed."""
    from runner.guest import counters as nstat  # noqa: E402

    return sum(v for k, v in nstat(SND).items() if part in k and not (but and but in k))


@contextlib.contextmanager
def one_vcpu():
    """This process and what it starts (iperf3 servers and clients, the agent) on vCPU 0, as the
    experiment runner's runs are: veth queues packets on the sending CPU's backlog, and two vCPUs
    draining two backlogs reorder them. A reordering of ~1 ms read as 8 lost packets (3 SACKed,
    none retransmitted) in a CI run's fused start on 2026-11-28; the fusion's loss guard then
    held the window near the 80 packets in flight and the flow crawled at 12-15 Mbit/s for 10 s."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def scenario_startup() -> dict:
    """Issue 15's startup row: the fused flow's time to 80 % of the link against in-kernel BBR
    and CUBIC on the same link (reps interleaved so host load hits all alike). Delivered bytes
    come from sock_diag every 100 ms (experiments/runner/diag.py). The flows on one vCPU
    (one_vcpu), the agent on its own as the runner puts it; each flow's TCP reorder events, the guest's CPU stalls over it, and for the
    fused flow ccp.ko's report -> update round trips, are recorded beside its figures.

    Every fused rep is judged against the faster member's median over the reps, or against the
    faster member of its own rep when that one is slower (test_e2e): each run is an independent
    draw of a start whose spread is the members' own (CI, 2026-12-03: in-kernel BBR 1.80-3.01 s
    over three reps, CUBIC 1.85-4.36 s, the fused flow 1.94-2.59 s), the faster of two draws is
    the low tail of either, and a rep the guest slowed slows all three (CI, the same day: in-kernel
    BBR never got there, CUBIC 4.27 s, the fused flow 2.85 s)."""
    with one_vcpu():
        return startup_reps()


def startup_reps() -> dict:
    from runner import fidelity  # noqa: E402
    from runner.guest import Sampler, reset_ipc_rtt  # noqa: E402
    from startup import time_to_fraction  # noqa: E402

    setup_link(one_way_ms=STARTUP_DATA_MS, ack_delay_ms=STARTUP_ACK_MS, ack_jitter_ms=STARTUP_JITTER_MS)
    sh("modprobe tcp_bbr", check=False)
    sh("modprobe tcp_diag", check=False)
    # The agent on its own vCPU, as the experiment runner (and so make demo) runs it: on the flows'
    # vCPU it waited behind their softirqs and iperf3, IPC p50 4-7 ms and p95 15-41 ms, and the
    # fused start's report-paced growth with it.
    agent_cpu = 1 if (os.cpu_count() or 1) > 1 else None
    reps = []
    try:
        for rep in range(STARTUP_REPS):
            row = {}
            for scheme, cc in (("fused", "ccp"), ("bbr", "bbr"), ("cubic", "cubic")):
                agent = Agent(f"startup-{rep}", FUSED, cpu=agent_cpu) if cc == "ccp" else None
                # Up before the flow starts (a Python start takes ~1 s under TCG).
                sampler = Sampler(0.1, RESULTS / f"startup-{scheme}-{rep}.diag.jsonl", sender_ns=SND, dst=RCV_IP)
                reorders = reorder_events()
                reset_ipc_rtt()
                stalls = fidelity.StallSampler()
                launch = time.monotonic()
                result = iperf(STARTUP_SECONDS, cc=cc)
                stall = stalls.stop() or {}
                rows, s0 = sampler.stop()
                if agent:
                    agent.kill()
                # From iperf's launch: connecting and the agent's CREATE count too.
                t80 = time_to_fraction(rows, 0.8, LINK_MBIT, start=launch - s0)
                row[scheme] = {"t80_s": None if t80 is None else round(t80, 2),
                               "goodput_mbps": round(goodput_mbps(result), 2),
                               "reorder_events": reorder_events() - reorders,
                               "stall_p99_ms": stall.get("p99_ms"), "stall_max_ms": stall.get("max_ms")}
                if agent:
                    ipc = fidelity.parse_ipc_rtt(Path(fidelity.IPC_RTT_PARAM).read_text()) or {}
                    row[scheme] |= {"ipc_p50_us": ipc.get("p50_us"), "ipc_p95_us": ipc.get("p95_us")}
            # A kernel scheme that never got there took at least the whole run.
            best = min(row[k]["t80_s"] or STARTUP_SECONDS for k in ("bbr", "cubic"))
            row["best_member_t80_s"] = best
            if row["fused"]["t80_s"] is not None:
                row["t80_ratio"] = round(row["fused"]["t80_s"] / best, 3)
            reps.append(row)
    finally:
        setup_link()
    medians = {k: statistics.median(r[k]["t80_s"] or STARTUP_SECONDS for r in reps) for k in ("bbr", "cubic")}
    best_median = min(medians.values())
    for r in reps:
        if r["fused"]["t80_s"] is not None:
            r["median_t80_ratio"] = round(r["fused"]["t80_s"] / best_median, 3)
    return {"reps": reps, "member_median_t80_s": medians, "best_member_median_t80_s": best_median,
            "sample_s": 0.1, "agent_on_own_vcpu": agent_cpu is not None,
            "link": f"{LINK_MBIT} Mbit/s, RTT {STARTUP_DATA_MS + STARTUP_ACK_MS} ms +/-{STARTUP_JITTER_MS} ms"}


# reorder: 5 % of the data packets held 15 ms at the sender's egress (netem sends the rest at once,
# ahead of them). A held packet overtaken by 3 or more is marked lost, then the original arrives
# and the kernel undoes its reduction (timestamps or a DSACK). Once the kernel has seen reordering,
# RACK waits min RTT / 4 (25 ms) before marking, so the first held packet decides: overtaken by
# fewer than 3 (one among the last two of its flight), the flow meets no spurious loss. At RTT
# 100 ms the first falls in slow start, far below the 167 packets the link needs: before the undo
# signal the agent's CUBIC kept that cut and ran 5.97 Mbit/s against in-kernel CUBIC's 17.5 (2 %
# held 3 ms at RTT 40 ms: 18.66 against 18.9; held 30 ms, past RACK's window, the kernel's own
# CUBIC fell to 12.6; 2026-11-28).
REORDER_PCT, REORDER_MS, REORDER_SECONDS, REORDER_ONE_WAY_MS = 5, 15, 10, 50


def scenario_reorder() -> dict:
    return reorder_against_kernel("reorder", Agent, "ccp", fused=True)


def reorder_against_kernel(name: str, start_agent, cc: str, fused: bool) -> dict:
    """The agent's CUBIC (and, with `fused`, fused BBR+CUBIC) through datapath `cc` against
    in-kernel CUBIC (and BBR) on a path that reorders, one after another, on vCPU 0 (one_vcpu) so
    that netem is the only reordering. The kernel undoes its reductions for losses that were only
    reordering; the agent must hear of it (the undo signal) and take its own back, or its flows run
    on a window cut for nothing. Each flow's undos as the agent logged them, and its reorder events."""
    schemes = [("agent_cubic", cc, ["--alg", "cubic"]), ("kernel_cubic", "cubic", None)]
    if fused:
        schemes += [("fused", cc, FUSED), ("kernel_bbr", "bbr", None)]
    row: dict = {"link_mbps": LINK_MBIT, "rtt_ms": 2 * REORDER_ONE_WAY_MS,
                 "reorder": f"{REORDER_PCT} % of data packets held {REORDER_MS} ms",
                 "duration_s": REORDER_SECONDS}
    with one_vcpu():
        setup_link(one_way_ms=REORDER_ONE_WAY_MS)
        sh("modprobe tcp_bbr", check=False)
        sh(f"tc -n {SND} qdisc change dev veth-snd root handle 1: netem delay {REORDER_MS}ms "
           f"reorder {100 - REORDER_PCT}% limit 100000")
        try:
            for scheme, flow_cc, args in schemes:
                agent = start_agent(f"{name}-{scheme}", args) if args else None
                reorders, undos = reorder_events(), kernel_undos()
                result = iperf(REORDER_SECONDS, cc=flow_cc)
                if agent:
                    agent.kill()
                reports = [r for r in agent.records() if r.get("event") == "report"] if agent else []
                row[scheme] = {"goodput_mbps": round(goodput_mbps(result), 2),
                               "retransmitted_packets": result["end"]["sum_sent"].get("retransmits", -1),
                               "reorder_events": reorder_events() - reorders,
                               "kernel_undo_events": kernel_undos() - undos,
                               "undo_reports": sum(bool(r.get("undo")) for r in reports),
                               "lost_packets": sum(r.get("lost_packets", 0) for r in reports),
                               "reports": len(reports)}
        finally:
            setup_link()
    return row


SCENARIOS = {
    "link": scenario_link,
    "pinned": scenario_pinned,
    "agent_kill": scenario_agent_kill,
    "quiet_agent": scenario_quiet_agent,
    "agent_hang": scenario_agent_hang,
    "agent_restart": scenario_agent_restart,
    "scale": scenario_scale,
    "scale_10k": lambda: scenario_scale(10_000, 100),
    "stress": scenario_stress,
    "many_flows": scenario_many_flows,
    "hostile": scenario_hostile,
    "vivace_loss": scenario_vivace_loss,
    "ecn": scenario_ecn,
    "random_loss": scenario_random_loss,
    "policies": scenario_policies,
    "ipv6": scenario_ipv6,
    "startup": scenario_startup,
    "reorder": scenario_reorder,
}


BULKY_KEYS = ("poorest_streams_diag",)


def run_scenarios(scenarios: dict, names: list[str], summary: dict) -> None:
    """Run each named scenario into summary[name] (an exception becomes its "error"), timing it and
    writing RESULTS/e2e.json after each, so a guest that dies mid-way leaves what it measured."""
    for name in names:
        log(f"scenario {name}")
        t0 = time.time()
        try:
            summary[name] = scenarios[name]()
        except Exception as e:  # recorded, the host-side assertions report it
            summary[name] = {"error": f"{type(e).__name__}: {e}"}
        summary[name]["wall_s"] = round(time.time() - t0, 1)
        # The console line leaves out the per-second timelines (e2e.json keeps them): CI's log
        # would otherwise carry 20 kB of them on one line.
        log(f"{name}: {json.dumps({k: v for k, v in summary[name].items() if k not in BULKY_KEYS})}")
        (RESULTS / "e2e.json").write_text(json.dumps(summary, indent=2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=list(SCENARIOS), help="run only these scenarios")
    ap.add_argument("--ipc", choices=["genl", "usersock"], default="genl",
                    help="the module's transport (its ipc parameter); the agent follows it")
    ap.add_argument("--stress-seconds", type=int, default=60,
                    help="the stress scenario's length (restarts and policy changes scale with it)")
    args = ap.parse_args()
    global IPC, STRESS_SECONDS
    IPC = args.ipc
    if args.stress_seconds < 20:
        ap.error("--stress-seconds must be at least 20 (a restart every 2 s after the first 10)")
    STRESS_SECONDS = args.stress_seconds
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary: dict = {"kernel": os.uname().release, "ipc": IPC}
    if os.geteuid() != 0:
        print("guest_e2e: run as root inside the guest (experiments/vm/polycc-vm run -- ...)", file=sys.stderr)
        return 2
    for path in (MODULE, AGENT):
        if not path.exists():
            print(f"guest_e2e: {path} missing: build it first (make -C datapath, cargo build --release)", file=sys.stderr)
            return 2
    setup_link()
    insmod()
    summary["module_loaded"] = "ccp" in sh("cat /proc/sys/net/ipv4/tcp_available_congestion_control").stdout
    # vivace_loss is issue 5's kernel row, run on demand (`--only vivace_loss`) until it meets
    # its target, and scale_10k (issue 16's 10,000 flows) takes minutes in the guest; the rest
    # are the datapath's acceptance tests.
    run_scenarios(SCENARIOS, args.only or [n for n in SCENARIOS if n not in ("vivace_loss", "scale_10k")], summary)
    rm = sh("rmmod ccp", check=False)
    summary["final_rmmod_rc"] = rm.returncode
    summary["final_kernel_errors"] = kernel_errors(dmesg())
    (RESULTS / "e2e.json").write_text(json.dumps(summary, indent=2))
    (RESULTS / "dmesg.txt").write_text(dmesg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
