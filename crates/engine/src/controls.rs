//! What the engine asks of its caller per line item: frequency caps and pacing controls.
//! Both are traits so that the edge can back them with in-process state or Redis.

use std::hash::Hasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use jiff::Timestamp;
use marquee_model::{CampaignId, FrequencyCap, LineItemId};
use rustc_hash::FxHashMap;

/// Frequency caps: may this user see one more impression?
///
/// Its implementations (`NoCaps` and `LocalCaps` here, the edge's `EdgeCaps`) repeat this
/// signature, as every implementation of a trait does; their bodies differ.
pub trait FrequencyCaps {
    /// `line_item_caps` and `campaign_caps` are the caps of the line item and of its campaign;
    /// all must allow one more.
    fn allows(
        &self,
        user: &str,
        line_item: (LineItemId, &[FrequencyCap]),
        campaign: (CampaignId, &[FrequencyCap]),
        now: Timestamp,
    ) -> bool;
}

/// Caps that never refuse (for bids without user consent, or tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCaps;

impl FrequencyCaps for NoCaps {
    fn allows(
        &self,
        _: &str,
        _: (LineItemId, &[FrequencyCap]),
        _: (CampaignId, &[FrequencyCap]),
        _: Timestamp,
    ) -> bool {
        true
    }
}

/// A stable 64-bit key for a user id, never 0 (which means "no user"). The key outlives a
/// build: it is in shared cap counts in Redis and in tracking and notice tokens, so the hash
/// is spelled out (SipHash-1-3 with zero keys over the id's bytes and a 0xff terminator, which
/// is what std's `DefaultHasher` gave) rather than left to `DefaultHasher`, whose algorithm
/// may change with the toolchain.
pub fn user_key(id: &str) -> u64 {
    let mut hasher = siphasher::sip::SipHasher13::new();
    hasher.write(id.as_bytes());
    hasher.write_u8(0xff);
    hasher.finish().max(1)
}

/// In-process caps: recent impression times per user and line item or campaign, in shards so
/// that two cores rarely wait on the same lock. Each entry keeps only as many times as its
/// largest cap counts, and a shard holds at most `capacity / SHARDS` entries: when full, the
/// eighth with the oldest last impression is evicted (those users may see the ad again early;
/// memory stays bounded).
#[derive(Debug)]
pub struct LocalCaps {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

/// Impression times (unix seconds, oldest first) per (user key, scope).
type Shard = FxHashMap<(u64, Scope), Vec<i64>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Scope {
    LineItem(LineItemId),
    Campaign(CampaignId),
}

const SHARDS: usize = 64;

impl Default for LocalCaps {
    /// Room for a million (user, line item or campaign) entries.
    fn default() -> Self {
        LocalCaps::with_capacity(1 << 20)
    }
}

impl LocalCaps {
    pub fn with_capacity(entries: usize) -> LocalCaps {
        LocalCaps {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
            per_shard: (entries / SHARDS).max(8),
        }
    }

    fn shard(&self, user: u64) -> &Mutex<Shard> {
        &self.shards[(user as usize) % SHARDS]
    }

    /// Entries held, all shards together.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.len()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts one impression of a line item (and its campaign) for a user key.
    pub fn record(
        &self,
        user: u64,
        line_item: (LineItemId, &[FrequencyCap]),
        campaign: (CampaignId, &[FrequencyCap]),
        now: Timestamp,
    ) {
        let Ok(mut shard) = self.shard(user).lock() else {
            return;
        };
        for (scope, caps) in [
            (Scope::LineItem(line_item.0), line_item.1),
            (Scope::Campaign(campaign.0), campaign.1),
        ] {
            let keep = caps.iter().map(|c| c.count as usize).max().unwrap_or(0);
            if keep == 0 {
                continue;
            }
            if shard.len() >= self.per_shard && !shard.contains_key(&(user, scope)) {
                evict_oldest(&mut shard, self.per_shard / 8);
            }
            let times = shard.entry((user, scope)).or_default();
            times.push(now.as_second());
            if times.len() > keep {
                let excess = times.len() - keep;
                times.drain(..excess);
            }
        }
    }
}

/// Removes the `count` entries (at least one) whose last impression is oldest.
fn evict_oldest(shard: &mut Shard, count: usize) {
    let mut last_seen: Vec<(i64, (u64, Scope))> = shard
        .iter()
        .map(|(key, times)| (times.last().copied().unwrap_or(i64::MIN), *key))
        .collect();
    let count = count.clamp(1, last_seen.len().max(1));
    if last_seen.len() > count {
        last_seen.select_nth_unstable_by_key(count - 1, |(at, _)| *at);
    }
    for (_, key) in last_seen.into_iter().take(count) {
        shard.remove(&key);
    }
}

/// Whether one more impression fits every cap, beside the `pending` ones decided but not yet
/// recorded.
fn within(times: Option<&Vec<i64>>, caps: &[FrequencyCap], now: i64, pending: usize) -> bool {
    caps.iter().all(|cap| {
        let since = now - i64::from(cap.window.seconds());
        let seen = times.map_or(0, |t| t.iter().filter(|&&at| at > since).count());
        seen + pending < cap.count as usize
    })
}

impl LocalCaps {
    /// [`FrequencyCaps::allows`], with `pending` impressions of the line item and of its
    /// campaign already decided in the same request (several placements or imps) and not yet
    /// recorded, which count as seen.
    pub fn allows_beside(
        &self,
        user: &str,
        line_item: (LineItemId, &[FrequencyCap]),
        campaign: (CampaignId, &[FrequencyCap]),
        now: Timestamp,
        pending: (usize, usize),
    ) -> bool {
        if line_item.1.is_empty() && campaign.1.is_empty() {
            return true;
        }
        let user = user_key(user);
        // A poisoned shard only means another thread panicked mid-update; refuse rather than
        // over-deliver.
        let Ok(shard) = self.shard(user).lock() else {
            return false;
        };
        let now = now.as_second();
        within(
            shard.get(&(user, Scope::LineItem(line_item.0))),
            line_item.1,
            now,
            pending.0,
        ) && within(
            shard.get(&(user, Scope::Campaign(campaign.0))),
            campaign.1,
            now,
            pending.1,
        )
    }
}

impl FrequencyCaps for LocalCaps {
    fn allows(
        &self,
        user: &str,
        line_item: (LineItemId, &[FrequencyCap]),
        campaign: (CampaignId, &[FrequencyCap]),
        now: Timestamp,
    ) -> bool {
        self.allows_beside(user, line_item, campaign, now, (0, 0))
    }
}

/// Pacing and budget state of one line item, set by the manager. Money-bearing factors are
/// integers, so a bid is computed without floats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Control {
    /// Stopped outright: budget spent, or held by the manager.
    pub stopped: bool,
    /// Probability (0 to 1) that the line item takes part in a request.
    pub throttle: f32,
    /// Multiplies the line item's value when it bids (pacing by price), in thousandths:
    /// 1000 bids the value unchanged, 800 bids 80% of it.
    pub bid_multiplier_permille: u32,
    /// Expected click-through rate in millionths, to value CPC line items: 1000 is 0.1%.
    pub ctr_ppm: u32,
}

impl Control {
    /// Full speed, no price change; CTR 0.1%, a typical display rate, until measured.
    pub const FULL_SPEED: Control = Control {
        stopped: false,
        throttle: 1.0,
        bid_multiplier_permille: 1_000,
        ctr_ppm: 1_000,
    };
    /// The largest multiplier accepted: ten times the value.
    pub const MAX_BID_MULTIPLIER_PERMILLE: u32 = 10_000;
}

/// Where the engine reads each line item's [`Control`], by its index in the snapshot.
pub trait Pacing {
    fn control(&self, line_item: usize) -> Control;
}

/// Every line item at full speed.
#[derive(Debug, Default, Clone, Copy)]
pub struct FullSpeed;

impl Pacing for FullSpeed {
    fn control(&self, _: usize) -> Control {
        Control::FULL_SPEED
    }
}

/// Controls in an array of atomics: the manager's updates land without a lock, and readers on
/// every core see them on their next request.
#[derive(Debug)]
pub struct ControlArray {
    slots: Vec<ControlSlot>,
}

#[derive(Debug)]
struct ControlSlot {
    stopped: AtomicBool,
    throttle: AtomicU32,
    bid_multiplier_permille: AtomicU32,
    ctr_ppm: AtomicU32,
}

impl ControlArray {
    /// One slot per line item of a snapshot, all at full speed.
    pub fn new(line_items: usize) -> ControlArray {
        let full = Control::FULL_SPEED;
        ControlArray {
            slots: (0..line_items)
                .map(|_| ControlSlot {
                    stopped: AtomicBool::new(full.stopped),
                    throttle: AtomicU32::new(full.throttle.to_bits()),
                    bid_multiplier_permille: AtomicU32::new(full.bid_multiplier_permille),
                    ctr_ppm: AtomicU32::new(full.ctr_ppm),
                })
                .collect(),
        }
    }

    /// Sets a line item's control; out-of-range indices are ignored, out-of-range values
    /// clamped (throttle to 0–1, multiplier to at most ten times, CTR to at most 100%).
    pub fn set(&self, line_item: usize, control: Control) {
        let Some(slot) = self.slots.get(line_item) else {
            return;
        };
        slot.stopped.store(control.stopped, Ordering::Relaxed);
        slot.throttle.store(
            control.throttle.clamp(0.0, 1.0).to_bits(),
            Ordering::Relaxed,
        );
        slot.bid_multiplier_permille.store(
            control
                .bid_multiplier_permille
                .min(Control::MAX_BID_MULTIPLIER_PERMILLE),
            Ordering::Relaxed,
        );
        slot.ctr_ppm
            .store(control.ctr_ppm.min(1_000_000), Ordering::Relaxed);
    }
}

impl Pacing for ControlArray {
    fn control(&self, line_item: usize) -> Control {
        let Some(slot) = self.slots.get(line_item) else {
            return Control::FULL_SPEED;
        };
        Control {
            stopped: slot.stopped.load(Ordering::Relaxed),
            throttle: f32::from_bits(slot.throttle.load(Ordering::Relaxed)),
            bid_multiplier_permille: slot.bid_multiplier_permille.load(Ordering::Relaxed),
            ctr_ppm: slot.ctr_ppm.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of 2026 (std's `DefaultHasher` then gave the same), pinned: a change here
    /// orphans every user's cap counts in Redis and every token in flight.
    #[test]
    fn user_keys_do_not_change() {
        for (id, key) in [
            ("", 0x3040_6ea5_23c5_3def),
            ("bench", 0x56d2_6608_fd34_5f66),
            ("mq-01HF8Z3K9Q", 0xb063_e99c_12bd_ed37),
            ("user-42", 0x78cd_4ed2_c086_0098),
            ("ü", 0x8395_4d64_990a_5314),
        ] {
            assert_eq!(user_key(id), key, "{id:?}");
        }
    }
}
