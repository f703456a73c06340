//! A toy algorithm, registered only with the `toy` feature: a fixed window of `packets` packets,
//! unpaced ([`FixedWindow`]). It exists to prove the registry: this file plus one line in
//! `lib.rs` make it an algorithm that `--alg toy`, policy files, the simulator and the agent
//! accept (their tests run it with the feature on). It is also the smallest example of
//! [`crate::Algorithm`].

use crate::config::PolicyError;
use crate::fixed_window::FixedWindow;
use crate::FlowInfo;
use serde::{Deserialize, Serialize};

/// The toy's one parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToyConfig {
    /// The window, in packets (2 to 10,000).
    pub packets: u64,
}

impl Default for ToyConfig {
    fn default() -> Self {
        ToyConfig { packets: 20 }
    }
}

impl crate::Algorithm for ToyConfig {
    type Controller = FixedWindow;
    const NAME: &'static str = "toy";
    const SUMMARY: &'static str = "a fixed window of `packets` packets (test-only, proves the registry)";

    fn build(&self, info: FlowInfo) -> FixedWindow {
        FixedWindow::new(Self::NAME, self.packets.clamp(2, 10_000) * info.mss_bytes)
    }

    fn validate(&self) -> Result<(), PolicyError> {
        if (2..=10_000).contains(&self.packets) {
            Ok(())
        } else {
            Err(PolicyError::InvalidParameter {
                algorithm: Self::NAME,
                reason: format!("packets = {} is outside [2, 10000]", self.packets),
            })
        }
    }
}
