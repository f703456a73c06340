//! `polycc-sim`: a packet-level discrete-event dumbbell that drives polycc's algorithms through
//! the same [`CongestionControl`] trait the agent uses.
//!
//! ```text
//!  sender_i --(cwnd, pacing)--> [FIFO buffer | bottleneck bw(t), random loss] --rtt/2--> receiver
//!  sender_i <--ACK path: rtt/2 (+ jitter as netem makes it: ACKs bunched, never reordered)------
//! ```
//!
//! * Time is integer nanoseconds; events are ordered by (time, insertion order), so a run is a
//!   pure function of its configuration and `seed`.
//! * Every transmission is a new packet id (a bulk sender never runs out of data, so a
//!   retransmission is just another packet); the receiver ACKs every packet. A packet is lost
//!   once a packet sent 3 later is acknowledged (ACKs are never reordered, so this is exact up to
//!   the dupthresh delay) or when the retransmission timeout fires. A timeout whose next ACK is
//!   for a packet sent before it was spurious (F-RTO, Linux's default): the report says `undo`.
//! * RTT deviation, as the kernel harness's netem makes it (see `AckPath`): the data path keeps
//!   `data_delay`, each ACK waits a uniform draw in `ack delay +/- dev` but never leaves ahead of
//!   the one before it, so the sender sees ACKs in bursts separated by silences (the aggregation
//!   PolyCC targets) and the RTT of a steady stream sits near `rtt + dev`. ACKs are never
//!   reordered.
//! * Reports are CCP-like: accumulated on the ACK clock and emitted once per report interval
//!   (default: once per latest RTT sample) and at once on loss or timeout.
//! * Delivery-rate samples follow Linux `tcp_rate.c`: delivered bytes between a packet's send and
//!   its ACK over `max(send interval, ACK interval)`.
//! * Senders are bulk (never app-limited): reports carry `app_limited = false` and
//!   `bytes_pending = 0`. An ACK above a still-outstanding packet counts as a SACK.

pub mod config;
pub mod metrics;
mod sender;

pub use config::{FlowConfig, LinkConfig, SimConfig};
pub use metrics::{FlowSummary, Summary};

use metrics::{convergence_time, jain_index, RttHistogram, BIN, CONVERGENCE_HOLD};
use polycc_algorithms::CongestionControl;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sender::Sender;
use serde::Serialize;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

/// Simulation time in nanoseconds.
pub(crate) type Nanos = u64;

pub(crate) fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One row of `--series`: a flow's state right after a report.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesRow {
    pub time_s: f64,
    pub flow: usize,
    pub cwnd_bytes: u64,
    pub rate_mbps: Option<f64>,
    pub inflight_bytes: u64,
    pub rtt_ms: Option<f64>,
    pub throughput_mbps: f64,
    /// Packets the flow has declared lost so far (dupthresh or timeout, spurious ones included).
    pub lost_packets: u64,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct SimResult {
    pub summary: Summary,
    pub series: Vec<SeriesRow>,
    /// The PCC decisions (Vivace, Allegro, a fused PCC member) after each report, as the agent's
    /// `--log-json` writes them: `(flow, decision)`. Kept with the series.
    pub mi_trace: Vec<(usize, polycc_algorithms::pcc::MiTrace)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Start {
        flow: u32,
    },
    /// A pacing timer: try to send.
    Send {
        flow: u32,
    },
    Ack {
        flow: u32,
        id: u64,
    },
    Rto {
        flow: u32,
    },
    /// The bottleneck queue length is sampled every bin (queue convergence).
    QueueSample,
}

/// The FIFO bottleneck: departure times are computed on arrival, so it needs no events.
struct Bottleneck {
    buffer_bytes: u64,
    /// (departure time, size) of packets queued or in transmission.
    queue: VecDeque<(Nanos, u64)>,
    queued_bytes: u64,
    busy_until: Nanos,
    /// Piecewise-constant bandwidth: (from, bytes per ns).
    schedule: Vec<(Nanos, f64)>,
}

impl Bottleneck {
    fn bytes_per_ns(&self, t: Nanos) -> f64 {
        match self.schedule.partition_point(|(from, _)| *from <= t) {
            0 => self.schedule[0].1,
            i => self.schedule[i - 1].1,
        }
    }

    fn drain_to(&mut self, t: Nanos) {
        while let Some(&(dep, size)) = self.queue.front() {
            if dep > t {
                break;
            }
            self.queued_bytes -= size;
            self.queue.pop_front();
        }
    }

    /// Enqueue a packet arriving at `t`; its departure time, or None when the buffer is full.
    fn enqueue(&mut self, t: Nanos, size: u64) -> Option<Nanos> {
        self.drain_to(t);
        // The packet in transmission occupies the link, not the buffer.
        let waiting = self.queued_bytes.saturating_sub(self.queue.front().map_or(0, |q| q.1));
        if !self.queue.is_empty() && waiting + size > self.buffer_bytes {
            return None;
        }
        let start = self.busy_until.max(t);
        let rate = self.bytes_per_ns(start).max(1e-12);
        let dep = start + (size as f64 / rate).ceil() as Nanos;
        self.busy_until = dep;
        self.queue.push_back((dep, size));
        self.queued_bytes += size;
        Some(dep)
    }
}

/// A token bucket (see [`config::Policer`]).
struct TokenBucket {
    bytes_per_ns: f64,
    burst_bytes: f64,
    tokens: f64,
    last: Nanos,
}

impl TokenBucket {
    /// Whether a packet of `size` arriving at `t` conforms (and takes its tokens).
    fn admit(&mut self, t: Nanos, size: u64) -> bool {
        self.tokens = (self.tokens + t.saturating_sub(self.last) as f64 * self.bytes_per_ns).min(self.burst_bytes);
        self.last = self.last.max(t);
        if self.tokens >= size as f64 {
            self.tokens -= size as f64;
            true
        } else {
            false
        }
    }
}

/// The propagation path, as the kernel harness's netem builds it (experiments/vm/dumbbell.sh).
/// Without deviation the RTT in force is split evenly between the directions. With a deviation
/// the data path keeps [`LinkConfig::data_delay`] and the ACK path the rest of the RTT, each ACK
/// delayed by a draw uniform in `ack delay +/- dev` (at least zero) and never released ahead of
/// the ACK before it: netem with a `rate` times each packet after the previous one, so jitter
/// bunches ACKs behind a long draw instead of reordering them. A Linux receiver ACKs every second
/// segment, so one draw serves two packets. Under a steady ACK stream most ACKs wait behind a
/// recent long draw: RTT sits near `rtt + dev` with bursts, and only a sparse stream sees the
/// short draws.
struct AckPath {
    /// Mean RTT from each time on: `(from, ns)`, sorted; the first entry is time zero.
    rtt: Vec<(Nanos, Nanos)>,
    dev: Nanos,
    /// One-way data-path delay when `dev > 0`.
    data_delay: Nanos,
    /// The draw shared by the current pair of packets, and whether it has served one.
    draw: i64,
    draw_used: bool,
    /// Latest arrival at the receiver and at the sender: a path that gets shorter delivers
    /// nothing ahead of what is already on it, so nothing is reordered.
    last_at_receiver: Nanos,
    last_at_sender: Nanos,
}

impl AckPath {
    fn rtt_at(&self, t: Nanos) -> Nanos {
        match self.rtt.partition_point(|(from, _)| *from <= t) {
            0 => self.rtt[0].1,
            i => self.rtt[i - 1].1,
        }
    }

    /// One-way delays `(data, ACK)` at `t`.
    fn delays_at(&self, t: Nanos) -> (Nanos, Nanos) {
        let rtt = self.rtt_at(t);
        let data = if self.dev == 0 { rtt / 2 } else { self.data_delay.min(rtt / 2) };
        (data, rtt - data)
    }

    /// When a packet that left the bottleneck at `t` reaches the receiver.
    fn at_receiver(&mut self, t: Nanos) -> Nanos {
        let at = (t + self.delays_at(t).0).max(self.last_at_receiver);
        self.last_at_receiver = at;
        at
    }

    /// When an ACK that left the receiver at `t` reaches the sender. Calls come in
    /// non-decreasing `t` (one FIFO bottleneck, arrivals kept in order).
    fn arrival(&mut self, left_receiver: Nanos, rng: &mut ChaCha8Rng) -> Nanos {
        let ack_delay = self.delays_at(left_receiver).1;
        let delay = if self.dev == 0 {
            ack_delay
        } else {
            if !self.draw_used {
                let (mean, dev) = (ack_delay as i64, self.dev as i64);
                self.draw = rng.gen_range(mean - dev..mean + dev);
            }
            self.draw_used = !self.draw_used;
            self.draw.max(0) as Nanos
        };
        let t = (left_receiver + delay).max(self.last_at_sender);
        self.last_at_sender = t;
        t
    }
}

struct Sim<'a> {
    /// Borrowed by [`run`]; owned by a [`Stepper`].
    cfg: Cow<'a, SimConfig>,
    now: Nanos,
    end: Nanos,
    seq: u64,
    events: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
    bottleneck: Bottleneck,
    policer: Option<TokenBucket>,
    ack_path: AckPath,
    /// Random loss probability from each time on: `(from, p)`, sorted, from time zero.
    loss: Vec<(Nanos, f64)>,
    rng: ChaCha8Rng,
    senders: Vec<Sender>,
    /// Bytes received per flow per bin.
    bins: Vec<Vec<u64>>,
    /// Bottleneck queue bytes sampled at each bin.
    queue_samples: Vec<u64>,
    series: Vec<SeriesRow>,
    mi_trace: Vec<(usize, polycc_algorithms::pcc::MiTrace)>,
    processed: u64,
}

impl Sim<'_> {
    fn schedule(&mut self, at: Nanos, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, e)));
    }

    fn try_send(&mut self, f: usize) {
        loop {
            let s = &mut self.senders[f];
            match s.next_send(self.now) {
                sender::SendOutcome::Blocked => return,
                sender::SendOutcome::WaitUntil(t) => {
                    if s.pending_timer.is_none_or(|p| p > t || p < self.now) {
                        s.pending_timer = Some(t);
                        self.schedule(t, Event::Send { flow: f as u32 });
                    }
                    return;
                }
                sender::SendOutcome::Send => {}
            }
            let size = self.cfg.mss_bytes;
            let id = self.senders[f].on_send(self.now, size);
            let loss = self.loss_at(self.now);
            let random_loss = loss > 0.0 && self.rng.gen::<f64>() < loss;
            let policed = !random_loss && self.policer.as_mut().is_some_and(|p| !p.admit(self.now, size));
            let departure = if random_loss || policed { None } else { self.bottleneck.enqueue(self.now, size) };
            match departure {
                None => self.senders[f].on_drop(),
                Some(dep) => {
                    let at_receiver = self.ack_path.at_receiver(dep);
                    let bin = (at_receiver / nanos(BIN)) as usize;
                    if let Some(b) = self.bins[f].get_mut(bin) {
                        *b += size;
                    }
                    let ack_at = self.ack_path.arrival(at_receiver, &mut self.rng);
                    self.schedule(ack_at, Event::Ack { flow: f as u32, id });
                }
            }
            self.arm_rto(f);
        }
    }

    fn loss_at(&self, t: Nanos) -> f64 {
        match self.loss.partition_point(|(from, _)| *from <= t) {
            0 => self.loss[0].1,
            i => self.loss[i - 1].1,
        }
    }

    fn arm_rto(&mut self, f: usize) {
        if let Some(at) = self.senders[f].rto_to_arm(self.now) {
            self.schedule(at, Event::Rto { flow: f as u32 });
        }
    }

    fn after_report(&mut self, f: usize, throughput_mbps: f64) {
        if self.cfg.record_series {
            let s = &self.senders[f];
            self.series.push(SeriesRow {
                time_s: self.now as f64 / 1e9,
                flow: f,
                cwnd_bytes: s.cwnd_bytes(),
                rate_mbps: s.rate().map(|r| r.mbps()),
                inflight_bytes: s.inflight_bytes(),
                rtt_ms: s.last_rtt_ns().map(|r| r as f64 / 1e6),
                throughput_mbps,
                lost_packets: s.packets_lost(),
            });
            let trace = self.senders[f].take_trace();
            self.mi_trace.extend(trace.into_iter().map(|t| (f, t)));
        }
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Start { flow } => self.try_send(flow as usize),
            Event::Send { flow } => {
                let f = flow as usize;
                if self.senders[f].pending_timer == Some(self.now) {
                    self.senders[f].pending_timer = None;
                }
                self.try_send(f)
            }
            Event::Ack { flow, id } => {
                let f = flow as usize;
                if let Some(thr) = self.senders[f].on_ack(self.now, id) {
                    self.after_report(f, thr);
                }
                self.try_send(f);
                self.arm_rto(f);
            }
            Event::Rto { flow } => {
                let f = flow as usize;
                if let Some(thr) = self.senders[f].on_rto(self.now) {
                    self.after_report(f, thr);
                    self.try_send(f);
                }
                self.arm_rto(f);
            }
            Event::QueueSample => {
                self.bottleneck.drain_to(self.now);
                self.queue_samples.push(self.bottleneck.queued_bytes);
                self.schedule(self.now + nanos(BIN), Event::QueueSample);
            }
        }
    }
}

/// Run one simulation.
pub fn run(cfg: &SimConfig) -> SimResult {
    let wall = Instant::now();
    let mut sim = build(Cow::Borrowed(cfg), None);
    while let Some(Reverse((t, _, e))) = sim.events.pop() {
        if t > sim.end {
            break;
        }
        sim.now = t;
        sim.processed += 1;
        sim.handle(e);
    }
    let summary = summarize(&sim, wall.elapsed());
    SimResult { summary, series: sim.series, mi_trace: sim.mi_trace }
}

/// A simulation ready to run: the link, the senders (running `controllers` when given, one per
/// flow, else each flow's policy), the first events.
fn build(cfg: Cow<'_, SimConfig>, controllers: Option<Vec<Box<dyn CongestionControl>>>) -> Sim<'_> {
    let rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let link = &cfg.link;
    let mut schedule = vec![(0, link.bandwidth.bytes_per_sec() / 1e9)];
    schedule.extend(link.schedule().iter().map(|c| (nanos(c.at), c.bandwidth.bytes_per_sec() / 1e9)));
    let mut rtt = vec![(0, nanos(link.rtt))];
    rtt.extend(link.rtt_schedule().iter().map(|(at, r)| (nanos(*at), nanos(*r))));
    let ack_path = AckPath {
        rtt,
        dev: nanos(link.rtt_dev.min(link.rtt)),
        data_delay: nanos(link.data_delay()),
        draw: 0,
        draw_used: false,
        last_at_receiver: 0,
        last_at_sender: 0,
    };
    let mut loss = vec![(0, link.loss)];
    loss.extend(link.loss_schedule().iter().map(|(at, p)| (nanos(*at), *p)));
    let policer = link.policer.map(|p| {
        let burst = p.burst_bytes(link.bdp_bytes(), cfg.mss_bytes) as f64;
        TokenBucket { bytes_per_ns: p.rate.bytes_per_sec() / 1e9, burst_bytes: burst, tokens: burst, last: 0 }
    });
    let end = nanos(cfg.duration);
    let n_bins = (end / nanos(BIN)) as usize + 1;
    let senders = match controllers {
        Some(ccs) => {
            ccs.into_iter().zip(&cfg.flows).map(|(cc, f)| Sender::with_controller(cc, &cfg, nanos(f.start))).collect()
        }
        None => cfg
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                Sender::new(
                    &f.policy.with_seed(cfg.seed.wrapping_mul(0x9E37_79B9).wrapping_add(i as u64)),
                    &cfg,
                    nanos(f.start),
                )
            })
            .collect(),
    };
    let buffer_bytes = link.buffer.bytes(link.bdp_bytes(), cfg.mss_bytes);
    let n_flows = cfg.flows.len();
    let starts: Vec<Nanos> = cfg.flows.iter().map(|f| nanos(f.start)).collect();
    let mut sim = Sim {
        cfg,
        now: 0,
        end,
        seq: 0,
        events: BinaryHeap::new(),
        bottleneck: Bottleneck { buffer_bytes, queue: VecDeque::new(), queued_bytes: 0, busy_until: 0, schedule },
        policer,
        ack_path,
        loss,
        rng,
        senders,
        bins: vec![vec![0; n_bins]; n_flows],
        queue_samples: Vec::with_capacity(n_bins),
        series: Vec::new(),
        mi_trace: Vec::new(),
        processed: 0,
    };
    for (i, start) in starts.into_iter().enumerate() {
        sim.schedule(start, Event::Start { flow: i as u32 });
    }
    sim.schedule(0, Event::QueueSample);
    sim
}

/// A simulation driven step by step from outside (the MOCC training environment): run events
/// until a condition holds, act on a flow's controller, let the flow pick up its new decision.
pub struct Stepper {
    sim: Sim<'static>,
    wall: Instant,
}

impl Stepper {
    /// A simulation of `cfg` whose flows run `controllers` (one per flow, in order; the flows'
    /// policies are only used for their descriptions).
    pub fn new(cfg: SimConfig, controllers: Vec<Box<dyn CongestionControl>>) -> Stepper {
        Stepper { sim: build(Cow::Owned(cfg), Some(controllers)), wall: Instant::now() }
    }

    /// Simulation time.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.sim.now)
    }

    /// Process events until `stop()` holds after one, or up to `until`. Returns false when the
    /// simulation ended (its duration or no events left) before `stop()` held.
    pub fn run_until(&mut self, until: Duration, mut stop: impl FnMut() -> bool) -> bool {
        let until = nanos(until).min(self.sim.end);
        while let Some(Reverse((t, _, _))) = self.sim.events.peek() {
            if *t > until {
                self.sim.now = until;
                return false;
            }
            let Some(Reverse((t, _, e))) = self.sim.events.pop() else { break };
            self.sim.now = t;
            self.sim.processed += 1;
            self.sim.handle(e);
            if stop() {
                return true;
            }
        }
        false
    }

    /// The flow's controller was acted on from outside: apply its current decision (window,
    /// pacing rate) and send what it now allows.
    pub fn refresh(&mut self, flow: usize) {
        if flow < self.sim.senders.len() {
            self.sim.senders[flow].refresh_decision();
            self.sim.try_send(flow);
        }
    }

    /// What the run produced so far (over the configured duration).
    pub fn summary(&self) -> Summary {
        summarize(&self.sim, self.wall.elapsed())
    }
}

fn summarize(sim: &Sim, wall: Duration) -> Summary {
    let cfg = &*sim.cfg;
    let bin_ns = nanos(BIN);
    let secs_of_bins = |n: usize| n as f64 * BIN.as_secs_f64();
    let end_bin = (sim.end / bin_ns) as usize;
    let half_bin = end_bin / 2;
    let first_start = cfg.flows.iter().map(|f| f.start).min().unwrap_or_default();
    let total_bytes: u64 = sim.bins.iter().map(|b| b[..end_bin].iter().sum::<u64>()).sum();
    let active = cfg.duration.saturating_sub(first_start).as_secs_f64().max(1e-9);
    let capacity = cfg.link.capacity_bytes(first_start, cfg.duration);
    let mut all_rtt = RttHistogram::default();
    let flows: Vec<FlowSummary> = sim
        .senders
        .iter()
        .enumerate()
        .map(|(i, s)| {
            all_rtt.merge(s.rtt_histogram());
            let start = cfg.flows[i].start;
            let bytes: u64 = sim.bins[i][..end_bin].iter().sum();
            let last_half: u64 = sim.bins[i][half_bin..end_bin].iter().sum();
            FlowSummary {
                id: i,
                policy: cfg.flows[i].policy.describe(),
                start_s: start.as_secs_f64(),
                goodput_mbps: bytes as f64 * 8.0 / cfg.duration.saturating_sub(start).as_secs_f64().max(1e-9) / 1e6,
                goodput_last_half_mbps: last_half as f64 * 8.0 / secs_of_bins(end_bin - half_bin).max(1e-9) / 1e6,
                mean_rtt_ms: s.rtt_histogram().mean_ms(),
                p95_rtt_ms: s.rtt_histogram().quantile_ms(0.95),
                loss_frac: s.loss_rate(),
                sent_packets: s.packets_sent(),
                lost_packets: s.packets_lost(),
                dropped_packets: s.packets_dropped(),
                reports: s.reports(),
            }
        })
        .collect();
    let sent: u64 = sim.senders.iter().map(|s| s.packets_sent()).sum();
    let lost: u64 = sim.senders.iter().map(|s| s.packets_dropped()).sum();
    let (mut convergence_s, mut converged, mut queue_convergence_s) = (None, true, None);
    if let Some(last) = cfg.link.schedule().last().filter(|c| c.at < cfg.duration) {
        let change_bin = (nanos(last.at) / bin_ns) as usize;
        let total: Vec<f64> = (0..end_bin).map(|b| sim.bins.iter().map(|f| f[b]).sum::<u64>() as f64).collect();
        let per_bin = last.bandwidth.bytes_over(BIN);
        convergence_s = convergence_time(&total, change_bin, per_bin).map(|d| d.as_secs_f64());
        converged = convergence_s.is_some();
        let bdp = last.bandwidth.bytes_over(cfg.link.rtt) + 2.0 * cfg.mss_bytes as f64;
        let q: Vec<f64> = sim.queue_samples.iter().map(|q| *q as f64).collect();
        let hold = (CONVERGENCE_HOLD.as_nanos() / BIN.as_nanos()) as usize;
        let mut run = 0;
        for (i, v) in q.iter().enumerate().skip(change_bin) {
            run = if *v <= bdp { run + 1 } else { 0 };
            if run >= hold {
                queue_convergence_s = Some(secs_of_bins(i + 1 - run - change_bin));
                break;
            }
        }
    }
    let last_half: Vec<f64> = flows.iter().map(|f| f.goodput_last_half_mbps).collect();
    Summary {
        duration_s: cfg.duration.as_secs_f64(),
        goodput_mbps: total_bytes as f64 * 8.0 / active / 1e6,
        utilization: if capacity > 0.0 { total_bytes as f64 / capacity } else { 0.0 },
        mean_rtt_ms: all_rtt.mean_ms(),
        p95_rtt_ms: all_rtt.quantile_ms(0.95),
        base_rtt_ms: cfg.link.rtt.as_secs_f64() * 1e3,
        loss_frac: if sent > 0 { lost as f64 / sent as f64 } else { 0.0 },
        jain_index: jain_index(&last_half),
        convergence_s,
        converged,
        queue_convergence_s,
        flows,
        wall_s: wall.as_secs_f64(),
        events: sim.processed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bottleneck(mbps: f64, buffer_bytes: u64) -> Bottleneck {
        Bottleneck {
            buffer_bytes,
            queue: VecDeque::new(),
            queued_bytes: 0,
            busy_until: 0,
            schedule: vec![(0, mbps * 1e6 / 8.0 / 1e9), (1_000_000_000, mbps * 1e6 / 16.0 / 1e9)],
        }
    }

    #[test]
    fn bottleneck_serializes_at_the_link_rate_and_tail_drops() {
        // 12 Mbit/s: a 1500-byte packet takes 1 ms. Buffer: 2 packets waiting.
        let mut b = bottleneck(12.0, 3000);
        let deps: Vec<Option<Nanos>> = (0..5).map(|_| b.enqueue(0, 1500)).collect();
        assert_eq!(deps, vec![Some(1_000_000), Some(2_000_000), Some(3_000_000), None, None]);
        // Once the first leaves, one more fits.
        assert_eq!(b.enqueue(1_000_000, 1500), Some(4_000_000));
    }

    #[test]
    fn bottleneck_follows_its_bandwidth_schedule() {
        let mut b = bottleneck(12.0, 1_000_000);
        assert_eq!(b.enqueue(1_000_000_000, 1500), Some(1_002_000_000), "half the rate after 1 s");
    }

    fn jittered_path(data: Nanos, ack: Nanos, dev: Nanos) -> AckPath {
        AckPath {
            rtt: vec![(0, data + ack)],
            dev,
            data_delay: data,
            draw: 0,
            draw_used: false,
            last_at_receiver: 0,
            last_at_sender: 0,
        }
    }

    /// ACK delays (arrival - left receiver) for a stream with one ACK every `gap` ns.
    fn ack_waits(path: &mut AckPath, gap: Nanos, n: u64) -> Vec<Nanos> {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut last = 0;
        (0..n)
            .map(|i| {
                let left = i * gap;
                let at = path.arrival(left, &mut rng);
                assert!(at >= last, "reordered");
                last = at;
                at - left
            })
            .collect()
    }

    fn mean(v: &[Nanos]) -> f64 {
        v.iter().sum::<Nanos>() as f64 / v.len() as f64
    }

    #[test]
    fn jittered_acks_bunch_behind_long_draws_as_netem_with_a_rate_does() {
        const MS: Nanos = 1_000_000;
        // 100 ms +/- 70 as the harness builds it: 15 ms out, 85 +/- 70 ms back.
        let mut path = jittered_path(15 * MS, 85 * MS, 70 * MS);
        assert_eq!(path.at_receiver(0), 15 * MS);
        // A sparse stream (one ACK per 500 ms) sees the draws themselves: uniform in 15..155 ms.
        let sparse = ack_waits(&mut path, 500 * MS, 20_000);
        assert!(*sparse.iter().min().unwrap() >= 15 * MS && *sparse.iter().max().unwrap() < 155 * MS);
        assert!((mean(&sparse) / MS as f64 - 85.0).abs() < 1.5, "sparse mean {:.1} ms", mean(&sparse) / 1e6);
        // A steady stream (20 Mbit/s of 1500-byte packets, one draw per two) waits behind the
        // longest recent draw: near 155 ms, never more.
        let mut path = jittered_path(15 * MS, 85 * MS, 70 * MS);
        let dense = ack_waits(&mut path, 600_000, 100_000);
        assert!(*dense.iter().max().unwrap() < 155 * MS);
        assert!(mean(&dense) > 140.0 * MS as f64, "dense mean {:.1} ms", mean(&dense) / 1e6);
        // Draws below zero leave at once: at +/-100 ms a sparse stream's shortest wait is 0.
        let mut path = jittered_path(15 * MS, 85 * MS, 100 * MS);
        let sparse = ack_waits(&mut path, 500 * MS, 20_000);
        let zeros = sparse.iter().filter(|&&w| w == 0).count() as f64 / sparse.len() as f64;
        assert!((zeros - 0.075).abs() < 0.01, "{zeros:.3} of draws below zero (15 of 200 ms)");
    }

    #[test]
    fn one_draw_serves_two_packets_like_a_receiver_acking_every_second_segment() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut path = jittered_path(15_000_000, 85_000_000, 70_000_000);
        let spaced = |i: u64| i * 1_000_000_000; // far apart: no bunching, each ACK shows its draw
        let w: Vec<Nanos> = (0..6).map(|i| path.arrival(spaced(i), &mut rng) - spaced(i)).collect();
        assert_eq!((w[0], w[2], w[4]), (w[1], w[3], w[5]), "pairs share a draw: {w:?}");
        assert!(w[0] != w[2] || w[2] != w[4], "pairs draw anew: {w:?}");
    }

    #[test]
    fn policer_passes_its_burst_then_only_its_rate() {
        // 12 Mbit/s = 1500 B per ms; a 3-packet bucket, full at the start.
        let mut p = TokenBucket { bytes_per_ns: 1.5e-3, burst_bytes: 4500.0, tokens: 4500.0, last: 0 };
        let passed: Vec<bool> = (0..5).map(|_| p.admit(0, 1500)).collect();
        assert_eq!(passed, vec![true, true, true, false, false], "the burst, then nothing");
        assert!(p.admit(1_000_000, 1500), "one packet's tokens per ms");
        assert!(!p.admit(1_500_000, 1500));
        assert!(p.admit(10_000_000_000, 1500));
        assert!(p.tokens <= p.burst_bytes, "tokens never exceed the burst");
    }

    #[test]
    fn a_shorter_path_does_not_reorder_what_is_already_on_the_longer_one() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // 100 ms until 1 s, then 10 ms.
        let mut path = AckPath {
            rtt: vec![(0, 100_000_000), (1_000_000_000, 10_000_000)],
            dev: 0,
            data_delay: 0,
            draw: 0,
            draw_used: false,
            last_at_receiver: 0,
            last_at_sender: 0,
        };
        let mut through = |t| {
            let at = path.at_receiver(t);
            path.arrival(at, &mut rng)
        };
        let before = through(999_000_000);
        // Each half takes the RTT in force when the packet enters it: 50 ms out, then 5 ms back.
        assert_eq!(before, 1_054_000_000);
        let after = through(1_000_000_000);
        assert_eq!(after, before, "held behind the packet on the longer path");
        assert_eq!(through(1_200_000_000), 1_210_000_000, "then the new RTT");
    }

    #[test]
    fn capacity_integrates_the_schedule() {
        let link = LinkConfig {
            changes: vec![config::BandwidthChange {
                at: Duration::from_secs(5),
                bandwidth: polycc_algorithms::Rate::from_mbps(10.0),
            }],
            ..LinkConfig::default()
        };
        let bytes = link.capacity_bytes(Duration::ZERO, Duration::from_secs(10));
        assert_eq!(bytes, 20e6 / 8.0 * 5.0 + 10e6 / 8.0 * 5.0);
    }
}
