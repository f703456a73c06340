//! Agent mode: records from the agent's control socket (`{"cmd":"stats","since":N}`, polled
//! more often than the agent's [`STATS_HISTORY_SECS`] window), configurations into it as
//! policy rules, one per group and port range (`policy_add` the first time, `policy_replace`
//! after, so a rule keeps its id and place).
//!
//! No fate sharing: the agent persists every rule it accepts and never waits on the tuner, so
//! when the tuner stops or dies, flows keep getting the last configuration it installed. A
//! restart reads the saved state (rule ids included) and finishes the period in progress.

use crate::config::{Config, Group};
use crate::state::{State, StateError};
use crate::tuner::{TraceRow, Tuner};
use polycc_control::policy_rules::{policy_to_json, Rule};
use polycc_control::stats::{StatsRecord, STATS_HISTORY_SECS};
use polycc_algorithms::vivace::VivaceConfig;
use polycc_algorithms::{AlgorithmConfig, Policy};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// How long one request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub enum AgentError {
    #[error(
        "the agent is not reachable at {path}: {source} (start polycc-portus with --control-socket, or pass --socket)"
    )]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {path}: the answer is not a response: {message}")]
    Protocol { path: PathBuf, message: String },
    #[error("the agent refused `{cmd}`: {code}: {message}")]
    Refused { cmd: String, code: String, message: String },
}

/// One request, one response line.
pub fn request(path: &Path, req: &Value) -> Result<Value, AgentError> {
    let stream = UnixStream::connect(path).map_err(|source| AgentError::Connect { path: path.into(), source })?;
    let io = |source| AgentError::Io { path: path.into(), source };
    stream.set_read_timeout(Some(REQUEST_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT)).map_err(io)?;
    let mut line =
        serde_json::to_vec(req).map_err(|e| AgentError::Protocol { path: path.into(), message: e.to_string() })?;
    line.push(b'\n');
    (&stream).write_all(&line).map_err(io)?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).map_err(io)?;
    let v: Value = serde_json::from_str(&answer)
        .map_err(|e| AgentError::Protocol { path: path.into(), message: e.to_string() })?;
    if v["ok"] != Value::Bool(true) {
        return Err(AgentError::Refused {
            cmd: req["cmd"].as_str().unwrap_or("?").to_string(),
            code: v["error"]["code"].as_str().unwrap_or("unknown").to_string(),
            message: v["error"]["message"].as_str().unwrap_or("(no message)").to_string(),
        });
    }
    Ok(v)
}

/// New records since `cursor`, and the next cursor.
pub fn poll_stats(path: &Path, cursor: Option<u64>) -> Result<(Vec<StatsRecord>, Option<u64>), AgentError> {
    let req = match cursor {
        Some(c) => json!({"cmd": "stats", "since": c}),
        None => json!({"cmd": "stats"}),
    };
    let v = request(path, &req)?;
    let bad = |message: String| AgentError::Protocol { path: path.into(), message };
    let records: Vec<StatsRecord> =
        serde_json::from_value(v.get("records").cloned().unwrap_or(Value::Array(Vec::new())))
            .map_err(|e| bad(format!("records: {e}")))?;
    let next = v["next"].as_u64().or_else(|| records.iter().map(|r| r.seq).max()).or(cursor);
    Ok((records, next))
}

/// The rule (policy-file form, without id) of one of a group's port ranges.
pub fn rule_json(g: &Group, range: usize, config: &VivaceConfig) -> Value {
    let rule = Rule {
        id: 0,
        dst: g.dst,
        src: None,
        dst_ports: g.dst_ports.get(range).copied(),
        src_ports: None,
        cong_alg: None,
        policy: Policy::Single(AlgorithmConfig::Vivace(config.clone())),
    };
    let mut v = rule.to_json();
    if let Value::Object(m) = &mut v {
        m.remove("id");
        m.insert("policy".into(), policy_to_json(&rule.policy));
    }
    v
}

/// Install `config` in every rule of the group: replace the rules it owns, add the missing ones
/// (first in the match order). Returns the rule ids.
pub fn install(path: &Path, g: &Group, owned: &[u32], config: &VivaceConfig) -> Result<Vec<u32>, AgentError> {
    let ranges = g.dst_ports.len().max(1);
    let mut ids = Vec::with_capacity(ranges);
    for r in 0..ranges {
        let rule = rule_json(g, r, config);
        let replaced = match owned.get(r) {
            Some(id) => match request(path, &json!({"cmd": "policy_replace", "id": id, "rule": rule})) {
                Ok(_) => Some(*id),
                // Someone removed it: add it again.
                Err(AgentError::Refused { code, .. }) if code == "no_such_rule" => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let id = match replaced {
            Some(id) => id,
            None => {
                let v = request(path, &json!({"cmd": "policy_add", "rule": rule, "position": 0}))?;
                v["rules"][0]["id"].as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| {
                    AgentError::Protocol { path: path.into(), message: "policy_add answered no rule id".into() }
                })?
            }
        };
        ids.push(id);
    }
    Ok(ids)
}

pub fn now_unix_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Why the agent loop stopped.
#[derive(Debug, Error)]
pub enum LoopError {
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    State(#[from] StateError),
}

/// Install the plan; a group whose install fails plays nothing this period (its records will
/// not be attributed to a configuration it may not be running).
fn install_plan(
    t: &mut Tuner,
    socket: &Path,
    plan: &[(usize, VivaceConfig)],
    warn: &mut impl FnMut(String),
) -> Vec<AgentError> {
    let mut failed = Vec::new();
    for (gi, config) in plan {
        let g = &t.cfg.groups[*gi];
        let gs = t.state.groups.get_mut(&g.name).expect("plan created it");
        match install(socket, g, &gs.rule_ids, config) {
            Ok(ids) => gs.rule_ids = ids,
            Err(e) => {
                warn(format!("group {}: install failed, retrying next period: {e}", g.name));
                gs.playing = None;
                failed.push(e);
            }
        }
    }
    failed
}

/// The agent loop: runs `periods` periods (None: forever), saving the state after each.
pub fn run(
    cfg: &Config,
    state_path: &Path,
    socket: &Path,
    periods: Option<u64>,
    mut on_period: impl FnMut(&[TraceRow]),
    mut warn: impl FnMut(String),
) -> Result<State, LoopError> {
    let state = State::load_or_new(state_path, &cfg.space)?;
    let mut t = Tuner::new(cfg, state);
    let period = Duration::from_secs_f64(cfg.period_minutes * 60.0);
    let poll = Duration::from_secs_f64(cfg.poll_seconds).min(Duration::from_secs(STATS_HISTORY_SECS as u64 / 2));
    let stop_at = periods.map(|n| t.state.period + n);
    // Resume the period in progress (installing its configuration again: the state, saved
    // before each install, is the reference), or start one. An agent that cannot be reached
    // at start is an error; later, it is retried every period.
    let resumed: Vec<(usize, VivaceConfig)> = cfg
        .groups
        .iter()
        .enumerate()
        .filter_map(|(i, g)| Some((i, t.state.groups.get(&g.name)?.playing.as_ref()?.config.clone())))
        .collect();
    let plan = if resumed.len() == cfg.groups.len() { resumed } else { t.plan(now_unix_s()) };
    t.state.save(state_path)?;
    let mut failed = install_plan(&mut t, socket, &plan, &mut warn);
    t.state.save(state_path)?;
    if failed.len() == plan.len() {
        return Err(failed.swap_remove(0).into());
    }
    let mut records: Vec<StatsRecord> = Vec::new();
    while stop_at.is_none_or(|s| t.state.period < s) {
        let since = cfg
            .groups
            .iter()
            .filter_map(|g| t.state.groups.get(&g.name)?.playing.as_ref().map(|p| p.since_unix_s))
            .fold(f64::INFINITY, f64::min);
        let end = if since.is_finite() { since + period.as_secs_f64() } else { now_unix_s() + period.as_secs_f64() };
        loop {
            match poll_stats(socket, t.state.stats_cursor) {
                Ok((new, next)) => {
                    records.extend(new.into_iter().filter(|r| r.t_unix_s > since));
                    t.state.stats_cursor = next;
                }
                Err(e) => warn(format!("stats: {e}")),
            }
            let left = end - now_unix_s();
            if left <= 0.0 {
                break;
            }
            std::thread::sleep(poll.min(Duration::from_secs_f64(left)));
        }
        let rows = t.finish(&records);
        records.clear();
        t.state.period += 1;
        let plan = t.plan(now_unix_s());
        // Saved before installing: a crash in between re-installs the same plan on restart.
        t.state.save(state_path)?;
        if !install_plan(&mut t, socket, &plan, &mut warn).is_empty() {
            t.state.save(state_path)?;
        }
        on_period(&rows);
    }
    Ok(t.state)
}
