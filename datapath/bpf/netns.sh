# Sourced by demo.sh and fallback_veth.sh: two network namespaces joined by a veth pair, and the
# wait for an agent's registration. Needs root.

# veth_up NS_A NS_B ADDR_A ADDR_B DEV_A DEV_B: the namespaces, the pair (MTU 1500) with a /24
# address at each end, every link up.
veth_up() {
	ip netns add "$1"
	ip netns add "$2"
	ip link add "$5" netns "$1" type veth peer name "$6" netns "$2"
	ip -n "$1" addr add "$3/24" dev "$5"
	ip -n "$2" addr add "$4/24" dev "$6"
	for ns in "$1" "$2"; do
		ip -n "$ns" link set lo up
	done
	ip -n "$1" link set "$5" up
	ip -n "$2" link set "$6" up
}

# veth_down NS_A NS_B: stop what runs in NS_B (the iperf3 server) and remove both namespaces
# (the pair goes with them). Quiet where nothing is there.
veth_down() {
	ip netns pids "$2" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns del "$1" 2>/dev/null || true
	ip netns del "$2" 2>/dev/null || true
}

# wait_registered: until polycc_bpf is in the kernel's list (5 s), else fail.
wait_registered() {
	for _ in $(seq 50); do
		grep -qw polycc_bpf /proc/sys/net/ipv4/tcp_available_congestion_control && return 0
		sleep 0.1
	done
	echo "the agent did not register polycc_bpf"
	return 1
}
