//! Reno (RFC 5681, Linux `tcp_cong.c`).
//!
//! Model: slow start grows `cwnd += acked` until `ssthresh`; congestion avoidance grows
//! `cwnd += mss * acked / cwnd` (one MSS per RTT); a loss episode sets
//! `ssthresh = max(cwnd / 2, 2 MSS)` and `cwnd = ssthresh` once per RTT; a timeout restarts from
//! the loss window and re-enters slow start ([`crate::loss_episode::LOSS_WINDOW_PACKETS`]). An ECN mark is answered as a loss
//! ([`Report::congestion_signal`], RFC 3168).
//!
//! States: `SlowStart` -> `CongestionAvoidance` (cwnd >= ssthresh or first loss);
//! a [`LossEpisode`] is the one-reduction-per-episode guard.
//!
//! Differences from the reference: reports arrive once per RTT (or per ACK batch), so growth is
//! applied per report on the acked byte count; losses of the window in flight at the previous
//! reduction belong to the same episode ([`LossEpisode`]).

use crate::filters::srtt_after;
use crate::loss_episode::{Before, LossEpisode, LOSS_WINDOW_PACKETS};
use crate::units::rate_of_window;
use crate::config::{check_init_cwnd, PolicyError};
use crate::{Algorithm, CongestionControl, Decision, Estimates, FlowInfo, Report};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The smallest window Reno keeps, in packets (RFC 5681).
pub const MIN_CWND_PACKETS: u64 = 2;

/// Reno's parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RenoConfig {
    /// Initial window in packets; `None` takes the datapath's (Linux: 10).
    pub init_cwnd_packets: Option<u64>,
}

/// Per-flow Reno state.
#[derive(Clone, Debug)]
pub struct Reno {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// The loss episode last answered (no second reduction within it).
    episode: LossEpisode,
    srtt: Option<Duration>,
}

impl Reno {
    fn min_cwnd(&self) -> u64 {
        MIN_CWND_PACKETS * self.mss
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn on_report(&mut self, r: &Report) -> Decision {
        self.srtt = srtt_after(self.srtt, r);
        self.episode.take_back(r, &mut self.cwnd, &mut self.ssthresh);
        let in_episode = self.episode.contains(r);
        let before = Before { cwnd: self.cwnd, ssthresh: self.ssthresh };
        if r.timeout {
            self.ssthresh = (self.cwnd / 2).max(self.min_cwnd());
            self.cwnd = LOSS_WINDOW_PACKETS * self.mss;
            self.episode.begin(r, self.srtt, before);
        } else if r.congestion_signal() {
            if !in_episode {
                self.ssthresh = (self.cwnd / 2).max(self.min_cwnd());
                self.cwnd = self.ssthresh;
                self.episode.begin(r, self.srtt, before);
            }
        } else if self.in_slow_start() {
            self.cwnd = self.cwnd.saturating_add(r.bytes_acked);
        } else {
            let inc = (self.mss as u128 * r.bytes_acked as u128 / self.cwnd.max(1) as u128) as u64;
            self.cwnd = self.cwnd.saturating_add(inc);
        }
        self.cwnd = self.cwnd.max(self.min_cwnd());
        self.decision()
    }

    crate::window_controls::window_methods!(decision, sync, ssthresh, per_ack);

    fn estimates(&self) -> Estimates {
        Estimates { srtt: self.srtt, bandwidth: self.srtt.map(|s| rate_of_window(self.cwnd, s)), min_rtt: None }
    }
}

impl Algorithm for RenoConfig {
    type Controller = Reno;
    const NAME: &'static str = "reno";
    const SUMMARY: &'static str = "TCP NewReno: AIMD on loss (RFC 5681), slow start per ACK";

    fn build(&self, info: FlowInfo) -> Reno {
        let init = self
            .init_cwnd_packets
            .map_or(info.init_cwnd_bytes, |p| p * info.mss_bytes)
            .max(MIN_CWND_PACKETS * info.mss_bytes);
        Reno {
            mss: info.mss_bytes,
            cwnd: init,
            ssthresh: u64::MAX,
            episode: LossEpisode::default(),
            srtt: None,
        }
    }

    fn validate(&self) -> Result<(), PolicyError> {
        check_init_cwnd(Self::NAME, self.init_cwnd_packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack_report, loss_report, FluidPath};
    use crate::Rate;

    const MSS: u64 = 1000;
    const RTT: Duration = Duration::from_millis(50);

    fn reno() -> Reno {
        RenoConfig::default().build(FlowInfo { mss_bytes: MSS, init_cwnd_bytes: 10 * MSS })
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut r = reno();
        let d = r.on_report(&ack_report(RTT, RTT, 10 * MSS, MSS));
        assert_eq!(d.cwnd_bytes, 20 * MSS);
    }

    #[test]
    fn loss_halves_once_per_episode() {
        let mut r = reno();
        r.on_report(&ack_report(RTT, RTT, 30 * MSS, MSS)); // 40 packets
        let d = r.on_report(&loss_report(RTT * 2, 1));
        assert_eq!(d.cwnd_bytes, 20 * MSS);
        let d = r.on_report(&loss_report(RTT * 2 + Duration::from_millis(10), 3));
        assert_eq!(d.cwnd_bytes, 20 * MSS, "second loss in the same RTT must not reduce again");
        let d = r.on_report(&loss_report(RTT * 4, 1));
        assert_eq!(d.cwnd_bytes, 10 * MSS);
    }

    #[test]
    fn an_undo_takes_back_the_spurious_halving_and_the_next_loss_is_answered() {
        let mut r = reno();
        r.on_report(&ack_report(RTT, RTT, 30 * MSS, MSS)); // 40 packets, in slow start
        assert_eq!(r.on_report(&loss_report(RTT * 2, 8)).cwnd_bytes, 20 * MSS);
        let grown = r.on_report(&ack_report(RTT * 2 + Duration::from_millis(10), RTT, 4 * MSS, MSS));
        let undo = Report { undo: true, ..ack_report(RTT * 2 + Duration::from_millis(20), RTT, 2 * MSS, MSS) };
        let d = r.on_report(&undo);
        assert!(d.cwnd_bytes >= 40 * MSS && grown.cwnd_bytes < 40 * MSS, "{grown:?} -> {d:?}");
        assert!(r.in_slow_start(), "the threshold from before the loss: slow start again");
        // A second undo has nothing left to take back.
        let again = Report { undo: true, ..ack_report(RTT * 2 + Duration::from_millis(25), RTT, 0, MSS) };
        assert_eq!(r.on_report(&again).cwnd_bytes, d.cwnd_bytes);
        // The episode is over: a loss right after is answered, from the restored window.
        let d = r.on_report(&loss_report(RTT * 2 + Duration::from_millis(30), 1));
        assert!(d.cwnd_bytes >= 20 * MSS && d.cwnd_bytes < 40 * MSS, "{d:?}");
    }

    #[test]
    fn avoidance_adds_one_mss_per_rtt() {
        let mut r = reno();
        r.on_report(&loss_report(RTT, 1)); // cwnd 5 pkts, ssthresh 5
        let d = r.on_report(&ack_report(RTT * 3, RTT, 5 * MSS, MSS));
        assert_eq!(d.cwnd_bytes, 6 * MSS);
    }

    #[test]
    fn timeout_restarts_from_the_loss_window_and_never_goes_below_two_packets() {
        let mut r = reno();
        r.on_report(&ack_report(RTT, RTT, 50 * MSS, MSS)); // 60 packets
        let d = r.on_report(&Report { now: RTT * 2, timeout: true, ..Report::default() });
        // The loss window (RFC 5681's one segment, grown by the retransmission's ACK), not the
        // initial window of 10: Linux's tcp_enter_loss.
        assert_eq!(d.cwnd_bytes, 2 * MSS);
        assert_eq!(r.ssthresh, 30 * MSS);
        // Slow start back towards ssthresh.
        let d = r.on_report(&ack_report(RTT * 3, RTT, 2 * MSS, MSS));
        assert_eq!(d.cwnd_bytes, 4 * MSS);
        for i in 0..10 {
            r.on_report(&loss_report(RTT * (10 + 2 * i), 1));
        }
        assert_eq!(r.decision().cwnd_bytes, 2 * MSS);
    }

    #[test]
    fn fills_a_fluid_path_with_sawtooth() {
        let mut path = FluidPath::new(Rate::from_mbps(10.0), RTT, 62_500, MSS);
        let util = path.run(&mut reno(), 400).utilization;
        assert!(util > 0.85, "utilization {util}");
    }
}
