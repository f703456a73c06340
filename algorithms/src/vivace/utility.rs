//! Vivace's utility and what feeds it: the score of one MI
//!
//! ```text
//!   u(x) = alpha x^delta - beta x L - gamma x max(0, dRTT/dT)      x in Mbit/s, L loss rate
//! ```
//!
//! after the filters: loss and latency-gradient levels under which they count as zero, and with
//! `noise_filters` (modification 5) the running loss mean charged to an MI whose loss is within
//! its binomial noise or an isolated drop. Slow start judges loss and latency by its own exit
//! thresholds instead. A [`Sample`] is a scored MI; [`gradient`] is du/dx between two.

use super::{Controller, Phase};
use crate::pcc::MiResult;

/// Modification 5: losses charged by one report only count at or above this rate.
pub const SINGLE_REPORT_LOSS: f64 = 0.05;
/// Modification 5: an MI's loss within this many binomial standard deviations of the running
/// mean is charged the mean.
pub const LOSS_NOISE_SDS: f64 = 2.0;
/// Modification 5: the running loss mean weighs an MI by its packets over this many (an MI of
/// 2000 packets replaces it).
pub const LOSS_MEAN_PACKETS: f64 = 2000.0;
/// Unified steps climb on from the newest rate only while the running loss mean is below this:
/// a path that keeps losing more (a policer's rate) is approached from the measured midpoints.
pub const RAMP_MAX_LOSS_MEAN: f64 = 0.01;

/// One scored MI: its rate (Mbit/s) and utility.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Sample {
    pub(super) mbps: f64,
    pub(super) utility: f64,
    /// What the MI delivered, Mbit/s.
    pub(super) delivered_mbps: f64,
    /// No loss or latency penalty: the MI saw no congestion (only the running random loss).
    pub(super) clean: bool,
    /// It paid a loss or latency penalty (beyond the running loss mean).
    pub(super) penalised: bool,
}

/// du/dx between two samples; None when their rates are too close to tell.
pub(super) fn gradient(a: Sample, b: Sample) -> Option<f64> {
    let dx = b.mbps - a.mbps;
    (dx.abs() > 1e-9).then(|| (b.utility - a.utility) / dx).filter(|g| g.is_finite())
}

impl Controller {
    /// The loss rate the utility charges an MI: zero under the filter level; with the noise
    /// filters, the running mean when the MI's loss is within the binomial noise of it (a
    /// difference its sample size cannot show) or is an isolated drop (one report).
    pub(super) fn filtered_loss(&self, r: &MiResult) -> f64 {
        let p = &self.params;
        let loss = r.loss;
        if loss < p.loss_filter {
            return 0.0;
        }
        if !p.noise_filters {
            return loss;
        }
        let mean = self.loss_mean.unwrap_or(0.0);
        let within_noise = r.packets > 0.0 && {
            let sd = (mean.max(1.0 / r.packets) * (1.0 - mean) / r.packets).sqrt();
            (loss - mean).abs() <= LOSS_NOISE_SDS * sd
        };
        if within_noise || (r.loss_reports < 2 && loss < SINGLE_REPORT_LOSS) {
            mean
        } else {
            loss
        }
    }

    /// Fold a finished MI into the running loss mean (modification 5).
    pub(super) fn update_loss_mean(&mut self, r: &MiResult) {
        if r.packets <= 0.0 {
            return;
        }
        let w = (r.packets / LOSS_MEAN_PACKETS).min(1.0);
        let m = self.loss_mean.unwrap_or(0.0);
        self.loss_mean = Some(m + w * (r.loss - m));
    }

    /// The utility of an MI, after the filters.
    pub(super) fn utility(&self, r: &MiResult) -> f64 {
        let p = &self.params;
        let x = r.rate.mbps();
        let mut loss = self.filtered_loss(r);
        let mut g = r.rtt_gradient;
        if g.abs() < p.latency_filter {
            g = 0.0;
        }
        if matches!(self.phase, Phase::SlowStart { .. }) {
            // Slow start compares MIs a doubling apart on a few dozen packets each: random
            // loss below the exit threshold would end it by chance, and so would the RTT
            // jitter of a few ACKs (delayed ACKs and pacing bursts at a low rate: a gradient
            // of 0.3 on a 3 Mbit/s flow through ccp.ko). Its own thresholds judge loss and
            // latency: the RTT inflation over the min RTT, measured on the MI's mean.
            if loss <= p.ss_exit_loss {
                loss = 0.0;
            }
            g = 0.0;
        }
        let u = p.alpha * x.powf(p.delta) - p.beta * x * loss - p.gamma * x * g.max(0.0);
        if u.is_finite() {
            u
        } else {
            0.0
        }
    }

    pub(super) fn sample(&self, r: &MiResult) -> Sample {
        let p = &self.params;
        let no_latency_penalty = r.rtt_gradient < p.latency_filter.max(f64::MIN_POSITIVE);
        let no_loss_penalty = if p.noise_filters {
            self.filtered_loss(r) <= self.loss_mean.unwrap_or(0.0)
        } else {
            r.loss <= p.loss_filter
        };
        let clean = no_latency_penalty && no_loss_penalty && self.loss_mean.unwrap_or(0.0) < RAMP_MAX_LOSS_MEAN;
        Sample {
            mbps: r.rate.mbps(),
            utility: self.utility(r),
            delivered_mbps: r.throughput.mbps(),
            clean,
            penalised: !(no_loss_penalty && no_latency_penalty),
        }
    }
}
