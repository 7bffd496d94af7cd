//! How far a run has come and how long it has left, from its own points: the step it stops at
//! (`Run/Steps`, which the trainer writes as it starts) and the steps it has measured since;
//! before the first measured step, from the step time predicted at launch. A run's log says
//! the same only once an epoch, which on a big run is minutes apart.

use scalebook_shared::metrics::tags;
use scalebook_shared::protocol::Series;

/// A run's progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Steps taken.
    pub step: u64,
    /// The step the run stops at.
    pub total: u64,
    /// Seconds left at the pace measured since the run (or its resumption) started, or until
    /// a step has been measured at the predicted pace; `None` when neither is known.
    pub left_s: Option<f64>,
    /// Whether `left_s` comes from the prediction (no step measured yet).
    pub predicted: bool,
}

impl Progress {
    /// `series`' progress, or `None` before the run has said where it stops. `predicted_step_s`
    /// is the step time the run was predicted at (its `prediction.json`), if it has one.
    pub fn of(series: &[Series], predicted_step_s: Option<f64>) -> Option<Progress> {
        let find = |tag: &str| series.iter().find(|s| s.tag == tag).and_then(|s| s.buckets.last());
        let plan = find(tags::run::STEPS)?;
        let total = plan.last.max(0.0) as u64;
        let (start_step, start_wall) = (plan.last_step, plan.last_wall);
        let Some(done) = find(tags::step::SAMPLES_PER_SEC).filter(|b| b.last_step > start_step) else {
            let step = start_step.min(total);
            let left_s = predicted_step_s.filter(|s| s.is_finite() && *s > 0.0).map(|s| s * total.saturating_sub(step) as f64);
            return Some(Progress { step, total, left_s, predicted: left_s.is_some() });
        };
        let step = done.last_step.min(total);
        let elapsed = done.last_wall - start_wall;
        let per_step = elapsed / (done.last_step - start_step) as f64;
        let left_s = (elapsed > 0.0).then(|| per_step * total.saturating_sub(step) as f64);
        Some(Progress { step, total, left_s, predicted: false })
    }

    /// The part done, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 { 1.0 } else { self.step as f64 / self.total as f64 }
    }

    /// `step 120 of 400`, with the time left while the run goes (`running`).
    pub fn text(&self, running: bool) -> String {
        let steps = format!("step {} of {}", self.step, self.total);
        match (running, self.left_s) {
            (false, _) => steps,
            (true, None) => format!("{steps}, time left after the first step"),
            (true, Some(left)) if self.predicted => {
                format!("{steps}, about {} left as predicted (measured from the first step)", duration(left))
            }
            (true, Some(left)) => format!("{steps}, about {} left", duration(left)),
        }
    }
}

/// A duration as people say it: `45 s`, `3 min 20 s`, `2 h 05 min`.
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::metrics::MetricPoint;
    use scalebook_shared::metrics::series;

    use super::*;

    fn point(step: u64, wall: f64, tag: &str, value: f64) -> MetricPoint {
        MetricPoint { step, epoch: 1, wall, tag: tag.into(), value }
    }

    /// A run that said at `start` (step `from`) it stops at `total`, and measured `steps` steps
    /// a second each after it.
    fn run(from: u64, total: u64, steps: u64) -> Vec<Series> {
        let mut points = vec![point(from, 100.0, tags::run::STEPS, total as f64)];
        points.extend((1..=steps).map(|k| point(from + k, 100.0 + k as f64, tags::step::SAMPLES_PER_SEC, 16.0)));
        series(&points, 50)
    }

    #[test]
    fn the_time_left_is_the_pace_so_far_times_the_steps_to_go() {
        let progress = Progress::of(&run(0, 400, 100), Some(9.0)).unwrap();
        assert_eq!((progress.step, progress.total), (100, 400));
        assert_eq!(progress.left_s, Some(300.0), "measured steps take over from the prediction");
        assert!(!progress.predicted);
        assert_eq!(progress.fraction(), 0.25);
        assert_eq!(progress.text(true), "step 100 of 400, about 5 min 00 s left");
        assert_eq!(progress.text(false), "step 100 of 400");
    }

    #[test]
    fn before_its_first_step_a_run_knows_its_length_and_its_predicted_pace() {
        let progress = Progress::of(&run(0, 400, 0), None).unwrap();
        assert_eq!(progress, Progress { step: 0, total: 400, left_s: None, predicted: false });
        assert_eq!(progress.text(true), "step 0 of 400, time left after the first step");
        let progress = Progress::of(&run(0, 400, 0), Some(0.5)).unwrap();
        assert_eq!(progress, Progress { step: 0, total: 400, left_s: Some(200.0), predicted: true });
        assert_eq!(progress.text(true), "step 0 of 400, about 3 min 20 s left as predicted (measured from the first step)");
        assert_eq!(Progress::of(&[], Some(0.5)), None, "no Run/Steps yet: nothing to show");
    }

    #[test]
    fn a_resumed_run_is_timed_from_where_it_resumed() {
        // Stopped after epoch 1 (200 steps taken at some old pace), resumed at t = 100 s.
        let mut points = vec![point(0, 0.0, tags::run::STEPS, 200.0)];
        points.extend((1..=200).map(|k| point(k, k as f64 * 0.1, tags::step::SAMPLES_PER_SEC, 16.0)));
        points.push(point(200, 100.0, tags::run::STEPS, 400.0));
        points.extend((201..=250).map(|k| point(k, 100.0 + (k - 200) as f64 * 2.0, tags::step::SAMPLES_PER_SEC, 8.0)));
        let progress = Progress::of(&series(&points, 1000), None).unwrap();
        assert_eq!((progress.step, progress.total), (250, 400));
        assert_eq!(progress.left_s, Some(300.0), "150 steps at the resumed run's 2 s a step");
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(44.6), "45 s");
        assert_eq!(duration(200.0), "3 min 20 s");
        assert_eq!(duration(7500.0), "2 h 05 min");
        assert_eq!(duration(-3.0), "0 s");
    }
}
