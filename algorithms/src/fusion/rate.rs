//! Fusion on rate (`--fuse-on rate`): the fused rate is `f` over the members' rates (a window-only
//! member's: its window over srtt), and every other member is synced to it.
//!
//! It keeps each member honest about what a capped flow tells it (2026-11-26, issue
//! 21: fused BBR + Copa `min` on rate ran at 1.1 Mbit/s of 20 under +/-70 ms of ACK jitter, where
//! Copa alone ran 3.7-12): a member the fused rate held under 90 % of its own reads that report
//! as app-limited (BBR's filter keeps its estimate instead of following `min`'s dips down), and
//! the window in force is at least one srtt of the fused rate, not the pilot's 2 x bw x min RTT
//! alone. Simulator, RTT 100 ms, 1 BDP, seeds 1-6 x 30 s, fused / Copa alone: +/-0 0.86 -> 0.97,
//! +/-20 0.32 -> 1.03, +/-70 0.13 -> 1.05 (`fused_bbr_copa_min_on_rate_keeps_up_with_copa_under_ack_jitter`);
//! scenario 2 (20 -> 10 Mbit/s) goodput 9.67 -> 11.06 Mbit/s with the queue still drained in 1 s
//! (BBR 4 s). The cost: at +/-100 ms the flow now fills the buffer as its members do, and on a rep
//! where both lost almost nothing its loss is many times theirs (experiments/scenarios/fusion-collateral.toml).
//!
//! A winner whose window is its control (Copa, whose rate is that window over RTT_standing; a
//! window-only member: [`crate::CongestionControl::window_bound`]) has its own window installed,
//! and such a member, synced to another's rate, takes the window that rate keeps in flight over the srtt
//! (2026-11-28, issue 21). One srtt of Copa's rate, a minimum RTT's, was 1.5-3x Copa's window
//! under ACK jitter, and the flow ran past what Copa alone keeps in flight. Simulator
//! (fusion-collateral's cells, seeds 1-6 x 30 s): loss within 2x the lossier member on every
//! seed of 11 of 12 cells (was 8: up to 11x at 0.5 and 1 BDP, +/-70 and +/-100 ms; the miss is one
//! seed at 0.5 BDP +/-100 ms, 2.7x) and p95 queueing delay within 1.1x on every seed of every
//! cell (was 9 of 12, up to 1.35x); goodput 18.4 -> 19.0 Mbit/s at +/-0, within 10 % of Copa's
//! at +/-20 and +/-70 ms. The cost is at +/-100 ms, where Copa alone is bimodal seed by seed
//! (3.7-12 Mbit/s): the fused flow now follows Copa's own dynamics, and took its collapsed mode on
//! 2 of 6 seeds (0.9 and 2.4 Mbit/s) where Copa alone did not (median 4.9 against 7.0 before).

use super::{FuseOn, FusionController};
use crate::units::{rate_of_window, Rate};
use crate::{Decision, Sync};
use std::time::Duration;

/// Fusion on rate with a winner whose window is a cap over its rate (BBR, PCC; a window-bound
/// winner's own window is installed instead, see the module notes): the pilot's window, but never
/// under one srtt's worth of the fused rate, so the window does not hold back the rate the fusion
/// chose (the mirror of `calibrated_rate`). BBR's window is 2 x its bandwidth estimate x min RTT: under ACK jitter the min RTT is a third of a
/// typical RTT (30 ms on a 100 +/- 70 ms path), and an estimate taken while `min` paced the flow
/// at a dip of Copa's kept the window, and so every later sample, at that dip: a fused BBR + Copa
/// flow ran at 4.7 Mbit/s under its fused rate of 13-14. Two srtts' worth instead let the queue
/// fill after scenario 2's bandwidth step (p95 RTT 300 ms against 200, queue drained in 2 s
/// against 1 s); one srtt is the least that passes the rate.
fn window_for_rate(pilot_cwnd: u64, fused: Rate, srtt: Option<Duration>) -> u64 {
    match srtt {
        Some(rtt) => pilot_cwnd.max(fused.bytes_over(rtt) as u64),
        None => pilot_cwnd,
    }
}

impl FusionController {
    /// Fusion on rate: for each member, whether the fused rate in force paced the flow under 90 %
    /// of the member's own last rate. What that report delivered says how fast the flow was let
    /// go, not how fast the path is, so the member reads it as app-limited (Linux's rule for a
    /// rate sample the sender held back): BBR keeps its bandwidth estimate instead of following
    /// `min`'s dips down, and synced to each dip, spiralling to 1.1 Mbit/s of 20 under ACK jitter
    /// where Copa alone held 8-11 (`fused_bbr_copa_min_on_rate_keeps_up_with_copa_under_ack_jitter`).
    pub(super) fn held_below_own_rate(&self) -> Vec<bool> {
        let in_force = match (self.fuse_on, self.decision.rate) {
            (FuseOn::Rate, Some(r)) => r.bytes_per_sec(),
            _ => return Vec::new(),
        };
        self.own_rates.iter().map(|&own| in_force < 0.9 * own).collect()
    }

    /// Fusion on rate: the fused rate over the members' `decisions` (a window-only member's rate is
    /// its window over `srtt`), every other member synced to it, and the window that goes with it.
    pub(super) fn fuse_rates(&mut self, decisions: &[Decision], srtt: Option<Duration>, target_window: Option<u64>) {
        let rate_of = |d: &Decision| match (d.rate, srtt) {
            (Some(r), _) => r,
            (None, Some(rtt)) => rate_of_window(d.cwnd_bytes, rtt),
            (None, None) => Rate::ZERO,
        };
        let values: Vec<f64> = decisions.iter().map(|d| rate_of(d).bytes_per_sec()).collect();
        let target_rate = match (target_window, srtt) {
            (Some(w), Some(rtt)) => Some(rate_of_window(w, rtt).bytes_per_sec()),
            _ => None,
        };
        let winner = self.choose(&values, target_rate);
        let fused = Rate::from_bytes_per_sec(values[winner]);
        if fused.is_zero() {
            // Nothing to fuse yet (no rates, no RTT): follow the pilot unchanged.
            self.last_winner = 0;
            self.decision = decisions[0];
            return;
        }
        self.own_rates = values;
        self.members_mut().enumerate().filter(|(i, _)| *i != winner).for_each(|(_, m)| {
            let to = match srtt {
                Some(rtt) if m.window_bound() => Sync::Cwnd(fused.bytes_over(rtt) as u64),
                _ => Sync::Rate(fused),
            };
            m.sync(to)
        });
        self.last_winner = winner;
        let window_bound = self.members().nth(winner).is_some_and(|m| m.window_bound());
        let cwnd_bytes = if window_bound {
            decisions[winner].cwnd_bytes
        } else {
            window_for_rate(self.pilot.decision().cwnd_bytes, fused, srtt)
        };
        self.decision = Decision { cwnd_bytes, rate: Some(fused) };
    }
}
