#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use marquee_traffic::RateLimiter;

const NOW: i64 = 1_790_000_020; // 40 s into a minute

#[test]
fn events_beyond_the_limit_in_a_minute_are_over() {
    let rates = RateLimiter::new(1_000);
    for i in 0..5 {
        assert!(!rates.over(7, 5, NOW + i), "event {}", i + 1);
    }
    assert!(rates.over(7, 5, NOW + 5));
    assert!(rates.over(7, 5, NOW + 19)); // still the same minute
    // Another key is counted apart.
    assert!(!rates.over(8, 5, NOW));
}

#[test]
fn a_new_minute_starts_from_zero() {
    let rates = RateLimiter::new(1_000);
    for _ in 0..3 {
        rates.over(7, 2, NOW);
    }
    assert!(rates.over(7, 2, NOW + 19));
    let next_minute = NOW + 20;
    assert!(!rates.over(7, 2, next_minute));
    assert!(!rates.over(7, 2, next_minute + 59));
    assert!(rates.over(7, 2, next_minute + 59));
}

#[test]
fn a_late_caller_counts_in_its_own_minute_and_older_events_are_not_counted() {
    let rates = RateLimiter::new(1_000);
    let this_minute = NOW + 20;
    assert!(!rates.over(7, 1, this_minute));
    // An event stamped in the previous minute goes to that minute's count.
    assert!(!rates.over(7, 1, NOW));
    assert!(rates.over(7, 1, NOW));
    assert!(rates.over(7, 1, this_minute));
    // Two minutes back is beyond what is kept: not counted, never over.
    for _ in 0..5 {
        assert!(!rates.over(7, 1, NOW - 60));
    }
}

#[test]
fn a_limit_of_zero_puts_every_event_over() {
    let rates = RateLimiter::new(1_000);
    assert!(rates.over(1, 0, NOW));
    assert!(rates.over(1, 0, NOW));
}

#[test]
fn negative_times_use_their_own_minutes() {
    let rates = RateLimiter::new(1_000);
    assert!(!rates.over(3, 1, -1)); // minute -1
    assert!(!rates.over(3, 1, 0)); // minute 0
    assert!(rates.over(3, 1, -60)); // minute -1 again
}

#[test]
fn memory_is_bounded_and_overflow_never_flags() {
    // One key per shard and minute.
    let rates = RateLimiter::new(1);
    assert_eq!(rates.keys_per_minute(), 16);
    let mut over = 0;
    for key in 0..10_000u64 {
        over += usize::from(rates.over(key, 0, NOW));
    }
    // Only the keys that found room were counted, each over at once (limit 0).
    assert_eq!(over, 16);
    assert_eq!(rates.overflows(), 10_000 - 16);
    // The next minute has room again.
    assert!(rates.over(123_456, 0, NOW + 60));
    assert_eq!(RateLimiter::new(1_000).keys_per_minute(), 1_008);
}

#[test]
fn counts_from_many_threads_add_up() {
    let rates = Arc::new(RateLimiter::new(10_000));
    let over = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (rates, over) = (rates.clone(), over.clone());
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    if rates.over(42, 100, NOW) {
                        over.fetch_add(1, Ordering::Relaxed);
                    }
                    rates.over(7, 100, NOW); // a neighbour, for contention
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(over.load(Ordering::Relaxed), 8_000 - 100);
}
