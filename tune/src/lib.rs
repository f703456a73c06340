//! `polycc-tune`: automated per-(service, destination subnet) customization of Vivace
//! ("Unleashing Automated Congestion Control Customization", `../shared/reference/algorithms.md`
//! section 7).
//!
//! - [`params`]: the tuned parameters, their bounds and normalized coordinates, and the
//!   projection into Vivace's constrained space;
//! - [`reward`]: a period's reward from the agent's per-flow per-second records;
//! - [`bandit`]: the contextual continuum-armed bandit (pure, seeded);
//! - [`context`]: time-of-day x weekday/weekend contexts;
//! - [`config`]: the TOML configuration and its checks;
//! - [`state`]: the persisted state (atomic writes);
//! - [`tuner`]: one period of the loop, shared by both environments;
//! - [`agent_env`]: the agent's control socket (stats in, rules out);
//! - [`sim_env`]: populations of simulated flows (`--sim`).

pub mod agent_env;
pub mod bandit;
pub mod config;
pub mod context;
pub mod params;
pub mod reward;
pub mod sim_env;
pub mod state;
pub mod tuner;
