//! Tests of [`super`].

use super::*;
use crate::testing::{ack_report, loss_report, FluidPath};

const MSS: u64 = 1448;
const RTT: Duration = Duration::from_millis(40);

fn info() -> FlowInfo {
    FlowInfo::with_mss(MSS)
}

fn bbr() -> Bbr {
    BbrConfig::default().build(info())
}

/// 20 Mbit/s, 40 ms: a BDP of 100 kB (69 packets); the buffer is `buffer_bdp` BDPs.
fn path(buffer_bdp: u64) -> FluidPath {
    let bw = Rate::from_mbps(20.0);
    FluidPath::new(bw, RTT, buffer_bdp * bytes_from_f64(bw.bytes_over(RTT)), MSS)
}

const BW_MBPS: f64 = 20.0;

fn bdp_bytes() -> u64 {
    bytes_from_f64(Rate::from_mbps(BW_MBPS).bytes_over(RTT))
}

/// What one report did, for assertions over a run.
struct Step {
    report: Report,
    decision: Decision,
    mode: &'static str,
    phase: Option<usize>,
    bw: Rate,
    queue_bytes: u64,
}

/// Drive `b` on `p` one report per RTT until `until`.
fn run(p: &mut FluidPath, b: &mut Bbr, until: Duration) -> Vec<Step> {
    let mut d = b.decision();
    let mut steps = Vec::new();
    while p.now() < until {
        let report = p.step(d);
        d = b.on_report(&report);
        let phase = match b.mode {
            Mode::ProbeBw { phase, .. } => Some(phase),
            _ => None,
        };
        steps.push(Step {
            report,
            decision: d,
            mode: b.mode_name(),
            phase,
            bw: b.bw.get(),
            queue_bytes: p.queue_bytes(),
        });
    }
    steps
}

/// A report of `bytes` acked smoothly over one RTT ending at `now`, one BDP... in flight.
fn smooth(now: Duration, bytes: u64) -> Report {
    Report { ack_train: RTT, bytes_in_flight: bytes, ..ack_report(now, RTT, bytes, MSS) }
}

/// A flow that has settled in ProbeBw on a steady 20 Mbit/s, 40 ms ACK clock (reports built
/// by hand, so the aggregation tests control exactly how ACKs arrive), and the time reached.
fn settled(cfg: &BbrConfig) -> (Bbr, Duration) {
    let mut b = cfg.build(info());
    let mut now = Duration::ZERO;
    for _ in 0..30 {
        now += RTT;
        b.on_report(&smooth(now, bdp_bytes()));
    }
    assert_eq!(b.mode_name(), "probe_bw");
    (b, now)
}

/// ACKs for `gap` of data at the path's rate, held and released together at `now`.
fn burst(now: Duration, gap: Duration) -> Report {
    let bytes = bytes_from_f64(Rate::from_mbps(BW_MBPS).bytes_over(gap));
    Report {
        interval: gap,
        ack_train: Duration::ZERO,
        delivery_rate: Some(Rate::from_mbps(BW_MBPS)),
        bytes_in_flight: bdp_bytes(),
        ..ack_report(now, RTT, bytes, MSS)
    }
}

#[test]
fn startup_doubles_the_delivery_rate_each_round_and_exits_three_rounds_after_bw_stops_growing() {
    let mut p = path(4);
    let mut b = bbr();
    let steps = run(&mut p, &mut b, Duration::from_secs(1));
    let drain_at = steps.iter().position(|s| s.mode == "drain").expect("reaches Drain");
    // Before the pipe fills, cwnd += acked doubles what is delivered every round; pacing
    // runs 2.885x ahead of the bw estimate so it never holds the doubling back.
    let filling: Vec<&Step> = steps.iter().take_while(|s| s.report.bytes_in_flight < bdp_bytes()).collect();
    assert!(filling.len() >= 3, "{} rounds below one BDP", filling.len());
    for w in filling.windows(2) {
        let growth = w[1].report.bytes_acked as f64 / w[0].report.bytes_acked as f64;
        assert!((1.9..=HIGH_GAIN).contains(&growth), "delivery grew {growth}x in a round");
        let pacing_gain = w[1].decision.rate.unwrap().bytes_per_sec() / w[1].bw.bytes_per_sec();
        assert!((pacing_gain - HIGH_GAIN * 0.99).abs() < 1e-6, "startup pacing gain {pacing_gain}");
    }
    // The round where bw last grew by 25 % is followed by exactly three that do not.
    let last_growth = steps.iter().position(|s| s.bw.mbps() >= 0.99 * BW_MBPS).unwrap();
    assert_eq!(drain_at - last_growth, FULL_BW_ROUNDS as usize, "drain at report {drain_at}");
    assert!(steps[..drain_at].iter().all(|s| s.mode == "startup"));
}

/// Startup on a flat delivery rate, one report per RTT; `undo_at`: the report (0-based) that
/// carries an undo. The mode after each report.
fn startup_on_a_plateau(undo_at: Option<usize>) -> Vec<&'static str> {
    let mut b = bbr();
    (1..=8)
        .map(|i| {
            let r = smooth(RTT * i, bdp_bytes() / 2);
            b.on_report(&Report { undo: undo_at == Some(i as usize - 1), ..r });
            b.mode_name()
        })
        .collect()
}

#[test]
fn an_undo_restarts_startups_count_of_rounds_without_growth() {
    // bw stops growing at the first sample: Drain after three rounds without growth.
    // (Drain ends in the same report here: what is in flight is under one BDP.)
    let plain = startup_on_a_plateau(None);
    let drain = plain.iter().position(|&m| m != "startup").expect("the pipe fills");
    // The same plateau, but the stack found the losses of its second round spurious: the
    // slow-down was reordering, not a full pipe, and the count starts over there.
    let undone = startup_on_a_plateau(Some(drain - 1));
    assert_eq!(undone[drain], "startup", "{plain:?} vs {undone:?}");
    let later = undone.iter().position(|&m| m != "startup").expect("still fills, later");
    assert_eq!(later, drain - 1 + FULL_BW_ROUNDS as usize, "{undone:?}");
}

#[test]
fn drain_empties_the_startup_queue_and_leaves_about_one_bdp_in_flight() {
    let mut p = path(4);
    let mut b = bbr();
    let steps = run(&mut p, &mut b, Duration::from_secs(3));
    let drain_at = steps.iter().position(|s| s.mode == "drain").unwrap();
    let peak_queue = steps[..=drain_at].iter().map(|s| s.queue_bytes).max().unwrap();
    assert!(peak_queue > bdp_bytes(), "startup queued {peak_queue} bytes");
    let probe_at = steps.iter().position(|s| s.mode == "probe_bw").unwrap();
    assert!(probe_at - drain_at <= 3, "drain took {} rounds", probe_at - drain_at);
    assert!(steps[probe_at].queue_bytes <= bdp_bytes() / 20, "queue {} after drain", steps[probe_at].queue_bytes);
    // From then on inflight stays near one BDP: 1.25 probes and their queue come and go.
    let later = &steps[probe_at + 1..];
    let mean_inflight = later.iter().map(|s| s.report.bytes_in_flight as f64).sum::<f64>() / later.len() as f64;
    let ratio = mean_inflight / bdp_bytes() as f64;
    assert!((0.95..=1.2).contains(&ratio), "mean inflight {ratio} BDP");
    let mean_queue = later.iter().map(|s| s.queue_bytes as f64).sum::<f64>() / later.len() as f64;
    assert!(mean_queue <= 0.2 * bdp_bytes() as f64, "mean queue {mean_queue} bytes");
}

#[test]
fn probe_bw_visits_the_up_and_down_phases_exactly_once_per_cycle() {
    let mut p = path(4);
    let mut b = bbr();
    let steps = run(&mut p, &mut b, Duration::from_secs(9));
    let mut visited: Vec<usize> = Vec::new();
    for s in &steps {
        if let Some(phase) = s.phase {
            if visited.last() != Some(&phase) {
                visited.push(phase);
            }
            let gain = s.decision.rate.unwrap().bytes_per_sec() / s.bw.bytes_per_sec();
            assert!((gain - PACING_GAIN_CYCLE[phase] * 0.99).abs() < 1e-6, "phase {phase} paces at {gain}");
        }
    }
    assert!(visited.len() > 3 * CYCLE_LEN, "only {} phases", visited.len());
    for w in visited.windows(2) {
        assert_eq!(w[1], (w[0] + 1) % CYCLE_LEN, "phases out of order: {visited:?}");
    }
    for cycle in visited.windows(CYCLE_LEN) {
        assert_eq!(cycle.iter().filter(|&&p| p == PROBE_UP_PHASE).count(), 1);
        assert_eq!(cycle.iter().filter(|&&p| p == PROBE_DOWN_PHASE).count(), 1);
    }
}

#[test]
fn probe_bw_starts_at_a_seeded_random_phase_but_never_the_drain_phase() {
    let mut counts = [0u32; CYCLE_LEN];
    for seed in 0..7000 {
        let mut b = BbrConfig { seed, ..BbrConfig::default() }.build(info());
        b.mode = Mode::Drain { entered_round: 0 };
        b.reset_probe_bw_mode(Duration::ZERO);
        let Mode::ProbeBw { phase, .. } = b.mode else { unreachable!() };
        counts[phase] += 1;
    }
    assert_eq!(counts[PROBE_DOWN_PHASE], 0);
    for (phase, n) in counts.iter().enumerate().filter(|(p, _)| *p != PROBE_DOWN_PHASE) {
        assert!((900..1100).contains(n), "phase {phase} drawn {n} times in 7000");
    }
    // The same seed, the same phase.
    let phase_of = |seed| {
        let mut b = BbrConfig { seed, ..BbrConfig::default() }.build(info());
        b.mode = Mode::Drain { entered_round: 0 };
        b.reset_probe_bw_mode(Duration::ZERO);
        b.mode
    };
    assert_eq!(phase_of(42), phase_of(42));
}

#[test]
fn probe_rtt_after_ten_seconds_without_a_lower_rtt_holds_four_packets_for_200_ms() {
    let mut p = path(4);
    let mut b = bbr();
    let steps = run(&mut p, &mut b, Duration::from_secs(12));
    let enter = steps.iter().position(|s| s.mode == "probe_rtt").expect("enters ProbeRtt");
    let leave = enter + steps[enter..].iter().position(|s| s.mode != "probe_rtt").unwrap();
    // min_rtt (40 ms) was last set by the first report at 40 ms.
    let entered_at = steps[enter].report.now.as_secs_f64();
    assert!((10.04..10.2).contains(&entered_at), "ProbeRtt at {entered_at} s");
    assert!(steps[enter..leave].iter().all(|s| s.decision.cwnd_bytes == MIN_CWND_PACKETS * MSS));
    let held = steps[leave].report.now - steps[enter].report.now;
    assert!(held >= Duration::from_millis(PROBE_RTT_MS), "held 4 packets for {held:?}");
    assert!(held <= Duration::from_millis(PROBE_RTT_MS) + 4 * RTT, "held 4 packets for {held:?}");
    assert_eq!(steps[leave].mode, "probe_bw");
    assert!(
        steps[leave].decision.cwnd_bytes >= 2 * bdp_bytes(),
        "cwnd restored: {}",
        steps[leave].decision.cwnd_bytes
    );
    // The next ProbeRtt is a full window later.
    assert!(steps[leave..].iter().all(|s| s.mode != "probe_rtt"));
}

#[test]
fn probe_rtt_returns_to_startup_when_the_pipe_was_never_full() {
    let mut b = bbr();
    let mut now = Duration::ZERO;
    // App-limited samples never count towards a full pipe.
    while b.mode_name() != "probe_rtt" {
        now += RTT;
        b.on_report(&Report { app_limited: true, ..smooth(now, 10 * MSS) });
        assert!(now < Duration::from_secs(11));
    }
    assert_eq!(b.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
    while b.mode_name() == "probe_rtt" {
        now += RTT;
        b.on_report(&Report { app_limited: true, ..smooth(now, 4 * MSS) });
    }
    assert_eq!(b.mode_name(), "startup");
}

#[test]
fn bw_filter_forgets_a_higher_rate_after_ten_rounds() {
    let mut p = path(4);
    let mut b = bbr();
    run(&mut p, &mut b, Duration::from_secs(3));
    assert!((b.bw.get().mbps() - BW_MBPS).abs() < 0.01);
    p.bandwidth = Rate::from_mbps(BW_MBPS / 2.0);
    let rounds_before = b.round_count;
    let steps = run(&mut p, &mut b, Duration::from_secs(5));
    let forgot = steps.iter().position(|s| s.bw.mbps() <= BW_MBPS / 2.0 * 1.01).expect("estimate falls") + 1;
    assert!((10..=12).contains(&forgot), "bw estimate fell after {forgot} reports");
    assert_eq!(b.round_count - rounds_before, steps.len() as u64, "one round per report");
}

#[test]
fn app_limited_samples_only_raise_the_bw_estimate() {
    let mut b = bbr();
    b.on_report(&smooth(RTT, 50 * MSS));
    let bw = b.bw.get();
    b.on_report(&Report { app_limited: true, ..smooth(RTT * 2, 10 * MSS) });
    assert_eq!(b.bw.get(), bw);
    b.on_report(&Report { app_limited: true, ..smooth(RTT * 3, 100 * MSS) });
    assert_eq!(b.bw.get(), bw * 2.0);
}

#[test]
fn a_round_lasts_one_rtt_however_often_reports_come() {
    let mut b = bbr();
    let tick = Duration::from_millis(10);
    for i in 1..=40u32 {
        b.on_report(&Report { interval: tick, ..ack_report(tick * i, RTT, 5 * MSS, MSS) });
    }
    assert_eq!(b.round_count, 10, "400 ms of reports at a 40 ms RTT");
    // A loss-only report ends no round.
    b.on_report(&loss_report(Duration::from_secs(1), 3));
    assert_eq!(b.round_count, 10);
}

/// Drain ends at one BDP in flight, or after DRAIN_MAX_ROUNDS when something else (a fused
/// copilot's window, a min_rtt far below the RTT) keeps inflight above it.
#[test]
fn drain_ends_after_three_rounds_while_inflight_is_held_above_one_bdp() {
    let (mut b, mut now) = settled(&BbrConfig::default());
    b.mode = Mode::Drain { entered_round: b.round_count };
    let mut rounds = 0;
    while b.mode_name() == "drain" {
        now += RTT;
        b.on_report(&Report { bytes_in_flight: 5 * bdp_bytes(), ..smooth(now, bdp_bytes()) });
        rounds += 1;
        assert!(rounds <= DRAIN_MAX_ROUNDS, "still draining after {rounds} rounds");
    }
    assert_eq!((rounds, b.mode_name()), (DRAIN_MAX_ROUNDS, "probe_bw"));
    // One BDP in flight ends it at once, as in Linux.
    b.mode = Mode::Drain { entered_round: b.round_count };
    now += RTT;
    b.on_report(&smooth(now, bdp_bytes()));
    assert_eq!(b.mode_name(), "probe_bw");
}

#[test]
fn smooth_acks_add_no_aggregation_term() {
    let (b, _) = settled(&BbrConfig::default());
    assert_eq!(b.extra_acked_bytes(), 0);
    // 2 BDP + 3 packets, rounded up to an even packet count (+2 packets in the 1.25 phase).
    let cwnd = b.decision().cwnd_bytes;
    let target = (2 * bdp_bytes() + 3 * MSS).div_ceil(2 * MSS) * 2 * MSS;
    assert!(cwnd == target || cwnd == target + 2 * MSS, "cwnd {cwnd}, target {target}");
}

#[test]
fn extra_acked_grows_the_cwnd_when_acks_arrive_in_bursts() {
    let (mut b, mut now) = settled(&BbrConfig::default());
    let before = b.decision().cwnd_bytes;
    // ACKs held for 80 ms and released together: each burst acks 80 ms of data at once,
    // where the bw estimate expects ~0 at the instant of arrival.
    let gap = Duration::from_millis(80);
    for _ in 0..6 {
        now += gap;
        b.on_report(&burst(now, gap));
    }
    let burst_bytes = bytes_from_f64(Rate::from_mbps(BW_MBPS).bytes_over(gap));
    assert!(
        b.extra_acked_bytes().abs_diff(burst_bytes) <= MSS,
        "extra_acked {} vs burst {burst_bytes}",
        b.extra_acked_bytes()
    );
    let after = b.decision().cwnd_bytes;
    assert!(after.abs_diff(before + burst_bytes) <= 3 * MSS, "cwnd {before} -> {after}, burst {burst_bytes}");
    // A report that acks far more than bw * interval counts the excess too, even spread out
    // (its delivery-rate sample is the send rate, as Linux takes the longer of the two).
    let (mut b, now) = settled(&BbrConfig::default());
    let excess = 40 * MSS;
    b.on_report(&Report {
        delivery_rate: Some(Rate::from_mbps(BW_MBPS)),
        ..smooth(now + RTT, bdp_bytes() + excess)
    });
    assert!(b.extra_acked_bytes().abs_diff(excess) <= MSS, "extra_acked {}", b.extra_acked_bytes());
}

#[test]
fn extra_acked_is_capped_at_100_ms_of_bw_and_ages_out() {
    let (mut b, mut now) = settled(&BbrConfig::default());
    let gap = Duration::from_millis(300);
    for _ in 0..4 {
        now += gap;
        b.on_report(&burst(now, gap));
    }
    let cap = bytes_from_f64(b.bw.get().bytes_over(Duration::from_millis(EXTRA_ACKED_MAX_MS)));
    assert_eq!(b.extra_acked_bytes(), cap);
    let target = (2 * bdp_bytes() + cap + 3 * MSS).div_ceil(2 * MSS) * 2 * MSS;
    let cwnd = b.decision().cwnd_bytes;
    assert!(cwnd == target || cwnd == target + 2 * MSS, "cwnd {cwnd}, target {target}");
    // An ACK clock at exactly bw carries a burst's excess along (as in Linux): the epoch
    // restarts only once ACKs fall behind bw * epoch, here after a gap as long as the last
    // one. Then smooth ACKs let the term age out of both 5-round buckets.
    now += gap + RTT;
    b.on_report(&Report { interval: gap + RTT, ..smooth(now, bdp_bytes()) });
    for _ in 0..2 * EXTRA_ACKED_BUCKET_ROUNDS {
        now += RTT;
        b.on_report(&smooth(now, bdp_bytes()));
    }
    assert_eq!(b.extra_acked_bytes(), 0);
}

#[test]
fn sparse_acks_without_a_train_are_not_taken_for_a_burst() {
    // Regression: with ACKs more than 2 ms apart every ACK is its own train (ack_train = 0),
    // which the first version read as one burst per report. Three flows sharing 20 Mbit/s
    // then each added ~1 BDP of extra_acked, doubled the queue and lost 2 % of packets.
    let (mut b, mut now) = settled(&BbrConfig::default());
    for _ in 0..2 * EXTRA_ACKED_BUCKET_ROUNDS {
        now += RTT;
        // 10 packets per 40 ms: 4 ms apart, a smooth but sparse ACK clock.
        b.on_report(&Report {
            ack_train: Duration::ZERO,
            delivery_rate: Some(Rate::from_mbps(BW_MBPS)),
            ..smooth(now, 10 * MSS)
        });
    }
    assert_eq!(b.extra_acked_bytes(), 0);
}

#[test]
fn extra_acked_off_keeps_the_cwnd_at_two_bdp_through_bursts() {
    let cfg = BbrConfig { extra_acked: false, ..BbrConfig::default() };
    let (mut b, mut now) = settled(&cfg);
    for _ in 0..6 {
        now += Duration::from_millis(80);
        b.on_report(&burst(now, Duration::from_millis(80)));
    }
    assert_eq!(b.extra_acked_bytes(), 0);
    assert!(b.decision().cwnd_bytes <= 2 * bdp_bytes() + 6 * MSS);
}

#[test]
fn trajectory_on_a_fluid_path_in_packets() {
    let mut p = path(4);
    let mut b = bbr();
    let mut d = b.decision();
    let mut cwnd_packets = Vec::new();
    for _ in 0..30 {
        d = b.on_report(&p.step(d));
        cwnd_packets.push(d.cwnd_bytes / MSS);
    }
    // Startup doubles up to its 2.885 BDP target (204 packets; it grew a report's delivery past
    // it, to 229, until 2026-11-27), Drain holds 2.885 BDP (+ the startup-era aggregation term),
    // ProbeBw settles at 2 BDP + 3 packets (144 in the 1.25 phase).
    assert_eq!(
        cwnd_packets,
        [
            20, 40, 80, 149, 204, 204, 220, 158, 158, 142, 142, 142, 142, 144, 144, 142, 142, 142, 142, 142, 142,
            142, 144, 144, 142, 142, 142, 142, 142, 142
        ]
    );
}

#[test]
fn fills_a_deep_buffered_fluid_path_at_low_delay() {
    let mut p = path(4);
    let mut b = bbr();
    let warmup = Duration::from_secs(1);
    let steps = run(&mut p, &mut b, Duration::from_secs(30));
    let measured: Vec<&Step> = steps.iter().filter(|s| s.report.now > warmup).collect();
    let elapsed = measured.iter().map(|s| s.report.interval).sum::<Duration>();
    let acked: u64 = measured.iter().map(|s| s.report.bytes_acked).sum();
    let utilization = acked as f64 / Rate::from_mbps(BW_MBPS).bytes_over(elapsed);
    // Time-weighted mean RTT: each report spans one RTT.
    let mean_rtt =
        measured.iter().map(|s| s.report.interval.as_secs_f64().powi(2)).sum::<f64>() / elapsed.as_secs_f64();
    let lost: u64 = measured.iter().map(|s| s.report.packets_lost).sum();
    assert!(utilization >= 0.9, "utilization {utilization}");
    assert!(mean_rtt <= 1.3 * RTT.as_secs_f64(), "mean RTT {mean_rtt} s");
    assert_eq!(lost, 0);
}

#[test]
fn loss_only_empty_and_timeout_reports_never_panic_and_keep_four_packets() {
    let mut b = bbr();
    let hostile = [
        Report::default(),
        loss_report(Duration::ZERO, 1_000_000),
        Report { timeout: true, ..Report::default() },
        Report {
            now: RTT,
            bytes_acked: u64::MAX,
            delivery_rate: Some(Rate::from_bytes_per_sec(f64::MAX)),
            ..Report::default()
        },
        Report {
            now: RTT,
            interval: Duration::ZERO,
            ack_train: Duration::from_secs(9),
            ..ack_report(RTT, RTT, 10 * MSS, MSS)
        },
        Report { now: Duration::MAX, rtt_min: Some(Duration::MAX), ..Report::default() },
        loss_report(Duration::MAX, u64::MAX),
    ];
    for r in hostile.iter().cycle().take(3 * hostile.len()) {
        let d = b.on_report(r);
        assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
        assert!(d.rate.unwrap().bytes_per_sec().is_finite());
    }
}

#[test]
fn losses_barely_dent_the_window() {
    let (mut b, now) = settled(&BbrConfig::default());
    let before = b.decision().cwnd_bytes;
    let d = b.on_report(&loss_report(now + Duration::from_millis(5), 10));
    assert_eq!(d.cwnd_bytes, before - 10 * MSS);
    // Back at the target (which moves by 2 packets with the gain phase).
    let d = b.on_report(&smooth(now + RTT, bdp_bytes()));
    assert!(d.cwnd_bytes + 2 * MSS >= before, "cwnd {} before {before}", d.cwnd_bytes);
}

#[test]
fn timeout_restarts_at_four_packets_and_restores_the_window_a_round_later() {
    let (mut b, now) = settled(&BbrConfig::default());
    let before = b.decision().cwnd_bytes;
    let d = b.on_report(&Report {
        now: now + Duration::from_millis(200),
        timeout: true,
        packets_lost: 20,
        ..Report::default()
    });
    assert_eq!(d.cwnd_bytes, MIN_CWND_PACKETS * MSS);
    let d = b.on_report(&smooth(now + Duration::from_millis(200) + RTT, 4 * MSS));
    assert!(d.cwnd_bytes + 2 * MSS >= before, "cwnd {} before {before}", d.cwnd_bytes);
}

#[test]
fn paces_at_high_gain_times_the_initial_window_over_the_rtt_before_any_bw_sample() {
    let mut b = bbr();
    let init = info().init_cwnd_bytes;
    let expect = |rtt| rate_of_window(init, rtt) * HIGH_GAIN * 0.99;
    assert_eq!(b.decision().rate, Some(expect(NOMINAL_RTT)));
    // An RTT sample without any data acked.
    let d =
        b.on_report(&Report { now: RTT, rtt_sum: RTT, rtt_samples: 1, rtt_min: Some(RTT), ..Report::default() });
    assert_eq!(d.rate, Some(expect(RTT)));
    assert_eq!(d.cwnd_bytes, init);
}

#[test]
fn sync_cwnd_is_adopted_then_pulled_back_to_the_target() {
    let (mut b, now) = settled(&BbrConfig::default());
    let target = b.decision().cwnd_bytes;
    b.sync(Sync::Cwnd(10 * bdp_bytes()));
    assert_eq!(b.decision().cwnd_bytes, 10 * bdp_bytes());
    let d = b.on_report(&smooth(now + RTT, bdp_bytes()));
    assert!(d.cwnd_bytes <= target + 2 * MSS, "cwnd {} vs target {target}", d.cwnd_bytes);
    b.sync(Sync::Cwnd(0));
    assert_eq!(b.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
}

#[test]
fn sync_rate_paces_until_the_next_report() {
    let (mut b, now) = settled(&BbrConfig::default());
    b.sync(Sync::Rate(Rate::from_mbps(3.0)));
    assert_eq!(b.decision().rate, Some(Rate::from_mbps(3.0)));
    let d = b.on_report(&smooth(now + RTT, bdp_bytes()));
    assert!(d.rate.unwrap().mbps() > 0.7 * BW_MBPS, "rate {}", d.rate.unwrap());
}

#[test]
fn estimates_expose_bw_min_rtt_and_srtt() {
    let (b, _) = settled(&BbrConfig::default());
    let e = b.estimates();
    assert!((e.bandwidth.unwrap().mbps() - BW_MBPS).abs() < 0.01);
    assert_eq!(e.min_rtt, Some(RTT));
    assert_eq!(e.srtt, Some(RTT));
    assert!(e.bdp_bytes().unwrap().abs_diff(bdp_bytes()) <= 1);
    assert_eq!(bbr().estimates(), Estimates::default());
}

#[test]
fn hostile_config_values_fall_back_to_defaults() {
    let cfg = BbrConfig {
        high_gain: f64::NAN,
        drain_gain: -1.0,
        cwnd_gain: 0.0,
        bw_window_rounds: 0,
        ..BbrConfig::default()
    };
    let b = cfg.build(FlowInfo { mss_bytes: 0, init_cwnd_bytes: 0 });
    assert_eq!(b.params.high_gain, HIGH_GAIN);
    assert_eq!(b.params.drain_gain, DRAIN_GAIN);
    assert_eq!(b.params.cwnd_gain, PROBE_BW_CWND_GAIN);
    assert_eq!(b.decision().cwnd_bytes, MIN_CWND_PACKETS);
}

/// A flow at a quarter of the 20 Mbit/s link (its share beside three others), out of slow start,
/// handed to BBR: reports keep delivering that share at the base RTT.
fn adopt_at_share(in_slow_start: bool) -> (&'static str, Rate, Vec<Decision>) {
    let share = Rate::from_mbps(BW_MBPS / 4.0);
    let window = bytes_from_f64(share.bytes_over(RTT));
    let mut b = bbr();
    b.adopt(&Handover {
        cwnd_bytes: window,
        pacing_rate: None,
        estimates: Estimates { bandwidth: None, min_rtt: Some(RTT), srtt: Some(RTT) },
        in_slow_start,
    });
    let mode = b.mode_name();
    let mut out = vec![b.decision()];
    let mut now = Duration::from_secs(30); // a flow's clock well into its life
    for _ in 0..8 {
        now += RTT;
        out.push(b.on_report(&smooth(now, window)));
    }
    (mode, share, out)
}

#[test]
fn adopting_a_flow_out_of_slow_start_probes_around_its_rate_instead_of_starting_up() {
    let (mode, share, decisions) = adopt_at_share(false);
    assert_eq!(mode, "probe_bw");
    let bdp = share.bytes_over(RTT);
    for (i, d) in decisions.iter().enumerate() {
        let rate = d.rate.expect("BBR paces");
        // ProbeBw's gains are 0.75-1.25; Startup's 2.885 was the burst.
        assert!(rate.bytes_per_sec() <= 1.25 * share.bytes_per_sec(), "decision {i}: rate {rate} vs share {share}");
        assert!(rate.bytes_per_sec() >= 0.74 * share.bytes_per_sec(), "decision {i}: rate {rate} vs share {share}");
        // 2 BDP of the share, the quantization budget (4 packets, +2 probing up) and one report of growth.
        let cap = 2.0 * bdp + (6 * MSS) as f64 + bdp;
        assert!((d.cwnd_bytes as f64) <= cap, "decision {i}: cwnd {} vs {cap}", d.cwnd_bytes);
    }
}

#[test]
fn adopting_a_flow_in_slow_start_keeps_starting_up() {
    let (mode, share, decisions) = adopt_at_share(true);
    assert_eq!(mode, "startup");
    // Startup's gain on its first reports (then, with the share flat for 3 rounds, the pipe is full).
    assert!(decisions[1..3].iter().all(|d| d.rate.unwrap().bytes_per_sec() > 2.0 * share.bytes_per_sec()));
}
