//! [`SharedState`]: the client every edge holds, and the parts it ties together. Each part
//! lives in a module of its own, which adds its calls to `SharedState` in an `impl` block
//! there:
//!
//! | module | part | calls |
//! |---|---|---|
//! | `caps` | frequency caps (their cache of caps known full is `cache`) | `cap_count`, `check_and_count`, `known_full`, `count_later` |
//! | `budgets` | budget counters | `charge_later`, `charge_within`, `spent` |
//! | `write_behind` | the queue and its flush | `flush`, `drain`, `queued`, `drain_at_exit` |
//! | `profile_cache` | user profiles in Redis and their cache | `profile`, `profile_now`, `put_profiles` |
//! | `images` | image tag impressions | `remember_image`, `image` |
//! | `metrics` | the counters and their families | `register_metrics` |
//! | `round_trip` | one call to Redis: deadline, timeout, breaker | |

use std::sync::Arc;
use std::time::{Duration, Instant};

use marquee_model::Clock;
use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::runtime::Handle;

use crate::breaker::{Breaker, BreakerState};
use crate::budgets::Budgets;
use crate::caps::Caps;
use crate::config::SharedConfig;
use crate::metrics::Counters;
use crate::profile_cache::ProfileCache;
use crate::write_behind::{WriteBehind, flush_loop};

/// Errors building a [`SharedState`]; failures of Redis itself are never errors to callers,
/// they become [`Fallback`](crate::Fallback) answers.
#[derive(Debug, thiserror::Error)]
pub enum SharedStateError {
    /// The URL itself is not repeated: it may carry a password.
    #[error("redis.url: {reason}")]
    Url { reason: String },
    #[error("the shared state needs a Tokio runtime (its write-behind flusher runs on it)")]
    NoRuntime,
}

/// Frequency caps and budget counters in Redis, shared by edges. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SharedState {
    pub(crate) inner: Arc<Inner>,
}

/// What every clone of a [`SharedState`] shares: the connection and the breaker all parts
/// go through, and each part's own state.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: SharedConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) connection: ConnectionManager,
    pub(crate) breaker: Breaker,
    pub(crate) counters: Counters,
    pub(crate) caps: Caps,
    pub(crate) budgets: Budgets,
    pub(crate) write_behind: WriteBehind,
    /// Profiles read from Redis, and users known to have none, with when they were read.
    pub(crate) profiles: ProfileCache,
}

impl SharedState {
    /// A client for `config.url`; connects on first use (an edge starts while Redis is down and
    /// answers from local state until it is up). Starts the write-behind flusher on the
    /// current Tokio runtime; it stops when the last clone is dropped.
    pub fn new(
        config: SharedConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<SharedState, SharedStateError> {
        let runtime = Handle::try_current().map_err(|_| SharedStateError::NoRuntime)?;
        let connection = connect(&config, &runtime)?;
        let inner = Arc::new(Inner {
            breaker: Breaker::new(config.failures_to_open, config.open_for, Instant::now()),
            counters: Counters::default(),
            caps: Caps::new(config.cache_entries),
            budgets: Budgets::new(),
            write_behind: WriteBehind::default(),
            profiles: ProfileCache::new(config.cache_entries),
            connection,
            clock,
            config,
        });
        runtime.spawn(flush_loop(Arc::downgrade(&inner)));
        Ok(SharedState { inner })
    }

    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// Runs `task` with a clone of this state on the current Tokio runtime without waiting
    /// for it. Returns `false`, and runs nothing, when there is no runtime.
    pub(crate) fn in_background<Task, Run>(&self, task: Task) -> bool
    where
        Task: FnOnce(SharedState) -> Run,
        Run: Future<Output = ()> + Send + 'static,
    {
        let Ok(runtime) = Handle::try_current() else {
            return false;
        };
        runtime.spawn(task(self.clone()));
        true
    }
}

impl Inner {
    /// The injected clock's time, unix milliseconds: the time of cap counts.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now().as_millisecond()
    }
}

/// The connection manager for `config.url`, created on `runtime` (its reconnects run there);
/// it connects on first use.
fn connect(config: &SharedConfig, runtime: &Handle) -> Result<ConnectionManager, SharedStateError> {
    let url_error = |reason: String| SharedStateError::Url { reason };
    let client = Client::open(config.url.as_str()).map_err(|e| url_error(e.to_string()))?;
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.timeout.max(Duration::from_millis(100))))
        .set_response_timeout(None)
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(200));
    let _entered = runtime.enter();
    ConnectionManager::new_lazy_with_config(client, manager_config)
        .map_err(|e| url_error(e.to_string()))
}

/// A number that differs between processes (and between calls): the start of cap members,
/// so that two edges never add the same member at the same millisecond, and a process's name
/// in its budget charge marks.
pub(crate) fn process_random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}
