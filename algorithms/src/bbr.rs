//! Bbr: placeholder being written (see issue 2). Follows the layout of `reno.rs`.

use crate::{CongestionControl, Decision, FlowInfo, Report};
use serde::{Deserialize, Serialize};

/// Bbr's parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BbrConfig {
    /// Seed for per-flow randomness (only BBR uses it).
    #[serde(skip)]
    pub seed: u64,
}

impl BbrConfig {
    pub fn build(&self, info: FlowInfo) -> Bbr {
        Bbr { cwnd: info.init_cwnd_bytes }
    }
}

#[derive(Clone, Debug)]
pub struct Bbr {
    cwnd: u64,
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }
    fn on_report(&mut self, _r: &Report) -> Decision {
        self.decision()
    }
    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: self.cwnd, rate: None }
    }
}
