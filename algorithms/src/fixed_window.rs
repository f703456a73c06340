//! A fixed window, unpaced, whatever the reports say and whatever is imposed on it: what
//! `polycc-portus --pin-cwnd` runs (a datapath check: the flow keeps the window the agent
//! installed), and the controller of the registry's toy algorithm (`toy.rs`).

use crate::{CongestionControl, Decision, Report};

/// A window of `cwnd_bytes`, under the name `name` in logs and statistics.
#[derive(Clone, Debug)]
pub struct FixedWindow {
    name: &'static str,
    cwnd_bytes: u64,
}

impl FixedWindow {
    pub fn new(name: &'static str, cwnd_bytes: u64) -> FixedWindow {
        FixedWindow { name, cwnd_bytes }
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
        Decision { cwnd_bytes: self.cwnd_bytes, rate: None }
    }
}
