//! What `polycc-portus` and its clients share, without the datapath: the per-flow policy rules
//! and their file ([`policy_rules`], [`policy_file`]), the per-second statistics records the
//! agent publishes ([`stats`]), atomic file writes, the control socket's default address and the
//! log format every polycc binary uses. `polycc-tune` and other clients link this, not the agent
//! (portus, netlink, the BPF loader).

pub mod atomic_write;
pub mod logging;
pub mod policy_file;
mod policy_index;
pub mod policy_rules;
pub mod stats;
pub mod vocabulary;

/// The default control socket.
pub const DEFAULT_SOCKET: &str = "/run/polycc/control.sock";
