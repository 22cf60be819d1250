//! The circuit breaker in front of Redis. Closed: every call goes to Redis. After
//! `failures_to_open` failures in a row (errors or timeouts) it opens: calls are answered from
//! local state at once, without a round trip, for `open_for`. Then it lets one call through as
//! a probe (half open): success closes it, failure opens it again.
//!
//! Time is a monotonic `Instant` passed in, so tests drive it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The breaker's state, as the metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    /// The gauge value: 0 closed, 1 open, 2 half open.
    pub fn gauge(self) -> u8 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    failures: u32,
    /// Open: when the next probe may go. Half open: when the probe in flight counts as lost.
    until: Instant,
}

#[derive(Debug)]
pub struct Breaker {
    inner: Mutex<Inner>,
    failures_to_open: u32,
    open_for: Duration,
}

impl Breaker {
    pub fn new(failures_to_open: u32, open_for: Duration, now: Instant) -> Breaker {
        Breaker {
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                failures: 0,
                until: now,
            }),
            failures_to_open: failures_to_open.max(1),
            open_for,
        }
    }

    /// Whether a call may go to Redis now. While open, `false` until `open_for` has passed;
    /// then one caller gets `true` (the probe) and the state is half open.
    pub fn allow(&self, now: Instant) -> bool {
        // A poisoned lock means a panic mid-update: treat Redis as unavailable.
        let Ok(mut inner) = self.inner.lock() else {
            return false;
        };
        match inner.state {
            BreakerState::Closed => true,
            BreakerState::Open | BreakerState::HalfOpen if now >= inner.until => {
                // A half-open probe that never reported is counted as lost after `open_for`.
                inner.state = BreakerState::HalfOpen;
                inner.until = now + self.open_for;
                true
            }
            BreakerState::Open | BreakerState::HalfOpen => false,
        }
    }

    pub fn success(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.state = BreakerState::Closed;
            inner.failures = 0;
        }
    }

    pub fn failure(&self, now: Instant) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.failures = inner.failures.saturating_add(1);
        if inner.state == BreakerState::HalfOpen || inner.failures >= self.failures_to_open {
            inner.state = BreakerState::Open;
            inner.until = now + self.open_for;
        }
    }

    pub fn state(&self) -> BreakerState {
        self.inner
            .lock()
            .map_or(BreakerState::Open, |inner| inner.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_failures_in_a_row_probes_then_closes() {
        let t0 = Instant::now();
        let breaker = Breaker::new(3, Duration::from_secs(1), t0);
        breaker.failure(t0);
        breaker.failure(t0);
        breaker.success();
        breaker.failure(t0);
        breaker.failure(t0);
        assert_eq!(
            breaker.state(),
            BreakerState::Closed,
            "a success resets the run"
        );
        breaker.failure(t0);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert!(!breaker.allow(t0 + Duration::from_millis(999)));
        let probe = t0 + Duration::from_secs(1);
        assert!(breaker.allow(probe));
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        assert!(!breaker.allow(probe), "one probe at a time");
        breaker.failure(probe);
        assert_eq!(
            breaker.state(),
            BreakerState::Open,
            "a failed probe reopens"
        );
        let again = probe + Duration::from_secs(1);
        assert!(breaker.allow(again));
        breaker.success();
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert!(breaker.allow(again));
    }
}
