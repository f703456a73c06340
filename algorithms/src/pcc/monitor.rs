//! Monitor intervals (MIs) over CCP-like reports: which MI sent the packets a report speaks of,
//! and what each MI's packets experienced ([`MiResult`]). The PCC engine ([`super::engine`])
//! schedules the MIs; MOCC ([`crate::mocc`]) uses the monitor on its own.
//!
//! PCC sends each MI at one rate and scores it with a utility computed from what happened to
//! *the packets that MI sent*: their throughput, loss rate and the RTT trend while they were in
//! flight. A datapath report says what was acknowledged or lost during `[now - interval, now]`,
//! not when those packets left, so the packets are placed in time by the RTT:
//!
//! ```text
//!   report ACK window  [now - interval,         now        ]
//!   send window        [now - interval - rtt,   now - rtt  ]   rtt = the report's mean RTT
//! ```
//!
//! The report's ACKed bytes, ACKed packets and lost packets are spread over the MIs that send
//! window overlaps, in proportion to the overlap (a report that straddles a rate change credits
//! both MIs). Its two half-interval RTT means become two points `(send time, rtt)` credited to
//! the MI that sent at that time; an MI's latency gradient dRTT/dT is the weighted least-squares
//! slope of its points. An MI is complete once the send window of a report has passed its end:
//! every packet it sent has been acknowledged or declared lost, give or take the RTT's change
//! within one report. This is the reference's "skip one window of in-flight data after each
//! rate change", done by time instead of by bytes, so it holds at any report cadence.
//!
//! Losses are declared when three later packets are acknowledged, about one RTT after sending,
//! so the same shift places them; a timeout's losses are placed like the report's ACKs (the
//! error then is in the MI the losses are charged to, not in their number).
//!
//! References: Dong et al., "PCC: Re-architecting Congestion Control for Consistent High
//! Performance", NSDI'15, section 2 and 4.1 (MIs, attribution by send time); Dong et al., "PCC
//! Vivace", NSDI'18, section 4 (the latency gradient as a regression over an MI).

use crate::filters::{ewma_eighth, srtt_after, WindowedMin};
use crate::units::Rate;
use crate::Report;
use std::collections::VecDeque;
use std::time::Duration;

/// Window of the minimum-RTT filter (as BBR's `min_rtt`): long enough to see through a few
/// seconds of standing queue, short enough to follow a path whose propagation delay changes.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// RTT assumed before the first sample, to size a window for a configured initial rate.
pub const NOMINAL_RTT: Duration = Duration::from_millis(100);
/// MIs waiting for their ACKs are force-completed beyond this many (only hostile report
/// streams, e.g. RTTs of hours, get here): memory stays bounded.
pub const MAX_PENDING_MIS: usize = 32;
/// Outlier filter: an RTT point more than this many median absolute deviations from the MI's
/// median is dropped before the regression.
pub const RTT_OUTLIER_MADS: f64 = 3.0;

/// What one MI's packets experienced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MiResult {
    /// The MI's sequence number (MIs are numbered from 0 in the order they start).
    pub id: u64,
    /// The rate the MI sent at.
    pub rate: Rate,
    /// Length of its send window (for a partial result: the part whose fate is known).
    pub duration: Duration,
    /// Bytes acknowledged over the duration.
    pub throughput: Rate,
    /// The rate its packets were acknowledged at: their bytes over the reports' ACK time they
    /// took (each report's interval in the share its send window overlaps the MI). Behind a queue
    /// that stays busy this is the flow's share of the bottleneck, where the throughput over the
    /// send window is the rate sent less the losses. `None` before any report credited it.
    pub delivery_rate: Option<Rate>,
    /// Lost over sent packets.
    pub loss: f64,
    /// dRTT/dT over the MI (seconds of RTT per second), 0 when it cannot be estimated.
    pub rtt_gradient: f64,
    /// Standard error of the regression's slope (taken before a slope below it is zeroed);
    /// infinite when fewer than three points leave it unknown. A decision on part of an MI
    /// weighs the gradient against it ([`crate::vivace`]'s early decreases).
    pub rtt_gradient_se: f64,
    /// Spread of the MI's RTT samples around its regression line (weighted RMS residual),
    /// seconds; `None` with fewer than three samples. The noise within the MI, not its trend.
    pub rtt_residual: Option<f64>,
    /// The flow's RTT deviation when the MI began ([`Monitor::rtt_deviation`]), seconds: the
    /// jitter its RTT rise is weighed against.
    pub rtt_jitter: f64,
    /// Mean RTT of the MI's packets.
    pub rtt_mean: Option<Duration>,
    /// Packets whose fate is known (acked + lost).
    pub packets: f64,
    /// Reports that charged losses to this MI (the persistence filter counts them).
    pub loss_reports: u32,
    /// A report during the MI said the sender ran out of data.
    pub app_limited: bool,
    /// What the flow put on the wire while the MI sent, measured: acked + lost + the change in
    /// flight over the reports during its send window; `None` until reports have covered half
    /// of it. Below [`MiResult::rate`] when the datapath falls short of its pacing rate (the
    /// emulated guest's late timers: 0.75-0.97 of the rate) or the window holds it back.
    pub sent_rate: Option<Rate>,
}

#[cfg(test)]
impl MiResult {
    /// A clean MI for tests: sent at `rate_mbps` for `duration`, delivered at `throughput_mbps`,
    /// `packets` packets, no loss, a flat RTT of `duration`.
    pub(crate) fn clean(id: u64, rate_mbps: f64, throughput_mbps: f64, duration: Duration, packets: f64) -> MiResult {
        MiResult {
            id,
            rate: Rate::from_mbps(rate_mbps),
            duration,
            throughput: Rate::from_mbps(throughput_mbps),
            delivery_rate: Some(Rate::from_mbps(throughput_mbps)),
            loss: 0.0,
            rtt_gradient: 0.0,
            rtt_gradient_se: 0.0,
            rtt_residual: None,
            rtt_jitter: 0.0,
            rtt_mean: Some(duration),
            packets,
            loss_reports: 0,
            app_limited: false,
            sent_rate: None,
        }
    }
}

#[derive(Clone, Debug)]
struct Mi {
    id: u64,
    rate: Rate,
    /// Send window in seconds since the flow began; `end` is None while the MI is sending.
    start: f64,
    end: Option<f64>,
    acked_bytes: f64,
    /// Seconds of the reports' ACK windows credited to the MI, in the share of each report's
    /// bytes it got.
    ack_time: f64,
    acked_packets: f64,
    lost_packets: f64,
    loss_reports: u32,
    /// (send time s, rtt s, weight = samples)
    points: Vec<(f64, f64, f64)>,
    app_limited: bool,
    /// The flow's RTT deviation when the MI began.
    jitter: f64,
    /// Bytes the flow sent during the MI's send window, and how much of it (seconds) the
    /// reports so far covered.
    sent_bytes: f64,
    sent_covered: f64,
}

impl Mi {
    fn end_or(&self, open_until: f64) -> f64 {
        self.end.unwrap_or(open_until)
    }

    fn result(&self, until: f64, reject_outliers: bool) -> MiResult {
        let end = self.end.map_or(until, |e| e.min(until)).max(self.start);
        let duration = Duration::try_from_secs_f64(end - self.start).unwrap_or_default();
        let sent = self.acked_packets + self.lost_packets;
        let loss = if sent > 0.0 { (self.lost_packets / sent).clamp(0.0, 1.0) } else { 0.0 };
        let fit = regression(&self.points, reject_outliers);
        let span = end - self.start;
        let sent_rate = (span > 0.0 && self.sent_covered >= 0.5 * span)
            .then(|| Rate::from_bytes_per_sec((self.sent_bytes / self.sent_covered).max(0.0)));
        MiResult {
            id: self.id,
            rate: self.rate,
            duration,
            throughput: Rate::from_bytes_per_sec(if end > self.start {
                self.acked_bytes / (end - self.start)
            } else {
                0.0
            }),
            delivery_rate: (self.ack_time > 0.0).then(|| Rate::from_bytes_per_sec(self.acked_bytes / self.ack_time)),
            loss,
            rtt_gradient: fit.slope,
            rtt_gradient_se: fit.se,
            rtt_residual: fit.residual,
            rtt_jitter: self.jitter,
            rtt_mean: fit.mean.and_then(|m| Duration::try_from_secs_f64(m).ok()),
            packets: sent,
            loss_reports: self.loss_reports,
            app_limited: self.app_limited,
            sent_rate,
        }
    }
}

/// A latency regression over an MI's points.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Fit {
    /// dRTT/dT, 0 when it cannot be estimated (or, rejecting outliers, is below its error).
    slope: f64,
    /// Weighted mean RTT, seconds.
    mean: Option<f64>,
    /// Standard error of the slope; infinite with fewer than three points.
    se: f64,
    /// Weighted RMS residual around the line; `None` with fewer than three points.
    residual: Option<f64>,
}

/// Weighted least-squares slope of `(t, rtt, weight)` points and their weighted mean RTT. With
/// `reject_outliers`, points far from the median are dropped first, and a slope smaller than its
/// own standard error is reported as 0 (Vivace's kernel module: a gradient the regression
/// cannot tell from noise is no gradient).
fn regression(points: &[(f64, f64, f64)], reject_outliers: bool) -> Fit {
    let mut kept: Vec<(f64, f64, f64)> =
        points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite() && p.2 > 0.0).collect();
    if reject_outliers && kept.len() >= 4 {
        let mut rtts: Vec<f64> = kept.iter().map(|p| p.1).collect();
        rtts.sort_by(f64::total_cmp);
        let median = rtts[rtts.len() / 2];
        let mut dev: Vec<f64> = rtts.iter().map(|r| (r - median).abs()).collect();
        dev.sort_by(f64::total_cmp);
        // A floor of 1 % of the RTT: identical samples must not make every other one an outlier.
        let mad = dev[dev.len() / 2].max(0.01 * median);
        kept.retain(|p| (p.1 - median).abs() <= RTT_OUTLIER_MADS * mad);
    }
    let w: f64 = kept.iter().map(|p| p.2).sum();
    if kept.is_empty() || w <= 0.0 {
        return Fit { slope: 0.0, mean: None, se: f64::INFINITY, residual: None };
    }
    let mt = kept.iter().map(|p| p.0 * p.2).sum::<f64>() / w;
    let mr = kept.iter().map(|p| p.1 * p.2).sum::<f64>() / w;
    let stt = kept.iter().map(|p| p.2 * (p.0 - mt).powi(2)).sum::<f64>();
    if kept.len() < 2 || stt <= 0.0 {
        return Fit { slope: 0.0, mean: Some(mr), se: f64::INFINITY, residual: None };
    }
    let slope = kept.iter().map(|p| p.2 * (p.0 - mt) * (p.1 - mr)).sum::<f64>() / stt;
    let (se, residual) = if kept.len() >= 3 {
        let sse = kept.iter().map(|p| p.2 * (p.1 - mr - slope * (p.0 - mt)).powi(2)).sum::<f64>();
        // Effective sample count for the weighted fit: the number of points.
        let n = kept.len() as f64;
        ((sse / (n - 2.0).max(1.0) / stt * (n / w)).sqrt(), Some((sse / w).sqrt()).filter(|r| r.is_finite()))
    } else {
        (f64::INFINITY, None)
    };
    let se = if se.is_nan() { f64::INFINITY } else { se };
    if reject_outliers && kept.len() >= 3 && se.is_finite() && se > slope.abs() {
        return Fit { slope: 0.0, mean: Some(mr), se, residual };
    }
    Fit { slope: if slope.is_finite() { slope } else { 0.0 }, mean: Some(mr), se, residual }
}

/// The MIs of one flow: the one sending now (the newest) and those waiting for their packets'
/// fate, plus the RTT estimates PCC needs to size MIs and windows.
#[derive(Clone, Debug)]
pub struct Monitor {
    mis: VecDeque<Mi>,
    next_id: u64,
    srtt: Option<Duration>,
    /// Mean deviation of the half-interval RTT means from the smoothed RTT, seconds (gain 1/8).
    rtt_dev: Option<f64>,
    min_rtt: WindowedMin,
    /// Send time up to which every packet's fate is known.
    covered_until: f64,
    reject_outliers: bool,
    /// The previous report's bytes in flight: what a report's ACKs and losses took out of
    /// flight plus what it added is what the flow sent.
    last_in_flight: Option<u64>,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Monitor {
    pub fn new(reject_outliers: bool) -> Monitor {
        Monitor {
            mis: VecDeque::new(),
            next_id: 0,
            srtt: None,
            rtt_dev: None,
            min_rtt: WindowedMin::default(),
            covered_until: 0.0,
            reject_outliers,
            last_in_flight: None,
        }
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.get()
    }

    /// How much the RTT strays, seconds: the mean absolute deviation of the reports'
    /// half-interval RTT means from the smoothed RTT (TCP's rttvar, on the points the latency
    /// regression uses); 0 before the first. The path's jitter and the flow's own queue changes
    /// alike: an MI weighs its RTT rise against the deviation when it began
    /// ([`MiResult::rtt_jitter`]), so that its own rise does not count as noise. Measured as the
    /// gap between a report's two halves instead, it missed the emulated guest's jitter: stalls
    /// that move whole reports (mean gap 0.5 ms, median 0.2 ms).
    pub fn rtt_deviation(&self) -> f64 {
        self.rtt_dev.unwrap_or(0.0)
    }

    /// Forget the minimum RTT and start again from `rtt` (the path's delay changed).
    pub fn reset_min_rtt(&mut self, now: Duration, rtt: Duration) {
        self.min_rtt = WindowedMin::default();
        self.min_rtt.update(now, rtt, MIN_RTT_WINDOW);
    }

    /// The id the next MI will get: results below it come from MIs already started.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The MI sending now: (id, rate, start).
    pub fn open(&self) -> Option<(u64, Rate, Duration)> {
        self.mis
            .back()
            .filter(|m| m.end.is_none())
            .map(|m| (m.id, m.rate, Duration::try_from_secs_f64(m.start).unwrap_or_default()))
    }

    /// End the open MI at `now` and start one at `rate`; returns the new MI's id.
    pub fn start(&mut self, now: Duration, rate: Rate) -> u64 {
        let t = secs(now);
        if let Some(m) = self.mis.back_mut().filter(|m| m.end.is_none()) {
            m.end = Some(t.max(m.start));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.mis.push_back(Mi {
            id,
            rate,
            start: t,
            end: None,
            acked_bytes: 0.0,
            ack_time: 0.0,
            acked_packets: 0.0,
            lost_packets: 0.0,
            loss_reports: 0,
            points: Vec::new(),
            app_limited: false,
            jitter: self.rtt_deviation(),
            sent_bytes: 0.0,
            sent_covered: 0.0,
        });
        id
    }

    /// The open MI now sends at `rate` (a rate imposed from outside, e.g. a fusion sync).
    pub fn set_open_rate(&mut self, rate: Rate) {
        if let Some(m) = self.mis.back_mut().filter(|m| m.end.is_none()) {
            m.rate = rate;
        }
    }

    /// The oldest MI that has ended but whose packets are not all accounted for: what is known
    /// of it so far (Vivace's early decisions).
    pub fn partial_front(&self) -> Option<MiResult> {
        self.mis.iter().find(|m| m.end.is_some()).map(|m| m.result(self.covered_until, self.reject_outliers))
    }

    /// Credit one report to the MIs that sent its packets; returns the MIs it completed, oldest
    /// first.
    pub fn observe(&mut self, r: &Report) -> Vec<MiResult> {
        if let Some(srtt) = self.srtt {
            for half in [r.rtt_first_half_mean, r.rtt_second_half_mean].into_iter().flatten() {
                if !half.is_zero() {
                    let d = (secs(half) - secs(srtt)).abs();
                    self.rtt_dev = Some(ewma_eighth(self.rtt_dev, d));
                }
            }
        }
        self.srtt = srtt_after(self.srtt, r);
        if let Some(m) = r.rtt_min.or(r.rtt_last).filter(|d| !d.is_zero()) {
            self.min_rtt.update(r.now, m, MIN_RTT_WINDOW);
        }
        let now = secs(r.now);
        let shift = secs(r.rtt_mean().or(self.srtt).unwrap_or_default());
        let interval = secs(r.interval).min(now);
        let (a, b) = (now - interval - shift, now - shift);
        self.credit(r, a, b, now, interval);
        self.credit_sent(r, now - interval, now);
        if b > self.covered_until {
            self.covered_until = b;
        }
        let mut done = Vec::new();
        while let Some(front) = self.mis.front() {
            // A nanosecond of slack: `now - rtt` in floating point can land just short of an
            // MI boundary that sits exactly one RTT back.
            let complete = front.end.is_some_and(|e| e <= self.covered_until + 1e-9);
            if !(complete || self.mis.len() > MAX_PENDING_MIS) {
                break;
            }
            let mi = self.mis.pop_front().expect("front exists");
            done.push(mi.result(self.covered_until, self.reject_outliers));
        }
        done
    }

    /// What the flow sent during the report's interval `[a, b]` (not shifted: sending happens
    /// now), spread over the MIs sending then in proportion to the overlap. The first report
    /// after the monitor starts has no earlier flight to compare with and credits nothing.
    fn credit_sent(&mut self, r: &Report, a: f64, b: f64) {
        let prior = self.last_in_flight.replace(r.bytes_in_flight);
        // Nothing in flight before or after: a datapath that does not say (the flight is part
        // of what was sent), or an idle flow; either way no measure.
        let Some(prior) = prior.filter(|&p| b > a && (p > 0 || r.bytes_in_flight > 0)) else { return };
        // Lost packets come as a count: at the report's acked (else in-flight) bytes per packet.
        let per_packet = if r.packets_acked > 0 {
            r.bytes_acked as f64 / r.packets_acked as f64
        } else if r.packets_in_flight > 0 {
            r.bytes_in_flight as f64 / r.packets_in_flight as f64
        } else {
            0.0
        };
        let lost = r.packets_lost.min(1 << 40) as f64 * per_packet;
        let sent = r.bytes_acked.min(1 << 50) as f64 + lost + r.bytes_in_flight as f64 - prior as f64;
        let sent = sent.max(0.0);
        for m in self.mis.iter_mut() {
            let overlap = b.min(m.end_or(f64::INFINITY)) - a.max(m.start);
            if overlap > 0.0 {
                m.sent_bytes += sent * overlap / (b - a);
                m.sent_covered += overlap;
            }
        }
    }

    fn credit(&mut self, r: &Report, a: f64, b: f64, now: f64, interval: f64) {
        let span = b - a;
        let lost = r.packets_lost.min(1 << 40) as f64;
        let acked_packets = r.packets_acked.min(1 << 40) as f64;
        let acked_bytes = r.bytes_acked.min(1 << 50) as f64;
        for m in self.mis.iter_mut() {
            let (s, e) = (m.start, m.end_or(f64::INFINITY));
            let f = if span > 0.0 {
                ((b.min(e) - a.max(s)) / span).max(0.0)
            } else if (s..e).contains(&a) {
                1.0
            } else {
                0.0
            };
            if f > 0.0 {
                m.acked_bytes += f * acked_bytes;
                m.ack_time += f * interval;
                m.acked_packets += f * acked_packets;
                m.lost_packets += f * lost;
                if f * lost > 0.0 {
                    m.loss_reports += 1;
                }
                m.app_limited |= r.app_limited;
            }
        }
        // The two half-interval RTT means, placed at the send times of their halves.
        let half = r.rtt_samples as f64 / 2.0;
        for (q, mean) in [(0.25, r.rtt_first_half_mean), (0.75, r.rtt_second_half_mean)] {
            let Some(rtt) = mean.filter(|d| !d.is_zero()) else { continue };
            let t = a + q * span;
            if let Some(m) = self.mis.iter_mut().find(|m| m.start <= t && t < m.end_or(now.max(t) + 1.0)) {
                m.points.push((t, secs(rtt), half.max(0.5)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ack_report;

    const MSS: u64 = 1000;
    const RTT: Duration = Duration::from_millis(100);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn acks_are_credited_to_the_mi_that_sent_them_one_rtt_earlier() {
        let mut m = Monitor::new(false);
        m.start(ms(0), Rate::from_mbps(1.0));
        m.start(ms(100), Rate::from_mbps(2.0));
        m.start(ms(200), Rate::from_mbps(4.0));
        // Report [100, 200] acks what was sent in [0, 100]: MI 0 only, and completes it.
        let done = m.observe(&ack_report(ms(200), RTT, 12_500, MSS));
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].id, 0);
        assert!((done[0].throughput.mbps() - 1.0).abs() < 1e-9, "{:?}", done[0]);
        // A report straddling [250, 350] covers sends in [150, 250]: half MI 1, half MI 2.
        let done = m.observe(&Report { packets_lost: 10, ..ack_report(ms(350), RTT, 20_000, MSS) });
        assert_eq!(done.iter().map(|d| d.id).collect::<Vec<_>>(), vec![1]);
        assert!((done[0].loss - 5.0 / 15.0).abs() < 1e-9, "{:?}", done[0]);
        assert_eq!(done[0].loss_reports, 1);
    }

    #[test]
    fn an_mi_is_not_complete_before_its_last_packet_could_be_acked() {
        let mut m = Monitor::new(false);
        m.start(ms(0), Rate::from_mbps(1.0));
        m.start(ms(100), Rate::from_mbps(1.0));
        // Reports every 50 ms on a 100 ms RTT: the first covers sends in [0, 50].
        let half = |now| Report { interval: ms(50), ..ack_report(ms(now), RTT, 1000, MSS) };
        assert!(m.observe(&half(150)).is_empty());
        let p = m.partial_front().unwrap();
        assert_eq!((p.id, p.duration), (0, ms(50)), "half of MI 0 is accounted for");
        assert_eq!(m.observe(&half(200)).len(), 1);
    }

    #[test]
    fn the_latency_gradient_is_the_slope_of_the_rtt_over_the_mi() {
        let mut m = Monitor::new(false);
        m.start(ms(0), Rate::from_mbps(1.0));
        m.start(ms(200), Rate::from_mbps(1.0));
        // RTT rising 10 ms per 100 ms of sending: dRTT/dT = 0.1.
        let mut done = Vec::new();
        for (end, first, second) in [(200, 100, 105), (300, 110, 115)] {
            let r = Report {
                rtt_first_half_mean: Some(ms(first)),
                rtt_second_half_mean: Some(ms(second)),
                ..ack_report(ms(end), RTT, 1000, MSS)
            };
            done.extend(m.observe(&r));
        }
        assert_eq!(done.len(), 1);
        assert!((done[0].rtt_gradient - 0.1).abs() < 1e-6, "{:?}", done[0]);
    }

    #[test]
    fn regression_ignores_an_outlier_and_a_slope_below_its_error() {
        let pts: Vec<(f64, f64, f64)> = (0..8).map(|i| (i as f64 * 0.01, 0.1, 1.0)).collect();
        let mut spiked = pts.clone();
        spiked[7].1 = 0.3;
        assert!(regression(&spiked, false).slope > 0.5, "a spike tilts the plain fit");
        assert_eq!(regression(&spiked, true).slope, 0.0);
        let noisy: Vec<(f64, f64, f64)> =
            (0..8).map(|i| (i as f64 * 0.01, 0.1 + if i % 2 == 0 { 0.002 } else { -0.002 }, 1.0)).collect();
        assert_eq!(regression(&noisy, true).slope, 0.0);
    }

    #[test]
    fn rtt_deviation_is_the_mean_distance_of_half_report_means_from_the_srtt() {
        let mut m = Monitor::new(true);
        assert_eq!(m.rtt_deviation(), 0.0);
        m.start(ms(0), Rate::from_mbps(1.0));
        let r = |now, a, b| Report {
            rtt_first_half_mean: Some(ms(a)),
            rtt_second_half_mean: Some(ms(b)),
            ..ack_report(ms(now), RTT, 1000, MSS)
        };
        m.observe(&r(100, 100, 100));
        assert_eq!(m.rtt_deviation(), 0.0, "no deviation before an srtt");
        m.observe(&r(110, 104, 96));
        assert!((m.rtt_deviation() - 0.004).abs() < 1e-12, "the first deviation sets it");
        for i in 0..60 {
            m.observe(&r(120 + i, 100, 100));
        }
        assert!(m.rtt_deviation() < 1e-5, "and a steady RTT decays it: {}", m.rtt_deviation());
        // An MI records the deviation it began with.
        m.observe(&r(190, 110, 90));
        let before = m.rtt_deviation();
        m.start(ms(200), Rate::from_mbps(1.0));
        m.observe(&r(300, 100, 100));
        m.start(ms(300), Rate::from_mbps(1.0));
        let done = m.observe(&r(400, 100, 100));
        assert_eq!(done.last().map(|d| d.rtt_jitter), Some(before), "{done:?}");
    }

    #[test]
    fn hostile_reports_keep_memory_bounded() {
        let mut m = Monitor::new(true);
        for i in 0..1000u64 {
            m.start(ms(i), Rate::from_mbps(1.0));
            m.observe(&Report { now: ms(i), rtt_last: Some(Duration::from_secs(3600)), ..Report::default() });
        }
        assert!(m.mis.len() <= MAX_PENDING_MIS + 1);
    }

    /// 10 ms reports at a 100 ms RTT: each acks `acked` bytes and leaves `in_flight(i)` in flight.
    fn sent_rates(rate_mbps: f64, acked: u64, in_flight: impl Fn(u64) -> u64) -> Vec<MiResult> {
        let mut m = Monitor::new(false);
        let mut done = Vec::new();
        for i in 0..=60u64 {
            if i % 10 == 0 {
                m.start(ms(10 * i), Rate::from_mbps(rate_mbps));
            }
            let r =
                Report { interval: ms(10), bytes_in_flight: in_flight(i), ..ack_report(ms(10 * i), RTT, acked, MSS) };
            done.extend(m.observe(&r));
        }
        done
    }

    /// A datapath that paces at 0.8 of the MI's rate on an empty path: the MI's packets come
    /// back at what it sent, and what it sent is measured, not taken from its rate.
    #[test]
    fn an_mi_paced_short_of_its_rate_reads_what_it_sent() {
        // 10 Mbit/s asked, 8 Mbit/s (10,000 bytes per 10 ms) delivered, a steady flight.
        let done = sent_rates(10.0, 10_000, |_| 100_000);
        assert!(done.len() >= 3);
        for mi in &done[1..] {
            let sent = mi.sent_rate.expect("covered").mbps();
            assert!((sent - 8.0).abs() < 1e-6, "{mi:?}");
            assert!((mi.throughput.mbps() - 8.0).abs() < 1e-6, "{mi:?}");
        }
    }

    /// A queue building: the flow sends its rate, the path returns half of it, and the flight
    /// grows by the difference: the measured send rate is the rate, twice the throughput.
    #[test]
    fn an_mi_that_builds_a_queue_reads_its_full_send_rate() {
        // 10 Mbit/s = 12,500 bytes per 10 ms sent, 6,250 acked, the rest added to the flight.
        let done = sent_rates(10.0, 6_250, |i| 100_000 + 6_250 * i);
        for mi in &done[1..] {
            assert!((mi.sent_rate.expect("covered").mbps() - 10.0).abs() < 1e-6, "{mi:?}");
            assert!((mi.throughput.mbps() - 5.0).abs() < 1e-6, "{mi:?}");
        }
    }
}
