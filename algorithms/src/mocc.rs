//! MOCC (Ma et al., "Multi-Objective Congestion Control", EuroSys'22): one learned policy that
//! serves any preference between throughput, latency and loss.
//!
//! Model: the sender picks a rate per monitor interval (MI, [`crate::pcc`]); at the end of each
//! MI a neural policy maps the flow's preference and the history of the last [`HISTORY`] MIs to
//! an action `a`, and
//!
//! ```text
//!   x <- x (1 + alpha a)        a >= 0              alpha = 0.025 (training value, [`ACTION_ALPHA`])
//!   x <- x / (1 - alpha a)      a <  0
//!   with fair_share: x <- x (1 + 0.03 (e - 1/2)) where e >= 0.2, e the measured elasticity
//!   MI length = 0.5 x the previous MI's mean RTT, at least 5 packets
//!   pacing = x (with fair_share: x (1 +/- 0.03), a sign per block of MIs, the dither e is
//!   measured by), cwnd = 2 x rate x srtt (>= 4 packets)
//!   observation = [w_thr, w_lat, w_loss] ++ HISTORY x [send ratio, latency ratio, latency gradient]
//!     send ratio      = MI send rate / MI receive rate  (1 when nothing was sent or received;
//!                       the send rate is the MI's rate x the fraction of its rate the datapath
//!                       was learned to send on MIs with no queue, `History::pacing`)
//!     latency ratio   = MI mean RTT / (lowest MI mean RTT so far + 4 x the RTT samples' noise)
//!     latency gradient = dRTT/dT over the MI (seconds of RTT per second of sending)
//! ```
//!
//! The same [`MoccCore`] (MIs, observation, rate update) runs in the agent, in `polycc-sim` and
//! in the training environment (`onnx/gym`, the `polycc_gym` Python module): training and serving
//! compute observations with the same code. Only the actor differs: [`Mocc`] asks a
//! [`MoccModel`] (ONNX, run with tract), the gym asks Python.
//!
//! States: `Starting` (no rate yet: the initial window, unpaced, until the first RTT sample;
//! skipped when an initial rate is configured) -> the startup ([`startup`]: the rate grows from
//! the initial window until the path shows a queue, drains it, and hands over at the path's
//! delivery rate, where the model's training episodes start; skipped with an initial rate too)
//! -> `Running` (one MI at a time, an action at the end of each; the observation's history holds
//! the MIs from the first of those on).
//!
//! The model file is the boundary: [`MoccModel::from_bytes`] validates it once (an ONNX graph
//! with input `obs` [N, 33] and output `action` [N, 1], the metadata keys of
//! [`REQUIRED_METADATA`]) and returns a typed [`ModelError`]. Flows share one model through a
//! [`ModelSlot`], which the agent swaps live (`polycc model load`); each decision reads the slot,
//! so the next MI of every flow uses the new model. The per-report path cannot fail: an
//! inference error or a non-finite action holds the rate (action 0) and is counted.
//!
//! References: MOCC EuroSys'22 sections 4-5 (preference sub-network, observation, alpha);
//! Aurora (Jay et al., ICML'19) for the MI statistics; `../shared/reference/algorithms.md`
//! section 8.
//!
//! Differences from the reference:
//! - MIs are placed on reports, not packets ([`crate::pcc`]), so an MI ends at the report
//!   closest to its planned end and the statistics of an MI become known about one RTT after it
//!   ends (when its packets' fate is known). The observation at a decision holds the MIs completed
//!   so far; the history starts filled with neutral MIs (send ratio 1, latency ratio 1, gradient 0).
//! - The latency gradient is the least-squares slope of the MI's RTT samples against send time
//!   (the reference: second-half minus first-half mean over the send duration; the same quantity
//!   for a linear trend, less noisy).
//! - The latency ratio's base is the lowest MI mean RTT plus [`RTT_BASE_NOISE_SDS`] standard
//!   deviations of the RTT samples' noise (the reference: the lowest alone), so RTT noise
//!   without a queue reads ratio 1.
//! - An MI whose packets were all lost has the send ratio [`MAX_SEND_RATIO`] (Aurora: 1, which
//!   makes a dead path look healthy).
//! - Rates are clamped to [[`MIN_RATE_PACKETS_PER_SEC`] packets/s, [`MAX_RATE_MBPS`]]; the action
//!   to the model's `polycc.action_clip`.
//! - The share probe ([`share`], `fair_share`, off by default): the actor's rates are dithered
//!   and nudged toward an equal share of a shared bottleneck, which the rate-free observation and
//!   the multiplicative update leave to the flows' starts (two flows 5 s apart in the simulator:
//!   Jain 0.54 -> 0.99; not yet in the guest).

use crate::config::PolicyError;
use crate::filters::WindowedMax;
use crate::pcc::{self, MiResult, Monitor};
use crate::{Algorithm, CongestionControl, Decision, Estimates, FlowInfo, Rate, Report, Sync};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, RwLock, TryLockError};
use std::time::Duration;
use thiserror::Error;
use tract_onnx::prelude::*;

/// The report cadence MOCC is trained with (`onnx/gym`'s datapath) and therefore served with: the
/// agent installs it for MOCC flows ([`CongestionControl::report_interval`]) unless a fixed
/// `--report-interval` overrides it. Finer than the MIs (0.5 RTT), so an MI lasts what it planned.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(10);

/// MIs in the observation (Aurora/MOCC: eta = 10).
pub const HISTORY: usize = 10;
/// Features per MI: send ratio, latency ratio, latency gradient (in this order).
pub const FEATURES: usize = 3;
/// Length of the history part of the observation.
pub const OBS_LEN: usize = HISTORY * FEATURES;
/// Preference components: throughput, latency, loss.
pub const WEIGHTS: usize = 3;
/// Length of the model's input: the preference, then the history.
pub const MODEL_INPUT_LEN: usize = WEIGHTS + OBS_LEN;
/// Rate step per unit of action (MOCC/Aurora training value; Aurora's deployment used 0.05).
pub const ACTION_ALPHA: f64 = 0.025;
/// MI length in mean RTTs of the previous MI (Aurora).
pub const MI_RTTS: f64 = 0.5;
/// Deployment: an MI lasts at least the time to send this many packets.
pub const MIN_MI_PACKETS: u64 = 5;
/// Lowest rate in packets per second (Aurora's training clamp: 40 packets/s).
pub const MIN_RATE_PACKETS_PER_SEC: f64 = 40.0;
/// Highest rate, Mbit/s (100 Gbit/s).
pub const MAX_RATE_MBPS: f64 = 100_000.0;
/// Smallest window, packets.
pub const MIN_CWND_PACKETS: u64 = 4;
/// Send ratio of an MI that delivered nothing of what it sent; also the cap on the ratio.
pub const MAX_SEND_RATIO: f64 = 1000.0;
/// |latency gradient| cap (an RTT growing 100 s per second of sending is a broken sample).
pub const MAX_LATENCY_GRADIENT: f64 = 100.0;
/// Cap on the latency ratio.
pub const MAX_LATENCY_RATIO: f64 = 1000.0;
/// An MI whose latency ratio is at most this saw no queue: what it sent over its rate is the
/// datapath's pacing ([`History::pacing`]).
pub const PACING_LEARN_MAX_LATENCY: f64 = 1.05;
/// ... and at most this loss (random loss is counted as sent; congestion loss is a queue).
pub const PACING_LEARN_MAX_LOSS: f64 = 0.05;
/// The least pacing fraction learned (the guest's probes read 0.75 on a busy host).
pub const MIN_PACING: f64 = 0.5;
/// The most one MI's sample counts for: a flight that drained in it reads above 1.
pub const MAX_PACING_SAMPLE: f64 = 1.2;
/// A learned pacing fraction from this up is exact pacing: the simulator's exact sender reads
/// 0.986-1.004 (1st percentile to median of the moving average, MOCC at both landmarks, 10-100
/// Mbit/s, with and without 1 % loss), and the model's latency landmark moved by a tenth on that
/// noise alone.
pub const PACING_EXACT_FROM: f64 = 0.97;
/// The latency ratio's base sits this many standard deviations of the RTT samples' noise above
/// the lowest MI mean RTT. The noise is the samples' spread around each MI's regression line
/// ([`MiResult::rtt_residual`], a moving average over MIs): the noise within an MI, not the queue's
/// trend. The lowest MI mean is the noise's low tail, so against it alone every noise-only MI
/// read 1.02-1.03 on a 40 ms path with +/-1 ms of RTT noise (a host's scheduling, ACK
/// aggregation; the guest's RTT samples spread over 1-4 ms), and the shipped model, trained on
/// clean paths, backed off from that as from a standing queue: the latency landmark at 0.09 of
/// a 20 Mbit/s 40 ms link with +/-1 ms of ACK jitter in the simulator (0.47 without).
/// Seeds 1-3, +/-1 ms, reports every 10 / 12 ms (2026-11-29): 2 deviations 0.14-0.23 / 0.10-0.12,
/// 3 0.32-0.36 / 0.12-0.14, 4 0.35-0.48 / 0.16-0.36, 6 0.34-0.62 / 0.14-0.22; with 4 the
/// throughput landmark 0.93-0.95 -> 0.95-0.96, and at 1 % loss the latency landmark 0.03-0.05 ->
/// 0.07-0.34; noise-free runs unchanged. On the users range without noise (`make judge`) the
/// rows stay where they were (median normalised reward 0.906 -> 0.905, the latency landmark's p95
/// queueing median 0.110 -> 0.107 x base RTT). Tried first and not kept: the flow's RTT
/// deviation ([`MiResult::rtt_jitter`]) as the noise, which counts the queue's own swings too:
/// it lifted the noisy runs more (0.37-0.56) but hid real queues on the users range (median
/// reward 0.854, p95 queueing median 0.251 x base RTT). In the guest the latency landmark went
/// from 0.08-0.10 on every rep to half the reps at the simulator's figure (docs/kernel-parity.md,
/// "RTT noise is not a queue"); the other half start on MIs of 2-3 delayed ACKs whose gradients
/// are noise the model never saw: training on noisy paths is the rest.
pub const RTT_BASE_NOISE_SDS: f64 = 4.0;
/// After the startup's drain the latency ratio's base is measured afresh (the startup's first MIs,
/// a few packets each, read the bottom of ACK jitter that the running flow's bunched ACKs never
/// see: kept, they cut the latency landmark at +/-20 ms to 0.52-0.90 of the link from 0.92-0.96),
/// but at most this many deviations of the RTT noise ([`History::rtt_noise`]) above the lowest
/// the startup measured: a base further above it than noise explains is a queue the flow came
/// into, another flow's or its own startup's not yet drained. Measured afresh with no bound, two
/// MOCC flows started together read each other's queue as their path's: one took 47 of 50
/// Mbit/s (Jain 0.56); with the bound 25/25 (1.00). 4, 8 and 12 deviations were lower on the
/// +/-70 ms links (docs/mocc.md, "A base measured in the other flow's queue").
pub const STARTUP_BASE_NOISE_SDS: f64 = 16.0;
/// Drain guard: at a decision where two reports in a row show a standing queue of a base RTT or
/// more (every RTT sample at least this x the lowest, above the RTT noise; a smaller queue for a
/// flow weighing latency over throughput, [`Preference::drain_latency_ratio`]) and the newest MI a
/// queue that is not falling ([`MoccCore::standing_queue`]), the flow drains, outside the model: it
/// sends at half the path's delivery rate until its flight is down to a BDP, then the model starts
/// again from that rate and a neutral history ([`startup::Phase::Draining`], the drain that ends
/// the startup). A guard outside the model, as learned policies are deployed behind: after a
/// bandwidth drop the models trained so far answered with 3-11 % cuts per MI from up to 3x the new
/// capacity, so the queue the drop built stayed for seconds (judge link 8, 42 -> 14 Mbit/s at 27
/// ms: the buffer full after 0.4 s, gone after 2.2 s; docs/mocc-training.md). The guard first capped the
/// rate at the delivered rate, which stops the queue's growth but leaves it to the model's own
/// cuts; with the drain, and the history's lowest RTTs forgotten at its end ([`History::restart`]:
/// at a lower bandwidth the path's RTT is longer by the slower serialization, which the latency
/// landmark read as a queue it could never drain), the judge's seven drop links went from a p95
/// queueing delay of 1.4-7.9 x the base RTT at the latency landmark to 0.2-1.3 x, and from a
/// utilization of 0.68-0.97 to 0.94-0.99; its reward reaches the best classic's on 30 links of 30
/// instead of 25 (docs/mocc.md, "The startup's queue"). The training environment runs the same
/// core, so models learn with it.
pub const DRAIN_LATENCY_RATIO: f64 = 2.0;
/// The least standing queue, in base RTTs, the drain guard lets stand: that of a flow weighing
/// latency at least 4x throughput ([`Preference::drain_latency_ratio`]). A base RTT of queue
/// before the guard acts is 5x what the latency landmark's row allows (a p95 of 0.2 x the base):
/// on a 192 ms path whose bandwidth fell 1.8x the queue took 0.42 s to reach it and was 2.4 base
/// RTTs deep when the drain began (judge link 0). A quarter is where an MI shows a queue at all
/// ([`startup::STARTUP_EXIT_RATIO`]).
pub const DRAIN_MIN_QUEUE_RTTS: f64 = 0.25;
/// A latency gradient under this is a queue draining (seconds of RTT per second of sending; a full
/// buffer that drops the excess reads -1e-6 to 0).
pub const DRAIN_FALLING_GRADIENT: f64 = -0.01;
/// MIs over which the startup's cap, and a drain until it has samples of its own, take the
/// highest delivery-rate sample (two RTTs' worth).
pub const DRAIN_DELIVERED_MIS: u64 = 4;
/// Default preference: mostly throughput (the issue's first target objective).
pub const DEFAULT_WEIGHTS: [f64; WEIGHTS] = [0.8, 0.1, 0.1];
/// Tolerance on `sum(w) = 1` (weights typed as decimals: 0.1 + 0.2 != 0.3).
pub const WEIGHT_SUM_TOLERANCE: f64 = 1e-6;

/// The name of the model's input and output tensors.
pub const INPUT_NAME: &str = "obs";
pub const OUTPUT_NAME: &str = "action";
/// `polycc.format` of models this code can run.
pub const MODEL_FORMAT: &str = "mocc-1";
/// Metadata keys every model must carry (ONNX `metadata_props`).
pub const REQUIRED_METADATA: [&str; 8] = [
    "polycc.format",
    "polycc.obs_layout",
    "polycc.history",
    "polycc.action_alpha",
    "polycc.action_clip",
    "polycc.normalization",
    "polycc.train_command",
    "polycc.seed",
];

/// The rate update of MOCC/Aurora: `x (1 + alpha a)` for `a >= 0`, else `x / (1 - alpha a)`.
/// Symmetric in log space: `a` then `-a` returns to `x`.
pub fn rate_update(rate_bytes_per_sec: f64, action: f64) -> f64 {
    if action >= 0.0 {
        rate_bytes_per_sec * (1.0 + ACTION_ALPHA * action)
    } else {
        rate_bytes_per_sec / (1.0 - ACTION_ALPHA * action)
    }
}

/// The model metadata key that names the latency ratio's base ([`RttBase`]); models without it
/// were trained on [`RttBase::Lowest`].
pub const RTT_BASE_KEY: &str = "polycc.rtt_base";
/// How far back [`RttBase::Recent`] looks (BBR's min RTT filter).
pub const RECENT_RTT_WINDOW: Duration = Duration::from_secs(10);

/// What an MI's latency ratio divides its mean RTT by. With the lowest MI RTT the flow ever saw,
/// a path that got slower reads as a standing queue forever: after a drop from 10 to 1 Mbit/s a
/// packet's own crossing of a short path's bottleneck adds ~10 ms with no queue at all, and a
/// model trained to back off at latency ratios above 1 backs off without end (issue 18, judge
/// links with a bandwidth drop). Over the last [`RECENT_RTT_WINDOW`], the ratio returns to 1
/// once the slower path has been seen for that long. The model says which it was trained on
/// ([`RTT_BASE_KEY`]); the history keeps both, so a model swapped in mid-flow reads its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RttBase {
    /// The lowest MI mean RTT so far (`lowest`; every model before the key).
    #[default]
    Lowest,
    /// The lowest over the last [`RECENT_RTT_WINDOW`] (`lowest-10s`).
    Recent,
}

impl RttBase {
    /// The metadata value.
    pub fn name(self) -> &'static str {
        match self {
            RttBase::Lowest => "lowest",
            RttBase::Recent => "lowest-10s",
        }
    }

    /// From a model's metadata value (`None`: the key is absent).
    pub fn from_metadata(value: Option<&str>) -> Result<RttBase, String> {
        match value.map(str::trim) {
            None | Some("lowest") => Ok(RttBase::Lowest),
            Some("lowest-10s") => Ok(RttBase::Recent),
            Some(other) => Err(format!("`{other}` is not a latency base this build computes (lowest, lowest-10s)")),
        }
    }
}

/// What a report means for the MI clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Keep sending at the current rate.
    Continue,
    /// The MI is over: the actor must choose an action ([`MoccCore::act`]) for the next one.
    DecisionDue,
}

/// MOCC's network side: MIs over reports, the observation history and the rate. The actor
/// (model or training environment) is outside.
#[derive(Clone, Debug)]
pub struct MoccCore {
    info: FlowInfo,
    monitor: Monitor,
    history: History,
    /// `None` while starting (no rate yet).
    rate: Option<Rate>,
    planned_end: Duration,
    /// Mean RTT of the newest completed MI (the next MI's length).
    last_mi_rtt: Option<Duration>,
    /// MIs completed since the last [`MoccCore::take_completed`] (the gym's reward).
    completed: Vec<MiResult>,
    /// A fusion sync imposed this window until the next report.
    cwnd_override: Option<u64>,
    /// The latency ratio the observation carries (the actor's: a model's metadata, the gym's).
    rtt_base: RttBase,
    /// The reports' delivery-rate samples, a maximum over the newest [`DRAIN_DELIVERED_MIS`] MIs
    /// (the startup's cap and hand-over), and the MIs completed so far (its rounds).
    delivered: WindowedMax,
    mis_completed: u64,
    /// Who decides the next rate: the startup's growth, a drain, or the actor ([`startup`]).
    phase: Phase,
    /// The first MI the history holds: the first the actor's rates sent since the startup or
    /// the latest drain, as in a training episode, which starts from a neutral history.
    actor_from: u64,
    /// The run of reports whose every RTT sample was [`DRAIN_LATENCY_RATIO`] x the lowest RTT plus
    /// 2 x the RTT noise ([`History::rtt_noise`]): the drain guard acts on a queue the reports
    /// show, not on ACK jitter.
    queued: startup::QueuedRun,
    /// The latency ratio of the queue the drain guard acts on ([`Preference::drain_latency_ratio`];
    /// [`DRAIN_LATENCY_RATIO`] until a preference is set).
    drain_ratio: f64,
    /// The flow's share of the bottleneck, from a dither of its rate ([`share`]); `None`: off.
    share: Option<ShareProbe>,
    /// The rate the actor chose for the open MI, before the dither: the next action's base.
    actor_rate: Option<Rate>,
}

impl MoccCore {
    /// A flow's core; with `initial_rate` it sends at that rate from time zero (the training
    /// environment), otherwise it starts with the initial window, turns it into a rate at the
    /// first RTT sample and grows from there to the path's rate ([`startup`]).
    pub fn new(info: FlowInfo, initial_rate: Option<Rate>) -> MoccCore {
        let mut core = MoccCore {
            info,
            monitor: Monitor::new(false),
            history: History::default(),
            rate: None,
            planned_end: Duration::ZERO,
            last_mi_rtt: None,
            completed: Vec::new(),
            cwnd_override: None,
            rtt_base: RttBase::default(),
            delivered: WindowedMax::new(DRAIN_DELIVERED_MIS),
            mis_completed: 0,
            phase: if initial_rate.is_some() { Phase::Actor } else { Phase::GROWING },
            actor_from: 0,
            queued: startup::QueuedRun::default(),
            drain_ratio: DRAIN_LATENCY_RATIO,
            share: None,
            actor_rate: None,
        };
        if let Some(r) = initial_rate {
            core.start_mi(Duration::ZERO, r);
        }
        core
    }

    /// With `Some(seed)`, dither the actor's rates from the next decision on and nudge them toward
    /// an equal share of the bottleneck ([`share`]), the flow's own seed drawing the dither; with
    /// `None`, the actor's rates as they are.
    pub fn set_share(&mut self, seed: Option<u64>) {
        self.share = seed.map(ShareProbe::new);
    }

    /// The elasticity of the flow's deliveries to its rate ([`ShareProbe::elasticity`]).
    pub fn elasticity(&self) -> Option<f64> {
        self.share.as_ref().and_then(ShareProbe::elasticity)
    }

    fn min_rate(&self) -> Rate {
        Rate::from_bytes_per_sec(MIN_RATE_PACKETS_PER_SEC * self.info.mss_bytes as f64)
    }

    fn clamp(&self, r: Rate) -> Rate {
        let bps = r.bytes_per_sec();
        let bps = if bps.is_finite() { bps } else { self.min_rate().bytes_per_sec() };
        Rate::from_bytes_per_sec(bps).max(self.min_rate()).min(Rate::from_mbps(MAX_RATE_MBPS))
    }

    /// Start an MI at a rate the actor did not choose: not dithered.
    fn start_mi(&mut self, now: Duration, rate: Rate) {
        self.forget_actor_rate();
        self.send_mi(now, rate);
    }

    /// The rate is set from outside the actor (the startup, a drain, a fusion): the next action
    /// moves it, and the dithers sent so far are not what the open MI sends.
    fn forget_actor_rate(&mut self) {
        self.actor_rate = None;
        if let Some(p) = &mut self.share {
            p.clear_pending();
        }
    }

    fn send_mi(&mut self, now: Duration, rate: Rate) {
        let rate = self.clamp(rate);
        self.rate = Some(rate);
        self.monitor.start(now, rate);
        self.planned_end = now + self.mi_length(rate);
    }

    /// How long an MI at `rate` lasts: [`MI_RTTS`] of the newest MI's mean RTT, at least
    /// [`MIN_MI_PACKETS`].
    fn mi_length(&self, rate: Rate) -> Duration {
        let rtt = self.last_mi_rtt.or(self.monitor.srtt()).unwrap_or(pcc::NOMINAL_RTT);
        pcc::mi_duration(rtt, MI_RTTS, rate, self.info.mss_bytes, MIN_MI_PACKETS)
    }

    /// Credit a report to the MIs; says whether the open MI is over.
    pub fn on_report(&mut self, r: &Report) -> Step {
        self.cwnd_override = None;
        if let Some(d) = r.delivery_rate.filter(|d| d.bytes_per_sec().is_finite() && d.bytes_per_sec() > 0.0) {
            self.delivered.update(self.mis_completed, d);
        }
        // A queue is judged against the lowest MI mean RTT, the latency ratio's base, not the
        // lowest sample: under ACK jitter the lowest sample is the jitter's bottom, which a sparse
        // flow sees, while a denser one's ACKs bunch behind long draws and sit near its top (the
        // guest at 100 ms +/- 20: 81 ms lowest, 113-116 ms at 8 Mbit/s of 20 with no queue).
        let queue_base = self.history.min_mi_rtt().or(self.monitor.min_rtt());
        let jitter = 2.0 * self.monitor.rtt_deviation();
        self.phase.observe_report(r, queue_base, jitter, self.monitor.min_rtt(), self.delivered.get());
        self.queued = self.queued.next(r, queue_base, self.drain_ratio, 2.0 * self.history.rtt_noise());
        for mi in self.monitor.observe(r) {
            if let Some(p) = &mut self.share {
                p.observe(&mi);
            }
            let f = self.history.features(&mi, self.info.mss_bytes, r.now);
            self.phase.observe(&f, self.rtt_base);
            if !self.phase.running() && mi.id >= self.actor_from {
                self.history.push(f);
            }
            if let Some(rtt) = mi.rtt_mean {
                self.last_mi_rtt = Some(rtt);
            }
            self.mis_completed += 1;
            self.completed.push(mi);
        }
        match self.rate {
            None => {
                if let Some(rtt) = self.monitor.srtt() {
                    self.start_mi(r.now, crate::units::rate_of_window(self.info.init_cwnd_bytes, rtt));
                }
                Step::Continue
            }
            Some(_) if pcc::mi_due(r, self.planned_end) => Step::DecisionDue,
            Some(_) => Step::Continue,
        }
    }

    /// The observation's history part (30 raw values).
    pub fn observation(&self) -> [f32; OBS_LEN] {
        self.history.observation(self.rtt_base)
    }

    /// The preference the flow serves, from now on: it sets the queue the drain guard acts on
    /// ([`Preference::drain_latency_ratio`]).
    pub fn set_preference(&mut self, w: &Preference) {
        self.drain_ratio = w.drain_latency_ratio();
    }

    /// The latency ratio's base the observation uses from now on (the history holds both).
    pub fn set_rtt_base(&mut self, base: RttBase) {
        self.rtt_base = base;
    }

    pub fn rtt_base(&self) -> RttBase {
        self.rtt_base
    }

    /// The model input for preference `w`: `[w_thr, w_lat, w_loss] ++ observation`.
    pub fn model_input(&self, w: &Preference) -> [f32; MODEL_INPUT_LEN] {
        let mut input = [0.0f32; MODEL_INPUT_LEN];
        for (i, v) in w.weights().iter().enumerate() {
            input[i] = *v as f32;
        }
        input[WEIGHTS..].copy_from_slice(&self.observation());
        input
    }

    /// Apply an action at `now`: the next MI starts at the updated rate. A non-finite action
    /// holds the rate. The action is not asked for ([`MoccCore::outside_actor`]) and not used
    /// during the startup, and from a decision whose newest MI shows a standing queue
    /// ([`DRAIN_LATENCY_RATIO`]) until it is drained: then the phase sets the rate
    /// ([`Phase::next_rate`]), and at its end the actor starts again from the path's delivery
    /// rate and a neutral history.
    pub fn act(&mut self, now: Duration, action: f64) {
        let Some(rate) = self.rate else { return };
        if !self.phase.running() && self.standing_queue() {
            // The reports that showed the queue read the bottleneck's rate: after a bandwidth
            // drop the newest MIs' highest sample is the rate from before it.
            self.phase = Phase::guard_draining(now, self.queued.delivered());
        }
        if self.phase.running() {
            // An RTT as the startup counts them: the smoothed RTT plus 4 deviations (TCP's RTO).
            let rtt = self.monitor.srtt().map(|s| s + Duration::from_secs_f64(4.0 * self.monitor.rtt_deviation()));
            let was = self.phase;
            let next = self.phase.next_rate(rate, self.delivered.get(), now, rtt);
            self.actor_takes_over_if_done(was);
            self.start_mi(now, next);
            return;
        }
        let a = if action.is_finite() { action } else { 0.0 };
        let Some(nudge) = self.share.as_ref().map(ShareProbe::nudge) else {
            self.send_mi(now, Rate::from_bytes_per_sec(rate_update(rate.bytes_per_sec(), a)));
            return;
        };
        // The next action moves the rate the actor chose, not the dithered one the MI sent.
        let chosen = rate_update(self.actor_rate.unwrap_or(rate).bytes_per_sec(), a) * nudge;
        let chosen = self.clamp(Rate::from_bytes_per_sec(chosen));
        let id = self.monitor.next_id();
        let packets = self.mi_length(chosen).as_secs_f64() * chosen.bytes_per_sec() / self.info.mss_bytes.max(1) as f64;
        let sent = match &mut self.share {
            Some(p) => Rate::from_bytes_per_sec(p.dither(id, chosen.bytes_per_sec(), packets)),
            None => chosen,
        };
        self.send_mi(now, sent);
        self.actor_rate = Some(chosen);
    }

    /// Where the startup or a drain was running (`was`) and is over, the history starts afresh with
    /// the next MI: the actor's first, as in a training episode. The end of the drain guard's drain
    /// (a bandwidth drop) also forgets the path's RTT ([`History::restart`]).
    fn actor_takes_over_if_done(&mut self, was: Phase) {
        if was.running() && !self.phase.running() && self.monitor.next_id() > 0 {
            self.actor_from = self.monitor.next_id();
            if was.is_guard_drain() {
                self.history.restart();
            } else {
                self.history.restart_from_startup();
            }
        }
    }

    /// Whether the next decision is the startup's or a drain's, not the actor's: also where the
    /// drain guard will start a drain at it ([`MoccCore::standing_queue`]), so that no inference
    /// is run for an action [`MoccCore::act`] would not use.
    pub fn outside_actor(&self) -> bool {
        self.phase.running() || self.standing_queue()
    }

    /// The drain guard's trigger: [`startup::STARTUP_QUEUE_REPORTS`] reports in a row
    /// ([`startup::STARTUP_QUEUE_SAMPLES`] RTT samples at least) show a standing queue of the
    /// preference's size or more (a base RTT at most, [`Preference::drain_latency_ratio`], above
    /// the RTT noise), and the newest MI shows a queue that is not falling ([`startup::shows_queue`]). The reports lead: an MI is judged an RTT
    /// after it ends, and waiting for one whose latency ratio reached 2 let a bandwidth drop's queue grow for that
    /// RTT more (p95 RTT 2.0-2.2 x the base after 20 -> 10 Mbit/s at 100 ms, now 1.7-1.8;
    /// `algorithms/sim/tests/mocc_startup.rs`). The noise is the RTT samples' spread around
    /// each MI's trend, not the smoothed RTT deviation, which a queue's own rise inflates.
    pub fn standing_queue(&self) -> bool {
        self.queued.shows_queue() && self.history.mis.back().is_some_and(|newest| startup::shows_queue(newest, self.rtt_base))
    }

    /// MIs completed since the last call, oldest first.
    pub fn take_completed(&mut self) -> Vec<MiResult> {
        std::mem::take(&mut self.completed)
    }

    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    pub fn decision(&self) -> Decision {
        pcc::decision(
            self.rate,
            self.info.init_cwnd_bytes,
            self.monitor.srtt(),
            self.info.mss_bytes,
            MIN_CWND_PACKETS,
            self.cwnd_override,
        )
    }

    /// A rate from outside (a fusion's) that is not the flow's own also ends the startup: the flow
    /// is where the fusion put it.
    pub fn sync(&mut self, to: Sync) {
        match to {
            Sync::Rate(r) => {
                if pcc::is_outside_rate(self.rate, r) {
                    let r = self.clamp(r);
                    self.rate = Some(r);
                    self.forget_actor_rate();
                    self.monitor.set_open_rate(r);
                    let was = self.phase;
                    self.phase = Phase::Actor;
                    self.actor_takes_over_if_done(was);
                }
            }
            Sync::Cwnd(c) => {
                if self.rate.is_some() {
                    self.cwnd_override = Some(c.max(MIN_CWND_PACKETS * self.info.mss_bytes));
                    if let Some(rtt) = self.monitor.srtt() {
                        let r = self.clamp(crate::units::rate_of_window(c, rtt));
                        if pcc::is_outside_rate(self.rate, r) {
                            self.forget_actor_rate();
                            let was = self.phase;
                            self.phase = Phase::Actor;
                            self.actor_takes_over_if_done(was);
                        }
                        self.rate = Some(r);
                        self.monitor.set_open_rate(r);
                    }
                }
            }
        }
    }

    pub fn estimates(&self) -> Estimates {
        Estimates { bandwidth: None, min_rtt: self.monitor.min_rtt(), srtt: self.monitor.srtt() }
    }
}

mod history;
pub use history::{History, MiFeatures};
mod preference;
pub use preference::{Preference, PreferenceError};
mod model;
pub use model::{MoccModel, ModelError, ModelSlot};
pub mod share;
use share::ShareProbe;
pub mod startup;
use startup::Phase;

/// MOCC's per-flow parameters (a policy file's `{ alg = "mocc", weights = [0.8, 0.1, 0.1] }`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MoccConfig {
    /// The preference `<w_thr, w_lat, w_loss>`, each in (0, 1), summing to 1 (default 0.8, 0.1, 0.1).
    pub weights: Vec<f64>,
    /// The model file; `None`: the process's default (`onnx/mocc.onnx`). Loaded at the boundary
    /// (flag parser, agent) into [`MoccConfig::slot`].
    pub model: Option<String>,
    /// Initial rate in Mbit/s; `None`: the initial window per RTT (default).
    pub initial_rate_mbps: Option<f64>,
    /// Dither the rate and nudge it toward an equal share of a shared bottleneck ([`share`]).
    /// Default off: in the simulator it brings two flows 5 s apart from Jain 0.54 to 0.99, in the
    /// guest it read the deliveries wrong and made the pairs less fair (docs/mocc.md, "A share
    /// measured by its elasticity").
    pub fair_share: bool,
    /// Seed for the dither; the policy sets one per flow.
    #[serde(skip)]
    pub seed: u64,
    /// The loaded model, shared by flows; without one a flow holds its rate (action 0).
    #[serde(skip)]
    pub slot: Option<ModelSlot>,
}

impl Default for MoccConfig {
    fn default() -> Self {
        MoccConfig {
            weights: DEFAULT_WEIGHTS.to_vec(),
            model: None,
            initial_rate_mbps: None,
            fair_share: false,
            seed: 0,
            slot: None,
        }
    }
}

impl MoccConfig {
    pub fn preference(&self) -> Result<Preference, PreferenceError> {
        Preference::new(&self.weights)
    }
}

/// A MOCC flow: [`MoccCore`] with the shared model as its actor.
#[derive(Debug)]
pub struct Mocc {
    core: MoccCore,
    preference: Preference,
    slot: Option<ModelSlot>,
    inference_errors: u64,
    decisions: u64,
}

impl Mocc {
    /// Decisions for which the model failed (the rate was held).
    pub fn inference_errors(&self) -> u64 {
        self.inference_errors
    }

    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    pub fn preference(&self) -> Preference {
        self.preference
    }

    fn choose(&mut self) -> f64 {
        let model = self.slot.as_ref().and_then(ModelSlot::get);
        if let Some(m) = &model {
            self.core.set_rtt_base(m.rtt_base());
        }
        let input = self.core.model_input(&self.preference);
        match model.map(|m| m.action(&input)) {
            Some(Ok(a)) => a,
            Some(Err(_)) | None => {
                self.inference_errors += 1;
                0.0
            }
        }
    }
}

impl CongestionControl for Mocc {
    fn name(&self) -> &'static str {
        "mocc"
    }

    /// The training cadence: once-per-RTT reports would stretch the 0.5-RTT MIs the model
    /// learned on.
    fn report_interval(&self) -> Option<Duration> {
        Some(REPORT_INTERVAL)
    }

    fn on_report(&mut self, report: &Report) -> Decision {
        if self.core.on_report(report) == Step::DecisionDue {
            let a = if self.core.outside_actor() {
                0.0
            } else {
                self.decisions += 1;
                self.choose()
            };
            self.core.act(report.now, a);
        }
        self.core.take_completed();
        self.core.decision()
    }

    fn decision(&self) -> Decision {
        self.core.decision()
    }

    fn sync(&mut self, to: Sync) {
        self.core.sync(to);
    }

    fn estimates(&self) -> Estimates {
        self.core.estimates()
    }
}

/// Hand-built ONNX models for tests and benchmarks.
pub mod synthetic;

impl Algorithm for MoccConfig {
    type Controller = Mocc;
    const NAME: &'static str = "mocc";
    const SUMMARY: &'static str = "MOCC: a learned policy (ONNX) steered by a throughput/latency/loss preference";
    const LEARNED: bool = true;

    /// A per-flow instance. Invalid weights fall back to the default preference (validate first).
    fn build(&self, info: FlowInfo) -> Mocc {
        let initial = self.initial_rate_mbps.filter(|r| r.is_finite() && *r > 0.0).map(Rate::from_mbps);
        let mut core = MoccCore::new(info, initial);
        core.set_share(self.fair_share.then_some(self.seed));
        let preference = self.preference().unwrap_or_default();
        core.set_preference(&preference);
        Mocc { core, preference, slot: self.slot.clone(), inference_errors: 0, decisions: 0 }
    }

    fn validate(&self) -> Result<(), PolicyError> {
        self.preference().map_err(|e| PolicyError::InvalidParameter { algorithm: "mocc", reason: e.to_string() })?;
        if let Some(r) = self.initial_rate_mbps {
            crate::config::check_range("mocc", "initial_rate_mbps", r, 0.0, MAX_RATE_MBPS, false)?;
        }
        Ok(())
    }

    fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }
}

#[cfg(test)]
mod tests;
