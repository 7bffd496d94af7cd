//! A cheap synthetic atmosphere with the structure that makes weather forecastable.
//!
//! Three smooth fields drive everything: a streamfunction ψ (pressure waves), a thermal
//! anomaly τ and a moisture anomaly μ. Each is a sum of travelling waves with a finite life
//! cycle: synoptic waves (zonal wavenumbers 4–9, a few days) and planetary waves
//! (wavenumbers 1–3, weeks), drifting east at a speed that peaks at a seasonal jet latitude,
//! with τ and μ a quarter wave ahead of ψ as in growing mid-latitude systems. The 20 ERA5
//! channels are then built with the physics that links them: temperatures from a latitude
//! and season profile plus τ and a diurnal cycle; geopotential stacked level by level with
//! the hypsometric equation (thickness ∝ layer temperature); pressures from z1000 and a
//! fixed orography; winds from geopotential gradients (geostrophic); humidity as a logistic
//! of μ; water vapour from humidity and Clausius–Clapeyron. A little smooth noise each step
//! keeps the future from being a pure function of the present.
//!
//! All geometry is in latitude and longitude, so the same seed gives the same planet at any
//! grid size, and every step is a pure function of (seed, year, step): steps can be computed
//! in any order on any number of threads with identical bytes.

use std::f64::consts::{PI, TAU};

use super::planet::{Planet, deg, gauss, geostrophic_wind, smooth_sign};
use crate::data::rng::Rng;

/// Channel indices, ERA5 order (see [`scalebook_shared::weather::CHANNELS`]).
mod ch {
    pub const U10: usize = 0;
    pub const V10: usize = 1;
    pub const T2M: usize = 2;
    pub const SP: usize = 3;
    pub const MSL: usize = 4;
    pub const T850: usize = 5;
    pub const U1000: usize = 6;
    pub const V1000: usize = 7;
    pub const Z1000: usize = 8;
    pub const U850: usize = 9;
    pub const V850: usize = 10;
    pub const Z850: usize = 11;
    pub const U500: usize = 12;
    pub const V500: usize = 13;
    pub const Z500: usize = 14;
    pub const T500: usize = 15;
    pub const Z50: usize = 16;
    pub const R500: usize = 17;
    pub const R850: usize = 18;
    pub const TCWV: usize = 19;
}

pub(super) const CHANNELS: usize = 20;

const GRAVITY: f64 = 9.81;
const R_DRY: f64 = 287.0;
const LAPSE_RATE: f64 = 0.0065;
const STEPS_PER_DAY: usize = 4;
const SYNOPTIC_SLOTS: u64 = 10;
const PLANETARY_SLOTS: u64 = 4;
/// Coarse grid of the per-step noise (rows × columns), interpolated bilinearly.
const NOISE_GRID: [usize; 2] = [9, 16];
/// Keys that separate the random streams of one seed.
const STREAM_WAVES: u64 = 0;
const STREAM_NOISE: u64 = 1;

/// One travelling wave from birth to death.
#[derive(Debug, Clone)]
struct Wave {
    birth: f64,
    life: f64,
    m: usize,
    lat0: f64,
    lat_width: f64,
    amp: f64,
    phase: f64,
    /// Multiplies the jet's drift speed (planetary waves are slow).
    drift: f64,
    thermal: f64,
    moist: f64,
}

impl Wave {
    fn draw(rng: &mut Rng, planetary: bool, north: bool, birth_fraction: Option<f64>) -> Wave {
        let hemisphere = if north { 1.0 } else { -1.0 };
        let (m, life, lat0, lat_width, amp, drift) = if planetary {
            (
                1 + rng.below(3),
                rng.range(80.0, 200.0),
                rng.range(40.0, 70.0),
                rng.range(15.0, 25.0),
                rng.range(0.3, 0.7),
                rng.range(0.15, 0.35),
            )
        } else {
            (4 + rng.below(6), rng.range(16.0, 48.0), rng.range(28.0, 62.0), rng.range(7.0, 13.0), rng.range(0.5, 1.1), rng.range(0.8, 1.2))
        };
        Wave {
            // The first wave of a slot is already part-way through its life at step 0.
            birth: birth_fraction.map_or(0.0, |fraction| -fraction * life),
            life,
            m: m as usize,
            lat0: hemisphere * deg(lat0),
            lat_width: deg(lat_width),
            amp,
            phase: rng.range(0.0, TAU),
            drift,
            thermal: rng.range(0.7, 1.3),
            moist: rng.range(0.7, 1.3),
        }
    }
}

/// One year of weather: which waves live when. Different years are independent draws.
pub(super) struct Year {
    seed: u64,
    year: u64,
    steps: usize,
    slots: Vec<Vec<Wave>>,
}

impl Year {
    pub(super) fn new(seed: u64, year: u64, steps: usize) -> Year {
        let slots = (0..SYNOPTIC_SLOTS + PLANETARY_SLOTS)
            .map(|slot| {
                let mut rng = Rng::stream(seed, &[year, STREAM_WAVES, slot]);
                let (planetary, north) = (slot >= SYNOPTIC_SLOTS, slot % 2 == 0);
                let first_fraction = rng.uniform();
                let mut waves = vec![Wave::draw(&mut rng, planetary, north, Some(first_fraction))];
                while let Some(last) = waves.last().filter(|wave| wave.birth + wave.life < steps as f64) {
                    let birth = last.birth + last.life;
                    waves.push(Wave { birth, ..Wave::draw(&mut rng, planetary, north, None) });
                }
                waves
            })
            .collect();
        Year { seed, year, steps, slots }
    }

    /// Fills `out` (C × H × W) with step `t`.
    pub(super) fn step(&self, planet: &Planet, t: usize, out: &mut [f32]) {
        let (h, w) = (planet.height, planet.width);
        let plane = h * w;
        let time = t as f64;
        // -1 in January (northern winter), +1 half a year later.
        let season = -(TAU * time / self.steps as f64).cos();
        let utc_hours = (t % STEPS_PER_DAY) as f64 * 24.0 / STEPS_PER_DAY as f64;
        let diurnal: Vec<f64> =
            planet.lon.iter().map(|&lambda| (TAU * (utc_hours + lambda.to_degrees() / 15.0 - 15.0) / 24.0).cos()).collect();
        let alive: Vec<&Wave> =
            self.slots.iter().filter_map(|waves| waves.iter().find(|wave| wave.birth <= time && time < wave.birth + wave.life)).collect();
        let mut noise_rng = Rng::stream(self.seed, &[self.year, STREAM_NOISE, t as u64]);
        let noise = [Noise::draw(&mut noise_rng, w), Noise::draw(&mut noise_rng, w)];

        let mut heights = [vec![0.0; plane], vec![0.0; plane], vec![0.0; plane]];
        let mut terms = Vec::with_capacity(alive.len());
        for (j, &phi) in planet.lat.iter().enumerate() {
            let climate = Climate::new(phi, season);
            wave_terms(&alive, phi, season, time, &mut terms);
            let noise_rows = [noise[0].row(j, h), noise[1].row(j, h)];
            for (i, &hour_angle) in diurnal.iter().enumerate() {
                let (mut psi, mut tau, mut mu) = (0.0, 0.0, 0.0);
                for term in &terms {
                    let (c, s) = (planet.cos_m[term.m * w + i], planet.sin_m[term.m * w + i]);
                    psi += term.psi[0] * c + term.psi[1] * s;
                    tau += term.tau[0] * c + term.tau[1] * s;
                    mu += term.mu[0] * c + term.mu[1] * s;
                }
                let thermal_noise = climate.cos_phi * noise[1].at(&noise_rows[1], i);
                psi += 0.08 * climate.cos_phi * noise[0].at(&noise_rows[0], i);
                tau += 0.12 * thermal_noise;
                mu += 0.1 * thermal_noise;

                let k = j * w + i;
                let drivers = Drivers { psi, tau, mu, ground: planet.orography[k], day: climate.cos_phi * hour_angle };
                let (point, levels) = climate.point(&drivers);
                for (channel, value) in point {
                    out[channel * plane + k] = value as f32;
                }
                for (height, value) in heights.iter_mut().zip(levels) {
                    height[k] = value;
                }
            }
        }
        for (level, (u, v)) in [(ch::U1000, ch::V1000), (ch::U850, ch::V850), (ch::U500, ch::V500)].into_iter().enumerate() {
            geostrophic_wind(planet, &heights[level], |k, wind_u, wind_v| {
                out[u * plane + k] = wind_u as f32;
                out[v * plane + k] = wind_v as f32;
            });
        }
        // Friction slows the 10 m wind and turns it towards low pressure (left in the north).
        geostrophic_wind(planet, &heights[0], |k, wind_u, wind_v| {
            let turn = 0.35 * smooth_sign(planet.lat[k / w].sin(), deg(5.0).sin());
            let (sin_turn, cos_turn) = turn.sin_cos();
            out[ch::U10 * plane + k] = (0.7 * (wind_u * cos_turn - wind_v * sin_turn)) as f32;
            out[ch::V10 * plane + k] = (0.7 * (wind_u * sin_turn + wind_v * cos_turn)) as f32;
        });
    }
}

/// The three wave fields and the local forcing at one grid point.
struct Drivers {
    psi: f64,
    tau: f64,
    mu: f64,
    /// Orography in metres.
    ground: f64,
    /// Diurnal heating, in [−1, 1], strongest at the equator.
    day: f64,
}

/// The latitude- and season-dependent means of one row.
struct Climate {
    cos_phi: f64,
    /// Sea-level air temperature (K).
    surface: f64,
    z1000: f64,
    moisture: f64,
    /// Mean temperature of the 500–50 hPa layer (K).
    stratosphere: f64,
}

/// The channels [`Climate::point`] gives, in this order.
const POINT_CHANNELS: [usize; 12] =
    [ch::T2M, ch::SP, ch::MSL, ch::T850, ch::Z1000, ch::Z850, ch::Z500, ch::T500, ch::Z50, ch::R500, ch::R850, ch::TCWV];

impl Climate {
    fn new(phi: f64, season: f64) -> Climate {
        let (sin_phi, cos_phi) = phi.sin_cos();
        // Subtropical highs and subpolar lows at the surface; moist tropics, dry subtropics.
        let z1000 = 600.0 + 900.0 * gauss(phi.abs() - deg(32.0), deg(12.0)) - 1100.0 * gauss(phi.abs() - deg(62.0), deg(10.0));
        let moisture = 1.2 * gauss(phi, deg(12.0)) - 1.1 * gauss(phi.abs() - deg(25.0), deg(8.0));
        Climate {
            cos_phi,
            surface: 300.0 - 50.0 * sin_phi * sin_phi + 14.0 * season * sin_phi,
            z1000,
            moisture,
            stratosphere: 212.0 + 8.0 * cos_phi * cos_phi + 14.0 * season * sin_phi,
        }
    }

    /// Every channel but the winds, in [`POINT_CHANNELS`] order, and the geopotential of the
    /// three levels that have winds (1000, 850, 500 hPa).
    fn point(&self, d: &Drivers) -> ([(usize, f64); 12], [f64; 3]) {
        let t2m = self.surface - LAPSE_RATE * d.ground + 8.0 * d.tau + 1.5 * d.day;
        let t850 = 0.85 * self.surface + 30.0 + 5.0 * d.tau + 0.3 * d.day;
        let t500 = 0.6 * self.surface + 83.0 + 3.5 * d.tau;
        let t_sea = t2m + LAPSE_RATE * d.ground;
        // Hypsometric equation: thickness = R · T_layer · ln(p_bottom / p_top).
        let z1000 = self.z1000 + 1000.0 * d.psi;
        let z850 = z1000 + R_DRY * (1000.0f64 / 850.0).ln() * 0.5 * (t_sea + t850);
        let z500 = z850 + R_DRY * (850.0f64 / 500.0).ln() * 0.5 * (t850 + t500);
        let z50 = z500 + R_DRY * 10.0f64.ln() * (self.stratosphere + 1.5 * d.tau);
        let msl = 1.0e5 * (1.0 + z1000 / (R_DRY * t_sea));
        let column_temperature = t2m + 0.5 * LAPSE_RATE * d.ground;
        let sp = msl * (-GRAVITY * d.ground / (R_DRY * column_temperature)).exp();
        let r850 = 100.0 * logistic(0.3 + 1.4 * d.mu + self.moisture);
        let r500 = 100.0 * logistic(-0.3 + 1.6 * d.mu + 0.4 * d.tau + self.moisture);
        // Clausius–Clapeyron: saturation vapour grows about 7 % per kelvin.
        let tcwv = r850 / 100.0 * 60.0 * (0.07 * (t850 - 288.0)).exp();
        let values = [t2m, sp, msl, t850, z1000, z850, z500, t500, z50, r500, r850, tcwv];
        (std::array::from_fn(|n| (POINT_CHANNELS[n], values[n])), [z1000, z850, z500])
    }
}

/// A wave's coefficients on one row: field = a·cos(mλ) + b·sin(mλ).
struct Term {
    m: usize,
    psi: [f64; 2],
    tau: [f64; 2],
    mu: [f64; 2],
}

/// The coefficients of the living waves that reach latitude `phi`.
fn wave_terms(alive: &[&Wave], phi: f64, season: f64, time: f64, terms: &mut Vec<Term>) {
    terms.clear();
    // The jet sits near 42° and moves poleward in its hemisphere's summer.
    let jet = deg(42.0) + deg(6.0) * season * phi.signum();
    let drift_per_step = deg(0.5) + deg(2.0) * gauss(phi.abs() - jet, deg(12.0));
    for wave in alive {
        if (phi - wave.lat0).abs() > 3.0 * wave.lat_width {
            continue;
        }
        let age = time - wave.birth;
        let envelope = wave.amp * (PI * age / wave.life).sin().powi(2) * gauss(phi - wave.lat0, wave.lat_width);
        // cos(mλ − c) travels east as c grows.
        let c = wave.m as f64 * drift_per_step * wave.drift * age + wave.phase;
        let (sin_c, cos_c) = c.sin_cos();
        let in_phase = [envelope * cos_c, envelope * sin_c];
        // cos(mλ − c + π/2): a quarter wave further east.
        let ahead = [envelope * sin_c, -envelope * cos_c];
        let mix = |a: f64, b: f64, scale: f64| [scale * (a * in_phase[0] + b * ahead[0]), scale * (a * in_phase[1] + b * ahead[1])];
        terms.push(Term { m: wave.m, psi: in_phase, tau: mix(0.5, 0.85, wave.thermal), mu: mix(0.3, 0.95, wave.moist) });
    }
}

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Normal values on a coarse grid, interpolated bilinearly (periodic in longitude).
struct Noise {
    values: Vec<f64>,
    width: usize,
}

impl Noise {
    fn draw(rng: &mut Rng, width: usize) -> Noise {
        Noise { values: (0..NOISE_GRID[0] * NOISE_GRID[1]).map(|_| rng.normal()).collect(), width }
    }

    /// Row `j` of `height` interpolated between the coarse rows, still coarse in longitude.
    fn row(&self, j: usize, height: usize) -> Vec<f64> {
        let [rows, cols] = NOISE_GRID;
        let y = j as f64 * (rows - 1) as f64 / (height.max(2) - 1) as f64;
        let r0 = (y.floor() as usize).min(rows - 2);
        let fy = y - r0 as f64;
        (0..cols).map(|c| (1.0 - fy) * self.values[r0 * cols + c] + fy * self.values[(r0 + 1) * cols + c]).collect()
    }

    fn at(&self, row: &[f64], i: usize) -> f64 {
        let cols = NOISE_GRID[1];
        let x = i as f64 * cols as f64 / self.width as f64;
        let c0 = x.floor() as usize % cols;
        let fx = x - x.floor();
        (1.0 - fx) * row[c0] + fx * row[(c0 + 1) % cols]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_pure_functions_of_seed_year_and_time() {
        let planet = Planet::new(3, 8, 16);
        let step = |year: u64, t: usize| {
            let mut out = vec![0.0f32; CHANNELS * 8 * 16];
            Year::new(3, year, 12).step(&planet, t, &mut out);
            out
        };
        assert_eq!(step(1990, 5), step(1990, 5));
        assert_ne!(step(1990, 5), step(1990, 6));
        assert_ne!(step(1990, 5), step(1991, 5));
        assert!(step(1990, 5).iter().all(|v| v.is_finite()));
    }
}
