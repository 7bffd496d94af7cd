//! Times as this browser's clock shows them (the time zone is the browser's to know).

use scalebook_shared::charts::format_clock;

/// A moment (seconds since the Unix epoch) as this browser's clock showed it: `14:05:09`.
pub fn local_clock(unix_seconds: f64) -> String {
    format_clock(unix_seconds, -(js_sys::Date::new_0().get_timezone_offset() as i32))
}
