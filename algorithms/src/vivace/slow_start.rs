//! Vivace's slow start: the rate doubles every MI from the initial window per RTT (or the
//! configured initial rate) while the utility grows, bounded by twice what a short MI delivered
//! and by the ACK rate of the last sRTT of reports ([`SS_ACK_RATE_GAIN`]). It ends (to
//! [`Phase::Probing`] or, with unified exploration, [`Phase::Unified`]) when the utility drops,
//! an MI loses more than the exit loss or its RTT stands above the exit latency, the rate
//! reaches the configured maximum, or two reports in a row read a queue
//! ([`Controller::slow_start_queue_exit`]).
//!
//! ```text
//!   SlowStart --utility drops / loss / latency / max rate--> back to the best rate, decide again
//!   SlowStart --two queued reports--> the ACK rate x min RTT / RTT, decide again
//! ```

use super::utility::Sample;
use super::{Controller, Phase};
use crate::pcc::{self, MiResult, Sender};
use crate::{Rate, Report};
use std::time::Duration;

/// A slow-start MI that delivers less than this share of its rate has found the path's limit.
/// The guest's pacer keeps above 0.95 unless the path is full; 0.9 also caught single MIs that
/// ACK aggregation made look short on jittery paths.
pub const SS_SHORTFALL_RATIO: f64 = 0.75;
/// Slow start's exit on queued reports (`Vivace::slow_start_queue_exit`) scales the ACK rate
/// by min RTT / RTT to drain the queue, but by no less than this. 0.85 kept 1-BDP lossy paths a
/// little busier (50 Mbit/s, 30 ms, 1 % loss, RTT +/- 2 ms, 8 ms reports, seeds 1-15: mean
/// utilization 0.876 against 0.862) but left polycc-tune's pacifist and moderate rewards less
/// than 3 % apart in loss (0.79 / 0.82 %).
pub const SS_EXIT_MIN_DRAIN: f64 = 0.5;
/// Slow start doubles at most once per RTT of what the path delivers, as TCP's slow start (two
/// packets per packet acknowledged): it sends at most the fastest of the last sRTT of reports'
/// ACK rates times this gain raised to `1 + interval / (2 sRTT)`, since a report's ACKs are for
/// packets sent half its interval plus an RTT ago (gain 2 alone held slow start to a doubling
/// every two MIs with once-per-RTT reports, and polycc-tune's lossy paths lost 12 % of their
/// reward). An MI's throughput is what it sent and got through, which without loss is its rate
/// even when the path queued it, so MI results alone let the doublings already in flight run to
/// 8x the capacity (see `Vivace::slow_start_queue_exit`); the ACK rate of a queued path is
/// the bottleneck's.
pub const SS_ACK_RATE_GAIN: f64 = 2.0;

impl Controller {
    /// The rate of the next slow-start MI: the first MI keeps the start rate, each later one
    /// doubles the centre within the bounds the path has shown.
    pub(super) fn slow_start_rate(&mut self, core: &mut Sender) -> Rate {
        let Phase::SlowStart { first, delivered, .. } = &mut self.phase else {
            unreachable!("a slow-start rate outside slow start")
        };
        if !*first {
            // MIs are pipelined: by the time one MI's result is in, two or three more
            // have started. Doubling the target alone went 59 -> 119 -> 237 -> 474 -> 949
            // Mbit/s on a 100 Mbit/s guest link before the 119 MI's result (72 delivered)
            // arrived, and the overshoot's losses put the flow at the floor for seconds.
            // Once an MI delivers clearly less than it sent, twice what it delivered bounds
            // the target by what the path showed, also when doublings already in flight
            // went past it (results that kept up leave it alone: the newest result is
            // always a few doublings behind).
            let mut next = core.target * 2.0;
            if let Some(d) = *delivered {
                next = next.min(Rate::from_mbps(2.0 * d));
            }
            if let Some(acked) = self.ack_rates.iter().map(|a| a.3).max_by(|a, b| a.mbps().total_cmp(&b.mbps())) {
                next = next.min(acked);
            }
            core.target = next.min(Rate::from_mbps(self.params.max_ss_rate_mbps));
        }
        *first = false;
        core.target
    }

    /// Slow start's step for one finished MI `r`, scored `s`; `best` is the best MI so far and
    /// `queued` whether the previous report read a queue.
    pub(super) fn judge_slow_start(
        &mut self,
        core: &mut Sender,
        now: Duration,
        r: &MiResult,
        s: Sample,
        best: Option<Sample>,
        queued: bool,
    ) {
        if let Phase::SlowStart { delivered, .. } = &mut self.phase {
            *delivered = (s.delivered_mbps < SS_SHORTFALL_RATIO * s.mbps).then_some(s.delivered_mbps);
        }
        // A queue that ends slow start is still there when the MI's result comes in: the
        // latest report must read inflated too (`queued`), or the MI's mean RTT carried a
        // moment's spike (guest: 69 ms over a 31 ms path at 3.6 Mbit/s of 50).
        let inflated = queued
            && match (r.rtt_mean, core.monitor.min_rtt()) {
                (Some(m), Some(min)) => m.as_secs_f64() > (1.0 + self.params.ss_exit_latency) * min.as_secs_f64(),
                _ => false,
            };
        let threshold = inflated || self.filtered_loss(r) > self.params.ss_exit_loss;
        let dropped = best.is_some_and(|b| s.utility < b.utility && s.mbps > b.mbps);
        if dropped || threshold {
            let back_to = best.filter(|b| b.mbps < s.mbps).map_or(s.mbps / 2.0, |b| b.mbps);
            let next = self.decide_again(core);
            self.restart(core, now, Rate::from_mbps(back_to), next);
        } else if best.is_none_or(|b| s.mbps >= b.mbps) {
            if let Phase::SlowStart { best, .. } = &mut self.phase {
                *best = Some(s);
            }
            if core.target.mbps() >= self.params.max_ss_rate_mbps {
                let next = self.decide_again(core);
                self.restart(core, now, core.target, next);
            }
        }
    }

    /// Slow start: keep each report's ACK rate over the last sRTT ([`SS_ACK_RATE_GAIN`]).
    pub(super) fn track_ack_rate(&mut self, core: &Sender, r: &Report) {
        if !matches!(self.phase, Phase::SlowStart { .. }) {
            self.ack_rates.clear();
            return;
        }
        if r.interval.is_zero() {
            return;
        }
        let srtt = core.monitor.srtt().unwrap_or(pcc::NOMINAL_RTT);
        // The report's ACKs are for packets sent about interval / 2 + sRTT ago: what slow start
        // doubling once per RTT sends now is that rate times 2^(1 + interval / (2 sRTT)).
        let lag = r.interval.as_secs_f64() / (2.0 * srtt.as_secs_f64().max(1e-6));
        let gain = SS_ACK_RATE_GAIN.powf(1.0 + lag.min(1.0));
        let allowed = Rate::from_bytes_over(r.bytes_acked, r.interval) * gain;
        self.ack_rates.push_back((r.now, r.interval, r.bytes_acked, allowed));
        while self.ack_rates.front().is_some_and(|a| r.now.saturating_sub(a.0) > srtt) {
            self.ack_rates.pop_front();
        }
    }

    /// Slow start's exit on the reports' RTT, not only on MI results: two reports in a row with
    /// a mean RTT above the exit threshold ((1 + `slow_start_exit_latency`) x min RTT) end slow
    /// start at once, at the ACK rate of the last sRTT of reports (while a queue stands, the
    /// bottleneck's; loss reports with few ACKs included, else a pair of them read as a rate
    /// near zero and sent a 1-BDP lossy flow to the 0.5 Mbit/s floor for seconds) scaled by
    /// min RTT / RTT down to [`SS_EXIT_MIN_DRAIN`], which drains what the doublings queued.
    ///
    /// MI results arrive one MI plus one RTT after their MI began, and slow start doubles every
    /// MI, so by the first result that shows the queue two or three doublings are in flight.
    /// With one report per RTT that went unnoticed; at the cadence the agent gives PCC through
    /// ccp.ko (four reports per RTT) the doublings reached 8x the capacity: 35 Mbit/s, 50 ms,
    /// 12 BDP ran 38 -> 76 -> 152 -> 305 Mbit/s, filled the buffer and held it (mean RTT 7.7x
    /// base, 1.2 % loss; 10 Mbit/s, 50 ms: 4.9x). The ACK rate of a queued report is the
    /// bottleneck's, so unlike an MI's throughput (what was sent and got through, which without
    /// loss is the sending rate) it bounds the exit rate by the capacity.
    pub(super) fn slow_start_queue_exit(&mut self, core: &mut Sender, r: &Report) -> bool {
        let Phase::SlowStart { queued, .. } = &mut self.phase else { return false };
        let inflated = match (r.rtt_mean(), core.monitor.min_rtt()) {
            (Some(m), Some(min)) if !min.is_zero() => {
                Some(m.as_secs_f64() / min.as_secs_f64()).filter(|ratio| *ratio > 1.0 + self.params.ss_exit_latency)
            }
            _ => None,
        };
        let Some(ratio) = inflated else {
            *queued = false;
            return false;
        };
        if !std::mem::replace(queued, true) {
            return false;
        }
        // The ACK rate over the last sRTT of reports, loss reports with few or no ACKs included.
        let (span, bytes) = self
            .ack_rates
            .iter()
            .fold((Duration::ZERO, 0u64), |a, x| (a.0.saturating_add(x.1), a.1.saturating_add(x.2)));
        if span.is_zero() {
            return false;
        }
        let acked = Rate::from_bytes_over(bytes, span);
        let rate = core.rate.unwrap_or(core.target);
        let to = rate.min(acked) * (1.0 / ratio).max(SS_EXIT_MIN_DRAIN);
        let next = self.decide_again(core);
        self.restart(core, r.now, to, next);
        true
    }
}
