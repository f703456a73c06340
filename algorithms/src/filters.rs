//! The estimators several algorithms keep, written once: the smoothed RTT (RFC 6298), a gain-1/8
//! moving average, a windowed minimum over time (Copa's and PCC's min RTT) and a windowed maximum
//! over rounds (BBR's bottleneck bandwidth). Pure data structures: samples in, estimates out.

use crate::units::Rate;
use crate::Report;
use std::collections::VecDeque;
use std::time::Duration;

/// The smoothed RTT after one report, RFC 6298's gain of 1/8 fed with the report's mean RTT:
/// `srtt <- (7 srtt + mean) / 8`, the first sample taken as it is. A report without a non-zero
/// RTT sample leaves it unchanged. (Copa weighs by samples instead: its own EWMA, in copa.rs.)
pub(crate) fn srtt_after(srtt: Option<Duration>, r: &Report) -> Option<Duration> {
    match r.rtt_mean().filter(|d| !d.is_zero()) {
        Some(rtt) => Some(srtt.map_or(rtt, |s| s.saturating_mul(7).saturating_add(rtt) / 8)),
        None => srtt,
    }
}

/// An exponentially weighted moving average with RFC 6298's gain of 1/8 over plain numbers (PCC's
/// RTT deviation, MOCC's RTT noise): `avg <- avg + (x - avg) / 8`, the first sample taken as it is.
pub(crate) fn ewma_eighth(avg: Option<f64>, x: f64) -> f64 {
    avg.map_or(x, |a| a + (x - a) / 8.0)
}

/// Windowed minimum over time with three samples (Kathleen Nichols' algorithm, Linux
/// `lib/win_minmax.c`): the best, second-best and third-best minimum of successive sub-windows.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WindowedMin {
    s: Option<[(Duration, Duration); 3]>,
}

impl WindowedMin {
    pub(crate) fn get(&self) -> Option<Duration> {
        self.s.map(|s| s[0].1)
    }

    /// Add sample `v` taken at `t`; returns the minimum over the last `win`.
    pub(crate) fn update(&mut self, t: Duration, v: Duration, win: Duration) -> Duration {
        let val = (t, v);
        let s = match &mut self.s {
            Some(s) if v > s[0].1 && t.saturating_sub(s[2].0) <= win => s,
            _ => {
                self.s = Some([val; 3]);
                return v;
            }
        };
        if v <= s[1].1 {
            s[1] = val;
            s[2] = val;
        } else if v <= s[2].1 {
            s[2] = val;
        }
        let dt = t.saturating_sub(s[0].0);
        if dt > win {
            // The best sample left the window: promote the others (twice if need be).
            *s = [s[1], s[2], val];
            if t.saturating_sub(s[0].0) > win {
                *s = [s[1], s[2], val];
            }
        } else if s[1].0 == s[0].0 && dt > win / 4 {
            // A quarter window without a new minimum: take a second choice from the second quarter.
            s[1] = val;
            s[2] = val;
        } else if s[2].0 == s[1].0 && dt > win / 2 {
            // Half a window without one: take a third choice from the second half.
            s[2] = val;
        }
        s[0].1
    }
}

/// Exact windowed maximum over rounds: a sample taken in round `r` counts through round
/// `r + window - 1`. A monotonic deque with at most one entry per round.
#[derive(Clone, Debug)]
pub(crate) struct WindowedMax {
    window_rounds: u64,
    /// (round, sample), samples strictly decreasing from front to back.
    samples: VecDeque<(u64, Rate)>,
}

impl WindowedMax {
    pub(crate) fn new(window_rounds: u64) -> WindowedMax {
        let capacity = usize::try_from(window_rounds).unwrap_or(usize::MAX).min(64);
        WindowedMax { window_rounds, samples: VecDeque::with_capacity(capacity) }
    }

    pub(crate) fn update(&mut self, round: u64, sample: Rate) {
        while self.samples.front().is_some_and(|&(r, _)| round.saturating_sub(r) >= self.window_rounds) {
            self.samples.pop_front();
        }
        if self.samples.back().is_some_and(|&(r, v)| r == round && v >= sample) {
            return;
        }
        while self.samples.back().is_some_and(|&(_, v)| v <= sample) {
            self.samples.pop_back();
        }
        self.samples.push_back((round, sample));
    }

    pub(crate) fn get(&self) -> Rate {
        self.samples.front().map_or(Rate::ZERO, |&(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtt_report(mean_ms: u64, samples: u64) -> Report {
        Report { rtt_sum: Duration::from_millis(mean_ms * samples), rtt_samples: samples, ..Report::default() }
    }

    #[test]
    fn srtt_takes_the_first_sample_then_smooths_by_an_eighth() {
        let s = srtt_after(None, &rtt_report(80, 4));
        assert_eq!(s, Some(Duration::from_millis(80)));
        assert_eq!(srtt_after(s, &rtt_report(160, 2)), Some(Duration::from_millis(90)), "(7 x 80 + 160) / 8");
        assert_eq!(srtt_after(s, &Report::default()), s, "a report without samples leaves it");
        assert_eq!(srtt_after(None, &rtt_report(0, 3)), None, "a zero sample is no sample");
    }

    #[test]
    fn windowed_min_forgets_a_minimum_older_than_its_window() {
        let (ms, win) = (Duration::from_millis, Duration::from_secs(10));
        let mut m = WindowedMin::default();
        assert_eq!(m.update(ms(0), ms(40), win), ms(40));
        assert_eq!(m.update(ms(5_000), ms(60), win), ms(40));
        assert_eq!(m.update(ms(10_500), ms(70), win), ms(60), "40 left the window, 60 is next best");
    }
}
