//! Tests of [`super`].

use super::*;
use crate::program::{Field, RawReport};
use crate::transport::Memory;
use crate::wire::build;
use polycc_algorithms::{AlgorithmKind, Decision, Report};
use std::net::Ipv4Addr;
use std::sync::{mpsc, Arc, Mutex};

type Sent = Arc<Mutex<std::collections::VecDeque<Vec<u8>>>>;

fn agent() -> (Agent<Memory>, Sent) {
    agent_with(AlgorithmKind::Reno, ReportInterval::Auto)
}

fn agent_with(kind: AlgorithmKind, report_interval: ReportInterval) -> (Agent<Memory>, Sent) {
    let (_tx, rx) = mpsc::channel();
    let sent = Arc::new(Mutex::new(Default::default()));
    let t = Memory { inbox: rx, sent: Arc::clone(&sent) };
    let cfg = AgentConfig {
        policy: Policy::Single(kind.default_config()),
        report_interval,
        pin_cwnd_packets: None,
        pin_rate: None,
        quiet_after: None,
    };
    (Agent::new(t, cfg, crate::logging::discard(), None).unwrap(), sent)
}

/// UPDATE_FIELDS' values: header, u32 count, then (u8 type, u32 index, u64 value) per field.
fn update_values(msg: &[u8]) -> Vec<u64> {
    assert_eq!(u16::from_le_bytes([msg[0], msg[1]]), wire::UPDATE_FIELDS);
    let n = u32::from_le_bytes(msg[8..12].try_into().unwrap()) as usize;
    (0..n).map(|i| u64::from_le_bytes(msg[12 + 13 * i + 5..12 + 13 * i + 13].try_into().unwrap())).collect()
}

/// PCC asks for four reports per RTT: once its first report gives it an RTT (20 ms), the
/// agent writes `Control.interval_us` = 5 ms into the flow's program, once; a user's fixed
/// `--report-interval` wins and is never rewritten.
#[test]
fn the_installed_program_reports_at_the_algorithms_cadence_unless_the_user_forced_one() {
    let (mut a, sent) = agent_with(AlgorithmKind::Vivace, ReportInterval::Auto);
    a.handle_datagram(&create(3), &());
    assert_eq!(a.datapaths[&()][&3].interval_us, 0, "once per RTT until the RTT is known");
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    let values = update_values(sent.lock().unwrap().back().unwrap());
    assert_eq!(values.len(), 3, "cwnd, rate and the interval: {values:?}");
    assert_eq!(values[2], 5_000);
    assert_eq!(a.datapaths[&()][&3].interval_us, 5_000);
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    assert_eq!(update_values(sent.lock().unwrap().back().unwrap()).len(), 2, "unchanged: not rewritten");

    let (mut a, sent) = agent_with(AlgorithmKind::Vivace, "10ms".parse().unwrap());
    a.handle_datagram(&create(3), &());
    assert_eq!(a.datapaths[&()][&3].interval_us, 10_000);
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    assert_eq!(update_values(sent.lock().unwrap().back().unwrap()).len(), 2, "the user's interval stays");
    // Algorithms without a wish keep the datapath's once-per-RTT cadence.
    let (mut a, _) = agent_with(AlgorithmKind::Cubic, ReportInterval::Auto);
    a.handle_datagram(&create(3), &());
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    assert_eq!(a.datapaths[&()][&3].interval_us, 0);
}

#[test]
fn interval_changes_under_a_quarter_are_not_rewritten() {
    assert!(!interval_moved(0, 0));
    assert!(interval_moved(0, 5_000) && interval_moved(5_000, 0));
    assert!(!interval_moved(8_000, 9_000));
    assert!(interval_moved(8_000, 12_000));
}

fn create(sid: u32) -> Vec<u8> {
    create_with(sid, 14_480, None)
}

fn create_with(sid: u32, init_cwnd: u32, adopted: Option<wire::Adoption>) -> Vec<u8> {
    build::create(&create_msg(sid, init_cwnd, adopted))
}

/// A CREATE as ccp.ko sends it (it reports undos) for a loopback flow.
fn create_msg(sid: u32, init_cwnd: u32, adopted: Option<wire::Adoption>) -> Create {
    Create {
        sid,
        init_cwnd,
        mss: 1448,
        src: Ipv4Addr::LOCALHOST.into(),
        src_port: 1,
        dst: Ipv4Addr::LOCALHOST.into(),
        dst_port: 2,
        cong_alg: "ccp".into(),
        adopted,
        undo_signal: true,
    }
}

/// Each value at the register index the compiled program gave it.
fn fields(agent: &Agent<Memory>, raw: &RawReport) -> [u64; Field::COUNT] {
    agent.program().measure_fields(raw)
}

#[test]
fn hostile_and_stale_messages_are_skipped_and_the_loop_goes_on() {
    let (mut a, sent) = agent();
    a.handle_datagram(&[0xff; 5], &());
    a.handle_datagram(&build::measure(9, 1, &[1, 2]), &()); // unknown flow
    let mut update = build::ready(0);
    update[0] = wire::UPDATE_FIELDS as u8; // portus panics on this one
    a.handle_datagram(&update, &());
    a.handle_datagram(&create(3), &());
    let uid = a.program().uid;
    a.handle_datagram(&build::measure(3, uid + 7, &[0; Field::COUNT]), &());
    a.handle_datagram(&build::measure(3, uid, &[0; 4]), &());
    let s = a.stats();
    assert_eq!((s.malformed, s.unknown_flow_reports, s.stale_reports, s.reports), (3, 1, 1, 0), "{s:?}");
    // INSTALL then CHANGE_PROG for the flow; nothing for the skipped messages.
    let sent = sent.lock().unwrap();
    let types: Vec<u16> = sent.iter().map(|m| u16::from_le_bytes([m[0], m[1]])).collect();
    assert_eq!(types, [wire::INSTALL, wire::CHANGE_PROG]);
}

#[test]
fn a_report_is_answered_with_the_controllers_window() {
    let (mut a, sent) = agent();
    a.handle_datagram(&create(3), &());
    let raw = RawReport::from_pairs(&[
        (Field::AckedBytes, 14_480),
        (Field::AckedPackets, 10),
        (Field::RttSamples, 10),
        (Field::RttSumUs, 400_000),
        (Field::RttMinUs, 40_000),
        (Field::RttLastUs, 40_000),
        (Field::IntervalUs, 40_000),
    ]);
    let uid = a.program().uid;
    a.handle_datagram(&build::measure(3, uid, &fields(&a, &raw)), &());
    assert_eq!(a.stats().reports, 1);
    let sent = sent.lock().unwrap();
    let update = sent.back().unwrap();
    assert_eq!(u16::from_le_bytes([update[0], update[1]]), wire::UPDATE_FIELDS);
    // UPDATE_FIELDS: header, u32 count, then (u8 type, u32 index, u64 value) per field.
    assert_eq!(
        u32::from_le_bytes(update[8..12].try_into().unwrap()),
        4,
        "cwnd and the growth registers (cap, delay exit, cap after it): Reno paces nothing"
    );
    let cwnd = u64::from_le_bytes(update[17..25].try_into().unwrap());
    assert_eq!(cwnd, 2 * 14_480, "slow start doubles the 10-packet window");
    // Still in slow start: the program may grow the window per ACK by one more doubling.
    let cap = u64::from_le_bytes(update[30..38].try_into().unwrap());
    assert_eq!(cap, 4 * 14_480, "per-ACK growth up to twice the new window");
    let exit_rtt_us = u64::from_le_bytes(update[43..51].try_into().unwrap());
    assert_eq!(exit_rtt_us, crate::program::NO_RTT_SAMPLE_US, "Reno has no HyStart: no delay exit");
    // The close (a MEASURE without fields) ends the flow.
    drop(sent);
    a.handle_datagram(&build::measure(3, uid, &[]), &());
    assert_eq!(a.stats().flows_closed, 1);
}

/// One once-per-RTT report of `packets` delivered at a 20 ms RTT, `lost` lost.
fn rtt_report(a: &Agent<Memory>, packets: u64, lost: u64) -> Vec<u8> {
    let raw = RawReport::from_pairs(&[
        (Field::AckedBytes, packets * 1448),
        (Field::AckedPackets, packets),
        (Field::LostMarked, lost),
        (Field::RttSamples, packets.max(1)),
        (Field::RttSumUs, 20_000 * packets.max(1)),
        (Field::RttMinUs, 20_000),
        (Field::RttLastUs, 20_000),
        (Field::IntervalUs, 20_000),
        (Field::DeliveryRate, packets * 1448 * 50),
        (Field::InflightBytes, packets * 1448),
        (Field::PendingBytes, 1 << 20),
    ]);
    build::measure(3, a.program().uid, &fields(a, &raw))
}

fn installed(a: &Agent<Memory>) -> Install {
    a.datapaths[&()][&3].installed
}

/// The kernel's undo of a spurious loss reduction reaches the controller through the events
/// register, for a datapath that says at CREATE that it reports undos (ccp.ko and the BPF
/// datapath do): Reno takes its halving back. For any other datapath those bits are its ECN bytes.
#[test]
fn an_undo_from_the_datapath_takes_the_controllers_reduction_back() {
    let undone_window = |undo_signal: bool| {
        let (mut a, _sent) = agent();
        a.handle_datagram(&build::create(&Create { undo_signal, ..create_msg(3, 14_480, None) }), &());
        a.handle_datagram(&rtt_report(&a, 10, 0), &());
        let grown = installed(&a).cwnd_bytes;
        a.handle_datagram(&rtt_report(&a, 0, 3), &());
        let halved = installed(&a).cwnd_bytes;
        assert!(halved < grown, "{grown} -> {halved}");
        let undo = RawReport::from_pairs(&[
            (Field::Events, 1 << crate::program::UNDO_SHIFT),
            (Field::IntervalUs, 1_000),
            (Field::PendingBytes, 1 << 20),
        ]);
        a.handle_datagram(&build::measure(3, a.program().uid, &fields(&a, &undo)), &());
        (grown, installed(&a).cwnd_bytes)
    };
    let (grown, after) = undone_window(true);
    assert_eq!(after, grown, "the window from before the spurious loss");
    let (grown, after) = undone_window(false);
    assert!(after < grown, "no undo signal declared: the bits are not an undo ({after} of {grown})");
}

#[test]
fn every_policy_takes_over_a_live_flow_from_its_window_without_collapse() {
    let fused = polycc_algorithms::FusionPolicy {
        pilot: AlgorithmKind::Bbr.default_config(),
        copilots: vec![AlgorithmKind::Cubic.default_config(), AlgorithmKind::Vegas.default_config()],
        fusion: Default::default(),
        fuse_on: Default::default(),
    };
    let targets = AlgorithmKind::classic()
        // MOCC needs a model file. PCC (Allegro, Vivace) ignores syncs before its first rate,
        // so it starts over from its initial window: a known gap (docs/agent.md, "Live changes").
        // The toy (tests' registry example) is a fixed window: it keeps its own by definition.
        .filter(|k| !["mocc", "allegro", "vivace", "toy"].contains(&k.name()))
        .map(|k| Policy::Single(k.default_config()))
        .chain([Policy::Fused(fused)]);
    for target in targets {
        let (mut a, sent) = agent();
        a.handle_datagram(&create(3), &());
        // Reno: slow start to 80 packets, a loss, avoidance at ~40.
        for packets in [10, 20, 40] {
            a.handle_datagram(&rtt_report(&a, packets, 0), &());
        }
        a.handle_datagram(&rtt_report(&a, 1, 1), &());
        a.handle_datagram(&rtt_report(&a, 40, 0), &());
        let before = installed(&a).cwnd_bytes;
        assert!((40 * 1448..=41 * 1448).contains(&before), "{before}");
        let desc = target.describe();
        let moved = a.switch(&(), 3, target, Some(9));
        assert_eq!((moved.from.as_str(), moved.to.as_str(), moved.rule), ("reno", desc.as_str(), Some(9)));
        let after = installed(&a).cwnd_bytes;
        let ratio = f64::from(after) / f64::from(before);
        assert!((0.97..=1.03).contains(&ratio), "{desc}: cwnd {before} -> {after} at the switch");
        assert_eq!(moved.cwnd_after_bytes, after);
        // The switch itself sends the new window.
        let last = sent.lock().unwrap().back().cloned().unwrap();
        assert_eq!(u16::from_le_bytes([last[0], last[1]]), wire::UPDATE_FIELDS, "{desc}");
        // A few RTTs on at the same delivery: no drop to the initial window (10 packets).
        let mut lowest = after;
        for _ in 0..5 {
            a.handle_datagram(&rtt_report(&a, 40, 0), &());
            lowest = lowest.min(installed(&a).cwnd_bytes);
        }
        assert!(lowest > 20 * 1448, "{desc}: the window fell to {lowest} after the switch (before: {before})");
        assert_eq!(a.datapaths[&()][&3].handovers, 1);
    }
}

#[test]
fn a_flow_re_announced_by_the_datapath_continues_from_its_window_out_of_slow_start() {
    let adopted = |adopted: Option<wire::Adoption>| {
        let (mut a, _) = agent_with(AlgorithmKind::Cubic, ReportInterval::Auto);
        a.handle_datagram(&create_with(4, 120 * 1448, adopted), &());
        let in_slow_start = a.datapaths[&()][&4].cc.in_slow_start();
        (u64::from(a.datapaths[&()][&4].installed.cwnd_bytes) / 1448, in_slow_start)
    };
    // A flow past slow start (ssthresh 100 packets): 120 packets, congestion avoidance.
    let state =
        wire::Adoption { ssthresh: Some(100 * 1448), srtt_us: Some(45_000), min_rtt_us: Some(40_000), rate: None };
    assert_eq!(adopted(Some(state)), (120, false));
    // One still in slow start keeps slow start from its window.
    assert_eq!(adopted(Some(wire::Adoption { ssthresh: None, ..state })), (120, true));
    // A new flow with a large initial window (e.g. a route's initcwnd) starts in slow start.
    assert_eq!(adopted(None), (120, true));
}

#[test]
fn a_window_based_successor_stays_out_of_slow_start_when_the_flow_had_left_it() {
    let (mut a, _) = agent();
    a.handle_datagram(&create(3), &());
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    a.handle_datagram(&rtt_report(&a, 1, 1), &());
    let before = installed(&a).cwnd_bytes;
    a.switch(&(), 3, Policy::Single(AlgorithmKind::Cubic.default_config()), None);
    assert!(!a.datapaths[&()][&3].cc.in_slow_start());
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    assert!(installed(&a).cwnd_bytes < before * 2, "no doubling: {before} -> {}", installed(&a).cwnd_bytes);
    // From a flow still in slow start, the successor keeps growing as slow start does.
    let (mut a, _) = agent();
    a.handle_datagram(&create(3), &());
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    a.switch(&(), 3, Policy::Single(AlgorithmKind::Vegas.default_config()), None);
    assert!(a.datapaths[&()][&3].cc.in_slow_start());
}

/// The registry's toy (a fixed 20-packet window, feature `toy`, on in tests) runs a flow through
/// the agent like any algorithm: its window is installed after every report, loss or not.
#[test]
fn a_registered_algorithm_runs_a_flow_through_the_agent() {
    let (mut a, sent) = agent_with(AlgorithmKind::Toy, ReportInterval::Auto);
    a.handle_datagram(&create(3), &());
    for lost in [0, 5, 0] {
        a.handle_datagram(&rtt_report(&a, 10, lost), &());
        let values = update_values(sent.lock().unwrap().back().unwrap());
        assert_eq!(values[0], 20 * 1448, "the toy's window: {values:?}");
    }
}

/// A controller that keeps its window and remembers every report it was given.
#[derive(Debug)]
struct Recorder {
    seen: Arc<Mutex<Vec<Report>>>,
    cwnd_bytes: u64,
}

impl CongestionControl for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn on_report(&mut self, report: &Report) -> Decision {
        self.seen.lock().unwrap().push(report.clone());
        self.decision()
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: self.cwnd_bytes, rate: None }
    }
}

/// One report with `pending` bytes queued and `in_flight` bytes in flight under a 10-packet
/// window: (app-limited to the statistics, app-limited in the report the policy was given).
fn app_limited_seen(pending: u64, in_flight: u64) -> (bool, bool) {
    let (mut a, _) = agent();
    a.handle_datagram(&create(3), &());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let flow = a.datapaths.get_mut(&()).unwrap().get_mut(&3).unwrap();
    assert_eq!(flow.installed.cwnd_bytes, 14_480);
    flow.cc = Box::new(Recorder { seen: Arc::clone(&seen), cwnd_bytes: 14_480 });
    let raw = RawReport::from_pairs(&[
        (Field::AckedBytes, 2 * 1448),
        (Field::AckedPackets, 2),
        (Field::RttSamples, 2),
        (Field::RttSumUs, 40_000),
        (Field::RttMinUs, 20_000),
        (Field::RttLastUs, 20_000),
        (Field::IntervalUs, 20_000),
        (Field::InflightBytes, in_flight),
        (Field::PendingBytes, pending),
    ]);
    a.handle_datagram(&build::measure(3, a.program().uid, &fields(&a, &raw)), &());
    let flow = a.datapaths.get_mut(&()).unwrap().get_mut(&3).unwrap();
    let record = flow.stats.take(&crate::stats::FlowMeta::default(), 1, 0.0, 1.0);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    (record.app_limited_s > 0.0, seen[0].app_limited)
}

/// Before, convert.rs always said `app_limited: false` to the policy while the statistics
/// counted the same report as app-limited by their own rule.
#[test]
fn an_application_limited_report_is_app_limited_to_the_statistics_and_the_policy_alike() {
    assert_eq!(app_limited_seen(0, 2 * 1448), (true, true), "nothing queued, 2 of 10 packets in flight");
    assert_eq!(app_limited_seen(1 << 20, 2 * 1448), (false, false), "a bulk sender has data queued");
    assert_eq!(app_limited_seen(0, 9 * 1448), (false, false), "no room for one more packet");
}

/// An agent with no module to talk to says so at start, again every minute, and once when
/// the module comes.
#[test]
fn waiting_for_the_module_is_said_again_until_it_comes() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut w = WaitingFor::new(Some("no module"), t0);
    assert_eq!(w.check(Some("no module"), at(59)), None);
    assert_eq!(w.check(Some("no module"), at(60)), Some(Waited::Still("no module", Duration::from_secs(60))));
    assert_eq!(w.check(Some("no module"), at(61)), None, "not again before another minute");
    assert_eq!(w.check(Some("no module"), at(121)), Some(Waited::Still("no module", Duration::from_secs(121))));
    assert_eq!(w.check(None, at(130)), Some(Waited::Over));
    assert_eq!(w.check(None, at(300)), None, "once");
    let mut w = WaitingFor::new(None, t0);
    assert_eq!(w.check(None, at(600)), None, "a datapath that was there from the start: nothing to say");
}

/// `--pin-rate`: every flow is paced at the pinned rate whatever its reports say (losses too),
/// in a window the rate fills in 0.5 s, or the `--pin-cwnd` window when both are given; the
/// report cadence stays the datapath's.
#[test]
fn a_pinned_rate_is_installed_and_held_through_losses() {
    let pinned = |cwnd: Option<u64>| {
        let (_tx, rx) = mpsc::channel();
        let t = Memory { inbox: rx, sent: Arc::new(Mutex::new(Default::default())) };
        let cfg = AgentConfig {
            policy: Policy::Single(AlgorithmKind::Vivace.default_config()),
            report_interval: ReportInterval::Auto,
            pin_cwnd_packets: cwnd,
            pin_rate: Some(Rate::from_mbps(45.0)),
            quiet_after: None,
        };
        Agent::new(t, cfg, crate::logging::discard(), None).unwrap()
    };
    let mut a = pinned(None);
    a.handle_datagram(&create(3), &());
    for lost in [0, 5, 0] {
        a.handle_datagram(&rtt_report(&a, 10, lost), &());
        let i = installed(&a);
        assert_eq!(i.rate_bytes_per_sec, Some(45_000_000 / 8), "{i:?}");
        assert_eq!(u64::from(i.cwnd_bytes), 45_000_000 / 8 / 2, "0.5 s at the rate: {i:?}");
    }
    assert_eq!(a.datapaths[&()][&3].interval_us, 0, "Vivace's own cadence is not asked for");
    let mut a = pinned(Some(12));
    a.handle_datagram(&create(3), &());
    a.handle_datagram(&rtt_report(&a, 10, 0), &());
    assert_eq!(installed(&a).cwnd_bytes, 12 * 1448);
}
