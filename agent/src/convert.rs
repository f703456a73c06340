//! The datapath boundary's unit conversions, in one audited place (STYLE rule 3).
//!
//! In: a [`RawReport`] (microseconds, bytes, packets, bytes per second as the datapath's u64
//! registers) becomes a [`polycc_algorithms::Report`] (`Duration`, bytes, packets, [`Rate`]).
//! Out: a [`Decision`] (u64 bytes, `Rate`) becomes the u32 values `update_field` carries.
//! Everything saturates; nothing here can fail or panic.

use crate::program::{Field, RawReport, CE_SHIFT, EVENT_DELAY_EXIT, EVENT_TIMEOUT, NO_RTT_SAMPLE_US, UNDO_SHIFT};
use polycc_algorithms::ack_growth::Growth;
use polycc_algorithms::report::app_limited;
use polycc_algorithms::{Decision, Rate, Report};
use std::time::Duration;

/// A flow's report clock: the datapath's `Micros` restarts at every report, so the time since
/// the program started on the flow is the sum of the intervals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowClock {
    elapsed_us: u64,
}

impl FlowClock {
    pub fn now(&self) -> Duration {
        Duration::from_micros(self.elapsed_us)
    }
}

fn rtt_us(us: u64) -> Option<Duration> {
    (us > 0 && us < NO_RTT_SAMPLE_US).then(|| Duration::from_micros(us))
}

/// [`Field::LostMarked`]'s lost packets: the bits below [`CE_SHIFT`].
const LOST_MASK: u64 = (1 << CE_SHIFT) - 1;

fn mean_us(sum_us: u64, n: u64) -> Option<Duration> {
    (n > 0).then(|| Duration::from_micros(sum_us / n))
}

/// The algorithms' report from the datapath's registers. Advances `clock` by the interval.
///
/// `mss_bytes` derives packets in flight (`bytes_in_flight / mss`); `cwnd_bytes`, the window the
/// agent installed before this report, with `mss_bytes` and the pending and in-flight bytes
/// gives `app_limited` ([`polycc_algorithms::report::app_limited`]: the one rule, which the
/// statistics read from the report). `undo_signal`: the flow's datapath said at CREATE that it
/// reports the kernel's undos ([`crate::program`], "Undo"); otherwise [`Field::Events`]' bits
/// from [`UNDO_SHIFT`] are ECN bytes and mean nothing here.
pub fn to_report(raw: &RawReport, clock: &mut FlowClock, mss_bytes: u64, cwnd_bytes: u64, undo_signal: bool) -> Report {
    let interval_us = raw.get(Field::IntervalUs);
    clock.elapsed_us = clock.elapsed_us.saturating_add(interval_us);
    let samples = raw.get(Field::RttSamples);
    let sum_us = raw.get(Field::RttSumUs);
    // The first half cannot hold more than the whole; a datapath that says so is clamped.
    let first_n = raw.get(Field::RttFirstSamples).min(samples);
    let first_sum_us = raw.get(Field::RttFirstSumUs).min(sum_us);
    let has_samples = samples > 0;
    let inflight_bytes = raw.get(Field::InflightBytes);
    let pending_bytes = raw.get(Field::PendingBytes);
    Report {
        now: clock.now(),
        interval: Duration::from_micros(interval_us),
        bytes_acked: raw.get(Field::AckedBytes),
        packets_acked: raw.get(Field::AckedPackets),
        packets_sacked: raw.get(Field::SackedPackets),
        packets_lost: raw.get(Field::LostMarked) & LOST_MASK,
        packets_ce: raw.get(Field::LostMarked) >> CE_SHIFT,
        timeout: raw.get(Field::Events) & EVENT_TIMEOUT != 0,
        undo: undo_signal && raw.get(Field::Events) >> UNDO_SHIFT > 0,
        delay_exit: raw.get(Field::Events) & EVENT_DELAY_EXIT != 0,
        rtt_last: rtt_us(raw.get(Field::RttLastUs)).filter(|_| has_samples),
        rtt_min: rtt_us(raw.get(Field::RttMinUs)).filter(|_| has_samples),
        rtt_sum: Duration::from_micros(sum_us),
        rtt_samples: samples,
        rtt_first_half_mean: mean_us(first_sum_us, first_n),
        rtt_second_half_mean: mean_us(sum_us - first_sum_us, samples - first_n),
        delivery_rate: match raw.get(Field::DeliveryRate) {
            0 => None,
            bytes_per_sec => Some(Rate::from_bytes_per_sec(bytes_per_sec as f64)),
        },
        bytes_in_flight: inflight_bytes,
        packets_in_flight: inflight_bytes / mss_bytes.max(1),
        bytes_pending: pending_bytes,
        ack_train: Duration::from_micros(raw.get(Field::AckTrainUs)),
        app_limited: app_limited(pending_bytes, inflight_bytes, cwnd_bytes, mss_bytes),
    }
}

/// What the agent writes into the datapath's `Cwnd` and `Rate` registers.
///
/// Both are u32 on the wire and at libccp's callbacks, and 0 means "leave unchanged", so:
/// - `cwnd_bytes` is clamped to `[mss, u32::MAX]` (4 GiB: no TCP window gets there);
/// - a pacing rate is clamped to `[1, u32::MAX]` bytes/s (u32::MAX B/s is ~34 Gbit/s, the most
///   libccp can express);
/// - `None` (unpaced) is written as u32::MAX once the flow has been paced before, because 0
///   would keep the old rate; a flow that was never paced gets no `Rate` update at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Install {
    pub cwnd_bytes: u32,
    /// `None`: send no `Rate` update.
    pub rate_bytes_per_sec: Option<u32>,
}

impl Install {
    /// The pacing rate this install holds, as the algorithms' type (`None`: unpaced).
    pub fn pacing_rate(&self) -> Option<Rate> {
        self.rate_bytes_per_sec.and_then(rate_from_register)
    }

    /// What the datapath holds once `next` is written over this: a `next` without a rate
    /// leaves the rate register as it was.
    pub fn then(self, next: Install) -> Install {
        Install { cwnd_bytes: next.cwnd_bytes, rate_bytes_per_sec: next.rate_bytes_per_sec.or(self.rate_bytes_per_sec) }
    }
}

/// A `Rate` register's value (bytes/s, as installed, or as a datapath describes a flow it
/// re-announces) back as a [`Rate`]: the inverse of [`to_install`]'s rate. 0 ("unchanged": never
/// set) and u32::MAX ("unpaced") are `None`.
pub fn rate_from_register(bytes_per_sec: u32) -> Option<Rate> {
    (bytes_per_sec != 0 && bytes_per_sec != u32::MAX).then(|| Rate::from_bytes_per_sec(f64::from(bytes_per_sec)))
}

/// The growth registers ([`polycc_algorithms::ack_growth`]) as installed: `Control.grow_cap_bytes`,
/// `Control.grow_rtt_us` and `Control.grow_cap_after`, each at most u32::MAX, as `Cwnd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrowRegs {
    pub cap: u64,
    /// The delay exit's threshold; [`NO_RTT_SAMPLE_US`]: none.
    pub rtt_us: u64,
    pub cap_after: u64,
}

impl GrowRegs {
    pub fn of(g: &Growth) -> GrowRegs {
        let sat = |v: u64| v.min(u64::from(u32::MAX));
        let rtt_us = g.exit_rtt.map_or(NO_RTT_SAMPLE_US, |d| sat(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)));
        GrowRegs { cap: sat(g.cap), rtt_us, cap_after: sat(g.cap_after) }
    }

    /// The delay exit's threshold, `None` where no exit is armed (the register's sentinel).
    pub fn exit_rtt_us(&self) -> Option<u64> {
        (self.rtt_us != NO_RTT_SAMPLE_US).then_some(self.rtt_us)
    }

    /// Whether a flow whose registers hold `self` needs `next` written: while either allows
    /// growth, or when they differ.
    pub fn needs_write(&self, next: &GrowRegs) -> bool {
        self.cap != 0 || next.cap != 0 || self != next
    }
}

/// `Control.interval_us` for a report interval: at least 1 us (0 means once per RTT), at most
/// u32::MAX.
pub fn interval_register(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).clamp(1, u64::from(u32::MAX))
}

/// Saturating conversion of the decision; `was_paced` says whether a rate was installed before.
pub fn to_install(d: &Decision, mss_bytes: u64, was_paced: bool) -> Install {
    let floor = mss_bytes.clamp(1, u64::from(u32::MAX));
    let cwnd_bytes = d.cwnd_bytes.clamp(floor, u64::from(u32::MAX)) as u32;
    let rate = d.rate.filter(|r| !r.is_zero());
    let rate_bytes_per_sec = match rate {
        // `as` saturates floats; the clamp keeps 0 (= unchanged) out.
        Some(r) => Some((r.bytes_per_sec().round() as u32).max(1)),
        None if was_paced => Some(u32::MAX),
        None => None,
    };
    Install { cwnd_bytes, rate_bytes_per_sec }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Field::*;

    #[test]
    fn units_convert_and_missing_samples_stay_none() {
        let raw = RawReport::from_pairs(&[
            (AckedBytes, 14_480),
            (AckedPackets, 10),
            (IntervalUs, 40_000),
            (RttLastUs, 41_000),
            (RttMinUs, 40_000),
            (RttSumUs, 405_000),
            (RttSamples, 10),
            (RttFirstSumUs, 200_000),
            (RttFirstSamples, 5),
            (DeliveryRate, 2_500_000),
            (InflightBytes, 14_480),
            (AckTrainUs, 1_500),
        ]);
        let mut clock = FlowClock::default();
        let r = to_report(&raw, &mut clock, 1448, 14_480, true);
        assert_eq!(r.interval, Duration::from_millis(40));
        assert_eq!(r.now, Duration::from_millis(40));
        assert_eq!(r.rtt_min, Some(Duration::from_millis(40)));
        assert_eq!(r.rtt_mean(), Some(Duration::from_micros(40_500)));
        assert_eq!(r.rtt_first_half_mean, Some(Duration::from_millis(40)));
        assert_eq!(r.rtt_second_half_mean, Some(Duration::from_millis(41)));
        assert_eq!(r.delivery_rate, Some(Rate::from_mbps(20.0)));
        assert_eq!(r.packets_in_flight, 10);
        assert_eq!(r.ack_train, Duration::from_micros(1_500));
        assert!(!r.app_limited, "the window is full");
        // The clock is the running sum of intervals.
        to_report(&raw, &mut clock, 1448, 14_480, true);
        assert_eq!(clock.now(), Duration::from_millis(80));

        let loss_only = RawReport::from_pairs(&[(LostMarked, 3), (IntervalUs, 10)]);
        let r = to_report(&loss_only, &mut clock, 1448, 14_480, true);
        assert_eq!((r.rtt_last, r.rtt_min, r.rtt_mean(), r.delivery_rate), (None, None, None, None));
        assert_eq!((r.rtt_first_half_mean, r.rtt_second_half_mean), (None, None));
        assert!(r.has_loss());
        assert_eq!((r.packets_lost, r.packets_ce), (3, 0));
    }

    #[test]
    fn ecn_marks_ride_above_the_losses_in_one_register() {
        // The program adds Ack.ecn_packets * 65536 * 65536 (no wider constant in an instruction).
        assert_eq!(65_536u64 * 65_536, 1 << CE_SHIFT);
        let mut clock = FlowClock::default();
        let marked = RawReport::from_pairs(&[(LostMarked, (7 << CE_SHIFT) + 2), (IntervalUs, 10)]);
        let r = to_report(&marked, &mut clock, 1448, 14_480, true);
        assert_eq!((r.packets_lost, r.packets_ce), (2, 7));
        assert!(r.congestion_signal());
        let only_marks = RawReport::from_pairs(&[(LostMarked, 40 << CE_SHIFT), (IntervalUs, 10)]);
        let r = to_report(&only_marks, &mut clock, 1448, 14_480, true);
        assert_eq!((r.packets_lost, r.packets_ce), (0, 40));
        assert!(!r.has_loss() && r.congestion_signal());
    }

    #[test]
    fn undos_ride_above_the_event_bits_and_count_only_where_the_datapath_reports_them() {
        let mut clock = FlowClock::default();
        let undone = RawReport::from_pairs(&[(Events, (1 << UNDO_SHIFT) + EVENT_TIMEOUT), (IntervalUs, 10)]);
        let r = to_report(&undone, &mut clock, 1448, 14_480, true);
        assert!(r.undo && r.timeout && !r.delay_exit);
        // A datapath that did not say it reports undos: those bits are its ECN bytes.
        let ecn_bytes = RawReport::from_pairs(&[(Events, 14_480 << UNDO_SHIFT), (IntervalUs, 10)]);
        let r = to_report(&ecn_bytes, &mut clock, 1448, 14_480, false);
        assert!(!r.undo && !r.timeout);
        let r = to_report(&RawReport::from_pairs(&[(IntervalUs, 10)]), &mut clock, 1448, 14_480, true);
        assert!(!r.undo, "no undo, no flag");
    }

    #[test]
    fn hostile_registers_saturate() {
        let raw = RawReport::from_pairs(&[
            (IntervalUs, u64::MAX),
            (RttSamples, 1),
            (RttSumUs, 10),
            (RttFirstSamples, 7),
            (RttFirstSumUs, u64::MAX),
            (DeliveryRate, u64::MAX),
        ]);
        let mut clock = FlowClock { elapsed_us: 5 };
        let r = to_report(&raw, &mut clock, 0, 0, true);
        assert_eq!(clock.elapsed_us, u64::MAX);
        assert_eq!(r.rtt_first_half_mean, Some(Duration::from_micros(10)));
        assert_eq!(r.rtt_second_half_mean, None);
        assert!(r.delivery_rate.unwrap().bytes_per_sec().is_finite());
    }

    #[test]
    fn decisions_clamp_to_the_u32_registers() {
        let mss = 1448;
        let d = |cwnd_bytes, rate: Option<f64>| Decision { cwnd_bytes, rate: rate.map(Rate::from_bytes_per_sec) };
        assert_eq!(to_install(&d(14_480, None), mss, false), Install { cwnd_bytes: 14_480, rate_bytes_per_sec: None });
        assert_eq!(to_install(&d(0, None), mss, false).cwnd_bytes, 1448, "never below one MSS");
        assert_eq!(to_install(&d(u64::MAX, None), mss, false).cwnd_bytes, u32::MAX);
        assert_eq!(to_install(&d(10_000, Some(2.5e6)), mss, false).rate_bytes_per_sec, Some(2_500_000));
        assert_eq!(to_install(&d(10_000, Some(1e12)), mss, false).rate_bytes_per_sec, Some(u32::MAX));
        assert_eq!(to_install(&d(10_000, Some(0.2)), mss, false).rate_bytes_per_sec, Some(1), "0 would mean unchanged");
        assert_eq!(to_install(&d(10_000, Some(0.0)), mss, false).rate_bytes_per_sec, None, "zero rate = unpaced");
        assert_eq!(to_install(&d(10_000, None), mss, true).rate_bytes_per_sec, Some(u32::MAX), "unpace a paced flow");
    }

    #[test]
    fn a_rate_register_reads_back_as_the_rate_installed() {
        let mss = 1448;
        let paced = to_install(&Decision { cwnd_bytes: 10_000, rate: Some(Rate::from_mbps(20.0)) }, mss, false);
        assert_eq!(paced.pacing_rate(), Some(Rate::from_mbps(20.0)));
        let unpaced = to_install(&Decision { cwnd_bytes: 10_000, rate: None }, mss, true);
        assert_eq!(unpaced.pacing_rate(), None, "u32::MAX is unpaced");
        assert_eq!(paced.then(Install { cwnd_bytes: 5_000, rate_bytes_per_sec: None }).pacing_rate(), paced.pacing_rate());
        assert_eq!((rate_from_register(0), rate_from_register(1)), (None, Some(Rate::from_bytes_per_sec(1.0))));
    }
}
