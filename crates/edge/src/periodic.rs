//! The timer the edge's background tasks share (the in-process edge's heartbeat in `marquee`
//! too): do the work every so often until told to stop.

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};

/// When a background task runs next: at once, then every interval, until `stop` resolves.
/// `stop` is noticed between runs, and within a run only where the task asks for it
/// ([`unless_stopped`](Self::unless_stopped)).
pub struct Schedule<Stop> {
    tick: Interval,
    // Boxed so the schedule can be moved while `stop` stays pinned; one allocation per task.
    stop: Pin<Box<Stop>>,
    /// `stop` resolved: it must not be polled again.
    stopped: bool,
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
            stopped: false,
        }
    }

    /// Waits for the next run: `true` when it is due, `false` once the task is to stop.
    pub async fn next(&mut self) -> bool {
        if self.stopped {
            return false;
        }
        tokio::select! {
            () = &mut self.stop => {
                self.stopped = true;
                false
            }
            _ = self.tick.tick() => true,
        }
    }

    /// Runs `work` unless the task is told to stop first: then `work` is dropped where it was
    /// and the answer is `None` (for work that may take long, such as a snapshot download,
    /// and that is safe to abandon).
    pub async fn unless_stopped<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        if self.stopped {
            return None;
        }
        tokio::select! {
            () = &mut self.stop => {
                self.stopped = true;
                None
            }
            done = work => Some(done),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_ends_work_in_progress_and_every_run_after() {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut schedule = Schedule::new(Duration::from_secs(3_600), async {
            let _ = stopped.await;
        });
        assert!(schedule.next().await);
        assert_eq!(schedule.unless_stopped(async { 7 }).await, Some(7));
        let _ = stop.send(());
        assert_eq!(
            schedule.unless_stopped(std::future::pending::<()>()).await,
            None
        );
        assert!(!schedule.next().await);
        assert_eq!(schedule.unless_stopped(async { 7 }).await, None);
    }
}
