//! MOCC's observation: each MI's features and the history of the last [`HISTORY`] of them, with the
//! lowest RTTs the latency ratio divides by and the datapath's pacing the send ratio reads
//! ([`super`] documents the observation).

use super::{
    RttBase, FEATURES, HISTORY, MAX_LATENCY_GRADIENT, MAX_LATENCY_RATIO, MAX_PACING_SAMPLE, MAX_SEND_RATIO, MIN_PACING,
    OBS_LEN, PACING_EXACT_FROM, PACING_LEARN_MAX_LATENCY, PACING_LEARN_MAX_LOSS, RECENT_RTT_WINDOW, RTT_BASE_NOISE_SDS,
    STARTUP_BASE_NOISE_SDS,
};
use crate::filters::{ewma_eighth, WindowedMin};
use crate::pcc::MiResult;
use std::collections::VecDeque;
use std::time::Duration;

/// One MI's three features, as the model sees them; the latency ratio against each [`RttBase`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MiFeatures {
    pub send_ratio: f64,
    /// Against the lowest MI RTT so far ([`RttBase::Lowest`]).
    pub latency_ratio: f64,
    /// Against the lowest over the last [`RECENT_RTT_WINDOW`] ([`RttBase::Recent`]).
    pub latency_ratio_recent: f64,
    pub latency_gradient: f64,
}

impl MiFeatures {
    /// What the history holds before any MI completed.
    pub const NEUTRAL: MiFeatures =
        MiFeatures { send_ratio: 1.0, latency_ratio: 1.0, latency_ratio_recent: 1.0, latency_gradient: 0.0 };

    /// The latency ratio against `base`.
    pub fn latency_ratio(&self, base: RttBase) -> f64 {
        match base {
            RttBase::Lowest => self.latency_ratio,
            RttBase::Recent => self.latency_ratio_recent,
        }
    }
}

/// The history of MI features: the observation's network-state part.
#[derive(Clone, Debug)]
pub struct History {
    pub(super) mis: VecDeque<MiFeatures>,
    /// Lowest MI mean RTT so far (the latency ratio's denominator).
    min_mi_rtt: Option<Duration>,
    /// Lowest MI mean RTT over the last [`RECENT_RTT_WINDOW`] (the recent ratio's).
    recent_min: WindowedMin,
    /// The RTT samples' noise: a moving average (gain 1/8) of the MIs' residuals, seconds.
    rtt_noise: Option<f64>,
    /// What fraction of its rate the datapath puts on the wire: a moving average (gain 1/8, from
    /// 1) of measured sent / rate over MIs with no queue and little loss ([`History::features`]).
    pacing: f64,
    /// The lowest MI RTT the startup measured, the bound on the base measured after it
    /// ([`History::restart_from_startup`]; `None` after a drain guard's restart).
    startup_min: Option<Duration>,
}

impl Default for History {
    fn default() -> Self {
        History {
            mis: std::iter::repeat_n(MiFeatures::NEUTRAL, HISTORY).collect(),
            min_mi_rtt: None,
            recent_min: WindowedMin::default(),
            rtt_noise: None,
            // Exact until learned otherwise: the flow reads its rate as sent.
            pacing: 1.0,
            startup_min: None,
        }
    }
}

/// `rtt / base`, clamped to [1, [`MAX_LATENCY_RATIO`]]; `None` without both.
fn ratio_to(rtt: Option<Duration>, base: Option<Duration>) -> Option<f64> {
    match (rtt, base) {
        (Some(rtt), Some(min)) if !min.is_zero() => {
            Some((rtt.as_secs_f64() / min.as_secs_f64()).clamp(1.0, MAX_LATENCY_RATIO))
        }
        _ => None,
    }
}

impl History {
    /// The features of an MI completed at `now`; it also lowers the minimum MI RTTs.
    pub fn features(&mut self, mi: &MiResult, mss_bytes: u64, now: Duration) -> MiFeatures {
        let recent = match mi.rtt_mean.filter(|d| !d.is_zero()) {
            Some(rtt) => {
                self.min_mi_rtt = Some(self.min_mi_rtt.map_or(rtt, |m| m.min(rtt)));
                if let (Some(floor), Some(m)) = (self.startup_min, self.min_mi_rtt) {
                    let allowance = STARTUP_BASE_NOISE_SDS * self.rtt_noise.unwrap_or(0.0);
                    self.min_mi_rtt = Some(m.min(floor + Duration::from_secs_f64(allowance)));
                }
                Some(self.recent_min.update(now, rtt, RECENT_RTT_WINDOW))
            }
            None => self.recent_min.get(),
        };
        let received = mi.throughput.bytes_per_sec();
        // No RTT sample in the MI: the latency did not visibly change.
        let last = self.mis.back().copied().unwrap_or(MiFeatures::NEUTRAL);
        if let Some(r) = mi.rtt_residual {
            self.rtt_noise = Some(ewma_eighth(self.rtt_noise, r));
        }
        let noise = Duration::try_from_secs_f64(RTT_BASE_NOISE_SDS * self.rtt_noise.unwrap_or(0.0)).unwrap_or_default();
        let latency_ratio = ratio_to(mi.rtt_mean, self.min_mi_rtt.map(|m| m + noise)).unwrap_or(last.latency_ratio);
        let latency_ratio_recent =
            ratio_to(mi.rtt_mean, recent.map(|m| m + noise)).unwrap_or(last.latency_ratio_recent);
        let latency_gradient = if mi.rtt_gradient.is_finite() {
            mi.rtt_gradient.clamp(-MAX_LATENCY_GRADIENT, MAX_LATENCY_GRADIENT)
        } else {
            0.0
        };
        self.learn_pacing(mi, latency_ratio);
        // The send rate is the MI's rate times what the datapath puts on the wire of a rate. The
        // emulated guest's late pacing timers send 0.75-0.98 of it with the host's load (in-kernel
        // pacing falls as short, docs/kernel-parity.md); with the rate alone its MIs read a send
        // ratio of 1.08-1.11 at the median with no queue (the simulator's: 1.00), a queue to a
        // model trained there, which held its rate. What an MI measurably sent is no measure where
        // the window holds the flow or losses are miscounted (at a full queue it reads
        // 1 / (1 - loss), and the model overdrove the guest's link: 5.7-26 % lost), so the
        // fraction is learned only where the path shows no queue, and held through congestion.
        let sent = mi.rate.bytes_per_sec() * self.pacing();
        let send_ratio = if received > 0.0 {
            (sent / received).clamp(0.0, MAX_SEND_RATIO)
        } else if mi.packets > 0.0 && mss_bytes > 0 {
            MAX_SEND_RATIO // everything it sent was lost
        } else {
            1.0
        };
        MiFeatures { send_ratio, latency_ratio, latency_ratio_recent, latency_gradient }
    }

    /// Learn the datapath's pacing from an MI that saw no queue (latency within
    /// [`PACING_LEARN_MAX_LATENCY`] of the base) and little loss ([`PACING_LEARN_MAX_LOSS`]):
    /// there, what it sent over its rate is the datapath's doing, not the path's. Samples are
    /// bounded to [[`MIN_PACING`], [`MAX_PACING_SAMPLE`]] (a burst, or a flight that drained,
    /// reads above 1; the mean over them stays near 1 where pacing is exact).
    fn learn_pacing(&mut self, mi: &MiResult, latency_ratio: f64) {
        let Some(sent) = mi.sent_rate else { return };
        let rate = mi.rate.bytes_per_sec();
        if rate <= 0.0 || mi.app_limited || latency_ratio > PACING_LEARN_MAX_LATENCY || mi.loss > PACING_LEARN_MAX_LOSS
        {
            return;
        }
        let sample = (sent.bytes_per_sec() / rate).clamp(MIN_PACING, MAX_PACING_SAMPLE);
        self.pacing = ewma_eighth(Some(self.pacing), sample);
    }

    /// The fraction of its rate the datapath was learned to send: 1 until an MI without a queue
    /// was measured, and 1 from [`PACING_EXACT_FROM`] up.
    pub fn pacing(&self) -> f64 {
        if self.pacing < PACING_EXACT_FROM {
            self.pacing
        } else {
            1.0
        }
    }

    /// The lowest MI mean RTT since the start or the latest [`History::restart`]: the latency
    /// ratio's base.
    pub fn min_mi_rtt(&self) -> Option<Duration> {
        self.min_mi_rtt
    }

    /// The RTT samples' noise around each MI's trend (seconds, a moving average; 0 before any).
    pub fn rtt_noise(&self) -> f64 {
        self.rtt_noise.unwrap_or(0.0)
    }

    /// Forget the MIs and the lowest RTTs they measured, after a drain emptied the queue: the
    /// next MIs measure the path's RTT afresh, which can have changed (a bandwidth drop lengthens
    /// every packet's serialization). The RTT samples' noise and the datapath's pacing stay.
    pub fn restart(&mut self) {
        self.mis = std::iter::repeat_n(MiFeatures::NEUTRAL, HISTORY).collect();
        self.min_mi_rtt = None;
        self.recent_min = WindowedMin::default();
        self.startup_min = None;
    }

    /// [`History::restart`] at the startup's hand-over: the lowest MI RTT is measured afresh, but
    /// never more than [`STARTUP_BASE_NOISE_SDS`] deviations of the RTT noise above the startup's.
    pub fn restart_from_startup(&mut self) {
        let startup_min = self.min_mi_rtt;
        self.restart();
        self.startup_min = startup_min;
    }

    pub fn push(&mut self, f: MiFeatures) {
        self.mis.push_back(f);
        while self.mis.len() > HISTORY {
            self.mis.pop_front();
        }
    }

    /// The 30 raw values, oldest MI first: `obs[3 i + k]`, k = send ratio, latency ratio
    /// (against `base`), latency gradient.
    pub fn observation(&self, base: RttBase) -> [f32; OBS_LEN] {
        let mut obs = [0.0f32; OBS_LEN];
        for (i, m) in self.mis.iter().enumerate() {
            obs[FEATURES * i] = m.send_ratio as f32;
            obs[FEATURES * i + 1] = m.latency_ratio(base) as f32;
            obs[FEATURES * i + 2] = m.latency_gradient as f32;
        }
        obs
    }
}
