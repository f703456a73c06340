// SPDX-License-Identifier: GPL-2.0
/*
 * Counters and the report -> update round-trip histogram of the ccp datapath (ccp_stats.h).
 *
 * Round trips go to a log-linear histogram: exact below 16 us, then 16 buckets per power of two
 * (each within 1/16 of its value) up to the largest u64, so no round trip a slow guest sees is
 * pinned at a cap (a 1-us linear histogram capped at 4095 us read p50 = 4095 under TCG with one
 * vCPU shared with iperf3). The agent answers a flow's reports in order: the k-th update answers
 * the k-th report. Each flow's timing has its own lock and each CPU its own histogram, summed
 * when read (root only): reports and updates of different flows share no lock (issue 16, K6).
 */
#include <linux/bitops.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysfs.h>

#include "ccp_stats.h"

#define IPC_SUB_BITS 4
#define IPC_SUB_BUCKETS BIT(IPC_SUB_BITS)
#define IPC_RTT_BUCKETS ((64 - IPC_SUB_BITS + 1) * IPC_SUB_BUCKETS)
/* Unanswered reports remembered per flow. */
#define IPC_PENDING_REPORTS 16

struct ccp_ipc_timing {
	spinlock_t lock;	/* guards what follows; nests inside the flow's slot lock */
	u8 head;		/* oldest unanswered report */
	u8 count;
	u64 sent_us[IPC_PENDING_REPORTS];
};

struct ccp_ipc_hist {
	u32 buckets[IPC_RTT_BUCKETS];
};

struct ccp_counters ccp_counters;

static struct {
	struct ccp_ipc_timing *timing;	/* per flow (sid - 1) */
	u32 max_flows;
	struct ccp_ipc_hist __percpu *hist;
} ipc;

static int ccp_get_atomic(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read((atomic_t *)kp->arg));
}

const struct kernel_param_ops ccp_atomic_ops = {
	.get = ccp_get_atomic,
};

module_param_cb(sent_messages, &ccp_atomic_ops, &ccp_counters.sent_messages, 0400);
MODULE_PARM_DESC(sent_messages, "(read-only) messages delivered to the agent since load");
module_param_cb(send_enobufs, &ccp_atomic_ops, &ccp_counters.send_enobufs, 0400);
MODULE_PARM_DESC(send_enobufs, "(read-only) messages lost: the agent's receive buffer was full");
module_param_cb(send_esrch, &ccp_atomic_ops, &ccp_counters.send_esrch, 0400);
MODULE_PARM_DESC(send_esrch, "(read-only) messages lost: no agent listened");
module_param_cb(send_other_errors, &ccp_atomic_ops, &ccp_counters.send_other_errors, 0400);
MODULE_PARM_DESC(send_other_errors, "(read-only) messages lost for another reason (-ENOMEM, ...)");
module_param_cb(fallback_entries, &ccp_atomic_ops, &ccp_counters.fallback_entries, 0400);
MODULE_PARM_DESC(fallback_entries, "(read-only) times a flow the agent controlled switched to in-kernel Reno");
module_param_cb(ready_sent, &ccp_atomic_ops, &ccp_counters.ready_sent, 0400);
MODULE_PARM_DESC(ready_sent, "(read-only) READY announcements sent since load");
module_param_cb(agents_gone, &ccp_atomic_ops, &ccp_counters.agents_gone, 0400);
MODULE_PARM_DESC(agents_gone, "(read-only) agents whose netlink socket was released while they were the agent");
module_param_cb(active_flows, &ccp_atomic_ops, &ccp_counters.active_flows, 0400);
MODULE_PARM_DESC(active_flows, "(read-only) flows holding a libccp slot and its per-flow state");
module_param_cb(table_full, &ccp_atomic_ops, &ccp_counters.table_full, 0400);
MODULE_PARM_DESC(table_full, "(read-only) flows that found the table (max_flows) full and ran in-kernel Reno");
module_param_cb(tsval_rtt_dropped, &ccp_atomic_ops, &ccp_counters.tsval_rtt_dropped, 0400);
MODULE_PARM_DESC(tsval_rtt_dropped,
		 "(read-only) RTT samples the kernel took in whole milliseconds from the timestamp option (Karn's rule left no precise one), not passed to the agent");

int ccp_ipc_init(u32 max_flows)
{
	u32 i;

	ipc.timing = kvcalloc(max_flows, sizeof(*ipc.timing), GFP_KERNEL);
	ipc.hist = alloc_percpu(struct ccp_ipc_hist);
	if (!ipc.timing || !ipc.hist) {
		ccp_ipc_free();
		return -ENOMEM;
	}
	for (i = 0; i < max_flows; i++)
		spin_lock_init(&ipc.timing[i].lock);
	ipc.max_flows = max_flows;
	return 0;
}

void ccp_ipc_free(void)
{
	kvfree(ipc.timing);
	ipc.timing = NULL;
	free_percpu(ipc.hist);
	ipc.hist = NULL;
	ipc.max_flows = 0;
}

/* The histogram bucket of a round trip of `us` microseconds. */
static u32 ccp_ipc_bucket(u64 us)
{
	u32 shift;

	if (us < IPC_SUB_BUCKETS)
		return us;
	shift = fls64(us) - 1 - IPC_SUB_BITS;
	return (shift + 1) * IPC_SUB_BUCKETS + ((us >> shift) & (IPC_SUB_BUCKETS - 1));
}

/* The largest round trip, in microseconds, that bucket `b` holds. */
static u64 ccp_ipc_bucket_max_us(u32 b)
{
	u32 shift;

	if (b < IPC_SUB_BUCKETS)
		return b;
	shift = b / IPC_SUB_BUCKETS - 1;
	return (((u64)IPC_SUB_BUCKETS + b % IPC_SUB_BUCKETS + 1) << shift) - 1;
}

void ccp_ipc_report_sent(u32 sid, u64 now_us)
{
	struct ccp_ipc_timing *t;

	if (sid < 1 || sid > ipc.max_flows)
		return;
	t = &ipc.timing[sid - 1];
	spin_lock_bh(&t->lock);
	if (t->count == IPC_PENDING_REPORTS) {	/* agent far behind: forget the oldest */
		t->head = (t->head + 1) % IPC_PENDING_REPORTS;
		t->count--;
	}
	t->sent_us[(t->head + t->count) % IPC_PENDING_REPORTS] = now_us;
	t->count++;
	spin_unlock_bh(&t->lock);
}

/*
 * The caller timed the report just before the send, so it is the newest entry, unless another
 * CPU sent the flow's next report in those few instructions: then that one is forgotten in its
 * place, and each update still pairs with one report. An update that came meanwhile answered an
 * older report, at the head.
 */
void ccp_ipc_report_unsent(u32 sid)
{
	struct ccp_ipc_timing *t;

	if (sid < 1 || sid > ipc.max_flows)
		return;
	t = &ipc.timing[sid - 1];
	spin_lock_bh(&t->lock);
	if (t->count)
		t->count--;
	spin_unlock_bh(&t->lock);
}

void ccp_ipc_update_received(u32 sid, u64 now_us)
{
	struct ccp_ipc_timing *t;

	if (sid < 1 || sid > ipc.max_flows)
		return;
	t = &ipc.timing[sid - 1];
	spin_lock_bh(&t->lock);
	if (t->count) {
		u64 sent = t->sent_us[t->head];

		t->head = (t->head + 1) % IPC_PENDING_REPORTS;
		t->count--;
		this_cpu_inc(ipc.hist->buckets[ccp_ipc_bucket(now_us > sent ? now_us - sent : 0)]);
	}
	spin_unlock_bh(&t->lock);
}

void ccp_ipc_forget(u32 sid)
{
	if (sid < 1 || sid > ipc.max_flows)
		return;
	spin_lock_bh(&ipc.timing[sid - 1].lock);
	ipc.timing[sid - 1].count = 0;
	spin_unlock_bh(&ipc.timing[sid - 1].lock);
}

/*
 * /sys/module/ccp/parameters/ipc_rtt_us: "count N p50 X p95 Y p99 Z max M" for report -> update
 * round trips through the agent since load or the last reset (write anything to reset).
 */
static int ccp_ipc_rtt_get(char *buf, const struct kernel_param *kp)
{
	static const unsigned int pct[] = { 50, 95, 99 };
	u64 count = 0, seen = 0, at[ARRAY_SIZE(pct)] = { 0 }, max = 0;
	u32 i, next = 0;
	struct ccp_ipc_hist *sum;
	int cpu;

	if (!ipc.hist)
		return -ENODEV;
	sum = kzalloc(sizeof(*sum), GFP_KERNEL);
	if (!sum)
		return -ENOMEM;
	for_each_possible_cpu(cpu)
		for (i = 0; i < IPC_RTT_BUCKETS; i++)
			sum->buckets[i] += READ_ONCE(per_cpu_ptr(ipc.hist, cpu)->buckets[i]);
	for (i = 0; i < IPC_RTT_BUCKETS; i++) {
		count += sum->buckets[i];
		if (sum->buckets[i])
			max = ccp_ipc_bucket_max_us(i);
	}
	for (i = 0; i < IPC_RTT_BUCKETS && next < ARRAY_SIZE(pct); i++) {
		seen += sum->buckets[i];
		while (next < ARRAY_SIZE(pct) && count && seen * 100 >= count * pct[next])
			at[next++] = ccp_ipc_bucket_max_us(i);
	}
	kfree(sum);
	return sysfs_emit(buf, "count %llu p50 %llu p95 %llu p99 %llu max %llu\n",
			  count, at[0], at[1], at[2], max);
}

/* Round trips counted while the reset runs may survive it or not. */
static int ccp_ipc_rtt_reset(const char *val, const struct kernel_param *kp)
{
	u32 i;
	int cpu;

	if (!ipc.hist)
		return -ENODEV;
	for_each_possible_cpu(cpu)
		for (i = 0; i < IPC_RTT_BUCKETS; i++)
			WRITE_ONCE(per_cpu_ptr(ipc.hist, cpu)->buckets[i], 0);
	return 0;
}

static const struct kernel_param_ops ccp_ipc_rtt_ops = {
	.get = ccp_ipc_rtt_get,
	.set = ccp_ipc_rtt_reset,
};
module_param_cb(ipc_rtt_us, &ccp_ipc_rtt_ops, NULL, 0600);
MODULE_PARM_DESC(ipc_rtt_us,
		 "report -> agent update round trips in us (within 1/16): count, p50, p95, p99, max (write to reset)");
