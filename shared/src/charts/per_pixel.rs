//! From a series to what is drawn: one sample per bucket with its smoothed value, then at most
//! one sample per pixel column. A chart never draws more segments than it has pixels, however
//! long the run, and each column keeps the lowest and highest value that fell into it, so a
//! spike of one step still shows as a vertical stroke.

use super::XAxis;
use super::smoothing::smooth;
use crate::charts::Scale;
use crate::metrics::Bucket;

/// One point of a drawn series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Position on the chart's x axis.
    pub x: f64,
    /// The step of the last point it stands for (for read-outs on any axis).
    pub step: u64,
    /// The lowest and highest raw value it stands for.
    pub min: f64,
    pub max: f64,
    /// The raw value of its last point.
    pub value: f64,
    /// The smoothed value at its last point.
    pub smoothed: f64,
    /// Some value it stands for is NaN or infinite (a chart marks it).
    pub non_finite: bool,
}

/// A series' buckets as samples on `axis` (for a run whose first point was at `start_wall`),
/// smoothed with TensorBoard's `weight`.
pub fn samples(buckets: &[Bucket], axis: XAxis, start_wall: f64, weight: f64) -> Vec<Sample> {
    let values: Vec<f64> = buckets.iter().map(|b| b.last).collect();
    let smoothed = smooth(&values, weight);
    buckets
        .iter()
        .zip(smoothed)
        .map(|(b, smoothed)| Sample {
            x: axis.x_of(b, start_wall),
            step: b.last_step,
            min: b.min,
            max: b.max,
            value: b.last,
            smoothed,
            non_finite: b.non_finite > 0,
        })
        .collect()
}

/// Folds consecutive samples that land in the same one of `pixels` columns of `x_scale` into
/// one: the column's lowest `min`, highest `max`, and the last sample's values. Samples whose
/// position cannot be drawn are left out.
pub fn per_pixel(samples: &[Sample], x_scale: &Scale, pixels: u32) -> Vec<Sample> {
    let columns = f64::from(pixels.max(1));
    let mut out: Vec<(i64, Sample)> = Vec::new();
    for sample in samples {
        let Some(unit) = x_scale.unit(sample.x) else { continue };
        // Clamped far outside the chart, so the conversion cannot overflow.
        let column = (unit * columns).floor().clamp(-1.0, columns) as i64;
        match out.last_mut() {
            Some((last_column, merged)) if *last_column == column => {
                *merged = Sample {
                    min: merged.min.min(sample.min),
                    max: merged.max.max(sample.max),
                    non_finite: merged.non_finite || sample.non_finite,
                    ..*sample
                };
            }
            _ => out.push((column, *sample)),
        }
    }
    out.into_iter().map(|(_, sample)| sample).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(step: u64, value: f64) -> Bucket {
        Bucket {
            first_step: step,
            last_step: step,
            first_wall: 1000.0 + step as f64 * 2.0,
            last_wall: 1000.0 + step as f64 * 2.0,
            epoch: 1,
            min: value,
            max: value,
            last: value,
            count: 1,
            non_finite: 0,
        }
    }

    #[test]
    fn samples_carry_position_raw_and_smoothed_values() {
        let buckets = [bucket(0, 1.0), bucket(1, 3.0)];
        let on_steps = samples(&buckets, XAxis::Step, 1000.0, 0.5);
        assert_eq!(on_steps.iter().map(|s| s.x).collect::<Vec<_>>(), [0.0, 1.0]);
        assert_eq!(on_steps[1].value, 3.0);
        assert_eq!(on_steps.iter().map(|s| s.smoothed).collect::<Vec<_>>(), smooth(&[1.0, 3.0], 0.5));
        let on_time = samples(&buckets, XAxis::Relative, 1000.0, 0.0);
        assert_eq!(on_time.iter().map(|s| s.x).collect::<Vec<_>>(), [0.0, 2.0]);
    }

    #[test]
    fn a_long_series_becomes_one_sample_per_column_and_keeps_its_spike() {
        let mut buckets: Vec<Bucket> = (0..10_000).map(|s| bucket(s, 1.0)).collect();
        buckets[4321] = bucket(4321, 80.0);
        buckets[9999] = bucket(9999, 0.5);
        let all = samples(&buckets, XAxis::Step, 1000.0, 0.0);
        let scale = Scale::new(0.0, 9999.0, false);
        let drawn = per_pixel(&all, &scale, 100);
        assert!(drawn.len() <= 101, "{}", drawn.len());
        assert!(drawn.iter().any(|s| s.max == 80.0), "the spike was lost");
        let last = drawn.last().unwrap();
        assert_eq!((last.x, last.value, last.step), (9999.0, 0.5, 9999));
        assert_eq!(drawn[0].x, 99.0, "the first column ends with its last sample");
    }

    #[test]
    fn short_series_are_drawn_point_for_point() {
        let all = samples(&[bucket(0, 1.0), bucket(5, 2.0), bucket(10, 0.5)], XAxis::Step, 0.0, 0.0);
        assert_eq!(per_pixel(&all, &Scale::new(0.0, 10.0, false), 600), all);
    }

    #[test]
    fn undrawable_positions_are_skipped_and_nan_values_do_not_hide_the_range() {
        let mut all = samples(&[bucket(1, 2.0), bucket(2, f64::NAN), bucket(3, 4.0)], XAxis::Step, 0.0, 0.0);
        all[0].x = f64::NAN;
        let drawn = per_pixel(&all, &Scale::new(0.0, 100.0, false), 1);
        assert_eq!(drawn.len(), 1);
        assert_eq!((drawn[0].min, drawn[0].max, drawn[0].value), (4.0, 4.0, 4.0));
    }
}
