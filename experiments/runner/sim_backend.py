"""`--backend sim`: each run is one polycc-sim process (`--json` summary, `--series` CSV).

Agent schemes pass their polycc-portus flags to the simulator unchanged (both binaries share the
policy flags, agent/args); in-kernel baselines (`kernel = "bbr"`) run the simulator's own model of
that algorithm (`--alg bbr`), which the report says. A scenario's [competitor] is `--competitor NAME
--competitor-start S`: the simulator's model of that algorithm as one more flow, the last one.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from .bins import bin_path
from .runs import FlowResult, RunRecord
from .scenario import Cell, Link, Scenario, Scheme

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SIM = bin_path("polycc-sim")
# Flags only the agent understands; the simulator has no datapath or log to give them to.
AGENT_ONLY = ("--policy", "--log-level")


class SimError(Exception):
    pass


def link_flags(link: Link, duration_s: float) -> list[str]:
    f = [
        "--bw",
        f"{link.bandwidth_mbps:g}mbit",
        "--rtt",
        f"{link.rtt_ms:g}ms",
        "--rtt-dev",
        f"{link.rtt_dev_ms:g}ms",
        "--loss",
        f"{link.loss_frac:g}",
        "--duration",
        f"{duration_s:g}s",
    ]
    if link.rtt_dev_ms > 0:
        f += ["--data-delay", f"{link.data_delay_ms():g}ms"]
    if link.buffer_bytes is not None:
        f += ["--buffer", f"{link.buffer_bytes}b"]
    elif link.buffer_packets is not None:
        f += ["--buffer", f"{link.buffer_packets}pkt"]
    else:
        f += ["--buffer", f"{link.buffer_bdp:g}bdp"]
    for c in link.bw_changes:
        f += ["--bw-change", f"{c.at_s:g}s:{c.bandwidth_mbps:g}mbit"]
    if link.random_changes:
        r = link.random_changes
        f += [
            "--random-changes",
            f"{r.every_s:g}s:bw={r.bw_mbps[0]:g}mbit-{r.bw_mbps[1]:g}mbit,"
            f"rtt={r.rtt_ms[0]:g}ms-{r.rtt_ms[1]:g}ms,loss={r.loss_frac[0]:g}-{r.loss_frac[1]:g}",
        ]
    return f


def scheme_flags(scheme: Scheme) -> list[str]:
    if scheme.kernel:
        return ["--alg", scheme.kernel]
    flags, out, skip = list(scheme.agent or ()), [], False
    for i, f in enumerate(flags):
        if skip:
            skip = False
            continue
        if f in AGENT_ONLY:
            skip = True
            continue
        out.append(f)
    return out


def competitor_flags(sc: Scenario) -> list[str]:
    """A [competitor]: the simulator's model of its algorithm as one more flow, the last one."""
    if not sc.competitor:
        return []
    return ["--competitor", sc.competitor.kernel, "--competitor-start", f"{sc.competitor.start_s:g}s"]


class SimBackend:
    name = "sim"

    def __init__(self, sim: Path = DEFAULT_SIM, pacing_efficiency: dict[str, float] | None = None):
        """`pacing_efficiency`: per cell key, the fraction of a paced sender's rate its packets leave
        at (`polycc-sim --pacing-efficiency`; a cell not named paces exactly, as a real host). The
        matrix's twin runs set it from the guest's pacing probes (`guest_pacing`)."""
        self.sim = Path(sim)
        self.pacing_efficiency = dict(pacing_efficiency or {})
        if not self.sim.exists():
            raise SimError(f"{self.sim} not found: build it with `cargo build --release -p polycc-sim`")

    def unsupported(self, scheme: Scheme) -> str | None:
        """Why the simulator cannot run this scheme (an algorithm name or flag it does not know, in
        its own words, which list the accepted names), else None."""
        if scheme.kernel_pacing_cap_mbps:
            return ("kernel_pacing_cap_mbps is the guest kernel's own pacing, which the simulator does not model "
                    "(run it with --backend vm; an agent flow pinned with --pin-rate runs on both)")
        r = subprocess.run(
            [str(self.sim), *scheme_flags(scheme), "--duration", "0.01s", "--json"], capture_output=True, text=True
        )
        if r.returncode == 0:
            return None
        return f"polycc-sim refuses {' '.join(scheme_flags(scheme))}: {first_error_line(r)}"

    def run(self, sc: Scenario, cell: Cell, scheme: Scheme, rec: RunRecord, workdir: Path) -> RunRecord:
        flows = sc.flows
        cmd = [
            str(self.sim),
            *link_flags(cell.link, sc.duration_s),
            *scheme_flags(scheme),
            "--flows",
            str(flows.count),
            "--stagger",
            f"{flows.stagger_s:g}s",
            "--seed",
            str(rec.seed),
            "--json",
        ]
        cmd += competitor_flags(sc)
        pacing = self.pacing_efficiency.get(cell.key)
        if pacing is not None:
            cmd += ["--pacing-efficiency", f"{pacing:.4f}"]
            rec.extra["pacing_efficiency"] = pacing
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            series_path = Path(tmp) / "series.csv"
            r = subprocess.run([*cmd, "--series", str(series_path)], capture_output=True, text=True)
            if r.returncode != 0:
                raise SimError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
            summary = json.loads(r.stdout)
            rec.series = read_sim_series(series_path)
        rec.extra["command"] = cmd
        rec.extra["sim_summary"] = {k: v for k, v in summary.items() if k != "flows"}
        if summary.get("utilization"):
            rec.capacity_mbps = summary["goodput_mbps"] / summary["utilization"]
        rec.flows = [
            FlowResult(f["id"], f["start_s"], f["goodput_mbps"], f.get("goodput_last_half_mbps"))
            for f in summary["flows"]
        ]
        if not sc.competitor:
            rec.goodput_mbps = summary["goodput_mbps"]
            rec.loss_frac = summary["loss_frac"]
            return rec
        # The competitor is the last flow; the summary's totals count it, the scheme's do not.
        *own, comp = summary["flows"]
        rec.flows[-1].competitor = True
        rec.goodput_mbps, rec.loss_frac = own_totals(own, sc.duration_s)
        return rec


# polycc-sim's --pacing-efficiency range (algorithms/sim/src/config.rs, MIN_PACING_EFFICIENCY).
MIN_PACING_EFFICIENCY = 0.1


def guest_pacing(recs: list[RunRecord]) -> dict[str, float]:
    """Per cell, the median of the guest's pacing probes over its usable runs (in-kernel CUBIC
    capped at half the link: delivered / cap at the wire, runner/guest.py `pacing_probe`), bounded
    to what polycc-sim accepts; a probe over 1 (the link's own rounding) is exact pacing. Cells
    without a probe are left out."""
    by_cell: dict[str, list[float]] = {}
    for r in recs:
        probe = r.extra.get("pacing_probe") or {}
        if r.usable and isinstance(probe.get("wire_ratio"), (int, float)):
            by_cell.setdefault(r.cell, []).append(float(probe["wire_ratio"]))
    return {cell: min(1.0, max(MIN_PACING_EFFICIENCY, statistics.median(xs))) for cell, xs in by_cell.items()}


def own_totals(flows: list[dict], duration_s: float) -> tuple[float, float]:
    """Goodput and loss of these flows of a --json summary, as polycc-sim totals all of them:
    bytes delivered over the time from the first start, bottleneck drops over packets sent."""
    first = min(f["start_s"] for f in flows)
    mbit = sum(f["goodput_mbps"] * (duration_s - f["start_s"]) for f in flows) / max(duration_s - first, 1e-9)
    sent = sum(f["sent_packets"] for f in flows)
    return mbit, (sum(f["dropped_packets"] for f in flows) / sent if sent else 0.0)


def first_error_line(r: subprocess.CompletedProcess) -> str:
    """A refusing binary's first stderr line, without clap's `error: ` prefix."""
    lines = r.stderr.strip().splitlines()
    return lines[0].removeprefix("error: ") if lines else f"exit {r.returncode}"


def read_sim_series(path: Path) -> list[tuple]:
    """polycc-sim --series rows -> (time_s, flow, throughput_mbps, inflight_bytes, rtt_ms, cwnd_bytes)."""
    out = []
    with open(path) as f:
        for row in csv.DictReader(f):
            out.append(
                (
                    _num(row, "time_s"),
                    int(row["flow"]),
                    _num(row, "throughput_mbps"),
                    _num(row, "inflight_bytes"),
                    _num(row, "rtt_ms"),
                    _num(row, "cwnd_bytes"),
                )
            )
    return out


def _num(row: dict, key: str) -> float | None:
    v = row.get(key, "")
    return float(v) if v not in ("", None) else None
