"""The aggregated report: report.md (tables per cell and scheme, targets, notes) and PNG plots.

Plots (matplotlib, Agg), per cell:
- timeseries-<cell>.png: throughput, inflight and RTT over time, every repetition of every scheme
  (thin lines) and the median throughput of the repetitions (bold);
- tput-delay-<cell>.png: Pantheon-style throughput against p95 delay (log x axis, inverted so better
  is up and right), one point per run, the 1-sigma ellipse of (log delay, throughput) per scheme,
  cut at 0 Mbit/s (the axes start at 0);
- cdf-<cell>.png: CDFs of RTT samples and of per-RTT throughput per scheme;
and for overhead scenarios cpu.png (CPU seconds against flow count, kernel vs agent path); for
scenarios with a [demo] table, goodput-per-second-<cell>.png: one line per repetition, coloured by scheme.

Guest runs add the guest's fidelity (fidelity.py): the link probes, CPU stalls, IPC round trips and
the host's load, summarized and per run; runs on a link that fell short of its rate are left out.

(Just over 800 lines: report.md and the plots are drawn from the same per-cell tables, which
splitting them into two modules would pass back and forth.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter

from . import demo
from . import metrics as m
from .runs import RunRecord, per_second_mbps, total_throughput
from .scenario import Scenario, Target


@dataclass
class TargetResult:
    target: Target
    cell: str
    value: float | None
    met: bool | None  # None: not judged (inconclusive, or a scheme an older runner skipped)
    note: str = ""
    inconclusive: bool = False  # every rep met it, but too few, or few that disagree wildly (judge)


def fmt(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"


def spread(values: list, digits: int = 2) -> str:
    med, lo, hi, n = m.median_spread(values)
    if med is None:
        return "-"
    return f"{med:.{digits}f}" if n < 2 else f"{med:.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]"


def by_cell(runs: list[RunRecord]) -> dict[str, dict[str, list[RunRecord]]]:
    out: dict[str, dict[str, list[RunRecord]]] = {}
    for r in runs:
        out.setdefault(r.cell, {}).setdefault(r.scheme, []).append(r)
    return out


def cell_median(runs: list[RunRecord], metric: str) -> float | None:
    return m.median_spread([r.metrics.get(metric) for r in runs if r.usable])[0]


# A verdict needs this many repetitions: one cannot say that a result holds on every rep.
MIN_REPS_FOR_VERDICT = 2
# Fewer reps than this that all meet a target but whose values differ by more than WILD_SPREAD x
# are inconclusive: a bimodal result (BBR at +/-70 ms: 18.9 or 2.0 Mbit/s) whose other mode so few
# reps may have missed. With this many, every rep meeting it is the verdict.
CONFIDENT_REPS = 5
WILD_SPREAD = 3.0


def rep_value(r: RunRecord, metric: str) -> float | None:
    """One repetition's value of a target's metric: the run's own, or for a pooled (distribution)
    metric the percentile of that run's per-RTT distribution."""
    if metric in m.POOLED:
        key, q = m.POOLED[metric]
        return m.percentile(r.extra.get("per_rtt", {}).get(key, []), q)
    return r.metrics.get(metric)


def _met(t: Target, v: float, own: float | None = None) -> bool:
    """Whether value v (a ratio with a baseline) meets the target; with or_value, also when the
    scheme's own value `own` meets `op or_value`."""
    if t.or_value is not None and own is not None and _met(replace(t, value=t.or_value, or_value=None), own):
        return True
    if t.op == ">=":
        return v >= t.value
    if t.op == "<=":
        return v <= t.value
    return abs(v - 1.0 if t.baseline else v) <= t.value


def judge(t: Target, cell: str, schemes: dict[str, list[RunRecord]]) -> TargetResult:
    """The target on each repetition (with a baseline, against the baseline's same repetition: the
    same seed, or the same round in the guest). Met only when every rep meets it; not met when one
    does not or has no value (a failed run, an undefined metric); inconclusive (met None) when they
    all do but there are too few to say so, or few that disagree wildly. A rep on a link that fell
    short of its rate (invalid, the guest's fidelity) is left out, not counted as failed. The value
    shown is the worst failing rep's, else the worst rep's."""
    bases = [{r.rep: r for r in schemes.get(name, [])} for name in t.baseline]
    values, owns, missing, left_out = [], [], [], []
    for r in sorted(schemes.get(t.scheme, []), key=lambda r: r.rep):
        bs = [base.get(r.rep) for base in bases]
        if r.invalid or any(b is not None and b.invalid for b in bs):
            left_out.append(r.rep)
            continue
        v = own = rep_value(r, t.metric) if r.usable else None
        if t.baseline:
            bvs = [rep_value(b, t.metric) if b is not None and b.usable else None for b in bs]
            # Against the largest baseline of this rep; none when any is missing.
            bv = None if any(x is None for x in bvs) else max(bvs)
            if v is not None and bv == 0:  # no loss in any baseline: none in the scheme is equal, some is not
                v = 1.0 if v == 0 else math.inf
            else:
                v = None if v is None or bv is None else v / bv
        if v is None:
            missing.append(r.rep)
        else:
            values.append(v)
            owns.append(own)
    why_left_out = f"rep {', '.join(map(str, left_out))} left out (invalid)" if left_out else ""
    if missing or not values:
        note = f"no value for rep(s) {missing or 'any'}"
        return TargetResult(t, cell, None, False, "; ".join(x for x in (note, why_left_out) if x))
    ok = [_met(t, v, own) for v, own in zip(values, owns)]
    bad = [v for v, good in zip(values, ok) if not good] or values
    if t.op == ">=":
        worst = min(bad)
    elif t.op == "<=":
        worst = max(bad)
    else:
        worst = max(bad, key=lambda v: abs(v - 1.0 if t.baseline else v))
    if t.or_value is not None:
        reps = ", ".join(f"{v:.3f} ({t.metric} {own:.3f})" for v, own in zip(values, owns))
    else:
        reps = ", ".join(f"{v:.3f}" for v in values)
    why_not_sure = ""
    if all(ok) and len(values) < MIN_REPS_FOR_VERDICT:
        why_not_sure = f"{len(values)} rep, at least {MIN_REPS_FOR_VERDICT} needed for a verdict"
    elif all(ok) and len(values) < CONFIDENT_REPS and min(values) > 0 and max(values) > WILD_SPREAD * min(values):
        why_not_sure = (
            f"{len(values)} reps that disagree by more than {WILD_SPREAD:g}x (bimodal?); "
            f"rerun with --reps {CONFIDENT_REPS} or more"
        )
    notes = [x for x in (why_not_sure, f"per rep: {reps}", why_left_out) if x]
    if why_not_sure:
        return TargetResult(t, cell, worst, None, "; ".join(notes), inconclusive=True)
    return TargetResult(t, cell, worst, all(ok), "; ".join(notes))


def evaluate_targets(sc: Scenario, runs: list[RunRecord], skipped: dict[str, str]) -> list[TargetResult]:
    """Every target in every cell its `where` selects, judged on every rep (judge). `skipped`: the
    schemes an older runner skipped (results folders from before issue 20, read by --report)."""
    cells = by_cell(runs)
    out = []
    for t in sc.targets:
        for cell, schemes in cells.items():
            params = next(iter(schemes.values()))[0].params
            if any(params.get(k) not in vals for k, vals in t.where.items()):
                continue
            missing = [s for s in (t.scheme, *t.baseline) if s in skipped]
            if missing:
                out.append(TargetResult(t, cell, None, None, f"not evaluated: {', '.join(missing)} skipped"))
                continue
            out.append(judge(t, cell, schemes))
    return out


def fidelity_pairs(sc: Scenario) -> list[tuple[str, str]]:
    """(agent scheme, kernel scheme) running the same algorithm: agent `--alg X` against kernel X."""
    pairs = []
    for a in sc.schemes:
        if a.agent and "--alg" in a.agent:
            alg = a.agent[a.agent.index("--alg") + 1]
            for k in sc.schemes:
                if k.kernel == alg:
                    pairs.append((a.name, k.name))
    return pairs


def pooled(runs: list[RunRecord], key: str) -> list[float]:
    return [x for r in runs if r.usable for x in r.extra.get("per_rtt", {}).get(key, [])]


def write_report(
    sc: Scenario,
    runs: list[RunRecord],
    skipped: dict[str, str],
    out: Path,
    backend: str,
    command: str,
    notes: list[str],
    plots: bool = True,
) -> tuple[Path, list[TargetResult]]:
    cells = by_cell(runs)
    L = [
        f"# {sc.name} ({backend} backend)",
        "",
        sc.description.strip(),
        "",
        f"Command: `{command}`" + (f", run {run_date(out)}" if run_date(out) else ""),
        "",
        f"{sc.duration_s:g} s per run, {sc.repetitions} repetition(s) per cell, {len(runs)} runs; "
        f"link {link_text(sc)}; flows: {sc.flows.count}"
        + (f", started {sc.flows.stagger_s:g} s apart" if sc.flows.stagger_s else "")
        + (
            f"; sharing the link with one {sc.competitor.label(backend)} flow from {sc.competitor.start_s:g} s"
            if sc.competitor
            else ""
        )
        + ".",
        "",
    ]
    if backend == "sim":
        L += [
            "In-kernel baselines"
            + (" and the competitor" if sc.competitor else "")
            + " run the simulator's model of the same algorithm (`--alg NAME`)"
            + (
                ", so agent and kernel schemes are the same model here: fidelity is measured on the kernel "
                "path (`--backend vm`)."
                if sc.kind == "fidelity"
                else "."
            ),
            "",
        ]
    for name, why in skipped.items():
        L += [f"**Skipped scheme `{name}`**: {why}. It comes alive when the binaries support it.", ""]
    for n in notes:
        L += [n, ""]
    L += [
        "Cells show the median over repetitions, [25th-75th percentile] when there are several. "
        "p95 delay: 95th percentile of RTT samples. Convergence: after the last bandwidth step, until "
        "0.5 s-binned throughput stays within +/-10 % of the new capacity for 2 s; queue convergence: "
        "until binned RTT stays <= 2x base RTT (queue within one new BDP) for 2 s.",
        "",
    ]
    if sc.competitor:
        L += [competitor_text(sc, backend), ""]
    if sc.kind != "overhead":
        comp = sc.competitor.label(backend) if sc.competitor else ""
        share_head = f" share vs {comp} | {comp} (Mbit/s) |" if sc.competitor else ""
        L += [
            f"| cell | scheme | runs | goodput (Mbit/s) |{share_head} utilization | p95 delay (ms) | loss (%) | Jain's index | "
            "convergence (s) | queue convergence (s) |",
            "|---|---|---|---|" + "---|---|" * bool(sc.competitor) + "---|---|---|---|---|---|",
        ]
        step = bool(sc.link.bw_changes)
        for cell, schemes in cells.items():
            for name, rs in schemes.items():
                ok = [r for r in rs if r.usable]

                def g(k: str, ok: list[RunRecord] = ok) -> list:
                    return [r.metrics.get(k) for r in ok]

                conv = g("convergence_s")
                share = f" {spread(g('share'), 3)} | {spread(g('competitor_mbps'))} |" if sc.competitor else ""
                L.append(
                    f"| {cell} | {rs[0].scheme_label} | {len(ok)}/{len(rs)} | {spread(g('goodput_mbps'))} |{share} "
                    f"{spread(g('utilization'), 3)} | {spread(g('p95_delay_ms'), 1)} | "
                    f"{spread([None if x is None else 100 * x for x in g('loss_frac')], 2)} | {spread(g('jain_index'), 3)} | "
                    f"{spread(conv)}{never(conv, step)} | {spread(g('queue_convergence_s'))}{never(g('queue_convergence_s'), step)} |"
                )
        L.append("")
    if sc.kind == "fidelity":
        L += fidelity_section(sc, runs)
    if sc.kind == "overhead":
        L += overhead_section(sc, cells)
    ipc = [r for r in runs if r.extra.get("ipc_bench")]
    if ipc:
        k, u = ipc[0].extra["ipc_bench"]["kernel_netlink"], ipc[0].extra["ipc_bench"]["unix_baseline"]
        L += [
            "IPC round trip (experiments/ipc_bench.py in the same guest):",
            "",
            "| path | messages | p50 (us) | p95 (us) |",
            "|---|---|---|---|",
            f"| report -> update through ccp.ko + polycc-portus | {k['count']} | {k['p50']} | {k['p95']} |",
            f"| unix datagram ping-pong (baseline) | {u['messages']} | {u['p50_us']:.1f} | {u['p95_us']:.1f} |",
            "",
        ]
    if sc.demo:
        for cell, schemes in cells.items():
            summary = demo.summarize(sc.demo, cell, [r for rs in schemes.values() for r in rs])
            L += [f"## Demo summary: {cell}", "", "```", *demo.format_summary(summary), "```", ""]
    if any("fidelity" in r.extra or "guest" in r.extra for r in runs):
        L += guest_fidelity_section(runs)
    reo = [r for r in runs if "reordering" in r.extra]
    if reo:
        L += reordering_section(reo)
    failed = [r for r in runs if r.error]
    for r in failed:
        L.append(f"- run {r.run_id} failed: {r.error}")
    if failed:
        L.append("")
    results = evaluate_targets(sc, runs, skipped)
    if results:
        L += ["## Targets", "", "| target | cell | value | met |", "|---|---|---|---|"]
        for tr in results:
            met, note = verdict(tr), tr.note
            L.append(f"| {tr.target.describe()} | {tr.cell} | {fmt(tr.value, 3)} | {met}{' (' + note + ')' if note else ''} |")
        L.append("")
    pictures = plot_all(sc, runs, cells, out) if plots else []
    if pictures:
        L += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in pictures] + [""]
    path = out / "report.md"
    path.write_text("\n".join(L))
    return path, results


def verdict(tr: TargetResult) -> str:
    """A target's verdict in the report: yes, **no**, inconclusive (too few or disagreeing reps) or -
    (not evaluated)."""
    if tr.inconclusive:
        return "inconclusive"
    if tr.met is None:
        return "-"
    return "yes" if tr.met else "**no**"


def competitor_text(sc: Scenario, backend: str) -> str:
    c = sc.competitor
    return (
        f"The scheme's columns count its own flows only. Share vs {c.label(backend)}: the scheme's goodput / (its "
        f"goodput + the {c.kernel} flow's) over the time both ran (lifetime goodputs when both start at 0)."
    )


def never(values: list, applies: bool) -> str:
    """How many runs never converged, where convergence applies (a bandwidth step)."""
    n_none = sum(1 for v in values if v is None)
    if not applies or not values or not n_none:
        return ""
    return " (never)" if n_none == len(values) else f" ({n_none} never)"


def run_date(out: Path) -> str | None:
    """When the runs were made, from the results folder's name (`20261125-033144-vm`), so a
    report rebuilt later with --report still names the day its numbers come from."""
    stamp = out.name.split("-")
    if len(stamp) < 2 or not (stamp[0].isdigit() and len(stamp[0]) == 8 and stamp[1].isdigit()):
        return None
    d, t = stamp[0], stamp[1]
    return f"{d[:4]}-{d[4:6]}-{d[6:]} {t[:2]}:{t[2:4]}"


def link_text(sc: Scenario) -> str:
    s = describe_link(sc.link)
    if sc.sweep:
        s += "; swept: " + ", ".join(f"{k} = {', '.join(f'{v:g}' for v in vals)}" for k, vals in sc.sweep.items())
    if sc.named_cells:
        s = "cells: " + "; ".join(f"{c.key.split('=', 1)[1]} ({describe_link(c.link)})" for c in sc.named_cells)
    return s


def describe_link(link) -> str:
    """One link in words: rate, RTT and deviation, buffer, loss, changes."""
    buf = (
        f"{link.buffer_bdp:g} BDP"
        if link.buffer_bdp is not None
        else f"{link.buffer_packets} packets"
        if link.buffer_packets is not None
        else f"{link.buffer_bytes} bytes"
    )
    s = f"{link.bandwidth_mbps:g} Mbit/s, RTT {link.rtt_ms:g} ms +/- {link.rtt_dev_ms:g} ms (ACK path), buffer {buf}"
    if link.loss_frac:
        s += f", loss {100 * link.loss_frac:g} %"
    for c in link.bw_changes:
        s += f", -> {c.bandwidth_mbps:g} Mbit/s at {c.at_s:g} s"
    if link.random_changes:
        r = link.random_changes
        s += (
            f", redrawn every {r.every_s:g} s from bw {r.bw_mbps[0]:g}-{r.bw_mbps[1]:g} Mbit/s, RTT "
            f"{r.rtt_ms[0]:g}-{r.rtt_ms[1]:g} ms, loss {100 * r.loss_frac[0]:g}-{100 * r.loss_frac[1]:g} %"
        )
    return s


def fidelity_section(sc: Scenario, runs: list[RunRecord]) -> list[str]:
    L = [
        "## Fidelity: agent vs kernel, per-RTT distributions (pooled over repetitions)",
        "",
        "| cell | agent | kernel | per-RTT tput median diff (%) | p95 diff (%) | queueing delay median diff (%) | p95 diff (%) | RTT bins |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell, schemes in by_cell(runs).items():
        for a, k in fidelity_pairs(sc):
            ra, rk = schemes.get(a, []), schemes.get(k, [])
            ta, tk = pooled(ra, "throughput_mbps"), pooled(rk, "throughput_mbps")
            qa, qk = pooled(ra, "qdelay_ms"), pooled(rk, "qdelay_ms")
            if not ta or not tk:
                continue
            d = [m.pct_diff(m.percentile(x, q), m.percentile(y, q)) for x, y in ((ta, tk), (qa, qk)) for q in (50, 95)]
            L.append(
                f"| {cell} | {a} | {k} | {fmt(d[0], 1)} | {fmt(d[1], 1)} | {fmt(d[2], 1)} | {fmt(d[3], 1)} | "
                f"{len(ta)} / {len(tk)} |"
            )
    return L + [""]


def overhead_section(sc: Scenario, cells: dict[str, dict[str, list[RunRecord]]]) -> list[str]:
    L = [
        "## CPU: the whole machine's busy time during the run (user + system + irq + softirq), and the agent "
        "process's own (utime + stime)",
        "",
        "| flows | scheme | goodput (Mbit/s) | CPU (s, all) | of which softirq (s) | agent process (s) | x kernel |",
        "|---|---|---|---|---|---|---|",
    ]
    in_kernel = {s.name for s in sc.schemes if s.kernel}  # the baseline: the scheme's flag, not its label
    for schemes in cells.values():
        kernel = [rs for name, rs in schemes.items() if name in in_kernel]
        kcpu = cell_median(kernel[0], "cpu_s") if kernel else None
        for rs in schemes.values():
            ok = [r for r in rs if r.usable and r.extra.get("cpu")]

            def c(k: str, ok: list[RunRecord] = ok) -> list:
                return [r.extra["cpu"][k] for r in ok]

            cpu = m.median_spread(c("total_s"))[0]
            for r in ok:
                r.metrics["cpu_ratio"] = r.metrics["cpu_s"] / kcpu if kcpu else None
            L.append(
                f"| {rs[0].params.get('flows')} | {rs[0].scheme_label} | {spread([r.metrics['goodput_mbps'] for r in ok])} | "
                f"{spread(c('total_s'))} | {spread(c('softirq_s'))} | {spread(c('agent_s'))} | "
                f"{fmt(cpu / kcpu if cpu is not None and kcpu else None)} |"
            )
    return L + [""]


def _span(values: list, digits: int = 1, unit: str = "") -> str:
    xs = [v for v in values if v is not None]
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return f"{lo:.{digits}f}{unit}" if abs(hi - lo) < 10 ** -digits else f"{lo:.{digits}f}-{hi:.{digits}f}{unit}"


def guest_fidelity_lines(runs: list[RunRecord]) -> list[str]:
    """The guest's fidelity over these runs in four lines: link probes, CPU stalls, IPC, host load."""
    from .fidelity import MIN_LINK_RATIO, PROBE_OMIT_S, PROBE_S

    probes = {}
    for r in runs:
        for p in (r.extra.get("fidelity") or {}).get("probes", []):
            if p:
                probes[(p.get("at_s"), p.get("goodput_mbps"))] = p
    ratios = [100 * p["wire_ratio"] for p in probes.values() if p.get("wire_ratio") is not None]
    failed_probes = sum(1 for p in probes.values() if p.get("wire_ratio") is None)
    invalid = [r for r in runs if r.invalid]
    rerun = [r for r in runs if (r.extra.get("fidelity") or {}).get("attempt", 0) > 0]
    L = [
        f"- link: one in-kernel CUBIC flow before and after each round ({PROBE_S - PROBE_OMIT_S} s after "
        f"{PROBE_OMIT_S} s of slow start; no ACK jitter or loss, >= 1 BDP of buffer meanwhile), delivered at "
        f"the wire: {_span(ratios, 1, ' %')} of the set rate over {len(ratios)} probes "
        f"(CUBIC goodput {_span([p.get('goodput_mbps') for p in probes.values()], 2)} Mbit/s)"
        + (f", {failed_probes} probes failed" if failed_probes else "")
        + f"; runs invalid (a probe under {100 * MIN_LINK_RATIO:.0f} %) and left out: {len(invalid)}"
        + f"; runs from a rerun round: {len(rerun)}"
    ]
    paced = {}
    for r in runs:
        p = r.extra.get("pacing_probe")
        if p:
            paced[(r.cell, p.get("cap_mbps"), p.get("goodput_mbps"))] = p
    if paced:
        ok = [100 * p["wire_ratio"] for p in paced.values() if p.get("wire_ratio") is not None]
        L.append(
            "- pacing: one in-kernel CUBIC flow capped at half the link (SO_MAX_PACING_RATE, the kernel's "
            "internal pacing that ccp.ko's rates use too) on each link before its runs (a quiet guest; the CPU "
            f"stalls below say how much busier the runs were), delivered at the wire: {_span(ok, 1, ' %')} "
            f"of its cap over {len(ok)} links" + (f", {len(paced) - len(ok)} probes failed" if len(ok) < len(paced) else "")
            + " (a real host: about 100 %; rate-based schemes lose the difference before their own decisions count)"
        )
    stalls = [(r.extra.get("guest") or {}).get("stalls") for r in runs]
    stalls = [x for x in stalls if x]
    if stalls:
        L.append(
            "- guest CPU stalls (a 10 ms sleep loop during each run, wake-up lateness): p50 "
            f"{_span([x['p50_ms'] for x in stalls], 2)} ms, p99 {_span([x['p99_ms'] for x in stalls], 1)} ms, "
            f"max {_span([x['max_ms'] for x in stalls], 0)} ms per run; "
            f"{sum(x['stalls_over_50ms'] for x in stalls)} wake-ups more than 50 ms late in all"
        )
    psi = [(r.extra.get("guest") or {}).get("psi_cpu_some") for r in runs]
    if any(x is not None for x in psi):
        L.append(f"- /proc/pressure/cpu, some: {_span([100 * x for x in psi if x is not None], 1, ' %')} of each run")
    ipc = [(r.extra.get("guest") or {}).get("ipc_rtt") for r in runs]
    ipc = [x for x in ipc if x]
    if ipc:
        L.append(
            f"- IPC round trip, report -> update through ccp.ko (agent runs, us): p50 "
            f"{_span([x['p50_us'] for x in ipc], 0)}, p95 {_span([x['p95_us'] for x in ipc], 0)}, "
            f"p99 {_span([x['p99_us'] for x in ipc], 0)} per run ({sum(x['count'] for x in ipc)} round trips)"
        )
    loads = [r.extra.get("host_load") for r in runs if r.extra.get("host_load")]
    if loads:
        L.append(
            f"- host load average (1 min): {loads[0]['start']:.2f} at the boot, "
            f"{_span([x['run'] for x in loads], 2)} as the runs ended, {loads[0]['end']:.2f} at the end"
        )
    return L


def guest_fidelity_section(runs: list[RunRecord]) -> list[str]:
    L = ["## Guest fidelity", ""] + guest_fidelity_lines(runs) + [""]
    L += [
        "| run | counted | link before / after (% of set rate) | attempt | CPU stall p99 / max (ms) "
        "| IPC p50 / p95 / p99 (us) | host load |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        f = r.extra.get("fidelity") or {}
        probes = " / ".join(
            "-" if not p or p.get("wire_ratio") is None else f"{100 * p['wire_ratio']:.1f}" for p in f.get("probes", [])
        )
        g = r.extra.get("guest") or {}
        st, ipc = g.get("stalls"), g.get("ipc_rtt")
        load = r.extra.get("host_load", {}).get("run")
        counted = "yes" if r.usable else ("**no**: " + (r.invalid or r.error or r.skipped or ""))
        L.append(
            f"| {r.run_id} | {counted} | {probes or '-'} | {f.get('attempt', 0) + 1 if f else '-'} | "
            f"{fmt(st and st['p99_ms'], 1)} / {fmt(st and st['max_ms'], 0)} | "
            + (f"{ipc['p50_us']} / {ipc['p95_us']} / {ipc['p99_us']} ({ipc['count']})" if ipc else "-")
            + f" | {fmt(load)} |"
        )
    return L + [""]


def reordering_section(runs: list[RunRecord]) -> list[str]:
    udp = {}
    tcp: dict[str, int] = {}
    for r in runs:
        ro = r.extra["reordering"]
        key = r.cell
        udp[key] = (ro["udp_out_of_order"], ro["udp_packets"])
        tcp[r.scheme_label] = tcp.get(r.scheme_label, 0) + sum(ro["tcp_reorder_events"].values())
    L = [
        "## Reordering check (netem jitter must bunch, not reorder)",
        "",
        "UDP probe at half the link rate on each new link, datagrams received out of order "
        "(data path / jittered ACK path):",
        "",
    ]
    for cell, (ooo, pk) in udp.items():
        L.append(
            f"- {cell}: data path {ooo.get('data_path')}/{pk.get('data_path')}, "
            f"ACK path {ooo.get('ack_path')}/{pk.get('ack_path')}"
        )
    L += [
        "",
        "TCP reorder events in the sender's namespace (nstat TcpExtTCP{SACK,TS,Reno,FACK}Reorder, summed "
        "over the scheme's runs; they also count spurious retransmissions that the emulated CPUs' scheduling "
        "stalls cause, see experiments/vm/README.md): " + ", ".join(f"{k} {v}" for k, v in tcp.items()),
        "",
    ]
    return L


# ---- plots ---------------------------------------------------------------------------------------


def _safe(cell: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in cell)


def plot_all(sc: Scenario, runs: list[RunRecord], cells: dict, out: Path) -> list[Path]:
    paths = []
    for cell, schemes in cells.items():
        with_series = {n: [r for r in rs if r.series and r.usable] for n, rs in schemes.items()}
        with_series = {n: rs for n, rs in with_series.items() if rs}
        if with_series:
            paths.append(plot_timeseries(cell, with_series, out / f"timeseries-{_safe(cell)}.png"))
            paths.append(plot_cdfs(cell, with_series, out / f"cdf-{_safe(cell)}.png"))
        pts = {
            n: [
                r
                for r in rs
                if r.usable and r.metrics.get("p95_delay_ms") and r.metrics.get("goodput_mbps") is not None
            ]
            for n, rs in schemes.items()
        }
        if any(pts.values()):
            paths.append(plot_tput_delay(cell, pts, out / f"tput-delay-{_safe(cell)}.png"))
    if sc.kind == "overhead":
        p = plot_cpu(cells, out / "cpu.png")
        if p:
            paths.append(p)
    if sc.demo:
        for cell, schemes in cells.items():
            usable = {n: [r for r in rs if r.usable] for n, rs in schemes.items()}
            if any(usable.values()):
                path = out / f"goodput-per-second-{_safe(cell)}.png"
                paths.append(plot_per_second(cell, usable, sc.demo.ramp_fraction, path))
    return paths


def plot_per_second(cell: str, schemes: dict[str, list[RunRecord]], fraction: float, path: Path) -> Path:
    """Per-second goodput from each flow's start: one line per repetition, coloured by scheme."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    colors = _colors(schemes)
    link = None
    for name, rs in schemes.items():
        for i, r in enumerate(rs):
            ys = per_second_mbps(r)
            link = r.capacity_mbps
            ax.plot(
                np.arange(1, len(ys) + 1) - 0.5,
                ys,
                color=colors[name],
                lw=1.2,
                alpha=0.8,
                label=r.scheme_label if i == 0 else None,
            )
    if link:
        ax.axhline(link, color="black", lw=0.8, ls="--")
        ax.axhline(fraction * link, color="grey", lw=0.8, ls=":", label=f"{100 * fraction:g} % of the link")
    ax.set_xlabel("seconds from the flow's start (1 s bins)")
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{cell}: per-second goodput, one line per repetition")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _colors(names) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def plot_timeseries(cell: str, schemes: dict[str, list[RunRecord]], path: Path) -> Path:
    return _save(timeseries_figure(cell, schemes), path)


def timeseries_figure(cell: str, schemes: dict[str, list[RunRecord]]):
    """Throughput, inflight and RTT over time: every repetition of every scheme, one thin line each
    (one per flow in the lower panels), and with several reps their median throughput per bin, bold.
    Each line's gid names it (`bbr rep 2`, `bbr median`) for the tests."""
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    colors = _colors(schemes)
    for name, rs in schemes.items():
        rs = sorted(rs, key=lambda r: r.rep)
        several = len(rs) > 1
        tputs = []
        for r in rs:
            rows = np.asarray([x for x in r.series if x[2] is not None or x[4] is not None], dtype=float)
            if rows.size == 0:
                continue
            rep = f"{name} rep {r.rep}"
            t_tot, tput = _total_tput(r)
            tputs.append((t_tot, tput))
            label = None if several else r.scheme_label
            axes[0].plot(t_tot, tput, color=colors[name], label=label, lw=0.7 if several else 1.2,
                         alpha=0.45 if several else 1.0, gid=rep)
            comp = {f.id for f in r.competitor_flows()}
            if comp:  # the competitor beside the scheme it ran with, dashed
                t_c, tput_c = total_throughput([x for x in r.series if x[1] in comp], m.CONV_BIN_S, r.duration_s)
                axes[0].plot(t_c, tput_c, color=colors[name], ls="--", lw=0.7, alpha=0.6, gid=f"{rep} competitor",
                             label=f"its competitor ({r.scheme_label})" if r is rs[0] else None)
            own = [f for f in np.unique(rows[:, 1]) if f not in comp]
            for f in np.unique(rows[:, 1]):
                fr = rows[rows[:, 1] == f]
                gid = f"{rep} competitor" if f in comp else (rep if len(own) == 1 else f"{rep} flow {int(f)}")
                ls = "--" if f in comp else "-"
                for ax, col, scale in ((axes[1], 3, 1000.0), (axes[2], 4, 1.0)):
                    ax.plot(fr[:, 0], fr[:, col] / scale, color=colors[name], lw=0.6, alpha=0.5, ls=ls, gid=gid)
        if len(tputs) > 1:
            n = min(len(t) for t, _ in tputs)
            median = np.median(np.vstack([y[:n] for _, y in tputs]), axis=0)
            axes[0].plot(tputs[0][0][:n], median, color=colors[name], lw=2.2, gid=f"{name} median",
                         label=f"{rs[0].scheme_label}: median of {len(tputs)} reps")
    axes[0].set_ylabel("throughput (Mbit/s)\n(the scheme's flows, 0.5 s bins)")
    axes[1].set_ylabel("inflight (kB)")
    axes[2].set_ylabel("RTT (ms)")
    axes[2].set_xlabel("time (s)")
    axes[0].legend(fontsize=8, loc="lower right")
    axes[0].set_title(f"{cell}: every repetition (thin), the median of their throughput (bold)")
    for a in axes:
        a.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _total_tput(r: RunRecord):
    return total_throughput(r.own_series(), m.CONV_BIN_S, r.duration_s)


def plot_tput_delay(cell: str, schemes: dict[str, list[RunRecord]], path: Path) -> Path:
    return _save(tput_delay_figure(cell, schemes), path)


def tput_delay_figure(cell: str, schemes: dict[str, list[RunRecord]]):
    """Throughput against p95 delay, one point per run and each scheme's 1-sigma ellipse."""
    fig, ax = plt.subplots(figsize=(7, 5))
    colors = _colors(schemes)
    for name, rs in schemes.items():
        if not rs:
            continue
        d = [r.metrics["p95_delay_ms"] for r in rs]
        g = [r.metrics["goodput_mbps"] for r in rs]
        ax.scatter(d, g, color=colors[name], s=18, alpha=0.6)
        ax.scatter(
            [10 ** np.mean(np.log10(d))],
            [np.mean(g)],
            color=colors[name],
            s=70,
            marker="D",
            edgecolor="black",
            label=rs[0].scheme_label,
        )
        e = m.sigma_ellipse(d, g)
        if e is not None:
            # Drawn in (log10 delay, throughput) and mapped back: sample the ellipse's outline.
            th = np.linspace(0, 2 * np.pi, 100)
            a, b, ang = e.width / 2, e.height / 2, math.radians(e.angle_deg)
            xs = e.center_log_delay + a * np.cos(th) * math.cos(ang) - b * np.sin(th) * math.sin(ang)
            ys = e.center_tput + a * np.cos(th) * math.sin(ang) + b * np.sin(th) * math.cos(ang)
            # Throughput is never negative: a wide ellipse near 0 is cut flat along the axis (issue
            # 20). Delay is drawn in log10 and so stays above 0 by construction.
            ax.plot(10**xs, np.maximum(ys, 0.0), color=colors[name], lw=1, gid=f"{name} ellipse")
    ax.set_xscale("log")
    ax.invert_xaxis()
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("95th percentile RTT (ms, log scale; better ->)")
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{cell}: throughput vs delay, 1-sigma ellipses (cut at 0)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_cdfs(cell: str, schemes: dict[str, list[RunRecord]], path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    colors = _colors(schemes)
    for name, rs in schemes.items():
        rtts = [x[4] for r in rs for x in r.own_series() if x[4] is not None]
        tput = pooled(rs, "throughput_mbps")
        if rtts:
            xs, ys = m.cdf(rtts)
            axes[0].plot(xs, ys, color=colors[name], label=rs[0].scheme_label)
        if tput:
            xs, ys = m.cdf(tput)
            axes[1].plot(xs, ys, color=colors[name], label=rs[0].scheme_label)
    axes[0].set_xlabel("RTT (ms)")
    axes[1].set_xlabel("per-RTT throughput (Mbit/s, flow 0)")
    # A few RTT bins right after a stalled sample read far above the link: keep the axis on the bulk.
    pooled_all = [x for rs in schemes.values() for x in pooled(rs, "throughput_mbps")]
    if pooled_all:
        axes[1].set_xlim(0, max(m.percentile(pooled_all, 99.5) * 1.1, 1e-3))
    for a in axes:
        a.set_ylabel("CDF")
        a.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{cell}: CDFs over all repetitions")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_cpu(cells: dict[str, dict[str, list[RunRecord]]], path: Path) -> Path | None:
    series: dict[str, list[tuple[int, float]]] = {}
    for schemes in cells.values():
        for name, rs in schemes.items():
            vals = [r.metrics.get("cpu_s") for r in rs if r.usable]
            med = m.median_spread(vals)[0]
            if med is not None:
                series.setdefault(rs[0].scheme_label, []).append((rs[0].params.get("flows"), med))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in series.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent flows")
    ax.set_ylabel("CPU seconds during the run (whole guest)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
