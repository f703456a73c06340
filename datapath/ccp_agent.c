// SPDX-License-Identifier: GPL-2.0
/*
 * The agent as ccp.ko sees it: its messages, its programs, whether it is alive, and what
 * happens to the flows when it changes.
 *
 * Liveness is per agent, not per silence (issue 16, K3/K4). The agent is the netlink socket
 * that last sent us a message; the module holds a reference to it and knows it is:
 *   - gone at once when that socket is released (netlink's NETLINK_URELEASE notifier: the agent
 *     exited or was killed): every flow's program is dropped and the flows run the fallback;
 *   - hung when the same message waits unread at the head of its receive queue for
 *     fallback_timeout_ms (and the agent sent nothing): e.g. SIGSTOP. A tick checks this off
 *     the ACK path (ccp_tick()). Its flows run the fallback, keep their programs, and return
 *     to the agent when it reads again;
 *   - alive otherwise, however long it says nothing: a live agent that sends nothing on a flow
 *     (a portus algorithm in loss recovery, or one that has nothing to change) keeps the flow
 *     at what it installed. Reports need no answer.
 *
 * READY goes only to a new agent: while no agent is known the module announces itself once a
 * second (usersock: to the group, where unmodified portus waits for it; genl has no group;
 * polycc-portus speaks first on both), and a known agent, quiet or hung, never gets one (an
 * agent drops a datapath's flows on READY). A message from a new socket is a new agent: the
 * program table is reset and every live flow re-sends CREATE, so it adopts them. A CREATE sent
 * for a flow that already carries data describes the flow as it is (ccp_describe_flow: window,
 * ssthresh, RTTs, agent rate), so an agent that adopts it continues from there, not from an
 * initial window in slow start.
 *
 * The control lock (agent.lock) serializes what changes for every flow at once: a new or lost
 * agent, an INSTALL, READY and its re-announcement, and the agent's messages. It nests outside
 * the flows' slot locks and is never taken on the ACK path, which reads the agent's port id and
 * whether it hangs as two words.
 */
#include <linux/jiffies.h>
#include <linux/minmax.h>
#include <linux/netlink.h>
#include <linux/slab.h>
#include <linux/timer.h>
#include <linux/version.h>
#include <net/sock.h>

#include "ccp_agent.h"
#include "ccp_datapath.h"
#include "ccp_error.h"
#include "ccp_nl.h"
#include "ccp_stats.h"

/* While no agent is known, announce the datapath to a returning agent this often. */
static const u64 ready_interval_us = USEC_PER_SEC;
/* The liveness tick: this fraction of fallback_timeout_ms, at most max_tick_ms. */
static const unsigned int tick_divisor = 8;
static const unsigned int max_tick_ms = 100;

static struct {
	spinlock_t lock;	/* the control lock: guards what follows, and sweeps over the flows */
	bool hung;		/* it leaves its messages unread (read unlocked) */
	struct sock *sk;	/* its socket, referenced while it is the agent */
	/*
	 * The head of the agent's receive queue as last seen (compared, never dereferenced), and
	 * when the agent last showed it is reading: the queue empty, its head moved on, or a
	 * message from it.
	 */
	const void *head;
	u64 progress_us;
	u64 last_ready_us;	/* when READY was last (re)sent */
	struct timer_list tick;	/* ccp_tick() */
	bool stopping;		/* module unloading: the tick does not re-arm */
} agent = { .lock = __SPIN_LOCK_UNLOCKED(agent.lock) };

/*
 * True when the agent has left a message unread for the timeout: the same message at the head
 * of its receive queue all along, and nothing sent meanwhile (SIGSTOP, a stuck event loop). A
 * live agent reads within milliseconds however little it has to say. The head, not the queue's
 * size: an agent reading all the time but behind a burst (1,000 flows opening) may never have
 * a shorter queue at one ACK than at the one before, and is not hung (issue 16, item 5: 15-93
 * flows fell back). Called by the tick with the control lock held and `now` read under it (an
 * agent message handled on another CPU in between would otherwise be "in the future").
 */
static bool ccp_agent_hung(u64 now)
{
	u64 timeout_us = (u64)ccp_fallback_timeout_ms() * USEC_PER_MSEC;
	struct sock *sk = agent.sk;
	const void *head;
	bool empty;

	if (!sk)
		return false;
	head = READ_ONCE(sk->sk_receive_queue.next);
	empty = head == (const void *)&sk->sk_receive_queue;
	if (empty || head != agent.head)
		agent.progress_us = now;
	agent.head = head;
	return !empty && now > agent.progress_us &&
	       now - agent.progress_us > timeout_us;
}

bool ccp_agent_silent(void)
{
	return !READ_ONCE(ccp_tables.agent_portid) || READ_ONCE(agent.hung);
}

/*
 * Forget every flow's program and CREATE, and the programs: libccp re-sends CREATE on the
 * flow's next ACK and the flow runs the fallback until the agent answers it. Called with the
 * control lock held (BHs off), when the agent's view of the flows is gone (a new agent, or a
 * READY, which makes an agent drop them). A flow reads the program table only through its
 * program index, under its slot's lock: once every index is cleared, nobody reads the table,
 * and it is cleared in place.
 */
static void ccp_reannounce_flows(void)
{
	size_t i;

	for (i = 0; i < ccp_max_flows(); i++) {
		struct ccp_connection *conn = &ccp_tables.conns[i];
		struct ccp_slot *slot = &ccp_tables.slots[i];
		struct ccp_priv_state *state;

		spin_lock(&slot->lock);
		if (slot->sk) {
			state = get_ccp_priv_state(conn);
			state->program_index = 0;
			state->staged_program_index = -1;
			state->sent_create = false;
			conn->last_create_msg_sent = 0;
			memset(&state->pending_update, 0, sizeof(state->pending_update));
			ccp_ipc_forget(i + 1);
		}
		spin_unlock(&slot->lock);
	}
	memset(ccp_program_table()->programs, 0, CCP_MAX_PROGRAMS * sizeof(struct DatapathProgram));
}

/*
 * INSTALL, with the control lock held: libccp writes the program into a copy of the table
 * (`next`, allocated by the caller where it may sleep), which then replaces the table. A flow
 * running a program of the old table finishes with it; RCU frees the old table after them.
 * Returns libccp's result; on success `next` is the table.
 */
static int ccp_install(struct ccp_program_table *next, char *msg, int len)
{
	struct ccp_program_table *cur = ccp_program_table();
	struct ccp_datapath scratch = ccp_tables.dp;
	int ret;

	memcpy(next->programs, cur->programs, CCP_MAX_PROGRAMS * sizeof(struct DatapathProgram));
	scratch.programs = next->programs;
	ret = ccp_read_msg(&scratch, msg, len);
	if (ret < 0)
		return ret;
	rcu_assign_pointer(ccp_tables.dp.programs, next->programs);
	kvfree_rcu(cur, rcu);
	return ret;
}

/*
 * Announce the datapath while no agent is known. Called with the control lock held. An agent
 * that receives READY drops the datapath's flows and installs its program, so every live flow
 * re-sends CREATE (ccp_reannounce_flows) for the agent that just started to adopt. Only
 * usersock has a group to announce to; over genl the agent speaks first.
 */
static void ccp_maybe_send_ready(u64 now)
{
	char msg[READY_MSG_SIZE];
	int len;

	if (ccp_nl_protocol() != NETLINK_USERSOCK ||
	    now - agent.last_ready_us < ready_interval_us)
		return;
	agent.last_ready_us = now;
	len = write_ready_msg(msg, sizeof(msg), ccp_tables.id);
	/* At once, not queued: whether anyone heard it decides the re-announcement. */
	if (len > 0 && !ccp_deliver(ccp_tables.agent_portid, msg, len)) {
		atomic_inc(&ccp_counters.ready_sent);
		ccp_reannounce_flows();
	}
}

/*
 * Make `sk` (port `portid`, NULL/0: none) the agent. Called with the control lock held;
 * returns the previous agent's socket for the caller to release outside the lock.
 */
static struct sock *ccp_set_agent(u32 portid, struct sock *sk, u64 now)
{
	struct sock *old = agent.sk;

	if (sk)
		sock_hold(sk);
	agent.sk = sk;
	WRITE_ONCE(ccp_tables.agent_portid, portid);
	WRITE_ONCE(agent.hung, false);
	agent.head = NULL;
	agent.progress_us = now;
	ccp_reannounce_flows();
	return old;
}

/*
 * The liveness tick (timer, softirq): whether the agent hangs, for the ACK path to read, and
 * READY while no agent is known.
 */
static void ccp_tick(struct timer_list *t)
{
	unsigned int ms = clamp(ccp_fallback_timeout_ms() / tick_divisor, 1U, max_tick_ms);
	u64 now;

	spin_lock(&agent.lock);
	now = ccp_now_us();
	WRITE_ONCE(agent.hung, ccp_agent_hung(now));
	if (!ccp_tables.agent_portid)
		ccp_maybe_send_ready(now);
	spin_unlock(&agent.lock);
	if (!READ_ONCE(agent.stopping))
		mod_timer(&agent.tick, jiffies + msecs_to_jiffies(ms));
}

/*
 * A message for one flow, with the control lock held: libccp stages it for the flow's next
 * ACK, under the flow's lock. A flow that is gone or not yet live is LIBCCP_UNKNOWN_CONNECTION.
 */
static int ccp_flow_msg(const struct CcpMsgHeader *hdr, char *msg, int len, u64 now)
{
	struct ccp_slot *slot = ccp_slot(hdr->SocketId);
	int ret = LIBCCP_UNKNOWN_CONNECTION;

	if (!slot)
		return ret;
	spin_lock(&slot->lock);
	if (slot->sk) {
		if (hdr->Type == UPDATE_FIELDS)
			ccp_ipc_update_received(hdr->SocketId, now);
		else if (hdr->Type == CHANGE_PROG)	/* reports from before it go unanswered */
			ccp_ipc_forget(hdr->SocketId);
		ret = ccp_read_msg(&ccp_tables.dp, msg, len);
	}
	spin_unlock(&slot->lock);
	return ret;
}

/*
 * Agent -> datapath, from the netlink input path (process context, message already validated;
 * `sk` is the sending socket). A new socket is a new agent: reset the program table and have
 * every live flow re-send CREATE, with its state, so the new agent adopts it.
 */
static int ccp_agent_msg(u32 portid, struct sock *sk, char *msg, int len)
{
	struct ccp_program_table *next = NULL;
	struct CcpMsgHeader hdr;
	struct sock *old = NULL;
	u64 now;
	int ret;

	memcpy(&hdr, msg, sizeof(hdr));
	if (hdr.Type == INSTALL_EXPR) {
		next = kvmalloc(ccp_program_table_size(), GFP_KERNEL);
		if (!next)
			return -ENOMEM;
	}
	spin_lock_bh(&agent.lock);
	now = ccp_now_us();
	if (portid != ccp_tables.agent_portid || sk != agent.sk) {
		if (ccp_tables.agent_portid && ccp_log_level() >= 1)
			pr_warn_ratelimited("ccp: new agent (port %u, was %u): programs reset, live flows re-announced\n",
					    portid, ccp_tables.agent_portid);
		old = ccp_set_agent(portid, sk, now);
	}
	agent.progress_us = now;
	WRITE_ONCE(agent.hung, false);
	/* Whatever the message, the agent answered: libccp's fallback timer stops. */
	_turn_off_fto_timer(&ccp_tables.dp);
	if (next) {
		ret = ccp_install(next, msg, len);
		if (ret >= 0)
			next = NULL;
	} else {
		ret = ccp_flow_msg(&hdr, msg, len, now);
	}
	spin_unlock_bh(&agent.lock);
	kvfree(next);
	if (old)
		sock_put(old);
	return ret;
}

/* ccp_nl.c's handler. An update for a flow that just closed is not the sender's fault. */
static void ccp_handle_agent_msg(u32 portid, struct sock *sk, char *msg, int len)
{
	int ret = ccp_agent_msg(portid, sk, msg, len);

	if (ret < 0 && ccp_log_level() >= 2)
		pr_info_ratelimited("ccp: libccp could not apply an agent message: %d\n", ret);
}

/*
 * The agent's socket was released (it exited or was killed): its flows fall back at once,
 * from their current windows, and READY goes out for the next agent.
 */
static int ccp_netlink_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	const struct netlink_notify *n = ptr;
	struct sock *old = NULL;

	if (event != NETLINK_URELEASE || n->protocol != ccp_nl_protocol() ||
	    !net_eq(n->net, &init_net))
		return NOTIFY_DONE;
	spin_lock_bh(&agent.lock);
	if (ccp_tables.agent_portid && n->portid == ccp_tables.agent_portid) {
		if (ccp_log_level() >= 1)
			pr_warn_ratelimited("ccp: agent (port %u) gone: flows run in-kernel Reno until the next one\n",
					    n->portid);
		old = ccp_set_agent(0, NULL, ccp_now_us());
		atomic_inc(&ccp_counters.agents_gone);
	}
	spin_unlock_bh(&agent.lock);
	if (old)
		sock_put(old);
	return NOTIFY_DONE;
}

static struct notifier_block ccp_netlink_notifier = {
	.notifier_call = ccp_netlink_event,
};

/*
 * The transport goes live only once the flow and program tables exist: an agent message that
 * arrived before libccp's program table did dereferenced NULL (issue 16, K2).
 */
int ccp_agent_start(void)
{
	int ret;

	timer_setup(&agent.tick, ccp_tick, 0);
	ret = netlink_register_notifier(&ccp_netlink_notifier);
	if (ret)
		return ret;
	ret = ccp_nl_init(ccp_max_flows(), ccp_handle_agent_msg);
	if (ret) {
		netlink_unregister_notifier(&ccp_netlink_notifier);
		return ret;
	}
	mod_timer(&agent.tick, jiffies + 1);	/* the first tick announces the datapath */
	return 0;
}

/* The tick first (it sends), then the transport (no more messages), then the agent's socket. */
void ccp_agent_stop(void)
{
	WRITE_ONCE(agent.stopping, true);
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
	timer_delete_sync(&agent.tick);
#else
	del_timer_sync(&agent.tick);
#endif
	ccp_nl_exit();
	netlink_unregister_notifier(&ccp_netlink_notifier);
	if (agent.sk)
		sock_put(agent.sk);
	agent.sk = NULL;
	ccp_tables.agent_portid = 0;
}
