//! Cubic: placeholder being written (see issue 2). Follows the layout of `reno.rs`.

use crate::{CongestionControl, Decision, FlowInfo, Report};
use serde::{Deserialize, Serialize};

/// Cubic's parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CubicConfig {
    /// Seed for per-flow randomness (only BBR uses it).
    #[serde(skip)]
    pub seed: u64,
}

impl CubicConfig {
    pub fn build(&self, info: FlowInfo) -> Cubic {
        Cubic { cwnd: info.init_cwnd_bytes }
    }
}

#[derive(Clone, Debug)]
pub struct Cubic {
    cwnd: u64,
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn on_report(&mut self, _r: &Report) -> Decision {
        self.decision()
    }
    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: self.cwnd, rate: None }
    }
}
