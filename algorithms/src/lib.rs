//! polycc's congestion-control algorithms as pure logic.
//!
//! Every algorithm is a per-flow state machine behind [`CongestionControl`]: it takes a
//! [`Report`] (which carries the datapath's time) and returns a [`Decision`] (a cwnd in bytes and
//! optionally a pacing rate). Nothing here reads a clock, seeds a random generator, logs or does
//! I/O; randomness an algorithm needs (BBR's gain-cycle start, PCC's probing order) comes from a seed in
//! its config.
//!
//! Each algorithm has a `Config` with documented defaults that builds per-flow instances
//! ([`AlgorithmConfig::build`]) and is listed once in the registry below ([`registry`]);
//! [`Policy`] describes what a flow runs: one algorithm, or a PolyCC fusion of a pilot and
//! copilots ([`fusion`]).

pub mod ack_growth;
pub mod config;
pub mod fixed_window;
mod filters;
pub mod fusion;
pub mod loss_episode;
pub mod model_file;
pub mod pcc;
pub mod policy;
pub mod quantity;
pub mod registry;
pub mod report;
mod rng;
pub mod testing;
pub mod units;
mod window_controls;

// The algorithm registry ([`registry`]): one line per algorithm, `Variant => module::Config`.
// Adding an algorithm is its file plus one line here (walkthrough: algorithms/README.md).
registry::algorithms! {
    Reno => reno::RenoConfig,
    Cubic => cubic::CubicConfig,
    Vegas => vegas::VegasConfig,
    Bbr => bbr::BbrConfig,
    Copa => copa::CopaConfig,
    Allegro => allegro::AllegroConfig,
    Vivace => vivace::VivaceConfig,
    Mocc => mocc::MoccConfig,
    #[cfg(feature = "toy")]
    Toy => toy::ToyConfig,
}

pub use policy::{FuseOn, FusionFn, FusionPolicy, Policy, PolicyError, TargetCwnd};
pub use registry::Algorithm;
pub use report::Report;
pub use units::Rate;

use std::fmt;
use std::time::Duration;

/// What the datapath tells an algorithm when a flow starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowInfo {
    /// Maximum segment size in bytes (payload per packet).
    pub mss_bytes: u64,
    /// The datapath's initial congestion window in bytes.
    pub init_cwnd_bytes: u64,
}

impl FlowInfo {
    /// Linux's default: 10 segments (RFC 6928).
    pub const DEFAULT_INIT_CWND_PACKETS: u64 = 10;

    pub fn with_mss(mss_bytes: u64) -> FlowInfo {
        let mss_bytes = mss_bytes.max(1);
        FlowInfo { mss_bytes, init_cwnd_bytes: mss_bytes * Self::DEFAULT_INIT_CWND_PACKETS }
    }
}

impl Default for FlowInfo {
    fn default() -> Self {
        FlowInfo::with_mss(1448)
    }
}

/// What an algorithm asks the datapath to do.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Decision {
    /// Congestion window in bytes. Never below the algorithm's minimum.
    pub cwnd_bytes: u64,
    /// Pacing rate; `None` leaves the flow unpaced (window-limited only).
    pub rate: Option<Rate>,
}

/// Path estimates an algorithm may expose, e.g. to derive a fusion target from the BDP.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimates {
    /// Bottleneck bandwidth estimate.
    pub bandwidth: Option<Rate>,
    /// Propagation RTT estimate.
    pub min_rtt: Option<Duration>,
    /// Smoothed RTT.
    pub srtt: Option<Duration>,
}

impl Estimates {
    /// Bandwidth-delay product in bytes, when both estimates exist.
    pub fn bdp_bytes(&self) -> Option<u64> {
        match (self.bandwidth, self.min_rtt) {
            (Some(bw), Some(rtt)) if !bw.is_zero() => Some(units::bytes_from_f64(bw.bytes_over(rtt))),
            _ => None,
        }
    }
}

/// The value a fusion controller imposes on every member after fusing (PolyCC's sync step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sync {
    /// Adopt this congestion window (bytes).
    Cwnd(u64),
    /// Adopt this sending rate; window-based algorithms turn it into a window over their RTT.
    Rate(Rate),
}

impl Sync {
    /// The window a window-based algorithm adopts: the window itself, or the rate over `srtt`
    /// (`current` while no RTT is known yet).
    pub fn window_bytes(self, current: u64, srtt: Option<Duration>) -> u64 {
        match (self, srtt) {
            (Sync::Cwnd(c), _) => c,
            (Sync::Rate(r), Some(rtt)) => units::bytes_from_f64(r.bytes_over(rtt)),
            (Sync::Rate(_), None) => current,
        }
    }
}

/// A congestion-control algorithm's per-flow state: reports in, decisions out.
pub trait CongestionControl: fmt::Debug + Send {
    /// Short lower-case name ("cubic", "bbr", ...), as used on the command line.
    fn name(&self) -> &'static str;

    /// Consume one report and return the decision to apply until the next one.
    /// Must not panic on any report: clamp and saturate instead.
    fn on_report(&mut self, report: &Report) -> Decision;

    /// The decision as it stands, without a new report.
    fn decision(&self) -> Decision;

    /// Adopt a value chosen outside the algorithm (fusion sync, live hand-over). The next
    /// `on_report` continues from it. The default ignores it.
    fn sync(&mut self, _to: Sync) {}

    /// The algorithm's path estimates, if it keeps any.
    fn estimates(&self) -> Estimates {
        Estimates::default()
    }

    /// The window this algorithm keeps in flight, for a fusion that compares windows. The
    /// default is the decision's window; a rate-based sender whose window is only a loose cap
    /// (PCC: 2 x rate x RTT, so that the flow stays rate-limited) answers what its rate puts in
    /// flight, its rate over its smoothed RTT.
    fn fusion_window(&self) -> u64 {
        self.decision().cwnd_bytes
    }

    /// Whether the decision's window is what the algorithm means to keep in flight, its rate
    /// (if any) following from it (Reno, CUBIC, Vegas; Copa, whose rate is its window over
    /// RTT_standing), rather than a cap over a rate it chose (BBR: 2 x bandwidth x min RTT; PCC).
    /// Fusion on rate installs such a winner's window as it is (see `fusion/rate.rs`). The default
    /// says yes for an unpaced decision.
    fn window_bound(&self) -> bool {
        self.decision().rate.is_none()
    }

    /// Whether the algorithm is in its slow-start phase (Reno/CUBIC/Vegas below ssthresh, BBR
    /// Startup, Copa SlowStart, PCC Starting): the agent's per-second statistics and a live
    /// hand-over ask. The default says no.
    fn in_slow_start(&self) -> bool {
        false
    }

    /// For a controller that chooses among members (a fusion): the name of the member whose
    /// value the last decision took, for the agent's per-second statistics and `polycc trace`.
    /// The default, a single algorithm, says `None`.
    fn chosen_member(&self) -> Option<&'static str> {
        None
    }

    /// How far, until its next report, the window may grow by what each ACK delivers: slow
    /// start as Linux runs it, per ACK, which the datapath carries out between reports
    /// ([`ack_growth`]); `None`: no growth between reports. With one report per RTT, growth
    /// decided only at reports doubles the window every report cycle (RTT, the wait for the
    /// next ACK, the agent's round trip), not every RTT. The default says `None`: rate-based and
    /// delay-based starts (PCC, MOCC, Copa, Vegas) pace their own ramps.
    fn ack_growth_limit(&self) -> Option<u64> {
        None
    }

    /// Where the datapath ends that growth on delay, per RTT sample, before the next report
    /// ([`ack_growth::DelayExit`]): CUBIC's HyStart delay test. The datapath then reports at
    /// once with [`Report::delay_exit`]. The default: no delay exit.
    fn ack_growth_delay_exit(&self) -> Option<ack_growth::DelayExit> {
        None
    }

    /// How often the algorithm wants reports, from what it knows now; `None` (the default):
    /// the datapath's cadence, once per RTT. PCC asks for several per RTT so its monitor
    /// intervals end close to their planned ends and losses are placed in the right one. The
    /// agent installs it on the flow unless the user forced `--report-interval`.
    fn report_interval(&self) -> Option<Duration> {
        None
    }

    /// What the algorithm decided since the last call, oldest first, for the agent's debug log
    /// (PCC: one record per monitor interval). The default has nothing to say.
    fn take_trace(&mut self) -> Vec<pcc::MiTrace> {
        Vec::new()
    }

    /// Continue from another controller's state (a live policy change): its window, rate and
    /// path estimates. The default adopts the rate (the old one's pacing rate, else its window
    /// over its smoothed RTT), then the window, through [`CongestionControl::sync`] (window last:
    /// a rate-based algorithm's new rate would otherwise replace the window); algorithms with a
    /// slow-start threshold override it to stay out of slow start when the old one was.
    fn adopt(&mut self, from: &Handover) {
        if let Some(rate) = from.rate() {
            self.sync(Sync::Rate(rate));
        }
        self.sync(Sync::Cwnd(from.cwnd_bytes));
    }
}

/// What a flow's controller hands its successor on a live policy change.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Handover {
    /// The window installed on the flow (bytes).
    pub cwnd_bytes: u64,
    /// The pacing rate installed on the flow; `None`: unpaced.
    pub pacing_rate: Option<Rate>,
    /// The old controller's path estimates.
    pub estimates: Estimates,
    /// Whether the old controller was still in slow start.
    pub in_slow_start: bool,
}

impl Handover {
    /// The rate the flow was sending at: its pacing rate, else its window over the smoothed RTT.
    pub fn rate(&self) -> Option<Rate> {
        self.pacing_rate.or_else(|| {
            let rtt = self.estimates.srtt.or(self.estimates.min_rtt)?;
            (!rtt.is_zero()).then(|| units::rate_of_window(self.cwnd_bytes, rtt))
        })
    }
}
