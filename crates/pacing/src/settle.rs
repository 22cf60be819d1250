//! Reservations and their settlement, counted per minute of decision time.
//!
//! An edge that serves an ad on one of our placements reserves the impression's charge on its
//! lease when it decides, before any beacon; the beacon settles the reservation wherever it
//! lands. So the deciding edge's lease bounds what that edge admitted, whichever edge the
//! browser's beacon reaches. A reservation that is never settled (an ad that was never
//! rendered) holds its budget until the decision's tokens expire: both sides count per minute
//! of decision time ([`WINDOW_SECS`]), the deciding edge what it reserved and every edge what
//! it settled, so the book can tell, for each minute whose tokens have all expired, how much
//! was reserved and never settled, and return it to the period.
//!
//! Counts are cumulative per (edge, window): a lost or repeated report cannot count twice.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use jiff::SignedDuration;
use marquee_model::LineItemId;
use serde::{Deserialize, Serialize};

/// Length of a settlement window, in seconds of decision time.
pub const WINDOW_SECS: i64 = 60;

/// The settlement window of a decision made at `unix_secs`.
pub fn window_of(unix_secs: i64) -> i64 {
    unix_secs.div_euclid(WINDOW_SECS)
}

/// One edge's counts for one line item and one window of decision time, cumulative since the
/// edge started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settlement {
    pub line_item: LineItemId,
    /// Minute of decision time: unix seconds ÷ [`WINDOW_SECS`].
    pub window: i64,
    /// What this edge reserved for its decisions in the window.
    pub reserved: u64,
    /// What this edge settled for decisions in the window, whichever edge made them.
    pub settled: u64,
}

/// The edge's per-window counters of one lease: a ring of slots, one per window a valid token
/// can name, plus the next one, which the sync task readies ahead ([`WindowRing::prepare`]) so
/// that a request never resets a slot. Lock-free: requests on every core add to it.
#[derive(Debug)]
pub(crate) struct WindowRing {
    slots: Box<[Slot]>,
}

#[derive(Debug)]
struct Slot {
    window: AtomicI64,
    reserved: AtomicU64,
    settled: AtomicU64,
    /// Set by every add, cleared when reported: only changed windows travel.
    changed: AtomicBool,
}

impl WindowRing {
    /// A ring for tokens valid `token_lifetime`.
    pub(crate) fn new(token_lifetime: SignedDuration) -> WindowRing {
        let lifetime = u64::try_from(token_lifetime.as_secs()).unwrap_or(0);
        // The windows of every token still valid, the current one, and the next one.
        let len = lifetime.div_ceil(WINDOW_SECS as u64) + 3;
        let slots = (0..len)
            .map(|_| Slot {
                window: AtomicI64::new(i64::MIN),
                reserved: AtomicU64::new(0),
                settled: AtomicU64::new(0),
                changed: AtomicBool::new(false),
            })
            .collect();
        WindowRing { slots }
    }

    fn slot(&self, window: i64) -> Option<&Slot> {
        let len = self.slots.len() as i64;
        let slot = &self.slots[usize::try_from(window.rem_euclid(len)).ok()?];
        (slot.window.load(Ordering::Acquire) == window).then_some(slot)
    }

    /// Counts a reservation made at `at_secs`; false if its window is not ready (the sync task
    /// has not run for a window's length), in which case it is never returned (the safe side).
    #[inline]
    pub(crate) fn reserve(&self, amount: u64, at_secs: i64) -> bool {
        self.add(window_of(at_secs), amount, |slot| &slot.reserved)
    }

    /// Counts the settlement of a decision made at `issued_secs`; false if no slot holds its
    /// window (its token would have expired).
    #[inline]
    pub(crate) fn settle(&self, amount: u64, issued_secs: i64) -> bool {
        self.add(window_of(issued_secs), amount, |slot| &slot.settled)
    }

    fn add(&self, window: i64, amount: u64, counter: impl Fn(&Slot) -> &AtomicU64) -> bool {
        let Some(slot) = self.slot(window) else {
            return false;
        };
        counter(slot).fetch_add(amount, Ordering::Relaxed);
        slot.changed.store(true, Ordering::Release);
        true
    }

    /// Readies the slots of every window a valid token can name, the current one and the
    /// next, resetting those that held windows whose tokens have all expired (reported as
    /// they changed). A new lease is ready at once for the beacons of decisions made before
    /// it (an edge restarted, a lease made again). One task per edge calls it, every sync.
    pub(crate) fn prepare(&self, now_secs: i64) {
        let next = window_of(now_secs) + 1;
        let len = self.slots.len() as i64;
        for back in 0..len {
            let window = next - back;
            let Ok(index) = usize::try_from(window.rem_euclid(len)) else {
                continue;
            };
            let slot = &self.slots[index];
            if slot.window.load(Ordering::Acquire) >= window {
                continue;
            }
            slot.reserved.store(0, Ordering::Relaxed);
            slot.settled.store(0, Ordering::Relaxed);
            slot.changed.store(false, Ordering::Relaxed);
            slot.window.store(window, Ordering::Release);
        }
    }

    /// The windows whose counts changed since the last call, for `line_item`.
    pub(crate) fn changed(&self, line_item: LineItemId, out: &mut Vec<Settlement>) {
        for slot in self.slots.iter() {
            // Cleared before reading: an add after the read sets it again, and its window is
            // sent next time (the counts are cumulative, so sending twice is harmless).
            if !slot.changed.swap(false, Ordering::AcqRel) {
                continue;
            }
            out.push(Settlement {
                line_item,
                window: slot.window.load(Ordering::Acquire),
                reserved: slot.reserved.load(Ordering::Relaxed),
                settled: slot.settled.load(Ordering::Relaxed),
            });
        }
    }

    /// Marks every window as changed: a report was lost, send them all again.
    pub(crate) fn resend(&self) {
        for slot in self.slots.iter() {
            if slot.window.load(Ordering::Acquire) != i64::MIN {
                slot.changed.store(true, Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: LineItemId = LineItemId(3);

    fn reported(ring: &WindowRing) -> Vec<(i64, u64, u64)> {
        let mut out = Vec::new();
        ring.changed(LINE, &mut out);
        let mut counts: Vec<_> = out
            .iter()
            .map(|s| (s.window, s.reserved, s.settled))
            .collect();
        counts.sort_unstable();
        counts
    }

    #[test]
    fn reservations_and_settlements_are_counted_by_decision_minute() {
        let ring = WindowRing::new(SignedDuration::from_secs(120));
        let start = 1_800_000_000 - 1_800_000_000 % WINDOW_SECS;
        ring.prepare(start);
        assert!(ring.reserve(5, start + 10));
        assert!(ring.reserve(5, start + 59));
        // The next minute was readied ahead.
        assert!(ring.reserve(5, start + 60));
        // Two minutes ahead was not.
        assert!(!ring.reserve(5, start + 120));
        // A minute before the first prepare takes late beacons of decisions made then.
        assert!(ring.settle(1, start - 30));
        assert!(ring.settle(5, start + 10));
        let first = window_of(start);
        assert_eq!(
            reported(&ring),
            vec![(first - 1, 0, 1), (first, 10, 5), (first + 1, 5, 0)]
        );
        // Nothing changed since: nothing to send.
        assert_eq!(reported(&ring), vec![]);
        // A settlement for the first minute, two minutes later, is still counted there.
        ring.prepare(start + 120);
        assert!(ring.settle(5, start + 59));
        assert_eq!(reported(&ring), vec![(first, 10, 10)]);
        ring.resend();
        assert_eq!(reported(&ring).len(), 5, "every slot holds a window");
    }

    #[test]
    fn a_slot_is_reused_only_after_every_token_of_its_minute_expired() {
        let lifetime = SignedDuration::from_secs(120);
        let ring = WindowRing::new(lifetime);
        let start = 1_800_000_000 - 1_800_000_000 % WINDOW_SECS;
        ring.prepare(start);
        assert!(ring.reserve(1, start));
        // Every second until the token of `start` expires, its minute still takes settlements.
        for now in start..start + lifetime.as_secs() {
            ring.prepare(now);
            assert!(ring.settle(1, start), "{now}");
        }
        // Long after, its slot holds another minute.
        ring.prepare(start + 10 * WINDOW_SECS);
        assert!(!ring.settle(1, start));
    }
}
