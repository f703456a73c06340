"""The part of `--backend vm` that runs as root inside the QEMU guest (experiments/vm/polycc-vm).

The host writes a plan (plan.json: the runs, each with its link, scheme, flows and duration) into the
shared results folder and boots the guest with `experiments/run --in-guest PLAN`. For each run this
sets up the link with experiments/vm/dumbbell.sh (only when it differs from the previous run's),
starts polycc-portus for agent schemes (with --log-json), one iperf3 server per flow, samples the
sender's TCP sockets as `ss -tin` would (diag.py: sock_diag netlink, one process for the whole run), applies bandwidth changes with `tc qdisc change`, and writes
raw/<run id>.json: the iperf3 JSON of every flow, the ss samples, the nstat reorder counters and,
for overhead runs, CPU time. A run with a `competitor` starts one more iperf3 client with the kernel's
congestion control (`-C cubic`) on the port after the scheme's flows, at its start_s and to the run's
end, and marks its result `"competitor": true`. Each new link is probed with UDP both ways for reordering. The host
turns the raw files into metrics (vm_backend.py), so nothing here needs numpy.

The runs go in rounds (one repetition of every scheme of a cell, `round` in the plan). Each round is
bracketed by a CUBIC probe of the link, and each run records the guest's CPU stalls and, for agent
runs, ccp.ko's IPC round trips (fidelity.py); a round whose link delivered under 90 % of its set rate
is rerun within the plan's retry budget, its first attempt's files kept under raw/invalid/.
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

from . import fidelity  # standard library only, like this module: nothing here needs numpy under TCG
from .bins import bin_path

ROOT = Path(__file__).resolve().parents[2]
DUMBBELL = ROOT / "experiments" / "vm" / "dumbbell.sh"
AGENT = bin_path("polycc-portus")
SND, RTR, RCV = "xp-snd", "xp-rtr", "xp-rcv"  # dumbbell.sh: the router holds the bottleneck
SND_IP, RCV_IP = "10.77.0.1", "10.77.0.2"
BASE_PORT = 5201
KERNEL_PACED_MAX_RATE = "10G"  # iperf3 --fq-rate (bit/s) for kernel_paced schemes: a cap no link here reaches
BURST_BYTES = 15000  # >= rate / HZ at 20 Mbit/s (dumbbell.sh's default), scaled up for faster links


# The BPF datapath's congestion control, registered while its agent runs.
BPF_CC = "polycc_bpf"
AVAILABLE_CCS = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def log(msg: str) -> None:
    print(f"[runner-guest {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


def ns(name: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", name, *cmd]


def link_env(link: dict) -> dict:
    rtt, dev = float(link["rtt_ms"]), float(link["rtt_dev_ms"])
    data = float(link["data_delay_ms"])  # Link.data_delay_ms: the simulator gets the same split
    rate = float(link["bandwidth_mbps"])
    return {
        "SND": SND,
        "RTR": RTR,
        "RCV": RCV,
        "SND_IP": SND_IP,
        "RCV_IP": RCV_IP,
        "RATE_MBIT": str(max(round(rate), 1)),
        "DELAY_MS": str(round(data)),
        "ACK_DELAY_MS": str(round(rtt - data)),
        "ACK_JITTER_MS": str(round(dev)),
        "LOSS_PCT": f"{100 * float(link['loss_frac']):g}",
        "LOSSY": "1" if has_random_loss(link) else "0",
        "BUFFER_BYTES": str(int(link["buffer_bytes"])),
        "BURST_BYTES": str(burst_bytes(rate)),
    }


def has_random_loss(link: dict) -> bool:
    """Whether the link drops at random at some point (its base loss or a redraw's range): dumbbell.sh
    then puts a netem in front of the router's tbf (LOSSY=1), and tc changes go to that layout."""
    redraw = (link.get("random_changes") or {}).get("loss_frac", [0, 0])
    return float(link["loss_frac"]) > 0 or max(map(float, redraw)) > 0


def burst_bytes(rate_mbps: float) -> int:
    return max(BURST_BYTES, int(rate_mbps * 1e6 / 8 / 250) + 3000)


class Tc:
    """One `tc -batch -` per namespace, started with the link: a step mid-run is a line written to it,
    not a tc process to start (which takes seconds under TCG and steals the flows' CPU meanwhile)."""

    def __init__(self, lossy: bool):
        # dumbbell.sh's router: tbf at the root, or (LOSSY) under the random-loss netem 2:.
        self.lossy = lossy
        self.procs = {
            n: subprocess.Popen(
                ["tc", "-n", n, "-force", "-batch", "-"],
                stdin=subprocess.PIPE,
                text=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for n in (SND, RTR, RCV)
        }

    def send(self, netns: str, line: str) -> None:
        p = self.procs[netns]
        p.stdin.write(line + "\n")
        p.stdin.flush()

    def set_rate(self, rate_mbps: float, buffer_bytes: int) -> None:
        """Change the bottleneck (the router's tbf towards the receiver) to this rate and buffer."""
        self.send(
            RTR,
            f"qdisc change dev veth-rr {'parent 2:1' if self.lossy else 'root'} handle 1: tbf rate {rate_mbps:g}mbit "
            f"burst {burst_bytes(rate_mbps)} limit {buffer_bytes}",
        )

    def set_delay_loss(self, rtt_ms: float, loss: float, jitter_ms: float = 0) -> None:
        """Both netem qdiscs as dumbbell.sh makes them: the RTT (and its jitter) on the ACK path, the
        random loss at the router (a --random-changes redraw, and the link probe's calm link)."""
        if self.lossy:
            self.send(RTR, f"qdisc change dev veth-rr root handle 2: netem loss random {100 * loss:g}% limit 100000")
        elif loss > 0:
            raise ValueError(f"loss {loss} on a link set up without random loss (has_random_loss)")
        jitter = f" {jitter_ms:g}ms rate 10gbit" if jitter_ms else ""
        self.send(RCV, f"qdisc change dev veth-rcv root handle 1: netem delay {rtt_ms:g}ms{jitter} limit 100000")

    def close(self) -> None:
        for p in self.procs.values():
            p.stdin.close()
            p.wait(timeout=10)


def counters(netns: str = SND) -> dict[str, int]:
    """The TCP/IP counters of `netns` (nstat -a -z), by name."""
    out = {}
    for line in sh(ns(netns, "nstat", "-a", "-z"), check=False).stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            out[f[0]] = int(f[1])
    return out


def udp_probe(rate_mbps: float) -> dict:
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
                f"{max(rate_mbps * 0.5, 1):g}M",
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
    """diag.py (sock_diag netlink) in the sender's namespace, sampling every interval_s into a JSON-lines file.
    Also the e2e tests' sampler (datapath/tests/guest_e2e.py), on their own namespaces."""

    def __init__(self, interval_s: float, path: Path, sender_ns: str = SND, dst: str = RCV_IP):
        self.path = path
        # Ready means this sampler's first line: a file an earlier run left there (the e2e tests'
        # results folder outlives the guest) would pass for it before diag.py has started.
        path.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            ns(
                sender_ns,
                sys.executable,
                str(Path(__file__).with_name("diag.py")),
                "--dst",
                dst,
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
        t0 = json.loads(lines[0])["t0_monotonic_s"]
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


def ensure_link(run: dict, state: dict) -> None:
    """Set up the run's link unless it is the one already up; a new link gets the UDP reordering probe
    and loses the previous link's CUBIC probe."""
    link = run["link"]
    env_key = json.dumps(link_env(link), sort_keys=True)
    if state.get("link") == env_key:
        return
    sh([str(DUMBBELL), "up"], env=dict(os.environ, **link_env(link)))
    n_ports = max(run.get("max_flows", 1), 1)
    for i in range(n_ports):
        sh(ns(RCV, "iperf3", "-s", "-D", "-p", str(BASE_PORT + i)))
    time.sleep(0.5)
    state["link"] = env_key
    state["probe"] = udp_probe(float(link["bandwidth_mbps"]))
    state.pop("link_probe", None)
    log(f"link {link_env(link)}: udp probe {state['probe']}")
    state["pacing_probe"] = pacing_probe(link)


def set_netem(link: dict, calm: bool) -> None:
    """Both netem qdiscs as dumbbell.sh makes them for `link`, or `calm`: without the ACK-path jitter and
    the random loss, with at least one BDP (at the base RTT) of buffer. Waits until tc has applied them."""
    env = link_env(link)
    rate, buffer = float(link["bandwidth_mbps"]), int(link["buffer_bytes"])
    bdp = int(rate * 1e6 / 8 * float(link["rtt_ms"]) / 1000)
    tc = Tc(has_random_loss(link))
    tc.set_rate(rate, max(buffer, bdp) if calm else buffer)
    rtt = int(env["DELAY_MS"]) + int(env["ACK_DELAY_MS"])  # dumbbell.sh's rounding of the RTT
    if calm:
        tc.set_delay_loss(rtt, 0)
    else:
        tc.set_delay_loss(rtt, float(link["loss_frac"]), int(env["ACK_JITTER_MS"]))
    tc.close()


def calm_cubic(link: dict, *iperf_args: str) -> tuple[dict | None, str]:
    """One in-kernel CUBIC flow on the link that is up (fidelity.PROBE_S, the first PROBE_OMIT_S left out),
    without what keeps one CUBIC flow from filling a healthy link: the ACK-path jitter (aggregation) and
    random loss are switched off, and the buffer raised to one BDP, meanwhile. Returns iperf3's `end`
    record (None when it wrote none) and the tail of its output, for an error."""
    bdp = int(float(link["bandwidth_mbps"]) * 1e6 / 8 * float(link["rtt_ms"]) / 1000)
    calm = float(link["loss_frac"]) > 0 or float(link["rtt_dev_ms"]) > 0 or int(link["buffer_bytes"]) < bdp
    if calm:
        set_netem(link, calm=True)
    r = sh(
        ns(SND, "iperf3", "-c", RCV_IP, "-p", str(BASE_PORT), "-C", "cubic", "-J", *iperf_args,
           "-t", str(fidelity.PROBE_S - fidelity.PROBE_OMIT_S), "-O", str(fidelity.PROBE_OMIT_S)),
        check=False,
        timeout=fidelity.PROBE_S + 60,
    )
    if calm:
        set_netem(link, calm=False)
    error = (r.stderr or r.stdout or "no output")[-300:]
    try:
        return json.loads(r.stdout)["end"], error
    except (json.JSONDecodeError, KeyError, TypeError):
        return None, error


def link_probe(link: dict, t_boot: float) -> dict:
    """The emulated link's rate (calm_cubic): its receiver-side goodput, and at the wire against the set
    rate."""
    rate = float(link["bandwidth_mbps"])
    t = time.monotonic()
    end, error = calm_cubic(link)
    out: dict = {"set_mbps": rate, "at_s": round(t - t_boot, 1), "wall_s": round(time.monotonic() - t, 1)}
    try:
        goodput = end["sum_received"]["bits_per_second"] / 1e6
        out.update(
            goodput_mbps=round(goodput, 3),
            wire_ratio=round(fidelity.wire_ratio(goodput, rate), 4),
            retransmits=end["sum_sent"].get("retransmits"),
            mean_rtt_ms=round(end["streams"][0]["sender"].get("mean_rtt", 0) / 1000, 1),
        )
    except (KeyError, IndexError, TypeError):
        out["error"] = error
    log(f"link probe (CUBIC): {out}")
    return out


def pacing_probe(link: dict) -> dict:
    """The guest kernel's own pacing on this link: calm_cubic capped by SO_MAX_PACING_RATE at
    fidelity.PACING_PROBE_FRACTION of the link (TCP's internal pacing, the hrtimer path ccp.ko's rates
    also take). Under emulation its timers fire late, and a constant rate delivered 0.75-0.83 of itself
    at 25-40 Mbit/s (docs/kernel-parity.md): what rate-based schemes lose here before their own
    decisions count."""
    cap = float(link["bandwidth_mbps"]) * fidelity.PACING_PROBE_FRACTION
    end, error = calm_cubic(link, "--fq-rate", f"{cap * 1e6:.0f}")
    out: dict = {"cap_mbps": round(cap, 3)}
    try:
        goodput = end["sum_received"]["bits_per_second"] / 1e6
        out.update(goodput_mbps=round(goodput, 3), wire_ratio=round(fidelity.wire_ratio(goodput, cap), 4))
    except (KeyError, TypeError):
        out["error"] = error
    log(f"pacing probe (CUBIC capped at {cap:g} Mbit/s): {out}")
    return out


def read_text(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def reset_ipc_rtt() -> None:
    try:
        Path(fidelity.IPC_RTT_PARAM).write_text("0")
    except OSError:
        pass  # a module without the histogram


def run_one(run: dict, raw_dir: Path, state: dict) -> dict:
    """One run; writes raw/<id>.json and returns what it wrote."""
    link, flows, dur = run["link"], run["flows"], float(run["duration_s"])
    ensure_link(run, state)
    out: dict = {"id": run["id"], "link_env": link_env(link), "udp_probe": state["probe"],
                 "pacing_probe": state.get("pacing_probe"),
                 "guest_kernel": os.uname().release}
    agent = None
    if run.get("agent"):
        # The per-report log goes to the guest's tmpfs during the run (a write per report over 9p would
        # cost the agent CPU under TCG) and is copied to the results afterwards.
        agent_log = Path("/tmp") / f"{run['id']}.agent.jsonl"
        err = open(raw_dir / f"{run['id']}.agent.log", "w")
        bpf = run.get("datapath") == "bpf"
        # The BPF datapath: private maps, so nothing of this run's agent outlives it.
        cmd = [str(AGENT), *(["--ipc", "bpf", "--bpf-no-pin"] if bpf else ["--ipc", "netlink"]), *run["agent"]]
        if run.get("agent_log", True):
            cmd += ["--log-json", str(agent_log)]
        reset_ipc_rtt()
        cpu = state.get("agent_cpu")
        agent = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT,
                                 preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})))
        out["agent_cpu"] = cpu
        time.sleep(1.0)
        if bpf:
            deadline = time.time() + 10
            while BPF_CC not in (read_text(AVAILABLE_CCS) or "") and agent.poll() is None and time.time() < deadline:
                time.sleep(0.1)
        if agent.poll() is not None or (bpf and BPF_CC not in (read_text(AVAILABLE_CCS) or "")):
            out["error"] = f"polycc-portus exited or did not register at start ({agent.poll()}); see {err.name}"
            agent.kill()
            (raw_dir / f"{run['id']}.json").write_text(json.dumps(out))
            return out
    tc = Tc(has_random_loss(link)) if link.get("bw_changes") or link.get("random_changes") else None
    sampler = Sampler(run["sample_s"], Path("/tmp") / f"{run['id']}.ss.jsonl") if run.get("sample_s") else None
    before, cpu0 = counters(), cpu_times()
    agent_ticks0 = proc_cpu_ticks(agent.pid) if agent else 0
    psi0 = read_text(fidelity.PSI_CPU)
    stalls = fidelity.StallSampler() if run.get("stall_sampler", True) else None
    t0 = time.monotonic()
    applied: list[dict] = []
    changer = threading.Thread(target=apply_changes, args=(tc, link, t0, sampler, dur, applied), daemon=True)
    changer.start()
    procs = []
    for i, start, flow_cc, competitor in flow_starts(run):
        delay = t0 + start - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        secs = max(dur - start, 1.0)
        port = str(BASE_PORT + i)
        cmd = ns(SND, "iperf3", "-c", RCV_IP, "-p", port, "-C", flow_cc, "-t", f"{secs:g}", "-i", "0.5", "-J")
        if not competitor:
            parallel = int(flows.get("parallel", 1))
            cmd += ["-P", str(parallel)] if parallel > 1 else []
            # SO_MAX_PACING_RATE far above the link turns on TCP's internal pacing at Linux's
            # 2x / 1.2x cwnd / srtt, as ccp.ko does for every agent flow (SK_PACING_NEEDED).
            # A cap (kernel_pacing_cap_mbps) paces at min(Linux's rate, the cap): a constant rate
            # once the window outgrows it, the kernel's own pacing to set beside a --pin-rate flow.
            cap = run.get("kernel_pacing_cap_mbps")
            if cap:
                cmd += ["--fq-rate", f"{cap * 1e6:.0f}"]
            elif run.get("kernel_paced"):
                cmd += ["--fq-rate", KERNEL_PACED_MAX_RATE]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append((i, start, competitor, p))
    results = []
    for i, start, competitor, p in sorted(procs, key=lambda x: x[0]):
        stdout, stderr = p.communicate(timeout=dur + 120)
        res: dict = {"flow": i, "start_s": start, "port": BASE_PORT + i}
        if competitor:
            res["competitor"] = True
        try:
            res["iperf"] = json.loads(stdout)
        except json.JSONDecodeError:
            res["error"] = stderr[-400:] or stdout[-400:]
        results.append(res)
    wall = time.monotonic() - t0
    guest: dict = {"stalls": stalls.stop() if stalls else None}
    psi1 = read_text(fidelity.PSI_CPU)
    guest["psi_cpu_some"] = fidelity.psi_delta(psi0, psi1, wall) if psi0 and psi1 else None
    if agent:
        guest["ipc_rtt"] = fidelity.parse_ipc_rtt(read_text(fidelity.IPC_RTT_PARAM) or "")
    out["guest"] = guest
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
        tc.set_rate(float(link["bandwidth_mbps"]), int(link["buffer_bytes"]))  # the next run starts from the base link
        if link.get("random_changes"):
            tc.set_delay_loss(float(link["rtt_ms"]), float(link["loss_frac"]))
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
    return out


def flow_starts(run: dict) -> list[tuple[int, float, str, bool]]:
    """(flow id, start s, congestion control, competitor?) of each iperf3 client of a run, in start
    order: the scheme's flows i x stagger_s apart (`ccp`, or `polycc_bpf`, for agent schemes), then the competitor's
    (flow id = the flow count, so port BASE_PORT + count) at its start_s."""
    flows = run["flows"]
    cc = (BPF_CC if run.get("datapath") == "bpf" else "ccp") if run.get("agent") else run["kernel"]
    stagger = float(flows.get("stagger_s", 0))
    out = [(i, i * stagger, cc, False) for i in range(int(flows["count"]))]
    comp = run.get("competitor")
    if comp:
        out.append((int(flows["count"]), float(comp.get("start_s", 0)), comp["kernel"], True))
    return sorted(out, key=lambda x: x[1])  # stable: at the same start, the scheme's flows first


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
        tc.set_rate(float(c["bandwidth_mbps"]), int(link["buffer_bytes"]))
        applied.append(
            {"at_s": time.monotonic() - run_t0, "bandwidth_mbps": float(c["bandwidth_mbps"]), "scheduled_s": float(c["at_s"])}
        )
        log(f"bandwidth -> {c['bandwidth_mbps']} Mbit/s at {applied[-1]['at_s']:.2f} s")
    rc = link.get("random_changes")
    if rc:
        rng = random.Random(link.get("seed", 1))
        t = 0.0
        while t < dur:
            delay = t0 + t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            bw = rng.uniform(*rc["bw_mbps"])
            rtt = rng.uniform(*rc["rtt_ms"])
            loss = rng.uniform(*rc["loss_frac"])
            tc.set_rate(bw, int(link["buffer_bytes"]))
            tc.set_delay_loss(rtt, loss)
            applied.append(
                {"at_s": time.monotonic() - run_t0, "bandwidth_mbps": bw, "rtt_ms": rtt, "loss_frac": loss, "scheduled_s": t}
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
    # The module only where a run goes through it (a plan of BPF-datapath and in-kernel runs has
    # none, and boots a kernel the default module is not built for).
    if any(r.get("agent") and r.get("datapath", "ccp") == "ccp" or r.get("ipc_bench") for r in plan["runs"]):
        r = sh(["insmod", module], check=False)
        if r.returncode != 0:
            log(f"insmod {module}: {r.stderr.strip()}")
            return 3
    if plan.get("one_cpu"):
        # Every process of the runs (iperf3, the agent, the sampler) and so their softirq work on vCPU 0:
        # veth hands packets to the sending CPU's backlog, and two vCPUs draining two backlogs can reorder.
        os.sched_setaffinity(0, {0})
        log("pinned to vCPU 0")
    state: dict = {"t_boot": time.monotonic(), "retry_s_left": float(plan.get("retry_budget_s", 0))}
    # --agent-cpu 1 (the default): the agent on a vCPU of its own. It sends no packet of the flows,
    # so it cannot reorder them (no TCP reorder event in its runs); beside 100 Mbit/s of packets on
    # vCPU 0 under TCG it answered reports 20-170 ms late (p50), on vCPU 1 0.4-1.7 ms (p50; 2026-11-29).
    if plan.get("one_cpu") and plan.get("agent_cpu") is not None and plan["agent_cpu"] < (os.cpu_count() or 1):
        state["agent_cpu"] = plan["agent_cpu"]
        log(f"the agent on vCPU {plan['agent_cpu']}")
    elif plan.get("agent_cpu") is not None:
        log(f"--agent-cpu {plan['agent_cpu']}: the guest has {os.cpu_count()} vCPU(s) or runs unpinned; the agent shares the runs' CPUs")
    n = len(plan["runs"])
    done = 0
    for runs in rounds(plan["runs"]):
        if runs[0].get("ipc_bench"):
            run_ipc_bench(runs[0], raw_dir, module)
            state.pop("link", None)
            done += 1
            continue
        run_round(runs, raw_dir, state, plan.get("link_probe", True), f"{done + 1}-{done + len(runs)}/{n}")
        done += len(runs)
    sh([str(DUMBBELL), "down"], check=False, env=dict(os.environ, SND=SND, RTR=RTR, RCV=RCV))
    sh(["rmmod", "ccp"], check=False)
    return 0


def rounds(runs: list[dict]) -> list[list[dict]]:
    """Consecutive runs with the same `round` (runs without one, and the IPC benchmark, stand alone)."""
    out: list[list[dict]] = []
    for r in runs:
        key = r.get("round")
        if out and key is not None and out[-1][0].get("round") == key:
            out[-1].append(r)
        else:
            out.append([r])
    return out


def run_round(runs: list[dict], raw_dir: Path, state: dict, probe: bool, where: str) -> None:
    """A round's runs between two link probes (the first is the previous round's last when that passed);
    rerun while the probes say the link was short of its rate, at most fidelity.MAX_ROUND_RETRIES times
    and while the retry budget lasts. Each raw file gets the round's `fidelity` (probes, verdict,
    attempt); an invalid attempt's files move to raw/invalid/."""
    attempt = 0
    while True:
        t0 = time.monotonic()
        outs = []
        try:
            ensure_link(runs[0], state)
            before = (state.get("link_probe") or link_probe(runs[0]["link"], state["t_boot"])) if probe else None
        except Exception as e:  # the link did not come up: every run of the round records it
            for run in runs:
                (raw_dir / f"{run['id']}.json").write_text(
                    json.dumps({"id": run["id"], "error": f"link: {type(e).__name__}: {e}"})
                )
            return
        for i, run in enumerate(runs):
            log(f"run {where} ({i + 1}/{len(runs)} of round {run.get('round')}, attempt {attempt + 1}): {run['id']}")
            try:
                outs.append(run_one(run, raw_dir, state))
            except Exception as e:  # recorded; the host reports it and goes on
                (raw_dir / f"{run['id']}.json").write_text(
                    json.dumps({"id": run["id"], "error": f"{type(e).__name__}: {e}"})
                )
        if not probe:
            return
        after = link_probe(runs[0]["link"], state["t_boot"])
        valid, why = fidelity.round_verdict([before, after])
        # The next round on this link (or this one's rerun) starts from this probe when it passed, and
        # probes afresh otherwise: a short link at the end of one round says nothing certain of the next.
        state["link_probe"] = after if fidelity.round_verdict([after])[0] else None
        took = time.monotonic() - t0
        retry = not valid and attempt < fidelity.MAX_ROUND_RETRIES and took <= state["retry_s_left"]
        verdict = {"probes": [before, after], "valid": valid, "why": why, "attempt": attempt, "rerun": retry}
        for out in outs:
            out["fidelity"] = verdict
            (raw_dir / f"{out['id']}.json").write_text(json.dumps(out))
        if valid:
            return
        if not retry:
            log(f"round {runs[0].get('round')} invalid ({why}); no rerun left (attempt {attempt + 1}, "
                f"{state['retry_s_left']:.0f} s of retry budget for a {took:.0f} s round)")
            return
        log(f"round {runs[0].get('round')} invalid ({why}); rerunning it")
        bad = raw_dir / "invalid"
        bad.mkdir(exist_ok=True)
        for out in outs:
            (raw_dir / f"{out['id']}.json").rename(bad / f"{out['id']}.attempt{attempt + 1}.json")
        state["retry_s_left"] -= took
        attempt += 1


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
