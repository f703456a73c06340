/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The datapath's counters and its report -> update round-trip histogram, read (root only) under
 * /sys/module/ccp/parameters/. Kept apart from ccp_main.c's control logic.
 */
#ifndef POLYCC_CCP_STATS_H
#define POLYCC_CCP_STATS_H

#include <linux/atomic.h>
#include <linux/moduleparam.h>
#include <linux/types.h>

/* Read-only atomic_t counters as module parameters (also used by ccp_nl.c). */
extern const struct kernel_param_ops ccp_atomic_ops;

struct ccp_counters {
	/* Messages to the agent by outcome: a failed send is a lost message. */
	atomic_t sent_messages;
	atomic_t send_enobufs;		/* the agent's receive buffer was full */
	atomic_t send_esrch;		/* no agent listened */
	atomic_t send_other_errors;
	atomic_t fallback_entries;	/* a flow the agent controlled switched to the fallback */
	atomic_t ready_sent;
	atomic_t agents_gone;		/* the agent's socket was released */
	atomic_t active_flows;		/* flows holding a libccp slot and its per-flow state */
	atomic_t table_full;		/* flows that found no slot (max_flows): in-kernel Reno */
	atomic_t tsval_rtt_dropped;	/* whole-ms RTT samples from TSecr, kept back */
};

extern struct ccp_counters ccp_counters;

/* Per-flow report timing for max_flows flows; 0 or -ENOMEM. */
int ccp_ipc_init(u32 max_flows);
void ccp_ipc_free(void);
/* A report of flow `sid` went to the agent at `now_us`. */
void ccp_ipc_report_sent(u32 sid, u64 now_us);
/* The report of flow `sid` timed last could not be sent after all: forget it. */
void ccp_ipc_report_unsent(u32 sid);
/* An agent update for flow `sid` arrived at `now_us`: it answers the oldest unanswered report. */
void ccp_ipc_update_received(u32 sid, u64 now_us);
/* Flow `sid`'s unanswered reports will not be answered (the flow is gone or re-announced). */
void ccp_ipc_forget(u32 sid);

#endif
