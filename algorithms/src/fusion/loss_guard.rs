//! The loss guard of `max` on cwnd (issue 21): after a congestion loss the fused window follows
//! the smallest member loss response (the why and the numbers are in the header of `fusion.rs`).

use super::window_in_use;
use crate::Report;
use std::time::Duration;

/// `max` on cwnd after a congestion loss: the loss response of the member that backs off stands
/// against the one that does not (issue 21; the header of `fusion.rs` has the why and the numbers).
///
/// A loss is a congestion loss when a queue stood behind it: the report's smallest RTT at least
/// a quarter of the min RTT (and 2 ms) above the min RTT, or the report had far more in flight
/// than the path holds (a buffer too shallow for its queue to show), or a timeout. An ECN mark is one
/// whatever the RTT says (a router marked because its queue stood). Other losses are the
/// path's (random loss, a policer) and `max` stands, so the member that ignores them keeps the
/// link. From a congestion loss the fused window is the smallest member loss response, for one
/// srtt after the last such loss and then until that response has grown back to the window in
/// force when the guard opened; it ends early when the response falls below the path's BDP
/// estimate (a paced member's bandwidth over the smallest min RTT), where backing off costs the
/// link and no longer drains a queue (that report is held at the estimate). After a timeout only
/// the srtt holds, and the window may collapse.
#[derive(Debug, Default)]
pub(super) struct LossGuard {
    /// One srtt after the last congestion loss (report time).
    pub(super) until: Option<Duration>,
    /// Windows below this are no loss response: half of what was in flight at the loss, or of
    /// the window in force where that was less (BBR's ProbeRtt window, 4 packets, is not one; a
    /// window member's answer from its own window, under a pilot window never filled, is: guest,
    /// +/-70 ms, CUBIC's 307 packets against BBR's 618 with 371 in flight, where half the window
    /// kept 618 and the flow refilled it and lost 360 packets more). `None` after a timeout,
    /// which may collapse the window.
    pub(super) floor: Option<u64>,
    /// The window in force when the guard opened; `None` after a timeout.
    pub(super) regain: Option<u64>,
    /// The window in force at the last loss episode's first congestion loss (or timeout), or what
    /// was in flight then where that was less (a paced pilot's window met a loss it never
    /// filled), kept after the guard ends: more than the path and its buffer were last shown to
    /// hold, until the flow keeps more in flight without a congestion loss (`held`).
    pub(super) lost_at: Option<u64>,
    /// What was in flight at a report outside the guard, with its time: raises `lost_at` once an
    /// srtt has passed without a congestion loss (the loss of anything in flight then would have
    /// been seen by that time).
    probe: Option<(Duration, u64)>,
    /// `lost_at` before the last episode set it: what an undo of that episode restores.
    lost_at_before: Option<Option<u64>>,
}

/// Whether a queue stood behind `report`: its smallest RTT a quarter of the min RTT (and 2 ms) above
/// the min RTT. Without either RTT, assume one.
pub(super) fn queue_stood(report: &Report, min_rtt: Option<Duration>) -> bool {
    queued(report.rtt_min, min_rtt, true)
}

/// Whether `report` ended on a queue its smallest RTT does not show: its last RTT or its second
/// half's mean that far above the min RTT. Slow start fills the queue within one report, whose
/// smallest RTT is then from before it (see [`FusionController::on_report`](crate::CongestionControl::on_report)).
pub(super) fn queue_rose(report: &Report, min_rtt: Option<Duration>) -> bool {
    [report.rtt_last, report.rtt_second_half_mean].into_iter().any(|rtt| queued(rtt, min_rtt, false))
}

/// `rtt` a quarter of `min_rtt` (and 2 ms) above it; `unknown` without either.
pub(super) fn queued(rtt: Option<Duration>, min_rtt: Option<Duration>, unknown: bool) -> bool {
    match (rtt, min_rtt) {
        (Some(now), Some(min)) => now.saturating_sub(min) >= (min / 4).max(Duration::from_millis(2)),
        _ => unknown,
    }
}

impl LossGuard {
    pub(super) fn active(&self, now: Duration) -> bool {
        self.until.is_some_and(|t| now <= t) || self.regain.is_some()
    }

    /// A report with losses or ECN marks, `window` the fused window in force; `overfilled`: what
    /// the path holds where the report had far more in flight (a congestion loss on a buffer too
    /// shallow for the queue to show, `FusionController::overfilled`).
    pub(super) fn on_loss(
        &mut self,
        report: &Report,
        window: u64,
        min_rtt: Option<Duration>,
        srtt: Option<Duration>,
        overfilled: Option<u64>,
    ) {
        if !(report.timeout || report.packets_ce > 0 || overfilled.is_some() || queue_stood(report, min_rtt)) {
            return;
        }
        let opened = self.active(report.now);
        // What the loss met: the window in force, or what was in flight where less, or what the
        // path holds where that was overfilled.
        let used = match report.bytes_in_flight {
            0 => window,
            in_flight => window.min(in_flight),
        };
        let used = overfilled.map_or(used, |holds| used.min(holds));
        // A new episode: no congestion loss in the last srtt (later reports of one episode carry
        // its response, not the window that met the loss).
        if self.until.is_none_or(|t| report.now > t) {
            self.lost_at_before = Some(self.lost_at);
            self.lost_at = Some(used);
        }
        self.probe = None;
        self.floor = (!report.timeout).then_some(used / 2);
        self.regain = match (report.timeout, opened) {
            (true, _) => None,
            (false, true) => self.regain,
            (false, false) => Some(window),
        };
        self.until = srtt.map(|rtt| report.now + rtt);
    }

    /// The stack undid its last loss reduction ([`Report::undo`], at `now`): the losses that
    /// opened the guard were reordering, not congestion. A guard still holding ends, and
    /// `lost_at` is what it was before that episode (its window was not more than the path
    /// holds). A guard already over is left alone: the undo may be of a loss that never opened
    /// it, and `lost_at` then belongs to an earlier, real, episode.
    pub(super) fn undo(&mut self, now: Duration) {
        if !self.active(now) {
            return;
        }
        if let Some(before) = self.lost_at_before.take() {
            self.lost_at = before;
        }
        self.until = None;
        self.floor = None;
        self.regain = None;
        self.probe = None;
    }

    /// Every report after `on_loss` has seen it, `window` the fused window in force: what the
    /// flow kept in flight outside the guard without a congestion loss for an srtt after it
    /// raises `lost_at`, which is then no longer more than the path and its buffer were shown to
    /// hold (ACK jitter lets a path hold more in flight than at a loss without jitter's help). A
    /// window at least 90 % in flight counts whole: paced, the flow keeps its window a little
    /// short, and what it held would otherwise trail the window it runs by that much for good.
    pub(super) fn held(&mut self, report: &Report, window: u64, srtt: Option<Duration>) {
        if self.active(report.now) {
            return;
        }
        if let (Some((at, in_flight)), Some(srtt)) = (self.probe, srtt) {
            if report.now >= at + srtt {
                self.lost_at = self.lost_at.map(|w| w.max(in_flight));
                self.probe = None;
            }
        }
        let in_flight = report.bytes_in_flight;
        let used = if window_in_use(in_flight, window) { window.max(in_flight) } else { in_flight };
        if self.probe.is_none() && self.lost_at.is_some_and(|w| used > w) {
            self.probe = Some((report.now, used));
        }
    }

    /// While the guard holds, the member whose loss response is followed and the fused window.
    pub(super) fn window(
        &mut self,
        now: Duration,
        values: &[u64],
        paced: &[bool],
        bdp: Option<u64>,
    ) -> Option<(usize, u64)> {
        if !self.active(now) {
            return None;
        }
        let floor = self.floor.unwrap_or(0);
        let smallest = |ok: &dyn Fn(usize) -> bool| (0..values.len()).filter(|&i| ok(i)).min_by_key(|&i| values[i]);
        let winner = smallest(&|i| values[i] >= floor && !paced[i])
            .or_else(|| smallest(&|i| values[i] >= floor))
            .or_else(|| smallest(&|_| true))?;
        let mut fused = values[winner];
        if let Some(bdp) = bdp.filter(|&b| fused < b && self.floor.is_some()) {
            self.regain = None;
            fused = bdp.min(values.iter().copied().max().unwrap_or(0));
        }
        if self.until.is_some_and(|t| now > t) && self.regain.is_none_or(|w| fused >= w) {
            self.regain = None;
            self.until = None;
        }
        Some((winner, fused))
    }
}
