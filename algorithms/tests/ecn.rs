//! ECN: the loss-based controllers answer a congestion mark as they answer a loss, once per
//! window (RFC 3168 section 6.1.2, as Linux's Reno and CUBIC do through their CWR state), and a
//! mark alone retransmits nothing, so it is not a loss (`has_loss` stays false).

use polycc_algorithms::testing::ack_report;
use polycc_algorithms::{AlgorithmKind, CongestionControl, FlowInfo, Report};
use std::time::Duration;

const MSS: u64 = 1448;
const RTT: Duration = Duration::from_millis(40);

fn marked(now: Duration, ce: u64) -> Report {
    Report { packets_ce: ce, ..ack_report(now, RTT, 4 * MSS, MSS) }
}

/// Window after growing with `rounds` full-window reports, then one marked report.
fn grown(cc: &mut dyn CongestionControl, rounds: u32) -> u64 {
    let mut cwnd = cc.decision().cwnd_bytes;
    for i in 1..=rounds {
        cwnd = cc.on_report(&ack_report(RTT * i, RTT, cwnd, MSS)).cwnd_bytes;
    }
    cwnd
}

#[test]
fn reno_cubic_and_vegas_answer_a_mark_once_per_window() {
    let info = FlowInfo { mss_bytes: MSS, init_cwnd_bytes: 10 * MSS };
    for (kind, beta) in [(AlgorithmKind::Reno, 0.5), (AlgorithmKind::Cubic, 0.7), (AlgorithmKind::Vegas, 0.5)] {
        let mut cc = kind.default_config().build(info);
        let before = grown(cc.as_mut(), 4);
        assert!(before >= 80 * MSS, "{kind:?}: slow start reached {} packets", before / MSS);
        let t = RTT * 5;
        assert!(!marked(t, 3).has_loss() && marked(t, 3).congestion_signal());
        let after = cc.on_report(&marked(t, 3)).cwnd_bytes;
        let want = (before as f64 * beta) as u64;
        assert!(
            after.abs_diff(want) <= 2 * MSS,
            "{kind:?}: {} -> {} packets on a mark, want ~{}",
            before / MSS,
            after / MSS,
            want / MSS
        );
        // The same window's later marks (the receiver echoes until it sees CWR) are one episode.
        let again = cc.on_report(&marked(t + RTT / 4, 5)).cwnd_bytes;
        assert!(again >= after, "{kind:?}: a second reduction in the same window: {} -> {}", after / MSS, again / MSS);
        // A mark a few RTTs later is a new episode.
        let later = cc.on_report(&marked(t + 4 * RTT, 1)).cwnd_bytes;
        assert!(later < again * 9 / 10, "{kind:?}: no answer to a new mark: {} -> {}", again / MSS, later / MSS);
    }
}

#[test]
fn unmarked_reports_grow_as_before() {
    let info = FlowInfo { mss_bytes: MSS, init_cwnd_bytes: 10 * MSS };
    for kind in [AlgorithmKind::Reno, AlgorithmKind::Cubic] {
        let mut cc = kind.default_config().build(info);
        let cwnd = grown(cc.as_mut(), 3);
        assert_eq!(cwnd, 80 * MSS, "{kind:?}: slow start doubles per RTT without marks");
    }
}
