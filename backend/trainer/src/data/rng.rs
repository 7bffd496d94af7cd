//! A small seeded generator (SplitMix64). The data pipeline needs reproducible streams keyed
//! by several numbers at once (seed, year, wave slot, time step; seed, epoch) that are
//! independent of thread scheduling, and no statistical strength beyond that.

use std::f64::consts::TAU;

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijective avalanche of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// The stream named by `seed` and a path of sub-stream keys, e.g. `[year, slot]`. Every
    /// key is mixed in, so neighbouring keys give unrelated streams.
    pub(crate) fn stream(seed: u64, keys: &[u64]) -> Rng {
        let state = keys.iter().fold(mix(seed ^ GOLDEN_GAMMA), |state, &key| mix(state ^ mix(key.wrapping_add(GOLDEN_GAMMA))));
        Rng { state }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix(self.state)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub(crate) fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }

    /// Uniform in `0..n` without modulo bias (Lemire's multiply-and-reject).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        let threshold = n.wrapping_neg() % n;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(n);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// Standard normal (Box–Muller; one of the pair is enough here).
    pub(crate) fn normal(&mut self) -> f64 {
        let radius = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        radius * (TAU * self.uniform()).cos()
    }

    /// Fisher–Yates: every permutation equally likely.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_repeat_for_the_same_keys_and_differ_otherwise() {
        let draw = |seed, keys: &[u64]| {
            let mut rng = Rng::stream(seed, keys);
            (0..4).map(|_| rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7, &[1, 2]), draw(7, &[1, 2]));
        assert_ne!(draw(7, &[1, 2]), draw(7, &[2, 1]));
        assert_ne!(draw(7, &[1, 2]), draw(8, &[1, 2]));
        assert_ne!(draw(7, &[1]), draw(7, &[1, 0]));
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = Rng::stream(1, &[]);
        let mut seen = [0usize; 7];
        for _ in 0..7000 {
            seen[rng.below(7) as usize] += 1;
        }
        assert!(seen.iter().all(|&count| (800..1200).contains(&count)), "{seen:?}");
    }

    #[test]
    fn normal_has_unit_moments() {
        let mut rng = Rng::stream(2, &[]);
        let samples: Vec<f64> = (0..20_000).map(|_| rng.normal()).collect();
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / samples.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut items: Vec<usize> = (0..100).collect();
        Rng::stream(3, &[]).shuffle(&mut items);
        assert_ne!(items, (0..100).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..100).collect::<Vec<_>>());
    }
}
