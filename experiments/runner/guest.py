"""The part of `--backend vm` that runs as root inside the QEMU guest (experiments/vm/polycc-vm).

The host writes a plan (plan.json: the runs, each with its link, scheme, flows and duration) into the
shared results folder and boots the guest with `experiments/run --in-guest PLAN`. For each run this
sets up the link with experiments/vm/dumbbell.sh (only when it differs from the previous run's),
starts polycc-portus for agent schemes (with --log-json), one iperf3 server per flow, samples the
sender's TCP sockets as `ss -tin` would (diag.py: sock_diag netlink, one process for the whole run), applies bandwidth changes with `tc qdisc change`, and writes
raw/<run id>.json: the iperf3 JSON of every flow, the ss samples, the nstat reorder counters and,
for overhead runs, CPU time. Each new link is probed with UDP both ways for reordering. The host
turns the raw files into metrics (vm_backend.py), so nothing here needs numpy.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DUMBBELL = ROOT / "experiments" / "vm" / "dumbbell.sh"
AGENT = ROOT / "target" / "release" / "polycc-portus"
SND, RCV = "xp-snd", "xp-rcv"
SND_IP, RCV_IP = "10.77.0.1", "10.77.0.2"
BASE_PORT = 5201
KERNEL_PACED_MAX_RATE = "10G"  # iperf3 --fq-rate (bit/s) for kernel_paced schemes: a cap no link here reaches
# With ACK-path jitter the data path keeps kernel_demo.py's 15 ms and the ACK path the rest of the RTT.
DATA_DELAY_WITH_JITTER_MS = 15
BURST_BYTES = 15000  # >= rate / HZ at 20 Mbit/s (dumbbell.sh's default), scaled up for faster links


def log(msg: str) -> None:
    print(f"[runner-guest {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


def ns(name: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", name, *cmd]


def link_env(link: dict) -> dict:
    rtt, dev = float(link["rtt_ms"]), float(link["rtt_dev_ms"])
    data = min(rtt / 2, DATA_DELAY_WITH_JITTER_MS) if dev > 0 else rtt / 2
    rate = float(link["bandwidth_mbit"])
    return {
        "SND": SND,
        "RCV": RCV,
        "SND_IP": SND_IP,
        "RCV_IP": RCV_IP,
        "RATE_MBIT": str(max(round(rate), 1)),
        "DELAY_MS": str(round(data)),
        "ACK_DELAY_MS": str(round(rtt - data)),
        "ACK_JITTER_MS": str(round(dev)),
        "LOSS_PCT": f"{100 * float(link['loss']):g}",
        "BUFFER_BYTES": str(int(link["buffer_bytes"])),
        "BURST_BYTES": str(burst_bytes(rate)),
    }


def burst_bytes(rate_mbit: float) -> int:
    return max(BURST_BYTES, int(rate_mbit * 1e6 / 8 / 250) + 3000)


class Tc:
    """One `tc -batch -` per namespace, started with the link: a step mid-run is a line written to it,
    not a tc process to start (which takes seconds under TCG and steals the flows' CPU meanwhile)."""

    def __init__(self):
        self.procs = {
            n: subprocess.Popen(
                ["tc", "-n", n, "-force", "-batch", "-"],
                stdin=subprocess.PIPE,
                text=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for n in (SND, RCV)
        }

    def send(self, netns: str, line: str) -> None:
        p = self.procs[netns]
        p.stdin.write(line + "\n")
        p.stdin.flush()

    def set_rate(self, rate_mbit: float, buffer_bytes: int) -> None:
        """Change the bottleneck rate (both directions' tbf; the buffer stays)."""
        for n, dev in ((SND, "veth-snd"), (RCV, "veth-rcv")):
            self.send(
                n,
                f"qdisc change dev {dev} parent 1:1 handle 10: tbf rate {rate_mbit:g}mbit "
                f"burst {burst_bytes(rate_mbit)} limit {buffer_bytes}",
            )

    def set_delay_loss(self, rtt_ms: float, loss: float) -> None:
        """A --random-changes redraw: data and ACK delay RTT/2 each, loss on the data path."""
        self.send(
            SND,
            f"qdisc change dev veth-snd root handle 1: netem delay {rtt_ms / 2:g}ms "
            f"loss random {100 * loss:g}% limit 100000",
        )
        self.send(RCV, f"qdisc change dev veth-rcv root handle 1: netem delay {rtt_ms / 2:g}ms limit 100000")

    def close(self) -> None:
        for p in self.procs.values():
            p.stdin.close()
            p.wait(timeout=10)


def counters() -> dict[str, int]:
    out = {}
    for line in sh(ns(SND, "nstat", "-a", "-z"), check=False).stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            out[f[0]] = int(f[1])
    return out


def udp_probe(rate_mbit: float) -> dict:
    """UDP below the rate both ways: datagrams the link delivered out of order (the jittered ACK path is
    the reverse one)."""
    out = {}
    for name, extra in (("data_path", []), ("ack_path", ["-R"])):
        r = sh(
            ns(
                SND,
                "iperf3",
                "-c",
                RCV_IP,
                "-p",
                str(BASE_PORT),
                "-u",
                "-b",
                f"{max(rate_mbit * 0.5, 1):g}M",
                "-l",
                "1200",
                "-t",
                "2",
                "-J",
                *extra,
            ),
            check=False,
            timeout=60,
        )
        try:
            u = json.loads(r.stdout)["end"]["streams"][0]["udp"]
            out[name] = {"packets": u.get("packets"), "out_of_order": u.get("out_of_order")}
        except (json.JSONDecodeError, KeyError, IndexError):
            out[name] = {"error": (r.stderr or r.stdout)[-300:]}
    return out


class Sampler:
    """diag.py (sock_diag netlink) in the sender's namespace, sampling every interval_s into a JSON-lines file."""

    def __init__(self, interval_s: float, path: Path):
        self.path = path
        self.proc = subprocess.Popen(
            ns(
                SND,
                sys.executable,
                str(Path(__file__).with_name("diag.py")),
                "--dst",
                RCV_IP,
                "--interval",
                f"{interval_s:g}",
                "--out",
                str(path),
            )
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (path.exists() and path.read_text().strip()):
            time.sleep(0.1)

    def stop(self) -> tuple[list[dict], float]:
        """The samples and the sampler's start on CLOCK_MONOTONIC."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        if not lines:
            return [], 0.0
        t0 = json.loads(lines[0])["t0_monotonic"]
        out = []
        for line in lines[1:]:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # the last line, cut by SIGTERM
        return out, t0


def cpu_times() -> dict[str, int]:
    """/proc/stat's first line in clock ticks."""
    f = Path("/proc/stat").read_text().splitlines()[0].split()
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return dict(zip(names, map(int, f[1:9])))


def proc_cpu_ticks(pid: int) -> int:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime + stime (fields 14 and 15)


def run_one(run: dict, raw_dir: Path, state: dict) -> None:
    link, flows, dur = run["link"], run["flows"], float(run["duration_s"])
    env_key = json.dumps(link_env(link), sort_keys=True)
    if state.get("link") != env_key:
        sh([str(DUMBBELL), "up"], env=dict(os.environ, **link_env(link)))
        n_ports = max(run.get("max_flows", 1), 1)
        for i in range(n_ports):
            sh(ns(RCV, "iperf3", "-s", "-D", "-p", str(BASE_PORT + i)))
        time.sleep(0.5)
        state["link"] = env_key
        state["probe"] = udp_probe(float(link["bandwidth_mbit"]))
        log(f"link {link_env(link)}: udp probe {state['probe']}")
    out: dict = {"id": run["id"], "link_env": link_env(link), "udp_probe": state["probe"]}
    agent = None
    if run.get("agent"):
        # The per-report log goes to the guest's tmpfs during the run (a write per report over 9p would
        # cost the agent CPU under TCG) and is copied to the results afterwards.
        agent_log = Path("/tmp") / f"{run['id']}.agent.jsonl"
        err = open(raw_dir / f"{run['id']}.agent.log", "w")
        cmd = [str(AGENT), "--ipc", "netlink", *run["agent"]]
        if run.get("agent_log", True):
            cmd += ["--log-json", str(agent_log)]
        agent = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT)
        time.sleep(1.0)
        if agent.poll() is not None:
            out["error"] = f"polycc-portus exited at start ({agent.returncode}); see {err.name}"
            (raw_dir / f"{run['id']}.json").write_text(json.dumps(out))
            return
    cc = "ccp" if run.get("agent") else run["kernel"]
    tc = Tc() if link.get("bw_changes") or link.get("random_changes") else None
    sampler = Sampler(run["sample_s"], Path("/tmp") / f"{run['id']}.ss.jsonl") if run.get("sample_s") else None
    before, cpu0 = counters(), cpu_times()
    agent_ticks0 = proc_cpu_ticks(agent.pid) if agent else 0
    t0 = time.monotonic()
    applied: list[dict] = []
    changer = threading.Thread(target=apply_changes, args=(tc, link, t0, sampler, dur, applied), daemon=True)
    changer.start()
    procs = []
    stagger = float(flows.get("stagger_s", 0))
    parallel = int(flows.get("parallel", 1))
    for i in range(int(flows["count"])):
        start = i * stagger
        delay = t0 + start - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        secs = max(dur - start, 1.0)
        cmd = ns(
            SND,
            "iperf3",
            "-c",
            RCV_IP,
            "-p",
            str(BASE_PORT + i),
            "-C",
            cc,
            "-t",
            f"{secs:g}",
            "-i",
            "0.5",
            "-J",
            *(["-P", str(parallel)] if parallel > 1 else []),
            # SO_MAX_PACING_RATE far above the link turns on TCP's internal pacing at Linux's
            # 2x / 1.2x cwnd / srtt, as ccp.ko does for every agent flow (SK_PACING_NEEDED).
            *(["--fq-rate", KERNEL_PACED_MAX_RATE] if run.get("kernel_paced") else []),
        )
        procs.append((i, start, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    results = []
    for i, start, p in procs:
        stdout, stderr = p.communicate(timeout=dur + 120)
        try:
            results.append({"flow": i, "start_s": start, "port": BASE_PORT + i, "iperf": json.loads(stdout)})
        except json.JSONDecodeError:
            results.append(
                {"flow": i, "start_s": start, "port": BASE_PORT + i, "error": stderr[-400:] or stdout[-400:]}
            )
    wall = time.monotonic() - t0
    cpu1, after = cpu_times(), counters()
    samples, sampler_t0 = sampler.stop() if sampler else ([], t0)
    if agent:
        out["agent_cpu_ticks"] = proc_cpu_ticks(agent.pid) - agent_ticks0
        agent.terminate()
        try:
            agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            agent.kill()
    if agent and agent_log.exists():
        shutil.copy(agent_log, raw_dir / agent_log.name)
        out["agent_reports"] = sum(1 for line in agent_log.read_text().splitlines() if '"report"' in line)
    changer.join(timeout=10)
    if tc:
        tc.set_rate(float(link["bandwidth_mbit"]), int(link["buffer_bytes"]))  # the next run starts from the base link
        if link.get("random_changes"):
            tc.set_delay_loss(float(link["rtt_ms"]), float(link["loss"]))
        tc.close()
    out["flows"] = results
    out["changes_applied"] = applied  # seconds from the start at which each step was handed to tc
    out["ss"] = samples
    out["ss_t0_offset_s"] = sampler_t0 - t0
    out["tcp_counters"] = {
        k: after.get(k, 0) - before.get(k, 0)
        for k in after
        if "Reorder" in k or k in ("TcpRetransSegs", "TcpOutSegs", "TcpExtTCPLostRetransmit")
    }
    out["cpu_ticks"] = {k: cpu1[k] - cpu0[k] for k in cpu0}
    out["clk_tck"] = os.sysconf("SC_CLK_TCK")
    out["wall_s"] = wall
    out["cpus"] = os.cpu_count()
    (raw_dir / f"{run['id']}.json").write_text(json.dumps(out))


def first_sample_time(sampler: Sampler | None, t0: float, timeout_s: float = 10.0) -> float:
    """When the sampler first saw a connection to the receiver (iperf3 takes 0.5-1.5 s to connect under
    TCG); t0 without a sampler."""
    if sampler is None:
        return t0
    header = sampler.path.stat().st_size if sampler.path.exists() else 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sampler.path.exists() and sampler.path.stat().st_size > header:
            return time.monotonic()
        time.sleep(0.05)
    return t0


def apply_changes(
    tc: Tc | None, link: dict, run_t0: float, sampler: Sampler | None, dur: float, applied: list[dict]
) -> None:
    """The scenario's bandwidth steps (and random redraws), scheduled from the first flow's connection;
    `applied` gets when each was handed to tc, in seconds since the run's start (the step the metrics use)."""
    if tc is None:
        return
    t0 = first_sample_time(sampler, run_t0)
    for c in link.get("bw_changes", []):
        delay = t0 + float(c["at_s"]) - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        tc.set_rate(float(c["mbit"]), int(link["buffer_bytes"]))
        applied.append({"at_s": time.monotonic() - run_t0, "mbit": float(c["mbit"]), "scheduled_s": float(c["at_s"])})
        log(f"bandwidth -> {c['mbit']} Mbit/s at {applied[-1]['at_s']:.2f} s")
    rc = link.get("random_changes")
    if rc:
        rng = random.Random(link.get("seed", 1))
        t = 0.0
        while t < dur:
            delay = t0 + t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            bw = rng.uniform(*rc["bw_mbit"])
            rtt = rng.uniform(*rc["rtt_ms"])
            loss = rng.uniform(*rc["loss"])
            tc.set_rate(bw, int(link["buffer_bytes"]))
            tc.set_delay_loss(rtt, loss)
            applied.append(
                {"at_s": time.monotonic() - run_t0, "mbit": bw, "rtt_ms": rtt, "loss": loss, "scheduled_s": t}
            )
            t += float(rc["every_s"])


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    raw_dir = Path(plan["raw_dir"])
    raw_dir.mkdir(parents=True, exist_ok=True)
    module = os.environ.get("POLYCC_CCP_KO", str(ROOT / "datapath" / "ccp.ko"))
    sh(["modprobe", "tcp_bbr"], check=False)
    sh(["modprobe", "tcp_diag"], check=False)  # sock_diag for TCP: the sampler's (and ss's) tcp_info
    sh(["rmmod", "ccp"], check=False)
    r = sh(["insmod", module], check=False)
    if r.returncode != 0:
        log(f"insmod {module}: {r.stderr.strip()}")
        return 3
    if plan.get("one_cpu"):
        # Every process of the runs (iperf3, the agent, the sampler) and so their softirq work on vCPU 0:
        # veth hands packets to the sending CPU's backlog, and two vCPUs draining two backlogs can reorder.
        os.sched_setaffinity(0, {0})
        log("pinned to vCPU 0")
    state: dict = {}
    for i, run in enumerate(plan["runs"]):
        if run.get("ipc_bench"):
            run_ipc_bench(run, raw_dir, module)
            state.pop("link", None)
            continue
        log(f"run {i + 1}/{len(plan['runs'])}: {run['id']}")
        try:
            run_one(run, raw_dir, state)
        except Exception as e:  # recorded; the host reports it and goes on
            (raw_dir / f"{run['id']}.json").write_text(
                json.dumps({"id": run["id"], "error": f"{type(e).__name__}: {e}"})
            )
    sh([str(DUMBBELL), "down"], check=False, env=dict(os.environ, SND=SND, RCV=RCV))
    sh(["rmmod", "ccp"], check=False)
    return 0


def run_ipc_bench(run: dict, raw_dir: Path, module: str) -> None:
    """experiments/ipc_bench.py's guest half (it loads ccp.ko and makes its own link), then ccp.ko again."""
    import argparse

    sys.path.insert(0, str(ROOT / "experiments"))
    import ipc_bench

    log(f"IPC benchmark: {run['messages']} round trips")
    try:
        ipc_bench.in_guest(argparse.Namespace(messages=run["messages"], max_seconds=run["max_seconds"]))
    except Exception as e:
        (raw_dir / f"{run['id']}.json").write_text(json.dumps({"id": run["id"], "error": f"{type(e).__name__}: {e}"}))
    src = Path(os.environ["POLYCC_VM_RESULTS"]) / "ipc-bench.json"
    if src.exists():
        (raw_dir / f"{run['id']}.json").write_text(
            json.dumps({"id": run["id"], "ipc_bench": json.loads(src.read_text())})
        )
    sh(["rmmod", "ccp"], check=False)
    sh(["insmod", module], check=False)
