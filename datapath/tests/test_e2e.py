#!/usr/bin/env python3
"""Host side of the kernel end-to-end tests: boot the guest, run guest_e2e.py, assert on its JSON.

    python3 datapath/tests/test_e2e.py [--ipc genl|usersock] [--only SCENARIO] [--results DIR]

Needs the module built for the guest kernel (make -C datapath KDIR=$(experiments/vm/polycc-vm kdir))
and the agent (cargo build --release -p polycc-agent); `make vm-test` does both.
Prints one line per check and closes with "e2e: N passed, N failed" ("e2e usersock: ..." with
--ipc usersock, the module's portus-compatible transport).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "vm"))
from kernel_job import bpf_guest_env, run_in_guest  # noqa: E402

sys.path.insert(0, str(ROOT / "experiments" / "tests"))
from vocabulary import violations  # noqa: E402


def checks(s: dict) -> list[tuple[str, bool, str]]:
    """(name, ok, numbers) for every assertion the issue names."""
    out: list[tuple[str, bool, str]] = []

    def add(name: str, ok: bool, detail: str) -> None:
        out.append((name, bool(ok), detail))

    if s.get("datapath") == "bpf":
        bpf_checks(s, add)
    else:
        ccp_checks(s, add)
    # docs/metrics.md: the guest's record names its units like every other JSON polycc writes.
    wrong = violations(s)
    add("every number in e2e.json names its unit (docs/metrics.md)", not wrong, json.dumps(wrong))
    return out


def ccp_checks(s: dict, add) -> None:
    """datapath/tests/guest_e2e.py's rows: ccp.ko and the agent on the emulated link."""
    ipc = s.get("ipc", "genl")
    add(f"module loads (ipc={ipc}) and registers ccp", s.get("module_loaded"), f"module_loaded={s.get('module_loaded')}")
    if "link" in s:
        x = s["link"]
        add("link: a ccp flow driven by the agent reaches >= 85 % of 20 Mbit/s",
            x.get("utilization", 0) >= 0.85, json.dumps(x))
        add("link: the agent saw the flow's CREATE and its reports",
            x.get("flows_created", 0) >= 1 and x.get("reports", 0) >= 100, json.dumps(x))
        # The report -> update round trip pairs each update with its own report: a pairing one
        # report late reads about an RTT (34.8 ms on a 30 ms link; 57 ms here before b14b10f), the
        # agent's answer itself a few ms under TCG. Both flows, the second on the freed slots.
        rtt_us = 1000 * x.get("rtt_ms", 0)
        for key, what in (("ipc_p50_us", "the first flow"), ("reused_slot_ipc_p50_us", "a flow on freed slots")):
            add(f"link: {what}'s report -> update round trip p50 <= RTT / 4 (each update paired with its own report)",
                x.get(key.replace("p50_us", "reports"), 0) >= 20 and 0 <= x.get(key, -1) <= rtt_us / 4, json.dumps(x))
    if "pinned" in s:
        x = s["pinned"]
        add("pinned: the kernel's cwnd is the pinned 10 packets on every sock_diag sample (>= 20 samples)",
            x.get("samples", 0) >= 20 and x.get("cwnd_min_packets") == x.get("cwnd_max_packets") == 10, json.dumps(x))
        # At the round trip the guest measured: its own delay under host load is not the window's
        # (guest_e2e.scenario_pinned).
        add("pinned: goodput is 10 MSS per measured RTT +/- 15 %",
            abs(x.get("goodput_at_srtt_ratio", 0) - 1.0) <= 0.15, json.dumps(x))
    if "agent_kill" in s:
        x = s["agent_kill"]
        add("agent_kill: the flow keeps >= 50 % of the link after SIGKILL (fallback)",
            x.get("after_kill_utilization", 0) >= 0.5, json.dumps(x))
        add("agent_kill: no WARN/BUG/oops in the kernel log", x.get("kernel_errors") == [], json.dumps(x.get("kernel_errors")))
        add("agent_kill: a restarted agent controls new flows",
            x.get("restart_created_flows", 0) >= 1 and x.get("restart_reports", 0) >= 20, json.dumps(x))
    if "quiet_agent" in s:
        x = s["quiet_agent"]
        c = x.get("counters", {})
        add("quiet_agent: an agent silent on a flow for 12 s keeps its pinned window (the kernel's cwnd "
            "on every sock_diag sample of the quiet seconds, >= 20 samples)",
            x.get("samples", 0) >= 20 and x.get("cwnd_min_packets") == x.get("cwnd_max_packets") == 20,
            json.dumps(x))
        # Per second, the guest's clock moves bytes between a receiver's intervals under host load
        # (guest_e2e.scenario_quiet_agent): the mean holds the window's rate, a second only a stall floor.
        add("quiet_agent: goodput over the quiet seconds is the window's rate at the measured RTT (mean within 15 %, no second under 0.5x)",
            abs(x.get("quiet_mean_ratio", 0) - 1) <= 0.15 and x.get("quiet_min_ratio", 0) >= 0.5, json.dumps(x))
        add("quiet_agent: no fallback and no READY while the agent is alive",
            c.get("fallback_entries") == 0 and c.get("ready_sent") == 0, json.dumps(c))
    if "agent_hang" in s:
        x = s["agent_hang"]
        c = x.get("counters", {})
        add("agent_hang: a stopped agent's flow falls back and grows (> 1.5x its pinned window)",
            x.get("stopped_ratio", 0) > 1.5 and c.get("fallback_entries", 0) >= 1, json.dumps(x))
        add("agent_hang: after SIGCONT the agent holds the flow again (the kernel's cwnd the pinned window on "
            "every sock_diag sample, >= 10; goodput its rate at the measured RTT +/- 25 %), no READY sent",
            x.get("samples", 0) >= 10 and x.get("cwnd_min_packets") == x.get("cwnd_max_packets") == 10
            and abs(x.get("resumed_at_srtt_ratio", 0) - 1) <= 0.25
            and c.get("ready_sent") == 0 and c.get("agents_gone") == 0, json.dumps(x))
    if "agent_restart" in s:
        x = s["agent_restart"]
        add("agent_restart: the agent's exit is seen at once (< 0.5 s), goodput never under 50 % after SIGKILL",
            x.get("gone_latency_s") is not None and x["gone_latency_s"] < 0.5
            and x.get("after_kill_min_utilization", 0) >= 0.5, json.dumps(x))
        # iperf3's control connection is adopted too, at its idle 10 packets: the data flow is the
        # largest window.
        add("agent_restart: the new agent adopts the flow at its current window (>= 30 packets, not 10)",
            max(x.get("adopted_init_cwnd_packets") or [0]) >= 30
            and max(x.get("adopted_installed_cwnd_packets") or [0]) >= 30, json.dumps(x))
        # 0.6, not 0.7: CUBIC's own backoff (beta 0.7) shows as 0.65-0.7 of the link in a 1 s bin,
        # before the restart as after it (a run at 0.653 had the same dips before the kill).
        add("agent_restart: no slow-start dip after the restart (every second >= 0.6x the 2 s before)",
            x.get("after_restart_min_mbps", 0) >= 0.6 * x.get("before_restart_mbps", 1e9), json.dumps(x))
    if "many_flows" in s:
        many_flows_rows("many_flows", s["many_flows"], add)
    if "stress" in s:
        x = s["stress"]
        c = x.get("counters", {})
        restarts, changes = x.get("planned_restart_events", 10), x.get("planned_changes", 100)
        add(f"stress: {restarts} agent restarts in {x.get('duration_s', 60)} s, each exit seen, and {changes} live "
            "policy changes went through",
            restarts >= 5 and x.get("restarts") == restarts and c.get("agents_gone") == restarts
            and x.get("ok_changes") == changes, json.dumps(x))
        add("stress: 64 flows hold >= 50 % of the link in every 5 s and none starves (>= 0.1x a fair share)",
            x.get("streams") == 64 and x.get("min_5s_utilization", 0) >= 0.5
            and x.get("min_stream_fair_ratio", 0) >= 0.1,
            json.dumps({k: x.get(k) for k in STRESS_SHARE_DETAIL}))
        f = x.get("flood", {})
        # genl: netlink refuses every send to a port or group (EPERM), and genetlink what is sent
        # to the module, before it sees it. usersock: the sends go through; the module counts
        # them refused, and the agent drops what the kernel did not send.
        refused = (f.get("refused_messages", 0) > 1000 and c.get("refused_messages") == 0 if ipc == "genl"
                   else f.get("sent_messages", 0) > 1000 and c.get("refused_unprivileged", 0) > 0)
        add(f"stress ({ipc}): the unprivileged flood is refused, the policy file intact (one rule, last policy, 0600)",
            refused and x.get("policy_file_ok") is True and x.get("policy_file_mode") == "0o600", json.dumps(x))
        add("stress: no oops or WARN, every flow slot freed, rmmod clean",
            x.get("kernel_errors") == [] and x.get("remaining_flows") == 0 and x.get("rmmod_rc") == 0,
            json.dumps(x))
    for name in ("scale", "scale_10k"):
        if name not in s:
            continue
        x = s[name]
        c = x.get("counters", {})
        slots, flows = x.get("slots", -1), x.get("flows", -2)
        add(f"{name}: {flows} concurrent ccp flows open; the agent gets a CREATE for each of the {slots} slots",
            flows == x.get("opened_sockets") == x.get("ccp_sockets") and x.get("agent_created_flows") == slots == x.get("active_flows"),
            json.dumps(x))
        add(f"{name}: the {flows - slots} past max_flows run in-kernel and are counted (table_full)",
            c.get("table_full") == flows - slots, json.dumps(x))
        add(f"{name}: the agent, busy with the burst but reading, loses no flow (no fallback)",
            c.get("fallback_entries") == 0, json.dumps(x))
        # CPU in the guest: QEMU's TCG runs it tens of times slower than hardware.
        add(f"{name}: agent memory and CPU per flow reported, under 16 KiB and 10 ms of guest CPU per flow",
            0 < x.get("agent_per_flow_bytes", 0) < 16384 and 0 < x.get("agent_cpu_per_flow_us", 0) < 10_000,
            json.dumps(x))
        add(f"{name}: every slot free once they close, rmmod clean",
            x.get("remaining_flows") == 0 and x.get("rmmod_rc") == 0, json.dumps(x))
    if "hostile" in s:
        x = s["hostile"]
        add(f"hostile ({ipc}): a message from an unprivileged process is refused",
            x.get("unprivileged_send_errno") == 1 if ipc == "genl"  # EPERM from genetlink
            else x.get("unprivileged_refused_messages") == 1 and x.get("unprivileged_refused_logged") is True, json.dumps(x))
        add(f"hostile ({ipc}): an agent without CAP_NET_ADMIN exits 3 at start and says why",
            x.get("unprivileged_agent_rc") == 3 and x.get("unprivileged_agent_says_why") is True, json.dumps(x))
        add("hostile: an unprivileged process cannot select ccp (EPERM)",
            x.get("unprivileged_select_errno") == 1, json.dumps(x))
        add("hostile: an unprivileged process cannot read the counters or the IPC histogram (EACCES)",
            set((x.get("unprivileged_read_errno") or {"": 0}).values()) == {13}, json.dumps(x))
        add("hostile: every malformed message is refused",
            x.get("refused_messages", 0) == x.get("corpus_sent_messages", -1) == x.get("corpus_messages"), json.dumps(x))
        add("hostile: no WARN/BUG/oops, and flows still work afterwards",
            x.get("kernel_errors") == [] and x.get("after_goodput_mbps", 0) >= 10 and x.get("after_reports", 0) > 0,
            json.dumps(x))
    if "vivace_loss" in s:
        x = s["vivace_loss"]
        add("vivace_loss: Vivace via ccp.ko reaches >= 0.85 of 50 Mbit/s at 1 % loss (kernel CUBIC beside it)",
            x.get("vivace_utilization", 0) >= 0.85, json.dumps(x))
        whole_ms_rtt_row("vivace_loss", x, add)
    if "ecn" in s:
        random_loss_rows("ecn", s["ecn"], add, marks=True)
    if "random_loss" in s:
        random_loss_rows("random_loss", s["random_loss"], add, marks=False)
    if "policies" in s:
        x = s["policies"]
        a, b = x.get("5201", {}), x.get("5202", {})
        add("policies: polycc flows --json answers while the flows run", x.get("polycc_rc") == 0, json.dumps(x))
        add("policies: the flow to 5201 runs rule 1's Reno, the flow to 5202 rule 2's fused BBR+CUBIC",
            (a.get("policy"), a.get("rule"), b.get("pilot"), b.get("copilots"), b.get("rule"))
            == ("reno", 1, "bbr", ["cubic"], 2), json.dumps(x))
        add("policies: both flows are controlled (reports, a window, and BBR's pacing rate for 5202)",
            (a.get("reports") or 0) > 10 and (b.get("reports") or 0) > 10 and (a.get("cwnd_bytes") or 0) > 0
            and (b.get("rate_bytes_per_sec") or 0) > 0
            and a.get("goodput_mbps", 0) + b.get("goodput_mbps", 0) >= 10, json.dumps(x))
    if "ipv6" in s:
        x = s["ipv6"]
        v6, v4 = x.get("v6", {}), x.get("v4", {})
        add("ipv6: the v6 flow reaches the agent with its real addresses and runs its v6 rule's Reno",
            (v6.get("src") or "").startswith("[fd77::1]:") and v6.get("dst") == "[fd77::2]:5201"
            and (v6.get("policy"), v6.get("rule")) == ("reno", 1) and (v6.get("reports") or 0) > 10,
            json.dumps(x))
        add("ipv6: the v4 flow beside it keeps the default policy, and both move data",
            (v4.get("policy"), v4.get("rule")) == ("cubic", None)
            and v6.get("goodput_mbps", 0) + v4.get("goodput_mbps", 0) >= 10, json.dumps(x))
    if "startup" in s:
        x = s["startup"]
        reps = x.get("reps", [])
        # Issue 15's target is 1.2x; at ~1 s a 100 ms sample is 10 %, so the bound is 1.3x plus
        # two sample periods. A rep's reference is the faster member's median over the reps, or the
        # faster member of that rep when the guest slowed the whole rep (guest_e2e.scenario_startup):
        # a rep misses only when the fused flow is slower than both. Measured 2026-12-03 with the
        # agent on the flows' vCPU: here 1.05-1.21x of the median, CI 1.22-1.33x, and 1.40x in a rep
        # whose in-kernel BBR never got there and CUBIC took 4.27 s (the fused flow 2.85 s); with the
        # agent on its own vCPU: CI 0.93-1.03x of the median.
        slack = 2 * x.get("sample_s", 0.1)
        best = x.get("best_member_median_t80_s", 0)
        add("startup: on every rep the fused flow reaches 80 % of the link within 1.3x (+ 2 samples) the "
            "faster of in-kernel BBR and CUBIC (their median over the reps, or that rep's when slower)",
            len(reps) >= 3 and best > 0 and all(
                r["fused"]["t80_s"] is not None
                and r["fused"]["t80_s"] <= 1.3 * max(best, r["best_member_t80_s"]) + slack for r in reps),
            json.dumps(x))
    if "reorder" in s:
        reorder_rows("reorder", s["reorder"], add)
    error_rows(s, add)
    if "final_rmmod_rc" in s:
        add("final rmmod succeeds and the kernel log is clean",
            s["final_rmmod_rc"] == 0 and s.get("final_kernel_errors") == [], json.dumps(s.get("final_kernel_errors")))


def jsonl_violations(results: Path) -> list[str]:
    """docs/metrics.md over every JSON-lines file in `results` (the agent's --log-json, the
    startup rows' sock_diag samples), each distinct break once, as "file: path: why"."""
    seen: dict[str, None] = {}
    for path in sorted(results.glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by SIGKILL
            for v in violations(record):
                seen.setdefault(f"{path.name.split('.')[0].rstrip('0123456789-')}: {v}")
    return list(seen)


def error_rows(s: dict, add) -> None:
    """A failed row for every scenario the guest recorded an exception for."""
    for name, x in s.items():
        if isinstance(x, dict) and "error" in x:
            add(f"{name}: ran without an exception", False, x["error"])


def random_loss_rows(name: str, x: dict, add, marks: bool) -> None:
    """guest_e2e.cubic_against_kernel's rows, for either datapath: 1 % of packets marked (`marks`)
    or dropped at random (docs/datapath.md "ECN and random loss"). Before marks reached the agent
    its CUBIC ran at 18.9 Mbit/s against the kernel's 4.5; losses are a parity row. The ratio
    compares two 27 s draws of a lossy link (12 s until 2026-11-29: 0.72-1.43x over 12 runs since
    ebc85cb, then 1.61 in one CI run with both flows at their extremes; 0.88-1.20 over 8 runs of
    27 s; 0.92-1.12 over 6 runs since both flows run at once, 2026-11-30), so the band is
    wide and a flow that ignored its losses or marks is caught by the link share (CUBIC's
    response at 1 % holds it near a quarter of this link)."""
    ratio = x.get("agent_after_3s_mbps", 0) / max(x.get("kernel_after_3s_mbps", 0), 1e-9)
    what = "marked" if marks else "dropped at random"
    add(f"{name}: past slow start, the agent's CUBIC with 1 % of packets {what} runs at 0.55-1.6x "
        "in-kernel CUBIC's goodput", 0.55 <= ratio <= 1.6, json.dumps(x))
    add(f"{name}: the agent's CUBIC answers {'marks' if marks else 'losses'} (<= 0.6 of the link)",
        x.get("agent_mbps", 1e9) <= 0.6 * x.get("link_mbps", 0), json.dumps(x))
    if marks:
        add(f"{name}: the agent sees the marks, each once (0 < CE-echoed packets <= packets delivered)",
            0 < x.get("ce_packets", 0) <= x.get("acked_packets", 0), json.dumps(x))
    else:
        # Past slow start: its overshoot alone cost either flow up to ~180 retransmissions (the
        # agent's 230 against the kernel's 66 in one CI run with both at the same rate after it).
        ours = x.get("agent_after_3s_retransmitted_packets", 1e9)
        kernel = x.get("kernel_after_3s_retransmitted_packets", 0)
        add(f"{name}: past slow start, the agent's CUBIC retransmits at most 2x in-kernel CUBIC's packets + 30",
            ours <= 2 * kernel + 30, json.dumps(x))
        whole_ms_rtt_row(name, x, add)
        if "tsval_rtt_dropped_events" in x:
            add(f"{name}: ccp.ko kept whole-millisecond timestamp RTT samples from the agent (counted, > 0 at 1 % loss)",
                x["tsval_rtt_dropped_events"] > 0, json.dumps(x))


def whole_ms_rtt_row(name: str, x: dict, add) -> None:
    """guest_e2e.whole_ms_rtt_minima's row: on a lossy link the kernel's millisecond fallback from the
    timestamp option (after each recovery) must not reach the agent's RTT minima. Before the
    datapaths kept it back, 4-5 % of Copa's reports on 50 Mbit/s 30 ms 1 % loss had a whole-ms
    minimum (30.000 ms, under any real sample); a precise minimum is one about one time in 1,000."""
    n, whole = x.get("rtt_reports", 0), x.get("whole_ms_rtt_min_reports", 1e9)
    add(f"{name}: RTT minima in whole milliseconds (the timestamp option's fallback) in <= 1 % of the reports",
        n >= 100 and whole <= max(3, 0.01 * n), json.dumps(x))


def reorder_rows(name: str, x: dict, add) -> None:
    """guest_e2e.reorder_against_kernel's rows, for either datapath: a path that holds 5 % of the
    data packets 15 ms. The kernel marks such a hole lost and undoes its reduction when the
    original arrives; the agent must be told (the undo signal) and take its own back. Before it,
    the agent's CUBIC kept a slow-start cut for a reordering and ran at 0.34 of the kernel's. A flow
    whose first held packet was overtaken by fewer than 3 meets no spurious loss at all (see
    guest_e2e.py): then only the goodput row has something to judge."""
    ours, kernel = x.get("agent_cubic", {}), x.get("kernel_cubic", {})
    add(f"{name}: the path reorders, and each kernel undo on the agent's CUBIC flow reaches the agent "
        "(undo reports >= 1 where the kernel undid)",
        ours.get("reorder_events", 0) >= 50
        and (ours.get("kernel_undo_events", 0) == 0 or ours.get("undo_reports", 0) >= 1), json.dumps(x))
    ratio = ours.get("goodput_mbps", 0) / max(kernel.get("goodput_mbps", 0), 1e-9)
    add(f"{name}: the agent's CUBIC runs at >= {REORDER_CUBIC_RATIO} of in-kernel CUBIC's goodput",
        ratio >= REORDER_CUBIC_RATIO, json.dumps(x))
    if "fused" in x:
        best = max(x.get("kernel_bbr", {}).get("goodput_mbps", 0), kernel.get("goodput_mbps", 0))
        fused = x["fused"].get("goodput_mbps", 0)
        add(f"{name}: fused BBR+CUBIC runs at >= {REORDER_FUSED_RATIO} of the better of in-kernel BBR and CUBIC",
            fused >= REORDER_FUSED_RATIO * best, json.dumps(x))


# One 10 s draw each: CUBIC's slow start ends where HyStart's ACK train says (106-398 packets
# against a BDP of 167 on this path, 2026-11-28), so with the undo signal the agent's CUBIC read
# 0.85-1.10x the kernel's (8 runs, both datapaths), and before it 0.34x (and 0.90x with 30 ms
# holds, where the kernel's CUBIC fell to 12.6 Mbit/s itself). Fused BBR+CUBIC: 0.985-1.00x.
REORDER_CUBIC_RATIO, REORDER_FUSED_RATIO = 0.7, 0.9
# many_flows: the agent's retransmitted share of segments over the kernel's. Guest, 64 flows: 2.4x
# when a timeout restarted the agent from 10 packets (2026-12-02), 1.33-1.44x from the loss window
# with the window cut at once in a loss episode, 1.06-1.09x with it cut in step with the ACKs
# (PRR, 2026-12-03; 20 and 30 s runs).
MANY_FLOWS_RETRANS_RATIO = 1.2
# The stress share row's detail: its numbers and the poorest streams, not the policy log or the
# per-second sock_diag timelines (those stay in e2e.json).
STRESS_SHARE_DETAIL = ("streams", "min_5s_utilization", "per_5s_utilization", "utilization", "min_stream_fair_ratio",
                       "poorest_streams_5s_fair_ratios", "restarts", "counters", "iperf_error")
# How much of a failed check's detail the closing list repeats.
FAILED_DETAIL_CHARS = 1500


def many_flows_rows(name: str, x: dict, add) -> None:
    """64 flows of about two packets each: the agent's CUBIC against the kernel's (guest_e2e.py's
    scenario_many_flows, through ccp.ko or the BPF datapath)."""
    k, a = x.get("kernel_cubic", {}), x.get("agent_cubic", {})
    add(f"{name}: 64 agent CUBIC flows retransmit <= {MANY_FLOWS_RETRANS_RATIO}x the kernel CUBIC's share of "
        "segments, and the poorest keeps >= 0.3 of a fair share",
        a.get("retransmitted_frac", 1) <= MANY_FLOWS_RETRANS_RATIO * k.get("retransmitted_frac", 0)
        and a.get("min_stream_fair_ratio", 0) >= 0.3 and k.get("utilization", 0) >= 0.9, json.dumps(x))


def bpf_checks(s: dict, add) -> None:
    """datapath/tests/guest_bpf.py's rows: the BPF datapath on the emulated link."""
    add(f"bpf: the guest kernel ({s.get('kernel')}) has BTF", s.get("btf"), f"btf={s.get('btf')}")
    if "bpf_link" in s:
        x = s["bpf_link"]
        add("bpf_link: a polycc_bpf flow driven by the agent reaches >= 85 % of 20 Mbit/s",
            x.get("utilization", 0) >= 0.85, json.dumps(x))
        add("bpf_link: the agent saw the flow and its reports, and unregistered on exit",
            x.get("flows_created", 0) >= 1 and x.get("reports", 0) >= 100 and x.get("unregistered_after_exit"),
            json.dumps(x))
    if "bpf_kill" in s:
        x = s["bpf_kill"]
        add("bpf_kill: the flow keeps >= 50 % of the link after the agent's SIGKILL (BPF fallback)",
            x.get("after_kill_utilization", 0) >= 0.5, json.dumps(x))
    if "bpf_ecn" in s:
        random_loss_rows("bpf_ecn", s["bpf_ecn"], add, marks=True)
    if "bpf_random_loss" in s:
        random_loss_rows("bpf_random_loss", s["bpf_random_loss"], add, marks=False)
    if "bpf_reorder" in s:
        reorder_rows("bpf_reorder", s["bpf_reorder"], add)
    if "bpf_many_flows" in s:
        many_flows_rows("bpf_many_flows", s["bpf_many_flows"], add)
    error_rows(s, add)
    add("bpf: the kernel log is clean", s.get("final_kernel_errors") == [], json.dumps(s.get("final_kernel_errors")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--results", type=Path, default=ROOT / "results" / "vm-e2e")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--ipc", choices=["genl", "usersock"], default="genl", help="the module's transport")
    ap.add_argument("--stress-seconds", type=int, help="the stress scenario's length (guest_e2e.py's default 60)")
    ap.add_argument("--datapath", choices=["ccp", "bpf"], default="ccp",
                    help="bpf: no module, polycc-portus --datapath bpf in a 6.12 guest (datapath/tests/guest_bpf.py)")
    a = ap.parse_args()
    a.results.mkdir(parents=True, exist_ok=True)
    (a.results / "e2e.json").unlink(missing_ok=True)
    env = {}
    if a.datapath == "bpf":
        label = "e2e bpf"
        command = ["python3", "datapath/tests/guest_bpf.py"]
        # BPF links for struct_ops (the agent's registration) came in 6.4: the 6.1 guest lacks them.
        env.update(bpf_guest_env())
    else:
        label = "e2e" if a.ipc == "genl" else f"e2e {a.ipc}"
        command = ["python3", "datapath/tests/guest_e2e.py", "--ipc", a.ipc]
    for o in a.only:
        command += ["--only", o]
    if a.stress_seconds is not None:
        if a.datapath == "bpf":
            ap.error("--stress-seconds: the BPF suite has no stress scenario")
        command += ["--stress-seconds", str(a.stress_seconds)]
    rc = run_in_guest(command, a.results, a.timeout, env)
    summary_path = a.results / "e2e.json"
    if not summary_path.exists():
        print(f"{label}: the guest wrote no summary (polycc-vm exit {rc})")
        print(f"{label}: 0 passed, 1 failed")
        return 1
    s = json.loads(summary_path.read_text())
    results = checks(s)
    wrong = jsonl_violations(a.results)
    results.append(("every JSON line the guest wrote (agent logs, sock_diag samples) names its units",
                    not wrong, json.dumps(wrong[:20])))
    for name, ok, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f"\n     {detail}"))
    passed = sum(ok for _, ok, _ in results)
    failed = len(results) - passed + (rc != 0)
    if rc != 0:
        print(f"FAIL the guest command exited {rc}")
    # Each failure once more, after everything else and cut short: CI's log keeps its tail, and
    # a long detail printed mid-suite (the stress row's is ~5 kB) was lost from it once.
    for name, ok, detail in results:
        if not ok:
            print(f"failed: {name}\n     {detail[:FAILED_DETAIL_CHARS]}")
    print(f"{label}: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
