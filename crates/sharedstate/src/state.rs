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

/// Check-and-count over one user's caps, all in one slot. `ARGV`: now (unix ms), the count's
/// member (unique per count), `1` to count even when a cap is full (an impression that already
/// happened), then a window (ms) and a limit per key. Times at or before `now - window` are
/// dropped first. Counts in every key only if all have room (or when forced); a member already
/// in a key adds nothing there, so a count sent again is counted once: a queued count whose
/// first flush timed out after Redis ran it, or a decision's count queued after its check timed
/// out after Redis ran it ([`CapCount`]). Returns `{counted, free_at…}`: per key, 0 while it
/// has room, else the unix ms at which it will have room again.
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
    count = count + redis.call('ZADD', KEYS[i], now, ARGV[2])
    redis.call('PEXPIRE', KEYS[i], window)
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

/// A queued charge, applied once however often it is sent. `KEYS`: the budget counter, this
/// process's mark for it (the sequence number of the last charge it applied there). `ARGV`:
/// amount, the charge's sequence number, the mark's lifetime (ms). A process numbers a line
/// item's next charge only once the previous one is confirmed, so its charges reach a counter
/// in increasing order and one not above the mark was applied already. Returns the total.
const CHARGE_SCRIPT: &str = r"
if tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
";

/// Counts and charges per write-behind pipeline (besides the scripts' loads): bounds how long
/// one chunk holds Redis (and the requests queued behind it on the connection) and what one
/// failure leaves to send again.
const FLUSH_CHUNK: usize = 500;

/// How long a process's mark of the last charge it applied to a line item's counter
/// ([`CHARGE_SCRIPT`]) outlives that charge. A charge is resent until a flush confirms it, so
/// only one applied and then left unconfirmed by an outage longer than this would count twice;
/// the marks number at most edges × line items charged within it.
const CHARGE_MARK_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// How long [`drain_at_exit`] waits for Redis to take what is queued.
const EXIT_DRAIN_WITHIN: Duration = Duration::from_secs(2);

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

/// One frequency cap to check: at most `limit` in any `window_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// One count of a decision against its caps: the member it adds to every cap key (unique per
/// count) and its time, drawn once with [`SharedState::cap_count`] and carried through. The
/// request path's [`check_and_count`] sends it; when that answers `Unavailable` (a timeout may
/// come after Redis ran the script) and local state serves the decision, [`count_later`]
/// queues the same count, which adds its member again and so changes nothing where Redis had
/// counted it. However often one count is sent, it counts once per cap key.
///
/// [`check_and_count`]: SharedState::check_and_count
/// [`count_later`]: SharedState::count_later
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapCount {
    member: u64,
    at_ms: i64,
}

/// The answer of [`SharedState::check_and_count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapAnswer {
    /// Every cap had room; one more is counted in Redis.
    Allowed,
    /// A cap is full (learned from Redis now, or from the cache); nothing was counted.
    Refused,
    /// Redis did not decide (it may have counted all the same): local state does, and a
    /// delivery it allows should be queued with [`SharedState::count_later`], with the same
    /// [`CapCount`].
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

/// A count that happened while Redis could not be asked, or a forced one. Its member and time
/// are its [`CapCount`]'s, drawn before it is queued (for a decision, before its check), so
/// every send of it adds the same member at the same time.
#[derive(Debug, Clone)]
struct QueuedCount {
    user: u64,
    rules: Vec<CapRule>,
    at_ms: i64,
    member: u64,
}

/// A budget charge numbered for sending: sent as it is until a flush confirms it, and applied
/// once by [`CHARGE_SCRIPT`] whatever the number of sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Charge {
    line_item: u64,
    amount: u64,
    seq: u64,
}

#[derive(Debug, Default)]
struct Queue {
    counts: Vec<QueuedCount>,
    /// Budget charges summed per line item, not numbered yet.
    charges: FxHashMap<u64, u64>,
    /// Numbered charges a flush sent without confirmation, by line item: at most one each, as
    /// a line item's next charge is numbered only after its previous one is confirmed.
    unconfirmed: FxHashMap<u64, Charge>,
    /// The last number given to a charge.
    last_seq: u64,
}

/// What one flush sends.
#[derive(Debug, Default)]
struct Batch {
    counts: Vec<QueuedCount>,
    charges: Vec<Charge>,
}

impl Queue {
    /// Takes every count, the unconfirmed charges, and a newly numbered charge for each line
    /// item without one unconfirmed; the others' sums wait for the next flush.
    fn take(&mut self) -> Batch {
        let unconfirmed = &self.unconfirmed;
        let last_seq = &mut self.last_seq;
        let mut numbered = Vec::new();
        self.charges.retain(|&line_item, &mut amount| {
            if unconfirmed.contains_key(&line_item) {
                return true;
            }
            *last_seq += 1;
            numbered.push(Charge {
                line_item,
                amount,
                seq: *last_seq,
            });
            false
        });
        let mut charges: Vec<Charge> = self.unconfirmed.drain().map(|(_, c)| c).collect();
        charges.extend(numbered);
        Batch {
            counts: std::mem::take(&mut self.counts),
            charges,
        }
    }

    /// Puts back what a flush did not get confirmed, within `limit` counts: older counts first,
    /// so that the next flush sends them in the order they happened.
    fn put_back(&mut self, counts: Vec<QueuedCount>, charges: Vec<Charge>, limit: usize) -> usize {
        let room = limit.saturating_sub(self.counts.len());
        let lost = counts.len().saturating_sub(room);
        let newer = std::mem::replace(&mut self.counts, counts);
        self.counts.truncate(room);
        self.counts.extend(newer);
        for charge in charges {
            self.unconfirmed.insert(charge.line_item, charge);
        }
        lost
    }
}

#[derive(Debug)]
struct Inner {
    config: SharedConfig,
    connection: ConnectionManager,
    caps_script: Script,
    budget_script: Script,
    charge_script: Script,
    clock: Arc<dyn Clock>,
    breaker: Breaker,
    full: FullCaps,
    queue: Mutex<Queue>,
    /// Held by the flush under way: a line item's charges must reach Redis one after another.
    flushing: tokio::sync::Mutex<()>,
    /// The last shared total seen per line item's budget counter.
    spent: Mutex<FxHashMap<u64, u64>>,
    /// Profiles read from Redis, and users known to have none, with when they were read.
    profiles: ProfileCache,
    /// Makes every counted member unique: a random start, then one more per count.
    next_member: AtomicU64,
    /// This process's name in its charge marks ([`CHARGE_SCRIPT`]), random: a restarted
    /// process numbers its charges from 1 again under a new name.
    writer: u64,
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
            charge_script: Script::new(CHARGE_SCRIPT),
            clock,
            queue: Mutex::new(Queue::default()),
            flushing: tokio::sync::Mutex::new(()),
            spent: Mutex::new(FxHashMap::default()),
            next_member: AtomicU64::new(random_start()),
            writer: random_start(),
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
        rules
            .iter()
            .any(|rule| self.inner.full.is_full(user, rule, now_ms))
    }

    /// Draws the count of one decision (one relaxed atomic and a clock read): its member and
    /// its time, for [`check_and_count`] and, if that answers `Unavailable`, for
    /// [`count_later`]. See [`CapCount`].
    ///
    /// [`check_and_count`]: SharedState::check_and_count
    /// [`count_later`]: SharedState::count_later
    pub fn cap_count(&self) -> CapCount {
        CapCount {
            member: self.next_member(),
            at_ms: self.now_ms(),
        }
    }

    /// Checks every rule for `user` and, if all have room, adds `count` to each: one atomic
    /// round trip (a script), within `deadline` and the configured timeout. A cap the cache
    /// knows full is refused without a round trip. When the answer is `Unavailable` and local
    /// state serves the decision anyway, queue the same `count` ([`count_later`]): the check
    /// may have counted in Redis all the same (it timed out after Redis ran it), and the same
    /// count sent again adds nothing.
    ///
    /// [`count_later`]: SharedState::count_later
    pub async fn check_and_count(
        &self,
        user: u64,
        rules: &[CapRule],
        count: CapCount,
        deadline: Instant,
    ) -> CapAnswer {
        if rules.is_empty() {
            return CapAnswer::Allowed;
        }
        if self.known_full(user, rules) {
            bump(&self.inner.counters.cache_refusals, 1);
            return CapAnswer::Refused;
        }
        let now_ms = count.at_ms;
        let mut invocation = self.inner.caps_script.prepare_invoke();
        for rule in rules {
            invocation.key(keys::cap_key(user, rule.scope, rule.window_seconds));
        }
        invocation.arg(now_ms).arg(member_text(count.member)).arg(0);
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

    /// Queues `count` of `rules` for `user`, sent with the next flush whatever the caps say:
    /// a delivery local state allowed while Redis was unavailable (the count its
    /// [`check_and_count`] was given, which Redis may have counted already: then this adds
    /// nothing), or one that happened without a decision (an exchange's billing notice: a
    /// count of its own, [`cap_count`]).
    ///
    /// [`check_and_count`]: SharedState::check_and_count
    /// [`cap_count`]: SharedState::cap_count
    pub fn count_later(&self, user: u64, rules: &[CapRule], count: CapCount) {
        if rules.is_empty() {
            return;
        }
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
            at_ms: count.at_ms,
            member: count.member,
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
        let queued = self.inner.queue.lock().ok().and_then(|q| {
            sum_known(
                q.charges.get(&line_item).copied(),
                q.unconfirmed.get(&line_item).map(|c| c.amount),
            )
        });
        sum_known(seen, queued)
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

    /// Remembers an image tag's served impression (`record`, the edge's encoding) under `key`
    /// for `ttl`, so that its click may reach any edge: one `SET … EX … NX` in the background
    /// on the current Tokio runtime (the first image served under a key is the one its clicks
    /// belong to). A failure is counted with the round trips; the click then finds the image
    /// only on the edge that served it.
    pub fn remember_image(&self, key: u64, record: Vec<u8>, ttl: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let state = self.clone();
        runtime.spawn(async move {
            let mut connection = state.inner.connection.clone();
            let mut command = redis::cmd("SET");
            command
                .arg(keys::image_key(key))
                .arg(record)
                .arg("EX")
                .arg(ttl.as_secs().max(1))
                .arg("NX");
            let deadline = Instant::now() + state.inner.config.flush_timeout;
            let _: Result<Option<String>, Fallback> = state
                .round_trip(deadline, command.query_async(&mut connection))
                .await;
        });
    }

    /// The image tag impression remembered under `key` ([`remember_image`]), within
    /// `deadline`; `None` when there is none or Redis did not answer in time.
    ///
    /// [`remember_image`]: SharedState::remember_image
    pub async fn image(&self, key: u64, deadline: Instant) -> Option<Vec<u8>> {
        let mut connection = self.inner.connection.clone();
        let mut command = redis::cmd("GET");
        command.arg(keys::image_key(key));
        self.round_trip(deadline, command.query_async(&mut connection))
            .await
            .ok()
            .flatten()
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

    /// Sends what is queued now (the flusher does this every `flush_interval`), in chunks of
    /// up to 500 counts and charges, each within `flush_timeout`; nothing while the breaker is
    /// not closed. Returns whether everything queued when it started was sent; what was not
    /// stays queued, and a count or charge sent again is counted once.
    pub async fn flush(&self) -> bool {
        flush(&self.inner, Round::Regular).await
    }

    /// Flushes until the queue is empty or `within` has passed, whatever the breaker says (a
    /// stopping edge has no request left for it to protect). Returns whether it emptied.
    pub async fn drain(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if flush(&self.inner, Round::Last(deadline)).await {
                return true;
            }
            let pause = self
                .inner
                .config
                .flush_interval
                .min(deadline.saturating_duration_since(Instant::now()));
            if pause.is_zero() {
                return false;
            }
            tokio::time::sleep(pause).await;
        }
    }

    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// Counts and charges waiting for the next flush.
    pub fn queued(&self) -> usize {
        self.inner.queue.lock().map_or(0, |q| {
            q.counts.len() + q.charges.len() + q.unconfirmed.len()
        })
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
            "# HELP marquee_redis_budget_spent A line item's shared budget counter (all edges, lease units), read back every second for each line item this edge has charged.\n\
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

    fn next_member(&self) -> u64 {
        self.inner.next_member.fetch_add(1, Ordering::Relaxed)
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
            full.insert(user, *rule, *free_at, now_ms);
        }
    }
}

/// Counts a fallback in the metrics and returns it.
fn fallback(counters: &Counters, reason: Fallback) -> Fallback {
    let counter = match reason {
        Fallback::BreakerOpen => &counters.fallbacks_breaker,
        Fallback::Timeout => &counters.fallbacks_timeout,
        Fallback::Error => &counters.fallbacks_error,
        Fallback::NoTime => &counters.fallbacks_no_time,
    };
    bump(counter, 1);
    reason
}

/// A request's round trip: through the breaker, within the deadline and the timeout; its
/// outcome feeds the breaker.
async fn round_trip<T>(
    inner: &Inner,
    deadline: Instant,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, Fallback> {
    let started = Instant::now();
    let budget = deadline
        .saturating_duration_since(started)
        .min(inner.config.timeout);
    if budget.is_zero() {
        return Err(fallback(&inner.counters, Fallback::NoTime));
    }
    if !inner.breaker.allow(started) {
        return Err(fallback(&inner.counters, Fallback::BreakerOpen));
    }
    let answer = timed(inner, budget, call).await;
    if answer.is_ok() {
        inner.breaker.success();
    } else {
        inner.breaker.failure(Instant::now());
    }
    answer
}

/// One round trip within `budget`, counted in the metrics; the breaker is the caller's.
async fn timed<T>(
    inner: &Inner,
    budget: Duration,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, Fallback> {
    let counters = &inner.counters;
    let started = Instant::now();
    match tokio::time::timeout(budget, call).await {
        Ok(Ok(value)) => {
            bump(&counters.round_trips, 1);
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            bump(&counters.round_trip_micros, micros);
            Ok(value)
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, "redis round trip failed");
            bump(&counters.errors, 1);
            Err(fallback(counters, Fallback::Error))
        }
        Err(_) => {
            bump(&counters.timeouts, 1);
            Err(fallback(counters, Fallback::Timeout))
        }
    }
}

/// Which flush: the flusher's, or a stopping edge's last.
#[derive(Debug, Clone, Copy)]
enum Round {
    /// Sends nothing while the breaker is not closed (Redis failing requests gets no chunks
    /// on top), and chunks for as long as they succeed.
    Regular,
    /// Sends whatever the breaker says, and nothing past the deadline.
    Last(Instant),
}

/// Sends the queue in chunks of at most [`FLUSH_CHUNK`] counts and charges, charges first
/// (fewer, and money): per chunk, the scripts' loads (so that `EVALSHA` finds them even on a
/// server that restarted), a forced caps `EVALSHA` per queued count, a [`CHARGE_SCRIPT`]
/// `EVALSHA` per charge. At the first chunk that fails it stops: that chunk and the rest go
/// back in the queue. A chunk that timed out may have run in Redis; sent again, it changes
/// nothing there (members fixed when queued, charges applied once), and, not being a request,
/// it never feeds the breaker. Returns whether every chunk was sent.
async fn flush(inner: &Inner, round: Round) -> bool {
    let flushing = inner.flushing.lock();
    let _flushing = match round {
        Round::Regular => flushing.await,
        Round::Last(deadline) => match tokio::time::timeout_at(deadline.into(), flushing).await {
            Ok(guard) => guard,
            Err(_) => return false,
        },
    };
    let batch = match inner.queue.lock() {
        Ok(mut queue) => queue.take(),
        Err(_) => return false,
    };
    let mut counts = batch.counts.into_iter();
    let mut charges = batch.charges.into_iter();
    loop {
        let chunk_charges: Vec<Charge> = charges.by_ref().take(FLUSH_CHUNK).collect();
        let chunk = Batch {
            counts: counts
                .by_ref()
                .take(FLUSH_CHUNK - chunk_charges.len())
                .collect(),
            charges: chunk_charges,
        };
        if chunk.counts.is_empty() && chunk.charges.is_empty() {
            return true;
        }
        if send_chunk(inner, round, &chunk).await.is_err() {
            if let Ok(mut queue) = inner.queue.lock() {
                let lost = queue.put_back(
                    chunk.counts.into_iter().chain(counts).collect(),
                    chunk.charges.into_iter().chain(charges).collect(),
                    inner.config.queue_limit,
                );
                bump(&inner.counters.dropped, lost as u64);
            }
            return false;
        }
    }
}

/// Sends one chunk within the flush timeout and learns from its answers.
async fn send_chunk(inner: &Inner, round: Round, chunk: &Batch) -> Result<(), Fallback> {
    let budget = match round {
        Round::Regular => {
            if inner.breaker.state() != BreakerState::Closed {
                return Err(fallback(&inner.counters, Fallback::BreakerOpen));
            }
            inner.config.flush_timeout
        }
        Round::Last(deadline) => inner
            .config
            .flush_timeout
            .min(deadline.saturating_duration_since(Instant::now())),
    };
    if budget.is_zero() {
        return Err(fallback(&inner.counters, Fallback::NoTime));
    }
    let mut pipe = redis::pipe();
    if !chunk.charges.is_empty() {
        pipe.cmd("SCRIPT").arg("LOAD").arg(CHARGE_SCRIPT).ignore();
    }
    if !chunk.counts.is_empty() {
        pipe.cmd("SCRIPT").arg("LOAD").arg(CAPS_SCRIPT).ignore();
    }
    let mark_ms = u64::try_from(CHARGE_MARK_LIFETIME.as_millis()).unwrap_or(u64::MAX);
    for charge in &chunk.charges {
        pipe.cmd("EVALSHA")
            .arg(inner.charge_script.get_hash())
            .arg(2)
            .arg(keys::budget_key(charge.line_item))
            .arg(keys::charge_mark_key(charge.line_item, inner.writer))
            .arg(charge.amount)
            .arg(charge.seq)
            .arg(mark_ms);
    }
    for count in &chunk.counts {
        let command = pipe
            .cmd("EVALSHA")
            .arg(inner.caps_script.get_hash())
            .arg(count.rules.len());
        for rule in &count.rules {
            command.arg(keys::cap_key(count.user, rule.scope, rule.window_seconds));
        }
        command
            .arg(count.at_ms)
            .arg(member_text(count.member))
            .arg(1);
        for rule in &count.rules {
            command
                .arg(i64::from(rule.window_seconds) * 1000)
                .arg(rule.limit);
        }
    }
    let mut connection = inner.connection.clone();
    let replies: Vec<redis::Value> =
        timed(inner, budget, pipe.query_async(&mut connection)).await?;
    let (charge_replies, cap_replies) = replies.split_at(chunk.charges.len().min(replies.len()));
    if let Ok(mut spent) = inner.spent.lock() {
        for (charge, reply) in chunk.charges.iter().zip(charge_replies) {
            if let Ok(total) = redis::from_redis_value_ref::<u64>(reply) {
                spent.insert(charge.line_item, total);
            }
        }
    }
    let now_ms = inner.clock.now().as_millisecond();
    for (count, reply) in chunk.counts.iter().zip(cap_replies) {
        if let Ok(reply) = redis::from_redis_value_ref::<Vec<i64>>(reply) {
            learn(&inner.full, count.user, &count.rules, &reply, now_ms);
        }
    }
    bump(&inner.counters.flushed, chunk.counts.len() as u64);
    Ok(())
}

async fn flush_loop(inner: Weak<Inner>) {
    let interval = match inner.upgrade() {
        Some(inner) => inner.config.flush_interval.max(Duration::from_millis(1)),
        None => return,
    };
    let mut refreshed = Instant::now();
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        flush(&inner, Round::Regular).await;
        if refreshed.elapsed() >= SPENT_REFRESH {
            refreshed = Instant::now();
            refresh_spent(&inner).await;
        }
    }
}

/// How often an edge reads back the shared budget counters it knows, so that
/// `marquee_redis_budget_spent` follows what other edges charge after this one stopped.
const SPENT_REFRESH: Duration = Duration::from_secs(1);

/// Reads the shared total of every line item this process has seen charged (one pipelined
/// round trip), so the figure it reports stays true when it no longer charges them itself.
async fn refresh_spent(inner: &Inner) {
    let line_items: Vec<u64> = match inner.spent.lock() {
        Ok(spent) => spent.keys().copied().collect(),
        Err(_) => return,
    };
    if line_items.is_empty() {
        return;
    }
    let mut pipeline = redis::pipe();
    for line_item in &line_items {
        pipeline.cmd("GET").arg(keys::budget_key(*line_item));
    }
    let mut connection = inner.connection.clone();
    let deadline = Instant::now() + inner.config.flush_timeout;
    let totals: Result<Vec<Option<u64>>, Fallback> =
        round_trip(inner, deadline, pipeline.query_async(&mut connection)).await;
    let Ok(totals) = totals else {
        return;
    };
    if let Ok(mut spent) = inner.spent.lock() {
        for (line_item, total) in line_items.into_iter().zip(totals) {
            if let Some(total) = total {
                spent.insert(line_item, total);
            }
        }
    }
}

/// Sends what `shared` (an edge's, if it has one) holds queued, for a graceful stop: waits at
/// most 2 s, and logs what it could not send (lost with the process). Takes the `Option` the
/// edge holds, so that its stop calls this whether or not `[redis]` is set.
///
/// Not while the breaker is open: Redis was found down, and the connection's reconnect may be
/// a future an edge worker's runtime started, whose timers die with that runtime (polled after
/// it, they panic). The drain runs as a task of its own, so that such a panic, should a
/// reconnect begin anyway, costs the queue and not the stop.
pub async fn drain_at_exit(shared: Option<&SharedState>) {
    let Some(shared) = shared else {
        return;
    };
    let queued = shared.queued();
    if queued == 0 {
        return;
    }
    if shared.breaker_state() == BreakerState::Open {
        tracing::warn!(
            lost = queued,
            "redis: down at the stop; queued counts and charges not sent"
        );
        return;
    }
    let state = shared.clone();
    match tokio::spawn(async move { state.drain(EXIT_DRAIN_WITHIN).await }).await {
        Ok(true) => {}
        Ok(false) | Err(_) => tracing::warn!(
            lost = shared.queued(),
            "redis: queued counts and charges not sent before the stop"
        ),
    }
}

/// The sum of the parts known; `None` when none is.
fn sum_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

/// A cap member as sent: the number in hex.
fn member_text(member: u64) -> String {
    format!("{member:x}")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn count(member: u64) -> QueuedCount {
        QueuedCount {
            user: 1,
            rules: Vec::new(),
            at_ms: 0,
            member,
        }
    }

    #[test]
    fn a_line_items_next_charge_is_numbered_only_after_the_last_is_confirmed() {
        let mut queue = Queue::default();
        queue.charges.insert(7, 300);
        queue.counts.push(count(1));
        let first = queue.take();
        assert_eq!(
            first.charges,
            [Charge {
                line_item: 7,
                amount: 300,
                seq: 1
            }]
        );
        // Unconfirmed (the flush failed): it goes back as it was, and what came meanwhile waits.
        queue.charges.insert(7, 50);
        queue.charges.insert(8, 10);
        queue.counts.push(count(2));
        assert_eq!(queue.put_back(first.counts, first.charges, 10), 0);
        let second = queue.take();
        let mut charges = second.charges.clone();
        charges.sort_by_key(|c| c.line_item);
        assert_eq!(
            charges,
            [
                Charge {
                    line_item: 7,
                    amount: 300,
                    seq: 1
                },
                Charge {
                    line_item: 8,
                    amount: 10,
                    seq: 2
                },
            ]
        );
        let members: Vec<u64> = second.counts.iter().map(|c| c.member).collect();
        assert_eq!(members, [1, 2], "older counts first");
        assert_eq!(queue.charges.get(&7), Some(&50));
        // Confirmed: the next flush numbers the 50.
        let third = queue.take();
        assert_eq!(
            third.charges,
            [Charge {
                line_item: 7,
                amount: 50,
                seq: 3
            }]
        );
    }

    #[test]
    fn counts_put_back_keep_within_the_limit_oldest_first() {
        let mut queue = Queue::default();
        queue.counts.push(count(9));
        let lost = queue.put_back(vec![count(1), count(2), count(3)], Vec::new(), 3);
        assert_eq!(lost, 1);
        let members: Vec<u64> = queue.counts.iter().map(|c| c.member).collect();
        assert_eq!(members, [1, 2, 9]);
    }
}
