//! Reports handled per second on one core with many flows, and memory per flow.
//!
//! The agent's whole per-report path runs here as `polycc-portus` runs it: a MEASURE datagram
//! is parsed (wire.rs), converted (convert.rs), handed to the flow's controller, and the
//! UPDATE_FIELDS answer is serialized and sent; only the socket is replaced by a transport that
//! counts what it is given. Flows: [`FLOWS`] at once, each fed once-per-RTT reports in turn
//! (round robin, as many flows' reports interleave in the agent's socket), with RTT jitter and
//! a loss every [`LOSS_EVERY`] reports so the algorithms take their real branches.
//!
//! Baseline, measured in the same run: the bare wire cost of a report (parse the MEASURE,
//! serialize an UPDATE_FIELDS), what any CCP agent pays. The ratio says what polycc's
//! conversion, bookkeeping and algorithms add on top.
//!
//! Memory per flow: a counting allocator's live bytes after creating the flows and feeding
//! each a few reports, minus before, over the flow count (the flows table, each flow's
//! controller, its statistics window).
//!
//! `cargo bench -p polycc-agent --bench reports` (also `make bench`). Goals from issue 4: at
//! least 200k reports/s for the classic algorithms, 100k/s for a 3-member fusion, and under
//! 16 KiB per flow.

use clap::Parser;
use polycc_agent::program::{Field, RawReport};
use polycc_agent::transport::Transport;
use polycc_agent::wire::{self, build, Create};
use polycc_agent::{Agent, AgentConfig};
use polycc_algorithms::quantity::ReportInterval;
use polycc_args::PolicyArgs;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

/// Live heap bytes, for memory per flow.
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE_BYTES.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const FLOWS: u32 = 1_000;
/// Reports per flow in the timed run.
const REPORTS_PER_FLOW: u32 = 200;
/// Reports per flow before memory is measured (controllers fill their filters and windows).
const WARMUP_REPORTS: u32 = 50;
const LOSS_EVERY: u32 = 50;
const MSS: u32 = 1448;
const RTT_US: u64 = 20_000;

/// A transport that counts and drops what the agent sends.
#[derive(Default)]
struct Sink {
    sent: Cell<u64>,
}

impl Transport for Sink {
    type Addr = ();
    fn recv(&mut self, _buf: &mut [u8]) -> io::Result<Option<(usize, ())>> {
        Ok(None)
    }
    fn send(&self, _to: &(), msg: &[u8]) -> io::Result<()> {
        self.sent.set(self.sent.get() + msg.len() as u64);
        Ok(())
    }
}

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    policy: PolicyArgs,
}

/// The MEASURE datagrams of one flow: `n` once-per-RTT reports.
fn reports(agent: &Agent<Sink>, sid: u32, n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            // RTT 20 ms with up to 3 ms of queueing, varying by report and flow.
            let rtt = RTT_US + u64::from((i * 7 + sid * 13) % 31) * 100;
            let lost = u64::from(i % LOSS_EVERY == LOSS_EVERY - 1);
            let raw = RawReport::from_pairs(&[
                (Field::AckedBytes, 20 * u64::from(MSS)),
                (Field::AckedPackets, 20),
                (Field::LostMarked, lost),
                (Field::RttLastUs, rtt),
                (Field::RttMinUs, RTT_US),
                (Field::RttSumUs, 20 * rtt),
                (Field::RttSamples, 20),
                (Field::RttFirstSumUs, 10 * rtt),
                (Field::RttFirstSamples, 10),
                (Field::DeliveryRate, 20 * u64::from(MSS) * 1_000_000 / rtt),
                (Field::InflightBytes, 20 * u64::from(MSS)),
                // A bulk sender: data queued, never app-limited.
                (Field::PendingBytes, 1 << 20),
                (Field::IntervalUs, rtt),
                (Field::AckTrainUs, rtt / 2),
            ]);
            build::measure(sid, agent.program().uid, &agent.program().measure_fields(&raw))
        })
        .collect()
}

fn agent(flags: &[&str]) -> Agent<Sink> {
    let args = Flags::parse_from(std::iter::once("bench").chain(flags.iter().copied()));
    let cfg = AgentConfig {
        policy: args.policy.policy().expect("a valid policy"),
        report_interval: ReportInterval::Auto,
        pin_cwnd_packets: None,
        pin_rate: None,
        quiet_after: None,
    };
    Agent::new(Sink::default(), cfg, polycc_agent::logging::discard(), None).expect("the program compiles")
}

fn create(a: &mut Agent<Sink>, sid: u32) {
    let c = Create {
        sid,
        init_cwnd: 10 * MSS,
        mss: MSS,
        src: Ipv4Addr::new(10, 0, (sid >> 8) as u8, sid as u8).into(),
        src_port: 40_000,
        dst: Ipv4Addr::new(10, 1, 0, 1).into(),
        dst_port: 5201,
        cong_alg: "ccp".into(),
        adopted: None,
        undo_signal: true,
    };
    a.handle_datagram(&build::create(&c), &());
}

struct Figures {
    reports_per_sec: f64,
    bytes_per_flow: f64,
}

/// Create the flows, warm them up (memory measured here), then time round-robin reports.
fn measure(flags: &[&str]) -> Figures {
    let mut a = agent(flags);
    let warm: Vec<Vec<Vec<u8>>> = (1..=FLOWS).map(|sid| reports(&a, sid, WARMUP_REPORTS)).collect();
    let timed: Vec<Vec<Vec<u8>>> = (1..=FLOWS).map(|sid| reports(&a, sid, REPORTS_PER_FLOW)).collect();
    let before = LIVE_BYTES.load(Ordering::SeqCst);
    for sid in 1..=FLOWS {
        create(&mut a, sid);
    }
    for i in 0..WARMUP_REPORTS as usize {
        for r in &warm {
            a.handle_datagram(&r[i], &());
        }
    }
    let bytes_per_flow = (LIVE_BYTES.load(Ordering::SeqCst) - before) as f64 / f64::from(FLOWS);
    let start = Instant::now();
    for i in 0..REPORTS_PER_FLOW as usize {
        for r in &timed {
            a.handle_datagram(&r[i], &());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let s = a.stats();
    assert_eq!(s.reports, u64::from(FLOWS) * u64::from(WARMUP_REPORTS + REPORTS_PER_FLOW), "{s:?}");
    assert_eq!((s.malformed, s.unknown_flow_reports), (0, 0), "{s:?}");
    Figures { reports_per_sec: f64::from(FLOWS * REPORTS_PER_FLOW) / secs, bytes_per_flow }
}

/// The bare wire cost: parse each MEASURE, serialize an UPDATE_FIELDS with a window and a rate.
fn baseline() -> f64 {
    let a = agent(&["--alg", "reno"]);
    let timed: Vec<Vec<Vec<u8>>> = (1..=FLOWS).map(|sid| reports(&a, sid, REPORTS_PER_FLOW)).collect();
    let p = a.program();
    let start = Instant::now();
    let mut bytes = 0usize;
    for i in 0..REPORTS_PER_FLOW as usize {
        for r in &timed {
            let (msg, _) = wire::parse(&r[i]).expect("a valid MEASURE");
            let sid = match msg {
                wire::Message::Measure { sid, .. } => sid,
                _ => unreachable!("only MEASUREs here"),
            };
            let update = wire::update_fields(sid, vec![(p.cwnd_reg.clone(), 14_480), (p.rate_reg.clone(), 1_250_000)]);
            bytes += black_box(update).len();
        }
    }
    black_box(bytes);
    f64::from(FLOWS * REPORTS_PER_FLOW) / start.elapsed().as_secs_f64()
}

fn main() {
    let cases: &[(&str, &[&str], f64)] = &[
        ("reno", &["--alg", "reno"], 200e3),
        ("cubic", &["--alg", "cubic"], 200e3),
        ("vegas", &["--alg", "vegas"], 200e3),
        ("bbr", &["--alg", "bbr"], 200e3),
        ("copa", &["--alg", "copa"], 200e3),
        ("vivace", &["--alg", "vivace"], 200e3),
        ("fused bbr+cubic+vegas", &["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic,vegas"], 100e3),
    ];
    let base = baseline();
    println!("polycc-portus per-report cost, {FLOWS} flows, {REPORTS_PER_FLOW} once-per-RTT reports each, one core");
    println!("baseline (wire parse + UPDATE_FIELDS serialize only): {:.0} k reports/s", base / 1e3);
    println!(
        "{:<24} {:>14} {:>10} {:>12} {:>8} {:>16}",
        "policy", "k reports/s", "goal", "x baseline", "met", "bytes per flow"
    );
    let mut all_met = true;
    let mut table = Vec::new();
    for (name, flags, goal) in cases {
        let f = measure(flags);
        table.push((*name, f.reports_per_sec, f.bytes_per_flow));
        let met = f.reports_per_sec >= *goal && f.bytes_per_flow < 16.0 * 1024.0;
        all_met &= met;
        println!(
            "{name:<24} {:>14.0} {:>10.0} {:>12.2} {:>8} {:>16.0}",
            f.reports_per_sec / 1e3,
            goal / 1e3,
            base / f.reports_per_sec,
            if met { "yes" } else { "NO" },
            f.bytes_per_flow
        );
    }
    println!(
        "x baseline: how many times the bare wire cost a report takes; goals: the reports/s and < 16384 bytes per flow"
    );
    if !all_met {
        println!("some goals were not met");
    }
    // docs/testing.md's `make bench` table (`experiments/tables.py bench`; experiments/results_table.py).
    let (fused, singles) = table.split_last().expect("cases");
    let k = |r: f64| format!("{:.0}k", r / 1e3);
    let ratios: Vec<f64> = singles.iter().map(|(_, r, _)| base / r).collect();
    let names: Vec<&str> = singles.iter().map(|(n, _, _)| *n).collect();
    let rates: Vec<String> = singles.iter().map(|(_, r, _)| k(*r)).collect();
    println!(
        "results-table bench 5\tagent, reports/s on one core, {FLOWS} flows: {}\t{} ({:.1}-{:.1}x the bare wire cost, \
         {}/s)\t>= 200k/s",
        names.join(" / "),
        rates.join(" / "),
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
        k(base)
    );
    println!("results-table bench 6\tagent, reports/s, {}\t{} ({:.1}x the wire cost)\t>= 100k/s", fused.0, k(fused.1), base / fused.1);
    let kib: Vec<String> = table.iter().map(|(n, _, b)| format!("{n} {:.1}", b / 1024.0)).collect();
    println!(
        "results-table bench 7\tagent, memory per flow (controller, flows table, stats window)\t{} KiB\t< 16 KiB",
        kib.join(", ")
    );
}
