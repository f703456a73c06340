//! Command-line flags shared by `polycc-sim` and `polycc-portus`: one parser for the algorithm
//! and fusion policy (`--alg`, `--pilot`, `--copilot`, `--fusion`, `--target-cwnd`, `--fuse-on`)
//! and for the quantities both take. Binaries flatten [`PolicyArgs`] into their own clap
//! structs and call [`PolicyArgs::policy`].

pub mod quantity;

use clap::Args;
use polycc_algorithms::{AlgorithmKind, FuseOn, FusionFn, FusionPolicy, Policy, PolicyError};

/// What every flow runs unless a rule says otherwise.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct PolicyArgs {
    /// Algorithm: reno, cubic, vegas, bbr, copa, or fused (a pilot plus copilots).
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
