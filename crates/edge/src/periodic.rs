//! The timer the edge's background tasks share (the in-process edge's heartbeat in `marquee`
//! too): do the work every so often until told to stop.

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};

/// When a background task runs next: at once, then every interval, until `stop` resolves.
/// `stop` is noticed between runs, never in the middle of one.
pub struct Schedule<Stop> {
    tick: Interval,
    // Boxed so the schedule can be moved while `stop` stays pinned; one allocation per task.
    stop: Pin<Box<Stop>>,
}

impl<Stop: Future<Output = ()>> Schedule<Stop> {
    pub fn new(interval: Duration, stop: Stop) -> Self {
        let mut tick = tokio::time::interval(interval);
        // A run that overruns delays the next rather than being followed by a burst that
        // catches up.
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Schedule {
            tick,
            stop: Box::pin(stop),
        }
    }

    /// Waits for the next run: `true` when it is due, `false` once the task is to stop.
    pub async fn next(&mut self) -> bool {
        tokio::select! {
            () = &mut self.stop => false,
            _ = self.tick.tick() => true,
        }
    }
}

// By hand: the stop future is rarely `Debug`.
impl<Stop> fmt::Debug for Schedule<Stop> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedule")
            .field("tick", &self.tick)
            .finish_non_exhaustive()
    }
}
