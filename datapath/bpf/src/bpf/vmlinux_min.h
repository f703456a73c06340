/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The kernel types polycc.bpf.c touches, and only the fields it touches.
 *
 * Why not a full vmlinux.h: `bpftool btf dump` of 6.18 is 134,000 lines, needs bpftool at build
 * time and ties the build to one kernel. Every struct here carries preserve_access_index, so
 * clang records CO-RE relocations and libbpf rewrites each field offset against the running
 * kernel's BTF at load: field order and omitted fields do not matter, names and types do.
 * tcp_congestion_ops is matched member by member by name when libbpf registers the struct_ops.
 */
#ifndef POLYCC_VMLINUX_MIN_H
#define POLYCC_VMLINUX_MIN_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_SK_STORAGE = 24,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_F_NO_PREALLOC = 1,
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

enum sk_pacing {
	SK_PACING_NONE = 0,
	SK_PACING_NEEDED = 1,
	SK_PACING_FQ = 2,
};

enum tcp_ca_state {
	TCP_CA_Open = 0,
	TCP_CA_Disorder = 1,
	TCP_CA_CWR = 2,
	TCP_CA_Recovery = 3,
	TCP_CA_Loss = 4,
};

enum tcp_ca_event {
	CA_EVENT_TX_START = 0,
};

struct in6_addr {
	union {
		__u8 u6_addr8[16];
		__be32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	int sk_wmem_queued;
	u32 sk_pacing_status;
	unsigned long sk_pacing_rate;
	unsigned long sk_max_pacing_rate;
} __attribute__((preserve_access_index));

struct inet_sock {
	struct sock sk;
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	struct inet_sock icsk_inet;
	u8 icsk_ca_state:5;
} __attribute__((preserve_access_index));

struct minmax_sample {
	u32 t;
	u32 v;
} __attribute__((preserve_access_index));

struct minmax {
	struct minmax_sample s[3];
} __attribute__((preserve_access_index));

struct tcp_options_received {
	u32 rcv_tsecr;
} __attribute__((preserve_access_index));

struct tcp_sock {
	struct inet_connection_sock inet_conn;
	u64 tcp_mstamp;
	struct tcp_options_received rx_opt;
	u32 mss_cache;
	u32 snd_cwnd;
	u32 snd_cwnd_cnt;
	u32 snd_ssthresh;
	u32 snd_una;
	u32 snd_nxt;
	u32 write_seq;
	u32 packets_out;
	u32 sacked_out;
	u32 lost_out;
	u32 retrans_out;
	u32 delivered;
	u32 delivered_ce;
	u32 lost;
	u32 srtt_us;
	struct minmax rtt_min;
	u32 max_packets_out;
	u32 prior_cwnd;
	u32 prr_out;
	u8 is_cwnd_limited:1;
} __attribute__((preserve_access_index));

struct rate_sample {
	s32 delivered;
	s32 delivered_ce;
	long interval_us;
	long rtt_us;
	int losses;
	u32 acked_sacked;
	bool is_app_limited;
} __attribute__((preserve_access_index));

struct ack_sample;
struct module;
union tcp_cc_info;

struct list_head {
	struct list_head *next, *prev;
};

#define TCP_CA_NAME_MAX 16

struct tcp_congestion_ops {
	u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, u32 ack, u32 acked);
	void (*set_state)(struct sock *sk, u8 new_state);
	void (*cwnd_event)(struct sock *sk, enum tcp_ca_event ev);
	void (*in_ack_event)(struct sock *sk, u32 flags);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	u32 (*min_tso_segs)(struct sock *sk);
	void (*cong_control)(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs);
	u32 (*undo_cwnd)(struct sock *sk);
	u32 (*sndbuf_expand)(struct sock *sk);
	unsigned long (*get_info)(struct sock *sk, u32 ext, int *attr, union tcp_cc_info *info);
	char name[TCP_CA_NAME_MAX];
	struct module *owner;
	struct list_head list;
	u32 key;
	u32 flags;
	void (*init)(struct sock *sk);
	void (*release)(struct sock *sk);
} __attribute__((preserve_access_index));

#endif /* POLYCC_VMLINUX_MIN_H */
