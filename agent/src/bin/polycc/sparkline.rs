//! Sparklines: a series in one line of Unicode blocks, for `flows --watch` and `trace`.

/// The eight levels, lowest first.
const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Drawn for a missing value (`None`, NaN, infinite): a gap.
const GAP: char = ' ';

/// One block per value, on a scale from 0 (`▁`) to `max` (`█`), the level rounded to the
/// nearest of the eight: v / max * 7, so max/2 (3.5) is `▅`. Values below 0 are `▁` and above
/// `max` are `█`; with `max` not above 0 (all zero) every value is `▁`. Missing values are gaps.
pub fn sparkline(values: &[Option<f64>], max: f64) -> String {
    values
        .iter()
        .map(|v| match v.filter(|v| v.is_finite()) {
            None => GAP,
            Some(_) if !(max.is_finite() && max > 0.0) => BLOCKS[0],
            Some(v) => BLOCKS[((v / max).clamp(0.0, 1.0) * 7.0).round() as usize],
        })
        .collect()
}

/// The largest finite value, 0 without one: a series' own scale.
pub fn series_max(values: &[Option<f64>]) -> f64 {
    values.iter().flatten().filter(|v| v.is_finite()).fold(0.0, |m, &v| m.max(v))
}

/// `values` in at most `width` columns: each column the mean of its values that are there
/// (`None` when none is), so a long trace still fits one line.
pub fn columns(values: &[Option<f64>], width: usize) -> Vec<Option<f64>> {
    if values.len() <= width || width == 0 {
        return values.to_vec();
    }
    (0..width)
        .map(|c| {
            let bucket = &values[c * values.len() / width..(c + 1) * values.len() / width];
            let present: Vec<f64> = bucket.iter().flatten().copied().filter(|v| v.is_finite()).collect();
            (!present.is_empty()).then(|| present.iter().sum::<f64>() / present.len() as f64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_half_and_max_are_the_lowest_a_middle_and_the_highest_block() {
        assert_eq!(sparkline(&[Some(0.0), Some(5.0), Some(10.0)], 10.0), "▁▅█");
        // Each level: v / max * 7 rounded.
        let levels: Vec<Option<f64>> = (0..8).map(|i| Some(f64::from(i))).collect();
        assert_eq!(sparkline(&levels, 7.0), "▁▂▃▄▅▆▇█");
        assert_eq!(sparkline(&[Some(-3.0), Some(25.0)], 10.0), "▁█", "clamped to the scale");
    }

    #[test]
    fn a_constant_series_is_flat_on_its_own_scale_and_zero_is_the_floor() {
        let flat = [Some(4.2e6); 5];
        assert_eq!(sparkline(&flat, series_max(&flat)), "█████");
        let idle = [Some(0.0); 3];
        assert_eq!((series_max(&idle), sparkline(&idle, series_max(&idle)).as_str()), (0.0, "▁▁▁"));
    }

    #[test]
    fn empty_is_empty_and_missing_values_are_gaps() {
        assert_eq!(sparkline(&[], 1.0), "");
        assert_eq!(series_max(&[]), 0.0);
        let gappy = [Some(1.0), None, Some(f64::NAN), Some(2.0), Some(f64::INFINITY)];
        assert_eq!(series_max(&gappy), 2.0, "NaN and infinity are not a scale");
        assert_eq!(sparkline(&gappy, 2.0), "▅  █ ");
        assert_eq!(sparkline(&[Some(1.0)], f64::NAN), "▁", "no scale: the floor");
    }

    #[test]
    fn columns_average_buckets_and_keep_short_series() {
        let v: Vec<Option<f64>> = (1..=6).map(|i| Some(f64::from(i))).collect();
        assert_eq!(columns(&v, 10), v);
        assert_eq!(columns(&v, 3), [Some(1.5), Some(3.5), Some(5.5)]);
        assert_eq!(columns(&[None, None, Some(4.0), None], 2), [None, Some(4.0)]);
    }
}
