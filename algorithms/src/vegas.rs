//! Vegas (Brakmo and Peterson 1995, Linux `tcp_vegas.c`).
//!
//! Model: with `baseRTT` the smallest RTT ever seen and `rtt` the smallest RTT of the last
//! round, the packets this flow keeps queued at the bottleneck are
//! `diff = cwnd (rtt - baseRTT) / baseRTT` (expected minus actual rate, times baseRTT). Once per
//! RTT, congestion avoidance keeps `alpha <= diff <= beta`: `diff > beta` -> cwnd - 1 packet,
//! `diff < alpha` -> cwnd + 1 packet. Slow start doubles per RTT until `diff > gamma`, then sets
//! `cwnd = min(cwnd, cwnd baseRTT / rtt + 1)` (the actual rate times baseRTT, plus one) and
//! moves to avoidance. A round with fewer than 3 RTT samples is handled as Reno would; losses
//! and timeouts are handled as Reno does (halve once per episode; timeout -> the loss window, [`LOSS_WINDOW_PACKETS`]).
//!
//! States: `SlowStart` (cwnd < ssthresh) -> `CongestionAvoidance` (diff > gamma, or a loss);
//! a `Round` gathers one RTT's samples; a [`LossEpisode`] is the one-reduction-per-episode
//! guard, as in `reno.rs`.
//!
//! References: Brakmo, Peterson, "TCP Vegas: End to End Congestion Avoidance on a Global
//! Internet" (IEEE JSAC 1995); Linux `net/ipv4/tcp_vegas.c` (`tcp_vegas_cong_avoid`).
//!
//! Differences from the reference:
//! - A round ends with the first report at least one round-minimum RTT after the round began
//!   (the kernel waits for the ACK of the first packet sent in the round); with one report per
//!   RTT every report ends a round. Reports inside a round only slow-start, as the kernel's
//!   per-ACK path does between round boundaries.
//! - The RTT samples of a round are the reports' `rtt_min` and `rtt_samples`, not per-ACK
//!   samples; zero RTTs are ignored (the kernel adds 1 us to avoid them).
//! - `diff` is compared as a real number rather than truncated to whole packets, so
//!   e.g. `diff = 4.5` already counts as above beta = 4.
//! - A loss or timeout starts a fresh round (the kernel disables Vegas during recovery and
//!   re-arms it with a new round); losses of the window in flight at the previous reduction
//!   belong to the same episode ([`LossEpisode`]); reports with losses do not grow the window.
//! - Slow start grows on every round, as Linux does (the paper grows every other RTT).
//! - `sync(Sync::Cwnd(c))` adopts `c` and keeps the round and baseRTT (they measure the path,
//!   not the window); `Sync::Rate(r)` becomes `r * srtt`. ssthresh is kept, so a window synced
//!   below it slow-starts until Vegas sees a queue.

use crate::filters::srtt_after;
use crate::loss_episode::{Before, LossEpisode, LOSS_WINDOW_PACKETS};
use crate::units::{bytes_from_f64, rate_of_window};
use crate::config::{check_init_cwnd, PolicyError};
use crate::{Algorithm, CongestionControl, Decision, Estimates, FlowInfo, Report};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The smallest window Vegas keeps, in packets (`tcp_vegas.c`: `if (cwnd < 2) cwnd = 2`).
pub const MIN_CWND_PACKETS: u64 = 2;

/// Fewest packets Vegas wants queued: below it, grow (`tcp_vegas.c` `alpha = 2`).
pub const ALPHA_PACKETS: u64 = 2;

/// Most packets Vegas wants queued: above it, shrink (`tcp_vegas.c` `beta = 4`).
pub const BETA_PACKETS: u64 = 4;

/// Queued packets that end slow start (`tcp_vegas.c` `gamma = 1`).
pub const GAMMA_PACKETS: u64 = 1;

/// A round needs this many RTT samples for the Vegas rule; fewer and it behaves as Reno
/// (`tcp_vegas.c`: `if (cntRTT <= 2) tcp_reno_cong_avoid(...)`), since a single sample may be
/// a delayed ACK's.
pub const MIN_RTT_SAMPLES_PER_ROUND: u64 = 3;

/// Vegas's parameters, in packets queued at the bottleneck.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VegasConfig {
    /// Below this many queued packets, avoidance adds a packet per RTT. Default
    /// [`ALPHA_PACKETS`] = 2.
    pub alpha_packets: u64,
    /// Above this many queued packets, avoidance removes a packet per RTT. Default
    /// [`BETA_PACKETS`] = 4. Values below `alpha_packets` are raised to it.
    pub beta_packets: u64,
    /// Above this many queued packets, slow start ends. Default [`GAMMA_PACKETS`] = 1.
    pub gamma_packets: u64,
    /// Initial window in packets; `None` takes the datapath's (Linux: 10).
    pub init_cwnd_packets: Option<u64>,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig {
            alpha_packets: ALPHA_PACKETS,
            beta_packets: BETA_PACKETS,
            gamma_packets: GAMMA_PACKETS,
            init_cwnd_packets: None,
        }
    }
}

/// One RTT's worth of samples (the kernel's `beg_snd_nxt`, `minRTT`, `cntRTT`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Round {
    start: Duration,
    min_rtt: Option<Duration>,
    samples: u64,
}

impl Round {
    fn begin(start: Duration) -> Round {
        Round { start, min_rtt: None, samples: 0 }
    }
}

/// Per-flow Vegas state.
#[derive(Clone, Debug)]
pub struct Vegas {
    mss: u64,
    alpha: f64,
    beta: f64,
    gamma: f64,
    cwnd: u64,
    ssthresh: u64,
    /// Smallest RTT seen over the flow's life.
    base_rtt: Option<Duration>,
    round: Round,
    /// The loss episode last answered (no second reduction within it).
    episode: LossEpisode,
    srtt: Option<Duration>,
}

impl Vegas {
    fn min_cwnd(&self) -> u64 {
        MIN_CWND_PACKETS * self.mss
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    fn observe_rtt(&mut self, r: &Report) {
        self.srtt = srtt_after(self.srtt, r);
        if let Some(m) = r.rtt_min.or(r.rtt_last).filter(|d| !d.is_zero()) {
            self.base_rtt = Some(self.base_rtt.map_or(m, |b| b.min(m)));
            self.round.min_rtt = Some(self.round.min_rtt.map_or(m, |old| old.min(m)));
            self.round.samples = self.round.samples.saturating_add(r.rtt_samples.max(1));
        }
    }

    /// The round is over once its smallest RTT has elapsed since it began (srtt when it has no
    /// sample; with neither, every report ends a round).
    fn round_is_over(&self, now: Duration) -> bool {
        match self.round.min_rtt.or(self.srtt) {
            Some(rtt) => now >= self.round.start + rtt,
            None => true,
        }
    }

    /// `tcp_slow_start`: grow by the acked bytes up to ssthresh; returns the bytes left over.
    fn slow_start(&mut self, acked: u64) -> u64 {
        let used = acked.min(self.ssthresh.saturating_sub(self.cwnd));
        self.cwnd = self.cwnd.saturating_add(used);
        acked - used
    }

    /// `tcp_reno_cong_avoid`: slow start, then one MSS per window acknowledged.
    fn reno_cong_avoid(&mut self, acked: u64) {
        let acked = if self.in_slow_start() { self.slow_start(acked) } else { acked };
        if acked > 0 {
            let inc = (self.mss as u128 * acked as u128 / self.cwnd.max(1) as u128) as u64;
            self.cwnd = self.cwnd.saturating_add(inc);
        }
    }

    /// `tcp_vegas_cong_avoid` at a round boundary, with the round's minimum RTT.
    fn vegas_cong_avoid(&mut self, rtt: Duration, base_rtt: Duration, acked: u64) {
        let (rtt_secs, base_secs) = (rtt.as_secs_f64(), base_rtt.as_secs_f64());
        // diff = cwnd (rtt - baseRTT) / baseRTT: packets this flow has queued.
        let diff = self.cwnd as f64 / self.mss as f64 * (rtt_secs - base_secs) / base_secs;
        if self.in_slow_start() {
            if diff > self.gamma {
                // cwnd = actual rate * baseRTT = cwnd baseRTT / rtt, plus one packet.
                let target = bytes_from_f64(self.cwnd as f64 * base_secs / rtt_secs);
                self.cwnd = self.cwnd.min(target.saturating_add(self.mss));
                self.ssthresh = self.ssthresh.min(self.cwnd.saturating_sub(self.mss));
            } else {
                self.slow_start(acked);
            }
        } else if diff > self.beta {
            self.cwnd = self.cwnd.saturating_sub(self.mss);
            self.ssthresh = self.ssthresh.min(self.cwnd.saturating_sub(self.mss));
        } else if diff < self.alpha {
            self.cwnd = self.cwnd.saturating_add(self.mss);
        }
    }

    /// Reno's reduction, once per episode; a timeout restarts from the loss window.
    fn on_loss(&mut self, r: &Report, in_episode: bool) {
        let (now, timeout) = (r.now, r.timeout);
        if timeout || !in_episode {
            let before = Before { cwnd: self.cwnd, ssthresh: self.ssthresh };
            self.ssthresh = (self.cwnd / 2).max(self.min_cwnd());
            self.cwnd = if timeout { LOSS_WINDOW_PACKETS * self.mss } else { self.ssthresh };
            self.episode.begin(r, self.srtt, before);
        }
        self.round = Round::begin(now);
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    fn on_report(&mut self, r: &Report) -> Decision {
        self.observe_rtt(r);
        self.episode.take_back(r, &mut self.cwnd, &mut self.ssthresh);
        let in_episode = self.episode.contains(r);
        if r.timeout || r.congestion_signal() {
            self.on_loss(r, in_episode);
        } else if !self.round_is_over(r.now) {
            if self.in_slow_start() {
                self.slow_start(r.bytes_acked);
            }
        } else {
            let round = self.round;
            match (round.min_rtt, self.base_rtt) {
                (Some(rtt), Some(base)) if round.samples >= MIN_RTT_SAMPLES_PER_ROUND => {
                    self.vegas_cong_avoid(rtt, base, r.bytes_acked)
                }
                _ => self.reno_cong_avoid(r.bytes_acked),
            }
            self.round = Round::begin(r.now);
        }
        self.cwnd = self.cwnd.max(self.min_cwnd());
        self.decision()
    }

    crate::window_controls::window_methods!(decision, sync, ssthresh);

    fn estimates(&self) -> Estimates {
        Estimates {
            srtt: self.srtt,
            bandwidth: self.srtt.map(|s| rate_of_window(self.cwnd, s)),
            min_rtt: self.base_rtt,
        }
    }
}

impl Algorithm for VegasConfig {
    type Controller = Vegas;
    const NAME: &'static str = "vegas";
    const SUMMARY: &'static str = "TCP Vegas: keeps alpha..beta packets queued, from the RTT over the base RTT";

    fn build(&self, info: FlowInfo) -> Vegas {
        let mss = info.mss_bytes.max(1);
        let init =
            self.init_cwnd_packets.map_or(info.init_cwnd_bytes, |p| p.saturating_mul(mss)).max(MIN_CWND_PACKETS * mss);
        Vegas {
            mss,
            alpha: self.alpha_packets as f64,
            beta: self.beta_packets.max(self.alpha_packets) as f64,
            gamma: self.gamma_packets as f64,
            cwnd: init,
            ssthresh: u64::MAX,
            base_rtt: None,
            round: Round::begin(Duration::ZERO),
            episode: LossEpisode::default(),
            srtt: None,
        }
    }

    fn validate(&self) -> Result<(), PolicyError> {
        if self.alpha_packets == 0 || self.alpha_packets > self.beta_packets {
            return Err(PolicyError::InvalidParameter {
                algorithm: Self::NAME,
                reason: format!(
                    "need 0 < alpha_packets <= beta_packets, got alpha_packets {} and beta_packets {}",
                    self.alpha_packets, self.beta_packets
                ),
            });
        }
        check_init_cwnd(Self::NAME, self.init_cwnd_packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack_report, loss_report, FluidPath};
    use crate::{Rate, Sync};

    const MSS: u64 = 1000;
    const RTT: Duration = Duration::from_millis(50);

    fn vegas_with(config: VegasConfig) -> Vegas {
        config.build(FlowInfo { mss_bytes: MSS, init_cwnd_bytes: 10 * MSS })
    }

    fn vegas() -> Vegas {
        vegas_with(VegasConfig::default())
    }

    fn packets(d: Decision) -> u64 {
        d.cwnd_bytes / MSS
    }

    #[test]
    fn slow_start_doubles_per_rtt_without_a_queue() {
        let mut v = vegas();
        let d = v.on_report(&ack_report(RTT, RTT, 10 * MSS, MSS));
        assert_eq!(packets(d), 20);
        let d = v.on_report(&ack_report(RTT * 2, RTT, 20 * MSS, MSS));
        assert_eq!(packets(d), 40);
    }

    #[test]
    fn slow_start_ends_at_the_actual_rate_once_a_queue_shows() {
        let mut v = vegas_with(VegasConfig { init_cwnd_packets: Some(40), ..VegasConfig::default() });
        v.on_report(&ack_report(RTT, RTT, 40 * MSS, MSS)); // baseRTT 50 ms, cwnd 80
                                                           // 60 ms: diff = 80 * 10 / 50 = 16 > gamma; target = 80 * 50 / 60 = 66.7 packets.
        let d = v.on_report(&ack_report(RTT * 2 + Duration::from_millis(10), Duration::from_millis(60), 80 * MSS, MSS));
        assert_eq!(d.cwnd_bytes, 66_666 + MSS);
        assert!(!v.in_slow_start());
    }

    #[test]
    fn avoidance_moves_one_packet_per_rtt_towards_alpha_beta() {
        let mut v = vegas_with(VegasConfig { init_cwnd_packets: Some(50), ..VegasConfig::default() });
        v.on_report(&ack_report(RTT, RTT, 0, MSS)); // baseRTT 50 ms
        v.ssthresh = 0; // avoidance
        let mut now = RTT;
        let mut step = |v: &mut Vegas, rtt_ms: u64| {
            let rtt = Duration::from_millis(rtt_ms);
            now += rtt;
            packets(v.on_report(&ack_report(now, rtt, 50 * MSS, MSS)))
        };
        assert_eq!(step(&mut v, 51), 51, "diff = 50 * 1/50 = 1 < alpha: +1");
        assert_eq!(step(&mut v, 53), 51, "diff = 51 * 3/50 = 3.06: hold");
        assert_eq!(step(&mut v, 55), 50, "diff = 51 * 5/50 = 5.1 > beta: -1");
    }

    #[test]
    fn rounds_with_fewer_than_three_samples_behave_as_reno() {
        let mut v = vegas_with(VegasConfig { init_cwnd_packets: Some(50), ..VegasConfig::default() });
        v.ssthresh = 0;
        // A 10 ms queue (diff 10 > beta) would shrink Vegas; with 2 samples Reno adds 1 MSS.
        v.on_report(&Report { rtt_samples: 2, ..ack_report(RTT, RTT, 0, MSS) });
        let late = Duration::from_millis(60);
        let d = v.on_report(&Report { rtt_samples: 2, ..ack_report(RTT + late, late, 50 * MSS, MSS) });
        assert_eq!(packets(d), 51);
    }

    #[test]
    fn reports_inside_a_round_do_not_move_avoidance() {
        let mut v = vegas_with(VegasConfig { init_cwnd_packets: Some(50), ..VegasConfig::default() });
        v.on_report(&ack_report(RTT, RTT, 0, MSS));
        v.ssthresh = 0;
        // Four 10 ms ACK batches: the round (one 50 ms RTT) ends with the fifth.
        for i in 1..5 {
            let d = v.on_report(&ack_report(RTT + Duration::from_millis(10 * i), RTT, 10 * MSS, MSS));
            assert_eq!(packets(d), 50);
        }
        let d = v.on_report(&ack_report(RTT * 2, RTT, 10 * MSS, MSS));
        assert_eq!(packets(d), 51, "no queue: diff 0 < alpha");
    }

    #[test]
    fn loss_halves_once_per_episode_and_timeout_restarts() {
        let mut v = vegas();
        assert_eq!(packets(v.on_report(&ack_report(RTT, RTT, 30 * MSS, MSS))), 40);
        assert_eq!(packets(v.on_report(&loss_report(RTT * 2, 1))), 20);
        assert_eq!(packets(v.on_report(&loss_report(RTT * 2 + Duration::from_millis(10), 3))), 20);
        assert_eq!(packets(v.on_report(&loss_report(RTT * 4, 1))), 10);
        let d = v.on_report(&Report { now: RTT * 5, timeout: true, ..Report::default() });
        assert_eq!(packets(d), 2); // the loss window, as Reno
        assert_eq!(v.ssthresh, 5 * MSS);
    }

    #[test]
    fn never_below_two_packets() {
        let mut v = vegas_with(VegasConfig { init_cwnd_packets: Some(3), ..VegasConfig::default() });
        v.on_report(&ack_report(RTT, RTT, 0, MSS));
        v.ssthresh = 0;
        // A huge standing delay: diff > beta every round.
        let mut now = RTT;
        for _ in 0..20 {
            now += RTT * 10;
            let d = v.on_report(&ack_report(now, RTT * 10, 3 * MSS, MSS));
            assert!(d.cwnd_bytes >= 2 * MSS);
        }
        assert_eq!(packets(v.decision()), 2);
        for i in 0..20 {
            v.on_report(&loss_report(now + RTT * 2 * i, 1));
        }
        assert_eq!(packets(v.decision()), 2);
    }

    #[test]
    fn loss_only_reports_without_rtt_samples_do_not_panic() {
        let mut v = vegas();
        for i in 1..50u32 {
            let d = v.on_report(&loss_report(RTT * i, 1));
            assert!(d.cwnd_bytes >= 2 * MSS);
            v.on_report(&Report { now: RTT * i, interval: RTT, bytes_acked: 4 * MSS, ..Report::default() });
        }
        assert_eq!(v.estimates().min_rtt, None);
        assert!(v.on_report(&Report::default()).cwnd_bytes >= 2 * MSS);
    }

    /// Run Vegas on a 20 Mbit/s, 40 ms path with `buffer_bdps` BDPs of buffer; returns the
    /// utilization, the mean queue in packets and the mean RTT over base, over the second half.
    fn run_on_fluid_path(buffer_bdps: u64, steps: usize) -> (f64, f64, f64) {
        let bw = Rate::from_mbps(20.0);
        let rtt = Duration::from_millis(40);
        let bdp = bytes_from_f64(bw.bytes_over(rtt));
        let mut path = FluidPath::new(bw, rtt, buffer_bdps * bdp, MSS);
        let s = path.run(&mut vegas(), steps);
        (s.utilization, s.mean_queue_packets, s.mean_rtt.as_secs_f64() / rtt.as_secs_f64())
    }

    #[test]
    fn holds_between_alpha_and_beta_packets_queued_on_a_fluid_path() {
        let (util, queue, rtt_ratio) = run_on_fluid_path(4, 600);
        assert!(util > 0.9, "utilization {util}");
        assert!(queue >= ALPHA_PACKETS as f64 && queue <= BETA_PACKETS as f64, "queue {queue} packets");
        assert!(rtt_ratio < 1.05, "mean RTT / base {rtt_ratio}");
    }

    #[test]
    fn sync_adopts_the_window_and_keeps_the_path_estimates() {
        let mut v = vegas();
        v.on_report(&ack_report(RTT, RTT, 10 * MSS, MSS));
        v.sync(Sync::Cwnd(70 * MSS));
        assert_eq!(packets(v.decision()), 70);
        assert_eq!(v.estimates().min_rtt, Some(RTT));
        v.sync(Sync::Rate(Rate::from_bytes_per_sec(1_000_000.0)));
        assert_eq!(packets(v.decision()), 50, "rate * srtt");
        v.sync(Sync::Cwnd(1));
        assert_eq!(packets(v.decision()), 2);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn report() -> impl Strategy<Value = Report> {
            (0u64..5_000, 0u64..2_000_000, 0u64..3, any::<bool>(), prop::option::of(0u64..2_000), 0u64..50).prop_map(
                |(dt_ms, acked, lost, timeout, rtt_ms, samples)| {
                    let rtt = rtt_ms.map(Duration::from_millis);
                    Report {
                        now: Duration::from_millis(dt_ms),
                        interval: Duration::from_millis(dt_ms / 4),
                        bytes_acked: acked,
                        packets_acked: acked / MSS,
                        packets_lost: lost,
                        timeout: timeout && lost == 2,
                        rtt_last: rtt,
                        rtt_min: rtt,
                        rtt_sum: rtt.unwrap_or_default() * u32::try_from(samples).unwrap_or(0),
                        rtt_samples: samples,
                        ..Report::default()
                    }
                },
            )
        }

        proptest! {
            #[test]
            fn random_reports_keep_the_window_at_or_above_two_packets(reports in prop::collection::vec(report(), 1..200)) {
                let mut v = vegas();
                let mut now = Duration::ZERO;
                for mut r in reports {
                    now += r.now;
                    r.now = now;
                    let d = v.on_report(&r);
                    prop_assert!(d.cwnd_bytes >= 2 * MSS);
                }
            }
        }
    }
}
