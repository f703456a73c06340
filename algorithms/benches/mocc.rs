//! MOCC's cost per decision, inference included (target: <= 20 us), beside CUBIC's cost per
//! report measured in the same run. The model is `onnx/mocc.onnx` when it exists (the shipped
//! one), else the synthetic model of `mocc::synthetic` (said so in the table). The closing table
//! also gives MOCC's mean cost per report over a flow's report stream (most reports make no
//! decision) and the model file's size (target: <= 1 MB).

use criterion::{black_box, Criterion};
use polycc_algorithms::mocc::{synthetic, MoccConfig, MoccCore, MoccModel, ModelSlot, Preference};
use polycc_algorithms::testing::FluidPath;
use polycc_algorithms::{AlgorithmConfig, AlgorithmKind, CongestionControl, FlowInfo, Policy, Rate, Report};
use std::time::{Duration, Instant};

const MSS: u64 = 1448;
const DECISION_TARGET_NS: f64 = 20_000.0;
/// Shortest timed run whose CPU time is reported (100 ms: tick granularity is then a few percent).
const MIN_CPU_SPAN_NS: u64 = 100_000_000;
const MODEL_SIZE_TARGET_BYTES: usize = 1_000_000;

fn model() -> (MoccModel, String, usize) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../onnx/mocc.onnx");
    match std::fs::read(path) {
        Ok(bytes) => match MoccModel::from_bytes(&bytes) {
            Ok(m) => (m, "onnx/mocc.onnx".into(), bytes.len()),
            Err(e) => panic!("{path}: {e}"),
        },
        Err(_) => {
            let bytes = synthetic::valid_model_bytes();
            let m = MoccModel::from_bytes(&bytes).expect("the synthetic model is valid");
            (m, "synthetic (onnx/mocc.onnx absent)".into(), bytes.len())
        }
    }
}

/// Reports of a flow of `policy` on a 100 Mbit/s, 40 ms, 1 BDP fluid path.
fn reports_for(cc: &mut dyn CongestionControl, n: usize) -> Vec<Report> {
    let mut path = FluidPath::new(Rate::from_mbps(100.0), Duration::from_millis(40), 500_000, MSS);
    path.reports(cc, n)
}

/// This thread's CPU time in nanoseconds (Linux: the first field of /proc/thread-self/schedstat),
/// or None where that file is missing. Wall time on a loaded machine includes the time the thread
/// waited for a core; CPU time does not. The kernel updates it at scheduler ticks (a few ms), so
/// it is only used for timings of at least [`MIN_CPU_SPAN_NS`].
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// Nanoseconds per call of `f` over `n` calls, best of 5: (wall time, the thread's CPU time).
fn ns_per(n: usize, mut f: impl FnMut(usize)) -> (f64, Option<f64>) {
    (0..5)
        .map(|_| {
            // The clock reads (a /proc file each, microseconds) stay outside the wall-time span.
            let c = thread_cpu_ns();
            let t = Instant::now();
            for i in 0..n {
                f(i);
            }
            let wall = t.elapsed().as_nanos() as f64 / n as f64;
            let cpu = c
                .zip(thread_cpu_ns())
                .map(|(a, b)| b.saturating_sub(a))
                .filter(|&d| d >= MIN_CPU_SPAN_NS)
                .map(|d| d as f64 / n as f64);
            (wall, cpu)
        })
        .fold((f64::INFINITY, None), |(w, c), (w2, c2)| {
            (
                w.min(w2),
                match (c, c2) {
                    (Some(a), Some(b)) => Some(f64::min(a, b)),
                    (a, b) => a.or(b),
                },
            )
        })
}

/// The 1-minute load average (/proc/loadavg), printed with the numbers.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

fn main() {
    let (model, source, size) = model();
    let plan_nodes = model.plan_nodes();
    let plan_ops = model.plan_ops();
    let slot = ModelSlot::new(model);
    let mocc_cfg = MoccConfig { slot: Some(slot.clone()), ..MoccConfig::default() };
    let mocc_policy = Policy::Single(AlgorithmConfig::Mocc(mocc_cfg.clone()));
    let cubic_policy = Policy::Single(AlgorithmKind::Cubic.default_config());
    let info = FlowInfo::with_mss(MSS);
    let cubic_reports = reports_for(&mut *cubic_policy.build(info), 1000);
    let mocc_reports = reports_for(&mut *mocc_policy.build(info), 1000);
    // A core with a real history to decide on.
    let mut core = MoccCore::new(info, Some(Rate::from_mbps(50.0)));
    for r in &mocc_reports {
        core.on_report(r);
    }
    let w = Preference::default();
    let decide = |core: &mut MoccCore, now: Duration| {
        let input = core.model_input(&w);
        let a = slot.get().map_or(0.0, |m| m.action(&input).unwrap_or(0.0));
        core.act(now, a);
        a
    };

    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut group = c.benchmark_group("mocc");
    group.bench_function("decision (observation + inference + rate update)", |b| {
        let mut core = core.clone();
        b.iter(|| black_box(decide(&mut core, Duration::from_secs(1))))
    });
    group.bench_function("cubic per report", |b| {
        let mut cc = cubic_policy.build(info);
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % cubic_reports.len();
            black_box(cc.on_report(black_box(&cubic_reports[i])))
        })
    });
    group.finish();
    c.final_summary();

    let decision_ns = {
        let mut core = core.clone();
        ns_per(20_000, |_| {
            black_box(decide(&mut core, Duration::from_secs(1)));
        })
    };
    let cubic_ns = {
        let mut cc = cubic_policy.build(info);
        ns_per(cubic_reports.len(), |i| {
            black_box(cc.on_report(&cubic_reports[i]));
        })
    };
    let mocc_report_ns = {
        let mut cc = mocc_policy.build(info);
        ns_per(mocc_reports.len(), |i| {
            black_box(cc.on_report(&mocc_reports[i]));
        })
    };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("\nmodel: {source}, {size} bytes ({})", if size <= MODEL_SIZE_TARGET_BYTES { "ok" } else { "MISSED" });
    println!("optimized plan: {plan_nodes} nodes, {} evaluated per decision: {}", plan_ops.len(), plan_ops.join(", "));
    println!(
        "load average (1 min) {} on {cpus} CPUs; wall = elapsed, cpu = this thread's CPU time (runs >= 100 ms only)",
        load_average()
    );
    println!("{:<36} {:>10} {:>10} {:>10} {:>8}", "what", "wall ns", "x cubic", "cpu ns", "target");
    let row = |what: &str, (wall, cpu): (f64, Option<f64>), target: &str| {
        let cpu_text = cpu.map_or("-".to_string(), |c| format!("{c:.1}"));
        println!("{what:<36} {wall:>10.1} {:>10.1} {cpu_text:>10} {target:>8}", wall / cubic_ns.0);
    };
    // The target is judged on wall time (what a flow waits for), which on a loaded machine is the
    // pessimistic figure; the CPU time is the cost on a core of its own.
    row(
        "mocc decision (incl. inference)",
        decision_ns,
        if decision_ns.0 <= DECISION_TARGET_NS { "ok" } else { "MISSED" },
    );
    row("mocc mean per report", mocc_report_ns, "-");
    row("cubic per report", cubic_ns, "-");
    // docs/testing.md's `make bench` table (`experiments/tables.py bench`; experiments/results_table.py).
    println!(
        "results-table bench 4\tMOCC decision (observation, inference, rate update); model file\t{:.1} us wall, {} CPU \
         ({:.0}x CUBIC's report) at load average {}; {} KB\t<= 20 us; <= 1 MB",
        decision_ns.0 / 1e3,
        decision_ns.1.map_or("-".to_string(), |c| format!("{:.1} us", c / 1e3)),
        decision_ns.0 / cubic_ns.0,
        load_average(),
        size / 1000
    );
}
