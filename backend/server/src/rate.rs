//! A token bucket: what bounds a rate without a timer. Each connection has one (a browser
//! sends a handful of messages a minute, so a client sending dozens a second is broken or
//! hostile, and its messages are dropped until it slows down, without affecting anyone else),
//! and the server has one for new learner identities ([`crate::learners::Identities`]); each
//! client address has one for its learner launches and new learner identities ([`KeyedRates`]).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct RateLimiter {
    per_sec: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// Allows `per_sec` messages a second on average and bursts of `burst`.
    pub fn new(per_sec: f64, burst: f64, now: Instant) -> RateLimiter {
        RateLimiter { per_sec, burst, tokens: burst, last: now }
    }

    /// Whether the bucket has filled again by `now`: forgetting it loses nothing.
    pub fn full(&self, now: Instant) -> bool {
        self.tokens + now.saturating_duration_since(self.last).as_secs_f64() * self.per_sec >= self.burst
    }

    /// Whether a message arriving at `now` may be handled.
    pub fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.per_sec).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A bucket for each of many keys (client addresses), alike: `burst` at once, then one per
/// `every`. At most `capacity` keys are remembered; past it, those whose bucket has filled again
/// are forgotten (they lose nothing), and if none has, all of them.
pub struct KeyedRates<K> {
    every: Duration,
    burst: f64,
    capacity: usize,
    buckets: Mutex<HashMap<K, RateLimiter>>,
}

impl<K: Hash + Eq> KeyedRates<K> {
    pub fn new(every: Duration, burst: f64, capacity: usize) -> KeyedRates<K> {
        KeyedRates { every, burst, capacity, buckets: Mutex::default() }
    }

    /// Whether `key` may go ahead at `now` (taking one of its tokens if so).
    pub fn allow(&self, key: K, now: Instant) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() >= self.capacity {
            buckets.retain(|_, limiter| !limiter.full(now));
            if buckets.len() >= self.capacity {
                buckets.clear();
            }
        }
        let (per_sec, burst) = (1.0 / self.every.as_secs_f64(), self.burst);
        buckets.entry(key).or_insert_with(|| RateLimiter::new(per_sec, burst, now)).allow(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_average_rate_holds() {
        let start = Instant::now();
        let mut limiter = RateLimiter::new(10.0, 5.0, start);
        let burst = (0..20).filter(|_| limiter.allow(start)).count();
        assert_eq!(burst, 5);
        // One second later: ten more tokens, capped at the burst of five.
        let later = start + Duration::from_secs(1);
        assert_eq!((0..20).filter(|_| limiter.allow(later)).count(), 5);
        assert!(!limiter.full(later) && limiter.full(later + Duration::from_millis(500)));
        // At exactly the average rate every message passes.
        let mut t = later;
        for _ in 0..100 {
            t += Duration::from_millis(100);
            assert!(limiter.allow(t));
        }
    }

    #[test]
    fn each_key_has_its_own_bucket_and_the_full_ones_are_forgotten_first() {
        let start = Instant::now();
        let rates = KeyedRates::new(Duration::from_secs(1), 2.0, 2);
        assert_eq!((0..5).filter(|_| rates.allow("a", start)).count(), 2);
        assert!(rates.allow("b", start), "another key is not held back by the first");
        // A third key past the capacity: "b" has not filled again, nor "a": all are forgotten.
        assert!(rates.allow("c", start) && rates.allow("a", start));
    }
}
