//! Frequency caps in Redis: the check-and-count script, the rules, counts and answers callers
//! hold, and the calls of the request path ([`SharedState::check_and_count`],
//! [`SharedState::known_full`], [`SharedState::cap_count`]) and of deliveries
//! ([`SharedState::count_later`]). In front of Redis sits the cache of caps known full
//! ([`FullCaps`]), which every script answer fills.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use redis::{Pipeline, RedisWrite, Script, ToRedisArgs};

use crate::cache::FullCaps;
use crate::keys::{self, Scope};
use crate::round_trip::Fallback;
use crate::state::{Inner, SharedState, process_random};
use crate::write_behind::QueuedCount;

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

/// One frequency cap to check: at most `limit` in any `window_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CapRule {
    pub scope: Scope,
    pub window_seconds: u32,
    pub limit: u32,
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
    pub(crate) member: u64,
    pub(crate) at_ms: i64,
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

/// The caps' part of the shared state.
#[derive(Debug)]
pub(crate) struct Caps {
    script: Script,
    /// Caps known full, and until when.
    full: FullCaps,
    /// Makes every counted member unique: a random start, then one more per count.
    next_member: AtomicU64,
}

impl Caps {
    pub(crate) fn new(cache_entries: usize) -> Caps {
        Caps {
            script: Script::new(CAPS_SCRIPT),
            full: FullCaps::new(cache_entries),
            next_member: AtomicU64::new(process_random()),
        }
    }

    fn known_full(&self, user: u64, rules: &[CapRule], now_ms: i64) -> bool {
        rules
            .iter()
            .any(|rule| self.full.is_full(user, rule, now_ms))
    }

    /// Caches the caps a script answer (`{counted, free_at…}`) reports full.
    pub(crate) fn learn(&self, user: u64, rules: &[CapRule], reply: &[i64], now_ms: i64) {
        for (rule, free_at) in rules.iter().zip(reply.iter().skip(1)) {
            if *free_at > now_ms {
                self.full.insert(user, *rule, *free_at, now_ms);
            }
        }
    }

    /// Adds the script's load to a flush's pipeline, so that its `EVALSHA`s find it even on a
    /// server that restarted.
    pub(crate) fn push_script_load(pipe: &mut Pipeline) {
        pipe.cmd("SCRIPT").arg("LOAD").arg(CAPS_SCRIPT).ignore();
    }

    /// Adds a queued count to a flush's pipeline: one forced `EVALSHA` (it counts even where a
    /// cap is full: the delivery happened).
    pub(crate) fn push_forced_count(&self, pipe: &mut Pipeline, queued: &QueuedCount) {
        pipe.cmd("EVALSHA")
            .arg(self.script.get_hash())
            .arg(queued.rules.len())
            .arg(CapKeys::new(queued.user, &queued.rules))
            .arg(CapArgs::new(queued.count, true, &queued.rules));
    }
}

impl SharedState {
    /// Whether one of `rules` is known full for `user` now, from the cache alone (no I/O; for
    /// the decision path).
    pub fn known_full(&self, user: u64, rules: &[CapRule]) -> bool {
        self.inner.caps.known_full(user, rules, self.inner.now_ms())
    }

    /// Draws the count of one decision (one relaxed atomic and a clock read): its member and
    /// its time, for [`check_and_count`] and, if that answers `Unavailable`, for
    /// [`count_later`]. See [`CapCount`].
    ///
    /// [`check_and_count`]: SharedState::check_and_count
    /// [`count_later`]: SharedState::count_later
    pub fn cap_count(&self) -> CapCount {
        CapCount {
            member: self.inner.caps.next_member.fetch_add(1, Ordering::Relaxed),
            at_ms: self.inner.now_ms(),
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
        if self.refused_from_cache(user, rules) {
            return CapAnswer::Refused;
        }
        match self.inner.run_check(user, rules, count, deadline).await {
            Ok(reply) => self.inner.answer_check(user, rules, &reply, count.at_ms),
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
        self.inner.queue_count(QueuedCount {
            user,
            rules: rules.to_vec(),
            count,
        });
    }

    /// Whether the cache knows one of `rules` full (counted as a cache refusal).
    fn refused_from_cache(&self, user: u64, rules: &[CapRule]) -> bool {
        let full = self.known_full(user, rules);
        if full {
            self.inner.counters.cache_refusals.inc();
        }
        full
    }
}

impl Inner {
    /// The check-and-count script's round trip (not forced): its reply, `{counted, free_at…}`.
    async fn run_check(
        &self,
        user: u64,
        rules: &[CapRule],
        count: CapCount,
        deadline: Instant,
    ) -> Result<Vec<i64>, Fallback> {
        let mut invocation = self.caps.script.prepare_invoke();
        invocation
            .key(CapKeys::new(user, rules))
            .arg(CapArgs::new(count, false, rules));
        let mut connection = self.connection.clone();
        self.round_trip(deadline, invocation.invoke_async(&mut connection))
            .await
    }

    /// Learns the caps the reply reports full, and reads its verdict.
    fn answer_check(&self, user: u64, rules: &[CapRule], reply: &[i64], now_ms: i64) -> CapAnswer {
        self.caps.learn(user, rules, reply, now_ms);
        if reply.first() == Some(&1) {
            CapAnswer::Allowed
        } else {
            CapAnswer::Refused
        }
    }
}

/// The caps script's `KEYS` for one count: `user`'s key of each rule, in order.
struct CapKeys<'a> {
    user: u64,
    rules: &'a [CapRule],
}

impl<'a> CapKeys<'a> {
    fn new(user: u64, rules: &'a [CapRule]) -> CapKeys<'a> {
        CapKeys { user, rules }
    }
}

impl ToRedisArgs for CapKeys<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        for rule in self.rules {
            keys::cap_key(self.user, rule.scope, rule.window_seconds).write_redis_args(out);
        }
    }

    fn num_of_args(&self) -> usize {
        self.rules.len()
    }
}

/// The caps script's `ARGV` for one count: its time, its member, whether it is forced, then a
/// window (ms) and a limit per rule, in the order of [`CapKeys`].
struct CapArgs<'a> {
    count: CapCount,
    forced: bool,
    rules: &'a [CapRule],
}

impl<'a> CapArgs<'a> {
    fn new(count: CapCount, forced: bool, rules: &'a [CapRule]) -> CapArgs<'a> {
        CapArgs {
            count,
            forced,
            rules,
        }
    }
}

impl ToRedisArgs for CapArgs<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        self.count.at_ms.write_redis_args(out);
        member_text(self.count.member).write_redis_args(out);
        i32::from(self.forced).write_redis_args(out);
        for rule in self.rules {
            (i64::from(rule.window_seconds) * 1000).write_redis_args(out);
            rule.limit.write_redis_args(out);
        }
    }

    fn num_of_args(&self) -> usize {
        3 + 2 * self.rules.len()
    }
}

/// A cap member as sent: the number in hex.
fn member_text(member: u64) -> String {
    format!("{member:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arguments a command would send, as text.
    fn sent(command: &redis::Cmd) -> Vec<String> {
        command
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_counts_keys_and_arguments_follow_the_scripts_layout() {
        let rules = [
            CapRule {
                scope: Scope::LineItem(5),
                window_seconds: 60,
                limit: 3,
            },
            CapRule {
                scope: Scope::Campaign(2),
                window_seconds: 3600,
                limit: 10,
            },
        ];
        let count = CapCount {
            member: 0xab,
            at_ms: 1_700,
        };
        let mut forced = redis::cmd("EVALSHA");
        forced
            .arg(CapKeys::new(7, &rules))
            .arg(CapArgs::new(count, true, &rules));
        assert_eq!(
            sent(&forced),
            [
                "EVALSHA",
                "mq:{u:0000000000000007}:cap:li:5:60",
                "mq:{u:0000000000000007}:cap:ca:2:3600",
                "1700",
                "ab",
                "1",
                "60000",
                "3",
                "3600000",
                "10",
            ]
        );
        let mut checked = redis::cmd("EVALSHA");
        checked.arg(CapArgs::new(count, false, &rules));
        assert_eq!(sent(&checked)[3], "0", "a check is not forced");
    }
}
