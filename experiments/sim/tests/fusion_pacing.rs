//! Issue 7's guest defect, reproduced on the simulator: under PolyCC scenario 1's ACK aggregation
//! (20 Mbit/s, RTT 100 ms +/- 70 ms on the ACK path, one-BDP buffer) BBR's Startup can stall at a
//! few Mbit/s while the CUBIC copilot's window grows. Before the fix, `max` on cwnd installed
//! CUBIC's window with BBR's pacing rate, so the fused flow delivered no more than BBR's estimate
//! and the estimate never rose: seeds 2, 5, 6 and 10 of these 15 s runs (the guest's quick
//! length) spent 13-39 % of their reports paced below 10 Mbit/s and reached 11.8-15.1 Mbit/s.
//! Now the pilot's rate is scaled with the window (`fusion.rs`, `calibrated_rate`): all ten
//! seeds reach 16.2-18.9 Mbit/s, at most 3 % of reports below 10 Mbit/s.

use polycc_algorithms::{AlgorithmKind, FuseOn, FusionFn, FusionPolicy, Policy, Rate};
use polycc_sim::config::BufferSize;
use polycc_sim::{run, LinkConfig, SimConfig};
use std::time::Duration;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=10;

fn scenario1(dev_ms: u64) -> LinkConfig {
    LinkConfig {
        bandwidth: Rate::from_mbps(20.0),
        rtt: Duration::from_millis(100),
        rtt_dev: Duration::from_millis(dev_ms),
        buffer: BufferSize::Bdp(1.0),
        ..LinkConfig::default()
    }
}

fn fused_bbr_cubic() -> Policy {
    Policy::Fused(FusionPolicy {
        pilot: AlgorithmKind::Bbr.default_config(),
        copilots: vec![AlgorithmKind::Cubic.default_config()],
        fusion: FusionFn::Max,
        fuse_on: FuseOn::Cwnd,
    })
}

/// (goodput in Mbit/s, share of the reports after the first 2 s paced below `floor_mbps`).
fn run_seed(dev_ms: u64, seed: u64, floor_mbps: f64) -> (f64, f64) {
    let mut cfg =
        SimConfig::staggered(scenario1(dev_ms), &fused_bbr_cubic(), 1, Duration::ZERO, Duration::from_secs(15));
    cfg.seed = seed;
    cfg.record_series = true;
    let result = run(&cfg);
    let after: Vec<_> = result.series.iter().filter(|r| r.time_s > 2.0).collect();
    let sunk = after.iter().filter(|r| r.rate_mbps.is_some_and(|m| m < floor_mbps)).count();
    (result.summary.goodput_mbps, sunk as f64 / after.len().max(1) as f64)
}

#[test]
fn fused_max_cwnd_pacing_does_not_sink_under_ack_aggregation() {
    let runs: Vec<(u64, f64, f64)> = SEEDS
        .map(|seed| {
            let (goodput, sunk) = run_seed(70, seed, 10.0);
            (seed, goodput, sunk)
        })
        .collect();
    for &(seed, goodput, sunk) in &runs {
        assert!(sunk <= 0.05, "seed {seed}: {:.0} % of reports paced below 10 Mbit/s ({runs:.2?})", 100.0 * sunk);
        // 15.4-19.0 since the loss guard (fusion.rs, issue 21: an srtt of the smallest window after
        // each loss), 16.2-18.9 before; the sink itself is what `sunk` catches.
        assert!(goodput >= 15.0, "seed {seed}: fused goodput {goodput:.2} Mbit/s < 15 ({runs:.2?})");
    }
}

/// At +/-100 ms the shortest RTT is ~0 and BBR's estimate sinks further; the calibrated rate
/// keeps the fused flow at 7.7-13.6 Mbit/s, mean 10.7 (before the fix: 3.4-13.8 over seeds 1-5,
/// mean 9.0). With per-ACK slow start in the sender (ack_growth, issue 15) the worst seed went
/// from 9.5 to 7.7 and the mean from 11.4 to 10.7, while +/-70 ms improved (worst 16.2 -> 17.0):
/// CUBIC's HyStart leaves slow start at 37 packets under this jitter, and the flow then runs at
/// BBR's sunk pacing rate scaled by the window ratio, seed by seed a different trajectory.
#[test]
fn fused_max_cwnd_keeps_most_of_the_link_at_the_largest_deviation() {
    let goodputs: Vec<f64> = SEEDS.map(|seed| run_seed(100, seed, 10.0).0).collect();
    let mean = goodputs.iter().sum::<f64>() / goodputs.len() as f64;
    let worst = goodputs.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(mean >= 10.5, "mean fused goodput {mean:.2} Mbit/s < 10.5 ({goodputs:.2?})");
    assert!(worst >= 7.5, "worst seed {worst:.2} Mbit/s < 7.5 ({goodputs:.2?})");
}
