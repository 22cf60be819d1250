//! Snapshot swaps under load: while clients request ads without pause, a line item is changed
//! through the management API every 100 ms, so the manager compiles and the edge swaps in a new
//! snapshot about ten times a second. Every ad request must still be answered with an ad.
//!
//! The test also prints the latency of ad requests with and without the swaps. In a debug build
//! that is only indicative, and nothing about time is asserted (speed is shown in benchmarks):
//! `bench/swap.sh` measures it on the release build.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Guard, Server, get_json, impression_token, put_json, token_from, wait_for_ad};
use serde_json::Value;

/// Concurrent clients, each requesting ads back to back.
const CLIENTS: usize = 4;
/// Each phase of load lasts this long; phases go quiet, swapping, swapping, quiet.
const PHASE: Duration = Duration::from_millis(1500);
/// And each client sends at most this many requests per phase.
const MAX_REQUESTS: usize = 50_000;
/// A change through the API this often during the swapping phases.
const CHANGE_EVERY: Duration = Duration::from_millis(100);
/// The published snapshot version must have moved at least this often (about 30 changes are
/// made), and the edge must have swapped at least this many snapshots in.
const MIN_SWAPS: usize = 10;

/// What a phase of load saw.
#[derive(Debug, Default)]
struct Phase {
    latencies: Vec<Duration>,
    /// Answers other than 200 with an ad in it, and transport errors, described.
    failures: Vec<String>,
}

impl Phase {
    fn add(&mut self, other: Phase) {
        self.latencies.extend(other.latencies);
        self.failures.extend(other.failures);
    }

    fn percentile(&self, q: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        sorted.sort_unstable();
        let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    fn summary(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "{} requests, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.latencies.len(),
            ms(self.percentile(0.5)),
            ms(self.percentile(0.99)),
            ms(self.latencies.iter().copied().max().unwrap_or_default()),
        )
    }
}

/// One client's share of a phase: ad requests back to back until the phase ends.
async fn client_loop(client: reqwest::Client, base: String, id: usize) -> Phase {
    let mut phase = Phase::default();
    let end = Instant::now() + PHASE;
    for n in 0..MAX_REQUESTS {
        if Instant::now() >= end {
            break;
        }
        let placement = 1 + (n + id) % 2;
        let sent = Instant::now();
        let answer = match client
            .get(format!("{base}/ad?placement={placement}&format=html"))
            .send()
            .await
        {
            Ok(response) => {
                let status = response.status();
                response.text().await.map(|body| (status, body))
            }
            Err(error) => Err(error),
        };
        phase.latencies.push(sent.elapsed());
        match answer {
            Ok((status, body)) if status == 200 && impression_token(&body).is_some() => {}
            Ok((status, body)) => phase.failures.push(format!("{status}: {body:?}")),
            Err(error) => phase.failures.push(error.to_string()),
        }
    }
    phase
}

async fn load(client: &reqwest::Client, base: &str) -> Phase {
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|id| tokio::spawn(client_loop(client.clone(), base.to_owned(), id)))
        .collect();
    let mut phase = Phase::default();
    for task in tasks {
        phase.add(task.await.unwrap());
    }
    phase
}

/// Changes the line item's weight every [`CHANGE_EVERY`] until `stop`; returns how many
/// changes were made. Each must succeed.
async fn change_line_item(
    client: reqwest::Client,
    url: String,
    token: String,
    mut item: Value,
    stop: Arc<AtomicBool>,
) -> (Value, usize) {
    let mut tick = tokio::time::interval(CHANGE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let limit = (PHASE.as_millis() / CHANGE_EVERY.as_millis()) as usize + 5;
    let mut changes = 0;
    for n in 0..limit {
        tick.tick().await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        item["weight"] = Value::from(100 + (n % 50) as u64 * 10);
        let response = put_json(&client, &url, &token, &item).await;
        assert_eq!(response.status(), 200, "changing the line item failed");
        item = response.json().await.unwrap();
        changes += 1;
    }
    (item, changes)
}

/// The shared secret `/snapshot/latest` asks for.
const EDGE_SECRET: &str = "edge-secret-for-tests";

/// The published snapshot version.
async fn published_version(client: &reqwest::Client, base: &str) -> u64 {
    let response = client
        .get(format!("{base}/snapshot/latest"))
        .bearer_auth(EDGE_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.headers()["x-marquee-snapshot-version"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Polls `/snapshot/latest` every 20 ms until `stop`; returns how often the version moved.
async fn watch_versions(client: reqwest::Client, base: String, stop: Arc<AtomicBool>) -> usize {
    let mut last = published_version(&client, &base).await;
    let mut advances = 0;
    // Bounded: at most 10 s of polling.
    for _ in 0..500 {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let version = published_version(&client, &base).await;
        assert!(version >= last, "the published version went back");
        if version > last {
            advances += 1;
            last = version;
        }
    }
    advances
}

/// One phase of load with a line item changed every 100 ms, and a watcher counting the
/// published versions. Returns the load, the changes made, the version advances seen, and
/// the line item as last written.
async fn swapping(
    client: &reqwest::Client,
    server: &Server,
    token: &str,
    item: Value,
) -> (Phase, usize, usize, Value) {
    let stop = Arc::new(AtomicBool::new(false));
    let url = server.url(&format!("/api/v1/line-items/{}", item["id"]));
    let changer = tokio::spawn(change_line_item(
        client.clone(),
        url,
        token.to_owned(),
        item,
        Arc::clone(&stop),
    ));
    let watcher = tokio::spawn(watch_versions(
        client.clone(),
        server.base.clone(),
        Arc::clone(&stop),
    ));
    let phase = load(client, &server.base).await;
    stop.store(true, Ordering::Relaxed);
    let (item, changes) = changer.await.unwrap();
    // Let the last change be compiled and seen.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let advances = watcher.await.unwrap();
    (phase, changes, advances, item)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_swaps_under_load_fail_no_ad_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut guard = Guard::new(Server::start_with(
        dir.path(),
        &["--demo"],
        &[
            ("MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS", "10"),
            // About swaps, not deadlines: a loaded test machine can stall a debug-build
            // request past the default 50 ms, which answers the fallback by design.
            ("MARQUEE_EDGE__DEADLINE_MS", "5000"),
            ("MARQUEE_AGGREGATION__TOKEN", EDGE_SECRET),
        ],
    ));
    let server = guard.server();
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    wait_for_ad(&client, &server.base).await;
    // The house line item: it fills placements 1 and 2 whatever its weight.
    let list = get_json(
        &client,
        &server.url("/api/v1/line-items?q=Subscribe"),
        Some(&token),
    )
    .await;
    let mut item = list["items"][0].clone();
    assert_eq!(item["tier"], "house");
    let first_version = published_version(&client, &server.base).await;

    let mut quiet = Phase::default();
    let mut swaps = Phase::default();
    let (mut changes, mut advances, mut edge_swaps) = (0, 0, 0);
    for step in ["quiet", "swapping", "swapping", "quiet"] {
        if step == "quiet" {
            quiet.add(load(&client, &server.base).await);
            continue;
        }
        server.stderr_so_far();
        let (phase, made, seen, written) = swapping(&client, server, &token, item).await;
        item = written;
        swaps.add(phase);
        changes += made;
        advances += seen;
        edge_swaps += server
            .stderr_so_far()
            .iter()
            .filter(|line| line.contains("snapshot swapped in"))
            .count();
    }
    let last_version = published_version(&client, &server.base).await;
    println!(
        "swap (debug build, {CLIENTS} clients, indicative only):\n  \
         without swaps: {}\n  \
         with swaps every {} ms: {}\n  \
         {changes} changes, published version {first_version} -> {last_version} \
         (advanced {advances} times while watched), {edge_swaps} snapshots swapped into the edge",
        quiet.summary(),
        CHANGE_EVERY.as_millis(),
        swaps.summary(),
    );

    for (name, phase) in [("without swaps", &quiet), ("with swaps", &swaps)] {
        assert!(
            phase.failures.is_empty(),
            "{} of {} ad requests {name} failed, e.g. {:?}",
            phase.failures.len(),
            phase.latencies.len(),
            &phase.failures[..phase.failures.len().min(3)]
        );
        assert!(!phase.latencies.is_empty());
    }
    assert!(
        advances >= MIN_SWAPS,
        "the published version advanced only {advances} times ({changes} changes)"
    );
    assert!(
        edge_swaps >= MIN_SWAPS,
        "the edge swapped only {edge_swaps} snapshots in ({changes} changes)"
    );
    guard.stop();
}
