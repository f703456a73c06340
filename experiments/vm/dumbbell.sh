#!/bin/bash
# dumbbell.sh: the emulated link the guest tests share.
#
#   dumbbell.sh up    create it (environment below), print nothing on success
#   dumbbell.sh down  remove it
#
# Three network namespaces: the sender (SND), a router (RTR) and the receiver (RCV), joined by two
# veth pairs. The bottleneck is the router's egress towards the receiver: tbf shapes to RATE_MBIT
# with a BUFFER_BYTES queue (by default one BDP). Packets reach it as the sender sent them, before
# any delay, and a drop there is a network loss (the router forwards packets that no socket owns
# any more). The whole RTT (DELAY_MS + ACK_DELAY_MS, with ACK_JITTER_MS) is netem's delay on the
# ACK path, at the receiver's egress; random loss (LOSS_PCT, or ECN marks) is a netem at the
# router in front of tbf, with no delay.
#
# Why random loss at the router, not at the sender's egress (until 2026-11-29): a qdisc on the
# sender sees TCP's GSO buffers before they are cut into packets (TCP builds them whatever the
# device's offloads), and netem drops or marks a whole buffer: about 1 ms of data at the pacing
# rate, 2 packets at 20 Mbit/s, 4 at 50. "1 % random loss" was 1 % of buffers, lost in bursts,
# which loss-based and PCC schemes answer differently from the simulator's independent per-packet
# loss. The router forwards single packets (no GRO), so its netem drops one at a time
# (netem-check.sh measures packets per drop).
#
# Why not netem delay in front of tbf on the sender's egress (this link until 2026-11-28): netem
# releases what its timer finds due, and under TCG the guest's timers fire up to milliseconds late,
# so every late timer poured a burst into the buffer. At 100 Mbit/s a millisecond is 8 packets:
# with a 6-packet buffer every scheme, the kernel's paced BBR too, lost most of the link
# (docs/kernel-parity.md, "A router in front of the delay"). The TCP dynamics are the same with
# the delay anywhere on the loop; ACKs bunched by a late ACK-path timer remain, as on real paths.
set -euo pipefail
RATE_MBIT=${RATE_MBIT:-20}
# One-way delays; their sum is the RTT (all of it applied on the ACK path, see above).
DELAY_MS=${DELAY_MS:-20}
ACK_DELAY_MS=${ACK_DELAY_MS:-$DELAY_MS}
BURST_BYTES=${BURST_BYTES:-15000} # >= rate / HZ (250) at 20 Mbit/s, so tbf is not limited by its timer
# ACK-path jitter. With jitter, netem gets a `rate` far above the ACK traffic: netem then times each
# packet after the previous one, so jitter bunches ACKs (aggregation) instead of reordering them.
ACK_JITTER_MS=${ACK_JITTER_MS:-0}
# Random loss on the data path, in percent; ECN=1: ECN-capable packets are CE-marked instead
# (netem's `ecn`; packets that are not ECN-capable are still dropped).
LOSS_PCT=${LOSS_PCT:-0}
ECN=${ECN:-0}
# LOSSY=1: the router's loss netem even at LOSS_PCT=0 (the loss is changed later with tc).
LOSSY=${LOSSY:-0}
BDP_BYTES=$((RATE_MBIT * 1000000 / 8 * (DELAY_MS + ACK_DELAY_MS) / 1000))
BUFFER_BYTES=${BUFFER_BYTES:-$BDP_BYTES}
SND=${SND:-polycc-snd} RCV=${RCV:-polycc-rcv}
RTR=${RTR:-${SND%-snd}-rtr}
SND_IP=${SND_IP:-10.77.0.1} RCV_IP=${RCV_IP:-10.77.0.2}
SND_IP6=${SND_IP6:-fd77::1} RCV_IP6=${RCV_IP6:-fd77::2}

down() {
	for n in "$RCV" "$SND" "$RTR"; do ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
	for n in "$SND" "$RCV" "$RTR"; do ip netns del "$n" 2>/dev/null || true; done
}
mac() { ip -n "$1" -br link show dev "$2" | awk '{print $3}'; }
# static NS DEV MAC ADDR...: each ADDR's neighbour on DEV is MAC, for good (no ARP or NDP through the router).
static() {
	local n=$1 d=$2 m=$3
	shift 3
	for a in "$@"; do ip -n "$n" neigh replace "$a" lladdr "$m" dev "$d" nud permanent; done
}
up() {
	for tool in ip tc ethtool; do
		command -v "$tool" >/dev/null || { echo "dumbbell: $tool not found (install it on the host)" >&2; exit 2; }
	done
	modprobe sch_netem
	modprobe sch_tbf
	modprobe veth
	down
	for n in "$SND" "$RCV" "$RTR"; do ip netns add "$n"; ip -n "$n" link set lo up; done
	ip link add veth-snd netns "$SND" type veth peer name veth-rs netns "$RTR"
	ip link add veth-rcv netns "$RCV" type veth peer name veth-rr netns "$RTR"
	ip -n "$SND" addr add "$SND_IP/24" dev veth-snd
	ip -n "$RCV" addr add "$RCV_IP/24" dev veth-rcv
	# IPv6 beside IPv4 (no duplicate address detection: usable at once).
	ip -n "$SND" addr add "$SND_IP6/64" dev veth-snd nodad
	ip -n "$RCV" addr add "$RCV_IP6/64" dev veth-rcv nodad
	for d in "$SND veth-snd" "$RCV veth-rcv" "$RTR veth-rs" "$RTR veth-rr"; do
		set -- $d
		ip -n "$1" link set "$2" up
		# veth offloads would hand tbf 64 KB super-packets; a real link sees MTU-sized ones.
		ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null
	done
	ip netns exec "$RTR" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
		net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 net.ipv4.conf.all.send_redirects=0
	ip -n "$RTR" route add "$SND_IP/32" dev veth-rs
	ip -n "$RTR" route add "$RCV_IP/32" dev veth-rr
	ip -n "$RTR" -6 route add "$SND_IP6/128" dev veth-rs
	ip -n "$RTR" -6 route add "$RCV_IP6/128" dev veth-rr
	static "$SND" veth-snd "$(mac "$RTR" veth-rs)" "$RCV_IP" "$RCV_IP6"
	static "$RCV" veth-rcv "$(mac "$RTR" veth-rr)" "$SND_IP" "$SND_IP6"
	static "$RTR" veth-rs "$(mac "$SND" veth-snd)" "$SND_IP" "$SND_IP6"
	static "$RTR" veth-rr "$(mac "$RCV" veth-rcv)" "$RCV_IP" "$RCV_IP6"
	mark=""; [ "$ECN" = 1 ] && mark=ecn
	# The sender's qdisc stays a netem without loss (as before random loss moved to the router).
	tc -n "$SND" qdisc add dev veth-snd root handle 1: netem limit 100000
	if awk -v p="$LOSS_PCT" 'BEGIN { exit !(p > 0) }' || [ "$ECN" = 1 ] || [ "$LOSSY" = 1 ]; then
		tc -n "$RTR" qdisc add dev veth-rr root handle 2: netem loss random "${LOSS_PCT}%" $mark limit 100000
		tc -n "$RTR" qdisc add dev veth-rr parent 2:1 handle 1: tbf rate "${RATE_MBIT}mbit" burst "$BURST_BYTES" limit "$BUFFER_BYTES"
	else
		tc -n "$RTR" qdisc add dev veth-rr root handle 1: tbf rate "${RATE_MBIT}mbit" burst "$BURST_BYTES" limit "$BUFFER_BYTES"
	fi
	rtt=$((DELAY_MS + ACK_DELAY_MS))
	if [ "$ACK_JITTER_MS" -gt 0 ]; then
		tc -n "$RCV" qdisc add dev veth-rcv root handle 1: netem delay "${rtt}ms" "${ACK_JITTER_MS}ms" rate 10gbit limit 100000
	else
		tc -n "$RCV" qdisc add dev veth-rcv root handle 1: netem delay "${rtt}ms" limit 100000
	fi
}
case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: dumbbell.sh up|down (RATE_MBIT, DELAY_MS, ACK_DELAY_MS, ACK_JITTER_MS, LOSS_PCT, ECN, LOSSY, BUFFER_BYTES, BURST_BYTES, SND, RTR, RCV, SND_IP, RCV_IP, SND_IP6, RCV_IP6)" >&2; exit 2 ;;
esac
