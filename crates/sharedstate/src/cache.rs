//! The in-process cache in front of Redis: which (user, scope, window) caps are known to be
//! full, and until when. A full cap stays full until its oldest counted time leaves the window
//! (nothing but time frees it), so a cached "full until T" is true until T whatever other edges
//! do, and answers a check without a round trip. Caps with room are never cached: another edge
//! may fill them at any moment.
//!
//! Bounded: a shard holds at most `capacity / SHARDS` entries; a full shard first drops what
//! has expired, then, if still full, everything (entries are only shortcuts: losing one costs a
//! round trip, never a wrong answer).

use std::sync::Mutex;

use rustc_hash::FxHashMap;

use crate::keys::Scope;

const SHARDS: usize = 32;

type Shard = FxHashMap<(u64, Scope, u32), i64>;

#[derive(Debug)]
pub struct FullCaps {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

impl FullCaps {
    pub fn new(capacity: usize) -> FullCaps {
        FullCaps {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, user: u64) -> &Mutex<Shard> {
        &self.shards[(user as usize) % SHARDS]
    }

    /// Records that a cap is full until `until_ms` (unix milliseconds).
    pub fn insert(&self, user: u64, scope: Scope, window_seconds: u32, until_ms: i64, now_ms: i64) {
        let Ok(mut shard) = self.shard(user).lock() else {
            return;
        };
        if shard.len() >= self.per_shard {
            shard.retain(|_, until| *until > now_ms);
            if shard.len() >= self.per_shard {
                shard.clear();
            }
        }
        shard.insert((user, scope, window_seconds), until_ms);
    }

    /// Whether a cap is known full at `now_ms`.
    pub fn is_full(&self, user: u64, scope: Scope, window_seconds: u32, now_ms: i64) -> bool {
        self.shard(user).lock().is_ok_and(|shard| {
            shard
                .get(&(user, scope, window_seconds))
                .is_some_and(|until| *until > now_ms)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_until_then_free_and_bounded() {
        let cache = FullCaps::new(SHARDS * 2);
        let scope = Scope::LineItem(3);
        cache.insert(1, scope, 60, 5_000, 0);
        assert!(cache.is_full(1, scope, 60, 4_999));
        assert!(
            !cache.is_full(1, scope, 60, 5_000),
            "free once the time has passed"
        );
        assert!(
            !cache.is_full(1, scope, 3600, 0),
            "another window is another cap"
        );
        assert!(!cache.is_full(2, scope, 60, 0), "another user");
        // Users 1, 1 + SHARDS, 1 + 2·SHARDS share a shard of two entries.
        let same_shard = 1 + SHARDS as u64;
        cache.insert(same_shard, scope, 60, 9_000, 0);
        cache.insert(same_shard + SHARDS as u64, scope, 60, 9_000, 6_000);
        assert!(
            !cache.is_full(1, scope, 60, 0),
            "the expired entry made room"
        );
        assert!(cache.is_full(same_shard, scope, 60, 6_000));
        cache.insert(same_shard + 3 * SHARDS as u64, scope, 60, 9_000, 6_000);
        assert!(
            !cache.is_full(same_shard, scope, 60, 6_000),
            "a shard full of live entries starts over"
        );
    }
}
