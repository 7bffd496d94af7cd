//! The latitude-longitude grid: row j of H rows sits at latitude `90 − j·180/(H−1)`.

/// The latitude of row `j` of `h` rows, in degrees (+90 at the top row, −90 at the bottom).
pub fn latitude(j: usize, h: usize) -> f64 {
    if h > 1 { 90.0 - j as f64 * 180.0 / (h - 1) as f64 } else { 0.0 }
}

/// Latitude weights of the H rows: `w(j) = H·cos(lat(j)) / Σ cos(lat)`, so the weights
/// average to 1 and a row counts by the area it covers. π is 3.1416 as in the tutorial's
/// code, which keeps the polar rows' weights a hair below zero.
pub fn latitude_weights(h: usize) -> Vec<f32> {
    #[allow(clippy::approx_constant)] // the tutorial's rounded π, on purpose
    const PI: f64 = 3.1416;
    let cos: Vec<f64> = (0..h).map(|j| (PI / 180.0 * latitude(j, h)).cos()).collect();
    let sum: f64 = cos.iter().sum();
    cos.iter().map(|c| (h as f64 * c / sum) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::approx_constant)] // 3.1416/2 and 3.1416/4: the tutorial's rounded π
    fn latitude_weights_average_to_one_and_favour_the_equator() {
        let w = latitude_weights(5);
        // lat = 90, 45, 0, -45, -90; cos(3.1416/180·lat) computed by hand.
        let cos = [(1.5708f64).cos(), (0.7854f64).cos(), 1.0, (0.7854f64).cos(), (1.5708f64).cos()];
        let sum: f64 = cos.iter().sum();
        for (wi, ci) in w.iter().zip(cos) {
            assert!((f64::from(*wi) - 5.0 * ci / sum).abs() < 1e-6);
        }
        assert!((w.iter().map(|&x| f64::from(x)).sum::<f64>() - 5.0).abs() < 1e-5);
        // π = 3.1416 overshoots π/2 at the poles: their weight is a tiny negative number.
        assert!(w[0] < 0.0 && w[0] > -1e-4, "polar row weight {}", w[0]);
        assert_eq!(latitude(2, 5), 0.0);
    }
}
