//! Wall-clock time as the run records store it, and the readable UTC stamps run ids start with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (what every timestamp in a run record is).
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// `YYYYMMDD-HHMMSS` in UTC for `secs` since the Unix epoch: run ids sort by creation time and
/// say when a run was made.
pub fn compact_utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}{m:02}{d:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_match_known_dates() {
        assert_eq!(compact_utc(0), "19700101-000000");
        // 2000-02-29 12:34:56 UTC, a leap day in a century leap year.
        assert_eq!(compact_utc(951_827_696), "20000229-123456");
        // 2024-12-31 23:59:59 UTC.
        assert_eq!(compact_utc(1_735_689_599), "20241231-235959");
    }
}
