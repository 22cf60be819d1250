use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};

use jiff::Timestamp;

/// The source of "now". Logic that stamps, paces or caps takes one so tests can move time.
pub trait Clock: Send + Sync + Debug {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug)]
pub struct ManualClock {
    micros: AtomicI64,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self {
            micros: AtomicI64::new(start.as_microsecond()),
        }
    }

    pub fn advance(&self, by: jiff::SignedDuration) {
        let delta = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        self.micros.fetch_add(delta, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        let micros = self.micros.load(Ordering::SeqCst);
        // Every value this clock holds came from a valid Timestamp plus test-sized advances.
        Timestamp::from_microsecond(micros).unwrap_or(Timestamp::MAX)
    }
}
