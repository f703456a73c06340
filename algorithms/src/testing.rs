//! A synthetic ACK clock for algorithm tests: a fluid single-bottleneck path that turns each
//! decision into the next once-per-RTT report. Deterministic, no real time involved.
//!
//! Model per step (one RTT): the flow keeps `min(cwnd, rate * rtt)` bytes in flight; the
//! bottleneck delivers at most `bw * rtt` of them; whatever exceeds the BDP queues, and the part
//! of the queue beyond `buffer_bytes` is dropped. RTT = base RTT + queue / bw.

use crate::units::{bytes_from_f64, Rate};
use crate::{CongestionControl, Decision, Report};
use std::time::Duration;

/// A fluid bottleneck driven one RTT at a time.
#[derive(Clone, Debug)]
pub struct FluidPath {
    pub bandwidth: Rate,
    pub base_rtt: Duration,
    pub buffer_bytes: u64,
    pub mss_bytes: u64,
    /// Extra random-loss fraction applied to delivered bytes (0..1).
    pub loss_fraction: f64,
    now: Duration,
    queue_bytes: f64,
}

impl FluidPath {
    pub fn new(bandwidth: Rate, base_rtt: Duration, buffer_bytes: u64, mss_bytes: u64) -> FluidPath {
        FluidPath {
            bandwidth,
            base_rtt,
            buffer_bytes,
            mss_bytes,
            loss_fraction: 0.0,
            now: Duration::ZERO,
            queue_bytes: 0.0,
        }
    }

    pub fn bdp_bytes(&self) -> u64 {
        bytes_from_f64(self.bandwidth.bytes_over(self.base_rtt))
    }

    pub fn now(&self) -> Duration {
        self.now
    }

    pub fn queue_bytes(&self) -> u64 {
        bytes_from_f64(self.queue_bytes)
    }

    /// Apply `d` for one RTT and return the report the datapath would send at its end.
    pub fn step(&mut self, d: Decision) -> Report {
        let rtt = self.base_rtt + Duration::from_secs_f64(self.queue_bytes / self.bandwidth.bytes_per_sec().max(1.0));
        let mut inflight = d.cwnd_bytes as f64;
        if let Some(r) = d.rate {
            inflight = inflight.min(r.bytes_over(rtt).max(self.mss_bytes as f64));
        }
        let bdp = self.bandwidth.bytes_over(self.base_rtt);
        let capacity = self.bandwidth.bytes_over(rtt);
        let mut delivered = inflight.min(capacity);
        let mut queue = (inflight - bdp).max(0.0);
        let mut lost = 0.0;
        if queue > self.buffer_bytes as f64 {
            lost = queue - self.buffer_bytes as f64;
            queue = self.buffer_bytes as f64;
            delivered = (delivered - lost).max(0.0);
        }
        let random = delivered * self.loss_fraction;
        delivered -= random;
        lost += random;
        self.queue_bytes = queue;
        let new_rtt = self.base_rtt + Duration::from_secs_f64(queue / self.bandwidth.bytes_per_sec().max(1.0));
        self.now += rtt;
        let mss = self.mss_bytes.max(1) as f64;
        let samples = (delivered / mss).ceil().max(1.0) as u64;
        Report {
            now: self.now,
            interval: rtt,
            bytes_acked: bytes_from_f64(delivered),
            packets_acked: bytes_from_f64(delivered / mss),
            packets_lost: bytes_from_f64((lost / mss).ceil()),
            rtt_last: Some(new_rtt),
            rtt_min: Some(rtt.min(new_rtt)),
            rtt_sum: (rtt + new_rtt) / 2 * u32::try_from(samples).unwrap_or(u32::MAX),
            rtt_samples: samples,
            rtt_first_half_mean: Some(rtt),
            rtt_second_half_mean: Some(new_rtt),
            delivery_rate: Some(Rate::from_bytes_over(bytes_from_f64(delivered), rtt)),
            bytes_in_flight: bytes_from_f64(inflight.min(bdp + queue)),
            packets_in_flight: bytes_from_f64(inflight.min(bdp + queue) / mss),
            ack_train: rtt.min(Duration::from_secs_f64(delivered / self.bandwidth.bytes_per_sec().max(1.0))),
            ..Report::default()
        }
    }
}

/// What a flow did on a [`FluidPath`] over the second half of a run.
#[derive(Clone, Debug)]
pub struct SteadyState {
    /// Acknowledged bytes over the path's capacity.
    pub utilization: f64,
    /// Mean RTT of the steps.
    pub mean_rtt: Duration,
    /// Mean bottleneck queue, in packets.
    pub mean_queue_packets: f64,
    /// The window after every step of the run (not just the second half), in packets.
    pub cwnd_packets: Vec<u64>,
}

impl FluidPath {
    /// Drive `cc` for `steps` RTTs from its current decision and keep the reports it saw
    /// (realistic report streams for benchmarks).
    pub fn reports(&mut self, cc: &mut dyn CongestionControl, steps: usize) -> Vec<Report> {
        let mut d = cc.decision();
        (0..steps)
            .map(|_| {
                let r = self.step(d);
                d = cc.on_report(&r);
                r
            })
            .collect()
    }

    /// Drive `cc` for `steps` RTTs from its current decision and measure the second half.
    pub fn run(&mut self, cc: &mut dyn CongestionControl, steps: usize) -> SteadyState {
        let mss = self.mss_bytes.max(1);
        let mut d = cc.decision();
        let (mut acked, mut since, mut rtt_sum, mut queue_sum, mut n) = (0, Duration::ZERO, Duration::ZERO, 0.0, 0u32);
        let mut cwnd_packets = Vec::with_capacity(steps);
        for i in 0..steps {
            if i == steps / 2 {
                since = self.now;
            }
            let rep = self.step(d);
            if i >= steps / 2 {
                acked += rep.bytes_acked;
                rtt_sum += rep.interval;
                queue_sum += self.queue_bytes / mss as f64;
                n += 1;
            }
            d = cc.on_report(&rep);
            cwnd_packets.push(d.cwnd_bytes / mss);
        }
        let n = n.max(1);
        SteadyState {
            utilization: acked as f64 / self.bandwidth.bytes_over(self.now - since),
            mean_rtt: rtt_sum / n,
            mean_queue_packets: queue_sum / f64::from(n),
            cwnd_packets,
        }
    }
}

/// A report of `acked_bytes` over one `rtt` ending at `now`, with a constant RTT and no loss.
pub fn ack_report(now: Duration, rtt: Duration, acked_bytes: u64, mss_bytes: u64) -> Report {
    let packets = acked_bytes / mss_bytes.max(1);
    Report {
        now,
        interval: rtt,
        bytes_acked: acked_bytes,
        packets_acked: packets,
        rtt_last: Some(rtt),
        rtt_min: Some(rtt),
        rtt_sum: rtt * u32::try_from(packets.max(1)).unwrap_or(u32::MAX),
        rtt_samples: packets.max(1),
        rtt_first_half_mean: Some(rtt),
        rtt_second_half_mean: Some(rtt),
        delivery_rate: Some(Rate::from_bytes_over(acked_bytes, rtt)),
        ..Report::default()
    }
}

/// A loss-only report: `lost` packets, no ACKs and no RTT sample.
pub fn loss_report(now: Duration, lost: u64) -> Report {
    Report { now, packets_lost: lost, ..Report::default() }
}

/// The policy of a fused BBR pilot with a CUBIC copilot, `max` on cwnd (issue 15's and 21's), for
/// the simulator's tests.
pub fn fused_bbr_cubic_policy() -> crate::Policy {
    fused_max_cwnd_policy(crate::policy::AlgorithmKind::Bbr, crate::policy::AlgorithmKind::Cubic)
}

/// `pilot` with one `copilot`, `max` on cwnd (the kernel-parity matrix's fused BBR + CUBIC and
/// Vivace + CUBIC), for the simulator's tests.
pub fn fused_max_cwnd_policy(
    pilot: crate::policy::AlgorithmKind,
    copilot: crate::policy::AlgorithmKind,
) -> crate::Policy {
    crate::Policy::Fused(crate::FusionPolicy {
        pilot: pilot.default_config(),
        copilots: vec![copilot.default_config()],
        fusion: crate::FusionFn::Max,
        fuse_on: crate::FuseOn::Cwnd,
    })
}

/// A fused BBR pilot with a CUBIC copilot, `max` on cwnd (issue 15's and 21's policy), for
/// replays of the agent's logged reports.
pub fn fused_bbr_cubic(info: crate::FlowInfo) -> crate::fusion::FusionController {
    use crate::policy::AlgorithmKind;
    crate::fusion::FusionController::new(
        AlgorithmKind::Bbr.default_config().build(info),
        vec![AlgorithmKind::Cubic.default_config().build(info)],
        crate::FusionFn::Max,
        crate::FuseOn::Cwnd,
        info,
    )
}

/// One report of a replay: the window installed before it, the decision on it, the member whose
/// value won, and whether the pilot was in its slow start before it.
#[derive(Clone, Copy, Debug)]
pub struct Replayed {
    pub before: u64,
    pub decision: Decision,
    pub winner: usize,
    pub starting: bool,
}

/// `f` decides on `reports` as the agent does: the window the datapath grew per ACK since the
/// last install ([`crate::ack_growth::expected_cwnd`]) counts in each decision.
pub fn replay<'a>(
    f: &mut crate::fusion::FusionController,
    reports: impl IntoIterator<Item = &'a Report>,
) -> Vec<Replayed> {
    let (mut window, mut cap) = (f.decision().cwnd_bytes, 0);
    reports
        .into_iter()
        .map(|r| {
            let grown = crate::ack_growth::expected_cwnd(window, cap, r);
            let starting = f.in_slow_start();
            let (decision, growth) = crate::ack_growth::decide(f, r, window, grown);
            let step = Replayed { before: window, decision, winner: f.last_winner(), starting };
            (window, cap) = (decision.cwnd_bytes, growth.cap);
            step
        })
        .collect()
}
