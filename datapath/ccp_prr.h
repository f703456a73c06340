/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Proportional rate reduction (RFC 6937, PRR-SSRB), the packets one ACK may send in a loss
 * episode: the kernel runs it (tcp_cwnd_reduction()) only for congestion controls without
 * .cong_control, so ccp.ko and the BPF datapath run this one. One copy for the module, the BPF
 * program and datapath/tests/prr_test.c: plain C, no kernel or BPF types.
 *
 * target         the window asked for (packets): the agent's Cwnd, or the fallback's ssthresh
 * inflight       packets in flight now (tcp_packets_in_flight())
 * prior_cwnd     the window when the episode began (tp->prior_cwnd, > 0)
 * prr_delivered  packets delivered since then, this ACK's included
 * prr_out        packets sent since then (tp->prr_out)
 * acked          packets this ACK delivered (acked or SACKed)
 * una_advanced_without_loss  this ACK moved snd_una and marked nothing lost
 *
 * Above the target, send ceil(target x delivered / prior_cwnd) - sent: the window comes down in
 * step with the ACKs. Below it, what was delivered and one more, up to the target (slow-start
 * reduction bound). The episode's first retransmission goes at once.
 */
#ifndef CCP_PRR_H
#define CCP_PRR_H

#ifdef __KERNEL__
#include <linux/math64.h>
#define CCP_PRR_DIV(n, d) div_u64((n), (d))
#else
#define CCP_PRR_DIV(n, d) ((n) / (d))
#endif

static inline int ccp_prr_sndcnt(unsigned int target, unsigned int inflight,
				 unsigned int prior_cwnd, unsigned int prr_delivered,
				 unsigned int prr_out, unsigned int acked,
				 int una_advanced_without_loss)
{
	int delta = (int)target - (int)inflight;
	int sndcnt;

	if (delta < 0) {
		unsigned long long n = (unsigned long long)target * prr_delivered + prior_cwnd - 1;

		sndcnt = (int)CCP_PRR_DIV(n, prior_cwnd) - (int)prr_out;
	} else {
		sndcnt = (int)prr_delivered - (int)prr_out;
		if (sndcnt < (int)acked)
			sndcnt = (int)acked;
		if (una_advanced_without_loss)
			sndcnt++;
		if (sndcnt > delta)
			sndcnt = delta;
	}
	if (sndcnt < (prr_out ? 0 : 1))
		sndcnt = prr_out ? 0 : 1;
	return sndcnt;
}

#endif
