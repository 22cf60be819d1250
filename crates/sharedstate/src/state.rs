//! [`SharedState`]: the client every edge holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use marquee_model::Clock;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};
use rustc_hash::FxHashMap;

use crate::breaker::{Breaker, BreakerState};
use crate::cache::FullCaps;
use crate::keys::{self, Scope};
use crate::profiles::Profile;

/// Check-and-count over one user's caps, all in one slot. `ARGV`: now (unix ms), a unique
/// member, `1` to count even when a cap is full (an impression that already happened), then a
/// window (ms) and a limit per key. Times at or before `now - window` are dropped first. Counts
/// in every key only if all have room (or when forced). Returns `{counted, free_at…}`: per key,
/// 0 while it has room, else the unix ms at which it will have room again.
const CAPS_SCRIPT: &str = r"
local now = tonumber(ARGV[1])
local counts = {}
local room = true
for i = 1, #KEYS do
  local window = tonumber(ARGV[2 + 2 * i])
  local limit = tonumber(ARGV[3 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  counts[i] = redis.call('ZCARD', KEYS[i])
  if counts[i] >= limit then room = false end
end
local counted = room or ARGV[3] == '1'
local result = { counted and 1 or 0 }
for i = 1, #KEYS do
  local window = tonumber(ARGV[2 + 2 * i])
  local limit = tonumber(ARGV[3 + 2 * i])
  local count = counts[i]
  if counted then
    redis.call('ZADD', KEYS[i], now, ARGV[2])
    redis.call('PEXPIRE', KEYS[i], window)
    count = count + 1
  end
  local free_at = 0
  if count >= limit then
    local at = redis.call('ZRANGE', KEYS[i], count - limit, count - limit, 'WITHSCORES')
    free_at = tonumber(at[2]) + window
  end
  result[i + 1] = free_at
end
return result
";

/// Charge within a limit: `ARGV`: amount, limit. Adds the amount only if the total stays
/// within the limit. Returns `{charged, total}`.
const BUDGET_SCRIPT: &str = r"
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
if spent + amount > tonumber(ARGV[2]) then
  return { 0, spent }
end
return { 1, redis.call('INCRBY', KEYS[1], amount) }
";

/// Errors building a [`SharedState`]; failures of Redis itself are never errors to callers,
/// they become [`Fallback`] answers.
#[derive(Debug, thiserror::Error)]
pub enum SharedStateError {
    /// The URL itself is not repeated: it may carry a password.
    #[error("redis.url: {reason}")]
    Url { reason: String },
    #[error("the shared state needs a Tokio runtime (its write-behind flusher runs on it)")]
    NoRuntime,
}

/// How to reach Redis and how patient to be with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedConfig {
    /// `redis://host:port[/db]`.
    pub url: String,
    /// The longest one round trip may take, whatever the request's deadline leaves.
    pub timeout: Duration,
    /// Entries of the full-caps cache.
    pub cache_entries: usize,
    /// How often queued counts and charges are sent.
    pub flush_interval: Duration,
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
            queue_limit: 100_000,
            failures_to_open: 5,
            open_for: Duration::from_secs(1),
            profile_cache_for: Duration::from_secs(30),
        }
    }
}

/// One frequency cap to check: at most `limit` in any `window_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapRule {
    pub scope: Scope,
    pub window_seconds: u32,
    pub limit: u32,
}

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

/// The answer of [`SharedState::check_and_count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapAnswer {
    /// Every cap had room; one more is counted in Redis.
    Allowed,
    /// A cap is full (learned from Redis now, or from the cache); nothing was counted.
    Refused,
    /// Redis did not decide: local state does, and a delivery it allows should be queued
    /// with [`SharedState::count_later`].
    Unavailable(Fallback),
}

/// The answer of [`SharedState::charge_within`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetAnswer {
    /// Charged; the total after it.
    Charged(u64),
    /// The charge would pass the limit; the total as it is.
    Refused(u64),
    Unavailable(Fallback),
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU64,
    round_trip_micros: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    fallbacks_breaker: AtomicU64,
    fallbacks_timeout: AtomicU64,
    fallbacks_error: AtomicU64,
    fallbacks_no_time: AtomicU64,
    cache_refusals: AtomicU64,
    queued: AtomicU64,
    flushed: AtomicU64,
    dropped: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// A count that happened while Redis could not be asked, or a forced one.
#[derive(Debug, Clone)]
struct QueuedCount {
    user: u64,
    rules: Vec<CapRule>,
    at_ms: i64,
}

#[derive(Debug, Default)]
struct Queue {
    counts: Vec<QueuedCount>,
    /// Budget charges summed per line item.
    charges: FxHashMap<u64, u64>,
}

#[derive(Debug)]
struct Inner {
    config: SharedConfig,
    connection: ConnectionManager,
    caps_script: Script,
    budget_script: Script,
    clock: Arc<dyn Clock>,
    breaker: Breaker,
    full: FullCaps,
    queue: Mutex<Queue>,
    /// The last shared total seen per line item's budget counter.
    spent: Mutex<FxHashMap<u64, u64>>,
    /// Profiles read from Redis, and users known to have none, with when they were read.
    profiles: ProfileCache,
    /// Makes every counted member unique: a random start, then one more per count.
    next_member: AtomicU64,
    counters: Counters,
}

/// Frequency caps and budget counters in Redis, shared by edges. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SharedState {
    inner: Arc<Inner>,
}

impl SharedState {
    /// A client for `config.url`; connects on first use (an edge starts while Redis is down and
    /// answers from local state until it is up). Starts the write-behind flusher on the
    /// current Tokio runtime; it stops when the last clone is dropped.
    pub fn new(
        config: SharedConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<SharedState, SharedStateError> {
        let url_error = |reason: String| SharedStateError::Url { reason };
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| SharedStateError::NoRuntime)?;
        let client = Client::open(config.url.as_str()).map_err(|e| url_error(e.to_string()))?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.timeout.max(Duration::from_millis(100))))
            .set_response_timeout(None)
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let connection = {
            let _entered = runtime.enter();
            ConnectionManager::new_lazy_with_config(client, manager_config)
                .map_err(|e| url_error(e.to_string()))?
        };
        let inner = Arc::new(Inner {
            breaker: Breaker::new(config.failures_to_open, config.open_for, Instant::now()),
            full: FullCaps::new(config.cache_entries),
            profiles: ProfileCache::new(config.cache_entries),
            connection,
            caps_script: Script::new(CAPS_SCRIPT),
            budget_script: Script::new(BUDGET_SCRIPT),
            clock,
            queue: Mutex::new(Queue::default()),
            spent: Mutex::new(FxHashMap::default()),
            next_member: AtomicU64::new(random_start()),
            counters: Counters::default(),
            config,
        });
        runtime.spawn(flush_loop(Arc::downgrade(&inner)));
        Ok(SharedState { inner })
    }

    /// Whether one of `rules` is known full for `user` now, from the cache alone (no I/O; for
    /// the decision path).
    pub fn known_full(&self, user: u64, rules: &[CapRule]) -> bool {
        let now_ms = self.now_ms();
        rules.iter().any(|r| {
            self.inner
                .full
                .is_full(user, r.scope, r.window_seconds, now_ms)
        })
    }

    /// Checks every rule for `user` and, if all have room, counts one more in each: one
    /// atomic round trip (a script), within `deadline` and the configured timeout. A cap the
    /// cache knows full is refused without a round trip.
    pub async fn check_and_count(
        &self,
        user: u64,
        rules: &[CapRule],
        deadline: Instant,
    ) -> CapAnswer {
        if rules.is_empty() {
            return CapAnswer::Allowed;
        }
        if self.known_full(user, rules) {
            bump(&self.inner.counters.cache_refusals, 1);
            return CapAnswer::Refused;
        }
        let now_ms = self.now_ms();
        let mut invocation = self.inner.caps_script.prepare_invoke();
        for rule in rules {
            invocation.key(keys::cap_key(user, rule.scope, rule.window_seconds));
        }
        invocation.arg(now_ms).arg(self.member()).arg(0);
        for rule in rules {
            invocation
                .arg(i64::from(rule.window_seconds) * 1000)
                .arg(rule.limit);
        }
        let mut connection = self.inner.connection.clone();
        let answer: Result<Vec<i64>, Fallback> = self
            .round_trip(deadline, invocation.invoke_async(&mut connection))
            .await;
        match answer {
            Ok(reply) => {
                self.learn(user, rules, &reply, now_ms);
                if reply.first() == Some(&1) {
                    CapAnswer::Allowed
                } else {
                    CapAnswer::Refused
                }
            }
            Err(fallback) => CapAnswer::Unavailable(fallback),
        }
    }

    /// Queues one count of `rules` for `user` at the clock's time, sent with the next flush
    /// whatever the caps say: a delivery local state allowed while Redis was unavailable, or
    /// one that happened anyway (an exchange's billing notice).
    pub fn count_later(&self, user: u64, rules: &[CapRule]) {
        if rules.is_empty() {
            return;
        }
        let at_ms = self.now_ms();
        let Ok(mut queue) = self.inner.queue.lock() else {
            return;
        };
        if queue.counts.len() >= self.inner.config.queue_limit {
            bump(&self.inner.counters.dropped, 1);
            return;
        }
        queue.counts.push(QueuedCount {
            user,
            rules: rules.to_vec(),
            at_ms,
        });
        bump(&self.inner.counters.queued, 1);
    }

    /// Adds `amount` to the line item's shared budget counter with the next flush (summed
    /// with other charges queued meanwhile).
    pub fn charge_later(&self, line_item: u64, amount: u64) {
        if amount == 0 {
            return;
        }
        if let Ok(mut queue) = self.inner.queue.lock() {
            let pending = queue.charges.entry(line_item).or_default();
            *pending = pending.saturating_add(amount);
        }
    }

    /// The line item's shared total as last seen (from a flush or a [`charge_within`]) plus
    /// what this process has queued since; `None` before anything was seen or queued.
    ///
    /// [`charge_within`]: SharedState::charge_within
    pub fn spent(&self, line_item: u64) -> Option<u64> {
        let seen = self
            .inner
            .spent
            .lock()
            .ok()
            .and_then(|s| s.get(&line_item).copied());
        let queued = self
            .inner
            .queue
            .lock()
            .ok()
            .and_then(|q| q.charges.get(&line_item).copied());
        match (seen, queued) {
            (None, None) => None,
            (seen, queued) => Some(seen.unwrap_or(0).saturating_add(queued.unwrap_or(0))),
        }
    }

    /// Charges `amount` to the line item's shared counter only if its total stays within
    /// `limit`: one atomic round trip within `deadline`.
    pub async fn charge_within(
        &self,
        line_item: u64,
        amount: u64,
        limit: u64,
        deadline: Instant,
    ) -> BudgetAnswer {
        let mut invocation = self.inner.budget_script.key(keys::budget_key(line_item));
        invocation.arg(amount).arg(limit);
        let mut connection = self.inner.connection.clone();
        let answer: Result<(u8, u64), Fallback> = self
            .round_trip(deadline, invocation.invoke_async(&mut connection))
            .await;
        match answer {
            Ok((charged, total)) => {
                if let Ok(mut spent) = self.inner.spent.lock() {
                    spent.insert(line_item, total);
                }
                if charged == 1 {
                    BudgetAnswer::Charged(total)
                } else {
                    BudgetAnswer::Refused(total)
                }
            }
            Err(fallback) => BudgetAnswer::Unavailable(fallback),
        }
    }

    /// The profile of `user` (a user key) without waiting, for requests whose deadline leaves
    /// no room for a round trip: from the local cache while fresh. Otherwise `None` this once,
    /// and one `GET` in the background (on the current Tokio runtime) caches it for the user's
    /// next request. While that fetch runs, and for a second after one that failed,
    /// calls for the same user start no other: an exchange sends one user many times a second,
    /// and each would otherwise send Redis its own `GET`.
    pub fn profile_now(&self, user: u64) -> Option<Arc<Profile>> {
        let now = Instant::now();
        match self
            .inner
            .profiles
            .get_or_claim(user, now, now + PREFETCH_WITHIN)
        {
            Claim::Known(profile) => return profile,
            Claim::Fetching => return None,
            Claim::Claimed => {}
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.profiles.forget(user);
            return None;
        };
        let state = self.clone();
        runtime.spawn(async move {
            // A failure is counted with the round trips; the claim lapses and a later request
            // tries again.
            let _ = state.profile(user, Instant::now() + PREFETCH_WITHIN).await;
        });
        None
    }

    /// The profile of `user` (a user key): from the local cache while fresh, else one `GET`
    /// within `deadline`. `Err` when Redis did not answer in time: the request goes on without
    /// a profile.
    pub async fn profile(
        &self,
        user: u64,
        deadline: Instant,
    ) -> Result<Option<Arc<Profile>>, Fallback> {
        let now = Instant::now();
        if let Some(cached) = self.inner.profiles.get(user, now) {
            return Ok(cached);
        }
        let mut connection = self.inner.connection.clone();
        let mut command = redis::cmd("GET");
        command.arg(keys::profile_key(user));
        let answer: Option<Vec<u8>> = self
            .round_trip(deadline, command.query_async(&mut connection))
            .await?;
        let profile = answer
            .and_then(|bytes| serde_json::from_slice::<Profile>(&bytes).ok())
            .map(Arc::new);
        self.inner.profiles.put(
            user,
            profile.clone(),
            now + self.inner.config.profile_cache_for,
        );
        Ok(profile)
    }

    /// Stores profiles by user key, replacing what each user had: pipelines of 1,000 `SET`s,
    /// each within `deadline`. Returns how many were stored before a failure, if one came.
    pub async fn put_profiles(
        &self,
        profiles: &[(u64, Profile)],
        deadline: Instant,
    ) -> Result<usize, (usize, Fallback)> {
        let mut stored = 0;
        for chunk in profiles.chunks(1_000) {
            let mut pipe = redis::pipe();
            for (user, profile) in chunk {
                let json = serde_json::to_vec(profile).unwrap_or_default();
                pipe.cmd("SET")
                    .arg(keys::profile_key(*user))
                    .arg(json)
                    .ignore();
            }
            let mut connection = self.inner.connection.clone();
            let sent: Result<(), Fallback> = self
                .round_trip(deadline, pipe.query_async(&mut connection))
                .await;
            sent.map_err(|fallback| (stored, fallback))?;
            for (user, _) in chunk {
                self.inner.profiles.forget(*user);
            }
            stored += chunk.len();
        }
        Ok(stored)
    }

    /// Sends what is queued now (the flusher does this every `flush_interval`): one round trip
    /// for all of it. Returns whether the queue was emptied.
    pub async fn flush(&self) -> bool {
        flush(&self.inner).await
    }

    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// Counts and charges waiting for the next flush.
    pub fn queued(&self) -> usize {
        self.inner
            .queue
            .lock()
            .map_or(0, |q| q.counts.len() + q.charges.len())
    }

    /// Appends the `marquee_redis_*` metrics in Prometheus text format.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let c = &self.inner.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# HELP marquee_redis_breaker_state Shared-state circuit breaker: 0 closed, 1 open (answers from local state), 2 half open (probing).\n\
             # TYPE marquee_redis_breaker_state gauge\n\
             marquee_redis_breaker_state {}\n\
             # HELP marquee_redis_round_trips Round trips to Redis that completed.\n\
             # TYPE marquee_redis_round_trips counter\n\
             marquee_redis_round_trips {}\n\
             # HELP marquee_redis_round_trip_seconds_total Time spent in completed round trips.\n\
             # TYPE marquee_redis_round_trip_seconds_total counter\n\
             marquee_redis_round_trip_seconds_total {:.6}\n\
             # HELP marquee_redis_errors Round trips that failed (error or timeout).\n\
             # TYPE marquee_redis_errors counter\n\
             marquee_redis_errors{{kind=\"error\"}} {}\n\
             marquee_redis_errors{{kind=\"timeout\"}} {}\n\
             # HELP marquee_redis_fallbacks Checks decided from local state instead of Redis, by reason.\n\
             # TYPE marquee_redis_fallbacks counter\n\
             marquee_redis_fallbacks{{reason=\"breaker_open\"}} {}\n\
             marquee_redis_fallbacks{{reason=\"timeout\"}} {}\n\
             marquee_redis_fallbacks{{reason=\"error\"}} {}\n\
             marquee_redis_fallbacks{{reason=\"no_time\"}} {}\n\
             # HELP marquee_redis_cache_refusals Checks refused from the cache of full caps, without a round trip.\n\
             # TYPE marquee_redis_cache_refusals counter\n\
             marquee_redis_cache_refusals {}\n\
             # HELP marquee_redis_write_behind Counts queued for Redis, sent, and dropped (queue full).\n\
             # TYPE marquee_redis_write_behind counter\n\
             marquee_redis_write_behind{{stage=\"queued\"}} {}\n\
             marquee_redis_write_behind{{stage=\"flushed\"}} {}\n\
             marquee_redis_write_behind{{stage=\"dropped\"}} {}\n\
             # HELP marquee_redis_write_behind_pending Counts and charges waiting for the next flush.\n\
             # TYPE marquee_redis_write_behind_pending gauge\n\
             marquee_redis_write_behind_pending {}",
            self.breaker_state().gauge(),
            get(&c.round_trips),
            get(&c.round_trip_micros) as f64 / 1e6,
            get(&c.errors),
            get(&c.timeouts),
            get(&c.fallbacks_breaker),
            get(&c.fallbacks_timeout),
            get(&c.fallbacks_error),
            get(&c.fallbacks_no_time),
            get(&c.cache_refusals),
            get(&c.queued),
            get(&c.flushed),
            get(&c.dropped),
            self.queued(),
        );
        let mut spent: Vec<(u64, u64)> = self
            .inner
            .spent
            .lock()
            .map(|s| s.iter().map(|(l, t)| (*l, *t)).collect())
            .unwrap_or_default();
        spent.sort_unstable();
        let _ = writeln!(
            out,
            "# HELP marquee_redis_budget_spent A line item's shared budget counter as last seen (all edges, lease units).\n\
             # TYPE marquee_redis_budget_spent gauge"
        );
        for (line_item, total) in spent {
            let _ = writeln!(
                out,
                "marquee_redis_budget_spent{{line_item=\"{line_item}\"}} {total}"
            );
        }
    }

    fn now_ms(&self) -> i64 {
        self.inner.clock.now().as_millisecond()
    }

    fn member(&self) -> String {
        format!(
            "{:x}",
            self.inner.next_member.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Caches the caps a script answer reports full.
    fn learn(&self, user: u64, rules: &[CapRule], reply: &[i64], now_ms: i64) {
        learn(&self.inner.full, user, rules, reply, now_ms);
    }

    /// Runs one round trip through the breaker, within the deadline and the timeout.
    async fn round_trip<T>(
        &self,
        deadline: Instant,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Fallback> {
        round_trip(&self.inner, deadline, call).await
    }
}

type ProfileShard = FxHashMap<u64, CachedProfile>;

/// How long a background profile fetch ([`SharedState::profile_now`]) may take; until then no
/// other starts for the same user. Redis's own timeout applies within it.
const PREFETCH_WITHIN: Duration = Duration::from_secs(1);

/// A user's profile (or its absence) as read, or a fetch of it under way.
#[derive(Debug)]
enum CachedProfile {
    /// Read from Redis (`None`: the user has no profile), good until `until`.
    Read {
        profile: Option<Arc<Profile>>,
        until: Instant,
    },
    /// A background fetch was started; none other starts before `until`.
    Fetching { until: Instant },
}

/// What [`ProfileCache::get_or_claim`] found.
enum Claim {
    Known(Option<Arc<Profile>>),
    Fetching,
    /// Nothing fresh: the caller fetches, and others wait for it.
    Claimed,
}

/// Profiles (or their absence) read from Redis, until a time, by user key; sharded, bounded: a
/// full shard starts over.
#[derive(Debug)]
struct ProfileCache {
    shards: Vec<Mutex<ProfileShard>>,
    per_shard: usize,
}

impl ProfileCache {
    const SHARDS: usize = 32;

    fn new(capacity: usize) -> ProfileCache {
        ProfileCache {
            shards: (0..Self::SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
            per_shard: capacity.div_ceil(Self::SHARDS).max(1),
        }
    }

    fn shard(&self, user: u64) -> &Mutex<ProfileShard> {
        &self.shards[(user as usize) % Self::SHARDS]
    }

    /// The profile read for `user`, while fresh.
    fn get(&self, user: u64, now: Instant) -> Option<Option<Arc<Profile>>> {
        let shard = self.shard(user).lock().ok()?;
        match shard.get(&user)? {
            CachedProfile::Read { profile, until } if *until > now => Some(profile.clone()),
            _ => None,
        }
    }

    /// The profile read for `user` while fresh; else whether a fetch is running, and if none
    /// is, a claim to start one, held until `until` or until [`ProfileCache::put`].
    fn get_or_claim(&self, user: u64, now: Instant, until: Instant) -> Claim {
        // A poisoned shard caches nothing (as `get` answers nothing): no fetch to start.
        let Ok(mut shard) = self.shard(user).lock() else {
            return Claim::Fetching;
        };
        match shard.get(&user) {
            Some(CachedProfile::Read { profile, until }) if *until > now => {
                return Claim::Known(profile.clone());
            }
            Some(CachedProfile::Fetching { until }) if *until > now => return Claim::Fetching,
            _ => {}
        }
        self.insert(&mut shard, user, CachedProfile::Fetching { until });
        Claim::Claimed
    }

    fn put(&self, user: u64, profile: Option<Arc<Profile>>, until: Instant) {
        if let Ok(mut shard) = self.shard(user).lock() {
            self.insert(&mut shard, user, CachedProfile::Read { profile, until });
        }
    }

    fn insert(&self, shard: &mut ProfileShard, user: u64, entry: CachedProfile) {
        if shard.len() >= self.per_shard && !shard.contains_key(&user) {
            shard.clear();
        }
        shard.insert(user, entry);
    }

    fn forget(&self, user: u64) {
        if let Ok(mut shard) = self.shard(user).lock() {
            shard.remove(&user);
        }
    }
}

fn learn(full: &FullCaps, user: u64, rules: &[CapRule], reply: &[i64], now_ms: i64) {
    for (rule, free_at) in rules.iter().zip(reply.iter().skip(1)) {
        if *free_at > now_ms {
            full.insert(user, rule.scope, rule.window_seconds, *free_at, now_ms);
        }
    }
}

async fn round_trip<T>(
    inner: &Inner,
    deadline: Instant,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, Fallback> {
    let counters = &inner.counters;
    let started = Instant::now();
    let budget = deadline
        .saturating_duration_since(started)
        .min(inner.config.timeout);
    let fallback = |reason: Fallback| {
        let counter = match reason {
            Fallback::BreakerOpen => &counters.fallbacks_breaker,
            Fallback::Timeout => &counters.fallbacks_timeout,
            Fallback::Error => &counters.fallbacks_error,
            Fallback::NoTime => &counters.fallbacks_no_time,
        };
        bump(counter, 1);
        Err(reason)
    };
    if budget.is_zero() {
        return fallback(Fallback::NoTime);
    }
    if !inner.breaker.allow(started) {
        return fallback(Fallback::BreakerOpen);
    }
    match tokio::time::timeout(budget, call).await {
        Ok(Ok(value)) => {
            inner.breaker.success();
            bump(&counters.round_trips, 1);
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            bump(&counters.round_trip_micros, micros);
            Ok(value)
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, "redis round trip failed");
            inner.breaker.failure(Instant::now());
            bump(&counters.errors, 1);
            fallback(Fallback::Error)
        }
        Err(_) => {
            inner.breaker.failure(Instant::now());
            bump(&counters.timeouts, 1);
            fallback(Fallback::Timeout)
        }
    }
}

/// Sends the queue in one pipeline: the script's load (so that `EVALSHA` finds it even on a
/// server that restarted), an `EVALSHA` per queued count, an `INCRBY` per charged line item.
/// On failure everything goes back in the queue (within its limit): a count may then be sent
/// twice if the failure was a timeout after Redis executed it, which errs towards fewer
/// impressions, never more.
async fn flush(inner: &Inner) -> bool {
    let taken = match inner.queue.lock() {
        Ok(mut queue) => std::mem::take(&mut *queue),
        Err(_) => return false,
    };
    if taken.counts.is_empty() && taken.charges.is_empty() {
        return true;
    }
    let mut pipe = redis::pipe();
    pipe.cmd("SCRIPT").arg("LOAD").arg(CAPS_SCRIPT).ignore();
    let hash = inner.caps_script.get_hash();
    for count in &taken.counts {
        let command = pipe.cmd("EVALSHA").arg(hash).arg(count.rules.len());
        for rule in &count.rules {
            command.arg(keys::cap_key(count.user, rule.scope, rule.window_seconds));
        }
        let member = inner.next_member.fetch_add(1, Ordering::Relaxed);
        command.arg(count.at_ms).arg(format!("{member:x}")).arg(1);
        for rule in &count.rules {
            command
                .arg(i64::from(rule.window_seconds) * 1000)
                .arg(rule.limit);
        }
    }
    let charges: Vec<(u64, u64)> = taken.charges.iter().map(|(l, a)| (*l, *a)).collect();
    for (line_item, amount) in &charges {
        pipe.cmd("INCRBY")
            .arg(keys::budget_key(*line_item))
            .arg(*amount);
    }
    let mut connection = inner.connection.clone();
    // The flush is not a request: it has the whole timeout, never a request's deadline.
    let deadline = Instant::now() + inner.config.timeout;
    let answer: Result<Vec<redis::Value>, Fallback> =
        round_trip(inner, deadline, pipe.query_async(&mut connection)).await;
    let Ok(replies) = answer else {
        requeue(inner, taken);
        return false;
    };
    let now_ms = inner.clock.now().as_millisecond();
    let (cap_replies, charge_replies) = replies.split_at(taken.counts.len().min(replies.len()));
    for (count, reply) in taken.counts.iter().zip(cap_replies) {
        if let Ok(reply) = redis::from_redis_value_ref::<Vec<i64>>(reply) {
            learn(&inner.full, count.user, &count.rules, &reply, now_ms);
        }
    }
    if let Ok(mut spent) = inner.spent.lock() {
        for ((line_item, _), reply) in charges.iter().zip(charge_replies) {
            if let Ok(total) = redis::from_redis_value_ref::<u64>(reply) {
                spent.insert(*line_item, total);
            }
        }
    }
    bump(&inner.counters.flushed, taken.counts.len() as u64);
    true
}

fn requeue(inner: &Inner, taken: Queue) {
    let Ok(mut queue) = inner.queue.lock() else {
        return;
    };
    let room = inner.config.queue_limit.saturating_sub(queue.counts.len());
    let lost = taken.counts.len().saturating_sub(room);
    bump(&inner.counters.dropped, lost as u64);
    let kept = taken.counts.into_iter().take(room);
    // Older counts first, so that the next flush sends them in the order they happened.
    let newer = std::mem::replace(&mut queue.counts, kept.collect());
    queue.counts.extend(newer);
    for (line_item, amount) in taken.charges {
        let pending = queue.charges.entry(line_item).or_default();
        *pending = pending.saturating_add(amount);
    }
}

async fn flush_loop(inner: Weak<Inner>) {
    let interval = match inner.upgrade() {
        Some(inner) => inner.config.flush_interval.max(Duration::from_millis(1)),
        None => return,
    };
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        flush(&inner).await;
    }
}

/// A start for member numbers that differs between processes, so that two edges never add the
/// same member at the same millisecond.
fn random_start() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}
