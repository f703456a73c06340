#!/usr/bin/env bash
# `make demo DATAPATH=bpf`: polycc on this host's own kernel, no module, no QEMU.
#
# Two network namespaces joined by a veth pair (MTU 1500); polycc-portus registers the BPF
# congestion control polycc_bpf and serves iperf3 flows between them:
#   1. in-kernel CUBIC, for reference;
#   2. polycc_bpf with the agent running $ALG (default: the fused BBR+CUBIC policy);
#   3. polycc_bpf held at --pin-cwnd 10, read back with ss; then the agent is SIGKILLed mid-flow:
#      the flow keeps going and grows in the BPF fallback (Reno).
# Needs root and a kernel with BTF. Everything it creates is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
. datapath/bpf/netns.sh

AGENT=${POLYCC_BIN_DIR:-target/release}/polycc-portus
SECONDS_PER_RUN=${SECONDS_PER_RUN:-8}
ALG_FLAGS=${ALG_FLAGS:---alg fused --pilot bbr --copilot cubic}
NS_A=polycc-demo-a
NS_B=polycc-demo-b
ADDR_A=10.77.0.1
ADDR_B=10.77.0.2
OUT=${OUT:-target/bpf-demo}
CTL=/tmp/polycc-bpf-demo.sock
PIN=/sys/fs/bpf/polycc-demo

[ "$(id -u)" = 0 ] || { echo "skipped: make demo DATAPATH=bpf needs root (CAP_BPF, CAP_NET_ADMIN)"; exit 0; }
[ -e /sys/kernel/btf/vmlinux ] || { echo "skipped: the kernel has no BTF (CONFIG_DEBUG_INFO_BTF)"; exit 0; }
command -v iperf3 >/dev/null || { apt-get install -y -q iperf3 >/dev/null; }
[ -x "$AGENT" ] || { echo "$AGENT missing: cargo build --release -p polycc-agent"; exit 1; }
mkdir -p "$OUT"

agent_pid=
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
	veth_down "$NS_A" "$NS_B"
	rm -f "$PIN"/ctl "$PIN"/events "$PIN"/sids 2>/dev/null; rmdir "$PIN" 2>/dev/null || true
}
trap cleanup EXIT
cleanup

veth_up "$NS_A" "$NS_B" "$ADDR_A" "$ADDR_B" veth-pa veth-pb
ip netns exec "$NS_B" iperf3 -s -D -p 5201

start_agent() {
	"$AGENT" --datapath bpf --control-socket "$CTL" --bpf-pin-dir "$PIN" --log-level warn "$@" &
	agent_pid=$!
	wait_registered || exit 1
}

stop_agent() {
	kill -TERM "$agent_pid"; wait "$agent_pid" || true; agent_pid=
}

run_iperf() { # name cc
	ip netns exec "$NS_A" iperf3 -c "$ADDR_B" -p 5201 -t "$SECONDS_PER_RUN" -C "$2" -J > "$OUT/$1.json"
	python3 - "$OUT/$1.json" "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
e = r["end"]
per_s = " ".join("%.1f" % (i["sum"]["bits_per_second"] / 1e9) for i in r["intervals"])
print("%22s: %6.2f Gbit/s, %d retransmits, per second: %s" % (
    sys.argv[2], e["sum_received"]["bits_per_second"] / 1e9, e["sum_sent"].get("retransmits", 0), per_s))
EOF
}

echo "== veth between two namespaces, ${SECONDS_PER_RUN} s per run (no netem on this host: no added delay)"
run_iperf "in-kernel cubic" cubic
# shellcheck disable=SC2086
start_agent $ALG_FLAGS --log-json "$OUT/agent.jsonl" --bpf-latency-out "$OUT/roundtrip.json"
run_iperf "polycc_bpf ($(echo $ALG_FLAGS | sed 's/--alg //;s/--pilot /pilot=/;s/--copilot /copilot=/'))" polycc_bpf
stop_agent
echo "   agent round trips: $(cat "$OUT/roundtrip.json")"

echo "== enforcement and fallback: --pin-cwnd 10, then SIGKILL the agent at 3 s"
start_agent --pin-cwnd 10 --fallback-timeout-ms 200
ip netns exec "$NS_A" iperf3 -c "$ADDR_B" -p 5201 -t 6 -C polycc_bpf -J > "$OUT/fallback.json" &
iperf_pid=$!
cwnd() { ip netns exec "$NS_A" ss -tin dst "$ADDR_B" | grep -o 'polycc_bpf.*' | grep -o ' cwnd:[0-9]*' | sort -t: -k2 -n | tail -1; }
sleep 2; echo "   agent alive:   $(cwnd)"
kill -KILL "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
sleep 0.2
grep -qw polycc_bpf /proc/sys/net/ipv4/tcp_available_congestion_control \
	&& echo "   polycc_bpf still registered (unexpected)" \
	|| echo "   agent SIGKILLed: polycc_bpf unregistered, the live flow keeps the BPF code"
sleep 1; echo "   fallback +1 s: $(cwnd)"
sleep 1; echo "   fallback +2 s: $(cwnd)"
[ -n "${DEBUG_SS:-}" ] && ip netns exec "$NS_A" ss -tin dst "$ADDR_B"
wait "$iperf_pid"
echo "   results in $OUT/"
