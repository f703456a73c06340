//! Two MOCC flows with the same preference on one bottleneck (issue 18's fairness row: Jain's
//! index >= 0.95). The model's rate update is multiplicative and its observation free of the rate,
//! so two flows that read the same queue keep the ratio of their rates: the share is settled by
//! what each flow takes as its path's base RTT. A base measured while the other flow's queue
//! stands reads that queue as the path (`mocc::STARTUP_BASE_NOISE_SDS`). A flow that starts in the
//! other's standing queue keeps the split its startup left, unless something outside the model
//! pulls the rates together: the share probe (`mocc::share`).

mod common;

use polycc_algorithms::Rate;
use polycc_sim::config::BufferSize;
use polycc_sim::{run, LinkConfig, SimConfig, Summary};
use std::time::Duration;

fn two_flows(weights: [f64; 3], mbps: f64, rtt_ms: u64, buffer_bdp: f64, stagger_s: u64) -> Summary {
    flows(2, weights, mbps, rtt_ms, buffer_bdp, stagger_s, true)
}

fn flows(n: usize, weights: [f64; 3], mbps: f64, rtt_ms: u64, buffer_bdp: f64, stagger_s: u64, share: bool) -> Summary {
    let policy = common::mocc_sharing(weights, &common::shipped_model(), share);
    let link = LinkConfig {
        bandwidth: Rate::from_mbps(mbps),
        rtt: Duration::from_millis(rtt_ms),
        buffer: BufferSize::Bdp(buffer_bdp),
        ..LinkConfig::default()
    };
    let mut cfg = SimConfig::staggered(link, &policy, n, Duration::from_secs(stagger_s), Duration::from_secs(60));
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

/// A throughput-landmark flow 5 s after another: its startup began in the first flow's standing
/// queue, and the model's rate-free observation kept the split that left, 0.7 : 19.3 of 20 Mbit/s
/// (Jain 0.54) and 4.2 : 45.8 of 50 (0.59). Each flow's share, measured from its dither, nudges
/// the rates together: 0.989 and 0.998, at a p95 RTT of 60 and 41 ms against 68 and 45 unshared.
/// Off by default: in the guest the probe does not read the share yet (docs/mocc.md).
#[test]
fn a_later_throughput_flow_and_the_first_converge_to_equal_shares() {
    for (mbps, rtt_ms) in [(20.0, 40), (50.0, 30)] {
        let on = flows(2, [0.8, 0.1, 0.1], mbps, rtt_ms, 1.0, 5, true);
        let off = flows(2, [0.8, 0.1, 0.1], mbps, rtt_ms, 1.0, 5, false);
        let link = format!("{mbps} Mbit/s {rtt_ms} ms");
        assert!(off.jain_index < 0.7, "{link}: without the share probe Jain {:.3} {:?}", off.jain_index, shares(&off));
        assert!(on.jain_index >= 0.95, "{link}: Jain {:.3}, goodput of the last half {:?}", on.jain_index, shares(&on));
        let (p95_on, p95_off) = (on.p95_rtt_ms.unwrap_or(f64::INFINITY), off.p95_rtt_ms.unwrap_or(0.0));
        assert!(p95_on <= P95_COST * p95_off, "{link}: p95 RTT {p95_on:.1} ms against {p95_off:.1} ms unshared");
        assert!(on.utilization >= 0.95, "{link}: utilization {:.3}", on.utilization);
    }
}

/// Three throughput-landmark flows 5 s apart at 50 Mbit/s 30 ms: 2.6 : 14.4 : 33.1 Mbit/s without
/// the share probe (Jain 0.64), 17.2 : 17.0 : 15.8 with it (0.999).
#[test]
fn three_throughput_flows_share_the_link() {
    let on = flows(3, [0.8, 0.1, 0.1], 50.0, 30, 1.0, 5, true);
    let off = flows(3, [0.8, 0.1, 0.1], 50.0, 30, 1.0, 5, false);
    assert!(off.jain_index < 0.8, "without the share probe Jain {:.3} {:?}", off.jain_index, shares(&off));
    assert!(on.jain_index >= 0.95, "Jain {:.3}, goodput of the last half {:?}", on.jain_index, shares(&on));
}

/// A flow alone: the probe reads it alone behind its own queue (throughput landmark) and leaves
/// it there, or at the knee of its path (latency landmark), where its cost is what the dither and
/// the nudge toward e = 1/2 add (20 Mbit/s 40 ms: utilization 0.991 -> 0.984 and 0.994 -> 0.961,
/// p95 RTT 48.7 -> 50.3 and 41.0 -> 43.6 ms).
#[test]
fn a_flow_alone_keeps_its_utilization_at_a_bounded_delay_cost() {
    for (weights, min_util) in [([0.8, 0.1, 0.1], 0.97), ([0.1, 0.8, 0.1], 0.93)] {
        let on = flows(1, weights, 20.0, 40, 1.0, 0, true);
        let off = flows(1, weights, 20.0, 40, 1.0, 0, false);
        let (p95_on, p95_off) = (on.p95_rtt_ms.unwrap_or(f64::INFINITY), off.p95_rtt_ms.unwrap_or(0.0));
        assert!(
            on.utilization >= min_util,
            "{weights:?}: utilization {:.3} (unshared {:.3})",
            on.utilization,
            off.utilization
        );
        assert!(p95_on <= P95_COST * p95_off, "{weights:?}: p95 RTT {p95_on:.1} ms against {p95_off:.1} ms unshared");
    }
}

/// What the share probe may add to the p95 RTT, relative to the model's rates alone.
const P95_COST: f64 = 1.25;
