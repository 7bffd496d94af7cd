//! The visible part of a timeline: zoom around a point, pan, always kept inside the trace; and
//! durations and axis ticks in the unit a reader wants (ns, µs, ms, s).

use crate::charts::linear_ticks;

/// The narrowest window (µs): a tenth of a microsecond still shows a GPU kernel's width.
const MIN_WIDTH: f64 = 0.1;

/// A span of time in µs, `start < end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start: f64,
    pub end: f64,
}

impl Window {
    /// `[start, end]`, at least [`MIN_WIDTH`] wide (a non-finite bound reads as 0).
    pub fn new(start: f64, end: f64) -> Window {
        let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
        let (start, end) = (finite(start.min(end)), finite(start.max(end)));
        Window { start, end: end.max(start + MIN_WIDTH) }
    }

    pub fn width(&self) -> f64 {
        self.end - self.start
    }

    /// Where `t` lies, as a fraction of the width from the left edge.
    pub fn fraction(&self, t: f64) -> f64 {
        (t - self.start) / self.width()
    }

    /// The time at `fraction` of the width from the left edge.
    pub fn at(&self, fraction: f64) -> f64 {
        self.start + fraction * self.width()
    }

    /// Zoomed by `factor` (below 1 zooms in) so that the time at `anchor` (a fraction of the
    /// width: where the pointer is) stays where it is, and kept inside `bounds`.
    pub fn zoom(self, factor: f64, anchor: f64, bounds: Window) -> Window {
        let factor = if factor.is_finite() && factor > 0.0 { factor } else { 1.0 };
        let anchor = if anchor.is_finite() { anchor.clamp(0.0, 1.0) } else { 0.5 };
        let pivot = self.at(anchor);
        let width = (self.width() * factor).max(MIN_WIDTH);
        Window::new(pivot - anchor * width, pivot + (1.0 - anchor) * width).inside(bounds)
    }

    /// Moved by `fraction` of its width (positive: later), kept inside `bounds`.
    pub fn pan(self, fraction: f64, bounds: Window) -> Window {
        let shift = if fraction.is_finite() { fraction * self.width() } else { 0.0 };
        Window { start: self.start + shift, end: self.end + shift }.inside(bounds)
    }

    /// Moved (and narrowed if need be) so that it lies within `bounds`.
    pub fn inside(self, bounds: Window) -> Window {
        let width = self.width().clamp(MIN_WIDTH, bounds.width().max(MIN_WIDTH));
        let start = self.start.clamp(bounds.start, (bounds.end - width).max(bounds.start));
        Window { start, end: start + width }
    }
}

/// A duration for a reader: three significant digits in the unit that suits it
/// (`850 ns`, `12.5 µs`, `3.20 ms`, `1.25 s`).
pub fn format_micros(us: f64) -> String {
    if !us.is_finite() {
        return us.to_string();
    }
    let (value, unit) = unit_of(us.abs());
    let decimals = match value {
        _ if unit == "ns" || value == 0.0 || value >= 100.0 => 0,
        _ if value >= 10.0 => 1,
        _ => 2,
    };
    format!("{:.decimals$} {unit}", us.signum() * value)
}

/// `us` in the largest unit in which it is at least 1 (ns below a microsecond).
fn unit_of(us: f64) -> (f64, &'static str) {
    if us == 0.0 {
        (0.0, "µs")
    } else if us < 1.0 {
        (us * 1000.0, "ns")
    } else if us < 1e3 {
        (us, "µs")
    } else if us < 1e6 {
        (us / 1e3, "ms")
    } else {
        (us / 1e6, "s")
    }
}

/// About `count` ticks across `window` at round times, each with its label; all labels share
/// one unit (that of the window's far end) and as many decimals as the tick step needs.
pub fn micros_ticks(window: Window, count: usize) -> Vec<(f64, String)> {
    let (ticks, step) = linear_ticks(window.start, window.end, count);
    let scale = match unit_of(window.end.abs().max(window.start.abs())).1 {
        "ns" => (1e-3, "ns"),
        "µs" => (1.0, "µs"),
        "ms" => (1e3, "ms"),
        _ => (1e6, "s"),
    };
    let step_in_unit = step / scale.0;
    let decimals = if step_in_unit > 0.0 && step_in_unit < 1.0 { (-step_in_unit.log10() - 1e-9).ceil() as usize } else { 0 };
    let decimals = decimals.min(6);
    ticks.into_iter().map(|t| (t, format!("{:.decimals$} {}", t / scale.0, scale.1))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_their_unit() {
        let cases = [(0.85, "850 ns"), (12.5, "12.5 µs"), (3.2, "3.20 µs"), (3200.0, "3.20 ms"), (1.25e6, "1.25 s"), (250.0, "250 µs")];
        for (us, text) in cases {
            assert_eq!(format_micros(us), text);
        }
        assert_eq!(format_micros(0.0), "0 µs");
        assert_eq!(format_micros(-1500.0), "-1.50 ms");
    }

    #[test]
    fn zoom_keeps_the_pointer_still_and_the_window_inside() {
        let bounds = Window::new(0.0, 1000.0);
        let zoomed = bounds.zoom(0.5, 0.25, bounds);
        assert_eq!(zoomed, Window { start: 125.0, end: 625.0 });
        assert_eq!(zoomed.at(0.25), bounds.at(0.25));
        // Zooming out past the whole trace gives the whole trace.
        assert_eq!(zoomed.zoom(10.0, 0.5, bounds), bounds);
        // Zooming in stops at the narrowest window.
        let tight = (0..200).fold(bounds, |w, _| w.zoom(0.5, 0.5, bounds));
        assert!((tight.width() - MIN_WIDTH).abs() < 1e-9 && tight.start > 499.0 && tight.end < 501.0, "{tight:?}");
        // Bad input changes nothing.
        assert_eq!(zoomed.zoom(f64::NAN, f64::INFINITY, bounds), zoomed);
    }

    #[test]
    fn pan_stops_at_the_ends() {
        let bounds = Window::new(0.0, 1000.0);
        let w = Window::new(100.0, 200.0);
        assert_eq!(w.pan(0.5, bounds), Window { start: 150.0, end: 250.0 });
        assert_eq!(w.pan(-5.0, bounds), Window { start: 0.0, end: 100.0 });
        assert_eq!(w.pan(50.0, bounds), Window { start: 900.0, end: 1000.0 });
        let odd = Window::new(5.0, f64::NAN);
        assert!(odd.start == 5.0 && (odd.width() - MIN_WIDTH).abs() < 1e-9, "{odd:?}");
        assert_eq!(Window::new(0.0, 0.0).width(), MIN_WIDTH);
    }

    #[test]
    fn ticks_share_a_unit_and_show_the_step() {
        let ticks = micros_ticks(Window::new(10_000.0, 10_200.0), 4);
        let labels: Vec<&str> = ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["10.00 ms", "10.05 ms", "10.10 ms", "10.15 ms", "10.20 ms"]);
        let labels: Vec<String> = micros_ticks(Window::new(0.0, 3.0e6), 3).into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["0 s", "1 s", "2 s", "3 s"]);
    }
}
