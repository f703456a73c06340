/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libccp's datapath (ccp_datapath.c): what ccp_main.c (the flows, on the ACK path) and
 * ccp_agent.c (the agent: its identity, liveness, messages and programs) share. Locking is
 * described at the top of ccp_main.c.
 */
#ifndef POLYCC_CCP_DATAPATH_H
#define POLYCC_CCP_DATAPATH_H

#include <linux/cache.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/types.h>

#include "ccp.h"
#include "ccp_priv.h"

/* libccp keeps at most this many installed programs. */
#define CCP_MAX_PROGRAMS 16

/*
 * One per libccp connection slot (sid - 1), for the module's lifetime. A cache line each: flows
 * whose ACKs run on different CPUs do not share one through their locks.
 */
struct ccp_slot {
	spinlock_t lock;	/* guards the slot's libccp connection and per-flow state */
	struct sock *sk;	/* the flow, once set up; NULL: free, or being set up or freed */
} ____cacheline_aligned_in_smp;

/* libccp's program table (dp.programs points at `programs`): replaced whole, freed by RCU. */
struct ccp_program_table {
	struct rcu_head rcu;
	struct DatapathProgram programs[];
};

struct ccp_tables {
	struct ccp_datapath dp;
	struct ccp_connection *conns;	/* max_flows libccp connections */
	struct ccp_slot *slots;		/* and their slots */
	u32 id;				/* datapath id announced in READY */
	u32 agent_portid;		/* where messages go; 0: no agent (set by ccp_agent.c) */
};

extern struct ccp_tables ccp_tables;

/* Build the tables and libccp around the flow callbacks (0 or -errno); free them. */
int ccp_datapath_init(void (*set_cwnd)(struct ccp_connection *conn, u32 cwnd_bytes),
		      void (*set_rate)(struct ccp_connection *conn, u32 rate_bytes_per_sec));
void ccp_datapath_exit(void);

/* Module parameters. */
u32 ccp_max_flows(void);
unsigned int ccp_log_level(void);
unsigned int ccp_fallback_timeout_ms(void);

/* Monotonic clock, microseconds. */
u64 ccp_now_us(void);
/* One message to the agent at `portid` now, counted (ccp_counters): 0 or a send error. */
int ccp_deliver(u32 portid, const char *msg, int len);
/*
 * Send what libccp queued on this CPU (BHs off since the queueing, no lock held); a failed send
 * starts libccp's fallback timer.
 */
void ccp_flush(void);

/* Flow `sid`'s slot, or NULL for no slot (0: the table was full). */
static inline struct ccp_slot *ccp_slot(u16 sid)
{
	return sid && sid <= ccp_max_flows() ? &ccp_tables.slots[sid - 1] : NULL;
}

static inline struct ccp_program_table *ccp_program_table(void)
{
	return container_of((struct DatapathProgram *)ccp_tables.dp.programs,
			    struct ccp_program_table, programs[0]);
}

static inline size_t ccp_program_table_size(void)
{
	return sizeof(struct ccp_program_table) + CCP_MAX_PROGRAMS * sizeof(struct DatapathProgram);
}

#endif
