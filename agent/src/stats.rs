//! Per-flow per-second statistics: what `polycc stats --json` prints and what `polycc-tune`
//! consumes. One [`StatsRecord`] per live flow per second, computed by the agent loop from the
//! flow's reports over that second.
//!
//! Control socket: `{"cmd":"stats","since":SEQ}` answers the records with `seq > SEQ` still
//! held (the agent keeps the last [`STATS_HISTORY_SECS`] seconds), oldest first, and `next`, the
//! SEQ to ask with next time; `since` absent means "everything held".

use serde::{Deserialize, Serialize};

/// Seconds of records the agent holds for clients that poll.
pub const STATS_HISTORY_SECS: usize = 120;

/// One flow over one second (the last interval may be shorter: `duration_s`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatsRecord {
    /// Increases by one per record, across flows; a poller's cursor.
    pub seq: u64,
    /// End of the interval, seconds since the Unix epoch.
    pub t_unix_s: f64,
    /// Length of the interval the figures cover.
    pub duration_s: f64,
    pub datapath: String,
    pub flow: u32,
    /// "addr:port" as in `polycc flows`.
    pub src: String,
    pub dst: String,
    pub cong_alg: String,
    /// The rule that chose the flow's policy; `None`: the default from the flags.
    pub rule: Option<u32>,
    /// The policy in the flows table's form (e.g. "vivace", "fused(bbr+cubic,max cwnd)").
    pub policy: String,
    /// Acknowledged bytes over the interval, per second.
    pub throughput_bytes_per_sec: f64,
    /// The sending rate reported over the interval (bytes/s); `None` with no report carrying one.
    pub send_rate_min_bytes_per_sec: Option<f64>,
    pub send_rate_avg_bytes_per_sec: Option<f64>,
    pub send_rate_max_bytes_per_sec: Option<f64>,
    /// Lost / (lost + delivered) packets over the interval; 0 with no traffic.
    pub loss_rate: f64,
    pub rtt_min_us: Option<f64>,
    pub rtt_avg_us: Option<f64>,
    /// Seconds of the interval the flow's controller spent in slow start.
    pub slow_start_s: f64,
    /// Seconds of the interval the flow was application-limited.
    pub app_limited_s: f64,
}
