//! MOCC's simulator targets (issue 6, section 7), measured with `polycc-sim` on links drawn from
//! the training envelope. Used by the `mocc-targets` binary (the table) and by the tests.
//!
//! Every run uses the environment's report cadence ([`crate::REPORT_INTERVAL`]) and the
//! training rule for the initial rate (U(0.3, 1.5) x bandwidth, [`crate::LinkRange::sample`]),
//! so the model is served as it was trained. Measurements are over the whole run:
//! `O_thr` = utilization, `O_lat` = base RTT / mean RTT, `O_loss` = 1 - loss rate; the reward of
//! eq. 2 is `w . O`.

use crate::{LinkParams, LinkRange, MSS_BYTES, REPORT_INTERVAL};
use polycc_algorithms::mocc::{MoccConfig, ModelSlot, Preference};
use polycc_algorithms::{AlgorithmConfig, AlgorithmKind, Policy};
use polycc_sim::config::ReportInterval;
use polycc_sim::{FlowConfig, SimConfig, Summary};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// What a run of one policy on one link measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Objectives {
    pub utilization: f64,
    pub mean_rtt_s: f64,
    pub base_rtt_s: f64,
    pub loss: f64,
    pub jain: f64,
}

impl Objectives {
    pub fn o_thr(&self) -> f64 {
        self.utilization.clamp(0.0, 1.0)
    }
    pub fn o_lat(&self) -> f64 {
        if self.mean_rtt_s > 0.0 {
            (self.base_rtt_s / self.mean_rtt_s).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
    pub fn o_loss(&self) -> f64 {
        (1.0 - self.loss).clamp(0.0, 1.0)
    }
    /// MOCC eq. 2.
    pub fn reward(&self, w: &Preference) -> f64 {
        w.reward(self.o_thr(), self.o_lat(), self.o_loss())
    }
}

/// `n` envelope links, reproducible from `seed`.
pub fn envelope_links(n: usize, seed: u64) -> Vec<LinkParams> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| LinkRange::Envelope.sample(&mut rng)).collect()
}

/// A run long enough for `mis` MIs of half the link's base RTT, at least 30 s.
pub fn duration_for(link: &LinkParams, mis: u32) -> Duration {
    (link.base_rtt() / 2 * mis).max(Duration::from_secs(30))
}

/// MOCC with preference `w` and the model in `slot`, starting at the link's initial rate.
pub fn mocc_policy(w: &Preference, slot: &ModelSlot, link: &LinkParams) -> Policy {
    Policy::Single(AlgorithmConfig::Mocc(MoccConfig {
        weights: w.weights().to_vec(),
        model: None,
        initial_rate_mbps: link.initial_rate.map(|r| r.mbps()),
        slot: Some(slot.clone()),
        ..MoccConfig::default()
    }))
}

/// Run `flows` flows of `policy` on `link` for `duration`.
pub fn run(link: &LinkParams, policy: &Policy, flows: usize, duration: Duration, seed: u64) -> Objectives {
    let cfg = SimConfig {
        link: link.link_config(),
        flows: (0..flows).map(|_| FlowConfig { start: Duration::ZERO, policy: policy.clone() }).collect(),
        duration,
        report_interval: ReportInterval::Fixed(REPORT_INTERVAL),
        mss_bytes: MSS_BYTES,
        seed,
        record_series: false,
        pacing_efficiency: link.pacing_efficiency,
    };
    objectives(&polycc_sim::run(&cfg).summary)
}

fn objectives(s: &Summary) -> Objectives {
    Objectives {
        utilization: s.utilization,
        mean_rtt_s: s.mean_rtt_ms.unwrap_or(f64::INFINITY) / 1e3,
        base_rtt_s: s.base_rtt_ms / 1e3,
        loss: s.loss_frac,
        jain: s.jain_index,
    }
}

/// The classic algorithms the reward comparison runs.
pub fn classic() -> Vec<(&'static str, Policy)> {
    AlgorithmKind::classic().map(|k| (k.name(), Policy::Single(k.default_config()))).collect()
}

/// The 36 landmark objectives: components in {0.1, ..., 0.9} summing to 1.
pub fn landmarks() -> Vec<Preference> {
    let mut v = Vec::new();
    for a in 1..=8 {
        for b in 1..=(9 - a) {
            let c = 10 - a - b;
            if c >= 1 {
                let w = [a as f64 / 10.0, b as f64 / 10.0, c as f64 / 10.0];
                v.push(Preference::new(&w).expect("landmarks lie in the simplex"));
            }
        }
    }
    v
}

/// `n` objectives drawn uniformly from the simplex, each component at least 0.01.
pub fn random_objectives(n: usize, seed: u64) -> Vec<Preference> {
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            // Uniform on the simplex: sorted uniforms' spacings, floored and renormalized.
            let (mut a, mut b): (f64, f64) = (rng.gen(), rng.gen());
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            let raw = [a, b - a, 1.0 - b].map(|x| x.max(0.01));
            let s: f64 = raw.iter().sum();
            let mut w = raw.map(|x| x / s);
            w[2] = 1.0 - w[0] - w[1];
            Preference::new(&w).expect("inside the simplex")
        })
        .collect()
}

/// Spearman's rank correlation (ties get their mean rank).
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*a].total_cmp(&v[*b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            for k in i..=j {
                r[idx[k]] = (i + j) as f64 / 2.0;
            }
            i = j + 1;
        }
        r
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
    if vx <= 0.0 || vy <= 0.0 {
        0.0
    } else {
        cov / (vx * vy).sqrt()
    }
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_36_landmarks_on_the_simplex_grid() {
        let l = landmarks();
        assert_eq!(l.len(), 36);
        assert!(l.iter().any(|w| w.weights() == [0.6, 0.3, 0.1]));
        let r = random_objectives(100, 1);
        assert!(r.iter().all(|w| w.weights().iter().all(|x| *x >= 0.009)));
    }

    #[test]
    fn spearman_is_one_for_monotone_and_minus_one_for_reversed() {
        let x = [1.0, 2.0, 3.0, 4.0];
        assert!((spearman(&x, &[10.0, 20.0, 25.0, 100.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&x, &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert!((median(&mut [3.0, 1.0, 2.0]) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_classic_algorithm_s_objectives_come_from_the_simulator() {
        let link = LinkParams {
            bandwidth: polycc_algorithms::Rate::from_mbps(4.8),
            one_way_delay: Duration::from_millis(50),
            queue_packets: 40,
            loss: 0.0,
            initial_rate: Some(polycc_algorithms::Rate::from_mbps(2.4)),
            bandwidth_change: None,
            competitor_start: None,
            rtt_dev: Duration::ZERO,
            pacing_efficiency: polycc_sim::config::PACING_EXACT,
        };
        let cubic = Policy::Single(AlgorithmKind::Cubic.default_config());
        let o = run(&link, &cubic, 1, Duration::from_secs(30), 1);
        assert!(o.utilization > 0.8, "{o:?}");
        assert!(o.o_lat() < 1.0 && o.o_lat() > 0.3, "CUBIC fills the 40-packet queue: {o:?}");
        let w = Preference::new(&[0.8, 0.1, 0.1]).unwrap();
        assert!((o.reward(&w) - (0.8 * o.o_thr() + 0.1 * o.o_lat() + 0.1 * o.o_loss())).abs() < 1e-12);
    }
}
