//! The health score that throttles a bidder which keeps timing out or failing, and lets it
//! recover.
//!
//! The score runs from 0 to 1000 and starts at 1000. A failed call (timeout, transport error,
//! bad status, unreadable answer) takes an eighth of it away; a good call gives back a quarter
//! of what is missing. Six failures in a row bring a healthy bidder below the default
//! threshold of 500, so a bidder failing now and then keeps its traffic; from then on it gets
//! one call (a probe) per probe interval (100 ms by default: a short stall, which times out
//! many calls at once, costs a healthy bidder at most that), and one good probe brings it back
//! above. Lock-free: two atomics, updated with compare-and-swap. Time is a
//! parameter (`now`), so tests move it by hand.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::HealthConfig;

pub const MAX_SCORE: u32 = 1000;

#[derive(Debug)]
pub struct Health {
    config: HealthConfig,
    score: AtomicU32,
    /// When the last probe went out, in microseconds since `origin` (0: never).
    last_probe_us: AtomicU64,
    origin: Instant,
}

impl Health {
    pub fn new(config: HealthConfig, origin: Instant) -> Health {
        Health {
            config,
            score: AtomicU32::new(MAX_SCORE),
            last_probe_us: AtomicU64::new(0),
            origin,
        }
    }

    pub fn score(&self) -> u32 {
        self.score.load(Ordering::Relaxed)
    }

    pub fn throttled(&self) -> bool {
        self.score() < self.config.throttle_below
    }

    /// Whether a call may go out at `now`: always while healthy; while throttled, only the
    /// first call of each probe interval.
    pub fn allow(&self, now: Instant) -> bool {
        if !self.throttled() {
            return true;
        }
        // +1 so that a probe at the origin itself is not "never".
        let now_us = micros(now.saturating_duration_since(self.origin)).saturating_add(1);
        let interval = micros(self.config.probe_interval);
        self.last_probe_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                (last == 0 || now_us.saturating_sub(last) >= interval).then_some(now_us)
            })
            .is_ok()
    }

    pub fn record_success(&self) {
        self.update(|score| score + (MAX_SCORE - score).div_ceil(4));
    }

    pub fn record_failure(&self) {
        self.update(|score| score - score.div_ceil(8));
    }

    fn update(&self, step: impl Fn(u32) -> u32) {
        // The closure always returns Some: the update cannot fail.
        let _ = self
            .score
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |score| {
                Some(step(score.min(MAX_SCORE)))
            });
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_throttle_to_one_probe_per_interval_and_a_good_probe_recovers() {
        let origin = Instant::now();
        let health = Health::new(HealthConfig::default(), origin);
        let at = |ms: u64| origin + Duration::from_millis(ms);
        assert!(health.allow(at(0)) && health.allow(at(0)));
        for _ in 0..5 {
            health.record_failure();
        }
        assert!(!health.throttled(), "five failures: {}", health.score());
        health.record_failure();
        assert!(health.throttled(), "six failures: {}", health.score());
        assert!(health.allow(at(10)), "the first probe");
        assert!(!health.allow(at(20)), "within the probe interval");
        assert!(!health.allow(at(109)));
        assert!(health.allow(at(110)), "the next interval's probe");
        health.record_success();
        assert!(!health.throttled(), "recovered: {}", health.score());
        assert!(health.allow(at(111)) && health.allow(at(112)));
    }

    #[test]
    fn the_score_stays_within_bounds() {
        let health = Health::new(HealthConfig::default(), Instant::now());
        for _ in 0..100 {
            health.record_failure();
        }
        assert_eq!(health.score(), 0);
        for _ in 0..100 {
            health.record_success();
        }
        assert_eq!(health.score(), MAX_SCORE);
    }
}
