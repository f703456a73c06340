//! The tuner's persisted state: per group, the agent rules it owns and, per context, the
//! bandit's state (theta, momentum, phase, history). Written after every period with the
//! agent's atomic writer (temp file, fsync, rename, fsync the directory), so a crash leaves the
//! previous period's state or this one's, and a restart resumes where it stopped.

use crate::bandit::ContextState;
use crate::params::Space;
use polycc_control::atomic_write::write_atomically;
use polycc_algorithms::vivace::VivaceConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// 2: the averages' loss is a fraction, `loss_frac` (1 had `loss_pct`, a percentage; read
/// and converted by [`State::load_or_new`]).
pub const STATE_VERSION: u32 = 2;

#[derive(Debug, Error)]
pub enum StateError {
    #[error("cannot read the state file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the state file {path} is not a polycc-tune state ({message}); move it away to start afresh")]
    Corrupt { path: PathBuf, message: String },
    #[error("the state file {path} was written for other tuned parameters ({found}; the configuration has {expected}): restore the configuration, or move the state away to start afresh")]
    Mismatch { path: PathBuf, found: String, expected: String },
    #[error("cannot write the state file {path}: {source} (nothing was lost: the previous state is intact)")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What a group is playing this period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Playing {
    pub context: String,
    pub point: Vec<f64>,
    pub config: VivaceConfig,
    /// When it was installed (the period's records start here).
    pub since_unix_s: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupState {
    /// The agent rules this group's configuration is installed in (one per port range).
    pub rule_ids: Vec<u32>,
    pub contexts: BTreeMap<String, ContextState>,
    pub playing: Option<Playing>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// The tuned parameters' names, in coordinate order (a state is only valid for them).
    pub params: Vec<String>,
    /// Periods completed.
    pub period: u64,
    /// The agent's stats cursor.
    pub stats_cursor: Option<u64>,
    pub groups: BTreeMap<String, GroupState>,
}

/// Version 1 kept loss as a percentage, `loss_pct`, in each context's averages and history; from
/// version 2 it is a fraction, `loss_frac` (docs/metrics.md).
fn from_version_1(v: &mut serde_json::Value) {
    fn to_frac(o: &mut serde_json::Value) {
        if let Some(m) = o.as_object_mut() {
            if let Some(pct) = m.remove("loss_pct").and_then(|x| x.as_f64()) {
                m.insert("loss_frac".into(), (pct / 100.0).into());
            }
        }
    }
    for g in v["groups"].as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        for c in g["contexts"].as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
            to_frac(&mut c["averages"]);
            for h in c["history"].as_array_mut().into_iter().flatten() {
                to_frac(&mut h["obs"]);
            }
        }
    }
    v["version"] = STATE_VERSION.into();
}

pub fn param_names(space: &Space) -> Vec<String> {
    space.params.iter().map(|(p, b)| format!("{p}[{}..{} {:?}]", b.min, b.max, b.scale).to_lowercase()).collect()
}

impl State {
    pub fn new(space: &Space) -> State {
        State {
            version: STATE_VERSION,
            params: param_names(space),
            period: 0,
            stats_cursor: None,
            groups: BTreeMap::new(),
        }
    }

    /// The saved state, or a fresh one when `path` does not exist.
    pub fn load_or_new(path: &Path, space: &Space) -> Result<State, StateError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::new(space)),
            Err(source) => return Err(StateError::Read { path: path.into(), source }),
        };
        let corrupt = |e: serde_json::Error| StateError::Corrupt { path: path.into(), message: e.to_string() };
        let mut v: serde_json::Value = serde_json::from_str(&text).map_err(corrupt)?;
        if v["version"] == 1 {
            from_version_1(&mut v);
        }
        let s: State = serde_json::from_value(v).map_err(corrupt)?;
        if s.version != STATE_VERSION {
            return Err(StateError::Corrupt { path: path.into(), message: format!("version {}", s.version) });
        }
        let expected = param_names(space);
        if s.params != expected {
            return Err(StateError::Mismatch {
                path: path.into(),
                found: s.params.join(", "),
                expected: expected.join(", "),
            });
        }
        Ok(s)
    }

    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let bytes =
            serde_json::to_vec_pretty(self).map_err(|e| StateError::Write { path: path.into(), source: e.into() })?;
        write_atomically(path, &bytes).map_err(|source| StateError::Write { path: path.into(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_state_has_its_loss_percentages_read_as_fractions() {
        let mut v = serde_json::json!({
            "version": 1,
            "groups": {"web": {"contexts": {"day": {
                "averages": {"reward": 1.0, "latency_ms": 50.0, "loss_pct": 2.5},
                "history": [{"period": 3, "obs": {"reward": 1.0, "loss_pct": 10.0}}],
            }}}},
        });
        from_version_1(&mut v);
        let day = &v["groups"]["web"]["contexts"]["day"];
        assert_eq!(v["version"], STATE_VERSION);
        assert_eq!(day["averages"]["loss_frac"], 0.025);
        assert_eq!(day["history"][0]["obs"]["loss_frac"], 0.1);
        assert!(day["averages"].get("loss_pct").is_none() && day["history"][0]["obs"].get("loss_pct").is_none());
    }
}
