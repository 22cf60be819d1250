//! Exactly-once aggregation under `kill -9`: `marquee serve` aggregates
//! every 20 ms while clients fetch ads, fire beacons and click, and one sends bid requests
//! (counted in the log's counter records), and is killed at a random
//! moment, 20 times in a row on the same data directory. After each restart, clients also
//! fire beacons of the round before again (the edge's replay guard forgot them, so the log
//! holds them twice). At the end a last start catches up, stops gracefully, and the stored
//! rows must equal a direct count of the logs read with the event log reader, each (event id,
//! kind) once: nothing lost, nothing twice. The rows are compared summed over their minutes: a
//! beacon logged twice, in different minutes and shards, is counted in the minute of whichever
//! copy the aggregation read first, which depends on how far each shard had been read, not in
//! the minute of the copy the direct count meets first.
//!
//! The kill moments come from a seed, printed; `AGGREGATION_CRASH_SEED` replays one and
//! `AGGREGATION_CRASH_ROUNDS` changes the number of rounds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    Guard, Rng, Server, env_or, event_count, impression_token, logged_events, metric, metrics_page,
    openrtb_sample, try_get_text, wait_for_ad,
};
use marquee_eventlog::EventKind;
use marquee_model::ManualClock;
use marquee_stats::Counters;
use marquee_store::SqliteStore;
use marquee_store::stats_suite::{MinuteKey, all_minute_rows, direct_minute_count};

const ROUNDS: usize = 20;
const CLIENTS: usize = 3;
/// When the kill comes after the clients start.
const KILL_AFTER_MS: std::ops::Range<u64> = 100..600;

fn start(data: &Path) -> Guard {
    Guard::new(Server::start_with(
        data,
        &["--demo"],
        &[
            ("MARQUEE_AGGREGATION__INTERVAL_MS", "20"),
            // Small runs, so that kills land in the middle of a backlog too.
            ("MARQUEE_AGGREGATION__MAX_RUN_MB", "1"),
            // (Segments are kept, as by every test server: the test counts the logs at the end.)
            ("MARQUEE_EVENTS__SEGMENT_MAX_AGE_SECS", "1"),
            ("MARQUEE_LOG__LEVEL", "warn"),
        ],
    ))
}

/// Fetches ads and fires their beacons (and sometimes a click) until the server is gone or
/// `until`; fires `old` beacon URLs again first. Returns the beacon URLs answered.
async fn client_loop(base: String, old: Vec<String>, until: Instant) -> Vec<String> {
    let client = reqwest::Client::new();
    for url in &old {
        if client.get(url).send().await.is_err() {
            return Vec::new();
        }
    }
    let mut fired = Vec::new();
    let mut cycle = 0usize;
    while Instant::now() < until {
        cycle += 1;
        let url = format!("{base}/ad?placement={}&format=html", 1 + cycle % 2);
        let Some(html) = try_get_text(&client, &url).await else {
            break;
        };
        let Some(token) = impression_token(&html) else {
            continue;
        };
        let beacon = format!("{base}/t/i?t={token}");
        if client.get(&beacon).send().await.is_err() {
            break;
        }
        fired.push(beacon);
        if cycle.is_multiple_of(5)
            && let Some(start) = html.find("/t/c?t=")
        {
            let rest = &html[start..];
            let end = rest.find(['"', '\'', '&']).unwrap_or(rest.len());
            let click = format!("{base}{}", &rest[..end]);
            let no_redirects = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap();
            if no_redirects.get(&click).send().await.is_err() {
                break;
            }
        }
    }
    fired
}

/// Sends the simple banner sample to `/openrtb2/bid` until the server is gone or `until`.
async fn bid_loop(base: String, until: Instant) {
    let client = reqwest::Client::new();
    let request = openrtb_sample("iab-2.6/iab-2.6-req-1-simple-banner.json");
    while Instant::now() < until {
        let sent = client
            .post(format!("{base}/openrtb2/bid"))
            .json(&request)
            .send()
            .await;
        if sent.is_err() {
            break;
        }
    }
}

/// The rows summed over their minutes: the key with its minute set to 0.
fn over_all_minutes(rows: HashMap<MinuteKey, Counters>) -> HashMap<MinuteKey, Counters> {
    let mut summed: HashMap<MinuteKey, Counters> = HashMap::new();
    for (mut key, counters) in rows {
        key.1 = 0;
        summed.entry(key).or_default().add(&counters);
    }
    summed
}

async fn stored_minutes(data: &Path) -> HashMap<MinuteKey, Counters> {
    let clock = Arc::new(ManualClock::new(jiff::Timestamp::now()));
    let store = SqliteStore::open(&data.join("marquee.db"), clock).unwrap();
    all_minute_rows(&store).await
}

#[tokio::test]
async fn kill_9_at_random_points_counts_every_logged_event_once() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let rounds = env_or("AGGREGATION_CRASH_ROUNDS", ROUNDS);
    let clock_seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let seed = env_or("AGGREGATION_CRASH_SEED", clock_seed);
    println!("AGGREGATION_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut previous: Vec<String> = Vec::new();
    let started = Instant::now();

    for round in 0..rounds {
        let mut server = start(data);
        let base = server.server().base.clone();
        wait_for_ad(&reqwest::Client::new(), &base).await;
        let kill_after = Duration::from_millis(rng.in_range(KILL_AFTER_MS));
        // The old beacons now point at the restarted server's new port.
        let old: Vec<String> = previous
            .iter()
            .take(6)
            .map(|url| {
                let path = &url[url.find("/t/i").unwrap()..];
                format!("{base}{path}")
            })
            .collect();
        let until = Instant::now() + Duration::from_secs(5);
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let old = if i == 0 { old.clone() } else { Vec::new() };
                tokio::spawn(client_loop(base.clone(), old, until))
            })
            .collect();
        let bidder = tokio::spawn(bid_loop(base.clone(), until));
        tokio::time::sleep(kill_after).await;
        server.kill();
        previous.clear();
        for client in clients {
            previous.extend(client.await.unwrap());
        }
        bidder.await.unwrap();
        println!("round {round}: killed after {kill_after:?}");
    }

    // Catch up: one more start, no traffic, until the whole backlog is read; then stop.
    let mut last = start(data);
    let client = reqwest::Client::new();
    let base = last.server().base.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = metrics_page(&client, &base).await;
        let runs = metric(&page, "marquee_aggregation_runs_total").unwrap_or(0.0);
        let backlog = metric(&page, "marquee_aggregation_backlog_bytes").unwrap_or(1.0);
        if runs >= 2.0 && backlog == 0.0 {
            break;
        }
        assert!(Instant::now() < deadline, "never caught up: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last.stop();

    let events = logged_events(data);
    let expected = over_all_minutes(direct_minute_count(&events));
    let got = over_all_minutes(stored_minutes(data).await);
    let distinct: i64 = expected.values().map(event_count).sum();
    let counted: i64 = got.values().map(event_count).sum();
    println!(
        "{rounds} kills in {:?}: {} records in the logs, {distinct} distinct (event id, kind), {counted} counted",
        started.elapsed(),
        events.len(),
    );
    assert!(distinct > 0);
    let logged: i64 = events.iter().map(|e| e.event_count() as i64).sum();
    assert!(
        logged > distinct,
        "the logs hold repeats (beacons fired again after a restart), so dedupe was exercised"
    );
    assert!(
        events.iter().any(|e| e.kind == EventKind::BidsCounted),
        "bids were counted, so their counter records were aggregated"
    );
    let mut missing: Vec<_> = expected
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .collect();
    missing.sort_by_key(|(k, _)| (*k).clone());
    assert!(
        missing.is_empty() && got.len() == expected.len(),
        "{} rows differ (first: {:?}; stored: {:?}); {} rows stored, {} expected",
        missing.len(),
        missing.first(),
        missing.first().and_then(|(k, _)| got.get(*k)),
        got.len(),
        expected.len()
    );
}
