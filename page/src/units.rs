//! Numbers as people read them in a table: thousands grouped, bytes and seconds in a unit that
//! keeps them short.

use scalebook_shared::charts::format_number;
pub use scalebook_shared::numbers::thousands;

/// Bytes in decimal units, as bandwidths are given: `1.2 GB`, `25 MB`, `4 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [(f64, &str); 4] = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")];
    // Byte counts are far below 2^53, so the conversion is exact enough for display.
    let value = n as f64;
    match UNITS.iter().find(|(size, _)| value >= *size) {
        Some((size, unit)) => format!("{} {unit}", format_number(value / size)),
        None => format!("{n} B"),
    }
}

/// Seconds in the unit that suits them: `120 µs`, `35.2 ms`, `1.25 s`.
pub fn seconds(s: f64) -> String {
    if s != 0.0 && s.abs() < 1e-3 {
        format!("{} µs", format_number(s * 1e6))
    } else if s != 0.0 && s.abs() < 1.0 {
        format!("{} ms", format_number(s * 1e3))
    } else {
        format!("{} s", format_number(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_pick_their_unit() {
        assert_eq!(bytes(4), "4 B");
        assert_eq!(bytes(25_000_000), "25 MB");
        assert_eq!(bytes(1_400_543_232), "1.401 GB");
        assert_eq!(seconds(0.0352), "35.2 ms");
        assert_eq!(seconds(0.00012), "120 µs");
        assert_eq!(seconds(1.25), "1.25 s");
    }
}
