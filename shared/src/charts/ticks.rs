//! Axis ticks at round values (1, 2 or 5 times a power of ten; whole decades on a log scale;
//! whole seconds, minutes, hours or days on a time axis) and their labels.

/// Round step sizes for time axes, in seconds: a label every 2 min 30 s helps nobody.
const TIME_STEPS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, // seconds
    60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, // minutes
    3600.0, 7200.0, 10_800.0, 21_600.0, 43_200.0, // hours
    86_400.0, 172_800.0, 604_800.0, // days
];

/// About `count` ticks between `lo` and `hi` at multiples of a round step, plus that step.
pub fn linear_ticks(lo: f64, hi: f64, count: usize) -> (Vec<f64>, f64) {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return (Vec::new(), 0.0);
    }
    let raw = (hi - lo) / count.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
    (multiples(lo, hi, step), step)
}

/// Ticks for a time axis over seconds `[lo, hi]`, at a round time step. `offset` shifts where
/// the multiples fall (a time zone's offset, so wall-clock ticks land on local whole hours).
pub fn time_ticks(lo: f64, hi: f64, count: usize, offset: f64) -> (Vec<f64>, f64) {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return (Vec::new(), 0.0);
    }
    let raw = (hi - lo) / count.max(1) as f64;
    match TIME_STEPS.iter().copied().find(|s| *s >= raw) {
        Some(step) => (multiples(lo + offset, hi + offset, step).into_iter().map(|t| t - offset).collect(), step),
        // Beyond weeks, plain round numbers of days will do.
        None => {
            let (days, step) = linear_ticks(lo / 86_400.0, hi / 86_400.0, count);
            (days.into_iter().map(|d| d * 86_400.0).collect(), step * 86_400.0)
        }
    }
}

/// Ticks for a log axis over `[lo, hi]` (both positive): every decade, every few decades when
/// there are many, and 2 and 5 times each decade when the range spans less than two.
pub fn log_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    // Decades of f64 lie within ±330, so these conversions are exact.
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let decades = (last - first) as usize;
    let mantissas: &[f64] = if decades <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let every = decades.div_ceil(count.max(1)).max(1);
    (first..=last)
        .filter(|e| ((e - first) as usize).is_multiple_of(every))
        .flat_map(|e| mantissas.iter().map(move |m| round_to_digits(m * 10f64.powi(e), 12)))
        .filter(|t| *t >= lo * (1.0 - 1e-12) && *t <= hi * (1.0 + 1e-12))
        .collect()
}

/// Multiples of `step` in `[lo, hi]`, rounded so that `0.1 * 3` reads `0.3`.
fn multiples(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step).ceil();
    let last = (hi / step).floor();
    if !(first.is_finite() && last.is_finite()) || last < first || last - first > 10_000.0 {
        return Vec::new();
    }
    // Bounded to 10 001 ticks above, so the count fits.
    let n = (last - first) as usize + 1;
    (0..n).map(|i| round_to_digits((first + i as f64) * step, 12)).collect()
}

fn round_to_digits(x: f64, digits: i32) -> f64 {
    crate::numbers::round_significant(x, digits)
}

/// A tick label that shows just enough decimals for ticks `step` apart.
pub fn format_tick(value: f64, step: f64) -> String {
    if value == 0.0 {
        return "0".into();
    }
    let abs = value.abs();
    if !(1e-3..1e6).contains(&abs) {
        return exponent_form(value);
    }
    // A step of 0.05 needs two decimals, 0.2 one; the epsilon keeps 0.1 at one.
    let decimals = if step > 0.0 && step < 1.0 { (-step.log10() - 1e-9).ceil() as usize } else { 0 };
    let decimals = decimals.min(6);
    format!("{value:.decimals$}")
}

/// A value for a read-out: four significant digits, exponent form for very small or large.
pub fn format_number(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if value == 0.0 {
        return "0".into();
    }
    let abs = value.abs();
    if !(1e-3..1e6).contains(&abs) {
        return exponent_form(value);
    }
    let decimals = (3 - abs.log10().floor() as i32).max(0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_owned() } else { text }
}

/// `5e-4`, `1.41e-3`: as the tutorial's config file writes learning rates.
fn exponent_form(value: f64) -> String {
    let text = format!("{:.2e}", value);
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exponent}")
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_fall_on_round_steps() {
        let (ticks, step) = linear_ticks(0.0, 1.0, 5);
        assert_eq!(step, 0.2);
        assert_eq!(ticks, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        let (ticks, step) = linear_ticks(0.117, 1.08, 4);
        assert_eq!(step, 0.5);
        assert_eq!(ticks, [0.5, 1.0]);
        let (ticks, step) = linear_ticks(0.0, 23_720.0, 5);
        assert_eq!(step, 5000.0);
        assert_eq!(ticks, [0.0, 5000.0, 10_000.0, 15_000.0, 20_000.0]);
        assert_eq!(linear_ticks(1.0, 1.0, 5).0, Vec::<f64>::new());
        assert_eq!(linear_ticks(f64::NAN, 1.0, 5).0, Vec::<f64>::new());
    }

    #[test]
    fn log_ticks_mark_decades_and_fill_short_ranges() {
        assert_eq!(log_ticks(0.1, 1.2, 5), [0.1, 0.2, 0.5, 1.0]);
        assert_eq!(log_ticks(1e-5, 10.0, 10), [1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0]);
        assert_eq!(log_ticks(1e-8, 1e4, 3), [1e-8, 1e-4, 1.0, 1e4]);
        assert!(log_ticks(0.0, 1.0, 5).is_empty());
    }

    #[test]
    fn time_ticks_use_round_durations_and_local_hours() {
        let (ticks, step) = time_ticks(0.0, 22.16 * 3600.0, 5, 0.0);
        assert_eq!(step, 21_600.0);
        assert_eq!(ticks, [0.0, 21_600.0, 43_200.0, 64_800.0]);
        let (ticks, step) = time_ticks(0.0, 130.0, 4, 0.0);
        assert_eq!((step, ticks.len()), (60.0, 3));
        // In a zone 30 minutes east of UTC, local whole hours are UTC half hours.
        let (ticks, _) = time_ticks(0.0, 4.0 * 3600.0, 4, 1800.0);
        assert_eq!(ticks[0], 1800.0);
    }

    #[test]
    fn labels_have_just_enough_decimals() {
        assert_eq!(format_tick(0.4, 0.2), "0.4");
        assert_eq!(format_tick(0.15, 0.05), "0.15");
        assert_eq!(format_tick(5000.0, 5000.0), "5000");
        assert_eq!(format_tick(0.0005, 0.0001), "5e-4");
        assert_eq!(format_tick(2e6, 1e6), "2e6");
        assert_eq!(format_tick(0.0, 0.1), "0");
    }

    #[test]
    fn read_outs_show_four_significant_digits() {
        assert_eq!(format_number(0.120845), "0.1208");
        assert_eq!(format_number(1.0756), "1.076");
        assert_eq!(format_number(23720.0), "23720");
        assert_eq!(format_number(4.92327e-4), "4.92e-4");
        assert_eq!(format_number(-2.5), "-2.5");
        assert_eq!(format_number(f64::NAN), "NaN");
        assert_eq!(format_number(0.0), "0");
    }
}
