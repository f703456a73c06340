#!/bin/bash
# netem-check: proves the guest can emulate the links the end-to-end tests need.
#
# The link is dumbbell.sh's (RATE_MBIT, 2 x DELAY_MS RTT, a router's one-BDP tbf buffer).
# Without jitter nothing can reorder; a UDP probe proves it. iperf3 runs DURATION_S with CUBIC, then BBR.
# Then the same link with LOSS_PROBE_PCT random loss carries BBR for LOSS_PROBE_S: random loss must
# drop packets, one at a time, not TCP's multi-packet GSO buffers (a netem at the sender dropped
# ~4 packets at once at 50 Mbit/s: the matrix's "1 % random loss" cell was a bursty-loss link).
#
# Runs as root where modules load and netem exists, i.e. in the guest:
#   experiments/vm/polycc-vm run --results DIR --need iperf3 -- experiments/vm/netem-check.sh
# Writes $POLYCC_VM_RESULTS/netem-check.json (or to the folder given as $1); prints a summary.
set -euo pipefail

RATE_MBIT=${RATE_MBIT:-20}
DELAY_MS=${DELAY_MS:-20}
DURATION_S=${DURATION_S:-5}
LOSS_PROBE_PCT=${LOSS_PROBE_PCT:-1}
LOSS_PROBE_S=${LOSS_PROBE_S:-4}
BDP_BYTES=$((RATE_MBIT * 1000000 / 8 * 2 * DELAY_MS / 1000))
BUFFER_BYTES=${BUFFER_BYTES:-$BDP_BYTES}
BURST_BYTES=15000 # >= rate / HZ (250) at 20 Mbit/s, so tbf is not limited by its timer
OUT_DIR=${1:-${POLYCC_VM_RESULTS:-.}}
SND=nc-snd RTR=nc-rtr RCV=nc-rcv SND_IP=10.77.0.1 RCV_IP=10.77.0.2

work=$(mktemp -d)
cleanup() {
	ip netns pids "$RCV" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns del "$SND" 2>/dev/null || true
	ip netns del "$RTR" 2>/dev/null || true
	ip netns del "$RCV" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

for tool in ip tc ethtool iperf3 nstat python3; do
	command -v "$tool" >/dev/null || { echo "netem-check: $tool not found (install it on the host)" >&2; exit 2; }
done
modprobe tcp_bbr
# dumbbell_up [VAR=VALUE...]: this check's link, with the given changes.
dumbbell_up() {
	env SND="$SND" RTR="$RTR" RCV="$RCV" SND_IP="$SND_IP" RCV_IP="$RCV_IP" RATE_MBIT="$RATE_MBIT" DELAY_MS="$DELAY_MS" \
		BUFFER_BYTES="$BUFFER_BYTES" BURST_BYTES="$BURST_BYTES" "$@" "$(dirname "$0")/dumbbell.sh" up
}
dumbbell_up
ping_cmd=(ping)
command -v ping >/dev/null || ping_cmd=(busybox ping)
ip netns exec "$SND" "${ping_cmd[@]}" -c 10 -i 0.2 "$RCV_IP" >"$work/ping.txt"

ip netns exec "$RCV" iperf3 -s -D -I "$work/iperf3.pid" >/dev/null
sleep 0.5
# Link-level order: UDP below the rate, so nothing queues or drops; iperf3 counts out-of-order
# datagrams at the receiver. (TCP's reorder counters also count spurious retransmissions, which
# the guest's scheduling stalls under TCG cause.)
ip netns exec "$SND" iperf3 -c "$RCV_IP" -u -b "$((RATE_MBIT * 3 / 4))M" -l 1400 -t 2 -J >"$work/iperf3-udp.json"
for cc in cubic bbr; do
	ip netns exec "$SND" nstat -a -z >"$work/nstat-$cc-before.txt"
	ip netns exec "$SND" iperf3 -c "$RCV_IP" -t "$DURATION_S" -C "$cc" -J >"$work/iperf3-$cc.json"
	ip netns exec "$SND" nstat -a -z >"$work/nstat-$cc-after.txt"
done
tc -n "$RTR" -s qdisc show dev veth-rr >"$work/qdisc-bottleneck.txt"
# The loss probe: every qdisc on the data path, so that drops are counted wherever netem sits.
dumbbell_up LOSS_PCT="$LOSS_PROBE_PCT"
ip netns exec "$RCV" iperf3 -s -D -I "$work/iperf3-loss.pid" >/dev/null
sleep 0.5
ip netns exec "$SND" nstat -a -z >"$work/nstat-loss-before.txt"
ip netns exec "$SND" iperf3 -c "$RCV_IP" -t "$LOSS_PROBE_S" -C bbr -J >"$work/iperf3-loss.json"
ip netns exec "$SND" nstat -a -z >"$work/nstat-loss-after.txt"
{ tc -n "$SND" -s qdisc show dev veth-snd; tc -n "$RTR" -s qdisc show dev veth-rr; } >"$work/qdisc-loss.txt"

mkdir -p "$OUT_DIR"
python3 - "$work" "$OUT_DIR/netem-check.json" <<EOF
import json, re, sys
work, out = sys.argv[1], sys.argv[2]

def counters(path):
    values = {}
    for line in open(path):
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            values[fields[0]] = int(fields[1])
    return values

def nstat_delta(name):
    """The sender's counters over one run: nstat-NAME-after.txt less nstat-NAME-before.txt."""
    before, after = counters(f"{work}/nstat-{name}-before.txt"), counters(f"{work}/nstat-{name}-after.txt")
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}

ping = open(f"{work}/ping.txt").read()
rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)", ping)
summary = {
    "link": {"rate_mbps": $RATE_MBIT, "one_way_delay_ms": $DELAY_MS, "buffer_bytes": $BUFFER_BYTES,
             "qdisc": "tbf rate/buffer at a router, then netem delay (the RTT) on the ACK path"},
    "kernel": open("/proc/sys/kernel/osrelease").read().strip(),
    "duration_s": $DURATION_S,
    "ping_rtt_ms": dict(zip(("min", "avg", "max"), map(float, rtt.groups()))) if rtt else None,
    "cc": {},
}
for cc in ("cubic", "bbr"):
    run = json.load(open(f"{work}/iperf3-{cc}.json"))
    if "error" in run:
        sys.exit(f"netem-check: iperf3 -C {cc}: {run['error']}")
    delta = nstat_delta(cc)
    sender = run["end"]["streams"][0]["sender"]
    summary["cc"][cc] = {
        "congestion": run["end"].get("sender_tcp_congestion", cc),
        "goodput_mbps": run["end"]["sum_received"]["bits_per_second"] / 1e6,
        "link_utilisation": run["end"]["sum_received"]["bits_per_second"] / 1e6 / $RATE_MBIT,
        "retransmits": run["end"]["sum_sent"].get("retransmits"),
        "mean_rtt_ms": sender.get("mean_rtt", 0) / 1000,
        "tcp_reorder_events": {k: v for k, v in delta.items() if "Reorder" in k},
    }
udp = json.load(open(f"{work}/iperf3-udp.json"))
if "error" in udp:
    sys.exit(f"netem-check: iperf3 -u: {udp['error']}")
stream = udp["end"]["streams"][0]["udp"]
summary["udp_probe"] = {k: stream.get(k) for k in ("packets", "lost_packets", "out_of_order", "jitter_ms")}
summary["udp_probe"]["rate_mbps"] = $RATE_MBIT * 3 / 4
summary["reordering_seen"] = bool(stream.get("out_of_order"))

def qdisc_drops(path):
    """Drops of netem's own (its random loss) and of everything else, from tc -s listings. A
    parent's count includes its children's drops (netem in front of tbf)."""
    blocks, own, other = [], 0, 0
    for line in open(path):
        m = re.match(r"qdisc (\S+) (\S+) (root|parent (\S+))", line)
        if m:
            blocks.append({"kind": m.group(1), "handle": m.group(2), "parent": m.group(4), "dropped": 0})
        d = re.search(r"dropped (\d+)", line)
        if d and blocks:
            blocks[-1]["dropped"] = int(d.group(1))
    for b in blocks:
        children = sum(c["dropped"] for c in blocks if c["parent"] and c["parent"].split(":")[0] + ":" == b["handle"])
        if b["kind"] == "netem":
            own += b["dropped"] - children
        else:
            other += b["dropped"]
    return own, other

loss = json.load(open(f"{work}/iperf3-loss.json"))
if "error" in loss:
    sys.exit(f"netem-check: iperf3 -C bbr over the lossy link: {loss['error']}")
delta = nstat_delta("loss")
random_drops, queue_drops = qdisc_drops(f"{work}/qdisc-loss.txt")
# Packets lost to random loss: TCP's retransmissions less the bottleneck's overflow drops.
lost = max(delta.get("TcpRetransSegs", 0) - queue_drops, 0)
summary["loss_probe"] = {
    "set_pct": $LOSS_PROBE_PCT,
    "duration_s": $LOSS_PROBE_S,
    "goodput_mbps": loss["end"]["sum_received"]["bits_per_second"] / 1e6,
    "segments_out": delta.get("TcpOutSegs", 0),
    "retransmitted_segments": delta.get("TcpRetransSegs", 0),
    "random_loss_drops": random_drops,
    "queue_drops": queue_drops,
    "loss_pct": 100 * lost / max(delta.get("TcpOutSegs", 0), 1),
    "packets_per_random_drop": lost / random_drops if random_drops else None,
}
json.dump(summary, open(out, "w"), indent=2)
r = summary["ping_rtt_ms"]
print(f"netem-check on {summary['kernel']}: {$RATE_MBIT} Mbit/s, RTT {2 * $DELAY_MS} ms, buffer {$BUFFER_BYTES} B;"
      f" ping RTT avg {r['avg']:.1f} ms (min {r['min']:.1f}, max {r['max']:.1f})")
for cc, c in summary["cc"].items():
    print(f"  {cc:5s} goodput {c['goodput_mbps']:6.2f} Mbit/s ({100 * c['link_utilisation']:.0f} %),"
          f" retransmits {c['retransmits']}, mean RTT {c['mean_rtt_ms']:.1f} ms,"
          f" TCP reorder events {sum(c['tcp_reorder_events'].values())}")
u = summary["udp_probe"]
print(f"  udp   {u['packets']} datagrams at {u['rate_mbps']:g} Mbit/s: {u['out_of_order']} out of order,"
      f" {u['lost_packets']} lost")
lp = summary["loss_probe"]
print(f"  loss  {lp['set_pct']} % set: {lp['loss_pct']:.2f} % of {lp['segments_out']} segments lost at random,"
      f" {lp['random_loss_drops']} netem drops ({lp['packets_per_random_drop'] or 0:.2f} packets each),"
      f" {lp['queue_drops']} queue drops")
print(f"  summary: {out}")
EOF
