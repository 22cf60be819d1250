//! Measures one check-and-count round trip against a Redis server: sequential calls (one in
//! flight, the latency an ad request waits) and 64 concurrent tasks (throughput over one
//! multiplexed connection). Usage:
//! `cargo run --release -p marquee-sharedstate --example round_trip [redis://…] [calls]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use marquee_model::SystemClock;
use marquee_sharedstate::{CapAnswer, CapRule, Scope, SharedConfig, SharedState};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:26379".into());
    let calls: usize = args.next().map_or(20_000, |n| n.parse().unwrap());
    let config = SharedConfig {
        timeout: Duration::from_secs(1),
        ..SharedConfig::new(url)
    };
    let shared = SharedState::new(config, Arc::new(SystemClock)).unwrap();
    // Two caps (line item and campaign), a limit no run reaches: every call counts.
    let rules = [
        CapRule {
            scope: Scope::LineItem(1),
            window_seconds: 60,
            limit: u32::MAX,
        },
        CapRule {
            scope: Scope::Campaign(1),
            window_seconds: 3600,
            limit: u32::MAX,
        },
    ];
    let deadline = || Instant::now() + Duration::from_secs(1);
    let mut latencies = Vec::with_capacity(calls);
    for i in 0..calls {
        let started = Instant::now();
        let answer = shared
            .check_and_count(i as u64 + 1, &rules, shared.cap_count(), deadline())
            .await;
        latencies.push(started.elapsed());
        assert_eq!(answer, CapAnswer::Allowed);
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "sequential: {calls} calls, p50 {:?}, p99 {:?}, max {:?}",
        at(0.5),
        at(0.99),
        at(1.0)
    );
    let started = Instant::now();
    let tasks: Vec<_> = (0..64u64)
        .map(|task| {
            let shared = shared.clone();
            tokio::spawn(async move {
                for i in 0..(calls as u64 / 64) {
                    let user = 1_000_000 + task * 1_000_000 + i;
                    let answer = shared
                        .check_and_count(user, &rules, shared.cap_count(), deadline())
                        .await;
                    assert_eq!(answer, CapAnswer::Allowed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    println!(
        "64 concurrent tasks: {} calls in {elapsed:?}, {:.0} calls/s",
        calls / 64 * 64,
        (calls / 64 * 64) as f64 / elapsed.as_secs_f64()
    );
}
