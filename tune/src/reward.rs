//! A period's reward from a group's per-flow per-second [`StatsRecord`]s.
//!
//! Linear (production paper, section 3.3; `../shared/reference/algorithms.md` section 7):
//!
//! ```text
//!   r = c_T T - c_D D - c_L L
//!   T = mean throughput over flow-seconds, Mbit/s     (1 unit = 1 Mbit/s)
//!   D = the p-th percentile of the flow-seconds' average RTT, ms   (1 unit = 1 ms)
//!   L = mean loss rate over flow-seconds, percent     (1 unit = 1 %)
//! ```
//!
//! so `c_D = 0.1` reads "10 ms of latency cost as much as 1 Mbit/s". A surrogate reward is
//! `coef x stat(field)` over any numeric field of the record (e.g. the mean sending rate).
//! Flow-seconds that were mostly application-limited say nothing about the configuration and
//! are left out.

use polycc_control::stats::StatsRecord;
use serde::{Deserialize, Serialize};

/// A flow-second counts only when it was application-limited less than this fraction of it.
pub const MAX_APP_LIMITED_FRACTION: f64 = 0.5;

/// The numeric fields of [`StatsRecord`] a surrogate may use, by name (checked when the
/// configuration loads, so nothing looks names up per record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    ThroughputBytesPerSec,
    SendRateMinBytesPerSec,
    SendRateAvgBytesPerSec,
    SendRateMaxBytesPerSec,
    LossFrac,
    RttMinUs,
    RttAvgUs,
    SlowStartS,
    AppLimitedS,
    DurationS,
}

impl Field {
    pub fn of(self, r: &StatsRecord) -> Option<f64> {
        match self {
            Field::ThroughputBytesPerSec => Some(r.throughput_bytes_per_sec),
            Field::SendRateMinBytesPerSec => r.send_rate_min_bytes_per_sec,
            Field::SendRateAvgBytesPerSec => r.send_rate_avg_bytes_per_sec,
            Field::SendRateMaxBytesPerSec => r.send_rate_max_bytes_per_sec,
            Field::LossFrac => Some(r.loss_frac),
            Field::RttMinUs => r.rtt_min_us,
            Field::RttAvgUs => r.rtt_avg_us,
            Field::SlowStartS => Some(r.slow_start_s),
            Field::AppLimitedS => Some(r.app_limited_s),
            Field::DurationS => Some(r.duration_s),
        }
        .filter(|v| v.is_finite())
    }
}

/// How a surrogate summarizes its field over the period.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Stat {
    Mean,
    /// A percentile in [0, 100].
    Percentile(f64),
}

/// The configured reward.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RewardFn {
    Linear {
        /// Per Mbit/s of mean throughput.
        throughput: f64,
        /// Per ms of the latency percentile.
        latency: f64,
        /// Per percent of mean loss.
        loss: f64,
        /// Which percentile of per-second average RTT is "the latency" (default 75).
        #[serde(default = "default_percentile")]
        latency_percentile: f64,
    },
    Surrogate {
        field: Field,
        #[serde(default = "default_stat")]
        stat: Stat,
        coef: f64,
    },
}

fn default_percentile() -> f64 {
    75.0
}

fn default_stat() -> Stat {
    Stat::Mean
}

impl Default for RewardFn {
    /// "Moderate": 1 Mbit/s is worth 10 ms of 75th-percentile RTT and 0.5 % loss.
    fn default() -> Self {
        RewardFn::Linear { throughput: 1.0, latency: 0.1, loss: 2.0, latency_percentile: 75.0 }
    }
}

impl RewardFn {
    pub fn check(&self) -> Result<(), String> {
        match self {
            RewardFn::Linear { throughput, latency, loss, latency_percentile } => {
                if ![throughput, latency, loss].iter().all(|c| c.is_finite() && **c >= 0.0) {
                    return Err("reward coefficients must be finite and >= 0 (the signs are fixed: throughput is a gain, latency and loss costs)".into());
                }
                if *throughput == 0.0 && *latency == 0.0 && *loss == 0.0 {
                    return Err("reward coefficients are all zero: nothing to optimize".into());
                }
                if !(0.0..=100.0).contains(latency_percentile) {
                    return Err(format!("latency_percentile {latency_percentile} is outside [0, 100]"));
                }
            }
            RewardFn::Surrogate { stat, coef, .. } => {
                if !coef.is_finite() || *coef == 0.0 {
                    return Err("a surrogate reward's coef must be finite and non-zero".into());
                }
                if let Stat::Percentile(p) = stat {
                    if !(0.0..=100.0).contains(p) {
                        return Err(format!("surrogate percentile {p} is outside [0, 100]"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// What one period of one group measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub reward: f64,
    pub throughput_mbps: f64,
    /// The configured latency percentile of per-second average RTT (75th by default).
    pub latency_ms: f64,
    /// Mean of the flow-seconds' loss fractions (0..1).
    pub loss_frac: f64,
    /// Flow-seconds that counted.
    pub samples: usize,
}

/// `p`-th percentile (0-100) by linear interpolation; `None` for no values.
pub fn percentile(values: &mut [f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let pos = (p / 100.0).clamp(0.0, 1.0) * (values.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(values[lo] + (values[hi] - values[lo]) * (pos - lo as f64))
}

/// The period's observation; `None` when no flow-second counted.
pub fn observe(f: &RewardFn, records: &[&StatsRecord]) -> Option<Observation> {
    let counted: Vec<&StatsRecord> = records
        .iter()
        .copied()
        .filter(|r| r.duration_s > 0.0 && r.app_limited_s < MAX_APP_LIMITED_FRACTION * r.duration_s)
        .collect();
    if counted.is_empty() {
        return None;
    }
    let n = counted.len() as f64;
    let throughput_mbps = counted.iter().map(|r| r.throughput_bytes_per_sec * 8.0 / 1e6).sum::<f64>() / n;
    let loss_pct = counted.iter().map(|r| r.loss_frac * 100.0).sum::<f64>() / n;
    let percentile_of = match f {
        RewardFn::Linear { latency_percentile, .. } => *latency_percentile,
        RewardFn::Surrogate { .. } => 75.0,
    };
    let mut rtts: Vec<f64> = counted.iter().filter_map(|r| r.rtt_avg_us).map(|us| us / 1e3).collect();
    let latency_ms = percentile(&mut rtts, percentile_of).unwrap_or(0.0);
    let reward = match f {
        RewardFn::Linear { throughput, latency, loss, .. } => {
            throughput * throughput_mbps - latency * latency_ms - loss * loss_pct
        }
        RewardFn::Surrogate { field, stat, coef } => {
            let mut v: Vec<f64> = counted.iter().filter_map(|r| field.of(r)).collect();
            let s = match stat {
                Stat::Mean if !v.is_empty() => v.iter().sum::<f64>() / v.len() as f64,
                Stat::Mean => return None,
                Stat::Percentile(p) => percentile(&mut v, *p)?,
            };
            coef * s
        }
    };
    Some(Observation { reward, throughput_mbps, latency_ms, loss_frac: loss_pct / 100.0, samples: counted.len() })
}

#[cfg(test)]
pub(crate) fn record(mbps: f64, rtt_ms: f64, loss: f64) -> StatsRecord {
    use polycc_control::stats::FlowMeta;
    StatsRecord {
        seq: 0,
        t_unix_s: 0.0,
        duration_s: 1.0,
        meta: FlowMeta {
            datapath: "sim".into(),
            flow: 1,
            src: "10.0.0.1:40000".into(),
            dst: "10.1.0.1:443".into(),
            cong_alg: "ccp".into(),
            rule: None,
            policy: "vivace".into(),
        },
        throughput_bytes_per_sec: mbps * 1e6 / 8.0,
        send_rate_min_bytes_per_sec: Some(mbps * 1e6 / 8.0),
        send_rate_avg_bytes_per_sec: Some(mbps * 1.1e6 / 8.0),
        send_rate_max_bytes_per_sec: Some(mbps * 1.2e6 / 8.0),
        loss_frac: loss,
        rtt_min_us: Some(rtt_ms * 800.0),
        rtt_avg_us: Some(rtt_ms * 1000.0),
        slow_start_s: 0.0,
        app_limited_s: 0.0,
        ..StatsRecord::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_reward_is_in_mbps_ms_and_percent() {
        let rs =
            [record(10.0, 50.0, 0.01), record(20.0, 100.0, 0.03), record(30.0, 60.0, 0.02), record(40.0, 70.0, 0.0)];
        let refs: Vec<&StatsRecord> = rs.iter().collect();
        let f = RewardFn::Linear { throughput: 1.0, latency: 0.1, loss: 2.0, latency_percentile: 75.0 };
        let o = observe(&f, &refs).unwrap();
        assert!((o.throughput_mbps - 25.0).abs() < 1e-9);
        assert!((o.loss_frac - 0.015).abs() < 1e-9);
        // RTTs sorted 50 60 70 100: the 75th percentile sits at 2.25 -> 70 + 0.25 x 30.
        assert!((o.latency_ms - 77.5).abs() < 1e-9, "{}", o.latency_ms);
        assert!((o.reward - (25.0 - 7.75 - 3.0)).abs() < 1e-9, "{}", o.reward);
    }

    #[test]
    fn app_limited_seconds_do_not_count_and_none_left_is_no_observation() {
        let mut idle = record(1.0, 10.0, 0.0);
        idle.app_limited_s = 0.9;
        let busy = record(9.0, 10.0, 0.0);
        let o = observe(&RewardFn::default(), &[&idle, &busy]).unwrap();
        assert_eq!((o.samples, o.throughput_mbps), (1, 9.0));
        assert!(observe(&RewardFn::default(), &[&idle]).is_none());
    }

    #[test]
    fn surrogate_uses_the_named_field() {
        let rs = [record(10.0, 50.0, 0.0), record(20.0, 50.0, 0.0)];
        let f = RewardFn::Surrogate { field: Field::SendRateAvgBytesPerSec, stat: Stat::Mean, coef: 8e-6 };
        let o = observe(&f, &rs.iter().collect::<Vec<_>>()).unwrap();
        assert!((o.reward - 16.5).abs() < 1e-9, "mean send rate 16.5 Mbit/s: {}", o.reward);
    }

    #[test]
    fn reward_checks_refuse_meaningless_coefficients() {
        let f = RewardFn::Linear { throughput: 1.0, latency: -0.1, loss: 0.0, latency_percentile: 75.0 };
        assert!(f.check().unwrap_err().contains(">= 0"));
        let f = RewardFn::Linear { throughput: 0.0, latency: 0.0, loss: 0.0, latency_percentile: 75.0 };
        assert!(f.check().unwrap_err().contains("all zero"));
    }
}
