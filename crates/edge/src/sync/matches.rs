//! User matches: which of our user ids an exchange's user id stands for, so that
//! `user.buyeruid` (or `user.id`) in a later bid request finds our user for frequency caps.
//!
//! In memory and per edge, bounded: each of [`SHARDS`] shards holds at most its share of the
//! capacity and, when full, forgets an arbitrary entry to make room. Sharing matches across
//! edges and restarts needs a shared store (Redis).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::notice::digest;

/// Shards of the map: a bid request locks one, briefly, so cores rarely wait on each other.
pub const SHARDS: usize = 64;

/// Our user id by the digest of (exchange, their user id).
type Shard = Mutex<HashMap<u64, Box<str>>>;

#[derive(Debug)]
pub struct UserSyncs {
    shards: Box<[Shard]>,
    per_shard: usize,
}

impl UserSyncs {
    /// A map for at most about `capacity` matches.
    pub fn new(capacity: usize) -> UserSyncs {
        UserSyncs {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, key: u64) -> &Shard {
        // The key is a digest: its low bits are as good as any. `SHARDS` fits in u64 and the
        // remainder in usize.
        &self.shards[usize::try_from(key % SHARDS as u64).unwrap_or(0)]
    }

    /// Records that `exchange` knows our user `ours` as `theirs`.
    pub fn record(&self, exchange: &str, theirs: &str, ours: &str) {
        let key = digest(&[exchange, theirs]);
        let mut shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if shard.len() >= self.per_shard
            && !shard.contains_key(&key)
            && let Some(&evicted) = shard.keys().next()
        {
            shard.remove(&evicted);
        }
        shard.insert(key, ours.into());
    }

    /// Our user id for the exchange's `theirs`, if they were matched.
    pub fn resolve(&self, exchange: &str, theirs: &str) -> Option<String> {
        let key = digest(&[exchange, theirs]);
        self.shard(key)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .map(|ours| ours.to_string())
    }

    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .len()
            })
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_are_per_exchange_and_the_latest_wins() {
        let syncs = UserSyncs::new(1_000);
        syncs.record("adx", "their-1", "ours-a");
        assert_eq!(syncs.resolve("adx", "their-1").as_deref(), Some("ours-a"));
        assert_eq!(syncs.resolve("other", "their-1"), None);
        syncs.record("adx", "their-1", "ours-b");
        assert_eq!(syncs.resolve("adx", "their-1").as_deref(), Some("ours-b"));
        assert_eq!(syncs.len(), 1);
    }

    #[test]
    fn memory_stays_bounded() {
        let syncs = UserSyncs::new(SHARDS * 2);
        for i in 0..10_000 {
            syncs.record("adx", &format!("their-{i}"), "ours");
        }
        assert!(syncs.len() <= SHARDS * 2, "{}", syncs.len());
        assert_eq!(
            syncs.resolve("adx", "their-9999").as_deref(),
            Some("ours"),
            "the newest match is kept"
        );
    }
}
