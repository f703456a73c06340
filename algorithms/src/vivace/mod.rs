//! PCC Vivace (Dong et al., "PCC Vivace: Online-Learning Congestion Control", NSDI'18) with the
//! production modifications of "Unleashing Automated Congestion Control Customization" (section
//! 5), each behind a switch.
//!
//! Model: the sender picks a rate per monitor interval (MI, run by the PCC engine
//! [`crate::pcc::Engine`]) and climbs the gradient of a utility measured over the MI's packets:
//!
//! ```text
//!   u(x)  = alpha x^delta - beta x L - gamma x max(0, dRTT/dT)      x in Mbit/s, L loss rate
//!   step  = omega * du/dx * m,  m = ((rounds + 1) / 2)^1.2          (confidence amplifier)
//!   |step| <= x (0.05 + 0.05 k) <= 0.25 x                            (dynamic change bound:
//!           k += 1 each time the bound binds, k -= 1 when it does not)
//!   pacing = the MI's rate,  cwnd = 2 x rate x srtt (>= 4 packets)
//! ```
//!
//! States:
//!
//! ```text
//!   SlowStart (double per MI) --utility drops / exit threshold / max rate--> Probing
//!   Probing (3 pairs at r(1 +/- 0.05), random order) --up: 2 of 3 votes, down: 3 of 3--> Moving;
//!       no decision: probe again
//!   Moving (r += step per MI) --gradient changes sign--> Probing from the last good rate
//!   with `unified_exploration`: SlowStart --> Unified (every MI is a probe: du/dx from
//!   consecutive MIs, a step per result; never a separate probing phase)
//! ```
//!
//! Production modifications (each a [`VivaceConfig`] switch, default on):
//! 1. `unified_exploration`: the gradient at (r1 + r2)/2 from consecutive MIs at r1 and r2, a
//!    step per MI. A climb through uncongested MIs that deliver more than the last congested MI
//!    did has found new capacity: it steps by the whole change bound (which then grows, from
//!    5 % per increase in a row so far), and the first congested MI after it sends the rate
//!    back to what that MI delivered.
//! 2. `early_decrease`: once an MI has [`EARLY_DECISION_PACKETS`] packets accounted for, a
//!    *decrease* its partial utility calls for is taken at once; increases wait for the full MI.
//! 3. `emergency_brakes`: loss over [`BRAKE_LOSS`] in the last RTT of reports, RTT above
//!    [`BRAKE_LATENCY_RATIO`] x min RTT twice running, or an MI's throughput under
//!    [`BRAKE_THROUGHPUT_RATIO`] x its rate (not app-limited, and its loss explaining at least
//!    [`BRAKE_THROUGHPUT_LOSS_SHARE`] of the shortfall) cut the rate at once. The loss
//!    and throughput brakes cut to the delivered rate and hold it for [`BRAKE_HOLD_RTTS`].
//! 4. `insufficient_acks`: MIs with fewer than [`MIN_MI_PACKETS`] packets or app-limited are
//!    ignored, and MIs are prolonged until that many packets fit (small BDP).
//! 5. `noise_filters`: RTT outliers dropped before the regression and a slope below its standard
//!    error zeroed ([`crate::pcc`]); losses charged by a single report count only from
//!    [`SINGLE_REPORT_LOSS`] up (an isolated drop is noise, a burst that large is congestion).
//!
//! Constrained configuration (modification 6): `VivaceConfig::validate` refuses parameters
//! outside the permitted space, notably a loss penalty too low for the utility to hold loss
//! below [`MAX_LOSS_TOLERANCE`].
//!
//! References: NSDI'18 Vivace (utility, amplifier, change bound, constants 0.9 / 900 / 11.35),
//! the Vivace user-space code (PCCproject/PCC-Uspace: probing pairs, moving state), the
//! production paper section 5, `../shared/reference/algorithms.md` section 6.
//!
//! Differences from the reference:
//! - MIs are placed on reports, not packets ([`crate::pcc`]); an MI ends at the report closest
//!   to its planned end, so with once-per-RTT reports MIs are whole numbers of reports.
//! - Past slow start an MI lasts at least [`MIN_MI_TIME`] (60 ms), not one RTT: on short paths a
//!   millisecond of ACK timing noise over one RTT reads as a latency gradient.
//! - A decision (leaving slow start, a probe verdict, a reversal, a brake) starts a new MI at
//!   once; results of MIs started before it are ignored rather than waited for.
//! - The slow-start latency threshold is an RTT inflation over the min RTT, the loss threshold an
//!   MI loss rate; the "excessive latency" brake learns a longer path: when braking did not bring
//!   the RTT down, the min RTT is reset to it.
//! - Loss- or latency-filter levels below which measurements count as zero apply always; the
//!   `noise_filters` switch adds the outlier and persistence filters.
//!
//! Files: `config.rs` ([`VivaceConfig`], its permitted space and factory), `utility.rs` (the
//! utility and its noise filters), `slow_start.rs`, `ascent.rs` (probing, moving, unified: the
//! gradient ascent and its step control), `early.rs` (modification 2), `brakes.rs`
//! (modification 3); this file holds the [`Controller`] that ties them to the engine, and its
//! `Phase` state machine. Tests are in `tests.rs`.

mod ascent;
mod brakes;
mod config;
mod early;
mod slow_start;
#[cfg(test)]
mod tests;
mod utility;

pub use ascent::*;
pub use brakes::*;
pub use config::*;
pub use early::*;
pub use slow_start::*;
pub use utility::*;

use crate::pcc::{Engine, MiResult, MiTrace, RateController, Sender};
use crate::rng::SplitMix64;
use crate::{Rate, Report};
use std::collections::VecDeque;
use std::time::Duration;

/// Per-flow Vivace: the PCC engine driven by Vivace's rate controller.
pub type Vivace = Engine<Controller>;

impl Vivace {
    /// The phase's name, for tests and logs.
    pub fn state_name(&self) -> &'static str {
        self.ctl.phase.name()
    }
}

/// Vivace's rate controller: everything per flow but the MIs, which the engine keeps.
#[derive(Clone, Debug)]
pub struct Controller {
    params: Params,
    rng: SplitMix64,
    phase: Phase,
    steps: StepControl,
    brake: BrakeWindow,
    /// The MI an early decision already used.
    early_judged: Option<u64>,
    /// Running loss rate over recent MIs (modification 5).
    loss_mean: Option<f64>,
    /// What the latest MI that paid a loss or latency penalty delivered (Mbit/s): the
    /// capacity as last measured. Clean MIs delivering clearly more found new capacity.
    congested_mbps: Option<f64>,
    /// The last unified step was a climb into new capacity by the whole change bound.
    accelerating: bool,
    /// In Unified, the rate sent when an MI came back ignored: until one is judged, unified
    /// MIs stay within a minimum change of it ([`Self::unified_rate`]).
    ignored_from: Option<f64>,
    /// After a loss or throughput brake: the rate holds at the target.
    hold: Hold,
    /// Slow start: the last sRTT of reports (time, interval, bytes acked, the rate slow start may
    /// send from that report's ACK rate), see [`SS_ACK_RATE_GAIN`].
    ack_rates: VecDeque<(Duration, Duration, u64, Rate)>,
}

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    /// Double the rate every MI while utility grows. `first`: the first MI keeps the start rate.
    /// `delivered`: what the newest judged MI delivered (Mbit/s) when that fell short of its
    /// rate (see [`SS_SHORTFALL_RATIO`]); a doubling then goes no further than twice that.
    /// `queued`: the previous report's RTT already stood above the exit threshold
    /// ([`Controller::slow_start_queue_exit`]).
    SlowStart { best: Option<Sample>, first: bool, delivered: Option<f64>, queued: bool },
    /// Probe pairs around the target; `high_first[i]`: pair i sends its high rate first.
    Probing { first_id: u64, high_first: [bool; PROBE_PAIRS], samples: [Option<Sample>; 2 * PROBE_PAIRS] },
    /// Step every MI in `dir` with the latest gradient, until it changes sign.
    Moving { dir: f64, gradient: f64, last: Sample },
    /// Modification 1: a gradient from every pair of consecutive MIs.
    Unified { last: Option<Sample>, dir: f64 },
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::SlowStart { .. } => "SlowStart",
            Phase::Probing { .. } => "Probing",
            Phase::Moving { .. } => "Moving",
            Phase::Unified { .. } => "Unified",
        }
    }

    /// Whether `self -> next` is an edge of the diagram in the module header: nothing goes back
    /// to slow start, and unified exploration (modification 1) and the probing/moving pair are
    /// never mixed. Moving and staying within Probing, Moving and Unified is legal.
    fn allows(&self, next: &Phase) -> bool {
        !matches!(
            (self, next),
            (_, Phase::SlowStart { .. })
                | (Phase::Unified { .. }, Phase::Probing { .. } | Phase::Moving { .. })
                | (Phase::Probing { .. } | Phase::Moving { .. }, Phase::Unified { .. })
        )
    }

    /// Move to `next`, checking (in debug builds) that the transition is legal.
    fn to(&mut self, next: Phase) {
        debug_assert!(self.allows(&next), "illegal transition {} -> {}", self.name(), next.name());
        *self = next;
    }
}

impl RateController for Controller {
    const NAME: &'static str = "vivace";

    fn min_rate(&self) -> Rate {
        Rate::from_mbps(MIN_RATE_MBPS)
    }

    fn in_slow_start(&self) -> bool {
        matches!(self.phase, Phase::SlowStart { .. })
    }

    /// The rate the phase calls for; while a brake holds, the centre.
    fn mi_rate(&mut self, core: &mut Sender) -> Rate {
        if self.hold.is_holding() {
            return core.target;
        }
        match self.phase {
            Phase::SlowStart { .. } => self.slow_start_rate(core),
            Phase::Probing { .. } => self.probe_rate(core),
            Phase::Moving { .. } => self.moving_rate(core),
            Phase::Unified { .. } => self.unified_rate(core),
        }
    }

    /// [`MI_RTTS`], past slow start at least [`MIN_MI_TIME`], and with modification 4 at least
    /// [`MIN_MI_PACKETS`] (prolonged at small BDP).
    fn mi_length(&mut self, srtt: Duration) -> (f64, u64) {
        let rtts = if self.in_slow_start() || srtt.is_zero() {
            MI_RTTS
        } else {
            MI_RTTS.max(MIN_MI_TIME.as_secs_f64() / srtt.as_secs_f64())
        };
        (rtts, if self.params.insufficient_acks { MIN_MI_PACKETS } else { 0 })
    }

    /// Score one finished MI and move the state machine, and record the decision for the
    /// trace.
    fn on_result(&mut self, core: &mut Sender, now: Duration, r: &MiResult) {
        let stale = self.is_stale(core, r);
        let ignored = self.ignores(r);
        let s = self.sample(r);
        let last = match &self.phase {
            Phase::Unified { last, .. } => *last,
            Phase::Moving { last, .. } => Some(*last),
            _ => None,
        };
        let before = self.phase.name();
        self.judge(core, now, r);
        let event = if stale {
            "stale"
        } else if ignored {
            "ignored"
        } else if self.hold.is_holding() {
            "brake_throughput"
        } else if self.accelerating {
            "climb"
        } else {
            before
        };
        let mut t = MiTrace::of(now, event, self.phase.name(), Some(r), core.target);
        if !stale && !ignored {
            t.utility = Some(s.utility);
            t.utility_gradient = last.and_then(|l| gradient(l, s));
        }
        core.record(t);
    }

    /// The state machine decides again from the adopted rate: the step control starts over.
    fn recentre(&mut self, core: &mut Sender) {
        self.steps = StepControl::default();
        let next = self.decide_again(core);
        self.phase.to(next);
    }

    fn on_restart(&mut self, core: &Sender, now: Duration, target: Rate) {
        self.forget_corrected(core, now, target);
    }

    /// Slow start keeps the reports' ACK rates.
    fn observe(&mut self, core: &mut Sender, r: &Report) {
        self.track_ack_rate(core, r);
    }

    /// The end of a brake's hold, then the report-level triggers: the brakes (modification 3)
    /// and slow start's exit on a queue.
    fn preempt(&mut self, core: &mut Sender, r: &Report) -> bool {
        if self.hold.is_over(r.now) {
            // The hold is over: decide afresh from the held rate.
            self.hold.to(Hold::Free);
            self.steps = StepControl::default();
            let next = self.decide_again(core);
            self.restart(core, r.now, core.target, next);
        }
        if let Some(event) = self.params.brakes.then(|| self.check_brakes(core, r)).flatten() {
            self.record_event(core, r.now, event);
            return true;
        }
        if self.slow_start_queue_exit(core, r) {
            self.record_event(core, r.now, "slow_start_exit_queue");
            return true;
        }
        false
    }

    /// Modification 2: a decrease the partial MI already calls for.
    fn after_results(&mut self, core: &mut Sender, now: Duration) {
        if self.params.early {
            let judged = self.early_judged;
            self.early_decision(core, now);
            if self.early_judged != judged {
                self.record_event(core, now, "early_decrease");
            }
        }
    }
}

impl Controller {
    /// Apply a decision now: move to `next`, and restart the MIs centred on `target`.
    fn restart(&mut self, core: &mut Sender, now: Duration, target: Rate, next: Phase) {
        self.phase.to(next);
        core.restart(self, now, target);
    }

    /// Trace a report-level decision (a brake, an early decrease): no MI of its own.
    fn record_event(&self, core: &mut Sender, now: Duration, event: &'static str) {
        let t = MiTrace::of(now, event, self.phase.name(), None, core.target);
        core.record(t);
    }

    /// Modification 4: an app-limited MI, or one with too few packets, is not judged.
    fn ignores(&self, r: &MiResult) -> bool {
        self.params.insufficient_acks && (r.app_limited || r.packets < MIN_MI_PACKETS as f64)
    }

    /// An MI that no longer counts: sent before the last restart, already judged early
    /// (modification 2), or finished while a brake holds the rate.
    fn is_stale(&self, core: &Sender, r: &MiResult) -> bool {
        r.id < core.accept_from || Some(r.id) == self.early_judged || self.hold.is_holding()
    }

    fn judge(&mut self, core: &mut Sender, now: Duration, r: &MiResult) {
        if self.is_stale(core, r) {
            return;
        }
        if self.ignores(r) {
            match self.phase {
                Phase::Probing { .. } => {
                    let next = self.new_probe(core);
                    self.restart(core, now, core.target, next);
                }
                Phase::Unified { .. } => {
                    self.ignored_from.get_or_insert(core.rate.unwrap_or(core.target).mbps());
                }
                _ => {}
            }
            return;
        }
        if self.throughput_brake(core, r) {
            self.brake_to(core, now, r.throughput);
            self.hold(core, now);
            return;
        }
        let s = self.sample(r);
        self.update_loss_mean(r);
        if !s.clean {
            self.congested_mbps = Some(s.delivered_mbps);
        }
        match self.phase.clone() {
            Phase::SlowStart { best, queued, .. } => self.judge_slow_start(core, now, r, s, best, queued),
            Phase::Probing { first_id, high_first, samples } => {
                self.judge_probing(core, now, r, s, (first_id, high_first, samples))
            }
            Phase::Moving { dir, gradient, last } => self.judge_moving(core, now, s, dir, gradient, last),
            Phase::Unified { last, dir } => self.judge_unified(core, s, last, dir),
        }
    }
}
