//! Copa (Arun and Balakrishnan, NSDI'18; genericCC; the CCP port).
//!
//! Model (packets and seconds; reference section 4):
//!
//! ```text
//!   d_q      = RTT_standing - RTT_min                  queueing delay
//!   lambda_t = 1 / (delta * d_q)                       target rate (infinite when d_q = 0)
//!   lambda   = cwnd / RTT_standing                     current rate
//!   per ACK:  cwnd += v / (delta * cwnd)   if lambda <= lambda_t
//!             cwnd -= v / (delta * cwnd)   otherwise
//! ```
//!
//! At equilibrium lambda = lambda_t, so each flow keeps about `1/delta` packets queued (2 with the
//! default delta = 0.5). `RTT_min` is the minimum over max(10 s, 20 RTT), `RTT_standing` the
//! minimum over the last srtt/2 (srtt: EWMA with gain 1/16). The velocity `v` is 1, doubles every
//! RTT once the window has moved the same way for more than 3 RTTs, and returns to 1 when the
//! direction flips.
//!
//! States:
//!
//! ```text
//!   SlowStart --first decrease decision or loss--> Avoidance { Default }
//!   Avoidance { Default } <--queue nearly empty / persistent queue--> Avoidance { Competitive }
//!   Avoidance { _ } --timeout--> SlowStart
//! ```
//!
//! `SlowStart` doubles the window per RTT while the rule says increase. In `Avoidance` the mode
//! picks delta: `Default` uses the configured delta; `Competitive` (entered when the queue never
//! nearly empties over the last 4 RTTs, `min_recent > RTT_min + 0.1 (max_recent - RTT_min)`,
//! which means a buffer-filling competitor) runs AIMD on `1/delta`: +1 per RTT without loss,
//! halved on loss at most once per RTT, and never below the configured `1/delta`.
//!
//! References: Copa, NSDI'18, sections 2.1-2.2 and 3; genericCC (`copa` sender); the CCP port
//! (ccp-project, reports every base_rtt/2, floor at the initial window).
//!
//! Differences from the reference:
//! - Reports, not ACKs. Reports arrive once per RTT (or per half RTT, or per fixed interval), so
//!   the per-ACK rule is summed over a report, with the report's single comparison as the
//!   direction and `acked = bytes_acked / mss` (`packets_acked` when no byte count is given).
//!   The sum is taken in closed form, `cwnd' = sqrt(cwnd^2 +/- 2 v acked / delta)` (each ACK
//!   changes `cwnd^2` by `2 v / delta`), rather than the CCP port's `v acked / (delta cwnd)` with
//!   `cwnd` held: the two agree (about `v / delta` per RTT) when a report acks about one window,
//!   but as a copilot Copa's window is virtual and a report can ack many times it (a BBR-paced
//!   sender): the held form then added 96 packets to a 2-packet window in one report, the closed
//!   form adds 18, as per-ACK Copa would.
//! - RTT_standing from report summaries. A report no longer than srtt/2 contributes its `rtt_min`,
//!   and the previous reports that ended within srtt/2 contribute theirs. A report longer than
//!   srtt/2 (the once-per-RTT default) contains the whole srtt/2 window in its second half: the
//!   minimum over it lies between the report's `rtt_min` and `min(rtt_second_half_mean,
//!   rtt_last)`, and we take that upper bound. The whole-report minimum would mostly describe the
//!   queue one RTT ago and makes slow start overshoot by a full window. The same holds for a
//!   previous report that began before the srtt/2 window and ended inside it: only its tail
//!   (the same bound) counts. Counting its whole minimum let 20 ms reports on a 40 ms path see
//!   up to 40 ms back, a round of extra lag.
//! - Copa asks for four reports per RTT ([`crate::report::sub_rtt_interval`]), so RTT_standing is
//!   a minimum of samples rather than the tail bound above. The bound is a mean: where RTT
//!   samples jitter by a fraction of a millisecond with no queue (the QEMU guest: per-report
//!   minima 0.3-0.5 ms above RTT_min, second-half means 1-2 ms above), it read a queue of 1-2 ms,
//!   and a target rate `1 / (delta d_q)` of 1,000-2,000 packets/s held Copa at 0.52-0.68 of a
//!   50 Mbit/s, 30 ms link with 1 % loss (simulator 0.985). With quarter-RTT reports
//!   (`--report-interval 8ms`, 3 runs each in one guest boot) 0.729 against 0.646: what is left
//!   is the guest's sub-millisecond floor itself, two packets' worth of queue at this rate.
//! - srtt is updated once per report with the report's mean RTT, weighted as if the EWMA with
//!   gain 1/16 had been applied once per sample: `w = 1 - (15/16)^samples`.
//! - RTT_min uses a three-sample windowed minimum (Linux `lib/win_minmax.c`) over
//!   max(10 s, 20 srtt), not a list of samples.
//! - Rounds ("each RTT") are report-driven: a round ends on the first report at least
//!   3/4 min(srtt, RTT_standing) after the round began. Velocity, the mode check and the competitive
//!   AIMD step run at round ends. The direction of a round is the sign of the window change Copa
//!   itself made in it; changes imposed by `sync` do not count.
//! - Mode check: a window of rounds in each of which Copa lowered its own window keeps the
//!   current mode: that queue may be Copa's own (draining a slow-start overshoot or a capacity
//!   drop takes more than 4 RTTs), and the paper's test alone would switch to competitive mode.
//!   A queue exactly at `RTT_min + 0.1 (max_recent - RTT_min)` counts as nearly empty, so a
//!   constant RTT at RTT_min is default mode. Otherwise the paper's test is kept as is: on a
//!   path whose feedback is exact (the fluid test path) a lone flow's two-packet oscillation can
//!   stay above that threshold for 4 rounds, and Copa then visits competitive mode briefly until
//!   its larger steps empty the queue (mean queue there stays about 1.5 packets).
//! - A decision against the direction the velocity was built in resets it to 1 at once (as
//!   mvfst's Copa does), not at the end of the round: with reports, one report would otherwise
//!   apply a whole RTT of the old velocity the wrong way (a window's worth after a drain).
//! - The velocity is capped so that one RTT's change is at most an eighth of the window
//!   (`v <= max(1, cwnd * delta / 8)`: x1.12 up or x0.87 down per window acked, closed form);
//!   the reference leaves it unbounded. The cap was the whole window (`v <= delta * cwnd`), which
//!   in closed form multiplies the window by 1.7 in a round up and empties it in a round down.
//!   With once-per-RTT reports the comparison lags the window by about one round and the
//!   direction flips before v gets there. With sub-RTT reports (every 5-20 ms, the CCP port's
//!   half RTT) the lag is 2-3 rounds (RTT_standing spans srtt/2 of older reports, rounds are 3/4
//!   RTT, each report re-applies the comparison), so v doubled twice more after the window had
//!   passed its target: up to 2-3 BDP, then the drain took it to the 2-packet floor and the
//!   ramp restarted at v = 1, a ~1.2 s cycle (20 Mbit/s, 40 ms: utilization 0.72-0.77, mean RTT
//!   1.7-2.1x base; with the cap 0.97-0.99 and 1.07-1.11x at every cadence from 5 ms to once per
//!   RTT). The price: after a large capacity change the window moves at most 12 % per RTT.
//! - Floor of 2 packets (Linux's minimum window), not the CCP port's initial window: the initial
//!   window (10 packets) exceeds the BDP of slow, short paths and would pin a standing queue there.
//! - Rate: the decision's rate is the sending rate `cwnd / RTT_standing`, not the reference's
//!   pacing rate `2 cwnd / RTT_standing`. Copa stays window-limited either way (RTT_standing is
//!   a minimum, so `cwnd / RTT_standing >= cwnd / RTT`); what changes is that the rate is
//!   comparable with other algorithms' sending rates, which PolyCC's fusion on rate needs:
//!   `min(BBR, Copa)` then means "BBR, but never faster than Copa's delay target allows" (a
//!   capacity drop shows up in Copa's rate within a round while BBR's max filter holds the old
//!   bandwidth for 10 rounds). `sync(Sync::Rate(r))` sets `cwnd = r * RTT_standing`, so after
//!   it `decision().rate == r` (up to the floor) and syncing Copa to its own rate changes nothing.
//! - A loss in slow start also ends it (without a reduction): with a buffer too shallow to show
//!   delay the reference would double until the timeout. A timeout restarts slow start from
//!   min(cwnd, initial window) with velocity 1 and the configured delta; the papers leave
//!   timeouts to the transport.
//! - Default mode ignores loss, as in the paper.

use crate::config::PolicyError;
use crate::filters::WindowedMin;
use crate::units::{bytes_from_f64, Rate};
use crate::{CongestionControl, Decision, Estimates, FlowInfo, Report, Sync};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// Default delta: weight of delay against throughput, 1/delta packets of queue per flow (paper 2.1).
pub const DEFAULT_DELTA: f64 = 0.5;
/// Largest delta accepted: more than 1 would target under one packet of queue.
pub const MAX_DELTA: f64 = 1.0;
/// Smallest delta accepted from a config (1/delta = 1000 packets of queue per flow).
pub const MIN_DELTA: f64 = 1e-3;
/// The smallest window Copa keeps, in packets (Linux's minimum; see the header).
pub const MIN_CWND_PACKETS: u64 = 2;
/// srtt EWMA gain per RTT sample (genericCC).
pub const SRTT_GAIN: f64 = 1.0 / 16.0;
/// RTT_min is the minimum over at least this long (paper 2.1)...
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// ...and at least this many srtts (paper 2.1).
pub const MIN_RTT_WINDOW_RTTS: u32 = 20;
/// RTT_standing is the minimum over srtt / this (paper 2.1: srtt/2).
pub const STANDING_WINDOW_DIVISOR: u32 = 2;
/// Reports kept for RTT_standing; enough for 1 ms reports on a 64 ms path, a bound on memory.
pub const STANDING_HISTORY_REPORTS: usize = 32;
/// A round ("each RTT") ends on the first report at least this fraction of min(srtt,
/// RTT_standing) after it began: once-per-RTT reports whose interval is a slightly older RTT
/// still end one round each, half-RTT reports end one every two.
pub const ROUND_FRACTION: f64 = 0.75;
/// Velocity doubles once the direction has held for more than this many RTTs (paper 2.1).
pub const VELOCITY_HOLD_RTTS: u32 = 3;
/// The velocity is capped so that a window of ACKs moves the window by at most this fraction
/// of it: `v / delta <= fraction * cwnd`, i.e. `cwnd' = cwnd * sqrt(1 +/- 2 fraction)` in closed
/// form, x1.12 up or x0.87 down per RTT (see the header on why not the whole window).
pub const VELOCITY_CAP_WINDOW_FRACTION: f64 = 0.125;
/// Rounds over which the mode check looks for a nearly empty queue (paper 2.2: "the last 4 RTTs",
/// so the queue must empty at least once every 5 RTTs).
pub const MODE_WINDOW_RTTS: usize = 4;
/// The queue is nearly empty below this fraction of the recent maximum queueing delay (paper 2.2).
pub const NEARLY_EMPTY_FRACTION: f64 = 0.1;

/// Copa's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CopaConfig {
    /// delta in default mode, and the upper bound of delta in competitive mode. Each flow keeps
    /// about 1/delta packets queued. Default 0.5 (paper). Outside [0.001, 1] it is clamped;
    /// non-finite or non-positive values fall back to the default (see [`CopaConfig::validate`]).
    pub delta: f64,
    /// Switch to competitive mode (AIMD on 1/delta) when the queue never nearly empties, i.e.
    /// when a buffer-filling flow shares the bottleneck. Default true (paper). When false Copa
    /// always uses `delta`.
    pub mode_switching: bool,
    /// Initial window in packets; `None` takes the datapath's (Linux: 10).
    pub init_cwnd_packets: Option<u64>,
}

impl Default for CopaConfig {
    fn default() -> Self {
        CopaConfig { delta: DEFAULT_DELTA, mode_switching: true, init_cwnd_packets: None }
    }
}

impl CopaConfig {
    /// Check the parameters; `build` clamps instead of failing.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.delta.is_finite() && (MIN_DELTA..=MAX_DELTA).contains(&self.delta) {
            Ok(())
        } else {
            Err(PolicyError::InvalidParameter {
                algorithm: "copa",
                reason: format!(
                    "delta {} must be between {MIN_DELTA} and {MAX_DELTA} (default {DEFAULT_DELTA})",
                    self.delta
                ),
            })
        }
    }

    /// delta as `build` uses it.
    fn sanitized_delta(&self) -> f64 {
        if self.delta.is_finite() && self.delta > 0.0 {
            self.delta.clamp(MIN_DELTA, MAX_DELTA)
        } else {
            DEFAULT_DELTA
        }
    }

    pub fn build(&self, info: FlowInfo) -> Copa {
        let mss = info.mss_bytes.max(1);
        let init_bytes = self.init_cwnd_packets.map_or(info.init_cwnd_bytes, |p| p.saturating_mul(mss));
        let init_cwnd_pkts = (init_bytes as f64 / mss as f64).max(MIN_CWND_PACKETS as f64);
        let default_inv_delta = 1.0 / self.sanitized_delta();
        Copa {
            mss,
            mode_switching: self.mode_switching,
            default_inv_delta,
            init_cwnd_pkts,
            cwnd_pkts: init_cwnd_pkts,
            inv_delta: default_inv_delta,
            state: CopaState::SlowStart,
            srtt: None,
            min_rtt: WindowedMin::default(),
            standing_rtt: None,
            standing_history: VecDeque::with_capacity(STANDING_HISTORY_REPORTS),
            velocity: 1.0,
            direction: None,
            same_direction_rtts: 0,
            round: Round::starting_at(Duration::ZERO),
            recent_rounds: VecDeque::with_capacity(MODE_WINDOW_RTTS),
        }
    }
}

/// How Copa picks delta (paper 2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopaMode {
    /// delta as configured: about 1/delta packets of queue.
    Default,
    /// AIMD on 1/delta against buffer-filling competitors.
    Competitive,
}

/// Copa's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopaState {
    /// Double the window per RTT until the first decrease decision.
    SlowStart,
    /// The per-ACK rule with velocity, in a mode.
    Avoidance { mode: CopaMode },
}

impl CopaState {
    fn can_become(self, next: CopaState) -> bool {
        use CopaState::*;
        matches!(
            (self, next),
            (SlowStart, Avoidance { mode: CopaMode::Default })
                | (Avoidance { mode: CopaMode::Default }, Avoidance { mode: CopaMode::Competitive })
                | (Avoidance { mode: CopaMode::Competitive }, Avoidance { mode: CopaMode::Default })
                | (Avoidance { .. }, SlowStart)
        )
    }
}

/// Which way Copa moved its own window over a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// The round in progress.
#[derive(Clone, Copy, Debug)]
struct Round {
    start: Duration,
    rtt_min: Option<Duration>,
    rtt_max: Option<Duration>,
    /// Net window change (packets) Copa itself made in the round.
    own_change_pkts: f64,
    /// Competitive mode already doubled delta for a loss in this round.
    loss_handled: bool,
}

impl Round {
    fn starting_at(start: Duration) -> Round {
        Round { start, rtt_min: None, rtt_max: None, own_change_pkts: 0.0, loss_handled: false }
    }

    fn direction(&self) -> Option<Direction> {
        if self.own_change_pkts > 0.0 {
            Some(Direction::Up)
        } else if self.own_change_pkts < 0.0 {
            Some(Direction::Down)
        } else {
            None
        }
    }
}

/// What the mode check remembers of a finished round.
#[derive(Clone, Copy, Debug)]
struct RoundSummary {
    rtt_min: Duration,
    rtt_max: Duration,
    direction: Option<Direction>,
}

/// What RTT_standing remembers of a report.
#[derive(Clone, Copy, Debug)]
struct ReportRtts {
    start: Duration,
    end: Duration,
    /// The report's smallest RTT.
    min: Duration,
    /// An upper bound on the minimum over the report's second half: `min(rtt_second_half_mean,
    /// rtt_last)`, never below `min`.
    tail_bound: Duration,
}

impl ReportRtts {
    fn of(r: &Report, min: Duration) -> ReportRtts {
        let tail = [r.rtt_second_half_mean, r.rtt_last].into_iter().flatten().filter(|d| !d.is_zero()).min();
        ReportRtts {
            start: r.now.saturating_sub(r.interval),
            end: r.now,
            min,
            tail_bound: tail.map_or(min, |t| t.max(min)),
        }
    }

    /// The report's share of the minimum over a window beginning at `from`: its own minimum
    /// when it lies wholly inside, the bound on its second half when only its tail does (its
    /// minimum may be a sample from before the window, older than RTT_standing may look).
    fn min_since(&self, from: Duration) -> Duration {
        if self.start >= from {
            self.min
        } else {
            self.tail_bound
        }
    }
}

/// Per-flow Copa state.
#[derive(Clone, Debug)]
pub struct Copa {
    mss: u64,
    mode_switching: bool,
    /// 1/delta of the default mode (and the floor of 1/delta in competitive mode).
    default_inv_delta: f64,
    init_cwnd_pkts: f64,
    cwnd_pkts: f64,
    /// 1/delta in use.
    inv_delta: f64,
    state: CopaState,
    srtt: Option<Duration>,
    min_rtt: WindowedMin,
    standing_rtt: Option<Duration>,
    /// (end of report, smallest RTT of report) for RTT_standing.
    standing_history: VecDeque<ReportRtts>,
    velocity: f64,
    direction: Option<Direction>,
    /// Consecutive rounds (including the last) in which the window moved in `direction`.
    same_direction_rtts: u32,
    round: Round,
    recent_rounds: VecDeque<RoundSummary>,
}

impl Copa {
    pub fn state(&self) -> CopaState {
        self.state
    }

    /// delta in use (the configured one in default mode).
    pub fn delta(&self) -> f64 {
        1.0 / self.inv_delta
    }

    pub fn velocity(&self) -> f64 {
        self.velocity
    }

    /// The window in packets, unrounded.
    pub fn cwnd_packets(&self) -> f64 {
        self.cwnd_pkts
    }

    /// RTT_standing as last estimated.
    pub fn standing_rtt(&self) -> Option<Duration> {
        self.standing_rtt
    }

    fn min_cwnd_pkts(&self) -> f64 {
        MIN_CWND_PACKETS as f64
    }

    fn transition_to(&mut self, next: CopaState) {
        if next == self.state {
            return;
        }
        debug_assert!(self.state.can_become(next), "illegal Copa transition {:?} -> {:?}", self.state, next);
        self.state = next;
        // Rounds seen in another state say nothing about this one.
        self.recent_rounds.clear();
        match next {
            CopaState::SlowStart | CopaState::Avoidance { mode: CopaMode::Default } => {
                self.inv_delta = self.default_inv_delta
            }
            CopaState::Avoidance { mode: CopaMode::Competitive } => {}
        }
        if next == CopaState::SlowStart {
            self.reset_velocity();
        }
    }

    fn reset_velocity(&mut self) {
        self.velocity = 1.0;
        self.direction = None;
        self.same_direction_rtts = 0;
    }

    /// The RTT the window is measured against: RTT_standing, else srtt.
    fn rate_rtt(&self) -> Option<Duration> {
        self.standing_rtt.or(self.srtt).filter(|d| !d.is_zero())
    }

    /// srtt <- srtt + w (mean - srtt), `w = 1 - (1 - 1/16)^samples`: the per-sample EWMA
    /// applied to `samples` samples of the report's mean.
    fn update_srtt(&mut self, r: &Report) {
        let Some(mean) = r.rtt_mean().or(r.rtt_last).filter(|d| !d.is_zero()) else { return };
        self.srtt = Some(match self.srtt {
            None => mean,
            Some(s) => {
                let samples = i32::try_from(r.rtt_samples.max(1)).unwrap_or(i32::MAX);
                let w = 1.0 - (1.0 - SRTT_GAIN).powi(samples);
                let next = s.as_secs_f64() + w * (mean.as_secs_f64() - s.as_secs_f64());
                Duration::try_from_secs_f64(next).unwrap_or(mean)
            }
        });
    }

    /// RTT_min = min over max(10 s, 20 srtt).
    fn update_min_rtt(&mut self, r: &Report) {
        let Some(sample) = r.rtt_min.or(r.rtt_last).filter(|d| !d.is_zero()) else { return };
        let win = MIN_RTT_WINDOW.max(self.srtt.unwrap_or_default().saturating_mul(MIN_RTT_WINDOW_RTTS));
        self.min_rtt.update(r.now, sample, win);
    }

    /// RTT_standing = min RTT over the last srtt/2, from report summaries (see the header).
    fn update_standing_rtt(&mut self, r: &Report) {
        let Some(report_min) = r.rtt_min.or(r.rtt_last).filter(|d| !d.is_zero()) else { return };
        let window = self.srtt.unwrap_or(report_min) / STANDING_WINDOW_DIVISOR;
        let estimate = if r.interval > window {
            // The whole window lies in the report's second half: bound its minimum from above.
            match (r.rtt_second_half_mean, r.rtt_last) {
                (Some(a), Some(b)) => a.min(b).max(report_min),
                (Some(a), None) | (None, Some(a)) => a.max(report_min),
                (None, None) => report_min,
            }
        } else {
            report_min
        };
        while let Some(&ReportRtts { end, .. }) = self.standing_history.front() {
            if r.now.saturating_sub(end) >= window || self.standing_history.len() >= STANDING_HISTORY_REPORTS {
                self.standing_history.pop_front();
            } else {
                break;
            }
        }
        let from = r.now.saturating_sub(window);
        let standing = self.standing_history.iter().map(|h| h.min_since(from)).fold(estimate, Duration::min);
        self.standing_history.push_back(ReportRtts::of(r, report_min));
        self.standing_rtt = Some(standing);
    }

    /// The paper's test `lambda <= lambda_t`, i.e. `cwnd * delta * d_q <= RTT_standing`
    /// (d_q = 0 always increases).
    fn below_target(&self, standing: Duration, min_rtt: Duration) -> bool {
        let d_q = standing.saturating_sub(min_rtt).as_secs_f64();
        d_q == 0.0 || self.cwnd_pkts * d_q <= standing.as_secs_f64() * self.inv_delta
    }

    /// Copa's own window change; records it for the round's direction.
    fn set_own_cwnd(&mut self, cwnd_pkts: f64) {
        let next = cwnd_pkts.max(self.min_cwnd_pkts());
        self.round.own_change_pkts += next - self.cwnd_pkts;
        self.cwnd_pkts = next;
    }

    /// The per-ACK rule `cwnd +/- v / (delta * cwnd)` applied `acked` times, in closed form:
    /// `d(cwnd^2) = +/- 2 v / delta` per ACK, so `cwnd' = sqrt(cwnd^2 +/- 2 v acked / delta)`.
    /// About `+/- v / delta` packets when a window is acked.
    fn avoidance_step(&mut self, increase: bool, acked_pkts: f64) {
        let dir = if increase { Direction::Up } else { Direction::Down };
        if self.velocity > 1.0 && self.direction != Some(dir) {
            // A velocity built up in one direction must not drive the other (mvfst's Copa).
            self.reset_velocity();
        }
        let cwnd = self.cwnd_pkts.max(self.min_cwnd_pkts());
        let delta_sq = 2.0 * self.velocity * acked_pkts * self.inv_delta;
        let next_sq = if increase { cwnd * cwnd + delta_sq } else { cwnd * cwnd - delta_sq };
        self.set_own_cwnd(next_sq.max(0.0).sqrt());
    }

    fn apply_acks(&mut self, r: &Report) {
        let acked_pkts =
            if r.bytes_acked > 0 { r.bytes_acked as f64 / self.mss as f64 } else { r.packets_acked as f64 };
        if acked_pkts <= 0.0 {
            return;
        }
        let (Some(standing), Some(min_rtt)) = (self.standing_rtt, self.min_rtt.get()) else { return };
        let increase = self.below_target(standing, min_rtt);
        match self.state {
            CopaState::SlowStart if increase => self.set_own_cwnd(self.cwnd_pkts + acked_pkts),
            CopaState::SlowStart => {
                self.transition_to(CopaState::Avoidance { mode: CopaMode::Default });
                self.avoidance_step(false, acked_pkts);
            }
            CopaState::Avoidance { .. } => self.avoidance_step(increase, acked_pkts),
        }
    }

    /// Loss: ends slow start; in competitive mode doubles delta (halves 1/delta), once per round.
    fn on_loss(&mut self) {
        match self.state {
            CopaState::SlowStart => self.transition_to(CopaState::Avoidance { mode: CopaMode::Default }),
            CopaState::Avoidance { mode: CopaMode::Competitive } if !self.round.loss_handled => {
                self.inv_delta = (self.inv_delta / 2.0).max(self.default_inv_delta);
                self.round.loss_handled = true;
            }
            CopaState::Avoidance { .. } => {}
        }
    }

    fn on_timeout(&mut self) {
        self.transition_to(CopaState::SlowStart);
        self.cwnd_pkts = self.cwnd_pkts.min(self.init_cwnd_pkts).max(self.min_cwnd_pkts());
        self.round.own_change_pkts = 0.0;
    }

    fn track_round_rtts(&mut self, r: &Report) {
        let lo = r.rtt_min.or(r.rtt_last);
        let hi = [r.rtt_last, r.rtt_mean(), r.rtt_first_half_mean, r.rtt_second_half_mean, r.rtt_min]
            .into_iter()
            .flatten()
            .max();
        if let Some(lo) = lo.filter(|d| !d.is_zero()) {
            self.round.rtt_min = Some(self.round.rtt_min.map_or(lo, |m| m.min(lo)));
        }
        if let Some(hi) = hi.filter(|d| !d.is_zero()) {
            self.round.rtt_max = Some(self.round.rtt_max.map_or(hi, |m| m.max(hi)));
        }
    }

    /// Velocity: 1; doubles each round once the direction has held for more than 3 rounds;
    /// back to 1 when it flips. Capped so one round's change stays within the window.
    fn update_velocity(&mut self, dir: Option<Direction>) {
        let Some(dir) = dir else { return };
        if self.direction == Some(dir) {
            self.same_direction_rtts = self.same_direction_rtts.saturating_add(1);
            if self.same_direction_rtts > VELOCITY_HOLD_RTTS {
                let cap = (VELOCITY_CAP_WINDOW_FRACTION * self.cwnd_pkts / self.inv_delta).max(1.0);
                self.velocity = (self.velocity * 2.0).min(cap);
            }
        } else {
            self.direction = Some(dir);
            self.same_direction_rtts = 1;
            self.velocity = 1.0;
        }
    }

    /// Default vs competitive (paper 2.2; the own-drain exception is explained in the header).
    fn check_mode(&mut self, mode: CopaMode) {
        if !self.mode_switching || self.recent_rounds.len() < MODE_WINDOW_RTTS {
            return;
        }
        let Some(min_rtt) = self.min_rtt.get() else { return };
        let min_recent = self.recent_rounds.iter().map(|s| s.rtt_min).min().unwrap_or(min_rtt);
        let max_recent = self.recent_rounds.iter().map(|s| s.rtt_max).max().unwrap_or(min_rtt);
        let queue_s = min_recent.saturating_sub(min_rtt).as_secs_f64();
        let max_queue_s = max_recent.saturating_sub(min_rtt).as_secs_f64();
        let nearly_empty = queue_s <= NEARLY_EMPTY_FRACTION * max_queue_s;
        let draining_own_queue = self.recent_rounds.iter().all(|s| s.direction == Some(Direction::Down));
        let next = if nearly_empty {
            CopaMode::Default
        } else if draining_own_queue {
            mode
        } else {
            CopaMode::Competitive
        };
        if next != mode {
            self.transition_to(CopaState::Avoidance { mode: next });
        }
    }

    /// Round end: velocity, mode check, competitive additive increase; then a new round.
    fn end_round(&mut self, now: Duration) {
        let round = self.round;
        self.round = Round::starting_at(now);
        let CopaState::Avoidance { mode } = self.state else { return };
        self.update_velocity(round.direction());
        if let (Some(rtt_min), Some(rtt_max)) = (round.rtt_min, round.rtt_max) {
            if self.recent_rounds.len() == MODE_WINDOW_RTTS {
                self.recent_rounds.pop_front();
            }
            self.recent_rounds.push_back(RoundSummary { rtt_min, rtt_max, direction: round.direction() });
        }
        if mode == CopaMode::Competitive && !round.loss_handled {
            self.inv_delta += 1.0;
        }
        self.check_mode(mode);
    }

    /// A round ends on the first report at least 3/4 of min(srtt, RTT_standing) after it began.
    fn round_over(&self, now: Duration) -> bool {
        let rtt = match (self.srtt, self.standing_rtt) {
            (Some(s), Some(st)) => s.min(st),
            (Some(d), None) | (None, Some(d)) => d,
            (None, None) => return false,
        };
        now.saturating_sub(self.round.start).as_secs_f64() >= ROUND_FRACTION * rtt.as_secs_f64()
    }

    fn cwnd_bytes(&self) -> u64 {
        bytes_from_f64(self.cwnd_pkts * self.mss as f64).max(MIN_CWND_PACKETS * self.mss)
    }

    /// The sending rate `cwnd / RTT_standing` (see the header on why not 2x).
    fn sending_rate(&self) -> Option<Rate> {
        self.rate_rtt().map(|rtt| Rate::from_bytes_per_sec(self.cwnd_pkts * self.mss as f64 / rtt.as_secs_f64()))
    }
}

impl CongestionControl for Copa {
    fn name(&self) -> &'static str {
        "copa"
    }

    fn on_report(&mut self, r: &Report) -> Decision {
        self.update_srtt(r);
        self.update_min_rtt(r);
        self.update_standing_rtt(r);
        self.track_round_rtts(r);
        if r.timeout {
            self.on_timeout();
        } else {
            if r.packets_lost > 0 {
                self.on_loss();
            }
            self.apply_acks(r);
        }
        if self.round_over(r.now) {
            self.end_round(r.now);
        }
        self.cwnd_pkts = self.cwnd_pkts.max(self.min_cwnd_pkts());
        self.decision()
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: self.cwnd_bytes(), rate: self.sending_rate() }
    }

    fn sync(&mut self, to: Sync) {
        let cwnd_pkts = match to {
            Sync::Cwnd(c) => c as f64 / self.mss as f64,
            Sync::Rate(r) => match self.rate_rtt() {
                Some(rtt) => r.bytes_over(rtt) / self.mss as f64,
                None => return,
            },
        };
        if cwnd_pkts.is_finite() {
            self.cwnd_pkts = cwnd_pkts.max(self.min_cwnd_pkts());
        }
    }

    fn estimates(&self) -> Estimates {
        Estimates { bandwidth: self.sending_rate(), min_rtt: self.min_rtt.get(), srtt: self.srtt }
    }

    fn in_slow_start(&self) -> bool {
        self.state == CopaState::SlowStart
    }

    /// Four reports per RTT: see "RTT_standing" in the module notes.
    fn report_interval(&self) -> Option<Duration> {
        crate::report::sub_rtt_interval(self.min_rtt.get(), self.srtt)
    }
}


impl crate::registry::Algorithm for CopaConfig {
    const NAME: &'static str = "copa";
    const SUMMARY: &'static str = "Copa: targets a rate of 1/(delta x queueing delay), velocity-driven, with mode switching";

    fn controller(&self, info: FlowInfo) -> Box<dyn CongestionControl> {
        Box::new(self.build(info))
    }

    fn validate(&self) -> Result<(), PolicyError> {
        CopaConfig::validate(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack_report, loss_report, FluidPath};
    use proptest::prelude::*;

    const MSS: u64 = 1000;
    const RTT: Duration = Duration::from_millis(50);

    fn info() -> FlowInfo {
        FlowInfo { mss_bytes: MSS, init_cwnd_bytes: 10 * MSS }
    }

    fn copa() -> Copa {
        CopaConfig::default().build(info())
    }

    /// One RTT of ACKs for the whole current window, every sample at `rtt`.
    fn window_acked(c: &Copa, now: Duration, rtt: Duration) -> Report {
        ack_report(now, rtt, c.decision().cwnd_bytes, MSS)
    }

    /// Drive `c` through `n` once-per-RTT reports at a constant `rtt`, starting at `*now`.
    fn run_at(c: &mut Copa, now: &mut Duration, rtt: Duration, n: usize) {
        for _ in 0..n {
            *now += rtt;
            let r = window_acked(c, *now, rtt);
            c.on_report(&r);
        }
    }

    /// A Copa that has seen RTT_min = `RTT` and left slow start on a queued report.
    fn in_avoidance(now: &mut Duration) -> Copa {
        let mut c = copa();
        run_at(&mut c, now, RTT, 1);
        run_at(&mut c, now, RTT + Duration::from_millis(30), 1);
        assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
        c
    }

    /// Samples jitter within 2 ms above RTT without a queue. A once-per-RTT report's standing RTT
    /// is the tail bound (the second-half mean, 1 ms up); at the cadence Copa asks for, each
    /// report in the srtt/2 window gives its minimum.
    #[test]
    fn copa_asks_for_quarter_rtt_reports_so_jitter_does_not_read_as_a_queue() {
        assert_eq!(copa().report_interval(), None, "nothing before the first RTT sample");
        let jittered = |now: Duration, interval: Duration, c: &Copa| Report {
            interval,
            rtt_min: Some(RTT + Duration::from_micros(100)),
            rtt_last: Some(RTT + Duration::from_millis(2)),
            rtt_second_half_mean: Some(RTT + Duration::from_millis(1)),
            ..ack_report(now, RTT, c.decision().cwnd_bytes * interval.as_micros() as u64 / RTT.as_micros() as u64, MSS)
        };
        let mut now = Duration::ZERO;
        let mut per_rtt = in_avoidance(&mut now);
        let mut quarter = per_rtt.clone();
        let asked = quarter.report_interval().expect("an interval once Copa has an RTT");
        assert_eq!(asked, RTT / 4, "a quarter of RTT_min");
        let start = now;
        for _ in 0..8 {
            now += RTT;
            per_rtt.on_report(&jittered(now, RTT, &per_rtt));
        }
        let mut t = start;
        while t < now {
            t += asked;
            quarter.on_report(&jittered(t, asked, &quarter));
        }
        let standing = |c: &Copa| c.standing_rtt().unwrap().as_micros();
        assert_eq!(standing(&per_rtt), (RTT + Duration::from_millis(1)).as_micros());
        assert_eq!(standing(&quarter), (RTT + Duration::from_micros(100)).as_micros());
        // d_q of 0.1 ms instead of 1 ms: a target rate ten times higher, and a window that grew.
        assert!(
            quarter.cwnd_packets() > per_rtt.cwnd_packets(),
            "{} <= {}",
            quarter.cwnd_packets(),
            per_rtt.cwnd_packets()
        );
    }

    #[test]
    fn closed_form_report_step_matches_the_per_ack_rule() {
        let mut now = Duration::ZERO;
        let mut c = in_avoidance(&mut now);
        c.cwnd_pkts = 100.0;
        let mut per_ack = 100.0_f64;
        for _ in 0..100 {
            per_ack += 1.0 / (0.5 * per_ack);
        }
        c.avoidance_step(true, 100.0);
        assert!((c.cwnd_pkts - per_ack).abs() < 0.01, "closed form {} vs per-ACK {per_ack}", c.cwnd_pkts);
        // A window acked moves the window by about v / delta = 2 packets.
        assert!((c.cwnd_pkts - 102.0).abs() < 0.05, "{}", c.cwnd_pkts);
        // Many windows acked against a tiny window (a copilot behind a paced pilot) grow it like
        // per-ACK Copa would, not by v * acked / (delta * cwnd) = 96 packets.
        c.cwnd_pkts = 2.0;
        c.avoidance_step(true, 96.0);
        assert!((c.cwnd_pkts - (4.0_f64 + 384.0).sqrt()).abs() < 1e-9, "{}", c.cwnd_pkts);
    }

    #[test]
    fn window_converges_to_the_target_rate_for_a_fixed_queueing_delay() {
        // RTT_min 50 ms, then a constant RTT_standing of 51 ms: d_q = 1 ms, so the target rate
        // is 1 / (0.5 * 1 ms) = 2000 packets/s and the target window 2000 * 51 ms = 102 packets.
        let mut c = CopaConfig { mode_switching: false, ..CopaConfig::default() }.build(info());
        let mut now = Duration::ZERO;
        run_at(&mut c, &mut now, RTT, 1);
        let standing = RTT + Duration::from_millis(1);
        run_at(&mut c, &mut now, standing, 100);
        let mut windows = Vec::new();
        for _ in 0..50 {
            now += standing;
            let d = c.on_report(&window_acked(&c, now, standing));
            windows.push(d.cwnd_bytes as f64 / MSS as f64);
        }
        let mean = windows.iter().sum::<f64>() / windows.len() as f64;
        let (lo, hi) = windows.iter().fold((f64::MAX, f64::MIN), |(l, h), w| (l.min(*w), h.max(*w)));
        println!("window mean {mean:.2} packets, range {lo:.1}..{hi:.1} (target 102)");
        assert!((mean - 102.0).abs() < 3.0, "mean window {mean}");
        assert!(hi - lo < 8.0, "oscillation {lo}..{hi}");
        let rate_pkts = c.decision().rate.unwrap().bytes_per_sec() / MSS as f64;
        assert!((rate_pkts - 2000.0).abs() < 100.0, "rate {rate_pkts} packets/s");
    }

    #[test]
    fn fluid_path_with_a_deep_buffer_keeps_about_two_packets_queued() {
        let bw = Rate::from_mbps(20.0);
        let base = Duration::from_millis(40);
        let mut path = FluidPath::new(bw, base, 4 * 100_000, MSS);
        let s = path.run(&mut copa(), 400);
        let (util, mean_rtt, mean_queue) = (s.utilization, s.mean_rtt.as_secs_f64(), s.mean_queue_packets);
        println!("utilization {util:.3}, mean RTT {:.2} ms, mean queue {mean_queue:.2} packets", mean_rtt * 1e3);
        assert!(util >= 0.8, "utilization {util}");
        assert!(mean_rtt <= 1.3 * base.as_secs_f64(), "mean RTT {mean_rtt}");
        assert!((0.5..=4.0).contains(&mean_queue), "mean queue {mean_queue} packets, expected about 1/delta = 2");
    }

    #[test]
    fn velocity_doubles_after_three_same_direction_rtts_and_resets_on_a_flip() {
        let mut now = Duration::ZERO;
        let mut c = in_avoidance(&mut now);
        // Large enough that the velocity cap (1/8 of the window per RTT) stays out of the way.
        c.cwnd_pkts = 200.0;
        // No queue: every round increases. Rounds 1-3 in the new direction keep v = 1, each
        // further round doubles it.
        let mut seen = Vec::new();
        for _ in 0..6 {
            run_at(&mut c, &mut now, RTT, 1);
            seen.push(c.velocity());
        }
        assert_eq!(seen, vec![1.0, 1.0, 1.0, 2.0, 4.0, 8.0]);
        // The queue comes back: the first decrease resets v to 1 at once and moves the window
        // by about v / delta = 2 packets, not 16.
        let before = c.cwnd_packets();
        run_at(&mut c, &mut now, RTT + Duration::from_millis(20), 1);
        assert_eq!(c.velocity(), 1.0);
        assert!((before - c.cwnd_packets() - 2.0).abs() < 0.2, "{before} -> {}", c.cwnd_packets());
    }

    #[test]
    fn slow_start_doubles_per_rtt_then_exits_on_the_first_decrease() {
        let mut c = copa();
        let mut now = Duration::ZERO;
        let mut windows = Vec::new();
        for _ in 0..3 {
            run_at(&mut c, &mut now, RTT, 1);
            windows.push(c.decision().cwnd_bytes / MSS);
            assert_eq!(c.state(), CopaState::SlowStart);
        }
        assert_eq!(windows, vec![20, 40, 80]);
        run_at(&mut c, &mut now, RTT + Duration::from_millis(10), 1);
        assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
        let w = c.cwnd_packets();
        assert!(w < 80.0 && w > 77.0, "first decrease moves about 2 packets: {w}");
    }

    #[test]
    fn loss_in_slow_start_ends_it_without_a_reduction() {
        let mut c = copa();
        let mut now = Duration::ZERO;
        run_at(&mut c, &mut now, RTT, 1);
        let before = c.decision().cwnd_bytes;
        c.on_report(&loss_report(RTT + Duration::from_millis(10), 3));
        assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
        assert_eq!(c.decision().cwnd_bytes, before);
    }

    #[test]
    fn competitive_mode_engages_with_a_persistent_queue_and_runs_aimd_on_inverse_delta() {
        let mut now = Duration::ZERO;
        let mut c = in_avoidance(&mut now);
        // A buffer filler keeps 30 ms queued whatever Copa does: the queue never nearly empties.
        let queued = RTT + Duration::from_millis(30);
        let mut rounds = 0;
        while c.state() != (CopaState::Avoidance { mode: CopaMode::Competitive }) {
            run_at(&mut c, &mut now, queued, 1);
            rounds += 1;
            assert!(rounds <= 40, "competitive mode never engaged (window {})", c.cwnd_packets());
        }
        println!("competitive after {rounds} rounds of persistent queue");
        // Without loss 1/delta rises by 1 per RTT.
        let start = 1.0 / c.delta();
        run_at(&mut c, &mut now, queued, 3);
        assert!((1.0 / c.delta() - (start + 3.0)).abs() < 1e-9, "1/delta {} from {start}", 1.0 / c.delta());
        // A loss halves 1/delta (delta doubles), once per RTT.
        let before = 1.0 / c.delta();
        c.on_report(&loss_report(now + Duration::from_millis(1), 1));
        assert!((1.0 / c.delta() - before / 2.0).abs() < 1e-9);
        c.on_report(&loss_report(now + Duration::from_millis(2), 5));
        assert!((1.0 / c.delta() - before / 2.0).abs() < 1e-9, "second loss in the same RTT");
        // delta never exceeds the configured one.
        for i in 0..10u32 {
            now += queued;
            c.on_report(&loss_report(now, 1));
            assert!(c.delta() <= DEFAULT_DELTA + 1e-12, "after loss {i}: delta {}", c.delta());
        }
        // The queue empties: back to default mode and the configured delta.
        let mut rounds = 0;
        while c.state() != (CopaState::Avoidance { mode: CopaMode::Default }) {
            run_at(&mut c, &mut now, RTT, 1);
            rounds += 1;
            assert!(rounds <= 10);
        }
        assert_eq!(c.delta(), DEFAULT_DELTA);
    }

    #[test]
    fn mode_switching_off_keeps_the_configured_delta() {
        let mut c = CopaConfig { mode_switching: false, delta: 0.25, ..CopaConfig::default() }.build(info());
        let mut now = Duration::ZERO;
        run_at(&mut c, &mut now, RTT, 1);
        run_at(&mut c, &mut now, RTT + Duration::from_millis(30), 40);
        assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
        assert_eq!(c.delta(), 0.25);
    }

    #[test]
    fn draining_its_own_queue_does_not_look_like_competition() {
        // The queue shrinks round after round because Copa lowers its window: default mode.
        let mut now = Duration::ZERO;
        let mut c = in_avoidance(&mut now);
        c.cwnd_pkts = 500.0;
        for ms in (5..=12).rev() {
            run_at(&mut c, &mut now, RTT + Duration::from_millis(5 * ms), 1);
            assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default }, "queue {} ms", 5 * ms);
        }
    }

    #[test]
    fn rate_falls_to_the_new_capacity_within_a_few_rtts_after_a_halving() {
        let mss = 1448;
        let base = Duration::from_millis(100);
        let mut path = FluidPath::new(Rate::from_mbps(20.0), base, 4 * 250_000, mss);
        let mut c = CopaConfig::default().build(FlowInfo::with_mss(mss));
        let mut d = c.decision();
        for _ in 0..100 {
            d = c.on_report(&path.step(d));
        }
        path.bandwidth = Rate::from_mbps(10.0);
        let target = path.bdp_bytes() as f64;
        let (mut rate_reports, mut inflight_reports) = (None, None);
        for i in 1..=60 {
            let rep = path.step(d);
            d = c.on_report(&rep);
            if inflight_reports.is_none() {
                assert_eq!(
                    c.state(),
                    CopaState::Avoidance { mode: CopaMode::Default },
                    "report {i}: draining its own queue"
                );
            }
            let rate = d.rate.unwrap().mbps();
            if rate_reports.is_none() && (rate - 10.0).abs() <= 1.0 {
                rate_reports = Some(i);
            }
            let inflight = c.decision().cwnd_bytes as f64;
            if inflight_reports.is_none() && inflight <= 1.1 * target + 4.0 * mss as f64 {
                inflight_reports = Some(i);
            }
        }
        println!("rate within 10% of 10 Mbit/s after {rate_reports:?} reports, window within 10% of the new BDP after {inflight_reports:?}");
        assert!(rate_reports.is_some_and(|n| n <= 3), "{rate_reports:?}");
        assert!(inflight_reports.is_some_and(|n| n <= 15), "{inflight_reports:?}");
        let rate = d.rate.unwrap().mbps();
        assert!((rate - 10.0).abs() <= 1.0, "settled rate {rate}");
    }

    #[test]
    fn sync_rate_sets_the_sending_rate_and_is_a_no_op_on_its_own_rate() {
        let mut now = Duration::ZERO;
        let mut c = in_avoidance(&mut now);
        let own = c.decision();
        c.sync(Sync::Rate(own.rate.unwrap()));
        assert!((c.decision().cwnd_bytes as i64 - own.cwnd_bytes as i64).abs() <= 1);
        let r = Rate::from_mbps(4.0);
        c.sync(Sync::Rate(r));
        let after = c.decision().rate.unwrap();
        assert!((after.bytes_per_sec() - r.bytes_per_sec()).abs() < 1.0, "{after} vs {r}");
        assert_eq!(c.estimates().bandwidth, Some(after));
        // Down to the floor, never below.
        c.sync(Sync::Rate(Rate::ZERO));
        assert_eq!(c.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
    }

    #[test]
    fn sync_cwnd_adopts_the_window_above_the_floor() {
        let mut c = copa();
        c.sync(Sync::Cwnd(37 * MSS));
        assert_eq!(c.decision().cwnd_bytes, 37 * MSS);
        c.sync(Sync::Cwnd(1));
        assert_eq!(c.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
        // Without an RTT a rate cannot become a window: ignored.
        c.sync(Sync::Rate(Rate::from_mbps(100.0)));
        assert_eq!(c.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
        assert_eq!(c.decision().rate, None);
    }

    /// A window-limited sender behind a fluid bottleneck, stepped every millisecond and
    /// reporting every `report_every`: unlike [`FluidPath`], reports can be shorter than an RTT,
    /// and an RTT sample reaches Copa one RTT after the window that caused it.
    struct SubRttPath {
        bytes_per_ms: f64,
        base: Duration,
        now: Duration,
        queue_bytes: f64,
        /// (ACK time, RTT, bytes) of what has been sent and not yet acknowledged.
        in_flight: VecDeque<(Duration, Duration, f64)>,
    }

    impl SubRttPath {
        fn new(mbps: f64, base: Duration) -> SubRttPath {
            let bytes_per_ms = Rate::from_mbps(mbps).bytes_per_sec() / 1e3;
            SubRttPath { bytes_per_ms, base, now: Duration::ZERO, queue_bytes: 0.0, in_flight: VecDeque::new() }
        }

        /// Run `interval` under window `cwnd_bytes`; the report at its end.
        fn step(&mut self, cwnd_bytes: u64, interval: Duration) -> Report {
            let ms = Duration::from_millis(1);
            let start = self.now;
            let mut r = Report { interval, ..Report::default() };
            let (mut second_half_sum, mut second_half_n) = (0.0, 0u32);
            while self.now < start + interval {
                self.now += ms;
                while let Some(&(_, rtt, bytes)) = self.in_flight.front().filter(|s| s.0 <= self.now) {
                    self.in_flight.pop_front();
                    r.bytes_acked += bytes_from_f64(bytes);
                    r.rtt_min = Some(r.rtt_min.map_or(rtt, |m| m.min(rtt)));
                    r.rtt_last = Some(rtt);
                    r.rtt_sum += rtt;
                    r.rtt_samples += 1;
                    if self.now > start + interval / 2 {
                        second_half_sum += rtt.as_secs_f64();
                        second_half_n += 1;
                    }
                }
                // Window-limited: send what the window allows, queue what the link cannot carry.
                // Each link-millisecond's worth leaves the queue (and is acknowledged) in turn.
                let inflight: f64 = self.in_flight.iter().map(|s| s.2).sum();
                let mut sent = (cwnd_bytes as f64 - inflight).max(0.0);
                self.queue_bytes = (self.queue_bytes - self.bytes_per_ms).max(0.0);
                while sent > 0.0 {
                    let piece = sent.min(self.bytes_per_ms);
                    sent -= piece;
                    self.queue_bytes += piece;
                    let rtt = self.base + Duration::from_secs_f64(self.queue_bytes / self.bytes_per_ms / 1e3);
                    self.in_flight.push_back((self.now + rtt, rtt, piece));
                }
            }
            r.now = self.now;
            r.packets_acked = r.bytes_acked / MSS;
            r.rtt_second_half_mean =
                (second_half_n > 0).then(|| Duration::from_secs_f64(second_half_sum / f64::from(second_half_n)));
            r
        }
    }

    /// Before the fix, reports every 5-20 ms on this path (base RTT 40 ms) made Copa
    /// oscillate between the 2-packet floor and 2-3 BDP every ~1.2 s (utilization 0.72-0.77,
    /// mean RTT 1.9-2.1x base): the comparison lagged the window by 2-3 rounds, the velocity
    /// kept doubling up to its old cap (`v / delta` = the whole window per RTT, which in closed
    /// form multiplies the window by 1.7 per round up, or empties it in one round down).
    #[test]
    fn sub_rtt_reports_neither_overshoot_nor_crash_to_the_floor() {
        let base = Duration::from_millis(40);
        // Every 5 ms up to every half RTT (the CCP port's cadence).
        for every_ms in [5, 10, 20] {
            let mut path = SubRttPath::new(20.0, base);
            let mut c = copa();
            let (mut acked, mut rtt_sum, mut samples, mut lowest) = (0u64, 0.0, 0u64, f64::MAX);
            let every = Duration::from_millis(every_ms);
            let steps = 30_000 / every_ms;
            for i in 0..steps {
                let r = path.step(c.decision().cwnd_bytes, every);
                c.on_report(&r);
                if i >= steps / 2 {
                    acked += r.bytes_acked;
                    rtt_sum += r.rtt_sum.as_secs_f64();
                    samples += r.rtt_samples;
                    lowest = lowest.min(c.cwnd_packets());
                }
            }
            let util = acked as f64 / (path.bytes_per_ms * 15_000.0);
            let rtt_ratio = rtt_sum / samples as f64 / base.as_secs_f64();
            let bdp = path.bytes_per_ms * 40.0 / MSS as f64;
            println!("{every_ms} ms reports: utilization {util:.3}, mean RTT {rtt_ratio:.2}x base, smallest window {lowest:.1} packets (BDP {bdp:.0})");
            assert!(util >= 0.9, "{every_ms} ms reports: utilization {util:.3}");
            assert!(rtt_ratio <= 1.3, "{every_ms} ms reports: mean RTT {rtt_ratio:.2}x base");
            assert!(lowest >= bdp / 2.0, "{every_ms} ms reports: window fell to {lowest:.1} packets");
        }
    }

    #[test]
    fn half_rtt_reports_take_the_standing_rtt_over_the_previous_report_too() {
        let ms = Duration::from_millis;
        let report = |now: Duration, interval: Duration, rtt: Duration| Report {
            now,
            interval,
            bytes_acked: 5 * MSS,
            packets_acked: 5,
            rtt_min: Some(rtt),
            rtt_last: Some(rtt),
            rtt_sum: rtt * 5,
            rtt_samples: 5,
            ..Report::default()
        };
        let mut c = copa();
        c.on_report(&report(ms(20), ms(20), RTT)); // srtt 50 ms: the window is 25 ms
                                                   // Samples at 60 ms, but the previous report (ended 20 ms ago) saw 50 ms.
        c.on_report(&report(ms(40), ms(20), ms(60)));
        assert_eq!(c.standing_rtt(), Some(RTT));
        // 25 ms later the 50 ms report has left the window.
        c.on_report(&report(ms(60), ms(20), ms(60)));
        assert_eq!(c.standing_rtt(), Some(ms(60)));
        // A report longer than the window bounds its minimum by the second half's samples.
        let mut long = report(ms(110), ms(50), ms(55));
        long.rtt_second_half_mean = Some(ms(70));
        long.rtt_last = Some(ms(72));
        c.on_report(&long);
        assert_eq!(c.standing_rtt(), Some(ms(70)));
    }

    #[test]
    fn standing_rtt_takes_only_the_tail_of_a_report_that_began_before_its_window() {
        let ms = Duration::from_millis;
        // Five samples from `min` up to `tail` (the second half's mean and the last sample).
        let report = |now: Duration, interval: Duration, min: Duration, tail: Duration| Report {
            now,
            interval,
            bytes_acked: 5 * MSS,
            packets_acked: 5,
            rtt_min: Some(min),
            rtt_last: Some(tail),
            rtt_second_half_mean: Some(tail),
            rtt_sum: min * 2 + tail * 3,
            rtt_samples: 5,
            ..Report::default()
        };
        let mut c = copa();
        c.on_report(&report(ms(40), ms(40), ms(40), ms(40))); // srtt 40 ms: the window is 20 ms
        c.on_report(&report(ms(55), ms(15), ms(40), ms(48)));
        // At 65 ms the window [45, 65] holds the tail of the report over [40, 55] (48 ms), not
        // its 40 ms sample, which came before 45 ms. Before, the whole report counted: 40 ms.
        c.on_report(&report(ms(65), ms(10), ms(50), ms(50)));
        assert_eq!(c.standing_rtt(), Some(ms(48)));
    }

    #[test]
    fn min_rtt_forgets_a_sample_older_than_its_window() {
        let mut c = copa();
        c.on_report(&ack_report(RTT, RTT, 10 * MSS, MSS));
        let later = RTT + Duration::from_millis(5);
        let mut now = RTT;
        while now < MIN_RTT_WINDOW {
            now += later;
            c.on_report(&ack_report(now, later, 10 * MSS, MSS));
            assert_eq!(c.estimates().min_rtt, Some(RTT));
        }
        for _ in 0..3 {
            now += later;
            c.on_report(&ack_report(now, later, 10 * MSS, MSS));
        }
        assert_eq!(c.estimates().min_rtt, Some(later));
    }

    #[test]
    fn timeout_restarts_slow_start_from_at_most_the_initial_window() {
        let mut now = Duration::ZERO;
        let mut c = in_avoidance(&mut now);
        c.on_report(&Report { now: now + RTT, timeout: true, ..Report::default() });
        assert_eq!(c.state(), CopaState::SlowStart);
        assert_eq!(c.decision().cwnd_bytes, 10 * MSS);
        assert_eq!(c.velocity(), 1.0);
    }

    #[test]
    fn loss_only_and_empty_reports_never_panic_and_keep_the_floor() {
        let mut c = copa();
        assert_eq!(c.on_report(&Report::default()).cwnd_bytes, 10 * MSS);
        for i in 0..50u32 {
            let d = c.on_report(&loss_report(RTT * i, 1000));
            assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
        }
        let d = c.on_report(&Report { now: Duration::MAX, timeout: true, ..Report::default() });
        assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
        // Time going backwards, zero RTTs: still fine.
        let d = c.on_report(&ack_report(Duration::ZERO, Duration::ZERO, 5 * MSS, MSS));
        assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
    }

    #[test]
    fn config_defaults_are_the_papers_and_bad_values_are_caught() {
        let c = CopaConfig::default();
        assert_eq!(c.delta, 0.5);
        assert!(c.mode_switching);
        assert_eq!(c.init_cwnd_packets, None);
        assert!(CopaConfig { delta: 0.0, ..CopaConfig::default() }.validate().is_err());
        assert!(CopaConfig { delta: f64::NAN, ..CopaConfig::default() }.validate().is_err());
        assert!(CopaConfig::default().validate().is_ok());
        // build never fails: bad deltas fall back to the default, large ones are clamped.
        assert_eq!(CopaConfig { delta: f64::NAN, ..CopaConfig::default() }.build(info()).delta(), DEFAULT_DELTA);
        assert_eq!(CopaConfig { delta: 7.0, ..CopaConfig::default() }.build(info()).delta(), MAX_DELTA);
    }

    fn arb_report() -> impl Strategy<Value = Report> {
        (
            0u64..20_000,
            0u64..500,
            0u64..200_000,
            0u64..50,
            any::<bool>(),
            proptest::option::of(0u64..2_000),
            proptest::option::of(0u64..2_000),
            0u64..100,
        )
            .prop_map(|(now_ms, interval_ms, acked, lost, timeout, rtt_min, rtt_last, samples)| {
                let ms = Duration::from_millis;
                Report {
                    now: ms(now_ms),
                    interval: ms(interval_ms),
                    bytes_acked: acked,
                    packets_acked: acked / MSS,
                    packets_lost: lost,
                    timeout: timeout && lost % 7 == 0,
                    rtt_min: rtt_min.map(ms),
                    rtt_last: rtt_last.map(ms),
                    rtt_sum: ms(rtt_last.unwrap_or(0) * samples),
                    rtt_samples: samples,
                    rtt_second_half_mean: rtt_last.map(ms),
                    ..Report::default()
                }
            })
    }

    proptest! {
        #[test]
        fn random_reports_keep_the_window_above_the_floor_and_the_rate_finite(
            reports in proptest::collection::vec(arb_report(), 1..200),
            syncs in proptest::collection::vec((any::<bool>(), 0u64..10_000_000), 0..20),
        ) {
            let mut c = copa();
            for (i, r) in reports.iter().enumerate() {
                let d = c.on_report(r);
                prop_assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
                prop_assert!(c.cwnd_packets().is_finite());
                prop_assert!(c.velocity() >= 1.0 && c.velocity().is_finite());
                prop_assert!(c.delta() > 0.0 && c.delta() <= DEFAULT_DELTA);
                if let Some(rate) = d.rate {
                    prop_assert!(rate.bytes_per_sec().is_finite());
                }
                if let Some(&(cwnd, v)) = syncs.get(i) {
                    c.sync(if cwnd { Sync::Cwnd(v) } else { Sync::Rate(Rate::from_bytes_per_sec(v as f64)) });
                    prop_assert!(c.decision().cwnd_bytes >= MIN_CWND_PACKETS * MSS);
                }
            }
        }
    }
}
