"""The part of `--backend vm` that runs as root inside the QEMU guest (experiments/vm/polycc-vm).

The host writes a plan (plan.json: the runs, each with its link, scheme, flows and duration) into the
shared results folder and boots the guest with `experiments/run --in-guest PLAN`. For each run this
sets up the link with experiments/vm/dumbbell.sh (only when it differs from the previous run's),
starts polycc-portus for agent schemes (with --log-json), one iperf3 server per flow, samples `ss
-tin` in the sender's namespace, applies bandwidth changes with `tc qdisc change`, and writes
raw/<run id>.json: the iperf3 JSON of every flow, the ss samples, the nstat reorder counters and,
for overhead runs, CPU time. Each new link is probed with UDP both ways for reordering. The host
turns the raw files into metrics (vm_backend.py), so nothing here needs numpy.
"""
from __future__ import annotations

import json
import os
import random
import re
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
# With ACK-path jitter the data path keeps kernel_demo.py's 15 ms and the ACK path the rest of the RTT.
DATA_DELAY_WITH_JITTER_MS = 15
BURST_BYTES = 15000  # >= rate / HZ at 20 Mbit/s (dumbbell.sh's default), scaled up for faster links
SS_FIELDS = re.compile(r"\b(bytes_acked|rtt|cwnd|unacked|mss|delivery_rate|retrans)[: ]([\d./]+)")


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
    return {"SND": SND, "RCV": RCV, "SND_IP": SND_IP, "RCV_IP": RCV_IP,
            "RATE_MBIT": str(max(int(round(rate)), 1)), "DELAY_MS": str(int(round(data))),
            "ACK_DELAY_MS": str(int(round(rtt - data))), "ACK_JITTER_MS": str(int(round(dev))),
            "LOSS_PCT": f"{100 * float(link['loss']):g}", "BUFFER_BYTES": str(int(link["buffer_bytes"])),
            "BURST_BYTES": str(burst_bytes(rate))}


def burst_bytes(rate_mbit: float) -> int:
    return max(BURST_BYTES, int(rate_mbit * 1e6 / 8 / 250) + 3000)


def set_rate(rate_mbit: float, buffer_bytes: int) -> None:
    """Change the bottleneck rate mid-run (both directions' tbf; the buffer stays)."""
    for n, dev in ((SND, "veth-snd"), (RCV, "veth-rcv")):
        sh(["tc", "-n", n, "qdisc", "change", "dev", dev, "parent", "1:1", "handle", "10:", "tbf",
            "rate", f"{rate_mbit:g}mbit", "burst", str(burst_bytes(rate_mbit)), "limit", str(buffer_bytes)], check=False)


def set_delay_loss(rtt_ms: float, loss: float) -> None:
    """Redraw of --random-changes: data and ACK delay RTT/2 each, loss on the data path."""
    sh(["tc", "-n", SND, "qdisc", "change", "dev", "veth-snd", "root", "handle", "1:", "netem", "delay",
        f"{rtt_ms / 2:g}ms", "loss", "random", f"{100 * loss:g}%", "limit", "100000"], check=False)
    sh(["tc", "-n", RCV, "qdisc", "change", "dev", "veth-rcv", "root", "handle", "1:", "netem", "delay",
        f"{rtt_ms / 2:g}ms", "limit", "100000"], check=False)


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
        r = sh(ns(SND, "iperf3", "-c", RCV_IP, "-p", str(BASE_PORT), "-u", "-b", f"{max(rate_mbit * 0.5, 1):g}M",
                  "-l", "1200", "-t", "2", "-J", *extra), check=False, timeout=60)
        try:
            u = json.loads(r.stdout)["end"]["streams"][0]["udp"]
            out[name] = {"packets": u.get("packets"), "out_of_order": u.get("out_of_order")}
        except (json.JSONDecodeError, KeyError, IndexError):
            out[name] = {"error": (r.stderr or r.stdout)[-300:]}
    return out


def parse_ss(text: str, t: float) -> list[dict]:
    """`ss -tinH` output -> one sample per connection: t, dport, bytes_acked, rtt_ms, cwnd, unacked, mss."""
    samples, cur = [], None
    for line in text.splitlines():
        if not line.startswith((" ", "\t")):
            # "ESTAB 0 0 local:port peer:port", without the state column when ss filters on a state.
            addrs = [w for w in line.split() if ":" in w and w.rsplit(":", 1)[1].isdigit()]
            cur = {"t": t, "sport": int(addrs[0].rsplit(":", 1)[1]), "dport": int(addrs[1].rsplit(":", 1)[1])} \
                if len(addrs) >= 2 else None
            continue
        if cur is None:
            continue
        for k, v in SS_FIELDS.findall(line):
            if k == "rtt":
                cur["rtt_ms"] = float(v.split("/")[0])
            elif k == "delivery_rate":
                continue
            elif k == "retrans":
                cur["retrans"] = int(v.split("/")[-1])
            else:
                cur[k] = int(float(v))
        samples.append(cur)
        cur = None
    return samples


class Sampler(threading.Thread):
    """`ss -tin` in the sender's namespace every interval_s."""

    def __init__(self, interval_s: float):
        super().__init__(daemon=True)
        self.interval_s, self.samples, self.stop_flag, self.t0 = interval_s, [], threading.Event(), time.monotonic()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            t = time.monotonic() - self.t0
            r = sh(ns(SND, "ss", "-tinH", "state", "established", "dst", RCV_IP), check=False)
            self.samples.extend(parse_ss(r.stdout, t))
            self.stop_flag.wait(max(self.interval_s - (time.monotonic() - self.t0 - t), 0.0))


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
        agent_log = raw_dir / f"{run['id']}.agent.jsonl"
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
    sampler = Sampler(run["sample_s"]) if run.get("sample_s") else None
    before, cpu0 = counters(), cpu_times()
    agent_ticks0 = proc_cpu_ticks(agent.pid) if agent else 0
    if sampler:
        sampler.start()
    t0 = time.monotonic()
    applied: list[dict] = []
    changer = threading.Thread(target=apply_changes, args=(link, t0, dur, applied), daemon=True)
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
        cmd = ns(SND, "iperf3", "-c", RCV_IP, "-p", str(BASE_PORT + i), "-C", cc, "-t", f"{secs:g}", "-i", "0.5",
                 "-J", *(["-P", str(parallel)] if parallel > 1 else []))
        procs.append((i, start, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    results = []
    for i, start, p in procs:
        stdout, stderr = p.communicate(timeout=dur + 120)
        try:
            results.append({"flow": i, "start_s": start, "port": BASE_PORT + i, "iperf": json.loads(stdout)})
        except json.JSONDecodeError:
            results.append({"flow": i, "start_s": start, "port": BASE_PORT + i, "error": stderr[-400:] or stdout[-400:]})
    wall = time.monotonic() - t0
    cpu1, after = cpu_times(), counters()
    if sampler:
        sampler.stop_flag.set()
        sampler.join(timeout=5)
    if agent:
        out["agent_cpu_ticks"] = proc_cpu_ticks(agent.pid) - agent_ticks0
        agent.terminate()
        try:
            agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            agent.kill()
    out["flows"] = results
    out["changes_applied"] = applied  # when tc returned, seconds from the start: the steps' real times
    out["ss"] = sampler.samples if sampler else []
    out["ss_t0_offset_s"] = (sampler.t0 - t0) if sampler else 0.0
    out["tcp_counters"] = {k: after.get(k, 0) - before.get(k, 0) for k in after
                           if "Reorder" in k or k in ("TcpRetransSegs", "TcpOutSegs", "TcpExtTCPLostRetransmit")}
    out["cpu_ticks"] = {k: cpu1[k] - cpu0[k] for k in cpu0}
    out["clk_tck"] = os.sysconf("SC_CLK_TCK")
    out["wall_s"] = wall
    out["cpus"] = os.cpu_count()
    (raw_dir / f"{run['id']}.json").write_text(json.dumps(out))


def apply_changes(link: dict, t0: float, dur: float, applied: list[dict]) -> None:
    """The scenario's bandwidth steps (and random redraws) on schedule; `applied` gets when each took effect
    (tc takes a while to start under TCG, so the measured time, not the scheduled one, is the step)."""
    for c in link.get("bw_changes", []):
        delay = t0 + float(c["at_s"]) - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        set_rate(float(c["mbit"]), int(link["buffer_bytes"]))
        applied.append({"at_s": time.monotonic() - t0, "mbit": float(c["mbit"]), "scheduled_s": float(c["at_s"])})
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
            set_rate(bw, int(link["buffer_bytes"]))
            set_delay_loss(rtt, loss)
            applied.append({"at_s": time.monotonic() - t0, "mbit": bw, "rtt_ms": rtt, "loss": loss, "scheduled_s": t})
            t += float(rc["every_s"])


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    raw_dir = Path(plan["raw_dir"])
    raw_dir.mkdir(parents=True, exist_ok=True)
    module = os.environ.get("POLYCC_CCP_KO", str(ROOT / "datapath" / "ccp.ko"))
    sh(["modprobe", "tcp_bbr"], check=False)
    sh(["rmmod", "ccp"], check=False)
    r = sh(["insmod", module], check=False)
    if r.returncode != 0:
        log(f"insmod {module}: {r.stderr.strip()}")
        return 3
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
            (raw_dir / f"{run['id']}.json").write_text(json.dumps({"id": run["id"], "error": f"{type(e).__name__}: {e}"}))
    sh([str(DUMBBELL), "down"], check=False, env=dict(os.environ, SND=SND, RCV=RCV))
    sh(["rmmod", "ccp"], check=False)
    return 0


def run_ipc_bench(run: dict, raw_dir: Path, module: str) -> None:
    """experiments/ipc_bench.py's guest half (it loads ccp.ko and makes its own link), then ccp.ko again."""
    import argparse
    sys.path.insert(0, str(ROOT / "experiments"))
    import ipc_bench  # noqa: E402
    log(f"IPC benchmark: {run['messages']} round trips")
    try:
        ipc_bench.in_guest(argparse.Namespace(messages=run["messages"], max_seconds=run["max_seconds"]))
    except Exception as e:
        (raw_dir / f"{run['id']}.json").write_text(json.dumps({"id": run["id"], "error": f"{type(e).__name__}: {e}"}))
    src = Path(os.environ["POLYCC_VM_RESULTS"]) / "ipc-bench.json"
    if src.exists():
        (raw_dir / f"{run['id']}.json").write_text(json.dumps({"id": run["id"], "ipc_bench": json.loads(src.read_text())}))
    sh(["rmmod", "ccp"], check=False)
    sh(["insmod", module], check=False)
