//! Tests of [`super`].

use super::*;
use crate::testing::{ack_report, loss_report, FluidPath};
use proptest::prelude::*;

const MSS: u64 = 1000;
const RTT: Duration = Duration::from_millis(50);

fn info() -> FlowInfo {
    FlowInfo { mss_bytes: MSS, init_cwnd_bytes: 10 * MSS }
}

fn copa() -> Copa {
    CopaConfig::default().build(info())
}

/// One RTT of ACKs for the whole current window, every sample at `rtt`.
fn window_acked(c: &Copa, now: Duration, rtt: Duration) -> Report {
    ack_report(now, rtt, c.decision().cwnd_bytes, MSS)
}

/// Drive `c` through `n` once-per-RTT reports at a constant `rtt`, starting at `*now`.
fn run_at(c: &mut Copa, now: &mut Duration, rtt: Duration, n: usize) {
    for _ in 0..n {
        *now += rtt;
        let r = window_acked(c, *now, rtt);
        c.on_report(&r);
    }
}

/// A Copa that has seen RTT_min = `RTT` and left slow start on a queued report.
fn in_avoidance(now: &mut Duration) -> Copa {
    let mut c = copa();
    run_at(&mut c, now, RTT, 1);
    run_at(&mut c, now, RTT + Duration::from_millis(30), 1);
    assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
    c
}

/// Samples jitter within 2 ms above RTT without a queue. A once-per-RTT report's standing RTT
/// is the tail bound (the second-half mean, 1 ms up); at the cadence Copa asks for, each
/// report in the srtt/2 window gives its minimum.
#[test]
fn copa_asks_for_quarter_rtt_reports_so_jitter_does_not_read_as_a_queue() {
    assert_eq!(copa().report_interval(), None, "nothing before the first RTT sample");
    let jittered = |now: Duration, interval: Duration, c: &Copa| Report {
        interval,
        rtt_min: Some(RTT + Duration::from_micros(100)),
        rtt_last: Some(RTT + Duration::from_millis(2)),
        rtt_second_half_mean: Some(RTT + Duration::from_millis(1)),
        ..ack_report(now, RTT, c.decision().cwnd_bytes * interval.as_micros() as u64 / RTT.as_micros() as u64, MSS)
    };
    let mut now = Duration::ZERO;
    let mut per_rtt = in_avoidance(&mut now);
    let mut quarter = per_rtt.clone();
    let asked = quarter.report_interval().expect("an interval once Copa has an RTT");
    assert_eq!(asked, RTT / 4, "a quarter of RTT_min");
    let start = now;
    for _ in 0..8 {
        now += RTT;
        per_rtt.on_report(&jittered(now, RTT, &per_rtt));
    }
    let mut t = start;
    while t < now {
        t += asked;
        quarter.on_report(&jittered(t, asked, &quarter));
    }
    let standing = |c: &Copa| c.standing_rtt().unwrap().as_micros();
    assert_eq!(standing(&per_rtt), (RTT + Duration::from_millis(1)).as_micros());
    assert_eq!(standing(&quarter), (RTT + Duration::from_micros(100)).as_micros());
    // d_q of 0.1 ms instead of 1 ms: a target rate ten times higher, and a window that grew.
    assert!(
        quarter.cwnd_packets() > per_rtt.cwnd_packets(),
        "{} <= {}",
        quarter.cwnd_packets(),
        per_rtt.cwnd_packets()
    );
}

#[test]
fn closed_form_report_step_matches_the_per_ack_rule() {
    let mut now = Duration::ZERO;
    let mut c = in_avoidance(&mut now);
    c.cwnd_pkts = 100.0;
    let mut per_ack = 100.0_f64;
    for _ in 0..100 {
        per_ack += 1.0 / (0.5 * per_ack);
    }
    c.avoidance_step(true, 100.0);
    assert!((c.cwnd_pkts - per_ack).abs() < 0.01, "closed form {} vs per-ACK {per_ack}", c.cwnd_pkts);
    // A window acked moves the window by about v / delta = 2 packets.
    assert!((c.cwnd_pkts - 102.0).abs() < 0.05, "{}", c.cwnd_pkts);
    // Many windows acked against a tiny window (a copilot behind a paced pilot) grow it like
    // per-ACK Copa would, not by v * acked / (delta * cwnd) = 96 packets.
    c.cwnd_pkts = 2.0;
    c.avoidance_step(true, 96.0);
    assert!((c.cwnd_pkts - (4.0_f64 + 384.0).sqrt()).abs() < 1e-9, "{}", c.cwnd_pkts);
}

#[test]
fn window_converges_to_the_target_rate_for_a_fixed_queueing_delay() {
    // RTT_min 50 ms, then a constant RTT_standing of 51 ms: d_q = 1 ms, so the target rate
    // is 1 / (0.5 * 1 ms) = 2000 packets/s and the target window 2000 * 51 ms = 102 packets.
    let mut c = CopaConfig { mode_switching: false, ..CopaConfig::default() }.build(info());
    let mut now = Duration::ZERO;
    run_at(&mut c, &mut now, RTT, 1);
    let standing = RTT + Duration::from_millis(1);
    run_at(&mut c, &mut now, standing, 100);
    let mut windows = Vec::new();
    for _ in 0..50 {
        now += standing;
        let d = c.on_report(&window_acked(&c, now, standing));
        windows.push(d.cwnd_bytes as f64 / MSS as f64);
    }
    let mean = windows.iter().sum::<f64>() / windows.len() as f64;
    let (lo, hi) = windows.iter().fold((f64::MAX, f64::MIN), |(l, h), w| (l.min(*w), h.max(*w)));
    println!("window mean {mean:.2} packets, range {lo:.1}..{hi:.1} (target 102)");
    assert!((mean - 102.0).abs() < 3.0, "mean window {mean}");
    assert!(hi - lo < 8.0, "oscillation {lo}..{hi}");
    let rate_pkts = c.decision().rate.unwrap().bytes_per_sec() / MSS as f64;
    assert!((rate_pkts - 2000.0).abs() < 100.0, "rate {rate_pkts} packets/s");
}

#[test]
fn fluid_path_with_a_deep_buffer_keeps_about_two_packets_queued() {
    let bw = Rate::from_mbps(20.0);
    let base = Duration::from_millis(40);
    let mut path = FluidPath::new(bw, base, 4 * 100_000, MSS);
    let s = path.run(&mut copa(), 400);
    let (util, mean_rtt, mean_queue) = (s.utilization, s.mean_rtt.as_secs_f64(), s.mean_queue_packets);
    println!("utilization {util:.3}, mean RTT {:.2} ms, mean queue {mean_queue:.2} packets", mean_rtt * 1e3);
    assert!(util >= 0.8, "utilization {util}");
    assert!(mean_rtt <= 1.3 * base.as_secs_f64(), "mean RTT {mean_rtt}");
    assert!((0.5..=4.0).contains(&mean_queue), "mean queue {mean_queue} packets, expected about 1/delta = 2");
}

#[test]
fn velocity_doubles_after_three_same_direction_rtts_and_resets_on_a_flip() {
    let mut now = Duration::ZERO;
    let mut c = in_avoidance(&mut now);
    // Large enough that the velocity cap (1/8 of the window per RTT) stays out of the way.
    c.cwnd_pkts = 200.0;
    // No queue: every round increases. Rounds 1-3 in the new direction keep v = 1, each
    // further round doubles it.
    let mut seen = Vec::new();
    for _ in 0..6 {
        run_at(&mut c, &mut now, RTT, 1);
        seen.push(c.velocity());
    }
    assert_eq!(seen, vec![1.0, 1.0, 1.0, 2.0, 4.0, 8.0]);
    // The queue comes back: the first decrease resets v to 1 at once and moves the window
    // by about v / delta = 2 packets, not 16.
    let before = c.cwnd_packets();
    run_at(&mut c, &mut now, RTT + Duration::from_millis(20), 1);
    assert_eq!(c.velocity(), 1.0);
    assert!((before - c.cwnd_packets() - 2.0).abs() < 0.2, "{before} -> {}", c.cwnd_packets());
}

#[test]
fn slow_start_doubles_per_rtt_then_exits_on_the_first_decrease() {
    let mut c = copa();
    let mut now = Duration::ZERO;
    let mut windows = Vec::new();
    for _ in 0..3 {
        run_at(&mut c, &mut now, RTT, 1);
        windows.push(c.decision().cwnd_bytes / MSS);
        assert_eq!(c.state(), CopaState::SlowStart);
    }
    assert_eq!(windows, vec![20, 40, 80]);
    run_at(&mut c, &mut now, RTT + Duration::from_millis(10), 1);
    assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
    let w = c.cwnd_packets();
    assert!(w < 80.0 && w > 77.0, "first decrease moves about 2 packets: {w}");
}

#[test]
fn loss_in_slow_start_ends_it_without_a_reduction() {
    let mut c = copa();
    let mut now = Duration::ZERO;
    run_at(&mut c, &mut now, RTT, 1);
    let before = c.decision().cwnd_bytes;
    c.on_report(&loss_report(RTT + Duration::from_millis(10), 3));
    assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
    assert_eq!(c.decision().cwnd_bytes, before);
}

#[test]
fn competitive_mode_engages_with_a_persistent_queue_and_runs_aimd_on_inverse_delta() {
    let mut now = Duration::ZERO;
    let mut c = in_avoidance(&mut now);
    // A buffer filler keeps 30 ms queued whatever Copa does: the queue never nearly empties.
    let queued = RTT + Duration::from_millis(30);
    let mut rounds = 0;
    while c.state() != (CopaState::Avoidance { mode: CopaMode::Competitive }) {
        run_at(&mut c, &mut now, queued, 1);
        rounds += 1;
        assert!(rounds <= 40, "competitive mode never engaged (window {})", c.cwnd_packets());
    }
    println!("competitive after {rounds} rounds of persistent queue");
    // Without loss 1/delta rises by 1 per RTT.
    let start = 1.0 / c.delta();
    run_at(&mut c, &mut now, queued, 3);
    assert!((1.0 / c.delta() - (start + 3.0)).abs() < 1e-9, "1/delta {} from {start}", 1.0 / c.delta());
    // A loss halves 1/delta (delta doubles), once per RTT.
    let before = 1.0 / c.delta();
    c.on_report(&loss_report(now + Duration::from_millis(1), 1));
    assert!((1.0 / c.delta() - before / 2.0).abs() < 1e-9);
    c.on_report(&loss_report(now + Duration::from_millis(2), 5));
    assert!((1.0 / c.delta() - before / 2.0).abs() < 1e-9, "second loss in the same RTT");
    // delta never exceeds the configured one.
    for i in 0..10u32 {
        now += queued;
        c.on_report(&loss_report(now, 1));
        assert!(c.delta() <= DEFAULT_DELTA + 1e-12, "after loss {i}: delta {}", c.delta());
    }
    // The queue empties: back to default mode and the configured delta.
    let mut rounds = 0;
    while c.state() != (CopaState::Avoidance { mode: CopaMode::Default }) {
        run_at(&mut c, &mut now, RTT, 1);
        rounds += 1;
        assert!(rounds <= 10);
    }
    assert_eq!(c.delta(), DEFAULT_DELTA);
}

#[test]
fn mode_switching_off_keeps_the_configured_delta() {
    let mut c = CopaConfig { mode_switching: false, delta: 0.25, ..CopaConfig::default() }.build(info());
    let mut now = Duration::ZERO;
    run_at(&mut c, &mut now, RTT, 1);
    run_at(&mut c, &mut now, RTT + Duration::from_millis(30), 40);
    assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default });
    assert_eq!(c.delta(), 0.25);
}

#[test]
fn draining_its_own_queue_does_not_look_like_competition() {
    // The queue shrinks round after round because Copa lowers its window: default mode.
    let mut now = Duration::ZERO;
    let mut c = in_avoidance(&mut now);
    c.cwnd_pkts = 500.0;
    for ms in (5..=12).rev() {
        run_at(&mut c, &mut now, RTT + Duration::from_millis(5 * ms), 1);
        assert_eq!(c.state(), CopaState::Avoidance { mode: CopaMode::Default }, "queue {} ms", 5 * ms);
    }
}

#[test]
fn rate_falls_to_the_new_capacity_within_a_few_rtts_after_a_halving() {
    let mss = 1448;
    let base = Duration::from_millis(100);
    let mut path = FluidPath::new(Rate::from_mbps(20.0), base, 4 * 250_000, mss);
    let mut c = CopaConfig::default().build(FlowInfo::with_mss(mss));
    let mut d = c.decision();
    for _ in 0..100 {
        d = c.on_report(&path.step(d));
    }
    path.bandwidth = Rate::from_mbps(10.0);
    let target = path.bdp_bytes() as f64;
    let (mut rate_reports, mut inflight_reports) = (None, None);
    for i in 1..=60 {
        let rep = path.step(d);
        d = c.on_report(&rep);
        if inflight_reports.is_none() {
            assert_eq!(
                c.state(),
                CopaState::Avoidance { mode: CopaMode::Default },
                "report {i}: draining its own queue"
            );
        }
        let rate = d.rate.unwrap().mbps();
        if rate_reports.is_none() && (rate - 10.0).abs() <= 1.0 {
            rate_reports = Some(i);
        }
        let inflight = c.decision().cwnd_bytes as f64;
        if inflight_reports.is_none() && inflight <= 1.1 * target + 4.0 * mss as f64 {
            inflight_reports = Some(i);
        }
    }
    println!("rate within 10% of 10 Mbit/s after {rate_reports:?} reports, window within 10% of the new BDP after {inflight_reports:?}");
    assert!(rate_reports.is_some_and(|n| n <= 3), "{rate_reports:?}");
    assert!(inflight_reports.is_some_and(|n| n <= 15), "{inflight_reports:?}");
    let rate = d.rate.unwrap().mbps();
    assert!((rate - 10.0).abs() <= 1.0, "settled rate {rate}");
}

#[test]
fn sync_rate_sets_the_sending_rate_and_is_a_no_op_on_its_own_rate() {
    let mut now = Duration::ZERO;
    let mut c = in_avoidance(&mut now);
    let own = c.decision();
    c.sync(Sync::Rate(own.rate.unwrap()));
    assert!((c.decision().cwnd_bytes as i64 - own.cwnd_bytes as i64).abs() <= 1);
    let r = Rate::from_mbps(4.0);
    c.sync(Sync::Rate(r));
    let after = c.decision().rate.unwrap();
    assert!((after.bytes_per_sec() - r.bytes_per_sec()).abs() < 1.0, "{after} vs {r}");
    assert_eq!(c.estimates().bandwidth, Some(after));
    // Down to the floor, never below.
    c.sync(Sync::Rate(Rate::ZERO));
    assert_eq!(c.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
}

#[test]
fn sync_cwnd_adopts_the_window_above_the_floor() {
    let mut c = copa();
    c.sync(Sync::Cwnd(37 * MSS));
    assert_eq!(c.decision().cwnd_bytes, 37 * MSS);
    c.sync(Sync::Cwnd(1));
    assert_eq!(c.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
    // Without an RTT a rate cannot become a window: ignored.
    c.sync(Sync::Rate(Rate::from_mbps(100.0)));
    assert_eq!(c.decision().cwnd_bytes, MIN_CWND_PACKETS * MSS);
    assert_eq!(c.decision().rate, None);
}

/// A window-limited sender behind a fluid bottleneck, stepped every millisecond and
/// reporting every `report_every`: unlike [`FluidPath`], reports can be shorter than an RTT,
/// and an RTT sample reaches Copa one RTT after the window that caused it.
struct SubRttPath {
    bytes_per_ms: f64,
    base: Duration,
    now: Duration,
    queue_bytes: f64,
    /// (ACK time, RTT, bytes) of what has been sent and not yet acknowledged.
    in_flight: VecDeque<(Duration, Duration, f64)>,
}

impl SubRttPath {
    fn new(mbps: f64, base: Duration) -> SubRttPath {
        let bytes_per_ms = Rate::from_mbps(mbps).bytes_per_sec() / 1e3;
        SubRttPath { bytes_per_ms, base, now: Duration::ZERO, queue_bytes: 0.0, in_flight: VecDeque::new() }
    }

    /// Run `interval` under window `cwnd_bytes`; the report at its end.
    fn step(&mut self, cwnd_bytes: u64, interval: Duration) -> Report {
        let ms = Duration::from_millis(1);
        let start = self.now;
        let mut r = Report { interval, ..Report::default() };
        let (mut second_half_sum, mut second_half_n) = (0.0, 0u32);
        while self.now < start + interval {
            self.now += ms;
            while let Some(&(_, rtt, bytes)) = self.in_flight.front().filter(|s| s.0 <= self.now) {
                self.in_flight.pop_front();
                r.bytes_acked += bytes_from_f64(bytes);
                r.rtt_min = Some(r.rtt_min.map_or(rtt, |m| m.min(rtt)));
                r.rtt_last = Some(rtt);
                r.rtt_sum += rtt;
                r.rtt_samples += 1;
                if self.now > start + interval / 2 {
                    second_half_sum += rtt.as_secs_f64();
                    second_half_n += 1;
                }
            }
            // Window-limited: send what the window allows, queue what the link cannot carry.
            // Each link-millisecond's worth leaves the queue (and is acknowledged) in turn.
            let inflight: f64 = self.in_flight.iter().map(|s| s.2).sum();
            let mut sent = (cwnd_bytes as f64 - inflight).max(0.0);
            self.queue_bytes = (self.queue_bytes - self.bytes_per_ms).max(0.0);
            while sent > 0.0 {
                let piece = sent.min(self.bytes_per_ms);
                sent -= piece;
                self.queue_bytes += piece;
                let rtt = self.base + Duration::from_secs_f64(self.queue_bytes / self.bytes_per_ms / 1e3);
                self.in_flight.push_back((self.now + rtt, rtt, piece));
            }
        }
        r.now = self.now;
        r.packets_acked = r.bytes_acked / MSS;
        r.rtt_second_half_mean =
            (second_half_n > 0).then(|| Duration::from_secs_f64(second_half_sum / f64::from(second_half_n)));
        r
    }
}

/// Before the fix, reports every 5-20 ms on this path (base RTT 40 ms) made Copa
/// oscillate between the 2-packet floor and 2-3 BDP every ~1.2 s (utilization 0.72-0.77,
/// mean RTT 1.9-2.1x base): the comparison lagged the window by 2-3 rounds, the velocity
/// kept doubling up to its old cap (`v / delta` = the whole window per RTT, which in closed
/// form multiplies the window by 1.7 per round up, or empties it in one round down).
#[test]
fn sub_rtt_reports_neither_overshoot_nor_crash_to_the_floor() {
    let base = Duration::from_millis(40);
    // Every 5 ms up to every half RTT (the CCP port's cadence).
    for every_ms in [5, 10, 20] {
        let mut path = SubRttPath::new(20.0, base);
        let mut c = copa();
        let (mut acked, mut rtt_sum, mut samples, mut lowest) = (0u64, 0.0, 0u64, f64::MAX);
        let every = Duration::from_millis(every_ms);
        let steps = 30_000 / every_ms;
        for i in 0..steps {
            let r = path.step(c.decision().cwnd_bytes, every);
            c.on_report(&r);
            if i >= steps / 2 {
                acked += r.bytes_acked;
                rtt_sum += r.rtt_sum.as_secs_f64();
                samples += r.rtt_samples;
                lowest = lowest.min(c.cwnd_packets());
            }
        }
        let util = acked as f64 / (path.bytes_per_ms * 15_000.0);
        let rtt_ratio = rtt_sum / samples as f64 / base.as_secs_f64();
        let bdp = path.bytes_per_ms * 40.0 / MSS as f64;
        println!("{every_ms} ms reports: utilization {util:.3}, mean RTT {rtt_ratio:.2}x base, smallest window {lowest:.1} packets (BDP {bdp:.0})");
        assert!(util >= 0.9, "{every_ms} ms reports: utilization {util:.3}");
        assert!(rtt_ratio <= 1.3, "{every_ms} ms reports: mean RTT {rtt_ratio:.2}x base");
        assert!(lowest >= bdp / 2.0, "{every_ms} ms reports: window fell to {lowest:.1} packets");
    }
}

#[test]
fn half_rtt_reports_take_the_standing_rtt_over_the_previous_report_too() {
    let ms = Duration::from_millis;
    let report = |now: Duration, interval: Duration, rtt: Duration| Report {
        now,
        interval,
        bytes_acked: 5 * MSS,
        packets_acked: 5,
        rtt_min: Some(rtt),
        rtt_last: Some(rtt),
        rtt_sum: rtt * 5,
        rtt_samples: 5,
        ..Report::default()
    };
    let mut c = copa();
    c.on_report(&report(ms(20), ms(20), RTT)); // srtt 50 ms: the window is 25 ms
                                               // Samples at 60 ms, but the previous report (ended 20 ms ago) saw 50 ms.
    c.on_report(&report(ms(40), ms(20), ms(60)));
    assert_eq!(c.standing_rtt(), Some(RTT));
    // 25 ms later the 50 ms report has left the window.
    c.on_report(&report(ms(60), ms(20), ms(60)));
    assert_eq!(c.standing_rtt(), Some(ms(60)));
    // A report longer than the window bounds its minimum by the second half's samples.
    let mut long = report(ms(110), ms(50), ms(55));
    long.rtt_second_half_mean = Some(ms(70));
    long.rtt_last = Some(ms(72));
    c.on_report(&long);
    assert_eq!(c.standing_rtt(), Some(ms(70)));
}

#[test]
fn standing_rtt_takes_only_the_tail_of_a_report_that_began_before_its_window() {
    let ms = Duration::from_millis;
    // Five samples from `min` up to `tail` (the second half's mean and the last sample).
    let report = |now: Duration, interval: Duration, min: Duration, tail: Duration| Report {
        now,
        interval,
        bytes_acked: 5 * MSS,
        packets_acked: 5,
        rtt_min: Some(min),
        rtt_last: Some(tail),
        rtt_second_half_mean: Some(tail),
        rtt_sum: min * 2 + tail * 3,
        rtt_samples: 5,
        ..Report::default()
    };
    let mut c = copa();
    c.on_report(&report(ms(40), ms(40), ms(40), ms(40))); // srtt 40 ms: the window is 20 ms
    c.on_report(&report(ms(55), ms(15), ms(40), ms(48)));
    // At 65 ms the window [45, 65] holds the tail of the report over [40, 55] (48 ms), not
    // its 40 ms sample, which came before 45 ms. Before, the whole report counted: 40 ms.
    c.on_report(&report(ms(65), ms(10), ms(50), ms(50)));
    assert_eq!(c.standing_rtt(), Some(ms(48)));
}

#[test]
fn min_rtt_forgets_a_sample_older_than_its_window() {
    let mut c = copa();
    c.on_report(&ack_report(RTT, RTT, 10 * MSS, MSS));
    let later = RTT + Duration::from_millis(5);
    let mut now = RTT;
    while now < MIN_RTT_WINDOW {
        now += later;
        c.on_report(&ack_report(now, later, 10 * MSS, MSS));
        assert_eq!(c.estimates().min_rtt, Some(RTT));
    }
    for _ in 0..3 {
        now += later;
        c.on_report(&ack_report(now, later, 10 * MSS, MSS));
    }
    assert_eq!(c.estimates().min_rtt, Some(later));
}

#[test]
fn timeout_restarts_slow_start_from_at_most_the_initial_window() {
    let mut now = Duration::ZERO;
    let mut c = in_avoidance(&mut now);
    c.on_report(&Report { now: now + RTT, timeout: true, ..Report::default() });
    assert_eq!(c.state(), CopaState::SlowStart);
    assert_eq!(c.decision().cwnd_bytes, 10 * MSS);
    assert_eq!(c.velocity(), 1.0);
}

#[test]
fn loss_only_and_empty_reports_never_panic_and_keep_the_floor() {
    let mut c = copa();
    assert_eq!(c.on_report(&Report::default()).cwnd_bytes, 10 * MSS);
    for i in 0..50u32 {
        let d = c.on_report(&loss_report(RTT * i, 1000));
        assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
    }
    let d = c.on_report(&Report { now: Duration::MAX, timeout: true, ..Report::default() });
    assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
    // Time going backwards, zero RTTs: still fine.
    let d = c.on_report(&ack_report(Duration::ZERO, Duration::ZERO, 5 * MSS, MSS));
    assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
}

#[test]
fn config_defaults_are_the_papers_and_bad_values_are_caught() {
    let c = CopaConfig::default();
    assert_eq!(c.delta, 0.5);
    assert!(c.mode_switching);
    assert_eq!(c.init_cwnd_packets, None);
    assert!(CopaConfig { delta: 0.0, ..CopaConfig::default() }.validate().is_err());
    assert!(CopaConfig { delta: f64::NAN, ..CopaConfig::default() }.validate().is_err());
    assert!(CopaConfig::default().validate().is_ok());
    // build never fails: bad deltas fall back to the default, large ones are clamped.
    assert_eq!(CopaConfig { delta: f64::NAN, ..CopaConfig::default() }.build(info()).delta(), DEFAULT_DELTA);
    assert_eq!(CopaConfig { delta: 7.0, ..CopaConfig::default() }.build(info()).delta(), MAX_DELTA);
}

fn arb_report() -> impl Strategy<Value = Report> {
    (
        0u64..20_000,
        0u64..500,
        0u64..200_000,
        0u64..50,
        any::<bool>(),
        proptest::option::of(0u64..2_000),
        proptest::option::of(0u64..2_000),
        0u64..100,
    )
        .prop_map(|(now_ms, interval_ms, acked, lost, timeout, rtt_min, rtt_last, samples)| {
            let ms = Duration::from_millis;
            Report {
                now: ms(now_ms),
                interval: ms(interval_ms),
                bytes_acked: acked,
                packets_acked: acked / MSS,
                packets_lost: lost,
                timeout: timeout && lost % 7 == 0,
                rtt_min: rtt_min.map(ms),
                rtt_last: rtt_last.map(ms),
                rtt_sum: ms(rtt_last.unwrap_or(0) * samples),
                rtt_samples: samples,
                rtt_second_half_mean: rtt_last.map(ms),
                ..Report::default()
            }
        })
}

proptest! {
    #[test]
    fn random_reports_keep_the_window_above_the_floor_and_the_rate_finite(
        reports in proptest::collection::vec(arb_report(), 1..200),
        syncs in proptest::collection::vec((any::<bool>(), 0u64..10_000_000), 0..20),
    ) {
        let mut c = copa();
        for (i, r) in reports.iter().enumerate() {
            let d = c.on_report(r);
            prop_assert!(d.cwnd_bytes >= MIN_CWND_PACKETS * MSS);
            prop_assert!(c.cwnd_packets().is_finite());
            prop_assert!(c.velocity() >= 1.0 && c.velocity().is_finite());
            prop_assert!(c.delta() > 0.0 && c.delta() <= DEFAULT_DELTA);
            if let Some(rate) = d.rate {
                prop_assert!(rate.bytes_per_sec().is_finite());
            }
            if let Some(&(cwnd, v)) = syncs.get(i) {
                c.sync(if cwnd { Sync::Cwnd(v) } else { Sync::Rate(Rate::from_bytes_per_sec(v as f64)) });
                prop_assert!(c.decision().cwnd_bytes >= MIN_CWND_PACKETS * MSS);
            }
        }
    }
}
