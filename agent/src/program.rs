//! The one datapath program every flow runs, and its report schema.
//!
//! One union program measures everything [`polycc_algorithms::Report`] holds, for every
//! algorithm and fused policy, so a flow never switches programs. It runs on every ACK (libccp's
//! `ccp_invoke`) and reports:
//! - once per RTT (the latest RTT sample is the deadline), or every `Control.interval_us` when
//!   the agent sets it (`--report-interval 10ms`);
//! - at once on an ACK that reports a loss, a timeout or an undo.
//!
//! Between reports it also runs slow start per ACK while the agent allows it
//! (`Control.grow_cap_bytes`, see [`polycc_algorithms::ack_growth`]): `Cwnd` grows by what each
//! ACK delivers, up to the cap, while more than half the window is in flight; a loss or a timeout
//! stops it until the agent's next decision.
//!
//! The report is [`Field::COUNT`] registers, the most libccp's wire format can index (report
//! register indices are 0..=15 in portus' serializer). What it cannot hold is derived by the
//! agent (see [`crate::convert`]): the report's `now` is the sum of the intervals since the
//! program started on the flow (exact: `Micros` restarts at each report), packets in flight are
//! `bytes_in_flight / mss`.
//!
//! Approximations (documented in docs/agent.md too):
//! - First/second-half mean RTT: a sample counts as "first half" when it is taken before half of
//!   the deadline known at that ACK (`2 Micros < deadline`). In RTT mode the deadline is the
//!   latest RTT sample, so the split moves with it; a loss report, which ends the interval early,
//!   puts every sample in the first half. The second half is `(sum - first) / (n - first)`.
//! - ACK train: runs of program invocations (ACKs) at most [`ACK_TRAIN_GAP_US`] apart, restarted
//!   at each report, as the simulator counts them.
//! - Delivered (`acked_*`): what [`polycc_algorithms::Report`] calls acknowledged, cumulatively
//!   *or selectively*, each packet once, as the simulator counts it. libccp gives per ACK the
//!   cumulative advance (`Ack.*_acked`) and newly SACKed data (`Ack.*_misordered`); a cumulative
//!   ACK that fills a hole also covers data SACKed earlier. The program keeps a running count of
//!   SACKed data not yet cumulatively acknowledged and charges a cumulative advance against it
//!   first (`min(sacked, acked)`), so the retransmission that fills a hole counts as
//!   the hole's packet only when more than what was SACKed arrives. Before this, a report
//!   after a loss counted only the cumulative advance: with 1 % random loss at 50 Mbit/s most
//!   reports held a few packets and the one after each retransmission hundreds, and PCC's
//!   monitor intervals saw throughput swing from nothing to twice the rate (its throughput
//!   brake fired on half of them).
//! - Undo: the kernel found its last loss reduction spurious ([`polycc_algorithms::Report::undo`]).
//!   libccp has no primitive for it and every report register is taken, so a datapath that
//!   reports undos says so in its CREATE (ccp.ko and the BPF datapath do, [`crate::wire`]'s
//!   `undo_signal`) and puts this ACK's undo count in `Ack.ecn_bytes`, which for it is not the
//!   marked bytes (those are `Ack.ecn_packets` times the MSS); the program sums it, at most 255
//!   per ACK (no sum can overflow, whatever another datapath puts there), into [`Field::Events`]
//!   from bit [`UNDO_SHIFT`]. For any other datapath the agent ignores those bits.
//! - `app_limited` is not measured (no libccp primitive says so): the agent derives it from the
//!   pending and in-flight bytes and the window it installed
//!   ([`polycc_algorithms::report::app_limited`], applied in [`crate::convert::to_report`]).
//!
//! libccp limits the program respects: 8 tmp registers per statement (the deepest statement
//! here needs 4), no subtraction that can underflow (libccp aborts the program on it: one `-`
//! subtracts a train start that is never later than `Ack.now`, one a round start capped at
//! `Micros`, the others a `covered` share that is the `min` of two terms of the sum it is taken
//! from), no addition that can overflow (nothing is added to a `+infinity`), immediates below
//! 2^31.
//! `Flow.rtt_sample_us` reads as 4294967295 (`+infinity` as a 32-bit immediate) on ACKs without
//! an RTT sample; those ACKs leave the RTT registers alone.

use crate::convert::{GrowRegs, Install};
use crate::wire::Fields;
use portus::lang::{Reg, Scope};
use std::fmt::Write as _;
use thiserror::Error;

/// The name the program is installed under (for logs; the datapath knows it by uid).
pub const PROGRAM_NAME: &str = "polycc_union";

/// ACKs at most this far apart belong to one ACK train (HyStart's 2 ms, as the simulator).
pub const ACK_TRAIN_GAP_US: u64 = 2_000;

/// What `Flow.rtt_sample_us` and an untouched `Report.rtt_min_us` read as: no sample.
pub const NO_RTT_SAMPLE_US: u64 = u32::MAX as u64;

/// The report schema: one variant per report register, in declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Bytes newly delivered, cumulatively or selectively (see "Delivered" above), summed. Bytes.
    AckedBytes,
    /// Packets newly delivered, cumulatively or selectively, summed. Packets.
    AckedPackets,
    /// Packets SACKed out of order (`Ack.packets_misordered`), summed. Packets.
    SackedPackets,
    /// Packets declared lost (`Ack.lost_pkts_sample`) in the low 32 bits and packets delivered
    /// with an ECN-Echo (`Ack.ecn_packets`) from bit [`CE_SHIFT`], each summed. Packets. One
    /// register for both: the 16 are taken, and no interval loses or marks 2^32 packets.
    LostMarked,
    /// Events of the interval, bits: [`EVENT_TIMEOUT`] (a retransmission timeout,
    /// `Flow.was_timeout`), [`EVENT_DELAY_EXIT`] (the per-ACK growth's delay exit fired); from
    /// bit [`UNDO_SHIFT`], the kernel's undos (`Ack.ecn_bytes` of a datapath that says it
    /// carries them; see "Undo" above), summed.
    Events,
    /// The latest RTT sample. Microseconds; 0 without a sample.
    RttLastUs,
    /// The smallest RTT sample. Microseconds; 4294967295 without a sample.
    RttMinUs,
    /// Sum of the RTT samples. Microseconds.
    RttSumUs,
    /// Number of RTT samples.
    RttSamples,
    /// Sum of the RTT samples taken in the first half of the interval. Microseconds.
    RttFirstSumUs,
    /// Number of RTT samples taken in the first half of the interval.
    RttFirstSamples,
    /// Largest `min(Flow.rate_outgoing, Flow.rate_incoming)`. Bytes per second; 0 = none.
    DeliveryRate,
    /// `Flow.bytes_in_flight` at the last ACK. Bytes.
    InflightBytes,
    /// `Flow.bytes_pending` at the last ACK. Bytes.
    PendingBytes,
    /// `Micros` when the report was sent: the interval's length. Microseconds.
    IntervalUs,
    /// Longest ACK train of the interval. Microseconds.
    AckTrainUs,
}

impl Field {
    /// Report registers libccp can hold for one program through portus (indices 0..=15).
    pub const COUNT: usize = 16;

    pub const ALL: [Field; Field::COUNT] = [
        Field::AckedBytes,
        Field::AckedPackets,
        Field::SackedPackets,
        Field::LostMarked,
        Field::Events,
        Field::RttLastUs,
        Field::RttMinUs,
        Field::RttSumUs,
        Field::RttSamples,
        Field::RttFirstSumUs,
        Field::RttFirstSamples,
        Field::DeliveryRate,
        Field::InflightBytes,
        Field::PendingBytes,
        Field::IntervalUs,
        Field::AckTrainUs,
    ];

    /// The register's name inside `(Report ...)`.
    pub fn short_name(self) -> &'static str {
        match self {
            Field::AckedBytes => "acked_bytes",
            Field::AckedPackets => "acked_packets",
            Field::SackedPackets => "sacked_packets",
            Field::LostMarked => "lost_marked",
            Field::Events => "events",
            Field::RttLastUs => "rtt_last_us",
            Field::RttMinUs => "rtt_min_us",
            Field::RttSumUs => "rtt_sum_us",
            Field::RttSamples => "rtt_samples",
            Field::RttFirstSumUs => "rtt_first_sum_us",
            Field::RttFirstSamples => "rtt_first_samples",
            Field::DeliveryRate => "delivery_rate",
            Field::InflightBytes => "inflight_bytes",
            Field::PendingBytes => "pending_bytes",
            Field::IntervalUs => "interval_us",
            Field::AckTrainUs => "ack_train_us",
        }
    }

    /// Initial value after each report (`+infinity` for the running minimum).
    fn initial(self) -> &'static str {
        match self {
            Field::RttMinUs => "+infinity",
            _ => "0",
        }
    }

    /// The scope name portus gives the register.
    pub fn scope_name(self) -> String {
        format!("Report.{}", self.short_name())
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Control registers the agent writes (besides the implicit `Cwnd` and `Rate`).
pub const CONTROL_INTERVAL_US: &str = "Control.interval_us";
/// Per-ACK slow start up to this window (bytes; 0 = none): see [`polycc_algorithms::ack_growth`].
pub const CONTROL_GROW_CAP_BYTES: &str = "Control.grow_cap_bytes";
/// The growth's delay exit: its RTT threshold (us; [`NO_RTT_SAMPLE_US`] = none).
pub const CONTROL_GROW_RTT_US: &str = "Control.grow_rtt_us";
/// The growth's delay exit: the cap once it fires (bytes).
pub const CONTROL_GROW_CAP_AFTER: &str = "Control.grow_cap_after";

/// Where [`Field::LostMarked`] holds the ECN-marked packets (below it, the lost ones).
pub const CE_SHIFT: u32 = 32;

/// Where [`Field::Events`] holds the undo count (below it, the event bits).
pub const UNDO_SHIFT: u32 = 32;

/// [`Field::Events`] bit: a retransmission timeout.
pub const EVENT_TIMEOUT: u64 = 1;
/// [`Field::Events`] bit: the growth's delay exit fired; the report was sent at that ACK.
///
/// (A timeout is reported at its ACK, so each bit is added at most once per report: `+` is `|`.)
pub const EVENT_DELAY_EXIT: u64 = 2;

/// The program's event clauses (the `def` part is generated from [`Field::ALL`]).
const EVENTS: &str = "
(when true
    (:= Control.scratch (min Control.sacked_bytes Ack.bytes_acked))
    (:= Control.delivered_bytes (- (+ Ack.bytes_acked Ack.bytes_misordered) Control.scratch))
    (:= Report.acked_bytes (+ Report.acked_bytes Control.delivered_bytes))
    (:= Control.sacked_bytes (- (+ Control.sacked_bytes Ack.bytes_misordered) Control.scratch))
    (:= Control.scratch (min Control.sacked_packets Ack.packets_acked))
    (:= Report.acked_packets (+ Report.acked_packets (- (+ Ack.packets_acked Ack.packets_misordered) Control.scratch)))
    (:= Control.sacked_packets (- (+ Control.sacked_packets Ack.packets_misordered) Control.scratch))
    (:= Report.sacked_packets (+ Report.sacked_packets Ack.packets_misordered))
    (:= Report.lost_marked (+ Report.lost_marked (+ Ack.lost_pkts_sample (* (* Ack.ecn_packets 65536) 65536))))
    (:= Report.events (if Flow.was_timeout (+ Report.events 1)))
    (:= Report.events (+ Report.events (* (* (min Ack.ecn_bytes 255) 65536) 65536)))
    (:= Report.delivery_rate (max Report.delivery_rate (min Flow.rate_outgoing Flow.rate_incoming)))
    (:= Report.inflight_bytes Flow.bytes_in_flight)
    (:= Report.pending_bytes Flow.bytes_pending)
    (:= Control.train_start_us (if (> Ack.now (+ Control.last_ack_us 2000)) Ack.now))
    (:= Control.last_ack_us Ack.now)
    (:= Report.ack_train_us (max Report.ack_train_us (- Ack.now Control.train_start_us)))
    (:= Control.grow_cap_bytes (if (> (+ Ack.lost_pkts_sample Ack.ecn_packets) 0) (min Control.grow_cap_bytes 0)))
    (:= Control.grow_cap_bytes (if Flow.was_timeout (min Control.grow_cap_bytes 0)))
    (:= Control.scratch (min (+ Cwnd Control.delivered_bytes) Control.grow_cap_bytes))
    (:= Control.scratch (if (< (* (+ Flow.bytes_in_flight Control.delivered_bytes) 2) (+ Cwnd 1)) Cwnd))
    (:= Cwnd (max Cwnd Control.scratch))
    (:= Control.scratch 0)
    (:= Control.deadline_us Control.rtt_us)
    (:= Control.deadline_us (if (> Control.interval_us 0) Control.interval_us))
    (fallthrough)
)
(when (< Flow.rtt_sample_us +infinity)
    (:= Control.rtt_us Flow.rtt_sample_us)
    (:= Report.rtt_last_us Flow.rtt_sample_us)
    (:= Report.rtt_min_us (min Report.rtt_min_us Flow.rtt_sample_us))
    (:= Report.rtt_sum_us (+ Report.rtt_sum_us Flow.rtt_sample_us))
    (:= Report.rtt_samples (+ Report.rtt_samples 1))
    (:= Report.rtt_first_sum_us (if (< (* Micros 2) Control.deadline_us) (+ Report.rtt_first_sum_us Flow.rtt_sample_us)))
    (:= Report.rtt_first_samples (if (< (* Micros 2) Control.deadline_us) (+ Report.rtt_first_samples 1)))
    (:= Control.grow_n (if (> (- Micros (min Control.round_us Micros)) Control.round_rtt_us) 0))
    (:= Control.grow_min (if (> (- Micros (min Control.round_us Micros)) Control.round_rtt_us) +infinity))
    (:= Control.round_us (if (> (- Micros (min Control.round_us Micros)) Control.round_rtt_us) Micros))
    (:= Control.round_rtt_us (if (== Control.grow_n 0) Flow.rtt_sample_us))
    (:= Control.grow_n (+ Control.grow_n 1))
    (:= Control.grow_min (if (< Control.grow_n 9) (min Control.grow_min Flow.rtt_sample_us)))
    (:= Control.scratch (if (> Control.grow_n 7) Control.grow_min))
    (fallthrough)
)
(when (|| (|| (|| (> (+ (+ Ack.lost_pkts_sample Ack.ecn_packets) Ack.ecn_bytes) 0) Flow.was_timeout) (> Micros Control.deadline_us)) (> Control.scratch Control.grow_rtt_us))
    (:= Report.events (if (> Control.scratch Control.grow_rtt_us) (+ Report.events 2)))
    (:= Control.grow_cap_bytes (if (> Control.scratch Control.grow_rtt_us) (min Control.grow_cap_bytes Control.grow_cap_after)))
    (:= Control.grow_rtt_us (if (> Control.scratch Control.grow_rtt_us) +infinity))
    (:= Report.interval_us Micros)
    (report)
    (:= Micros 0)
    (:= Control.last_ack_us 0)
    (:= Control.grow_min +infinity)
    (:= Control.grow_n 0)
    (:= Control.round_us 0)
    (:= Control.round_rtt_us +infinity)
)
";

/// The program's source text, exactly as installed.
///
/// Control registers: `interval_us` (0 = report once per RTT; the agent sets it per flow),
/// `grow_cap_bytes` (per-ACK slow start up to this window, 0 = none; the agent sets it with every
/// decision, a loss or a timeout clears it), `grow_rtt_us`/`grow_cap_after` (its delay exit),
/// `grow_n`/`grow_min`/`round_us`/`round_rtt_us` (the exit's round, [`polycc_algorithms::ack_growth`]:
/// its samples, the minimum of its first 8, its start on the `Micros` clock, its first sample,
/// which is how long it lasts),
/// `delivered_bytes` (this ACK's delivered bytes),
/// `sacked_bytes`/`sacked_packets` (SACKed, not yet cumulatively acknowledged),
/// `scratch` (one ACK's intermediate values, in turn: its share of the SACKed bytes, of the
/// SACKed packets, the window it grows to (`min(Cwnd + delivered, cap)`, or `Cwnd` when at most
/// half the window was in flight; portus cannot serialize `&&` or an `if` into `Cwnd` in an
/// assignment, so the growth is a `max` of two steps), then 0, or on an RTT sample the round's
/// minimum once it has 8 samples, which the report clause tests; portus allows 16 control
/// registers and all are used),
/// `rtt_us` (latest RTT sample; `+infinity` until the first, so RTT mode sends no timed report
/// before it), `deadline_us` (this interval's deadline), `train_start_us`/`last_ack_us` (ACK
/// train bookkeeping; `last_ack_us = 0` after a report restarts the train).
pub fn source() -> String {
    let mut s = String::from("(def\n    (Report\n");
    for f in Field::ALL {
        let _ = writeln!(s, "        (volatile {} {})", f.short_name(), f.initial());
    }
    s.push_str("    )\n");
    for (name, init) in [
        (CONTROL_INTERVAL_US, "0"),
        (CONTROL_GROW_CAP_BYTES, "0"),
        (CONTROL_GROW_RTT_US, "+infinity"),
        (CONTROL_GROW_CAP_AFTER, "0"),
        ("Control.grow_min", "+infinity"),
        ("Control.grow_n", "0"),
        ("Control.round_us", "0"),
        ("Control.round_rtt_us", "+infinity"),
        ("Control.delivered_bytes", "0"),
        ("Control.scratch", "0"),
        ("Control.rtt_us", "+infinity"),
        ("Control.deadline_us", "+infinity"),
        ("Control.train_start_us", "0"),
        ("Control.last_ack_us", "0"),
        ("Control.sacked_bytes", "0"),
        ("Control.sacked_packets", "0"),
    ] {
        let _ = writeln!(s, "    ({name} {init})");
    }
    s.push(')');
    s.push_str(EVENTS);
    s
}

/// The compiled program doesn't have the registers the agent relies on: a bug in [`source`].
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProgramError {
    #[error("the union datapath program does not compile: {0}")]
    Compile(String),
    #[error("the union datapath program has no register `{0}`")]
    MissingRegister(String),
    #[error("`{0}` is not a report register in the union datapath program")]
    NotReport(String),
}

/// The compiled program: what to install and where each value lives, resolved once from the
/// program's scope so nothing looks a name up per report.
#[derive(Clone, Debug)]
pub struct Program {
    pub uid: u32,
    /// The serialized INSTALL message (socket id 0: for every flow).
    pub install_msg: Vec<u8>,
    /// Index into a MEASURE message's fields, per [`Field`].
    report_index: [usize; Field::COUNT],
    pub cwnd_reg: Reg,
    pub rate_reg: Reg,
    pub interval_reg: Reg,
    pub grow_cap_reg: Reg,
    pub grow_rtt_reg: Reg,
    pub grow_cap_after_reg: Reg,
}

impl Program {
    /// Compile the union program. Each call consumes one portus program uid (a process-global
    /// counter); the agent compiles once, at start, so its program is uid 1 in production and
    /// libccp clears stale programs when it installs it.
    pub fn compile() -> Result<Program, ProgramError> {
        let src = source();
        let (bin, scope) =
            portus::lang::compile(src.as_bytes(), &[]).map_err(|e| ProgramError::Compile(e.to_string()))?;
        let msg = portus::serialize::install::Msg {
            sid: 0,
            program_uid: scope.program_uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        };
        let install_msg = portus::serialize::serialize(&msg).map_err(|e| ProgramError::Compile(e.0))?;
        Program::from_scope(&scope, install_msg)
    }

    fn from_scope(scope: &Scope, install_msg: Vec<u8>) -> Result<Program, ProgramError> {
        let get = |name: &str| scope.get(name).cloned().ok_or_else(|| ProgramError::MissingRegister(name.into()));
        let mut report_index = [0; Field::COUNT];
        for f in Field::ALL {
            let name = f.scope_name();
            match get(&name)? {
                Reg::Report(idx, _, _) => report_index[f.index()] = usize::from(idx),
                _ => return Err(ProgramError::NotReport(name)),
            }
        }
        Ok(Program {
            uid: scope.program_uid,
            install_msg,
            report_index,
            cwnd_reg: get("Cwnd")?,
            rate_reg: get("Rate")?,
            interval_reg: get(CONTROL_INTERVAL_US)?,
            grow_cap_reg: get(CONTROL_GROW_CAP_BYTES)?,
            grow_rtt_reg: get(CONTROL_GROW_RTT_US)?,
            grow_cap_after_reg: get(CONTROL_GROW_CAP_AFTER)?,
        })
    }

    /// The `(register, value)` list of an UPDATE_FIELDS or a CHANGE_PROG, the one place every
    /// sender builds it: `Cwnd`; `Rate` when `install` has one (none: the flow was never paced,
    /// see [`Install`]); then the growth registers (`Control.grow_cap_bytes`,
    /// `Control.grow_rtt_us`, `Control.grow_cap_after`) and `Control.interval_us` when given.
    /// The values are register values already ([`crate::convert`]).
    pub fn control_fields(&self, install: &Install, grow: Option<GrowRegs>, interval_us: Option<u64>) -> Vec<(Reg, u64)> {
        let mut fields = Vec::with_capacity(6);
        fields.push((self.cwnd_reg.clone(), u64::from(install.cwnd_bytes)));
        if let Some(rate) = install.rate_bytes_per_sec {
            fields.push((self.rate_reg.clone(), u64::from(rate)));
        }
        if let Some(g) = grow {
            fields.push((self.grow_cap_reg.clone(), g.cap));
            fields.push((self.grow_rtt_reg.clone(), g.rtt_us));
            fields.push((self.grow_cap_after_reg.clone(), g.cap_after));
        }
        if let Some(us) = interval_us {
            fields.push((self.interval_reg.clone(), us));
        }
        fields
    }

    /// The MEASURE fields that carry `raw` (the inverse of [`Program::read`]): for datapaths that
    /// measure in the schema's order and speak to the agent through a translating transport.
    pub fn measure_fields(&self, raw: &RawReport) -> [u64; Field::COUNT] {
        let mut fields = [0; Field::COUNT];
        for f in Field::ALL {
            fields[self.report_index[f.index()]] = raw.get(f);
        }
        fields
    }

    /// A MEASURE message's fields as the typed schema, or `None` if it has too few.
    pub fn read(&self, fields: Fields<'_>) -> Option<RawReport> {
        let mut values = [0; Field::COUNT];
        for f in Field::ALL {
            values[f.index()] = fields.get(self.report_index[f.index()])?;
        }
        Some(RawReport { values })
    }
}

/// One report's registers, by [`Field`], in the datapath's units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawReport {
    values: [u64; Field::COUNT],
}

impl RawReport {
    pub fn get(&self, f: Field) -> u64 {
        self.values[f.index()]
    }

    /// A report from values in [`Field::ALL`]'s order.
    pub fn from_values(values: [u64; Field::COUNT]) -> RawReport {
        RawReport { values }
    }

    /// A report with these values (tests, benchmarks).
    pub fn from_pairs(pairs: &[(Field, u64)]) -> RawReport {
        let mut r = RawReport::default();
        r.values[Field::RttMinUs.index()] = NO_RTT_SAMPLE_US;
        for &(f, v) in pairs {
            r.values[f.index()] = v;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_union_program_compiles_within_libccp_limits() {
        let p = Program::compile().expect("compiles");
        // Every report register has a distinct index below 16 (portus' serializer limit).
        let mut seen = [false; Field::COUNT];
        for f in Field::ALL {
            let i = p.report_index[f.index()];
            assert!(i < Field::COUNT && !seen[i], "{f:?} at {i}");
            seen[i] = true;
        }
        // INSTALL: 8 B header + 12 B + 16 B per event and per instruction; ccp.ko takes up to
        // 255 instructions (`CCP_MAX_PROGRAM_INSTRUCTIONS`) in a message of at most libccp's
        // `BIGGEST_MSG_SIZE`.
        assert!(p.install_msg.len() <= 32_678, "install message is {} bytes", p.install_msg.len());
        let instrs = (p.install_msg.len() - 20) / 16;
        assert!(instrs <= 255, "{instrs} instructions");
    }

    #[test]
    fn control_fields_list_cwnd_rate_cap_interval_and_only_what_is_given() {
        let p = Program::compile().unwrap();
        let names = |fields: Vec<(Reg, u64)>| -> Vec<(crate::wire::RegId, u64)> {
            fields.iter().map(|(r, v)| (crate::wire::reg_id(r), *v)).collect()
        };
        let id = crate::wire::reg_id;
        let unpaced = Install { cwnd_bytes: 14_480, rate_bytes_per_sec: None };
        assert_eq!(names(p.control_fields(&unpaced, None, None)), [(id(&p.cwnd_reg), 14_480)]);
        let paced = Install { cwnd_bytes: 14_480, rate_bytes_per_sec: Some(2_500_000) };
        let grow = GrowRegs { cap: 28_960, rtt_us: 112_500, cap_after: 0 };
        assert_eq!(
            names(p.control_fields(&paced, Some(grow), Some(5_000))),
            [
                (id(&p.cwnd_reg), 14_480),
                (id(&p.rate_reg), 2_500_000),
                (id(&p.grow_cap_reg), 28_960),
                (id(&p.grow_rtt_reg), 112_500),
                (id(&p.grow_cap_after_reg), 0),
                (id(&p.interval_reg), 5_000)
            ]
        );
    }

    #[test]
    fn reading_a_measure_follows_the_scope_layout() {
        let p = Program::compile().unwrap();
        let fields: Vec<u64> = (0..Field::COUNT as u64).map(|i| 100 + i).collect();
        let read = |fields: &[u64]| {
            let msg = crate::wire::build::measure(1, p.uid, fields);
            match crate::wire::parse(&msg) {
                Ok((crate::wire::Message::Measure { fields, .. }, _)) => p.read(fields),
                other => panic!("{other:?}"),
            }
        };
        let r = read(&fields).unwrap();
        for f in Field::ALL {
            assert_eq!(r.get(f), 100 + p.report_index[f.index()] as u64);
        }
        assert_eq!(read(&fields[..Field::COUNT - 1]), None, "a short MEASURE is refused");
        assert_eq!(p.measure_fields(&r)[..], fields[..], "measure_fields inverts read");
    }
}
