//! Command-line flags shared by `polycc-sim` and `polycc-portus`: one parser for the algorithm
//! and fusion policy (`--alg`, `--pilot`, `--copilot`, `--fusion`, `--target-cwnd`, `--fuse-on`)
//! and for the quantities both take. Binaries flatten [`PolicyArgs`] into their own clap
//! structs and call [`PolicyArgs::policy`].

pub mod quantity;

use clap::Args;
use polycc_algorithms::vivace::VivaceConfig;
use polycc_algorithms::{AlgorithmConfig, AlgorithmKind, FuseOn, FusionFn, FusionPolicy, Policy, PolicyError};

/// What every flow runs unless a rule says otherwise.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct PolicyArgs {
    /// Algorithm: reno, cubic, vegas, bbr, copa, allegro, vivace, or fused (a pilot plus copilots).
    #[arg(long, default_value = "cubic", value_name = "ALG")]
    pub alg: String,

    /// Fused policies: the pilot whose logic drives the sender.
    #[arg(long, value_name = "ALG", default_value = "bbr")]
    pub pilot: String,

    /// Fused policies: one or more copilots, comma-separated (e.g. cubic or cubic,copa).
    #[arg(long, value_name = "ALG[,ALG..]", value_delimiter = ',')]
    pub copilot: Vec<String>,

    /// Fused policies: max, min, or target (closest to --target-cwnd, or to the BDP estimate).
    #[arg(long, value_name = "FN", default_value = "max")]
    pub fusion: String,

    /// Fused policies with --fusion target: the target window in bytes (default: the BDP estimate).
    #[arg(long, value_name = "BYTES")]
    pub target_cwnd: Option<u64>,

    /// Fused policies: combine congestion windows (cwnd) or sending rates (rate).
    #[arg(long, value_name = "cwnd|rate", default_value = "cwnd")]
    pub fuse_on: String,

    /// PCC Vivace parameters as KEY=VALUE,..., applied wherever vivace runs (--alg, --pilot,
    /// --copilot). Keys: alpha, beta, gamma, delta, omega, initial_rate (e.g. 10mbit),
    /// slow_start_exit_latency, slow_start_exit_loss, max_slow_start_rate (e.g. 200mbit),
    /// latency_filter, loss_filter, and the switches unified_exploration, early_decrease,
    /// emergency_brakes, insufficient_acks, noise_filters (true/false).
    #[arg(long, value_name = "KEY=VALUE,..")]
    pub vivace: Option<String>,
}

/// The keys `--vivace` accepts.
pub const VIVACE_KEYS: &str = "alpha, beta, gamma, delta, omega, initial_rate, slow_start_exit_latency, \
slow_start_exit_loss, max_slow_start_rate, latency_filter, loss_filter, unified_exploration, early_decrease, \
emergency_brakes, insufficient_acks, noise_filters";

/// Parse `--vivace`'s `KEY=VALUE,...` list over Vivace's defaults, and check the result lies in
/// the permitted space (the error names the key and the allowed range).
pub fn parse_vivace(spec: &str) -> Result<VivaceConfig, PolicyError> {
    let mut c = VivaceConfig::default();
    let invalid = |reason: String| PolicyError::InvalidParameter { algorithm: "vivace", reason };
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) =
            item.split_once('=').ok_or_else(|| invalid(format!("`{item}` is not KEY=VALUE (keys: {VIVACE_KEYS})")))?;
        let (key, value) = (key.trim(), value.trim());
        let num = || -> Result<f64, PolicyError> {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| invalid(format!("{key} = `{value}` is not a number")))
        };
        let rate = || -> Result<f64, PolicyError> {
            quantity::parse_bandwidth(value).map(|r| r.mbps()).map_err(|e| invalid(format!("{key}: {e}")))
        };
        let flag = || -> Result<bool, PolicyError> {
            match value.to_ascii_lowercase().as_str() {
                "true" | "on" | "yes" | "1" => Ok(true),
                "false" | "off" | "no" | "0" => Ok(false),
                _ => Err(invalid(format!("{key} = `{value}` is not a switch: use true or false"))),
            }
        };
        match key {
            "alpha" => c.alpha = num()?,
            "beta" => c.beta = num()?,
            "gamma" => c.gamma = num()?,
            "delta" => c.delta = num()?,
            "omega" => c.omega = num()?,
            "initial_rate" => c.initial_rate_mbps = Some(rate()?),
            "slow_start_exit_latency" => c.slow_start_exit_latency = num()?,
            "slow_start_exit_loss" => c.slow_start_exit_loss = num()?,
            "max_slow_start_rate" => c.max_slow_start_rate_mbps = Some(rate()?),
            "latency_filter" => c.latency_filter = num()?,
            "loss_filter" => c.loss_filter = num()?,
            "unified_exploration" => c.unified_exploration = flag()?,
            "early_decrease" => c.early_decrease = flag()?,
            "emergency_brakes" => c.emergency_brakes = flag()?,
            "insufficient_acks" => c.insufficient_acks = flag()?,
            "noise_filters" => c.noise_filters = flag()?,
            _ => {
                return Err(PolicyError::UnknownParameter {
                    algorithm: "vivace",
                    key: key.to_string(),
                    accepted: VIVACE_KEYS,
                })
            }
        }
    }
    c.validate()?;
    Ok(c)
}

/// A flag combination that does not describe a runnable policy, naming the flag to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{flag}: {source}")]
pub struct PolicyArgsError {
    pub flag: &'static str,
    #[source]
    pub source: PolicyError,
}

fn at(flag: &'static str) -> impl Fn(PolicyError) -> PolicyArgsError {
    move |source| PolicyArgsError { flag, source }
}

impl PolicyArgs {
    /// The validated policy these flags describe.
    pub fn policy(&self) -> Result<Policy, PolicyArgsError> {
        let mut policy = self.policy_with_defaults()?;
        if let Some(spec) = &self.vivace {
            let vivace = parse_vivace(spec).map_err(at("--vivace"))?;
            let mut applied = false;
            let mut set = |c: &mut AlgorithmConfig| {
                if let AlgorithmConfig::Vivace(v) = c {
                    *v = vivace.clone();
                    applied = true;
                }
            };
            match &mut policy {
                Policy::Single(c) => set(c),
                Policy::Fused(f) => {
                    set(&mut f.pilot);
                    f.copilots.iter_mut().for_each(set);
                }
            }
            if !applied {
                return Err(at("--vivace")(PolicyError::InvalidParameter {
                    algorithm: "vivace",
                    reason: format!("the policy `{}` runs no vivace to apply it to", policy.describe()),
                }));
            }
        }
        Ok(policy)
    }

    /// The policy with every member at its default configuration.
    fn policy_with_defaults(&self) -> Result<Policy, PolicyArgsError> {
        if self.alg.trim().eq_ignore_ascii_case("fused") {
            let pilot = self.pilot.parse::<AlgorithmKind>().map_err(at("--pilot"))?;
            let copilots = self
                .copilot
                .iter()
                .filter(|c| !c.trim().is_empty())
                .map(|c| c.parse::<AlgorithmKind>().map(AlgorithmKind::default_config))
                .collect::<Result<Vec<_>, _>>()
                .map_err(at("--copilot"))?;
            let fusion = FusionFn::parse(&self.fusion, self.target_cwnd).map_err(at("--fusion"))?;
            let fuse_on = self.fuse_on.parse::<FuseOn>().map_err(at("--fuse-on"))?;
            let policy = Policy::Fused(FusionPolicy { pilot: pilot.default_config(), copilots, fusion, fuse_on });
            policy.validate().map_err(|e| match e {
                PolicyError::NoCopilot => at("--copilot")(e),
                e => at("--target-cwnd")(e),
            })?;
            Ok(policy)
        } else {
            let kind = self.alg.parse::<AlgorithmKind>().map_err(|e| match e {
                PolicyError::UnknownAlgorithm(a) => at("--alg")(PolicyError::UnknownPolicyAlgorithm(a)),
                e => at("--alg")(e),
            })?;
            Ok(Policy::Single(kind.default_config()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use polycc_algorithms::AlgorithmConfig;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        policy: PolicyArgs,
    }

    fn parse(args: &[&str]) -> Result<Policy, PolicyArgsError> {
        Cli::parse_from(std::iter::once("x").chain(args.iter().copied())).policy.policy()
    }

    #[test]
    fn single_algorithm() {
        assert_eq!(parse(&["--alg", "bbr"]).unwrap().describe(), "bbr");
    }

    #[test]
    fn fused_policy_from_flags() {
        let p = parse(&[
            "--alg",
            "fused",
            "--pilot",
            "bbr",
            "--copilot",
            "copa,cubic",
            "--fusion",
            "min",
            "--fuse-on",
            "rate",
        ])
        .unwrap();
        assert_eq!(p.describe(), "fused(pilot=bbr, copilots=copa+cubic, min on rate)");
    }

    #[test]
    fn vivace_flag_sets_parameters_wherever_vivace_runs() {
        let p = parse(&[
            "--alg",
            "vivace",
            "--vivace",
            "gamma=2700, beta=20,initial_rate=10mbit,unified_exploration=false",
        ])
        .unwrap();
        let Policy::Single(AlgorithmConfig::Vivace(v)) = p else { panic!("{p:?}") };
        assert_eq!((v.gamma, v.beta, v.initial_rate_mbps, v.unified_exploration), (2700.0, 20.0, Some(10.0), false));
        let p = parse(&["--alg", "fused", "--pilot", "bbr", "--copilot", "vivace", "--vivace", "omega=5"]).unwrap();
        let Policy::Fused(f) = p else { panic!() };
        assert!(matches!(&f.copilots[0], AlgorithmConfig::Vivace(v) if v.omega == 5.0));
    }

    #[test]
    fn vivace_flag_errors_name_the_flag_the_key_and_the_range() {
        let e = parse(&["--alg", "vivace", "--vivace", "beta=1"]).unwrap_err();
        assert_eq!(e.flag, "--vivace");
        assert!(e.to_string().contains("beta = 1 is outside [4.5, 1000]"), "{e}");
        let e = parse(&["--alg", "vivace", "--vivace", "gamma=-1"]).unwrap_err();
        assert!(e.to_string().contains("gamma = -1 is outside [0, 20000]"), "{e}");
        let e = parse(&["--alg", "vivace", "--vivace", "kappa=3"]).unwrap_err();
        assert!(e.to_string().contains("unknown vivace parameter `kappa`") && e.to_string().contains("omega"), "{e}");
        let e = parse(&["--alg", "vivace", "--vivace", "alpha=lots"]).unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
        let e = parse(&["--alg", "cubic", "--vivace", "alpha=2"]).unwrap_err();
        assert_eq!(e.flag, "--vivace");
        assert!(e.to_string().contains("runs no vivace"), "{e}");
    }

    #[test]
    fn errors_name_the_flag() {
        assert_eq!(parse(&["--alg", "fused"]).unwrap_err().flag, "--copilot");
        assert_eq!(
            parse(&["--alg", "fused", "--copilot", "cubic", "--fuse-on", "bytes"]).unwrap_err().flag,
            "--fuse-on"
        );
        let e = parse(&["--alg", "bbr3"]).unwrap_err();
        assert_eq!(e.flag, "--alg");
        assert!(e.to_string().contains("fused"), "{e}");
        assert_eq!(parse(&["--alg", "fused", "--pilot", "fused", "--copilot", "bbr"]).unwrap_err().flag, "--pilot");
    }
}
