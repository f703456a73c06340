/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What polycc.bpf.c and the agent share: the ring-buffer event and the per-flow control entry.
 * src/lib.rs mirrors both with #[repr(C)] structs and a test checks the sizes.
 */
#ifndef POLYCC_BPF_H
#define POLYCC_BPF_H

/* The report schema, in the order of the agent's program::Field::ALL. */
enum polycc_field {
	F_ACKED_BYTES,
	F_ACKED_PACKETS,
	F_SACKED_PACKETS,
	F_LOST_MARKED,	/* lost packets; from bit CE_SHIFT, packets delivered with an ECN-Echo */
	F_EVENTS,	/* bits: EVENT_TIMEOUT, EVENT_DELAY_EXIT; undos from UNDO_SHIFT (agent/src/program.rs) */
	F_RTT_LAST_US,
	F_RTT_MIN_US,
	F_RTT_SUM_US,
	F_RTT_SAMPLES,
	F_RTT_FIRST_SUM_US,
	F_RTT_FIRST_SAMPLES,
	F_DELIVERY_RATE,
	F_INFLIGHT_BYTES,
	F_PENDING_BYTES,
	F_INTERVAL_US,
	F_ACK_TRAIN_US,
	F_COUNT,
};

enum polycc_event_kind {
	POLYCC_EV_CREATE = 0,
	POLYCC_EV_MEASURE = 1,
	POLYCC_EV_FREE = 2,
};

enum polycc_mode {
	/* No answer from the agent yet: Reno from the kernel's initial window. */
	POLYCC_MODE_WAITING = 0,
	/* The agent's cwnd and rate are enforced. */
	POLYCC_MODE_AGENT = 1,
	/* The agent was silent past the timeout: Reno until it answers. */
	POLYCC_MODE_FALLBACK = 2,
};

/*
 * A CREATE for a flow that already carries data (one announced again to a new agent) describes
 * it in `fields`, so the agent continues from its state: ADOPT_PRESENT is 1, ADOPT_SSTHRESH the
 * slow-start threshold in bytes (0: the flow is in slow start), then the smoothed and minimum RTT
 * in us (0: none) and the rate the agent set in bytes/s (0: unpaced). init_cwnd_bytes is the
 * current window. A new flow's CREATE has them all 0.
 */
enum polycc_adopt_field {
	ADOPT_PRESENT,
	ADOPT_SSTHRESH,
	ADOPT_SRTT_US,
	ADOPT_MIN_RTT_US,
	ADOPT_RATE,
};

/* One ring-buffer record (every kind has the same size; unused parts are zero). */
struct polycc_event {
	__u32 kind;
	__u32 sid;
	__u64 t_ns;		/* bpf_ktime_get_ns() when the event was written */
	__u32 mss;
	__u32 init_cwnd_bytes;
	__u32 saddr;		/* network byte order, as ccp.ko's CREATE */
	__u32 daddr;
	__u32 sport;		/* __be16 widened, as ccp.ko's CREATE */
	__u32 dport;
	__u32 mode;		/* enum polycc_mode when written */
	__u32 app_limited;	/* an ACK of the interval was app-limited */
	/* CREATE of an IPv6 flow: its addresses (saddr, daddr 0); all zero for IPv4. */
	__u8 saddr6[16];
	__u8 daddr6[16];
	__u64 fields[F_COUNT];
};

/* What the agent writes for a flow (hash map `ctl`, key: sid). `seq` changes on every write. */
struct polycc_ctl {
	__u64 seq;
	__u32 cwnd_bytes;	/* 0: none installed */
	__u32 rate_bytes_per_sec; /* 0: unpaced; 0xffffffff: unpaced after being paced */
	__u32 interval_us;	/* 0: report once per RTT */
	__u32 grow_cap_bytes;	/* per-ACK slow start up to this window; 0: none */
	__u32 grow_rtt_us;	/* the growth's delay exit threshold; 0 or 0xffffffff: none */
	__u32 grow_cap_after_bytes; /* the cap once the delay exit fires */
};

/* F_LOST_MARKED's ECN-marked packets start at this bit (program::CE_SHIFT). */
#define CE_SHIFT		32
#define EVENT_TIMEOUT		1
#define EVENT_DELAY_EXIT	2
/* Where F_EVENTS counts the kernel's undos of spurious loss reductions. */
#define UNDO_SHIFT		32
/* RTT samples at the start of a round whose minimum the delay exit tests (HyStart's 8). */
#define DELAY_EXIT_SAMPLES	8

#endif /* POLYCC_BPF_H */
