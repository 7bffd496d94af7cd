//! Long series in few numbers: consecutive points of one tag folded into buckets that keep the
//! minimum, the maximum and the last value. TensorBoard samples 1000 points per tag and so hides
//! spikes; a bucket's min/max keeps every spike visible at any zoom. The server sends a new
//! viewer a run's history this way, and the browser can fold a series per pixel the same way.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use super::MetricPoint;

/// Consecutive points of one tag. A bucket of one point has `min == max == last`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    pub first_step: u64,
    pub last_step: u64,
    /// Seconds since the Unix epoch of the first and the last point (for the time axes).
    pub first_wall: f64,
    pub last_wall: f64,
    /// The epoch of the last point.
    pub epoch: u64,
    pub min: f64,
    pub max: f64,
    pub last: f64,
    pub count: u32,
}

/// One tag's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub tag: String,
    pub buckets: Vec<Bucket>,
}

impl Bucket {
    /// The bucket of `points` (in order), or `None` when there are none.
    pub fn of<P: Borrow<MetricPoint>>(points: &[P]) -> Option<Bucket> {
        let (first, last) = (points.first()?.borrow(), points.last()?.borrow());
        let (min, max) =
            points.iter().map(|p| p.borrow().value).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
        Some(Bucket {
            first_step: first.step,
            last_step: last.step,
            first_wall: first.wall,
            last_wall: last.wall,
            epoch: last.epoch,
            min,
            max,
            last: last.value,
            count: u32::try_from(points.len()).unwrap_or(u32::MAX),
        })
    }
}

/// Folds `points` (one tag, in order) into at most `max_buckets` buckets of nearly equal
/// counts; with no more points than that, one bucket per point. The first and the last point
/// always end their own bucket's range, so the curve starts and ends where the data does.
pub fn bucketize<P: Borrow<MetricPoint>>(points: &[P], max_buckets: usize) -> Vec<Bucket> {
    let n = points.len();
    let k = max_buckets.max(1).min(n);
    (0..k).filter_map(|i| Bucket::of(&points[i * n / k..(i + 1) * n / k])).collect()
}

/// Groups `points` by tag (in order of each tag's first point) and folds every tag's points
/// into at most `max_buckets` buckets.
pub fn series<'a>(points: impl IntoIterator<Item = &'a MetricPoint>, max_buckets: usize) -> Vec<Series> {
    let mut by_tag: Vec<(&str, Vec<&MetricPoint>)> = Vec::new();
    for point in points {
        match by_tag.iter_mut().find(|(tag, _)| *tag == point.tag) {
            Some((_, list)) => list.push(point),
            None => by_tag.push((&point.tag, vec![point])),
        }
    }
    by_tag.into_iter().map(|(tag, list)| Series { tag: tag.to_owned(), buckets: bucketize(&list, max_buckets) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(step: u64, tag: &str, value: f64) -> MetricPoint {
        MetricPoint { step, epoch: 1 + step / 10, wall: 100.0 + step as f64, tag: tag.into(), value }
    }

    #[test]
    fn short_series_keep_every_point_as_its_own_bucket() {
        let points: Vec<_> = (0..5).map(|s| point(s, "Loss/train", s as f64 * 0.5)).collect();
        let buckets = bucketize(&points, 10);
        assert_eq!(buckets.len(), 5);
        for (b, p) in buckets.iter().zip(&points) {
            assert_eq!((b.first_step, b.last_step, b.count), (p.step, p.step, 1));
            assert_eq!((b.min, b.max, b.last), (p.value, p.value, p.value));
        }
    }

    #[test]
    fn long_series_keep_spikes_and_the_last_value_of_each_bucket() {
        // 1000 points of a flat curve with one spike up and one down.
        let mut points: Vec<_> = (0..1000).map(|s| point(s, "Loss/train", 1.0)).collect();
        points[333].value = 50.0;
        points[777].value = -3.0;
        points[999].value = 0.25;
        let buckets = bucketize(&points, 100);
        assert_eq!(buckets.len(), 100);
        assert_eq!(buckets.iter().map(|b| b.count as usize).sum::<usize>(), points.len());
        // Contiguous, in order, covering every step once.
        assert_eq!(buckets[0].first_step, 0);
        assert_eq!(buckets[99].last_step, 999);
        for pair in buckets.windows(2) {
            assert_eq!(pair[1].first_step, pair[0].last_step + 1);
        }
        let max = buckets.iter().map(|b| b.max).fold(f64::MIN, f64::max);
        let min = buckets.iter().map(|b| b.min).fold(f64::MAX, f64::min);
        assert_eq!((min, max), (-3.0, 50.0));
        let spike = buckets.iter().find(|b| (b.first_step..=b.last_step).contains(&333)).unwrap();
        assert_eq!((spike.max, spike.last), (50.0, 1.0));
        assert_eq!(buckets[99].last, 0.25);
        assert_eq!((buckets[99].last_wall, buckets[99].epoch), (points[999].wall, points[999].epoch));
    }

    #[test]
    fn series_group_by_tag_in_order_of_first_appearance() {
        let points =
            vec![point(0, "Loss/valid", 2.0), point(1, "Loss/train", 1.0), point(2, "Loss/train", 0.5), point(2, "Loss/valid", 1.5)];
        let series = series(&points, 1);
        let tags: Vec<_> = series.iter().map(|s| s.tag.as_str()).collect();
        assert_eq!(tags, ["Loss/valid", "Loss/train"]);
        let train = &series[1].buckets;
        assert_eq!(train.len(), 1);
        assert_eq!((train[0].first_step, train[0].last_step, train[0].min, train[0].max, train[0].count), (1, 2, 0.5, 1.0, 2));
    }

    #[test]
    fn no_points_give_no_buckets() {
        assert!(bucketize::<MetricPoint>(&[], 10).is_empty());
        assert!(bucketize(&[point(0, "t", 1.0)], 0).len() == 1);
    }
}
