//! BBRv1 (Linux `tcp_bbr.c` as of 5.1 and later; Cardwell et al., "BBR: Congestion-Based
//! Congestion Control", ACM Queue 2016; draft-cardwell-iccrg-bbr-congestion-control-00).
//!
//! Model: the path is a pipe of bottleneck bandwidth `bw` and propagation delay `min_rtt`.
//!
//! ```text
//!   bw      = max over the last 10 rounds of the delivery-rate samples
//!   min_rtt = min over the last 10 s of the RTT samples
//!   pacing  = pacing_gain * bw * (1 - 1 %)
//!   target  = cwnd_gain * bw * min_rtt + extra_acked + 3 packets (quantization), >= 4 packets
//!   cwnd    = min(cwnd + acked, target) once the pipe is full, else cwnd + acked
//! ```
//!
//! States (gains are pacing / cwnd):
//!
//! ```text
//!   Startup (2.885 / 2.885) --pipe full: 3 rounds with < 25 % bw growth--> Drain (0.347 / 2.885)
//!   Drain --inflight <= BDP--> ProbeBw ([1.25, 0.75, 1 x 6], a min_rtt per phase / 2)
//!   any --min_rtt 10 s old--> ProbeRtt (1 / 1, cwnd 4 packets, >= 200 ms and one round)
//!   ProbeRtt --done--> ProbeBw if the pipe was ever full, else Startup
//! ```
//!
//! Startup paces at 2.885 bw, but its window grows by what is acked, so the delivery rate
//! doubles per round: pacing only keeps out of the window's way.
//!
//! ACK aggregation (Linux 5.1, `bbr_update_ack_aggregation`): when ACKs arrive in bursts (Wi-Fi
//! and cellular aggregation, delayed or stretch ACKs, GRO), inflight reaches `2 BDP` long before
//! the held ACKs return, sending stops and the bottleneck idles. BBR measures how many bytes
//! arrived beyond what `bw` predicts since the start of the current "aggregation epoch",
//! keeps the max over 10 rounds (two 5-round buckets) and adds it to the cwnd target, capped at
//! `bw * 100 ms`. The window then bridges ACK gaps of about `2 min_rtt + 100 ms`; past that
//! (and before the term has locked on), inflight hits cwnd, the bottleneck idles, the low rate
//! samples shrink `bw`, and BBR spirals down. That residue is what PolyCC's scenario 1 fuses a
//! window-based copilot (CUBIC, `max` on cwnd) to cover.
//!
//! References: Linux `net/ipv4/tcp_bbr.c` (the constants below carry its names), Linux
//! `lib/minmax.c` (windowed filters), the PolyCC demo (SIGCOMM'23) section 2.
//!
//! Differences from the reference:
//! - Reports, not ACKs. A round ends when a report acknowledges data sent after the round began:
//!   `now - rtt_min_of_report >= round_start` (the newest acked byte left at or after the start).
//!   With one report per RTT that is one round per report; with more frequent reports, a round
//!   spans about one RTT of reports; a loss-only report ends no round. A timeout ends a round
//!   (Linux: "treat RTO like end of a round").
//! - The aggregation epoch needs to know when inside a report its ACKs arrived. We take them as
//!   spread over the report's longest ACK train (`Report::ack_train`, clamped to the interval):
//!   a smooth ACK clock then yields no excess, ACKs released together (a train of ~0) count in
//!   full as Linux counts a burst. A datapath that leaves `ack_train` at zero makes every report
//!   look like one burst (as a stretch ACK does in Linux); the excess stays capped at
//!   `bw * 100 ms` and at the cwnd. The train is trusted only where a smooth clock at the
//!   report's average ACK spacing would itself form one train (spacing <= 1 ms, half the 2 ms
//!   train gap); sparser ACKs break trains without any aggregation, and their reports count as
//!   spread over the interval. The cost: below ~1 ACK per ms (12 Mbit/s at 1500 B) real bursts
//!   go unseen too, where Linux, seeing each ACK, would still count them.
//! - Filters are exact sliding windows, not Linux's three-sample approximation, so the bw
//!   estimate forgets a sample exactly `bw_window_rounds` rounds after the round it was taken in.
//! - The quantization budget is 3 packets (Linux: 3 TSO segments, which is 3 to 6 packets at
//!   the rates simulated here; there is no TSO in a report), rounded up to an even packet count,
//!   plus 2 packets in the 1.25 phase, as Linux.
//! - A ProbeBw phase ends when *at least* one min_rtt has passed (Linux: strictly more), so
//!   reports spaced exactly one propagation RTT apart advance one phase each.
//! - Loss: BBRv1 mostly ignores it. A report with losses lowers cwnd by the lost bytes (Linux's
//!   `cwnd - losses` in recovery); the next report's `cwnd + acked` growth repairs it, which plays
//!   the part of Linux's restore of the pre-recovery cwnd. There is no one-round packet
//!   conservation. A timeout saves cwnd, restarts at 4 packets and restores the saved cwnd at the
//!   next round end. No long-term (policer) bw model and no idle restart.
//! - Drain also ends after [`DRAIN_MAX_ROUNDS`] rounds (Linux: only at one BDP in flight). A fused
//!   copilot's window, or under heavy ACK jitter a min_rtt far below the RTT the window has to
//!   cover, can keep inflight above one BDP for good, and Drain's bw / 2.885 pacing then decays
//!   the bandwidth estimate for as long as it lasts (guest, issue 15).
//! - Startup pacing only ever increases (Linux); the comparison is with BBR's own last rate, so a
//!   rate adopted through [`Sync::Rate`] lasts until the next report, as the trait says.

use crate::filters::{srtt_after, WindowedMax};
use crate::rng::SplitMix64;
use crate::units::{bytes_from_f64, rate_of_window};
use crate::config::{check_range, PolicyError};
use crate::{Algorithm, CongestionControl, Decision, Estimates, FlowInfo, Handover, Rate, Report, Sync};
use serde::{Deserialize, Serialize};
use std::f64::consts::LN_2;
use std::time::Duration;

mod aggregation;
use aggregation::AckAggregation;

/// `bbr_high_gain`: 2/ln(2) ~ 2.885, the smallest gain that lets Startup double the delivery
/// rate every round.
pub const HIGH_GAIN: f64 = 2.0 / LN_2;
/// `bbr_drain_gain`: 1/high_gain, drains in one round the queue Startup built.
pub const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// `bbr_cwnd_gain`: ProbeBw keeps 2 BDP in flight to ride out delayed and stretched ACKs.
pub const PROBE_BW_CWND_GAIN: f64 = 2.0;
/// `bbr_pacing_gain[]`: probe up, drain what the probe queued, cruise six phases.
pub const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// `CYCLE_LEN`.
pub const CYCLE_LEN: usize = PACING_GAIN_CYCLE.len();
/// Index of the 0.75 phase: ProbeBw never starts there (`bbr_cycle_rand = 7` draws one of the
/// other `CYCLE_LEN - 1` phases).
pub const PROBE_DOWN_PHASE: usize = 1;
/// Index of the 1.25 phase.
pub const PROBE_UP_PHASE: usize = 0;
/// `bbr_pacing_margin_percent`: pace 1 % below bw so queues drain over time.
pub const PACING_MARGIN_PERCENT: f64 = 1.0;
/// `bbr_bw_rtts`: the bw filter's window, in rounds (`CYCLE_LEN + 2`).
pub const BW_WINDOW_ROUNDS: u64 = CYCLE_LEN as u64 + 2;
/// `bbr_min_rtt_win_sec`: min_rtt's window; its expiry triggers ProbeRtt.
pub const MIN_RTT_WINDOW_SECS: u64 = 10;
/// `bbr_probe_rtt_mode_ms`: how long ProbeRtt holds the minimal window.
pub const PROBE_RTT_MS: u64 = 200;
/// `bbr_cwnd_min_target`: the smallest window, also ProbeRtt's window, in packets.
pub const MIN_CWND_PACKETS: u64 = 4;
/// `bbr_quantization_budget`: 3 send quanta of headroom (one packet each here).
pub const QUANTIZATION_BUDGET_PACKETS: u64 = 3;
/// `bbr_quantization_budget`: the 1.25 phase gets 2 more packets so it can reach 1.25 BDP.
pub const PROBE_UP_EXTRA_PACKETS: u64 = 2;
/// `bbr_full_bw_thresh`: bw must grow 25 % per round for the pipe to count as still filling.
pub const FULL_BW_GROWTH: f64 = 1.25;
/// Drain ends after this many rounds even while inflight is above one BDP (Linux: never; see
/// `check_drain`).
pub const DRAIN_MAX_ROUNDS: u64 = 3;
/// `bbr_full_bw_cnt`: rounds without that growth before the pipe counts as full.
pub const FULL_BW_ROUNDS: u32 = 3;
/// `bbr_extra_acked_gain`: the aggregation term enters the target with gain 1.
pub const EXTRA_ACKED_GAIN: f64 = 1.0;
/// `bbr_extra_acked_win_rtts`: each of the two aggregation buckets lasts 5 rounds, so the
/// estimate covers the last 5 to 10 rounds.
pub const EXTRA_ACKED_BUCKET_ROUNDS: u64 = 5;
/// `bbr_extra_acked_max_us`: the aggregation term covers at most 100 ms of bw.
pub const EXTRA_ACKED_MAX_MS: u64 = 100;
/// `bbr_ack_epoch_acked_reset_thresh`: restart an epoch that has run this long (in packets), so
/// that an old epoch cannot hide a change of bw.
pub const ACK_EPOCH_RESET_PACKETS: u64 = 1 << 20;
/// ACKs at most this far apart form one train (`Report::ack_train`, HyStart's threshold).
pub const ACK_TRAIN_GAP: Duration = Duration::from_millis(2);
/// `bbr_init_pacing_rate_from_rtt`: the nominal RTT used to pace before any RTT sample.
pub const NOMINAL_RTT: Duration = Duration::from_millis(1);

/// BBR's parameters. The defaults are Linux's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BbrConfig {
    /// Startup's pacing and cwnd gain, and Drain's cwnd gain (default 2/ln 2 ~ 2.885).
    pub high_gain: f64,
    /// Drain's pacing gain (default 1/2.885 ~ 0.347).
    pub drain_gain: f64,
    /// ProbeBw's cwnd gain (default 2).
    pub cwnd_gain: f64,
    /// How long ProbeRtt holds the 4-packet window, in milliseconds (default 200).
    pub probe_rtt_ms: u64,
    /// The min_rtt filter's window in seconds; its expiry triggers ProbeRtt (default 10).
    pub min_rtt_window_secs: u64,
    /// The bw filter's window in rounds (default 10).
    pub bw_window_rounds: u64,
    /// Add the ACK-aggregation term `extra_acked` to the cwnd target (default on, as Linux 5.1+;
    /// off gives pre-5.1 BBRv1).
    pub extra_acked: bool,
    /// Cap on `extra_acked`, as milliseconds of the bw estimate (default 100).
    pub extra_acked_max_ms: u64,
    /// Seed for the ProbeBw start phase; the policy sets one per flow.
    #[serde(skip)]
    pub seed: u64,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig {
            high_gain: HIGH_GAIN,
            drain_gain: DRAIN_GAIN,
            cwnd_gain: PROBE_BW_CWND_GAIN,
            probe_rtt_ms: PROBE_RTT_MS,
            min_rtt_window_secs: MIN_RTT_WINDOW_SECS,
            bw_window_rounds: BW_WINDOW_ROUNDS,
            extra_acked: true,
            extra_acked_max_ms: EXTRA_ACKED_MAX_MS,
            seed: 0,
        }
    }
}

/// The configuration in the units the per-report path uses.
#[derive(Clone, Debug)]
struct Params {
    high_gain: f64,
    drain_gain: f64,
    cwnd_gain: f64,
    probe_rtt: Duration,
    min_rtt_window: Duration,
    extra_acked: bool,
    extra_acked_max: Duration,
}

/// BBR's modes (Linux `enum bbr_mode`), each with the data only it needs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// Double the delivery rate every round until the pipe is full.
    Startup,
    /// Drain the queue Startup built; entered at round `entered_round`.
    Drain { entered_round: u64 },
    /// Cycle the pacing gain; `phase` indexes [`PACING_GAIN_CYCLE`], entered at `phase_start`.
    ProbeBw { phase: usize, phase_start: Duration },
    /// Hold 4 packets in flight to measure min_rtt. `done_at` is set once inflight has dropped
    /// to 4 packets; `round_done` once a full round has passed since then.
    ProbeRtt { entered_at: Duration, done_at: Option<Duration>, round_done: bool },
}

/// Whether Startup has filled the pipe (`bbr_check_full_bw_reached`). Latched: once full, full
/// for the rest of the flow.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PipeFill {
    /// `full_bw` is the bw at the last 25 % growth, `stalled_rounds` the rounds since then.
    Filling {
        full_bw: Rate,
        stalled_rounds: u32,
    },
    Full,
}

/// Loss state as far as BBRv1 cares: only a timeout changes its behaviour.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Recovery {
    Open,
    /// After a timeout: cwnd restarted at 4 packets; the saved cwnd returns at the next round end.
    Timeout,
}

/// Per-flow BBR state.
#[derive(Clone, Debug)]
pub struct Bbr {
    params: Params,
    mss: u64,
    mode: Mode,
    rng: SplitMix64,
    /// Rounds completed (`rtt_cnt`).
    round_count: u64,
    /// When the current round began: it ends once data sent after this is acked.
    round_start_at: Duration,
    /// The report being processed ended a round.
    round_start: bool,
    bw: WindowedMax,
    min_rtt: Option<Duration>,
    /// When `min_rtt` was last set.
    min_rtt_stamp: Duration,
    srtt: Option<Duration>,
    pipe: PipeFill,
    aggregation: AckAggregation,
    recovery: Recovery,
    /// Bytes delivered over the flow's life.
    delivered_bytes: u64,
    init_cwnd: u64,
    cwnd: u64,
    /// The cwnd saved on entering ProbeRtt or a timeout, restored on leaving it.
    prior_cwnd: u64,
    /// BBR's own last pacing rate (Startup never lowers it).
    model_rate: Rate,
    /// The pacing rate decided: the model's, or one adopted through `sync` until the next report.
    pacing_rate: Rate,
}

impl Bbr {
    /// The current mode's name: "startup", "drain", "probe_bw" or "probe_rtt".
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            Mode::Startup => "startup",
            Mode::Drain { .. } => "drain",
            Mode::ProbeBw { .. } => "probe_bw",
            Mode::ProbeRtt { .. } => "probe_rtt",
        }
    }

    /// The aggregation term currently added to the cwnd target, in bytes.
    pub fn extra_acked_bytes(&self) -> u64 {
        self.aggregation_cwnd()
    }

    fn min_cwnd(&self) -> u64 {
        MIN_CWND_PACKETS * self.mss
    }

    fn pipe_full(&self) -> bool {
        self.pipe == PipeFill::Full
    }

    /// (pacing gain, cwnd gain) of the current mode (`bbr_update_gains`).
    fn gains(&self) -> (f64, f64) {
        let p = &self.params;
        match self.mode {
            Mode::Startup => (p.high_gain, p.high_gain),
            Mode::Drain { .. } => (p.drain_gain, p.high_gain),
            Mode::ProbeBw { phase, .. } => (PACING_GAIN_CYCLE[phase], p.cwnd_gain),
            Mode::ProbeRtt { .. } => (1.0, 1.0),
        }
    }

    /// Move to `next`, checking in debug builds that the state diagram allows it.
    fn transition_to(&mut self, next: Mode) {
        debug_assert!(
            matches!(
                (self.mode, next),
                (Mode::Startup, Mode::Drain { .. })
                    | (Mode::Drain { .. }, Mode::ProbeBw { .. })
                    | (Mode::Startup | Mode::Drain { .. } | Mode::ProbeBw { .. }, Mode::ProbeRtt { .. })
                    | (Mode::ProbeRtt { .. }, Mode::ProbeBw { .. } | Mode::Startup)
            ),
            "illegal BBR transition {:?} -> {:?}",
            self.mode,
            next
        );
        self.mode = next;
    }

    // ---- The model -------------------------------------------------------------------------

    /// Smoothed RTT, RFC 6298 weights; the first sample re-derives the initial pacing rate from
    /// it (Linux `has_seen_rtt`).
    fn update_srtt(&mut self, r: &Report) {
        let first = self.srtt.is_none();
        self.srtt = srtt_after(self.srtt, r);
        if first && self.srtt.is_some() && self.bw.get().is_zero() {
            self.init_pacing_rate();
        }
    }

    /// The report's freshest RTT sample: the smallest of the interval, else the last one.
    fn rtt_sample(r: &Report) -> Option<Duration> {
        r.rtt_min.or(r.rtt_last).filter(|d| !d.is_zero())
    }

    /// A round ends when data sent after it began is acked: the newest byte this report acks
    /// left no earlier than `now - rtt`.
    fn update_round(&mut self, r: &Report) {
        self.round_start = false;
        if r.bytes_acked == 0 {
            return;
        }
        let Some(rtt) = Self::rtt_sample(r).or(self.srtt) else { return };
        if r.now.saturating_sub(rtt) >= self.round_start_at {
            self.start_round(r.now);
        }
    }

    fn start_round(&mut self, now: Duration) {
        self.round_count += 1;
        self.round_start_at = now;
        self.round_start = true;
    }

    /// `bbr_update_bw`: feed the delivery-rate sample to the max filter. App-limited samples
    /// understate the path and count only when they raise the estimate.
    fn update_bw(&mut self, r: &Report) {
        self.delivered_bytes = self.delivered_bytes.saturating_add(r.bytes_acked);
        if r.bytes_acked == 0 {
            return;
        }
        let sample = r.delivery_rate.unwrap_or_else(|| r.ack_rate());
        if sample.is_zero() || (r.app_limited && sample < self.bw.get()) {
            return;
        }
        self.bw.update(self.round_count, sample);
    }

    /// `bbr_update_ack_aggregation` ([`AckAggregation::update`]).
    fn update_ack_aggregation(&mut self, r: &Report) {
        if self.params.extra_acked && r.bytes_acked > 0 {
            self.aggregation.update(r, self.round_start, self.bw.get(), self.cwnd, self.mss);
        }
    }

    /// `bbr_ack_aggregation_cwnd`: the aggregation term of the target, once the pipe is full,
    /// capped at `bw * extra_acked_max`.
    fn aggregation_cwnd(&self) -> u64 {
        if !self.params.extra_acked || !self.pipe_full() {
            return 0;
        }
        let max_aggr = self.bw.get().bytes_over(self.params.extra_acked_max);
        let aggr = self.aggregation.extra_acked() as f64 * EXTRA_ACKED_GAIN;
        bytes_from_f64(aggr.min(max_aggr))
    }

    /// `bbr_update_cycle_phase`: advance the ProbeBw gain cycle. A phase lasts one min_rtt; the
    /// 1.25 phase also waits until inflight reaches 1.25 BDP (or losses say the pipe is full);
    /// the 0.75 phase ends early once inflight is down to one BDP.
    fn update_cycle_phase(&mut self, r: &Report) {
        let Mode::ProbeBw { phase, phase_start } = self.mode else { return };
        let full_length = r.now.saturating_sub(phase_start) >= self.min_rtt.unwrap_or_default();
        let gain = PACING_GAIN_CYCLE[phase];
        let bw = self.bw.get();
        let next = if gain > 1.0 {
            full_length && (r.packets_lost > 0 || r.bytes_in_flight >= self.inflight(bw, gain))
        } else if gain < 1.0 {
            full_length || r.bytes_in_flight <= self.inflight(bw, 1.0)
        } else {
            full_length
        };
        if next {
            self.mode = Mode::ProbeBw { phase: (phase + 1) % CYCLE_LEN, phase_start: r.now };
        }
    }

    /// `bbr_check_full_bw_reached`: the pipe is full after `FULL_BW_ROUNDS` rounds in which bw
    /// grew less than 25 %. Checked once per round, on samples that are not app-limited.
    fn check_full_bw_reached(&mut self, r: &Report) {
        let PipeFill::Filling { full_bw, stalled_rounds } = self.pipe else { return };
        if !self.round_start || r.app_limited {
            return;
        }
        let bw = self.bw.get();
        self.pipe = if bw.bytes_per_sec() >= full_bw.bytes_per_sec() * FULL_BW_GROWTH {
            PipeFill::Filling { full_bw: bw, stalled_rounds: 0 }
        } else if stalled_rounds + 1 >= FULL_BW_ROUNDS {
            PipeFill::Full
        } else {
            PipeFill::Filling { full_bw, stalled_rounds: stalled_rounds + 1 }
        };
    }

    /// `bbr_check_drain`: Startup -> Drain once the pipe is full; Drain -> ProbeBw once the
    /// queue is gone (inflight down to one BDP).
    fn check_drain(&mut self, r: &Report) {
        if self.mode == Mode::Startup && self.pipe_full() {
            self.transition_to(Mode::Drain { entered_round: self.round_count });
        }
        // Linux drains until inflight is down to one BDP however long it takes. Here another
        // controller may hold the window open (a fused copilot's max), and under ACK jitter an
        // early RTT sample near the path's floor makes "one BDP" a fraction of what the window
        // must cover (guest, +/- 70 ms: min_rtt 31 ms, RTT ~140 ms). Drain then never ended, and
        // its bw / 2.885 pacing decayed the bandwidth estimate for seconds. Drain's gain removes
        // Startup's 1.885 BDP of queue within 3 min_rtt, so after DRAIN_MAX_ROUNDS it ends anyway.
        if let Mode::Drain { entered_round } = self.mode {
            let overdue = self.round_count >= entered_round.saturating_add(DRAIN_MAX_ROUNDS);
            if r.bytes_in_flight <= self.inflight(self.bw.get(), 1.0) || overdue {
                self.reset_probe_bw_mode(r.now);
            }
        }
    }

    /// `bbr_update_min_rtt`: keep the 10-s min; when it expires, take the current sample and
    /// go to ProbeRtt; leave ProbeRtt after `probe_rtt` at 4 packets and one full round.
    fn update_min_rtt(&mut self, r: &Report) {
        let expired = self.min_rtt.is_some() && r.now > self.min_rtt_stamp.saturating_add(self.params.min_rtt_window);
        if let Some(rtt) = Self::rtt_sample(r) {
            if self.min_rtt.is_none_or(|m| rtt < m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = r.now;
            }
        }
        if expired && !matches!(self.mode, Mode::ProbeRtt { .. }) {
            self.save_cwnd();
            self.transition_to(Mode::ProbeRtt { entered_at: r.now, done_at: None, round_done: false });
        }
        let Mode::ProbeRtt { entered_at, done_at, round_done } = self.mode else { return };
        // Linux waits for inflight to fall to 4 packets however long it takes. Here another
        // controller may hold the window (a fused copilot's max, a live hand-over), so after one
        // srtt without the drain the timer starts anyway: otherwise ProbeRtt never ends and,
        // pacing at gain 1 with no probing, the bandwidth estimate decays 1 % per round.
        let drain_overdue =
            r.now >= entered_at.saturating_add(self.srtt.or(self.min_rtt).unwrap_or(self.params.probe_rtt));
        match done_at {
            None if r.bytes_in_flight <= self.min_cwnd() || drain_overdue => {
                // Inflight is down: hold it for `probe_rtt` and one round from now.
                self.mode = Mode::ProbeRtt {
                    entered_at,
                    done_at: Some(r.now.saturating_add(self.params.probe_rtt)),
                    round_done: false,
                };
                self.round_start_at = r.now;
            }
            None => {}
            Some(done_at) => {
                let round_done = round_done || self.round_start;
                self.mode = Mode::ProbeRtt { entered_at, done_at: Some(done_at), round_done };
                if round_done && r.now > done_at {
                    // `bbr_check_probe_rtt_done`: wait a full window before the next ProbeRtt.
                    self.min_rtt_stamp = r.now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    self.reset_mode(r.now);
                }
            }
        }
    }

    // ---- Transitions -----------------------------------------------------------------------

    /// `bbr_reset_mode`: Startup if the pipe was never full, else ProbeBw.
    fn reset_mode(&mut self, now: Duration) {
        if self.pipe_full() {
            self.reset_probe_bw_mode(now);
        } else {
            self.transition_to(Mode::Startup);
        }
    }

    /// `bbr_reset_probe_bw_mode`: enter ProbeBw at a random phase other than the 0.75 one.
    fn reset_probe_bw_mode(&mut self, now: Duration) {
        let phase = self.random_probe_bw_phase();
        self.transition_to(Mode::ProbeBw { phase, phase_start: now });
    }

    /// The phase ProbeBw starts in: random, never the 0.75 one.
    fn random_probe_bw_phase(&mut self) -> usize {
        let offset = self.rng.below(CYCLE_LEN as u64 - 1) as usize;
        // Linux: cycle_idx = CYCLE_LEN - 1 - rand(7), then advance by one: never PROBE_DOWN_PHASE.
        let phase = (CYCLE_LEN - 1 - offset + 1) % CYCLE_LEN;
        debug_assert_ne!(phase, PROBE_DOWN_PHASE);
        phase
    }

    /// `bbr_save_cwnd`: remember the cwnd to restore after ProbeRtt or a timeout; while already
    /// in either, keep the larger.
    fn save_cwnd(&mut self) {
        if self.recovery == Recovery::Open && !matches!(self.mode, Mode::ProbeRtt { .. }) {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    /// Linux `bbr_set_state(TCP_CA_Loss)` and `tcp_enter_loss`, simplified: save cwnd, restart at
    /// the minimal window, treat the timeout as the end of a round.
    fn on_timeout(&mut self, now: Duration) {
        self.save_cwnd();
        self.recovery = Recovery::Timeout;
        self.cwnd = self.min_cwnd();
        if let PipeFill::Filling { stalled_rounds, .. } = self.pipe {
            self.pipe = PipeFill::Filling { full_bw: Rate::ZERO, stalled_rounds };
        }
        if !self.round_start {
            self.start_round(now);
        }
    }

    /// `bbr_undo_cwnd`: the stack found its last losses spurious, so the slow-down they caused
    /// was no sign of a full pipe: Startup's full-bandwidth count starts over (a pipe already
    /// found full stays full). Without it a reordering in the first RTTs, whose losses held a
    /// fused window, had Startup read the plateau as the link's (guest, 2026-11-28: 13 of 20
    /// Mbit/s for 10 s).
    fn on_undo(&mut self) {
        if let PipeFill::Filling { .. } = self.pipe {
            self.pipe = PipeFill::Filling { full_bw: Rate::ZERO, stalled_rounds: 0 };
        }
    }

    // ---- The control -----------------------------------------------------------------------

    /// `bbr_bdp`: `gain * bw * min_rtt` in bytes, rounded up; the initial window before any RTT.
    fn bdp(&self, bw: Rate, gain: f64) -> u64 {
        match self.min_rtt {
            Some(rtt) => bytes_from_f64((bw.bytes_over(rtt) * gain).ceil()),
            None => self.init_cwnd,
        }
    }

    /// `bbr_quantization_budget`: headroom for send quanta, rounded up to an even packet count.
    fn quantization_budget(&self, cwnd: u64) -> u64 {
        let cwnd = cwnd.saturating_add(QUANTIZATION_BUDGET_PACKETS * self.mss);
        let pair = 2 * self.mss;
        let cwnd = cwnd.div_ceil(pair).saturating_mul(pair);
        match self.mode {
            Mode::ProbeBw { phase: PROBE_UP_PHASE, .. } => cwnd.saturating_add(PROBE_UP_EXTRA_PACKETS * self.mss),
            _ => cwnd,
        }
    }

    /// `bbr_inflight`: the inflight the model allows at `gain`.
    fn inflight(&self, bw: Rate, gain: f64) -> u64 {
        self.quantization_budget(self.bdp(bw, gain))
    }

    /// `bbr_init_pacing_rate_from_rtt`: `high_gain * cwnd / srtt` (1 ms without an RTT sample).
    fn init_pacing_rate(&mut self) {
        let rtt = self.srtt.unwrap_or(NOMINAL_RTT);
        let rate = rate_of_window(self.cwnd, rtt) * self.params.high_gain * (1.0 - PACING_MARGIN_PERCENT / 100.0);
        self.model_rate = rate;
        self.pacing_rate = rate;
    }

    /// `bbr_set_pacing_rate`: `pacing_gain * bw * 99 %`; Startup never lowers it.
    fn set_pacing_rate(&mut self) {
        let bw = self.bw.get();
        if !bw.is_zero() {
            let rate = bw * self.gains().0 * (1.0 - PACING_MARGIN_PERCENT / 100.0);
            if self.pipe_full() || rate > self.model_rate {
                self.model_rate = rate;
            }
        }
        self.pacing_rate = self.model_rate;
    }

    /// The window `bbr_set_cwnd` steers to: `cwnd_gain * BDP + extra_acked`, quantized.
    fn cwnd_target(&self) -> u64 {
        let bdp = self.bdp(self.bw.get(), self.gains().1);
        self.quantization_budget(bdp.saturating_add(self.aggregation_cwnd()))
    }

    /// `bbr_set_cwnd`: grow by what was acked, towards `cwnd_gain * BDP + extra_acked` once the
    /// pipe is full; 4 packets in ProbeRtt.
    fn set_cwnd(&mut self, r: &Report) {
        if r.packets_lost > 0 {
            self.cwnd = self.cwnd.saturating_sub(r.packets_lost.saturating_mul(self.mss));
        }
        if self.recovery == Recovery::Timeout && self.round_start && !r.timeout {
            self.cwnd = self.cwnd.max(self.prior_cwnd);
            self.recovery = Recovery::Open;
        }
        let target = self.cwnd_target();
        let grown = self.cwnd.saturating_add(r.bytes_acked);
        if self.pipe_full() {
            self.cwnd = grown.min(target);
        } else if self.delivered_bytes < self.init_cwnd {
            self.cwnd = grown;
        } else if self.cwnd < target {
            // Linux adds each ACK's delivery while the window is under the target, so over a
            // report's ACKs it stops at the target (one ACK past it at most). Adding the whole
            // report's delivery overshot by up to a report cycle: in the guest (1 BDP, issue
            // 21) the fused window went from 459-494 to 775-794 packets in one 185 ms report
            // where the target was about 500.
            self.cwnd = grown.min(target);
        }
        self.cwnd = self.cwnd.max(self.min_cwnd());
        if matches!(self.mode, Mode::ProbeRtt { .. }) {
            self.cwnd = self.cwnd.min(self.min_cwnd());
        }
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    /// `bbr_main`: update the model, then derive pacing rate and cwnd from it.
    fn on_report(&mut self, r: &Report) -> Decision {
        self.update_srtt(r);
        self.update_round(r);
        if r.timeout {
            self.on_timeout(r.now);
        }
        if r.undo {
            self.on_undo();
        }
        self.update_bw(r);
        self.update_ack_aggregation(r);
        self.update_cycle_phase(r);
        self.check_full_bw_reached(r);
        self.check_drain(r);
        self.update_min_rtt(r);
        self.set_pacing_rate();
        self.set_cwnd(r);
        self.decision()
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: self.cwnd, rate: Some(self.pacing_rate) }
    }

    /// A fused cwnd becomes the current cwnd (the next report pulls it back to the target as
    /// usual); a fused rate paces until the next report recomputes the model's.
    fn sync(&mut self, to: Sync) {
        match to {
            Sync::Cwnd(c) => self.cwnd = c.max(self.min_cwnd()),
            Sync::Rate(r) => self.pacing_rate = r,
        }
    }

    fn in_slow_start(&self) -> bool {
        self.mode == Mode::Startup
    }

    /// A running flow handed over (a live policy change, or a restarted agent adopting it). Out
    /// of slow start the old controller had found its share of the pipe: BBR starts where Linux
    /// is after Drain, in ProbeBw with the pipe full and the handed-over rate as its first bw
    /// sample, so it paces at 0.75-1.25x that rate from the first decision. Startup's 2.885x
    /// rate and window on a flow already at its share is a burst: in the guest's stress run, 64
    /// flows switched into BBR every 2 s overflowed the buffer until retransmissions were lost
    /// in a row and some flows sat in RTO backoff for 45 s. In slow start it stays in Startup.
    fn adopt(&mut self, from: &Handover) {
        if let Some(rate) = from.rate() {
            self.sync(Sync::Rate(rate));
        }
        self.sync(Sync::Cwnd(from.cwnd_bytes));
        if from.in_slow_start {
            return;
        }
        let Some(bw) = from.estimates.bandwidth.or_else(|| from.rate()).filter(|b| !b.is_zero()) else { return };
        self.bw.update(self.round_count, bw);
        // min_rtt comes from the first report: one adopted here would carry no age, and a stamp
        // of zero would expire at once on a flow whose clock is past 10 s (ProbeRtt's 4 packets).
        self.srtt = self.srtt.or(from.estimates.srtt);
        self.pipe = PipeFill::Full;
        // Not a transition of the state machine: this controller starts here.
        self.mode = Mode::ProbeBw { phase: self.random_probe_bw_phase(), phase_start: Duration::ZERO };
        self.set_pacing_rate();
    }

    /// Startup grows by what is acked while the window is below the target (`bbr_set_cwnd`
    /// before the pipe is full), or while less than the initial window has been delivered.
    fn ack_growth_limit(&self) -> Option<u64> {
        if self.mode != Mode::Startup || self.pipe_full() {
            return None;
        }
        if self.delivered_bytes < self.init_cwnd {
            return Some(u64::MAX);
        }
        Some(self.cwnd_target())
    }

    fn estimates(&self) -> Estimates {
        let bw = self.bw.get();
        Estimates { bandwidth: (!bw.is_zero()).then_some(bw), min_rtt: self.min_rtt, srtt: self.srtt }
    }
}

impl Algorithm for BbrConfig {
    type Controller = Bbr;
    const NAME: &'static str = "bbr";
    const SUMMARY: &'static str = "BBR v1: paces at the bottleneck bandwidth estimate, cwnd 2 BDP, gain cycling";

    /// A per-flow instance. Out-of-range parameters (non-positive or non-finite gains, empty
    /// windows) fall back to their defaults rather than failing.
    fn build(&self, info: FlowInfo) -> Bbr {
        let gain = |g: f64, default: f64| if g.is_finite() && g > 0.0 { g } else { default };
        let params = Params {
            high_gain: gain(self.high_gain, HIGH_GAIN),
            drain_gain: gain(self.drain_gain, DRAIN_GAIN),
            cwnd_gain: gain(self.cwnd_gain, PROBE_BW_CWND_GAIN),
            probe_rtt: Duration::from_millis(self.probe_rtt_ms),
            min_rtt_window: Duration::from_secs(self.min_rtt_window_secs.max(1)),
            extra_acked: self.extra_acked,
            extra_acked_max: Duration::from_millis(self.extra_acked_max_ms),
        };
        let mss = info.mss_bytes.max(1);
        let cwnd = info.init_cwnd_bytes.max(MIN_CWND_PACKETS * mss);
        let mut bbr = Bbr {
            params,
            mss,
            mode: Mode::Startup,
            rng: SplitMix64(self.seed),
            round_count: 0,
            round_start_at: Duration::ZERO,
            round_start: false,
            bw: WindowedMax::new(self.bw_window_rounds.max(1)),
            min_rtt: None,
            min_rtt_stamp: Duration::ZERO,
            srtt: None,
            pipe: PipeFill::Filling { full_bw: Rate::ZERO, stalled_rounds: 0 },
            aggregation: AckAggregation::default(),
            recovery: Recovery::Open,
            delivered_bytes: 0,
            init_cwnd: cwnd,
            cwnd,
            prior_cwnd: cwnd,
            model_rate: Rate::ZERO,
            pacing_rate: Rate::ZERO,
        };
        bbr.init_pacing_rate();
        bbr
    }

    fn validate(&self) -> Result<(), PolicyError> {
        check_range(Self::NAME, "high_gain", self.high_gain, 1.0, 10.0, true)?;
        check_range(Self::NAME, "drain_gain", self.drain_gain, 0.0, 1.0, true)?;
        check_range(Self::NAME, "cwnd_gain", self.cwnd_gain, 1.0, 10.0, true)?;
        for (name, v) in [
            ("probe_rtt_ms", self.probe_rtt_ms),
            ("min_rtt_window_secs", self.min_rtt_window_secs),
            ("bw_window_rounds", self.bw_window_rounds),
        ] {
            if v == 0 {
                return Err(PolicyError::InvalidParameter { algorithm: Self::NAME, reason: format!("{name} must be positive") });
            }
        }
        Ok(())
    }

    fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }
}

#[cfg(test)]
mod tests;
