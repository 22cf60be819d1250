//! How many report queries a store runs at once.
//!
//! A report's SELECT can scan millions of stored rows, and it holds a database connection while
//! it does. The connections are few (two SQLite readers, a pool of eight on PostgreSQL) and
//! shared with every API request's token lookup, the dashboard's sessions and the snapshot
//! compile: reports beyond the gate's permits wait for one, briefly, and are then refused with
//! [`StoreError::Busy`] rather than starving those.

use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::StoreError;

/// How long a report waits for a turn before it is refused.
const WAIT: Duration = Duration::from_secs(2);
/// What a refused caller is told to wait before trying again, in seconds: longer than [`WAIT`],
/// as the reports ahead of it were still running when it gave up.
const RETRY_AFTER_SECS: u64 = 5;

/// At most `permits` report queries at once.
#[derive(Debug)]
pub(crate) struct ReportGate {
    permits: Semaphore,
    wait: Duration,
}

impl ReportGate {
    pub(crate) fn new(permits: usize) -> ReportGate {
        ReportGate::waiting(permits, WAIT)
    }

    fn waiting(permits: usize, wait: Duration) -> ReportGate {
        ReportGate {
            permits: Semaphore::new(permits),
            wait,
        }
    }

    /// A turn, held until the permit is dropped; [`StoreError::Busy`] when none frees up in time.
    pub(crate) async fn enter(&self) -> Result<SemaphorePermit<'_>, StoreError> {
        let busy = || StoreError::Busy {
            retry_after_secs: RETRY_AFTER_SECS,
        };
        tokio::time::timeout(self.wait, self.permits.acquire())
            .await
            .map_err(|_| busy())?
            // The semaphore is never closed; a closed one would mean no more turns.
            .map_err(|_| busy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_gate_refuses_after_its_wait_and_a_freed_turn_is_taken() {
        let gate = ReportGate::waiting(1, Duration::from_millis(20));
        let first = gate.enter().await.unwrap();
        assert!(matches!(
            gate.enter().await,
            Err(StoreError::Busy {
                retry_after_secs: RETRY_AFTER_SECS
            })
        ));
        drop(first);
        let again = gate.enter().await.unwrap();
        // A waiter gets the turn as soon as it is given back, within its wait.
        let waiter = async { gate.enter().await.map(drop) };
        let release = async {
            tokio::task::yield_now().await;
            drop(again);
        };
        let (waited, ()) = tokio::join!(waiter, release);
        assert!(waited.is_ok());
    }
}
