//! What a flow runs: one algorithm, or a PolyCC fusion of a pilot and copilots.
//!
//! [`Policy`] is the single description shared by `polycc-sim`'s flags, `polycc-portus`' flags
//! and policy files: it validates once ([`Policy::validate`]) and builds per-flow controllers
//! ([`Policy::build`]). Everything here is plain data (serde) so it can be persisted.

pub use crate::config::PolicyError;
pub use crate::fusion::{FuseOn, FusionFn, TargetCwnd};
use crate::fusion::FusionController;
pub use crate::{AlgorithmConfig, AlgorithmKind};
use crate::{mocc, CongestionControl, FlowInfo};
use serde::{Deserialize, Serialize};

/// A PolyCC policy: one pilot, one or more copilots, a fusion function over cwnd or rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusionPolicy {
    pub pilot: AlgorithmConfig,
    pub copilots: Vec<AlgorithmConfig>,
    #[serde(default)]
    pub fusion: FusionFn,
    #[serde(default)]
    pub fuse_on: FuseOn,
}

/// Everything a flow can run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Single(AlgorithmConfig),
    Fused(FusionPolicy),
}

impl Policy {
    /// Check the policy can run; the error says what to change.
    pub fn validate(&self) -> Result<(), PolicyError> {
        match self {
            Policy::Single(c) => c.validate(),
            Policy::Fused(f) => {
                f.pilot.validate()?;
                f.copilots.iter().try_for_each(AlgorithmConfig::validate)?;
                if f.copilots.is_empty() {
                    return Err(PolicyError::NoCopilot);
                }
                if let FusionFn::Target(TargetCwnd::Bytes(0)) = f.fusion {
                    return Err(PolicyError::ZeroTarget);
                }
                if let FusionFn::Target(TargetCwnd::Bdp(g)) = f.fusion {
                    if !(g.is_finite() && g > 0.0) {
                        return Err(PolicyError::InvalidParameter {
                            algorithm: "fusion",
                            reason: format!("BDP gain {g} must be a positive number"),
                        });
                    }
                }
                Ok(())
            }
        }
    }

    /// A per-flow controller. Call [`Policy::validate`] first; an invalid fused policy
    /// without copilots degrades to its pilot rather than panicking.
    pub fn build(&self, info: FlowInfo) -> Box<dyn CongestionControl> {
        match self {
            Policy::Single(c) => c.build(info),
            Policy::Fused(f) if f.copilots.is_empty() => f.pilot.build(info),
            Policy::Fused(f) => Box::new(FusionController::new(
                f.pilot.build(info),
                f.copilots.iter().map(|c| c.build(info)).collect(),
                f.fusion,
                f.fuse_on,
                info,
            )),
        }
    }

    /// The same policy with per-flow seeds derived from `seed` for every randomized member.
    pub fn with_seed(&self, seed: u64) -> Policy {
        match self {
            Policy::Single(c) => Policy::Single(c.clone().with_seed(seed)),
            Policy::Fused(f) => Policy::Fused(FusionPolicy {
                pilot: f.pilot.clone().with_seed(seed),
                copilots: f
                    .copilots
                    .iter()
                    .enumerate()
                    .map(|(i, c)| c.clone().with_seed(seed.wrapping_add(1 + i as u64)))
                    .collect(),
                fusion: f.fusion,
                fuse_on: f.fuse_on,
            }),
        }
    }

    /// The MOCC members (pilot or copilots), to load and attach their model at a boundary.
    pub fn mocc_members_mut(&mut self) -> Vec<&mut mocc::MoccConfig> {
        let members: Vec<&mut AlgorithmConfig> = match self {
            Policy::Single(c) => vec![c],
            Policy::Fused(f) => std::iter::once(&mut f.pilot).chain(f.copilots.iter_mut()).collect(),
        };
        members
            .into_iter()
            .filter_map(|c| match c {
                AlgorithmConfig::Mocc(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    /// The MOCC members (pilot or copilots).
    pub fn mocc_members(&self) -> Vec<&mocc::MoccConfig> {
        let members: Vec<&AlgorithmConfig> = match self {
            Policy::Single(c) => vec![c],
            Policy::Fused(f) => std::iter::once(&f.pilot).chain(f.copilots.iter()).collect(),
        };
        members
            .into_iter()
            .filter_map(|c| match c {
                AlgorithmConfig::Mocc(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    /// The model slot the policy's first MOCC member holds, if any.
    pub fn mocc_slot(&self) -> Option<mocc::ModelSlot> {
        self.mocc_members().into_iter().find_map(|m| m.slot.clone())
    }

    /// A one-line human description ("bbr", "fused(pilot=bbr, copilots=cubic, max on cwnd)").
    pub fn describe(&self) -> String {
        match self {
            Policy::Single(c) => c.kind().name().to_string(),
            Policy::Fused(f) => format!(
                "fused(pilot={}, copilots={}, {} on {})",
                f.pilot.kind(),
                f.copilots.iter().map(|c| c.kind().name()).collect::<Vec<_>>().join("+"),
                f.fusion.name(),
                match f.fuse_on {
                    FuseOn::Cwnd => "cwnd",
                    FuseOn::Rate => "rate",
                }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names_parse_case_insensitively_and_reject_unknown() {
        assert_eq!("CUBIC".parse::<AlgorithmKind>(), Ok(AlgorithmKind::Cubic));
        let err = "bbr2".parse::<AlgorithmKind>().unwrap_err();
        assert!(err.to_string().contains("reno, cubic, vegas, bbr, copa, allegro, vivace"), "{err}");
        assert_eq!("fused".parse::<AlgorithmKind>(), Err(PolicyError::NestedFusion { accepted: AlgorithmKind::accepted() }));
    }

    #[test]
    fn fused_policy_without_copilot_is_rejected() {
        let p = Policy::Fused(FusionPolicy {
            pilot: AlgorithmKind::Bbr.default_config(),
            copilots: vec![],
            fusion: FusionFn::Max,
            fuse_on: FuseOn::Cwnd,
        });
        assert_eq!(p.validate(), Err(PolicyError::NoCopilot));
    }

    #[test]
    fn fusion_target_defaults_to_the_bdp() {
        assert_eq!(FusionFn::parse("target", None), Ok(FusionFn::Target(TargetCwnd::Bdp(1.0))));
        assert_eq!(FusionFn::parse("target", Some(9000)), Ok(FusionFn::Target(TargetCwnd::Bytes(9000))));
        assert!(FusionFn::parse("avg", None).is_err());
    }

    #[test]
    fn out_of_range_parameters_are_refused_with_the_allowed_range() {
        for kind in AlgorithmKind::classic() {
            assert_eq!(kind.default_config().validate(), Ok(()), "{kind} defaults must validate");
        }
        let cubic = crate::cubic::CubicConfig { beta: 1.5, ..Default::default() };
        let err = Policy::Single(AlgorithmConfig::Cubic(cubic)).validate().unwrap_err();
        assert_eq!(err.to_string(), "invalid cubic parameter: beta = 1.5 is outside (0, 1)");
        let bbr = crate::bbr::BbrConfig { cwnd_gain: f64::NAN, ..Default::default() };
        let fused = Policy::Fused(FusionPolicy {
            pilot: AlgorithmKind::Cubic.default_config(),
            copilots: vec![AlgorithmConfig::Bbr(bbr)],
            fusion: FusionFn::Max,
            fuse_on: FuseOn::Cwnd,
        });
        assert!(fused.validate().unwrap_err().to_string().contains("cwnd_gain"), "copilots are validated too");
        let vegas = crate::vegas::VegasConfig { alpha_packets: 5, beta_packets: 4, ..Default::default() };
        assert!(AlgorithmConfig::Vegas(vegas).validate().is_err());
    }

    #[test]
    fn policies_round_trip_through_serde_and_refuse_unknown_fields() {
        let p = Policy::Fused(FusionPolicy {
            pilot: AlgorithmKind::Bbr.default_config(),
            copilots: vec![AlgorithmKind::Copa.default_config()],
            fusion: FusionFn::Target(TargetCwnd::Bytes(90_000)),
            fuse_on: FuseOn::Rate,
        });
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Policy>(&json).unwrap(), p);
        let typo = r#"{"single":{"alg":"cubic","betta":0.7}}"#;
        let err = serde_json::from_str::<Policy>(typo).unwrap_err().to_string();
        assert!(err.contains("betta"), "{err}");
    }

    #[test]
    fn policy_describes_itself() {
        let p = Policy::Fused(FusionPolicy {
            pilot: AlgorithmKind::Bbr.default_config(),
            copilots: vec![AlgorithmKind::Cubic.default_config()],
            fusion: FusionFn::Max,
            fuse_on: FuseOn::Cwnd,
        });
        assert_eq!(p.describe(), "fused(pilot=bbr, copilots=cubic, max on cwnd)");
    }
}
