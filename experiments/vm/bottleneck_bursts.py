#!/usr/bin/env python3
"""Reads bottleneck-bursts.sh's captures: how bursty the sender's data reaches the bottleneck, how
many packets each ACK covers, and how regularly the bottleneck serves (gaps between departures).

    python3 experiments/vm/bottleneck_bursts.py DIR [CC ...]

Needs tcpdump on the host to read the pcaps. Standard library otherwise."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

SND, RCV = "10.77.0.1", "10.77.0.2"
MSS = 1448
# The capture keeps 64 bytes of each packet: a data packet's size is its sequence range.
LINE = re.compile(r"^(\d+\.\d+) IP (\S+)\.(\d+) > (\S+)\.(\d+): Flags \[[^\]]*\](?:, seq (\d+)(?::(\d+))?)?(?:, ack (\d+))?")


def packets(pcap: Path) -> list[tuple[float, str, int, int | None, int]]:
    """(time, source, source port, ack, payload bytes) of each TCP packet."""
    text = subprocess.run(["tcpdump", "-r", str(pcap), "-n", "-tt", "-S", "--time-stamp-precision=nano"],
                          capture_output=True, text=True, check=True).stdout
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            size = int(m[7]) - int(m[6]) if m[7] else 0
            out.append((float(m[1]), m[2], int(m[3]), int(m[8]) if m[8] else None, size))
    return out


def clumps(times: list[float], gap: float) -> list[int]:
    """Sizes of the runs of `times` closer than `gap` to the one before."""
    sizes, n = [], 1
    for a, b in zip(times, times[1:]):
        if b - a < gap:
            n += 1
        else:
            sizes.append(n)
            n = 1
    return sizes + [n]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def summary(d: Path, cc: str) -> dict:
    link = json.loads((d / f"{cc}-link.json").read_text())
    slot = 1500 * 8 / (link["rate_mbit"] * 1e6)  # one packet's time on the bottleneck
    inn, out = packets(d / f"{cc}-in.pcap"), packets(d / f"{cc}-out.pcap")
    data_in = [p for p in inn if p[1] == SND and p[4] > 0]
    port = max({p[2] for p in data_in}, key=lambda s: sum(p[2] == s for p in data_in))  # iperf3's data flow
    data_in = [p for p in data_in if p[2] == port]
    acks = [p for p in inn if p[1] == RCV and p[4] == 0 and p[3] is not None]
    data_out = [p[0] for p in out if p[1] == SND and p[4] > 0 and p[2] == port]
    bursts = clumps([p[0] for p in data_in], slot / 2)
    covered = [(b[3] - a[3]) / MSS for a, b in zip(acks, acks[1:]) if b[3] > a[3]]
    gaps = [b - a for a, b in zip(data_out, data_out[1:])]
    span = data_out[-1] - data_out[0]
    result = json.loads((d / f"{cc}.json").read_text())["end"]
    return {
        "cc": cc, "link": link,
        "goodput_mbps": round(result["sum_received"]["bits_per_second"] / 1e6, 2),
        "retransmits": result["sum_sent"]["retransmits"],
        "drop_frac": round(link["tbf_drops"] / max(len(data_in), 1), 4),
        "arrival_burst_packets": {"p50": pct(bursts, 0.5), "p90": pct(bursts, 0.9), "p99": pct(bursts, 0.99), "max": max(bursts)},
        "arrivals_in_bursts_of_8_or_more": round(sum(b for b in bursts if b >= 8) / len(data_in), 3),
        "packets_per_ack": {"mean": round(len(data_out) / max(len(acks), 1), 2), "p50": pct(covered, 0.5), "p90": pct(covered, 0.9)},
        "departure_gap_us": {q: round(pct(gaps, v) * 1e6) for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
        "time_in_gaps_over_1ms": round(sum(g for g in gaps if g > 1e-3) / span, 3),
    }


def main() -> int:
    d = Path(sys.argv[1])
    ccs = sys.argv[2:] or sorted(p.name[:-len("-link.json")] for p in d.glob("*-link.json"))
    for cc in ccs:
        print(json.dumps(summary(d, cc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
