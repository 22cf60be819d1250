//! Events per client and minute, counted in bounded memory.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Independently locked shards. A count holds its shard's lock for one hash-map update (tens
/// of nanoseconds), so sixteen keep contention rare even with every core counting at once.
const SHARDS: usize = 16;

/// Per-client event counts per minute, in bounded memory, sharded so that no lock is shared by
/// all cores. Time is passed in (unix seconds).
///
/// Windows are calendar minutes (`now_secs / 60`). The current and the previous minute are
/// kept, so a caller a little behind the others still counts in its own minute; an event older
/// than that is not counted (and is never reported over).
///
/// Memory bound: at most `keys_per_minute` keys a minute (split evenly over the shards), two
/// minutes kept, about 30 bytes per key. When a shard's share for the minute is full, keys not
/// yet seen that minute are not counted (and never reported over) until the next minute:
/// memory pressure must never flag a person. Such events are counted in
/// [`overflows`](Self::overflows); size the limiter above the distinct clients of a busy
/// minute.
pub struct RateLimiter {
    shards: Box<[Padded]>,
    shard_capacity: usize,
    overflows: AtomicU64,
}

/// A shard on its own cache lines, so that neighbouring shards' locks do not invalidate each
/// other's lines (false sharing).
#[repr(align(128))]
struct Padded(Mutex<[Window; 2]>);

struct Window {
    /// `now_secs / 60` of the counts held; `i64::MIN` before first use.
    minute: i64,
    counts: HashMap<u64, u32, BuildHasherDefault<Mix>>,
}

/// A fixed mix of the `u64` key (SplitMix64's finaliser) instead of the default keyed SipHash,
/// at a quarter of the cost. Colliding keys would have to be chosen, and a caller cannot
/// choose its address prefix freely: prefixes an attacker holds are contiguous, and contiguous
/// keys spread evenly.
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, key: u64) {
        let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl fmt::Debug for RateLimiter {
    // Configuration only: the counts are behind locks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("keys_per_minute", &self.keys_per_minute())
            .field("overflows", &self.overflows())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter remembering up to `keys_per_minute` keys a minute (rounded up to a multiple
    /// of the shard count; at least one per shard).
    pub fn new(keys_per_minute: usize) -> RateLimiter {
        let shard_capacity = keys_per_minute.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                Padded(Mutex::new([(); 2].map(|()| Window {
                    minute: i64::MIN,
                    counts: HashMap::default(),
                })))
            })
            .collect();
        RateLimiter {
            shards,
            shard_capacity,
            overflows: AtomicU64::new(0),
        }
    }

    /// Counts one event of `key` in the minute of `now_secs`; true when this event is beyond
    /// `limit` in that minute (the `limit + 1`-th and later).
    pub fn over(&self, key: u64, limit: u32, now_secs: i64) -> bool {
        let minute = now_secs.div_euclid(60);
        let shard = &self.shards[shard_of(key)];
        // A poisoned lock only means a count panicked; the counts are still valid.
        let mut windows = shard.0.lock().unwrap_or_else(PoisonError::into_inner);
        let window = &mut windows[minute.rem_euclid(2) as usize];
        if window.minute < minute {
            // This slot held the minute before last: start it afresh (keeps its memory).
            window.minute = minute;
            window.counts.clear();
        } else if window.minute > minute {
            return false;
        }
        let full = window.counts.len() >= self.shard_capacity;
        match window.counts.entry(key) {
            Entry::Occupied(mut seen) => {
                let count = seen.get_mut();
                *count = count.saturating_add(1);
                *count > limit
            }
            Entry::Vacant(_) if full => {
                self.overflows.fetch_add(1, Ordering::Relaxed);
                false
            }
            Entry::Vacant(new) => {
                new.insert(1);
                limit == 0
            }
        }
    }

    /// Events not counted because their shard's keys for the minute were all taken.
    pub fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }

    /// Keys remembered a minute, as rounded.
    pub fn keys_per_minute(&self) -> usize {
        self.shard_capacity * SHARDS
    }
}

fn shard_of(key: u64) -> usize {
    // The top bits of a Fibonacci hash: prefix keys differ in their low bits.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}
