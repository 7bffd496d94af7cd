//! Wall-clock time as the run records store it, and the readable UTC stamps run ids start with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (what every timestamp in a run record is).
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// `YYYYMMDD-HHMMSS` in UTC for `secs` since the Unix epoch: run ids sort by creation time and
/// say when a run was made.
pub fn compact_utc(secs: u64) -> String {
    const COMPACT: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    let at = i64::try_from(secs).ok().and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok());
    at.and_then(|t| t.format(COMPACT).ok()).unwrap_or_else(|| "00000000-000000".to_owned())
}

/// `YYYY-MM-DD HH:MM UTC` for `secs` since the Unix epoch, as a person reads a time.
pub fn readable_utc(secs: u64) -> String {
    const READABLE: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute] UTC");
    let at = i64::try_from(secs).ok().and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok());
    at.and_then(|t| t.format(READABLE).ok()).unwrap_or_else(|| "an unknown time".to_owned())
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
        assert_eq!(readable_utc(1_735_689_599), "2024-12-31 23:59 UTC");
    }
}
