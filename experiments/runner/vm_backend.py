"""`--backend vm`: the real kernel path in the QEMU guest (ccp.ko + polycc-portus, in-kernel baselines).

The whole sweep runs in one guest boot (experiments/vm/kernel_job.run_in_guest): the host writes
plan.json, the guest (guest.py) writes raw/<run id>.json per run into the shared results folder,
and this module turns each raw file into a RunRecord: receiver-side goodput from iperf3, the series
from `ss` samples (acked_bytes deltas, srtt, unacked_packets x mss_bytes, cwnd_packets) and per-second goodput, loss from
retransmissions, the reorder counters and UDP probe, CPU time for overhead runs, and the guest's own
fidelity (fidelity.py: link probes, CPU stalls, IPC round trips) with the host's load average.
A scenario's [competitor] is one more iperf3 client in the guest (the kernel's congestion control,
port BASE_PORT + the scheme's flow count), marked `competitor` in the raw file: its goodput becomes
the competitor's FlowResult, its samples the series rows of its flow id, and nothing of the scheme's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

import numpy as np

from . import fidelity
from .bins import bin_path
from .runs import FlowResult, RunRecord
from .scenario import Cell, Link, Scenario, Scheme
from .sim_backend import first_error_line

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "vm"))
from kernel_job import bpf_guest_env, run_in_guest

BASE_PORT = 5201
MSS_BYTES = 1448
BOOT_S = 60  # boot, insmod and slack, per guest run
PER_RUN_SLACK_S = 20  # agent and sampler start, iperf3 start and stop (25-35 s per 15 s run seen)
PROBE_S = 15  # link set-up and the UDP probes of each new link
LINK_PROBE_SLACK_S = 8  # the CUBIC link probe's iperf3 start and stop, beyond fidelity.PROBE_S
REORDER_KEYS = ("TcpExtTCPSACKReorder", "TcpExtTCPTSReorder", "TcpExtTCPRenoReorder", "TcpExtTCPFACKReorder")


class VmError(Exception):
    pass


def guest_module(v612: bool = False) -> Path:
    """ccp.ko as `make datapath` builds it for the guest's kernel (the Makefile's path, via `polycc-vm
    kdir`); with v612, as `make datapath-test` builds it for Debian's 6.12 (the BPF datapath's guest)."""
    vm = [str(ROOT / "experiments" / "vm" / "polycc-vm"), "kdir", *(["--612"] if v612 else [])]
    r = subprocess.run(vm, capture_output=True, text=True)
    kdir = Path(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None
    if kdir is None:
        return ROOT / "datapath" / "ccp.ko"
    return ROOT / "datapath" / "build" / f"{kdir.name}-ccp" / "ccp.ko"


def sample_interval_s(rtt_ms: float) -> float:
    """ss sampling: about once per RTT, at least every 50 ms and at most every 200 ms."""
    return min(max(rtt_ms / 1000.0, 0.05), 0.2)


def plan_link(link: Link) -> dict:
    """The link as the guest's dumbbell builds it (guest.link_env)."""
    return {
        "bandwidth_mbps": link.bandwidth_mbps,
        "rtt_ms": link.rtt_ms,
        "rtt_dev_ms": link.rtt_dev_ms,
        "data_delay_ms": link.data_delay_ms(),
        "loss_frac": link.loss_frac,
        "buffer_bytes": link.buffer_in_bytes(),
        "bw_changes": [{"at_s": c.at_s, "bandwidth_mbps": c.bandwidth_mbps} for c in link.bw_changes],
    }


def plan_run(sc: Scenario, cell: Cell, scheme: Scheme, rec: RunRecord) -> dict:
    link = cell.link
    d = {
        "id": rec.run_id,
        "duration_s": sc.duration_s,
        "link": {**plan_link(link), "seed": rec.seed or 1},
        "flows": {"count": sc.flows.count, "stagger_s": sc.flows.stagger_s},
        "sample_s": sample_interval_s(link.rtt_ms),
        "round": f"{sc.name}/{cell.key}/r{rec.rep}",  # one repetition of every scheme: probed and rerun together
    }
    if link.random_changes:
        r = link.random_changes
        d["link"]["random_changes"] = {"every_s": r.every_s, "bw_mbps": r.bw_mbps, "rtt_ms": r.rtt_ms, "loss_frac": r.loss_frac}
    if sc.kind == "overhead":
        d["flows"] = {"count": 1, "stagger_s": 0, "parallel": dict(cell.params)["flows"]}
        d["sample_s"] = 0  # no ss polling: it would be counted as the scheme's CPU
        d["agent_log"] = False  # nor the per-report log
        d["stall_sampler"] = False  # nor the stall sampler's wake-ups
    if sc.competitor:
        d["competitor"] = {"kernel": sc.competitor.kernel, "start_s": sc.competitor.start_s}
    if scheme.agent:
        d["agent"] = list(scheme.agent)
        d["datapath"] = scheme.datapath
    else:
        d["kernel"] = scheme.kernel
        if scheme.kernel_paced:
            d["kernel_paced"] = True
        if scheme.kernel_pacing_cap_mbps:
            d["kernel_pacing_cap_mbps"] = scheme.kernel_pacing_cap_mbps
    return d


def flow_ports(run: dict) -> int:
    """How many iperf3 servers (ports from BASE_PORT) a planned run needs: its flows and competitor."""
    return run["flows"]["count"] + (1 if run.get("competitor") else 0)


class VmBackend:
    name = "vm"

    def __init__(self):
        self.agent = bin_path("polycc-portus")
        if not self.agent.exists():
            raise VmError(f"{self.agent} not found: build it with `cargo build --release -p polycc-agent`")
        if "POLYCC_CCP_KO" not in os.environ:
            os.environ["POLYCC_CCP_KO"] = str(guest_module())
        if not Path(os.environ["POLYCC_CCP_KO"]).exists():
            raise VmError(f"{os.environ['POLYCC_CCP_KO']} not found: build ccp.ko for the guest with `make datapath`")

    def unsupported(self, scheme: Scheme) -> str | None:
        if scheme.kernel:
            return None
        r = subprocess.run([str(self.agent), *scheme.agent, "--check"], capture_output=True, text=True)
        if r.returncode == 0:
            return None
        return f"polycc-portus refuses {' '.join(scheme.agent)}: {first_error_line(r)}"

    @staticmethod
    def guest_env(runs: list[dict]) -> dict[str, str]:
        """A plan with a BPF-datapath run boots the 6.12 guest (BPF links for struct_ops), and ccp
        schemes beside it then need ccp.ko built for 6.12."""
        if not any(r.get("datapath") == "bpf" for r in runs):
            return {}
        env = bpf_guest_env()
        if any(r.get("datapath") == "ccp" for r in runs):
            ko = guest_module(v612=True)
            if not ko.exists():
                raise VmError(f"{ko} not found: the BPF datapath's 6.12 guest runs ccp schemes with ccp.ko "
                              "built for 6.12: make -C datapath KDIR=$(experiments/vm/polycc-vm kdir --612)")
            env["POLYCC_CCP_KO"] = str(ko)
        return env

    def run_all(
        self,
        planned: list[dict],
        out_dir: Path,
        progress: Callable[[str], None],
        ipc_messages: int | None = None,
        one_cpu: bool = False,
        agent_cpu: int | None = None,
        link_probe: bool = True,
        retry_budget_s: float | None = None,
    ) -> tuple[int, dict[str, list[float]]]:
        """Boot the guest once for every planned run; `progress(run_id)` as each raw file appears.
        Returns the guest's exit status and the host's load averages (1, 5, 15 min) at the boot
        ("start"), as each run's file appeared (its id) and after the guest ended ("end").
        retry_budget_s: guest seconds allowed for rerunning invalid rounds (default: a quarter of the
        planned run time, at least one round)."""
        raw = out_dir / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        runs = list(planned)
        if ipc_messages:
            runs.append({"id": "ipc-bench", "ipc_bench": True, "messages": ipc_messages, "max_seconds": 60})
        max_flows = max((flow_ports(r) for r in runs if "flows" in r), default=1)
        for r in runs:
            r["max_flows"] = max_flows
        run_s = sum(r.get("duration_s", 0) + PER_RUN_SLACK_S for r in runs)
        n_rounds = len({r["round"] for r in runs if "round" in r})
        probe_s = (n_rounds + 1) * (fidelity.PROBE_S + LINK_PROBE_SLACK_S) if link_probe else 0
        if retry_budget_s is None:
            retry_budget_s = max(run_s / 4, run_s / max(n_rounds, 1) + fidelity.PROBE_S + LINK_PROBE_SLACK_S)
        if not link_probe:
            retry_budget_s = 0
        plan = {
            "raw_dir": str(raw.resolve()),
            "runs": runs,
            "one_cpu": one_cpu,
            "agent_cpu": agent_cpu,
            "link_probe": link_probe,
            "retry_budget_s": retry_budget_s,
        }
        plan_path = out_dir / "plan.json"
        plan_path.write_text(json.dumps(plan, indent=1))
        env = self.guest_env(runs)
        timeout = (
            BOOT_S
            + run_s
            + sum(PROBE_S for r in runs)
            + probe_s
            + retry_budget_s
            + (120 if ipc_messages else 0)
        )
        done: set[str] = set()
        stop = threading.Event()
        loads: dict[str, list[float]] = {"start": list(os.getloadavg())}

        def seen(run_id: str) -> None:
            done.add(run_id)
            loads[run_id] = list(os.getloadavg())
            progress(run_id)

        def watch():
            while not stop.wait(1.0):
                for p in raw.glob("*.json"):
                    if p.stem not in done:
                        seen(p.stem)

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        try:
            rc = run_in_guest(
                ["python3", "experiments/run", "--in-guest", str(plan_path.resolve())], out_dir.resolve(), timeout, env
            )
        finally:
            stop.set()
            w.join()
        for p in raw.glob("*.json"):
            if p.stem not in done:
                seen(p.stem)
        loads["end"] = list(os.getloadavg())
        return rc, loads


def parse_raw(raw: dict, rec: RunRecord) -> RunRecord:
    """A guest run's raw measurements -> the record's flows, goodput, loss and series."""
    if raw.get("guest"):
        rec.extra["guest"] = raw["guest"]
    if raw.get("guest_kernel"):
        rec.extra["guest_kernel"] = raw["guest_kernel"]
    verdict = raw.get("fidelity")
    if verdict:  # the round's link probes, kept for failed runs too
        rec.extra["fidelity"] = verdict
        if not verdict["valid"]:
            rec.invalid = verdict["why"]
    if "error" in raw:
        rec.error = raw["error"]
        return rec
    dur = rec.duration_s
    total_bytes, sent_bytes, retrans = 0, 0, 0
    flows = []
    own = [f for f in raw["flows"] if not f.get("competitor")]
    last_start = max((f["start_s"] for f in own), default=0.0)
    steady_from = last_start + (dur - last_start) / 2
    for f in raw["flows"]:
        what = "competitor flow" if f.get("competitor") else "flow"
        if "error" in f or "error" in f.get("iperf", {}):
            rec.error = f"{what} {f['flow']}: iperf3: {f.get('error') or f['iperf'].get('error')}"
            return rec
        end = f["iperf"]["end"]
        recv = end["sum_received"]
        if f.get("competitor"):  # its goodput only: the scheme's totals and Jain's index leave it out
            rec.extra["competitor_retransmits"] = end["sum_sent"].get("retransmits", 0) or 0
            flows.append(FlowResult(f["flow"], f["start_s"], recv["bits_per_second"] / 1e6, None, competitor=True))
            continue
        total_bytes += recv["bytes"]
        sent_bytes += end["sum_sent"]["bytes"]
        retrans += end["sum_sent"].get("retransmits", 0) or 0
        xs = [
            i["sum"]["bits_per_second"]
            for i in f["iperf"].get("intervals", [])
            if f["start_s"] + i["sum"]["start"] >= steady_from
        ]
        flows.append(
            FlowResult(f["flow"], f["start_s"], recv["bits_per_second"] / 1e6, sum(xs) / len(xs) / 1e6 if xs else None)
        )
    rec.flows = flows
    rec.goodput_mbps = total_bytes * 8 / dur / 1e6
    rec.loss_frac = retrans * MSS_BYTES / sent_bytes if sent_bytes else None
    rec.series = ss_series(raw.get("ss", []), raw.get("ss_t0_offset_s", 0.0))
    competitor_ports = {BASE_PORT + f["flow"] for f in raw["flows"] if f.get("competitor")}
    rec.extra["per_second_mbps"] = per_second_mbps(raw.get("ss", []), dur, competitor_ports)
    counters = raw.get("tcp_counters", {})
    probe = raw.get("udp_probe", {})
    rec.extra["reordering"] = {
        "tcp_reorder_events": {k: counters.get(k, 0) for k in REORDER_KEYS},
        "udp_out_of_order": {k: v.get("out_of_order") for k, v in probe.items()},
        "udp_packets": {k: v.get("packets") for k, v in probe.items()},
    }
    rec.extra["retransmits"] = retrans
    rec.extra["link_env"] = raw.get("link_env")
    if raw.get("pacing_probe"):
        rec.extra["pacing_probe"] = raw["pacing_probe"]
    if raw.get("changes_applied"):
        rec.extra["changes_applied"] = raw["changes_applied"]
    ticks, hz = raw.get("cpu_ticks"), raw.get("clk_tck", 100)
    if ticks:
        busy = sum(ticks.get(k, 0) for k in ("user", "nice", "system", "irq", "softirq"))
        rec.extra["cpu"] = {
            "total_s": busy / hz,
            "system_s": ticks.get("system", 0) / hz,
            "softirq_s": ticks.get("softirq", 0) / hz,
            "user_s": ticks.get("user", 0) / hz,
            "agent_s": raw.get("agent_cpu_ticks", 0) / hz,
            "wall_s": raw.get("wall_s"),
            "cpus": raw.get("cpus"),
        }
    return rec


def data_connections(samples: list[dict]) -> dict[int, list[dict]]:
    """ss samples by iperf3 port, of the data connection only (the one with the most bytes acked; the
    control connection carries a few hundred bytes)."""
    by_conn: dict[tuple[int, int], list[dict]] = {}
    for s in samples:
        if "acked_bytes" in s:
            by_conn.setdefault((s["dport"], s["sport"]), []).append(s)
    best: dict[int, list[dict]] = {}
    for (dport, _), ss in by_conn.items():
        if dport not in best or ss[-1]["acked_bytes"] > best[dport][-1]["acked_bytes"]:
            best[dport] = ss
    return best


def per_second_mbps(samples: list[dict], duration_s: float, skip_ports: Collection[int] = ()) -> list[float]:
    """Goodput of all flows together (but those to `skip_ports`: the competitor's) in 1 s bins, from the
    bytes acked (tcp_info's bytes_acked, read linearly between samples), from the first sample of any data
    connection (the first flow's connection is up; iperf3 takes 0.5-1.5 s to connect under TCG) for at most
    duration_s. Sender side: the second in which a cumulative ACK closes a loss recovery gets the SACKed
    bytes too, and can read above the link."""
    conns = [sorted(ss, key=lambda s: s["t_s"]) for p, ss in data_connections(samples).items() if p not in skip_ports]
    conns = [c for c in conns if c]
    if not conns:
        return []
    start = min(c[0]["t_s"] for c in conns)
    end = min(max(c[-1]["t_s"] for c in conns), start + duration_s)
    edges = np.arange(start, end + 1e-9, 1.0)
    if edges.size < 2:
        return []
    acked = np.zeros(edges.size)
    for c in conns:
        acked += np.interp(edges, [s["t_s"] for s in c], [s["acked_bytes"] for s in c])
    return [round(x, 4) for x in (np.diff(acked) * 8 / 1e6).tolist()]


def ss_series(samples: list[dict], offset_s: float) -> list[tuple]:
    """ss samples -> series rows per flow (the data connection of each iperf3 port)."""
    best = data_connections(samples)
    rows = []
    for dport, ss in sorted(best.items()):
        flow = dport - BASE_PORT
        prev = None
        for s in ss:
            t = s["t_s"] + offset_s
            mss = s.get("mss_bytes", MSS_BYTES)
            tput = None
            if prev is not None and s["t_s"] > prev["t_s"]:
                tput = (s["acked_bytes"] - prev["acked_bytes"]) * 8 / (s["t_s"] - prev["t_s"]) / 1e6
            rows.append((round(t, 4), flow, tput, s.get("unacked_packets", 0) * mss, s.get("rtt_ms"), s.get("cwnd_packets", 0) * mss))
            prev = s
    return rows


def wait_for_guest_lock() -> None:
    """polycc-vm has no boot lock; a second guest at once halves both guests' CPU. Wait (bounded) for
    another polycc-vm run of this user to end before booting."""
    for i in range(60):
        r = subprocess.run(["pgrep", "-f", "qemu-system-x86_64"], capture_output=True, text=True)
        if r.returncode != 0:
            return
        if i == 0:
            print(
                "experiments/run: another QEMU guest is running; waiting up to 5 minutes for it to end", file=sys.stderr
            )
        time.sleep(5)
