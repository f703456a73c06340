// SPDX-License-Identifier: GPL-2.0
/*
 * ccp: polycc's TCP congestion control datapath. It runs libccp (the CCP datapath library) per
 * flow and talks to the polycc-portus agent over netlink: by default an admin-only generic
 * netlink family, unicast to the agent; with ipc=usersock exactly as portus 0.9 expects
 * (ccp_nl.c).
 *
 * Model. On every ACK (loss-only ACKs too) the flow's measurements become libccp primitives and
 * the flow's datapath program runs; the program decides when to report, and the agent answers
 * with cwnd and rate updates that libccp applies through ccp_set_cwnd() and ccp_set_rate().
 *
 *   ACK --> primitives --> ccp_invoke() --(report)--> netlink (to the agent) --> agent
 *   agent --> netlink unicast --> validate --> ccp_read_msg() --(staged)--> next ACK applies
 *
 * The agent (ccp_agent.c) is the netlink socket that last sent us a message: the module knows
 * when it is gone, hung or alive, and what a new agent must be told.
 *
 * Fallback. A flow runs Reno growth inside the kernel, from its current window in congestion
 * avoidance, instead of freezing when: no agent is known, or it hangs; libccp could not
 * deliver a message and nothing came back for fallback_timeout_ms; the flow has no program
 * (its CREATE is unanswered, or its agent went away); or the flow table is full.
 *
 * IPv6. A v6 flow's CREATE carries its addresses after the name (ccp_describe_addresses); a
 * v4-mapped address on a dual-stack socket is IPv4 and goes in CREATE's own fields.
 *
 * Locking (issue 16, K6). The ACK path takes no lock shared between flows:
 *   - each flow slot has its own spinlock (struct ccp_slot), taken by the flow's ACKs, by the
 *     agent's messages for that flow, and by sweeps over every flow; a slot is live for
 *     messages and sweeps only while slot->sk is set, from after libccp set it up to before it
 *     is freed, so nobody reads a flow's state while it comes or goes;
 *   - libccp's program table is replaced whole when the agent installs a program, and freed
 *     after an RCU grace period, so a flow running a program never sees it change;
 *   - the agent's liveness is computed off the ACK path, by a periodic tick (ccp_tick()), into
 *     two words the ACK path reads: the agent's port id and whether it hangs.
 * The control lock (ccp_agent.c) serializes what changes for every flow at once: a new or
 * lost agent, an INSTALL, READY and its re-announcement, and the agent's messages. It nests
 * outside the slots' locks. Nothing sleeps under either lock, and nothing is sent under them:
 * libccp's messages wait in a per-CPU outbox that ccp_flush() sends after the lock is dropped.
 *
 * Units. libccp's cwnd is bytes and its rate bytes/s, both u32 at the callbacks; the kernel's
 * cwnd is packets. Conversions use the flow's MSS (tp->mss_cache), never a constant. Time is
 * the monotonic clock in microseconds.
 */
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/version.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "ccp_agent.h"
#include "ccp_datapath.h"
#include "ccp_error.h"
#include "ccp_flowinfo.h"
#include "ccp_prr.h"
#include "ccp_stats.h"

/* Smallest window set on the agent's behalf, in packets. */
static const u32 min_cwnd_pkts = 1;
/* Linux tcp_update_pacing_rate() ratios, in percent, for flows without an agent rate. */
static const u32 pacing_ss_ratio_pct = 200;
static const u32 pacing_ca_ratio_pct = 120;

/* Why a flow runs the in-kernel fallback, for the per-flow state and logs. */
enum ccp_mode {
	CCP_MODE_AGENT = 0,	/* the agent's program decides */
	CCP_MODE_FALLBACK = 1,	/* in-kernel Reno growth */
};

/* Per-flow state in inet_csk_ca(sk). */
struct ccp_flow {
	struct ccp_ack_marks marks; /* the flow's counters at the previous ACK */
	u64 agent_rate;		/* last rate the agent set (B/s); 0: pace from cwnd */
	u32 fallback_episode_end; /* snd_nxt when the last fallback reduction happened */
	u32 cwnd_target;	/* the window asked for (packets); 0: the kernel's own stands */
	u16 sid;		/* libccp connection id; 0: no slot (table full) */
	u8 mode;		/* enum ccp_mode */
	u8 undos;		/* the kernel's undos since the last invoke (saturating) */
	u8 initialised:1,	/* ccp_init_flow() ran (see ccp_on_ack()) */
	   timeout_pending:1,	/* a retransmission timeout happened since the last invoke */
	   in_recovery:1,	/* fallback: cwnd already reduced for this loss episode */
	   rate_update_pending:1, /* the agent staged a Rate update for this invoke */
	   cwnd_update_pending:1, /* the agent staged a Cwnd update for this invoke */
	   reducing:1;		/* ccp_reduce_cwnd() holds the window under the target */
};

/*
 * Proportional rate reduction (RFC 6937, PRR-SSRB), as the kernel runs it (tcp_cwnd_reduction())
 * for congestion controls without .cong_control and skips it for us: in a loss episode (Recovery,
 * or CWR after an ECN echo) the window goes down to the target in step with what the ACKs
 * deliver, not at once. At once, a flow of two or three packets sent nothing until its inflight
 * drained below the new window, its ACK clock stopped, and the episode ended in a timeout: with
 * 64 flows on a 20 Mbit/s link the module alone (fallback Reno) had 1.4x the kernel Reno's
 * timeouts, and the agent's Reno 2.1x (docs/kernel-parity.md, "Many flows").
 *
 * The kernel keeps prior_cwnd (the window at the episode's start) and prr_out (sent since);
 * prr_delivered is ours to count, as tcp_cwnd_reduction() would; ccp_prr.h has the rule. A
 * target not yet lowered (the agent's answer to the loss is an IPC round trip away) holds the
 * flow to packet conservation meanwhile.
 *
 * Only for flows sent unpaced (window algorithms, the fallback), which the kernel's PRR serves.
 * A flow the agent paces (BBR, Copa, PCC, MOCC) sends at its rate with a window above what is
 * in flight: held to packet conservation through every episode (at 1 % random loss it is in one
 * most of the time) the ACK clock, not its rate, would set its pace; in-kernel BBR conserves for
 * one round only. Its window goes where the agent puts it, at once, as before.
 */
static bool ccp_reduces_in_step(struct sock *sk, const struct ccp_flow *f)
{
	return tcp_in_cwnd_reduction(sk) && (f->mode == CCP_MODE_FALLBACK || !f->agent_rate);
}

static void ccp_reduce_cwnd(struct sock *sk, struct ccp_flow *f, const struct rate_sample *rs,
			    u32 target, u32 before, bool una_advanced)
{
	struct tcp_sock *tp = tcp_sk(sk);
	int sndcnt;

	f->reducing = 1;
	if (rs->acked_sacked <= 0 || !tp->prior_cwnd) {
		tcp_snd_cwnd_set(tp, before);
		return;
	}
	tp->prr_delivered += rs->acked_sacked;
	sndcnt = ccp_prr_sndcnt(target, tcp_packets_in_flight(tp), tp->prior_cwnd,
				tp->prr_delivered, tp->prr_out, rs->acked_sacked,
				una_advanced && !rs->losses);
	tcp_snd_cwnd_set(tp, clamp_t(u32, tcp_packets_in_flight(tp) + sndcnt, min_cwnd_pkts,
				     tp->snd_cwnd_clamp));
}

/*
 * libccp loads the Cwnd register from the kernel's window on every invoke and calls this with it
 * after the program, so a program that leaves Cwnd alone echoes the current window. In a loss
 * episode that is the reduced window of ccp_reduce_cwnd(), not a new target. So the target is
 * set by a staged agent update, or by a program that changed Cwnd outside a loss episode (its
 * per-ACK slow start; Linux grows no window in one).
 */
static void ccp_set_cwnd(struct ccp_connection *conn, u32 cwnd_bytes)
{
	struct sock *sk = ccp_get_impl(conn);
	struct ccp_flow *f = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	u32 mss = max_t(u32, tp->mss_cache, 1);
	u32 pkts = clamp_t(u32, cwnd_bytes / mss, min_cwnd_pkts, tp->snd_cwnd_clamp);

	if (!f->cwnd_update_pending && (pkts == tcp_snd_cwnd(tp) || ccp_reduces_in_step(sk, f)))
		return;
	f->cwnd_target = pkts;
	tcp_snd_cwnd_set(tp, pkts);
}

/* Pacing for flows whose rate the agent does not set: Linux's own rule. */
static void ccp_default_pacing(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u64 rate = (u64)tp->mss_cache * USEC_PER_SEC << 3;

	if (!tp->srtt_us)
		return;
	rate *= max(tcp_snd_cwnd(tp), tp->packets_out);
	rate *= tcp_snd_cwnd(tp) < tp->snd_ssthresh / 2 ? pacing_ss_ratio_pct : pacing_ca_ratio_pct;
	rate = div_u64(rate, 100);
	rate = div64_u64(rate, tp->srtt_us);
	WRITE_ONCE(sk->sk_pacing_rate, min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate)));
}

/*
 * libccp loads the Rate register from the primitives' snd_rate (the current pacing rate) on every
 * invoke and calls this with it after the program, so most calls echo the current rate back.
 * Only a staged agent update, or a program that changed Rate, is the agent choosing a rate;
 * echoes must not freeze pacing at its current value.
 */
static void ccp_set_rate(struct ccp_connection *conn, u32 rate_bytes_per_sec)
{
	struct sock *sk = ccp_get_impl(conn);
	struct ccp_flow *f = inet_csk_ca(sk);
	u64 current_rate = min_t(u64, READ_ONCE(sk->sk_pacing_rate), U32_MAX);
	u64 rate = min_t(u64, rate_bytes_per_sec, READ_ONCE(sk->sk_max_pacing_rate));

	if (!f->rate_update_pending && rate_bytes_per_sec == current_rate)
		return;
	f->rate_update_pending = 0;
	if (!rate || rate_bytes_per_sec == U32_MAX) {
		/*
		 * No rate, or the agent's "unpaced" (U32_MAX: a live switch to a window-only
		 * algorithm): Linux's rule again, without internal pacing.
		 */
		f->agent_rate = 0;
		cmpxchg(&sk->sk_pacing_status, SK_PACING_NEEDED, SK_PACING_NONE);
		ccp_default_pacing(sk);
		return;
	}
	f->agent_rate = rate;
	/*
	 * TCP's internal pacing only for flows whose agent sets a rate (BBR, Copa, PCC, MOCC): a
	 * window-only algorithm (Reno, CUBIC, Vegas) sends unpaced, as it does in Linux without fq,
	 * so agent CUBIC and kernel CUBIC queue alike. An fq qdisc (SK_PACING_FQ) is left alone.
	 */
	cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED);
	WRITE_ONCE(sk->sk_pacing_rate, rate);
}

/*
 * In-kernel Reno growth (tcp_cong.c), for flows the agent does not control. The kernel calls
 * .ssthresh when a loss episode starts; with .cong_control set it leaves the window to us, so
 * ssthresh becomes the episode's target here, once per episode, and ccp_reduce_cwnd() takes the
 * window there.
 */
static void ccp_fallback_control(struct sock *sk, const struct rate_sample *rs, struct ccp_flow *f)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u8 ca_state = inet_csk(sk)->icsk_ca_state;

	if (ca_state == TCP_CA_Recovery || ca_state == TCP_CA_CWR) {
		if (!f->in_recovery) {
			f->in_recovery = 1;
			f->fallback_episode_end = tp->snd_nxt;
			f->cwnd_target = max(tp->snd_ssthresh, 2U);
		}
		return;
	}
	f->in_recovery = 0;
	if (!rs->acked_sacked || !tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		u32 left = tcp_slow_start(tp, rs->acked_sacked);

		if (!left)
			return;
		tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), left);
	} else {
		tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), rs->acked_sacked);
	}
	tcp_snd_cwnd_set(tp, min(tcp_snd_cwnd(tp), tp->snd_cwnd_clamp));
	f->cwnd_target = tcp_snd_cwnd(tp);
}

static void ccp_set_mode(struct sock *sk, struct ccp_flow *f, enum ccp_mode mode)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (f->mode == mode)
		return;
	f->mode = mode;
	if (mode == CCP_MODE_FALLBACK) {
		/* Continue from the current window in congestion avoidance, not in slow start. */
		tp->snd_ssthresh = max(tcp_snd_cwnd(tp), 2U);
		f->in_recovery = 0;
		atomic_inc(&ccp_counters.fallback_entries);
		if (ccp_log_level() >= 2)
			pr_info_ratelimited("ccp: flow %u: agent silent, in-kernel Reno from cwnd %u\n",
					    f->sid, tcp_snd_cwnd(tp));
	} else if (ccp_log_level() >= 2) {
		pr_info_ratelimited("ccp: flow %u: agent control resumed\n", f->sid);
	}
}

/*
 * Run the flow's program on this ACK, with its slot's lock held (BHs off): LIBCCP_OK, or
 * libccp's LIBCCP_FALLBACK_TIMED_OUT when the agent left a failed send unanswered.
 */
static int ccp_run_program(struct sock *sk, struct ccp_flow *f, struct ccp_connection *conn,
			   const struct ccp_primitives *prims)
{
	struct ccp_priv_state *state = get_ccp_priv_state(conn);
	int ret;

	conn->prims = *prims;
	if (!state->sent_create && tcp_sk(sk)->delivered > 1)	/* data past the SYN */
		ccp_describe_flow(sk, conn, f->agent_rate);
	f->rate_update_pending = state->pending_update.impl_is_pending[RATE_REG];
	f->cwnd_update_pending = state->pending_update.impl_is_pending[CWND_REG];
	rcu_read_lock();	/* the program table (ccp_install()) */
	ret = ccp_invoke(conn);
	rcu_read_unlock();
	f->rate_update_pending = 0;
	f->cwnd_update_pending = 0;
	conn->prims.was_timeout = false;
	return ret;
}

/* One ACK: run the flow's program, or the fallback when the agent cannot decide. */
static void ccp_on_ack(struct sock *sk, const struct rate_sample *rs)
{
	struct ccp_flow *f = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd_before = tcp_snd_cwnd(tp);
	bool una_advanced = tp->bytes_acked != f->marks.bytes_acked;
	struct ccp_primitives prims;
	bool has_program = false;
	struct ccp_slot *slot;
	bool agent_decides;
	int ret = 0;

	/*
	 * An active open's SYN-ACK is acked (tcp_ack() in SYN_SENT) before tcp_finish_connect()
	 * calls our init: that first call finds zeroed state. Acting on it counted a fallback
	 * for every flow (issue 16, item 5's 10,000 flows: fallback_entries 10,100); the kernel's
	 * initial window stands until init.
	 */
	if (!f->initialised)
		return;
	/* An undone reduction's window stands until the agent answers the undo. */
	if (f->undos)
		f->cwnd_target = 0;
	ccp_fill_primitives(sk, rs, &f->marks, f->timeout_pending, f->undos, &prims);
	f->timeout_pending = 0;
	f->undos = 0;

	local_bh_disable();
	slot = ccp_slot(f->sid);
	if (slot) {
		spin_lock(&slot->lock);
		if (slot->sk == sk) {
			struct ccp_connection *conn = &ccp_tables.conns[f->sid - 1];

			ret = ccp_run_program(sk, f, conn, &prims);
			has_program = get_ccp_priv_state(conn)->program_index != 0;
		}
		spin_unlock(&slot->lock);
	}
	ccp_flush();
	local_bh_enable();

	/* A report the invoke just sent does not make the agent silent. */
	agent_decides = has_program && ret != LIBCCP_FALLBACK_TIMED_OUT && !ccp_agent_silent();
	ccp_set_mode(sk, f, agent_decides ? CCP_MODE_AGENT : CCP_MODE_FALLBACK);
	/*
	 * The end of an episode reduced in step: its target, as tcp_end_cwnd_reduction() sets
	 * ssthresh (before the fallback grows from it).
	 */
	if (f->reducing && !ccp_reduces_in_step(sk, f)) {
		f->reducing = 0;
		if (f->cwnd_target)
			tcp_snd_cwnd_set(tp, f->cwnd_target);
	}
	if (!agent_decides)
		ccp_fallback_control(sk, rs, f);
	if (ccp_reduces_in_step(sk, f)) {
		u32 target = f->cwnd_target ? f->cwnd_target : cwnd_before;

		ccp_reduce_cwnd(sk, f, rs, target, cwnd_before, una_advanced);
	}
	if (!agent_decides || !f->agent_rate)
		ccp_default_pacing(sk);
}

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
static void ccp_cong_control(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
	ccp_on_ack(sk, rs);
}
#else
static void ccp_cong_control(struct sock *sk, const struct rate_sample *rs)
{
	ccp_on_ack(sk, rs);
}
#endif

/* May run in softirq (passive open): nothing here sleeps. */
static void ccp_init_flow(struct sock *sk)
{
	struct ccp_flow *f = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	const struct inet_sock *inet = inet_sk(sk);
	struct ccp_datapath_info info = {
		.init_cwnd = tcp_snd_cwnd(tp) * tp->mss_cache,
		.mss = tp->mss_cache,
		.src_ip = inet->inet_saddr,
		.src_port = inet->inet_sport,
		.dst_ip = inet->inet_daddr,
		.dst_port = inet->inet_dport,
		.congAlg = "ccp",
	};
	struct ccp_connection *conn;

	ccp_describe_addresses(sk, &info);
	memset(f, 0, sizeof(*f));
	ccp_ack_marks_now(sk, &f->marks);
	/*
	 * A new flow runs the fallback (in slow start) until its program arrives; that is not an
	 * agent failing it, so it is not counted in fallback_entries.
	 */
	f->mode = CCP_MODE_FALLBACK;
	f->initialised = 1;

	/*
	 * libccp claims a free slot (compare-and-swap), sets it up and queues CREATE; the slot
	 * goes live before the CREATE goes out, so the agent's answer finds it.
	 */
	local_bh_disable();
	conn = ccp_connection_start(&ccp_tables.dp, sk, &info);
	if (conn) {
		struct ccp_slot *slot = ccp_slot(conn->index);

		spin_lock(&slot->lock);
		slot->sk = sk;
		spin_unlock(&slot->lock);
		f->sid = conn->index;
		atomic_inc(&ccp_counters.active_flows);
	}
	ccp_flush();
	local_bh_enable();
	if (conn)
		return;
	atomic_inc(&ccp_counters.table_full);
	if (ccp_log_level() >= 1)
		pr_warn_ratelimited("ccp: flow table full (%u flows): new flows run in-kernel Reno\n",
				    ccp_max_flows());
}

static void ccp_release_flow(struct sock *sk)
{
	struct ccp_flow *f = inet_csk_ca(sk);
	struct ccp_slot *slot = ccp_slot(f->sid);
	bool mine;

	/* A socket switched to another congestion control does not stay internally paced by us. */
	if (f->agent_rate)
		cmpxchg(&sk->sk_pacing_status, SK_PACING_NEEDED, SK_PACING_NONE);
	if (!slot)
		return;
	/* The slot leaves service under its lock; libccp frees it (and sends the close) after. */
	local_bh_disable();
	spin_lock(&slot->lock);
	mine = slot->sk == sk;
	if (mine)
		slot->sk = NULL;
	spin_unlock(&slot->lock);
	if (mine) {
		ccp_connection_free(&ccp_tables.dp, f->sid);
		atomic_dec(&ccp_counters.active_flows);
	}
	ccp_flush();
	/* After the flush: a report still in this CPU's outbox would outlive the flow's queue. */
	if (mine)
		ccp_ipc_forget(f->sid);
	local_bh_enable();
	f->sid = 0;
}

/*
 * The kernel found its last loss reduction spurious (a DSACK, a timestamp, or the holes acked
 * before their retransmission) and restores the window from before it. The agent, whose
 * controllers answered the losses, is told at the next ACK (ccp_fill_primitives()) and takes
 * its own reduction back; in the fallback the restored window stands (Reno's undo).
 */
static u32 ccp_undo_cwnd(struct sock *sk)
{
	struct ccp_flow *f = inet_csk_ca(sk);

	if (f->undos < U8_MAX)
		f->undos++;
	return tcp_reno_undo_cwnd(sk);
}

static void ccp_set_state(struct sock *sk, u8 new_state)
{
	struct ccp_flow *f = inet_csk_ca(sk);

	/* A timeout: the kernel's loss window (one packet) stands until the agent answers it. */
	if (new_state == TCP_CA_Loss) {
		f->timeout_pending = 1;
		f->cwnd_target = 0;
	}
}

/*
 * Restricted (no TCP_CONG_NON_RESTRICTED): only CAP_NET_ADMIN may pick "ccp", since each flow
 * takes one of the module's max_flows slots and reaches the agent (issue 16, K7). An admin lets
 * everyone use it the usual way: add it to net.ipv4.tcp_allowed_congestion_control.
 */
static struct tcp_congestion_ops ccp_ops __read_mostly = {
	.name = "ccp",
	.owner = THIS_MODULE,
	.init = ccp_init_flow,
	.release = ccp_release_flow,
	.ssthresh = tcp_reno_ssthresh,
	.undo_cwnd = ccp_undo_cwnd,
	.set_state = ccp_set_state,
	.cong_control = ccp_cong_control,
};

static int __init ccp_module_init(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct ccp_flow) > ICSK_CA_PRIV_SIZE);
	ret = ccp_datapath_init(ccp_set_cwnd, ccp_set_rate);
	if (ret)
		return ret;
	/*
	 * The transport goes live only now: an agent message that arrived while libccp's program
	 * table did not exist yet dereferenced NULL (issue 16, K2).
	 */
	ret = ccp_agent_start();
	if (ret)
		goto err_datapath;
	ret = tcp_register_congestion_control(&ccp_ops);
	if (ret)
		goto err_agent;
	pr_info("ccp: registered (max_flows %u, fallback after %u ms)\n", ccp_max_flows(),
		ccp_fallback_timeout_ms());
	return 0;

err_agent:
	ccp_agent_stop();
err_datapath:
	ccp_datapath_exit();
	return ret;
}

static void __exit ccp_module_exit(void)
{
	/* Sockets hold a module reference while they use "ccp", so no flow is left here. */
	tcp_unregister_congestion_control(&ccp_ops);
	ccp_agent_stop();
	ccp_datapath_exit();
	pr_info("ccp: unregistered\n");
}

module_init(ccp_module_init);
module_exit(ccp_module_exit);

MODULE_AUTHOR("polycc");
MODULE_DESCRIPTION("polycc CCP datapath: agent-controlled TCP congestion control over netlink");
MODULE_LICENSE("GPL");
