/* SPDX-License-Identifier: GPL-2.0 */
/* What ccp.ko tells the agent about a flow (ccp_flowinfo.c). */
#ifndef POLYCC_CCP_FLOWINFO_H
#define POLYCC_CCP_FLOWINFO_H

#include <linux/types.h>

struct sock;
struct rate_sample;
struct ccp_connection;
struct ccp_datapath_info;
struct ccp_primitives;

/*
 * What a new flow's CREATE says after the name: that undos come in Ack.ecn_bytes, and the IPv6
 * addresses (none for IPv4 or v4-mapped).
 */
void ccp_describe_addresses(struct sock *sk, struct ccp_datapath_info *info);
/* A flow that carries data, as it is now: its window and state, for an agent adopting it. */
void ccp_describe_flow(struct sock *sk, struct ccp_connection *conn, u64 agent_rate);
/* The flow's running counters at its previous ACK: each ACK reports what they rose by. */
struct ccp_ack_marks {
	u64 bytes_acked;	/* tp->bytes_acked */
	u32 delivered_ce;	/* tp->delivered_ce */
	u32 lost;		/* tp->lost */
};

/* The marks as the flow has them now (at its start, or at an adoption). */
void ccp_ack_marks_now(struct sock *sk, struct ccp_ack_marks *m);
/* This ACK's measurements against `last`, which is updated; `undos` since the previous ACK. */
void ccp_fill_primitives(struct sock *sk, const struct rate_sample *rs, struct ccp_ack_marks *last,
			 bool timeout, u32 undos, struct ccp_primitives *p);

#endif
