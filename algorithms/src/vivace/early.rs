//! Vivace's modification 2, early decreases: once an MI has [`EARLY_DECISION_PACKETS`] packets
//! accounted for, a decrease its partial utility calls for is taken at once (slow start's
//! utility drop, Moving's reversal, a negative unified gradient after a penalty); increases
//! wait for the full MI. A partial is judged on what stands out of its noise only
//! ([`Controller::significant`]).

use super::utility::gradient;
use super::{Controller, Phase};
use crate::pcc::{MiResult, RateController, Sender};
use crate::Rate;
use std::time::Duration;

/// Modification 2: packets accounted for before a partial MI may decide a decrease.
pub const EARLY_DECISION_PACKETS: f64 = 50.0;
/// Modification 2: a partial MI's loss counts only this many binomial standard deviations above
/// the running mean (and its latency gradient only beyond [`EARLY_GRADIENT_SES`] standard
/// errors). The partial is re-judged at every report, a few dozen packets and a handful of RTT
/// points each time: through ccp.ko (four reports per RTT, RTT
/// jittered by milliseconds in the emulated guest) the full MI's filters let one partial in three
/// decide a decrease on noise (192 early decreases in 20 s on 50 Mbit/s, 30 ms, 1 % loss:
/// utilization 0.80).
pub const EARLY_NOISE_SDS: f64 = 3.0;
/// Modification 2: ... and its latency gradient only where the RTT rise it makes over the partial
/// exceeds this many mean RTT deviations ([`MiResult::rtt_jitter`]): ACK aggregation and
/// the guest's timer jitter put RTT steps of milliseconds into a handful of points, which a
/// regression can take for a significant slope.
pub const EARLY_RTT_DEVIATIONS: f64 = 2.0;
/// Modification 2: standard errors ([`MiResult::rtt_gradient_se`]) a partial MI's latency
/// gradient must exceed to count (the full MI's filter zeroes a slope below one).
pub const EARLY_GRADIENT_SES: f64 = 2.0;

impl Controller {
    /// Modification 2: whether an MI's (loss, latency gradient) stand out of their noise: its
    /// loss above the running mean by [`EARLY_NOISE_SDS`] binomial deviations, its latency
    /// gradient above [`EARLY_GRADIENT_SES`] standard errors and the latency filter with an RTT
    /// rise over the MI of more than [`EARLY_RTT_DEVIATIONS`] of the flow's RTT jitter.
    pub(super) fn stands_out(&self, p: &MiResult) -> (bool, bool) {
        let mean = self.loss_mean.unwrap_or(0.0);
        let sd = if p.packets > 0.0 { (mean.max(1.0 / p.packets) * (1.0 - mean) / p.packets).sqrt() } else { 1.0 };
        let lossy = p.loss > mean + EARLY_NOISE_SDS * sd;
        let rising = p.rtt_gradient > (EARLY_GRADIENT_SES * p.rtt_gradient_se).max(self.params.latency_filter)
            && p.rtt_gradient * p.duration.as_secs_f64() > EARLY_RTT_DEVIATIONS * p.rtt_jitter;
        (lossy, rising)
    }

    /// Modification 2: the partial MI as far as it stands out of its noise ([`Controller::stands_out`]):
    /// else its loss is the running mean and its latency gradient none.
    pub(super) fn significant(&self, p: &MiResult) -> MiResult {
        let (lossy, rising) = self.stands_out(p);
        MiResult {
            loss: if lossy { p.loss } else { p.loss.min(self.loss_mean.unwrap_or(0.0)) },
            rtt_gradient: if rising { p.rtt_gradient } else { p.rtt_gradient.min(0.0) },
            ..*p
        }
    }

    /// Modification 2: a decrease the partial MI already calls for.
    pub(super) fn early_decision(&mut self, core: &mut Sender, now: Duration) {
        let Some(p) = core.monitor.partial_front().filter(|_| !self.hold.is_holding()) else { return };
        if p.id < core.accept_from || p.packets < EARLY_DECISION_PACKETS || self.early_judged == Some(p.id) {
            return;
        }
        let s = self.sample(&self.significant(&p));
        match self.phase.clone() {
            Phase::SlowStart { best: Some(b), .. } if s.mbps > b.mbps && s.utility < b.utility => {
                self.early_judged = Some(p.id);
                let next = self.decide_again(core);
                self.restart(core, now, Rate::from_mbps(b.mbps), next);
            }
            Phase::Moving { dir, last, .. } if dir > 0.0 && gradient(last, s).is_some_and(|g| g < 0.0) => {
                self.early_judged = Some(p.id);
                let next = self.new_probe(core);
                self.restart(core, now, Rate::from_mbps(last.mbps), next);
            }
            // A decrease needs a penalty: in the partial (beyond its noise: the rate it sends is
            // too high) or in the MI before it, which a partial at a lower rate now outscores
            // ("keep decreasing"). Between two MIs without one, a negative gradient is the
            // noise of utilities that differ by a rate step's x^delta. Through ccp.ko most early
            // decreases (101 of 165 in one run) came after such a clean MI. Requiring the
            // previous MI's penalty to stand out of the noise too was too much: a loss- and
            // latency-averse tuned configuration then lost 1.29 % instead of 0.32 % on
            // polycc-tune's deep-buffer paths.
            Phase::Unified { last: Some(l), .. } if s.penalised || l.penalised => {
                if let Some(g) = gradient(l, s).filter(|g| *g < 0.0) {
                    self.early_judged = Some(p.id);
                    let from = self.unified_base(core, l, s, g);
                    let step = self.steps.step(g, from, self.params.omega);
                    core.target = Rate::from_mbps(from + step).max(self.min_rate());
                    self.phase.to(Phase::Unified { last: Some(s), dir: -1.0 });
                    // Take it now rather than at the next MI boundary.
                    core.begin_mi(self, now);
                }
            }
            _ => {}
        }
    }
}
