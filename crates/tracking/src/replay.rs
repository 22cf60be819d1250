//! Counting each decision's event once within its token's life, in bounded memory.

use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Number of independently locked shards. A check holds its shard's lock for one hash lookup
/// and insert (tens of nanoseconds), so with 16 shards even 32 threads calling at a million
/// checks a second keep each lock busy well under 1% of the time; more shards would only cost
/// memory (each has its own buckets) for contention that is already rare.
const SHARDS: usize = 16;

/// Sizing of a [`ReplayGuard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayConfig {
    /// Width of a bucket in seconds: nonces are grouped by expiry at this granularity, and a
    /// bucket is reused once all its tokens have expired.
    pub bucket_secs: NonZeroU32,
    /// Number of buckets. Tokens living up to `(buckets - 1) * bucket_secs` are remembered for
    /// their whole life ([`ReplayGuard::max_lifetime`]).
    pub buckets: NonZeroU32,
    /// Most nonces one bucket holds, over all shards: the new tokens expected per
    /// `bucket_secs`, with headroom. See [`ReplayGuard`] for what happens beyond it.
    pub bucket_capacity: NonZeroUsize,
}

impl Default for ReplayConfig {
    /// One-minute buckets, tokens of up to an hour, 262,144 new tokens a minute (≈ 4,400 a
    /// second): at most 16 M nonces, a few hundred MiB in the worst case.
    fn default() -> Self {
        ReplayConfig {
            bucket_secs: NonZeroU32::MIN.saturating_add(59),
            buckets: NonZeroU32::MIN.saturating_add(60),
            bucket_capacity: NonZeroUsize::MIN.saturating_add((1 << 18) - 1),
        }
    }
}

/// Remembers the nonces seen, each until its token expires, so that repeats count once.
///
/// Keep one guard per event kind: a decision's impression, click and conversion tokens share
/// its nonce and should each count once.
///
/// Layout: nonces are sharded by hash over 16 mutexes; within a shard they sit in a
/// ring of `buckets` sets, by expiry (`expires_at / bucket_secs`). A bucket whose tokens have
/// all expired is emptied when its slot is next needed, so expired nonces cost nothing to
/// forget.
///
/// Memory bound: at most [`capacity`](Self::capacity) = `buckets * bucket_capacity` nonces
/// (rounded up to a multiple of the shard count), each a `u64` in a hash set: about 10 to 20
/// bytes per nonce depending on the set's fill.
///
/// When full: if a bucket's share in a shard is full, that share is emptied and starts again
/// (counted in [`overflows`](Self::overflows)). Genuine events are never refused and memory
/// never grows, but a replay of a nonce forgotten this way counts again: at most once per
/// filling of its bucket, that is once per `bucket_capacity` new tokens of the same expiry
/// window, instead of once in its life.
///
/// Beyond the horizon: a token living longer than [`max_lifetime`](Self::max_lifetime) is
/// filed in the last bucket and forgotten when that bucket expires, so it counts at most once
/// per horizon (`buckets * bucket_secs`) rather than once in its life. Configure the horizon
/// above the longest token lifetime.
///
/// Callers' `now` should move forward (small disagreements between threads are harmless); a
/// caller lagging by more than the horizon may see nonces already forgotten.
pub struct ReplayGuard {
    shards: Box<[Padded]>,
    bucket_secs: i64,
    buckets: i64,
    shard_capacity: usize,
    overflows: AtomicU64,
    behind: AtomicU64,
}

/// A shard on its own cache lines, so that threads locking neighbouring shards do not
/// invalidate each other's lines (false sharing).
#[repr(align(128))]
struct Padded(Mutex<Shard>);

struct Shard {
    /// Indexed by `epoch % buckets`.
    ring: Box<[Bucket]>,
}

struct Bucket {
    /// `expires_at / bucket_secs` of the tokens held; `i64::MIN` before first use.
    epoch: i64,
    /// Mixed nonces (see [`mix`]), so the set's hasher need not hash again.
    nonces: HashSet<u64, BuildHasherDefault<Prehashed>>,
}

impl fmt::Debug for ReplayGuard {
    // Configuration only: the sets are large and behind locks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayGuard")
            .field("bucket_secs", &self.bucket_secs)
            .field("buckets", &self.buckets)
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl ReplayGuard {
    pub fn new(config: ReplayConfig) -> ReplayGuard {
        let buckets = config.buckets.get();
        let shards = (0..SHARDS)
            .map(|_| {
                let ring = (0..buckets)
                    .map(|_| Bucket {
                        epoch: i64::MIN,
                        nonces: HashSet::default(),
                    })
                    .collect();
                Padded(Mutex::new(Shard { ring }))
            })
            .collect();
        ReplayGuard {
            shards,
            bucket_secs: i64::from(config.bucket_secs.get()),
            buckets: i64::from(buckets),
            shard_capacity: config.bucket_capacity.get().div_ceil(SHARDS),
            overflows: AtomicU64::new(0),
            behind: AtomicU64::new(0),
        }
    }

    /// True the first time `nonce` is presented while its token is valid (`now < expires_at`);
    /// false for a repeat, for an expired token (nothing to count, nothing to remember), and
    /// when `now` is too far behind a time already seen to tell (counted in
    /// [`behind`](Self::behind)).
    ///
    /// A caller that counts an event only once it is recorded (appended to a log) and finds
    /// that it could not be undoes this with [`forget`](Self::forget), so that a retry counts.
    /// Claiming first and forgetting on failure, rather than checking first and remembering
    /// on success, keeps two deliveries of one nonce racing each other from both counting.
    pub fn first_time(&self, nonce: u64, expires_at: i64, now: i64) -> bool {
        if expires_at <= now {
            return false;
        }
        let current = now.div_euclid(self.bucket_secs);
        let Place {
            last,
            wanted,
            epoch,
            key,
        } = self.place(nonce, expires_at, now);
        let mut shard = self.lock(key);

        if wanted > last {
            // Beyond the horizon: an earlier sighting may have been filed under an earlier
            // `last`, so look in every bucket still alive.
            if shard
                .ring
                .iter()
                .any(|b| b.epoch >= current && b.nonces.contains(&key))
            {
                return false;
            }
        }
        // `rem_euclid` of a positive count is in 0..buckets, so it fits and indexes the ring.
        let bucket = &mut shard.ring[epoch.rem_euclid(self.buckets) as usize];
        if bucket.epoch > epoch {
            // The slot already serves a later expiry window: this `now` is behind one seen
            // before (the clock jumped forward and came back, or a thread raced a bucket
            // boundary in a token's last minute). Whether the nonce was seen went with the
            // slot's old set; not counting is the side that never counts twice.
            self.behind.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if bucket.epoch < epoch {
            // The slot's previous epoch is at least a whole ring older, so before `current`:
            // every token in it has expired.
            bucket.nonces.clear();
            bucket.epoch = epoch;
        } else if bucket.nonces.contains(&key) {
            return false;
        }
        if bucket.nonces.len() >= self.shard_capacity {
            bucket.nonces.clear();
            self.overflows.fetch_add(1, Ordering::Relaxed);
        }
        bucket.nonces.insert(key);
        true
    }

    /// Undoes a [`first_time`](Self::first_time) that answered true, given the same `nonce`,
    /// `expires_at` and `now`: the event it let through could not be recorded after all, and a
    /// retry of it should count. Does nothing if the nonce is not held (its bucket share
    /// overflowed meanwhile) or the token has expired.
    pub fn forget(&self, nonce: u64, expires_at: i64, now: i64) {
        if expires_at <= now {
            return;
        }
        let place = self.place(nonce, expires_at, now);
        let mut shard = self.lock(place.key);
        // Where `first_time` filed it, also for a token beyond the horizon (under the same `now`).
        let bucket = &mut shard.ring[place.epoch.rem_euclid(self.buckets) as usize];
        if bucket.epoch == place.epoch {
            bucket.nonces.remove(&place.key);
        }
    }

    /// Whether `nonce` is held for a token expiring at `expires_at`, as seen at `now`: counted
    /// by [`first_time`](Self::first_time) and neither forgotten nor expired. A read only: it
    /// claims nothing. (A nonce its bucket share dropped on overflow reads as not held.)
    pub fn seen(&self, nonce: u64, expires_at: i64, now: i64) -> bool {
        if expires_at <= now {
            return false;
        }
        let place = self.place(nonce, expires_at, now);
        let shard = self.lock(place.key);
        if place.wanted > place.last {
            let current = now.div_euclid(self.bucket_secs);
            return shard
                .ring
                .iter()
                .any(|b| b.epoch >= current && b.nonces.contains(&place.key));
        }
        let bucket = &shard.ring[place.epoch.rem_euclid(self.buckets) as usize];
        bucket.epoch == place.epoch && bucket.nonces.contains(&place.key)
    }

    /// Where a nonce is filed: the bucket of its expiry, or the last one for a token beyond the
    /// horizon.
    fn place(&self, nonce: u64, expires_at: i64, now: i64) -> Place {
        let current = now.div_euclid(self.bucket_secs);
        let last = current.saturating_add(self.buckets - 1);
        let wanted = expires_at.div_euclid(self.bucket_secs);
        Place {
            last,
            wanted,
            epoch: wanted.min(last),
            key: mix(nonce),
        }
    }

    /// The locked shard of a mixed nonce.
    fn lock(&self, key: u64) -> std::sync::MutexGuard<'_, Shard> {
        // Bits 32.. choose the shard: the set uses the low bits for its slots and the top 7 as
        // tags, which stay varied within a shard.
        let shard = &self.shards[(key >> 32) as usize % SHARDS];
        // A panic cannot leave a set half-updated (hash set operations on `u64` only panic on
        // allocation failure, which aborts), so a poisoned lock still guards valid data.
        shard.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Longest token lifetime, in seconds, that is remembered for the whole life.
    pub fn max_lifetime(&self) -> i64 {
        (self.buckets - 1).saturating_mul(self.bucket_secs)
    }

    /// Most nonces held at once (saturating, for absurd configurations).
    pub fn capacity(&self) -> usize {
        // `buckets` came from a `u32`, so it fits in `usize` on the 32- and 64-bit targets served.
        self.shard_capacity
            .saturating_mul(SHARDS)
            .saturating_mul(self.buckets as usize)
    }

    /// Nonces held now, including expired ones not yet reclaimed. Locks every shard in turn:
    /// for metrics and tests, not the hot path.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.0.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .ring
                    .iter()
                    .map(|b| b.nonces.len())
                    .sum::<usize>()
            })
            .sum()
    }

    /// Whether no nonce is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times a full bucket share was emptied early (see the type's documentation).
    /// Nonzero means `bucket_capacity` is too small for the traffic, or a flood.
    pub fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }

    /// Tokens not counted because the clock was behind a time already seen by more than the
    /// window the guard still remembers (see [`first_time`](Self::first_time)).
    pub fn behind(&self) -> u64 {
        self.behind.load(Ordering::Relaxed)
    }
}

/// Where [`ReplayGuard::place`] files a nonce.
struct Place {
    /// The latest expiry window the ring can hold now.
    last: i64,
    /// The nonce's own expiry window.
    wanted: i64,
    /// The window it is filed under: `wanted`, or `last` beyond the horizon.
    epoch: i64,
    /// The mixed nonce.
    key: u64,
}

/// The SplitMix64 finaliser: a bijection on `u64` (so mixed nonces are as unique as the
/// nonces) that spreads sequential or patterned nonces over shards and set slots.
fn mix(nonce: u64) -> u64 {
    let mut z = nonce.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Passes an already mixed `u64` through as its own hash.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    // The sets only hash `u64`s; the trait still requires a byte path.
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_spreads_sequential_nonces_over_shards() {
        let mut counts = [0usize; SHARDS];
        for nonce in 0..16_000u64 {
            counts[(mix(nonce) >> 32) as usize % SHARDS] += 1;
        }
        // 1,000 expected per shard; a good mix stays within a few standard deviations (≈ 31).
        assert!(
            counts.iter().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn expired_bucket_is_reused_and_emptied() {
        let guard = ReplayGuard::new(ReplayConfig {
            bucket_secs: NonZeroU32::new(10).unwrap(),
            buckets: NonZeroU32::new(3).unwrap(),
            bucket_capacity: NonZeroUsize::new(1000).unwrap(),
        });
        for nonce in 0..100 {
            assert!(guard.first_time(nonce, 15, 0));
        }
        assert_eq!(guard.len(), 100);
        // Epoch 1 (expiry 10..20) and epoch 4 share slot 1; at time 40 epoch 1 is long gone,
        // so the same nonces (same shards) with a new expiry empty the old sets and count again.
        for nonce in 0..100 {
            assert!(guard.first_time(nonce, 45, 40));
        }
        assert_eq!(guard.len(), 100);
    }
}
