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
//! {"cmd":"flow_set","flow":7,"policy":..}       -> {"ok":true,"moved":[{"flow":7,"from":..,"to":..,"cwnd_before":..,"cwnd_after":..}]}
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

/// The default control socket.
pub const DEFAULT_SOCKET: &str = "/run/polycc/control.sock";
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    pub cwnd_before: u32,
    pub cwnd_after: u32,
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

    fn load_model(&self, path: &Path, log: &Logger) -> Response {
        use polycc_args::ModelLoadError;
        match polycc_args::load_model(path) {
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
                let code = match e {
                    ModelLoadError::Missing { .. } => ErrorCode::ModelMissing,
                    ModelLoadError::Read { .. } => ErrorCode::ModelUnreadable,
                    ModelLoadError::Invalid { .. } => ErrorCode::ModelInvalid,
                };
                warn!(log, "MOCC model refused, the previous one stays"; "error" => %e);
                Response::error(code, format!("{e}; the previous model stays"))
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
                match self.ask_loop(LiveChange::SetFlow { flow, datapath, policy }) {
                    Ok(moved) => {
                        for m in &moved {
                            info!(log, "flow policy set"; "flow" => m.flow, "from" => &m.from, "to" => &m.to,
                                "cwnd_before" => m.cwnd_before, "cwnd_after" => m.cwnd_after);
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

/// The control socket could not be opened.
#[derive(Debug, Error)]
pub enum ControlOpenError {
    #[error(
        "control socket {path}: cannot create its directory {dir}: {source}; pass --control-socket with another path"
    )]
    Directory {
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("control socket {path}: another agent is already serving it; stop it first, or pass --control-socket with another path")]
    InUse { path: PathBuf },
    #[error("control socket {path}: a file that is not a socket is there (left as it is); pass --control-socket with another path")]
    NotASocket { path: PathBuf },
    #[error("control socket {path}: {source}; pass --control-socket with another path")]
    Bind {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The bound control socket; the file is removed when this is dropped.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Bind `path` mode 0600 (its directory is created 0700 when missing), replacing a stale
    /// socket file (one nobody accepts on, e.g. after SIGKILL) but never a live agent's, and
    /// never a file that is not a socket (a symlink included).
    pub fn open(path: &Path) -> Result<ControlSocket, ControlOpenError> {
        let path = path.to_path_buf();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|source| ControlOpenError::Directory { path: path.clone(), dir: dir.clone(), source })?;
        }
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.file_type().is_socket() {
                return Err(ControlOpenError::NotASocket { path });
            }
            if UnixStream::connect(&path).is_ok() {
                return Err(ControlOpenError::InUse { path });
            }
            std::fs::remove_file(&path).map_err(|source| ControlOpenError::Bind { path: path.clone(), source })?;
        }
        // Bind under a umask that leaves no window in which others may connect.
        // SAFETY: umask(2) has no preconditions; the old mask is restored at once.
        let old = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(&path);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let listener = bound.map_err(|source| ControlOpenError::Bind { path: path.clone(), source })?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|source| ControlOpenError::Bind { path: path.clone(), source })?;
        Ok(ControlSocket { listener, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serve clients on a thread of its own until the process exits. Keep `self`: dropping
    /// it removes the socket file (new clients then find no agent).
    pub fn spawn(&self, shared: Arc<Shared>, log: Logger) -> io::Result<std::thread::JoinHandle<()>> {
        let listener = self.listener.try_clone()?;
        std::thread::Builder::new().name("polycc-control".into()).spawn(move || {
            let clients = Arc::new(AtomicUsize::new(0));
            for conn in listener.incoming() {
                match conn {
                    Ok(mut stream) if clients.load(Ordering::SeqCst) >= MAX_CLIENTS => {
                        let busy =
                            Response::error(ErrorCode::Busy, format!("{MAX_CLIENTS} clients are connected; try again"));
                        let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
                        let _ = writeln!(stream, "{}", serde_json::to_string(&busy).unwrap_or_default());
                    }
                    Ok(stream) => {
                        clients.fetch_add(1, Ordering::SeqCst);
                        let (s, l, n) = (Arc::clone(&shared), log.clone(), Arc::clone(&clients));
                        let spawned =
                            std::thread::Builder::new().name("polycc-control-client".into()).spawn(move || {
                                if let Err(e) = serve_client(stream, &s, &l) {
                                    info!(l, "control client dropped"; "error" => %e);
                                }
                                n.fetch_sub(1, Ordering::SeqCst);
                            });
                        if spawned.is_err() {
                            clients.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    Err(e) => {
                        warn!(log, "control socket accept failed"; "error" => %e);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Answer request lines until the client closes, stalls or oversteps.
fn serve_client(stream: UnixStream, shared: &Shared, log: &Logger) -> io::Result<()> {
    serve_client_within(stream, shared, log, CLIENT_TIMEOUT)
}

/// Reads from a stream until a deadline, however the bytes trickle in: each read waits at most
/// for what is left of it.
struct DeadlineReader {
    stream: UnixStream,
    deadline: Instant,
}

impl Read for DeadlineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no complete request within the deadline"));
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// [`serve_client`] with the per-request deadline given: each request line must arrive whole
/// within `timeout` of the previous answer (or of connecting), so a client that trickles bytes
/// cannot hold one of the [`MAX_CLIENTS`] places (issue 16 A4: the timeout was per read).
fn serve_client_within(stream: UnixStream, shared: &Shared, log: &Logger, timeout: Duration) -> io::Result<()> {
    stream.set_write_timeout(Some(timeout))?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(DeadlineReader { stream, deadline: Instant::now() + timeout });
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.by_ref().take(MAX_REQUEST_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let too_long = line.len() > MAX_REQUEST_BYTES;
        let response = if too_long {
            Response::error(ErrorCode::RequestTooLong, format!("a request line is at most {MAX_REQUEST_BYTES} bytes"))
        } else if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        } else {
            match parse_request(&line) {
                Ok(req) => shared.handle(req, log),
                Err(e) => {
                    warn!(log, "malformed control request"; "error" => %e.message);
                    Response { ok: false, error: Some(e), ..Default::default() }
                }
            }
        };
        let mut bytes = serde_json::to_vec(&response).unwrap_or_else(|_| br#"{"ok":false}"#.to_vec());
        bytes.push(b'\n');
        out.write_all(&bytes)?;
        if too_long {
            return Ok(());
        }
        // Blank lines do not count as requests: they do not extend the deadline.
        reader.get_mut().deadline = Instant::now() + timeout;
    }
}

/// The client side: one request, one response.
pub mod client {
    use super::{Request, Response};
    use std::io::{self, BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    use std::path::{Path, PathBuf};
    use std::time::Duration;
    use thiserror::Error;

    #[derive(Debug, Error)]
    pub enum ClientError {
        #[error("the agent is not running: no control socket at {path} (start polycc-portus, or pass --socket with its --control-socket)")]
        NotRunning { path: PathBuf },
        #[error("the agent is not running: {path} refuses connections (a stale socket from an agent that died?)")]
        Refused { path: PathBuf },
        #[error("permission denied on {path}: the control socket is root-only (run with sudo)")]
        Permission { path: PathBuf },
        #[error("control socket {path}: {source}")]
        Io {
            path: PathBuf,
            #[source]
            source: io::Error,
        },
        #[error("control socket {path}: the agent's answer is not a response: {message}")]
        Protocol { path: PathBuf, message: String },
    }

    pub fn request(path: &Path, req: &Request) -> Result<Response, ClientError> {
        let p = || path.to_path_buf();
        let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ClientError::NotRunning { path: p() },
            io::ErrorKind::ConnectionRefused => ClientError::Refused { path: p() },
            io::ErrorKind::PermissionDenied => ClientError::Permission { path: p() },
            _ => ClientError::Io { path: p(), source: e },
        })?;
        let io_err = |source| ClientError::Io { path: p(), source };
        stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(io_err)?;
        let mut line =
            serde_json::to_vec(req).map_err(|e| ClientError::Protocol { path: p(), message: e.to_string() })?;
        line.push(b'\n');
        (&stream).write_all(&line).map_err(io_err)?;
        let mut answer = String::new();
        BufReader::new(&stream).read_line(&mut answer).map_err(io_err)?;
        serde_json::from_str(&answer).map_err(|e| ClientError::Protocol { path: p(), message: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn shared() -> Shared {
        Shared::new(RuleSet::default(), None)
    }

    fn ask(s: &Shared, line: &str) -> Response {
        match parse_request(line.as_bytes()) {
            Ok(r) => s.handle(r, &crate::logging::discard()),
            Err(e) => Response { ok: false, error: Some(e), ..Default::default() },
        }
    }

    fn code(r: &Response) -> Option<ErrorCode> {
        r.error.as_ref().map(|e| e.code)
    }

    #[test]
    fn add_list_show_remove() {
        let s = shared();
        let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst_ports":"5201","policy":"copa"}}"#);
        assert!(r.ok, "{r:?}");
        assert_eq!(r.rules.as_ref().unwrap()[0].id, 1);
        assert!(r.warnings[0].contains("without --policy"), "{r:?}");
        let r = ask(&s, r#"{"cmd":"policy_add","rule":{"policy":"bbr"},"position":0}"#);
        assert_eq!(r.warnings.len(), 2, "overlaps rule 1, and not persisted: {r:?}");
        let list = ask(&s, r#"{"cmd":"policy_list"}"#).rules.unwrap();
        assert_eq!(list.iter().map(|v| (v.id, v.position)).collect::<Vec<_>>(), [(2, 0), (1, 1)]);
        assert_eq!(list[1].description, "dst_ports 5201 -> copa");
        assert_eq!(ask(&s, r#"{"cmd":"policy_show","id":1}"#).rules.unwrap()[0].rule["policy"], "copa");
        let r = ask(&s, r#"{"cmd":"policy_remove","id":2}"#);
        assert!(r.ok && r.rules.unwrap()[0].id == 2);
        assert_eq!(code(&ask(&s, r#"{"cmd":"policy_remove","id":2}"#)), Some(ErrorCode::NoSuchRule));
        assert_eq!(code(&ask(&s, r#"{"cmd":"policy_show","id":9}"#)), Some(ErrorCode::NoSuchRule));
        assert_eq!(s.rules().rules().len(), 1);
    }

    /// Issue 16 K8: v6 subnets through the socket, and v6 (and IPv4-mapped) flows choosing by them.
    #[test]
    fn ipv6_rules_are_added_listed_and_chosen_for_v6_flows() {
        let s = shared();
        let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"2001:db8::/32","dst_ports":"443","policy":"bbr"}}"#);
        assert!(r.ok, "{r:?}");
        assert_eq!(r.rules.as_ref().unwrap()[0].rule["dst"], "2001:db8::/32");
        let r = ask(&s, r#"{"cmd":"policy_add","rule":{"src":"fe80::1","dst":"10.0.0.0/8","policy":"cubic"}}"#);
        assert_eq!(r.warnings.len(), 1, "no overlap with the v6 rule, only `not persisted`: {r:?}");
        assert!(ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/8","policy":"copa"}}"#).ok);
        let list = ask(&s, r#"{"cmd":"policy_list"}"#).rules.unwrap();
        assert_eq!(
            list.iter().map(|v| v.description.as_str()).collect::<Vec<_>>(),
            [
                "dst 2001:db8::/32 dst_ports 443 -> bbr",
                "dst 10.0.0.0/8 src fe80::1/128 -> cubic",
                "dst 10.0.0.0/8 -> copa"
            ]
        );
        let key = |src: &str, dst: &str, dst_port| policy_rules::FlowKey {
            src: src.parse().unwrap(),
            src_port: 40_000,
            dst: dst.parse().unwrap(),
            dst_port,
            cong_alg: "ccp",
        };
        let id = |k| s.select(&k).map(|(id, _)| id);
        assert_eq!(id(key("2001:db8::2", "2001:db8::1", 443)), Some(1));
        assert_eq!(id(key("2001:db8::2", "2001:db8::1", 80)), None);
        assert_eq!(id(key("fe80::1", "10.1.1.1", 80)), Some(2));
        assert_eq!(id(key("::ffff:192.168.0.1", "::ffff:10.1.1.1", 80)), Some(3), "an IPv4-mapped flow is IPv4");
        for (rule, message) in [
            (
                r#"{"dst":"2001:db8::1/32","policy":"copa"}"#,
                "`2001:db8::1/32` has host bits set; the subnet is 2001:db8::/32",
            ),
            (r#"{"src":"2001:db8::/129","policy":"copa"}"#, "`2001:db8::/129` has a prefix length outside 0..=128"),
            (r#"{"dst":"2001:db8::g/64","policy":"copa"}"#, "`2001:db8::g/64` is not an IP address"),
        ] {
            let r = ask(&s, &format!(r#"{{"cmd":"policy_add","rule":{rule}}}"#));
            assert_eq!(code(&r), Some(ErrorCode::InvalidCidr), "{r:?}");
            assert!(r.error.unwrap().message.contains(message), "{rule}");
        }
        assert_eq!(s.rules().rules().len(), 3);
    }

    #[test]
    fn replace_keeps_the_id_and_the_place_and_refuses_another_id() {
        let s = shared();
        for p in ["reno", "cubic", "bbr"] {
            assert!(
                ask(&s, &format!(r#"{{"cmd":"policy_add","rule":{{"dst_ports":"{}","policy":"{p}"}}}}"#, p.len())).ok
            );
        }
        let r = ask(&s, r#"{"cmd":"policy_replace","id":2,"rule":{"dst_ports":"5201","policy":"vivace"}}"#);
        assert!(r.ok, "{r:?}");
        assert_eq!((r.rules.as_ref().unwrap()[0].id, r.rules.as_ref().unwrap()[0].position), (2, 1));
        let list = ask(&s, r#"{"cmd":"policy_list"}"#).rules.unwrap();
        assert_eq!(
            list.iter().map(|v| v.description.as_str()).collect::<Vec<_>>(),
            ["dst_ports 4 -> reno", "dst_ports 5201 -> vivace", "dst_ports 3 -> bbr"]
        );
        assert_eq!(
            code(&ask(&s, r#"{"cmd":"policy_replace","id":9,"rule":{"policy":"reno"}}"#)),
            Some(ErrorCode::NoSuchRule)
        );
        let r = ask(&s, r#"{"cmd":"policy_replace","id":2,"rule":{"id":3,"policy":"reno"}}"#);
        assert_eq!(code(&r), Some(ErrorCode::InvalidRule), "{r:?}");
        let r = ask(&s, r#"{"cmd":"policy_replace","id":2,"rule":{"dst":"1.2.3.4/40","policy":"reno"}}"#);
        assert_eq!(code(&r), Some(ErrorCode::InvalidCidr));
        assert_eq!(
            s.rules().get(2).unwrap().describe(),
            "dst_ports 5201 -> vivace",
            "a refused replace changes nothing"
        );
    }

    #[test]
    fn live_changes_go_through_the_loop_and_time_out_without_one() {
        let s = Arc::new(shared());
        // No loop: the request waits LIVE_CHANGE_TIMEOUT and fails with loop_busy.
        let t = Instant::now();
        let r = ask(&s, r#"{"cmd":"flow_set","flow":7,"policy":"copa"}"#);
        assert_eq!(code(&r), Some(ErrorCode::LoopBusy), "{r:?}");
        assert!(t.elapsed() >= LIVE_CHANGE_TIMEOUT);
        let _ = s.take_live(); // the stale request
                               // A loop that answers: flow 7 exists, others do not.
        let l = Arc::clone(&s);
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        let looper = std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                for req in l.take_live() {
                    let answer = match req.change {
                        LiveChange::SetFlow { flow: 7, policy, .. } => Ok(vec![MovedFlow {
                            flow: 7,
                            datapath: "()".into(),
                            from: "reno".into(),
                            to: policy.describe(),
                            rule: None,
                            cwnd_before: 100,
                            cwnd_after: 100,
                        }]),
                        LiveChange::SetFlow { flow, .. } => {
                            Err(ErrorBody { code: ErrorCode::NoSuchFlow, message: format!("no flow {flow}") })
                        }
                        LiveChange::ApplyRule { id } => {
                            assert_eq!(l.rule_policy(id).unwrap().describe(), "copa");
                            Ok(vec![])
                        }
                    };
                    req.reply.send(answer).unwrap();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let r = ask(&s, r#"{"cmd":"flow_set","flow":7,"policy":{"alg":"cubic","beta":0.8}}"#);
        assert!(r.ok, "{r:?}");
        assert_eq!(r.moved.unwrap()[0].to, "cubic");
        assert_eq!(code(&ask(&s, r#"{"cmd":"flow_set","flow":8,"policy":"copa"}"#)), Some(ErrorCode::NoSuchFlow));
        let r = ask(&s, r#"{"cmd":"flow_set","flow":7,"policy":{"alg":"cubic","beta":7}}"#);
        assert_eq!(code(&r), Some(ErrorCode::InvalidPolicy), "checked before the loop sees it: {r:?}");
        let r = ask(&s, r#"{"cmd":"policy_add","rule":{"policy":"copa"},"apply_live":true}"#);
        assert!(r.ok && r.moved == Some(vec![]), "{r:?}");
        done.store(true, Ordering::SeqCst);
        looper.join().unwrap();
    }

    /// `records`, `next` and `missed` sit at the answer's top level; answers to other commands
    /// carry none of them and read back without a stats part.
    #[test]
    fn a_stats_answer_is_flat_on_the_wire_and_absent_from_other_answers() {
        let s = shared();
        let json = serde_json::to_value(ask(&s, r#"{"cmd":"stats","since":0}"#)).unwrap();
        assert_eq!(
            (json["next"].as_u64(), json["missed"].as_u64(), json["records"].as_array().map(Vec::len)),
            (Some(0), Some(0), Some(0))
        );
        assert!(json.get("stats").is_none(), "{json}");
        let back: Response = serde_json::from_value(json).unwrap();
        assert_eq!(back.stats, Some(StatsAnswer::default()));
        let flows = serde_json::to_value(ask(&s, r#"{"cmd":"flows"}"#)).unwrap();
        assert!(flows.get("next").is_none() && flows.get("records").is_none(), "{flows}");
        assert_eq!(serde_json::from_value::<Response>(flows).unwrap().stats, None);
    }

    #[test]
    fn stats_answers_records_after_the_cursor() {
        let s = shared();
        let rec = |seq| crate::stats::StatsWindow::default().take(&Default::default(), seq, 1e9, 1.0);
        s.push_stats(|seq| vec![rec(seq()), rec(seq())], 1e9);
        let r = ask(&s, r#"{"cmd":"stats"}"#);
        let a = r.stats.unwrap();
        assert_eq!((a.records.len(), a.next, a.missed), (2, 2, 0));
        let r = ask(&s, r#"{"cmd":"stats","since":1}"#);
        assert_eq!(r.stats.unwrap().records.iter().map(|x| x.seq).collect::<Vec<_>>(), [2]);
        assert_eq!(code(&ask(&s, r#"{"cmd":"stats","since":-1}"#)), Some(ErrorCode::MalformedRequest));
    }

    #[test]
    fn bad_rules_and_requests_get_typed_errors_and_change_nothing() {
        let s = shared();
        for (line, want) in [
            (r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/33","policy":"copa"}}"#, ErrorCode::InvalidCidr),
            (r#"{"cmd":"policy_add","rule":{"dstt":"10.0.0.0/8","policy":"copa"}}"#, ErrorCode::UnknownField),
            (r#"{"cmd":"policy_add","rule":{"dst_ports":"9-1","policy":"copa"}}"#, ErrorCode::BadPortRange),
            (r#"{"cmd":"policy_add","rule":{"policy":{"alg":"cubic","beta":2}}}"#, ErrorCode::InvalidPolicy),
            (r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/8"}}"#, ErrorCode::InvalidRule),
            (r#"{"cmd":"policy_add"}"#, ErrorCode::MalformedRequest),
            (r#"{"cmd":"policy_remove","id":-1}"#, ErrorCode::MalformedRequest),
            (r#"{"cmd":"flows","extra":1}"#, ErrorCode::MalformedRequest),
            (r#"{"cmd":"reboot"}"#, ErrorCode::MalformedRequest),
            ("[1,2]", ErrorCode::MalformedRequest),
            ("\u{0}\u{ff}", ErrorCode::MalformedRequest),
        ] {
            let r = ask(&s, line);
            assert_eq!(code(&r), Some(want), "{line}: {r:?}");
        }
        let e = ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.1/8","policy":"copa"}}"#).error.unwrap();
        assert_eq!(
            e.message,
            "rule: field `dst`: invalid CIDR: `10.0.0.1/8` has host bits set; the subnet is 10.0.0.0/8"
        );
        assert!(s.rules().rules().is_empty());
    }

    #[test]
    fn changes_are_persisted_before_they_apply_and_a_failed_write_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("polycc-control-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("policy.toml");
        let s = Shared::new(RuleSet::default(), Some(file.clone()));
        let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/8","policy":"bbr"}}"#);
        assert_eq!(r.persisted.as_deref(), Some(file.as_path()));
        assert_eq!(policy_file::load(&file).unwrap(), s.rules());
        // A policy file whose directory vanished: the write fails and the rules stay.
        let s = Shared::new(s.rules(), Some(dir.join("gone").join("policy.toml")));
        let r = ask(&s, r#"{"cmd":"policy_remove","id":1}"#);
        assert_eq!(code(&r), Some(ErrorCode::PersistFailed), "{r:?}");
        assert_eq!(s.rules().rules().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn flows_rates_are_over_the_publish_period() {
        let s = shared();
        let row = |reports| FlowRow {
            flow: 3,
            datapath: "()".into(),
            src: "a".into(),
            dst: "b".into(),
            cong_alg: "ccp".into(),
            rule: Some(1),
            policy: "copa".into(),
            pilot: "copa".into(),
            copilots: vec![],
            cwnd_bytes: 14_480,
            rate_bytes_per_sec: None,
            rtt_us: Some(40_000),
            throughput_bytes_per_sec: 0.0,
            reports_per_sec: 0.0,
            reports,
            handovers: 0,
        };
        let t0 = Instant::now();
        s.publish(vec![FlowSample { row: row(10), acked_bytes: 1_000 }], t0);
        s.publish(vec![FlowSample { row: row(30), acked_bytes: 2_001_000 }], t0 + Duration::from_millis(500));
        let flows = ask(&s, r#"{"cmd":"flows"}"#).flows.unwrap();
        assert_eq!(flows[0].reports_per_sec, 40.0);
        assert_eq!(flows[0].throughput_bytes_per_sec, 4_000_000.0);
    }

    /// Issue 16 A4: the timeout was per read, so a client sending a byte a second held its place
    /// (one of 16) for as long as it liked.
    #[test]
    fn a_client_that_trickles_a_request_is_dropped_at_the_request_deadline() {
        let (server, mut client) = UnixStream::pair().unwrap();
        let trickler = std::thread::spawn(move || {
            for _ in 0..20 {
                if client.write_all(b" ").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let started = Instant::now();
        let r = serve_client_within(server, &shared(), &crate::logging::discard(), Duration::from_millis(500));
        let took = started.elapsed();
        assert_eq!(r.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
        assert!(took < Duration::from_millis(1500), "held for {took:?} by a trickling client");
        trickler.join().unwrap();
        // A client that sends whole requests in time is served across many deadlines.
        let (server, mut client) = UnixStream::pair().unwrap();
        let served = std::thread::spawn(move || {
            serve_client_within(server, &shared(), &crate::logging::discard(), Duration::from_millis(300))
        });
        let mut answers = BufReader::new(client.try_clone().unwrap()).lines();
        for _ in 0..4 {
            client.write_all(b"{\"cmd\":\"flows\"}\n").unwrap();
            assert!(answers.next().unwrap().unwrap().contains("\"ok\":true"));
            std::thread::sleep(Duration::from_millis(200));
        }
        drop((answers, client));
        assert!(served.join().unwrap().is_ok(), "a client that closes after its requests ends cleanly");
    }

    /// Issue 16 A5: `--control-socket PATH` removed whatever file was at PATH.
    #[test]
    fn a_path_that_is_not_a_socket_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "keep me").unwrap();
        let err = ControlSocket::open(&path).err().expect("a regular file must not be replaced");
        assert!(matches!(err, ControlOpenError::NotASocket { .. }), "{err}");
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
        // A stale socket (nobody accepts on it) is still replaced.
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert!(ControlSocket::open(&stale).is_ok());
    }

    #[test]
    fn the_socket_serves_json_lines_and_survives_garbage_and_half_closed_clients() {
        let dir = std::env::temp_dir().join(format!("polycc-control-sock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("control.sock");
        let sock = ControlSocket::open(&path).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777, 0o700);
        assert!(matches!(ControlSocket::open(&path), Err(ControlOpenError::InUse { .. })));
        let _t = sock.spawn(Arc::new(shared()), crate::logging::discard()).unwrap();
        // A client that sends half a line and closes its write side.
        let mut half = UnixStream::connect(&path).unwrap();
        half.write_all(b"{\"cmd\":\"pol").unwrap();
        half.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = String::new();
        BufReader::new(&half).read_line(&mut answer).unwrap();
        assert!(answer.contains("malformed_request"), "{answer}");
        // Several requests on one connection, garbage between them.
        let mut c = UnixStream::connect(&path).unwrap();
        c.write_all(
            b"\xff\xfe garbage\n{\"cmd\":\"policy_add\",\"rule\":{\"policy\":\"reno\"}}\n{\"cmd\":\"flows\"}\n",
        )
        .unwrap();
        let mut lines = BufReader::new(&c).lines();
        let first: Response = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(code(&first), Some(ErrorCode::MalformedRequest));
        let second: Response = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert!(second.ok, "{second:?}");
        let r = client::request(&path, &Request::PolicyList {}).unwrap();
        assert_eq!(r.rules.unwrap().len(), 1);
        drop(sock);
        assert!(matches!(client::request(&path, &Request::Flows {}), Err(client::ClientError::NotRunning { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::PolicyList {},
            Request::PolicyShow { id: 3 },
            Request::PolicyAdd { rule: json!({"policy": "copa"}), position: Some(0), apply_live: false },
            Request::PolicyAdd { rule: json!({"policy": "copa"}), position: None, apply_live: true },
            Request::PolicyReplace { id: 3, rule: json!({"policy": "vivace"}), apply_live: true },
            Request::PolicyRemove { id: 3 },
            Request::Flows {},
            Request::Stats { since: None },
            Request::Stats { since: Some(9) },
            Request::FlowSet { flow: 7, datapath: None, policy: json!("copa") },
            Request::ModelLoad { path: PathBuf::from("/opt/mocc.onnx") },
        ] {
            assert_eq!(parse_request(&serde_json::to_vec(&r).unwrap()), Ok(r));
        }
    }

    #[test]
    fn model_load_swaps_a_valid_model_and_refuses_bad_files_keeping_the_old_one() {
        use polycc_algorithms::mocc::{synthetic, MODEL_INPUT_LEN};
        let dir = std::env::temp_dir().join(format!("polycc-control-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let good = write("good.onnx", &synthetic::valid_model_bytes());
        let mut no_seed = synthetic::metadata();
        no_seed.retain(|(k, _)| k != "polycc.seed");
        let cases = [
            (write("corrupt.onnx", b"\x08\x07not a protobuf at all"), ErrorCode::ModelInvalid, "not a readable ONNX"),
            (
                write("shape.onnx", &synthetic::model_bytes(&[0.5; 30], 0.0, 2.0, &synthetic::metadata())),
                ErrorCode::ModelInvalid,
                "[N, 30]: expected [N, 33]",
            ),
            (
                write("meta.onnx", &synthetic::model_bytes(&[0.5; MODEL_INPUT_LEN], 0.0, 2.0, &no_seed)),
                ErrorCode::ModelInvalid,
                "polycc.seed",
            ),
            (dir.join("absent.onnx"), ErrorCode::ModelMissing, "no MOCC model at"),
            (dir.clone(), ErrorCode::ModelUnreadable, "cannot read"),
        ];
        let s = shared();
        assert!(s.mocc_model().get().is_none());
        let load = |p: &Path| s.handle(Request::ModelLoad { path: p.to_path_buf() }, &crate::logging::discard());
        let r = load(&good);
        assert!(r.ok, "{r:?}");
        assert_eq!(r.model.as_ref().unwrap().metadata["polycc.format"], "mocc-1");
        let before = s.mocc_model().get().unwrap();
        for (path, code, text) in cases {
            let r = load(&path);
            let e = r.error.unwrap();
            assert_eq!(e.code, code, "{}: {}", path.display(), e.message);
            assert!(e.message.contains(text) && e.message.contains("previous model stays"), "{}", e.message);
            assert!(Arc::ptr_eq(&before, &s.mocc_model().get().unwrap()), "a refused model changes nothing");
        }
        // A flow's view of the slot follows a swap.
        let flow_slot = s.mocc_model().clone();
        assert!(load(&good).ok);
        assert!(!Arc::ptr_eq(&before, &flow_slot.get().unwrap()), "flows see the new model");
        std::fs::remove_dir_all(&dir).ok();
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic_the_parser(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = parse_request(&bytes);
        }

        #[test]
        fn random_json_never_panics_the_handler(
            cmd in proptest::sample::select(vec!["policy_list", "policy_show", "policy_add", "policy_replace", "policy_remove", "flows", "stats", "x"]),
            key in proptest::sample::select(vec!["dst", "src", "dst_ports", "src_ports", "cong_alg", "policy", "id", "bogus"]),
            value in proptest::prop_oneof![
                proptest::num::i64::ANY.prop_map(|v| json!(v)),
                "[0-9./\\-a-z]{0,20}".prop_map(|v| json!(v)),
                proptest::num::f64::ANY.prop_map(|v| json!(v)),
                proptest::strategy::Just(json!({"alg": "cubic", "beta": -1})),
                proptest::strategy::Just(json!(null)),
            ],
            id in proptest::num::i64::ANY,
        ) {
            let s = shared();
            let mut rule = serde_json::Map::new();
            rule.insert(key.to_string(), value);
            rule.entry("policy").or_insert(json!("reno"));
            let line = json!({"cmd": cmd, "rule": rule, "id": id}).to_string();
            let _ = ask(&s, &line);
            let line = json!({"cmd": cmd, "rule": rule}).to_string();
            let _ = ask(&s, &line);
        }
    }
}
