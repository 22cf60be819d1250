//! The map both in-process caches are built on: split by user key into [`SHARDS`] maps, each
//! behind its own lock (requests for different users rarely wait on each other), each holding at
//! most its share of a capacity. What a full shard drops is the cache's own choice.

use std::sync::Mutex;

use rustc_hash::FxHashMap;

pub(crate) const SHARDS: usize = 32;

/// Maps keyed by `K`, sharded by user key.
#[derive(Debug)]
pub(crate) struct Shards<K, V> {
    shards: Vec<Mutex<FxHashMap<K, V>>>,
    per_shard: usize,
}

impl<K, V> Shards<K, V> {
    /// Shards for `capacity` entries in all (at least one per shard).
    pub(crate) fn new(capacity: usize) -> Shards<K, V> {
        Shards {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    /// The shard that holds `user`'s entries.
    pub(crate) fn of(&self, user: u64) -> &Mutex<FxHashMap<K, V>> {
        &self.shards[(user as usize) % SHARDS]
    }

    /// The most entries one shard should hold.
    pub(crate) fn per_shard(&self) -> usize {
        self.per_shard
    }
}
