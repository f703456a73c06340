//! Units used across polycc: bytes are `u64` with `_bytes` in the name, time is
//! [`Duration`], and rates are the [`Rate`] newtype (bytes per second
//! inside, constructors and accessors name their unit). Conversions to the datapath's u32
//! fields happen only at the datapath boundary (the agent), never here.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, Div, Mul};
use std::time::Duration;

/// Bits in a byte: the one place bits/s and bytes/s meet.
pub const BITS_PER_BYTE: f64 = 8.0;

/// A data rate. Stored as bytes per second; always finite and non-negative.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd, Serialize, Deserialize)]
pub struct Rate(f64);

impl Rate {
    pub const ZERO: Rate = Rate(0.0);

    /// A rate from bytes per second. NaN and negative inputs become zero, infinity saturates.
    pub fn from_bytes_per_sec(bytes_per_sec: f64) -> Rate {
        if bytes_per_sec.is_nan() || bytes_per_sec <= 0.0 {
            Rate(0.0)
        } else {
            Rate(bytes_per_sec.min(f64::MAX))
        }
    }

    pub fn from_bits_per_sec(bits_per_sec: f64) -> Rate {
        Rate::from_bytes_per_sec(bits_per_sec / BITS_PER_BYTE)
    }

    pub fn from_mbps(mbit_per_sec: f64) -> Rate {
        Rate::from_bits_per_sec(mbit_per_sec * 1e6)
    }

    /// `bytes` delivered over `interval`; zero for an empty interval.
    pub fn from_bytes_over(bytes: u64, interval: Duration) -> Rate {
        let secs = interval.as_secs_f64();
        if secs <= 0.0 {
            Rate::ZERO
        } else {
            Rate::from_bytes_per_sec(bytes as f64 / secs)
        }
    }

    pub fn bytes_per_sec(self) -> f64 {
        self.0
    }

    pub fn bits_per_sec(self) -> f64 {
        self.0 * BITS_PER_BYTE
    }

    pub fn mbps(self) -> f64 {
        self.bits_per_sec() / 1e6
    }

    /// Bytes sent at this rate over `d` (the bandwidth-delay product when `d` is an RTT).
    pub fn bytes_over(self, d: Duration) -> f64 {
        self.0 * d.as_secs_f64()
    }

    pub fn max(self, other: Rate) -> Rate {
        if other.0 > self.0 {
            other
        } else {
            self
        }
    }

    pub fn min(self, other: Rate) -> Rate {
        if other.0 < self.0 {
            other
        } else {
            self
        }
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0.0
    }
}

impl Mul<f64> for Rate {
    type Output = Rate;
    fn mul(self, gain: f64) -> Rate {
        Rate::from_bytes_per_sec(self.0 * gain)
    }
}

impl Div<f64> for Rate {
    type Output = Rate;
    fn div(self, d: f64) -> Rate {
        Rate::from_bytes_per_sec(self.0 / d)
    }
}

impl Add for Rate {
    type Output = Rate;
    fn add(self, o: Rate) -> Rate {
        Rate::from_bytes_per_sec(self.0 + o.0)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} Mbit/s", self.mbps())
    }
}

/// Bytes per second needed to send `bytes` every `d`: the rate of a window over an RTT.
pub fn rate_of_window(window_bytes: u64, d: Duration) -> Rate {
    Rate::from_bytes_over(window_bytes, d)
}

/// Saturating conversion of a non-negative float byte count to `u64`.
pub fn bytes_from_f64(bytes: f64) -> u64 {
    if bytes.is_nan() || bytes <= 0.0 {
        0
    } else if bytes >= u64::MAX as f64 {
        u64::MAX
    } else {
        bytes as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_conversions_round_trip() {
        let r = Rate::from_mbps(20.0);
        assert_eq!(r.bytes_per_sec(), 2_500_000.0);
        assert_eq!(r.bytes_over(Duration::from_millis(40)), 100_000.0);
        assert_eq!(rate_of_window(100_000, Duration::from_millis(40)), r);
    }

    #[test]
    fn hostile_floats_are_clamped() {
        assert_eq!(Rate::from_bytes_per_sec(f64::NAN), Rate::ZERO);
        assert_eq!(Rate::from_bytes_per_sec(-1.0), Rate::ZERO);
        assert!(Rate::from_bytes_per_sec(f64::INFINITY).bytes_per_sec().is_finite());
        assert_eq!(Rate::from_bytes_over(10, Duration::ZERO), Rate::ZERO);
        assert_eq!(bytes_from_f64(f64::INFINITY), u64::MAX);
        assert_eq!(bytes_from_f64(-3.0), 0);
    }
}
