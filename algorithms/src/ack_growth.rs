//! Slow start between reports: the window grows per ACK in the datapath, as Linux grows it.
//!
//! An algorithm decides once per report, and a report comes about once per RTT. Slow start
//! decided only there ("cwnd += what this report acknowledged") doubles the window once per
//! report cycle: the RTT, plus the wait for the first ACK after the report's deadline, plus the
//! agent's round trip, plus the wait for the first ACK after the update arrives. Under ACK
//! aggregation that cycle is 1.5-2 RTTs, and a single snapshot of the inflight at the report's
//! last ACK says "not window-limited" on every other report (the burst of ACKs has just drained
//! it). Measured in the guest on 20 Mbit/s, 100 ms +/- 70 ms (issue 15): the agent's CUBIC doubled
//! every ~240 ms and its BBR every ~270 ms, where the kernel's slow start doubles every RTT.
//!
//! CCP's answer is to fold the per-ACK part into the datapath program. So, while an algorithm
//! gives a [`CongestionControl::ack_growth_limit`], the datapath (ccp.ko's program, the
//! simulator's sender) applies on every ACK
//!
//! ```text
//!   if cwnd < cap and (inflight + delivered) * 2 > cwnd:     (tcp_is_cwnd_limited in slow start)
//!       cwnd = min(cwnd + delivered, cap)                   (tcp_slow_start)
//!   on a loss or a timeout: cap = 0 until the next decision
//! ```
//!
//! with `cap` = the algorithm's limit, at most [`GROWTH_LIMIT`] x the decided window
//! ([`growth_cap`]), so an agent that goes quiet cannot leave a flow doubling without end. At the
//! next report the algorithm decides as usual; [`decide`] keeps the window the datapath grew
//! to, as Linux's slow start never takes back what it grew, unless the report saw a loss or the
//! algorithm decided to shrink below what was installed; the algorithm then continues from it.
//! Fusion follows from the members' limits (see `FusionController`): with `max` on cwnd the
//! fused window grows per ACK as far as its fastest-growing member would.

use crate::{CongestionControl, Decision, Report, Sync};

/// At most this many times the decided window before the next decision: one doubling, what
/// slow start does in one RTT, so a report that arrives late costs at most one round of
/// overshoot.
pub const GROWTH_LIMIT: u64 = 2;

/// The window the datapath may grow to per ACK until the next decision; 0: no growth.
pub fn growth_cap(cc: &dyn CongestionControl, d: &Decision) -> u64 {
    match cc.ack_growth_limit() {
        Some(limit) if limit > d.cwnd_bytes => limit.min(d.cwnd_bytes.saturating_mul(GROWTH_LIMIT)),
        _ => 0,
    }
}

/// One ACK's growth, as the datapath applies it. `inflight_bytes` is what remains in flight
/// after the ACK; `delivered_bytes` what it newly delivered (cumulatively or selectively).
pub fn grow(cwnd_bytes: u64, delivered_bytes: u64, inflight_bytes: u64, cap_bytes: u64) -> u64 {
    let window_limited = inflight_bytes.saturating_add(delivered_bytes).saturating_mul(2) > cwnd_bytes;
    if cwnd_bytes >= cap_bytes || !window_limited {
        return cwnd_bytes;
    }
    cwnd_bytes.saturating_add(delivered_bytes).min(cap_bytes)
}

/// What the datapath's window is at a report, for a datapath that does not report it (ccp.ko):
/// the installed window plus what the report delivered, up to the cap. A report with a loss or a
/// timeout is sent at the ACK that carried it, which did not grow: one packet's worth less. An
/// estimate from above: ACKs that the window-limited test held back, or that arrived before the
/// install took effect, did not grow either.
pub fn expected_cwnd(installed_bytes: u64, cap_bytes: u64, report: &Report) -> u64 {
    if cap_bytes <= installed_bytes {
        return installed_bytes;
    }
    let mut grew = report.bytes_acked;
    if report.packets_lost > 0 || report.timeout {
        grew = grew.saturating_sub(report.bytes_acked / report.packets_acked.max(1));
    }
    installed_bytes.saturating_add(grew).min(cap_bytes)
}

/// Run `cc` on `report` when the window installed at its last decision was `installed` and the
/// datapath has grown it per ACK to `grown` since; returns the decision to install and the
/// next growth cap ([`growth_cap`]).
///
/// - A report with a loss or a timeout is judged from the grown window: Linux reduces the window
///   the flow has, not the one decided a report ago (without this a slow-start overshoot was
///   halved from half its size).
/// - Otherwise the grown window stands when it is larger than the decision, unless `cc` decided
///   to shrink below `installed`; `cc` then continues from it, as Linux's slow start never takes
///   back what it grew.
pub fn decide(cc: &mut dyn CongestionControl, report: &Report, installed: u64, grown: u64) -> (Decision, u64) {
    let lossy = report.packets_lost > 0 || report.timeout;
    if lossy && grown > installed {
        cc.sync(Sync::Cwnd(grown));
    }
    let mut d = cc.on_report(report);
    if !lossy && grown > d.cwnd_bytes && d.cwnd_bytes >= installed {
        cc.sync(Sync::Cwnd(grown));
        d = Decision { cwnd_bytes: grown, ..d };
    }
    let cap = growth_cap(cc, &d);
    (d, cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cubic::CubicConfig;
    use crate::Algorithm;
    use crate::reno::RenoConfig;
    use crate::FlowInfo;
    use std::time::Duration;

    const MSS: u64 = 1448;

    fn report(acked: u64, inflight: u64) -> Report {
        Report {
            now: Duration::from_millis(100),
            interval: Duration::from_millis(100),
            bytes_acked: acked,
            packets_acked: acked / MSS,
            rtt_last: Some(Duration::from_millis(100)),
            rtt_min: Some(Duration::from_millis(100)),
            rtt_sum: Duration::from_millis(100),
            rtt_samples: 1,
            bytes_in_flight: inflight,
            packets_in_flight: inflight / MSS,
            ..Report::default()
        }
    }

    #[test]
    fn per_ack_growth_doubles_a_window_limited_flow_once_per_window_of_acks() {
        // 10 packets out, each ACK delivers one: after the 10 ACKs of one RTT the window is 20.
        let (mut cwnd, mut inflight) = (10 * MSS, 10 * MSS);
        for _ in 0..10 {
            inflight -= MSS;
            cwnd = grow(cwnd, MSS, inflight, 100 * MSS);
            inflight = cwnd.min(inflight + 2 * MSS); // the sender fills the new room
        }
        assert_eq!(cwnd, 20 * MSS);
    }

    #[test]
    fn growth_stops_at_the_cap_and_without_a_cap() {
        assert_eq!(grow(10 * MSS, 5 * MSS, 10 * MSS, 12 * MSS), 12 * MSS);
        assert_eq!(grow(10 * MSS, 5 * MSS, 10 * MSS, 0), 10 * MSS);
    }

    #[test]
    fn a_flow_using_under_half_its_window_does_not_grow() {
        // 4 packets left in flight + 1 delivered, of a 10-packet window: not window-limited.
        assert_eq!(grow(10 * MSS, MSS, 4 * MSS, 100 * MSS), 10 * MSS);
        assert_eq!(grow(10 * MSS, MSS, 5 * MSS, 100 * MSS), 11 * MSS);
    }

    #[test]
    fn the_cap_is_one_doubling_and_only_while_the_algorithm_has_a_growth_limit() {
        let cubic = CubicConfig::default().build(FlowInfo::with_mss(MSS));
        let d = cubic.decision();
        assert_eq!(cubic.ack_growth_limit(), Some(u64::MAX), "CUBIC starts in slow start");
        assert_eq!(growth_cap(&cubic, &d), 2 * d.cwnd_bytes);
        let mut reno = RenoConfig::default().build(FlowInfo::with_mss(MSS));
        reno.sync(Sync::Cwnd(100 * MSS));
        let mut r = report(10 * MSS, 100 * MSS);
        r.packets_lost = 1;
        reno.on_report(&r); // a loss ends slow start
        assert_eq!(reno.ack_growth_limit(), None);
        assert_eq!(growth_cap(&reno, &reno.decision()), 0);
    }

    #[test]
    fn the_decision_keeps_the_grown_window_unless_a_loss_or_the_algorithm_says_otherwise() {
        let mut cubic = CubicConfig::default().build(FlowInfo::with_mss(MSS));
        let start = cubic.decision().cwnd_bytes;
        // The report's inflight snapshot is under half the window: CUBIC's own rule would not
        // grow, but the datapath grew per ACK to a doubling.
        let r = report(start, start / 4);
        let grown = expected_cwnd(start, 2 * start, &r);
        assert_eq!(grown, 2 * start);
        let (d, cap) = decide(&mut cubic, &r, start, grown);
        assert_eq!(d.cwnd_bytes, 2 * start);
        assert_eq!(cubic.decision().cwnd_bytes, 2 * start, "CUBIC continues from the grown window");
        assert_eq!(cap, 4 * start, "still in slow start: one more doubling allowed");
        // A loss: judged from the window the datapath grew to, 4x the start, so the reduction
        // leaves 0.7 x 4 (CUBIC's beta), not 0.7 x 2; and no growth after it.
        let mut lossy = report(2 * start, 2 * start);
        lossy.packets_lost = 2;
        let (d, cap) = decide(&mut cubic, &lossy, 2 * start, 4 * start);
        assert!(d.cwnd_bytes > 2 * start && d.cwnd_bytes < 4 * start, "{} from {}", d.cwnd_bytes, 4 * start);
        assert_eq!(cap, 0, "out of slow start");
    }

    /// A window algorithm that allows per-ACK growth but halves its window on every report.
    #[derive(Debug)]
    struct Halver(u64);

    impl CongestionControl for Halver {
        fn name(&self) -> &'static str {
            "halver"
        }
        fn on_report(&mut self, _: &Report) -> Decision {
            self.0 /= 2;
            self.decision()
        }
        fn decision(&self) -> Decision {
            Decision { cwnd_bytes: self.0, rate: None }
        }
        fn sync(&mut self, to: Sync) {
            if let Sync::Cwnd(c) = to {
                self.0 = c;
            }
        }
        fn ack_growth_limit(&self) -> Option<u64> {
            Some(u64::MAX)
        }
    }

    #[test]
    fn an_algorithm_that_shrinks_below_what_was_installed_is_obeyed() {
        let mut h = Halver(100 * MSS);
        let (d, cap) = decide(&mut h, &report(10 * MSS, 100 * MSS), 100 * MSS, 110 * MSS);
        assert_eq!(d.cwnd_bytes, 50 * MSS, "the grown 110 packets do not override a decision to shrink");
        assert_eq!(cap, 100 * MSS);
    }
}
