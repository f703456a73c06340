//! Run metrics: RTT histograms, throughput bins, Jain's index, convergence time.

use serde::Serialize;
use std::time::Duration;

/// Width of the throughput bins (convergence, time series).
pub const BIN: Duration = Duration::from_millis(100);
/// Convergence: binned throughput within this fraction of the new capacity ...
pub const CONVERGENCE_BAND: f64 = 0.10;
/// ... for this long.
pub const CONVERGENCE_HOLD: Duration = Duration::from_secs(2);

/// RTT samples in 100 us buckets up to 20 s, plus an exact sum for the mean.
#[derive(Clone, Debug)]
pub struct RttHistogram {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
}

const RTT_BUCKET_NS: u64 = 100_000;
const RTT_BUCKETS: usize = 200_000;

impl Default for RttHistogram {
    fn default() -> Self {
        RttHistogram { buckets: vec![0; RTT_BUCKETS], count: 0, sum_ns: 0 }
    }
}

impl RttHistogram {
    pub fn record(&mut self, rtt_ns: u64) {
        let i = ((rtt_ns / RTT_BUCKET_NS) as usize).min(RTT_BUCKETS - 1);
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_ns += rtt_ns as u128;
    }

    pub fn merge(&mut self, o: &RttHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum_ns += o.sum_ns;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64 / 1e6)
    }

    /// The `q` quantile (0..1), at bucket resolution (upper edge of the bucket).
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some((i as u64 + 1) as f64 * RTT_BUCKET_NS as f64 / 1e6);
            }
        }
        None
    }
}

/// Jain's fairness index `(sum x)^2 / (n sum x^2)`; 1 for an empty or all-zero set.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq == 0.0 {
        1.0
    } else {
        sum * sum / (xs.len() as f64 * sq)
    }
}

/// First time after `change_bin` from which every bin stays within the band around
/// `capacity_per_bin` for [`CONVERGENCE_HOLD`]; `None` if that never happens in the run.
pub fn convergence_time(bins: &[f64], change_bin: usize, capacity_per_bin: f64) -> Option<Duration> {
    let hold = (CONVERGENCE_HOLD.as_nanos() / BIN.as_nanos()) as usize;
    let ok = |b: &f64| (b - capacity_per_bin).abs() <= CONVERGENCE_BAND * capacity_per_bin;
    let mut run_start = None;
    for (i, b) in bins.iter().enumerate().skip(change_bin) {
        if ok(b) {
            let s = *run_start.get_or_insert(i);
            if i + 1 - s >= hold {
                return Some(BIN * (s - change_bin) as u32);
            }
        } else {
            run_start = None;
        }
    }
    None
}

/// Per-flow results.
#[derive(Clone, Debug, Serialize)]
pub struct FlowSummary {
    pub id: usize,
    pub policy: String,
    pub start_s: f64,
    pub goodput_mbps: f64,
    /// Goodput over the last half of the run (the Jain's index input).
    pub goodput_last_half_mbps: f64,
    pub mean_rtt_ms: Option<f64>,
    pub p95_rtt_ms: Option<f64>,
    /// Packets dropped by the bottleneck (random loss or a full buffer) over packets sent.
    pub loss_frac: f64,
    pub sent_packets: u64,
    /// Packets the sender declared lost (3 later packets acknowledged, or a timeout).
    pub lost_packets: u64,
    /// Packets the bottleneck dropped.
    pub dropped_packets: u64,
    pub reports: u64,
}

/// The run's results, as `polycc-sim --json` prints them.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub duration_s: f64,
    pub goodput_mbps: f64,
    pub utilization: f64,
    pub mean_rtt_ms: Option<f64>,
    pub p95_rtt_ms: Option<f64>,
    pub base_rtt_ms: f64,
    /// Packets dropped by the bottleneck over packets sent, all flows.
    pub loss_frac: f64,
    pub jain_index: f64,
    /// Seconds after the last bandwidth change until throughput held within 10 % of the new
    /// capacity for 2 s (100 ms bins); `null` without a change or if it never did.
    pub convergence_s: Option<f64>,
    /// False when there was a change and throughput never settled.
    pub converged: bool,
    /// Seconds after the last bandwidth change until the bottleneck queue fell to at most one
    /// new BDP (plus 2 packets) and stayed there for 2 s: how long the excess in flight lasts.
    pub queue_convergence_s: Option<f64>,
    pub flows: Vec<FlowSummary>,
    /// Wall-clock seconds the simulation took.
    pub wall_s: f64,
    pub events: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_a_hog() {
        assert!((jain_index(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index(&[9.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn convergence_needs_the_whole_hold() {
        let mut bins = vec![20.0; 10];
        bins.extend(vec![15.0; 5]); // overshoot after the change at bin 10
        bins.extend(vec![10.2; 19]);
        bins.push(13.0); // one bin out of band resets the hold
        bins.extend(vec![9.5; 25]);
        assert_eq!(convergence_time(&bins, 10, 10.0), Some(BIN * 25));
        assert_eq!(convergence_time(&bins[..40], 10, 10.0), None);
    }

    #[test]
    fn rtt_quantiles() {
        let mut h = RttHistogram::default();
        for ms in 1..=100u64 {
            h.record(ms * 1_000_000);
        }
        assert!((h.mean_ms().unwrap() - 50.5).abs() < 1e-9);
        assert!((h.quantile_ms(0.95).unwrap() - 95.1).abs() < 0.11);
    }
}
