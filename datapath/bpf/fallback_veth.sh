#!/usr/bin/env bash
# The BPF fallback against the kernel's own Reno and CUBIC on a veth pair (host kernel, no QEMU).
#
# Each rep runs three 6 s iperf3 flows between two network namespaces, one at a time: in-kernel
# Reno, in-kernel CUBIC, and polycc_bpf held at --pin-cwnd 10 until its agent is SIGKILLed at
# 1 s (the flow runs the fallback from 1.2 s). Prints each flow's goodput per second and the
# median over seconds 2-6, the window the fallback must make up. docs/bpf-datapath.md,
# "When the agent exits". Needs root and BTF; removes what it creates.
# Usage: datapath/bpf/fallback_veth.sh [reps] (default 3); OUT=dir keeps the iperf3 JSON.
set -euo pipefail
cd "$(dirname "$0")/../.."
. datapath/bpf/netns.sh

REPS=${1:-3}
AGENT=${POLYCC_BIN_DIR:-target/release}/polycc-portus
OUT=${OUT:-target/bpf-fallback-veth}
NS_A=polycc-fb-a
NS_B=polycc-fb-b
ADDR_B=10.78.0.2
PIN=/sys/fs/bpf/polycc-fallback-veth

[ "$(id -u)" = 0 ] || { echo "skipped: needs root (CAP_BPF, CAP_NET_ADMIN)"; exit 0; }
[ -e /sys/kernel/btf/vmlinux ] || { echo "skipped: the kernel has no BTF (CONFIG_DEBUG_INFO_BTF)"; exit 0; }
[ -x "$AGENT" ] || { echo "$AGENT missing: cargo build --release -p polycc-agent"; exit 1; }
mkdir -p "$OUT"
agent_pid=
cleanup() {
	[ -n "$agent_pid" ] && kill -KILL "$agent_pid" 2>/dev/null || true
	veth_down "$NS_A" "$NS_B"
	rm -rf "$PIN"
}
trap cleanup EXIT
cleanup
veth_up "$NS_A" "$NS_B" 10.78.0.1 "$ADDR_B" veth-fa veth-fb
ip netns exec "$NS_B" iperf3 -s -D -p 5201
sleep 0.5

flow() { # name cc
	ip netns exec "$NS_A" iperf3 -c "$ADDR_B" -p 5201 -t 6 -C "$2" -J > "$OUT/$1.json"
}
for rep in $(seq "$REPS"); do
	flow "reno-$rep" reno
	flow "cubic-$rep" cubic
	"$AGENT" --datapath bpf --pin-cwnd 10 --fallback-timeout-ms 200 --bpf-pin-dir "$PIN" --log-level warn &
	agent_pid=$!
	wait_registered
	flow "fallback-$rep" polycc_bpf &
	sleep 1
	kill -KILL "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
	wait %%
	rm -rf "$PIN"
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
print("Gbit/s per second; median over seconds 2-6; retransmits")
for name in ("reno", "cubic", "fallback"):
    for rep in range(1, reps + 1):
        r = json.load(open(f"{out}/{name}-{rep}.json"))
        per_s = [i["sum"]["bits_per_second"] / 1e9 for i in r["intervals"]]
        print("%9s rep %d: %s | %5.1f | %d" % (name, rep, " ".join("%5.1f" % x for x in per_s),
              statistics.median(per_s[1:6]), r["end"]["sum_sent"].get("retransmits", 0)))
PY
