//! A rollout as the maps block draws it: the error of the forecast and of persistence against
//! lead time for one channel, as two lines in a small chart, and the words under its maps.

use scalebook_shared::charts::{format_tick, linear_ticks};
use scalebook_shared::weather::{Lead, MapEntry, Rollout};

pub const WIDTH: f64 = 480.0;
pub const HEIGHT: f64 = 200.0;
/// Room left of the plot for the y ticks, and below it for the x ticks.
pub const MARGIN: f64 = 44.0;

/// The chart of one channel: each line's points and the ticks of both axes.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutChart {
    pub model: Vec<(f64, f64)>,
    pub persistence: Vec<(f64, f64)>,
    /// (position, label) along x (lead hours) and y (RMSE).
    pub x_ticks: Vec<(f64, String)>,
    pub y_ticks: Vec<(f64, String)>,
    pub units: String,
}

impl RolloutChart {
    /// The chart of `channel`, or `None` when the rollout has no error for it.
    pub fn of(rollout: &Rollout, channel: &str) -> Option<RolloutChart> {
        let points: Vec<(u64, f64, f64)> = rollout
            .leads
            .iter()
            .filter_map(|lead| lead.errors.iter().find(|e| e.channel == channel).map(|e| (lead.hours, e.model, e.persistence)))
            .collect();
        let units = rollout.leads.iter().flat_map(|l| &l.errors).find(|e| e.channel == channel)?.units.clone();
        let last = points.last()?.0 as f64;
        let top = points.iter().flat_map(|p| [p.1, p.2]).filter(|v| v.is_finite()).fold(0.0, f64::max);
        let (y_values, y_step) = linear_ticks(0.0, if top > 0.0 { top } else { 1.0 }, 4);
        let y_max = y_values.last().copied().unwrap_or(1.0).max(top);
        let (x_values, x_step) = linear_ticks(0.0, last, 6);
        let x = |hours: f64| MARGIN + hours / last.max(1.0) * (WIDTH - MARGIN - 12.0);
        let y = |value: f64| HEIGHT - MARGIN + 8.0 - value / y_max.max(f64::MIN_POSITIVE) * (HEIGHT - MARGIN - 8.0);
        Some(RolloutChart {
            model: points.iter().map(|p| (x(p.0 as f64), y(p.1))).collect(),
            persistence: points.iter().map(|p| (x(p.0 as f64), y(p.2))).collect(),
            x_ticks: x_values.iter().filter(|&&v| v <= last).map(|&v| (x(v), format_tick(v, x_step))).collect(),
            y_ticks: y_values.iter().map(|&v| (y(v), format_tick(v, y_step))).collect(),
            units,
        })
    }
}

/// An SVG polyline's `points`.
pub fn polyline(points: &[(f64, f64)]) -> String {
    points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect::<Vec<_>>().join(" ")
}

/// The line under a lead's map.
pub fn describe_lead(rollout: &Rollout, lead: &Lead, entry: &MapEntry) -> String {
    let error = lead.errors.iter().find(|e| e.channel == entry.channel);
    let numbers =
        error.map_or_else(String::new, |e| format!(": RMSE {:.3} {} (persistence {:.3} {})", e.model, e.units, e.persistence, e.units));
    let step = rollout.leads.iter().position(|l| l.hours == lead.hours).map_or(0, |i| i + 1);
    format!(
        "{} {} h ahead (step {step} of {}), forecast from validation sample {} by the model of epoch {}{numbers}",
        entry.channel,
        lead.hours,
        rollout.leads.len(),
        entry.sample,
        rollout.epoch
    )
}

#[cfg(test)]
mod tests {
    use scalebook_shared::weather::LeadError;

    use super::*;

    fn rollout() -> Rollout {
        let lead = |hours, model, persistence| Lead {
            hours,
            errors: vec![LeadError { channel: "u10".into(), units: "m/s".into(), model, persistence }],
            maps: Vec::new(),
        };
        Rollout { epoch: 4, step: 64, starts: vec![0, 1], leads: vec![lead(6, 1.0, 2.0), lead(12, 1.5, 2.5), lead(18, 2.0, 3.0)] }
    }

    #[test]
    fn the_chart_runs_from_the_first_lead_to_the_last_with_both_lines() {
        let chart = RolloutChart::of(&rollout(), "u10").unwrap();
        assert_eq!(chart.model.len(), 3);
        assert_eq!(chart.persistence.len(), 3);
        assert_eq!(chart.units, "m/s");
        // Later leads further right; larger errors higher up (smaller y).
        assert!(chart.model.windows(2).all(|w| w[1].0 > w[0].0 && w[1].1 < w[0].1));
        assert!(chart.persistence.iter().zip(&chart.model).all(|(p, m)| p.1 < m.1));
        assert_eq!(chart.model.last().unwrap().0, WIDTH - 12.0);
        assert_eq!(chart.x_ticks.first().map(|(x, t)| (*x, t.as_str())), Some((MARGIN, "0")));
        assert!(chart.x_ticks.iter().all(|(x, _)| *x <= WIDTH - 12.0) && chart.y_ticks.iter().any(|(_, t)| t == "0"));
        assert!(RolloutChart::of(&rollout(), "t2m").is_none());
        assert_eq!(polyline(&[(1.0, 2.0), (3.25, 4.0)]), "1.0,2.0 3.2,4.0");
        let r = rollout();
        let entry = MapEntry::draw(4, 64, 0, 5, [&[1.0], &[2.0], &[3.0]], 1, 1).0;
        let mut lead = r.leads[1].clone();
        lead.errors[0].channel = entry.channel.clone();
        assert_eq!(
            describe_lead(&r, &lead, &entry),
            format!(
                "{} 12 h ahead (step 2 of 3), forecast from validation sample 0 by the model of epoch 4: RMSE 1.500 m/s (persistence 2.500 m/s)",
                entry.channel
            )
        );
    }
}
