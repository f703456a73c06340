//! Decision cost per report for each algorithm and for a 3-member fusion (target: < 1 us per
//! report per classic algorithm, < 3 us for the fusion). Criterion measures each; the closing
//! table prints ns/report and the ratio to Reno measured in the same run.

use criterion::{black_box, BenchmarkId, Criterion};
use polycc_algorithms::testing::FluidPath;
use polycc_algorithms::{AlgorithmKind, FlowInfo, FuseOn, FusionFn, FusionPolicy, Policy, Rate, Report};
use std::time::{Duration, Instant};

const MSS: u64 = 1448;

/// Realistic reports: a flow of `policy` on a 100 Mbit/s, 40 ms, 1 BDP fluid path.
fn reports_for(policy: &Policy, n: usize) -> Vec<Report> {
    let mut path = FluidPath::new(Rate::from_mbps(100.0), Duration::from_millis(40), 500_000, MSS);
    path.reports(&mut *policy.build(FlowInfo::with_mss(MSS)), n)
}

fn policies() -> Vec<(String, Policy)> {
    let mut v: Vec<(String, Policy)> =
        AlgorithmKind::classic().map(|k| (k.name().to_string(), Policy::Single(k.default_config()))).collect();
    v.push((
        "fused(bbr+cubic+copa)".into(),
        Policy::Fused(FusionPolicy {
            pilot: AlgorithmKind::Bbr.default_config(),
            copilots: vec![AlgorithmKind::Cubic.default_config(), AlgorithmKind::Copa.default_config()],
            fusion: FusionFn::Max,
            fuse_on: FuseOn::Cwnd,
        }),
    ));
    v
}

/// Nanoseconds per report over `reports`, replayed on a fresh instance (best of 5).
fn ns_per_report(policy: &Policy, reports: &[Report]) -> f64 {
    (0..5)
        .map(|_| {
            let mut cc = policy.build(FlowInfo::with_mss(MSS));
            let t = Instant::now();
            for r in reports {
                black_box(cc.on_report(black_box(r)));
            }
            t.elapsed().as_nanos() as f64 / reports.len() as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut group = c.benchmark_group("decision_per_report");
    for (name, policy) in policies() {
        let reports = reports_for(&policy, 1000);
        group.bench_with_input(BenchmarkId::from_parameter(&name), &reports, |b, reports| {
            let mut cc = policy.build(FlowInfo::with_mss(MSS));
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % reports.len();
                black_box(cc.on_report(black_box(&reports[i])))
            })
        });
    }
    group.finish();
    c.final_summary();

    println!("\n{:<24} {:>12} {:>10} {:>8}", "policy", "ns/report", "x reno", "target");
    let all = policies();
    let reno = ns_per_report(&all[0].1, &reports_for(&all[0].1, 100_000));
    let (mut singles, mut fused) = (Vec::new(), Vec::new());
    for (name, policy) in &all {
        let ns = ns_per_report(policy, &reports_for(policy, 100_000));
        let target = if name.starts_with("fused") { 3000.0 } else { 1000.0 };
        println!("{name:<24} {ns:>12.1} {:>10.2} {:>8}", ns / reno, if ns < target { "ok" } else { "MISSED" });
        if name.starts_with("fused") { &mut fused } else { &mut singles }.push((name.clone(), ns));
    }
    // docs/testing.md's `make bench` table (`experiments/tables.py bench`; experiments/results_table.py).
    let names: Vec<&str> = singles.iter().map(|(n, _)| n.as_str()).collect();
    let figures: Vec<String> = singles.iter().map(|(_, ns)| format!("{ns:.0}")).collect();
    println!("results-table bench 2\tdecision per report: {}\t{} ns\t< 1 us", names.join(" / "), figures.join(" / "));
    for (name, ns) in fused {
        println!("results-table bench 3\tdecision per report: {name}\t{ns:.0} ns ({:.0}x reno)\t< 3 us", ns / reno);
    }
}
