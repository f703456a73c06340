//! The contextual continuum-armed bandit of "Unleashing Automated Congestion Control
//! Customization" (section 4.2-4.3; `../shared/reference/algorithms.md` section 7), per context,
//! in the normalized coordinates of [`crate::params::Space`]:
//!
//! ```text
//!   x_k ~ uniform on the unit sphere over the tuned coordinates (k = 1..m)
//!   play theta + phi x_k and theta - phi x_k, observe r+_k, r-_k       (2m periods)
//!   g   = d / (2 phi) * mean_k (r+_k - r-_k) x_k / s_r                  (unbiased for the
//!             smoothed reward's gradient, in units of s_r, the rewards' mean absolute deviation)
//!   v   = mu v + (1 - mu) g                                             (momentum)
//!   theta += eta v, the step's norm capped at max_step, theta kept in [0, 1]^n
//! ```
//!
//! Tuned coordinates: the `tuned_count` candidates whose reward moves most when each is probed
//! alone (`theta +/- phi_screen e_i`, others fixed), re-evaluated every `reselect_every` steps.
//!
//! Safety: once `warmup` periods have been seen since the last start, an observation with loss
//! over `max(max_loss_pct, loss_ratio x average)`, latency over `latency_ratio x average`, or
//! `below_average_periods` rewards in a row under `average - margin |average|` reverts theta to
//! the safe configuration, which becomes the new starting point (momentum and averages reset).
//!
//! Differences from the paper: the one-point estimate `r x` is taken in antithetic pairs
//! (`x`, `-x`), which is the same estimator with the pair's other reward as its baseline and
//! far less variance at equal cost; rewards are standardized (divided by the context's running
//! mean absolute deviation of rewards) so `eta` depends neither on the reward's units nor on its
//! level (dividing by the average |reward| instead made a reward whose terms cancel step
//! wildly and a large negative one, e.g. a pacifist's, barely move).
//!
//! Everything here is pure: randomness comes from a generator seeded by (seed, context, step),
//! so a run is a function of its inputs and a restart from saved state replays nothing.

use crate::reward::Observation;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Entries of history kept per context (the state file stays bounded).
pub const MAX_HISTORY: usize = 2000;
/// Smallest reward scale the gradient is divided by (avoids dividing by a zero average).
pub const MIN_REWARD_SCALE: f64 = 1e-3;
/// The gradient's scale is at least this fraction of the average |reward|: on a reward with
/// no noise, the rewards' deviation shrinks to nothing near the peak, and steps would not.
pub const DEV_FLOOR: f64 = 0.3;

/// The algorithm's knobs (the `[bandit]` table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BanditConfig {
    /// Probe radius in normalized units.
    pub phi: f64,
    /// Step size, normalized units per unit of relative reward gradient.
    pub eta: f64,
    /// Momentum mu: weight of the previous gradient average.
    pub momentum: f64,
    /// Antithetic sample pairs averaged per step (2 periods each).
    pub samples_per_step: usize,
    /// Coordinates tuned at once (the paper: 3-4).
    pub tuned_count: usize,
    /// Probe radius of the screening that picks them.
    pub screen_phi: f64,
    /// Steps between screenings (0: screen once).
    pub reselect_every: u64,
    /// Largest step norm, normalized units.
    pub max_step: f64,
    pub seed: u64,
}

impl Default for BanditConfig {
    fn default() -> Self {
        BanditConfig {
            phi: 0.1,
            eta: 0.2,
            momentum: 0.5,
            samples_per_step: 2,
            tuned_count: 3,
            screen_phi: 0.2,
            reselect_every: 50,
            max_step: 0.15,
            seed: 1,
        }
    }
}

impl BanditConfig {
    pub fn check(&self) -> Result<(), String> {
        let in_unit = |v: f64| v.is_finite() && v > 0.0 && v <= 1.0;
        if !in_unit(self.phi) || !in_unit(self.screen_phi) || !in_unit(self.max_step) {
            return Err("bandit.phi, screen_phi and max_step must be in (0, 1] (normalized units)".into());
        }
        if !(self.eta.is_finite() && self.eta > 0.0) {
            return Err("bandit.eta must be > 0".into());
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err("bandit.momentum must be in [0, 1)".into());
        }
        if self.samples_per_step == 0 || self.tuned_count == 0 {
            return Err("bandit.samples_per_step and tuned_count must be at least 1".into());
        }
        Ok(())
    }
}

/// The safety rule's thresholds (the `[safety]` table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SafetyConfig {
    pub enabled: bool,
    /// Periods observed since the last (re)start before the rule judges.
    pub warmup: u64,
    /// Consecutive rewards under the average (less the margin) that revert.
    pub below_average_periods: usize,
    /// Fraction of |average reward| a reward must fall short by to count as below.
    pub margin: f64,
    /// Loss (percent) that always reverts.
    pub max_loss_pct: f64,
    /// Loss over this multiple of the context's average reverts (with max_loss_pct as floor).
    pub loss_ratio: f64,
    /// Latency over this multiple of the context's average reverts.
    pub latency_ratio: f64,
    /// Weight of a new period in the context's averages.
    pub average_weight: f64,
}

impl Default for SafetyConfig {
    fn default() -> Self {
        SafetyConfig {
            enabled: true,
            warmup: 8,
            below_average_periods: 3,
            margin: 0.15,
            max_loss_pct: 10.0,
            loss_ratio: 3.0,
            latency_ratio: 1.5,
            average_weight: 0.1,
        }
    }
}

impl SafetyConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.below_average_periods == 0 {
            return Err("safety.below_average_periods must be at least 1".into());
        }
        if !(self.margin.is_finite() && self.margin >= 0.0 && self.max_loss_pct > 0.0 && self.max_loss_pct <= 100.0) {
            return Err("safety.margin must be >= 0 and safety.max_loss_pct in (0, 100]".into());
        }
        if !(self.loss_ratio > 1.0 && self.latency_ratio > 1.0) {
            return Err("safety.loss_ratio and latency_ratio must be > 1 (multiples of the average)".into());
        }
        if !(self.average_weight > 0.0 && self.average_weight <= 1.0) {
            return Err("safety.average_weight must be in (0, 1]".into());
        }
        Ok(())
    }
}

/// What a context is doing: screening coordinates or sampling a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Probing candidate `i` alone: plays `theta + s e_i` then `theta - s e_i`;
    /// `deltas[i] = r+ - r-` once both are in.
    Screening { next: usize, plus: Option<f64>, deltas: Vec<f64> },
    /// Playing `theta +/- phi x_k` for each direction in turn (`plays` = rewards so far,
    /// in the order +x_1, -x_1, +x_2, ...).
    Sampling { directions: Vec<Vec<f64>>, rewards: Vec<f64> },
}

/// Why a period's entry in the history is notable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    Step { norm: f64 },
    Screened { tuned: Vec<usize> },
    SafetyRevert { reason: String },
}

/// One period of one context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub period: u64,
    pub played: Vec<f64>,
    pub obs: Observation,
    pub events: Vec<Event>,
}

/// Running averages the safety rule compares against.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Averages {
    pub reward: f64,
    pub abs_reward: f64,
    /// Mean absolute deviation of the rewards from their average: the scale the gradient is
    /// measured in (0 until a second period is seen).
    #[serde(default)]
    pub reward_dev: f64,
    pub latency_ms: f64,
    /// Loss as a fraction (0..1), like [`Observation::loss_frac`].
    pub loss_frac: f64,
}

/// One context's learning state (persisted as is).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextState {
    pub theta: Vec<f64>,
    pub velocity: Vec<f64>,
    /// Indices (into the space's candidates) being tuned.
    pub tuned: Vec<usize>,
    pub phase: Phase,
    pub steps: u64,
    pub screenings: u64,
    /// The step count at the last screening.
    pub screened_at: Option<u64>,
    /// Periods observed since the last start (or safety revert).
    pub since_start: u64,
    pub below_run: usize,
    pub averages: Option<Averages>,
    pub reverts: u64,
    pub history: VecDeque<HistoryEntry>,
}

fn mix(mut z: u64) -> u64 {
    // splitmix64's finalizer: decorrelates nearby seeds.
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stable 64-bit hash of a context name (FNV-1a), for seeding.
pub fn name_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// A point uniform on the unit sphere in `d` dimensions (normalized Gaussian).
pub fn unit_sphere(rng: &mut impl Rng, d: usize) -> Vec<f64> {
    loop {
        let v: Vec<f64> = (0..d)
            .map(|_| {
                // Box-Muller: rand 0.8 has no normal distribution without rand_distr.
                let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
                (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            })
            .collect();
        let n = norm(&v);
        if n > 1e-9 {
            return v.into_iter().map(|x| x / n).collect();
        }
    }
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The whole algorithm for one context: its configuration, the safe point, and its state.
pub struct Bandit<'a> {
    pub cfg: &'a BanditConfig,
    pub safety: &'a SafetyConfig,
    /// Normalized coordinates of the safe configuration.
    pub safe: &'a [f64],
    /// A stable identity of the context (group and context name), for seeding.
    pub key: u64,
}

impl Bandit<'_> {
    /// A fresh context starting at `start`.
    pub fn start(&self, start: &[f64]) -> ContextState {
        let n = start.len();
        let mut s = ContextState {
            theta: start.to_vec(),
            velocity: vec![0.0; n],
            tuned: (0..n).collect(),
            phase: Phase::Sampling { directions: Vec::new(), rewards: Vec::new() },
            steps: 0,
            screenings: 0,
            screened_at: None,
            since_start: 0,
            below_run: 0,
            averages: None,
            reverts: 0,
            history: VecDeque::new(),
        };
        self.begin_cycle(&mut s);
        s
    }

    fn rng(&self, s: &ContextState, salt: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(mix(self.cfg.seed ^ mix(self.key ^ mix(s.steps ^ (s.reverts << 32) ^ salt))))
    }

    /// Screen when due (and when there is a choice to make), else sample a new step.
    fn begin_cycle(&self, s: &mut ContextState) {
        let n = s.theta.len();
        let due = match s.screened_at {
            None => true,
            Some(at) => self.cfg.reselect_every > 0 && s.steps >= at + self.cfg.reselect_every,
        };
        if n > self.cfg.tuned_count && due && !matches!(s.phase, Phase::Screening { .. }) {
            s.phase = Phase::Screening { next: 0, plus: None, deltas: Vec::new() };
            return;
        }
        let mut rng = self.rng(s, 0xD1);
        let d = s.tuned.len();
        let directions = (0..self.cfg.samples_per_step)
            .map(|_| {
                let x = unit_sphere(&mut rng, d);
                let mut full = vec![0.0; n];
                for (i, xi) in s.tuned.iter().zip(x) {
                    full[*i] = xi;
                }
                full
            })
            .collect();
        s.phase = Phase::Sampling { directions, rewards: Vec::new() };
    }

    /// The normalized point to play next period.
    pub fn next_play(&self, s: &ContextState) -> Vec<f64> {
        let (dir, scale): (Vec<f64>, f64) = match &s.phase {
            Phase::Screening { next, plus, .. } => {
                let mut e = vec![0.0; s.theta.len()];
                e[*next] = 1.0;
                (e, if plus.is_none() { self.cfg.screen_phi } else { -self.cfg.screen_phi })
            }
            Phase::Sampling { directions, rewards } => {
                let k = rewards.len();
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                (directions[(k / 2).min(directions.len() - 1)].clone(), sign * self.cfg.phi)
            }
        };
        s.theta.iter().zip(dir).map(|(t, x)| (t + scale * x).clamp(0.0, 1.0)).collect()
    }

    /// Record what the point returned by [`Bandit::next_play`] earned; `None`: the period had no
    /// usable data (the same point is played again).
    pub fn observe(&self, s: &mut ContextState, period: u64, obs: Option<Observation>) -> Vec<Event> {
        let Some(obs) = obs else { return Vec::new() };
        let played = self.next_play(s);
        let mut events = Vec::new();
        if let Some(reason) = self.safety_verdict(s, &obs) {
            s.theta = self.safe.to_vec();
            s.velocity.iter_mut().for_each(|v| *v = 0.0);
            s.since_start = 0;
            s.below_run = 0;
            s.averages = None;
            s.reverts += 1;
            // Keep the tuned coordinates: the screening's verdict is about the parameters, not
            // about the point it was made at.
            s.phase = Phase::Sampling { directions: Vec::new(), rewards: Vec::new() };
            self.begin_cycle(s);
            events.push(Event::SafetyRevert { reason });
        } else {
            self.update_averages(s, &obs);
            if let Some(e) = self.advance(s, obs.reward) {
                events.push(e);
            }
        }
        s.history.push_back(HistoryEntry { period, played, obs, events: events.clone() });
        while s.history.len() > MAX_HISTORY {
            s.history.pop_front();
        }
        events
    }

    fn update_averages(&self, s: &mut ContextState, o: &Observation) {
        s.since_start += 1;
        let w = self.safety.average_weight;
        s.averages = Some(match s.averages {
            None => Averages {
                reward: o.reward,
                abs_reward: o.reward.abs(),
                reward_dev: 0.0,
                latency_ms: o.latency_ms,
                loss_frac: o.loss_frac,
            },
            Some(a) => Averages {
                reward: a.reward + w * (o.reward - a.reward),
                abs_reward: a.abs_reward + w * (o.reward.abs() - a.abs_reward),
                reward_dev: a.reward_dev + w * ((o.reward - a.reward).abs() - a.reward_dev),
                latency_ms: a.latency_ms + w * (o.latency_ms - a.latency_ms),
                loss_frac: a.loss_frac + w * (o.loss_frac - a.loss_frac),
            },
        });
    }

    /// Why this observation should revert to the safe configuration, if it should.
    fn safety_verdict(&self, s: &mut ContextState, o: &Observation) -> Option<String> {
        let (cfg, a) = (self.safety, s.averages?);
        if !cfg.enabled || s.since_start < cfg.warmup {
            return None;
        }
        // The configuration's limit is a percentage (a person writes it); the averages are fractions.
        let loss_limit_pct = cfg.max_loss_pct.max(cfg.loss_ratio * a.loss_frac * 100.0);
        if o.loss_frac * 100.0 > loss_limit_pct {
            return Some(format!("loss {:.2} % over {:.2} %", o.loss_frac * 100.0, loss_limit_pct));
        }
        if a.latency_ms > 0.0 && o.latency_ms > cfg.latency_ratio * a.latency_ms {
            return Some(format!(
                "latency {:.1} ms over {} x the average {:.1} ms",
                o.latency_ms, cfg.latency_ratio, a.latency_ms
            ));
        }
        let floor = a.reward - cfg.margin * a.abs_reward;
        s.below_run = if o.reward < floor { s.below_run + 1 } else { 0 };
        (s.below_run >= cfg.below_average_periods)
            .then(|| format!("reward below {floor:.3} (average {:.3}) for {} periods", a.reward, s.below_run))
    }

    /// Move the phase on with the reward of the point just played.
    fn advance(&self, s: &mut ContextState, r: f64) -> Option<Event> {
        match &mut s.phase {
            Phase::Screening { next, plus, deltas } => {
                match plus.take() {
                    None => *plus = Some(r),
                    Some(p) => {
                        deltas.push(p - r);
                        *next += 1;
                    }
                }
                if *next < s.theta.len() {
                    return None;
                }
                let mut order: Vec<usize> = (0..deltas.len()).collect();
                order.sort_by(|a, b| deltas[*b].abs().total_cmp(&deltas[*a].abs()).then(a.cmp(b)));
                order.truncate(self.cfg.tuned_count);
                order.sort_unstable();
                s.tuned = order.clone();
                s.screenings += 1;
                s.screened_at = Some(s.steps);
                // Momentum on coordinates no longer tuned would keep moving them: drop it.
                for (i, v) in s.velocity.iter_mut().enumerate() {
                    if !s.tuned.contains(&i) {
                        *v = 0.0;
                    }
                }
                s.phase = Phase::Sampling { directions: Vec::new(), rewards: Vec::new() };
                self.begin_cycle(s);
                Some(Event::Screened { tuned: order })
            }
            Phase::Sampling { directions, rewards } => {
                rewards.push(r);
                if rewards.len() < 2 * directions.len() {
                    return None;
                }
                let d = s.tuned.len() as f64;
                // Rewards are standardized by how much they vary, not by their level: a reward
                // whose terms nearly cancel (average near 0) or one far from 0 (a pacifist's
                // large latency and loss costs) steps as fast for the same signal-to-noise, and
                // adding a constant to the reward changes nothing.
                let scale =
                    s.averages.map_or(0.0, |a| a.reward_dev.max(DEV_FLOOR * a.abs_reward)).max(MIN_REWARD_SCALE);
                let m = directions.len() as f64;
                let mut g = vec![0.0; s.theta.len()];
                for (k, x) in directions.iter().enumerate() {
                    let diff = (rewards[2 * k] - rewards[2 * k + 1]) / scale;
                    for (gi, xi) in g.iter_mut().zip(x) {
                        *gi += d / (2.0 * self.cfg.phi) * diff * xi / m;
                    }
                }
                let mu = self.cfg.momentum;
                for (v, gi) in s.velocity.iter_mut().zip(&g) {
                    *v = mu * *v + (1.0 - mu) * gi;
                }
                let mut step: Vec<f64> = s.velocity.iter().map(|v| self.cfg.eta * v).collect();
                let n = norm(&step);
                if n > self.cfg.max_step {
                    step.iter_mut().for_each(|x| *x *= self.cfg.max_step / n);
                }
                for (t, x) in s.theta.iter_mut().zip(&step) {
                    *t = (*t + x).clamp(0.0, 1.0);
                }
                s.steps += 1;
                self.begin_cycle(s);
                Some(Event::Step { norm: n.min(self.cfg.max_step) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(reward: f64) -> Option<Observation> {
        Some(Observation { reward, throughput_mbps: reward, latency_ms: 50.0, loss_frac: 0.01, samples: 10 })
    }

    /// Drive a context against a deterministic reward function of the played point.
    fn drive(b: &Bandit, s: &mut ContextState, periods: u64, f: impl Fn(&[f64]) -> f64) {
        for p in 0..periods {
            let y = b.next_play(s);
            b.observe(s, p, obs(f(&y)));
        }
    }

    #[test]
    fn unit_sphere_samples_have_norm_one_and_no_preferred_direction() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut mean = [0.0; 3];
        for _ in 0..20_000 {
            let x = unit_sphere(&mut rng, 3);
            assert!((norm(&x) - 1.0).abs() < 1e-12);
            mean.iter_mut().zip(&x).for_each(|(m, v)| *m += v / 20_000.0);
        }
        assert!(mean.iter().all(|m| m.abs() < 0.02), "{mean:?}");
    }

    #[test]
    fn climbs_a_concave_reward_to_its_peak() {
        let cfg = BanditConfig { tuned_count: 3, ..BanditConfig::default() };
        let safety = SafetyConfig { enabled: false, ..SafetyConfig::default() };
        let safe = [0.5; 3];
        let b = Bandit { cfg: &cfg, safety: &safety, safe: &safe, key: 7 };
        let peak = [0.8, 0.2, 0.6];
        let f = |y: &[f64]| 10.0 - 5.0 * y.iter().zip(peak).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
        let mut s = b.start(&[0.5; 3]);
        let dist = |t: &[f64]| t.iter().zip(peak).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
        let d0 = dist(&s.theta);
        drive(&b, &mut s, 100, f);
        assert!(dist(&s.theta) < 0.25 * d0, "from {d0:.3} to {:.3}: {:?}", dist(&s.theta), s.theta);
    }

    #[test]
    fn screening_picks_the_coordinates_the_reward_depends_on() {
        let cfg = BanditConfig { tuned_count: 2, ..BanditConfig::default() };
        let safety = SafetyConfig::default();
        let safe = [0.5; 5];
        let b = Bandit { cfg: &cfg, safety: &safety, safe: &safe, key: 1 };
        let mut s = b.start(&[0.5; 5]);
        assert!(matches!(s.phase, Phase::Screening { .. }));
        // Reward depends on coordinates 1 and 4 only.
        drive(&b, &mut s, 10, |y| 10.0 + 3.0 * y[1] - 2.0 * y[4] + 0.01 * y[0]);
        assert_eq!(s.tuned, vec![1, 4]);
        assert!(matches!(s.phase, Phase::Sampling { .. }));
        // Only tuned coordinates move.
        drive(&b, &mut s, 60, |y| 10.0 + 3.0 * y[1] - 2.0 * y[4]);
        assert_eq!((s.theta[0], s.theta[2], s.theta[3]), (0.5, 0.5, 0.5));
        assert!(s.theta[1] > 0.75 && s.theta[4] < 0.3, "{:?}", s.theta);
    }

    #[test]
    fn same_seed_same_trajectory_other_seed_other_directions() {
        let cfg = BanditConfig::default();
        let safety = SafetyConfig::default();
        let safe = [0.5; 3];
        let run = |seed: u64| {
            let cfg = BanditConfig { seed, ..cfg.clone() };
            let b = Bandit { cfg: &cfg, safety: &safety, safe: &safe, key: 1 };
            let mut s = b.start(&[0.5; 3]);
            drive(&b, &mut s, 20, |y| y[0] - y[1]);
            s.theta
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn high_loss_reverts_to_the_safe_point_after_warmup_only() {
        let cfg = BanditConfig::default();
        let safety = SafetyConfig { warmup: 4, ..SafetyConfig::default() };
        let safe = [0.1, 0.1, 0.1];
        let b = Bandit { cfg: &cfg, safety: &safety, safe: &safe, key: 1 };
        let mut s = b.start(&[0.9, 0.9, 0.9]);
        let lossy = Observation { reward: 5.0, throughput_mbps: 5.0, latency_ms: 50.0, loss_frac: 0.3, samples: 10 };
        for p in 0..3 {
            b.observe(&mut s, p, obs(10.0));
        }
        let early = b.observe(&mut s, 3, Some(lossy));
        assert!(
            !early.iter().any(|e| matches!(e, Event::SafetyRevert { .. })),
            "3 periods seen, warmup 4: no verdict yet"
        );
        b.observe(&mut s, 4, obs(10.0));
        let ev = b.observe(&mut s, 5, Some(lossy));
        assert!(matches!(&ev[..], [Event::SafetyRevert { reason }] if reason.contains("loss")), "{ev:?}");
        assert_eq!(s.theta, safe.to_vec());
        assert_eq!((s.since_start, s.averages, s.reverts), (0, None, 1));
    }

    #[test]
    fn rewards_below_average_for_a_run_revert_but_one_bad_period_does_not() {
        let cfg = BanditConfig::default();
        let safety = SafetyConfig { warmup: 3, below_average_periods: 3, ..SafetyConfig::default() };
        let safe = [0.0; 3];
        let b = Bandit { cfg: &cfg, safety: &safety, safe: &safe, key: 1 };
        let mut s = b.start(&[0.5; 3]);
        let rewards = [10.0, 10.0, 10.0, 10.0, 6.0, 10.0, 6.0, 6.0];
        for (p, r) in rewards.iter().enumerate() {
            assert!(b.observe(&mut s, p as u64, obs(*r)).iter().all(|e| !matches!(e, Event::SafetyRevert { .. })));
        }
        let ev = b.observe(&mut s, 8, obs(6.0));
        assert!(matches!(&ev[..], [Event::SafetyRevert { reason }] if reason.contains("for 3 periods")), "{ev:?}");
    }

    #[test]
    fn a_period_without_data_replays_the_same_point() {
        let cfg = BanditConfig::default();
        let safety = SafetyConfig::default();
        let safe = [0.5; 3];
        let b = Bandit { cfg: &cfg, safety: &safety, safe: &safe, key: 1 };
        let mut s = b.start(&[0.5; 3]);
        let before = b.next_play(&s);
        b.observe(&mut s, 0, None);
        assert_eq!(b.next_play(&s), before);
        assert!(s.history.is_empty());
    }
}
