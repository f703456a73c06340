//! Vivace's gradient ascent on the utility, after slow start: the step from a gradient (the
//! confidence amplifier and the dynamic change bound, [`StepControl`]) and the three ways of
//! measuring the gradient.
//!
//! ```text
//!   step = omega * du/dx * m,  m = ((rounds + 1) / 2)^1.2          (confidence amplifier)
//!   |step| <= x (0.05 + 0.05 k) <= 0.25 x                          (dynamic change bound)
//!
//!   Probing (3 pairs at r(1 +/- 0.05), random order) --up: 2 of 3 votes, down: 3 of 3--> Moving;
//!       no decision: probe again
//!   Moving (r += step per MI) --gradient changes sign--> Probing from the last good rate
//!   Unified (modification 1): du/dx from consecutive MIs, a step per result; a climb through
//!       uncongested MIs that deliver more than the last congested one steps by the whole bound
//! ```

use super::utility::{gradient, Sample};
use super::{Controller, Phase};
use crate::pcc::{self, MiResult, RateController, Sender};
use crate::Rate;
use std::time::Duration;

/// Probing offset: pairs at r(1 +/- 0.05) (NSDI'18).
pub const PROBING_EPS: f64 = 0.05;
/// Probing pairs per decision (the reference user-space code): an increase needs
/// [`PROBE_VOTES_UP`] of them, a decrease all of them.
pub const PROBE_PAIRS: usize = 3;
pub const PROBE_VOTES_UP: usize = 2;
/// MI length in smoothed RTTs.
pub const MI_RTTS: f64 = 1.0;
/// Past slow start an MI lasts at least this long. Its latency gradient is an RTT rise over the
/// MI, and the timing noise of ACKs (aggregation, interrupt coalescing, the emulated guest's
/// late timers) is about a millisecond whatever the path's RTT: over a 30 ms MI that is a
/// gradient of 0.03, three times the latency filter, charged by gamma = 900 as several times the
/// flow's whole x^0.9, in either MI of a probing pair. Measured in the simulator (50 Mbit/s, 30
/// ms, 1 % loss, seeds 1-3): with +/-2 ms of ACK jitter, 1-RTT MIs ran 0.846-0.867 of the link,
/// 60 ms ones 0.89-0.95; without jitter 0.952-0.961 either way. The cost is reaction time on
/// short paths: at 30 ms the 50 -> 100 Mbit/s step reaches 90 % in 0.41 s instead of 0.26 s (still
/// 0.42x base Vivace's). Slow start keeps 1-RTT MIs (it judges latency by its own threshold, not
/// the gradient).
pub const MIN_MI_TIME: Duration = Duration::from_millis(60);
/// Dynamic change bound: the first bound and its growth per binding step, fractions of the rate.
pub const CHANGE_BOUND_BASE: f64 = 0.05;
pub const CHANGE_BOUND_STEP: f64 = 0.05;
/// Never more than 25 % per step.
pub const CHANGE_BOUND_MAX: f64 = 0.25;
/// The confidence amplifier's exponent.
pub const AMPLIFIER_EXPONENT: f64 = 1.2;
/// Smallest rate change, Mbit/s (NSDI'18 code: 0.5 Mbit/s), and no smaller than the gradient
/// can be estimated over.
pub const MIN_RATE_CHANGE_MBPS: f64 = 0.5;

/// The confidence amplifier and the dynamic change bound.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StepControl {
    pub(super) dir: f64,
    pub(super) rounds: u32,
    pub(super) bound_k: u32,
}

impl StepControl {
    /// A signed step in Mbit/s for gradient `g` at rate `mbps`.
    pub(super) fn step(&mut self, g: f64, mbps: f64, omega: f64) -> f64 {
        let dir = if g >= 0.0 { 1.0 } else { -1.0 };
        if dir == self.dir {
            self.rounds = self.rounds.saturating_add(1);
        } else {
            *self = StepControl { dir, rounds: 1, bound_k: 0 };
        }
        let amplifier = ((self.rounds as f64 + 1.0) / 2.0).powf(AMPLIFIER_EXPONENT);
        let mut step = (omega * g * amplifier).abs();
        let bound = mbps * (CHANGE_BOUND_BASE + CHANGE_BOUND_STEP * self.bound_k as f64).min(CHANGE_BOUND_MAX);
        if step > bound {
            step = bound;
            self.bound_k = self.bound_k.saturating_add(1);
        } else {
            self.bound_k = self.bound_k.saturating_sub(1);
        }
        let min_change = MIN_RATE_CHANGE_MBPS.min(CHANGE_BOUND_BASE * mbps);
        dir * step.max(min_change)
    }

    /// An increase by the whole change bound (which then grows): a climb through uncongested
    /// MIs, where the gradient's size is only the slope of `alpha x^delta` and says nothing
    /// about how far the capacity is. The bound starts from the confidence the increases in a
    /// row already built (k at least their number): with a decision every MI, those increases
    /// were small gradient steps that rarely bound, and starting the climb at 5 % again cost
    /// two MIs on a doubled link (0.30 s instead of 0.24 s from 50 to 90 Mbit/s).
    pub(super) fn climb(&mut self, mbps: f64) -> f64 {
        if self.dir > 0.0 {
            self.bound_k = self.bound_k.max(self.rounds);
        }
        self.step(f64::INFINITY, mbps, 1.0)
    }
}

impl Controller {
    /// The state after slow start, a brake or a sync, centred on the target.
    pub(super) fn decide_again(&mut self, core: &Sender) -> Phase {
        if self.params.unified {
            Phase::Unified { last: None, dir: 1.0 }
        } else {
            self.new_probe(core)
        }
    }

    pub(super) fn new_probe(&mut self, core: &Sender) -> Phase {
        let mut high_first = [false; PROBE_PAIRS];
        for h in high_first.iter_mut() {
            *h = self.rng.coin();
        }
        Phase::Probing { first_id: core.monitor.next_id(), high_first, samples: [None; 2 * PROBE_PAIRS] }
    }

    /// The rate of the next probing MI: the pairs around the centre, then the centre.
    pub(super) fn probe_rate(&self, core: &Sender) -> Rate {
        let Phase::Probing { first_id, high_first, .. } = &self.phase else { unreachable!("probing outside Probing") };
        let offset = core.monitor.next_id().saturating_sub(*first_id) as usize;
        pcc::probe_rate(core.target, PROBING_EPS, offset, high_first)
    }

    /// The rate of the next moving MI: a step along the latest gradient.
    pub(super) fn moving_rate(&mut self, core: &mut Sender) -> Rate {
        let Phase::Moving { gradient, .. } = self.phase else { unreachable!("moving outside Moving") };
        let g = gradient;
        let step = self.steps.step(g, core.target.mbps(), self.params.omega);
        core.target = Rate::from_mbps(core.target.mbps() + step);
        core.target
    }

    /// The rate of the next unified MI: the centre, at least a minimum change away from the
    /// rate sent now; through a run of ignored MIs, never more than one away from where it began.
    ///
    /// Consecutive MIs must differ for their gradient to exist. Stepping away from the rate sent
    /// now alone walked the rate on through MIs that were never judged (app-limited, or too few
    /// packets): a minimum change per MI without a single result (simulator, fused Vivace +
    /// CUBIC, 20 Mbit/s, RTT 100 ms +/-100 ms: CUBIC's window held the flow, every MI was
    /// ignored, and the rate went from 30 to 47 Mbit/s in 6 s; when `max` took Vivace's window,
    /// the flow went out at 2.3x the link). So once an MI comes back ignored, a step that would
    /// leave the rate sent then more than one minimum change behind goes back the other way: the
    /// rate alternates between two neighbours until an MI is judged. Only an ignored result
    /// starts such a run: between judged MIs whose results are merely still in flight, the
    /// steps go on as before (a run of them is the pipeline, not an idle flow).
    pub(super) fn unified_rate(&mut self, core: &mut Sender) -> Rate {
        let Phase::Unified { dir, .. } = self.phase else { unreachable!("unified outside Unified") };
        let last = core.rate.unwrap_or(core.target).mbps();
        let min_change = MIN_RATE_CHANGE_MBPS.min(CHANGE_BOUND_BASE * last);
        let near = |a: f64, b: f64| (a - b).abs() <= 1.01 * min_change;
        if (core.target.mbps() - last).abs() < min_change / 2.0 {
            let ahead = last + dir * min_change;
            core.target = Rate::from_mbps(match self.ignored_from {
                // A start the rate has since left (a brake, a restart) no longer bounds it.
                Some(from) if near(last, from) && !near(ahead, from) => last - dir * min_change,
                _ => ahead,
            });
        }
        core.target
    }

    /// Probing's step for one finished MI `r`, scored `s`: file it with its pair, and once all
    /// pairs are in, move in the direction they vote for or probe again.
    pub(super) fn judge_probing(
        &mut self,
        core: &mut Sender,
        now: Duration,
        r: &MiResult,
        s: Sample,
        (first_id, high_first, mut samples): (u64, [bool; PROBE_PAIRS], [Option<Sample>; 2 * PROBE_PAIRS]),
    ) {
        let offset = r.id.saturating_sub(first_id) as usize;
        if offset >= samples.len() {
            return;
        }
        samples[offset] = Some(s);
        if let Some(all) = samples.iter().copied().collect::<Option<Vec<Sample>>>() {
            let grads: Vec<f64> = all.chunks(2).filter_map(|p| gradient(p[0], p[1])).collect();
            let ups = grads.iter().filter(|g| **g > 0.0).count();
            let dir = match ups {
                _ if grads.len() < PROBE_PAIRS => 0.0,
                n if n >= PROBE_VOTES_UP => 1.0,
                0 => -1.0,
                _ => 0.0,
            };
            if dir != 0.0 {
                let agreeing: Vec<f64> = grads.iter().copied().filter(|g| (*g > 0.0) == (dir > 0.0)).collect();
                let g = agreeing.iter().sum::<f64>() / agreeing.len() as f64;
                // Continue from the better rate of the last pair.
                let pair = &all[all.len() - 2..];
                let better = if (pair[0].mbps > pair[1].mbps) == (dir > 0.0) { pair[0] } else { pair[1] };
                self.steps = StepControl::default();
                self.restart(core, now, Rate::from_mbps(better.mbps), Phase::Moving { dir, gradient: g, last: better });
            } else {
                let next = self.new_probe(core);
                self.restart(core, now, core.target, next);
            }
        } else {
            self.phase.to(Phase::Probing { first_id, high_first, samples });
        }
    }

    /// Moving's step for one finished MI scored `s`: on while the gradient from the `last` MI
    /// keeps the sign of `dir`, back to probing from `last` when it turns.
    pub(super) fn judge_moving(
        &mut self,
        core: &mut Sender,
        now: Duration,
        s: Sample,
        dir: f64,
        g_old: f64,
        last: Sample,
    ) {
        match gradient(last, s) {
            Some(g) if (g >= 0.0) != (dir > 0.0) => {
                let next = self.new_probe(core);
                self.restart(core, now, Rate::from_mbps(last.mbps), next);
            }
            g => self.phase.to(Phase::Moving { dir, gradient: g.unwrap_or(g_old), last: s }),
        }
    }

    /// Unified's step for one finished MI scored `s`: a step along the gradient from the `last`
    /// MI (modification 1).
    pub(super) fn judge_unified(&mut self, core: &mut Sender, s: Sample, last: Option<Sample>, dir: f64) {
        self.ignored_from = None;
        let mut dir = dir;
        if let Some((l, g)) = last.and_then(|l| gradient(l, s).map(|g| (l, g))) {
            let from = self.unified_base(core, l, s, g);
            let accelerate = self.finds_new_capacity(l, s, g);
            let step = if accelerate { self.steps.climb(from) } else { self.steps.step(g, from, self.params.omega) };
            dir = step.signum();
            let mut to = from + step;
            if self.accelerating && !s.clean {
                // The climb ran past the new capacity while its results were in
                // flight: back to what the congested MI delivered.
                to = to.min(s.delivered_mbps);
            }
            self.accelerating = accelerate;
            core.target = Rate::from_mbps(to).max(self.min_rate());
        }
        self.phase.to(Phase::Unified { last: Some(s), dir });
    }

    /// Where a unified step starts. The gradient is that at the midpoint of the two MIs'
    /// rates, so in general the step starts there: stepping from the newest rate compounds the
    /// one or two MIs sent since (a run of decreases overshoots the queue's end; four flows on
    /// 100 Mbit/s then shared it with Jain 0.83 instead of 0.99), and stepping from the measured
    /// MI's own rate interleaves two rate sequences one MI apart. The exception is a climb
    /// through uncongested MIs (neither saw a loss or latency penalty, and the running loss mean
    /// is under [`super::utility::RAMP_MAX_LOSS_MEAN`]): there the step goes on
    /// from the newest rate, as Moving does, so new capacity is taken up at the rate the change
    /// bound allows.
    pub(super) fn unified_base(&self, core: &Sender, l: Sample, s: Sample, g: f64) -> f64 {
        let mid = (l.mbps + s.mbps) / 2.0;
        if self.clean_climb(l, s, g) || self.finds_new_capacity(l, s, g) {
            mid.max(core.target.mbps())
        } else {
            mid
        }
    }

    /// A second increase in a row between two uncongested MIs.
    pub(super) fn clean_climb(&self, l: Sample, s: Sample, g: f64) -> bool {
        g > 0.0 && self.steps.dir > 0.0 && self.steps.rounds > 0 && l.clean && s.clean
    }

    /// An increase between two uncongested MIs, the newer of which delivered more than the
    /// last congested MI: the capacity grew, and the change bound rather than the gradient sets
    /// the step. One such MI is enough (it is judged one MI earlier than waiting for a second).
    pub(super) fn finds_new_capacity(&self, l: Sample, s: Sample, g: f64) -> bool {
        g > 0.0 && l.clean && s.clean && self.congested_mbps.is_none_or(|c| s.delivered_mbps > c)
    }
}
