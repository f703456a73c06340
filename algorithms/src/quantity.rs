//! The quantities users type, in flags, policy parameters and scenario files: bandwidths
//! (`20mbit`), durations (`100ms`), probabilities, and report intervals (`auto`, `rtt`, `10ms`).
//! Each error names the accepted forms, so clap can show it as is. The simulator's link specs
//! (buffer sizes, bandwidth changes) build on these in `polycc_sim::config`.

use crate::Rate;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use thiserror::Error;

/// A quantity that does not parse, with what would have.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuantityError {
    #[error("`{0}` is not a bandwidth: use a number with bit, kbit, mbit or gbit (bits per second, as tc writes them), e.g. 20mbit")]
    Bandwidth(String),
    #[error("`{0}` is ambiguous: tc reads `mbps` as megabytes per second; write mbit for megabits (e.g. 20mbit)")]
    AmbiguousBandwidth(String),
    #[error("`{0}` is not a duration: use a non-negative number with us, ms or s, e.g. 100ms")]
    Duration(String),
    #[error("`{0}` is not a report interval: use auto (the algorithm's own cadence, else once per RTT), rtt (once per RTT) or a duration such as 10ms")]
    ReportInterval(String),
    #[error("`{0}` is not a probability: use a number between 0 and 1, e.g. 0.01 for 1 %")]
    Probability(String),
}

/// Split `"20mbit"` into `(20.0, "mbit")`; None when the number part is not a finite number.
pub fn split_number(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '-' || *c == '+'))
        .map_or(s.len(), |(i, _)| i);
    let value: f64 = s[..end].parse().ok()?;
    value.is_finite().then(|| (value, s[end..].trim().to_ascii_lowercase()))
}

/// `20mbit` -> 20 Mbit/s. Units: bit, kbit, mbit, gbit (decimal, bits per second).
pub fn parse_bandwidth(s: &str) -> Result<Rate, QuantityError> {
    let err = || QuantityError::Bandwidth(s.to_string());
    let (value, unit) = split_number(s).ok_or_else(err)?;
    let scale = match unit.as_str() {
        "bit" | "bps" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "kbps" | "mbps" | "gbps" => return Err(QuantityError::AmbiguousBandwidth(s.to_string())),
        _ => return Err(err()),
    };
    if value <= 0.0 {
        return Err(err());
    }
    Ok(Rate::from_bits_per_sec(value * scale))
}

/// `100ms` -> 100 ms. Units: us, ms, s.
pub fn parse_duration(s: &str) -> Result<Duration, QuantityError> {
    let err = || QuantityError::Duration(s.to_string());
    let (value, unit) = split_number(s).ok_or_else(err)?;
    if value < 0.0 {
        return Err(err());
    }
    let secs = match unit.as_str() {
        "us" => value * 1e-6,
        "ms" => value * 1e-3,
        "s" => value,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| err())
}

/// A probability in [0, 1].
pub fn parse_probability(s: &str) -> Result<f64, QuantityError> {
    match s.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(QuantityError::Probability(s.to_string())),
    }
}

/// How often the datapath reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportInterval {
    /// The cadence the algorithm asks for (`CongestionControl::report_interval`: PCC and Copa
    /// four times per RTT, MOCC every 10 ms), else once per RTT. The agent's and the
    /// simulator's default, so an algorithm sees the same cadence in both.
    #[default]
    Auto,
    /// Once per RTT (the latest RTT sample), as CCP's generic programs do, whatever the
    /// algorithm asks for.
    Rtt,
    /// A fixed interval, whatever the algorithm asks for.
    Fixed(Duration),
}

impl ReportInterval {
    /// The interval a flow reports at when its algorithm asks for `wanted`; `None` = once per
    /// latest RTT sample. The agent and the simulator both ask this, so an algorithm sees the
    /// same cadence in both.
    pub fn for_algorithm(self, wanted: Option<Duration>) -> Option<Duration> {
        match self {
            ReportInterval::Auto => wanted.filter(|d| !d.is_zero()),
            ReportInterval::Rtt => None,
            ReportInterval::Fixed(d) => Some(d),
        }
    }
}

impl FromStr for ReportInterval {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, QuantityError> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(ReportInterval::Auto);
        }
        if s.trim().eq_ignore_ascii_case("rtt") {
            return Ok(ReportInterval::Rtt);
        }
        match parse_duration(s) {
            Ok(d) if !d.is_zero() => Ok(ReportInterval::Fixed(d)),
            _ => Err(QuantityError::ReportInterval(s.to_string())),
        }
    }
}

impl fmt::Display for ReportInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportInterval::Auto => f.write_str("auto"),
            ReportInterval::Rtt => f.write_str("rtt"),
            ReportInterval::Fixed(d) => write!(f, "{}us", d.as_micros()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_use_tc_units_and_refuse_mbps() {
        assert_eq!(parse_bandwidth("20mbit"), Ok(Rate::from_mbps(20.0)));
        assert_eq!(parse_bandwidth("1.5gbit"), Ok(Rate::from_mbps(1500.0)));
        assert_eq!(parse_bandwidth("20mbps"), Err(QuantityError::AmbiguousBandwidth("20mbps".into())));
        assert!(parse_bandwidth("20").is_err());
        assert!(parse_bandwidth("-5mbit").is_err());
        assert!(parse_bandwidth("0mbit").is_err());
    }

    #[test]
    fn durations_reject_negatives_and_bare_numbers() {
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("0ms"), Ok(Duration::ZERO));
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("100").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn intervals_and_probabilities() {
        assert_eq!("rtt".parse(), Ok(ReportInterval::Rtt));
        let ms = Duration::from_millis;
        assert_eq!("auto".parse(), Ok(ReportInterval::Auto));
        assert_eq!(ReportInterval::default(), ReportInterval::Auto);
        assert_eq!(ReportInterval::Auto.for_algorithm(Some(ms(8))), Some(ms(8)), "the algorithm's cadence");
        assert_eq!(ReportInterval::Auto.for_algorithm(None), None, "else once per RTT");
        assert_eq!(ReportInterval::Rtt.for_algorithm(Some(ms(8))), None, "rtt: once per RTT whatever it asks");
        assert_eq!(ReportInterval::Fixed(ms(10)).for_algorithm(Some(ms(8))), Some(ms(10)), "the user's wins");
        assert_eq!("10ms".parse(), Ok(ReportInterval::Fixed(Duration::from_millis(10))));
        assert!("0ms".parse::<ReportInterval>().is_err());
        assert_eq!(parse_probability("0.01"), Ok(0.01));
        assert!(parse_probability("2").is_err());
    }
}
