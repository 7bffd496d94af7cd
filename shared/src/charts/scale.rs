//! Mapping data values onto a chart's extent, linearly or logarithmically. A log scale is the
//! natural view of a loss that falls by orders of magnitude (the baseline goes 1.08 → 0.12).

/// A value range `[lo, hi]` (with `lo < hi`) and how it maps onto `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Scale {
    /// The range of `values` that can be drawn: finite ones, and positive ones on a log scale.
    /// `None` when there is no such value. A single value gets a range around it, so a flat
    /// line is drawn in the middle rather than on an edge.
    pub fn fit(values: impl IntoIterator<Item = f64>, log: bool) -> Option<Scale> {
        let usable = values.into_iter().filter(|v| v.is_finite() && (!log || *v > 0.0));
        let (lo, hi) = usable.fold(None, |range: Option<(f64, f64)>, v| match range {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })?;
        Some(Scale::new(lo, hi, log))
    }

    /// The scale over `[lo, hi]`; an empty range is widened around its value.
    pub fn new(lo: f64, hi: f64, log: bool) -> Scale {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        if lo < hi {
            return Scale { lo, hi, log };
        }
        if log {
            Scale { lo: lo / 2.0, hi: hi * 2.0, log }
        } else {
            let half = if lo == 0.0 { 1.0 } else { lo.abs() * 0.5 };
            Scale { lo: lo - half, hi: hi + half, log }
        }
    }

    /// The same scale with a margin of `fraction` of the range on both sides (in log space on
    /// a log scale), so curves do not touch the frame.
    pub fn padded(self, fraction: f64) -> Scale {
        if self.log {
            let (lo, hi) = (self.lo.log10(), self.hi.log10());
            let pad = (hi - lo) * fraction;
            Scale { lo: 10f64.powf(lo - pad), hi: 10f64.powf(hi + pad), log: true }
        } else {
            let pad = (self.hi - self.lo) * fraction;
            Scale { lo: self.lo - pad, hi: self.hi + pad, log: false }
        }
    }

    pub fn lo(&self) -> f64 {
        self.lo
    }

    pub fn hi(&self) -> f64 {
        self.hi
    }

    pub fn is_log(&self) -> bool {
        self.log
    }

    /// Where `value` falls: 0 at `lo`, 1 at `hi` (outside for values outside the range).
    /// `None` for a value the scale cannot show (non-finite, or not positive on a log scale).
    pub fn unit(&self, value: f64) -> Option<f64> {
        if !value.is_finite() || (self.log && value <= 0.0) {
            return None;
        }
        Some(if self.log {
            (value.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (value - self.lo) / (self.hi - self.lo)
        })
    }

    /// The value at `unit` (the inverse of [`Scale::unit`]), for read-outs under the pointer.
    pub fn value_at(&self, unit: f64) -> f64 {
        if self.log {
            10f64.powf(self.lo.log10() + unit * (self.hi.log10() - self.lo.log10()))
        } else {
            self.lo + unit * (self.hi - self.lo)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_the_drawable_values_only() {
        let values = [0.5, f64::NAN, 2.0, f64::INFINITY, -1.0];
        let linear = Scale::fit(values, false).unwrap();
        assert_eq!((linear.lo(), linear.hi()), (-1.0, 2.0));
        let log = Scale::fit(values, true).unwrap();
        assert_eq!((log.lo(), log.hi()), (0.5, 2.0));
        assert_eq!(Scale::fit([f64::NAN, -2.0, 0.0], true), None);
        assert_eq!(Scale::fit(std::iter::empty(), false), None);
    }

    #[test]
    fn maps_linearly_or_by_decades() {
        let linear = Scale::new(0.0, 4.0, false);
        assert_eq!(linear.unit(1.0), Some(0.25));
        assert_eq!(linear.value_at(0.25), 1.0);
        let log = Scale::new(0.01, 1.0, true);
        assert_eq!(log.unit(0.1), Some(0.5));
        assert!((log.value_at(0.5) - 0.1).abs() < 1e-12);
        assert_eq!(log.unit(0.0), None);
        assert_eq!(linear.unit(f64::NAN), None);
    }

    #[test]
    fn a_single_value_gets_a_range_around_it() {
        let flat = Scale::fit([3.0, 3.0], false).unwrap();
        assert!(flat.lo() < 3.0 && flat.hi() > 3.0);
        assert_eq!(flat.unit(3.0), Some(0.5));
        let zero = Scale::new(0.0, 0.0, false);
        assert_eq!(zero.unit(0.0), Some(0.5));
        let flat_log = Scale::fit([0.1], true).unwrap();
        assert!((flat_log.unit(0.1).unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn padding_widens_both_sides_equally() {
        let padded = Scale::new(0.0, 10.0, false).padded(0.1);
        assert_eq!((padded.lo(), padded.hi()), (-1.0, 11.0));
        let padded_log = Scale::new(1.0, 100.0, true).padded(0.5);
        assert!((padded_log.lo() - 0.1).abs() < 1e-12 && (padded_log.hi() - 1000.0).abs() < 1e-9);
        assert_eq!(Scale::new(5.0, 1.0, false), Scale::new(1.0, 5.0, false));
    }
}
