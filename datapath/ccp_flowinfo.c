// SPDX-License-Identifier: GPL-2.0
/*
 * What ccp.ko tells the agent about a flow: its CREATE's description beyond the IPv4 fields
 * (IPv6 addresses, the state of a flow being adopted) and each ACK's measurements as libccp
 * primitives. Reads the socket; of the module's state it touches only one counter
 * (tsval_rtt_dropped).
 */
#include <linux/kernel.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "ccp.h"
#include "ccp_flowinfo.h"
#include "ccp_stats.h"

/*
 * What CREATE cannot say in its IPv4 fields goes after the NUL of the congestion-control name,
 * where portus, and any reader that stops at the NUL, still sees "ccp" (agent/src/wire.rs reads
 * it). In congAlg: the name in [0, 12); at 12 a little-endian u32, CCP_EXT_MAGIC with flags;
 * with CCP_EXT_IPV6 the source and destination IPv6 addresses (network order) in [16, 48), and
 * CREATE's IPv4 address fields 0; with CCP_EXT_STATE the flow's state as little-endian u32s in
 * [48, 64): ssthresh (bytes; U32_MAX: none, the flow is in slow start), smoothed and minimum
 * RTT (us; 0: none), the rate the agent set (bytes/s; 0: unpaced). init_cwnd is then the
 * current window: a flow that carries data is being adopted, and continues from there.
 */
#define CCP_EXT_AT 12
#define CCP_EXT_MAGIC 0x50430000u /* "PC" in the high half */
#define CCP_EXT_STATE 0x1u
#define CCP_EXT_IPV6 0x2u
/*
 * No data: this datapath puts the kernel's undos of its loss reductions in Ack.ecn_bytes
 * (ccp_fill_primitives()); agent/src/program.rs, "Undo".
 */
#define CCP_EXT_UNDO 0x4u
#define CCP_EXT_V6_SRC_AT 16
#define CCP_EXT_V6_DST_AT 32
#define CCP_EXT_STATE_AT 48

static void ccp_set_ext_flag(struct ccp_datapath_info *info, u32 flag)
{
	__le32 ext;

	memcpy(&ext, info->congAlg + CCP_EXT_AT, sizeof(ext));
	ext = cpu_to_le32(le32_to_cpu(ext) | CCP_EXT_MAGIC | flag);
	memcpy(info->congAlg + CCP_EXT_AT, &ext, sizeof(ext));
}

void ccp_describe_addresses(struct sock *sk, struct ccp_datapath_info *info)
{
	ccp_set_ext_flag(info, CCP_EXT_UNDO);
#if IS_ENABLED(CONFIG_IPV6)
	BUILD_BUG_ON(CCP_EXT_V6_DST_AT + sizeof(struct in6_addr) > CCP_EXT_STATE_AT);
	if (sk->sk_family != AF_INET6 || ipv6_addr_v4mapped(&sk->sk_v6_daddr))
		return;
	info->src_ip = 0;
	info->dst_ip = 0;
	memcpy(info->congAlg + CCP_EXT_V6_SRC_AT, &sk->sk_v6_rcv_saddr, sizeof(struct in6_addr));
	memcpy(info->congAlg + CCP_EXT_V6_DST_AT, &sk->sk_v6_daddr, sizeof(struct in6_addr));
	ccp_set_ext_flag(info, CCP_EXT_IPV6);
#endif
}

void ccp_describe_flow(struct sock *sk, struct ccp_connection *conn, u64 agent_rate)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 mss = max_t(u32, tp->mss_cache, 1);
	u32 min_rtt = tcp_min_rtt(tp);
	__le32 rec[4];

	BUILD_BUG_ON(CCP_EXT_STATE_AT + sizeof(rec) > MAX_CONG_ALG_SIZE);
	rec[0] = cpu_to_le32(tcp_in_slow_start(tp) ? U32_MAX :
			     min_t(u64, (u64)tp->snd_ssthresh * mss, U32_MAX - 1));
	rec[1] = cpu_to_le32(tp->srtt_us >> 3);
	rec[2] = cpu_to_le32(min_rtt == ~0U ? 0 : min_rtt);
	rec[3] = cpu_to_le32(min_t(u64, agent_rate, U32_MAX - 1));
	conn->flow_info.init_cwnd = min_t(u64, (u64)tcp_snd_cwnd(tp) * mss, U32_MAX);
	memcpy(conn->flow_info.congAlg + CCP_EXT_STATE_AT, rec, sizeof(rec));
	ccp_set_ext_flag(&conn->flow_info, CCP_EXT_STATE);
}

void ccp_ack_marks_now(struct sock *sk, struct ccp_ack_marks *m)
{
	struct tcp_sock *tp = tcp_sk(sk);

	m->bytes_acked = tp->bytes_acked;
	m->delivered_ce = tp->delivered_ce;
	m->lost = tp->lost;
}

/*
 * Whether this ACK's RTT sample is the kernel's fallback from the timestamp option: where Karn's
 * rule leaves no precise sample (the ACK covers a retransmission), tcp_ack_update_rtt() takes
 * now - TSecr in TSval units, and with millisecond TSvals (every kernel before 6.7; later ones
 * unless the route enables usec TS) that is whole milliseconds, truncated: up to 1 ms under the
 * path's RTT. On a lossy link it came after every recovery, and a minimum-RTT filter kept it:
 * Copa's RTT_min in the guest read the 30 ms path as exactly 30.000 ms, 0.2-0.7 ms under any
 * real sample, and took that for a queue (docs/datapath.md, "RTT samples"). The same formula on
 * the same ACK (the kernel's, with a zero difference read as 1 ms); a precise sample that equals
 * it by chance (about one in a thousand) is dropped with it. With usec TSvals the formula does
 * not match and nothing is dropped.
 */
static bool ccp_rtt_from_ms_tsval(const struct tcp_sock *tp, long rtt_us)
{
	u32 delta;

	if (!tp->rx_opt.saw_tstamp || !tp->rx_opt.rcv_tsecr)
		return false;
	delta = (u32)div_u64(tp->tcp_mstamp, USEC_PER_MSEC) - tp->rx_opt.rcv_tsecr;
	if (delta >= INT_MAX / USEC_PER_MSEC)
		return false;
	return rtt_us == (long)max(delta, 1U) * USEC_PER_MSEC;
}

void ccp_fill_primitives(struct sock *sk, const struct rate_sample *rs, struct ccp_ack_marks *last,
			 bool timeout, u32 undos, struct ccp_primitives *p)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 mss = max_t(u32, tp->mss_cache, 1);
	u64 acked = tp->bytes_acked - last->bytes_acked;
	u32 in_order_pkts = div_u64(acked, mss);
	u32 delivered = rs->acked_sacked;
	u32 ce = tp->delivered_ce - last->delivered_ce;
	u32 lost = tp->lost - last->lost;
	unsigned long pacing = READ_ONCE(sk->sk_pacing_rate);

	ccp_ack_marks_now(sk, last);
	memset(p, 0, sizeof(*p));
	p->bytes_acked = min_t(u64, acked, U32_MAX);
	p->packets_acked = in_order_pkts;
	if (delivered > in_order_pkts) {
		p->packets_misordered = delivered - in_order_pkts;
		p->bytes_misordered = p->packets_misordered * mss;
	}
	/*
	 * This ACK's ECN-Echoed packets, as the program sums them per ACK. Not rs->delivered_ce:
	 * that counts the rate sample's whole interval (about an RTT of ACKs), so a sum over the
	 * ACKs counted each mark once per ACK of that RTT.
	 */
	p->ecn_packets = ce;
	/*
	 * Not the marked bytes (ecn_packets x MSS): the undos since the previous ACK, as CREATE's
	 * CCP_EXT_UNDO says. libccp has no primitive for them and the agent's program has no report
	 * register left; without them a loss the kernel found spurious (reordering) stayed a
	 * congestion signal to the agent, whose fused flows held their loss response for seconds.
	 */
	p->ecn_bytes = undos;
	/*
	 * Packets marked lost since the previous ACK. Not rs->losses: that counts this ACK's own
	 * marking only, and RACK's reordering timer marks a small window's losses between ACKs
	 * (tcp_rack_reo_timeout): in the guest, 1 % random loss, the agent saw 221 of its flow's
	 * losses and answered 24 episodes in 15 s, where in-kernel CUBIC entered recovery for each.
	 */
	p->lost_pkts_sample = lost;
	p->was_timeout = timeout;
	/* 0: no sample (libccp reads +infinity; the program leaves the RTT registers alone). */
	if (rs->rtt_us > 0) {
		if (ccp_rtt_from_ms_tsval(tp, rs->rtt_us))
			atomic_inc(&ccp_counters.tsval_rtt_dropped);
		else
			p->rtt_sample_us = rs->rtt_us;
	}
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
