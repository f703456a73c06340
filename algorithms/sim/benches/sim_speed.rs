//! Simulator speed: simulated seconds per wall-clock second for one flow at 100 Mbit/s
//! (target >= 100x real time), and per-flow scaling. Criterion times each run; the closing table
//! prints the speed-up over real time and the cost relative to one CUBIC flow, same run.

use criterion::{black_box, Criterion};
use polycc_algorithms::{AlgorithmKind, Policy, Rate};
use polycc_sim::config::BufferSize;
use polycc_sim::{run, LinkConfig, SimConfig};
use std::time::{Duration, Instant};

fn config(kind: AlgorithmKind, flows: usize, secs: u64) -> SimConfig {
    let link = LinkConfig {
        bandwidth: Rate::from_mbps(100.0),
        rtt: Duration::from_millis(40),
        buffer: BufferSize::Bdp(1.0),
        ..LinkConfig::default()
    };
    SimConfig::staggered(link, &Policy::Single(kind.default_config()), flows, Duration::ZERO, Duration::from_secs(secs))
}

fn main() {
    let mut c = Criterion::default().configure_from_args().sample_size(10).measurement_time(Duration::from_secs(5));
    for kind in [AlgorithmKind::Cubic, AlgorithmKind::Bbr] {
        let cfg = config(kind, 1, 10);
        c.bench_function(&format!("sim_10s_100mbit_{kind}"), |b| b.iter(|| black_box(run(&cfg).summary.goodput_mbps)));
    }
    c.final_summary();

    println!("\n{:<26} {:>10} {:>14} {:>12}", "case", "wall s", "x real time", "x cubic/1");
    let measure = |cfg: &SimConfig| {
        let best = (0..3)
            .map(|_| {
                let t = Instant::now();
                black_box(run(cfg));
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        (best, cfg.duration.as_secs_f64() / best)
    };
    let (base, _) = measure(&config(AlgorithmKind::Cubic, 1, 60));
    let mut speeds = Vec::new();
    for (name, kind, flows) in [
        ("cubic, 1 flow", AlgorithmKind::Cubic, 1),
        ("bbr, 1 flow", AlgorithmKind::Bbr, 1),
        ("copa, 1 flow", AlgorithmKind::Copa, 1),
        ("cubic, 10 flows", AlgorithmKind::Cubic, 10),
    ] {
        let (wall, speed) = measure(&config(kind, flows, 60));
        println!(
            "{name:<26} {wall:>10.3} {speed:>14.0} {:>12.2}{}",
            wall / base,
            if speed >= 100.0 { "" } else { "  MISSED 100x" }
        );
        speeds.push(speed);
    }
    // docs/testing.md's `make bench` table (`experiments/tables.py bench`; experiments/results_table.py).
    println!(
        "results-table bench 1\tsimulator, 1 CUBIC flow at 100 Mbit/s, 60 s\t{:.0}x real time (BBR {:.0}x, Copa {:.0}x, \
         10 CUBIC flows {:.0}x)\t>= 100x",
        speeds[0], speeds[1], speeds[2], speeds[3]
    );
}
