//! The image tag's proof of impression. An image tag (`/ad?format=img` in an e-mail) carries no
//! signed token: serving its image is the impression. Its click (`format=click`, same
//! placement and cache buster) counts only if this installation served that image within the
//! click window: the edge that served it remembers the ad it showed under the key of placement
//! and cache buster, in memory and, with `[redis]`, in Redis, so the click may reach any edge.
//! A click whose image is not found is still redirected but logged as invalid.

use std::collections::{HashMap, VecDeque};
use std::hash::Hasher;
use std::sync::{Mutex, PoisonError};

use marquee_model::PlacementId;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The key an image and its click share: SipHash-1-3 of the placements and the cache buster.
/// Fixed by its definition, not left to std, so that edges of different builds agree during a
/// rolling upgrade (it also seeds the draws both requests make: [`rng`]).
pub(crate) fn key(placements: &[PlacementId], cache_buster: &str) -> u64 {
    let mut hasher = siphasher::sip::SipHasher13::new();
    for placement in placements {
        hasher.write(&placement.0.to_le_bytes());
    }
    hasher.write_u8(0xff);
    hasher.write(cache_buster.as_bytes());
    hasher.finish()
}

/// The generator an image tag's image and click requests both draw from, seeded by the key of
/// what they share ([`key`]). The hash (SipHash-1-3) and the generator (xoshiro256++) are fixed
/// by their definitions, not left to std or rand, whose choices may change between releases:
/// during a rolling upgrade the image and its click may reach edges of different builds.
pub(crate) fn rng(key: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(key)
}

/// The cache buster of an image-tag request, if it is one: 1 to 32 letters and digits with at
/// least one digit. An unfilled macro (`[CACHEBUSTER]`, `%%CACHEBUSTER%%`, `{cachebuster}`,
/// a bare `CACHEBUSTER`) or nothing at all is not: every visitor of that newsletter would share
/// it, and their images would look like one visitor's repeats.
pub(crate) fn cache_buster(given: Option<&str>) -> Option<&str> {
    crate::render::safe_cache_buster(given).filter(|cb| cb.bytes().any(|b| b.is_ascii_digit()))
}

/// An image tag's impression as served: the ad its click must go to and be counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImageServed {
    pub line_item: u64,
    pub creative: u64,
    pub placement: u64,
    /// The impression's event id, which its click shares (the manager dedupes both by it).
    pub nonce: u64,
    pub user: u64,
    /// When the image was served, in milliseconds since the epoch.
    pub served_at_ms: i64,
    /// What a click is worth (the CPC price at the decision), charged only if the line item
    /// charges untokened clicks.
    pub click_worth: u64,
}

const RECORD_LEN: usize = 56;

impl ImageServed {
    /// The record kept in Redis: seven little-endian 64-bit fields in declaration order.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECORD_LEN);
        for field in [
            self.line_item,
            self.creative,
            self.placement,
            self.nonce,
            self.user,
            self.served_at_ms as u64,
            self.click_worth,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out
    }

    /// The inverse of [`encode`](Self::encode); `None` for anything else.
    pub(crate) fn decode(bytes: &[u8]) -> Option<ImageServed> {
        if bytes.len() != RECORD_LEN {
            return None;
        }
        let mut fields = bytes
            .chunks_exact(8)
            .map(|chunk| chunk.try_into().map(u64::from_le_bytes));
        let mut next = || fields.next()?.ok();
        Some(ImageServed {
            line_item: next()?,
            creative: next()?,
            placement: next()?,
            nonce: next()?,
            user: next()?,
            served_at_ms: next()? as i64,
            click_worth: next()?,
        })
    }
}

/// Independently locked shards: an image request holds one for a hash insert.
const SHARDS: usize = 16;

/// The image-tag impressions this edge served within the click window, by key; bounded: past
/// `capacity` the oldest are forgotten first (their clicks then count only if Redis has them).
#[derive(Debug)]
pub(crate) struct ServedImages {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
}

#[derive(Debug, Default)]
struct Shard {
    served: HashMap<u64, ImageServed>,
    /// Keys in the order they were served, to forget the oldest first.
    order: VecDeque<(i64, u64)>,
}

impl ServedImages {
    pub(crate) fn new(capacity: usize) -> ServedImages {
        ServedImages {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, key: u64) -> std::sync::MutexGuard<'_, Shard> {
        // The key is a SipHash output: its low bits are as good as any.
        self.shards[(key as usize) % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers the first image served under `key`; a later one under the same key (a repeat
    /// within the window) keeps the first, whose ad the click belongs to.
    pub(crate) fn remember(&self, key: u64, served: ImageServed, window_ms: i64) {
        let mut shard = self.shard(key);
        let now = served.served_at_ms;
        while let Some(&(at, old)) = shard.order.front() {
            if at > now - window_ms && shard.served.len() < self.per_shard {
                break;
            }
            shard.order.pop_front();
            if shard.served.get(&old).is_some_and(|s| s.served_at_ms == at) {
                shard.served.remove(&old);
            }
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = shard.served.entry(key) {
            slot.insert(served);
            shard.order.push_back((now, key));
        }
    }

    /// The image served under `key` no longer than `window_ms` before `now_ms`.
    pub(crate) fn find(&self, key: u64, now_ms: i64, window_ms: i64) -> Option<ImageServed> {
        self.shard(key)
            .served
            .get(&key)
            .filter(|s| now_ms - s.served_at_ms <= window_ms)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(at: i64, line_item: u64) -> ImageServed {
        ImageServed {
            line_item,
            creative: 2,
            placement: 3,
            nonce: 4,
            user: 0,
            served_at_ms: at,
            click_worth: 1_000_000,
        }
    }

    /// The values come from the algorithms' definitions (SipHash-1-3 with zero keys over the
    /// placements' little-endian bytes, 0xff and the cache buster; SplitMix64 seeding
    /// xoshiro256++), computed outside this code base: a build whose hash or generator differs
    /// would send an image tag's click to another ad than its image showed.
    #[test]
    fn image_tag_draws_do_not_change_between_builds() {
        use rand::Rng;
        for (placements, cache_buster, draws) in [
            (
                &[2][..],
                "12345",
                [0xd9e3_cd47_bee7_30e6, 0xa0c9_f54e_8658_a73e],
            ),
            (
                &[2][..],
                "12346",
                [0x84ae_d141_e499_6485, 0xecd6_735a_423c_52a0],
            ),
            (
                &[3][..],
                "12345",
                [0x5acf_ff7a_0b0f_ce05, 0x13bc_6797_bde6_d92e],
            ),
        ] {
            let placements: Vec<PlacementId> = placements.iter().map(|&p| PlacementId(p)).collect();
            let mut rng = rng(key(&placements, cache_buster));
            assert_eq!(
                [rng.next_u64(), rng.next_u64()],
                draws,
                "{placements:?} {cache_buster}"
            );
        }
    }

    #[test]
    fn unfilled_macros_and_missing_values_are_no_cache_busters() {
        for bad in [
            None,
            Some(""),
            Some("[CACHEBUSTER]"),
            Some("%%CACHEBUSTER%%"),
            Some("{cachebuster}"),
            Some("CACHEBUSTER"),
            Some("${CACHEBUSTER}"),
        ] {
            assert_eq!(cache_buster(bad), None, "{bad:?}");
        }
        assert_eq!(cache_buster(Some("1732800000123")), Some("1732800000123"));
        assert_eq!(cache_buster(Some("a8f3e1")), Some("a8f3e1"));
    }

    #[test]
    fn the_record_round_trips_and_refuses_other_bytes() {
        let record = served(1_764_000_000_000, 7);
        assert_eq!(ImageServed::decode(&record.encode()), Some(record));
        assert_eq!(ImageServed::decode(b"7:2:3"), None);
    }

    #[test]
    fn an_image_is_found_within_its_window_only_and_the_first_one_stays() {
        let images = ServedImages::new(1_000);
        images.remember(9, served(10_000, 1), 5_000);
        images.remember(9, served(11_000, 2), 5_000);
        assert_eq!(images.find(9, 12_000, 5_000).map(|s| s.line_item), Some(1));
        assert_eq!(images.find(9, 15_001, 5_000), None);
        assert_eq!(images.find(8, 12_000, 5_000), None);
    }

    #[test]
    fn memory_is_bounded_by_forgetting_the_oldest() {
        let images = ServedImages::new(SHARDS * 4);
        for key in 0..(SHARDS as u64 * 100) {
            images.remember(key, served(1_000 + key as i64, 1), i64::MAX / 2);
        }
        let kept: usize = images
            .shards
            .iter()
            .map(|s| s.lock().unwrap().served.len())
            .sum();
        assert!(kept <= SHARDS * 4, "{kept}");
        let newest = SHARDS as u64 * 100 - 1;
        assert!(images.find(newest, 1_000 + newest as i64, 10).is_some());
        assert!(images.find(0, 1_000, 10).is_none());
    }
}
