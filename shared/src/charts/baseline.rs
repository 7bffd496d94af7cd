//! The tutorial's reference run (config `base` on one A100, ≈22 hours, one point per epoch),
//! shipped as `static/reference/baseline-base-1gpu.csv` and drawn behind a learner's curves.
//!
//! The file has one row per logged step: `step`, `wall_hours` since the start, then one column
//! per scalar; an empty cell is a scalar not logged at that step (the learning rate has no
//! step-0 value).

use crate::metrics::tags;
use crate::protocol::{Bucket, Series};
use crate::{Error, Problems};

/// The file's value columns and the TensorBoard tags they hold.
pub const BASELINE_COLUMNS: [(&str, &str); 5] = [
    ("loss_train", tags::LOSS_TRAIN),
    ("loss_valid", tags::LOSS_VALID),
    ("rmse_u10m_valid", tags::RMSE_U10M_VALID),
    ("learning_rate", tags::LEARNING_RATE),
    ("avg_iters_per_sec", tags::ITERS_PER_SEC),
];

const SECONDS_PER_HOUR: f64 = 3600.0;

/// One series per value column, with wall times in seconds from the run's start (so the
/// baseline starts at 0 on the relative-time axis). Every bad cell is reported at once.
pub fn parse_baseline(text: &str) -> Result<Vec<Series>, Error> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').map(str::trim).collect();
    let mut problems = Problems::default();
    let position = |name: &str| header.iter().position(|h| *h == name);
    let (step_at, hours_at) = (position("step"), position("wall_hours"));
    for (name, at) in [("step", step_at), ("wall_hours", hours_at)] {
        if at.is_none() {
            problems.push("baseline", format!("the header has no `{name}` column"));
        }
    }
    let mut series: Vec<(usize, Series)> = Vec::new();
    for (at, name) in header.iter().enumerate().filter(|(at, _)| Some(*at) != step_at && Some(*at) != hours_at) {
        match BASELINE_COLUMNS.iter().find(|(column, _)| column == name) {
            Some((_, tag)) => series.push((at, Series { tag: (*tag).to_owned(), buckets: Vec::new() })),
            None => problems.push("baseline", format!("unknown column `{name}`")),
        }
    }
    let (Some(step_at), Some(hours_at)) = (step_at, hours_at) else {
        return Err(Error::Invalid(problems));
    };
    for (row, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let cell = |at: usize| cells.get(at).copied().unwrap_or_default();
        let line_no = row + 2;
        let step = cell(step_at).parse::<u64>();
        let hours = cell(hours_at).parse::<f64>();
        let (Ok(step), Ok(hours)) = (step, hours) else {
            problems.push("baseline", format!("line {line_no}: step and wall_hours must be numbers"));
            continue;
        };
        for (at, series) in &mut series {
            match cell(*at) {
                "" => {}
                text => match text.parse::<f64>() {
                    Ok(value) => series.buckets.push(point(step, hours * SECONDS_PER_HOUR, value)),
                    Err(_) => problems.push("baseline", format!("line {line_no}: `{text}` is not a number")),
                },
            }
        }
    }
    problems.into_result(series.into_iter().map(|(_, s)| s).collect())
}

fn point(step: u64, wall: f64, value: f64) -> Bucket {
    Bucket { first_step: step, last_step: step, first_wall: wall, last_wall: wall, epoch: 0, min: value, max: value, last: value, count: 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../../static/reference/baseline-base-1gpu.csv");

    #[test]
    fn the_shipped_baseline_has_the_tutorials_eleven_epochs() {
        let series = parse_baseline(SHIPPED).unwrap();
        let tags: Vec<&str> = series.iter().map(|s| s.tag.as_str()).collect();
        assert_eq!(tags, BASELINE_COLUMNS.map(|(_, tag)| tag));
        let valid = &series[1].buckets;
        assert_eq!(valid.len(), 11);
        // Reference §9: the last logged point, step 23720 after 22.16 hours.
        let last = valid.last().unwrap();
        assert_eq!((last.last_step, last.last), (23_720, 0.120845));
        assert!((last.last_wall - 22.16 * 3600.0).abs() < 1e-6);
        // No learning rate was logged at step 0.
        assert_eq!(series[3].buckets.len(), 10);
        assert_eq!(series[3].buckets[0].last_step, 2372);
    }

    #[test]
    fn bad_files_report_every_problem() {
        let err = parse_baseline("step,hours,loss\n1,2,3\n").unwrap_err();
        let messages: Vec<String> = err.problems().0.into_iter().map(|p| p.message).collect();
        assert_eq!(messages, ["the header has no `wall_hours` column", "unknown column `hours`", "unknown column `loss`"]);
        let err = parse_baseline("step,wall_hours,loss_train\nx,1,2\n3,1,oops\n").unwrap_err();
        let messages: Vec<String> = err.problems().0.into_iter().map(|p| p.message).collect();
        assert_eq!(messages, ["line 2: step and wall_hours must be numbers", "line 3: `oops` is not a number"]);
    }
}
