//! Contexts: the bandit learns one configuration per context. The default is the paper's six,
//! time of day in {16-24, 0-8, 8-16} x {weekday, weekend} (section 4.3), in the configured
//! time zone offset.

use serde::{Deserialize, Serialize};

/// The `[contexts]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextSpec {
    /// Hour bands `[start, end)`, covering the day without overlap (e.g. `[[16, 24], [0, 8], [8, 16]]`).
    pub bands: Vec<[u32; 2]>,
    /// Split every band into weekday and weekend.
    pub weekend: bool,
    /// Local time = UTC + this many hours.
    pub utc_offset_hours: i32,
}

impl Default for ContextSpec {
    fn default() -> Self {
        ContextSpec { bands: vec![[16, 24], [0, 8], [8, 16]], weekend: true, utc_offset_hours: 0 }
    }
}

impl ContextSpec {
    /// One context for all times.
    pub fn single() -> ContextSpec {
        ContextSpec { bands: vec![[0, 24]], weekend: false, utc_offset_hours: 0 }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.bands.is_empty() {
            return Err("contexts.bands is empty: give at least [[0, 24]]".into());
        }
        let mut covered = [0u8; 24];
        for [a, b] in &self.bands {
            if a >= b || *b > 24 {
                return Err(format!("contexts.bands: [{a}, {b}] is not an hour range within [0, 24]"));
            }
            for h in *a..*b {
                covered[h as usize] += 1;
            }
        }
        if let Some(h) = covered.iter().position(|c| *c != 1) {
            return Err(format!(
                "contexts.bands must cover each hour of the day exactly once: hour {h} is covered {} times",
                covered[h]
            ));
        }
        if !(-12..=14).contains(&self.utc_offset_hours) {
            return Err(format!("contexts.utc_offset_hours {} is outside -12..=14", self.utc_offset_hours));
        }
        Ok(())
    }

    /// The context name at a Unix time, e.g. "weekday-16-24" (or "all-0-24").
    pub fn at(&self, t_unix_s: f64) -> String {
        let local = t_unix_s.floor() as i64 + self.utc_offset_hours as i64 * 3600;
        let day = local.div_euclid(86_400);
        let hour = (local.rem_euclid(86_400) / 3600) as u32;
        // 1970-01-01 was a Thursday: day 0 -> weekday index 3 (Monday = 0).
        let weekday = (day + 3).rem_euclid(7);
        let band = self.bands.iter().find(|[a, b]| (*a..*b).contains(&hour)).copied().unwrap_or([0, 24]);
        let kind = match (self.weekend, weekday >= 5) {
            (false, _) => "all",
            (true, true) => "weekend",
            (true, false) => "weekday",
        };
        format!("{kind}-{}-{}", band[0], band[1])
    }

    /// Every context name, in a stable order.
    pub fn names(&self) -> Vec<String> {
        let kinds: &[&str] = if self.weekend { &["weekday", "weekend"] } else { &["all"] };
        kinds.iter().flat_map(|k| self.bands.iter().map(move |[a, b]| format!("{k}-{a}-{b}"))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_contexts_follow_the_clock_and_the_week() {
        let c = ContextSpec::default();
        c.check().unwrap();
        assert_eq!(c.names().len(), 6);
        let monday_0h = 4.0 * 86_400.0; // 1970-01-05 was a Monday
        assert_eq!(c.at(monday_0h + 3.0 * 3600.0), "weekday-0-8");
        assert_eq!(c.at(monday_0h + 12.0 * 3600.0), "weekday-8-16");
        assert_eq!(c.at(monday_0h + 20.0 * 3600.0), "weekday-16-24");
        assert_eq!(c.at(monday_0h + 5.0 * 86_400.0 + 20.0 * 3600.0), "weekend-16-24", "Saturday");
        assert_eq!(c.at(monday_0h + 7.0 * 86_400.0 + 1.0), "weekday-0-8", "next Monday");
        let shifted = ContextSpec { utc_offset_hours: 2, ..ContextSpec::default() };
        assert_eq!(shifted.at(monday_0h + 7.0 * 3600.0), "weekday-8-16", "07:00 UTC is 09:00 local");
    }

    #[test]
    fn bands_must_tile_the_day() {
        let gap = ContextSpec { bands: vec![[0, 8], [9, 24]], ..ContextSpec::default() };
        assert!(gap.check().unwrap_err().contains("hour 8 is covered 0 times"));
        let overlap = ContextSpec { bands: vec![[0, 12], [8, 24]], ..ContextSpec::default() };
        assert!(overlap.check().unwrap_err().contains("covered 2 times"));
        assert!(ContextSpec { bands: vec![[5, 5]], ..ContextSpec::default() }.check().is_err());
    }
}
