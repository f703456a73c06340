//! The control socket: a unix stream socket (`--control-socket`, default
//! `/run/polycc/control.sock`) speaking JSON lines, one request and one response per line.
//!
//! ```text
//! {"cmd":"policy_list"}                         -> {"ok":true,"rules":[{"id":1,"rule":{..},"description":".."}]}
//! {"cmd":"policy_show","id":1}                  -> {"ok":true,"rules":[..one..]}
//! {"cmd":"policy_add","rule":{..},"position":0} -> {"ok":true,"rules":[..the new one..],"warnings":[..],"persisted":".."}
//! {"cmd":"policy_remove","id":1}                -> {"ok":true,"rules":[..the removed one..],"persisted":".."}
//! {"cmd":"policy_replace","id":1,"rule":{..}}   -> {"ok":true,"rules":[..the new one, same id and place..],"persisted":".."}
//! {"cmd":"flows"}                               -> {"ok":true,"flows":[..]}
//! {"cmd":"stats","since":SEQ}                   -> {"ok":true,"records":[..],"next":SEQ2,"missed":0}
//! {"cmd":"flow_set","flow":7,"policy":..}       -> {"ok":true,"moved":[{"flow":7,"from":..,"to":..,"cwnd_before_bytes":..,"cwnd_after_bytes":..}]}
//! {"cmd":"model_load","path":"/abs/mocc.onnx"}  -> {"ok":true,"model":{"path":"..","size_bytes":..,"metadata":{..}}}
//! anything wrong                                -> {"ok":false,"error":{"code":"invalid_cidr","message":".."}}
//! ```
//!
//! Threading: the socket is served by a thread of its own, and each client by a thread (at most
//! [`MAX_CLIENTS`]), so a slow or hostile client never touches the datapath loop or other
//! clients. The loop and that thread share
//! [`Shared`]: the rules behind a mutex (the loop locks it once per CREATE, to choose the
//! flow's policy), and a flows table the loop republishes every [`PUBLISH_EVERY`] (rates are
//! over that period, so `flows` is at most that old). A change is persisted to the policy file
//! (atomically) before it is applied; a change that cannot be persisted is refused.
//!
//! Live changes (`flow_set`, and `"apply_live":true` on `policy_add`/`policy_replace`) touch
//! flows, which only the loop owns: the control thread queues a [`LiveRequest`] and waits up
//! to [`LIVE_CHANGE_TIMEOUT`] for the loop's answer (the loop takes the queue at least every
//! receive timeout, 200 ms). A moved flow's new controller starts from its current window,
//! rate and path estimates (`CongestionControl::adopt`), so a change never collapses it.
//!
//! Access: the socket is created mode 0600 in a directory created 0700, so only its owner
//! (root, for the kernel datapath) may connect. A client gets [`CLIENT_TIMEOUT`] per request
//! and [`MAX_REQUEST_BYTES`] per line, then is disconnected.

use crate::policy_file;
use crate::policy_rules::{
    self, overlaps_with, parse_policy, parse_rule, Rule, RuleError, RuleErrorKind, RuleSet, OVERLAPS_SHOWN,
};
use crate::stats::{StatsAnswer, StatsHistory, StatsRecord};
use polycc_algorithms::mocc::ModelSlot;
use polycc_algorithms::{AlgorithmConfig, Policy};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use slog::{info, warn, Logger};
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use thiserror::Error;

pub mod client;
mod socket;
pub use socket::{ControlOpenError, ControlSocket};

pub use polycc_control::DEFAULT_SOCKET;
/// How often the agent loop republishes the flows table (and the period its rates cover).
pub const PUBLISH_EVERY: Duration = Duration::from_millis(500);
/// A client that sends nothing for this long is disconnected.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Clients served at once (a thread each); more are told to retry.
pub const MAX_CLIENTS: usize = 16;
/// The longest request line accepted.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long a control thread waits for the agent loop to make a live change.
pub const LIVE_CHANGE_TIMEOUT: Duration = Duration::from_secs(2);

fn is_false(b: &bool) -> bool {
    !*b
}

/// A request, one JSON object per line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    // Empty braces, not unit variants: serde refuses unknown fields only in struct variants.
    PolicyList {},
    PolicyShow {
        id: u32,
    },
    PolicyAdd {
        /// The rule in the policy file's form (see [`crate::policy_rules`]).
        rule: Value,
        /// 0 = first; absent = last.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        position: Option<usize>,
        /// Also move the live flows the rule now matches to its policy (state handed over).
        #[serde(default, skip_serializing_if = "is_false")]
        apply_live: bool,
    },
    /// Put a new rule in the place of rule `id`, keeping the id and the position.
    PolicyReplace {
        id: u32,
        rule: Value,
        #[serde(default, skip_serializing_if = "is_false")]
        apply_live: bool,
    },
    PolicyRemove {
        id: u32,
    },
    Flows {},
    /// Per-flow per-second records with `seq > since` (see [`crate::stats`]).
    Stats {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<u64>,
    },
    /// Move one live flow to `policy` (the policy file's form), state handed over.
    FlowSet {
        flow: u32,
        /// Needed only when two datapaths have a flow with this id (`polycc flows` shows it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        datapath: Option<String>,
        policy: Value,
    },
    /// Validate a MOCC model file and make it the one every MOCC flow uses from its next
    /// decision on; a model that fails validation changes nothing.
    ModelLoad {
        /// Absolute (the agent's working directory is not the client's).
        path: PathBuf,
    },
}

/// Why a request failed, for scripts (and the CLI's exit status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not JSON, not an object, an unknown command or field, a missing argument.
    MalformedRequest,
    RequestTooLong,
    InvalidCidr,
    UnknownField,
    BadPortRange,
    InvalidPolicy,
    /// Another problem with a rule (a wrong type, no policy, an id in use).
    InvalidRule,
    NoSuchRule,
    /// No live flow has that id (on that datapath).
    NoSuchFlow,
    /// Flows of several datapaths have that id: name the datapath.
    AmbiguousFlow,
    /// The agent loop did not make a live change in time (nothing changed, or it is being
    /// made: `polycc flows` tells).
    LoopBusy,
    /// Too many clients at once.
    Busy,
    /// The change could not be written to the policy file; nothing changed.
    PersistFailed,
    /// `model_load`: no file at the path.
    ModelMissing,
    /// `model_load`: the file cannot be read (permissions, a directory).
    ModelUnreadable,
    /// `model_load`: not a valid MOCC model (corrupt, wrong shapes, missing metadata).
    ModelInvalid,
}

impl ErrorCode {
    pub fn of_rule_error(e: &RuleError) -> ErrorCode {
        match e.kind {
            RuleErrorKind::UnknownField => ErrorCode::UnknownField,
            RuleErrorKind::InvalidCidr(_) => ErrorCode::InvalidCidr,
            RuleErrorKind::BadPortRange(_) => ErrorCode::BadPortRange,
            RuleErrorKind::InvalidPolicy(_) => ErrorCode::InvalidPolicy,
            RuleErrorKind::WrongType(_)
            | RuleErrorKind::MissingPolicy
            | RuleErrorKind::DuplicateId(_)
            | RuleErrorKind::IdsExhausted => ErrorCode::InvalidRule,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Error)]
#[error("{message}")]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

/// One rule as the socket shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleView {
    pub id: u32,
    /// 0-based place in the match order.
    pub position: usize,
    pub description: String,
    /// The rule in the policy file's form.
    pub rule: Value,
}

/// One live flow.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowRow {
    /// The datapath's socket id.
    pub flow: u32,
    pub datapath: String,
    pub src: String,
    pub dst: String,
    pub cong_alg: String,
    /// The rule that chose the policy; `None`: the default from the flags.
    pub rule: Option<u32>,
    pub policy: String,
    pub pilot: String,
    pub copilots: Vec<String>,
    pub cwnd_bytes: u32,
    pub rate_bytes_per_sec: Option<u32>,
    pub rtt_us: Option<u64>,
    /// Acknowledged bytes per second over the last publish period.
    pub throughput_bytes_per_sec: f64,
    pub reports_per_sec: f64,
    pub reports: u64,
    /// Live policy changes the flow went through (flow_set, apply_live).
    #[serde(default)]
    pub handovers: u32,
}

/// One flow a live change moved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MovedFlow {
    pub flow: u32,
    pub datapath: String,
    /// The policies before and after, in the flows table's form.
    pub from: String,
    pub to: String,
    /// The rule the flow runs now (`None`: set by hand with flow_set).
    pub rule: Option<u32>,
    /// The window installed before the change and the one the new controller starts from.
    pub cwnd_before_bytes: u32,
    pub cwnd_after_bytes: u32,
}

/// A change only the agent loop can make: it owns the flows.
#[derive(Clone, Debug)]
pub enum LiveChange {
    /// Move one flow to `policy`; it then belongs to no rule.
    SetFlow { flow: u32, datapath: Option<String>, policy: Policy },
    /// Re-select every live flow; those rule `id` now matches, and that do not run its
    /// policy already, move to it.
    ApplyRule { id: u32 },
}

/// A live change and where the loop answers it.
#[derive(Debug)]
pub struct LiveRequest {
    pub change: LiveChange,
    pub reply: mpsc::Sender<Result<Vec<MovedFlow>, ErrorBody>>,
}

/// A response line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleView>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<FlowRow>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The policy file a change was written to; absent when the agent runs without `--policy`
    /// (the change then lasts until the agent exits, and a warning says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persisted: Option<PathBuf>,
    /// `stats`: the records, the cursor to ask with next, and how many the poller missed
    /// (`records`, `next`, `missed` at the top level on the wire).
    #[serde(flatten)]
    pub stats: Option<StatsAnswer>,
    /// Live changes: the flows moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<Vec<MovedFlow>>,
    /// `model_load`: the model now in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelView>,
}

/// A loaded MOCC model as the socket shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelView {
    pub path: PathBuf,
    pub size_bytes: usize,
    /// The model's `polycc.*` metadata (training command, seed, ...).
    pub metadata: std::collections::BTreeMap<String, String>,
}

impl Response {
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Response {
        Response { ok: false, error: Some(ErrorBody { code, message: message.into() }), ..Default::default() }
    }

    fn rules(rules: Vec<RuleView>) -> Response {
        Response { ok: true, rules: Some(rules), ..Default::default() }
    }
}

/// Parse one request line. Never panics, whatever the bytes.
pub fn parse_request(line: &[u8]) -> Result<Request, ErrorBody> {
    serde_json::from_slice::<Request>(line).map_err(|e| ErrorBody {
        code: ErrorCode::MalformedRequest,
        message: format!(
            "{e} (requests are one JSON object per line with \"cmd\": policy_list, policy_show, policy_add, policy_replace, policy_remove, flows, stats, flow_set or model_load)"
        ),
    })
}

/// What a flow's policy was chosen from, and the flow as the loop last saw it.
#[derive(Clone, Debug)]
pub struct FlowSample {
    pub row: FlowRow,
    /// Cumulative counters the rates are computed from.
    pub acked_bytes: u64,
}

/// Per (datapath, flow): (reports, acked bytes) at the last publish.
type Counters = HashMap<(String, u32), (u64, u64)>;

/// State shared by the agent loop and the control threads. Changes are serialized by
/// `change`, so two clients' edits cannot lose one another.
pub struct Shared {
    rules: Mutex<RuleSet>,
    change: Mutex<()>,
    /// Where changes are persisted (`--policy`).
    file: Option<PathBuf>,
    flows: Mutex<Vec<FlowRow>>,
    /// The previous publish's counters per (datapath, flow), for rates.
    previous: Mutex<(Instant, Counters)>,
    /// Per-flow per-second records (`stats`).
    stats: Mutex<StatsHistory>,
    /// Live changes waiting for the loop; `live_pending` spares it the lock when there are none.
    live: Mutex<Vec<LiveRequest>>,
    live_pending: AtomicBool,
    /// The model MOCC flows use; `model_load` swaps what it holds.
    mocc_model: ModelSlot,
    /// The models rules name (a MOCC member's `"model"`), by resolved path: loaded when a rule
    /// or `flow_set` names the file (again each time), shared by every rule naming it.
    rule_models: Mutex<HashMap<PathBuf, ModelSlot>>,
}

fn model_error_code(e: &polycc_algorithms::model_file::ModelLoadError) -> ErrorCode {
    use polycc_algorithms::model_file::ModelLoadError;
    match e {
        ModelLoadError::Missing { .. } => ErrorCode::ModelMissing,
        ModelLoadError::Read { .. } => ErrorCode::ModelUnreadable,
        ModelLoadError::Invalid { .. } => ErrorCode::ModelInvalid,
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these plain tables half-updated in a way
    // that matters more than stopping the agent would: keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Pilot and copilots of a policy, by name.
pub fn members(p: &Policy) -> (String, Vec<String>) {
    let name = |c: &AlgorithmConfig| c.kind().name().to_string();
    match p {
        Policy::Single(c) => (name(c), Vec::new()),
        Policy::Fused(f) => (name(&f.pilot), f.copilots.iter().map(name).collect()),
    }
}

impl Shared {
    pub fn new(rules: RuleSet, file: Option<PathBuf>) -> Shared {
        Shared {
            rules: Mutex::new(rules),
            change: Mutex::new(()),
            file,
            flows: Mutex::new(Vec::new()),
            previous: Mutex::new((Instant::now(), HashMap::new())),
            stats: Mutex::new(StatsHistory::default()),
            live: Mutex::new(Vec::new()),
            live_pending: AtomicBool::new(false),
            mocc_model: ModelSlot::default(),
            rule_models: Mutex::new(HashMap::new()),
        }
    }

    /// Share `slot` (the model the flags loaded) as the model `model_load` replaces.
    pub fn with_model_slot(mut self, slot: ModelSlot) -> Shared {
        self.mocc_model = slot;
        self
    }

    /// The model MOCC flows use.
    pub fn mocc_model(&self) -> &ModelSlot {
        &self.mocc_model
    }

    /// Give `policy`'s MOCC members their model: the file a member names (loaded by
    /// [`Shared::load_rule_models`] when its rule came), else the agent's.
    pub fn attach_models(&self, policy: &mut Policy) {
        for m in policy.mocc_members_mut().into_iter().filter(|m| m.slot.is_none()) {
            let slot = match &m.model {
                None => self.mocc_model.clone(),
                // Every path a rule names was loaded before the rule was taken; an empty slot
                // (the flow holds its rate) would need the file to vanish from the table.
                Some(named) => lock(&self.rule_models).entry(self.model_file(named)).or_default().clone(),
            };
            m.slot = Some(slot);
        }
    }

    /// Where a model path a rule names points: a relative one is under the policy file's
    /// directory (the agent's working directory without `--policy`).
    fn model_file(&self, named: &str) -> PathBuf {
        let base = self.file.as_deref().and_then(Path::parent).unwrap_or(Path::new(""));
        base.join(named)
    }

    /// Load every model file `policies` name, then put each in its slot (flows of every rule
    /// naming it see the new one); on the first file that cannot be used nothing changes.
    pub fn load_rule_models<'a>(
        &self,
        policies: impl IntoIterator<Item = &'a Policy>,
    ) -> Result<usize, (ErrorCode, String)> {
        use polycc_algorithms::model_file::load_model;
        let mut paths: Vec<PathBuf> = Vec::new();
        for p in policies {
            for m in p.mocc_members() {
                if let Some(named) = &m.model {
                    let path = self.model_file(named);
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
            }
        }
        let loaded = paths
            .into_iter()
            .map(|path| load_model(&path).map(|m| (path, m)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| (model_error_code(&e), format!("MOCC model: {e}")))?;
        let count = loaded.len();
        let mut slots = lock(&self.rule_models);
        for (path, model) in loaded {
            slots.entry(path).or_default().replace(model);
        }
        Ok(count)
    }

    fn load_model(&self, path: &Path, log: &Logger) -> Response {
        use polycc_algorithms::model_file::load_model;
        match load_model(path) {
            Ok(model) => {
                let view = ModelView {
                    path: path.to_path_buf(),
                    size_bytes: model.size_bytes(),
                    metadata: model.metadata().clone(),
                };
                self.mocc_model.replace(model);
                info!(log, "MOCC model loaded"; "path" => %path.display(), "bytes" => view.size_bytes);
                Response { ok: true, model: Some(view), ..Default::default() }
            }
            Err(e) => {
                warn!(log, "MOCC model refused, the previous one stays"; "error" => %e);
                Response::error(model_error_code(&e), format!("{e}; the previous model stays"))
            }
        }
    }

    /// The policy for a new flow: the first matching rule's (with its id), or `None`.
    pub fn select(&self, key: &policy_rules::FlowKey) -> Option<(u32, Policy)> {
        lock(&self.rules).select(key).map(|r| (r.id, r.policy.clone()))
    }

    pub fn rules(&self) -> RuleSet {
        lock(&self.rules).clone()
    }

    /// The policy of rule `id` now, if it exists.
    pub fn rule_policy(&self, id: u32) -> Option<Policy> {
        lock(&self.rules).get(id).map(|r| r.policy.clone())
    }

    /// Add a second's records: `make` is given a seq per record.
    pub fn push_stats(&self, make: impl FnOnce(&mut dyn FnMut() -> u64) -> Vec<StatsRecord>, now_unix_s: f64) {
        let mut h = lock(&self.stats);
        let records = make(&mut || h.next_seq());
        h.push(records, now_unix_s);
    }

    /// The live changes queued since the last call (the loop calls this every iteration).
    pub fn take_live(&self) -> Vec<LiveRequest> {
        if !self.live_pending.swap(false, Ordering::SeqCst) {
            return Vec::new();
        }
        std::mem::take(&mut *lock(&self.live))
    }

    /// Queue `change` for the loop and wait for its answer.
    fn ask_loop(&self, change: LiveChange) -> Result<Vec<MovedFlow>, ErrorBody> {
        let (reply, answer) = mpsc::channel();
        lock(&self.live).push(LiveRequest { change, reply });
        self.live_pending.store(true, Ordering::SeqCst);
        answer.recv_timeout(LIVE_CHANGE_TIMEOUT).unwrap_or_else(|_| {
            Err(ErrorBody {
                code: ErrorCode::LoopBusy,
                message: format!(
                    "the agent loop did not answer within {LIVE_CHANGE_TIMEOUT:?}; see polycc flows for what runs now"
                ),
            })
        })
    }

    /// Replace the flows table; rates are over the time since the last call.
    pub fn publish(&self, samples: Vec<FlowSample>, now: Instant) {
        let mut prev = lock(&self.previous);
        let secs = now.saturating_duration_since(prev.0).as_secs_f64().max(1e-3);
        let mut next = HashMap::with_capacity(samples.len());
        let rows = samples
            .into_iter()
            .map(|s| {
                let key = (s.row.datapath.clone(), s.row.flow);
                let (reports0, acked0) = prev.1.get(&key).copied().unwrap_or((0, 0));
                let mut row = s.row;
                row.reports_per_sec = row.reports.saturating_sub(reports0) as f64 / secs;
                row.throughput_bytes_per_sec = s.acked_bytes.saturating_sub(acked0) as f64 / secs;
                next.insert(key, (row.reports, s.acked_bytes));
                row
            })
            .collect();
        *prev = (now, next);
        *lock(&self.flows) = rows;
    }

    fn view(set: &RuleSet) -> Vec<RuleView> {
        set.rules().iter().enumerate().map(|(i, r)| view(i, r)).collect()
    }

    /// Serve one request.
    pub fn handle(&self, req: Request, log: &Logger) -> Response {
        match req {
            Request::PolicyList {} => Response::rules(Self::view(&lock(&self.rules))),
            Request::PolicyShow { id } => {
                let rules = lock(&self.rules);
                match rules.rules().iter().position(|r| r.id == id) {
                    Some(i) => Response::rules(vec![view(i, &rules.rules()[i])]),
                    None => no_such_rule(id),
                }
            }
            Request::PolicyAdd { rule, position, apply_live } => {
                let _change = lock(&self.change);
                let parsed = match parse_rule(&rule) {
                    Ok(p) => p,
                    Err(e) => return Response::error(ErrorCode::of_rule_error(&e), format!("rule: {e}")),
                };
                if let Err((code, e)) = self.load_rule_models([&parsed.rule.policy]) {
                    return Response::error(code, format!("rule: policy: {e}; nothing changed"));
                }
                let mut next = self.rules();
                let id = match next.add(parsed, position) {
                    Ok(id) => id,
                    Err(e) => return Response::error(ErrorCode::of_rule_error(&e), format!("rule: {e}")),
                };
                let warnings = overlaps_with(&next, id, OVERLAPS_SHOWN).lines();
                let r = self.commit(next, id, warnings, log, "rule added");
                self.apply_live(r, id, apply_live)
            }
            Request::PolicyReplace { id, rule, apply_live } => {
                let _change = lock(&self.change);
                let parsed = match parse_rule(&rule) {
                    Ok(p) => p,
                    Err(e) => return Response::error(ErrorCode::of_rule_error(&e), format!("rule: {e}")),
                };
                if let Err((code, e)) = self.load_rule_models([&parsed.rule.policy]) {
                    return Response::error(code, format!("rule: policy: {e}; nothing changed"));
                }
                let mut next = self.rules();
                match next.replace(id, parsed) {
                    Ok(Some(_)) => {}
                    Ok(None) => return no_such_rule(id),
                    Err(e) => return Response::error(ErrorCode::of_rule_error(&e), format!("rule: {e}")),
                }
                let warnings = overlaps_with(&next, id, OVERLAPS_SHOWN).lines();
                let r = self.commit(next, id, warnings, log, "rule replaced");
                self.apply_live(r, id, apply_live)
            }
            Request::Stats { since } => {
                Response { ok: true, stats: Some(lock(&self.stats).since(since)), ..Default::default() }
            }
            Request::FlowSet { flow, datapath, policy } => {
                let policy = match parse_policy(&policy) {
                    Ok(p) => p,
                    Err(kind) => {
                        let e = RuleError { field: "policy".into(), kind };
                        return Response::error(ErrorCode::of_rule_error(&e), e.to_string());
                    }
                };
                if let Err((code, e)) = self.load_rule_models([&policy]) {
                    return Response::error(code, format!("policy: {e}; nothing changed"));
                }
                match self.ask_loop(LiveChange::SetFlow { flow, datapath, policy }) {
                    Ok(moved) => {
                        for m in &moved {
                            info!(log, "flow policy set"; "flow" => m.flow, "from" => &m.from, "to" => &m.to,
                                "cwnd_before_bytes" => m.cwnd_before_bytes, "cwnd_after_bytes" => m.cwnd_after_bytes);
                        }
                        Response { ok: true, moved: Some(moved), ..Default::default() }
                    }
                    Err(e) => Response { ok: false, error: Some(e), ..Default::default() },
                }
            }
            Request::PolicyRemove { id } => {
                let _change = lock(&self.change);
                let mut next = self.rules();
                if next.get(id).is_none() {
                    return no_such_rule(id);
                }
                let position = next.rules().iter().position(|r| r.id == id).unwrap_or(0);
                let removed = next.remove(id);
                let mut r = self.commit(next, id, Vec::new(), log, "rule removed");
                if r.ok {
                    r.rules = removed.map(|rule| vec![view(position, &rule)]);
                }
                r
            }
            Request::Flows {} => Response { ok: true, flows: Some(lock(&self.flows).clone()), ..Default::default() },
            Request::ModelLoad { path } => {
                let _change = lock(&self.change);
                self.load_model(&path, log)
            }
        }
    }

    /// After a committed change to rule `id`: with `apply_live`, have the loop move the live
    /// flows the rule now matches. The change stands whatever the loop says (a warning tells).
    fn apply_live(&self, mut r: Response, id: u32, apply_live: bool) -> Response {
        if !r.ok || !apply_live {
            return r;
        }
        match self.ask_loop(LiveChange::ApplyRule { id }) {
            Ok(moved) => r.moved = Some(moved),
            Err(e) => {
                r.warnings.push(format!("the rule is in place for new flows, but live flows were not moved: {e}"))
            }
        }
        r
    }

    /// Persist `next`, then make it the rule set. The caller holds `change`, so nothing can
    /// slip in between the copy it edited and the swap.
    fn commit(&self, next: RuleSet, id: u32, mut warnings: Vec<String>, log: &Logger, what: &str) -> Response {
        if let Some(path) = &self.file {
            if let Err(e) = policy_file::save(path, &next) {
                return Response::error(
                    ErrorCode::PersistFailed,
                    format!("cannot write the policy file {}: {e}; nothing changed", path.display()),
                );
            }
        } else {
            warnings.push("the agent runs without --policy FILE: this change lasts until it exits".into());
        }
        let shown = next.rules().iter().position(|r| r.id == id).map(|i| vec![view(i, &next.rules()[i])]);
        if let Some(r) = next.get(id) {
            info!(log, "{what}"; "id" => id, "rule" => r.describe());
        } else {
            info!(log, "{what}"; "id" => id);
        }
        for w in &warnings {
            warn!(log, "{w}");
        }
        *lock(&self.rules) = next;
        Response { ok: true, rules: shown, warnings, persisted: self.file.clone(), ..Default::default() }
    }
}

fn view(position: usize, r: &Rule) -> RuleView {
    RuleView { id: r.id, position, description: r.describe(), rule: r.to_json() }
}

fn no_such_rule(id: u32) -> Response {
    Response::error(ErrorCode::NoSuchRule, format!("no rule has id {id} (polycc policy list shows them)"))
}

#[cfg(test)]
mod tests;
