//! The tutorial's reference run (config `base` on one A100, ≈22 hours, one point per epoch),
//! drawn behind a learner's curves.
//!
//! Its source is `static/reference/baseline-base-1gpu.csv`: one row per logged step, `step`,
//! `wall_hours` since the start, then one column per scalar; an empty cell is a scalar not
//! logged at that step (the learning rate has no step-0 value). The browser reads it as the
//! tutorial ships it, a TensorBoard event file (`baseline-base-1gpu.tfevents`), made from the
//! CSV by [`baseline_event_file`] with the project's own encoder and read back with its own
//! reader; a test keeps the shipped file equal to what the CSV makes.

use crate::metrics::tags;
use crate::metrics::{Bucket, Series, series};
use crate::tfevents::{self, file_version_record, scalar_record};
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

/// When the tutorial's baseline started (2023-11-01 11:53:14 UTC): the event file's wall times
/// count from here, as the original file's do.
const BASELINE_START: f64 = 1_698_839_594.0;

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

/// The baseline's CSV as an event file: the file-version record at [`BASELINE_START`], then
/// every value row by row, in column order, as `SummaryWriter` would have logged them.
pub fn baseline_event_file(csv: &str) -> Result<Vec<u8>, Error> {
    let mut values: Vec<(u64, usize, f64, &str, f64)> = Vec::new();
    let columns = parse_baseline(csv)?;
    for (column, series) in columns.iter().enumerate() {
        values.extend(series.buckets.iter().map(|b| (b.last_step, column, b.last_wall, series.tag.as_str(), b.last)));
    }
    values.sort_by_key(|&(step, column, ..)| (step, column));
    let mut file = file_version_record(BASELINE_START);
    for (step, _, wall, tag, value) in values {
        file.extend(scalar_record(BASELINE_START + wall, step, tag, value as f32));
    }
    Ok(file)
}

/// The baseline's event file as one series per tag, with wall times in seconds from the run's
/// start (its first event), so it starts at 0 on the relative-time axis.
pub fn parse_baseline_events(bytes: &[u8]) -> Result<Vec<Series>, Error> {
    let contents = tfevents::read(bytes, 0)?;
    let start = contents.events.iter().map(|e| e.wall_time).reduce(f64::min).unwrap_or(0.0);
    let mut points = contents.points();
    for p in &mut points {
        p.wall -= start;
    }
    Ok(series(&points, usize::MAX))
}

fn point(step: u64, wall: f64, value: f64) -> Bucket {
    Bucket {
        first_step: step,
        last_step: step,
        first_wall: wall,
        last_wall: wall,
        epoch: 0,
        min: value,
        max: value,
        last: value,
        count: 1,
        non_finite: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../shipped/baseline-base-1gpu.csv");
    const SHIPPED_EVENTS: &[u8] = include_bytes!("../../shipped/baseline-base-1gpu.tfevents");
    /// Set to rewrite the shipped event file from the CSV instead of comparing.
    const REGENERATE: &str = "SCALEBOOK_REGENERATE_BASELINE";

    #[test]
    fn the_shipped_event_file_is_what_the_csv_makes() {
        let made = baseline_event_file(SHIPPED).unwrap();
        if std::env::var_os(REGENERATE).is_some() {
            let path = format!("{}/../static/reference/baseline-base-1gpu.tfevents", std::env::var("CARGO_MANIFEST_DIR").unwrap());
            std::fs::write(path, &made).unwrap();
        } else {
            assert!(made == SHIPPED_EVENTS, "static/reference/baseline-base-1gpu.tfevents is stale: run this test with {REGENERATE}=1");
        }
    }

    #[test]
    fn the_shipped_baseline_has_the_tutorials_eleven_epochs() {
        let from_csv = parse_baseline(SHIPPED).unwrap();
        let from_events = parse_baseline_events(SHIPPED_EVENTS).unwrap();
        for series in [&from_csv, &from_events] {
            let tags: Vec<&str> = series.iter().map(|s| s.tag.as_str()).collect();
            assert_eq!(tags, BASELINE_COLUMNS.map(|(_, tag)| tag));
            let valid = &series[1].buckets;
            assert_eq!(valid.len(), 11);
            // Reference §9: the last logged point, step 23720 after 22.16 hours.
            let last = valid.last().unwrap();
            assert_eq!(last.last_step, 23_720);
            assert_eq!(last.last, 0.120845);
            assert!((last.last_wall - 22.16 * 3600.0).abs() < 1e-6);
            // No learning rate was logged at step 0.
            assert_eq!(series[3].buckets.len(), 10);
            assert_eq!(series[3].buckets[0].last_step, 2372);
        }
        // The event file holds the CSV's values as float32, as TensorBoard's scalars are, and
        // they read back as the decimals the CSV has.
        for (csv, events) in from_csv.iter().zip(&from_events) {
            for (a, b) in csv.buckets.iter().zip(&events.buckets) {
                assert_eq!((a.last_step, a.last), (b.last_step, b.last));
                assert!((a.last_wall - b.last_wall).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn bad_files_report_every_problem() {
        let err = parse_baseline("step,hours,loss\n1,2,3\n").unwrap_err();
        let messages: Vec<String> = err.problems().0.into_iter().map(|p| p.message).collect();
        assert_eq!(messages, ["the header has no `wall_hours` column", "unknown column `hours`", "unknown column `loss`"]);
        let err = parse_baseline("step,wall_hours,loss_train\nx,1,2\n3,1,oops\n").unwrap_err();
        let messages: Vec<String> = err.problems().0.into_iter().map(|p| p.message).collect();
        assert_eq!(messages, ["line 2: step and wall_hours must be numbers", "line 3: `oops` is not a number"]);
        let err = parse_baseline_events(SHIPPED.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("not a TensorBoard event file"), "{err}");
    }
}
