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
//!   (`--report-interval 8ms`, 3 runs each in one guest boot) 0.729 against 0.646. What was left
//!   was not the guest's floor but RTT_min itself: the kernel's whole-millisecond fallback samples
//!   from the timestamp option (after each recovery) set it 0.2-0.7 ms under any precise sample,
//!   more than Copa's two packets of queue at this rate. The datapaths keep those from the agent
//!   since 047d80c (0.81-0.85 there; docs/datapath.md, "RTT samples").
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
use crate::{Algorithm, CongestionControl, Decision, Estimates, FlowInfo, Report, Sync};
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
    /// delta as `build` uses it.
    fn sanitized_delta(&self) -> f64 {
        if self.delta.is_finite() && self.delta > 0.0 {
            self.delta.clamp(MIN_DELTA, MAX_DELTA)
        } else {
            DEFAULT_DELTA
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

    /// Copa's window is its control; the rate is that window over RTT_standing.
    fn window_bound(&self) -> bool {
        true
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

impl Algorithm for CopaConfig {
    type Controller = Copa;
    const NAME: &'static str = "copa";
    const SUMMARY: &'static str = "Copa: targets a rate of 1/(delta x queueing delay), velocity-driven, with mode switching";

    fn build(&self, info: FlowInfo) -> Copa {
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

    /// Check the parameters; `build` clamps instead of failing.
    fn validate(&self) -> Result<(), PolicyError> {
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
}

#[cfg(test)]
mod tests;
