//! PolyCC fusion: one pilot and one or more copilots run side by side on every report.
//!
//! (Over 800 lines: a fifth of them are this header, the record of each rule's measured why; the
//! loss guard and fusion on rate have their own files, `fusion/loss_guard.rs` and `fusion/rate.rs`.)
//!
//! Model (PolyCC, SIGCOMM'23 demo, section 2; reference section 9):
//!
//! ```text
//!   v_i    = member_i.on_report(report)            for pilot and copilots (cwnd or rate)
//!   fused  = f(v_1 .. v_n)    f in { max, min, argmin_i |v_i - target| }  (max: guarded after a congestion loss)
//!   member_i.sync(fused)                            every member continues from the fused value
//!   decision = pilot.decision() with its cwnd (or rate) replaced by `fused`
//! ```
//!
//! The pilot alone decides everything the fusion does not cover (its pacing rate when fusing on
//! cwnd, its window when fusing on rate), which keeps the sender's behaviour deterministic however
//! many copilots run. Two exceptions when fusion on cwnd installs a window larger than the
//! pilot's own: an unpaced member's window that leads goes out unpaced, as that member sends it
//! alone, while the pilot's own window or the fused one is one the path has held
//! (`window_member_leads`, below); any other (a paced member's, or one above what the path held)
//! scales the pilot's pacing rate by the same factor (PolyCC: "pacing rate ~ cwnd / RTT"), so the
//! pacing does not hold the larger window back; see `calibrated_rate`.
//! When fusing on rate, a window-only member's rate is `cwnd / srtt`, its srtt taken from its
//! estimates or, failing that, the report's mean RTT.
//!
//! Loss guard (`max` on cwnd, issue 21; `LossGuard`). Taking the larger window after every
//! report discards the loss response of whichever member backed off (CUBIC halves, BBRv1 does
//! not), and the two aggressions add up: CUBIC, synced up to BBR's window after each halving,
//! grew past it and the fused window reached 4-5 BDP with losses every second. So after a
//! *congestion* loss (a standing queue behind it, far more in flight than the path holds, or a
//! timeout) the fused window is the smallest
//! loss response of the window-based members, and stays that member's own trajectory until it
//! has grown back to the window in force at the loss: the copilot guards the pilot, as CUBIC
//! guards itself, until the path shows room again. Bounds: windows under half of what was in
//! flight at the loss (or of the window in force, where less) are no loss response (BBR's
//! ProbeRtt, 4 packets, once synced every member down to it; half the window in force, the
//! rule until 2026-11-28, also refused CUBIC's answer from its own window under a pilot window
//! never filled, and the flow refilled that window into a second episode); a paced member's
//! window is a cap from its rate, not a response;
//! the guard ends where a response would take the window under the path's BDP estimate; after
//! a timeout it lasts one srtt. A loss without a queue (random loss, a policer) leaves `max` in
//! place, so the member that ignores it keeps the link. A loss report whose queue shows only in
//! its latest RTTs (slow start filling the buffer within one report) syncs no member: the next
//! report decides, and a response given meanwhile is still there for the guard (d52b259). A
//! loss the stack later finds spurious (`Report::undo`: reordering, not congestion) ends the
//! guard; the members take back their own reductions (`LossEpisode::undo`, BBR's full-bandwidth
//! count).
//!
//! Measured in the simulator (20 Mbit/s, RTT 100 ms, 1 BDP, seeds 1-6 x 60 s, netem ACK path;
//! goodput Mbit/s / loss %, the guard for one srtt after any loss -> this guard): +/-0 ms
//! 19.82 / 1.15 -> 19.79 / 0.89 (BBR 19.09 / 0.66, CUBIC 19.88 / 0.12); +/-20 19.76 / 3.86 ->
//! 19.79 / 0.47 (BBR 4.30 %); +/-70 19.52 / 4.04 -> 19.39 / 0.39 (BBR 18.73 / 2.17); +/-100
//! 19.11 / 3.80 -> 18.91 / 0.29 (BBR 5.63 / 0.72, CUBIC 18.18 / 0.10); 50 Mbit/s 30 ms 1 %
//! random loss 44.1 -> 48.7 (BBR 48.1, CUBIC 5.2). Worst seed's goodput against the better
//! member 0.979-0.995 at 1 BDP, 0.90 at 0.5 BDP +/-70 ms (where BBR buys its edge with 3.7 %
//! loss; 0.986-0.998 at 1 and 4 BDP, 0.997-1.108 at 0.5 BDP after the readings below);
//! `algorithms/sim/tests/targets.rs` holds the rows at 0.5, 1 and 4 BDP. In the guest
//! (3 reps x 30 s, docs/kernel-parity.md) retransmits fell from 2.2-3.1 % to 0.1-1.8 %. The cost
//! is where CUBIC is slow to regrow: a rep whose start stalled (BBR's Startup under jitter) runs
//! at CUBIC's pace and then holds CUBIC's response (0.89-0.91 of in-kernel CUBIC in 2 of 6
//! jittered guest reps while CUBIC still cut twice per episode; 0.92-0.95 in 1 of 3 +/-100 ms
//! reps since, when its HyStart left slow start earlier than in-kernel CUBIC's). Alternatives
//! measured and left out: ending the guard once the queue has drained (0.5 BDP: loss 0.92 -> 1.66 %), or once delivery falls under 0.85x the bandwidth
//! estimate (+/-70 ms: loss 0.39 -> 1.83 %); pacing a copilot's window at window/srtt (Vivace +
//! CUBIC: 11 % loss). `min` and `target` are unchanged.
//!
//! Shallow buffers (2026-11-29): under a quarter of a BDP of buffer a queue never lifts the RTT to
//! the guard's test, so every loss read as the path's; the CUBIC copilot, synced to BBR's
//! two-BDP window, tied with it and sent it unpaced, and the fused flow lost 40-50 % of its
//! packets (BBR alone 3.2-3.8 %). A loss with more than 1.5x what the path holds in flight (its
//! largest delivery rate of 10 s over the report's RTT, `overfilled`) is now a congestion loss,
//! and what the path was shown to hold is then what it holds, not the window that met the loss.
//! Simulator, `experiments/run --backend sim --full fusion-shallow` (3-21 packets at 100 Mbit/s
//! 10 ms, 6 at 20 Mbit/s 40 ms, 3 at 50 Mbit/s 30 ms): loss 12-15x the lossier member ->
//! 1.08-1.42x, goodput 0.95-1.04x -> 1.00-1.02x the better member; fusion-collateral's twelve
//! cells, PolyCC scenarios 1 and 2, pcc-shallow and fusion-share unchanged (docs/fusion.md,
//! "Shallow buffers").
//!
//! Two readings keep `max` honest about what a member's window means (2026-11-25, after CUBIC
//! stopped answering one loss episode twice, `loss_episode.rs`): a paced member's window is read
//! at the smallest min RTT any member has seen (BBR's filter, expiring under the queue CUBIC
//! keeps, took 243 ms for a 100 ms path and doubled its window from it; two fused flows at 4 BDP
//! split the link 0.39/0.61, Jain 0.93-0.95 -> 0.998); and a window member's window that leads
//! (wins, or ties with the pilot's) is sent unpaced, as that member sends alone
//! (`window_member_leads`), while the pilot's own window or the fused one is at or under
//! what the path was shown to hold: the window at the last loss episode's first congestion loss (or what was
//! in flight then, where less), raised by what the flow has since kept in flight for an srtt
//! without one (synced to a larger pilot window, CUBIC tied with it, and BBR's 2-3 BDP went
//! out unpaced: 0.5 BDP, 3-6.6 % lost against in-kernel CUBIC's 0.3 %).
//! Paced at one window per srtt, such a window was left short under ACK
//! jitter (guest, 1 BDP, +/-100 ms: 0.86-1.10x in-kernel CUBIC; unpaced 1.03-1.06x). Until
//! 2026-12-02 the pacing came back once a queue had stood a whole min-RTT filter window while the
//! path ran full (`queue_held`), at most 1.25x what the flow delivered; paced, CUBIC's window lost
//! less at the full buffer than a competing CUBIC's ACK-clocked bursts and took 0.70 of the link
//! from it (simulator, 1 BDP, +/-100 ms; BBR alone 0.55, issue 21's bound 0.6), and two fused
//! flows, one paced while the other was not, split the link unevenly. Unpaced with a queue held
//! too: 0.555, two fused flows' Jain 0.97-1.00 (`algorithms/sim/tests/targets.rs`), the p95 delay
//! of fusion-collateral's jittered 0.5 and 1 BDP cells 1.12-1.18x -> 1.01-1.10x the larger
//! member's, goodput and loss unchanged but for one seed at 1 BDP +/-70 ms whose start-up losses
//! took it from 1.56x to 2.09x CUBIC's 0.07 %. In the guest, whose pacing timers fire late and
//! send in bunches, the paced lead had lost to in-kernel CUBIC (shares 0.37-0.48); unpaced,
//! 0.52-0.58 (docs/fusion.md, "The unpaced lead, landed"). Whatever paces it (a paced member's window that
//! leads, or one above what the path held), with a queue held the pacing stays at most 1.25x
//! what the flow delivered (2026-11-27, guest, 4 BDP,
//! +/-70 ms: CUBIC's unused window climbed 903 -> 1,508 packets behind BBR's pacing at the link
//! rate, and BBR's ProbeRtt, 4 packets, scaled the pacing to 2.885x the link: 1,010 packets lost
//! in one episode, `guest_replay.rs`), and a report on which that pacing left the window unused
//! (under 90 % in flight) is app-limited to the window member, so its curve waits instead of
//! running ahead and jumping 1.4x per report into the queue once the pilot probes (4 BDP loss
//! 0.69 -> 0.08 %, CUBIC alone 0.20); the same holds while the loss guard waits for a window
//! member's regrowth on a paced flow. Otherwise the window grows as the member's own rule says
//! (+/-100 ms: worst seed 0.90 of the better member when it also waited there; judged by one
//! report's smallest RTT, which ACK bunching lifts without a queue, 0.82-0.87).
//!
//! A rate-based member's window is a cap, not a view of the path (PCC installs 2 x rate x srtt
//! so that its flow stays rate-limited), so `max` on cwnd compares what its rate puts in flight
//! instead ([`CongestionControl::fusion_window`]), keeps the cap installed when that member wins,
//! and reads a report on which a smaller window held the flow under it as app-limited to it, so
//! its monitor intervals do not credit it with a rate it did not send (2026-11-26, issue 21:
//! Vivace + CUBIC climbed to 1.75x the link under CUBIC's guarded window, then `max` took its
//! 6-BDP cap and synced CUBIC to it). Simulator, 20 Mbit/s, RTT 100 ms, 1 BDP, 60 s, loss against
//! the lossier member: +/-0 ms 2.7 % -> 0.7 % (Vivace 1.15 %, CUBIC 0.1 %).
//!
//! Nor is a rate-based winner's window one a window member continues from: synced to what
//! Vivace's rate put in flight (its probes reach 1.2-1.5x the link), CUBIC lost its own loss
//! response at every such report and led unpaced above what path and buffer hold; on buffers of
//! 3-21 packets the fused flow lost 2.2-24x Vivace alone (`fusion-shallow`). So a window member
//! is synced down to a rate-based winner's window but never up to it, and a report on which an
//! unpaced window member's lead put more than 1.1x a rate-based member's window in flight is
//! app-limited to that member (`FusionController::not_at_own_rate`). Simulator (2026-11-29,
//! `experiments/run --backend sim --full fusion-shallow fusion-collateral`): shallow buffers,
//! loss against the lossier member 1.98-23.9x -> 0.80-1.81x at 0.96-1.01x Vivace's goodput
//! (it was 0.97-1.03x); fusion-collateral's twelve cells, loss within 0.22-1.30x (was
//! 0.58-1.81x). The cost is under ACK jitter, where CUBIC no longer rides Vivace's probes: 1 BDP
//! +/-20 ms 19.85 -> 18.56 Mbit/s (CUBIC alone 19.69), +/-70 ms 19.55 -> 18.60 (18.65). Either
//! rule alone fell short: without the sync, 21 packets still lost 7.7x (Vivace's jumps); with only
//! the app-limited reports, CUBIC synced up led nearly always, Vivace's rate sank, and the flow ran
//! at 0.85-0.94 of the link on five of the six shallow buffers, about CUBIC's (Vivace 0.95-0.98).
//!
//! When a window member wins over a rate-based pilot, the pilot's pacing is scaled from what its
//! rate puts in flight (its `fusion_window`), not from its cap, and up to 2.885x what the flow
//! delivered, not 2.885x the pilot's rate (`FusionController::pacing_ceiling`): the flow runs
//! CUBIC's window paced at about that window over srtt (2026-11-26, issue 21; since 5ea552d that
//! window goes out unpaced within what the path has held, and this bound paces it above). Under
//! +/-70 and +/-100 ms of ACK jitter Vivace alone runs at 3 % of the link, and its rate had held the fused
//! flow at 2.885x that: CUBIC's window climbed for 10-15 s and then went out in bursts.
//! Simulator, fusion-collateral's 0.5 and 1 BDP cells (3 x 30 s): goodput against CUBIC's
//! 0.67-0.83 -> 0.87-1.09, loss against the lossier member 2.4-10x -> 0.55-1.9x; p95 queueing
//! delay 1.10-1.31x -> 1.09-1.37x the larger member's (paced, the flow fills the buffer before a
//! loss stops it, where unpaced CUBIC loses earlier). Pacing at a multiple of window over srtt
//! lowered that delay only to 1.12-1.19x (10x: near unpaced) and raised the loss to 2.5-3.1x.
//!
//! Fusion on rate: `fusion/rate.rs` (why a member reads a capped report as app-limited, and
//! which window goes out with the fused rate).
//!
//! Target windows: a fixed number of bytes, or the BDP estimate (pilot's first, then the first
//! copilot that has one) times a gain. Before any estimate exists the pilot's value is used.
//! For rate fusion the target window becomes a rate over the same srtt.
//!
//! Differences from the reference: PolyCC's demo fuses inside a modified CCP agent per ACK
//! batch; here fusion runs once per report, the same cadence as the members.

use crate::ack_growth::DelayExit;
use crate::config::PolicyError;
use crate::filters::WindowedMax;
use crate::units::{bytes_from_f64, Rate};
use crate::{CongestionControl, Decision, Estimates, FlowInfo, Handover, Report, Sync};
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::time::Duration;

mod loss_guard;
mod rate;
use loss_guard::{queue_rose, queue_stood, queued, LossGuard};

/// Whether `window` is in use: at least 90 % of it in flight, not left short by pacing or the
/// application.
fn window_in_use(in_flight: u64, window: u64) -> bool {
    in_flight as f64 >= 0.9 * window as f64
}

/// How long the largest delivery rate counts when asking whether the path runs full (s).
const DELIVERED_MAX_SECS: u64 = 10;

/// In flight beyond this multiple of what the path carries at a report's RTT is not queued (the
/// RTT would show it) but being dropped ([`FusionController::overfilled`]).
const OVERFILL: f64 = 1.5;

/// An unpaced lead with more than this multiple of what a rate-based member's rate puts in
/// flight is not that member's rate ([`FusionController::not_at_own_rate`]).
const NOT_OWN_RATE: f64 = 1.1;

/// BBR's probing pacing gain: how far past what a flow delivers its pacing probes.
const PROBE_GAIN: f64 = crate::bbr::PACING_GAIN_CYCLE[crate::bbr::PROBE_UP_PHASE];

/// The pilot's pacing rate calibrated to the fused window: `rate * fused / own` when the fusion
/// installed a window larger than the pilot's own (`own`), else the pilot's rate unchanged, and
/// at most `ceiling` ([`FusionController::pacing_ceiling`]: 2.885x the pilot's bandwidth
/// estimate, BBR's highest gain, or 1.25x the delivery rate while a queue is held; never below
/// the pilot's own rate). An unpaced pilot stays unpaced.
///
/// The cap: in BBR's ProbeRtt the pilot's own window is 4 packets, and the ratio paced the fused
/// window at 175x the pilot's rate (2.3-2.8 Gbit/s on a 20 Mbit/s guest link, 100-300 packets
/// lost every 10 s; issue 21). Capped, a sunk estimate still rises 2.885x per report that
/// delivers what the window allows.
///
/// Why: PolyCC calibrates the pilot with the fused value and treats the pacing rate as
/// proportional to `cwnd / RTT` (section 2), so a window k times the pilot's comes with k times
/// its rate. Keeping the pilot's own rate instead, a BBR pilot paced at its bandwidth estimate
/// could deliver no more than that estimate, its filter never saw more, and a copilot's larger
/// window went unused: under ACK aggregation BBR's Startup stalls at a few Mbit/s, and the fused
/// flow stayed there (guest, issue 7: 4-7 Mbit/s on 20 with a 0.3-1.2 MB window installed).
/// Scaling keeps the pilot's ratio of rate to window, so a copilot that wins by a little adds a
/// little (pacing at Linux's 1.2 x `cwnd / srtt` instead turned BBR-sized windows, 2 BDP and
/// more, into bursts: 17 % loss at +/-20 ms in the simulator against 3.5 %). Since 5ea552d an
/// unpaced member's window that leads is sent unpaced instead (`window_member_leads`); the
/// scaling stays for a paced member's window and for a window above what the path has held.
fn calibrated_rate(
    pilot_rate: Option<Rate>,
    pilot_own_cwnd: u64,
    fused_cwnd: u64,
    ceiling: Option<Rate>,
) -> Option<Rate> {
    let rate = pilot_rate?;
    if fused_cwnd <= pilot_own_cwnd || pilot_own_cwnd == 0 {
        return Some(rate);
    }
    let scaled = rate * (fused_cwnd as f64 / pilot_own_cwnd as f64);
    Some(match ceiling {
        Some(c) if !c.is_zero() => scaled.min(c.max(rate)),
        _ => scaled,
    })
}

/// The running fusion of a pilot and its copilots for one flow.
#[derive(Debug)]
pub struct FusionController {
    pilot: Box<dyn CongestionControl>,
    copilots: Vec<Box<dyn CongestionControl>>,
    fusion: FusionFn,
    fuse_on: FuseOn,
    /// Index of the member whose value won the last fusion (0 = pilot).
    last_winner: usize,
    last_srtt: Option<Duration>,
    /// `max` on cwnd after a congestion loss (issue 21).
    guard: LossGuard,
    /// The smallest window a paced member's is read down to: 2 packets.
    min_window: u64,
    /// Fusion on rate: each member's own rate (bytes/s) at the last fusion, before the sync.
    own_rates: Vec<f64>,
    /// `max` on cwnd: each rate-based member's own window (what its rate puts in flight) at the
    /// last fusion, when under the cap it installs; `None` for window-based members.
    own_paced_windows: Vec<Option<u64>>,
    /// The largest delivery rate of the last 10 s (rounds of one second), and whether the last
    /// report delivered at least 0.8x that: the path ran full ([`Self::queue_held`]).
    delivered_max: WindowedMax,
    path_full: bool,
    /// `max` on cwnd: whether the loss guard held the last decision.
    guard_held: bool,
    /// `max` on cwnd, from a paced pilot's Startup exit until it lowers the window it left
    /// Startup with: that window, and the window in force before the exit
    /// ([`Self::startup_exit_cap`]).
    startup_exit: Option<(u64, u64)>,
    decision: Decision,
}

impl FusionController {
    /// The members' per-ACK growth limits fused: on cwnd with `max`, as far as any member would
    /// grow; with `min`, only as far as every member would (none if one does not grow); a
    /// `target` fusion and rate fusion do not grow between reports.
    fn fuse_growth_limits(&self, limits: impl Iterator<Item = Option<u64>>) -> Option<u64> {
        match (self.fuse_on, self.fusion) {
            (FuseOn::Cwnd, FusionFn::Max) => limits.flatten().max(),
            (FuseOn::Cwnd, FusionFn::Min) => limits.collect::<Option<Vec<u64>>>()?.into_iter().min(),
            _ => None,
        }
    }

    /// Fuse `pilot` and `copilots` (built by [`crate::Policy::build`] for this flow).
    pub fn new(
        pilot: Box<dyn CongestionControl>,
        copilots: Vec<Box<dyn CongestionControl>>,
        fusion: FusionFn,
        fuse_on: FuseOn,
        info: FlowInfo,
    ) -> FusionController {
        let decision = pilot.decision();
        FusionController {
            pilot,
            copilots,
            fusion,
            fuse_on,
            last_winner: 0,
            last_srtt: None,
            guard: LossGuard::default(),
            min_window: 2 * info.mss_bytes,
            own_rates: Vec::new(),
            own_paced_windows: Vec::new(),
            delivered_max: WindowedMax::new(DELIVERED_MAX_SECS),
            path_full: false,
            guard_held: false,
            startup_exit: None,
            decision,
        }
    }

    /// Names of the pilot and copilots, pilot first.
    pub fn member_names(&self) -> Vec<&'static str> {
        std::iter::once(self.pilot.name()).chain(self.copilots.iter().map(|c| c.name())).collect()
    }

    /// Which member's value won the last fusion (0 = pilot, 1.. = copilots in order).
    pub fn last_winner(&self) -> usize {
        self.last_winner
    }

    /// Pilot first, then the copilots in order.
    fn members(&self) -> impl Iterator<Item = &Box<dyn CongestionControl>> {
        std::iter::once(&self.pilot).chain(self.copilots.iter())
    }

    fn members_mut(&mut self) -> impl Iterator<Item = &mut Box<dyn CongestionControl>> {
        std::iter::once(&mut self.pilot).chain(self.copilots.iter_mut())
    }

    /// srtt used to turn windows into rates: pilot's estimate, any member's, then the report.
    fn srtt(&self, report: &Report) -> Option<Duration> {
        self.members()
            .find_map(|m| {
                let e = m.estimates();
                e.srtt.or(e.min_rtt)
            })
            .or_else(|| report.rtt_mean())
            .or(self.last_srtt)
            .filter(|d| !d.is_zero())
    }

    /// The smallest min RTT any member has seen: a member's own filter can hold a queue (BBR's
    /// expires every 10 s, and its ProbeRtt does not drain the queue another member's window keeps).
    fn min_rtt(&self) -> Option<Duration> {
        self.members().filter_map(|m| m.estimates().min_rtt).min()
    }

    /// Whether a queue is held: a member's own min RTT, a filter over its recent samples (BBR's
    /// and Copa's: 10 s), holds a queue above the smallest min RTT any member has seen (it has
    /// stood a whole filter window), and the path runs full (the last report delivered at least
    /// 0.8x the largest delivery rate of the last 10 s). One report's smallest RTT does not tell:
    /// under ACK jitter the ACKs bunch behind long draws, and a report of a stalled BBR's few
    /// samples reads as a queue (simulator, +/-70 and +/-100 ms, 1 and 4 BDP: judged per report, a
    /// copilot held back as if the flow filled the path left it at 0.82-0.87 of the better
    /// member). Nor does the filter alone: at the link rate the bunching lifts every sample of
    /// 10 s (guest, 1 BDP, +/-70 ms: 85-120 ms over a 40-60 ms minimum), and a flow whose BBR
    /// estimate then sank, 21 -> 13 Mbit/s, read as one that kept a queue (2 of 5 reps at 0.72
    /// and 0.86 of CUBIC alone).
    fn queue_held(&self) -> bool {
        let own = self.members().filter_map(|m| m.estimates().min_rtt).max();
        self.path_full && queued(own, self.min_rtt(), false)
    }

    /// What the path holds at `report`'s RTT when the report had more than [`OVERFILL`] x that in
    /// flight, else `None`. What the path holds: the largest delivery rate of the last 10 s over
    /// the report's largest RTT (its last sample, its second half's mean, the srtt), so a queue
    /// the RTT shows counts. What a flow keeps in flight beyond it waits in the buffer, where the
    /// RTT shows it, or is dropped; so a loss with that much in flight is a congestion loss even
    /// where the buffer is too shallow for a queue to show ([`queue_stood`] asks for a quarter of
    /// the min RTT: under a quarter of a BDP of buffer no loss read as congestion, and the fused
    /// flow lost 40-50 % of its packets, `algorithms/sim/tests/fusion_shallow_buffer.rs`), and
    /// what the path was shown to hold is what it holds, not the window that met the loss (a
    /// slow start's 199 packets on a 66-packet path, kept as held, let BBR's two-BDP window go
    /// out unpaced at each ProbeRtt exit). Not in the pilot's Startup, whose in flight runs ahead
    /// of what it has delivered (2.885x per round) before any buffer fills, so random loss there
    /// stays the path's.
    fn overfilled(&self, report: &Report, srtt: Option<Duration>, pilot_starting: bool) -> Option<u64> {
        let rtt = [report.rtt_last, report.rtt_second_half_mean, srtt].into_iter().flatten().max()?;
        let holds = self.delivered_max.get().bytes_over(rtt);
        (!pilot_starting && holds > 0.0 && report.bytes_in_flight as f64 > OVERFILL * holds)
            .then(|| bytes_from_f64(holds))
    }

    /// `bw` over the smallest min RTT.
    fn bdp_at(&self, bw: Rate) -> Option<u64> {
        Some(bytes_from_f64(bw.bytes_over(self.min_rtt()?)))
    }

    /// The pilot's bandwidth estimate (else the first copilot's) over the smallest min RTT.
    fn bdp_estimate(&self) -> Option<u64> {
        self.bdp_at(self.members().find_map(|m| m.estimates().bandwidth)?)
    }

    /// The window the `target` function steers to, if it can be known yet.
    fn target_window(&self, target: TargetCwnd) -> Option<u64> {
        match target {
            TargetCwnd::Bytes(b) => Some(b),
            TargetCwnd::Bdp(gain) => self.bdp_estimate().map(|b| bytes_from_f64(b as f64 * gain)),
        }
    }

    /// The BDP estimate of the first paced member (`paced`, pilot first), over the smallest min
    /// RTT: a window-only member's bandwidth is its own window over srtt, no estimate of the path.
    fn paced_bdp_estimate(&self, paced: &[bool]) -> Option<u64> {
        self.bdp_at(self.members().zip(paced).filter(|(_, &p)| p).find_map(|(m, _)| m.estimates().bandwidth)?)
    }

    /// The members' windows, a paced member's read at the path's min RTT: its window is a cap
    /// from its rate over its own min RTT, and a filter that expired under a queue another
    /// member's window keeps (BBR's, every 10 s) takes that queue for the path.
    fn windows_at_path_min_rtt(&self, decisions: &[Decision]) -> Vec<u64> {
        let path = self.min_rtt();
        self.members()
            .zip(decisions)
            .map(|(m, d)| match (d.rate, m.estimates().min_rtt, path) {
                (Some(_), Some(own), Some(path)) if own > path => {
                    bytes_from_f64(d.cwnd_bytes as f64 * path.as_secs_f64() / own.as_secs_f64())
                        .max(self.min_window)
                        .min(d.cwnd_bytes)
                }
                _ => d.cwnd_bytes,
            })
            .collect()
    }

    /// Whether the pacing, not the window, held the flow back over `report` where a window the
    /// pacing left unused buys nothing: `max` on cwnd, a paced flow, no loss, under 90 % of the
    /// window in force in flight, and either the loss guard waiting for a window member's
    /// regrowth or a queue held ([`Self::queue_held`]: the flow already fills the path, and Linux
    /// grows no window the flow does not fill). Otherwise the growing window is what scales a
    /// stalled pilot's pacing up ([`calibrated_rate`]).
    fn paced_short_of_window(&self, report: &Report) -> bool {
        self.fusion == FusionFn::Max
            && self.fuse_on == FuseOn::Cwnd
            && self.decision.rate.is_some()
            && (self.guard.regain.is_some() || self.queue_held())
            && !report.has_loss()
            && !report.congestion_signal()
            && report.bytes_in_flight > 0
            && !window_in_use(report.bytes_in_flight, self.decision.cwnd_bytes)
    }

    /// `max` on cwnd: for each rate-based member, whether the flow did not send at its rate over
    /// `report`, so that the report is app-limited to it (its monitor intervals would credit or
    /// charge it with a rate it did not send): the window in force held the flow under what the
    /// member's rate puts in flight (the flow filling a window below it), or an unpaced window
    /// member's lead put more than [`NOT_OWN_RATE`] x that in flight. The second (2026-11-29,
    /// issue 21): on shallow buffers CUBIC's unpaced lead charged Vivace's intervals with its
    /// losses and credited them with its throughput, Vivace's gradient jumped it to 1.2-1.5x the
    /// link (100 Mbit/s, 10 ms, 21 packets: 680 of the flow's 848 lost packets came under its paced
    /// lead after such a jump). At 1.0x every unpaced report counted, Vivace's intervals all went
    /// unjudged while its per-report brakes still cut, and its rate sank to the floor.
    fn not_at_own_rate(&self, report: &Report) -> Vec<bool> {
        let in_force = self.decision.cwnd_bytes as f64;
        let filled = window_in_use(report.bytes_in_flight, self.decision.cwnd_bytes);
        let unpaced = self.decision.rate.is_none();
        let in_flight = report.bytes_in_flight as f64;
        self.own_paced_windows
            .iter()
            .map(|w| {
                w.is_some_and(|own| {
                    (filled && in_force < 0.9 * own as f64) || (unpaced && in_flight > NOT_OWN_RATE * own as f64)
                })
            })
            .collect()
    }

    /// The most [`calibrated_rate`] scales the pilot's pacing up to: 2.885x the pilot's bandwidth
    /// estimate; for a rate-based pilot, whose estimate is its own rate (PCC) and no view of the
    /// path, 2.885x the larger of that and what the flow delivered, so a window member's window
    /// paces the flow up as fast as deliveries let it (Vivace under ACK jitter runs at a few
    /// percent of the link, and its rate held the fused flow at 2.885x that).
    ///
    /// While a queue is held ([`Self::queue_held`]), at most BBR's probing gain, 1.25x, over what
    /// the flow delivered: the flow already fills the path, so pacing faster only moves the window
    /// the pacing left unused into the buffer. The scaling is for a pilot whose estimate stalled
    /// below the path, where no queue stands; with one held, a pilot window that is no view of
    /// the path (BBR's ProbeRtt, 4 packets, entered as its filter expired under the queue) scaled
    /// the pacing to the 2.885x cap (guest, 4 BDP, +/-70 ms: 59 Mbit/s on a 20 Mbit/s link, 800
    /// unused packets into a full buffer, 2.2 % lost; `guest_replay.rs`).
    fn pacing_ceiling(&self, report: &Report, rate_based_pilot: bool) -> Option<Rate> {
        let own = self.pilot.estimates().bandwidth;
        let bound = match (own, report.delivery_rate.filter(|_| rate_based_pilot)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let reach = bound.map(|b| b * crate::bbr::HIGH_GAIN);
        match (reach, report.delivery_rate.filter(|_| self.queue_held())) {
            (Some(r), Some(d)) => Some(r.min(d * PROBE_GAIN)),
            (r, d) => r.or(d.map(|d| d * PROBE_GAIN)),
        }
    }

    /// `max` on cwnd: whether an unpaced member's window leads the flow, so that the flow is sent
    /// unpaced, as that member sends alone: its window wins, or ties with the pilot's (the pilot,
    /// synced to it, holds the same window, and `choose` keeps the pilot on a tie; in the guest
    /// CUBIC's growth per report often rounds to nothing, and a tie that fell back to BBR's rate
    /// flipped the pacing on alternate reports), with a queue held too (2026-12-02: paced once a
    /// queue stood, at most 1.25x what the flow delivered, CUBIC's window lost less at the full
    /// buffer than a competing CUBIC's bursts and took 0.70 of the link from it; see the module
    /// notes).
    ///
    /// Paced, a window that wins is sent at or under one window per srtt, which under ACK jitter
    /// leaves it short: each bunch of ACKs frees a window's worth that the pacing spreads over an
    /// srtt while RTT samples run 30-170 ms (guest, 1 BDP, BBR's Startup stalled in every rep:
    /// paced, 0.84-1.10x in-kernel CUBIC at +/-70 ms and 0.86-1.10x at +/-100; unpaced,
    /// 0.90-1.11x and 1.03-1.06x, retransmits within CUBIC's own spread; docs/kernel-parity.md).
    ///
    /// Nor while both the pilot's own window and the fused one are above what the path was shown
    /// to hold ([`LossGuard::lost_at`]): synced to a pilot window that led, CUBIC tied with it, and
    /// unpaced, BBR's 2-3 BDP overflowed a 0.5 BDP buffer (5.3 % lost, in-kernel CUBIC 0.6 %), as
    /// did a Startup target that met a loss with 310 of its 546 packets in flight (255 lost in one
    /// report). Held at that loss's window alone, CUBIC's lead was paced on most reports under
    /// ACK jitter (BBR's aggregation allowance lifts its window above it; 1 BDP, +/-70 ms:
    /// 0.88-1.11x in-kernel CUBIC, median 0.91); with what the flow since kept in flight,
    /// 0.92-1.12x, loss within 2x outside the start (`guest_replay.rs` has both logs). A loss
    /// response at or under it goes out unpaced whatever the pilot's window: paced at BBR's rate,
    /// CUBIC's regrowth from 125 packets delivered 11 Mbit/s for 15 s (0.5 BDP, +/-70 ms: 0.85x).
    fn window_member_leads(&self, decisions: &[Decision], windows: &[u64], winner: usize, fused: u64) -> bool {
        let unpaced = |i: usize| i != 0 && decisions[i].rate.is_none();
        self.fusion == FusionFn::Max
            && (unpaced(winner) || (0..decisions.len()).any(|i| unpaced(i) && windows[i] == fused))
            && self.guard.lost_at.is_none_or(|held| windows[0].min(fused) <= held)

    }

    /// `max` on cwnd: the most a window member (one without a pacing rate) is synced up to while
    /// a paced pilot holds the window it left its Startup with, or `None`. That window is a target
    /// for the Drain's pacing, which never fills it (BBR: 2.885x its estimate over the min RTT
    /// plus its ACK-aggregation allowance), not one the path was shown to hold. Synced to it,
    /// CUBIC kept it once BBR lowered its own to twice its estimate, won `max` with a window above
    /// what path and buffer hold, and was paced at about that window per srtt until the buffer
    /// overflowed (guest, 1 BDP, +/-70 ms: a 548-packet window where path and buffer hold 345,
    /// 168 packets lost in one episode, 6.5x the lossier member; the simulator repeats it on
    /// seeds 6, 7, 12, 17, 18, 20 and 25). So from the exit until the pilot lowers that window
    /// (BBR's ProbeBW) or a congestion loss opens the guard, a window member is synced up to no
    /// more than its own window or the window in force before the exit, whichever is larger; the
    /// pilot's lowered window then leads, paced at the pilot's own rate.
    fn startup_exit_cap(&mut self, pilot_was_starting: bool, decisions: &[Decision]) -> Option<u64> {
        let pilot = decisions[0];
        let applies = self.fusion == FusionFn::Max && pilot.rate.is_some();
        if applies && pilot_was_starting && !self.pilot.in_slow_start() {
            self.startup_exit = Some((pilot.cwnd_bytes, self.decision.cwnd_bytes));
        }
        let lowered = self.startup_exit.is_some_and(|(exit, _)| pilot.cwnd_bytes < exit);
        if !applies || lowered || self.guard_held || self.pilot.in_slow_start() {
            self.startup_exit = None;
        }
        self.startup_exit.map(|(_, before)| before)
    }

    /// Index of the chosen value among `values` (pilot first).
    fn choose(&self, values: &[f64], target: Option<f64>) -> usize {
        let mut best = 0;
        for (i, v) in values.iter().enumerate().skip(1) {
            let better = match (self.fusion, target) {
                (FusionFn::Max, _) => *v > values[best],
                (FusionFn::Min, _) => *v < values[best],
                (FusionFn::Target(_), Some(t)) => (v - t).abs() < (values[best] - t).abs(),
                // No target known yet: keep the pilot's value.
                (FusionFn::Target(_), None) => false,
            };
            if better {
                best = i;
            }
        }
        best
    }
}

impl CongestionControl for FusionController {
    fn name(&self) -> &'static str {
        "fused"
    }

    fn on_report(&mut self, report: &Report) -> Decision {
        if let Some(d) = report.delivery_rate {
            self.delivered_max.update(report.now.as_secs(), d);
        }
        self.path_full = report.delivery_rate.is_some_and(|d| d.mbps() >= 0.8 * self.delivered_max.get().mbps());
        let pilot_was_starting = self.pilot.in_slow_start();
        let paced_short = self.paced_short_of_window(report);
        let held_below = self.held_below_own_rate();
        let window_bound = self.not_at_own_rate(report);
        let decisions: Vec<Decision> = self
            .members_mut()
            .enumerate()
            .map(|(i, m)| {
                let window_waits = paced_short && m.decision().rate.is_none() && !m.in_slow_start();
                let held = held_below.get(i).copied().unwrap_or(false) || window_bound.get(i).copied().unwrap_or(false);
                if window_waits || held {
                    m.on_report(&Report { app_limited: true, ..report.clone() })
                } else {
                    m.on_report(report)
                }
            })
            .collect();
        let srtt = self.srtt(report);
        self.last_srtt = srtt;
        let target_window = match self.fusion {
            FusionFn::Target(t) => self.target_window(t),
            _ => None,
        };
        match self.fuse_on {
            FuseOn::Cwnd => {
                // Each member's window as it means it (a PCC sender's: what its rate puts in flight).
                let compared: Vec<Decision> = self
                    .members()
                    .zip(&decisions)
                    .map(|(m, d)| Decision { cwnd_bytes: m.fusion_window(), ..*d })
                    .collect();
                self.own_paced_windows = compared
                    .iter()
                    .zip(&decisions)
                    .map(|(c, d)| (c.cwnd_bytes < d.cwnd_bytes).then_some(c.cwnd_bytes))
                    .collect();
                let windows: Vec<u64> = if self.fusion == FusionFn::Max {
                    self.windows_at_path_min_rtt(&compared)
                } else {
                    compared.iter().map(|d| d.cwnd_bytes).collect()
                };
                let values: Vec<f64> = windows.iter().map(|&w| w as f64).collect();
                // A loss whose queue the report's smallest RTT does not show but its latest RTTs
                // do (slow start filling the buffer within the report) is decided by the next
                // report: the members are not synced to `max` over it, so a loss response given
                // now is still there if the next report shows the queue and opens the guard.
                let min_rtt = self.min_rtt();
                let undecided = self.fusion == FusionFn::Max
                    && report.has_loss()
                    && !report.timeout
                    && !queue_stood(report, min_rtt)
                    && queue_rose(report, min_rtt);
                let (winner, fused) = if self.fusion == FusionFn::Max {
                    if report.undo {
                        self.guard.undo(report.now);
                    }
                    if report.has_loss() || report.congestion_signal() {
                        let holds = self.overfilled(report, srtt, pilot_was_starting);
                        self.guard.on_loss(report, self.decision.cwnd_bytes, min_rtt, srtt, holds);
                    }
                    self.guard.held(report, self.decision.cwnd_bytes, srtt);
                    self.guard_held = self.guard.active(report.now);
                    let guarded = self.guard_held.then(|| {
                        let paced: Vec<bool> = decisions.iter().map(|d| d.rate.is_some()).collect();
                        (self.paced_bdp_estimate(&paced), paced)
                    });
                    match guarded.and_then(|(bdp, paced)| self.guard.window(report.now, &windows, &paced, bdp)) {
                        Some(guarded) => guarded,
                        None => {
                            let winner = self.choose(&values, None);
                            (winner, windows[winner])
                        }
                    }
                } else {
                    let winner = self.choose(&values, target_window.map(|w| w as f64));
                    (winner, compared[winner].cwnd_bytes)
                };
                let cap = self.startup_exit_cap(pilot_was_starting, &decisions);
                // A rate-based winner's window is what its rate puts in flight, a probe up to 1.5x
                // the link at times, not a window the path was shown to hold: a window member keeps
                // its own (`synced_to`).
                let rate_winner = self.own_paced_windows.get(winner).is_some_and(Option::is_some);
                if !undecided {
                    let synced_to = |i: usize| match cap {
                        _ if rate_winner && decisions[i].rate.is_none() => fused.min(decisions[i].cwnd_bytes),
                        Some(cap) if decisions[i].rate.is_none() => fused.min(decisions[i].cwnd_bytes.max(cap)),
                        _ => fused,
                    };
                    self.members_mut().enumerate().for_each(|(i, m)| m.sync(Sync::Cwnd(synced_to(i))));
                }
                let pilot = self.pilot.decision();
                self.last_winner = winner;
                // The pilot's window as it means it: a PCC pilot's is what its rate puts in flight.
                let rate_based_pilot = self.own_paced_windows.first().is_some_and(Option::is_some);
                let ceiling = self.pacing_ceiling(report, rate_based_pilot);
                let rate = calibrated_rate(pilot.rate, compared[0].cwnd_bytes, fused, ceiling);
                // A rate-based winner keeps its own cap installed, so its rate, not the window, paces.
                let installed =
                    if fused == compared[winner].cwnd_bytes { fused.max(decisions[winner].cwnd_bytes) } else { fused };
                // A window member's window that leads is sent unpaced within what the path has held
                // (see `window_member_leads`); never a rate-based winner's cap, which a
                // window member only tied with on what that rate puts in flight (unpaced, the cap,
                // twice that, went out at once: 20 Mbit/s, 40 ms, 12 packets of buffer, 11 % lost).
                let leads = installed == fused && self.window_member_leads(&decisions, &windows, winner, fused);
                let rate = if leads { None } else { rate };
                self.decision = Decision { cwnd_bytes: installed, rate };
            }
            FuseOn::Rate => self.fuse_rates(&decisions, srtt, target_window),
        }
        self.decision
    }

    fn decision(&self) -> Decision {
        self.decision
    }

    fn sync(&mut self, to: Sync) {
        self.members_mut().for_each(|m| m.sync(to));
        match to {
            Sync::Cwnd(c) => self.decision.cwnd_bytes = c,
            Sync::Rate(r) => self.decision.rate = Some(r),
        }
    }

    /// The shortest cadence any member asks for. Every member sees every report, so a PCC or MOCC
    /// member (pilot or copilot) gets the monitor-interval cadence it needs to form its intervals;
    /// window algorithms take reports at any cadence (per acked byte, the kernel's own rate samples).
    /// None when no member asks (the datapath's once per RTT).
    fn report_interval(&self) -> Option<Duration> {
        let pilot = self.pilot.report_interval();
        self.copilots.iter().filter_map(|c| c.report_interval()).chain(pilot).min()
    }

    /// The members' decision records (a PCC pilot's or copilot's monitor intervals), pilot first.
    fn take_trace(&mut self) -> Vec<crate::pcc::MiTrace> {
        self.members_mut().flat_map(|m| m.take_trace()).collect()
    }

    /// The member [`FusionController::last_winner`] names (the pilot before any report).
    fn chosen_member(&self) -> Option<&'static str> {
        self.members().nth(self.last_winner).map(|m| m.name())
    }

    /// The pilot's phase.
    fn in_slow_start(&self) -> bool {
        self.pilot.in_slow_start()
    }

    /// Fused on cwnd with `max`, the window grows per ACK as far as any member would grow its
    /// own (the fused window follows the largest); with `min`, only as far as every member
    /// would. A `target` fusion and rate fusion do not grow between reports.
    fn ack_growth_limit(&self) -> Option<u64> {
        if self.guard_held {
            // The guard holds a loss response: no member grows past it between reports (guest,
            // 1 BDP, +/-70 ms: BBR's Startup target let the datapath regrow CUBIC's response,
            // 357 packets, to 498 within the loss episode; 333 packets lost).
            return None;
        }
        self.fuse_growth_limits(self.members().map(|m| m.ack_growth_limit()))
    }

    /// The first delay exit among the members that grow: past it, those members fall to their
    /// limit after it and the others keep theirs, fused as [`Self::ack_growth_limit`] fuses.
    /// With `max` on cwnd and a BBR pilot, CUBIC's HyStart delay test stops the growth CUBIC's
    /// slow start drove, and BBR's startup target still holds.
    fn ack_growth_delay_exit(&self) -> Option<DelayExit> {
        if self.fuse_on != FuseOn::Cwnd || !matches!(self.fusion, FusionFn::Max | FusionFn::Min) {
            return None;
        }
        let growing: Vec<(Option<u64>, Option<DelayExit>)> =
            self.members().map(|m| (m.ack_growth_limit(), m.ack_growth_delay_exit())).collect();
        let rtt = growing.iter().filter(|(l, _)| l.is_some()).filter_map(|(_, e)| e.map(|e| e.rtt)).min()?;
        let after = growing.iter().map(|(limit, exit)| match exit {
            Some(e) if e.rtt == rtt => e.limit_after,
            _ => *limit,
        });
        Some(DelayExit { rtt, limit_after: self.fuse_growth_limits(after) })
    }

    /// Every member adopts the old state; the fused decision starts as the pilot's.
    fn adopt(&mut self, from: &Handover) {
        self.members_mut().for_each(|m| m.adopt(from));
        self.decision = self.pilot.decision();
    }

    fn estimates(&self) -> Estimates {
        let mut e = self.pilot.estimates();
        for c in &self.copilots {
            let ce = c.estimates();
            e.bandwidth = e.bandwidth.or(ce.bandwidth);
            e.min_rtt = e.min_rtt.or(ce.min_rtt);
            e.srtt = e.srtt.or(ce.srtt);
        }
        e
    }
}

/// The quantity a fusion function combines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FuseOn {
    /// Congestion windows (bytes).
    #[default]
    Cwnd,
    /// Sending rates; window-only algorithms count as `cwnd / srtt`.
    Rate,
}

impl FromStr for FuseOn {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, PolicyError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cwnd" => Ok(FuseOn::Cwnd),
            "rate" => Ok(FuseOn::Rate),
            _ => Err(PolicyError::UnknownFuseOn(s.to_string())),
        }
    }
}

/// The target a `target` fusion steers towards.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetCwnd {
    /// A fixed window in bytes.
    Bytes(u64),
    /// The members' BDP estimate times this gain.
    Bdp(f64),
}

impl Default for TargetCwnd {
    fn default() -> Self {
        TargetCwnd::Bdp(1.0)
    }
}

/// How the members' values are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FusionFn {
    /// The largest value (e.g. BBR + CUBIC: keep sending through ACK gaps).
    #[default]
    Max,
    /// The smallest value (e.g. BBR + Copa on rate: react to a capacity drop at once).
    Min,
    /// The value closest to a target window.
    Target(TargetCwnd),
}

impl FusionFn {
    /// Parse `max`, `min` or `target`; `target` takes `target_cwnd_bytes` or, without it, the BDP.
    pub fn parse(name: &str, target_cwnd_bytes: Option<u64>) -> Result<FusionFn, PolicyError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "max" => Ok(FusionFn::Max),
            "min" => Ok(FusionFn::Min),
            "target" => Ok(FusionFn::Target(match target_cwnd_bytes {
                Some(b) => TargetCwnd::Bytes(b),
                None => TargetCwnd::default(),
            })),
            _ => Err(PolicyError::UnknownFusion(name.to_string())),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            FusionFn::Max => "max",
            FusionFn::Min => "min",
            FusionFn::Target(_) => "target",
        }
    }
}

#[cfg(test)]
mod tests;
