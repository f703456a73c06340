//! What a simulation runs: the link, the flows, the report cadence, the seed.

use polycc_algorithms::{Policy, Rate};
use polycc_algorithms::quantity::{parse_bandwidth, parse_duration, parse_probability, split_number};
pub use polycc_algorithms::quantity::ReportInterval;
use polycc_algorithms::units::bytes_from_f64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use thiserror::Error;

/// A link-change flag that does not parse, with the accepted form.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LinkSpecError {
    #[error("`{0}` is not a buffer size: use a multiple of the BDP (1bdp, 0.5bdp), packets (64pkt) or bytes (150kb, 1500b, 2mb; kb = 1000 bytes)")]
    Buffer(String),
    #[error("`{0}` is not a bandwidth change: use TIME:BANDWIDTH, e.g. 5s:10mbit")]
    BandwidthChange(String),
    #[error("`{0}` is not an RTT change: use TIME:RTT, e.g. 5s:50ms")]
    RttChange(String),
    #[error("`{0}` is not a loss change: use TIME:PROBABILITY, e.g. 5s:0.01")]
    LossChange(String),
    #[error("`{0}` is not a policer: use RATE[:BURST], e.g. 10mbit or 10mbit:30kb (burst in bytes or packets; default: 10 ms at the rate, at least 10 packets)")]
    Policer(String),
    #[error("`{0}` is not a random-change spec: use EVERY:bw=LO-HI,rtt=LO-HI,loss=LO-HI (any subset), e.g. 5s:bw=10mbit-100mbit,rtt=10ms-100ms,loss=0-0.01")]
    RandomChanges(String),
}

/// A bottleneck buffer size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BufferSize {
    /// Multiples of the bandwidth-delay product (initial bandwidth x base RTT).
    Bdp(f64),
    /// A number of full-size packets.
    Packets(u64),
    /// Bytes.
    Bytes(u64),
}

impl BufferSize {
    /// The size in bytes for a path with this BDP and packet size.
    pub fn bytes(self, bdp_bytes: f64, packet_bytes: u64) -> u64 {
        match self {
            BufferSize::Bdp(m) => bytes_from_f64(m * bdp_bytes).max(packet_bytes),
            BufferSize::Packets(n) => n.saturating_mul(packet_bytes),
            BufferSize::Bytes(b) => b,
        }
    }
}

impl FromStr for BufferSize {
    type Err = LinkSpecError;
    fn from_str(s: &str) -> Result<Self, LinkSpecError> {
        let err = || LinkSpecError::Buffer(s.to_string());
        let (value, unit) = split_number(s).ok_or_else(err)?;
        if value <= 0.0 {
            return Err(err());
        }
        let bytes = |scale: f64| Ok(BufferSize::Bytes(bytes_from_f64(value * scale)));
        match unit.as_str() {
            "bdp" => Ok(BufferSize::Bdp(value)),
            "pkt" | "pkts" | "p" if value.fract() == 0.0 => Ok(BufferSize::Packets(value as u64)),
            "b" => bytes(1.0),
            "kb" => bytes(1e3),
            "mb" => bytes(1e6),
            "kib" => bytes(1024.0),
            "mib" => bytes(1024.0 * 1024.0),
            _ => Err(err()),
        }
    }
}

impl fmt::Display for BufferSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferSize::Bdp(m) => write!(f, "{m}bdp"),
            BufferSize::Packets(n) => write!(f, "{n}pkt"),
            BufferSize::Bytes(b) => write!(f, "{b}b"),
        }
    }
}

/// The bottleneck bandwidth becomes `bandwidth` at `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandwidthChange {
    pub at: Duration,
    pub bandwidth: Rate,
}

impl FromStr for BandwidthChange {
    type Err = LinkSpecError;
    fn from_str(s: &str) -> Result<Self, LinkSpecError> {
        let err = || LinkSpecError::BandwidthChange(s.to_string());
        let (at, bw) = s.split_once(':').ok_or_else(err)?;
        Ok(BandwidthChange {
            at: parse_duration(at).map_err(|_| err())?,
            bandwidth: parse_bandwidth(bw).map_err(|_| err())?,
        })
    }
}

/// The round-trip propagation delay becomes `rtt` at `at` (ACKs are never reordered: a shorter
/// path delivers nothing ahead of what is already on the longer one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RttChange {
    pub at: Duration,
    pub rtt: Duration,
}

impl FromStr for RttChange {
    type Err = LinkSpecError;
    fn from_str(s: &str) -> Result<Self, LinkSpecError> {
        let err = || LinkSpecError::RttChange(s.to_string());
        let (at, rtt) = s.split_once(':').ok_or_else(err)?;
        let rtt = parse_duration(rtt).map_err(|_| err())?;
        if rtt.is_zero() {
            return Err(err());
        }
        Ok(RttChange { at: parse_duration(at).map_err(|_| err())?, rtt })
    }
}

/// The random loss probability becomes `loss` at `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossChange {
    pub at: Duration,
    pub loss: f64,
}

impl FromStr for LossChange {
    type Err = LinkSpecError;
    fn from_str(s: &str) -> Result<Self, LinkSpecError> {
        let err = || LinkSpecError::LossChange(s.to_string());
        let (at, p) = s.split_once(':').ok_or_else(err)?;
        Ok(LossChange { at: parse_duration(at).map_err(|_| err())?, loss: parse_probability(p).map_err(|_| err())? })
    }
}

/// A token-bucket policer in front of the bottleneck: tokens accrue at `rate` up to the burst;
/// a packet finding fewer tokens than its size is dropped (no queueing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policer {
    pub rate: Rate,
    /// Bucket depth; `None`: [`Policer::DEFAULT_BURST`] at the rate, at least
    /// [`Policer::MIN_BURST_PACKETS`] packets.
    pub burst: Option<BufferSize>,
}

impl Policer {
    pub const DEFAULT_BURST: Duration = Duration::from_millis(10);
    pub const MIN_BURST_PACKETS: u64 = 10;

    /// The bucket depth in bytes on a link with this BDP and packet size.
    pub fn burst_bytes(&self, bdp_bytes: f64, packet_bytes: u64) -> u64 {
        match self.burst {
            Some(b) => b.bytes(bdp_bytes, packet_bytes).max(packet_bytes),
            None => polycc_algorithms::units::bytes_from_f64(self.rate.bytes_over(Self::DEFAULT_BURST))
                .max(Self::MIN_BURST_PACKETS * packet_bytes),
        }
    }
}

impl FromStr for Policer {
    type Err = LinkSpecError;
    fn from_str(s: &str) -> Result<Self, LinkSpecError> {
        let err = || LinkSpecError::Policer(s.to_string());
        let (rate, burst) = match s.split_once(':') {
            Some((r, b)) => (r, Some(b.parse::<BufferSize>().map_err(|_| err())?)),
            None => (s, None),
        };
        Ok(Policer { rate: parse_bandwidth(rate).map_err(|_| err())?, burst })
    }
}

/// Bandwidth, RTT and loss redrawn uniformly from their ranges every `every`, from time zero
/// (the buffer stays sized from the link's initial --bw and --rtt).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomChanges {
    pub every: Duration,
    pub bandwidth: Option<(Rate, Rate)>,
    pub rtt: Option<(Duration, Duration)>,
    pub loss: Option<(f64, f64)>,
}

impl FromStr for RandomChanges {
    type Err = LinkSpecError;
    fn from_str(s: &str) -> Result<Self, LinkSpecError> {
        let err = || LinkSpecError::RandomChanges(s.to_string());
        let (every, ranges) = s.split_once(':').ok_or_else(err)?;
        let every = parse_duration(every).map_err(|_| err())?;
        if every.is_zero() {
            return Err(err());
        }
        let mut spec = RandomChanges { every, bandwidth: None, rtt: None, loss: None };
        for part in ranges.split(',') {
            let (key, range) = part.split_once('=').ok_or_else(err)?;
            let (lo, hi) = range.split_once('-').ok_or_else(err)?;
            match key.trim() {
                "bw" => {
                    let (lo, hi) = (parse_bandwidth(lo).map_err(|_| err())?, parse_bandwidth(hi).map_err(|_| err())?);
                    spec.bandwidth = Some((lo, hi)).filter(|_| lo <= hi);
                }
                "rtt" => {
                    let (lo, hi) = (parse_duration(lo).map_err(|_| err())?, parse_duration(hi).map_err(|_| err())?);
                    spec.rtt = Some((lo, hi)).filter(|_| !lo.is_zero() && lo <= hi);
                }
                "loss" => {
                    let (lo, hi) =
                        (parse_probability(lo).map_err(|_| err())?, parse_probability(hi).map_err(|_| err())?);
                    spec.loss = Some((lo, hi)).filter(|_| lo <= hi);
                }
                _ => return Err(err()),
            }
            // A range given backwards (or an RTT of zero) was dropped above: refuse it.
            if matches!(
                (key.trim(), &spec),
                ("bw", RandomChanges { bandwidth: None, .. })
                    | ("rtt", RandomChanges { rtt: None, .. })
                    | ("loss", RandomChanges { loss: None, .. })
            ) {
                return Err(err());
            }
        }
        Ok(spec)
    }
}

impl fmt::Display for RandomChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "every {:?}", self.every)?;
        if let Some((lo, hi)) = self.bandwidth {
            write!(f, ", bw {:.1}-{:.1} Mbit/s", lo.mbps(), hi.mbps())?;
        }
        if let Some((lo, hi)) = self.rtt {
            write!(f, ", rtt {lo:?}-{hi:?}")?;
        }
        if let Some((lo, hi)) = self.loss {
            write!(f, ", loss {lo}-{hi}")?;
        }
        Ok(())
    }
}

/// The value of a piecewise-constant schedule at `t`: the last change at or before `t`, else
/// `initial`. `changes` must be sorted by time.
pub(crate) fn value_at<T: Copy>(initial: T, changes: &[(Duration, T)], t: Duration) -> T {
    match changes.partition_point(|c| c.0 <= t) {
        0 => initial,
        i => changes[i - 1].1,
    }
}

/// The dumbbell's bottleneck and its paths.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Bottleneck bandwidth at time zero.
    pub bandwidth: Rate,
    /// Later bandwidth changes, in any order.
    pub changes: Vec<BandwidthChange>,
    /// Mean round-trip propagation delay.
    pub rtt: Duration,
    /// ACK-path deviation, netem-style: each ACK's delay is drawn from `ack delay +/- rtt_dev`
    /// and no ACK overtakes the one before it, so ACKs bunch behind long draws.
    pub rtt_dev: Duration,
    /// One-way data-path delay when `rtt_dev` is set (the ACK path takes the rest of the RTT);
    /// `None`: [`LinkConfig::JITTER_DATA_DELAY`], at most half the RTT.
    pub data_delay: Option<Duration>,
    /// FIFO buffer in front of the bottleneck.
    pub buffer: BufferSize,
    /// Random loss probability per packet at the bottleneck.
    pub loss: f64,
    /// Later changes of the propagation RTT, in any order.
    pub rtt_changes: Vec<RttChange>,
    /// Later changes of the random loss probability, in any order.
    pub loss_changes: Vec<LossChange>,
    /// A token-bucket policer in front of the buffer.
    pub policer: Option<Policer>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            bandwidth: Rate::from_mbps(20.0),
            changes: Vec::new(),
            rtt: Duration::from_millis(40),
            rtt_dev: Duration::ZERO,
            data_delay: None,
            buffer: BufferSize::Bdp(1.0),
            loss: 0.0,
            rtt_changes: Vec::new(),
            loss_changes: Vec::new(),
            policer: None,
        }
    }
}

impl LinkConfig {
    /// The data path's one-way delay under ACK-path jitter unless told otherwise: the kernel
    /// harness's split (experiments/runner/guest.py), which keeps the shortest RTT at 30 ms.
    pub const JITTER_DATA_DELAY: Duration = Duration::from_millis(15);

    /// The one-way data-path delay under ACK-path jitter.
    pub fn data_delay(&self) -> Duration {
        self.data_delay.unwrap_or(Self::JITTER_DATA_DELAY).min(self.rtt / 2)
    }

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

    /// RTT changes sorted by time, as `(at, rtt)`.
    pub fn rtt_schedule(&self) -> Vec<(Duration, Duration)> {
        let mut s: Vec<(Duration, Duration)> = self.rtt_changes.iter().map(|c| (c.at, c.rtt)).collect();
        s.sort_by_key(|c| c.0);
        s
    }

    /// Loss changes sorted by time, as `(at, probability)`.
    pub fn loss_schedule(&self) -> Vec<(Duration, f64)> {
        let mut s: Vec<(Duration, f64)> = self.loss_changes.iter().map(|c| (c.at, c.loss)).collect();
        s.sort_by_key(|c| c.0);
        s
    }

    /// Propagation RTT in force at `t`.
    pub fn rtt_at(&self, t: Duration) -> Duration {
        value_at(self.rtt, &self.rtt_schedule(), t)
    }

    /// Append the draws of `spec` over `[0, duration)` to the change lists. Deterministic per
    /// `seed`, and drawn from a generator of its own, so the run's other draws do not move.
    pub fn add_random_changes(&mut self, spec: &RandomChanges, duration: Duration, seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7A3D_5EED_C4A9_0001);
        let mut at = Duration::ZERO;
        while at < duration {
            if let Some((lo, hi)) = spec.bandwidth {
                let mbps = rng.gen_range(lo.mbps()..=hi.mbps());
                self.changes.push(BandwidthChange { at, bandwidth: Rate::from_mbps(mbps) });
            }
            if let Some((lo, hi)) = spec.rtt {
                let rtt = Duration::from_secs_f64(rng.gen_range(lo.as_secs_f64()..=hi.as_secs_f64()));
                self.rtt_changes.push(RttChange { at, rtt });
            }
            if let Some((lo, hi)) = spec.loss {
                self.loss_changes.push(LossChange { at, loss: rng.gen_range(lo..=hi) });
            }
            at += spec.every;
        }
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
    /// Keep the per-report time series and the PCC decision trace.
    pub record_series: bool,
    /// The fraction of a paced sender's rate its packets leave at ([`PACING_EXACT`] = 1, as a
    /// real host paces). Under emulation the guest's pacing timers fire late and the time lost is
    /// not caught up: a constant rate delivered 0.75-0.98 of itself, with the host's load
    /// (docs/kernel-parity.md, "The guest's own pacing falls as short"). Set from the guest's
    /// pacing probe, the simulator's twin of a guest run paces as that guest did. Unpaced
    /// (ACK-clocked) sending is untouched, as in the guest.
    pub pacing_efficiency: f64,
}

/// A real host's pacing: packets leave at the rate set.
pub const PACING_EXACT: f64 = 1.0;

/// The lowest `pacing_efficiency` accepted (the guest's probes read 0.75 on a busy host).
pub const MIN_PACING_EFFICIENCY: f64 = 0.1;

impl SimConfig {
    /// `n` flows of `policy` started `stagger` apart.
    pub fn staggered(link: LinkConfig, policy: &Policy, n: usize, stagger: Duration, duration: Duration) -> SimConfig {
        SimConfig {
            link,
            flows: (0..n).map(|i| FlowConfig { start: stagger * i as u32, policy: policy.clone() }).collect(),
            duration,
            report_interval: ReportInterval::Auto,
            mss_bytes: 1500,
            seed: 1,
            record_series: false,
            pacing_efficiency: PACING_EXACT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_in_bdp_packets_and_bytes_and_bandwidth_changes() {
        assert_eq!("1bdp".parse(), Ok(BufferSize::Bdp(1.0)));
        assert_eq!("64pkt".parse(), Ok(BufferSize::Packets(64)));
        assert_eq!("150kb".parse(), Ok(BufferSize::Bytes(150_000)));
        assert!("1.5pkt".parse::<BufferSize>().is_err());
        assert!("0bdp".parse::<BufferSize>().is_err());
        assert_eq!(BufferSize::Bdp(2.0).bytes(50_000.0, 1500), 100_000);
        assert_eq!(BufferSize::Packets(6).bytes(1e9, 1500), 9000);
        assert_eq!(
            "5s:10mbit".parse(),
            Ok(BandwidthChange { at: Duration::from_secs(5), bandwidth: Rate::from_mbps(10.0) })
        );
        assert!("5s".parse::<BandwidthChange>().is_err());
    }


    #[test]
    fn link_change_flags_parse_and_refuse_with_the_accepted_form() {
        assert_eq!("5s:50ms".parse(), Ok(RttChange { at: Duration::from_secs(5), rtt: Duration::from_millis(50) }));
        assert!("5s:0ms".parse::<RttChange>().is_err());
        assert_eq!("2s:0.01".parse(), Ok(LossChange { at: Duration::from_secs(2), loss: 0.01 }));
        assert!("2s:1.5".parse::<LossChange>().unwrap_err().to_string().contains("TIME:PROBABILITY"));
        let p: Policer = "10mbit".parse().unwrap();
        assert_eq!(p.burst_bytes(1e6, 1500), 15_000, "10 ms at 10 Mbit/s is 12.5 kB: 10 packets is more");
        assert_eq!("10mbit:30kb".parse::<Policer>().unwrap().burst_bytes(1e6, 1500), 30_000);
        let r: RandomChanges = "5s:bw=10mbit-100mbit,loss=0-0.01".parse().unwrap();
        assert_eq!(r.bandwidth, Some((Rate::from_mbps(10.0), Rate::from_mbps(100.0))));
        assert_eq!((r.rtt, r.loss), (None, Some((0.0, 0.01))));
        for bad in ["5s", "0s:bw=1mbit-2mbit", "5s:bw=2mbit-1mbit", "5s:jitter=1ms-2ms", "5s:rtt=0ms-10ms"] {
            assert!(bad.parse::<RandomChanges>().is_err(), "{bad}");
        }
    }

    #[test]
    fn random_changes_are_drawn_in_their_ranges_every_period_and_per_seed() {
        let spec: RandomChanges = "5s:bw=10mbit-100mbit,rtt=10ms-100ms,loss=0-0.01".parse().unwrap();
        let draw = |seed| {
            let mut l = LinkConfig::default();
            l.add_random_changes(&spec, Duration::from_secs(100), seed);
            l
        };
        let l = draw(1);
        assert_eq!((l.changes.len(), l.rtt_changes.len(), l.loss_changes.len()), (20, 20, 20));
        assert!(l.changes.iter().all(|c| (10.0..=100.0).contains(&c.bandwidth.mbps())));
        assert!(l.rtt_changes.iter().all(|c| (0.01..=0.1).contains(&c.rtt.as_secs_f64())));
        assert!(l.loss_changes.iter().all(|c| (0.0..=0.01).contains(&c.loss)));
        assert_eq!(l.rtt_at(Duration::from_secs(12)), l.rtt_changes[2].rtt);
        assert_eq!(draw(1).changes, l.changes);
        assert_ne!(draw(2).changes, l.changes);
        // The optimum is the capacity integral.
        let optimum: f64 = l.changes.iter().map(|c| c.bandwidth.bytes_over(spec.every)).sum();
        assert!((l.capacity_bytes(Duration::ZERO, Duration::from_secs(100)) - optimum).abs() < 1.0);
    }
}
