//! A MOCC flow's preference `<w_thr, w_lat, w_loss>`: what the model is steered by, eq. 2's
//! reward, and the queue the drain guard lets stand.

use super::{DEFAULT_WEIGHTS, DRAIN_LATENCY_RATIO, DRAIN_MIN_QUEUE_RTTS, WEIGHTS, WEIGHT_SUM_TOLERANCE};
use thiserror::Error;

/// A preference vector that cannot be used, with what to change.
#[derive(Debug, Error, PartialEq)]
pub enum PreferenceError {
    #[error("a MOCC preference has 3 weights (throughput, latency, loss), got {0}: e.g. --weights 0.8,0.1,0.1")]
    Count(usize),
    #[error("MOCC weight {index} ({name}) = {value} must be strictly between 0 and 1")]
    OutOfRange { index: usize, name: &'static str, value: f64 },
    #[error("MOCC weights must sum to 1, got {sum} (e.g. 0.8,0.1,0.1)")]
    Sum { sum: f64 },
}

/// A flow's preference `w = <w_thr, w_lat, w_loss>`: each in (0, 1), summing to 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Preference([f64; WEIGHTS]);

impl Preference {
    const NAMES: [&'static str; WEIGHTS] = ["throughput", "latency", "loss"];

    pub fn new(w: &[f64]) -> Result<Preference, PreferenceError> {
        let w: [f64; WEIGHTS] = w.try_into().map_err(|_| PreferenceError::Count(w.len()))?;
        for (index, &value) in w.iter().enumerate() {
            if !(value.is_finite() && value > 0.0 && value < 1.0) {
                return Err(PreferenceError::OutOfRange { index, name: Self::NAMES[index], value });
            }
        }
        let sum: f64 = w.iter().sum();
        if (sum - 1.0).abs() > WEIGHT_SUM_TOLERANCE {
            return Err(PreferenceError::Sum { sum });
        }
        Ok(Preference(w))
    }

    pub fn weights(&self) -> [f64; WEIGHTS] {
        self.0
    }

    /// The latency ratio at which the drain guard drains a flow of this preference: a standing
    /// queue of `w_thr / w_lat` base RTTs, between [`DRAIN_MIN_QUEUE_RTTS`] and one base RTT
    /// ([`DRAIN_LATENCY_RATIO`], from `w_thr >= w_lat` on, the default preference's).
    pub fn drain_latency_ratio(&self) -> f64 {
        let [thr, lat, _] = self.0;
        1.0 + (thr / lat).clamp(DRAIN_MIN_QUEUE_RTTS, DRAIN_LATENCY_RATIO - 1.0)
    }

    /// The MOCC reward of eq. 2: `w_thr O_thr + w_lat O_lat + w_loss O_loss`.
    pub fn reward(&self, o_thr: f64, o_lat: f64, o_loss: f64) -> f64 {
        self.0[0] * o_thr + self.0[1] * o_lat + self.0[2] * o_loss
    }
}

impl Default for Preference {
    fn default() -> Self {
        Preference(DEFAULT_WEIGHTS)
    }
}
