//! One round trip to Redis: within the caller's deadline and the configured timeout, through
//! the circuit breaker, counted in the metrics. A failure is never an error to the caller but
//! a [`Fallback`]: the reason it decides from local state instead.

use std::time::{Duration, Instant};

use crate::state::Inner;

/// Why Redis did not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The breaker is open: no round trip was tried.
    BreakerOpen,
    /// The round trip did not finish within its budget.
    Timeout,
    /// Redis answered with an error or the connection failed.
    Error,
    /// The request's deadline left no time for a round trip.
    NoTime,
}

impl Inner {
    /// A request's round trip: through the breaker, within the deadline and the timeout; its
    /// outcome feeds the breaker.
    pub(crate) async fn round_trip<T>(
        &self,
        deadline: Instant,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Fallback> {
        let started = Instant::now();
        let budget = deadline
            .saturating_duration_since(started)
            .min(self.config.timeout);
        if budget.is_zero() {
            return Err(self.counters.fallback(Fallback::NoTime));
        }
        if !self.breaker.allow(started) {
            return Err(self.counters.fallback(Fallback::BreakerOpen));
        }
        let answer = self.timed(budget, call).await;
        if answer.is_ok() {
            self.breaker.success();
        } else {
            self.breaker.failure(Instant::now());
        }
        answer
    }

    /// One round trip within `budget`, counted in the metrics; the breaker is the caller's.
    pub(crate) async fn timed<T>(
        &self,
        budget: Duration,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Fallback> {
        let started = Instant::now();
        match tokio::time::timeout(budget, call).await {
            Ok(Ok(value)) => {
                self.counters.completed(started.elapsed());
                Ok(value)
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "redis round trip failed");
                self.counters.errors.inc();
                Err(self.counters.fallback(Fallback::Error))
            }
            Err(_) => {
                self.counters.timeouts.inc();
                Err(self.counters.fallback(Fallback::Timeout))
            }
        }
    }

    /// `GET key` as a request's round trip: the value's bytes, `None` when the key is absent.
    pub(crate) async fn get_bytes(
        &self,
        key: String,
        deadline: Instant,
    ) -> Result<Option<Vec<u8>>, Fallback> {
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("GET");
        command.arg(key);
        self.round_trip(deadline, command.query_async(&mut connection))
            .await
    }
}
