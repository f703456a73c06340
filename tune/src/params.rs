//! The tuned parameter space: which Vivace parameters the bandit may move, their bounds, and the
//! normalized coordinates the algorithm works in.
//!
//! Every tunable parameter maps to `u in [0, 1]` (linear, or logarithmic for parameters spanning
//! decades); the bandit's `theta`, its probes `theta + phi x` and its steps all live in that unit
//! cube, so one `phi` and one `eta` fit every parameter. [`Space::project`] turns a point into a
//! [`VivaceConfig`] inside Vivace's constrained space: coordinates are clamped into the cube,
//! then the coupled constraint (beta >= alpha delta / [`MAX_LOSS_TOLERANCE`]) is enforced by
//! raising beta, and [`VivaceConfig::validate`] must pass.

use polycc_algorithms::vivace::{VivaceConfig, MAX_LOSS_TOLERANCE};
use polycc_algorithms::Algorithm;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A Vivace parameter the tuner may move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Param {
    Alpha,
    Beta,
    Gamma,
    Delta,
    Omega,
    SlowStartExitLatency,
    SlowStartExitLoss,
    LatencyFilter,
    LossFilter,
}

/// How a parameter maps to its normalized coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    Linear,
    /// `u = ln(v / min) / ln(max / min)`: equal steps are equal ratios (min must be > 0).
    Log,
}

impl Param {
    pub const ALL: [Param; 9] = [
        Param::Alpha,
        Param::Beta,
        Param::Gamma,
        Param::Delta,
        Param::Omega,
        Param::SlowStartExitLatency,
        Param::SlowStartExitLoss,
        Param::LatencyFilter,
        Param::LossFilter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Param::Alpha => "alpha",
            Param::Beta => "beta",
            Param::Gamma => "gamma",
            Param::Delta => "delta",
            Param::Omega => "omega",
            Param::SlowStartExitLatency => "slow_start_exit_latency",
            Param::SlowStartExitLoss => "slow_start_exit_loss",
            Param::LatencyFilter => "latency_filter",
            Param::LossFilter => "loss_filter",
        }
    }

    /// The range [`VivaceConfig::validate`] permits (delta's open interval closed a little;
    /// beta's lower bound further depends on alpha and delta, see [`Space::project`]).
    pub fn permitted(self) -> (f64, f64) {
        match self {
            Param::Alpha => (0.1, 10.0),
            Param::Beta => (1.0, 1000.0),
            Param::Gamma => (0.0, 20_000.0),
            Param::Delta => (0.01, 0.99),
            Param::Omega => (0.001, 100.0),
            Param::SlowStartExitLatency => (0.05, 10.0),
            Param::SlowStartExitLoss => (0.005, 0.5),
            Param::LatencyFilter => (0.0, 0.5),
            Param::LossFilter => (0.0, 0.1),
        }
    }

    /// The bounds and scale used when the configuration names the parameter without bounds:
    /// ranges an operator would consider sane, inside [`Param::permitted`].
    pub fn default_bounds(self) -> Bounds {
        let (min, max, scale) = match self {
            Param::Alpha => (0.5, 2.0, Scale::Log),
            Param::Beta => (5.0, 100.0, Scale::Log),
            Param::Gamma => (100.0, 5000.0, Scale::Log),
            Param::Delta => (0.5, 0.95, Scale::Linear),
            Param::Omega => (0.5, 10.0, Scale::Log),
            Param::SlowStartExitLatency => (0.1, 2.0, Scale::Log),
            Param::SlowStartExitLoss => (0.02, 0.3, Scale::Log),
            Param::LatencyFilter => (0.0, 0.4, Scale::Linear),
            Param::LossFilter => (0.0, 0.05, Scale::Linear),
        };
        Bounds { min, max, scale }
    }

    pub fn get(self, c: &VivaceConfig) -> f64 {
        match self {
            Param::Alpha => c.alpha,
            Param::Beta => c.beta,
            Param::Gamma => c.gamma,
            Param::Delta => c.delta,
            Param::Omega => c.omega,
            Param::SlowStartExitLatency => c.slow_start_exit_latency,
            Param::SlowStartExitLoss => c.slow_start_exit_loss,
            Param::LatencyFilter => c.latency_filter,
            Param::LossFilter => c.loss_filter,
        }
    }

    pub fn set(self, c: &mut VivaceConfig, v: f64) {
        match self {
            Param::Alpha => c.alpha = v,
            Param::Beta => c.beta = v,
            Param::Gamma => c.gamma = v,
            Param::Delta => c.delta = v,
            Param::Omega => c.omega = v,
            Param::SlowStartExitLatency => c.slow_start_exit_latency = v,
            Param::SlowStartExitLoss => c.slow_start_exit_loss = v,
            Param::LatencyFilter => c.latency_filter = v,
            Param::LossFilter => c.loss_filter = v,
        }
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Param {
    type Err = String;
    fn from_str(s: &str) -> Result<Param, String> {
        Param::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            format!("unknown Vivace parameter `{s}`: expected one of {}", Param::ALL.map(Param::name).join(", "))
        })
    }
}

/// One parameter's range and scale.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bounds {
    pub min: f64,
    pub max: f64,
    pub scale: Scale,
}

/// Why a parameter's bounds cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BoundsError {
    #[error("{param}: min {min} is not below max {max}")]
    Empty { param: Param, min: f64, max: f64 },
    #[error("{param}: [{min}, {max}] leaves Vivace's permitted range [{lo}, {hi}]")]
    OutsidePermitted { param: Param, min: f64, max: f64, lo: f64, hi: f64 },
    #[error("{param}: a log scale needs min > 0 (got {min}); use scale = \"linear\" or raise min")]
    LogOfZero { param: Param, min: f64 },
    #[error("{param} = {value} is outside the bounds [{min}, {max}]")]
    SafeOutside { param: Param, value: f64, min: f64, max: f64 },
}

impl Bounds {
    pub fn check(&self, p: Param) -> Result<(), BoundsError> {
        let (lo, hi) = p.permitted();
        let (min, max) = (self.min, self.max);
        if !(min.is_finite() && max.is_finite() && min < max) {
            return Err(BoundsError::Empty { param: p, min, max });
        }
        if min < lo || max > hi {
            return Err(BoundsError::OutsidePermitted { param: p, min, max, lo, hi });
        }
        if self.scale == Scale::Log && min <= 0.0 {
            return Err(BoundsError::LogOfZero { param: p, min });
        }
        Ok(())
    }

    /// Normalized coordinate of `v` (clamped into [0, 1]).
    pub fn to_unit(&self, v: f64) -> f64 {
        let u = match self.scale {
            Scale::Linear => (v - self.min) / (self.max - self.min),
            Scale::Log => (v.max(self.min) / self.min).ln() / (self.max / self.min).ln(),
        };
        if u.is_finite() {
            u.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// The value at normalized coordinate `u` (clamped into [0, 1]).
    pub fn from_unit(&self, u: f64) -> f64 {
        let u = if u.is_finite() { u.clamp(0.0, 1.0) } else { 0.5 };
        let v = match self.scale {
            Scale::Linear => self.min + u * (self.max - self.min),
            Scale::Log => self.min * (self.max / self.min).powf(u),
        };
        v.clamp(self.min, self.max)
    }
}

/// The candidate parameters (in a fixed order: coordinates of `theta`) over a base configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    /// Values of every parameter not tuned (and the production switches).
    pub base: VivaceConfig,
    pub params: Vec<(Param, Bounds)>,
}

impl Space {
    pub fn dims(&self) -> usize {
        self.params.len()
    }

    /// Normalized coordinates of a configuration.
    pub fn to_unit(&self, c: &VivaceConfig) -> Vec<f64> {
        self.params.iter().map(|(p, b)| b.to_unit(p.get(c))).collect()
    }

    /// The configuration at normalized point `u`, inside Vivace's constrained space.
    pub fn project(&self, u: &[f64]) -> VivaceConfig {
        let mut c = self.base.clone();
        for ((p, b), u) in self.params.iter().zip(u) {
            p.set(&mut c, b.from_unit(*u));
        }
        // The coupled constraint: a loss penalty high enough that loss stays below
        // MAX_LOSS_TOLERANCE (validate() refuses anything lower).
        let min_beta = (c.alpha * c.delta / MAX_LOSS_TOLERANCE).max(1.0);
        if c.beta < min_beta {
            c.beta = min_beta;
        }
        // Clamp every value not tuned too: a base from a configuration file passed validate(),
        // but be exact about the permitted ranges for the tuned ones.
        for (p, _) in &self.params {
            let (lo, hi) = p.permitted();
            let v = p.get(&c).clamp(lo, hi);
            p.set(&mut c, v);
        }
        debug_assert!(c.validate().is_ok(), "projected configuration outside Vivace's space: {c:?}");
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn space_all() -> Space {
        Space { base: VivaceConfig::default(), params: Param::ALL.iter().map(|p| (*p, p.default_bounds())).collect() }
    }

    #[test]
    fn log_scale_maps_ratios_to_equal_steps() {
        let b = Bounds { min: 1.0, max: 100.0, scale: Scale::Log };
        assert!((b.from_unit(0.5) - 10.0).abs() < 1e-9);
        assert!((b.to_unit(10.0) - 0.5).abs() < 1e-12);
        assert_eq!(b.from_unit(2.0), 100.0, "clamped into the cube");
        assert_eq!(b.to_unit(-3.0), 0.0);
    }

    #[test]
    fn every_default_bound_fits_vivace_and_the_default_config_is_inside_them_but_gamma() {
        for p in Param::ALL {
            p.default_bounds().check(p).unwrap();
        }
        let s = space_all();
        let u = s.to_unit(&VivaceConfig::default());
        let back = s.project(&u);
        assert!((back.beta - 11.35).abs() < 1e-9 && (back.delta - 0.9).abs() < 1e-9, "{back:?}");
    }

    #[test]
    fn impossible_bounds_are_refused_with_the_reason() {
        let e = Bounds { min: 5.0, max: 1.0, scale: Scale::Linear }.check(Param::Beta).unwrap_err();
        assert!(e.to_string().contains("not below max"), "{e}");
        let e = Bounds { min: 0.5, max: 2000.0, scale: Scale::Log }.check(Param::Beta).unwrap_err();
        assert!(e.to_string().contains("permitted range [1, 1000]"), "{e}");
        let e = Bounds { min: 0.0, max: 0.3, scale: Scale::Log }.check(Param::LatencyFilter).unwrap_err();
        assert!(matches!(e, BoundsError::LogOfZero { .. }), "{e}");
    }

    #[test]
    fn projection_raises_beta_to_the_coupled_minimum() {
        let s = Space {
            base: VivaceConfig::default(),
            params: vec![
                (Param::Alpha, Bounds { min: 0.5, max: 10.0, scale: Scale::Log }),
                (Param::Beta, Bounds { min: 1.0, max: 100.0, scale: Scale::Log }),
            ],
        };
        let c = s.project(&[1.0, 0.0]);
        assert_eq!(c.alpha, 10.0);
        assert!((c.beta - 10.0 * 0.9 / MAX_LOSS_TOLERANCE).abs() < 1e-9, "beta {}", c.beta);
        c.validate().unwrap();
    }

    proptest! {
        /// Any point, even far outside the cube or not finite, projects into the space validate() accepts.
        #[test]
        fn every_projection_passes_validate(u in proptest::collection::vec(prop_oneof![-5.0f64..5.0, Just(f64::NAN), Just(f64::INFINITY)], 9)) {
            let c = space_all().project(&u);
            prop_assert!(c.validate().is_ok(), "{:?}", c);
        }
    }
}
