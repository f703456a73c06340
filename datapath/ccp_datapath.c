// SPDX-License-Identifier: GPL-2.0
/*
 * libccp's datapath for ccp.ko: the module's parameters, the flow and program tables, the
 * clock, and the send path (libccp's messages, queued per CPU and sent after the locks). What
 * ccp_main.c (the flows) and ccp_agent.c (the agent) share; they depend on this file, never the
 * other way round.
 */
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "ccp_datapath.h"
#include "ccp_error.h"
#include "ccp_nl.h"
#include "ccp_stats.h"

/* libccp's close message: a MEASURE header, program uid and field count (u32 each), no fields. */
#define CCP_CLOSE_MSG_LEN (sizeof(struct CcpMsgHeader) + 2 * sizeof(u32))

/* Module parameters, read at load time. */
static unsigned int fallback_timeout_ms = 1000;
module_param(fallback_timeout_ms, uint, 0444);
MODULE_PARM_DESC(fallback_timeout_ms,
		 "Agent silence (ms) after which flows run in-kernel Reno until it answers (default 1000)");

static unsigned int max_flows = 1024;
module_param(max_flows, uint, 0444);
MODULE_PARM_DESC(max_flows,
		 "Flows the agent can control at once; later flows run in-kernel Reno (default 1024, max 65535)");

static unsigned int log_level = 1;
module_param(log_level, uint, 0644);
MODULE_PARM_DESC(log_level, "0 errors, 1 warnings (default), 2 info, 3 debug; ratelimited");

struct ccp_tables ccp_tables;


u64 ccp_now_us(void)
{
	return div_u64(ktime_get_ns(), NSEC_PER_USEC);
}

static u64 ccp_since_us(u64 then)
{
	u64 now = ccp_now_us();

	return now > then ? now - then : 0;
}

static u64 ccp_after_us(u64 us)
{
	return ccp_now_us() + us;
}

static void ccp_log(struct ccp_datapath *dp, enum ccp_log_level level, const char *msg, int len)
{
	switch (level) {
	case ERROR:
		pr_err_ratelimited("ccp: libccp: %.*s\n", len, msg);
		break;
	case WARN:
		if (log_level >= 1)
			pr_warn_ratelimited("ccp: libccp: %.*s\n", len, msg);
		break;
	case INFO:
		if (log_level >= 2)
			pr_info_ratelimited("ccp: libccp: %.*s\n", len, msg);
		break;
	default:
		if (log_level >= 3)
			pr_debug_ratelimited("ccp: libccp: %.*s\n", len, msg);
		break;
	}
}

int ccp_deliver(u32 portid, const char *msg, int len)
{
	struct CcpMsgHeader hdr;
	bool report;
	int ret;

	if (len < (int)sizeof(hdr))
		return -EINVAL;
	memcpy(&hdr, msg, sizeof(hdr));
	/*
	 * A report the agent answers. libccp's close is a MEASURE without fields, queued by
	 * ccp_connection_free() and sent here after the slot's round trips were forgotten: counted,
	 * it stayed unanswered, and every later flow on the slot paired each update with the report
	 * before its own (round trips of one report interval, about an RTT, in the guest's figures).
	 */
	report = hdr.Type == MEASURE && hdr.Len > CCP_CLOSE_MSG_LEN;
	/*
	 * Timed before it leaves: an agent on another CPU can answer it before the send returns
	 * here, and an update that found no report to pair with left this one unanswered for good
	 * (every later update of the flow paired with the report before its own: an agent on
	 * vCPU 1 of the guest read one report interval, 34.8 ms for CUBIC on a 30 ms link).
	 */
	if (report)
		ccp_ipc_report_sent(hdr.SocketId, ccp_now_us());
	ret = ccp_nl_send(portid, msg, len);
	if (ret && report)
		ccp_ipc_report_unsent(hdr.SocketId);
	if (ret == -ENOTCONN)	/* before the socket exists (module init): nobody to tell */
		return 0;
	if (ret) {
		atomic_inc(ret == -ENOBUFS ? &ccp_counters.send_enobufs :
			   ret == -ESRCH ? &ccp_counters.send_esrch :
			   &ccp_counters.send_other_errors);
		return ret;
	}
	atomic_inc(&ccp_counters.sent_messages);
	return 0;
}

/* libccp -> agent, BHs off: queued, sent by ccp_flush() (now, if the queue is full). */
static int ccp_send(struct ccp_datapath *dp, char *msg, int len)
{
	if (ccp_nl_queue(msg, len) == 0)
		return 0;
	return ccp_deliver(READ_ONCE(ccp_tables.agent_portid), msg, len);
}

/*
 * Send what libccp queued on this CPU, with BHs still off and no lock held. A failed send
 * starts libccp's fallback timer as a failed send inside libccp does: the flows fall back if
 * the agent then stays silent for fallback_timeout_ms.
 */
void ccp_flush(void)
{
	if (ccp_nl_flush(READ_ONCE(ccp_tables.agent_portid), ccp_deliver))
		_update_fto_timer(&ccp_tables.dp);
}

/* Free the flow and program tables (no flow left: ccp is unregistered). */
void ccp_datapath_exit(void)
{
	if (ccp_tables.dp.programs)
		kvfree(ccp_program_table());
	ccp_tables.dp.programs = NULL;
	ccp_free(&ccp_tables.dp);
	ccp_ipc_free();
	kvfree(ccp_tables.slots);
	ccp_tables.slots = NULL;
	kvfree(ccp_tables.conns);
	ccp_tables.conns = NULL;
}

u32 ccp_max_flows(void)
{
	return max_flows;
}

unsigned int ccp_fallback_timeout_ms(void)
{
	return fallback_timeout_ms;
}

unsigned int ccp_log_level(void)
{
	return log_level;
}

/*
 * Build the flow table (max_flows slots) and libccp's datapath around the flow callbacks; 0 or
 * a negative errno, with nothing left allocated.
 */
int ccp_datapath_init(void (*set_cwnd)(struct ccp_connection *conn, u32 cwnd_bytes),
		      void (*set_rate)(struct ccp_connection *conn, u32 rate_bytes_per_sec))
{
	struct ccp_datapath *dp = &ccp_tables.dp;
	struct ccp_program_table *table;
	u32 i;
	int ret;

	if (max_flows == 0 || max_flows > U16_MAX) {
		pr_err("ccp: max_flows=%u must be between 1 and %u\n", max_flows, U16_MAX);
		return -EINVAL;
	}
	if (fallback_timeout_ms == 0) {
		pr_err("ccp: fallback_timeout_ms must be positive\n");
		return -EINVAL;
	}
	ccp_tables.conns = kvcalloc(max_flows, sizeof(*ccp_tables.conns), GFP_KERNEL);
	ccp_tables.slots = kvcalloc(max_flows, sizeof(*ccp_tables.slots), GFP_KERNEL);
	table = kvzalloc(ccp_program_table_size(), GFP_KERNEL);
	if (!ccp_tables.conns || !ccp_tables.slots || !table || ccp_ipc_init(max_flows)) {
		ret = -ENOMEM;
		goto err;
	}
	for (i = 0; i < max_flows; i++)
		spin_lock_init(&ccp_tables.slots[i].lock);

	*dp = (struct ccp_datapath) {
		.set_cwnd = set_cwnd,
		.set_rate_abs = set_rate,
		.send_msg = ccp_send,
		.log = ccp_log,
		.now = ccp_now_us,
		.since_usecs = ccp_since_us,
		.after_usecs = ccp_after_us,
		.max_connections = max_flows,
		.ccp_active_connections = ccp_tables.conns,
		.fto_us = (u64)fallback_timeout_ms * USEC_PER_MSEC,
		.max_programs = CCP_MAX_PROGRAMS,
	};
	ccp_tables.id = get_random_u32();
	/* libccp's READY from here has no socket to go out on yet (ccp_send: nobody listens). */
	ret = ccp_init(dp, ccp_tables.id);
	if (ret < 0) {
		pr_err("ccp: libccp init failed: %d\n", ret);
		ccp_free(dp);
		dp->programs = NULL;
		ret = -EINVAL;
		goto err;
	}
	/* libccp's own table gives way to one that RCU can free (ccp_agent.c, INSTALL). */
	kfree(dp->programs);
	dp->programs = table->programs;
	return 0;
err:
	kvfree(table);
	ccp_datapath_exit();
	return ret;
}
