//! TensorBoard's scalar smoothing, so that a curve here looks like the one learners know from
//! TensorBoard at the same slider position.
//!
//! An exponential moving average with weight `w`, debiased: the running average starts at 0,
//! so after `n` finite values it is divided by `1 - wⁿ` (without that the first points would be
//! pulled towards zero). Non-finite values (a diverged step) are passed through unchanged and
//! do not enter the average, and a constant series is left as it is.

/// TensorBoard's default slider position.
pub const DEFAULT_SMOOTHING: f64 = 0.6;

/// The slider's top: at weight 1 the average would never move.
pub const MAX_SMOOTHING: f64 = 0.999;

/// The smoothed values of `values`, one per value. `weight` is clamped to `[0, MAX_SMOOTHING]`
/// (a NaN weight means no smoothing).
pub fn smooth(values: &[f64], weight: f64) -> Vec<f64> {
    let weight = if weight.is_nan() { 0.0 } else { weight.clamp(0.0, MAX_SMOOTHING) };
    let constant = values.split_first().is_none_or(|(first, rest)| rest.iter().all(|v| v == first));
    if constant || weight == 0.0 {
        return values.to_vec();
    }
    let mut average = 0.0;
    let mut weight_power = 1.0;
    values
        .iter()
        .map(|&value| {
            if !value.is_finite() {
                return value;
            }
            average = average * weight + (1.0 - weight) * value;
            weight_power *= weight;
            average / (1.0 - weight_power)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn follows_the_debiased_moving_average() {
        let smoothed = smooth(&[1.0, 2.0, 4.0], 0.5);
        // By hand: averages 0.5, 1.25, 2.625; debiased by 1 - 0.5, 1 - 0.25, 1 - 0.125.
        let expected = [0.5 / 0.5, 1.25 / 0.75, 2.625 / 0.875];
        for (got, want) in smoothed.iter().zip(expected) {
            assert!(close(*got, want), "{smoothed:?}");
        }
    }

    #[test]
    fn the_first_point_is_never_pulled_towards_zero() {
        for weight in [0.1, 0.6, 0.95] {
            assert!(close(smooth(&[3.0, 5.0], weight)[0], 3.0));
        }
    }

    #[test]
    fn constant_series_and_zero_weight_are_untouched() {
        assert_eq!(smooth(&[0.7; 5], 0.9), vec![0.7; 5]);
        assert_eq!(smooth(&[1.0, 9.0, 2.0], 0.0), vec![1.0, 9.0, 2.0]);
        assert!(smooth(&[], 0.6).is_empty());
    }

    #[test]
    fn non_finite_values_pass_through_without_poisoning_the_average() {
        let smoothed = smooth(&[1.0, f64::NAN, f64::INFINITY, 3.0], 0.5);
        assert!(smoothed[1].is_nan());
        assert_eq!(smoothed[2], f64::INFINITY);
        // The finite values smooth as if the others were not there.
        let without = smooth(&[1.0, 3.0], 0.5);
        assert!(close(smoothed[0], without[0]) && close(smoothed[3], without[1]), "{smoothed:?}");
    }

    #[test]
    fn weights_outside_the_slider_are_clamped() {
        assert_eq!(smooth(&[1.0, 2.0], -3.0), vec![1.0, 2.0]);
        assert_eq!(smooth(&[1.0, 2.0], f64::NAN), vec![1.0, 2.0]);
        let top = smooth(&[1.0, 2.0], 5.0);
        assert_eq!(top, smooth(&[1.0, 2.0], MAX_SMOOTHING));
        assert!(top[1] > 1.0 && top[1] < 2.0, "{top:?}");
    }
}
