//! Vivace's modification 3, emergency brakes: cut the rate at once when the last RTT of reports
//! lost more than [`BRAKE_LOSS`], the RTT stood above [`BRAKE_LATENCY_RATIO`] x min RTT (and
//! [`BRAKE_LATENCY_MIN_EXCESS`] over it) twice running, or an MI delivered under
//! [`BRAKE_THROUGHPUT_RATIO`] of its rate with the loss or a queue to explain it. The loss and
//! throughput brakes cut to the delivered rate and hold it ([`Hold`]) for [`BRAKE_HOLD_RTTS`];
//! the latency brake halves the rate and checks whether the RTT came down ([`LatencyCheck`]),
//! else the path is longer and the min RTT restarts from it.
//!
//! ```text
//!   Hold:         Free --loss / throughput brake--> Until(t) --t passed--> Free (decide again)
//!                 Until(t) --another loss brake--> Until(t')
//!   LatencyCheck: Idle --latency brake--> Pending --2 RTTs--> Idle (min RTT reset if no drop)
//! ```

use super::ascent::StepControl;
use super::{Controller, Phase};
use crate::pcc::{self, MiResult, RateController, Sender};
use crate::{Rate, Report};
use std::collections::VecDeque;
use std::time::Duration;

/// Modification 3: loss rate over the last RTT that brakes (production paper: 10 %).
pub const BRAKE_LOSS: f64 = 0.10;
/// Modification 3: packets the loss brake needs in its window before it judges; the window
/// reaches back past one RTT until it holds them. With 20 (one RTT at 8 Mbit/s), 1 % random
/// loss put three losses in a window often enough to brake every few seconds through ccp.ko
/// (reports four per RTT, each a sliding window); over 50 packets the chance is ~1e-6.
pub const BRAKE_MIN_PACKETS: u64 = 50;
/// Modification 3: RTT over this multiple of the min RTT, twice running, brakes...
pub const BRAKE_LATENCY_RATIO: f64 = 3.0;
/// ... when it also stands this much over the min RTT. On a path of tens of microseconds
/// (loopback, a LAN) host scheduling alone puts RTT samples at 3x the minimum: through the BPF
/// datapath on loopback the brake halved the rate 88 times in 3 s, down to the minimum rate.
/// A queue of a few milliseconds is the utility's latency gradient to correct, not an emergency.
pub const BRAKE_LATENCY_MIN_EXCESS: Duration = Duration::from_millis(5);
/// Modification 3: an MI delivering under this fraction of its rate brakes to its throughput
/// (10 % short: the loss brake's threshold, measured over the MI; a policer shows it)...
pub const BRAKE_THROUGHPUT_RATIO: f64 = 0.9;
/// ... when the MI's loss explains at least this share of the shortfall: what did not arrive was
/// sent and dropped (a policer), not left unsent. Through ccp.ko in the emulated guest, pacing
/// fell short of the rate (MIs at 30 Mbit/s delivering 6-15 with no loss and a flat RTT), and
/// the brake cut and held the flow ~30 times in 20 s (utilization 0.13 on 50 Mbit/s, 1 % loss);
/// requiring a 5 % loss instead still braked on one or two random losses in a short MI.
pub const BRAKE_THROUGHPUT_LOSS_SHARE: f64 = 0.5;
/// Modification 3: ... or when the MI's latency gradient says it went into a queue
/// (`Controller::queued`). Regression: with the loss alone (1a126df), slow start on 25 Mbit/s,
/// 50 ms, 12 BDP ran to 304 Mbit/s, held 152 with the buffer full for 1.3 s and lost 30 %.
/// Modification 3: a queued shortfall brakes only when the MI delivered under this fraction of
/// its rate (sending "far above" throughput): 10-20 % overshoots into a one-BDP queue are the
/// utility's to correct, and braking on them through ccp.ko held the flow at the delivered rate
/// 8-9 times in 20 s.
pub const BRAKE_QUEUED_RATIO: f64 = 0.75;
/// Modification 3: packets an MI needs before the throughput brake judges it.
pub const BRAKE_MIN_MI_PACKETS: f64 = 20.0;
/// Modification 3: after the loss or throughput brake the rate holds at what was delivered for this
/// many smoothed RTTs before the gradient ascent resumes (a policer's rate would otherwise be
/// overrun again at once: the loss filters charge nearby MIs the same running loss).
pub const BRAKE_HOLD_RTTS: f64 = 10.0;
/// Modification 3: the latency brake halves the rate.
pub const BRAKE_LATENCY_CUT: f64 = 0.5;

/// Modification 3's view of the last RTT of reports.
#[derive(Clone, Debug, Default)]
pub(super) struct BrakeWindow {
    /// (time, interval, acked packets, lost packets, acked bytes)
    pub(super) reports: VecDeque<(Duration, Duration, u64, u64, u64)>,
    /// Reports before this are for packets sent before the last brake.
    pub(super) holdoff_until: Duration,
    /// Consecutive reports above the latency threshold.
    pub(super) high_rtt_reports: u32,
    /// After a latency brake: the RTT then, and when to check whether it came down.
    pub(super) latency_check: LatencyCheck,
}

impl BrakeWindow {
    /// Judge only reports from `until` on (packets sent after a brake or a decrease), and
    /// start counting high-RTT reports again.
    pub(super) fn hold_off(&mut self, until: Duration) {
        self.reports.clear();
        self.high_rtt_reports = 0;
        self.holdoff_until = until;
    }
}

/// After the loss or throughput brake, the rate holds at what was delivered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Hold {
    /// The gradient ascent decides.
    Free,
    /// The rate holds at the centre until then; MI results are not judged.
    Until(Duration),
}

impl Hold {
    pub(super) fn is_holding(self) -> bool {
        matches!(self, Hold::Until(_))
    }

    /// Whether a hold is on and has run out by `now`.
    pub(super) fn is_over(self, now: Duration) -> bool {
        matches!(self, Hold::Until(until) if now >= until)
    }

    /// Legal: a brake starts or renews a hold; only a hold ends.
    pub(super) fn allows(self, next: Hold) -> bool {
        !matches!((self, next), (Hold::Free, Hold::Free))
    }

    /// Move to `next`, checking (in debug builds) that the transition is legal.
    pub(super) fn to(&mut self, next: Hold) {
        debug_assert!(self.allows(next), "illegal hold transition {self:?} -> {next:?}");
        *self = next;
    }
}

/// After a latency brake: whether it brought the RTT down.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) enum LatencyCheck {
    #[default]
    Idle,
    /// The RTT when the brake fired, and when to check it.
    Pending { rtt_then: Duration, check_at: Duration },
}

impl LatencyCheck {
    /// Legal: a brake starts a check (none fires while one is pending), the check ends it.
    pub(super) fn allows(self, next: LatencyCheck) -> bool {
        matches!(
            (self, next),
            (LatencyCheck::Idle, LatencyCheck::Pending { .. }) | (LatencyCheck::Pending { .. }, LatencyCheck::Idle)
        )
    }

    /// Move to `next`, checking (in debug builds) that the transition is legal.
    pub(super) fn to(&mut self, next: LatencyCheck) {
        debug_assert!(self.allows(next), "illegal latency-check transition {self:?} -> {next:?}");
        *self = next;
    }
}

impl Controller {
    /// Whether MI `r` trips the throughput brake: it delivered under [`BRAKE_THROUGHPUT_RATIO`]
    /// of its rate and its loss explains [`BRAKE_THROUGHPUT_LOSS_SHARE`] of the shortfall, or
    /// the shortfall went into a queue ([`Controller::queued`]).
    pub(super) fn throughput_brake(&self, core: &Sender, r: &MiResult) -> bool {
        self.params.brakes
            && !r.app_limited
            && r.packets >= BRAKE_MIN_MI_PACKETS
            && ((r.throughput.bytes_per_sec() < BRAKE_THROUGHPUT_RATIO * r.rate.bytes_per_sec()
                && r.loss
                    >= BRAKE_THROUGHPUT_LOSS_SHARE * (1.0 - r.throughput.bytes_per_sec() / r.rate.bytes_per_sec()))
                || self.queued(core, r))
    }

    /// A decision centred on `target` is about to be applied: after a decrease the brakes judge
    /// the packets sent after it, not those it corrected.
    pub(super) fn forget_corrected(&mut self, core: &Sender, now: Duration, target: Rate) {
        if core.rate.is_some_and(|r| target < r) {
            self.brake.hold_off(now + core.monitor.srtt().unwrap_or_default());
        }
    }

    /// Whether an MI's RTT says its shortfall, a quarter of its rate or more, went into a queue:
    /// sending x into a bottleneck of C grows the RTT by (x - C) / C per second, so a queued
    /// shortfall shows as a latency gradient of at least [`BRAKE_THROUGHPUT_LOSS_SHARE`] of
    /// x / delivered - 1.
    ///
    /// Slow start doubles the rate every MI rather than letting the utility correct an
    /// overshoot, so there a queued shortfall of [`BRAKE_THROUGHPUT_RATIO`] (10 %) counts, not
    /// only one of a quarter: the next MI would queue twice the excess. It counts when its
    /// gradient is one the latency filter would not call noise; and since slow start's MIs are
    /// short and carry few RTT points, so that the gradient is often missing (fewer than two
    /// points, or a slope under its error), also when the MI's mean RTT stands above the min RTT
    /// by half of what one MI of it queues, (x / delivered - 1) / 2 of an RTT, or when the MI
    /// has no RTT point at all. Shortfalls within 10 % are noise here too (see the comment in
    /// the body). A pacing shortfall (through ccp.ko, four
    /// reports per RTT: every MI has points) leaves the RTT flat and brakes neither way.
    /// Regression (ca5ecfe): 30 Mbit/s, 50 ms, 12 BDP: 38 Mbit/s delivered 30 (0.79) with a 0.21
    /// gradient, the 76 Mbit/s MI had no RTT point, and slow start ran to 152 and filled the
    /// buffer (612 ms mean RTT, 7.6 % loss); 12 Mbit/s, 40 ms: 23 Mbit/s delivered 12 at
    /// 71 ms (min 41) with a zero gradient (40 % loss).
    pub(super) fn queued(&self, core: &Sender, r: &MiResult) -> bool {
        let delivered = r.throughput.bytes_per_sec();
        let rate = r.rate.bytes_per_sec();
        if delivered <= 0.0 {
            return false;
        }
        let excess = rate / delivered - 1.0;
        let grows = r.rtt_gradient >= BRAKE_THROUGHPUT_LOSS_SHARE * excess;
        if !matches!(self.phase, Phase::SlowStart { .. }) {
            return delivered < BRAKE_QUEUED_RATIO * rate && grows;
        }
        let risen = match (r.rtt_mean, core.monitor.min_rtt()) {
            (Some(m), Some(min)) if !min.is_zero() => {
                m.as_secs_f64() / min.as_secs_f64() - 1.0 >= BRAKE_THROUGHPUT_LOSS_SHARE * excess / 2.0
            }
            // No RTT point at all (reports once per RTT, the RTT growing): doubling on blind
            // is what filled the buffer, so the shortfall counts.
            (None, _) => true,
            _ => false,
        };
        // A shortfall within the throughput brake's 10 % is noise here too: with the ACK-rate
        // bound slow start reaches the capacity slower, and MIs 1-2 % short with a jittered
        // gradient (50 Mbit/s, 30 ms, RTT +/- 2 ms) braked and held it at 0.4 of the link.
        delivered < BRAKE_THROUGHPUT_RATIO * rate && ((grows && r.rtt_gradient > self.params.latency_filter) || risen)
    }

    /// Modification 3: cut to `to` at once and decide again from there.
    pub(super) fn brake_to(&mut self, core: &mut Sender, now: Duration, to: Rate) {
        let to = to.min(core.target).max(self.min_rate());
        self.brake.hold_off(now + core.monitor.srtt().unwrap_or_default());
        self.steps = StepControl::default();
        let next = self.decide_again(core);
        self.restart(core, now, to, next);
    }

    /// Modification 3: after a brake to the delivered rate, send that rate for
    /// [`BRAKE_HOLD_RTTS`] before climbing again.
    pub(super) fn hold(&mut self, core: &mut Sender, now: Duration) {
        let srtt = core.monitor.srtt().unwrap_or(pcc::NOMINAL_RTT);
        self.hold.to(Hold::Until(now + srtt.mul_f64(BRAKE_HOLD_RTTS)));
        core.begin_mi(self, now);
    }

    /// Modification 3's report-level triggers: loss and latency. Returns the brake that fired.
    pub(super) fn check_brakes(&mut self, core: &mut Sender, r: &Report) -> Option<&'static str> {
        let rate = core.rate?;
        let srtt = core.monitor.srtt().unwrap_or_default();
        if let LatencyCheck::Pending { rtt_then, check_at } = self.brake.latency_check {
            if r.now >= check_at {
                self.brake.latency_check.to(LatencyCheck::Idle);
                if let Some(m) = r.rtt_mean().filter(|m| m.as_secs_f64() > 0.8 * rtt_then.as_secs_f64()) {
                    // Braking did not bring the RTT down: the path is longer, not queued.
                    core.monitor.reset_min_rtt(r.now, m);
                }
            }
        }
        if r.now < self.brake.holdoff_until {
            return None;
        }
        let w = &mut self.brake.reports;
        w.push_back((r.now, r.interval, r.packets_acked, r.packets_lost, r.bytes_acked));
        let packets = |x: &(Duration, Duration, u64, u64, u64)| x.2.saturating_add(x.3);
        let mut total: u64 = w.iter().map(packets).fold(0, u64::saturating_add);
        while let Some(f) = w.front().filter(|f| r.now.saturating_sub(f.0) > srtt && w.len() > 1) {
            let rest = total.saturating_sub(packets(f));
            if rest < BRAKE_MIN_PACKETS {
                break;
            }
            total = rest;
            w.pop_front();
        }
        let (span, acked, lost, bytes) = w.iter().fold((Duration::ZERO, 0u64, 0u64, 0u64), |a, x| {
            (a.0.saturating_add(x.1), a.1.saturating_add(x.2), a.2.saturating_add(x.3), a.3.saturating_add(x.4))
        });
        let total = acked.saturating_add(lost);
        if total >= BRAKE_MIN_PACKETS && lost as f64 > BRAKE_LOSS * total as f64 {
            // To what the last RTT delivered.
            let delivered = Rate::from_bytes_over(bytes, span);
            self.brake_to(core, r.now, rate.min(delivered));
            self.hold(core, r.now);
            return Some("brake_loss");
        }
        let high = match (r.rtt_mean(), core.monitor.min_rtt()) {
            (Some(m), Some(min)) => {
                m.as_secs_f64() > BRAKE_LATENCY_RATIO * min.as_secs_f64()
                    && m.saturating_sub(min) >= BRAKE_LATENCY_MIN_EXCESS
            }
            _ => false,
        };
        // While a latency brake's effect is being checked, the RTT it is waiting on is no news.
        let checking = matches!(self.brake.latency_check, LatencyCheck::Pending { .. });
        self.brake.high_rtt_reports = if high && !checking { self.brake.high_rtt_reports + 1 } else { 0 };
        if self.brake.high_rtt_reports >= 2 {
            let rtt = r.rtt_mean().unwrap_or_default();
            self.brake.latency_check.to(LatencyCheck::Pending { rtt_then: rtt, check_at: r.now + 2 * srtt.max(rtt) });
            self.brake_to(core, r.now, rate * BRAKE_LATENCY_CUT);
            return Some("brake_latency");
        }
        None
    }
}
