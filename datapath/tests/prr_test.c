// SPDX-License-Identifier: GPL-2.0
/*
 * User-space tests of ccp_prr.h, the loss episode's window reduction both datapaths run (the
 * kernel's PRR, which it skips for a congestion control with .cong_control).
 *
 * An episode is played ACK by ACK: each ACK delivers some packets, the sender sends what
 * ccp_prr_sndcnt() allows, and the test checks the window it leaves (inflight + sndcnt):
 * 1. A two- or three-packet flow whose window is cut keeps its ACK clock: the first ACK sends
 *    the retransmission, where a cut at once (window 2 with 2 in flight) sent nothing.
 * 2. Above the target the packets sent track target x delivered / prior_cwnd and the episode
 *    ends at the target (Reno's halving over 100 packets: 50 sent, window 50).
 * 3. A target not lowered yet (the agent's answer is on its way) is packet conservation.
 * 4. Below the target the window grows by at most what is delivered and one more (SSRB).
 */
#include <stdio.h>

#include "ccp_prr.h"
#include "check.h"

/* One episode: `inflight` after the loss was marked, one packet delivered per ACK for `acks`
 * ACKs. Returns the window after the last ACK; *sent gets prr_out. */
static unsigned int episode(unsigned int prior, unsigned int target, unsigned int inflight,
			    unsigned int acks, unsigned int *sent, unsigned int *min_window)
{
	unsigned int delivered = 0, out = 0, cwnd = prior, over_at = 0, i;

	*min_window = prior;
	for (i = 0; i < acks; i++) {
		int sndcnt;

		delivered++;
		inflight--;
		sndcnt = ccp_prr_sndcnt(target, inflight, prior, delivered, out, 1, 1);
		/* Above the target, in proportion: ceil(target x delivered / prior) in all. */
		if (inflight > target && out + sndcnt > (target * delivered + prior - 1) / prior &&
		    out + sndcnt > 1 && !over_at)
			over_at = delivered;
		cwnd = inflight + sndcnt;
		if (cwnd < *min_window)
			*min_window = cwnd;
		out += sndcnt;	/* the sender fills the window */
		inflight += sndcnt;
	}
	check(!over_at, "%u -> %u: above the target, more sent than the proportion after %u delivered",
	      prior, target, over_at);
	*sent = out;
	return cwnd;
}

static void small_flows_keep_their_ack_clock(void)
{
	unsigned int prior, first;

	/* CUBIC's 0.7 of 3 packets is 2; one of the 3 lost leaves 2 in flight. */
	for (prior = 2; prior <= 4; prior++) {
		unsigned int target = prior * 7 / 10 > 1 ? prior * 7 / 10 : 2;

		first = ccp_prr_sndcnt(target, prior - 1, prior, 0, 0, 0, 0);
		check(first >= 1, "prior %u -> %u: the episode's first ACK sends %u (the retransmission)",
		      prior, target, first);
	}
	/* Cut at once, the same flow had window 2 with 2 in flight: nothing to send. */
	check(ccp_prr_sndcnt(2, 2, 3, 1, 0, 1, 0) >= 1, "a delivered packet on a 2-packet target lets one out");
}

static void above_the_target_it_sends_in_proportion(void)
{
	unsigned int sent, min_window, end;

	/* Reno, one packet lost of 100: 99 in flight, 100 delivered over the episode. */
	end = episode(100, 50, 99, 100, &sent, &min_window);
	check(sent >= 50 && sent <= 51, "Reno over 100 delivered packets sends 50-51 (sent %u)", sent);
	check(end == 50, "and ends at the target (window %u)", end);
	check(min_window >= 49, "never far under it on the way (lowest %u)", min_window);

	/* CUBIC, two of 30 lost: the episode ends with 21 in flight, so 21 + 2 go out. */
	end = episode(30, 21, 28, 30, &sent, &min_window);
	check(sent == 23, "CUBIC 30 -> 21 sends 23 over 30 delivered (sent %u)", sent);
	check(end == 21, "and ends at 21 (window %u)", end);
	check(min_window >= 20, "never under 20 on the way (lowest %u)", min_window);
}

static void an_unchanged_target_is_packet_conservation(void)
{
	unsigned int sent, min_window, end;

	/* One of 20 lost: one out per packet delivered, and the lost one's place refilled. */
	end = episode(20, 20, 19, 20, &sent, &min_window);
	check(end == 20, "target = prior_cwnd: the window stays at 20 (%u)", end);
	check(min_window >= 19, "and never under 19 (%u)", min_window);
	check(sent == 21, "20 delivered + the lost one (sent %u)", sent);
}

static void below_the_target_growth_is_bounded(void)
{
	/* 5 in flight, target 10, 3 delivered, 1 sent, this ACK delivered 1 and moved snd_una:
	 * max(3 - 1, 1) + 1 = 3, under the 5 the target allows. */
	check(ccp_prr_sndcnt(10, 5, 20, 3, 1, 1, 1) == 3, "SSRB: delivered - sent + 1");
	/* Never past the target. */
	check(ccp_prr_sndcnt(10, 9, 20, 30, 1, 5, 1) == 1, "at most the target minus inflight");
	/* Already sent more than delivered allowed, above the target: nothing. */
	check(ccp_prr_sndcnt(10, 15, 20, 4, 3, 1, 0) == 0, "ahead of the proportion: sends nothing");
}

int main(void)
{
	small_flows_keep_their_ack_clock();
	above_the_target_it_sends_in_proportion();
	an_unchanged_target_is_packet_conservation();
	below_the_target_growth_is_bounded();
	printf("prr: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
