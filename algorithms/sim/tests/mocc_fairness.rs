//! Two MOCC flows with the same preference on one bottleneck (issue 18's fairness row: Jain's
//! index >= 0.95). The model's rate update is multiplicative and its observation free of the rate,
//! so two flows that read the same queue keep the ratio of their rates: the share is settled by
//! what each flow takes as its path's base RTT. A base measured while the other flow's queue
//! stands reads that queue as the path (`mocc::STARTUP_BASE_NOISE_SDS`).

mod common;

use polycc_algorithms::Rate;
use polycc_sim::config::BufferSize;
use polycc_sim::{run, LinkConfig, SimConfig, Summary};
use std::time::Duration;

fn two_flows(weights: [f64; 3], mbps: f64, rtt_ms: u64, buffer_bdp: f64, stagger_s: u64) -> Summary {
    let policy = common::mocc(weights, &common::shipped_model());
    let link = LinkConfig {
        bandwidth: Rate::from_mbps(mbps),
        rtt: Duration::from_millis(rtt_ms),
        buffer: BufferSize::Bdp(buffer_bdp),
        ..LinkConfig::default()
    };
    let mut cfg = SimConfig::staggered(link, &policy, 2, Duration::from_secs(stagger_s), Duration::from_secs(60));
    cfg.seed = 1;
    run(&cfg).summary
}

fn shares(s: &Summary) -> Vec<f64> {
    s.flows.iter().map(|f| f.goodput_last_half_mbps).collect()
}

/// Started together, each flow's startup drained into the other's queue and measured its base
/// there: at 50 Mbit/s 30 ms one flow read a standing queue as the path and took 47.2 of 50
/// Mbit/s (Jain 0.56); bounded by the base its startup measured, 25 / 25 (1.00).
#[test]
fn two_throughput_flows_started_together_share_the_link() {
    let s = two_flows([0.8, 0.1, 0.1], 50.0, 30, 1.0, 0);
    assert!(s.jain_index >= 0.95, "Jain {:.3}, goodput of the last half {:?}", s.jain_index, shares(&s));
    assert!(s.utilization >= 0.95, "utilization {:.3}", s.utilization);
}

/// A latency-landmark flow 5 s after another: at 10 Mbit/s 100 ms with 2 BDP the newcomer read
/// the first flow's queue as its base and held 6.7 of 10 Mbit/s at a p95 RTT of 1.47 x the base
/// (Jain 0.89); now 5.5 / 4.5 (0.99) at 1.13 x. At 50 Mbit/s 30 ms 0.92 -> 0.99.
#[test]
fn a_later_latency_flow_does_not_read_the_first_ones_queue_as_its_path() {
    for (mbps, rtt_ms, buffer_bdp) in [(10.0, 100, 2.0), (50.0, 30, 1.0)] {
        let s = two_flows([0.1, 0.8, 0.1], mbps, rtt_ms, buffer_bdp, 5);
        let link = format!("{mbps} Mbit/s {rtt_ms} ms {buffer_bdp} BDP");
        assert!(s.jain_index >= 0.95, "{link}: Jain {:.3}, goodput of the last half {:?}", s.jain_index, shares(&s));
        let p95 = s.p95_rtt_ms.unwrap_or(f64::INFINITY);
        assert!(p95 <= 1.25 * rtt_ms as f64, "{link}: p95 RTT {p95:.1} ms");
    }
}
