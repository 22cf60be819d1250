//! Which ad requests an edge keeps for forecasting: one [`Sampler`] per worker thread, so the
//! decision on the request path is a hash and a comparison, with no lock and no I/O.

use crate::sample::SampleError;

/// Keeps every request of a sampled user (by the salted hash of the user key) and anonymous
/// requests at random, each with probability `rate`, and at most `max_bytes` of records a UTC
/// day (an edge gives each thread its share of its budget).
#[derive(Debug, Clone)]
pub struct Sampler {
    /// A hash below this is kept: `rate × 2⁶⁴`.
    threshold: u64,
    salt: u64,
    /// The anonymous requests' generator (SplitMix64's state).
    state: u64,
    max_bytes: u64,
    day: i64,
    bytes: u64,
}

impl Sampler {
    /// `rate` in (0, 1]; `salt` stays on the edge (it makes the hashes it writes unlinkable to
    /// user keys); `seed` differs between threads.
    pub fn new(rate: f64, salt: u64, max_bytes: u64, seed: u64) -> Result<Sampler, SampleError> {
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(SampleError::Rate(rate));
        }
        let threshold = if rate >= 1.0 {
            u64::MAX
        } else {
            (rate * 2f64.powi(64)) as u64
        };
        Ok(Sampler {
            threshold,
            salt,
            state: seed,
            max_bytes,
            day: i64::MIN,
            bytes: 0,
        })
    }

    /// Whether to keep a request of this user key (0: no user). The request path's one branch.
    #[inline]
    pub fn keep(&mut self, user: u64) -> bool {
        let draw = if user == 0 {
            self.state = self.state.wrapping_add(GOLDEN);
            mix(self.state)
        } else {
            mix(user ^ self.salt)
        };
        draw < self.threshold
    }

    /// What a record holds for the user: a salted hash, never the key (0: no user).
    pub fn user_hash(&self, user: u64) -> u64 {
        if user == 0 {
            return 0;
        }
        // Hashed again so the kept users' hashes spread over every bit, not only those below
        // the threshold.
        mix(mix(user ^ self.salt) ^ GOLDEN).max(1)
    }

    /// Counts a kept record of `bytes` at `minute` (minutes since 1970, UTC) against its day's
    /// budget: `false` when the day is full and the record is to be dropped.
    pub fn admit(&mut self, minute: u32, bytes: usize) -> bool {
        let day = i64::from(minute).div_euclid(1_440);
        if day != self.day {
            self.day = day;
            self.bytes = 0;
        }
        let next = self.bytes.saturating_add(bytes as u64);
        if next > self.max_bytes {
            return false;
        }
        self.bytes = next;
        true
    }
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finaliser: a 64-bit mix in which every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn about_the_rate_is_kept_and_a_user_is_kept_always_or_never() {
        let mut sampler = Sampler::new(0.01, 42, u64::MAX, 7).unwrap();
        let users: Vec<u64> = (1..=200_000).collect();
        let kept = users.iter().filter(|&&u| sampler.keep(u)).count();
        assert!((1_700..=2_300).contains(&kept), "{kept}");
        for &user in users.iter().take(5_000) {
            let first = sampler.keep(user);
            assert!((0..5).all(|_| sampler.keep(user) == first));
        }
        let anonymous = (0..200_000).filter(|_| sampler.keep(0)).count();
        assert!((1_700..=2_300).contains(&anonymous), "{anonymous}");
    }

    #[test]
    fn the_salt_changes_who_is_kept_and_the_hash_written() {
        let mut a = Sampler::new(0.5, 1, u64::MAX, 0).unwrap();
        let mut b = Sampler::new(0.5, 2, u64::MAX, 0).unwrap();
        let differ = (1..1_000u64).filter(|&u| a.keep(u) != b.keep(u)).count();
        assert!(differ > 300, "{differ}");
        assert_ne!(a.user_hash(5), b.user_hash(5));
        assert_ne!(a.user_hash(5), 5);
        assert_eq!(a.user_hash(0), 0);
        assert_ne!(a.user_hash(u64::MAX), 0);
    }

    #[test]
    fn a_day_holds_at_most_its_budget_and_the_next_day_starts_afresh() {
        let mut sampler = Sampler::new(1.0, 0, 100, 0).unwrap();
        let day = 20_000 * 1_440;
        assert!(sampler.admit(day, 60));
        assert!(!sampler.admit(day + 10, 60));
        assert!(sampler.admit(day + 20, 40));
        assert!(!sampler.admit(day + 30, 1));
        assert!(sampler.admit(day + 1_440, 100));
    }

    #[test]
    fn rates_outside_zero_to_one_are_refused() {
        for rate in [0.0, -0.1, 1.5, f64::NAN] {
            assert!(Sampler::new(rate, 0, 1, 0).is_err(), "{rate}");
        }
        assert!(Sampler::new(1.0, 0, 1, 0).unwrap().keep(3));
    }
}
