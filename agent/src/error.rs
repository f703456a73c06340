//! Errors that stop the agent, each with its own exit status (documented in `--help`).

use crate::control::ControlOpenError;
use crate::policy_file::PolicyFileError;
use crate::program::ProgramError;
use crate::transport::OpenError;
use std::path::PathBuf;
use thiserror::Error;

/// Exit statuses. 2 is clap's for bad flags.
pub mod exit {
    pub const USAGE: u8 = 2;
    pub const NETLINK_PERMISSION: u8 = 3;
    pub const NETLINK: u8 = 4;
    pub const UNIX_SOCKET: u8 = 5;
    pub const AGENT_RUNNING: u8 = 6;
    pub const LOG_FILE: u8 = 7;
    pub const IPC_FAILED: u8 = 8;
    /// `--policy FILE` cannot be read or has an invalid rule.
    pub const POLICY_FILE: u8 = 9;
    /// The control socket cannot be created (or another agent serves it).
    pub const CONTROL_SOCKET: u8 = 10;
    /// The BPF datapath cannot be registered (no BTF, no privileges, verifier, name in use).
    pub const BPF: u8 = 11;
    /// A bug: the built-in program does not compile.
    pub const INTERNAL: u8 = 70;
}

#[derive(Debug, Error)]
pub enum AgentError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("cannot write --log-json {path}: {source}")]
    LogFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the datapath connection failed while running: {0}")]
    Ipc(#[source] std::io::Error),
    #[error(transparent)]
    PolicyFile(#[from] PolicyFileError),
    /// A rule of the policy file names a MOCC model that cannot be used.
    #[error("policy file {path}: {message}")]
    RuleModel { path: PathBuf, message: String },
    #[error(transparent)]
    Control(#[from] ControlOpenError),
    #[error("internal error: {0}")]
    Program(#[from] ProgramError),
}

impl AgentError {
    pub fn exit_code(&self) -> u8 {
        match self {
            AgentError::Open(OpenError::NetlinkPermission(_)) => exit::NETLINK_PERMISSION,
            AgentError::Open(OpenError::Netlink { .. }) => exit::NETLINK,
            AgentError::Open(OpenError::UnixInUse { .. }) => exit::AGENT_RUNNING,
            #[cfg(feature = "bpf")]
            AgentError::Open(OpenError::Bpf(_)) => exit::BPF,
            AgentError::Open(OpenError::BpfNotBuilt) => exit::BPF,
            AgentError::Open(_) => exit::UNIX_SOCKET,
            AgentError::LogFile { .. } => exit::LOG_FILE,
            AgentError::Ipc(_) => exit::IPC_FAILED,
            AgentError::PolicyFile(_) | AgentError::RuleModel { .. } => exit::POLICY_FILE,
            AgentError::Control(_) => exit::CONTROL_SOCKET,
            AgentError::Program(_) => exit::INTERNAL,
        }
    }
}
