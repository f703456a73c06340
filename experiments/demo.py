#!/usr/bin/env python3
"""The two PolyCC scenarios in the simulator: BBR, CUBIC and the fused policy side by side.

Scenario 1 (PolyCC SIGCOMM'23 demo): 20 Mbit/s, RTT 100 ms with an ACK-path deviation of
+/-20, 70 and 100 ms, 1 BDP buffer; fused = BBR pilot + CUBIC copilot, max on cwnd.
Scenario 2: 20 Mbit/s halved to 10 Mbit/s at 5 s, RTT 100 ms; fused = BBR pilot + Copa
copilot, min on rate.

Scenario 1 cells are means over --seeds runs (BBR under heavy aggregation is bistable: some
runs keep the link busy, others collapse; "collapsed" counts runs under 25 % of the link).
Scenario 2 cells are medians.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass

FUSED_S1 = ["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--fusion", "max", "--fuse-on", "cwnd"]
FUSED_S2 = ["--alg", "fused", "--pilot", "bbr", "--copilot", "copa", "--fusion", "min", "--fuse-on", "rate"]
SCHEMES_S1 = {"bbr": ["--alg", "bbr"], "cubic": ["--alg", "cubic"], "fused(bbr+cubic,max cwnd)": FUSED_S1}
SCHEMES_S2 = {"bbr": ["--alg", "bbr"], "cubic": ["--alg", "cubic"], "fused(bbr+copa,min rate)": FUSED_S2}


@dataclass
class Args:
    sim: str
    seeds: int
    duration_s: int


def run_sim(sim: str, flags: list[str], seed: int) -> dict:
    out = subprocess.run([sim, *flags, "--seed", str(seed), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def mean(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.fmean(values) if values else None


def fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def progress(done: int, total: int) -> None:
    """A bar redrawn in place on a terminal; every 10 % as plain lines in a log."""
    if not sys.stderr.isatty():
        if done == total or done * 10 // total != (done - 1) * 10 // total:
            sys.stderr.write(f"{done}/{total} runs\n")
        return
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} runs")
    sys.stderr.flush()
    if done == total:
        sys.stderr.write("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sim", default="target/release/polycc-sim", help="path to the polycc-sim binary")
    p.add_argument("--seeds", type=int, default=10, help="runs per cell")
    p.add_argument("--duration-s", type=int, default=60, help="simulated seconds per run")
    a = Args(**vars(p.parse_args(argv)))
    devs = [20, 70, 100]
    total = a.seeds * (len(devs) * len(SCHEMES_S1) + len(SCHEMES_S2))
    done = 0
    s1: dict[tuple[int, str], list[dict]] = {}
    for dev in devs:
        link = ["--bw", "20mbit", "--rtt", "100ms", "--rtt-dev", f"{dev}ms", "--buffer", "1bdp", "--duration", f"{a.duration_s}s"]
        for name, flags in SCHEMES_S1.items():
            s1[(dev, name)] = []
            for seed in range(1, a.seeds + 1):
                s1[(dev, name)].append(run_sim(a.sim, link + flags, seed))
                done += 1
                progress(done, total)
    s2: dict[str, list[dict]] = {}
    link2 = ["--bw", "20mbit", "--rtt", "100ms", "--bw-change", "5s:10mbit", "--buffer", "1bdp", "--duration", "30s"]
    for name, flags in SCHEMES_S2.items():
        s2[name] = []
        for seed in range(1, a.seeds + 1):
            s2[name].append(run_sim(a.sim, link2 + flags, seed))
            done += 1
            progress(done, total)

    print(f"\n## PolyCC scenario 1: 20 Mbit/s, RTT 100 ms +/- dev (ACK aggregation), 1 BDP buffer, {a.duration_s} s, mean of {a.seeds} seeds\n")
    print("| RTT deviation | scheme | goodput (Mbit/s) | utilization | mean RTT (ms) | p95 RTT (ms) | collapsed runs | x BBR |")
    print("|---|---|---|---|---|---|---|---|")
    for dev in devs:
        bbr = mean(s1[(dev, "bbr")], "goodput_mbps") or float("nan")
        for name in SCHEMES_S1:
            runs = s1[(dev, name)]
            g = mean(runs, "goodput_mbps")
            collapsed = sum(1 for r in runs if r["utilization"] < 0.25)
            print(f"| +/-{dev} ms | {name} | {fmt(g)} | {fmt(mean(runs, 'utilization'), 3)} | "
                  f"{fmt(mean(runs, 'mean_rtt_ms'), 1)} | {fmt(mean(runs, 'p95_rtt_ms'), 1)} | {collapsed}/{len(runs)} | "
                  f"{fmt(g / bbr if g else None)} |")
    print("\n## PolyCC scenario 2: 20 -> 10 Mbit/s at 5 s, RTT 100 ms, 1 BDP buffer, 30 s, median of "
          f"{a.seeds} seeds\n")
    print("Convergence: seconds after the change until 100 ms-binned throughput stays within 10 % of 10 Mbit/s "
          "for 2 s; queue: until the bottleneck queue stays within one new BDP for 2 s.\n")
    print("| scheme | goodput (Mbit/s) | mean RTT (ms) | p95 RTT (ms) | loss (%) | convergence (s) | queue convergence (s) |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in s2.items():
        print(f"| {name} | {fmt(median(runs, 'goodput_mbps'))} | {fmt(median(runs, 'mean_rtt_ms'), 1)} | "
              f"{fmt(median(runs, 'p95_rtt_ms'), 1)} | {fmt(100 * median(runs, 'loss_frac'), 2)} | "
              f"{fmt(median(runs, 'convergence_s'))} | {fmt(median(runs, 'queue_convergence_s'))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
