#!/bin/bash
# dumbbell.sh: the emulated link the guest tests share.
#
#   dumbbell.sh up    create it (environment below), print nothing on success
#   dumbbell.sh down  remove it
#
# Two network namespaces joined by a veth pair; each end's egress delays by DELAY_MS (netem,
# root qdisc) and then shapes to RATE_MBIT with a BUFFER_BYTES queue (tbf, netem's child), so the
# path is RATE_MBIT with an RTT of 2 x DELAY_MS and, by default, a one-BDP buffer. tbf drops after
# netem has orphaned the packet, so TCP sees a network loss; netem's own `rate` drops at enqueue
# in the sender's stack, which TCP takes as local congestion. Without jitter nothing reorders.
set -euo pipefail
RATE_MBIT=${RATE_MBIT:-20}
DELAY_MS=${DELAY_MS:-20}
BURST_BYTES=${BURST_BYTES:-15000} # >= rate / HZ (250) at 20 Mbit/s, so tbf is not limited by its timer
# ACK path (receiver's egress) delay and jitter; default: DELAY_MS, no jitter. With jitter, netem
# gets a `rate` far above the ACK traffic: netem then times each packet after the previous one,
# so jitter bunches ACKs (aggregation) instead of reordering them.
ACK_DELAY_MS=${ACK_DELAY_MS:-$DELAY_MS}
ACK_JITTER_MS=${ACK_JITTER_MS:-0}
# Random loss on the data path (sender's egress), in percent; netem drops after the sender's stack.
LOSS_PCT=${LOSS_PCT:-0}
# ECN=1: that random loss marks ECN-capable packets CE instead of dropping them (netem's `ecn`);
# packets that are not ECN-capable are still dropped.
ECN=${ECN:-0}
BDP_BYTES=$((RATE_MBIT * 1000000 / 8 * (DELAY_MS + ACK_DELAY_MS) / 1000))
BUFFER_BYTES=${BUFFER_BYTES:-$BDP_BYTES}
SND=${SND:-polycc-snd} RCV=${RCV:-polycc-rcv}
SND_IP=${SND_IP:-10.77.0.1} RCV_IP=${RCV_IP:-10.77.0.2}

down() {
	ip netns pids "$RCV" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns pids "$SND" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns del "$SND" 2>/dev/null || true
	ip netns del "$RCV" 2>/dev/null || true
}

up() {
	for tool in ip tc ethtool; do
		command -v "$tool" >/dev/null || { echo "dumbbell: $tool not found (install it on the host)" >&2; exit 2; }
	done
	modprobe sch_netem
	modprobe sch_tbf
	modprobe veth
	down
	ip netns add "$SND"
	ip netns add "$RCV"
	ip link add veth-snd netns "$SND" type veth peer name veth-rcv netns "$RCV"
	ip -n "$SND" addr add "$SND_IP/24" dev veth-snd
	ip -n "$RCV" addr add "$RCV_IP/24" dev veth-rcv
	# IPv6 beside IPv4 (no duplicate address detection: usable at once).
	ip -n "$SND" addr add "${SND_IP6:-fd77::1}/64" dev veth-snd nodad
	ip -n "$RCV" addr add "${RCV_IP6:-fd77::2}/64" dev veth-rcv nodad
	for pair in "$SND veth-snd $DELAY_MS 0 $LOSS_PCT" "$RCV veth-rcv $ACK_DELAY_MS $ACK_JITTER_MS 0"; do
		set -- $pair
		ip -n "$1" link set lo up
		ip -n "$1" link set "$2" up
		# veth offloads would hand netem 64 KB super-packets; a real link sees MTU-sized ones.
		ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null
		if [ "$4" -gt 0 ]; then
			tc -n "$1" qdisc add dev "$2" root handle 1: netem delay "${3}ms" "${4}ms" rate 10gbit limit 100000
		else
			mark=""
			if [ "$ECN" = 1 ] && [ "$1" = "$SND" ]; then mark=ecn; fi
			tc -n "$1" qdisc add dev "$2" root handle 1: netem delay "${3}ms" loss random "${5}%" $mark limit 100000
		fi
		tc -n "$1" qdisc add dev "$2" parent 1:1 handle 10: \
			tbf rate "${RATE_MBIT}mbit" burst "$BURST_BYTES" limit "$BUFFER_BYTES"
	done
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: dumbbell.sh up|down (RATE_MBIT, DELAY_MS, ACK_DELAY_MS, ACK_JITTER_MS, LOSS_PCT, ECN, BUFFER_BYTES, SND, RCV, SND_IP, RCV_IP)" >&2; exit 2 ;;
esac
