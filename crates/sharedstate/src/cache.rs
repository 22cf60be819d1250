//! The in-process cache in front of Redis: which caps (user, scope, window, limit) are known
//! to be full, and until when. A full cap stays full until its oldest counted time leaves the
//! window (nothing but time frees it), so a cached "full until T" is true until T whatever
//! other edges do, and answers a check without a round trip. Caps with room are never cached:
//! another edge may fill them at any moment.
//!
//! Bounded: a shard holds at most `capacity / SHARDS` entries; a full shard first drops what
//! has expired, then, if still full, everything (entries are only shortcuts: losing one costs a
//! round trip, never a wrong answer).
//!
//! The limit is part of the key: a cap raised since (1 a day becomes 5) is another cap, not
//! full because the old one was.

use crate::caps::CapRule;
use crate::shards::Shards;

#[derive(Debug)]
pub struct FullCaps {
    /// (user, cap) → the unix ms at which the cap has room again.
    shards: Shards<(u64, CapRule), i64>,
}

impl FullCaps {
    pub fn new(capacity: usize) -> FullCaps {
        FullCaps {
            shards: Shards::new(capacity),
        }
    }

    /// Records that a cap is full until `until_ms` (unix milliseconds).
    pub fn insert(&self, user: u64, rule: CapRule, until_ms: i64, now_ms: i64) {
        let Ok(mut shard) = self.shards.of(user).lock() else {
            return;
        };
        let per_shard = self.shards.per_shard();
        if shard.len() >= per_shard {
            shard.retain(|_, until| *until > now_ms);
            if shard.len() >= per_shard {
                shard.clear();
            }
        }
        shard.insert((user, rule), until_ms);
    }

    /// Whether a cap is known full at `now_ms`.
    pub fn is_full(&self, user: u64, rule: &CapRule, now_ms: i64) -> bool {
        self.shards.of(user).lock().is_ok_and(|shard| {
            shard
                .get(&(user, *rule))
                .is_some_and(|until| *until > now_ms)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Scope;
    use crate::shards::SHARDS;

    fn cap(window_seconds: u32, limit: u32) -> CapRule {
        CapRule {
            scope: Scope::LineItem(3),
            window_seconds,
            limit,
        }
    }

    #[test]
    fn full_until_then_free_and_bounded() {
        let cache = FullCaps::new(SHARDS * 2);
        let rule = cap(60, 1);
        cache.insert(1, rule, 5_000, 0);
        assert!(cache.is_full(1, &rule, 4_999));
        assert!(
            !cache.is_full(1, &rule, 5_000),
            "free once the time has passed"
        );
        assert!(
            !cache.is_full(1, &cap(3600, 1), 0),
            "another window is another cap"
        );
        assert!(
            !cache.is_full(1, &cap(60, 5), 0),
            "a raised limit is another cap"
        );
        assert!(!cache.is_full(2, &rule, 0), "another user");
        // Users 1, 1 + SHARDS, 1 + 2·SHARDS share a shard of two entries.
        let same_shard = 1 + SHARDS as u64;
        cache.insert(same_shard, rule, 9_000, 0);
        cache.insert(same_shard + SHARDS as u64, rule, 9_000, 6_000);
        assert!(!cache.is_full(1, &rule, 0), "the expired entry made room");
        assert!(cache.is_full(same_shard, &rule, 6_000));
        cache.insert(same_shard + 3 * SHARDS as u64, rule, 9_000, 6_000);
        assert!(
            !cache.is_full(same_shard, &rule, 6_000),
            "a shard full of live entries starts over"
        );
    }
}
