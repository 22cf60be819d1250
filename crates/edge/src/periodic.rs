//! The timer the edge's background tasks share: do the work every so often until told to stop.

use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};

/// When a background task runs next: at once, then every interval, until `stop` resolves.
/// `stop` is noticed between runs, never in the middle of one.
pub(crate) struct Schedule<Stop> {
    tick: Interval,
    // Boxed so the schedule can be moved while `stop` stays pinned; one allocation per task.
    stop: Pin<Box<Stop>>,
}

impl<Stop: Future<Output = ()>> Schedule<Stop> {
    pub(crate) fn new(interval: Duration, stop: Stop) -> Self {
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
    pub(crate) async fn next(&mut self) -> bool {
        tokio::select! {
            () = &mut self.stop => false,
            _ = self.tick.tick() => true,
        }
    }
}
