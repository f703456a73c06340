//! A bulk TCP-like sender: packet bookkeeping, loss detection, RTO, rate samples, and the
//! CCP-like report accumulator that feeds the flow's controller.

use crate::config::{ReportInterval, SimConfig};
use crate::metrics::RttHistogram;
use crate::{nanos, Nanos};
use polycc_algorithms::{ack_growth, CongestionControl, FlowInfo, Policy, Rate, Report};
use std::collections::VecDeque;
use std::time::Duration;

/// Packets acknowledged after a hole before the hole counts as lost (RFC 5681 dupthresh).
const DUPTHRESH_PACKETS: u64 = 3;
/// Linux's minimum and initial retransmission timeouts.
const MIN_RTO: Duration = Duration::from_millis(200);
const INITIAL_RTO: Duration = Duration::from_secs(1);
const MAX_RTO: Duration = Duration::from_secs(60);
/// ACKs at most this far apart belong to one ACK train (HyStart).
const ACK_TRAIN_GAP: Duration = Duration::from_millis(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PacketState {
    Outstanding,
    Acked,
    Lost,
}

#[derive(Clone, Copy, Debug)]
struct SentPacket {
    sent_at: Nanos,
    size: u64,
    state: PacketState,
    /// Connection state when it was sent (Linux tcp_rate.c).
    delivered: u64,
    delivered_time: Nanos,
    first_sent_time: Nanos,
}

pub(crate) enum SendOutcome {
    Send,
    WaitUntil(Nanos),
    Blocked,
}

/// What the datapath accumulates between two reports.
#[derive(Default)]
struct Accumulator {
    start: Nanos,
    bytes_acked: u64,
    packets_acked: u64,
    packets_sacked: u64,
    packets_lost: u64,
    timeout: bool,
    /// The timeout was spurious (F-RTO): the kernel undoes its reduction and tells the agent.
    undo: bool,
    delay_exit: bool,
    rtt_min: Option<Nanos>,
    /// (time, rtt) of every sample: split into halves when the report closes.
    samples: Vec<(Nanos, Nanos)>,
    delivery_rate: Option<f64>,
    train_start: Nanos,
    last_ack: Option<Nanos>,
    longest_train: Nanos,
}

pub(crate) struct Sender {
    cc: Box<dyn CongestionControl>,
    start: Nanos,
    mss: u64,
    interval: ReportInterval,
    cwnd: u64,
    rate: Option<Rate>,
    next_send_at: Nanos,
    pub(crate) pending_timer: Option<Nanos>,
    /// Packets from `first_id` on, in send order.
    packets: VecDeque<SentPacket>,
    first_id: u64,
    next_id: u64,
    inflight: u64,
    delivered: u64,
    delivered_time: Nanos,
    first_sent_time: Nanos,
    srtt: Option<Nanos>,
    rttvar: Nanos,
    last_rtt: Option<Nanos>,
    rto: Nanos,
    /// When the retransmission timer expires (moves on every fresh ACK).
    rto_deadline: Option<Nanos>,
    /// When the one pending timer event fires; it re-arms itself if the deadline moved later.
    rto_event_at: Option<Nanos>,
    /// F-RTO (RFC 5682, on by default in Linux): after a timeout, packets below this id were sent
    /// before it. If the first ACK after the timeout is for one of them, the receiver had the
    /// original: the timer fired on late ACKs (jitter, a stall), not on a loss, and the kernel
    /// undoes the timeout's reduction (`tcp_try_undo_loss`), which the agent hears as
    /// [`Report::undo`]. Before 2026-12-02 the simulator kept every spurious timeout's collapse;
    /// with the loss window of 2 packets that made CUBIC under +/-100 ms of ACK jitter far weaker
    /// than the kernel's.
    frto_below: Option<u64>,
    last_send_at: Nanos,
    acc: Accumulator,
    rtt_hist: RttHistogram,
    sent: u64,
    /// Packets the sender declared lost (dupthresh or RTO; includes spurious declarations).
    lost: u64,
    /// Packets the bottleneck actually dropped.
    dropped: u64,
    reports: u64,
    /// Per-ACK slow start until the next decision, with its delay exit, as ccp.ko's program
    /// runs it ([`ack_growth`]).
    growth: ack_growth::GrowthState,
    /// The window of the last decision, before per-ACK growth.
    decided_cwnd: u64,
    /// [`SimConfig::pacing_efficiency`]: paced packets leave at this fraction of the rate set.
    pacing_efficiency: f64,
}

impl Sender {
    pub(crate) fn new(policy: &Policy, cfg: &SimConfig, start: Nanos) -> Sender {
        Sender::with_controller(policy.build(FlowInfo::with_mss(cfg.mss_bytes)), cfg, start)
    }

    /// A sender running `cc` (built elsewhere, e.g. by the training environment).
    pub(crate) fn with_controller(cc: Box<dyn CongestionControl>, cfg: &SimConfig, start: Nanos) -> Sender {
        let d = cc.decision();
        let growth = ack_growth::GrowthState::new(ack_growth::growth(cc.as_ref(), &d), Duration::from_nanos(start));
        Sender {
            cc,
            start,
            mss: cfg.mss_bytes,
            interval: cfg.report_interval,
            cwnd: d.cwnd_bytes.max(cfg.mss_bytes),
            rate: d.rate.filter(|r| !r.is_zero()),
            next_send_at: start,
            pending_timer: None,
            packets: VecDeque::new(),
            first_id: 0,
            next_id: 0,
            inflight: 0,
            delivered: 0,
            delivered_time: start,
            first_sent_time: start,
            srtt: None,
            rttvar: 0,
            last_rtt: None,
            rto: nanos(INITIAL_RTO),
            rto_deadline: None,
            rto_event_at: None,
            frto_below: None,
            last_send_at: start,
            pacing_efficiency: cfg.pacing_efficiency,
            acc: Accumulator { start, train_start: start, ..Accumulator::default() },
            rtt_hist: RttHistogram::default(),
            sent: 0,
            lost: 0,
            dropped: 0,
            reports: 0,
            growth,
            decided_cwnd: d.cwnd_bytes.max(cfg.mss_bytes),
        }
    }

    pub(crate) fn cwnd_bytes(&self) -> u64 {
        self.cwnd
    }
    pub(crate) fn rate(&self) -> Option<Rate> {
        self.rate
    }
    /// The controller's PCC decisions since the last call.
    pub(crate) fn take_trace(&mut self) -> Vec<polycc_algorithms::pcc::MiTrace> {
        self.cc.take_trace()
    }

    pub(crate) fn inflight_bytes(&self) -> u64 {
        self.inflight
    }
    pub(crate) fn last_rtt_ns(&self) -> Option<Nanos> {
        self.last_rtt
    }
    pub(crate) fn rtt_histogram(&self) -> &RttHistogram {
        &self.rtt_hist
    }
    pub(crate) fn packets_sent(&self) -> u64 {
        self.sent
    }
    pub(crate) fn packets_lost(&self) -> u64 {
        self.lost
    }
    pub(crate) fn reports(&self) -> u64 {
        self.reports
    }
    pub(crate) fn packets_dropped(&self) -> u64 {
        self.dropped
    }
    /// The network's loss rate for this flow: packets dropped by the bottleneck over packets sent.
    pub(crate) fn loss_rate(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.dropped as f64 / self.sent as f64
        }
    }
    /// The bottleneck dropped one of this flow's packets (random loss or a full buffer).
    pub(crate) fn on_drop(&mut self) {
        self.dropped += 1;
    }

    pub(crate) fn next_send(&self, now: Nanos) -> SendOutcome {
        if now < self.start || self.inflight + self.mss > self.cwnd {
            SendOutcome::Blocked
        } else if self.rate.is_some() && now < self.next_send_at {
            SendOutcome::WaitUntil(self.next_send_at)
        } else {
            SendOutcome::Send
        }
    }

    /// Record a transmission; returns its packet id.
    pub(crate) fn on_send(&mut self, now: Nanos, size: u64) -> u64 {
        if self.inflight == 0 {
            // Linux tcp_rate.c: restart the send interval when the pipe was empty.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        self.packets.push_back(SentPacket {
            sent_at: now,
            size,
            state: PacketState::Outstanding,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
        });
        self.inflight += size;
        self.sent += 1;
        self.last_send_at = now;
        if let Some(r) = self.rate {
            let gap = self.pacing_gap(size, r);
            self.next_send_at = self.next_send_at.max(now.saturating_sub(gap)) + gap;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A timer event to schedule, if none is pending and data is in flight. Keeping one
    /// lazily re-armed event (instead of one per ACK) halves the simulator's event count.
    pub(crate) fn rto_to_arm(&mut self, now: Nanos) -> Option<Nanos> {
        if self.inflight == 0 {
            self.rto_deadline = None;
            return None;
        }
        let deadline = *self.rto_deadline.get_or_insert(now + self.rto);
        if self.rto_event_at.is_some() {
            return None;
        }
        self.rto_event_at = Some(deadline);
        Some(deadline)
    }

    fn mark_lost(&mut self, idx: usize) {
        let p = &mut self.packets[idx];
        if p.state == PacketState::Outstanding {
            p.state = PacketState::Lost;
            self.inflight -= p.size;
            self.lost += 1;
            self.acc.packets_lost += 1;
        }
    }

    fn trim(&mut self) {
        while self.packets.front().is_some_and(|p| p.state != PacketState::Outstanding) {
            self.packets.pop_front();
            self.first_id += 1;
        }
    }

    fn record_rtt(&mut self, now: Nanos, rtt: Nanos) {
        self.rtt_hist.record(rtt);
        self.last_rtt = Some(rtt);
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                self.rttvar = (3 * self.rttvar + s.abs_diff(rtt)) / 4;
                self.srtt = Some((7 * s + rtt) / 8);
            }
        }
        self.rto = (self.srtt.unwrap_or(rtt) + 4 * self.rttvar).clamp(nanos(MIN_RTO), nanos(MAX_RTO));
        self.acc.rtt_min = Some(self.acc.rtt_min.map_or(rtt, |m| m.min(rtt)));
        self.acc.samples.push((now, rtt));
    }

    /// An ACK for packet `id` arrived. Returns the report's throughput (Mbit/s) if one was sent.
    pub(crate) fn on_ack(&mut self, now: Nanos, id: u64) -> Option<f64> {
        // The first ACK after a timeout tells whether it was spurious; an undo is reported at once.
        if let Some(below) = self.frto_below.take() {
            self.acc.undo |= id < below;
        }
        // Gone (trimmed) or no longer outstanding: declared lost before its ACK came, or acked.
        let outstanding = |i: &usize| self.packets.get(*i).is_some_and(|p| p.state == PacketState::Outstanding);
        let Some(idx) = id.checked_sub(self.first_id).map(|i| i as usize).filter(outstanding) else {
            return self.acc.undo.then(|| self.report(now));
        };
        let p = self.packets[idx];
        if idx > 0 {
            // An earlier packet is still outstanding (the front always is, after `trim`): this
            // ACK arrived above a hole, as a SACK would.
            self.acc.packets_sacked += 1;
        }
        self.packets[idx].state = PacketState::Acked;
        self.inflight -= p.size;
        self.delivered += p.size;
        self.delivered_time = now;
        self.first_sent_time = p.sent_at;
        // Delivery rate (tcp_rate.c): max of the send and ACK intervals.
        let interval = (p.sent_at - p.first_sent_time).max(now - p.delivered_time);
        if interval > 0 {
            let r = (self.delivered - p.delivered) as f64 / (interval as f64 / 1e9);
            self.acc.delivery_rate = Some(self.acc.delivery_rate.map_or(r, |m: f64| m.max(r)));
        }
        self.record_rtt(now, now - p.sent_at);
        self.acc.bytes_acked += p.size;
        self.acc.packets_acked += 1;
        match self.acc.last_ack {
            Some(last) if now - last <= nanos(ACK_TRAIN_GAP) => {}
            _ => self.acc.train_start = now,
        }
        self.acc.last_ack = Some(now);
        self.acc.longest_train = self.acc.longest_train.max(now - self.acc.train_start);
        // Loss detection: every outstanding packet DUPTHRESH or more before this one.
        let mut lost_now = false;
        if idx as u64 >= DUPTHRESH_PACKETS {
            for i in 0..=(idx - DUPTHRESH_PACKETS as usize) {
                if self.packets[i].state == PacketState::Outstanding {
                    self.mark_lost(i);
                    lost_now = true;
                }
            }
        }
        if lost_now {
            self.growth.on_loss();
        } else {
            self.cwnd = self.growth.grow(self.cwnd, p.size, self.inflight);
        }
        // The delay exit counts this ACK's RTT sample after its growth, as the program does.
        let exited = self.growth.on_rtt_sample(Duration::from_nanos(now), Duration::from_nanos(now - p.sent_at));
        self.acc.delay_exit |= exited;
        self.trim();
        // Fresh ACK: restart the retransmission timer and its backoff.
        self.rto_deadline = None;
        // The cadence the agent gives this algorithm through ccp.ko (PCC and Copa four reports per
        // RTT, MOCC every 10 ms), else once per latest RTT sample.
        let due = self.interval.for_algorithm(self.cc.report_interval()).map_or(self.last_rtt.unwrap_or(0), nanos);
        (lost_now || exited || self.acc.undo || now - self.acc.start >= due).then(|| self.report(now))
    }

    /// The timer event fired: a timeout if the deadline is now, else nothing (the caller
    /// re-arms at the moved deadline).
    pub(crate) fn on_rto(&mut self, now: Nanos) -> Option<f64> {
        self.rto_event_at = None;
        if self.inflight == 0 || self.rto_deadline.is_none_or(|d| d > now) {
            return None;
        }
        for i in 0..self.packets.len() {
            self.mark_lost(i);
        }
        self.trim();
        self.acc.timeout = true;
        self.frto_below.get_or_insert(self.next_id);
        self.growth.on_loss();
        self.rto = (self.rto * 2).min(nanos(MAX_RTO));
        self.rto_deadline = None;
        Some(self.report(now))
    }

    /// Close the accumulator into a report, run the controller, apply its decision.
    fn report(&mut self, now: Nanos) -> f64 {
        let acc = std::mem::take(&mut self.acc);
        let interval = now - acc.start;
        let mid = acc.start + interval / 2;
        let mean = |xs: &mut dyn Iterator<Item = Nanos>| {
            let (sum, n) = xs.fold((0u128, 0u64), |(s, n), x| (s + x as u128, n + 1));
            (n > 0).then(|| Duration::from_nanos((sum / n as u128) as u64))
        };
        let rtt_sum: u128 = acc.samples.iter().map(|s| s.1 as u128).sum();
        let report = Report {
            now: Duration::from_nanos(now - self.start),
            interval: Duration::from_nanos(interval),
            bytes_acked: acc.bytes_acked,
            packets_acked: acc.packets_acked,
            packets_sacked: acc.packets_sacked,
            packets_lost: acc.packets_lost,
            // The simulated bottlenecks drop; none marks ECN.
            packets_ce: 0,
            timeout: acc.timeout,
            // Simulated ACKs are never reordered, so only a timeout is found spurious (F-RTO).
            undo: acc.undo,
            delay_exit: acc.delay_exit,
            rtt_last: self.last_rtt.filter(|_| !acc.samples.is_empty()).map(Duration::from_nanos),
            rtt_min: acc.rtt_min.map(Duration::from_nanos),
            rtt_sum: Duration::from_nanos(u64::try_from(rtt_sum).unwrap_or(u64::MAX)),
            rtt_samples: acc.samples.len() as u64,
            rtt_first_half_mean: mean(&mut acc.samples.iter().filter(|s| s.0 < mid).map(|s| s.1)),
            rtt_second_half_mean: mean(&mut acc.samples.iter().filter(|s| s.0 >= mid).map(|s| s.1)),
            delivery_rate: acc.delivery_rate.map(Rate::from_bytes_per_sec),
            bytes_in_flight: self.inflight,
            packets_in_flight: self.inflight / self.mss.max(1),
            bytes_pending: 0,
            ack_train: Duration::from_nanos(acc.longest_train),
            // Bulk: never app-limited (the agent's rule, `report::app_limited`, reads a real
            // pending count; this sender has no application queue to count).
            app_limited: false,
        };
        let (d, growth) = ack_growth::decide(self.cc.as_mut(), &report, self.decided_cwnd, self.cwnd);
        self.apply(d);
        self.decided_cwnd = self.cwnd;
        self.growth.install(growth);
        self.growth.new_round(Duration::from_nanos(now));
        self.reports += 1;
        let mut samples = acc.samples;
        samples.clear();
        self.acc = Accumulator { start: now, train_start: now, samples, ..Accumulator::default() };
        report.ack_rate().mbps()
    }

    /// The controller was changed from outside (a [`crate::Stepper`]): apply its decision.
    pub(crate) fn refresh_decision(&mut self) {
        let d = self.cc.decision();
        self.apply(d);
        self.decided_cwnd = self.cwnd;
        self.growth.install(ack_growth::growth(self.cc.as_ref(), &d));
    }

    /// The time between two paced packets of `size` bytes at `rate`: longer than the rate says by
    /// the host's [`SimConfig::pacing_efficiency`]. The controller is told the rate it set, as
    /// the guest's kernel reports it.
    fn pacing_gap(&self, size: u64, rate: Rate) -> Nanos {
        (size as f64 / (rate.bytes_per_sec() * self.pacing_efficiency) * 1e9).ceil() as Nanos
    }

    fn apply(&mut self, d: polycc_algorithms::Decision) {
        self.cwnd = d.cwnd_bytes.max(self.mss);
        let old_rate = self.rate;
        self.rate = d.rate.filter(|r| !r.is_zero());
        if let (Some(r), true) = (self.rate, self.rate != old_rate) {
            // Re-time the next paced send: one packet at the new rate after the last one.
            let gap = self.pacing_gap(self.mss, r);
            self.next_send_at = self.last_send_at.saturating_add(gap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LinkConfig, SimConfig};
    use polycc_algorithms::AlgorithmKind;

    const MS: Nanos = 1_000_000;

    fn sender(interval: ReportInterval) -> Sender {
        let mut cfg = SimConfig::staggered(
            LinkConfig::default(),
            &Policy::Single(AlgorithmKind::Reno.default_config()),
            1,
            Duration::ZERO,
            Duration::from_secs(1),
        );
        cfg.report_interval = interval;
        Sender::new(&cfg.flows[0].policy, &cfg, 0)
    }

    #[test]
    fn a_hole_is_lost_once_three_later_packets_are_acked_and_later_acks_count_as_sacks() {
        let mut s = sender(ReportInterval::Fixed(Duration::from_secs(10)));
        for _ in 0..6 {
            s.on_send(0, 1500);
        }
        // Packet 0 is missing; 1 and 2 arrive: SACKs, nothing lost yet.
        assert!(s.on_ack(40 * MS, 1).is_none());
        assert!(s.on_ack(41 * MS, 2).is_none());
        assert_eq!((s.acc.packets_sacked, s.acc.packets_lost), (2, 0));
        // The third packet above the hole declares it lost, and the loss triggers a report at once.
        assert!(s.on_ack(42 * MS, 3).is_some(), "a loss is reported immediately");
        assert_eq!(s.packets_lost(), 1);
        assert_eq!(s.inflight_bytes(), 2 * 1500);
    }

    #[test]
    fn the_timeout_declares_everything_outstanding_lost() {
        let mut s = sender(ReportInterval::Rtt);
        for _ in 0..4 {
            s.on_send(0, 1500);
        }
        let at = s.rto_to_arm(0).expect("timer armed with data in flight");
        assert_eq!(at, nanos(INITIAL_RTO));
        assert!(s.on_rto(at - 1).is_none(), "not yet due");
        assert!(s.on_rto(at).is_some());
        assert_eq!((s.packets_lost(), s.inflight_bytes()), (4, 0));
    }

    /// F-RTO: an ACK for a packet sent before the timeout shows the timer fired on late ACKs;
    /// the timeout's collapse to the loss window is undone. An ACK of a packet sent after it
    /// (a retransmission) leaves the timeout standing.
    #[test]
    fn a_timeout_found_spurious_by_the_next_ack_is_undone() {
        // Spurious: Reno's 10 packets from before the timeout. Genuine: slow start from the loss
        // window, 2 packets and the one this ACK delivered.
        for (spurious, expected_packets) in [(true, 10), (false, 3)] {
            let mut s = sender(ReportInterval::Rtt);
            for _ in 0..4 {
                s.on_send(0, 1500);
            }
            let at = s.rto_to_arm(0).unwrap();
            s.on_rto(at).expect("the timeout is reported");
            assert_eq!(s.cwnd, 2 * 1500, "the loss window");
            s.on_send(at, 1500); // id 4: the first packet after the timeout
            let report = s.on_ack(at + 40 * MS, if spurious { 0 } else { 4 });
            assert!(report.is_some() || !spurious, "an undo is reported at once");
            assert_eq!(s.cwnd / 1500, expected_packets, "spurious {spurious}");
        }
    }

    #[test]
    fn delivery_rate_samples_measure_a_steady_flow_at_its_rate() {
        // One packet sent per ms, each acked 40 ms later: 1500 B/ms = 1.5 MB/s once the first
        // window is out (samples of the first window include the RTT, as in Linux).
        let mut s = sender(ReportInterval::Fixed(Duration::from_secs(10)));
        s.cwnd = 1_000_000;
        for t in 0..140u64 {
            if t >= 40 {
                s.on_ack(t * MS, t - 40);
            }
            if t < 100 {
                s.on_send(t * MS, 1500);
            }
        }
        let r = s.acc.delivery_rate.unwrap();
        assert!((r - 1.5e6).abs() / 1.5e6 < 0.03, "max sample {r} B/s");
    }
}
