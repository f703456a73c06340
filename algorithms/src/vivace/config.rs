//! Vivace's configuration: [`VivaceConfig`] (the knobs the automated customization tunes, with
//! their defaults from NSDI'18), its permitted space ([`VivaceConfig::validate`], modification 6)
//! and the per-flow factory ([`VivaceConfig::build`]), which clamps into that space.

use super::ascent::StepControl;
use super::brakes::{BrakeWindow, Hold};
use super::{Controller, Phase, Vivace};
use crate::pcc::{Engine, Sender};
use crate::config::{check_range, PolicyError};
use crate::rng::SplitMix64;
use crate::{Algorithm, FlowInfo, Rate};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Utility exponent delta (NSDI'18: 0.9).
pub const DEFAULT_DELTA: f64 = 0.9;
/// Loss coefficient beta (NSDI'18: 11.35, i.e. tolerate ~5 % random loss at 100 Mbit/s).
pub const DEFAULT_BETA: f64 = 11.35;
/// Latency-gradient coefficient gamma (NSDI'18: 900).
pub const DEFAULT_GAMMA: f64 = 900.0;
/// Gradient-to-rate step omega, Mbit/s of step per unit of du/dx (before the amplifier).
pub const DEFAULT_OMEGA: f64 = 2.0;
/// |dRTT/dT| below this is noise (NSDI'18), the default latency filter level.
pub const DEFAULT_LATENCY_FILTER: f64 = 0.01;
/// Slow start ends once an MI's RTT exceeds the min RTT by this fraction (the queue holds 1 BDP).
pub const DEFAULT_SLOW_START_EXIT_LATENCY: f64 = 1.0;
/// Slow start ends once an MI loses more than this.
pub const DEFAULT_SLOW_START_EXIT_LOSS: f64 = 0.10;
/// Smallest rate, Mbit/s.
pub const MIN_RATE_MBPS: f64 = 0.5;
/// Smallest window, packets.
pub const MIN_CWND_PACKETS: u64 = 4;
/// Modification 4: an MI needs this many packets to count (PCC: 10 packets per MI).
pub const MIN_MI_PACKETS: u64 = 10;
/// Constrained space: the random loss a 1 Mbit/s flow still climbs through, `alpha delta /
/// beta`, may not exceed this (beta's lower bound follows from alpha and delta).
pub const MAX_LOSS_TOLERANCE: f64 = 0.2;

/// Vivace's per-flow parameters: the knobs the automated customization tunes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VivaceConfig {
    /// Throughput weight alpha (default 1), permitted [0.1, 10].
    pub alpha: f64,
    /// Loss penalty beta (default 11.35), permitted [alpha delta / 0.2, 1000].
    pub beta: f64,
    /// Latency-gradient penalty gamma (default 900), permitted [0, 20000].
    pub gamma: f64,
    /// Throughput exponent delta (default 0.9), permitted (0, 1).
    pub delta: f64,
    /// Gradient step omega, Mbit/s per unit of du/dx (default 2), permitted (0, 100].
    pub omega: f64,
    /// Initial rate in Mbit/s; `None`: the initial window per RTT (default).
    pub initial_rate_mbps: Option<f64>,
    /// Slow start ends when RTT > (1 + this) x min RTT (default 1.0), permitted [0.05, 10].
    pub slow_start_exit_latency: f64,
    /// Slow start ends when an MI loses more than this (default 0.10), permitted [0.005, 0.5].
    pub slow_start_exit_loss: f64,
    /// Highest rate slow start may reach, Mbit/s; `None`: no cap (default).
    pub max_slow_start_rate_mbps: Option<f64>,
    /// |dRTT/dT| below this counts as 0 (default 0.01), permitted [0, 0.5].
    pub latency_filter: f64,
    /// Loss rates below this count as 0 (default 0), permitted [0, 0.1].
    pub loss_filter: f64,
    /// Modification 1: unified exploration and exploitation (default on).
    pub unified_exploration: bool,
    /// Modification 2: early rate decreases once an MI has many ACKs (default on).
    pub early_decrease: bool,
    /// Modification 3: emergency brakes (default on).
    pub emergency_brakes: bool,
    /// Modification 4: ignore too-small or app-limited MIs, prolong MIs at small BDP (default on).
    pub insufficient_acks: bool,
    /// Modification 5: outlier and persistence filters for RTT and loss (default on).
    pub noise_filters: bool,
    /// Seed for the probing order; the policy sets one per flow.
    #[serde(skip)]
    pub seed: u64,
}

impl Default for VivaceConfig {
    fn default() -> Self {
        VivaceConfig {
            alpha: 1.0,
            beta: DEFAULT_BETA,
            gamma: DEFAULT_GAMMA,
            delta: DEFAULT_DELTA,
            omega: DEFAULT_OMEGA,
            initial_rate_mbps: None,
            slow_start_exit_latency: DEFAULT_SLOW_START_EXIT_LATENCY,
            slow_start_exit_loss: DEFAULT_SLOW_START_EXIT_LOSS,
            max_slow_start_rate_mbps: None,
            latency_filter: DEFAULT_LATENCY_FILTER,
            loss_filter: 0.0,
            unified_exploration: true,
            early_decrease: true,
            emergency_brakes: true,
            insufficient_acks: true,
            noise_filters: true,
            seed: 0,
        }
    }
}

/// Upper bound on configured rates, Mbit/s (100 Gbit/s).
pub const MAX_CONFIGURED_RATE_MBPS: f64 = 100_000.0;

impl VivaceConfig {
    /// The base algorithm of NSDI'18: every production modification off.
    pub fn base() -> VivaceConfig {
        VivaceConfig {
            unified_exploration: false,
            early_decrease: false,
            emergency_brakes: false,
            insufficient_acks: false,
            noise_filters: false,
            ..VivaceConfig::default()
        }
    }

}

/// The configuration as built: clamped into the permitted space, `None` rates resolved.
#[derive(Clone, Copy, Debug)]
pub(super) struct Params {
    pub(super) alpha: f64,
    pub(super) beta: f64,
    pub(super) gamma: f64,
    pub(super) delta: f64,
    pub(super) omega: f64,
    pub(super) initial_rate_mbps: Option<f64>,
    pub(super) ss_exit_latency: f64,
    pub(super) ss_exit_loss: f64,
    pub(super) max_ss_rate_mbps: f64,
    pub(super) latency_filter: f64,
    pub(super) loss_filter: f64,
    pub(super) unified: bool,
    pub(super) early: bool,
    pub(super) brakes: bool,
    pub(super) insufficient_acks: bool,
    pub(super) noise_filters: bool,
}

impl Algorithm for VivaceConfig {
    type Controller = Vivace;
    const NAME: &'static str = "vivace";
    const SUMMARY: &'static str = "PCC Vivace: online gradient ascent on a latency- and loss-aware utility";

    /// A per-flow instance. Out-of-range parameters are clamped into the permitted space (the
    /// per-flow path cannot fail; boundaries call [`VivaceConfig::validate`]).
    fn build(&self, info: FlowInfo) -> Vivace {
        let d = VivaceConfig::default();
        let num = |v: f64, lo: f64, hi: f64, default: f64| if v.is_finite() { v.clamp(lo, hi) } else { default };
        let alpha = num(self.alpha, 0.1, 10.0, d.alpha);
        let delta = num(self.delta, 0.01, 0.99, d.delta);
        let rate =
            |v: Option<f64>| v.filter(|v| v.is_finite()).map(|v| v.clamp(MIN_RATE_MBPS, MAX_CONFIGURED_RATE_MBPS));
        let params = Params {
            alpha,
            beta: num(self.beta, (alpha * delta / MAX_LOSS_TOLERANCE).max(1.0), 1000.0, d.beta),
            gamma: num(self.gamma, 0.0, 20_000.0, d.gamma),
            delta,
            omega: num(self.omega, 1e-3, 100.0, d.omega),
            initial_rate_mbps: rate(self.initial_rate_mbps),
            ss_exit_latency: num(self.slow_start_exit_latency, 0.05, 10.0, d.slow_start_exit_latency),
            ss_exit_loss: num(self.slow_start_exit_loss, 0.005, 0.5, d.slow_start_exit_loss),
            max_ss_rate_mbps: rate(self.max_slow_start_rate_mbps).unwrap_or(f64::INFINITY),
            latency_filter: num(self.latency_filter, 0.0, 0.5, d.latency_filter),
            loss_filter: num(self.loss_filter, 0.0, 0.1, d.loss_filter),
            unified: self.unified_exploration,
            early: self.early_decrease,
            brakes: self.emergency_brakes,
            insufficient_acks: self.insufficient_acks,
            noise_filters: self.noise_filters,
        };
        let rate = params.initial_rate_mbps.map(Rate::from_mbps);
        let ctl = Controller {
            rng: SplitMix64(self.seed),
            phase: Phase::SlowStart { best: None, first: true, delivered: None, queued: false },
            steps: StepControl::default(),
            brake: BrakeWindow::default(),
            early_judged: None,
            loss_mean: None,
            congested_mbps: None,
            accelerating: false,
            ignored_from: None,
            hold: Hold::Free,
            ack_rates: VecDeque::new(),
            params,
        };
        Engine::new(Sender::new(info, MIN_CWND_PACKETS, rate, params.noise_filters), ctl)
    }

    /// Refuse parameters outside the permitted space, naming the allowed range.
    fn validate(&self) -> Result<(), PolicyError> {
        const A: &str = "vivace";
        check_range(A, "alpha", self.alpha, 0.1, 10.0, true)?;
        check_range(A, "delta", self.delta, 0.0, 1.0, false)?;
        let min_beta = (self.alpha * self.delta / MAX_LOSS_TOLERANCE).max(1.0);
        check_range(A, "beta", self.beta, min_beta, 1000.0, true)?;
        check_range(A, "gamma", self.gamma, 0.0, 20_000.0, true)?;
        if !(self.omega.is_finite() && self.omega > 0.0 && self.omega <= 100.0) {
            return Err(PolicyError::InvalidParameter {
                algorithm: A,
                reason: format!("omega = {} is outside (0, 100]", self.omega),
            });
        }
        for (name, v) in
            [("initial_rate_mbps", self.initial_rate_mbps), ("max_slow_start_rate_mbps", self.max_slow_start_rate_mbps)]
        {
            if let Some(v) = v {
                check_range(A, name, v, MIN_RATE_MBPS, MAX_CONFIGURED_RATE_MBPS, true)?;
            }
        }
        check_range(A, "slow_start_exit_latency", self.slow_start_exit_latency, 0.05, 10.0, true)?;
        check_range(A, "slow_start_exit_loss", self.slow_start_exit_loss, 0.005, 0.5, true)?;
        check_range(A, "latency_filter", self.latency_filter, 0.0, 0.5, true)?;
        check_range(A, "loss_filter", self.loss_filter, 0.0, 0.1, true)
    }

    fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }
}
