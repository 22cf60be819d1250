#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use marquee_tracking::{ReplayConfig, ReplayGuard};

const NOW: i64 = 1_790_000_000;

fn guard(bucket_secs: u32, buckets: u32, bucket_capacity: usize) -> ReplayGuard {
    ReplayGuard::new(ReplayConfig {
        bucket_secs: NonZeroU32::new(bucket_secs).unwrap(),
        buckets: NonZeroU32::new(buckets).unwrap(),
        bucket_capacity: NonZeroUsize::new(bucket_capacity).unwrap(),
    })
}

#[test]
fn counts_once_within_the_life() {
    let guard = guard(60, 61, 10_000);
    let expires_at = NOW + 3_600;
    assert!(guard.first_time(7, expires_at, NOW));
    for now in (NOW..expires_at).step_by(59) {
        assert!(!guard.first_time(7, expires_at, now), "at {now}");
    }
    assert!(!guard.first_time(7, expires_at, expires_at - 1));
    // Other nonces are independent.
    assert!(guard.first_time(8, expires_at, NOW));
    assert_eq!(guard.len(), 2);
}

#[test]
fn expired_tokens_never_count() {
    let guard = guard(60, 61, 10_000);
    assert!(!guard.first_time(1, NOW, NOW));
    assert!(!guard.first_time(1, NOW - 5, NOW));
    assert!(guard.is_empty());
}

#[test]
fn forgets_after_expiry() {
    let guard = guard(60, 61, 10_000);
    let nonces = 0..1_000u64;
    for nonce in nonces.clone() {
        assert!(guard.first_time(nonce, NOW + 600, NOW));
    }
    assert_eq!(guard.len(), 1_000);
    // After a full ring, the same slots serve new expiries: the expired nonces are gone and
    // the memory is reused rather than added to.
    let later = NOW + 61 * 60;
    for nonce in nonces {
        assert!(guard.first_time(nonce, later + 600, later), "nonce {nonce}");
    }
    assert_eq!(guard.len(), 1_000);
}

#[test]
fn horizon_covers_the_configured_lifetime() {
    let guard = guard(60, 61, 10_000);
    assert_eq!(guard.max_lifetime(), 3_600);
    // Whatever the phase of `now` within a bucket, a token living max_lifetime is remembered
    // until it expires.
    for offset in [0, 1, 30, 59] {
        let now = NOW - NOW % 60 + offset;
        let nonce = offset as u64;
        let expires_at = now + guard.max_lifetime();
        assert!(guard.first_time(nonce, expires_at, now));
        for t in (now..expires_at).step_by(37) {
            assert!(
                !guard.first_time(nonce, expires_at, t),
                "offset {offset}, at {t}"
            );
        }
    }
}

#[test]
fn beyond_the_horizon_counts_once_per_horizon() {
    let guard = guard(10, 4, 10_000);
    // Horizon 40 s, token lives 1,000 s.
    let expires_at = NOW + 1_000;
    assert!(guard.first_time(1, expires_at, NOW));
    // Filed under later "last" buckets as time moves, still found within the horizon.
    for t in (NOW..NOW + 30).step_by(3) {
        assert!(!guard.first_time(1, expires_at, t), "at {t}");
    }
    // Once the bucket it was filed in has expired, it may count again: once.
    let much_later = NOW + 100;
    assert!(guard.first_time(1, expires_at, much_later));
    assert!(!guard.first_time(1, expires_at, much_later + 5));
}

#[test]
fn stays_bounded_under_a_flood() {
    let guard = guard(60, 61, 4_096);
    let capacity = guard.capacity();
    assert_eq!(capacity, 61 * 4_096);
    let mut counted = 0u64;
    // Half a million unique tokens, all expiring in the same minute, then a spread over an hour.
    for nonce in 0..500_000u64 {
        counted += u64::from(guard.first_time(nonce, NOW + 600, NOW));
    }
    assert_eq!(counted, 500_000, "genuine events are never refused");
    assert!(guard.len() <= 4_096, "one bucket's share: {}", guard.len());
    assert!(guard.overflows() > 0);
    for nonce in 0..500_000u64 {
        guard.first_time(
            1_000_000 + nonce,
            NOW + 60 + (nonce % 3_540) as i64,
            NOW + 30,
        );
    }
    assert!(guard.len() <= capacity, "{} > {capacity}", guard.len());

    // The most recent nonce is still remembered: replaying it right away counts nothing.
    let last = 499_999u64;
    assert!(!guard.first_time(1_000_000 + last, NOW + 60 + (last % 3_540) as i64, NOW + 31));
}

#[test]
fn steady_traffic_reuses_expired_buckets() {
    // 100 new tokens a second for ten horizons, each living 5 minutes: memory tracks the live
    // tokens (≈ 100 × 300 plus a bucket of slack), not everything ever seen.
    let guard = guard(60, 6, 1_000_000);
    let mut nonce = 0u64;
    let mut peak = 0;
    for second in 0..3_600 {
        let now = NOW + second;
        for _ in 0..100 {
            assert!(guard.first_time(nonce, now + 300, now));
            nonce += 1;
        }
        if second % 60 == 0 {
            peak = peak.max(guard.len());
        }
    }
    assert!(peak <= 100 * 360 + 100 * 60, "peak {peak}");
    assert_eq!(guard.overflows(), 0);
}

#[test]
fn concurrent_callers_count_each_nonce_once() {
    let guard = Arc::new(guard(60, 61, 1 << 20));
    let counted = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let guard = Arc::clone(&guard);
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || {
                // Every thread presents the same 20,000 nonces, in different orders.
                for i in 0..20_000u64 {
                    let nonce = if t % 2 == 0 { i } else { 19_999 - i };
                    if guard.first_time(nonce, NOW + 600, NOW + t) {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(counted.load(Ordering::Relaxed), 20_000);
    assert_eq!(guard.len(), 20_000);
}

#[test]
fn extreme_times_do_not_panic() {
    let guard = guard(1, 3, 100);
    for (nonce, expires_at, now) in [
        (1, i64::MAX, i64::MIN),
        (2, i64::MAX, i64::MAX - 1),
        (3, i64::MIN + 1, i64::MIN),
        (4, 0, -1),
        (u64::MAX, i64::MAX, 0),
    ] {
        assert!(guard.first_time(nonce, expires_at, now));
        assert!(!guard.first_time(nonce, expires_at, now));
    }
    assert!(!guard.first_time(5, i64::MIN, i64::MIN));
    let wide = self::guard(u32::MAX, 4_095, usize::MAX);
    assert_eq!(wide.max_lifetime(), i64::from(u32::MAX) * 4_094);
    assert_eq!(wide.capacity(), usize::MAX);
    assert!(wide.first_time(9, i64::MAX, i64::MIN));
    assert!(!wide.first_time(9, i64::MAX, i64::MIN));
}

#[test]
fn default_config_is_an_hour_of_one_minute_buckets() {
    let guard = ReplayGuard::new(ReplayConfig::default());
    assert_eq!(guard.max_lifetime(), 3_600);
    assert_eq!(guard.capacity(), 61 * (1 << 18));
}

#[test]
fn a_forgotten_nonce_counts_again_and_only_it() {
    let guard = guard(60, 61, 10_000);
    let expires_at = NOW + 600;
    assert!(guard.first_time(1, expires_at, NOW));
    assert!(guard.first_time(2, expires_at, NOW));
    // The event of nonce 1 could not be recorded: its retry must count.
    guard.forget(1, expires_at, NOW);
    assert!(guard.first_time(1, expires_at, NOW + 30));
    assert!(!guard.first_time(1, expires_at, NOW + 31));
    assert!(!guard.first_time(2, expires_at, NOW + 30));
    // Forgetting what is not held, or an expired token, changes nothing.
    guard.forget(3, expires_at, NOW);
    guard.forget(2, expires_at, expires_at);
    assert!(!guard.first_time(2, expires_at, NOW + 40));
    assert_eq!(guard.len(), 2);
    // Beyond the horizon, forgotten from where it was filed under the same `now`.
    let far = NOW + 10 * 3_600;
    assert!(guard.first_time(4, far, NOW));
    guard.forget(4, far, NOW);
    assert!(guard.first_time(4, far, NOW + 1));
}

#[test]
fn seen_reads_what_is_held_and_claims_nothing() {
    let guard = guard(60, 61, 10_000);
    let expires_at = NOW + 600;
    assert!(!guard.seen(1, expires_at, NOW));
    assert!(guard.first_time(1, expires_at, NOW), "seen claimed nothing");
    assert!(guard.seen(1, expires_at, NOW + 10));
    assert!(!guard.seen(2, expires_at, NOW + 10));
    assert!(!guard.seen(1, expires_at, expires_at), "expired");
    guard.forget(1, expires_at, NOW);
    assert!(!guard.seen(1, expires_at, NOW + 20));
    // Beyond the horizon, wherever it was filed.
    let far = NOW + 10 * 3_600;
    assert!(guard.first_time(3, far, NOW));
    assert!(guard.seen(3, far, NOW + 60));
}
