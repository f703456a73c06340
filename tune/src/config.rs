//! The configuration file (TOML). Every table refuses unknown fields; every check names the
//! field and what would be accepted. Example (docs/tune.md has the full list):
//!
//! ```toml
//! period_minutes = 15
//! state = "/var/lib/polycc/tune.json"
//! reward = { linear = { throughput = 1.0, latency = 0.1, loss = 2.0, latency_percentile = 75 } }
//!
//! [params]                      # candidates; {} takes the default bounds
//! beta = { min = 5, max = 100, scale = "log" }
//! latency_filter = {}
//!
//! [[group]]
//! name = "video-cellular"
//! dst = "10.64.0.0/10"
//! dst_ports = ["443", "8000-8999"]
//! ```

use crate::bandit::{BanditConfig, SafetyConfig};
use crate::context::ContextSpec;
use crate::params::{Bounds, BoundsError, Param, Scale, Space};
use crate::reward::RewardFn;
use crate::sim_env::SimSpec;
use polycc_control::policy_rules::{IpCidr, PortRange};
use polycc_algorithms::vivace::VivaceConfig;
use polycc_algorithms::Algorithm;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a configuration is refused. Each kind has its own exit status ([`ConfigError::exit_code`]).
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    UnknownField { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    EmptyGroup { path: PathBuf, message: String },
    #[error("{path}: impossible bounds: {source}")]
    Bounds {
        path: PathBuf,
        #[source]
        source: BoundsError,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl ConfigError {
    /// 3: unreadable or not TOML, 4: an unknown field or parameter, 5: no groups or an empty one,
    /// 6: impossible bounds, 7: another invalid value.
    pub fn exit_code(&self) -> i32 {
        match self {
            ConfigError::Read { .. } | ConfigError::Syntax { .. } => 3,
            ConfigError::UnknownField { .. } => 4,
            ConfigError::EmptyGroup { .. } => 5,
            ConfigError::Bounds { .. } => 6,
            ConfigError::Invalid { .. } => 7,
        }
    }
}

/// One candidate parameter's bounds as written; missing pieces take [`Param::default_bounds`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamSpec {
    min: Option<f64>,
    max: Option<f64>,
    scale: Option<Scale>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupSpec {
    name: String,
    dst: Option<String>,
    #[serde(default)]
    dst_ports: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default = "default_period")]
    period_minutes: f64,
    state: Option<PathBuf>,
    socket: Option<PathBuf>,
    #[serde(default = "default_poll")]
    poll_seconds: f64,
    #[serde(default = "default_min_samples")]
    min_samples: usize,
    #[serde(default)]
    reward: RewardFn,
    params: Option<BTreeMap<String, ParamSpec>>,
    #[serde(default)]
    base: VivaceConfig,
    safe: Option<VivaceConfig>,
    #[serde(default)]
    bandit: BanditConfig,
    #[serde(default)]
    safety: SafetyConfig,
    #[serde(default)]
    contexts: ContextSpec,
    #[serde(default)]
    group: Vec<GroupSpec>,
    sim: Option<SimSpec>,
}

fn default_period() -> f64 {
    15.0
}
fn default_poll() -> f64 {
    10.0
}
fn default_min_samples() -> usize {
    10
}

/// A (service, destination subnet) group: the unit one configuration is learned for.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: String,
    pub dst: Option<IpCidr>,
    /// Empty: every port. Each range becomes one agent rule.
    pub dst_ports: Vec<PortRange>,
}

impl Group {
    pub fn matches(&self, dst: IpAddr, port: u16) -> bool {
        self.dst.is_none_or(|c| c.contains(dst))
            && (self.dst_ports.is_empty() || self.dst_ports.iter().any(|r| r.contains(port)))
    }

    /// An address and a port inside the group (what simulated flows are given): the subnet's
    /// first address after its network address.
    pub fn representative(&self) -> (IpAddr, u16) {
        let addr = match self.dst.map(|c| c.network()) {
            None => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            Some(IpAddr::V4(n)) => IpAddr::V4(Ipv4Addr::from(u32::from(n) | 1)),
            Some(IpAddr::V6(n)) => IpAddr::V6(Ipv6Addr::from(u128::from(n) | 1)),
        };
        (addr, self.dst_ports.first().map_or(443, |r| r.first))
    }
}

/// A checked configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub period_minutes: f64,
    pub state: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    pub poll_seconds: f64,
    pub min_samples: usize,
    pub reward: RewardFn,
    pub space: Space,
    pub safe: VivaceConfig,
    pub bandit: BanditConfig,
    pub safety: SafetyConfig,
    pub contexts: ContextSpec,
    pub groups: Vec<Group>,
    pub sim: Option<SimSpec>,
}

/// The candidates when `[params]` is left out: the parameters that move reward most in the
/// simulator's populations (loss penalty, latency noise filter, latency penalty, slow-start exit).
pub const DEFAULT_PARAMS: [Param; 6] =
    [Param::Beta, Param::Gamma, Param::Omega, Param::LatencyFilter, Param::SlowStartExitLatency, Param::LossFilter];

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Config::parse(&text, path)
    }

    /// Parse and check; `path` only names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let p = || path.to_path_buf();
        let spec: FileSpec = toml::from_str(text).map_err(|e| {
            let message = e.to_string().trim().to_string();
            if message.contains("unknown field") || message.contains("unknown variant") {
                ConfigError::UnknownField { path: p(), message }
            } else {
                ConfigError::Syntax { path: p(), message }
            }
        })?;
        let invalid = |message: String| ConfigError::Invalid { path: p(), message };
        if !(spec.period_minutes.is_finite() && spec.period_minutes > 0.0) {
            return Err(invalid(format!("period_minutes = {} must be > 0", spec.period_minutes)));
        }
        if !(spec.poll_seconds.is_finite() && spec.poll_seconds > 0.0) {
            return Err(invalid(format!("poll_seconds = {} must be > 0", spec.poll_seconds)));
        }
        if spec.poll_seconds >= polycc_control::stats::STATS_HISTORY_SECS as f64 {
            return Err(invalid(format!(
                "poll_seconds = {} would miss records: the agent keeps {} s of them",
                spec.poll_seconds,
                polycc_control::stats::STATS_HISTORY_SECS
            )));
        }
        spec.reward.check().map_err(|m| invalid(format!("reward: {m}")))?;
        spec.bandit.check().map_err(invalid)?;
        spec.safety.check().map_err(invalid)?;
        spec.contexts.check().map_err(invalid)?;
        spec.base.validate().map_err(|e| invalid(format!("base: {e}")))?;
        let safe = spec.safe.clone().unwrap_or_else(|| spec.base.clone());
        safe.validate().map_err(|e| invalid(format!("safe: {e}")))?;

        let mut params = Vec::new();
        match &spec.params {
            None => params.extend(DEFAULT_PARAMS.iter().map(|p| (*p, p.default_bounds()))),
            Some(m) => {
                for (name, ps) in m {
                    let param: Param = name.parse().map_err(|message| ConfigError::UnknownField {
                        path: p(),
                        message: format!("params: {message}"),
                    })?;
                    let d = param.default_bounds();
                    let b = Bounds {
                        min: ps.min.unwrap_or(d.min),
                        max: ps.max.unwrap_or(d.max),
                        scale: ps.scale.unwrap_or(d.scale),
                    };
                    b.check(param).map_err(|source| ConfigError::Bounds { path: p(), source })?;
                    params.push((param, b));
                }
            }
        }
        if params.is_empty() {
            return Err(invalid("params is empty: name at least one Vivace parameter to tune".into()));
        }
        params.sort_by_key(|(p, _)| *p);
        for (param, b) in &params {
            for (what, c) in [("base", &spec.base), ("safe", &safe)] {
                let v = param.get(c);
                // The starting points must be inside the bounds, else the first projection
                // silently moves them.
                if v < b.min - 1e-12 || v > b.max + 1e-12 {
                    let source = BoundsError::SafeOutside { param: *param, value: v, min: b.min, max: b.max };
                    return Err(match what {
                        "base" => invalid(format!("base: {source} (widen the bounds or set base.{param})")),
                        _ => ConfigError::Bounds { path: p(), source },
                    });
                }
            }
        }

        if spec.group.is_empty() {
            return Err(ConfigError::EmptyGroup {
                path: p(),
                message: "no [[group]]: add one with a name, a dst subnet and/or dst_ports".into(),
            });
        }
        let mut groups: Vec<Group> = Vec::new();
        for g in &spec.group {
            let empty =
                |why: &str| ConfigError::EmptyGroup { path: p(), message: format!("group `{}`: {why}", g.name) };
            if g.name.trim().is_empty() {
                return Err(ConfigError::EmptyGroup { path: p(), message: "a group has an empty name".into() });
            }
            if groups.iter().any(|o| o.name == g.name) {
                return Err(invalid(format!("two groups are named `{}`", g.name)));
            }
            let dst = match &g.dst {
                Some(s) => Some(s.parse::<IpCidr>().map_err(|e| invalid(format!("group `{}`: dst: {e}", g.name)))?),
                None => None,
            };
            let dst_ports = match &g.dst_ports {
                Some(v) if v.is_empty() => {
                    return Err(empty("dst_ports is an empty list (leave it out for every port)"))
                }
                Some(v) => v
                    .iter()
                    .map(|s| s.parse::<PortRange>().map_err(|e| invalid(format!("group `{}`: dst_ports: {e}", g.name))))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            };
            if dst.is_none() && dst_ports.is_empty() {
                return Err(empty(
                    "neither dst nor dst_ports: a group must name a destination subnet and/or a service's ports",
                ));
            }
            let group = Group { name: g.name.clone(), dst, dst_ports };
            if let Some(o) = groups.iter().find(|o| overlap(o, &group)) {
                return Err(invalid(format!(
                    "groups `{}` and `{}` overlap: a flow would belong to both (narrow one's dst or dst_ports)",
                    o.name, group.name
                )));
            }
            groups.push(group);
        }
        if let Some(sim) = &spec.sim {
            sim.check(&groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>()).map_err(invalid)?;
        }
        Ok(Config {
            period_minutes: spec.period_minutes,
            state: spec.state,
            socket: spec.socket,
            poll_seconds: spec.poll_seconds,
            min_samples: spec.min_samples,
            reward: spec.reward,
            space: Space { base: spec.base, params },
            safe,
            bandit: spec.bandit,
            safety: spec.safety,
            contexts: spec.contexts,
            groups,
            sim: spec.sim,
        })
    }
}

fn overlap(a: &Group, b: &Group) -> bool {
    let dst = match (a.dst, b.dst) {
        (Some(x), Some(y)) => x.overlaps(&y),
        _ => true,
    };
    let ports = a.dst_ports.is_empty()
        || b.dst_ports.is_empty()
        || a.dst_ports.iter().any(|x| b.dst_ports.iter().any(|y| x.overlaps(y)));
    dst && ports
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
period_minutes = 20
reward = { linear = { throughput = 1.0, latency = 0.05, loss = 1.0 } }
[params]
beta = { min = 5, max = 100 }
latency_filter = {}
[[group]]
name = "video-cell"
dst = "10.64.0.0/10"
dst_ports = ["443", "8000-8999"]
[[group]]
name = "downloads"
dst_ports = ["80"]
"#;

    fn parse(s: &str) -> Result<Config, ConfigError> {
        Config::parse(s, Path::new("tune.toml"))
    }

    #[test]
    fn a_good_file_parses_with_defaults_filled_in() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.period_minutes, 20.0);
        assert_eq!(c.space.params.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [Param::Beta, Param::LatencyFilter]);
        assert_eq!(c.space.params[0].1.scale, Scale::Log, "default scale kept");
        assert_eq!(c.groups[0].dst_ports.len(), 2);
        assert!(c.groups[0].matches("10.65.1.2".parse().unwrap(), 8080));
        assert!(!c.groups[0].matches("10.65.1.2".parse().unwrap(), 80));
        assert_eq!(c.contexts.names().len(), 6);
        assert_eq!(c.groups[0].representative(), ("10.64.0.1".parse().unwrap(), 443));
    }

    #[test]
    fn each_kind_of_error_has_its_own_exit_code_and_says_what_to_fix() {
        let cases: [(&str, i32, &str); 8] = [
            ("period_minutes = [", 3, "tune.toml"),
            ("perod_minutes = 5\n[[group]]\nname='a'\ndst_ports=['1']", 4, "unknown field `perod_minutes`"),
            ("[params]\nbetta = {}\n[[group]]\nname='a'\ndst_ports=['1']", 4, "unknown Vivace parameter `betta`"),
            ("[params]\nbeta = {}", 5, "no [[group]]"),
            ("[[group]]\nname = 'x'", 5, "neither dst nor dst_ports"),
            ("[params]\nbeta = { min = 50, max = 10 }\n[[group]]\nname='a'\ndst_ports=['1']", 6, "not below max"),
            (
                "[params]\ngamma = { min = 0, max = 100 }\n[[group]]\nname='a'\ndst_ports=['1']",
                6,
                "log scale needs min > 0",
            ),
            ("[[group]]\nname='a'\ndst='10.0.0.0/8'\n[[group]]\nname='b'\ndst='10.1.0.0/16'", 7, "overlap"),
        ];
        for (text, code, says) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.exit_code(), code, "{text}: {e}");
            assert!(e.to_string().contains(says), "{text}: `{e}` should say `{says}`");
        }
    }

    #[test]
    fn a_base_outside_the_bounds_is_refused_rather_than_moved() {
        let e = parse(
            "[base]\nbeta = 500.0\n[params]\nbeta = { min = 5, max = 100 }\n[[group]]\nname='a'\ndst_ports=['1']",
        )
        .unwrap_err();
        assert!(e.to_string().contains("base: beta"), "{e}");
    }
}
