//! A fixed window, unpaced or at a fixed rate, whatever the reports say and whatever is imposed
//! on it: what `polycc-portus --pin-cwnd` and `--pin-rate` run (datapath checks: the flow keeps the
//! window the agent installed, or delivers the rate it set), and the controller of the registry's
//! toy algorithm (`toy.rs`).

use crate::units::Rate;
use crate::{CongestionControl, Decision, Report};

/// A window of `cwnd_bytes`, under the name `name` in logs and statistics.
#[derive(Clone, Debug)]
pub struct FixedWindow {
    name: &'static str,
    cwnd_bytes: u64,
    rate: Option<Rate>,
}

impl FixedWindow {
    pub fn new(name: &'static str, cwnd_bytes: u64) -> FixedWindow {
        FixedWindow { name, cwnd_bytes, rate: None }
    }

    /// The window `cwnd_bytes`, paced at `rate`.
    pub fn paced(name: &'static str, cwnd_bytes: u64, rate: Rate) -> FixedWindow {
        FixedWindow { name, cwnd_bytes, rate: Some(rate) }
    }
}

impl CongestionControl for FixedWindow {
    fn name(&self) -> &'static str {
        self.name
    }

    fn on_report(&mut self, _report: &Report) -> Decision {
        self.decision()
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: self.cwnd_bytes, rate: self.rate }
    }
}
