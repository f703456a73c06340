//! PCC (Performance-oriented Congestion Control): the sender that PCC Allegro
//! ([`crate::allegro`]) and PCC Vivace ([`crate::vivace`]) share, and the monitor intervals that
//! MOCC ([`crate::mocc`]) uses too.
//!
//! - [`monitor`]: monitor intervals (MIs) over reports: which MI sent the packets a report
//!   speaks of, and what each MI's packets experienced ([`MiResult`]).
//! - [`engine`]: the MI engine ([`Engine`]), generic over a [`RateController`] (the algorithm's
//!   utility and state machine): MI scheduling, the first rate, adopting a flow, the decision,
//!   the report cadence and the trace ([`MiTrace`]).

pub mod engine;
pub mod monitor;

pub use engine::{
    cwnd_for, decision, is_outside_rate, mi_due, mi_duration, probe_rate, Engine, MiTrace, RateController, Sender,
    MAX_TRACE,
};
pub use monitor::{MiResult, Monitor, MAX_PENDING_MIS, MIN_RTT_WINDOW, NOMINAL_RTT, RTT_OUTLIER_MADS};
