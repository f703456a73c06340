//! A toy algorithm, registered only with the `toy` feature: a fixed window of `packets` packets,
//! unpaced (or the window fusion or a hand-over imposes). It exists to prove the registry: this file plus one line in `lib.rs` make it an
//! algorithm that `--alg toy`, policy files, the simulator and the agent accept (their tests run it
//! with the feature on). It is also the smallest example of [`crate::Algorithm`].

use crate::config::PolicyError;
use crate::{CongestionControl, Decision, FlowInfo, Report, Sync};
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

/// Per-flow state: the window in bytes.
#[derive(Clone, Debug)]
pub struct Toy {
    cwnd_bytes: u64,
}

impl CongestionControl for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn on_report(&mut self, _report: &Report) -> Decision {
        self.decision()
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: self.cwnd_bytes, rate: None }
    }

    /// A window imposed from outside (fusion, a live hand-over) is the new fixed window.
    fn sync(&mut self, to: Sync) {
        self.cwnd_bytes = to.window_bytes(self.cwnd_bytes, None);
    }
}

impl crate::Algorithm for ToyConfig {
    const NAME: &'static str = "toy";
    const SUMMARY: &'static str = "a fixed window of `packets` packets (test-only, proves the registry)";

    fn controller(&self, info: FlowInfo) -> Box<dyn CongestionControl> {
        Box::new(Toy { cwnd_bytes: self.packets.clamp(2, 10_000) * info.mss_bytes })
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
