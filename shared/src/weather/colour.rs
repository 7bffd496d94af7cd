//! Colour maps: a sequential one for the fields and a diverging one for errors and signed
//! quantities. Both are drawn here (anchor colours interpolated in RGB), so PNGs, the
//! browser's legends and TensorBoard's images use exactly the same colours.

/// How values map to colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Palette {
    /// Dark blue through teal and green to yellow: lightness grows with the value, so the
    /// order reads in grey too.
    Sequential,
    /// Blue below zero, white at zero, red above: for errors, centred on a symmetric range.
    Diverging,
}

const SEQUENTIAL: [[u8; 3]; 5] = [[38, 20, 82], [40, 90, 140], [30, 150, 135], [120, 200, 80], [250, 230, 40]];
const DIVERGING: [[u8; 3]; 5] = [[35, 70, 160], [140, 180, 225], [247, 247, 247], [235, 145, 115], [180, 25, 40]];

impl Palette {
    /// The colour at `t` in [0, 1] (clamped; NaN draws as the middle colour).
    pub fn colour(self, t: f64) -> [u8; 3] {
        let anchors = match self {
            Palette::Sequential => &SEQUENTIAL,
            Palette::Diverging => &DIVERGING,
        };
        let t = if t.is_nan() { 0.5 } else { t.clamp(0.0, 1.0) };
        let x = t * (anchors.len() - 1) as f64;
        let i = (x.floor() as usize).min(anchors.len() - 2);
        let f = x - i as f64;
        let (a, b) = (anchors[i], anchors[i + 1]);
        std::array::from_fn(|k| (f64::from(a[k]) + (f64::from(b[k]) - f64::from(a[k])) * f).round() as u8)
    }

    /// `n` (at least 2) evenly spaced colours as CSS hex strings, for a legend's gradient.
    pub fn css_stops(self, n: usize) -> Vec<String> {
        let n = n.max(2);
        (0..n)
            .map(|i| {
                let [r, g, b] = self.colour(i as f64 / (n - 1) as f64);
                format!("#{r:02x}{g:02x}{b:02x}")
            })
            .collect()
    }

    /// The name the index file and the browser use.
    pub fn name(self) -> &'static str {
        match self {
            Palette::Sequential => "sequential",
            Palette::Diverging => "diverging",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_middle_are_the_anchors() {
        assert_eq!(Palette::Sequential.colour(0.0), SEQUENTIAL[0]);
        assert_eq!(Palette::Sequential.colour(1.0), SEQUENTIAL[4]);
        assert_eq!(Palette::Diverging.colour(0.5), [247, 247, 247]);
        assert_eq!(Palette::Diverging.colour(-3.0), DIVERGING[0]);
        assert_eq!(Palette::Sequential.css_stops(2), vec!["#261452", "#fae628"]);
    }

    #[test]
    fn sequential_lightness_grows_with_the_value() {
        let luma = |[r, g, b]: [u8; 3]| 0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b);
        let l: Vec<f64> = (0..=20).map(|i| luma(Palette::Sequential.colour(f64::from(i) / 20.0))).collect();
        assert!(l.windows(2).all(|w| w[1] > w[0]), "{l:?}");
    }
}
