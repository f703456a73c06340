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
//!   MI length = 0.5 x the previous MI's mean RTT, at least 5 packets
//!   pacing = x,  cwnd = 2 x rate x srtt (>= 4 packets)
//!   observation = [w_thr, w_lat, w_loss] ++ HISTORY x [send ratio, latency ratio, latency gradient]
//!     send ratio      = MI send rate / MI receive rate  (1 when nothing was sent or received)
//!     latency ratio   = MI mean RTT / lowest MI mean RTT so far
//!     latency gradient = dRTT/dT over the MI (seconds of RTT per second of sending)
//! ```
//!
//! The same [`MoccCore`] (MIs, observation, rate update) runs in the agent, in `polycc-sim` and
//! in the training environment (`onnx/gym`, the `polycc_gym` Python module): training and serving
//! compute observations with the same code. Only the actor differs: [`Mocc`] asks a
//! [`MoccModel`] (ONNX, run with tract), the gym asks Python.
//!
//! States: `Starting` (no rate yet: the initial window, unpaced, until the first RTT sample;
//! skipped when an initial rate is configured) -> `Running` (one MI at a time, an action at the
//! end of each).
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
//! - An MI whose packets were all lost has the send ratio [`MAX_SEND_RATIO`] (Aurora: 1, which
//!   makes a dead path look healthy).
//! - Rates are clamped to [[`MIN_RATE_PACKETS_PER_SEC`] packets/s, [`MAX_RATE_MBPS`]]; the action
//!   to the model's `polycc.action_clip`.

use crate::pcc::{self, MiResult, Monitor};
use crate::config::PolicyError;
use crate::{CongestionControl, Decision, Estimates, FlowInfo, Rate, Report, Sync};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
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

/// The rate update of MOCC/Aurora: `x (1 + alpha a)` for `a >= 0`, else `x / (1 - alpha a)`.
/// Symmetric in log space: `a` then `-a` returns to `x`.
pub fn rate_update(rate_bytes_per_sec: f64, action: f64) -> f64 {
    if action >= 0.0 {
        rate_bytes_per_sec * (1.0 + ACTION_ALPHA * action)
    } else {
        rate_bytes_per_sec / (1.0 - ACTION_ALPHA * action)
    }
}

/// One MI's three features, as the model sees them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MiFeatures {
    pub send_ratio: f64,
    pub latency_ratio: f64,
    pub latency_gradient: f64,
}

impl MiFeatures {
    /// What the history holds before any MI completed.
    pub const NEUTRAL: MiFeatures = MiFeatures { send_ratio: 1.0, latency_ratio: 1.0, latency_gradient: 0.0 };
}

/// The history of MI features: the observation's network-state part.
#[derive(Clone, Debug)]
pub struct History {
    mis: VecDeque<MiFeatures>,
    /// Lowest MI mean RTT so far (the latency ratio's denominator).
    min_mi_rtt: Option<Duration>,
}

impl Default for History {
    fn default() -> Self {
        History { mis: std::iter::repeat_n(MiFeatures::NEUTRAL, HISTORY).collect(), min_mi_rtt: None }
    }
}

impl History {
    /// The features of a completed MI; it also lowers the minimum MI RTT.
    pub fn features(&mut self, mi: &MiResult, mss_bytes: u64) -> MiFeatures {
        if let Some(rtt) = mi.rtt_mean.filter(|d| !d.is_zero()) {
            self.min_mi_rtt = Some(self.min_mi_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        let received = mi.throughput.bytes_per_sec();
        let send_ratio = if received > 0.0 {
            (mi.rate.bytes_per_sec() / received).clamp(0.0, MAX_SEND_RATIO)
        } else if mi.packets > 0.0 && mss_bytes > 0 {
            MAX_SEND_RATIO // everything it sent was lost
        } else {
            1.0
        };
        let latency_ratio = match (mi.rtt_mean, self.min_mi_rtt) {
            (Some(rtt), Some(min)) if !min.is_zero() => {
                (rtt.as_secs_f64() / min.as_secs_f64()).clamp(1.0, MAX_LATENCY_RATIO)
            }
            // No RTT sample in the MI: the latency did not visibly change.
            _ => self.mis.back().map_or(1.0, |m| m.latency_ratio),
        };
        let latency_gradient = if mi.rtt_gradient.is_finite() {
            mi.rtt_gradient.clamp(-MAX_LATENCY_GRADIENT, MAX_LATENCY_GRADIENT)
        } else {
            0.0
        };
        MiFeatures { send_ratio, latency_ratio, latency_gradient }
    }

    pub fn push(&mut self, f: MiFeatures) {
        self.mis.push_back(f);
        while self.mis.len() > HISTORY {
            self.mis.pop_front();
        }
    }

    /// The 30 raw values, oldest MI first: `obs[3 i + k]`, k = send ratio, latency ratio,
    /// latency gradient.
    pub fn observation(&self) -> [f32; OBS_LEN] {
        let mut obs = [0.0f32; OBS_LEN];
        for (i, m) in self.mis.iter().enumerate() {
            obs[FEATURES * i] = m.send_ratio as f32;
            obs[FEATURES * i + 1] = m.latency_ratio as f32;
            obs[FEATURES * i + 2] = m.latency_gradient as f32;
        }
        obs
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
}

impl MoccCore {
    /// A flow's core; with `initial_rate` it sends at that rate from time zero (the training
    /// environment), otherwise it starts with the initial window and turns it into a rate at the
    /// first RTT sample.
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
        };
        if let Some(r) = initial_rate {
            core.start_mi(Duration::ZERO, r);
        }
        core
    }

    fn min_rate(&self) -> Rate {
        Rate::from_bytes_per_sec(MIN_RATE_PACKETS_PER_SEC * self.info.mss_bytes as f64)
    }

    fn clamp(&self, r: Rate) -> Rate {
        let bps = r.bytes_per_sec();
        let bps = if bps.is_finite() { bps } else { self.min_rate().bytes_per_sec() };
        Rate::from_bytes_per_sec(bps).max(self.min_rate()).min(Rate::from_mbps(MAX_RATE_MBPS))
    }

    fn start_mi(&mut self, now: Duration, rate: Rate) {
        let rate = self.clamp(rate);
        self.rate = Some(rate);
        self.monitor.start(now, rate);
        let rtt = self.last_mi_rtt.or(self.monitor.srtt()).unwrap_or(pcc::NOMINAL_RTT);
        self.planned_end = now + pcc::mi_duration(rtt, MI_RTTS, rate, self.info.mss_bytes, MIN_MI_PACKETS);
    }

    /// Credit a report to the MIs; says whether the open MI is over.
    pub fn on_report(&mut self, r: &Report) -> Step {
        self.cwnd_override = None;
        for mi in self.monitor.observe(r) {
            let f = self.history.features(&mi, self.info.mss_bytes);
            self.history.push(f);
            if let Some(rtt) = mi.rtt_mean {
                self.last_mi_rtt = Some(rtt);
            }
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
        self.history.observation()
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
    /// holds the rate.
    pub fn act(&mut self, now: Duration, action: f64) {
        let Some(rate) = self.rate else { return };
        let a = if action.is_finite() { action } else { 0.0 };
        let next = Rate::from_bytes_per_sec(rate_update(rate.bytes_per_sec(), a));
        self.start_mi(now, next);
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

    pub fn sync(&mut self, to: Sync) {
        match to {
            Sync::Rate(r) => {
                if pcc::is_outside_rate(self.rate, r) {
                    let r = self.clamp(r);
                    self.rate = Some(r);
                    self.monitor.set_open_rate(r);
                }
            }
            Sync::Cwnd(c) => {
                if self.rate.is_some() {
                    self.cwnd_override = Some(c.max(MIN_CWND_PACKETS * self.info.mss_bytes));
                    if let Some(rtt) = self.monitor.srtt() {
                        let r = self.clamp(crate::units::rate_of_window(c, rtt));
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

/// A model file that cannot be used, with what to do about it.
#[derive(Debug, Error)]
pub enum ModelError {
    #[error("the MOCC model is not a readable ONNX file ({0}): re-export it (`PYTHONPATH=onnx/python python3 -m mocc.export`) or pass another --model")]
    Corrupt(String),
    #[error("the MOCC model has {found} inputs and {outputs} outputs: expected one input `obs` [N, 33] and one output `action` [N, 1]")]
    Arity { found: usize, outputs: usize },
    #[error(
        "the MOCC model's input has shape {found}: expected [N, {MODEL_INPUT_LEN}] (3 weights + 10 MIs x 3 features)"
    )]
    InputShape { found: String },
    #[error("the MOCC model's output has shape {found}: expected [N, 1] (the policy's mean action)")]
    OutputShape { found: String },
    #[error("the MOCC model lacks metadata {missing:?}: export it with `python3 -m mocc.export` (onnx/python), which writes all of {REQUIRED_METADATA:?}")]
    MissingMetadata { missing: Vec<String> },
    #[error("the MOCC model's metadata {key} = `{value}` is invalid: {reason}")]
    BadMetadata { key: &'static str, value: String, reason: String },
    #[error("the MOCC model cannot be prepared for inference ({0}): an operator tract does not support?")]
    Unsupported(String),
    #[error("MOCC inference failed: {0}")]
    Inference(String),
}

/// A validated MOCC policy network, ready to run. Built once at a boundary; shared by flows.
pub struct MoccModel {
    plan: Arc<TypedSimplePlan>,
    /// The inference state and input buffer reused from decision to decision: tract's
    /// `SimplePlan::run` builds a state (one slot per node, op states) and drops it on every call,
    /// and a fresh input tensor is one more allocation. A decision that finds it in use by another
    /// thread runs on a state of its own (`SimplePlan::run`) instead of waiting.
    runner: Mutex<Runner>,
    action_clip: f64,
    metadata: BTreeMap<String, String>,
    size_bytes: usize,
}

/// A reusable tract state and the `[1, MODEL_INPUT_LEN]` input tensor it is fed.
struct Runner {
    state: TypedSimpleState,
    /// Shared with the state only during a run; unique again afterwards, so it is refilled in place.
    input: Arc<Tensor>,
}

impl Runner {
    fn new(plan: &Arc<TypedSimplePlan>) -> TractResult<Runner> {
        Ok(Runner { state: plan.spawn()?, input: Arc::new(Tensor::zero::<f32>(&[1, MODEL_INPUT_LEN])?) })
    }

    fn run(&mut self, input: &[f32; MODEL_INPUT_LEN]) -> TractResult<TVec<TValue>> {
        match Arc::get_mut(&mut self.input) {
            Some(t) => t.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?.copy_from_slice(input),
            None => self.input = Arc::new(Tensor::from_shape(&[1, MODEL_INPUT_LEN], input)?),
        }
        let out = self.state.run(tvec!(TValue::from_const(self.input.clone())));
        if out.is_err() {
            // A failed run leaves the turn's values behind: start the next one clean.
            self.state.reset_turn()?;
        }
        out
    }
}

impl fmt::Debug for MoccModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MoccModel")
            .field("action_clip", &self.action_clip)
            .field("size_bytes", &self.size_bytes)
            .field("seed", &self.metadata.get("polycc.seed"))
            .finish()
    }
}

fn dims_of(v: &tract_onnx::pb::ValueInfoProto) -> Option<Vec<Option<i64>>> {
    use tract_onnx::pb::tensor_shape_proto::dimension::Value;
    use tract_onnx::pb::type_proto::Value as Type;
    let Some(Type::TensorType(t)) = v.r#type.as_ref()?.value.as_ref() else { return None };
    Some(
        t.shape
            .as_ref()?
            .dim
            .iter()
            .map(|d| match d.value {
                Some(Value::DimValue(n)) => Some(n),
                _ => None,
            })
            .collect(),
    )
}

fn shape_text(dims: &Option<Vec<Option<i64>>>) -> String {
    match dims {
        None => "unknown".into(),
        Some(d) => format!(
            "[{}]",
            d.iter().map(|x| x.map_or("N".to_string(), |n| n.to_string())).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `[N, len]` with N free or any size.
fn is_batch_of(dims: &Option<Vec<Option<i64>>>, len: i64) -> bool {
    matches!(dims, Some(d) if d.len() == 2 && d[1] == Some(len))
}

impl MoccModel {
    /// Parse and validate an ONNX model (the bytes of `onnx/mocc.onnx`).
    pub fn from_bytes(bytes: &[u8]) -> Result<MoccModel, ModelError> {
        let onnx = tract_onnx::onnx();
        let proto = onnx.proto_model_for_read(&mut &bytes[..]).map_err(|e| ModelError::Corrupt(format!("{e:#}")))?;
        let graph = proto.graph.as_ref().ok_or_else(|| ModelError::Corrupt("no graph in the file".into()))?;
        // Initializers may be listed as inputs by old exporters: the real inputs are the others.
        let inits: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let inputs: Vec<_> = graph.input.iter().filter(|i| !inits.contains(&i.name.as_str())).collect();
        if inputs.len() != 1 || graph.output.len() != 1 {
            return Err(ModelError::Arity { found: inputs.len(), outputs: graph.output.len() });
        }
        let in_dims = dims_of(inputs[0]);
        if !is_batch_of(&in_dims, MODEL_INPUT_LEN as i64) {
            return Err(ModelError::InputShape { found: shape_text(&in_dims) });
        }
        let out_dims = dims_of(&graph.output[0]);
        if !is_batch_of(&out_dims, 1) {
            return Err(ModelError::OutputShape { found: shape_text(&out_dims) });
        }
        let metadata: BTreeMap<String, String> =
            proto.metadata_props.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
        let missing: Vec<String> =
            REQUIRED_METADATA.iter().filter(|k| !metadata.contains_key(**k)).map(|k| k.to_string()).collect();
        if !missing.is_empty() {
            return Err(ModelError::MissingMetadata { missing });
        }
        let get = |k: &str| metadata[k].trim().to_string();
        if get("polycc.format") != MODEL_FORMAT {
            return Err(ModelError::BadMetadata {
                key: "polycc.format",
                value: get("polycc.format"),
                reason: format!("this build runs `{MODEL_FORMAT}` models"),
            });
        }
        if get("polycc.history").parse::<usize>().ok() != Some(HISTORY) {
            return Err(ModelError::BadMetadata {
                key: "polycc.history",
                value: get("polycc.history"),
                reason: format!("the observation holds {HISTORY} MIs"),
            });
        }
        let alpha = get("polycc.action_alpha").parse::<f64>().ok();
        if alpha.is_none_or(|a| (a - ACTION_ALPHA).abs() > 1e-12) {
            return Err(ModelError::BadMetadata {
                key: "polycc.action_alpha",
                value: get("polycc.action_alpha"),
                reason: format!(
                    "the rate update uses alpha = {ACTION_ALPHA}; a model trained with another would mis-step"
                ),
            });
        }
        let action_clip = match get("polycc.action_clip").parse::<f64>() {
            Ok(c) if c.is_finite() && c > 0.0 => c,
            _ => {
                return Err(ModelError::BadMetadata {
                    key: "polycc.action_clip",
                    value: get("polycc.action_clip"),
                    reason: "must be a positive number".into(),
                })
            }
        };
        let model = onnx
            .model_for_proto_model(&proto)
            .and_then(|m| m.with_input_fact(0, f32::fact([1, MODEL_INPUT_LEN]).into()))
            .map_err(|e| ModelError::Corrupt(format!("{e:#}")))?;
        let plan = model
            .into_optimized()
            .and_then(|m| m.into_runnable())
            .map_err(|e| ModelError::Unsupported(format!("{e:#}")))?;
        let runner = Mutex::new(Runner::new(&plan).map_err(|e| ModelError::Unsupported(format!("{e:#}")))?);
        let m = MoccModel { plan, runner, action_clip, metadata, size_bytes: bytes.len() };
        // One inference on a neutral observation proves the graph runs and yields one action.
        let probe = MoccCore::new(FlowInfo::default(), None).model_input(&Preference::default());
        let a = m.infer(&probe)?;
        if !a.is_finite() {
            return Err(ModelError::Inference(format!("the model maps a neutral observation to {a}")));
        }
        Ok(m)
    }

    /// The mean action for one input, before clipping.
    pub fn infer(&self, input: &[f32; MODEL_INPUT_LEN]) -> Result<f32, ModelError> {
        let out = match self.runner.try_lock() {
            Ok(mut runner) => runner.run(input),
            // A panic elsewhere while holding the lock cannot corrupt the state: `run` resets it.
            Err(TryLockError::Poisoned(p)) => p.into_inner().run(input),
            Err(TryLockError::WouldBlock) => {
                Tensor::from_shape(&[1, MODEL_INPUT_LEN], input).and_then(|t| self.plan.run(tvec!(t.into_tvalue())))
            }
        }
        .map_err(|e| ModelError::Inference(format!("{e:#}")))?;
        let view = out.first().ok_or_else(|| ModelError::Inference("no output".into()))?;
        let view = view.to_plain_array_view::<f32>().map_err(|e| ModelError::Inference(e.to_string()))?;
        if view.len() != 1 {
            return Err(ModelError::Inference(format!("{} output values for one input, expected 1", view.len())));
        }
        Ok(view.iter().copied().next().unwrap_or(f32::NAN))
    }

    /// The action a flow applies: the mean action clipped to `[-clip, clip]`.
    pub fn action(&self, input: &[f32; MODEL_INPUT_LEN]) -> Result<f64, ModelError> {
        let a = self.infer(input)? as f64;
        if !a.is_finite() {
            return Err(ModelError::Inference(format!("non-finite action {a}")));
        }
        Ok(a.clamp(-self.action_clip, self.action_clip))
    }

    pub fn action_clip(&self) -> f64 {
        self.action_clip
    }

    /// The model's `metadata_props`.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// Operations in the optimized plan tract runs per decision (sources and constants included).
    pub fn plan_nodes(&self) -> usize {
        self.plan.model().nodes().len()
    }

    /// The optimized plan's operations, one `name (op)` per node, in evaluation order.
    pub fn plan_ops(&self) -> Vec<String> {
        let m = self.plan.model();
        self.plan
            .order_without_consts()
            .iter()
            .map(|&n| format!("{} ({})", m.node(n).name, m.node(n).op.name()))
            .collect()
    }
}

/// The model every MOCC flow of a process uses, swappable live: flows read it at each decision.
#[derive(Clone, Default)]
pub struct ModelSlot(Arc<RwLock<Option<Arc<MoccModel>>>>);

impl ModelSlot {
    pub fn new(model: MoccModel) -> ModelSlot {
        ModelSlot(Arc::new(RwLock::new(Some(Arc::new(model)))))
    }

    /// The model now in the slot.
    pub fn get(&self) -> Option<Arc<MoccModel>> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Put a (validated) model in the slot; returns the one it replaces.
    pub fn replace(&self, model: MoccModel) -> Option<Arc<MoccModel>> {
        let mut g = match self.0.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.replace(Arc::new(model))
    }
}

impl fmt::Debug for ModelSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.get() {
            Some(m) => write!(f, "ModelSlot({m:?})"),
            None => f.write_str("ModelSlot(empty)"),
        }
    }
}

impl PartialEq for ModelSlot {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

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
    /// The loaded model, shared by flows; without one a flow holds its rate (action 0).
    #[serde(skip)]
    pub slot: Option<ModelSlot>,
}

impl Default for MoccConfig {
    fn default() -> Self {
        MoccConfig { weights: DEFAULT_WEIGHTS.to_vec(), model: None, initial_rate_mbps: None, slot: None }
    }
}

impl MoccConfig {
    pub fn preference(&self) -> Result<Preference, PreferenceError> {
        Preference::new(&self.weights)
    }

    pub fn validate(&self) -> Result<(), PolicyError> {
        self.preference().map_err(|e| PolicyError::InvalidParameter { algorithm: "mocc", reason: e.to_string() })?;
        if let Some(r) = self.initial_rate_mbps {
            crate::config::check_range("mocc", "initial_rate_mbps", r, 0.0, MAX_RATE_MBPS, false)?;
        }
        Ok(())
    }

    /// A per-flow instance. Invalid weights fall back to the default preference (validate first).
    pub fn build(&self, info: FlowInfo) -> Mocc {
        let initial = self.initial_rate_mbps.filter(|r| r.is_finite() && *r > 0.0).map(Rate::from_mbps);
        Mocc {
            core: MoccCore::new(info, initial),
            preference: self.preference().unwrap_or_default(),
            slot: self.slot.clone(),
            inference_errors: 0,
            decisions: 0,
        }
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
        let input = self.core.model_input(&self.preference);
        match self.slot.as_ref().and_then(ModelSlot::get).map(|m| m.action(&input)) {
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
            let a = self.choose();
            self.decisions += 1;
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

/// Small hand-built ONNX models in MOCC's format, for tests and benchmarks that must not depend
/// on a trained model: `action = tanh(obs . weights + bias) x clip`, a real ONNX graph
/// (MatMul, Add, Tanh, Mul) with the metadata of [`REQUIRED_METADATA`].
pub mod synthetic {
    use super::*;
    use prost::Message;
    use tract_onnx::pb;

    /// ONNX `TensorProto.DataType.FLOAT`.
    const FLOAT: i32 = 1;

    /// Metadata a valid model carries (action clip 2).
    pub fn metadata() -> Vec<(String, String)> {
        [
            ("polycc.format", MODEL_FORMAT),
            (
                "polycc.obs_layout",
                "w_thr, w_lat, w_loss, then 10 MIs oldest first x (send_ratio, latency_ratio, latency_gradient)",
            ),
            ("polycc.history", "10"),
            ("polycc.action_alpha", "0.025"),
            ("polycc.action_clip", "2"),
            ("polycc.normalization", "{\"kind\": \"none\"}"),
            ("polycc.train_command", "synthetic (algorithms/src/mocc.rs)"),
            ("polycc.seed", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn value_info(name: &str, dims: &[Option<i64>]) -> pb::ValueInfoProto {
        use pb::tensor_shape_proto::{dimension::Value, Dimension};
        pb::ValueInfoProto {
            name: name.into(),
            r#type: Some(pb::TypeProto {
                denotation: String::new(),
                value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                    elem_type: FLOAT,
                    shape: Some(pb::TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|d| Dimension {
                                denotation: String::new(),
                                value: Some(match d {
                                    Some(n) => Value::DimValue(*n),
                                    None => Value::DimParam("N".into()),
                                }),
                            })
                            .collect(),
                    }),
                })),
            }),
            doc_string: String::new(),
        }
    }

    fn tensor(name: &str, dims: &[i64], data: Vec<f32>) -> pb::TensorProto {
        pb::TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: FLOAT,
            float_data: data,
            ..Default::default()
        }
    }

    fn node(op: &str, inputs: &[&str], output: &str) -> pb::NodeProto {
        pb::NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            name: output.into(),
            op_type: op.into(),
            ..Default::default()
        }
    }

    /// The bytes of an ONNX model `tanh(obs . weights + bias) x clip` whose input has
    /// `weights.len()` columns, with `metadata`.
    pub fn model_bytes(weights: &[f32], bias: f32, clip: f32, metadata: &[(String, String)]) -> Vec<u8> {
        let n = weights.len() as i64;
        let graph = pb::GraphProto {
            name: "mocc-synthetic".into(),
            node: vec![
                node("MatMul", &["obs", "w"], "h"),
                node("Add", &["h", "b"], "z"),
                node("Tanh", &["z"], "t"),
                node("Mul", &["t", "clip"], OUTPUT_NAME),
            ],
            initializer: vec![
                tensor("w", &[n, 1], weights.to_vec()),
                tensor("b", &[1], vec![bias]),
                tensor("clip", &[1], vec![clip]),
            ],
            input: vec![value_info(INPUT_NAME, &[None, Some(n)])],
            output: vec![value_info(OUTPUT_NAME, &[None, Some(1)])],
            ..Default::default()
        };
        let proto = pb::ModelProto {
            ir_version: 8,
            opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: 13 }],
            producer_name: "polycc-algorithms".into(),
            graph: Some(graph),
            metadata_props: metadata
                .iter()
                .map(|(k, v)| pb::StringStringEntryProto { key: k.clone(), value: v.clone() })
                .collect(),
            ..Default::default()
        };
        proto.encode_to_vec()
    }

    /// A valid model: more throughput weight and a lower latency ratio push the rate up.
    pub fn valid_model_bytes() -> Vec<u8> {
        let mut w = vec![0.0f32; MODEL_INPUT_LEN];
        w[0] = 1.0; // w_thr
        w[1] = -1.0; // w_lat
        for i in 0..HISTORY {
            w[WEIGHTS + FEATURES * i] = -0.1; // send ratio
            w[WEIGHTS + FEATURES * i + 1] = -0.2; // latency ratio
            w[WEIGHTS + FEATURES * i + 2] = -1.0; // latency gradient
        }
        model_bytes(&w, 2.5, 2.0, &metadata())
    }
}


impl crate::registry::Algorithm for MoccConfig {
    const NAME: &'static str = "mocc";
    const SUMMARY: &'static str = "MOCC: a learned policy (ONNX) steered by a throughput/latency/loss preference";
    const LEARNED: bool = true;

    fn controller(&self, info: FlowInfo) -> Box<dyn CongestionControl> {
        Box::new(self.build(info))
    }

    fn validate(&self) -> Result<(), PolicyError> {
        MoccConfig::validate(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack_report, FluidPath};
    use proptest::prelude::*;

    const MSS: u64 = 1500;

    fn slot_with(weights: &[f32], bias: f32) -> ModelSlot {
        ModelSlot::new(
            MoccModel::from_bytes(&synthetic::model_bytes(weights, bias, 2.0, &synthetic::metadata())).unwrap(),
        )
    }

    /// A flow with a model whose action is `tanh(bias) x 2` whatever it observes.
    fn flow(bias: f32, initial_mbps: Option<f64>) -> (Mocc, ModelSlot) {
        let slot = slot_with(&[0.0; MODEL_INPUT_LEN], bias);
        let cfg = MoccConfig { slot: Some(slot.clone()), initial_rate_mbps: initial_mbps, ..MoccConfig::default() };
        (cfg.build(FlowInfo::with_mss(MSS)), slot)
    }

    /// Served as trained: the agent installs this cadence for MOCC flows (once-per-RTT reports
    /// would stretch every 0.5-RTT MI to a whole RTT).
    #[test]
    fn mocc_asks_for_the_report_cadence_it_was_trained_with() {
        let (m, _) = flow(0.0, None);
        assert_eq!(m.report_interval(), Some(Duration::from_millis(10)));
    }

    #[test]
    fn the_rate_update_is_aurora_s_and_symmetric_in_log_space() {
        assert_eq!(rate_update(1000.0, 0.0), 1000.0);
        assert!((rate_update(1000.0, 2.0) - 1050.0).abs() < 1e-9);
        assert!((rate_update(1000.0, -2.0) - 1000.0 / 1.05).abs() < 1e-9);
        assert!((rate_update(rate_update(1000.0, 3.0), -3.0) - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn preferences_outside_the_simplex_are_refused_with_the_reason() {
        assert_eq!(Preference::new(&[0.8, 0.1, 0.1]).unwrap().weights(), [0.8, 0.1, 0.1]);
        assert!(Preference::new(&[0.7, 0.2, 0.1]).is_ok(), "0.7 + 0.2 + 0.1 is 1 within rounding");
        assert_eq!(Preference::new(&[0.5, 0.5]), Err(PreferenceError::Count(2)));
        let e = Preference::new(&[1.0, 0.0, 0.0]).unwrap_err();
        assert_eq!(e.to_string(), "MOCC weight 0 (throughput) = 1 must be strictly between 0 and 1");
        let e = Preference::new(&[0.5, 0.3, 0.3]).unwrap_err();
        assert!(e.to_string().contains("sum to 1, got 1.1"), "{e}");
        assert!(Preference::new(&[f64::NAN, 0.5, 0.5]).is_err());
        let cfg = MoccConfig { weights: vec![0.9, 0.9, -0.8], ..MoccConfig::default() };
        assert!(cfg
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("invalid mocc parameter: MOCC weight 2 (loss) = -0.8"));
        assert_eq!(Preference::default().reward(1.0, 0.5, 1.0), 0.8 + 0.05 + 0.1);
    }

    #[test]
    fn tract_runs_the_graph_exactly_as_written() {
        // action = tanh(obs . w + b) x 2, computed by hand for a few inputs.
        let w: Vec<f32> = (0..MODEL_INPUT_LEN).map(|i| ((i as f32) * 0.37).sin() * 0.2).collect();
        let m = MoccModel::from_bytes(&synthetic::model_bytes(&w, -0.3, 2.0, &synthetic::metadata())).unwrap();
        assert_eq!(m.action_clip(), 2.0);
        for k in 0..8 {
            let x: [f32; MODEL_INPUT_LEN] = std::array::from_fn(|i| ((i * (k + 1)) as f32 * 0.11).cos() * 3.0);
            let z: f64 = x.iter().zip(&w).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() - 0.3;
            let want = z.tanh() * 2.0;
            let got = m.infer(&x).unwrap() as f64;
            assert!((got - want).abs() < 1e-5, "input {k}: tract {got}, by hand {want}");
        }
    }

    #[test]
    fn the_shipped_model_matches_pytorch_on_the_golden_vectors() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../onnx");
        let (Ok(bytes), Ok(golden)) =
            (std::fs::read(format!("{dir}/mocc.onnx")), std::fs::read_to_string(format!("{dir}/mocc.golden.json")))
        else {
            panic!("onnx/mocc.onnx and onnx/mocc.golden.json must ship with the repository (PYTHONPATH=onnx/python python3 -m mocc.export)");
        };
        let m = MoccModel::from_bytes(&bytes).unwrap_or_else(|e| panic!("onnx/mocc.onnx: {e}"));
        assert!(bytes.len() <= 1_000_000, "model file {} bytes > 1 MB", bytes.len());
        let g: serde_json::Value = serde_json::from_str(&golden).unwrap();
        let inputs = g["inputs"].as_array().unwrap();
        let outputs = g["outputs"].as_array().unwrap();
        assert!(inputs.len() >= 32 && inputs.len() == outputs.len(), "{} golden vectors", inputs.len());
        let mut worst = 0.0f64;
        for (x, y) in inputs.iter().zip(outputs) {
            let x: Vec<f32> = x.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
            let x: [f32; MODEL_INPUT_LEN] = x.try_into().expect("33 inputs per vector");
            let want = y[0].as_f64().unwrap();
            let got = m.infer(&x).unwrap() as f64;
            worst = worst.max((got - want).abs());
            assert!((got - want).abs() <= 1e-5, "input {x:?}: tract {got}, PyTorch {want}");
        }
        eprintln!("{} golden vectors, worst |tract - PyTorch| = {worst:.2e}", inputs.len());
    }

    #[test]
    fn the_reused_inference_state_gives_a_fresh_states_actions_call_after_call() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../onnx");
        let m = MoccModel::from_bytes(&std::fs::read(format!("{dir}/mocc.onnx")).unwrap()).unwrap();
        let g: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{dir}/mocc.golden.json")).unwrap()).unwrap();
        let inputs: Vec<[f32; MODEL_INPUT_LEN]> = g["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let v: Vec<f32> = x.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
                v.try_into().unwrap()
            })
            .collect();
        let fresh = |x: &[f32; MODEL_INPUT_LEN]| {
            let t = Tensor::from_shape(&[1, MODEL_INPUT_LEN], x).unwrap();
            let out = m.plan.run(tvec!(t.into_tvalue())).unwrap();
            out[0].to_plain_array_view::<f32>().unwrap().iter().copied().next().unwrap()
        };
        let want: Vec<f32> = inputs.iter().map(fresh).collect();
        let distinct = want.iter().map(|a| a.to_bits()).collect::<std::collections::BTreeSet<_>>().len();
        assert!(distinct >= 10, "the golden inputs give only {distinct} distinct actions: a stale buffer would pass");
        // Forward, backward and forward again through one reused state: bit for bit a fresh state's
        // action each time (a stale input buffer or a leftover value would repeat the previous action).
        let order = (0..inputs.len()).chain((0..inputs.len()).rev()).chain(0..inputs.len());
        for i in order {
            assert_eq!(m.infer(&inputs[i]).unwrap().to_bits(), want[i].to_bits(), "golden input {i}");
        }
        // While another thread holds the reused state, a decision runs on a state of its own.
        let held = m.runner.lock().unwrap();
        assert_eq!(m.infer(&inputs[3]).unwrap().to_bits(), want[3].to_bits());
        drop(held);
        assert_eq!(m.infer(&inputs[4]).unwrap().to_bits(), want[4].to_bits());
    }

    #[test]
    fn bad_model_files_get_typed_errors_that_say_what_to_do() {
        let md = synthetic::metadata();
        let e = MoccModel::from_bytes(b"\x08\x07definitely not protobuf").unwrap_err();
        assert!(matches!(e, ModelError::Corrupt(_)) && e.to_string().contains("re-export"), "{e}");
        let e = MoccModel::from_bytes(&synthetic::model_bytes(&[0.1; 30], 0.0, 2.0, &md)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the MOCC model's input has shape [N, 30]: expected [N, 33] (3 weights + 10 MIs x 3 features)"
        );
        let mut missing = md.clone();
        missing.retain(|(k, _)| k != "polycc.normalization" && k != "polycc.seed");
        let e = MoccModel::from_bytes(&synthetic::model_bytes(&[0.1; 33], 0.0, 2.0, &missing)).unwrap_err();
        match &e {
            ModelError::MissingMetadata { missing } => assert_eq!(missing, &["polycc.normalization", "polycc.seed"]),
            e => panic!("{e}"),
        }
        let mut alpha = md.clone();
        alpha.iter_mut().filter(|(k, _)| k == "polycc.action_alpha").for_each(|(_, v)| *v = "0.05".into());
        let e = MoccModel::from_bytes(&synthetic::model_bytes(&[0.1; 33], 0.0, 2.0, &alpha)).unwrap_err();
        assert!(e.to_string().contains("polycc.action_alpha = `0.05`"), "{e}");
        let mut clip = md;
        clip.iter_mut().filter(|(k, _)| k == "polycc.action_clip").for_each(|(_, v)| *v = "-1".into());
        assert!(matches!(
            MoccModel::from_bytes(&synthetic::model_bytes(&[0.1; 33], 0.0, 2.0, &clip)),
            Err(ModelError::BadMetadata { key: "polycc.action_clip", .. })
        ));
    }

    #[test]
    fn action_zero_holds_the_rate_and_windows_are_twice_rate_times_rtt() {
        let (mut cc, _) = flow(0.0, Some(10.0));
        let mut path = FluidPath::new(Rate::from_mbps(20.0), Duration::from_millis(50), 200_000, MSS);
        let st = path.run(&mut cc, 100);
        let d = cc.decision();
        assert!((d.rate.unwrap().mbps() - 10.0).abs() < 1e-9, "{d:?}");
        assert!((st.utilization - 0.5).abs() < 0.01, "{st:?}");
        let want = 2.0 * Rate::from_mbps(10.0).bytes_over(Duration::from_millis(50));
        assert!((d.cwnd_bytes as f64 - want).abs() / want < 0.02, "cwnd {} vs 2 x rate x rtt {want}", d.cwnd_bytes);
        assert!(cc.decisions() >= 99 && cc.inference_errors() == 0);
    }

    #[test]
    fn each_decision_moves_the_rate_by_the_clipped_action() {
        // tanh(10) x 2 = 2: every MI multiplies the rate by 1.05.
        let (mut cc, _) = flow(10.0, Some(1.0));
        let mut t = Duration::ZERO;
        let rtt = Duration::from_millis(40);
        let mut rates = Vec::new();
        for _ in 0..10 {
            t += rtt;
            rates.push(cc.on_report(&ack_report(t, rtt, 5000, MSS)).rate.unwrap().mbps());
        }
        for w in rates.windows(2) {
            assert!((w[1] / w[0] - 1.05).abs() < 1e-6, "{rates:?}");
        }
    }

    #[test]
    fn without_a_model_or_on_inference_errors_the_rate_holds() {
        let cfg = MoccConfig { initial_rate_mbps: Some(5.0), ..MoccConfig::default() };
        let mut cc = cfg.build(FlowInfo::with_mss(MSS));
        let mut path = FluidPath::new(Rate::from_mbps(20.0), Duration::from_millis(50), 200_000, MSS);
        path.run(&mut cc, 20);
        assert_eq!(cc.decision().rate, Some(Rate::from_mbps(5.0)));
        assert_eq!(cc.inference_errors(), cc.decisions());
        assert!(cc.decisions() >= 19);
    }

    #[test]
    fn a_swapped_model_drives_every_flow_from_its_next_decision() {
        let (mut a, slot) = flow(0.0, Some(4.0));
        let mut b = MoccConfig { slot: Some(slot.clone()), initial_rate_mbps: Some(4.0), ..MoccConfig::default() }
            .build(FlowInfo::with_mss(MSS));
        let rtt = Duration::from_millis(40);
        let report = |i: u32| ack_report(rtt * i, rtt, 10_000, MSS);
        for i in 1..5 {
            a.on_report(&report(i));
            b.on_report(&report(i));
        }
        assert_eq!(a.decision().rate, Some(Rate::from_mbps(4.0)));
        slot.replace(
            MoccModel::from_bytes(&synthetic::model_bytes(&[0.0; 33], -10.0, 2.0, &synthetic::metadata())).unwrap(),
        );
        let (ra, rb) = (a.on_report(&report(5)).rate.unwrap(), b.on_report(&report(5)).rate.unwrap());
        assert!((ra.mbps() / (4.0 / 1.05) - 1.0).abs() < 1e-6 && ra == rb, "{ra:?} {rb:?}");
    }

    #[test]
    fn the_observation_is_the_documented_layout_of_mi_features() {
        let mut core = MoccCore::new(FlowInfo::with_mss(MSS), Some(Rate::from_mbps(8.0)));
        assert_eq!(core.observation()[..3], [1.0, 1.0, 0.0], "neutral history before any MI");
        let rtt = Duration::from_millis(100);
        // 1 Mbit/s delivered of 8 sent, RTT rising within each report.
        let mut t = Duration::ZERO;
        for i in 0..30u32 {
            t += rtt;
            let r = Report {
                rtt_first_half_mean: Some(rtt + Duration::from_millis(u64::from(i))),
                rtt_second_half_mean: Some(rtt + Duration::from_millis(u64::from(i) + 5)),
                ..ack_report(t, rtt, 12_500, MSS)
            };
            if core.on_report(&r) == Step::DecisionDue {
                core.act(t, 0.0);
            }
        }
        let obs = core.observation();
        let input = core.model_input(&Preference::new(&[0.2, 0.3, 0.5]).unwrap());
        assert_eq!(input[..3], [0.2, 0.3, 0.5]);
        assert_eq!(input[3..], obs);
        let newest = &obs[27..];
        assert!((newest[0] - 8.0).abs() < 0.1, "send ratio {}", newest[0]);
        assert!(newest[1] >= 1.0, "latency ratio {}", newest[1]);
        assert!(newest[2] > 0.05, "RTT rising 5 ms per 50 ms of sending: gradient {}", newest[2]);
    }

    proptest! {
        #[test]
        fn random_reports_never_panic_and_keep_the_rate_finite_and_above_the_minimum(
            steps in proptest::collection::vec(
                (0u64..400_000, 0u64..5_000_000, 0u64..500, proptest::option::of(0u64..3_000_000), proptest::option::of(0u64..3_000_000), any::<bool>()),
                1..120),
            bias in -5.0f32..5.0,
        ) {
            let (mut cc, _) = flow(bias, None);
            let min = MIN_RATE_PACKETS_PER_SEC * MSS as f64;
            let mut now = Duration::ZERO;
            for (dt, acked, lost, rtt, half, timeout) in steps {
                let step = Duration::from_micros(dt);
                now += step;
                let rtt = rtt.map(Duration::from_micros);
                let samples = if rtt.is_some() { (acked / MSS).max(1) } else { 0 };
                let r = Report {
                    now,
                    interval: step,
                    bytes_acked: acked,
                    packets_acked: acked / MSS,
                    packets_lost: lost,
                    timeout,
                    rtt_last: rtt,
                    rtt_min: rtt,
                    rtt_sum: rtt.map_or(Duration::ZERO, |r| r * u32::try_from(samples).unwrap_or(u32::MAX)),
                    rtt_samples: samples,
                    rtt_first_half_mean: rtt,
                    rtt_second_half_mean: half.map(Duration::from_micros),
                    ..Report::default()
                };
                let d = cc.on_report(&r);
                prop_assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
                if let Some(rate) = d.rate {
                    prop_assert!(rate.bytes_per_sec().is_finite() && rate.bytes_per_sec() >= min - 1e-6);
                    prop_assert!(rate.mbps() <= MAX_RATE_MBPS);
                }
                prop_assert!(cc.core.observation().iter().all(|v| v.is_finite()));
            }
        }
    }
}
