//! CUBIC (RFC 9438, Linux `tcp_cubic.c` v2.3) with HyStart.
//!
//! Model: after a loss at window `W_max`, `cwnd = beta * W_max` and the window then follows
//! `W(t) = W_max + C (t - K)^3` with `K = cbrt(W_max (1 - beta) / C)`, t the time since the epoch
//! began (packets and seconds). Each ACK grows cwnd by `1 / cnt` packet, with
//! `cnt = cwnd / (W(t + min_rtt) - cwnd)` so the window reaches the curve's value one RTT ahead;
//! a Reno-equivalent window `W_est` grows `3 (1 - beta) / (1 + beta)` packet per RTT and CUBIC
//! never grows slower than it (TCP-friendly region). `cnt >= 2`: at most 1.5x per RTT. An ECN
//! mark is answered as a loss ([`Report::congestion_signal`], RFC 3168; Linux's CWR state).
//! Fast convergence: a loss below the previous `W_max` sets `W_max = cwnd (1 + beta) / 2`,
//! releasing bandwidth to newer flows. A timeout restarts slow start from the loss window
//! ([`LOSS_WINDOW_PACKETS`]) and forgets `W_max`.
//!
//! States: `SlowStart` (cwnd < ssthresh) -> `CongestionAvoidance` (first loss, or HyStart);
//! within avoidance an `Epoch` is the current cubic curve, begun by the first ACK after a
//! reduction and ended by the next one. A [`LossEpisode`] is the one-reduction-per-episode guard,
//! as in `reno.rs`. HyStart ([`HyStart`]) watches slow start once cwnd >= 16 packets and
//! ends it on an ACK train longer than `min_rtt / 2` or on a round whose minimum RTT exceeds
//! `min_rtt + clamp(min_rtt / 8, 4 ms, 16 ms)`; it fires once until a timeout resets it.
//!
//! References: RFC 9438 (CUBIC, 2023); Linux `net/ipv4/tcp_cubic.c` (v2.3, `bictcp_update`,
//! `bictcp_recalc_ssthresh`, `hystart_update`); Ha, Rhee, Xu, "CUBIC: A New TCP-Friendly
//! High-Speed TCP Variant" (SIGOPS OSR 2008); Ha, Rhee, "Taming the elephants: new TCP slow
//! start" (HyStart, Computer Networks 2011).
//!
//! Differences from the reference:
//! - Reports arrive once per RTT or per ACK batch, not per ACK, so the per-ACK rule "+1 packet
//!   every `cnt` ACKs" becomes `cwnd += acked / cnt` once per report, with `cnt` (and the
//!   target `W(t + min_rtt)`) evaluated at the report's time [`Report::now`]. Over a report that
//!   acknowledges a window this reaches the same target as the kernel does over that RTT. `acked`
//!   is counted in bytes (`bytes_acked`), so `cnt` is "acked bytes per byte of growth"; `cnt` is
//!   fractional rather than the kernel's truncated integer.
//! - The epoch begins at the start of the first avoidance report's interval
//!   (`now - interval`), the nearest the report gives to "the first ACK after the reduction".
//! - Slow start grows `cwnd += acked` up to ssthresh and hands the rest of the report's ACKs to
//!   avoidance (as `tcp_slow_start` does per ACK); HyStart runs before the growth, as
//!   `pkts_acked` runs before `cong_avoid` in the kernel.
//! - HyStart's ACK train is the datapath's [`Report::ack_train`] (longest run of ACKs <= 2 ms
//!   apart) rather than a train measured from the round's first ACK; the delay test uses the
//!   report's `rtt_min` once it holds at least 8 samples (the kernel's first 8 samples of a
//!   round). The unpaced threshold `min_rtt / 2` is used: CUBIC here never paces.
//! - The "no previous W_max" rule follows the kernel code: `cnt <= 20`, i.e. cwnd grows *at
//!   least* 5 % per RTT before the first loss (the reference notes phrase it as "at most").
//! - Losses of the window in flight at the previous reduction belong to the same episode
//!   ([`LossEpisode`], the kernel's recovery until `high_seq`); a report with losses does not
//!   grow the window (the kernel's recovery does not call `cong_avoid`).
//! - An app-limited report does not grow the window and shifts the epoch's start by the
//!   report's interval, so the curve pauses while the window is unused (the kernel does this for
//!   idle periods, `CA_EVENT_TX_START`).
//! - Nor does a report whose flow did not use its window (the kernel's `tcp_is_cwnd_limited`:
//!   `cong_avoid` returns early unless the sender hit cwnd in the last window, or, in slow
//!   start, cwnd < 2 x the packets out). A report holds only the inflight at its end, so the
//!   test is slow start's for both phases: inflight below half the window. Unlike an
//!   app-limited report the epoch keeps running, as in the kernel. A report without an
//!   inflight count (0) counts as window-limited. Without this the agent's CUBIC kept growing
//!   its window while the datapath could not send it (a paced or CPU-starved sender, a fused
//!   flow paced by its pilot), and dumped the excess as a burst when sending caught up.
//! - `sync(Sync::Cwnd(c))` adopts `c`. A different `c` ends the epoch: the next report starts a
//!   new one from `c` with the same `W_max`. Below `W_max` that is the same curve (the cubic is
//!   time-invariant: from any point below `W_max` the remaining time to `W_max` is its K);
//!   above `W_max` the convex probe restarts from `c`. Syncing to the current window is a no-op,
//!   so a fusion that syncs every report to CUBIC's own value leaves it undisturbed. `ssthresh`
//!   is kept, so a window synced below it slow-starts back up to it, as Linux does after a
//!   window restart.

use crate::filters::srtt_after;
use crate::loss_episode::{Before, LossEpisode, LOSS_WINDOW_PACKETS};
use crate::units::{bytes_from_f64, rate_of_window};
use crate::config::{check_init_cwnd, check_range, PolicyError};
use crate::ack_growth::DelayExit;
use crate::{Algorithm, CongestionControl, Decision, Estimates, FlowInfo, Report, Sync};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The smallest window CUBIC keeps, in packets (`tcp_cubic.c`: `max(cwnd * beta, 2U)`).
pub const MIN_CWND_PACKETS: u64 = 2;

/// Window kept after a loss, as a fraction of the window at the loss (`tcp_cubic.c`:
/// `beta = 717` over `BICTCP_BETA_SCALE = 1024`; RFC 9438 section 4.6: 0.7).
pub const BETA: f64 = 717.0 / 1024.0;

/// Cubic scaling constant C, in packets per second cubed (RFC 9438 section 5.1; `tcp_cubic.c`
/// `bic_scale = 41`, i.e. 41 * 10 / 1024 = 0.4).
pub const C_PACKETS_PER_SEC3: f64 = 0.4;

/// Smallest `cnt` (ACKed packets per packet of growth): cwnd grows at most 1.5x per RTT
/// (`tcp_cubic.c` v2.3; RFC 9438 section 4.2 caps the target at 1.5 cwnd).
pub const MIN_CNT: f64 = 2.0;

/// Largest `cnt` before the first loss (no `W_max` yet): at least 1/20 = 5 % growth per RTT,
/// because the curve from a zero origin is too timid while the bandwidth is unknown
/// (`tcp_cubic.c`: `if (last_max_cwnd == 0 && cnt > 20) cnt = 20`).
pub const MAX_CNT_WITHOUT_W_MAX: f64 = 20.0;

/// `cnt` per packet of cwnd when the curve is at or below the window: a "very small increment"
/// of 1/100 packet per RTT (`tcp_cubic.c`: `cnt = 100 * cwnd`).
pub const STALLED_CNT_PER_CWND_PACKET: f64 = 100.0;

/// HyStart only watches slow start from this window on (`tcp_cubic.c` `hystart_low_window`).
pub const HYSTART_LOW_WINDOW_PACKETS: u64 = 16;

/// RTT samples a round needs before HyStart's delay test (`tcp_cubic.c` `HYSTART_MIN_SAMPLES`).
pub const HYSTART_MIN_SAMPLES: u64 = 8;

/// HyStart's delay threshold is `min_rtt / HYSTART_DELAY_DIVISOR`, clamped to
/// [`HYSTART_DELAY_MIN`, `HYSTART_DELAY_MAX`] (`tcp_cubic.c` `HYSTART_DELAY_THRESH(delay_min >> 3)`).
pub const HYSTART_DELAY_DIVISOR: u32 = 8;
/// Floor of HyStart's delay threshold, so RTT jitter on short paths does not end slow start.
pub const HYSTART_DELAY_MIN: Duration = Duration::from_millis(4);
/// Ceiling of HyStart's delay threshold, so long paths still exit before a large queue builds.
pub const HYSTART_DELAY_MAX: Duration = Duration::from_millis(16);

/// An ACK train longer than `min_rtt / HYSTART_ACK_TRAIN_DIVISOR` ends slow start: the window
/// already spans half the path's delay (`tcp_cubic.c`: `threshold >>= 1` for unpaced flows).
pub const HYSTART_ACK_TRAIN_DIVISOR: u32 = 2;

/// CUBIC's parameters. Values that cannot work (`beta` outside (0, 1), `c` not positive and
/// finite) fall back to their defaults when a flow is built.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CubicConfig {
    /// Window kept after a loss, as a fraction of the window at the loss (RFC 9438
    /// `beta_cubic`). Default [`BETA`] = 717/1024 ~ 0.7.
    pub beta: f64,
    /// Cubic scaling constant, packets per second cubed. Default [`C_PACKETS_PER_SEC3`] = 0.4.
    pub c: f64,
    /// Lower `W_max` to `cwnd (1 + beta) / 2` on a loss below the previous `W_max`, to release
    /// bandwidth to newer flows. Default true (Linux `fast_convergence = 1`).
    pub fast_convergence: bool,
    /// Never grow slower than a Reno flow would (RFC 9438 section 4.3). Default true (Linux
    /// `tcp_friendliness = 1`).
    pub tcp_friendliness: bool,
    /// End slow start early on HyStart's ACK-train or delay signal. Default true (Linux
    /// `hystart = 1`, both detectors).
    pub hystart: bool,
    /// HyStart watches slow start only from this window on, in packets. Default
    /// [`HYSTART_LOW_WINDOW_PACKETS`] = 16.
    pub hystart_low_window_packets: u64,
    /// Initial window in packets; `None` takes the datapath's (Linux: 10).
    pub init_cwnd_packets: Option<u64>,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            beta: BETA,
            c: C_PACKETS_PER_SEC3,
            fast_convergence: true,
            tcp_friendliness: true,
            hystart: true,
            hystart_low_window_packets: HYSTART_LOW_WINDOW_PACKETS,
            init_cwnd_packets: None,
        }
    }
}

/// One cubic curve: from the first ACK after a reduction to the next reduction.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Epoch {
    start: Duration,
    /// Time the curve takes to climb back to its origin, K (seconds).
    k_secs: f64,
    /// The curve's inflection point: `W_max`, or the window at the epoch's start when it began
    /// at or above `W_max` (packets).
    origin_packets: f64,
    /// Reno-equivalent window `W_est` (packets), for the TCP-friendly region.
    w_est_packets: f64,
}

impl Epoch {
    /// `W(t) = origin + C (t - K)^3`, in packets.
    fn target_packets(&self, t: Duration, c: f64) -> f64 {
        let offset = t.as_secs_f64() - self.k_secs;
        self.origin_packets + c * offset * offset * offset
    }
}

/// HyStart's progress through slow start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HyStart {
    /// Disabled by configuration.
    Off,
    /// Watching slow start for the end of the path's capacity.
    Watching,
    /// Ended slow start on this signal; quiet until a timeout resets it.
    Found(HyStartExit),
}

/// Which HyStart detector ended slow start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HyStartExit {
    /// ACKs arrived back to back for more than half the minimum RTT.
    AckTrain,
    /// A round's minimum RTT rose clearly above the flow's minimum.
    Delay,
}

/// Per-flow CUBIC state.
#[derive(Clone, Debug)]
pub struct Cubic {
    mss: u64,
    beta: f64,
    c: f64,
    alpha_aimd: f64,
    fast_convergence: bool,
    tcp_friendliness: bool,
    hystart_low_window: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Window at the last reduction (after fast convergence); `None` before the first loss and
    /// after a timeout.
    w_max_packets: Option<f64>,
    epoch: Option<Epoch>,
    hystart: HyStart,
    /// The loss episode last answered (no second reduction within it).
    episode: LossEpisode,
    srtt: Option<Duration>,
    min_rtt: Option<Duration>,
}

impl Cubic {
    fn min_cwnd(&self) -> u64 {
        MIN_CWND_PACKETS * self.mss
    }

    fn cwnd_packets(&self) -> f64 {
        self.cwnd as f64 / self.mss as f64
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// HyStart's state, e.g. to see which signal ended slow start.
    pub fn hystart(&self) -> HyStart {
        self.hystart
    }

    fn observe_rtt(&mut self, r: &Report) {
        self.srtt = srtt_after(self.srtt, r);
        if let Some(m) = r.rtt_min.or(r.rtt_last).filter(|d| !d.is_zero()) {
            self.min_rtt = Some(self.min_rtt.map_or(m, |old| old.min(m)));
        }
    }

    /// The flow kept less than half its window in flight (`!tcp_is_cwnd_limited`, with slow
    /// start's `cwnd < 2 * max_packets_out` rule; see the module notes). 0 = not measured.
    /// Linux asks for the most packets out over the last window; a report's in-flight count is
    /// one moment, its last ACK's, which on a lossy link reads low after each retransmission
    /// burst (guest, 20 Mbit/s 40 ms 1 % loss: 7 packets in flight of a 17-packet window while
    /// 17 were delivered per RTT). So a report that delivered at least half the window per srtt
    /// used it, whatever its last moment read.
    fn window_unused(&self, r: &Report) -> bool {
        let low_at_last_ack = r.bytes_in_flight > 0 && r.bytes_in_flight.saturating_mul(2) < self.cwnd;
        low_at_last_ack && !self.delivered_half_the_window(r)
    }

    fn delivered_half_the_window(&self, r: &Report) -> bool {
        let Some(srtt) = self.srtt.filter(|_| !r.interval.is_zero()) else { return false };
        let per_srtt = r.bytes_acked as f64 * srtt.as_secs_f64() / r.interval.as_secs_f64();
        2.0 * per_srtt >= self.cwnd as f64
    }

    /// `tcp_cubic.c` `bictcp_recalc_ssthresh`: remember W_max (with fast convergence) and keep
    /// `beta` of the window.
    fn reduce(&mut self, r: &Report) {
        let cwnd_packets = self.cwnd_packets();
        self.w_max_packets = Some(match self.w_max_packets {
            Some(w_max) if self.fast_convergence && cwnd_packets < w_max => cwnd_packets * (1.0 + self.beta) / 2.0,
            _ => cwnd_packets,
        });
        self.epoch = None;
        let before = Before { cwnd: self.cwnd, ssthresh: self.ssthresh };
        self.ssthresh = bytes_from_f64(self.cwnd as f64 * self.beta).max(self.min_cwnd());
        self.cwnd = self.ssthresh;
        self.episode.begin(r, self.srtt, before);
    }

    /// A timeout: ssthresh as for a loss, then forget the curve (`bictcp_reset`) and restart
    /// from the loss window with HyStart watching again.
    fn on_timeout(&mut self, r: &Report) {
        let before = Before { cwnd: self.cwnd, ssthresh: self.ssthresh };
        self.ssthresh = bytes_from_f64(self.cwnd as f64 * self.beta).max(self.min_cwnd());
        self.cwnd = LOSS_WINDOW_PACKETS * self.mss;
        self.w_max_packets = None;
        self.epoch = None;
        if self.hystart != HyStart::Off {
            self.hystart = HyStart::Watching;
        }
        self.episode.begin(r, self.srtt, before);
    }

    /// HyStart's delay threshold: the flow's minimum RTT plus an eighth of it, 4-16 ms
    /// (`HYSTART_DELAY_THRESH`); `None` before an RTT sample.
    fn hystart_delay_threshold(&self) -> Option<Duration> {
        let min_rtt = self.min_rtt?;
        Some(min_rtt + (min_rtt / HYSTART_DELAY_DIVISOR).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX))
    }

    /// `tcp_cubic.c` `hystart_update`, once per report: end slow start (ssthresh = cwnd) on a
    /// long ACK train or on a round whose minimum RTT is clearly above the flow's minimum. The
    /// delay test also runs per RTT sample in the datapath (`ack_growth_delay_exit`), as Linux
    /// runs it per ACK; its verdict arrives as `Report::delay_exit`.
    fn hystart_update(&mut self, r: &Report) {
        if self.hystart != HyStart::Watching || self.cwnd < self.hystart_low_window {
            return;
        }
        let (Some(min_rtt), Some(threshold)) = (self.min_rtt, self.hystart_delay_threshold()) else { return };
        let exit = if r.ack_train > min_rtt / HYSTART_ACK_TRAIN_DIVISOR {
            Some(HyStartExit::AckTrain)
        } else if r.rtt_samples >= HYSTART_MIN_SAMPLES && r.rtt_min.is_some_and(|m| m > threshold) {
            Some(HyStartExit::Delay)
        } else {
            None
        };
        if let Some(exit) = exit {
            self.end_slow_start(exit);
        }
    }

    /// HyStart found the exit: ssthresh = cwnd.
    fn end_slow_start(&mut self, exit: HyStartExit) {
        self.hystart = HyStart::Found(exit);
        self.ssthresh = self.cwnd;
    }

    /// `tcp_slow_start`: grow by the acked bytes up to ssthresh; returns the bytes left over.
    fn slow_start(&mut self, acked: u64) -> u64 {
        let used = acked.min(self.ssthresh.saturating_sub(self.cwnd));
        self.cwnd = self.cwnd.saturating_add(used);
        acked - used
    }

    fn start_epoch(&self, start: Duration) -> Epoch {
        let cwnd_packets = self.cwnd_packets();
        match self.w_max_packets {
            // K = cbrt((W_max - cwnd) / C): time for the concave curve to reach W_max.
            Some(w_max) if w_max > cwnd_packets => Epoch {
                start,
                k_secs: ((w_max - cwnd_packets) / self.c).cbrt(),
                origin_packets: w_max,
                w_est_packets: cwnd_packets,
            },
            _ => Epoch { start, k_secs: 0.0, origin_packets: cwnd_packets, w_est_packets: cwnd_packets },
        }
    }

    /// `tcp_cubic.c` `bictcp_update` + `tcp_cong_avoid_ai` for one report's ACKs.
    fn congestion_avoidance(&mut self, r: &Report, acked: u64) {
        let mut epoch = match self.epoch {
            Some(e) => e,
            None => self.start_epoch(r.now.saturating_sub(r.interval)),
        };
        let cwnd_packets = self.cwnd_packets();
        let acked_packets = acked as f64 / self.mss as f64;

        // Aim for where the curve will be one RTT from now: target = W(t + min_rtt).
        let t = r.now.saturating_sub(epoch.start) + self.min_rtt.unwrap_or_default();
        let target_packets = epoch.target_packets(t, self.c);
        let mut cnt = if target_packets > cwnd_packets {
            cwnd_packets / (target_packets - cwnd_packets)
        } else {
            STALLED_CNT_PER_CWND_PACKET * cwnd_packets
        };
        if self.w_max_packets.is_none() {
            cnt = cnt.min(MAX_CNT_WITHOUT_W_MAX);
        }

        // TCP-friendly region: W_est += alpha_cubic * acked / cwnd; grow at least as fast as it.
        if self.tcp_friendliness {
            epoch.w_est_packets += self.alpha_aimd * acked_packets / cwnd_packets;
            if epoch.w_est_packets > cwnd_packets {
                cnt = cnt.min(cwnd_packets / (epoch.w_est_packets - cwnd_packets));
            }
        }
        let cnt = cnt.max(MIN_CNT);

        self.cwnd = self.cwnd.saturating_add(bytes_from_f64(acked as f64 / cnt));
        self.epoch = Some(epoch);
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_report(&mut self, r: &Report) -> Decision {
        self.observe_rtt(r);
        if r.delay_exit && self.hystart == HyStart::Watching && self.in_slow_start() {
            // The datapath's per-sample delay test (`ack_growth_delay_exit`) ended slow start.
            self.end_slow_start(HyStartExit::Delay);
        }
        // A spurious reduction taken back (`tcp_reno_undo_cwnd`, which CUBIC uses): the window
        // and threshold return, W_max stays, and the curve restarts from the restored window.
        if self.episode.take_back(r, &mut self.cwnd, &mut self.ssthresh) {
            self.epoch = None;
        }
        let in_episode = self.episode.contains(r);
        if r.timeout {
            self.on_timeout(r);
        } else if r.congestion_signal() {
            if !in_episode {
                self.reduce(r);
            }
        } else if r.app_limited {
            if let Some(e) = &mut self.epoch {
                e.start += r.interval;
            }
        } else if self.window_unused(r) {
            // `tcp_is_cwnd_limited` is false: no growth, the curve's clock runs on.
        } else {
            let mut acked = r.bytes_acked;
            if self.in_slow_start() {
                self.hystart_update(r);
                acked = self.slow_start(acked);
            }
            if acked > 0 && !self.in_slow_start() {
                self.congestion_avoidance(r, acked);
            }
        }
        self.cwnd = self.cwnd.max(self.min_cwnd());
        self.decision()
    }

    fn sync(&mut self, to: Sync) {
        let cwnd = to.window_bytes(self.cwnd, self.srtt).max(self.min_cwnd());
        if cwnd != self.cwnd {
            self.cwnd = cwnd;
            self.epoch = None;
        }
    }

    crate::window_controls::window_methods!(decision, ssthresh, per_ack);

    /// HyStart's delay test per RTT sample while it watches slow start, once the window has
    /// reached `hystart_low_window` (Linux tests no sample below it); no growth after it. Armed
    /// from half that window, it fired in the guest's first round under +/-70 ms of ACK jitter
    /// (19-20 packets, where in-kernel CUBIC left slow start at 40-67).
    fn ack_growth_delay_exit(&self) -> Option<DelayExit> {
        let watching = self.hystart == HyStart::Watching && self.in_slow_start();
        let rtt = self.hystart_delay_threshold().filter(|_| watching && self.cwnd >= self.hystart_low_window)?;
        Some(DelayExit { rtt, limit_after: None })
    }

    fn estimates(&self) -> Estimates {
        Estimates { srtt: self.srtt, bandwidth: self.srtt.map(|s| rate_of_window(self.cwnd, s)), min_rtt: self.min_rtt }
    }
}

impl Algorithm for CubicConfig {
    type Controller = Cubic;
    const NAME: &'static str = "cubic";
    const SUMMARY: &'static str = "CUBIC (RFC 9438) with HyStart, as Linux runs it";

    fn build(&self, info: FlowInfo) -> Cubic {
        let mss = info.mss_bytes.max(1);
        let init =
            self.init_cwnd_packets.map_or(info.init_cwnd_bytes, |p| p.saturating_mul(mss)).max(MIN_CWND_PACKETS * mss);
        let beta = if self.beta > 0.0 && self.beta < 1.0 { self.beta } else { BETA };
        let c = if self.c.is_finite() && self.c > 0.0 { self.c } else { C_PACKETS_PER_SEC3 };
        Cubic {
            mss,
            beta,
            c,
            // RFC 9438 section 4.3: alpha_cubic = 3 (1 - beta) / (1 + beta) packets per RTT.
            alpha_aimd: 3.0 * (1.0 - beta) / (1.0 + beta),
            fast_convergence: self.fast_convergence,
            tcp_friendliness: self.tcp_friendliness,
            hystart_low_window: self.hystart_low_window_packets.saturating_mul(mss),
            cwnd: init,
            ssthresh: u64::MAX,
            w_max_packets: None,
            epoch: None,
            hystart: if self.hystart { HyStart::Watching } else { HyStart::Off },
            episode: LossEpisode::default(),
            srtt: None,
            min_rtt: None,
        }
    }

    fn validate(&self) -> Result<(), PolicyError> {
        check_range(Self::NAME, "beta", self.beta, 0.0, 1.0, false)?;
        check_range(Self::NAME, "c", self.c, 0.0, f64::MAX, false)?;
        check_init_cwnd(Self::NAME, self.init_cwnd_packets)
    }
}

#[cfg(test)]
mod tests;
