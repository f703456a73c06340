//! What a simulation runs: the link, the flows, the report cadence, the seed.

use polycc_algorithms::{Policy, Rate};
pub use polycc_args::quantity::{BandwidthChange, BufferSize, ReportInterval};
use std::time::Duration;

/// The dumbbell's bottleneck and its paths.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Bottleneck bandwidth at time zero.
    pub bandwidth: Rate,
    /// Later bandwidth changes, in any order.
    pub changes: Vec<BandwidthChange>,
    /// Mean round-trip propagation delay.
    pub rtt: Duration,
    /// ACK-path deviation: RTT ranges over `rtt +/- rtt_dev`, ACKs released in bursts.
    pub rtt_dev: Duration,
    /// FIFO buffer in front of the bottleneck.
    pub buffer: BufferSize,
    /// Random loss probability per packet at the bottleneck.
    pub loss: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            bandwidth: Rate::from_mbps(20.0),
            changes: Vec::new(),
            rtt: Duration::from_millis(40),
            rtt_dev: Duration::ZERO,
            buffer: BufferSize::Bdp(1.0),
            loss: 0.0,
        }
    }
}

impl LinkConfig {
    /// Bandwidth in force at `t`.
    pub fn bandwidth_at(&self, t: Duration) -> Rate {
        self.schedule().into_iter().take_while(|c| c.at <= t).last().map_or(self.bandwidth, |c| c.bandwidth)
    }

    /// The changes sorted by time.
    pub fn schedule(&self) -> Vec<BandwidthChange> {
        let mut s = self.changes.clone();
        s.sort_by_key(|c| c.at);
        s
    }

    /// Initial bandwidth x mean RTT, in bytes.
    pub fn bdp_bytes(&self) -> f64 {
        self.bandwidth.bytes_over(self.rtt)
    }

    /// Bytes the bottleneck can carry over `[from, to]`.
    pub fn capacity_bytes(&self, from: Duration, to: Duration) -> f64 {
        if to <= from {
            return 0.0;
        }
        let mut edges = vec![from];
        edges.extend(self.schedule().iter().map(|c| c.at).filter(|t| *t > from && *t < to));
        edges.push(to);
        edges.windows(2).map(|w| self.bandwidth_at(w[0]).bytes_over(w[1] - w[0])).sum()
    }
}

/// One flow of the dumbbell: a bulk sender with its own start time and policy.
#[derive(Clone, Debug)]
pub struct FlowConfig {
    pub start: Duration,
    pub policy: Policy,
}

/// A whole simulation.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub link: LinkConfig,
    pub flows: Vec<FlowConfig>,
    pub duration: Duration,
    pub report_interval: ReportInterval,
    /// Packet size on the wire and payload per packet, in bytes.
    pub mss_bytes: u64,
    pub seed: u64,
    /// Keep the per-report time series.
    pub record_series: bool,
}

impl SimConfig {
    /// `n` flows of `policy` started `stagger` apart.
    pub fn staggered(link: LinkConfig, policy: &Policy, n: usize, stagger: Duration, duration: Duration) -> SimConfig {
        SimConfig {
            link,
            flows: (0..n).map(|i| FlowConfig { start: stagger * i as u32, policy: policy.clone() }).collect(),
            duration,
            report_interval: ReportInterval::Rtt,
            mss_bytes: 1500,
            seed: 1,
            record_series: false,
        }
    }
}
