//! The shipped MOCC model on paths whose RTT is noisy without a queue: a millisecond of ACK
//! jitter, as a host's scheduling or the QEMU guest adds (1-4 ms there), must not read as a
//! standing queue (`polycc_algorithms::mocc::RTT_BASE_NOISE_SDS`).

mod common;

use common::mocc;
use polycc_algorithms::{Policy, Rate};
use polycc_sim::config::BufferSize;
use polycc_sim::{run, LinkConfig, SimConfig};
use std::time::Duration;

fn utilization(policy: &Policy, rtt_dev: Duration, seed: u64) -> f64 {
    let link = LinkConfig {
        bandwidth: Rate::from_mbps(20.0),
        rtt: Duration::from_millis(40),
        buffer: BufferSize::Bdp(1.0),
        rtt_dev,
        ..LinkConfig::default()
    };
    let mut cfg = SimConfig::staggered(link, policy, 1, Duration::ZERO, Duration::from_secs(30));
    cfg.seed = seed;
    run(&cfg).summary.utilization
}

/// The demo link (20 Mbit/s, 40 ms, 1 BDP) with +/-1 ms of ACK jitter: before the latency
/// ratio's base allowed for the RTT samples' noise, the latency landmark ran at 0.090-0.099 of
/// the link on seeds 1-3 (0.470 without the jitter) and the throughput landmark at 0.931-0.946;
/// after, 0.351-0.475 and 0.951-0.957.
#[test]
fn a_millisecond_of_rtt_noise_does_not_read_as_a_queue() {
    let slot = common::shipped_model();
    let latency = mocc([0.1, 0.8, 0.1], &slot);
    let throughput = mocc([0.8, 0.1, 0.1], &slot);
    let clean = utilization(&latency, Duration::ZERO, 1);
    for seed in 1..=3 {
        let noisy = utilization(&latency, Duration::from_millis(1), seed);
        let thr = utilization(&throughput, Duration::from_millis(1), seed);
        println!("seed {seed}: latency landmark {noisy:.3} (no jitter {clean:.3}), throughput landmark {thr:.3}");
        assert!(
            noisy >= 0.6 * clean,
            "seed {seed}: the latency landmark under +/-1 ms of RTT noise ran {noisy:.3} of the link, \
             under 0.6 x its {clean:.3} without"
        );
        assert!(thr >= 0.948, "seed {seed}: the throughput landmark under +/-1 ms of RTT noise ran {thr:.3}");
    }
}
