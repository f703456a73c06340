//! The environment's tests: links per range, steps, objectives (`lib.rs`).

use super::*;
use polycc_algorithms::mocc::FEATURES;

fn fixed(mbps: f64, delay_ms: u64, queue: u64, loss: f64, rate_of_bw: f64) -> LinkParams {
    LinkParams {
        bandwidth: Rate::from_mbps(mbps),
        one_way_delay: Duration::from_millis(delay_ms),
        queue_packets: queue,
        loss,
        initial_rate: Some(Rate::from_mbps(mbps * rate_of_bw)),
        bandwidth_change: None,
        competitor_start: None,
        rtt_dev: Duration::ZERO,
        pacing_efficiency: PACING_EXACT,
    }
}

fn env_on(link: LinkParams) -> MoccEnv {
    let mut env = MoccEnv::new(LinkRange::Envelope, 3, 400).unwrap();
    env.fix_link(Some(link)).unwrap();
    env.reset(Some(3));
    env
}

#[test]
fn action_zero_keeps_the_rate_and_positive_actions_compound() {
    let mut env = env_on(fixed(4.0, 50, 20, 0.0, 0.5));
    let r0 = env.step(0.0).rate_bps;
    assert!((r0 - 2e6).abs() < 1.0, "initial rate 2 Mbit/s, got {r0}");
    for _ in 0..20 {
        assert!((env.step(0.0).rate_bps - r0).abs() < 1e-6);
    }
    let up = env.step(2.0).rate_bps;
    assert!((up / r0 - 1.05).abs() < 1e-9, "x (1 + 0.025 x 2)");
    let back = env.step(-2.0).rate_bps;
    assert!((back - r0).abs() < 1e-3, "x / (1 + 0.025 x 2) undoes it: {back}");
}

#[test]
fn without_an_initial_rate_the_episode_starts_as_a_deployed_flow_through_the_startup() {
    // 20 Mbit/s 40 ms, 1 BDP: the initial window is 10 packets per RTT, 0.15 of the link. The
    // startup ignores the actions (here: the largest cut) and hands over at the delivered rate.
    let mut link = fixed(20.0, 20, 67, 0.0, 1.0);
    link.initial_rate = None;
    let mut env = env_on(link);
    let steps: Vec<StepOutcome> = (0..60).map(|_| env.step(-1e3)).collect();
    let first = steps.iter().find(|s| s.rate_bps > 0.0).unwrap().rate_bps;
    assert!(first < 0.3 * 20e6, "starts near the initial window's rate, not at a trained one: {first}");
    let peak = steps.iter().map(|s| s.rate_bps).fold(0.0, f64::max);
    assert!(peak > 0.9 * 20e6, "the startup reaches the link despite the actions: {peak}");
    let last = steps.last().unwrap().rate_bps;
    assert!(last < 0.5 * peak, "once it has ended the actions move the rate again: {last} after {peak}");
    // With an initial rate the first step runs at it.
    let mut env = env_on(fixed(20.0, 20, 67, 0.0, 0.5));
    assert!((env.step(0.0).rate_bps - 10e6).abs() < 1.0);
}

#[test]
fn a_link_at_capacity_gives_full_throughput_and_an_underused_one_proportionally_less() {
    // 110 % of a 4 Mbit/s link with a 20-packet queue: the queue fills, the link runs full.
    let mut env = env_on(fixed(4.0, 50, 20, 0.0, 1.1));
    let late: Vec<StepOutcome> = (0..120).map(|_| env.step(0.0)).skip(60).collect();
    let o_thr = late.iter().map(|s| s.o_thr).sum::<f64>() / late.len() as f64;
    assert!(o_thr > 0.95, "O_thr {o_thr}");
    let loss = late.iter().map(|s| s.loss).sum::<f64>() / late.len() as f64;
    assert!((loss - 0.1 / 1.1).abs() < 0.03, "tail drops carry the excess 10 %: loss {loss}");
    let o_lat = late.iter().map(|s| s.o_lat).sum::<f64>() / late.len() as f64;
    // Base RTT 100 ms, a full 20-packet queue adds 60 ms: O_lat ~ 100/160.
    assert!((o_lat - 100.0 / 160.0).abs() < 0.05, "O_lat {o_lat}");
    // Half the capacity: O_thr ~ 0.5, no queue, O_lat ~ 1.
    let mut env = env_on(fixed(4.0, 50, 20, 0.0, 0.5));
    let late: Vec<StepOutcome> = (0..120).map(|_| env.step(0.0)).skip(60).collect();
    let o_thr = late.iter().map(|s| s.o_thr).sum::<f64>() / late.len() as f64;
    let o_lat = late.iter().map(|s| s.o_lat).sum::<f64>() / late.len() as f64;
    assert!((o_thr - 0.5).abs() < 0.03, "O_thr {o_thr}");
    assert!(o_lat > 0.97, "O_lat {o_lat}");
}

#[test]
fn the_observation_describes_the_link_in_the_documented_layout() {
    // Over capacity: the send ratio of the newest MI is ~1.1 and the latency ratio > 1.
    let mut env = env_on(fixed(4.0, 50, 20, 0.0, 1.1));
    let mut s = env.step(0.0);
    for _ in 0..80 {
        s = env.step(0.0);
    }
    let newest = &s.obs[FEATURES * 9..];
    assert!((newest[0] - 1.1).abs() < 0.08, "send ratio {}", newest[0]);
    assert!(newest[1] > 1.3, "latency ratio {}", newest[1]);
    assert!(newest[2].abs() < 0.2, "a standing queue has no gradient: {}", newest[2]);
    // Under capacity, the same link: send ratio 1, latency ratio 1.
    let mut env = env_on(fixed(4.0, 50, 20, 0.0, 0.5));
    for _ in 0..40 {
        s = env.step(0.0);
    }
    for i in 0..10 {
        assert!((s.obs[3 * i] - 1.0).abs() < 0.05, "send ratio of MI {i}: {}", s.obs[3 * i]);
        assert!((s.obs[3 * i + 1] - 1.0).abs() < 0.05, "latency ratio of MI {i}: {}", s.obs[3 * i + 1]);
    }
}

#[test]
fn mis_last_half_an_rtt_and_episodes_end_after_their_steps() {
    let mut env = MoccEnv::new(LinkRange::Envelope, 11, 50).unwrap();
    env.fix_link(Some(fixed(4.0, 100, 20, 0.0, 0.5))).unwrap();
    env.reset(None);
    let t0 = env.step(0.0).sim_time_s;
    let mut last = env.step(0.0);
    for _ in 0..48 {
        assert!(!last.done);
        last = env.step(0.0);
    }
    assert!(last.done, "step 50 ends the episode");
    // 49 MIs of 0.5 x 200 ms, on a 10 ms report grid.
    let per_mi = (last.sim_time_s - t0) / 49.0;
    assert!((per_mi - 0.1).abs() < 0.011, "MI {per_mi} s");
}

#[test]
fn episodes_are_seeded_and_links_stay_in_their_ranges() {
    let mut a = MoccEnv::new(LinkRange::Envelope, 5, 400).unwrap();
    let mut b = MoccEnv::new(LinkRange::Envelope, 5, 400).unwrap();
    assert_eq!(a.reset(Some(9)), b.reset(Some(9)));
    let sa: Vec<f64> = (0..30).map(|i| a.step((i % 5) as f64 - 2.0).o_thr).collect();
    let sb: Vec<f64> = (0..30).map(|i| b.step((i % 5) as f64 - 2.0).o_thr).collect();
    assert_eq!(sa, sb);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..1000 {
        let l = LinkRange::Envelope.sample(&mut rng);
        assert!((1.2..=6.0 + 1e-9).contains(&l.bandwidth.mbps()), "{l:?}");
        assert!((0.05..=0.5).contains(&l.one_way_delay.as_secs_f64()));
        assert!((2..=56).contains(&l.queue_packets) && l.loss <= 0.03);
        let w = LinkRange::Wide.sample(&mut rng);
        assert!(w.bandwidth.mbps() <= 100.0 + 1e-9 && (0.01..=0.2).contains(&w.base_rtt().as_secs_f64()));
    }
    assert_eq!("wIde".parse::<LinkRange>(), Ok(LinkRange::Wide));
    assert_eq!("users+CUBIC".parse::<LinkRange>(), Ok(LinkRange::UsersCubic));
    assert!(matches!("lan".parse::<LinkRange>(), Err(EnvError::UnknownLink(_))));
}

#[test]
fn users_links_stay_in_their_ranges_and_are_seeded() {
    let draw = |range: LinkRange, seed: u64| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..2000).map(|_| range.sample_for(&mut rng, 400)).collect::<Vec<_>>()
    };
    let users = draw(LinkRange::Users, 7);
    assert_eq!(users, draw(LinkRange::Users, 7), "seeded");
    assert_ne!(users, draw(LinkRange::Users, 8));
    let (mut changes, mut low_bw, mut short_rtt) = (0, 0, 0);
    for l in &users {
        let (mbps, rtt) = (l.bandwidth.mbps(), l.base_rtt().as_secs_f64());
        assert!((1.0 - 1e-9..=100.0 + 1e-9).contains(&mbps), "{l:?}");
        assert!((0.010 - 1e-9..=0.200 + 1e-9).contains(&rtt), "{l:?}");
        assert!((0.0..=0.02).contains(&l.loss), "{l:?}");
        let bdp = l.bandwidth.bytes_over(l.base_rtt()) / MSS_BYTES as f64;
        let q = l.queue_packets as f64;
        assert!(q >= 2.0 && q >= (0.5 * bdp).floor() && q <= (5.0 * bdp).ceil().max(2.0), "{l:?} bdp {bdp}");
        let rate = l.initial_rate.expect("a drawn link has an initial rate");
        assert!((0.3 - 1e-9..=1.5 + 1e-9).contains(&(rate.mbps() / mbps)));
        assert_eq!(l.competitor_start, None, "users has no competitor");
        l.validate().unwrap();
        low_bw += (mbps < 10.0) as usize;
        short_rtt += (rtt < 0.045) as usize;
        if let Some(c) = l.bandwidth_change {
            changes += 1;
            let nominal = rtt / 2.0 * 400.0;
            let at = c.at.as_secs_f64() / nominal;
            assert!((0.25 - 1e-9..=0.75 + 1e-9).contains(&at), "{l:?}");
            let (new, factor) = (c.bandwidth.mbps(), (c.bandwidth.mbps() / mbps).ln().abs().exp());
            assert!((1.0 - 1e-9..=100.0 + 1e-9).contains(&new));
            let clamped = (new - 1.0).abs() < 1e-9 || (new - 100.0).abs() < 1e-9;
            assert!(clamped || (1.5 - 1e-9..=3.0 + 1e-9).contains(&factor), "{l:?}");
        }
    }
    // Log-uniform: half the draws below the geometric middle (10 Mbit/s, ~45 ms).
    assert!((900..1100).contains(&low_bw) && (900..1100).contains(&short_rtt), "{low_bw} {short_rtt}");
    assert!((500..700).contains(&changes), "{changes} of 2000 change, expected ~30 %");
    // users+drops: a change in ~60 % of the episodes, three in four of them drops.
    let (mut changes, mut drops) = (0, 0);
    for l in draw(LinkRange::UsersDrops, 7) {
        l.validate().unwrap();
        if let Some(c) = l.bandwidth_change {
            changes += 1;
            drops += (c.bandwidth < l.bandwidth) as usize;
        }
    }
    assert!((1100..1300).contains(&changes) && (830..970).contains(&drops), "{changes} changes, {drops} drops");
    assert_eq!("Users+Drops".parse::<LinkRange>(), Ok(LinkRange::UsersDrops));
    // users+cubic: the same links, a competitor in ~30 % of them, in the first half.
    let cubic = draw(LinkRange::UsersCubic, 7);
    let mut competitors = 0;
    for (u, c) in users.iter().zip(&cubic) {
        assert_eq!(LinkParams { competitor_start: None, ..*c }, *u);
        if let Some(start) = c.competitor_start {
            competitors += 1;
            assert!(start.as_secs_f64() <= 0.5 * c.base_rtt().as_secs_f64() / 2.0 * 400.0 + 1e-9);
        }
    }
    assert!((500..700).contains(&competitors), "{competitors} of 2000 compete");
    // users+noise: the same links, ACK jitter on ~half of them, at most a quarter of the RTT.
    let noise = draw(LinkRange::UsersNoise, 7);
    let mut noisy = 0;
    for (u, n) in users.iter().zip(&noise) {
        assert_eq!(LinkParams { rtt_dev: Duration::ZERO, ..*n }, *u);
        n.validate().unwrap();
        if !n.rtt_dev.is_zero() {
            noisy += 1;
            let (dev, rtt) = (n.rtt_dev.as_secs_f64(), n.base_rtt().as_secs_f64());
            assert!(dev >= 0.0005 - 1e-9 || dev >= 0.25 * rtt - 1e-9, "{n:?}");
            assert!(dev <= 0.004 + 1e-9 && dev <= 0.25 * rtt + 1e-9, "{n:?}");
        }
    }
    assert!((900..1100).contains(&noisy), "{noisy} of 2000 jitter, expected ~50 %");
    // users+guest: the users+noise links, episode after episode, and on the jittered ones a
    // sender that paces short; exact on the clean ones.
    let guest = draw(LinkRange::UsersGuest, 7);
    for (n, g) in noise.iter().zip(&guest) {
        assert_eq!(LinkParams { pacing_efficiency: PACING_EXACT, ..*g }, *n);
        g.validate().unwrap();
        let range = GUEST_PACING.0..=GUEST_PACING.1;
        assert!(if n.rtt_dev.is_zero() { g.pacing_efficiency == PACING_EXACT } else { range.contains(&g.pacing_efficiency) }, "{g:?}");
    }
    let short: Vec<f64> = guest.iter().filter(|g| !g.rtt_dev.is_zero()).map(|g| g.pacing_efficiency).collect();
    let mean = short.iter().sum::<f64>() / short.len() as f64;
    assert!((0.85..0.90).contains(&mean), "mean pacing {mean} on the jittered links, expected ~0.875");
    assert_eq!("users+GUEST".parse::<LinkRange>(), Ok(LinkRange::UsersGuest));
    assert_eq!("users+NOISE".parse::<LinkRange>(), Ok(LinkRange::UsersNoise));
    // The envelope range draws what it drew before (the shipped model's links).
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let e = LinkRange::Envelope.sample(&mut rng);
    assert_eq!((e.bandwidth_change, e.competitor_start), (None, None));
}

#[test]
fn a_bandwidth_change_moves_the_capacity_the_step_reports() {
    // 8 Mbit/s halving at 3 s; the sender holds 6 Mbit/s: 0.75 of the link, then over it.
    let mut link = fixed(8.0, 20, 60, 0.0, 0.75);
    link.bandwidth_change = Some(BandwidthChange { at: Duration::from_secs(3), bandwidth: Rate::from_mbps(4.0) });
    let mbps = |a: u64, b: u64| link.mean_bandwidth(Duration::from_secs(a), Duration::from_secs(b)).mbps();
    assert_eq!((mbps(1, 2), mbps(2, 4), mbps(3, 5), mbps(4, 4)), (8.0, 6.0, 4.0, 4.0));
    let mut env = env_on(link);
    let steps: Vec<StepOutcome> = (0..200).map(|_| env.step(0.0)).collect();
    let before: Vec<&StepOutcome> = steps.iter().filter(|s| (1.0..2.5).contains(&s.sim_time_s)).collect();
    let after: Vec<&StepOutcome> = steps.iter().filter(|s| s.sim_time_s > 4.0).collect();
    assert!(!before.is_empty() && !after.is_empty());
    let near = |v: &[&StepOutcome], bps: f64| v.iter().all(|s| (s.capacity_bps - bps).abs() < 1.0);
    assert!(near(&before, 8e6) && near(&after, 4e6));
    let o_thr = |v: &[&StepOutcome]| v.iter().map(|s| s.o_thr).sum::<f64>() / v.len() as f64;
    assert!((o_thr(&before) - 0.75).abs() < 0.03, "{}", o_thr(&before));
    assert!(o_thr(&after) > 0.95, "over the new capacity the link runs full: {}", o_thr(&after));
    // Held at 6 Mbit/s the 60-packet queue (90 ms at 8 Mbit/s, 180 ms at 4) would fill: RTT
    // 40 + 180 ms. Once a base RTT of queue stands (RTT 80 ms) the drain guard
    // (mocc::DRAIN_LATENCY_RATIO) drains it at half the 4 Mbit/s the path delivers and hands
    // the actor that rate: a second after the drop the queue is gone.
    let peak = steps.iter().filter(|s| s.sim_time_s > 3.0).map(|s| s.rtt_s).fold(0.0, f64::max);
    assert!((0.08..0.2).contains(&peak), "the queue the drop built: RTT {peak}");
    let drained = steps.iter().any(|s| s.sim_time_s > 3.0 && (s.rate_bps - 2e6).abs() < 0.1e6);
    assert!(drained, "drained at half the path's rate");
    let held = after.iter().all(|s| (3.9e6..=4.1e6).contains(&s.rate_bps));
    assert!(held, "then the path's rate, where the actor's 0 holds it");
    let rtt = after.iter().map(|s| s.rtt_s).fold(0.0, f64::max);
    assert!(rtt < 0.045, "RTT after the drop {rtt}");
}

/// Where the buffer holds less than a base RTT of queue the drain guard never acts: a flow held
/// over the link's capacity keeps its rate, and the buffer overflows.
#[test]
fn a_buffer_under_a_base_rtt_of_queue_leaves_the_rate_alone() {
    // 12 packets: 35 ms of queue at 4 Mbit/s on a 40 ms path.
    let mut link = fixed(8.0, 20, 12, 0.0, 0.75);
    link.bandwidth_change = Some(BandwidthChange { at: Duration::from_secs(1), bandwidth: Rate::from_mbps(4.0) });
    let mut env = env_on(link);
    let steps: Vec<StepOutcome> = (0..150).map(|_| env.step(0.0)).collect();
    let after: Vec<&StepOutcome> = steps.iter().filter(|s| s.sim_time_s > 2.0).collect();
    assert!(!after.is_empty() && after.iter().all(|s| (s.rate_bps - 6e6).abs() < 1.0));
    let loss = after.iter().map(|s| s.loss).sum::<f64>() / after.len() as f64;
    assert!(loss > 0.2, "a third of what it sends overflows: {loss}");
}

#[test]
fn ack_jitter_spreads_the_rtt_samples_without_a_queue() {
    // Half the link, no queue: the RTT is the path's. +/-4 ms of ACK jitter on a 40 ms path
    // spreads the per-packet RTTs (p95 over 43 ms, the clean path's under 41.5), yet the
    // latency ratio the observation carries stays near 1 (its base includes the noise).
    let p95_and_ratio = |dev_ms: u64| {
        let link = LinkParams { rtt_dev: Duration::from_millis(dev_ms), ..fixed(10.0, 20, 40, 0.0, 0.5) };
        let mut env = env_on(link);
        let steps: Vec<StepOutcome> = (0..300).map(|_| env.step(0.0)).collect();
        let ratios: Vec<f32> = steps[100..].iter().map(|s| s.obs[OBS_LEN - 2]).collect();
        let mean = ratios.iter().sum::<f32>() / ratios.len() as f32;
        (env.p95_rtt().unwrap().as_secs_f64(), mean)
    };
    let (clean_p95, clean_ratio) = p95_and_ratio(0);
    let (noisy_p95, noisy_ratio) = p95_and_ratio(4);
    assert!(clean_p95 < 0.0415 && noisy_p95 > 0.043, "p95 RTT clean {clean_p95}, jittered {noisy_p95}");
    assert!(clean_ratio < 1.02 && noisy_ratio < 1.1, "latency ratio clean {clean_ratio}, jittered {noisy_ratio}");
    let bad = LinkParams { rtt_dev: Duration::from_millis(30), ..fixed(10.0, 20, 40, 0.0, 0.5) };
    assert!(matches!(bad.validate(), Err(EnvError::BadLink(m)) if m.contains("half the base RTT")));
}

#[test]
fn a_competing_cubic_flow_shares_the_link() {
    // Alone at half the link, MOCC sees no queue (20 ms + 1.2 ms of serialisation); a CUBIC
    // flow beside it fills the 40-packet buffer (48 ms): O_lat ~ 20 / 69.
    let mut env = env_on(fixed(10.0, 10, 40, 0.0, 0.5));
    let alone: Vec<StepOutcome> = (0..300).map(|_| env.step(0.0)).skip(100).collect();
    let mut link = fixed(10.0, 10, 40, 0.0, 0.5);
    link.competitor_start = Some(Duration::ZERO);
    let mut env = env_on(link);
    let shared: Vec<StepOutcome> = (0..300).map(|_| env.step(0.0)).skip(100).collect();
    let mean = |v: &[StepOutcome], f: fn(&StepOutcome) -> f64| v.iter().map(f).sum::<f64>() / v.len() as f64;
    assert!(mean(&alone, |s| s.o_lat) > 0.9, "alone: O_lat {}", mean(&alone, |s| s.o_lat));
    assert!(mean(&shared, |s| s.o_lat) < 0.6, "CUBIC fills the 48 ms queue: O_lat {}", mean(&shared, |s| s.o_lat));
    // The capacity stays the whole link's: O_thr is MOCC's share.
    assert!(shared.iter().all(|s| s.capacity_bps == 10e6));
}
