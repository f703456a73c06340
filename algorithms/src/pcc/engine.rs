//! The PCC sender that Allegro ([`crate::allegro`]) and Vivace ([`crate::vivace`]) share: one
//! monitor-interval engine, generic over a rate controller.
//!
//! ```text
//!   report --> Monitor (MI results) --> RateController (utility, state machine) --> next MI rate
//!                  ^                                                                    |
//!                  +------------------------- Engine: MI schedule ----------------------+
//! ```
//!
//! The split: the engine ([`Engine`], its per-flow part [`Sender`]) owns everything that does
//! not depend on the utility: the MIs ([`super::Monitor`]), when an MI ends and the next one
//! begins (at the report closest to its planned end, [`mi_due`]), the first rate (the initial
//! window per smoothed RTT, once an RTT is known), applying a decision (a new MI at once; results
//! of MIs started before it no longer count), rates imposed from outside (a fusion sync, a live
//! policy change: [`Sender::adopt_rate`], [`Sender::seed_rate`]), the output (pacing at the MI's
//! rate, a window of `2 x rate x srtt`), the report cadence and the trace of decisions.
//!
//! A [`RateController`] is the algorithm: the rate the next MI sends at and how long it lasts,
//! what a finished MI's result does to its state machine, and any report-level triggers of its
//! own (Vivace's brakes and early decreases). Its hooks are called in this order per report:
//!
//! ```text
//!   monitor.observe -> observe -> [first rate | MI start] -> preempt? -> on_result (each finished
//!   MI, oldest first) -> after_results -> next MI if due -> decision
//! ```
//!
//! References: Dong et al., NSDI'15 section 2 and 4.1 (MIs, the utility-driven sender);
//! Dong et al., NSDI'18 section 4 (Vivace's use of the same sender).

use super::monitor::{MiResult, Monitor, NOMINAL_RTT};
use crate::units::Rate;
use crate::{CongestionControl, Decision, Estimates, Handover, Report, Sync};
use std::collections::VecDeque;
use std::time::Duration;

/// Trace records kept until [`Sender::take_trace`] (the agent takes them at every report).
pub const MAX_TRACE: usize = 64;

/// One decision of a PCC sender, for the agent's debug log (`--log-json`): what an MI measured,
/// what the utility made of it, and where the rate went. Report-level events (a brake, an early
/// decrease) have no MI of their own.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MiTrace {
    /// When it was decided: datapath time since the flow began, milliseconds.
    pub now_ms: f64,
    /// What happened: e.g. "unified", "climb", "brake_throughput", "brake_loss", "ignored".
    pub event: &'static str,
    /// The state after the decision.
    pub state: &'static str,
    /// The MI judged, and what it measured.
    pub mi: Option<u64>,
    pub rate_mbps: Option<f64>,
    pub delivered_mbps: Option<f64>,
    pub loss_frac: Option<f64>,
    pub rtt_ms: Option<f64>,
    pub rtt_gradient: Option<f64>,
    /// The flow's RTT deviation when the MI began ([`MiResult::rtt_jitter`]), milliseconds.
    pub rtt_jitter_ms: Option<f64>,
    pub packets: Option<f64>,
    /// Its utility and the utility gradient du/dx against the previous MI, where computed.
    pub utility: Option<f64>,
    pub utility_gradient: Option<f64>,
    /// The rate the state machine is centred on after the decision, Mbit/s.
    pub target_mbps: f64,
}

impl MiTrace {
    /// A record of `event` about MI result `r` (None: a report-level event).
    pub fn of(now: Duration, event: &'static str, state: &'static str, r: Option<&MiResult>, target: Rate) -> MiTrace {
        MiTrace {
            now_ms: now.as_secs_f64() * 1e3,
            event,
            state,
            mi: r.map(|r| r.id),
            rate_mbps: r.map(|r| r.rate.mbps()),
            delivered_mbps: r.map(|r| r.throughput.mbps()),
            loss_frac: r.map(|r| r.loss),
            rtt_ms: r.and_then(|r| r.rtt_mean).map(|d| d.as_secs_f64() * 1e3),
            rtt_gradient: r.map(|r| r.rtt_gradient),
            rtt_jitter_ms: r.map(|r| r.rtt_jitter * 1e3),
            packets: r.map(|r| r.packets),
            utility: None,
            utility_gradient: None,
            target_mbps: target.mbps(),
        }
    }
}

/// How long the next MI lasts: `rtts` smoothed RTTs, and with `min_packets` at least the time
/// to send that many packets at `rate` (PCC's "10 packets"; Vivace's prolonged MIs at small BDP).
pub fn mi_duration(srtt: Duration, rtts: f64, rate: Rate, mss_bytes: u64, min_packets: u64) -> Duration {
    let base = srtt.mul_f64(rtts.clamp(0.0, 1e3));
    let bps = rate.bytes_per_sec();
    if min_packets == 0 || bps <= 0.0 {
        return base;
    }
    let for_packets = Duration::try_from_secs_f64((min_packets * mss_bytes) as f64 / bps).unwrap_or(Duration::MAX);
    base.max(for_packets.min(Duration::from_secs(10)))
}

/// The report that closes an MI planned to end at `planned_end`: the first one for which the
/// next report would overshoot the plan by more than this one falls short of it.
pub fn mi_due(r: &Report, planned_end: Duration) -> bool {
    r.now + r.interval / 2 >= planned_end
}

/// PCC's window for a rate-based flow: `2 x rate x RTT`, so the window never limits the pacing
/// rate unless the RTT doubles, and at least `min_packets`.
pub fn cwnd_for(rate: Rate, rtt: Option<Duration>, mss_bytes: u64, min_packets: u64) -> u64 {
    let rtt = rtt.unwrap_or(NOMINAL_RTT);
    crate::units::bytes_from_f64(2.0 * rate.bytes_over(rtt)).max(min_packets * mss_bytes)
}

/// A PCC sender's decision: before its first rate the initial window, unpaced; then the rate and
/// a window of `cwnd_for` it, unless a fusion sync imposed a window until the next report.
pub fn decision(
    rate: Option<Rate>,
    init_cwnd_bytes: u64,
    srtt: Option<Duration>,
    mss_bytes: u64,
    min_packets: u64,
    cwnd_override: Option<u64>,
) -> crate::Decision {
    match rate {
        None => crate::Decision { cwnd_bytes: init_cwnd_bytes, rate: None },
        Some(rate) => crate::Decision {
            cwnd_bytes: cwnd_override.unwrap_or_else(|| cwnd_for(rate, srtt, mss_bytes, min_packets)),
            rate: Some(rate),
        },
    }
}

/// The rate of the `offset`-th MI of a round of probing pairs around `centre`: pair `i` sends
/// `centre (1 + eps)` and `centre (1 - eps)`, the high one first where `high_first[i]`; past the
/// pairs, the centre (Allegro's DecisionMaking, Vivace's Probing).
pub fn probe_rate(centre: Rate, eps: f64, offset: usize, high_first: &[bool]) -> Rate {
    if offset < 2 * high_first.len() {
        let high = (offset & 1 == 0) == high_first[offset / 2];
        centre * if high { 1.0 + eps } else { 1.0 - eps }
    } else {
        centre
    }
}

/// What every PCC sender keeps besides its state machine: its MIs, the rate it sends and the
/// one its state machine is centred on, and which results still count.
#[derive(Clone, Debug)]
pub struct Sender {
    pub mss: u64,
    /// The window before the first rate, bytes.
    pub init_cwnd: u64,
    /// The smallest window, packets.
    pub min_cwnd_packets: u64,
    pub monitor: Monitor,
    /// The open MI's rate; None before the first RTT sample (unless an initial rate is set).
    pub rate: Option<Rate>,
    /// The rate the state machine is centred on.
    pub target: Rate,
    /// Results of MIs with a lower id predate the last decision and are ignored.
    pub accept_from: u64,
    /// When the open MI is planned to end.
    pub mi_end: Duration,
    /// A window imposed by a fusion sync, until the next report.
    pub cwnd_override: Option<u64>,
    /// Decisions not yet taken by [`Sender::take_trace`], at most [`MAX_TRACE`].
    trace: VecDeque<MiTrace>,
}

impl Sender {
    /// A sender starting at `rate` (None: unpaced until an RTT is known); `reject_outliers` as
    /// in [`Monitor::new`].
    pub fn new(info: crate::FlowInfo, min_cwnd_packets: u64, rate: Option<Rate>, reject_outliers: bool) -> Sender {
        let mss = info.mss_bytes.max(1);
        Sender {
            mss,
            init_cwnd: info.init_cwnd_bytes.max(min_cwnd_packets * mss),
            min_cwnd_packets,
            monitor: Monitor::new(reject_outliers),
            rate,
            target: rate.unwrap_or(Rate::ZERO),
            accept_from: 0,
            mi_end: Duration::ZERO,
            cwnd_override: None,
            trace: VecDeque::new(),
        }
    }

    /// Start the next MI at the rate `ctl`'s state calls for (never below its floor, which the
    /// target keeps too), planned to last the length `ctl` asks for.
    pub fn begin_mi<C: RateController>(&mut self, ctl: &mut C, now: Duration) {
        let min = ctl.min_rate();
        let rate = ctl.mi_rate(self).max(min);
        self.target = self.target.max(min);
        self.rate = Some(rate);
        self.monitor.start(now, rate);
        let srtt = self.monitor.srtt().unwrap_or(NOMINAL_RTT);
        let (rtts, min_packets) = ctl.mi_length(srtt);
        self.mi_end = now + mi_duration(srtt, rtts, rate, self.mss, min_packets);
    }

    /// Apply a decision now, once `ctl` has moved to the state it decided on: the centre moves to
    /// `target` (at least the floor), a new MI starts at the rate the state calls for, and
    /// results of MIs already started no longer count.
    pub fn restart<C: RateController>(&mut self, ctl: &mut C, now: Duration, target: Rate) {
        let target = target.max(ctl.min_rate());
        ctl.on_restart(self, now, target);
        self.target = target;
        self.begin_mi(ctl, now);
        self.accept_from = self.monitor.open().map_or(self.monitor.next_id(), |o| o.0);
    }

    /// Keep a decision for the trace (the oldest goes beyond [`MAX_TRACE`]).
    pub fn record(&mut self, t: MiTrace) {
        if self.trace.len() >= MAX_TRACE {
            self.trace.pop_front();
        }
        self.trace.push_back(t);
    }

    /// The decisions recorded since the last call, oldest first.
    pub fn take_trace(&mut self) -> Vec<MiTrace> {
        self.trace.drain(..).collect()
    }

    /// See [`crate::report::sub_rtt_interval`].
    pub fn report_interval(&self) -> Option<Duration> {
        crate::report::sub_rtt_interval(self.monitor.min_rtt(), self.monitor.srtt())
    }

    /// See [`decision`].
    pub fn decision(&self) -> crate::Decision {
        decision(self.rate, self.init_cwnd, self.monitor.srtt(), self.mss, self.min_cwnd_packets, self.cwnd_override)
    }

    /// A fusion sync's window, kept until the next report.
    pub fn sync_cwnd(&mut self, cwnd_bytes: u64) {
        self.cwnd_override = Some(cwnd_bytes.max(self.min_cwnd_packets * self.mss));
    }

    /// Start from a predecessor's rate on a live policy change (even before this sender has a
    /// rate of its own, unlike [`Sender::adopt_rate`]): it becomes the rate sent and the centre,
    /// and MIs opened before it no longer count.
    pub fn seed_rate(&mut self, rate: Rate, min: Rate) {
        let r = rate.max(min);
        self.rate = Some(r);
        self.target = r;
        self.monitor.set_open_rate(r);
        self.accept_from = self.monitor.next_id();
    }

    /// Adopt a synced rate (at least `min`) as the rate sent and the new centre, unless it is the
    /// sender's own ([`is_outside_rate`]); the open MI then no longer measures one rate, so its
    /// result no longer counts. Returns whether the rate was adopted (the caller decides again).
    pub fn adopt_rate(&mut self, synced: Rate, min: Rate) -> bool {
        if !is_outside_rate(self.rate, synced) {
            return false;
        }
        self.seed_rate(synced, min);
        true
    }
}

/// Whether a synced rate is someone else's: more than 1 % away from the sender's own. A sender
/// without a rate yet ignores syncs.
pub fn is_outside_rate(own: Option<Rate>, synced: Rate) -> bool {
    own.is_some_and(|own| (synced.bytes_per_sec() - own.bytes_per_sec()).abs() > 0.01 * own.bytes_per_sec())
}

/// What a PCC algorithm decides on top of the [`Engine`]: the rates of its MIs and what their
/// results do to its state machine. Hooks with a default do nothing.
pub trait RateController {
    /// The algorithm's name, as [`CongestionControl::name`].
    const NAME: &'static str;

    /// The floor under every rate.
    fn min_rate(&self) -> Rate;
    /// Whether the state machine is in its slow start (doubling per MI).
    fn in_slow_start(&self) -> bool;
    /// The rate the MI about to start sends at (before the floor); may move the centre
    /// (`core.target`) as the state calls for.
    fn mi_rate(&mut self, core: &mut Sender) -> Rate;
    /// The length of the MI about to start, given the smoothed RTT: smoothed RTTs, and the
    /// packets it must hold at least (asked after [`RateController::mi_rate`]).
    fn mi_length(&mut self, srtt: Duration) -> (f64, u64);
    /// A finished MI's result (the engine passes all of them, stale ones included: results of
    /// MIs below `core.accept_from` predate the last decision).
    fn on_result(&mut self, core: &mut Sender, now: Duration, r: &MiResult);
    /// A rate from outside (a sync, or a live policy change past slow start) is the new centre:
    /// decide afresh around it.
    fn recentre(&mut self, core: &mut Sender);

    /// A decision centred on `target` is about to be applied ([`Sender::restart`]).
    fn on_restart(&mut self, _core: &Sender, _now: Duration, _target: Rate) {}
    /// Every report, once the monitor has seen it, before the first rate is set.
    fn observe(&mut self, _core: &mut Sender, _r: &Report) {}
    /// Report-level decisions taken before the MI results: true when one was taken, and the
    /// report's results are then not looked at.
    fn preempt(&mut self, _core: &mut Sender, _r: &Report) -> bool {
        false
    }
    /// After the report's MI results.
    fn after_results(&mut self, _core: &mut Sender, _now: Duration) {}
}

/// A PCC sender driven by the rate controller `C`: the per-report loop, syncs and hand-overs,
/// the decision and the trace, the same for every PCC algorithm.
#[derive(Clone, Debug)]
pub struct Engine<C> {
    pub(crate) core: Sender,
    pub(crate) ctl: C,
}

impl<C: RateController> Engine<C> {
    pub fn new(core: Sender, ctl: C) -> Engine<C> {
        Engine { core, ctl }
    }

    /// Start the next MI now (tests drive the MI schedule by hand).
    #[cfg(test)]
    pub(crate) fn begin_mi(&mut self, now: Duration) {
        self.core.begin_mi(&mut self.ctl, now);
    }

    /// Feed one MI result to the controller (tests script results by hand).
    #[cfg(test)]
    pub(crate) fn on_result(&mut self, now: Duration, r: &MiResult) {
        self.ctl.on_result(&mut self.core, now, r);
    }
}

impl<C: RateController + std::fmt::Debug + Send> CongestionControl for Engine<C> {
    fn name(&self) -> &'static str {
        C::NAME
    }

    fn on_report(&mut self, r: &Report) -> Decision {
        let (core, ctl) = (&mut self.core, &mut self.ctl);
        core.cwnd_override = None;
        let done = core.monitor.observe(r);
        ctl.observe(core, r);
        if core.rate.is_none() {
            let Some(srtt) = core.monitor.srtt() else { return core.decision() };
            core.target = crate::units::rate_of_window(core.init_cwnd, srtt).max(ctl.min_rate());
            core.begin_mi(ctl, r.now);
            return core.decision();
        }
        if core.monitor.open().is_none() {
            core.begin_mi(ctl, r.now);
        }
        if ctl.preempt(core, r) {
            return core.decision();
        }
        for res in &done {
            ctl.on_result(core, r.now, res);
        }
        ctl.after_results(core, r.now);
        if mi_due(r, core.mi_end) {
            core.begin_mi(ctl, r.now);
        }
        core.decision()
    }

    fn decision(&self) -> Decision {
        self.core.decision()
    }

    /// What the rate puts in flight: the rate over the smoothed RTT (the installed window is
    /// twice that, a cap that keeps the flow rate-limited, not a view of the path).
    fn fusion_window(&self) -> u64 {
        let cap = self.core.decision().cwnd_bytes;
        match (self.core.rate, self.core.monitor.srtt()) {
            (Some(rate), Some(srtt)) => crate::units::bytes_from_f64(rate.bytes_over(srtt))
                .max(self.core.min_cwnd_packets * self.core.mss)
                .min(cap),
            _ => cap,
        }
    }

    /// A rate adopted from outside becomes the new centre: the open MI no longer measures one
    /// rate, so its result is ignored, and the state machine decides again from there. The
    /// flow's own rate (within 1 %) changes nothing. A window is kept until the next report.
    fn sync(&mut self, to: Sync) {
        match to {
            Sync::Cwnd(c) => self.core.sync_cwnd(c),
            Sync::Rate(r) => {
                if self.core.adopt_rate(r, self.ctl.min_rate()) {
                    self.ctl.recentre(&mut self.core);
                }
            }
        }
    }

    fn estimates(&self) -> Estimates {
        Estimates { bandwidth: self.core.rate, min_rtt: self.core.monitor.min_rtt(), srtt: self.core.monitor.srtt() }
    }

    fn in_slow_start(&self) -> bool {
        self.ctl.in_slow_start()
    }

    /// Four reports per RTT ([`crate::report::sub_rtt_interval`]).
    fn report_interval(&self) -> Option<Duration> {
        self.core.report_interval()
    }

    fn take_trace(&mut self) -> Vec<MiTrace> {
        self.core.take_trace()
    }

    /// A live policy change: start from the flow's rate (its pacing rate, else window / sRTT)
    /// instead of the initial rate, and skip slow start if the predecessor had left it.
    fn adopt(&mut self, from: &Handover) {
        if let Some(rate) = from.rate() {
            self.core.seed_rate(rate, self.ctl.min_rate());
            if !from.in_slow_start {
                self.ctl.recentre(&mut self.core);
            }
        }
        self.core.sync_cwnd(from.cwnd_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_trace_keeps_the_newest_records_until_taken() {
        let mut s = Sender::new(crate::FlowInfo::with_mss(MSS), 4, Some(Rate::from_mbps(1.0)), false);
        for i in 0..(MAX_TRACE as u64 + 5) {
            s.record(MiTrace::of(ms(i), "unified", "Unified", None, Rate::from_mbps(1.0)));
        }
        let t = s.take_trace();
        assert_eq!(t.len(), MAX_TRACE);
        assert_eq!(t[0].now_ms, 5.0, "the oldest five went");
        assert!(s.take_trace().is_empty());
    }

    #[test]
    fn mis_last_long_enough_for_their_minimum_packets() {
        let d = mi_duration(ms(10), 1.0, Rate::from_mbps(1.2), 1500, 10);
        assert_eq!(d, ms(100), "10 packets of 1500 B at 1.2 Mbit/s take 100 ms");
        assert_eq!(mi_duration(ms(10), 1.0, Rate::from_mbps(1.2), 1500, 0), ms(10));
    }
}
