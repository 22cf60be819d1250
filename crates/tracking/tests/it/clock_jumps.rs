//! Clock jumps: the edge checks tokens and repeats against its own
//! clock, passed in as `now`. A jump back or forward must neither count a beacon twice nor
//! panic; what it may do is refuse beacons while the clock is wrong (outside the tokens'
//! validity), which loses nothing the manager would bill twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use marquee_tracking::{Claims, KeyRing, ReplayConfig, ReplayGuard, TokenError, TokenKind};
use std::num::NonZeroU64;

const NOW: i64 = 1_790_000_000;
const LIFETIME: u32 = 3_600;

fn ring() -> KeyRing {
    KeyRing::new(1, [(1, [7u8; 32].as_slice())]).unwrap()
}

fn token(ring: &KeyRing, nonce: u64, issued_at: i64) -> String {
    ring.sign(&Claims {
        kind: TokenKind::Impression,
        line_item: 1,
        creative: 2,
        placement: NonZeroU64::new(3),
        user: 4,
        issued_at,
        lifetime: LIFETIME,
        nonce,
        amount_micros: Some(1_000),
    })
}

/// What the edge's beacon handler does: verify, then count if the nonce is new.
fn counted(ring: &KeyRing, guard: &ReplayGuard, token: &str, now: i64) -> Result<bool, TokenError> {
    let claims = ring.verify_kind(token, TokenKind::Impression, now)?;
    Ok(guard.first_time(claims.nonce, claims.expires_at(), now))
}

#[test]
fn a_clock_jumping_back_counts_no_beacon_twice() {
    let ring = ring();
    let guard = ReplayGuard::new(ReplayConfig::default());
    let tokens: Vec<String> = (0..100).map(|n| token(&ring, n, NOW - 600)).collect();
    for t in &tokens {
        assert!(counted(&ring, &guard, t, NOW).unwrap());
    }
    // Back by 30 s, 10 min (still within the tokens' life) and a day (before they were issued).
    for back in [30, 600, 86_400] {
        for t in &tokens {
            match counted(&ring, &guard, t, NOW - back) {
                Ok(first) => assert!(!first, "counted again {back} s back"),
                Err(e) => assert!(matches!(e, TokenError::NotYetValid { .. }), "{e}"),
            }
        }
    }
}

#[test]
fn a_clock_jumping_forward_then_back_counts_no_beacon_twice() {
    let ring = ring();
    let guard = ReplayGuard::new(ReplayConfig::default());
    let old: Vec<String> = (0..100).map(|n| token(&ring, n, NOW - 60)).collect();
    for t in &old {
        assert!(counted(&ring, &guard, t, NOW).unwrap());
    }
    // Forward by a minute, an hour, a day and a year: beacons of tokens issued at the jumped
    // time are counted (filling the guard's buckets of that time); the old ones are expired.
    for (i, ahead) in [60, 3_600, 86_400, 365 * 86_400].into_iter().enumerate() {
        let future = NOW + ahead;
        for n in 0..100 {
            let fresh = token(&ring, 1_000 * (i as u64 + 1) + n, future);
            assert!(counted(&ring, &guard, &fresh, future).unwrap());
        }
        for t in &old {
            match counted(&ring, &guard, t, future) {
                Ok(first) => assert!(!first, "old beacon counted again {ahead} s ahead"),
                Err(e) => assert!(matches!(e, TokenError::Expired { .. }), "{e}"),
            }
        }
        // The clock comes back: the old beacons, still valid, do not count again.
        for t in &old {
            assert!(
                !counted(&ring, &guard, t, NOW + 1).unwrap(),
                "{ahead} s ahead and back"
            );
        }
    }
    // Some of those were refused because the guard could no longer tell, and said so.
    assert!(guard.behind() > 0);
}

#[test]
fn extreme_clocks_are_refused_without_panicking() {
    let ring = ring();
    let guard = ReplayGuard::new(ReplayConfig::default());
    let t = token(&ring, 1, NOW);
    for now in [i64::MIN, -1, 0, i64::MAX - 1, i64::MAX] {
        assert!(counted(&ring, &guard, &t, now).is_err(), "at {now}");
        assert!(!guard.first_time(2, now, now));
        let _ = guard.first_time(3, i64::MAX, now);
    }
    let far = token(&ring, 4, i64::MAX - 10);
    assert!(counted(&ring, &guard, &far, NOW).is_err());
}
