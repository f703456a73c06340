//! PCC Allegro (Dong et al., "PCC: Re-architecting Congestion Control for Consistent High
//! Performance", NSDI'15).
//!
//! Model: the sender runs monitor intervals (MIs, [`crate::pcc`]) and keeps whatever rate
//! change empirically raised a utility that rewards throughput and cuts off past 5 % loss:
//!
//! ```text
//!   u = T * sigmoid(L - 0.05) - x * L,    sigmoid(y) = 1 / (1 + e^(100 y))
//!   T throughput, x sending rate (Mbit/s), L loss rate of the MI's packets
//! ```
//!
//! States (section 2.2):
//!
//! ```text
//!   Starting: double the rate every MI --utility drops--> DecisionMaking at the best rate
//!   DecisionMaking: 4 MIs, two pairs at r(1 + eps) and r(1 - eps) in random order
//!       --both pairs agree--> RateAdjusting in that direction (eps back to eps_min)
//!       --they disagree--> DecisionMaking again with eps += eps_min (<= eps_max)
//!   RateAdjusting: r_n = r_(n-1) (1 + n eps_min dir) every MI
//!       --utility drops--> back to r_(n-1), DecisionMaking
//! ```
//!
//! MIs last a uniform 1.7-2.2 smoothed RTTs (and at least the time for 10 packets); the
//! randomness is a per-flow seeded SplitMix64, as is the order of the probing pairs.
//! Output: pacing at the MI's rate and a cwnd of 2 x rate x srtt, so the window only limits a
//! flow whose RTT has doubled.
//!
//! References: NSDI'15 sections 2 (utility, control algorithm) and 4.1 (MI length, Theorem 1's
//! sigmoid alpha = 100); `../shared/reference/algorithms.md` section 5.
//!
//! The MI engine (scheduling, first rate, syncs, decision) is [`crate::pcc::Engine`]; this
//! file is its rate controller: the utility and the state machine above.
//!
//! Differences from the reference:
//! - MIs are placed on reports, not packets: a report's ACKs and losses are charged to the MI
//!   that sent them one RTT earlier ([`crate::pcc`]); an MI ends at the report closest to its
//!   planned end.
//! - Starting begins at the datapath's initial window per RTT (Linux: 10 packets), not 2 MSS
//!   per RTT, to spare a few doublings; before the first RTT sample the flow sends its initial
//!   window unpaced.
//! - A decision starts a new MI at once; results of MIs started before it are ignored.
//! - Starting ends on a utility drop only if the MI fell short of its rate ([`KEPT_UP`]): a few
//!   random losses in a small MI are not the path's capacity.

use crate::config::{check_range, PolicyError};
use crate::pcc::{self, Engine, MiResult, RateController, Sender};
use crate::rng::SplitMix64;
use crate::{Algorithm, FlowInfo, Rate};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Smallest probing offset and step unit (NSDI'15: 0.01).
pub const EPS_MIN: f64 = 0.01;
/// Largest probing offset (NSDI'15: 0.05).
pub const EPS_MAX: f64 = 0.05;
/// The loss rate where the sigmoid cuts throughput's reward off (NSDI'15: 5 %).
pub const LOSS_CUTOFF: f64 = 0.05;
/// Starting goes on past a utility drop while the MI delivered at least this share of its rate.
pub const KEPT_UP: f64 = 0.9;
/// The sigmoid's steepness alpha (NSDI'15 Theorem 1: alpha >= max(2.2 (n - 1), 100)).
pub const SIGMOID_ALPHA: f64 = 100.0;
/// MI length: uniform in [1.7, 2.2] smoothed RTTs (NSDI'15 section 4.1).
pub const MI_RTTS_MIN: f64 = 1.7;
pub const MI_RTTS_MAX: f64 = 2.2;
/// An MI lasts at least the time to send this many packets (NSDI'15 section 4.1).
pub const MIN_MI_PACKETS: u64 = 10;
/// Smallest rate, Mbit/s.
pub const MIN_RATE_MBPS: f64 = 0.1;
/// Smallest window, packets.
pub const MIN_CWND_PACKETS: u64 = 4;
/// Rate Adjusting's n stops growing here (a step of 1 + 50 eps_min = 1.5x per MI).
pub const MAX_ADJUST_STEPS: u32 = 50;

/// Allegro's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AllegroConfig {
    /// Smallest probing offset and Rate Adjusting's step unit (default 0.01), (0, 0.2].
    pub eps_min: f64,
    /// Largest probing offset (default 0.05), [eps_min, 0.5].
    pub eps_max: f64,
    /// Initial rate in Mbit/s; `None`: the initial window per RTT (default).
    pub initial_rate_mbps: Option<f64>,
    /// Seed for MI lengths and probing order; the policy sets one per flow.
    #[serde(skip)]
    pub seed: u64,
}

impl Default for AllegroConfig {
    fn default() -> Self {
        AllegroConfig { eps_min: EPS_MIN, eps_max: EPS_MAX, initial_rate_mbps: None, seed: 0 }
    }
}

impl AllegroConfig {
}

/// One scored MI.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    mbps: f64,
    utility: f64,
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    Starting { best: Option<Sample>, first: bool },
    DecisionMaking { eps: f64, first_id: u64, high_first: [bool; 2], samples: [Option<Sample>; 4] },
    RateAdjusting { dir: f64, n: u32, last: Option<Sample> },
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Starting { .. } => "Starting",
            State::DecisionMaking { .. } => "DecisionMaking",
            State::RateAdjusting { .. } => "RateAdjusting",
        }
    }

    /// Whether `self -> next` is an edge of the diagram in the module header: nothing goes back
    /// to Starting, and Starting goes to DecisionMaking only.
    fn allows(&self, next: &State) -> bool {
        !matches!((self, next), (_, State::Starting { .. }) | (State::Starting { .. }, State::RateAdjusting { .. }))
    }

    /// Move to `next`, checking (in debug builds) that the transition is legal.
    fn to(&mut self, next: State) {
        debug_assert!(self.allows(&next), "illegal transition {} -> {}", self.name(), next.name());
        *self = next;
    }
}

/// `u = T sigmoid(L - 0.05) - x L` (NSDI'15 section 2.2), T and x in Mbit/s.
pub fn utility(throughput: Rate, rate: Rate, loss: f64) -> f64 {
    let sigmoid = 1.0 / (1.0 + (SIGMOID_ALPHA * (loss - LOSS_CUTOFF)).exp());
    let u = throughput.mbps() * sigmoid - rate.mbps() * loss;
    if u.is_finite() {
        u
    } else {
        0.0
    }
}

/// Per-flow Allegro: the PCC engine driven by Allegro's state machine.
pub type Allegro = Engine<Controller>;

impl Allegro {
    pub fn state_name(&self) -> &'static str {
        self.ctl.state.name()
    }
}

/// Allegro's rate controller: the probing parameters, the seeded randomness and the state.
#[derive(Clone, Debug)]
pub struct Controller {
    eps_min: f64,
    eps_max: f64,
    rng: SplitMix64,
    state: State,
}

impl Controller {
    /// Starting: the MI delivered what it sent but for its losses (>= [`KEPT_UP`] of its rate),
    /// so a lower utility came from a few random losses in a small MI, not from the path: keep
    /// doubling. At 50 Mbit/s 30 ms with 1 % random loss two or three losses in a 40-packet MI
    /// (5-7 %) ended Starting at 4-8 Mbit/s on seeds 2 and 3 with +/-0.5 ms of ACK jitter (0.26-0.52
    /// of the link; one guest rep in three at 0.17); past the path's rate the MI delivers about
    /// half its rate and ends Starting as before.
    fn kept_up(r: &MiResult) -> bool {
        r.throughput.mbps() >= KEPT_UP * r.rate.mbps()
    }

    fn sample(r: &MiResult) -> Sample {
        Sample { mbps: r.rate.mbps(), utility: utility(r.throughput, r.rate, r.loss) }
    }

    /// Apply a decision now: move to `next` and restart the MIs centred on `target`.
    fn restart(&mut self, core: &mut Sender, now: Duration, target: Rate, next: State) {
        self.state.to(next);
        core.restart(self, now, target);
    }

    fn decision_making(&mut self, core: &Sender, eps: f64) -> State {
        State::DecisionMaking {
            eps,
            first_id: core.monitor.next_id(),
            high_first: [self.rng.coin(), self.rng.coin()],
            samples: [None; 4],
        }
    }
}

impl RateController for Controller {
    const NAME: &'static str = "allegro";

    fn min_rate(&self) -> Rate {
        Rate::from_mbps(MIN_RATE_MBPS)
    }

    fn in_slow_start(&self) -> bool {
        matches!(self.state, State::Starting { .. })
    }

    fn mi_rate(&mut self, core: &mut Sender) -> Rate {
        let next_id = core.monitor.next_id();
        let eps_min = self.eps_min;
        match &mut self.state {
            State::Starting { first, .. } => {
                if !*first {
                    core.target = core.target * 2.0;
                }
                *first = false;
                core.target
            }
            State::DecisionMaking { eps, first_id, high_first, .. } => {
                pcc::probe_rate(core.target, *eps, next_id.saturating_sub(*first_id) as usize, high_first)
            }
            State::RateAdjusting { dir, n, .. } => {
                if *n > 0 {
                    core.target = core.target * (1.0 + *n as f64 * eps_min * *dir);
                }
                *n = (*n + 1).min(MAX_ADJUST_STEPS);
                core.target
            }
        }
    }

    fn mi_length(&mut self, _srtt: Duration) -> (f64, u64) {
        (MI_RTTS_MIN + (MI_RTTS_MAX - MI_RTTS_MIN) * self.rng.unit(), MIN_MI_PACKETS)
    }

    fn on_result(&mut self, core: &mut Sender, now: Duration, r: &MiResult) {
        if r.id < core.accept_from {
            return;
        }
        let s = Self::sample(r);
        match self.state.clone() {
            State::Starting { best, .. } => match best {
                Some(b) if s.mbps > b.mbps && s.utility < b.utility && !Self::kept_up(r) => {
                    let next = self.decision_making(core, self.eps_min);
                    self.restart(core, now, Rate::from_mbps(b.mbps), next);
                }
                Some(b) if s.mbps < b.mbps => {}
                _ => {
                    if let State::Starting { best, .. } = &mut self.state {
                        *best = Some(s);
                    }
                }
            },
            State::DecisionMaking { eps, first_id, high_first, mut samples } => {
                let offset = r.id.saturating_sub(first_id) as usize;
                if offset >= samples.len() {
                    return;
                }
                samples[offset] = Some(s);
                let Some(all) = samples.iter().copied().collect::<Option<Vec<Sample>>>() else {
                    self.state.to(State::DecisionMaking { eps, first_id, high_first, samples });
                    return;
                };
                // Each pair votes for the direction of its higher-utility rate.
                let vote = |a: Sample, b: Sample| if (a.utility > b.utility) == (a.mbps > b.mbps) { 1.0 } else { -1.0 };
                let (v0, v1) = (vote(all[0], all[1]), vote(all[2], all[3]));
                if v0 == v1 {
                    let target = core.target * (1.0 + eps * v0);
                    self.restart(core, now, target, State::RateAdjusting { dir: v0, n: 0, last: None });
                } else {
                    let next = self.decision_making(core, (eps + self.eps_min).min(self.eps_max));
                    self.restart(core, now, core.target, next);
                }
            }
            State::RateAdjusting { dir, n, last } => match last {
                Some(l) if s.utility < l.utility => {
                    let next = self.decision_making(core, self.eps_min);
                    self.restart(core, now, Rate::from_mbps(l.mbps), next);
                }
                _ => self.state.to(State::RateAdjusting { dir, n, last: Some(s) }),
            },
        }
    }

    /// As Vivace: an outside rate (beyond 1 % of the own, a sync) or the rate of a predecessor
    /// that had left slow start (a live policy change) becomes the centre of a new
    /// DecisionMaking round.
    fn recentre(&mut self, core: &mut Sender) {
        let next = self.decision_making(core, self.eps_min);
        self.state.to(next);
    }
}

impl Algorithm for AllegroConfig {
    type Controller = Allegro;
    const NAME: &'static str = "allegro";
    const SUMMARY: &'static str = "PCC Allegro: rate control by randomized trials of a loss-based utility";

    /// A per-flow instance; out-of-range values are clamped.
    fn build(&self, info: FlowInfo) -> Allegro {
        let eps_min = if self.eps_min.is_finite() { self.eps_min.clamp(1e-3, 0.2) } else { EPS_MIN };
        let eps_max = if self.eps_max.is_finite() { self.eps_max.clamp(eps_min, 0.5) } else { EPS_MAX.max(eps_min) };
        let rate = self
            .initial_rate_mbps
            .filter(|r| r.is_finite())
            .map(|r| Rate::from_mbps(r.clamp(MIN_RATE_MBPS, 100_000.0)));
        Engine::new(
            Sender::new(info, MIN_CWND_PACKETS, rate, false),
            Controller {
                eps_min,
                eps_max,
                rng: SplitMix64(self.seed),
                state: State::Starting { best: None, first: true },
            },
        )
    }

    fn validate(&self) -> Result<(), PolicyError> {
        check_range("allegro", "eps_min", self.eps_min, 0.0, 0.2, false)?;
        check_range("allegro", "eps_max", self.eps_max, self.eps_min, 0.5, true)?;
        if let Some(r) = self.initial_rate_mbps {
            check_range("allegro", "initial_rate_mbps", r, MIN_RATE_MBPS, 100_000.0, true)?;
        }
        Ok(())
    }

    fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack_report, FluidPath};
    use crate::CongestionControl;

    const MSS: u64 = 1500;
    const RTT: Duration = Duration::from_millis(40);

    fn info() -> FlowInfo {
        FlowInfo::with_mss(MSS)
    }

    #[test]
    fn utility_rewards_throughput_and_cuts_off_past_five_percent_loss() {
        let x = Rate::from_mbps(10.0);
        assert!((utility(x, x, 0.0) - 10.0 / (1.0 + (-5.0f64).exp())).abs() < 1e-9);
        assert!(utility(x * 0.99, x, 0.01) > 9.0, "1 % random loss costs little");
        assert!(utility(x * 0.9, x, 0.10) < 0.0, "past the cut-off the utility is negative");
    }

    #[test]
    fn fills_a_fluid_path_with_random_loss() {
        let bw = Rate::from_mbps(20.0);
        let mut p = FluidPath::new(bw, RTT, bw.bytes_over(RTT) as u64, MSS);
        p.loss_fraction = 0.01;
        let mut a = AllegroConfig::default().build(info());
        let mut d = a.decision();
        let mut bytes = 0;
        while p.now() < Duration::from_secs(60) {
            let r = p.step(d);
            if r.now > Duration::from_secs(30) {
                bytes += r.bytes_acked;
            }
            d = a.on_report(&r);
        }
        let util = bytes as f64 / bw.bytes_over(p.now() - Duration::from_secs(30));
        assert!(util > 0.85, "utilization {util:.3} with 1 % random loss");
        assert_ne!(a.state_name(), "Starting");
    }

    /// A flow in DecisionMaking at 10 Mbit/s whose four probes score `utilities`.
    fn decide(utilities: [f64; 4]) -> Allegro {
        let mut a = AllegroConfig { seed: 7, ..AllegroConfig::default() }.build(info());
        a.on_report(&ack_report(RTT, RTT, 10 * MSS, MSS));
        a.core.target = Rate::from_mbps(10.0);
        let next = a.ctl.decision_making(&a.core, EPS_MIN);
        let target = a.core.target;
        a.ctl.restart(&mut a.core, RTT, target, next);
        let State::DecisionMaking { first_id, high_first, .. } = a.ctl.state.clone() else { unreachable!() };
        for (i, u) in utilities.iter().enumerate() {
            let high = (i % 2 == 0) == high_first[i / 2];
            // Utility u for the high probe, its negation for the low one.
            let (rate, throughput) = if high { (10.1, 20.0 + u) } else { (9.9, 20.0 - u) };
            let r = MiResult::clean(first_id + i as u64, rate, throughput, RTT, 40.0);
            a.on_result(RTT * 2, &r);
        }
        a
    }

    #[test]
    fn decision_making_moves_only_when_both_pairs_agree() {
        let a = decide([1.0, 1.0, 1.0, 1.0]);
        assert!(matches!(a.ctl.state, State::RateAdjusting { dir, .. } if dir > 0.0), "{:?}", a.ctl.state);
        assert!((a.core.target.mbps() - 10.1).abs() < 1e-6, "first step r(1 + eps): {}", a.core.target);
        let a = decide([-1.0, -1.0, -1.0, -1.0]);
        assert!(matches!(a.ctl.state, State::RateAdjusting { dir, .. } if dir < 0.0), "{:?}", a.ctl.state);
        // Pair 0 says up, pair 1 down: stay, and probe wider.
        let a = decide([1.0, 1.0, -1.0, -1.0]);
        assert!(
            matches!(a.ctl.state, State::DecisionMaking { eps, .. } if (eps - 2.0 * EPS_MIN).abs() < 1e-12),
            "{:?}",
            a.ctl.state
        );
        assert_eq!(a.core.target, Rate::from_mbps(10.0));
    }

    #[test]
    fn rate_adjusting_accelerates_then_reverts_one_step_on_a_utility_drop() {
        let mut a = decide([1.0; 4]);
        let mut now = RTT * 2;
        let mut rates = vec![a.core.rate.unwrap().mbps()];
        for _ in 0..3 {
            now += RTT * 3;
            a.begin_mi(now);
            rates.push(a.core.rate.unwrap().mbps());
        }
        let steps: Vec<f64> = rates.windows(2).map(|w| w[1] / w[0] - 1.0).collect();
        assert!(steps.windows(2).all(|s| s[1] > s[0]), "r_n = r_(n-1) (1 + n eps): {rates:?}");
        let State::RateAdjusting { .. } = a.ctl.state else { panic!() };
        let base = a.core.accept_from;
        let res = |id: u64, mbps: f64, thr: f64| MiResult::clean(id, mbps, thr, RTT, 40.0);
        a.on_result(now, &res(base, rates[0], rates[0]));
        a.on_result(now, &res(base + 1, rates[1], rates[0] * 0.5));
        assert_eq!(a.state_name(), "DecisionMaking");
        assert!((a.core.target.mbps() - rates[0]).abs() < 1e-9, "back to {} not {}", rates[0], a.core.target);
    }

    #[test]
    fn mis_last_1_7_to_2_2_rtts() {
        let mut a = AllegroConfig { seed: 1, ..AllegroConfig::default() }.build(info());
        a.on_report(&ack_report(RTT, RTT, 100 * MSS, MSS));
        for i in 0..200u32 {
            let now = RTT * (10 + i);
            a.begin_mi(now);
            let len = (a.core.mi_end - now).as_secs_f64() / a.core.monitor.srtt().unwrap().as_secs_f64();
            assert!((MI_RTTS_MIN..=MI_RTTS_MAX).contains(&len), "MI of {len} RTTs");
        }
    }

    #[test]
    fn nothing_goes_back_to_starting_and_starting_only_decides() {
        let starting = State::Starting { best: None, first: false };
        let deciding = State::DecisionMaking { eps: EPS_MIN, first_id: 0, high_first: [true; 2], samples: [None; 4] };
        let adjusting = State::RateAdjusting { dir: 1.0, n: 0, last: None };
        assert!(starting.allows(&deciding) && deciding.allows(&adjusting) && adjusting.allows(&deciding));
        assert!(!starting.allows(&adjusting), "Starting leaves through DecisionMaking");
        for from in [&starting, &deciding, &adjusting] {
            assert!(!from.allows(&starting), "{} -> Starting", from.name());
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "illegal transition RateAdjusting -> Starting")]
    fn an_illegal_transition_is_refused() {
        let mut s = State::RateAdjusting { dir: 1.0, n: 0, last: None };
        s.to(State::Starting { best: None, first: true });
    }
}
