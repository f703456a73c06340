// SPDX-License-Identifier: GPL-2.0
/*
 * ccp: polycc's TCP congestion control datapath. It runs libccp (the CCP datapath library) per
 * flow and talks to the polycc-portus agent over netlink, exactly as portus 0.9 expects.
 *
 * Model. On every ACK (loss-only ACKs too) the flow's measurements become libccp primitives and
 * the flow's datapath program runs; the program decides when to report, and the agent answers
 * with cwnd and rate updates that libccp applies through ccp_set_cwnd() and ccp_set_rate().
 *
 *   ACK --> primitives --> ccp_invoke() --(report)--> netlink group 22 --> agent
 *   agent --> netlink unicast --> validate --> ccp_read_msg() --(staged)--> next ACK applies
 *
 * Liveness is per agent, not per silence (issue 16, K3/K4). The agent is the netlink socket
 * that last sent us a message; the module holds a reference to it and knows it is:
 *   - gone at once when that socket is released (netlink's NETLINK_URELEASE notifier: the agent
 *     exited or was killed): every flow's program is dropped and the flows run the fallback;
 *   - hung when messages wait unread in its receive queue for fallback_timeout_ms (the queue
 *     never shrank or emptied meanwhile, and the agent sent nothing): e.g. SIGSTOP. Its flows
 *     run the fallback, keep their programs, and return to the agent when it reads again;
 *   - alive otherwise, however long it says nothing: a live agent that sends nothing on a flow
 *     (a portus algorithm in loss recovery, or one that has nothing to change) keeps the flow
 *     at what it installed. Reports need no answer.
 *
 * Fallback. A flow runs Reno growth inside the kernel, from its current window in congestion
 * avoidance, instead of freezing when: no agent is known, or it hangs (above); libccp could not
 * deliver a message and nothing came back for fallback_timeout_ms; the flow has no program
 * (its CREATE is unanswered, or its agent went away); or the flow table is full.
 *
 * READY goes only to a new agent: while no agent is known the module announces itself once a
 * second, and a known agent, quiet or hung, never gets one (an agent drops a datapath's flows
 * on READY). A message from a new port id is a new agent: the program table is reset and every
 * live flow re-sends CREATE, so it adopts them. A CREATE sent for a flow that already carries
 * data describes the flow as it is (ccp_describe_flow: window, ssthresh, RTTs, agent rate), so
 * an agent that adopts it continues from there, not from an initial window in slow start.
 *
 * Locking. One spinlock (taken with _bh) guards libccp's tables: the netlink input path stages
 * updates in process context, ACK processing applies them in softirq or process context, and
 * flows come and go from both. Nothing under the lock sleeps.
 *
 * Units. libccp's cwnd is bytes and its rate bytes/s, both u32 at the callbacks; the kernel's
 * cwnd is packets. Conversions use the flow's MSS (tp->mss_cache), never a constant. Time is
 * the monotonic clock in microseconds.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysfs.h>
#include <linux/version.h>
#include <linux/vmalloc.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "ccp.h"
#include "ccp_priv.h"
#include "ccp_error.h"
#include "ccp_nl.h"

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

/* libccp keeps at most this many installed programs. */
static const size_t max_programs = 16;
/* Smallest window set on the agent's behalf, in packets. */
static const u32 min_cwnd_pkts = 1;
/* While in fallback, announce the datapath to a returning agent this often. */
static const u64 ready_interval_us = USEC_PER_SEC;
/* Linux tcp_update_pacing_rate() ratios, in percent, for flows without an agent rate. */
static const u32 pacing_ss_ratio_pct = 200;
static const u32 pacing_ca_ratio_pct = 120;

/*
 * Report-to-update round trips go to a log-linear histogram: exact below 16 us, then 16 buckets
 * per power of two (each within 1/16 of its value) up to the largest u64, so no round trip a slow
 * guest sees is pinned at a cap (a 1-us linear histogram capped at 4095 us read p50 = 4095 under
 * TCG with one vCPU shared with iperf3).
 */
#define IPC_SUB_BITS 4
#define IPC_SUB_BUCKETS BIT(IPC_SUB_BITS)
#define IPC_RTT_BUCKETS ((64 - IPC_SUB_BITS + 1) * IPC_SUB_BUCKETS)
/* Unanswered reports remembered per flow; the agent answers each report with one update. */
#define IPC_PENDING_REPORTS 16

/* The agent answers a flow's reports in order: the k-th update answers the k-th report. */
struct ccp_ipc_timing {
	u64 sent_us[IPC_PENDING_REPORTS];
	u8 head;	/* oldest unanswered report */
	u8 count;
};

/* Why a flow runs the in-kernel fallback, for the per-flow state and logs. */
enum ccp_mode {
	CCP_MODE_AGENT = 0,	/* the agent's program decides */
	CCP_MODE_FALLBACK = 1,	/* in-kernel Reno growth */
};

/* Per-flow state in inet_csk_ca(sk). */
struct ccp_flow {
	u64 last_bytes_acked;	/* tp->bytes_acked at the previous ACK */
	u64 agent_rate;		/* last rate the agent set (B/s); 0: pace from cwnd */
	u32 fallback_episode_end; /* snd_nxt when the last fallback reduction happened */
	u16 sid;		/* libccp connection id; 0: no slot (table full) */
	u8 mode;		/* enum ccp_mode */
	u8 timeout_pending:1,	/* a retransmission timeout happened since the last invoke */
	   in_recovery:1,	/* fallback: cwnd already reduced for this loss episode */
	   rate_update_pending:1; /* the agent staged a Rate update for this invoke */
};

/* Global datapath state. */
static struct {
	spinlock_t lock;	/* guards everything below and libccp's tables */
	struct ccp_datapath dp;
	struct ccp_connection *conns;
	u32 agent_portid;	/* netlink port id of the agent; 0: none known */
	struct sock *agent_sk;	/* its socket, referenced while it is the agent */
	u64 last_rx_us;		/* when the agent last sent us a message */
	/*
	 * The agent's receive queue as last seen (bytes), and when the agent last showed it is
	 * reading: the queue empty or shorter than before, or a message from it.
	 */
	int agent_rmem;
	u64 agent_progress_us;
	u64 last_ready_us;	/* when READY was last (re)sent */
	u32 id;			/* datapath id announced in READY */
	bool initialized;
	struct ccp_ipc_timing *ipc_timing; /* per flow: send times of unanswered reports */
	u32 ipc_rtt_hist[IPC_RTT_BUCKETS]; /* report -> agent update round trips, log-linear */
} ccp_state;

static u64 ccp_now_us(void)
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

/*
 * Messages to the agent, counted by outcome: read-only under /sys/module/ccp/parameters/.
 * A failed send is a lost message (libccp does not retry reports): -ENOBUFS means the agent's
 * receive buffer was full, -ESRCH that no agent listened.
 */
static atomic_t sent_messages = ATOMIC_INIT(0);
static atomic_t send_enobufs = ATOMIC_INIT(0);
static atomic_t send_esrch = ATOMIC_INIT(0);
static atomic_t send_other_errors = ATOMIC_INIT(0);
/* Times a flow left the agent's control for the fallback, and READY re-announcements sent. */
static atomic_t fallback_entries = ATOMIC_INIT(0);
static atomic_t ready_sent = ATOMIC_INIT(0);
static atomic_t agents_gone = ATOMIC_INIT(0);
/* Flows holding a libccp slot (and its per-flow state): back to 0 once they are gone. */
static atomic_t active_flows = ATOMIC_INIT(0);

static int ccp_get_atomic(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read((atomic_t *)kp->arg));
}

/* Shared with ccp_nl.c: read-only atomic_t counters as module parameters. */
const struct kernel_param_ops ccp_atomic_ops = {
	.get = ccp_get_atomic,
};

module_param_cb(sent_messages, &ccp_atomic_ops, &sent_messages, 0444);
MODULE_PARM_DESC(sent_messages, "(read-only) messages delivered to the agent since load");
module_param_cb(send_enobufs, &ccp_atomic_ops, &send_enobufs, 0444);
MODULE_PARM_DESC(send_enobufs, "(read-only) messages lost: the agent's receive buffer was full");
module_param_cb(send_esrch, &ccp_atomic_ops, &send_esrch, 0444);
MODULE_PARM_DESC(send_esrch, "(read-only) messages lost: no agent listened");
module_param_cb(send_other_errors, &ccp_atomic_ops, &send_other_errors, 0444);
MODULE_PARM_DESC(send_other_errors, "(read-only) messages lost for another reason (-ENOMEM, ...)");
module_param_cb(fallback_entries, &ccp_atomic_ops, &fallback_entries, 0444);
MODULE_PARM_DESC(fallback_entries, "(read-only) times a flow switched from the agent to in-kernel Reno");
module_param_cb(ready_sent, &ccp_atomic_ops, &ready_sent, 0444);
MODULE_PARM_DESC(ready_sent, "(read-only) READY announcements sent since load");
module_param_cb(active_flows, &ccp_atomic_ops, &active_flows, 0444);
MODULE_PARM_DESC(active_flows, "(read-only) flows holding a libccp slot and its per-flow state");
module_param_cb(agents_gone, &ccp_atomic_ops, &agents_gone, 0444);
MODULE_PARM_DESC(agents_gone, "(read-only) agents whose netlink socket was released while they were the agent");

/* libccp -> agent. Called with ccp_state.lock held. */
static int ccp_send(struct ccp_datapath *dp, char *msg, int len)
{
	int ret = ccp_nl_send(msg, len);
	struct CcpMsgHeader hdr;
	u64 now;

	if (ret == -ENOTCONN)	/* before the socket exists (module init): nobody to tell */
		return 0;
	if (ret) {
		atomic_inc(ret == -ENOBUFS ? &send_enobufs :
			   ret == -ESRCH ? &send_esrch : &send_other_errors);
		return ret;
	}
	atomic_inc(&sent_messages);
	now = ccp_now_us();
	memcpy(&hdr, msg, sizeof(hdr));
	if (hdr.Type == MEASURE && hdr.SocketId >= 1 && hdr.SocketId <= max_flows) {
		struct ccp_ipc_timing *t = &ccp_state.ipc_timing[hdr.SocketId - 1];

		if (t->count == IPC_PENDING_REPORTS) {	/* agent far behind: forget the oldest */
			t->head = (t->head + 1) % IPC_PENDING_REPORTS;
			t->count--;
		}
		t->sent_us[(t->head + t->count) % IPC_PENDING_REPORTS] = now;
		t->count++;
	}
	return 0;
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

/* An agent update for a flow answers its oldest unanswered report: time that round trip. */
static void ccp_time_ipc_round_trip(const char *msg)
{
	struct ccp_ipc_timing *t;
	struct CcpMsgHeader hdr;
	u64 rtt;

	memcpy(&hdr, msg, sizeof(hdr));
	if (hdr.Type != UPDATE_FIELDS || hdr.SocketId < 1 || hdr.SocketId > max_flows)
		return;
	t = &ccp_state.ipc_timing[hdr.SocketId - 1];
	if (!t->count)
		return;
	rtt = ccp_state.last_rx_us - t->sent_us[t->head];
	t->head = (t->head + 1) % IPC_PENDING_REPORTS;
	t->count--;
	ccp_state.ipc_rtt_hist[ccp_ipc_bucket(rtt)]++;
}

/*
 * /sys/module/ccp/parameters/ipc_rtt_us: "count N p50 X p95 Y p99 Z" for report -> update round
 * trips through the agent since load or the last reset (write anything to reset).
 */
static int ccp_ipc_rtt_get(char *buf, const struct kernel_param *kp)
{
	static const unsigned int pct[] = { 50, 95, 99 };
	u64 count = 0, seen = 0, at[ARRAY_SIZE(pct)] = { 0 }, max = 0;
	u32 i, next = 0;

	spin_lock_bh(&ccp_state.lock);
	for (i = 0; i < IPC_RTT_BUCKETS; i++) {
		count += ccp_state.ipc_rtt_hist[i];
		if (ccp_state.ipc_rtt_hist[i])
			max = ccp_ipc_bucket_max_us(i);
	}
	for (i = 0; i < IPC_RTT_BUCKETS && next < ARRAY_SIZE(pct); i++) {
		seen += ccp_state.ipc_rtt_hist[i];
		while (next < ARRAY_SIZE(pct) && count && seen * 100 >= count * pct[next])
			at[next++] = ccp_ipc_bucket_max_us(i);
	}
	spin_unlock_bh(&ccp_state.lock);
	return sysfs_emit(buf, "count %llu p50 %llu p95 %llu p99 %llu max %llu\n",
			  count, at[0], at[1], at[2], max);
}

static int ccp_ipc_rtt_reset(const char *val, const struct kernel_param *kp)
{
	if (!ccp_state.initialized)
		return 0;
	spin_lock_bh(&ccp_state.lock);
	memset(ccp_state.ipc_rtt_hist, 0, sizeof(ccp_state.ipc_rtt_hist));
	spin_unlock_bh(&ccp_state.lock);
	return 0;
}

static const struct kernel_param_ops ccp_ipc_rtt_ops = {
	.get = ccp_ipc_rtt_get,
	.set = ccp_ipc_rtt_reset,
};
module_param_cb(ipc_rtt_us, &ccp_ipc_rtt_ops, NULL, 0644);
MODULE_PARM_DESC(ipc_rtt_us,
		 "report -> agent update round trips in us (within 1/16): count, p50, p95, p99, max (write to reset)");

static void ccp_set_cwnd(struct ccp_connection *conn, u32 cwnd_bytes)
{
	struct sock *sk = ccp_get_impl(conn);
	struct tcp_sock *tp = tcp_sk(sk);
	u32 mss = max_t(u32, tp->mss_cache, 1);
	u32 pkts = clamp_t(u32, cwnd_bytes / mss, min_cwnd_pkts, tp->snd_cwnd_clamp);

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
 * True when the agent has left messages unread in its socket for the timeout: its receive queue
 * never emptied nor shrank and it sent nothing meanwhile (SIGSTOP, a stuck event loop). A live
 * agent reads within milliseconds however little it has to say. Called with the lock held and
 * `now` read under it (an agent message handled on another CPU in between would otherwise be
 * "in the future" and wrap the unsigned difference).
 */
static bool ccp_agent_hung(u64 now)
{
	u64 timeout_us = (u64)fallback_timeout_ms * USEC_PER_MSEC;
	int rmem;

	if (!ccp_state.agent_sk)
		return false;
	rmem = atomic_read(&ccp_state.agent_sk->sk_rmem_alloc);
	if (rmem == 0 || rmem < ccp_state.agent_rmem)
		ccp_state.agent_progress_us = now;
	ccp_state.agent_rmem = rmem;
	return rmem > 0 && now > ccp_state.agent_progress_us &&
	       now - ccp_state.agent_progress_us > timeout_us;
}

/* True when no agent is known or the known one hangs: its flows run the fallback. */
static bool ccp_agent_silent(u64 now)
{
	return !ccp_state.agent_portid || ccp_agent_hung(now);
}

/*
 * Forget every flow's program and CREATE: libccp re-sends CREATE on the flow's next ACK and
 * the flow runs the fallback until the agent answers it. Called with the lock held, when the
 * agent's view of the flows is gone (a new agent, or a READY, which makes an agent drop them).
 */
static void ccp_reannounce_flows(void)
{
	size_t i;

	memset(ccp_state.dp.programs, 0, max_programs * sizeof(struct DatapathProgram));
	for (i = 0; i < max_flows; i++) {
		struct ccp_connection *conn = &ccp_state.conns[i];
		struct ccp_priv_state *state;

		if (!conn->index || !conn->state)
			continue;
		state = get_ccp_priv_state(conn);
		state->program_index = 0;
		state->staged_program_index = -1;
		state->sent_create = false;
		conn->last_create_msg_sent = 0;
		memset(&state->pending_update, 0, sizeof(state->pending_update));
		ccp_state.ipc_timing[i].count = 0;
	}
}

/*
 * The adoption record: a CREATE for a flow that carries data (re-announced to a new agent, or
 * first answered after running the fallback) carries its state after the NUL of its
 * congestion-control name (portus, and any reader that stops at the NUL, sees "ccp" as before).
 * Little-endian u32s at CCP_ADOPT_AT in congAlg: magic, ssthresh (bytes; U32_MAX: none, the flow
 * is in slow start), smoothed and minimum RTT (us; 0: none), the rate the agent set (bytes/s;
 * 0: unpaced). init_cwnd is the current window. agent/src/wire.rs reads it.
 */
#define CCP_ADOPT_AT 32
#define CCP_ADOPT_MAGIC 0x54504441u /* "ADPT" */

static void ccp_describe_flow(struct sock *sk, struct ccp_connection *conn)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	const struct ccp_flow *f = inet_csk_ca(sk);
	u32 mss = max_t(u32, tp->mss_cache, 1);
	u32 min_rtt = tcp_min_rtt(tp);
	__le32 rec[5];

	BUILD_BUG_ON(CCP_ADOPT_AT + sizeof(rec) > MAX_CONG_ALG_SIZE);
	rec[0] = cpu_to_le32(CCP_ADOPT_MAGIC);
	rec[1] = cpu_to_le32(tcp_in_slow_start(tp) ? U32_MAX :
			     min_t(u64, (u64)tp->snd_ssthresh * mss, U32_MAX - 1));
	rec[2] = cpu_to_le32(tp->srtt_us >> 3);
	rec[3] = cpu_to_le32(min_rtt == ~0U ? 0 : min_rtt);
	rec[4] = cpu_to_le32(min_t(u64, f->agent_rate, U32_MAX - 1));
	conn->flow_info.init_cwnd = min_t(u64, (u64)tcp_snd_cwnd(tp) * mss, U32_MAX);
	memcpy(conn->flow_info.congAlg + CCP_ADOPT_AT, rec, sizeof(rec));
}

/* Measurements of this ACK as libccp primitives. */
static void ccp_fill_primitives(struct sock *sk, const struct rate_sample *rs,
				struct ccp_flow *f, struct ccp_primitives *p)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 mss = max_t(u32, tp->mss_cache, 1);
	u64 acked = tp->bytes_acked - f->last_bytes_acked;
	u32 in_order_pkts = div_u64(acked, mss);
	u32 delivered = rs->acked_sacked;
	unsigned long pacing = READ_ONCE(sk->sk_pacing_rate);

	f->last_bytes_acked = tp->bytes_acked;
	memset(p, 0, sizeof(*p));
	p->bytes_acked = min_t(u64, acked, U32_MAX);
	p->packets_acked = in_order_pkts;
	if (delivered > in_order_pkts) {
		p->packets_misordered = delivered - in_order_pkts;
		p->bytes_misordered = p->packets_misordered * mss;
	}
	if (rs->delivered_ce > 0) {
		p->ecn_packets = rs->delivered_ce;
		p->ecn_bytes = rs->delivered_ce * mss;
	}
	p->lost_pkts_sample = rs->losses > 0 ? rs->losses : 0;
	p->was_timeout = f->timeout_pending;
	p->rtt_sample_us = rs->rtt_us > 0 ? rs->rtt_us : 0;
	if (rs->delivered > 0) {
		u64 bytes = (u64)rs->delivered * mss * USEC_PER_SEC;

		if (rs->snd_interval_us > 0)
			p->rate_outgoing = div_u64(bytes, rs->snd_interval_us);
		if (rs->rcv_interval_us > 0)
			p->rate_incoming = div_u64(bytes, rs->rcv_interval_us);
	}
	p->packets_in_flight = tcp_packets_in_flight(tp);
	p->bytes_in_flight = p->packets_in_flight * mss;
	p->snd_cwnd = min_t(u64, (u64)tcp_snd_cwnd(tp) * mss, U32_MAX);
	/* The register is u64 but libccp hands it back to set_rate_abs() as u32. */
	p->snd_rate = pacing == ~0UL ? 0 : min_t(u64, pacing, U32_MAX);
	p->bytes_pending = tp->write_seq - tp->snd_nxt;
}

/*
 * In-kernel Reno growth (tcp_cong.c), for flows the agent does not control. The kernel calls
 * .ssthresh when a loss episode starts; with .cong_control set it leaves the window to us, so
 * the reduction to ssthresh happens here, once per episode.
 */
static void ccp_fallback_control(struct sock *sk, const struct rate_sample *rs, struct ccp_flow *f)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u8 ca_state = inet_csk(sk)->icsk_ca_state;

	if (ca_state == TCP_CA_Recovery || ca_state == TCP_CA_CWR) {
		if (!f->in_recovery) {
			f->in_recovery = 1;
			f->fallback_episode_end = tp->snd_nxt;
			tcp_snd_cwnd_set(tp, max(tp->snd_ssthresh, 2U));
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
}

/*
 * Announce the datapath while no agent is known. Called with the lock held. An agent that
 * receives READY drops the datapath's flows and installs its program, so every live flow
 * re-sends CREATE (ccp_reannounce_flows) for the agent that just started to adopt.
 */
static void ccp_maybe_send_ready(u64 now)
{
	char msg[READY_MSG_SIZE];
	int len;

	if (now - ccp_state.last_ready_us < ready_interval_us)
		return;
	ccp_state.last_ready_us = now;
	len = write_ready_msg(msg, sizeof(msg), ccp_state.id);
	if (len > 0 && !ccp_send(&ccp_state.dp, msg, len)) {
		atomic_inc(&ready_sent);
		ccp_reannounce_flows();
	}
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
		atomic_inc(&fallback_entries);
		if (log_level >= 2)
			pr_info_ratelimited("ccp: flow %u: agent silent, in-kernel Reno from cwnd %u\n",
					    f->sid, tcp_snd_cwnd(tp));
	} else if (log_level >= 2) {
		pr_info_ratelimited("ccp: flow %u: agent control resumed\n", f->sid);
	}
}

/* One ACK: run the flow's program, or the fallback when the agent cannot decide. */
static void ccp_on_ack(struct sock *sk, const struct rate_sample *rs)
{
	struct ccp_flow *f = inet_csk_ca(sk);
	struct ccp_primitives prims;
	struct ccp_connection *conn;
	bool agent_decides = false;
	bool silent;
	u64 now;
	int ret = 0;

	ccp_fill_primitives(sk, rs, f, &prims);
	f->timeout_pending = 0;

	spin_lock_bh(&ccp_state.lock);
	now = ccp_now_us();	/* under the lock: see ccp_agent_silent() */
	conn = f->sid ? ccp_connection_lookup(&ccp_state.dp, f->sid) : NULL;
	if (conn && conn->impl == sk) {
		struct ccp_priv_state *state = get_ccp_priv_state(conn);

		conn->prims = prims;
		if (!state->sent_create && tcp_sk(sk)->delivered > 1)	/* data past the SYN */
			ccp_describe_flow(sk, conn);
		f->rate_update_pending = state->pending_update.impl_is_pending[RATE_REG];
		ret = ccp_invoke(conn);
		f->rate_update_pending = 0;
		conn->prims.was_timeout = false;
	}
	/* The invoke may have sent a report: that does not make the agent silent yet. */
	silent = ccp_agent_silent(now);
	if (conn && conn->impl == sk)
		agent_decides = ret != LIBCCP_FALLBACK_TIMED_OUT &&
				get_ccp_priv_state(conn)->program_index != 0 && !silent;
	/* Only while no agent is known: a READY makes a live agent forget its flows. */
	if (!ccp_state.agent_portid)
		ccp_maybe_send_ready(now);
	spin_unlock_bh(&ccp_state.lock);

	ccp_set_mode(sk, f, agent_decides ? CCP_MODE_AGENT : CCP_MODE_FALLBACK);
	if (!agent_decides)
		ccp_fallback_control(sk, rs, f);
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

	memset(f, 0, sizeof(*f));
	f->last_bytes_acked = tp->bytes_acked;
	/*
	 * A new flow runs the fallback (in slow start) until its program arrives; that is not an
	 * agent failing it, so it is not counted in fallback_entries.
	 */
	f->mode = CCP_MODE_FALLBACK;

	spin_lock_bh(&ccp_state.lock);
	conn = ccp_connection_start(&ccp_state.dp, sk, &info);
	if (conn) {
		f->sid = conn->index;
		atomic_inc(&active_flows);
	}
	spin_unlock_bh(&ccp_state.lock);
	if (!conn && log_level >= 1)
		pr_warn_ratelimited("ccp: flow table full (%u flows): new flows run in-kernel Reno\n",
				    max_flows);
}

static void ccp_release_flow(struct sock *sk)
{
	struct ccp_flow *f = inet_csk_ca(sk);
	struct ccp_connection *conn;

	/* A socket switched to another congestion control does not stay internally paced by us. */
	if (f->agent_rate)
		cmpxchg(&sk->sk_pacing_status, SK_PACING_NEEDED, SK_PACING_NONE);
	if (!f->sid)
		return;
	spin_lock_bh(&ccp_state.lock);
	conn = ccp_connection_lookup(&ccp_state.dp, f->sid);
	if (conn && conn->impl == sk) {
		ccp_connection_free(&ccp_state.dp, f->sid);
		ccp_state.ipc_timing[f->sid - 1].count = 0;
		atomic_dec(&active_flows);
	}
	spin_unlock_bh(&ccp_state.lock);
	f->sid = 0;
}

static void ccp_set_state(struct sock *sk, u8 new_state)
{
	struct ccp_flow *f = inet_csk_ca(sk);

	if (new_state == TCP_CA_Loss)
		f->timeout_pending = 1;
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
	.undo_cwnd = tcp_reno_undo_cwnd,
	.set_state = ccp_set_state,
	.cong_control = ccp_cong_control,
};

/*
 * Make `sk` (port `portid`, NULL/0: none) the agent. Called with the lock held; returns the
 * previous agent's socket for the caller to release outside the lock.
 */
static struct sock *ccp_set_agent(u32 portid, struct sock *sk, u64 now)
{
	struct sock *old = ccp_state.agent_sk;

	if (sk)
		sock_hold(sk);
	ccp_state.agent_sk = sk;
	ccp_state.agent_portid = portid;
	ccp_state.agent_rmem = 0;
	ccp_state.agent_progress_us = now;
	ccp_reannounce_flows();
	return old;
}

/*
 * Agent -> datapath, from the netlink input path (process context, message already validated;
 * `sk` is the sending socket). A new port id is a new agent: reset the program table and have
 * every live flow re-send CREATE, with its state, so the new agent adopts it.
 */
int ccp_handle_agent_msg(u32 portid, struct sock *sk, char *msg, int len)
{
	struct sock *old = NULL;
	int ret;

	spin_lock_bh(&ccp_state.lock);
	ccp_state.last_rx_us = ccp_now_us();
	if (portid != ccp_state.agent_portid) {
		if (ccp_state.agent_portid && log_level >= 1)
			pr_warn_ratelimited("ccp: new agent (port %u, was %u): programs reset, live flows re-announced\n",
					    portid, ccp_state.agent_portid);
		old = ccp_set_agent(portid, sk, ccp_state.last_rx_us);
	}
	ccp_state.agent_progress_us = ccp_state.last_rx_us;
	ccp_time_ipc_round_trip(msg);
	ret = ccp_read_msg(&ccp_state.dp, msg, len);
	spin_unlock_bh(&ccp_state.lock);
	if (old)
		sock_put(old);
	return ret;
}

/*
 * The agent's socket was released (it exited or was killed): its flows fall back at once,
 * from their current windows, and READY goes out for the next agent.
 */
static int ccp_netlink_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	const struct netlink_notify *n = ptr;
	struct sock *old = NULL;

	if (event != NETLINK_URELEASE || n->protocol != NETLINK_USERSOCK ||
	    !net_eq(n->net, &init_net))
		return NOTIFY_DONE;
	spin_lock_bh(&ccp_state.lock);
	if (ccp_state.agent_portid && n->portid == ccp_state.agent_portid) {
		if (log_level >= 1)
			pr_warn_ratelimited("ccp: agent (port %u) gone: flows run in-kernel Reno until the next one\n",
					    n->portid);
		old = ccp_set_agent(0, NULL, ccp_now_us());
		atomic_inc(&agents_gone);
	}
	spin_unlock_bh(&ccp_state.lock);
	if (old)
		sock_put(old);
	return NOTIFY_DONE;
}

static struct notifier_block ccp_netlink_notifier = {
	.notifier_call = ccp_netlink_event,
};

u32 ccp_max_flows(void)
{
	return max_flows;
}

unsigned int ccp_log_level(void)
{
	return log_level;
}

static int __init ccp_module_init(void)
{
	struct ccp_datapath *dp = &ccp_state.dp;
	int ret;

	BUILD_BUG_ON(sizeof(struct ccp_flow) > ICSK_CA_PRIV_SIZE);
	if (max_flows == 0 || max_flows > U16_MAX) {
		pr_err("ccp: max_flows=%u must be between 1 and %u\n", max_flows, U16_MAX);
		return -EINVAL;
	}
	if (fallback_timeout_ms == 0) {
		pr_err("ccp: fallback_timeout_ms must be positive\n");
		return -EINVAL;
	}

	spin_lock_init(&ccp_state.lock);
	ccp_state.conns = kvcalloc(max_flows, sizeof(*ccp_state.conns), GFP_KERNEL);
	ccp_state.ipc_timing = kvcalloc(max_flows, sizeof(*ccp_state.ipc_timing), GFP_KERNEL);
	if (!ccp_state.conns || !ccp_state.ipc_timing) {
		ret = -ENOMEM;
		goto err_free_conns;
	}

	*dp = (struct ccp_datapath) {
		.set_cwnd = ccp_set_cwnd,
		.set_rate_abs = ccp_set_rate,
		.send_msg = ccp_send,
		.log = ccp_log,
		.now = ccp_now_us,
		.since_usecs = ccp_since_us,
		.after_usecs = ccp_after_us,
		.max_connections = max_flows,
		.ccp_active_connections = ccp_state.conns,
		.fto_us = (u64)fallback_timeout_ms * USEC_PER_MSEC,
		.max_programs = max_programs,
	};
	ccp_state.id = get_random_u32();
	ret = ccp_init(dp, ccp_state.id);
	if (ret < 0) {
		pr_err("ccp: libccp init failed: %d\n", ret);
		ret = -EINVAL;
		goto err_nl;
	}
	if (!dp->programs) {
		ret = -ENOMEM;
		goto err_free_conns;
	}
	/*
	 * The socket goes live only now: an agent message that arrived while libccp's program
	 * table did not exist yet dereferenced NULL (issue 16, K2). libccp's READY from ccp_init()
	 * had no socket to go out on (ccp_send: nobody can be listening); this one does.
	 */
	ret = netlink_register_notifier(&ccp_netlink_notifier);
	if (ret)
		goto err_libccp;
	ret = ccp_nl_init();
	if (ret)
		goto err_notifier;
	spin_lock_bh(&ccp_state.lock);
	ccp_maybe_send_ready(ccp_now_us());
	spin_unlock_bh(&ccp_state.lock);

	ret = tcp_register_congestion_control(&ccp_ops);
	if (ret)
		goto err_nl;
	ccp_state.initialized = true;
	pr_info("ccp: registered (max_flows %u, fallback after %u ms)\n", max_flows,
		fallback_timeout_ms);
	return 0;

err_nl:
	ccp_nl_exit();
err_notifier:
	netlink_unregister_notifier(&ccp_netlink_notifier);
err_libccp:
	ccp_free(dp);
err_free_conns:
	kvfree(ccp_state.ipc_timing);
	kvfree(ccp_state.conns);
	return ret;
}

static void __exit ccp_module_exit(void)
{
	/* Sockets hold a module reference while they use "ccp", so no flow is left here. */
	tcp_unregister_congestion_control(&ccp_ops);
	ccp_nl_exit();
	netlink_unregister_notifier(&ccp_netlink_notifier);
	if (ccp_state.agent_sk)
		sock_put(ccp_state.agent_sk);
	ccp_free(&ccp_state.dp);
	kvfree(ccp_state.ipc_timing);
	kvfree(ccp_state.conns);
	pr_info("ccp: unregistered\n");
}

module_init(ccp_module_init);
module_exit(ccp_module_exit);

MODULE_AUTHOR("polycc");
MODULE_DESCRIPTION("polycc CCP datapath: agent-controlled TCP congestion control over netlink");
MODULE_LICENSE("GPL");
