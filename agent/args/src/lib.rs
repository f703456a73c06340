//! Command-line flags shared by the binaries (`polycc-sim`, `polycc-portus`, `polycc`): one
//! parser for the algorithm and fusion policy (`--alg`, `--pilot`, `--copilot`, `--fusion`,
//! `--target-cwnd`, `--fuse-on`, `--vivace`, `--weights`, `--model`). Binaries flatten
//! [`PolicyArgs`] into their own clap structs and call [`PolicyArgs::policy`]. Only binaries use
//! this crate: the quantities they parse are `polycc_algorithms::quantity`'s, the simulator's link
//! specs `polycc_sim::config`'s, the model file `polycc_algorithms::model_file`'s.

use clap::Args;
use polycc_algorithms::mocc::ModelSlot;
pub use polycc_algorithms::model_file::{load_model, model_path, ModelLoadError, DEFAULT_MODEL};
use polycc_algorithms::vivace::VivaceConfig;
use polycc_algorithms::{Algorithm, AlgorithmConfig, AlgorithmKind, FuseOn, FusionFn, FusionPolicy, Policy, PolicyError};
use std::path::PathBuf;

/// What every flow runs unless a rule says otherwise.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct PolicyArgs {
    /// Algorithm: one of the registry's (`polycc_algorithms::AlgorithmKind`), or fused (a pilot
    /// plus copilots). The help lists them. Without it: cubic where a default exists
    /// ([`PolicyArgs::policy`]), an error where a policy must be named ([`PolicyArgs::named_policy`]).
    #[arg(long, value_name = "ALG", help = alg_help())]
    pub alg: Option<String>,

    /// Fused policies: the pilot whose logic drives the sender (default bbr).
    #[arg(long, value_name = "ALG")]
    pub pilot: Option<String>,

    /// Fused policies: one or more copilots, comma-separated (e.g. cubic or cubic,copa).
    #[arg(long, value_name = "ALG[,ALG..]", value_delimiter = ',')]
    pub copilot: Vec<String>,

    /// Fused policies: max, min, or target (closest to --target-cwnd, or to the BDP estimate);
    /// default max.
    #[arg(long, value_name = "FN")]
    pub fusion: Option<String>,

    /// Fused policies with --fusion target: the target window in bytes (default: the BDP estimate).
    #[arg(long, value_name = "BYTES")]
    pub target_cwnd: Option<u64>,

    /// Fused policies: combine congestion windows (cwnd) or sending rates (rate); default cwnd.
    #[arg(long, value_name = "cwnd|rate")]
    pub fuse_on: Option<String>,

    /// PCC Vivace parameters as KEY=VALUE,..., applied wherever vivace runs (--alg, --pilot,
    /// --copilot). Keys: alpha, beta, gamma, delta, omega, initial_rate (e.g. 10mbit),
    /// slow_start_exit_latency, slow_start_exit_loss, max_slow_start_rate (e.g. 200mbit),
    /// latency_filter, loss_filter, and the switches unified_exploration, early_decrease,
    /// emergency_brakes, insufficient_acks, noise_filters (true/false).
    #[arg(long, value_name = "KEY=VALUE,..")]
    pub vivace: Option<String>,

    /// MOCC: the preference between throughput, latency and loss, three numbers in (0, 1)
    /// summing to 1 (default 0.8,0.1,0.1), applied wherever mocc runs.
    #[arg(long, value_name = "W_THR,W_LAT,W_LOSS", value_delimiter = ',', num_args = 1)]
    pub weights: Option<Vec<f64>>,

    /// MOCC: the ONNX model (default: onnx/mocc.onnx).
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,

    /// MOCC: dither the rate to measure the flow's share of a shared bottleneck and nudge it
    /// toward an equal one (default false, experimental: fair in the simulator, not yet in the
    /// guest; docs/mocc.md).
    #[arg(long, value_name = "true|false")]
    pub fair_share: Option<bool>,
}

/// `--alg`'s help: every registered algorithm, learned ones marked.
fn alg_help() -> String {
    let names: Vec<String> = AlgorithmKind::NAMED
        .iter()
        .map(|k| if k.learned() { format!("{k} (learned; --weights, --model)") } else { k.to_string() })
        .collect();
    format!("Algorithm: {}, or fused (a pilot plus copilots)", names.join(", "))
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
            polycc_algorithms::quantity::parse_bandwidth(value).map(|r| r.mbps()).map_err(|e| invalid(format!("{key}: {e}")))
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

/// The algorithm a flow runs when the flags name none: `polycc-portus`' and `polycc-sim`'s default.
pub const DEFAULT_ALG: &str = "cubic";

/// What the flags do with a MOCC model file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Models {
    /// Load it (`--model` or the default file) into the policy: this process runs the flows.
    Load,
    /// Name the `--model` file only, after checking it: the agent loads it.
    Name,
}

impl PolicyArgs {
    /// The validated policy these flags describe, [`DEFAULT_ALG`] without `--alg`.
    pub fn policy(&self) -> Result<Policy, PolicyArgsError> {
        self.policy_for(self.alg.as_deref().unwrap_or(DEFAULT_ALG), Models::Load)
    }

    /// [`PolicyArgs::policy`], or exit as clap does on a bad flag (status 2, the usage of `C`,
    /// the binary's command, and the error naming the flag).
    pub fn policy_or_exit<C: clap::CommandFactory>(&self) -> Policy {
        self.policy().unwrap_or_else(|e| C::command().error(clap::error::ErrorKind::ValueValidation, e).exit())
    }

    /// The validated policy these flags describe, where one must be named (`polycc policy add`,
    /// `polycc flow set`): without `--alg` there is no policy to assume. It is for the agent:
    /// a MOCC member names the `--model` file (made absolute and checked here, loaded there) or
    /// none, and then runs the agent's model.
    pub fn named_policy(&self) -> Result<Policy, PolicyArgsError> {
        match &self.alg {
            Some(alg) => self.policy_for(alg, Models::Name),
            None => Err(at("--alg")(PolicyError::NoAlgorithm { accepted: AlgorithmKind::accepted() })),
        }
    }

    fn policy_for(&self, alg: &str, models: Models) -> Result<Policy, PolicyArgsError> {
        let mut policy = self.policy_with_defaults(alg)?;
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
        self.apply_mocc(&mut policy, models)?;
        Ok(policy)
    }

    /// `--weights` and `--model` onto the policy's MOCC members, the model loaded once and shared
    /// (with [`Models::Name`], only named).
    fn apply_mocc(&self, policy: &mut Policy, models: Models) -> Result<(), PolicyArgsError> {
        let describe = policy.describe();
        let members = policy.mocc_members_mut();
        if members.is_empty() {
            for (flag, given) in [
                ("--weights", self.weights.is_some()),
                ("--model", self.model.is_some()),
                ("--fair-share", self.fair_share.is_some()),
            ] {
                if given {
                    return Err(at(flag)(PolicyError::InvalidParameter {
                        algorithm: "mocc",
                        reason: format!("the policy `{describe}` runs no mocc to apply it to"),
                    }));
                }
            }
            return Ok(());
        }
        let model_error = |e: &dyn std::fmt::Display| at("--model")(PolicyError::Model(e.to_string()));
        let (path, slot) = match (models, &self.model) {
            (Models::Name, None) => (None, None),
            (Models::Name, Some(named)) => {
                // The agent resolves a path in its own working directory: name an absolute one.
                let path = std::path::absolute(named).map_err(|e| model_error(&e))?;
                load_model(&path).map_err(|e| model_error(&e))?;
                (Some(path), None)
            }
            (Models::Load, named) => {
                let path = model_path(named.as_deref()).map_err(|e| model_error(&e))?;
                let model = load_model(&path).map_err(|e| model_error(&e))?;
                (Some(path), Some(ModelSlot::new(model)))
            }
        };
        for m in members {
            if let Some(w) = &self.weights {
                m.weights = w.clone();
            }
            if let Some(on) = self.fair_share {
                m.fair_share = on;
            }
            m.model = path.as_ref().map(|p| p.display().to_string());
            m.slot = slot.clone();
            m.validate().map_err(at("--weights"))?;
        }
        Ok(())
    }

    /// The policy with every member at its default configuration.
    fn policy_with_defaults(&self, alg: &str) -> Result<Policy, PolicyArgsError> {
        if alg.trim().eq_ignore_ascii_case("fused") {
            let pilot = self.pilot.as_deref().unwrap_or("bbr").parse::<AlgorithmKind>().map_err(at("--pilot"))?;
            let copilots = self
                .copilot
                .iter()
                .filter(|c| !c.trim().is_empty())
                .map(|c| c.parse::<AlgorithmKind>().map(AlgorithmKind::default_config))
                .collect::<Result<Vec<_>, _>>()
                .map_err(at("--copilot"))?;
            let fusion =
                FusionFn::parse(self.fusion.as_deref().unwrap_or("max"), self.target_cwnd).map_err(at("--fusion"))?;
            if self.target_cwnd.is_some() && !matches!(fusion, FusionFn::Target(_)) {
                return Err(at("--target-cwnd")(PolicyError::Ignored {
                    what: "a target window",
                    only: "--fusion target steers to one",
                }));
            }
            let fuse_on = self.fuse_on.as_deref().unwrap_or("cwnd").parse::<FuseOn>().map_err(at("--fuse-on"))?;
            let policy = Policy::Fused(FusionPolicy { pilot: pilot.default_config(), copilots, fusion, fuse_on });
            policy.validate().map_err(|e| match e {
                PolicyError::NoCopilot => at("--copilot")(e),
                e => at("--target-cwnd")(e),
            })?;
            Ok(policy)
        } else {
            // A fused policy's flags on a single algorithm would be ignored: refuse them.
            let fused_only = [
                ("--pilot", self.pilot.is_some()),
                ("--copilot", !self.copilot.is_empty()),
                ("--fusion", self.fusion.is_some()),
                ("--target-cwnd", self.target_cwnd.is_some()),
                ("--fuse-on", self.fuse_on.is_some()),
            ];
            if let Some((flag, _)) = fused_only.into_iter().find(|(_, given)| *given) {
                return Err(at(flag)(PolicyError::Ignored {
                    what: "a fusion flag",
                    only: "a fused policy has a pilot and copilots: add --alg fused",
                }));
            }
            let kind = alg.parse::<AlgorithmKind>().map_err(|e| match e {
                PolicyError::UnknownAlgorithm { name, accepted } => {
                    at("--alg")(PolicyError::UnknownPolicyAlgorithm { name, accepted })
                }
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
    use std::path::Path;
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

    /// For the agent (`polycc policy add`, `flow set`): the `--model` file named, absolute and
    /// checked but not loaded here; without `--model` none, so the agent's own model runs.
    #[test]
    fn a_named_policy_names_its_model_for_the_agent() {
        use polycc_algorithms::mocc::synthetic;
        let named = |args: &[&str]| Cli::parse_from(std::iter::once("x").chain(args.iter().copied())).policy.named_policy();
        let member = |p: &mut Policy| {
            let m = p.mocc_members_mut();
            (m[0].model.clone(), m[0].slot.is_some())
        };
        // Under the working directory (the crate's), named by a relative path.
        let dir = tempfile::tempdir_in(".").unwrap();
        let relative = |file: &str| Path::new(dir.path().file_name().unwrap()).join(file).display().to_string();
        std::fs::write(dir.path().join("m.onnx"), synthetic::valid_model_bytes()).unwrap();
        let mut p = named(&["--alg", "mocc"]).unwrap();
        assert_eq!(member(&mut p), (None, false), "no --model: the agent's model");
        let mut p = named(&["--alg", "fused", "--pilot", "mocc", "--copilot", "cubic", "--model", &relative("m.onnx")])
            .unwrap();
        let absolute = std::env::current_dir().unwrap().join(relative("m.onnx")).display().to_string();
        assert_eq!(member(&mut p), (Some(absolute), false), "named, absolute, loaded by the agent");
        std::fs::write(dir.path().join("bad.onnx"), b"garbage").unwrap();
        let e = named(&["--alg", "mocc", "--model", &relative("bad.onnx")]).unwrap_err();
        assert_eq!(e.flag, "--model");
        assert!(e.to_string().contains("not a readable ONNX file"), "{e}");
    }

    #[test]
    fn mocc_flags_set_weights_and_share_one_validated_model() {
        use polycc_algorithms::mocc::synthetic;
        let dir = std::env::temp_dir().join(format!("polycc-args-mocc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let model = dir.join("m.onnx");
        std::fs::write(&model, synthetic::valid_model_bytes()).unwrap();
        let m = model.to_str().unwrap();
        let p = parse(&["--alg", "mocc", "--weights", "0.1,0.8,0.1", "--model", m]).unwrap();
        let Policy::Single(AlgorithmConfig::Mocc(c)) = &p else { panic!("{p:?}") };
        assert_eq!(c.weights, vec![0.1, 0.8, 0.1]);
        assert!(c.slot.as_ref().and_then(|s| s.get()).is_some(), "the model is loaded at the boundary");
        assert!(!c.fair_share, "the share probe is off unless turned on");
        let p = parse(&["--alg", "mocc", "--fair-share", "true", "--model", m]).unwrap();
        let Policy::Single(AlgorithmConfig::Mocc(c)) = &p else { panic!("{p:?}") };
        assert!(c.fair_share);
        let e = parse(&["--alg", "cubic", "--fair-share", "false"]).unwrap_err();
        assert_eq!(e.flag, "--fair-share");
        assert!(e.to_string().contains("runs no mocc"), "{e}");
        // A MOCC pilot guarded by a CUBIC copilot; a MOCC copilot shares the pilot's model.
        let mut p = parse(&["--alg", "fused", "--pilot", "mocc", "--copilot", "cubic,mocc", "--model", m]).unwrap();
        assert_eq!(p.describe(), "fused(pilot=mocc, copilots=cubic+mocc, max on cwnd)");
        let slots: Vec<_> = p.mocc_members_mut().iter().map(|c| c.slot.clone().unwrap()).collect();
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[0], slots[1], "one model shared by every member");
        let e = parse(&["--alg", "mocc", "--weights", "0.5,0.5,0.5", "--model", m]).unwrap_err();
        assert_eq!(e.flag, "--weights");
        assert!(e.to_string().contains("sum to 1, got 1.5"), "{e}");
        let e = parse(&["--alg", "mocc", "--weights", "0.9,0.1", "--model", m]).unwrap_err();
        assert!(e.to_string().contains("3 weights"), "{e}");
        let e = parse(&["--alg", "mocc", "--model", dir.join("none.onnx").to_str().unwrap()]).unwrap_err();
        assert_eq!(e.flag, "--model");
        assert!(e.to_string().contains("no MOCC model at") && e.to_string().contains("--model PATH"), "{e}");
        std::fs::write(dir.join("bad.onnx"), b"garbage").unwrap();
        let e = parse(&["--alg", "mocc", "--model", dir.join("bad.onnx").to_str().unwrap()]).unwrap_err();
        assert!(e.to_string().contains("not a readable ONNX file"), "{e}");
        let e = parse(&["--alg", "cubic", "--weights", "0.8,0.1,0.1"]).unwrap_err();
        assert_eq!(e.flag, "--weights");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The registry's toy (feature `toy`, on in tests) is a choice for every flag and in the help,
    /// with no code here naming it.
    #[test]
    fn a_registered_algorithm_is_a_choice_for_every_flag_and_in_the_help() {
        use clap::CommandFactory;
        assert_eq!(parse(&["--alg", "toy"]).unwrap().describe(), "toy");
        let p = parse(&["--alg", "fused", "--pilot", "toy", "--copilot", "cubic,toy"]).unwrap();
        assert_eq!(p.describe(), "fused(pilot=toy, copilots=cubic+toy, max on cwnd)");
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("vivace, mocc (learned; --weights, --model), toy, or fused"), "{help}");
    }

    /// Issue 20: flags a policy would ignore are refused, naming the flag (`--alg cubic --copilot
    /// bbr` ran plain CUBIC), and where a policy must be named there is no silent cubic.
    #[test]
    fn flags_the_policy_would_ignore_are_refused() {
        for (args, flag) in [
            (&["--alg", "cubic", "--copilot", "bbr"][..], "--copilot"),
            (&["--alg", "cubic", "--pilot", "bbr"][..], "--pilot"),
            (&["--alg", "copa", "--fusion", "min"][..], "--fusion"),
            (&["--alg", "reno", "--fuse-on", "rate"][..], "--fuse-on"),
            (&["--copilot", "cubic"][..], "--copilot"),
            (&["--alg", "fused", "--copilot", "cubic", "--target-cwnd", "90000"][..], "--target-cwnd"),
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.flag, flag, "{args:?}: {e}");
            assert!(e.to_string().contains("would be ignored"), "{e}");
        }
        let p = parse(&["--alg", "fused", "--copilot", "cubic", "--fusion", "target", "--target-cwnd", "90000"]);
        assert_eq!(p.unwrap().describe(), "fused(pilot=bbr, copilots=cubic, target on cwnd)");
        assert_eq!(parse(&[]).unwrap().describe(), "cubic", "polycc-sim's and polycc-portus' default");
        let named = |args: &[&str]| Cli::parse_from(std::iter::once("x").chain(args.iter().copied())).policy.named_policy();
        let e = named(&["--copilot", "cubic"]).unwrap_err();
        assert_eq!(e.flag, "--alg");
        assert!(e.to_string().contains("no algorithm named: pass one of reno, cubic"), "{e}");
        assert_eq!(named(&["--alg", "copa"]).unwrap().describe(), "copa");
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
