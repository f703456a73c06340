//! MOCC's training environment: one MOCC sender on one link of `polycc-sim`, stepped one
//! monitor interval (MI) at a time from Python (`polycc_gym.Env`, feature `python`).
//!
//! Nothing here computes an observation or a rate: the flow runs
//! [`polycc_algorithms::mocc::MoccCore`], the same code [`polycc_algorithms::mocc::Mocc`] runs in
//! the agent and the simulator; only the actor differs (Python's action instead of the ONNX
//! model's). A step:
//!
//! ```text
//!   step(a):  core.act(t, a)  (x <- x (1 + 0.025 a) or x / (1 - 0.025 a); the next MI starts)
//!             run the simulator until the core says the MI is over (a report past its planned end)
//!             return the history (30 raw values), O_thr, O_lat, O_loss of the MIs completed meanwhile
//! ```
//!
//! Links per episode (reference section 8): `envelope` is the Aurora/MOCC training range (bw
//! 100-500 packets/s = 1.2-6 Mbit/s, one-way delay 50-500 ms, queue 1 + e^U(0,4) packets, loss
//! 0-3 %, initial rate U(0.3, 1.5) x bw); `wide` is bw log-uniform 1.2-100 Mbit/s, RTT 10-200 ms,
//! queue e^U(ln 0.1, ln 2) BDP (at least 2 packets), loss 0-1 %, the same initial rate rule;
//! `users` is the range users run on (issue 18): bw log-uniform 1-100 Mbit/s, base RTT
//! log-uniform 10-200 ms, loss U(0, 2 %), buffer U(0.5, 5) BDP (at least 2 packets), the same
//! initial rate rule, and in [`BANDWIDTH_CHANGE_FRACTION`] of the episodes one bandwidth change
//! ([`LinkRange::sample_for`]); `users+cubic` is the same links (the same draws for the same
//! seed) with, in [`COMPETITOR_FRACTION`] of the episodes, a competing CUBIC flow at its defaults.
//!
//! The objectives (MOCC eq. 2): `O_thr = throughput / capacity` (clamped to [0, 1]: attributing
//! ACKs to MIs can credit an MI a little more than the link carries), `O_lat = base RTT /
//! measured RTT` (in (0, 1]), `O_loss = 1 - loss rate`. Around a bandwidth change the capacity
//! is the mean bandwidth over the span the completed MIs' packets crossed the bottleneck in
//! (their total length, ending one one-way delay before the step ends, when the last ACK
//! left); with a competitor it is still the whole link's, so `O_thr` is the MOCC flow's share.
//!
//! Reports come every [`REPORT_INTERVAL`] (10 ms), finer than the MIs (0.5 RTT >= 5 ms on these
//! links), so MIs last the 0.5 RTT they are planned to; the agent serves MOCC with the same
//! cadence (`Mocc::report_interval`, unless a fixed `--report-interval` overrides it).

use polycc_algorithms::mocc::{MoccConfig, MoccCore, Preference, RttBase, Step, OBS_LEN};
use polycc_algorithms::{
    AlgorithmConfig, AlgorithmKind, CongestionControl, Decision, Estimates, FlowInfo, Policy, Rate, Report,
};
use polycc_sim::config::{BandwidthChange, BufferSize, ReportInterval, MIN_PACING_EFFICIENCY, PACING_EXACT};
use polycc_sim::{FlowConfig, LinkConfig, SimConfig, Stepper};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use thiserror::Error;

#[cfg(feature = "python")]
mod python;
pub mod targets;

/// Packet size in the environment, bytes (Aurora's 1500-byte packets).
pub const MSS_BYTES: u64 = 1500;
/// The report cadence of the environment's datapath: MOCC's own, which the agent serves it with.
pub const REPORT_INTERVAL: Duration = polycc_algorithms::mocc::REPORT_INTERVAL;
/// Simulated time an episode may take at most (400 MIs of the slowest envelope link take ~250 s).
pub const MAX_EPISODE_TIME: Duration = Duration::from_secs(3600);
/// A step whose MI has not ended after this much simulated time ends the episode (a flow
/// starved by timeouts).
pub const MAX_STEP_TIME: Duration = Duration::from_secs(60);
/// MIs per episode that [`LinkRange::sample`] assumes when it times a bandwidth change or a
/// competitor (the training and evaluation default).
pub const DEFAULT_EPISODE_STEPS: usize = 400;

/// `users` range: bandwidth, Mbit/s (log-uniform).
pub const USERS_BANDWIDTH_MBPS: (f64, f64) = (1.0, 100.0);
/// `users` range: base RTT, seconds (log-uniform).
pub const USERS_RTT_S: (f64, f64) = (0.010, 0.200);
/// `users` range: random loss probability (uniform).
pub const USERS_LOSS: (f64, f64) = (0.0, 0.02);
/// `users` range: bottleneck buffer in BDPs of the initial bandwidth (uniform).
pub const USERS_BUFFER_BDP: (f64, f64) = (0.5, 5.0);
/// `users` range: share of the episodes whose bandwidth changes once, at U(0.25, 0.75) of the
/// episode's nominal length (its MIs at half the base RTT), by a factor e^(+-U(ln 1.5, ln 3))
/// (up or down with equal odds: a change of at least 1.5x and at most 3x), kept in 1-100 Mbit/s.
pub const BANDWIDTH_CHANGE_FRACTION: f64 = 0.3;
/// `users` range: the change factor's magnitude, min and max.
pub const BANDWIDTH_CHANGE_FACTOR: (f64, f64) = (1.5, 3.0);
/// `users+drops`: share of the episodes whose bandwidth changes (the `users` links otherwise) ...
pub const DROPS_CHANGE_FRACTION: f64 = 0.6;
/// ... and the odds that the change is a drop. A training range: in `users` one episode in seven
/// has a drop, and a model trained there kept the queue a drop built for seconds (p95 queueing
/// 1-7x the base RTT on the drop links of mocc.judge's set, docs/mocc-training.md).
pub const DROPS_DOWN_ODDS: f64 = 0.75;
/// `users+cubic`: share of the episodes with a competing CUBIC flow (the simulator's second
/// flow, CUBIC at its defaults), starting at U(0, 0.5) of the episode's nominal length.
pub const COMPETITOR_FRACTION: f64 = 0.3;
/// `users+noise`: share of the episodes whose ACK path jitters (netem-style, [`LinkParams::rtt_dev`]):
/// RTT noise without a queue, which the guest's ccp.ko flows see (RTT samples spread 1-4 ms at
/// 20 Mbit/s 40 ms, docs/kernel-parity.md) and a model trained on clean paths took for a queue.
pub const NOISE_FRACTION: f64 = 0.5;
/// `users+noise`: the jitter's deviation, seconds (uniform) ...
pub const NOISE_DEV_S: (f64, f64) = (0.0005, 0.004);
/// ... at most this share of the base RTT (a 10 ms path jitters by at most +/-2.5 ms).
pub const NOISE_DEV_MAX_RTT_SHARE: f64 = 0.25;
/// `users+guest`: on the jittered links of `users+noise`, the fraction of its rate a paced
/// sender puts on the wire ([`LinkParams::pacing_efficiency`]), uniform: the emulated guest's late
/// pacing timers delivered 0.75-0.98 of a constant rate with the host's load (docs/kernel-parity.md).
pub const GUEST_PACING: (f64, f64) = (0.75, 1.0);
/// Mixed into the side stream `users+guest` draws its pacing from.
const GUEST_STREAM: u64 = 0x9ac1_6e57_0f1a_c3d5;

/// An environment argument that cannot be used.
#[derive(Debug, Error, PartialEq)]
pub enum EnvError {
    #[error("unknown link range `{0}`: expected envelope, wide, users, users+cubic, users+drops, users+noise or users+guest")]
    UnknownLink(String),
    #[error("episode_steps must be at least 1")]
    NoSteps,
    #[error("invalid link: {0}")]
    BadLink(String),
}

/// Which links episodes are drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkRange {
    /// Aurora/MOCC's training envelope.
    Envelope,
    /// Up to 100 Mbit/s, RTT 10-200 ms.
    Wide,
    /// The links users have (issue 18), with bandwidth changes in some episodes.
    Users,
    /// [`LinkRange::Users`] with a competing CUBIC flow in some episodes.
    UsersCubic,
    /// [`LinkRange::Users`] with more bandwidth changes, most of them drops (training only).
    UsersDrops,
    /// [`LinkRange::Users`] with ACK-path jitter in some episodes.
    UsersNoise,
    /// [`LinkRange::UsersNoise`] with, on its jittered links, a sender that paces short of its
    /// rate as the emulated guest does ([`GUEST_PACING`]).
    UsersGuest,
}

impl FromStr for LinkRange {
    type Err = EnvError;
    fn from_str(s: &str) -> Result<Self, EnvError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "envelope" => Ok(LinkRange::Envelope),
            "wide" => Ok(LinkRange::Wide),
            "users" => Ok(LinkRange::Users),
            "users+cubic" => Ok(LinkRange::UsersCubic),
            "users+drops" => Ok(LinkRange::UsersDrops),
            "users+noise" => Ok(LinkRange::UsersNoise),
            "users+guest" => Ok(LinkRange::UsersGuest),
            _ => Err(EnvError::UnknownLink(s.to_string())),
        }
    }
}

/// One episode's link and the sender's initial rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkParams {
    pub bandwidth: Rate,
    pub one_way_delay: Duration,
    /// Bottleneck buffer, packets.
    pub queue_packets: u64,
    /// Random loss probability.
    pub loss: f64,
    /// The rate the sender starts at; `None`: from the datapath's initial window through MOCC's
    /// startup ([`polycc_algorithms::mocc::startup`]), as a deployed flow starts. Training
    /// episodes start at a rate (Aurora's rule, U(0.3, 1.5) x the bandwidth).
    pub initial_rate: Option<Rate>,
    /// One bandwidth change during the episode (its time from the episode's start).
    pub bandwidth_change: Option<BandwidthChange>,
    /// A competing CUBIC flow starts at this time.
    pub competitor_start: Option<Duration>,
    /// ACK-path jitter: each ACK delayed by its path's delay +/- this (uniform, never reordered:
    /// [`LinkConfig::rtt_dev`]); zero on a clean path.
    pub rtt_dev: Duration,
    /// The fraction of its pacing rate the sender's packets leave at
    /// ([`polycc_sim::SimConfig::pacing_efficiency`]); 1 (exact) but in `users+guest`.
    pub pacing_efficiency: f64,
}

impl LinkParams {
    pub fn base_rtt(&self) -> Duration {
        self.one_way_delay * 2
    }

    /// The simulator's bottleneck for this link (training and the target runs alike).
    pub fn link_config(&self) -> LinkConfig {
        LinkConfig {
            bandwidth: self.bandwidth,
            changes: self.bandwidth_change.into_iter().collect(),
            rtt: self.base_rtt(),
            rtt_dev: self.rtt_dev,
            buffer: BufferSize::Packets(self.queue_packets),
            loss: self.loss,
            ..LinkConfig::default()
        }
    }

    /// The mean bottleneck bandwidth over `[from, to]` (the bandwidth at `to` when the span is
    /// empty), from the simulator's own schedule ([`LinkConfig::capacity_bytes`]).
    pub fn mean_bandwidth(&self, from: Duration, to: Duration) -> Rate {
        let link = self.link_config();
        if to <= from {
            return link.bandwidth_at(to);
        }
        Rate::from_bytes_per_sec(link.capacity_bytes(from, to) / (to - from).as_secs_f64())
    }

    pub fn validate(&self) -> Result<(), EnvError> {
        let bad = |m: String| Err(EnvError::BadLink(m));
        if !(self.bandwidth.bytes_per_sec().is_finite() && self.bandwidth.bytes_per_sec() > 0.0) {
            return bad(format!("bandwidth {} Mbit/s must be positive", self.bandwidth.mbps()));
        }
        if self.one_way_delay.is_zero() {
            return bad("the one-way delay must be positive".into());
        }
        if self.queue_packets == 0 {
            return bad("the queue must hold at least 1 packet".into());
        }
        if !(0.0..1.0).contains(&self.loss) {
            return bad(format!("loss {} must be in [0, 1)", self.loss));
        }
        if let Some(r) = self.initial_rate {
            if !(r.bytes_per_sec().is_finite() && r.bytes_per_sec() > 0.0) {
                return bad("the initial rate must be positive".into());
            }
        }
        if !(MIN_PACING_EFFICIENCY..=1.0).contains(&self.pacing_efficiency) {
            return bad(format!("pacing efficiency {} must be in [{MIN_PACING_EFFICIENCY}, 1]", self.pacing_efficiency));
        }
        if self.rtt_dev > self.one_way_delay {
            return bad(format!(
                "ACK jitter +/-{:?} exceeds half the base RTT ({:?}): an ACK would arrive before its packet left",
                self.rtt_dev, self.one_way_delay
            ));
        }
        if let Some(c) = self.bandwidth_change {
            if !(c.bandwidth.bytes_per_sec().is_finite() && c.bandwidth.bytes_per_sec() > 0.0) {
                return bad(format!("the changed bandwidth {} Mbit/s must be positive", c.bandwidth.mbps()));
            }
        }
        Ok(())
    }
}

impl LinkRange {
    /// Draw an episode's link for an episode of [`DEFAULT_EPISODE_STEPS`] MIs.
    pub fn sample(self, rng: &mut ChaCha8Rng) -> LinkParams {
        self.sample_for(rng, DEFAULT_EPISODE_STEPS)
    }

    /// Draw an episode's link; `episode_steps` times the `users` ranges' bandwidth change and
    /// competitor (at fractions of the episode's nominal length, its MIs at half the base RTT).
    /// The envelope and wide ranges draw exactly what they drew before these ranges existed, and
    /// `users+cubic` draws the `users` links of the same seed (a competitor added to some).
    pub fn sample_for(self, rng: &mut ChaCha8Rng, episode_steps: usize) -> LinkParams {
        let packet_bits = (MSS_BYTES * 8) as f64;
        let (bandwidth, one_way_delay, queue_packets, loss) = match self {
            LinkRange::Envelope => {
                let bw = Rate::from_bits_per_sec(rng.gen_range(100.0..=500.0) * packet_bits);
                let delay = Duration::from_secs_f64(rng.gen_range(0.05..=0.5));
                let queue = (1.0 + rng.gen_range(0.0f64..=4.0).exp()).round() as u64;
                (bw, delay, queue, rng.gen_range(0.0..=0.03))
            }
            LinkRange::Wide => {
                let bw = Rate::from_mbps(rng.gen_range(1.2f64.ln()..=100f64.ln()).exp());
                let rtt = Duration::from_secs_f64(rng.gen_range(0.010..=0.200));
                let bdp_packets = bw.bytes_over(rtt) / MSS_BYTES as f64;
                let queue = (bdp_packets * rng.gen_range(0.1f64.ln()..=2f64.ln()).exp()).round().max(2.0) as u64;
                (bw, rtt / 2, queue, rng.gen_range(0.0..=0.01))
            }
            LinkRange::Users | LinkRange::UsersCubic | LinkRange::UsersDrops | LinkRange::UsersNoise | LinkRange::UsersGuest => {
                let log_uniform = |rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)| rng.gen_range(lo.ln()..=hi.ln()).exp();
                let bw = Rate::from_mbps(log_uniform(rng, USERS_BANDWIDTH_MBPS));
                let rtt = Duration::from_secs_f64(log_uniform(rng, USERS_RTT_S));
                let bdp_packets = bw.bytes_over(rtt) / MSS_BYTES as f64;
                let queue = (bdp_packets * rng.gen_range(USERS_BUFFER_BDP.0..=USERS_BUFFER_BDP.1)).round().max(2.0);
                (bw, rtt / 2, queue as u64, rng.gen_range(USERS_LOSS.0..=USERS_LOSS.1))
            }
        };
        let initial_rate = Some(Rate::from_bytes_per_sec(bandwidth.bytes_per_sec() * rng.gen_range(0.3..=1.5)));
        let mut link = LinkParams {
            bandwidth,
            one_way_delay,
            queue_packets,
            loss,
            initial_rate,
            bandwidth_change: None,
            competitor_start: None,
            rtt_dev: Duration::ZERO,
            pacing_efficiency: PACING_EXACT,
        };
        if matches!(
            self,
            LinkRange::Users | LinkRange::UsersCubic | LinkRange::UsersDrops | LinkRange::UsersNoise | LinkRange::UsersGuest
        ) {
            // Nominal length: the MIs at half the base RTT (queueing makes the real one longer).
            let nominal = one_way_delay.mul_f64(episode_steps as f64);
            let (changes, down) = if self == LinkRange::UsersDrops {
                (DROPS_CHANGE_FRACTION, DROPS_DOWN_ODDS)
            } else {
                (BANDWIDTH_CHANGE_FRACTION, 0.5)
            };
            if rng.gen_bool(changes) {
                let at = nominal.mul_f64(rng.gen_range(0.25..=0.75));
                let (lo, hi) = BANDWIDTH_CHANGE_FACTOR;
                let factor = rng.gen_range(lo.ln()..=hi.ln()).exp();
                let factor = if rng.gen_bool(1.0 - down) { factor } else { 1.0 / factor };
                let mbps = (bandwidth.mbps() * factor).clamp(USERS_BANDWIDTH_MBPS.0, USERS_BANDWIDTH_MBPS.1);
                link.bandwidth_change = Some(BandwidthChange { at, bandwidth: Rate::from_mbps(mbps) });
            }
            // Drawn in both ranges, so that a seed's episodes run on the same links in both.
            let (compete, start) = (rng.gen_bool(COMPETITOR_FRACTION), rng.gen_range(0.0..=0.5));
            if self == LinkRange::UsersCubic && compete {
                link.competitor_start = Some(nominal.mul_f64(start));
            }
            // Drawn in every users range too: users+noise runs the users links of the same seed.
            let (noisy, dev) = (rng.gen_bool(NOISE_FRACTION), rng.gen_range(NOISE_DEV_S.0..=NOISE_DEV_S.1));
            if matches!(self, LinkRange::UsersNoise | LinkRange::UsersGuest) && noisy {
                let cap = (2 * one_way_delay).as_secs_f64() * NOISE_DEV_MAX_RTT_SHARE;
                link.rtt_dev = Duration::from_secs_f64(dev.min(cap));
                if self == LinkRange::UsersGuest {
                    // From a side stream seeded off the main one, which it does not advance:
                    // users+guest runs the users+noise links of the same seed, episode after episode.
                    let mut side = ChaCha8Rng::seed_from_u64(rng.clone().next_u64() ^ GUEST_STREAM);
                    link.pacing_efficiency = side.gen_range(GUEST_PACING.0..=GUEST_PACING.1);
                }
            }
        }
        link
    }
}

/// The flow's state, shared between the simulator's sender and the environment.
#[derive(Debug)]
struct Shared {
    core: MoccCore,
    /// The MI ended at this report time; the environment owes an action.
    due: Option<Duration>,
}

/// The controller the simulated sender runs: MOCC's core, its actions supplied from outside.
#[derive(Debug)]
struct ExternalActor(Arc<Mutex<Shared>>);

fn lock(s: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

impl CongestionControl for ExternalActor {
    fn name(&self) -> &'static str {
        "mocc"
    }

    fn on_report(&mut self, report: &Report) -> Decision {
        let mut s = lock(&self.0);
        if s.core.on_report(report) == Step::DecisionDue && s.due.is_none() {
            s.due = Some(report.now);
        }
        s.core.decision()
    }

    fn decision(&self) -> Decision {
        lock(&self.0).core.decision()
    }

    fn estimates(&self) -> Estimates {
        lock(&self.0).core.estimates()
    }
}

/// What one step measured (the MIs completed during it; the previous values when none did).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepOutcome {
    pub obs: [f32; OBS_LEN],
    pub o_thr: f64,
    pub o_lat: f64,
    pub o_loss: f64,
    pub done: bool,
    pub throughput_bps: f64,
    pub rtt_s: f64,
    pub loss: f64,
    pub capacity_bps: f64,
    pub base_rtt_s: f64,
    /// The rate of the MI this step started.
    pub rate_bps: f64,
    /// MIs whose statistics arrived during the step.
    pub mis_completed: usize,
    pub sim_time_s: f64,
}

/// The environment: see the module documentation.
pub struct MoccEnv {
    range: LinkRange,
    episode_steps: usize,
    rng: ChaCha8Rng,
    /// A link every reset uses instead of drawing one (tests, evaluation).
    fixed: Option<LinkParams>,
    link: LinkParams,
    shared: Arc<Mutex<Shared>>,
    stepper: Stepper,
    steps: usize,
    ended: bool,
    last: (f64, f64, f64),
    /// The latency ratio the observation carries ([`RttBase`]; the model exported from this
    /// training says so in its metadata).
    rtt_base: RttBase,
    /// The flow's rate dithered and nudged toward an equal share ([`MoccCore::set_share`]; off by
    /// default, as deployed flows run).
    fair_share: bool,
    /// The preference the episodes' flow serves (the drain guard's queue,
    /// [`Preference::drain_latency_ratio`]); None: the guard at a base RTT of queue.
    preference: Option<Preference>,
    /// The episode's simulator seed, which also draws its dither.
    episode_seed: u64,
}

impl MoccEnv {
    pub fn new(range: LinkRange, seed: u64, episode_steps: usize) -> Result<MoccEnv, EnvError> {
        if episode_steps == 0 {
            return Err(EnvError::NoSteps);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let link = range.sample_for(&mut rng, episode_steps);
        let (shared, stepper) = Self::start(&link, seed, RttBase::default(), false, None);
        let mut env = MoccEnv {
            range,
            episode_steps,
            rng,
            fixed: None,
            link,
            shared,
            stepper,
            steps: 0,
            ended: false,
            last: (0.0, link.base_rtt().as_secs_f64(), 0.0),
            rtt_base: RttBase::default(),
            fair_share: false,
            preference: None,
            episode_seed: seed,
        };
        env.run_to_decision();
        Ok(env)
    }

    /// The latency ratio the observation carries, from now on and in every later episode.
    pub fn set_rtt_base(&mut self, base: RttBase) {
        self.rtt_base = base;
        lock(&self.shared).core.set_rtt_base(base);
    }

    pub fn rtt_base(&self) -> RttBase {
        self.rtt_base
    }

    /// Whether the flow's rate is dithered and nudged toward an equal share, from the next
    /// decision on and in every later episode (off by default, as deployed).
    pub fn set_fair_share(&mut self, on: bool) {
        self.fair_share = on;
        lock(&self.shared).core.set_share(on.then_some(self.episode_seed));
    }

    pub fn fair_share(&self) -> bool {
        self.fair_share
    }

    /// The preference the flow serves, from the next reset on (the reward is the caller's: this
    /// sets what the flow's drain guard lets stand, as the agent's flows do).
    pub fn set_preference(&mut self, w: Option<Preference>) {
        self.preference = w;
    }

    fn start(
        link: &LinkParams,
        seed: u64,
        base: RttBase,
        fair_share: bool,
        preference: Option<Preference>,
    ) -> (Arc<Mutex<Shared>>, Stepper) {
        let info = FlowInfo::with_mss(MSS_BYTES);
        let mut core = MoccCore::new(info, link.initial_rate);
        core.set_rtt_base(base);
        if let Some(w) = &preference {
            core.set_preference(w);
        }
        core.set_share(fair_share.then_some(seed));
        let shared = Arc::new(Mutex::new(Shared { core, due: None }));
        let mut flows = vec![FlowConfig {
            start: Duration::ZERO,
            policy: Policy::Single(AlgorithmConfig::Mocc(MoccConfig::default())),
        }];
        let mut controllers: Vec<Box<dyn CongestionControl>> = vec![Box::new(ExternalActor(shared.clone()))];
        if let Some(start) = link.competitor_start {
            let cubic = Policy::Single(AlgorithmKind::Cubic.default_config());
            controllers.push(cubic.build(info));
            flows.push(FlowConfig { start, policy: cubic });
        }
        let cfg = SimConfig {
            link: link.link_config(),
            flows,
            duration: MAX_EPISODE_TIME,
            report_interval: ReportInterval::Fixed(REPORT_INTERVAL),
            mss_bytes: MSS_BYTES,
            seed,
            record_series: false,
            pacing_efficiency: link.pacing_efficiency,
        };
        let stepper = Stepper::new(cfg, controllers);
        (shared, stepper)
    }

    /// Use this link for every episode from the next reset on (`None`: draw from the range).
    pub fn fix_link(&mut self, link: Option<LinkParams>) -> Result<(), EnvError> {
        if let Some(l) = &link {
            l.validate()?;
        }
        self.fixed = link;
        Ok(())
    }

    /// Start an episode (a new link unless one is fixed); returns the first observation.
    pub fn reset(&mut self, seed: Option<u64>) -> [f32; OBS_LEN] {
        if let Some(s) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(s);
        }
        let drawn = self.range.sample_for(&mut self.rng, self.episode_steps);
        self.link = self.fixed.unwrap_or(drawn);
        let sim_seed = self.rng.gen();
        self.episode_seed = sim_seed;
        (self.shared, self.stepper) =
            Self::start(&self.link, sim_seed, self.rtt_base, self.fair_share, self.preference);
        self.steps = 0;
        self.ended = false;
        self.last = (0.0, self.link.base_rtt().as_secs_f64(), 0.0);
        self.run_to_decision();
        lock(&self.shared).core.observation()
    }

    /// Run until the open MI ends; false when the simulation could not get there.
    fn run_to_decision(&mut self) -> bool {
        let shared = self.shared.clone();
        let until = self.stepper.now() + MAX_STEP_TIME;
        lock(&shared).due.is_some() || self.stepper.run_until(until, || lock(&shared).due.is_some())
    }

    /// Apply `action` for the next MI and run until it ends.
    pub fn step(&mut self, action: f64) -> StepOutcome {
        let rate_bps = {
            let mut s = lock(&self.shared);
            let at = s.due.take().unwrap_or(self.stepper.now());
            s.core.act(at, action);
            s.core.rate().map_or(0.0, |r| r.bits_per_sec())
        };
        self.stepper.refresh(0);
        let reached = !self.ended && self.run_to_decision();
        self.ended |= !reached;
        self.steps += 1;
        let (obs, completed) = {
            let mut s = lock(&self.shared);
            (s.core.observation(), s.core.take_completed())
        };
        let mis_completed = completed.len();
        let duration: f64 = completed.iter().map(|m| m.duration.as_secs_f64()).sum();
        if duration > 0.0 {
            let bytes: f64 = completed.iter().map(|m| m.throughput.bytes_over(m.duration)).sum();
            let (mut rtt_w, mut rtt_sum) = (0.0, 0.0);
            for m in &completed {
                if let Some(r) = m.rtt_mean {
                    rtt_w += m.packets.max(1.0);
                    rtt_sum += m.packets.max(1.0) * r.as_secs_f64();
                }
            }
            let packets: f64 = completed.iter().map(|m| m.packets).sum();
            let lost: f64 = completed.iter().map(|m| m.loss * m.packets).sum();
            self.last = (
                bytes * 8.0 / duration,
                if rtt_w > 0.0 { rtt_sum / rtt_w } else { self.last.1 },
                if packets > 0.0 { lost / packets } else { self.last.2 },
            );
        }
        let (throughput_bps, rtt_s, loss) = self.last;
        let crossed_until = self.stepper.now().saturating_sub(self.link.one_way_delay);
        let crossed_from = crossed_until.saturating_sub(Duration::from_secs_f64(duration));
        let capacity_bps = self.link.mean_bandwidth(crossed_from, crossed_until).bits_per_sec();
        let base_rtt_s = self.link.base_rtt().as_secs_f64();
        StepOutcome {
            obs,
            o_thr: (throughput_bps / capacity_bps).clamp(0.0, 1.0),
            o_lat: if rtt_s > 0.0 { (base_rtt_s / rtt_s).clamp(0.0, 1.0) } else { 1.0 },
            o_loss: (1.0 - loss).clamp(0.0, 1.0),
            done: self.ended || self.steps >= self.episode_steps,
            throughput_bps,
            rtt_s,
            loss,
            capacity_bps,
            base_rtt_s,
            rate_bps,
            mis_completed,
            sim_time_s: self.stepper.now().as_secs_f64(),
        }
    }

    pub fn link(&self) -> LinkParams {
        self.link
    }

    /// The 95th percentile of the MOCC flow's per-packet RTTs so far this episode (the
    /// simulator's histogram, 100 us buckets, upper edge: as `polycc-sim --json`'s `p95_rtt_ms`).
    pub fn p95_rtt(&self) -> Option<Duration> {
        let ms = self.stepper.summary().flows.first()?.p95_rtt_ms?;
        Some(Duration::from_secs_f64(ms / 1e3))
    }

    pub fn steps(&self) -> usize {
        self.steps
    }
}

#[cfg(test)]
mod tests;
