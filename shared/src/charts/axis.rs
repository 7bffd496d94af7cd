//! The three x axes TensorBoard offers. The tutorial asks learners to switch to relative time
//! to compare batch sizes: a bigger batch takes fewer steps, so only time is a fair axis.

use serde::{Deserialize, Serialize};

use crate::metrics::Bucket;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XAxis {
    /// Optimizer steps.
    #[default]
    Step,
    /// Seconds since the run's first point.
    Relative,
    /// Seconds since the Unix epoch.
    Wall,
}

impl XAxis {
    pub const ALL: [XAxis; 3] = [XAxis::Step, XAxis::Relative, XAxis::Wall];

    pub const fn name(self) -> &'static str {
        match self {
            XAxis::Step => "step",
            XAxis::Relative => "relative",
            XAxis::Wall => "wall",
        }
    }

    pub const fn label(self) -> &'static str {
        match self {
            XAxis::Step => "step",
            XAxis::Relative => "relative time",
            XAxis::Wall => "wall time",
        }
    }

    pub fn from_name(name: &str) -> Option<XAxis> {
        XAxis::ALL.into_iter().find(|axis| axis.name() == name)
    }

    /// Where `bucket` sits on this axis (at its last point), for a run whose first point was
    /// at `start_wall`.
    pub fn x_of(self, bucket: &Bucket, start_wall: f64) -> f64 {
        match self {
            // Steps stay far below 2^53, so the conversion is exact.
            XAxis::Step => bucket.last_step as f64,
            XAxis::Relative => bucket.last_wall - start_wall,
            XAxis::Wall => bucket.last_wall,
        }
    }
}

/// A duration as people read it on an axis: `45 s`, `12.5 s`, `3m 05s`, `2h 07m`, `3d 4h`.
pub fn format_duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return seconds.to_string();
    }
    let sign = if seconds < 0.0 { "-" } else { "" };
    let s = seconds.abs();
    // Whole seconds below 2^53 convert exactly; this is display rounding.
    let whole = s.round() as u64;
    let text = if s < 10.0 && s.fract() != 0.0 {
        format!("{:.1} s", s)
    } else if whole < 60 {
        format!("{whole} s")
    } else if whole < 3600 {
        format!("{}m {:02}s", whole / 60, whole % 60)
    } else if whole < 86_400 {
        format!("{}h {:02}m", whole / 3600, whole % 3600 / 60)
    } else {
        format!("{}d {}h", whole / 86_400, whole % 86_400 / 3600)
    };
    format!("{sign}{text}")
}

/// A Unix time as a clock time `HH:MM:SS`, shifted by `offset_minutes` east of UTC (the
/// browser passes its time zone's offset; this crate has no clock or zone database).
pub fn format_clock(unix_seconds: f64, offset_minutes: i32) -> String {
    if !unix_seconds.is_finite() {
        return unix_seconds.to_string();
    }
    let local = unix_seconds.floor() as i64 + i64::from(offset_minutes) * 60;
    let of_day = local.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", of_day / 3600, of_day % 3600 / 60, of_day % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(step: u64, wall: f64) -> Bucket {
        Bucket {
            first_step: step,
            last_step: step,
            first_wall: wall,
            last_wall: wall,
            epoch: 1,
            min: 0.5,
            max: 0.5,
            last: 0.5,
            count: 1,
            non_finite: 0,
        }
    }

    #[test]
    fn each_axis_reads_its_own_coordinate() {
        let b = bucket(40, 1_000_123.5);
        assert_eq!(XAxis::Step.x_of(&b, 1_000_000.0), 40.0);
        assert_eq!(XAxis::Relative.x_of(&b, 1_000_000.0), 123.5);
        assert_eq!(XAxis::Wall.x_of(&b, 1_000_000.0), 1_000_123.5);
        for axis in XAxis::ALL {
            assert_eq!(XAxis::from_name(axis.name()), Some(axis));
        }
        assert_eq!(XAxis::from_name("epoch"), None);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(0.0), "0 s");
        assert_eq!(format_duration(2.5), "2.5 s");
        assert_eq!(format_duration(45.0), "45 s");
        assert_eq!(format_duration(185.0), "3m 05s");
        // The tutorial's baseline ran 22.16 hours.
        assert_eq!(format_duration(22.16 * 3600.0), "22h 09m");
        assert_eq!(format_duration(3.0 * 86_400.0 + 4.0 * 3600.0), "3d 4h");
        assert_eq!(format_duration(-90.0), "-1m 30s");
    }

    #[test]
    fn clock_times_wrap_at_midnight_in_the_given_zone() {
        // 2023-11-01 11:53:14 UTC, the tutorial baseline's start.
        let start = 1_698_839_594.0;
        assert_eq!(format_clock(start, 0), "11:53:14");
        assert_eq!(format_clock(start, 60), "12:53:14");
        assert_eq!(format_clock(start, -12 * 60), "23:53:14");
    }
}
