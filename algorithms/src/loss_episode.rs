//! One loss episode: the window's data in flight when a loss was answered, so the losses still
//! arriving from it are not answered twice (Reno, CUBIC, Vegas: one reduction per episode).
//!
//! Linux ends an episode when the cumulative ACK passes `high_seq`, the highest sequence sent when
//! the loss was detected: every loss among the packets sent before the reduction belongs to it,
//! however long their ACKs take, and the ACK passes it once the last hole's retransmission is
//! acknowledged. Reports carry no sequence numbers, so the episode is open while either holds:
//! - the packets in flight at the reduction have not all been delivered (cumulatively or
//!   selectively) or declared lost since;
//! - less than one current RTT has passed since the reduction, or since the last loss reported
//!   within that first RTT (the window's later holes, whose retransmissions are acknowledged one
//!   RTT after they were found). Losses found later are of data sent after the reduction.
//!
//! The current RTT is the largest of the controller's srtt and the reduction report's mean and
//! last RTT: with the queue full the srtt lags the RTT the episode's ACKs take. A report is judged
//! on the episode as it stood before it, so the losses its own ACKs revealed count to the window
//! that sent them.
//!
//! Why (2026-11-25): one smoothed RTT from the reduction, the rule before, let losses of the same
//! window through under ACK jitter (guest, 20 Mbit/s, RTT 100 ms +/-100 ms, 1 BDP: a loss 220 ms
//! after the first cut a fused flow's CUBIC twice, 452 -> 316 -> 221 packets, and fast
//! convergence took W_max to 269, ten seconds at 60 % of the link); counting packets alone closed
//! the episode while every ACK was still a SACK above the first hole (490 packets SACKed or lost
//! in 330 ms at an RTT of 290 ms: 345 -> 241). Both are replayed in `tests/guest_replay.rs`.
//!
//! An episode also keeps the window and threshold from before its reduction: when the stack finds
//! the losses spurious ([`Report::undo`]), [`LossEpisode::undo`] hands them back, as Linux's
//! `tcp_undo_cwnd_reduction` restores `prior_cwnd` and `prior_ssthresh` (each the larger of the
//! two). Why (2026-11-28): a 1 ms reordering on a two-vCPU guest had 8 packets marked lost and
//! then delivered; the kernel undid its own CUBIC's cut, but a fused flow kept its loss response
//! and crawled at 12-15 Mbit/s of 20 for 10 s.

use crate::Report;
use std::time::Duration;

/// The window a timeout restarts slow start from, in packets (Reno, CUBIC, Vegas). RFC 5681's
/// loss window is one segment, and Linux's `tcp_enter_loss` sets it; the report of the timeout
/// comes with the ACK of its retransmission, which has grown it to two by the time the agent's
/// answer lands. RFC 6928 raised the initial window, not this one.
///
/// Why (2026-12-02): restarting from the initial window (10 packets) sent ten segments, most of
/// them copies of data the receiver already had, into the queue that had just overflowed. In the
/// guest, 64 flows on 20 Mbit/s, 40 ms, one BDP of buffer: the agent's CUBIC had 1,070 timeouts
/// and 40 % of its segments retransmitted in 40 s, the kernel's CUBIC 540 and 17 %; under the
/// stress test's agent restarts and policy changes one flow in 64 starved for 55 s.
pub const LOSS_WINDOW_PACKETS: u64 = 2;

/// A controller's window and slow-start threshold before a reduction, bytes: what an undo
/// restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Before {
    pub cwnd: u64,
    pub ssthresh: u64,
}

impl Before {
    /// Linux's `tcp_undo_cwnd_reduction` with `tcp_reno_undo_cwnd`: each of `cwnd` and
    /// `ssthresh` back to at least what it was before the reduction.
    pub fn restore(self, cwnd: &mut u64, ssthresh: &mut u64) {
        *cwnd = (*cwnd).max(self.cwnd);
        *ssthresh = (*ssthresh).max(self.ssthresh);
    }
}

/// The loss episode a controller last answered.
#[derive(Clone, Debug, Default)]
pub struct LossEpisode {
    /// Packets of the episode's window not yet delivered or declared lost.
    packets_left: u64,
    /// When the reduction was made, and the current RTT then.
    began: Option<(Duration, Duration)>,
    /// One current RTT after the reduction or after the last loss found within the first RTT.
    until: Duration,
    /// The window and threshold before the last reduction, until it is undone or replaced.
    before: Option<Before>,
}

impl LossEpisode {
    /// Whether a loss in `r` belongs to the episode already answered; then counts `r` against
    /// it. Call on every report.
    pub fn contains(&mut self, r: &Report) -> bool {
        let inside = self.packets_left > 0 || r.now < self.until;
        if let Some((began, rtt)) = self.began.filter(|_| inside && r.congestion_signal()) {
            if r.now < began + rtt {
                self.until = self.until.max(r.now + rtt);
            }
        }
        self.packets_left = self.packets_left.saturating_sub(r.packets_acked.saturating_add(r.packets_lost));
        inside
    }

    /// A reduction answered the loss (or timeout) in `r`, `srtt` the controller's; `before`, the
    /// window and threshold it reduced.
    pub fn begin(&mut self, r: &Report, srtt: Option<Duration>, before: Before) {
        let rtt = [srtt, r.rtt_mean(), r.rtt_last].into_iter().flatten().max().unwrap_or_default();
        self.packets_left = r.packets_in_flight;
        self.began = Some((r.now, rtt));
        self.until = r.now + rtt;
        self.before = Some(before);
    }

    /// The stack undid its last reduction ([`Report::undo`]): the episode ends (a loss after it
    /// is answered) and what the reduction took comes back, once; `None` when there is nothing
    /// to take back.
    pub fn undo(&mut self) -> Option<Before> {
        let before = self.before.take()?;
        self.packets_left = 0;
        self.began = None;
        self.until = Duration::ZERO;
        Some(before)
    }

    /// A controller's report step for [`Report::undo`]: on an undo, [`Self::undo`] and what it
    /// gives back restored into `cwnd` and `ssthresh` ([`Before::restore`]). Whether anything
    /// was taken back.
    pub fn take_back(&mut self, r: &Report, cwnd: &mut u64, ssthresh: &mut u64) -> bool {
        let Some(before) = r.undo.then(|| self.undo()).flatten() else { return false };
        before.restore(cwnd, ssthresh);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: Before = Before { cwnd: 400, ssthresh: u64::MAX };

    fn report(ms: u64, acked: u64, lost: u64, in_flight: u64) -> Report {
        Report {
            now: Duration::from_millis(ms),
            packets_acked: acked,
            packets_lost: lost,
            packets_in_flight: in_flight,
            ..Report::default()
        }
    }

    #[test]
    fn an_episode_lasts_until_its_window_is_accounted_for_however_long_that_takes() {
        let mut e = LossEpisode::default();
        let first = report(0, 0, 5, 400);
        assert!(!e.contains(&first), "no episode yet");
        e.begin(&first, Some(Duration::from_millis(100)), BEFORE);
        // Three srtts later, 390 of the 400 packets accounted for: still the same episode.
        assert!(e.contains(&report(100, 300, 10, 300)));
        assert!(e.contains(&report(300, 80, 0, 300)));
        assert!(e.contains(&report(310, 20, 3, 300)), "10 packets were left before it");
        assert!(!e.contains(&report(320, 0, 1, 300)), "a loss after the window: a new episode");
    }

    #[test]
    fn losses_found_in_the_first_rtt_hold_the_episode_until_their_retransmissions_return() {
        let mut e = LossEpisode::default();
        e.begin(&report(0, 0, 2, 100), Some(Duration::from_millis(100)), BEFORE);
        // The window is SACKed away at once, a hole found at 90 ms: open until 190 ms.
        assert!(e.contains(&report(50, 100, 0, 100)));
        assert!(e.contains(&report(90, 10, 2, 100)));
        assert!(e.contains(&report(180, 10, 1, 100)), "a loss of the same window");
        // A loss found after the first RTT does not extend it.
        assert!(!e.contains(&report(195, 10, 1, 100)), "past the last hole's RTT: a new episode");
    }

    #[test]
    fn without_an_in_flight_count_an_episode_lasts_one_rtt() {
        let mut e = LossEpisode::default();
        e.begin(&report(0, 0, 1, 0), Some(Duration::from_millis(100)), BEFORE);
        assert!(e.contains(&report(99, 5, 0, 0)));
        assert!(!e.contains(&report(100, 0, 1, 0)));
    }

    #[test]
    fn an_undo_ends_the_episode_and_gives_back_what_its_reduction_took_once() {
        let mut e = LossEpisode::default();
        assert_eq!(e.undo(), None, "no reduction to undo");
        e.begin(&report(0, 0, 8, 90), Some(Duration::from_millis(100)), Before { cwnd: 90, ssthresh: u64::MAX });
        assert!(e.contains(&report(10, 3, 0, 40)));
        assert_eq!(e.undo(), Some(Before { cwnd: 90, ssthresh: u64::MAX }));
        assert_eq!(e.undo(), None, "taken back once");
        assert!(!e.contains(&report(20, 0, 1, 90)), "a loss after the undo is a new episode");
        // Restoring never lowers what grew since.
        let (mut cwnd, mut ssthresh) = (120, 45);
        Before { cwnd: 90, ssthresh: 60 }.restore(&mut cwnd, &mut ssthresh);
        assert_eq!((cwnd, ssthresh), (120, 60));
    }
}
