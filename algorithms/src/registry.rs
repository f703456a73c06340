//! The algorithm registry: one list, in `lib.rs`, names every algorithm of the pool.
//!
//! ```text
//! algorithms! {
//!     Reno => reno::RenoConfig,
//!     ...
//! }
//! ```
//!
//! Each line declares the algorithm's module (its one file) and makes it a variant of
//! [`AlgorithmKind`] and [`AlgorithmConfig`]. Everything that offers a choice of algorithm reads
//! those two: the command line (`--alg`, `--pilot`, `--copilot`, `--competitor` and their help),
//! policy files and the control socket (`alg = "..."`, serde), the simulator, the agent, and the
//! algorithm table in `algorithms/README.md` (a test regenerates and checks it). What the
//! registry needs from an algorithm is the [`Algorithm`] trait on its config. The walkthrough is
//! "Adding an algorithm" in `algorithms/README.md`; the `toy` feature registers a toy algorithm
//! (`src/toy.rs`) the way a new one would be, and the simulator's and agent's tests run it.

use crate::config::PolicyError;
use crate::{CongestionControl, FlowInfo};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

/// What the registry needs from an algorithm, implemented by its configuration (the plain data
/// that policy files hold, with documented defaults).
pub trait Algorithm: Clone + Default + fmt::Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// Its name on the command line, in policy files and in logs: lower case, and the same as
    /// the registry's variant name in lower case (a test checks).
    const NAME: &'static str;
    /// One line for `--help` and the README's table.
    const SUMMARY: &'static str;
    /// Learned algorithms need a model besides their parameters (MOCC); the classic ones run
    /// from their defaults alone.
    const LEARNED: bool = false;
    /// The per-flow state it builds.
    type Controller: CongestionControl + 'static;

    /// A per-flow controller. Must not fail: clamp what [`Algorithm::validate`] would refuse.
    fn build(&self, info: FlowInfo) -> Self::Controller;

    /// Refuse parameters outside the space the algorithm is defined for, saying what to change.
    fn validate(&self) -> Result<(), PolicyError> {
        Ok(())
    }

    /// Take a per-flow seed, if the algorithm randomizes (BBR's gain-cycle phase, PCC's probing).
    fn set_seed(&mut self, _seed: u64) {}
}

/// [`Algorithm`] without its constants and type, so a config can be used through `dyn`.
pub(crate) trait DynAlgorithm {
    fn controller(&self, info: FlowInfo) -> Box<dyn CongestionControl>;
    fn validate(&self) -> Result<(), PolicyError>;
    fn set_seed(&mut self, seed: u64);
}

impl<A: Algorithm> DynAlgorithm for A {
    fn controller(&self, info: FlowInfo) -> Box<dyn CongestionControl> {
        Box::new(Algorithm::build(self, info))
    }
    fn validate(&self) -> Result<(), PolicyError> {
        Algorithm::validate(self)
    }
    fn set_seed(&mut self, seed: u64) {
        Algorithm::set_seed(self, seed)
    }
}

/// Declares the algorithms' modules and the two registry enums from one list of
/// `Variant => module::Config` lines (attributes such as `#[cfg(...)]` allowed before a line).
macro_rules! algorithms {
    ($( $(#[$attr:meta])* $variant:ident => $module:ident :: $config:ident ),+ $(,)?) => {
        $( $(#[$attr])* pub mod $module; )+

        /// The algorithms of the pool, by name (the registry's list in `lib.rs`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum AlgorithmKind {
            $( $(#[$attr])* $variant, )+
        }

        /// One algorithm with its parameters. Each config documents its defaults.
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "alg", rename_all = "lowercase")]
        pub enum AlgorithmConfig {
            $( $(#[$attr])* $variant($module::$config), )+
        }

        impl AlgorithmKind {
            /// Every registered algorithm, in the registry's order.
            pub const NAMED: &'static [AlgorithmKind] = &[ $( $(#[$attr])* AlgorithmKind::$variant, )+ ];

            pub fn name(self) -> &'static str {
                match self { $( $(#[$attr])* AlgorithmKind::$variant => <$module::$config as $crate::registry::Algorithm>::NAME, )+ }
            }

            /// One line on what it is, for `--help` and the docs.
            pub fn summary(self) -> &'static str {
                match self { $( $(#[$attr])* AlgorithmKind::$variant => <$module::$config as $crate::registry::Algorithm>::SUMMARY, )+ }
            }

            /// Whether it needs a model besides its parameters ([`registry::Algorithm::LEARNED`]).
            pub fn learned(self) -> bool {
                match self { $( $(#[$attr])* AlgorithmKind::$variant => <$module::$config as $crate::registry::Algorithm>::LEARNED, )+ }
            }

            /// The algorithm with its documented default configuration.
            pub fn default_config(self) -> AlgorithmConfig {
                match self { $( $(#[$attr])* AlgorithmKind::$variant => AlgorithmConfig::$variant(Default::default()), )+ }
            }
        }

        impl AlgorithmConfig {
            pub fn kind(&self) -> AlgorithmKind {
                match self { $( $(#[$attr])* AlgorithmConfig::$variant(_) => AlgorithmKind::$variant, )+ }
            }

            fn entry(&self) -> &dyn $crate::registry::DynAlgorithm {
                match self { $( $(#[$attr])* AlgorithmConfig::$variant(c) => c, )+ }
            }

            fn entry_mut(&mut self) -> &mut dyn $crate::registry::DynAlgorithm {
                match self { $( $(#[$attr])* AlgorithmConfig::$variant(c) => c, )+ }
            }
        }
    };
}
pub(crate) use algorithms;

use crate::{AlgorithmConfig, AlgorithmKind};

impl AlgorithmKind {
    /// The classic algorithms, which need nothing but their parameters (every registered one
    /// but the learned).
    pub fn classic() -> impl Iterator<Item = AlgorithmKind> {
        AlgorithmKind::NAMED.iter().copied().filter(|k| !k.learned())
    }

    /// The registered names, comma-separated, for help texts and error messages.
    pub fn accepted() -> &'static str {
        static ACCEPTED: LazyLock<String> =
            LazyLock::new(|| AlgorithmKind::NAMED.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "));
        &ACCEPTED
    }

    /// The classic names, comma-separated.
    pub fn accepted_classic() -> &'static str {
        static ACCEPTED: LazyLock<String> =
            LazyLock::new(|| AlgorithmKind::classic().map(|k| k.name()).collect::<Vec<_>>().join(", "));
        &ACCEPTED
    }

    /// The algorithms as a Markdown table (name, summary), as `algorithms/README.md` lists them.
    pub fn markdown_table() -> String {
        let mut out = String::from("| name | what it is |\n|---|---|\n");
        for k in AlgorithmKind::NAMED {
            out.push_str(&format!("| `{}` | {} |\n", k.name(), k.summary()));
        }
        out
    }
}

impl FromStr for AlgorithmKind {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, PolicyError> {
        let lower = s.trim().to_ascii_lowercase();
        if lower == "fused" {
            return Err(PolicyError::NestedFusion { accepted: AlgorithmKind::accepted() });
        }
        AlgorithmKind::NAMED
            .iter()
            .copied()
            .find(|k| k.name() == lower)
            .ok_or_else(|| PolicyError::UnknownAlgorithm { name: s.to_string(), accepted: AlgorithmKind::accepted() })
    }
}

impl fmt::Display for AlgorithmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl AlgorithmConfig {
    /// A per-flow instance.
    pub fn build(&self, info: FlowInfo) -> Box<dyn CongestionControl> {
        self.entry().controller(info)
    }

    /// Check the parameters are inside the space the algorithm is defined for. `build` clamps
    /// or falls back to defaults instead of failing (the per-flow path cannot fail); this is
    /// what boundaries (flags, policy files, the control socket) call to refuse bad values.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.entry().validate()
    }

    /// Give algorithms that randomize (BBR's gain-cycle phase, PCC's probing order and MI
    /// lengths) a per-flow seed.
    pub fn with_seed(mut self, seed: u64) -> AlgorithmConfig {
        self.entry_mut().set_seed(seed);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_is_named_alike_in_the_registry_the_config_and_policy_files() {
        for &k in AlgorithmKind::NAMED {
            let config = k.default_config();
            assert_eq!(config.kind(), k);
            let json = serde_json::to_value(&config).unwrap();
            assert_eq!(json["alg"], k.name(), "the serde tag is the name users type");
            assert_eq!(serde_json::from_value::<AlgorithmConfig>(json).unwrap(), config);
            assert_eq!(k.name().parse::<AlgorithmKind>(), Ok(k));
            assert_eq!(k.name(), k.name().to_ascii_lowercase());
            assert!(!k.summary().is_empty() && !k.summary().contains('|'), "{k}: one table cell");
            config.validate().unwrap_or_else(|e| panic!("{k}'s defaults must validate: {e}"));
        }
        assert!(AlgorithmKind::accepted().starts_with("reno, cubic, vegas, bbr, copa, allegro, vivace, mocc"));
        assert!(!AlgorithmKind::accepted_classic().contains("mocc"), "MOCC needs a model");
    }

    #[test]
    fn the_readme_lists_every_registered_algorithm() {
        // The README's table between the markers is this table; POLYCC_BLESS=1 rewrites it.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let (begin, end) = ("<!-- registry:begin -->\n", "<!-- registry:end -->");
        let (a, b) = (readme.find(begin).expect("begin marker") + begin.len(), readme.find(end).expect("end marker"));
        let table = AlgorithmKind::markdown_table();
        // Test-only registrations (the `toy` feature) are not the product's algorithms.
        let table: String = table.lines().filter(|l| !l.starts_with("| `toy`")).map(|l| format!("{l}\n")).collect();
        if std::env::var_os("POLYCC_BLESS").is_some() {
            std::fs::write(path, format!("{}{table}{}", &readme[..a], &readme[b..])).unwrap();
        } else {
            assert_eq!(&readme[a..b], table, "algorithms/README.md is stale: POLYCC_BLESS=1 cargo test -p polycc-algorithms");
        }
    }
}
