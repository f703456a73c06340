//! `--log-json`: one JSON object per line for every flow's CREATE, report and decision, PCC
//! monitor interval and close, for offline analysis (the experiment runner reads it).

use crate::convert::{GrowRegs, Install};
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
        mss_bytes: u32,
        init_cwnd_bytes: u32,
        /// A live flow announced again (`init_cwnd_bytes` is then its current window) and adopted
        /// from its state.
        adopted: bool,
        policy: &'a str,
        cwnd_bytes: u32,
        rate_bytes_per_sec: Option<u32>,
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
        /// Packets delivered with an ECN-Echo (a congestion mark on the path).
        ce_packets: u64,
        timeout: bool,
        /// The kernel undid its last loss reduction (the losses were spurious).
        undo: bool,
        /// The datapath ended per-ACK growth on slow start's delay exit (`ack_growth`).
        delay_exit: bool,
        rtt_last_us: Option<u128>,
        rtt_min_us: Option<u128>,
        rtt_mean_us: Option<u128>,
        rtt_samples: u64,
        rtt_first_half_us: Option<u128>,
        rtt_second_half_us: Option<u128>,
        delivery_rate_bytes_per_sec: Option<f64>,
        inflight_bytes: u64,
        inflight_packets: u64,
        pending_bytes: u64,
        ack_train_us: u128,
        /// The controller's decision.
        decision_cwnd_bytes: u64,
        decision_rate_bytes_per_sec: Option<f64>,
        /// What was written to the datapath (u32; a missing rate was not sent).
        cwnd_bytes: u32,
        rate_bytes_per_sec: Option<u32>,
        /// The per-ACK growth in force from this decision (`ack_growth`): the window slow start
        /// may grow to in the datapath (0: none) and the delay exit's RTT threshold (none: no
        /// exit armed), which the flow's smallest RTT so far draws.
        grow_cap_bytes: u64,
        grow_exit_rtt_us: Option<u64>,
    },
    Close {
        unix_ms: u128,
        flow: u32,
        reports: u64,
    },
    /// A PCC decision ([`polycc_algorithms::CongestionControl::take_trace`]): the MI judged and where the rate went.
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

pub(crate) fn report_record<'a>(flow: u32, r: &Report, d: &Decision, i: &Install, g: &GrowRegs) -> Record<'a> {
    Record::Report {
        unix_ms: unix_ms(),
        flow,
        now_us: us(r.now),
        interval_us: us(r.interval),
        acked_bytes: r.bytes_acked,
        acked_packets: r.packets_acked,
        sacked_packets: r.packets_sacked,
        lost_packets: r.packets_lost,
        ce_packets: r.packets_ce,
        timeout: r.timeout,
        undo: r.undo,
        delay_exit: r.delay_exit,
        rtt_last_us: r.rtt_last.map(us),
        rtt_min_us: r.rtt_min.map(us),
        rtt_mean_us: r.rtt_mean().map(us),
        rtt_samples: r.rtt_samples,
        rtt_first_half_us: r.rtt_first_half_mean.map(us),
        rtt_second_half_us: r.rtt_second_half_mean.map(us),
        delivery_rate_bytes_per_sec: r.delivery_rate.map(|x| x.bytes_per_sec()),
        inflight_bytes: r.bytes_in_flight,
        inflight_packets: r.packets_in_flight,
        pending_bytes: r.bytes_pending,
        ack_train_us: us(r.ack_train),
        decision_cwnd_bytes: d.cwnd_bytes,
        decision_rate_bytes_per_sec: d.rate.map(|x| x.bytes_per_sec()),
        cwnd_bytes: i.cwnd_bytes,
        rate_bytes_per_sec: i.rate_bytes_per_sec,
        grow_cap_bytes: g.cap,
        grow_exit_rtt_us: g.exit_rtt_us(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::NO_RTT_SAMPLE_US;
    use polycc_algorithms::pcc::MiTrace;
    use polycc_algorithms::Rate;

    /// The delay exit's threshold is what the fused flow's early slow-start exits under ACK jitter
    /// turn on (docs/kernel-parity.md), and the report log did not show it.
    #[test]
    fn a_report_record_carries_the_growth_installed_with_its_decision() {
        let decision = Decision { cwnd_bytes: 28_960, rate: None };
        let install = Install { cwnd_bytes: 28_960, rate_bytes_per_sec: None };
        let json =
            |g: GrowRegs| serde_json::to_value(report_record(1, &Report::default(), &decision, &install, &g)).unwrap();
        let armed = json(GrowRegs { cap: 57_920, rtt_us: 104_000, cap_after: 28_960 });
        assert_eq!(
            (armed["grow_cap_bytes"].as_u64(), armed["grow_exit_rtt_us"].as_u64()),
            (Some(57_920), Some(104_000))
        );
        let none = json(GrowRegs { cap: 0, rtt_us: NO_RTT_SAMPLE_US, cap_after: 0 });
        assert_eq!(none["grow_cap_bytes"].as_u64(), Some(0));
        assert!(none["grow_exit_rtt_us"].is_null(), "{none}");
    }

    /// docs/metrics.md: every figure of every `--log-json` record ends in its unit (`cwnd_bytes`,
    /// not `cwnd`; the MI's loss is `loss_frac`).
    #[test]
    fn log_records_names_carry_their_units() {
        let ms = Duration::from_millis;
        let report = Report {
            now: ms(500),
            interval: ms(40),
            bytes_acked: 14_480,
            packets_acked: 10,
            packets_lost: 1,
            rtt_last: Some(ms(41)),
            rtt_min: Some(ms(40)),
            rtt_sum: ms(410),
            rtt_samples: 10,
            rtt_first_half_mean: Some(ms(40)),
            rtt_second_half_mean: Some(ms(42)),
            delivery_rate: Some(Rate::from_mbps(3.0)),
            ..Report::default()
        };
        let decision = Decision { cwnd_bytes: 28_960, rate: Some(Rate::from_mbps(3.0)) };
        let install = Install { cwnd_bytes: 28_960, rate_bytes_per_sec: Some(375_000) };
        let grow = GrowRegs { cap: 57_920, rtt_us: 104_000, cap_after: 28_960 };
        let trace = MiTrace {
            now_ms: 500.0,
            event: "climb",
            state: "decision",
            mi: Some(4),
            rate_mbps: Some(3.0),
            delivered_mbps: Some(2.9),
            loss_frac: Some(0.01),
            rtt_ms: Some(41.0),
            rtt_gradient: Some(0.001),
            rtt_jitter_ms: Some(0.4),
            packets: Some(100.0),
            utility: Some(2.5),
            utility_gradient: Some(0.1),
            target_mbps: 3.1,
        };
        let records = [
            Record::Create {
                unix_ms: 1,
                flow: 7,
                src: "10.0.0.1:40000".into(),
                dst: "10.1.0.1:443".into(),
                cong_alg: "ccp",
                mss_bytes: 1448,
                init_cwnd_bytes: 14_480,
                adopted: false,
                policy: "vivace",
                cwnd_bytes: 14_480,
                rate_bytes_per_sec: Some(125_000),
            },
            report_record(7, &report, &decision, &install, &grow),
            Record::Mi { unix_ms: 2, flow: 7, trace },
            Record::Close { unix_ms: 3, flow: 7, reports: 12 },
        ];
        for r in &records {
            let json = serde_json::to_value(r).unwrap();
            assert_eq!(polycc_control::vocabulary::violations(&json), Vec::<String>::new(), "{json}");
        }
    }
}
