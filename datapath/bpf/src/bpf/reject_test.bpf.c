// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A congestion control the verifier must reject: it writes tcp_sock.snd_una, which
 * bpf_tcp_ca_btf_struct_access() does not allow. Built only so the tests can check that a
 * rejected build is reported as such, with the verifier's own words.
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "Dual BSD/GPL";

SEC("struct_ops")
void BPF_PROG(reject_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tp->snd_una = 0;
}

SEC("struct_ops")
__u32 BPF_PROG(reject_ssthresh, struct sock *sk)
{
	return 2;
}

SEC("struct_ops")
__u32 BPF_PROG(reject_undo_cwnd, struct sock *sk)
{
	return 2;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops reject_ops = {
	.cong_control = (void *)reject_cong_control,
	.ssthresh = (void *)reject_ssthresh,
	.undo_cwnd = (void *)reject_undo_cwnd,
	.name = "polycc_reject",
};
