//! Property tests over every algorithm (PCC Allegro and Vivace included) and fused policies: random report sequences never panic,
//! keep the window at or above two packets and every rate finite and non-negative.

use polycc_algorithms::{AlgorithmKind, FlowInfo, FuseOn, FusionFn, FusionPolicy, Policy, Rate, Report, TargetCwnd};
use proptest::prelude::*;
use std::time::Duration;

const MSS: u64 = 1448;

fn arb_duration(max_us: u64) -> impl Strategy<Value = Duration> {
    prop_oneof![Just(Duration::ZERO), (0..max_us).prop_map(Duration::from_micros), Just(Duration::from_secs(3600))]
}

/// One report: sometimes sensible, sometimes hostile (zero intervals, huge counts, no RTT).
fn arb_report() -> impl Strategy<Value = (Duration, Report)> {
    (
        arb_duration(500_000),
        prop_oneof![Just(0u64), 0..10_000_000u64, Just(u64::MAX / 2)],
        prop_oneof![4 => Just(0u64), 1 => 0..100u64, 1 => Just(u64::MAX / 4)],
        any::<bool>(),
        proptest::option::of(arb_duration(2_000_000)),
        proptest::option::of(prop_oneof![Just(0.0), 0.0..1e10, Just(f64::MAX)]),
        0..50_000_000u64,
        arb_duration(300_000),
        proptest::option::of(arb_duration(1_000_000)),
    )
        .prop_map(|(step, acked, lost, timeout, rtt, rate, inflight, train, half)| {
            let samples = if rtt.is_some() { (acked / MSS).max(1) } else { 0 };
            (
                step,
                Report {
                    interval: step,
                    bytes_acked: acked,
                    packets_acked: acked / MSS,
                    packets_lost: lost,
                    timeout: timeout && lost > 50,
                    rtt_last: rtt,
                    rtt_min: rtt,
                    rtt_sum: rtt
                        .map_or(Duration::ZERO, |r| r.saturating_mul(u32::try_from(samples).unwrap_or(u32::MAX))),
                    rtt_samples: samples,
                    rtt_first_half_mean: rtt,
                    rtt_second_half_mean: half,
                    delivery_rate: rate.map(Rate::from_bytes_per_sec),
                    bytes_in_flight: inflight,
                    packets_in_flight: inflight / MSS,
                    ack_train: train,
                    ..Report::default()
                },
            )
        })
}

fn policies() -> Vec<Policy> {
    let mut v: Vec<Policy> = AlgorithmKind::classic().map(|k| Policy::Single(k.default_config())).collect();
    for (fusion, fuse_on) in [
        (FusionFn::Max, FuseOn::Cwnd),
        (FusionFn::Min, FuseOn::Rate),
        (FusionFn::Target(TargetCwnd::Bdp(1.0)), FuseOn::Cwnd),
        (FusionFn::Target(TargetCwnd::Bytes(100_000)), FuseOn::Rate),
    ] {
        v.push(Policy::Fused(FusionPolicy {
            pilot: AlgorithmKind::Bbr.default_config(),
            copilots: vec![
                AlgorithmKind::Cubic.default_config(),
                AlgorithmKind::Copa.default_config(),
                AlgorithmKind::Vegas.default_config(),
            ],
            fusion,
            fuse_on,
        }));
    }
    // PCC as pilot and as copilot, on rate and on cwnd.
    for (pilot, copilot, fusion, fuse_on) in [
        (AlgorithmKind::Vivace, AlgorithmKind::Copa, FusionFn::Min, FuseOn::Rate),
        (AlgorithmKind::Bbr, AlgorithmKind::Vivace, FusionFn::Max, FuseOn::Cwnd),
        (AlgorithmKind::Allegro, AlgorithmKind::Cubic, FusionFn::Max, FuseOn::Cwnd),
        (AlgorithmKind::Cubic, AlgorithmKind::Allegro, FusionFn::Min, FuseOn::Rate),
    ] {
        v.push(Policy::Fused(FusionPolicy {
            pilot: pilot.default_config(),
            copilots: vec![copilot.default_config()],
            fusion,
            fuse_on,
        }));
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_reports_never_panic_and_keep_cwnd_and_rate_sane(reports in proptest::collection::vec(arb_report(), 1..120)) {
        for policy in policies() {
            let mut cc = policy.build(FlowInfo::with_mss(MSS));
            let mut now = Duration::ZERO;
            for (step, r) in &reports {
                now = now.saturating_add(*step);
                let r = Report { now, ..r.clone() };
                let d = cc.on_report(&r);
                prop_assert!(d.cwnd_bytes >= 2 * MSS, "{}: cwnd {} below 2 packets after {:?}", policy.describe(), d.cwnd_bytes, r);
                if let Some(rate) = d.rate {
                    prop_assert!(rate.bytes_per_sec().is_finite() && rate.bytes_per_sec() >= 0.0, "{}: rate {:?}", policy.describe(), rate);
                }
                prop_assert_eq!(cc.decision(), d);
            }
        }
    }
}
