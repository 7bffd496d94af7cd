//! The fixed part of the synthetic world: the latitude–longitude grid, its trigonometry, a
//! seeded orography, and the geostrophic balance that turns geopotential into wind.

use std::f64::consts::{FRAC_PI_2, PI, TAU};

use crate::data::rng::Rng;

const EARTH_RADIUS: f64 = 6.371e6;
const EARTH_ROTATION: f64 = 7.292e-5;
/// Highest zonal wavenumber the waves use; the harmonics table holds 0..=this.
pub(super) const MAX_WAVENUMBER: usize = 9;
/// The orography's random stream (years use small keys).
const STREAM_OROGRAPHY: u64 = u64::MAX;
/// Below this latitude the Coriolis parameter is tapered, since geostrophy fails at the equator.
const TROPICS: f64 = 12.0;

pub(super) fn deg(degrees: f64) -> f64 {
    degrees.to_radians()
}

pub(super) fn gauss(x: f64, width: f64) -> f64 {
    (-(x / width).powi(2)).exp()
}

/// What stays the same for a seed: the grid, its trigonometry and the orography.
pub(super) struct Planet {
    pub(super) height: usize,
    pub(super) width: usize,
    /// Latitude of each row and longitude of each column, in radians.
    pub(super) lat: Vec<f64>,
    pub(super) lon: Vec<f64>,
    /// cos(m λ) and sin(m λ) for m = 0..=MAX_WAVENUMBER, row m of width values.
    pub(super) cos_m: Vec<f64>,
    pub(super) sin_m: Vec<f64>,
    /// Orography in metres, H × W.
    pub(super) orography: Vec<f64>,
}

impl Planet {
    pub(super) fn new(seed: u64, height: usize, width: usize) -> Planet {
        // Cell centres, north to south like ERA5; no row sits exactly on a pole.
        let lat: Vec<f64> = (0..height).map(|j| FRAC_PI_2 - (j as f64 + 0.5) * PI / height as f64).collect();
        let lon: Vec<f64> = (0..width).map(|i| i as f64 * TAU / width as f64).collect();
        let harmonic =
            |f: fn(f64) -> f64| -> Vec<f64> { (0..=MAX_WAVENUMBER).flat_map(|m| lon.iter().map(move |&l| f(m as f64 * l))).collect() };
        let (cos_m, sin_m) = (harmonic(f64::cos), harmonic(f64::sin));

        let mut rng = Rng::stream(seed, &[STREAM_OROGRAPHY]);
        let ranges: Vec<[f64; 5]> = (0..10)
            .map(|_| {
                [
                    deg(rng.range(-55.0, 70.0)),
                    rng.range(0.0, TAU),
                    rng.range(800.0, 4000.0),
                    deg(rng.range(3.0, 10.0)),
                    deg(rng.range(5.0, 25.0)),
                ]
            })
            .collect();
        let mut orography = vec![0.0; height * width];
        for (j, &phi) in lat.iter().enumerate() {
            for (i, &lambda) in lon.iter().enumerate() {
                orography[j * width + i] = ranges
                    .iter()
                    .map(|&[lat0, lon0, top, lat_width, lon_width]| {
                        let dlon = (lambda - lon0 + PI).rem_euclid(TAU) - PI;
                        top * gauss(phi - lat0, lat_width) * gauss(dlon, lon_width)
                    })
                    .sum();
            }
        }
        Planet { height, width, lat, lon, cos_m, sin_m, orography }
    }
}

/// Geostrophic wind u = −(1/f) ∂Φ/∂y, v = (1/f) ∂Φ/∂x from centred differences (one-sided
/// at the first and last rows, periodic in longitude). 1/f is tapered to 0 at the equator,
/// where geostrophy breaks down, and the zonal spacing is floored near the poles.
pub(super) fn geostrophic_wind(planet: &Planet, z: &[f64], mut write: impl FnMut(usize, f64, f64)) {
    let (h, w) = (planet.height, planet.width);
    let dy = EARTH_RADIUS * PI / h as f64;
    for (j, &phi) in planet.lat.iter().enumerate() {
        let (sin_phi, cos_phi) = phi.sin_cos();
        let inv_f = sin_phi / (sin_phi * sin_phi + deg(TROPICS).sin().powi(2)) / (2.0 * EARTH_ROTATION);
        let dx = EARTH_RADIUS * cos_phi.max(deg(80.0).cos()) * TAU / w as f64;
        let (north, south) = (j.saturating_sub(1), (j + 1).min(h - 1));
        let rows_apart = (south - north) as f64;
        for i in 0..w {
            let (east, west) = ((i + 1) % w, (i + w - 1) % w);
            let dz_dy = (z[north * w + i] - z[south * w + i]) / (rows_apart * dy);
            let dz_dx = (z[j * w + east] - z[j * w + west]) / (2.0 * dx);
            write(j * w + i, -inv_f * dz_dy, inv_f * dz_dx);
        }
    }
}

/// sign(x), smoothed over |x| ≲ `width`.
pub(super) fn smooth_sign(x: f64, width: f64) -> f64 {
    x / (x * x + width * width).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn winds(planet: &Planet, z: &[f64]) -> Vec<(f64, f64)> {
        let mut winds = vec![(0.0, 0.0); z.len()];
        geostrophic_wind(planet, z, |k, u, v| winds[k] = (u, v));
        winds
    }

    /// Height falling towards the north pole everywhere: westerlies in the north and
    /// easterlies in the south (f changes sign), the textbook u = −(1/f) ∂Φ/∂y at mid-latitudes.
    #[test]
    fn a_poleward_gradient_gives_zonal_wind() {
        let planet = Planet::new(0, 18, 36);
        let slope = 1.0e4; // m²/s² per radian of latitude
        let z: Vec<f64> = (0..18 * 36).map(|k| -slope * planet.lat[k / 36]).collect();
        for (k, (u, v)) in winds(&planet, &z).into_iter().enumerate() {
            let phi = planet.lat[k / 36];
            assert_eq!(v, 0.0);
            assert_eq!(u.signum(), phi.signum(), "row {}", k / 36);
            if (40.0..50.0).contains(&phi.to_degrees().abs()) {
                let textbook = slope / EARTH_RADIUS / (2.0 * EARTH_ROTATION * phi.sin());
                assert!((0.85..1.0).contains(&(u / textbook)), "{} at {phi}", u / textbook);
            }
        }
    }

    /// Height rising to the east gives a southerly in the north and a northerly in the south.
    #[test]
    fn a_zonal_gradient_gives_meridional_wind() {
        let planet = Planet::new(0, 18, 36);
        let z: Vec<f64> = (0..18 * 36).map(|k| 100.0 * planet.lon[k % 36].sin()).collect();
        for (k, (u, v)) in winds(&planet, &z).into_iter().enumerate() {
            let (phi, lambda) = (planet.lat[k / 36], planet.lon[k % 36]);
            assert_eq!(u, 0.0);
            if lambda.cos().abs() > 1e-9 {
                assert_eq!(v.signum(), (phi.signum() * lambda.cos()).signum(), "{phi} {lambda}");
            }
        }
    }

    #[test]
    fn orography_is_fixed_by_the_seed_at_any_resolution() {
        let (coarse, fine) = (Planet::new(5, 18, 36), Planet::new(5, 36, 72));
        assert_ne!(coarse.orography, Planet::new(6, 18, 36).orography);
        let peak = coarse.orography.iter().copied().fold(0.0, f64::max);
        assert!((500.0..6000.0).contains(&peak), "highest point {peak} m");
        // The same mountains at double resolution: the fine cell nearest the coarse peak is high.
        let coarse_peak = coarse.orography.iter().position(|&h| h == peak).unwrap();
        let (j, i) = (coarse_peak / 36, coarse_peak % 36);
        let fine_near = fine.orography[(2 * j) * 72 + 2 * i];
        assert!(fine_near > 0.3 * peak, "{fine_near} vs {peak}");
    }
}
