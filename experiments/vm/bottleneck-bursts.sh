#!/bin/bash
# bottleneck-bursts: how the guest's emulated link delivers at the bottleneck, packet by packet.
#
# On dumbbell.sh's link (RATE_MBIT, DELAY_MS, BUFFER_BYTES, ...; by default the matrix's
# 100 Mbit/s, RTT 10 ms, 6-packet cell) one iperf3 flow per congestion control in CCS (default
# "cubic bbr", in-kernel) runs DURATION_S with tcpdump on the router: data as it reaches the
# bottleneck, ACKs as they leave towards the sender (veth-rs), data as it leaves the bottleneck
# (veth-rr). experiments/vm/bottleneck_bursts.py reads the captures. Everything but the router's
# captures runs on vCPU 0, as the runner's runs do.
#
#   experiments/vm/polycc-vm run --results DIR --need iperf3 --need tcpdump -- \
#       experiments/vm/bottleneck-bursts.sh
#   python3 experiments/vm/bottleneck_bursts.py DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${POLYCC_VM_RESULTS:-.}}
export RATE_MBIT=${RATE_MBIT:-100} DELAY_MS=${DELAY_MS:-5} BUFFER_BYTES=${BUFFER_BYTES:-9000}
export BURST_BYTES=${BURST_BYTES:-$((RATE_MBIT * 1000000 / 8 / 250 + 3000))}
DURATION_S=${DURATION_S:-10}
command -v tcpdump >/dev/null || { echo "bottleneck-bursts: tcpdump not found (polycc-vm run --need tcpdump)" >&2; exit 2; }
modprobe tcp_bbr
"$here/dumbbell.sh" up
trap '"$here/dumbbell.sh" down' EXIT
taskset -c 0 ip netns exec polycc-rcv iperf3 -s -D
sleep 1
drops() { tc -n polycc-rtr -s qdisc show dev veth-rr | sed -n 's/.*dropped \([0-9]*\).*/\1/p'; }
for cc in ${CCS:-cubic bbr}; do
	ip netns exec polycc-rtr tcpdump -q -n -i veth-rs -s 64 -B 16384 --time-stamp-precision=nano -w "$out/$cc-in.pcap" tcp 2>/dev/null &
	in=$!
	ip netns exec polycc-rtr tcpdump -q -n -i veth-rr -Q out -s 64 -B 16384 --time-stamp-precision=nano -w "$out/$cc-out.pcap" tcp 2>/dev/null &
	leaving=$!
	sleep 2
	before=$(drops)
	taskset -c 0 ip netns exec polycc-snd iperf3 -c 10.77.0.2 -C "$cc" -t "$DURATION_S" -J >"$out/$cc.json"
	echo "{\"cc\": \"$cc\", \"rate_mbit\": $RATE_MBIT, \"rtt_ms\": $((2 * DELAY_MS)), \"buffer_bytes\": $BUFFER_BYTES, \"tbf_drops\": $(($(drops) - before))}" >"$out/$cc-link.json"
	sleep 1
	kill -INT "$in" "$leaving"
	wait "$in" "$leaving" || true
done
