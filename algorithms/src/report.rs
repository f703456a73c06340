//! The one report every algorithm consumes (reference section 0).
//!
//! A single union datapath program fills it: the kernel module through libccp, the simulator
//! directly. Fields the datapath cannot measure stay at their zero/`None` value, and every
//! algorithm must cope with that (no RTT sample in a loss-only report, for example).

use crate::units::Rate;
use std::time::Duration;

/// Reports per RTT an algorithm asks for when once per RTT is too coarse for it
/// ([`crate::CongestionControl::report_interval`], [`sub_rtt_interval`]): PCC's monitor intervals
/// then end within a quarter RTT of their plan and a loss report (sent at once) no longer stands
/// next to reports a whole RTT long; Copa's RTT_standing is a minimum of samples.
pub const REPORTS_PER_RTT: u32 = 4;
/// ... but never more often than this: each report is an IPC round trip to the agent.
pub const MIN_REPORT_INTERVAL: Duration = Duration::from_millis(4);

/// A quarter of the min RTT (else the smoothed RTT), at least [`MIN_REPORT_INTERVAL`]; `None`
/// before the first RTT sample.
pub fn sub_rtt_interval(min_rtt: Option<Duration>, srtt: Option<Duration>) -> Option<Duration> {
    min_rtt.or(srtt).filter(|d| !d.is_zero()).map(|rtt| (rtt / REPORTS_PER_RTT).max(MIN_REPORT_INTERVAL))
}

/// Whether a flow is application-limited at a report: nothing is queued to send and the
/// window has room for at least one more full packet, `pending == 0 && in_flight + mss < cwnd`
/// (Linux's `tcp_rate_check_app_limited` asks the same: no unsent data and fewer packets in
/// flight than the window). `cwnd_bytes` is the window in force over the interval.
///
/// Which datapath uses which source:
/// - the agent applies this rule to every report (`polycc-portus`, `agent/src/convert.rs`), with
///   the window it installed before the report. Over both datapaths `pending` is
///   `write_seq - snd_nxt` (queued, not sent; the BPF datapath read `sk_wmem_queued`, which also
///   counts data in flight, until c78625b). The BPF datapath also folds the
///   kernel's own rate-sample bit (`rs->is_app_limited`, `polycc_bpf::Event::Measure`), but
///   does not pass it on: Linux also marks a bulk flow's first round with it, which only a
///   bandwidth filter should read, not this rule (docs/bpf-datapath.md);
/// - the simulator's senders are bulk: `app_limited` is always `false` there.
pub fn app_limited(pending_bytes: u64, in_flight_bytes: u64, cwnd_bytes: u64, mss_bytes: u64) -> bool {
    pending_bytes == 0 && in_flight_bytes.saturating_add(mss_bytes) < cwnd_bytes
}

/// Measurements over one report interval, `[now - interval, now]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Time at the end of the report, on the datapath's monotonic clock since the flow began.
    pub now: Duration,
    /// Length of the interval this report covers.
    pub interval: Duration,
    /// Bytes newly acknowledged (cumulatively or selectively).
    pub bytes_acked: u64,
    /// Packets newly acknowledged (cumulatively or selectively: SACKed ones included).
    pub packets_acked: u64,
    /// Of `packets_acked`, those acknowledged out of order (SACKed) in the interval.
    pub packets_sacked: u64,
    /// Packets declared lost in the interval.
    pub packets_lost: u64,
    /// Packets delivered in the interval whose ACKs echoed an ECN congestion mark (ECN-Echo:
    /// a router on the path marked instead of dropping, RFC 3168). 0 where ECN is off.
    pub packets_ce: u64,
    /// A retransmission timeout fired in the interval.
    pub timeout: bool,
    /// The sender's TCP stack found its last loss reduction spurious and undid it in the
    /// interval (Linux's undo: a DSACK, a timestamp or the hole's ACK before its retransmission
    /// showed the packets marked lost were only reordered or delayed). The losses it reported for
    /// that episode were not congestion: a window controller takes back the reduction it made
    /// for them, as the kernel's own congestion controls do (`undo_cwnd`).
    pub undo: bool,
    /// The most recent RTT sample.
    pub rtt_last: Option<Duration>,
    /// The smallest RTT sample of the interval.
    pub rtt_min: Option<Duration>,
    /// Sum of the interval's RTT samples (with `rtt_samples`, the mean).
    pub rtt_sum: Duration,
    /// Number of RTT samples in the interval.
    pub rtt_samples: u64,
    /// Mean RTT of the samples taken in the first half of the interval.
    pub rtt_first_half_mean: Option<Duration>,
    /// Mean RTT of the samples taken in the second half of the interval.
    pub rtt_second_half_mean: Option<Duration>,
    /// Largest delivery-rate sample `min(rate_outgoing, rate_incoming)` of the interval.
    pub delivery_rate: Option<Rate>,
    /// Bytes in flight at the end of the interval.
    pub bytes_in_flight: u64,
    /// Packets in flight at the end of the interval.
    pub packets_in_flight: u64,
    /// Bytes the application has queued but not yet sent.
    pub bytes_pending: u64,
    /// Longest run of ACKs no more than 2 ms apart seen in the interval (HyStart's ACK train).
    pub ack_train: Duration,
    /// The datapath's per-ACK growth ended on the delay exit installed with the last decision
    /// ([`crate::ack_growth::DelayExit`]): RTT samples in a row above its threshold. The report
    /// was sent at that ACK.
    pub delay_exit: bool,
    /// The sender ran out of data during the interval, so rate samples understate the path
    /// ([`app_limited`] is the rule a datapath's agent applies; the simulator's bulk senders
    /// are never app-limited).
    pub app_limited: bool,
}

impl Report {
    /// Mean RTT of the interval, if it had samples.
    pub fn rtt_mean(&self) -> Option<Duration> {
        if self.rtt_samples == 0 {
            None
        } else {
            let n = u32::try_from(self.rtt_samples).unwrap_or(u32::MAX);
            Some(self.rtt_sum / n)
        }
    }

    /// Latency gradient dRTT/dT over the interval (seconds of RTT per second), from the two
    /// half-interval means. Zero without both halves or with an empty interval.
    pub fn rtt_gradient(&self) -> f64 {
        match (self.rtt_first_half_mean, self.rtt_second_half_mean) {
            (Some(a), Some(b)) if !self.interval.is_zero() => {
                (b.as_secs_f64() - a.as_secs_f64()) / (self.interval.as_secs_f64() / 2.0)
            }
            _ => 0.0,
        }
    }

    /// Throughput the receiver saw over the interval.
    pub fn ack_rate(&self) -> Rate {
        Rate::from_bytes_over(self.bytes_acked, self.interval)
    }

    /// Losses or a timeout happened in the interval.
    pub fn has_loss(&self) -> bool {
        self.packets_lost > 0 || self.timeout
    }

    /// Packets were lost or ECN-marked in the interval: the signal a loss-based controller
    /// answers by a reduction. RFC 3168 (section 6.1.2) asks a sender to answer a mark as it
    /// answers a loss, at most once per window ([`crate::loss_episode::LossEpisode`]), as
    /// Linux's Reno and CUBIC do through their CWR state.
    pub fn congestion_signal(&self) -> bool {
        self.packets_lost > 0 || self.packets_ce > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn sub_rtt_reports_come_four_per_rtt_and_no_more_often_than_4_ms() {
        assert_eq!(sub_rtt_interval(None, None), None, "nothing before the first RTT sample");
        assert_eq!(sub_rtt_interval(Some(ms(30)), Some(ms(45))), Some(Duration::from_micros(7_500)));
        assert_eq!(sub_rtt_interval(None, Some(ms(40))), Some(ms(10)));
        assert_eq!(sub_rtt_interval(Some(ms(2)), None), Some(MIN_REPORT_INTERVAL));
    }

    #[test]
    fn a_flow_is_app_limited_only_with_nothing_queued_and_room_for_a_packet() {
        let mss = 1448;
        assert!(app_limited(0, 5 * mss, 10 * mss, mss), "idle application, half the window used");
        assert!(!app_limited(1, 5 * mss, 10 * mss, mss), "a bulk sender has data queued");
        assert!(!app_limited(0, 9 * mss, 10 * mss, mss), "no room for a full packet");
        assert!(!app_limited(0, u64::MAX, u64::MAX, mss), "saturates");
    }
}
