//! One loss episode: the window's data in flight when a loss was answered, so the losses still
//! arriving from it are not answered twice (Reno, CUBIC, Vegas: one reduction per episode).
//!
//! Linux ends an episode when the cumulative ACK passes `high_seq`, the highest sequence sent when
//! the loss was detected: every loss among the packets sent before the reduction belongs to it,
//! however long their ACKs take. Reports carry no sequence numbers, so the episode counts packets
//! instead: it opens with the packets in flight at the reduction and closes once the reports after
//! it have accounted for as many (delivered, cumulatively or selectively, or lost). A report is judged on what was left
//! before it, so the losses its own ACKs revealed still count to the episode that sent them.
//!
//! Why not one smoothed RTT from the reduction (the rule before 2026-11-25): with the queue full the
//! episode's losses keep arriving for a *current* RTT, and under ACK jitter the current RTT runs
//! past the smoothed one. In the guest (20 Mbit/s, RTT 100 ms +/-100 ms, 1 BDP) a loss report
//! 220 ms after the first, of the same window, cut a fused flow's CUBIC twice, 452 -> 316 -> 221
//! packets, and fast convergence took W_max to 269: ten seconds at 60 % of the link
//! (`tests/guest_replay.rs`). A report without an in-flight count (0: not measured, or nothing in
//! flight, as after a timeout) falls back to that smoothed RTT.

use crate::Report;
use std::time::Duration;

/// The loss episode a controller last answered.
#[derive(Clone, Debug, Default)]
pub struct LossEpisode {
    /// Packets of the episode's window not yet delivered or lost.
    packets_left: u64,
    /// Without an in-flight count: the episode ends at this report time.
    until: Option<Duration>,
}

impl LossEpisode {
    /// Whether a loss in `r` belongs to the episode already answered; then counts `r`'s packets
    /// against it. Call on every report.
    pub fn contains(&mut self, r: &Report) -> bool {
        let inside = self.packets_left > 0 || self.until.is_some_and(|t| r.now < t);
        let accounted = r.packets_acked.saturating_add(r.packets_lost);
        self.packets_left = self.packets_left.saturating_sub(accounted);
        inside
    }

    /// A reduction answered the loss (or timeout) in `r`: the episode is what was in flight then;
    /// `srtt` bounds it when `r` has no in-flight count.
    pub fn begin(&mut self, r: &Report, srtt: Option<Duration>) {
        self.packets_left = r.packets_in_flight;
        self.until = (r.packets_in_flight == 0).then(|| r.now + srtt.unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        e.begin(&first, Some(Duration::from_millis(100)));
        // Three srtts later, 390 of the 400 packets accounted for: still the same episode.
        assert!(e.contains(&report(100, 300, 10, 300)));
        assert!(e.contains(&report(300, 80, 0, 300)));
        assert!(e.contains(&report(310, 20, 3, 300)), "10 packets were left before it");
        assert!(!e.contains(&report(320, 0, 1, 300)), "a loss after the window: a new episode");
    }

    #[test]
    fn without_an_in_flight_count_an_episode_lasts_one_srtt() {
        let mut e = LossEpisode::default();
        e.begin(&report(0, 0, 1, 0), Some(Duration::from_millis(100)));
        assert!(e.contains(&report(99, 0, 1, 0)));
        assert!(!e.contains(&report(100, 0, 1, 0)));
    }
}
