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

/* A new flow's IPv6 addresses, after the name in CREATE (none for IPv4 or v4-mapped). */
void ccp_describe_addresses(struct sock *sk, struct ccp_datapath_info *info);
/* A flow that carries data, as it is now: its window and state, for an agent adopting it. */
void ccp_describe_flow(struct sock *sk, struct ccp_connection *conn, u64 agent_rate);
/*
 * This ACK's measurements; `last_bytes_acked` and `last_delivered_ce` are the flow's running
 * marks (tp->bytes_acked and tp->delivered_ce at the previous ACK), updated.
 */
void ccp_fill_primitives(struct sock *sk, const struct rate_sample *rs, u64 *last_bytes_acked,
			 u32 *last_delivered_ce, bool timeout, struct ccp_primitives *p);

#endif
