//! What a sweep block draws, without the page: the number each finished run contributes, and
//! the bars and curves that draw them (the variants themselves are `shared::sweep`'s).

use scalebook_shared::charts::{Scale, format_tick, linear_ticks};
use scalebook_shared::metrics::tags;
use scalebook_shared::protocol::Series;

/// What the block draws once its runs are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Training samples per second, side by side.
    Throughput,
    /// Samples per second per rank, relative to the first variant's.
    Efficiency,
    /// The validation-loss curves, overlaid.
    Loss,
}

impl Measure {
    pub const NAMES: &'static str = "throughput, efficiency or loss";

    pub fn parse(name: &str) -> Result<Measure, String> {
        match name {
            "throughput" => Ok(Measure::Throughput),
            "efficiency" => Ok(Measure::Efficiency),
            "loss" => Ok(Measure::Loss),
            other => Err(format!("measure `{other}` is not one of {}", Measure::NAMES)),
        }
    }
}

/// A run's training throughput: the median of its per-epoch samples/s after the first epoch
/// (which pays for warming up, as the tutorial's logs show), or the first when it is alone.
pub fn throughput(series: &[Series]) -> Option<f64> {
    let per_epoch: Vec<f64> = series.iter().find(|s| s.tag == tags::SAMPLES_PER_SEC)?.buckets.iter().map(|b| b.last).collect();
    let mut steady: Vec<f64> = if per_epoch.len() > 1 { per_epoch[1..].to_vec() } else { per_epoch };
    steady.sort_by(f64::total_cmp);
    steady.get(steady.len().checked_sub(1)? / 2).copied()
}

/// Per-rank throughput relative to the first variant's, the weak- and strong-scaling
/// efficiency: 1.0 is perfect scaling.
pub fn efficiencies(values: &[(u32, Option<f64>)]) -> Vec<Option<f64>> {
    let base = values.first().and_then(|&(dp, v)| Some(v? / dp as f64));
    values.iter().map(|&(dp, v)| Some(v? / dp as f64 / base?)).collect()
}

/// One horizontal bar, in a viewBox [`WIDTH`] wide.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub y: f64,
    pub width: f64,
    pub text: String,
}

pub const WIDTH: f64 = 640.0;
pub const LABEL_WIDTH: f64 = 220.0;
pub const BAR_HEIGHT: f64 = 26.0;
const BAR_GAP: f64 = 10.0;
/// Room right of the longest bar for its value.
const VALUE_ROOM: f64 = 90.0;

/// Bars for the finished variants (an unfinished one gets no bar but keeps its row).
pub fn bars(labels: &[String], values: &[Option<f64>], measure: Measure) -> Vec<Bar> {
    let max = values.iter().flatten().copied().fold(0.0, f64::max);
    let span = WIDTH - LABEL_WIDTH - VALUE_ROOM;
    labels
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (label, value))| Bar {
            label: label.clone(),
            y: i as f64 * (BAR_HEIGHT + BAR_GAP),
            width: value.filter(|_| max > 0.0).map_or(0.0, |v| v / max * span),
            text: match (value, measure) {
                (None, _) => "not run yet".into(),
                (Some(v), Measure::Efficiency) => format!("{:.0} %", v * 100.0),
                (Some(v), _) => format!("{v:.1} samples/s"),
            },
        })
        .collect()
}

pub fn bars_height(rows: usize) -> f64 {
    rows as f64 * (BAR_HEIGHT + BAR_GAP)
}

/// The validation-loss curves of the variants as SVG paths in a `WIDTH` × [`CURVES_HEIGHT`]
/// box (the plot area inside [`CURVES_MARGIN`]), over a shared step axis, with y ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Curves {
    pub paths: Vec<Option<String>>,
    pub y_ticks: Vec<(f64, String)>,
    pub x_ticks: Vec<(f64, String)>,
}

pub const CURVES_HEIGHT: f64 = 240.0;
pub const CURVES_MARGIN: f64 = 48.0;

pub fn curves(runs: &[Option<Vec<(f64, f64)>>]) -> Curves {
    let points = runs.iter().flatten().flatten();
    let (mut x_max, mut y_lo, mut y_hi) = (0.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in points {
        x_max = x_max.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    if !y_lo.is_finite() {
        return Curves { paths: runs.iter().map(|_| None).collect(), y_ticks: Vec::new(), x_ticks: Vec::new() };
    }
    let m = CURVES_MARGIN;
    let (xs, ys) = (Scale::new(0.0, x_max.max(1.0), false), Scale::new(y_lo, if y_hi > y_lo { y_hi } else { y_lo + 1.0 }, false));
    let x_at = |x: f64| m + xs.unit(x).unwrap_or(0.0) * (WIDTH - 1.5 * m);
    let y_at = |y: f64| CURVES_HEIGHT - m / 2.0 - ys.unit(y).unwrap_or(0.0) * (CURVES_HEIGHT - m);
    let paths = runs
        .iter()
        .map(|run| {
            let run = run.as_ref().filter(|r| !r.is_empty())?;
            let mut d = String::new();
            for (i, &(x, y)) in run.iter().enumerate() {
                d.push_str(&format!("{}{:.1} {:.1}", if i == 0 { 'M' } else { 'L' }, x_at(x), y_at(y)));
            }
            Some(d)
        })
        .collect();
    let ticks = |scale: &Scale, at: &dyn Fn(f64) -> f64| {
        let (ticks, step) = linear_ticks(scale.lo(), scale.hi(), 5);
        ticks.into_iter().map(|t| (at(t), format_tick(t, step))).collect()
    };
    Curves { paths, y_ticks: ticks(&ys, &y_at), x_ticks: ticks(&xs, &x_at) }
}

/// The validation loss of a run by step, the curve [`Measure::Loss`] overlays.
pub fn loss_curve(series: &[Series]) -> Option<Vec<(f64, f64)>> {
    let s = series.iter().find(|s| s.tag == tags::LOSS_VALID)?;
    Some(s.buckets.iter().map(|b| (b.last_step as f64, b.last)).collect())
}

#[cfg(test)]
mod tests {
    use scalebook_shared::protocol::Bucket;

    use super::*;

    fn series(tag: &str, values: &[f64]) -> Series {
        let bucket = |(i, &v): (usize, &f64)| Bucket {
            first_step: i as u64 * 10,
            last_step: i as u64 * 10,
            first_wall: 0.0,
            last_wall: 0.0,
            epoch: i as u64 + 1,
            min: v,
            max: v,
            last: v,
            count: 1,
        };
        Series { tag: tag.into(), buckets: values.iter().enumerate().map(bucket).collect() }
    }

    #[test]
    fn measures_are_named() {
        assert_eq!(Measure::parse("efficiency"), Ok(Measure::Efficiency));
        assert!(Measure::parse("speed").unwrap_err().contains("throughput, efficiency or loss"));
    }

    #[test]
    fn throughput_is_the_median_after_the_first_epoch() {
        assert_eq!(throughput(&[series(tags::SAMPLES_PER_SEC, &[3.0, 10.0, 12.0, 11.0])]), Some(11.0));
        assert_eq!(throughput(&[series(tags::SAMPLES_PER_SEC, &[3.0])]), Some(3.0));
        assert_eq!(throughput(&[series(tags::LOSS_TRAIN, &[3.0])]), None);
        assert_eq!(throughput(&[series(tags::SAMPLES_PER_SEC, &[])]), None);
    }

    #[test]
    fn efficiency_is_per_rank_throughput_over_the_first_variants() {
        let e = efficiencies(&[(1, Some(10.0)), (2, Some(15.0)), (4, None)]);
        assert_eq!(e, vec![Some(1.0), Some(0.75), None]);
        assert_eq!(efficiencies(&[(1, None), (2, Some(15.0))]), vec![None, None]);
    }

    #[test]
    fn bars_scale_to_the_largest_value_and_leave_unrun_rows_empty() {
        let labels = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let b = bars(&labels, &[Some(10.0), Some(5.0), None], Measure::Throughput);
        assert_eq!(b[0].width, WIDTH - LABEL_WIDTH - VALUE_ROOM);
        assert_eq!(b[1].width * 2.0, b[0].width);
        assert_eq!((b[2].width, b[2].text.as_str()), (0.0, "not run yet"));
        assert!(b[2].y > b[1].y && b[1].y > b[0].y);
        assert_eq!(bars(&labels[..1], &[Some(0.75)], Measure::Efficiency)[0].text, "75 %");
    }

    #[test]
    fn curves_share_one_box_and_skip_missing_runs() {
        let c = curves(&[Some(vec![(0.0, 1.0), (10.0, 0.5)]), None, Some(vec![(0.0, 0.8), (20.0, 0.25)])]);
        assert!(c.paths[1].is_none());
        let first = c.paths[0].as_deref().unwrap();
        assert!(first.starts_with(&format!("M{CURVES_MARGIN:.1} ")), "{first}");
        // The highest loss sits at the top of the plot area, the lowest at the bottom.
        assert!(first.starts_with(&format!("M{CURVES_MARGIN:.1} {:.1}", CURVES_MARGIN / 2.0)), "{first}");
        assert!(c.paths[2].as_deref().unwrap().ends_with(&format!(
            "{:.1} {:.1}",
            WIDTH - CURVES_MARGIN / 2.0,
            CURVES_HEIGHT - CURVES_MARGIN / 2.0
        )));
        assert!(!c.y_ticks.is_empty() && !c.x_ticks.is_empty());
        assert!(curves(&[None, Some(vec![])]).paths.iter().all(Option::is_none));
        assert_eq!(loss_curve(&[series(tags::LOSS_VALID, &[0.5, 0.25])]), Some(vec![(0.0, 0.5), (10.0, 0.25)]));
    }
}
