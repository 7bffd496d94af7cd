//! Numbers as people read them, the same in the page and in the command line.

/// `23832960` → `23,832,960`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 4 / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `x` rounded to `digits` significant digits, the way the tutorial writes its rates
/// (7.0710…e-4 becomes 7.07e-4). Scaling by an exact power of ten and dividing back gives the
/// same double as parsing the rounded decimal.
pub fn round_significant(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // |x| < 10^309, so the exponent fits easily.
    let shift = digits - 1 - x.abs().log10().floor() as i32;
    if shift >= 0 {
        let scale = 10f64.powi(shift);
        (x * scale).round() / scale
    } else {
        let scale = 10f64.powi(-shift);
        (x / scale).round() * scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(23_832_960), "23,832,960");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(0), "0");
    }
}
