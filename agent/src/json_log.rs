//! `--log-json`: one JSON object per line for every flow's CREATE, report and decision, PCC
//! monitor interval and close, for offline analysis (the experiment runner reads it).

use crate::convert::Install;
use polycc_algorithms::{Decision, Report};
use serde::Serialize;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Flush `--log-json` at least this often while reports flow.
const JSON_FLUSH_EVERY: Duration = Duration::from_millis(500);

/// One line of `--log-json`. Built on the stack and serialized at once, so the variants' size
/// difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub(crate) enum Record<'a> {
    Create {
        unix_ms: u128,
        flow: u32,
        src: String,
        dst: String,
        cong_alg: &'a str,
        mss: u32,
        init_cwnd: u32,
        /// A live flow announced again (`init_cwnd` is then its current window) and adopted
        /// from its state.
        adopted: bool,
        policy: &'a str,
        cwnd: u32,
        rate: Option<u32>,
    },
    Report {
        unix_ms: u128,
        flow: u32,
        /// Datapath time since the flow's program started, and the interval: microseconds.
        now_us: u128,
        interval_us: u128,
        acked_bytes: u64,
        acked_packets: u64,
        sacked_packets: u64,
        lost_packets: u64,
        timeout: bool,
        rtt_last_us: Option<u128>,
        rtt_min_us: Option<u128>,
        rtt_mean_us: Option<u128>,
        rtt_samples: u64,
        rtt_first_half_us: Option<u128>,
        rtt_second_half_us: Option<u128>,
        /// Bytes per second.
        delivery_rate: Option<f64>,
        inflight_bytes: u64,
        inflight_packets: u64,
        pending_bytes: u64,
        ack_train_us: u128,
        /// The controller's decision: bytes, bytes per second.
        decision_cwnd: u64,
        decision_rate: Option<f64>,
        /// What was written to the datapath (u32; a missing rate was not sent).
        cwnd: u32,
        rate: Option<u32>,
    },
    Close {
        unix_ms: u128,
        flow: u32,
        reports: u64,
    },
    /// A PCC decision ([`CongestionControl::take_trace`]): the MI judged and where the rate went.
    Mi {
        unix_ms: u128,
        flow: u32,
        trace: polycc_algorithms::pcc::MiTrace,
    },
}

pub(crate) fn unix_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

pub(crate) fn us(d: Duration) -> u128 {
    d.as_micros()
}

/// The `--log-json` sink: one JSON object per line.
pub struct JsonLog {
    out: Box<dyn Write + Send>,
    last_flush: Instant,
}

impl JsonLog {
    pub fn new(out: Box<dyn Write + Send>) -> JsonLog {
        JsonLog { out, last_flush: Instant::now() }
    }

    pub(crate) fn write(&mut self, r: &Record) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, r)?;
        self.out.write_all(b"\n")?;
        if self.last_flush.elapsed() >= JSON_FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.last_flush = Instant::now();
        self.out.flush()
    }
}

pub(crate) fn report_record<'a>(flow: u32, r: &Report, d: &Decision, i: &Install) -> Record<'a> {
    Record::Report {
        unix_ms: unix_ms(),
        flow,
        now_us: us(r.now),
        interval_us: us(r.interval),
        acked_bytes: r.bytes_acked,
        acked_packets: r.packets_acked,
        sacked_packets: r.packets_sacked,
        lost_packets: r.packets_lost,
        timeout: r.timeout,
        rtt_last_us: r.rtt_last.map(us),
        rtt_min_us: r.rtt_min.map(us),
        rtt_mean_us: r.rtt_mean().map(us),
        rtt_samples: r.rtt_samples,
        rtt_first_half_us: r.rtt_first_half_mean.map(us),
        rtt_second_half_us: r.rtt_second_half_mean.map(us),
        delivery_rate: r.delivery_rate.map(|x| x.bytes_per_sec()),
        inflight_bytes: r.bytes_in_flight,
        inflight_packets: r.packets_in_flight,
        pending_bytes: r.bytes_pending,
        ack_train_us: us(r.ack_train),
        decision_cwnd: d.cwnd_bytes,
        decision_rate: d.rate.map(|x| x.bytes_per_sec()),
        cwnd: i.cwnd_bytes,
        rate: i.rate_bytes_per_sec,
    }
}
