//! polycc's CCP agent (`polycc-portus`): serves datapaths that speak CCP's protocol (the polycc
//! kernel module over netlink, or a libccp datapath over a unix socket) with polycc's
//! algorithms.
//!
//! - [`program`]: the one union datapath program and its typed report schema;
//! - [`convert`]: the datapath boundary's unit conversions (registers -> `Report`,
//!   `Decision` -> u32 `Cwnd`/`Rate`), in one place;
//! - [`wire`]: CCP messages (defensive parsing in, portus' serializers out);
//! - [`transport`]: netlink, unix socket and in-memory transports, with typed open errors;
//! - `bpf` (feature `bpf`, default): the BPF struct_ops datapath as a translating transport;
//! - [`agent`]: the run loop and per-flow controllers (`Policy::build`, as the simulator);
//! - [`affinity`]: the CPUs the agent runs on (`--cpu`).
//!
//! Built on the `portus` crate (0.9) for what it does well, the datapath program compiler and
//! the agent -> datapath serializers; the dispatch loop is the agent's own (see
//! [`agent`] for why).

pub mod affinity;
pub mod agent;
#[cfg(feature = "bpf")]
pub mod bpf;
pub mod control;
pub mod convert;
pub mod error;
mod json_log;
pub mod program;
pub mod transport;
pub mod wire;

// The control plane's shared data (polycc-control), under the paths the agent always had.
pub use polycc_control::{atomic_write, logging, policy_file, policy_rules, stats};

pub use agent::{Agent, AgentConfig, Stats};
pub use json_log::JsonLog;
