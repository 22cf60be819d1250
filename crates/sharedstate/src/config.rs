//! [`SharedConfig`]: how to reach Redis and how patient to be with it.

use std::time::Duration;

/// How to reach Redis and how patient to be with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedConfig {
    /// `redis://host:port[/db]`.
    pub url: String,
    /// The longest one round trip may take, whatever the request's deadline leaves.
    pub timeout: Duration,
    /// Entries of the full-caps cache, and of the profile cache.
    pub cache_entries: usize,
    /// How often queued counts and charges are sent.
    pub flush_interval: Duration,
    /// The longest one write-behind chunk (up to 500 counts and charges) may take. Not bound
    /// to `timeout`, which is sized for one request's round trip, and its failures do not count
    /// towards the breaker: a flush is not a request, and a chunk that failed is sent again.
    pub flush_timeout: Duration,
    /// Queued counts beyond this are dropped (and counted in the metrics).
    pub queue_limit: usize,
    /// Failures in a row that open the breaker.
    pub failures_to_open: u32,
    /// How long the breaker stays open before it lets a probe through.
    pub open_for: Duration,
    /// How long a profile read from Redis (or its absence) is reused without asking again.
    pub profile_cache_for: Duration,
}

impl SharedConfig {
    /// Defaults for everything but the URL.
    pub fn new(url: impl Into<String>) -> SharedConfig {
        SharedConfig {
            url: url.into(),
            timeout: Duration::from_millis(10),
            cache_entries: 100_000,
            flush_interval: Duration::from_millis(100),
            flush_timeout: Duration::from_secs(1),
            queue_limit: 100_000,
            failures_to_open: 5,
            open_for: Duration::from_secs(1),
            profile_cache_for: Duration::from_secs(30),
        }
    }
}
