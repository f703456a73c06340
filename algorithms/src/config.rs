//! What every algorithm's configuration shares: the error a configuration that cannot run gets
//! (naming what to change), and the range checks behind each config's `validate`. A leaf module:
//! the configs (one per algorithm file) and [`crate::policy`] depend on it, it on nothing of theirs.

use thiserror::Error;

/// A policy that cannot run, with what to change.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("unknown algorithm `{name}`: expected one of {accepted}")]
    UnknownAlgorithm { name: String, accepted: &'static str },
    #[error("unknown algorithm `{name}`: expected one of {accepted} or fused")]
    UnknownPolicyAlgorithm { name: String, accepted: &'static str },
    #[error("unknown fusion function `{0}`: expected max, min or target")]
    UnknownFusion(String),
    #[error("unknown fusion quantity `{0}`: expected cwnd or rate")]
    UnknownFuseOn(String),
    #[error("a fused policy needs at least one copilot (e.g. --copilot cubic)")]
    NoCopilot,
    #[error("`fused` cannot be a pilot or copilot: name a single algorithm ({accepted})")]
    NestedFusion { accepted: &'static str },
    #[error("a fixed fusion target must be a positive number of bytes")]
    ZeroTarget,
    #[error("no algorithm named: pass one of {accepted}, or fused")]
    NoAlgorithm { accepted: &'static str },
    /// A flag or field that would have no effect on the policy it is given with.
    #[error("{what} would be ignored here: {only}")]
    Ignored { what: &'static str, only: &'static str },
    #[error("unknown {algorithm} parameter `{key}`: expected one of {accepted}")]
    UnknownParameter { algorithm: &'static str, key: String, accepted: &'static str },
    #[error("invalid {algorithm} parameter: {reason}")]
    InvalidParameter { algorithm: &'static str, reason: String },
    /// A MOCC model that cannot be loaded (the boundary's typed error, as text).
    #[error("{0}")]
    Model(String),
}

pub(crate) fn check_range(
    algorithm: &'static str,
    name: &str,
    v: f64,
    lo: f64,
    hi: f64,
    inclusive: bool,
) -> Result<(), PolicyError> {
    let ok = v.is_finite() && if inclusive { (lo..=hi).contains(&v) } else { v > lo && v < hi };
    if ok {
        Ok(())
    } else {
        let (l, r) = if inclusive { ('[', ']') } else { ('(', ')') };
        Err(PolicyError::InvalidParameter { algorithm, reason: format!("{name} = {v} is outside {l}{lo}, {hi}{r}") })
    }
}

pub(crate) fn check_init_cwnd(algorithm: &'static str, packets: Option<u64>) -> Result<(), PolicyError> {
    match packets {
        Some(p) if !(2..=10_000).contains(&p) => Err(PolicyError::InvalidParameter {
            algorithm,
            reason: format!("init_cwnd_packets = {p} is outside [2, 10000]"),
        }),
        _ => Ok(()),
    }
}
