//! Long series in few numbers: consecutive points of one tag folded into buckets that keep the
//! minimum, the maximum and the last value. TensorBoard samples 1000 points per tag and so hides
//! spikes; a bucket's min/max keeps every spike visible at any zoom. The server sends a new
//! viewer a run's history this way, and the browser can fold a series per pixel the same way.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use super::{MetricPoint, nonfinite};

/// Consecutive points of one tag. A bucket of one finite point has `min == max == last`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    pub first_step: u64,
    pub last_step: u64,
    /// Seconds since the Unix epoch of the first and the last point (for the time axes).
    #[serde(with = "nonfinite")]
    pub first_wall: f64,
    #[serde(with = "nonfinite")]
    pub last_wall: f64,
    /// The epoch of the last point.
    pub epoch: u64,
    /// The lowest and highest finite values (NaN when there are none).
    #[serde(with = "nonfinite")]
    pub min: f64,
    #[serde(with = "nonfinite")]
    pub max: f64,
    /// The last value, whatever it is.
    #[serde(with = "nonfinite")]
    pub last: f64,
    pub count: u32,
    /// How many of the values are NaN or infinite: a chart marks where they are, as
    /// TensorBoard does, at any zoom.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub non_finite: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
        let (first, rest) = points.split_first()?;
        let mut bucket = Bucket::single(first.borrow());
        for point in rest {
            bucket.absorb(&Bucket::single(point.borrow()));
        }
        Some(bucket)
    }

    /// The bucket of one point.
    pub fn single(point: &MetricPoint) -> Bucket {
        let finite = point.value.is_finite();
        let kept = if finite { point.value } else { f64::NAN };
        Bucket {
            first_step: point.step,
            last_step: point.step,
            first_wall: point.wall,
            last_wall: point.wall,
            epoch: point.epoch,
            min: kept,
            max: kept,
            last: point.value,
            count: 1,
            non_finite: u32::from(!finite),
        }
    }

    /// Takes in `later`, the points that follow this bucket's.
    pub fn absorb(&mut self, later: &Bucket) {
        self.last_step = later.last_step;
        self.last_wall = later.last_wall;
        self.epoch = later.epoch;
        // `f64::min` and `max` take the number over a NaN: NaN only when neither has one.
        self.min = self.min.min(later.min);
        self.max = self.max.max(later.max);
        self.last = later.last;
        self.count = self.count.saturating_add(later.count);
        self.non_finite = self.non_finite.saturating_add(later.non_finite);
    }
}

/// A run's series folded as they grow, for a server that follows a run of any length: each
/// tag keeps at most `max_buckets` buckets of one width (a power of two points), the last one
/// filling. When they are all full, neighbours merge in pairs and the width doubles. Memory
/// stays the same however long the run, and a new viewer's history is ready at once, without
/// reading the run's file again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thinned {
    max_buckets: usize,
    tags: Vec<Thinning>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Thinning {
    /// Points per full bucket.
    width: u32,
    series: Series,
}

/// The most tags a run's charts carry: the tutorial's runs have a few dozen, and a run that
/// writes thousands (a bug, or a hostile copy) would give every chart picker thousands of
/// options and every point a long search. Points of further tags are left out of the charts
/// (they stay in the run's file).
pub const MAX_TAGS: usize = 256;

impl Thinned {
    pub fn new(max_buckets: usize) -> Thinned {
        Thinned { max_buckets: max_buckets.max(2), tags: Vec::new() }
    }

    /// Adds the next point of the run.
    pub fn push(&mut self, point: &MetricPoint) {
        let at = match self.tags.iter().position(|t| t.series.tag == point.tag) {
            Some(at) => at,
            None if self.tags.len() >= MAX_TAGS => return,
            None => {
                self.tags.push(Thinning { width: 1, series: Series { tag: point.tag.clone(), buckets: Vec::new() } });
                self.tags.len() - 1
            }
        };
        let thinning = &mut self.tags[at];
        let buckets = &mut thinning.series.buckets;
        if buckets.len() == self.max_buckets && buckets.last().is_some_and(|b| b.count >= thinning.width) {
            *buckets = buckets
                .chunks(2)
                .map(|pair| {
                    let mut merged = pair[0].clone();
                    if let Some(second) = pair.get(1) {
                        merged.absorb(second);
                    }
                    merged
                })
                .collect();
            thinning.width = thinning.width.saturating_mul(2);
        }
        match buckets.last_mut() {
            Some(last) if last.count < thinning.width => last.absorb(&Bucket::single(point)),
            _ => buckets.push(Bucket::single(point)),
        }
    }

    /// Every tag's buckets, in order of each tag's first point.
    pub fn series(&self) -> Vec<Series> {
        self.tags.iter().map(|t| t.series.clone()).collect()
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
        let full = by_tag.len() >= MAX_TAGS;
        match by_tag.iter_mut().find(|(tag, _)| *tag == point.tag) {
            Some((_, list)) => list.push(point),
            None if full => {}
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
    fn a_run_charts_at_most_max_tags_tags() {
        let points: Vec<_> = (0..MAX_TAGS as u64 + 100).map(|s| point(s, &format!("tag{s}"), 1.0)).collect();
        let mut thinned = Thinned::new(10);
        points.iter().for_each(|p| thinned.push(p));
        assert_eq!(thinned.series().len(), MAX_TAGS);
        assert_eq!(series(&points, 10).len(), MAX_TAGS);
        // A tag already charted keeps its points.
        thinned.push(&point(1_000, "tag0", 2.0));
        assert_eq!(thinned.series()[0].buckets.len(), 2);
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
    fn a_thinned_run_keeps_every_point_counted_every_spike_and_its_bounds() {
        let mut thinned = Thinned::new(10);
        for step in 0..1000 {
            let value = match step {
                333 => 50.0,
                777 => -3.0,
                _ => 1.0,
            };
            thinned.push(&point(step, "Loss/train", value));
            if step % 2 == 0 {
                thinned.push(&point(step, "Loss/valid", 2.0));
            }
        }
        let series = thinned.series();
        assert_eq!(series.iter().map(|s| s.tag.as_str()).collect::<Vec<_>>(), ["Loss/train", "Loss/valid"]);
        for (series, count) in series.iter().zip([1000, 500]) {
            let buckets = &series.buckets;
            assert!((5..=10).contains(&buckets.len()), "{} buckets", buckets.len());
            assert_eq!(buckets.iter().map(|b| b.count).sum::<u32>(), count);
            assert_eq!(buckets[0].first_step, 0);
            for pair in buckets.windows(2) {
                assert!(pair[1].first_step > pair[0].last_step);
            }
        }
        let train = &series[0].buckets;
        assert_eq!(train.last().unwrap().last_step, 999);
        let spike = train.iter().find(|b| (b.first_step..=b.last_step).contains(&333)).unwrap();
        assert_eq!(spike.max, 50.0);
        assert_eq!(train.iter().map(|b| b.min).fold(f64::MAX, f64::min), -3.0);
        // A short series is every point.
        let mut short = Thinned::new(10);
        (0..4).for_each(|s| short.push(&point(s, "t", s as f64)));
        assert_eq!(short.series()[0].buckets, bucketize(&(0..4).map(|s| point(s, "t", s as f64)).collect::<Vec<_>>(), 10));
    }

    #[test]
    fn non_finite_values_are_counted_not_folded_into_the_range() {
        let values = [1.0, f64::NAN, 3.0, f64::INFINITY];
        let points: Vec<_> = values.iter().enumerate().map(|(s, &v)| point(s as u64, "Loss/train", v)).collect();
        let bucket = Bucket::of(&points).unwrap();
        assert_eq!((bucket.min, bucket.max, bucket.count, bucket.non_finite), (1.0, 3.0, 4, 2));
        assert_eq!(bucket.last, f64::INFINITY);
        let only_nan = Bucket::of(&points[1..2]).unwrap();
        assert!(only_nan.min.is_nan() && only_nan.max.is_nan() && only_nan.non_finite == 1);
        let text = serde_json::to_string(&only_nan).unwrap();
        assert_eq!(serde_json::from_str::<Bucket>(&text).unwrap().non_finite, 1, "{text}");
    }

    #[test]
    fn no_points_give_no_buckets() {
        assert!(bucketize::<MetricPoint>(&[], 10).is_empty());
        assert!(bucketize(&[point(0, "t", 1.0)], 0).len() == 1);
    }
}
