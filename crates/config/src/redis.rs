//! `[redis]`: Redis for state shared by edges, frequency caps and budget counters. Without a
//! URL each edge keeps them in its own memory, as `marquee serve` does.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{empty_is_none, in_range, millis};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSection {
    /// `redis://[user:password@]host:port[/db]`; empty: no Redis.
    #[serde(default, with = "empty_is_none")]
    pub url: Option<RedisUrl>,
    /// The longest one round trip may take, within the request's own deadline.
    #[serde(rename = "timeout_ms", with = "millis")]
    pub timeout: Duration,
    /// Entries of the cache of caps Redis reported full.
    pub cache_entries: u64,
    /// How often queued counts and budget charges are sent.
    #[serde(rename = "flush_interval_ms", with = "millis")]
    pub flush_interval: Duration,
    /// The longest one flushed chunk (up to 500 counts and charges) may take.
    #[serde(rename = "flush_timeout_ms", with = "millis")]
    pub flush_timeout: Duration,
    /// Queued counts beyond this are dropped (counted in `/metrics`).
    pub queue_limit: u64,
    /// Failures in a row (errors or timeouts) that open the circuit breaker.
    pub failures_to_open: u32,
    /// How long the open breaker answers from local state before it probes Redis again.
    #[serde(rename = "open_ms", with = "millis")]
    pub open: Duration,
}

impl Default for RedisSection {
    fn default() -> Self {
        RedisSection {
            url: None,
            timeout: Duration::from_millis(10),
            cache_entries: 100_000,
            flush_interval: Duration::from_millis(100),
            flush_timeout: Duration::from_millis(1_000),
            queue_limit: 100_000,
            failures_to_open: 5,
            open: Duration::from_millis(1_000),
        }
    }
}

/// `redis://` and an address. Its password, if any, is in the text: not shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RedisUrl(String);

impl RedisUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RedisUrl {
    type Error = String;
    fn try_from(url: String) -> Result<Self, String> {
        if url.strip_prefix("redis://").is_none_or(str::is_empty) {
            return Err(format!("is {url:?}; it must be a redis:// URL or empty"));
        }
        Ok(RedisUrl(url))
    }
}

impl From<RedisUrl> for String {
    fn from(url: RedisUrl) -> String {
        url.0
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisUrl(\"redis://…\")")
    }
}

impl RedisSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range("redis.timeout_ms", millis::count(&self.timeout), 1, 1_000)?;
        in_range("redis.cache_entries", self.cache_entries, 1, 100_000_000)?;
        in_range(
            "redis.flush_interval_ms",
            millis::count(&self.flush_interval),
            1,
            60_000,
        )?;
        in_range(
            "redis.flush_timeout_ms",
            millis::count(&self.flush_timeout),
            1,
            60_000,
        )?;
        in_range("redis.queue_limit", self.queue_limit, 1, 100_000_000)?;
        in_range(
            "redis.failures_to_open",
            u64::from(self.failures_to_open),
            1,
            1_000,
        )?;
        in_range("redis.open_ms", millis::count(&self.open), 10, 600_000)
    }
}
