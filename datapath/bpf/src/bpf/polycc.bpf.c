// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * polycc_bpf: polycc's congestion-control datapath as a BPF tcp_congestion_ops, the same
 * contract as ccp.ko without a kernel module.
 *
 * Model. On every ACK (cong_control, so the kernel's own cwnd logic stays out of the way, as for
 * BBR) the flow's measurements are folded into its report registers; at the cadence the agent
 * asked for (once per RTT, or every interval_us) and at once on a loss, a timeout or the per-ACK
 * growth's delay exit (ack_growth in the algorithms crate), the report
 * goes to the agent through the `events` ring buffer. The agent answers by writing the flow's
 * entry in the `ctl` hash map (key: the flow id this program allocated), which the next ACK
 * applies: cwnd (bytes -> packets with the flow's MSS) and pacing rate.
 *
 *   ACK --> fold --(deadline, loss, RTO)--> ringbuf --> agent
 *   agent --> ctl[sid] = {seq+1, cwnd, rate, ...} --> next ACK applies
 *
 * Fallback. A flow runs Reno here (never frozen) while the agent has not answered its CREATE,
 * or when a report stayed unanswered for fallback_timeout_ns (the agent is gone, stopped or
 * overloaded; its ring buffer full). Any new ctl entry from the agent (a new seq) takes the
 * flow back. When the agent exits its BPF link closes and the ops leave the kernel's list:
 * live flows keep this code (the kernel holds a reference to the struct_ops map) and run the
 * fallback until they close; new flows cannot pick polycc until an agent registers it again.
 *
 * Per-flow state lives in socket storage (BPF-private, freed with the socket); the agent's
 * per-flow control lives in a hash map because userspace cannot address a foreign socket's
 * storage. Time is bpf_ktime_get_ns() (monotonic, the clock userspace reads as
 * CLOCK_MONOTONIC).
 */
#include "vmlinux_min.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "polycc.h"
#include "ccp_prr.h"

char _license[] SEC("license") = "Dual BSD/GPL";

/* Flows the agent can control at once (ctl entries); later flows run the fallback. */
#define MAX_FLOWS 65536
/* Ring buffer bytes: ~20,000 events of 200 B, ~20 ms of reports at 1000 flows x 1/ms. */
#define RINGBUF_BYTES (4 << 20)
/* The report clock's "+infinity": no RTT sample yet (program.rs NO_RTT_SAMPLE_US). */
#define NO_RTT_SAMPLE_US 0xffffffffULL
/* ACKs at most this far apart belong to one ACK train (program.rs ACK_TRAIN_GAP_US). */
#define ACK_TRAIN_GAP_US 2000
#define NSEC_PER_USEC 1000ULL
#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL
#define RATE_UNPACED 0xffffffffU

/* Set by the loader before load (rodata): agent silence after which flows fall back. */
const volatile __u64 fallback_timeout_ns = 1000000000ULL;
/* Set by the loader: no timed report sooner than this after the last (loss and RTO reports are
 * not held). On loopback an RTT is 20-50 us: once per RTT is 20,000-50,000 reports a second per
 * flow, each one waking the agent. */
const volatile __u64 min_report_us;

/* While in the fallback (or never answered), a flow announces itself (CREATE) again this often, so an agent that
 * restarted (its maps pinned, the same `ctl` and `events`) adopts it, as ccp.ko's READY does. */
#define RECREATE_NS 1000000000ULL

/* Counters the agent reads (bss, per loaded instance). */
__u64 stat_created;
__u64 stat_freed;
__u64 stat_reports;
__u64 stat_ringbuf_drops;
__u64 stat_fallbacks;
__u64 stat_resumes;
__u64 stat_no_storage;

struct flow {
	__u32 sid;
	__u32 mode;		/* enum polycc_mode */
	__u64 created_ns;
	/* The agent's control, as last applied. */
	__u64 ctl_seq;
	__u32 cwnd_bytes;	/* grows per ACK up to grow_cap_bytes */
	__u32 rate_bytes_per_sec;
	__u32 interval_us;
	__u32 grow_cap_bytes;
	__u32 grow_rtt_us;	/* the delay exit's threshold; 0: none (disarmed once it fires) */
	__u32 grow_cap_after_bytes;
	/* The delay exit's round (ack_growth::GrowthState): its RTT samples, the minimum of its
	 * first ones, its start (us into the report interval) and its first sample, how long it
	 * lasts (0: none yet). */
	__u32 grow_min_us;
	__u32 grow_n;
	__u64 round_start_us;
	__u64 round_rtt_us;
	__u64 pending_since_ns;	/* oldest unanswered report; 0: none */
	__u64 last_create_ns;	/* last CREATE sent */
	/* The current report interval. */
	__u64 interval_start_ns;
	__u64 last_ack_us;
	__u64 train_start_us;
	__u64 rtt_us;		/* latest sample, NO_RTT_SAMPLE_US before the first */
	__u32 app_limited;
	__u32 prev_una;
	__u32 prev_delivered_ce;
	__u32 prev_lost;	/* tp->lost at the previous ACK */
	/* Fallback (Reno) bookkeeping. */
	__u32 recovery_end;	/* snd_nxt at the last reduction */
	__u32 prior_cwnd;	/* cwnd before the last reduction, for undo */
	/* The kernel's loss episode, for reduce_cwnd(): its prior_cwnd when we saw it start, and
	 * what the ACKs have delivered since (the kernel counts prr_delivered only for congestion
	 * controls without cong_control). */
	__u32 reduce_prior_cwnd;
	__u32 prr_delivered;
	__u8 reducing;
	__u8 in_recovery;
	__u8 timeout_pending;	/* set_state(TCP_CA_Loss) since the last ACK */
	__u8 undo_pending;	/* undo_cwnd since the last ACK: report at once */
	/* An IPv6 flow's addresses, read once at init (not a v4-mapped peer: that is IPv4). */
	__u8 v6;
	__u8 saddr6[16];
	__u8 daddr6[16];
	__u8 paced;
	__u8 pad;
	__u64 f[F_COUNT];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct polycc_ctl);
} ctl SEC(".maps");

/* The flow id counter: a map, not bss, so that instances sharing pinned maps never reuse ids. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} events SEC(".maps");

static __always_inline struct tcp_sock *tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline __u32 flow_mss(const struct tcp_sock *tp)
{
	__u32 mss = tp->mss_cache;

	return mss ? mss : 1;
}

static __always_inline void reset_interval(struct flow *st, __u64 now_ns)
{
	int i;

	for (i = 0; i < F_COUNT; i++)
		st->f[i] = 0;
	st->f[F_RTT_MIN_US] = NO_RTT_SAMPLE_US;
	st->interval_start_ns = now_ns;
	st->last_ack_us = 0;
	st->app_limited = 0;
	st->grow_min_us = 0xffffffff;
	st->grow_n = 0;
	st->round_start_us = 0;
	st->round_rtt_us = 0;
}

static __always_inline struct polycc_event *event_reserve(__u32 kind, const struct flow *st,
							  __u32 mss)
{
	struct polycc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&stat_ringbuf_drops, 1);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->sid = st->sid;
	e->mss = mss;
	e->mode = st->mode;
	return e;
}

#define AF_INET6 10

/* ::ffff:a.b.c.d, an IPv4 peer of a dual-stack socket: reported as IPv4. */
static __always_inline bool v4_mapped(const struct in6_addr *a)
{
	return a->in6_u.u6_addr32[0] == 0 && a->in6_u.u6_addr32[1] == 0 &&
	       a->in6_u.u6_addr32[2] == bpf_htonl(0xffff);
}

static __always_inline void send_create(struct sock *sk, const struct flow *st)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 mss = flow_mss(tp);
	struct polycc_event *e = event_reserve(POLYCC_EV_CREATE, st, mss);

	if (!e)
		return;
	e->init_cwnd_bytes = tp->snd_cwnd * mss;
	if (tp->delivered > 1) {	/* data beyond the SYN: an adopted flow, not a new one */
		__u32 min_rtt = tp->rtt_min.s[0].v;

		e->fields[ADOPT_PRESENT] = 1;
		if (tp->snd_cwnd >= tp->snd_ssthresh)
			e->fields[ADOPT_SSTHRESH] = (__u64)tp->snd_ssthresh * mss;
		e->fields[ADOPT_SRTT_US] = tp->srtt_us >> 3;
		e->fields[ADOPT_MIN_RTT_US] = min_rtt == ~0U ? 0 : min_rtt;
		e->fields[ADOPT_RATE] = st->paced ? st->rate_bytes_per_sec : 0;
	}
	if (st->v6) {
		__builtin_memcpy(e->saddr6, st->saddr6, 16);
		__builtin_memcpy(e->daddr6, st->daddr6, 16);
	} else {
		e->saddr = sk->__sk_common.skc_rcv_saddr;
		e->daddr = sk->__sk_common.skc_daddr;
	}
	e->sport = bpf_htons(sk->__sk_common.skc_num);
	e->dport = sk->__sk_common.skc_dport;
	e->t_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
}

SEC("struct_ops")
void BPF_PROG(polycc_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct flow *st;
	__u64 now = bpf_ktime_get_ns();
	__u32 zero = 0;
	__u32 *next = bpf_map_lookup_elem(&sids, &zero);

	if (!next)
		return;
	st = bpf_sk_storage_get(&flows, sk, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		__sync_fetch_and_add(&stat_no_storage, 1);
		return;
	}
	st->sid = __sync_fetch_and_add(next, 1) + 1;
	st->mode = POLYCC_MODE_WAITING;
	st->created_ns = now;
	st->ctl_seq = 0;
	st->cwnd_bytes = 0;
	st->rate_bytes_per_sec = 0;
	st->interval_us = 0;
	st->grow_cap_bytes = 0;
	st->grow_rtt_us = 0;
	st->grow_cap_after_bytes = 0;
	st->pending_since_ns = 0;
	st->rtt_us = NO_RTT_SAMPLE_US;
	st->train_start_us = 0;
	st->prev_una = tp->snd_una;
	st->prev_delivered_ce = tp->delivered_ce;
	st->prev_lost = tp->lost;
	st->in_recovery = 0;
	st->prior_cwnd = 0;
	st->timeout_pending = 0;
	st->paced = 0;
	st->v6 = sk->__sk_common.skc_family == AF_INET6 &&
		 !v4_mapped(&sk->__sk_common.skc_v6_daddr);
	if (st->v6) {
		__builtin_memcpy(st->saddr6, sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8, 16);
		__builtin_memcpy(st->daddr6, sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8, 16);
	}
	reset_interval(st, now);
	__sync_fetch_and_add(&stat_created, 1);
	st->last_create_ns = now;
	send_create(sk, st);
}

SEC("struct_ops")
void BPF_PROG(polycc_release, struct sock *sk)
{
	struct flow *st = bpf_sk_storage_get(&flows, sk, NULL, 0);
	struct polycc_event *e;

	if (!st)
		return;
	bpf_map_delete_elem(&ctl, &st->sid);
	__sync_fetch_and_add(&stat_freed, 1);
	e = event_reserve(POLYCC_EV_FREE, st, flow_mss(tcp_sk(sk)));
	if (!e)
		return;
	e->t_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
}

/* Entering recovery: the value the kernel records as ssthresh. Agent flows ignore it (their
 * cwnd is the agent's); fallback flows halve, as Reno. */
SEC("struct_ops")
__u32 BPF_PROG(polycc_ssthresh, struct sock *sk)
{
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	return cwnd > 4 ? cwnd >> 1 : 2;
}

/* The kernel found the last loss spurious (DSACK, reordering). Fallback flows take back their
 * reduction, as tcp_reno_undo_cwnd(): without it, veth's reordering halved a fallback flow
 * on every episode and held it at 2 packets. Agent flows: the agent's window stands until the
 * agent, told in the events register at once, takes its own reduction back. */
SEC("struct_ops")
__u32 BPF_PROG(polycc_undo_cwnd, struct sock *sk)
{
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;
	struct flow *st = bpf_sk_storage_get(&flows, sk, NULL, 0);

	if (!st)
		return cwnd;
	st->f[F_EVENTS] += 1ULL << UNDO_SHIFT;
	st->undo_pending = 1;
	if (st->mode == POLYCC_MODE_AGENT)
		return cwnd;
	st->in_recovery = 0;
	return cwnd > st->prior_cwnd ? cwnd : st->prior_cwnd;
}

SEC("struct_ops")
void BPF_PROG(polycc_set_state, struct sock *sk, __u8 new_state)
{
	struct flow *st;

	if (new_state != TCP_CA_Loss)
		return;
	st = bpf_sk_storage_get(&flows, sk, NULL, 0);
	if (st)
		st->timeout_pending = 1;
}

/*
 * Whether this ACK's RTT sample is the kernel's whole-millisecond fallback from the timestamp
 * option (Karn's rule left no precise one: tcp_ack_update_rtt() took now - TSecr in TSval
 * units), as ccp.ko's ccp_rtt_from_ms_tsval() asks: up to 1 ms under the path's RTT, it set
 * minimum-RTT filters too low after every recovery on a lossy link (docs/datapath.md, "RTT
 * samples"). With usec TSvals the formula does not match and nothing is dropped.
 */
static __always_inline bool rtt_from_ms_tsval(struct tcp_sock *tp, long rtt_us)
{
	__u32 tsecr = tp->rx_opt.rcv_tsecr;
	__u32 delta;

	/*
	 * Not saw_tstamp, the kernel's other condition: the verifier refuses that bitfield's read
	 * (6.18: "access beyond struct tcp_sock"). Without it an ACK with no timestamp leaves the
	 * previous TSecr here, a difference longer than this ACK's sample: no match.
	 */
	if (!tsecr)
		return false;
	delta = (__u32)(tp->tcp_mstamp / USEC_PER_MSEC) - tsecr;
	if (delta >= 0x7fffffffU / USEC_PER_MSEC)
		return false;
	return rtt_us == (long)((delta ? delta : 1) * USEC_PER_MSEC);
}

/* Per-ACK folding: the union program's `when true` and RTT clauses (agent/src/program.rs). */
/* The kernel's tcp_packets_in_flight(): sent, less what is SACKed or marked lost, plus what was
 * retransmitted. */
static __always_inline __u32 packets_in_flight(const struct tcp_sock *tp)
{
	__u32 out = tp->packets_out;
	__u32 left = tp->sacked_out + tp->lost_out;

	return (out > left ? out - left : 0) + tp->retrans_out;
}

static __always_inline void fold(struct sock *sk, struct flow *st, const struct rate_sample *rs,
				 __u32 mss, __u64 now_us, __u64 micros, __u64 *delivered_bytes)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 acked = rs->acked_sacked;
	__u32 una = tp->snd_una;
	__u32 cum_pkts = (una - st->prev_una + mss - 1) / mss;
	__u32 sacked = acked > cum_pkts ? acked - cum_pkts : 0;
	__u64 inflight = packets_in_flight(tp);
	__u32 ce = tp->delivered_ce;
	__u32 lost = tp->lost;
	__s32 unsent = tp->write_seq - tp->snd_nxt;
	__u64 deadline;
	long rtt = rs->rtt_us;

	if (rtt > 0 && rtt_from_ms_tsval(tp, rtt))
		rtt = 0; /* no sample: the RTT fields stay as they are */

	st->prev_una = una;
	*delivered_bytes = (__u64)acked * mss;
	st->f[F_ACKED_BYTES] += *delivered_bytes;
	st->f[F_ACKED_PACKETS] += acked;
	st->f[F_SACKED_PACKETS] += sacked;
	/* Marked lost since the previous ACK, as ccp.ko counts them: rs->losses misses what RACK's
	 * reordering timer marks between ACKs. */
	st->f[F_LOST_MARKED] += lost - st->prev_lost;
	st->f[F_LOST_MARKED] += (__u64)(ce - st->prev_delivered_ce) << CE_SHIFT;
	if (st->timeout_pending)
		st->f[F_EVENTS] |= EVENT_TIMEOUT;
	if (rs->delivered > 0 && rs->interval_us > 0) {
		__u64 rate = (__u64)rs->delivered * mss * USEC_PER_SEC / (__u64)rs->interval_us;

		if (rate > st->f[F_DELIVERY_RATE])
			st->f[F_DELIVERY_RATE] = rate;
	}
	st->f[F_INFLIGHT_BYTES] = inflight * mss;
	/* Written but not yet sent, as ccp.ko reports it (write_seq - snd_nxt): the agent's
	 * app-limited rule asks whether anything waits to be sent. sk_wmem_queued also counts
	 * what is in flight, so an app-limited flow never read as one until it went idle. */
	st->f[F_PENDING_BYTES] = unsent > 0 ? unsent : 0;
	st->prev_delivered_ce = ce;
	st->prev_lost = lost;
	if (rs->is_app_limited)
		st->app_limited = 1;
	if (now_us > st->last_ack_us + ACK_TRAIN_GAP_US)
		st->train_start_us = now_us;
	st->last_ack_us = now_us;
	if (now_us - st->train_start_us > st->f[F_ACK_TRAIN_US])
		st->f[F_ACK_TRAIN_US] = now_us - st->train_start_us;

	deadline = st->interval_us ? st->interval_us : st->rtt_us;
	if (rtt > 0) {
		st->rtt_us = rtt;
		st->f[F_RTT_LAST_US] = rtt;
		if ((__u64)rtt < st->f[F_RTT_MIN_US])
			st->f[F_RTT_MIN_US] = rtt;
		st->f[F_RTT_SUM_US] += rtt;
		st->f[F_RTT_SAMPLES] += 1;
		if (micros * 2 < deadline) {
			st->f[F_RTT_FIRST_SUM_US] += rtt;
			st->f[F_RTT_FIRST_SAMPLES] += 1;
		}
		if (st->round_rtt_us && micros > st->round_start_us &&
		    micros - st->round_start_us > st->round_rtt_us) {
			st->grow_n = 0;
			st->grow_min_us = 0xffffffff;
			st->round_start_us = micros;
		}
		if (st->grow_n == 0)
			st->round_rtt_us = rtt;
		st->grow_n += 1;
		if (st->grow_n <= DELAY_EXIT_SAMPLES && (__u64)rtt < st->grow_min_us)
			st->grow_min_us = rtt;
	}
}

/* A new ctl entry from the agent: take it, and the flow is the agent's again. */
static __always_inline void take_control(struct flow *st)
{
	struct polycc_ctl *c = bpf_map_lookup_elem(&ctl, &st->sid);

	if (!c || c->seq == st->ctl_seq)
		return;
	st->ctl_seq = c->seq;
	if (c->cwnd_bytes)
		st->cwnd_bytes = c->cwnd_bytes;
	if (c->rate_bytes_per_sec)
		st->rate_bytes_per_sec = c->rate_bytes_per_sec;
	st->interval_us = c->interval_us;
	st->grow_cap_bytes = c->grow_cap_bytes;
	st->grow_rtt_us = c->grow_rtt_us == 0xffffffff ? 0 : c->grow_rtt_us;
	st->grow_cap_after_bytes = c->grow_cap_after_bytes;
	st->pending_since_ns = 0;
	if (st->mode == POLYCC_MODE_FALLBACK)
		__sync_fetch_and_add(&stat_resumes, 1);
	st->mode = POLYCC_MODE_AGENT;
}

/*
 * The growth's delay exit (ack_growth::GrowthState::on_rtt_sample), after this ACK's growth as
 * in the program: once the round's first DELAY_EXIT_SAMPLES RTT samples are all above the
 * threshold, the cap falls to the one after it, the exit disarms, and the caller reports now.
 */
static __always_inline bool delay_exit(struct flow *st)
{
	if (!st->grow_rtt_us || st->grow_n < DELAY_EXIT_SAMPLES ||
	    st->grow_min_us <= st->grow_rtt_us)
		return false;
	if (st->grow_cap_bytes > st->grow_cap_after_bytes)
		st->grow_cap_bytes = st->grow_cap_after_bytes;
	st->grow_rtt_us = 0;
	st->f[F_EVENTS] |= EVENT_DELAY_EXIT;
	return true;
}

/* Agent mode: the program's per-ACK slow start up to grow_cap (ack_growth), then enforce. */
static __always_inline void enforce(struct sock *sk, struct flow *st, __u32 mss,
				    __u64 delivered, bool lost)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 cwnd = st->cwnd_bytes;
	__u64 grow_to;
	__u32 pkts;

	if (lost)
		st->grow_cap_bytes = 0;
	grow_to = cwnd + delivered;
	if (grow_to > st->grow_cap_bytes)
		grow_to = st->grow_cap_bytes;
	if ((st->f[F_INFLIGHT_BYTES] + delivered) * 2 < cwnd + 1)
		grow_to = cwnd;
	if (grow_to > cwnd && grow_to <= 0xffffffffULL)
		st->cwnd_bytes = grow_to;
	pkts = st->cwnd_bytes / mss;
	tp->snd_cwnd = pkts ? pkts : 1;
	if (st->rate_bytes_per_sec && st->rate_bytes_per_sec != RATE_UNPACED) {
		if (sk->sk_pacing_status == SK_PACING_NONE)
			sk->sk_pacing_status = SK_PACING_NEEDED;
		sk->sk_pacing_rate = st->rate_bytes_per_sec;
		st->paced = 1;
	} else {
		st->paced = 0;
	}
}

/* An unpaced flow's sk_pacing_rate as tcp_update_pacing_rate() sets it for every other
 * congestion control: 200 % of cwnd/srtt in slow start, 120 % after. With cong_control the kernel
 * leaves it to us, and it still sizes TSO bursts (tcp_tso_autosize: rate >> 10 bytes per burst)
 * and drives fq: left at its value from connection setup, a loopback flow sent 3 KiB bursts
 * instead of 64 KiB ones and moved half of CUBIC's goodput. */
static __always_inline void tcp_like_pacing(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 rate = (__u64)tp->mss_cache * ((USEC_PER_SEC / 100) << 3);
	__u32 cwnd = tp->snd_cwnd;
	__u32 out = tp->packets_out;
	__u32 srtt = tp->srtt_us;
	unsigned long max = sk->sk_max_pacing_rate;

	rate *= cwnd < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= cwnd > out ? cwnd : out;
	if (srtt)
		rate /= srtt;
	sk->sk_pacing_rate = rate < max ? rate : max;
}

/* Fallback: Reno. Halve once per loss episode, slow start below ssthresh, +1 packet per window
 * above it; grows only while at least half the window is in flight (cwnd-limited). */
/*
 * The kernel's tcp_is_cwnd_limited(): the window was the limit over the last flight (the
 * stack's own record, kept as it sends), not the packets in flight when this ACK came: on
 * loopback the ACKs drain a flight faster than a loaded sender refills it, and a fallback
 * that judged by that held a window-limited flow at 12 packets for 20 s.
 */
static __always_inline bool cwnd_limited(const struct tcp_sock *tp)
{
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

static __always_inline void reno(struct sock *sk, struct flow *st, __u32 acked, bool lost)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd;

	st->paced = 0;
	if (st->in_recovery && (__s32)(tp->snd_una - st->recovery_end) >= 0) {
		st->in_recovery = 0;
		/* The episode's end: its target, as tcp_end_cwnd_reduction() sets ssthresh. */
		if (cwnd < tp->snd_ssthresh)
			cwnd = tp->snd_ssthresh;
		tp->snd_cwnd = cwnd;
	}
	if (lost && !st->in_recovery) {
		st->prior_cwnd = cwnd;
		cwnd = cwnd > 4 ? cwnd >> 1 : 2;
		tp->snd_cwnd = cwnd;
		tp->snd_ssthresh = cwnd;
		st->in_recovery = 1;
		st->recovery_end = tp->snd_nxt;
		return;
	}
	if (st->in_recovery || !cwnd_limited(tp) || !acked)
		return;
	if (cwnd < tp->snd_ssthresh) {
		cwnd += acked;
		if (cwnd > tp->snd_ssthresh)
			cwnd = tp->snd_ssthresh;
	} else {
		__u32 cnt = tp->snd_cwnd_cnt + acked;

		if (cnt >= cwnd) {
			cnt -= cwnd;
			cwnd += 1;
		}
		tp->snd_cwnd_cnt = cnt;
	}
	tp->snd_cwnd = cwnd;
}

/*
 * Proportional rate reduction (RFC 6937, PRR-SSRB) toward `target` packets while the kernel is in
 * a loss episode (Recovery, or CWR after an ECN echo), as tcp_cwnd_reduction() runs it for
 * congestion controls without cong_control: ccp.ko's ccp_reduce_cwnd() says why (a window cut at
 * once stops a small flow's ACK clock and its recovery ends in a timeout), ccp_prr.h (shared with
 * it) has the rule. `before` is the window at this ACK, kept when the ACK delivered nothing.
 */
static __always_inline void reduce_cwnd(struct sock *sk, struct flow *st, const struct rate_sample *rs,
					__u32 target, __u32 before, bool una_advanced)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct tcp_sock *tp = tcp_sk(sk);
	__u8 ca_state = BPF_CORE_READ_BITFIELD(icsk, icsk_ca_state);
	__u32 prior = tp->prior_cwnd, out = tp->prr_out, acked = rs->acked_sacked;
	__u32 inflight, cwnd;
	int sndcnt;

	/* Flows the agent paces keep its window, as in ccp.ko (ccp_reduces_in_step()). */
	if ((ca_state != TCP_CA_CWR && ca_state != TCP_CA_Recovery) || st->paced) {
		st->reducing = 0;
		return;
	}
	if (!st->reducing || st->reduce_prior_cwnd != prior) {
		st->reducing = 1;
		st->reduce_prior_cwnd = prior;
		st->prr_delivered = 0;
	}
	if (!acked || !prior) {
		tp->snd_cwnd = before;
		return;
	}
	st->prr_delivered += acked;
	inflight = packets_in_flight(tp);
	sndcnt = ccp_prr_sndcnt(target, inflight, prior, st->prr_delivered, out, acked,
				una_advanced && !rs->losses);
	cwnd = inflight + sndcnt;	/* sndcnt >= 0 */
	tp->snd_cwnd = cwnd ? cwnd : 1;
}

static __always_inline void report(struct flow *st, __u32 mss, __u64 now_ns, __u64 micros)
{
	struct polycc_event *e = event_reserve(POLYCC_EV_MEASURE, st, mss);
	int i;

	if (e) {
		st->f[F_INTERVAL_US] = micros;
		for (i = 0; i < F_COUNT; i++)
			e->fields[i] = st->f[i];
		e->app_limited = st->app_limited;
		e->t_ns = bpf_ktime_get_ns();
		bpf_ringbuf_submit(e, 0);
		__sync_fetch_and_add(&stat_reports, 1);
	}
	/* An undelivered report counts as unanswered too: a full ring buffer is a silent agent. */
	if (st->mode == POLYCC_MODE_AGENT && !st->pending_since_ns)
		st->pending_since_ns = now_ns;
	reset_interval(st, now_ns);
}

SEC("struct_ops")
void BPF_PROG(polycc_cong_control, struct sock *sk, __u32 ack, int flag,
	      const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct flow *st = bpf_sk_storage_get(&flows, sk, NULL, 0);
	__u64 now_ns = bpf_ktime_get_ns();
	__u64 now_us = now_ns / NSEC_PER_USEC;
	__u32 mss = flow_mss(tp);
	__u64 micros, delivered = 0, deadline;
	bool lost, marked, timeout, undone, exited = false;
	__u32 ce_before, lost_before, cwnd_before = tp->snd_cwnd, target;
	bool una_advanced;

	if (!st)
		return;
	una_advanced = tp->snd_una != st->prev_una;
	micros = (now_ns - st->interval_start_ns) / NSEC_PER_USEC;
	ce_before = st->prev_delivered_ce;
	lost_before = st->prev_lost;
	fold(sk, st, rs, mss, now_us, micros, &delivered);
	timeout = st->timeout_pending;
	st->timeout_pending = 0;
	undone = st->undo_pending;
	st->undo_pending = 0;
	/* An ECN mark (this ACK echoed one) is answered as a loss (RFC 3168 6.1.2): the growth
	 * stops, the fallback halves once per episode and the report goes now. With cong_control
	 * set the kernel's CWR state leaves the window to us. */
	marked = st->prev_delivered_ce != ce_before;
	lost = st->prev_lost != lost_before || timeout || marked;

	take_control(st);
	if (st->mode == POLYCC_MODE_AGENT && st->pending_since_ns &&
	    now_ns - st->pending_since_ns > fallback_timeout_ns) {
		st->mode = POLYCC_MODE_FALLBACK;
		st->in_recovery = 0;
		__sync_fetch_and_add(&stat_fallbacks, 1);
	}
	if (st->mode == POLYCC_MODE_AGENT) {
		/* A timeout: the kernel's loss window stands until the agent answers it, as in ccp.ko
		 * (ccp_set_state). Enforced at this ACK, the agent's last window went out at once as
		 * retransmissions into the path the timeout had found dead. */
		if (timeout)
			st->cwnd_bytes = (__u64)tp->snd_cwnd * mss;
		enforce(sk, st, mss, delivered, lost);
		exited = delay_exit(st);
		target = tp->snd_cwnd;
	} else {
		reno(sk, st, rs->acked_sacked, lost);
		target = st->in_recovery ? tp->snd_ssthresh : tp->snd_cwnd;
	}
	reduce_cwnd(sk, st, rs, target, cwnd_before, una_advanced);
	/* The kernel's rate for an unpaced flow, in the fallback too (reno() unpaces it): kept at
	 * the agent's last rate, a fallback flow stayed at whatever the agent had set (a flow held
	 * at 2 MB/s moved 2 MB/s while its window grew), and an unpaced one at the rate of its last
	 * agent window, since TSQ and TSO sizing follow sk_pacing_rate (veth: 3.8 Gbit/s against
	 * in-kernel Reno's 10-36; a_fallback_flow_paces_by_its_own_window_not_the_agents_last_rate). */
	if (!st->paced)
		tcp_like_pacing(sk);

	deadline = st->interval_us ? st->interval_us : st->rtt_us;
	if (deadline < min_report_us)
		deadline = min_report_us;
	if (lost || exited || undone || micros > deadline) {
		if (st->mode != POLYCC_MODE_AGENT && now_ns - st->last_create_ns > RECREATE_NS) {
			st->last_create_ns = now_ns;
			send_create(sk, st);
		}
		report(st, mss, now_ns, micros);
	}
}

SEC(".struct_ops.link")
struct tcp_congestion_ops polycc_ops = {
	.init = (void *)polycc_init,
	.release = (void *)polycc_release,
	.ssthresh = (void *)polycc_ssthresh,
	.undo_cwnd = (void *)polycc_undo_cwnd,
	.set_state = (void *)polycc_set_state,
	.cong_control = (void *)polycc_cong_control,
	.name = "polycc_bpf",
};
