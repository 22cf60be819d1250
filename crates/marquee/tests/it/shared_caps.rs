//! Frequency caps shared by edges through Redis (`[redis]`), through the real binary: three
//! `marquee serve --demo` processes (the same demo catalog, so the same ids) on one Redis hold
//! one user to the cap whichever edge answers; an edge whose Redis is unreachable keeps
//! answering from local state and says so in `/metrics`. Redis is the instance
//! scripts/test-deps.sh starts (redis://127.0.0.1:26379, or MARQUEE_TEST_REDIS_URL).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{
    Server, free_port, line_item_for_german_iphone, metrics_page, required_metric, test_redis,
};

const NEWS_MOBILE: u64 = 3;

/// A demo server on `redis`; generous Redis timeout and deadline, so that a slow debug build
/// never falls back to local state by accident (the fallback is the other test's subject).
fn start(data: &std::path::Path, redis: &str) -> Server {
    Server::start_with(
        data,
        &["--demo"],
        &[
            ("MARQUEE_EDGE__COUNTRY_HEADER", "x-country"),
            ("MARQUEE_EDGE__DEADLINE_MS", "2000"),
            ("MARQUEE_REDIS__URL", redis),
            ("MARQUEE_REDIS__TIMEOUT_MS", "1000"),
        ],
    )
}

/// The line item of the ad `/ad.json` answers for `uid`, if any.
async fn line_item_served(client: &reqwest::Client, server: &Server, uid: &str) -> Option<u64> {
    let url = server.url(&format!("/ad.json?p={NEWS_MOBILE}&uid={uid}"));
    line_item_for_german_iphone(client, &url).await
}

/// A user id no earlier run has used (Redis keeps caps for their window, a day here).
fn fresh_user(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{nanos}")
}

/// Waits until the server serves an ad (it installs its first snapshot after listening).
async fn wait_for_ads(client: &reqwest::Client, server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while line_item_served(client, server, &fresh_user("warm-up"))
        .await
        .is_none()
    {
        assert!(Instant::now() < deadline, "no ad within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_cap_of_three_holds_across_three_edges_sharing_redis() {
    let redis = test_redis();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let edges: Vec<Server> = dirs.iter().map(|d| start(d.path(), &redis)).collect();
    let client = reqwest::Client::new();
    for edge in &edges {
        wait_for_ads(&client, edge).await;
    }
    // "Boots DACH mobile" (line item 1) is capped at 3 a day. With Redis a decision counts
    // when it is served, on whichever edge serves it.
    let user = fresh_user("shared");
    let mut capped_served = Vec::new();
    for round in 0..12 {
        let edge = &edges[round % 3];
        if line_item_served(&client, edge, &user).await == Some(1) {
            capped_served.push(round % 3);
        }
    }
    assert_eq!(
        capped_served.len(),
        3,
        "line item 1 served by edges {capped_served:?}"
    );
    let mut refusals = 0.0;
    for edge in &edges {
        let text = metrics_page(&client, &edge.base).await;
        assert_eq!(required_metric(&text, "marquee_redis_breaker_state"), 0.0);
        for reason in ["breaker_open", "timeout", "error", "no_time"] {
            let name = format!("marquee_redis_fallbacks_total{{reason=\"{reason}\"}}");
            assert_eq!(required_metric(&text, &name), 0.0, "{name}");
        }
        refusals += required_metric(&text, "marquee_edge_shared_cap_refusals_total");
        refusals += required_metric(&text, "marquee_redis_cache_refusals_total");
    }
    // Each of the two edges that did not serve the third ad learnt the cap was full from
    // Redis once; after that their caches kept the line item out of their decisions.
    assert!(refusals <= 2.0, "{refusals} refusals");
    // Another user is not capped.
    assert_eq!(
        line_item_served(&client, &edges[0], &fresh_user("other")).await,
        Some(1)
    );
    for edge in edges {
        edge.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_without_its_redis_answers_from_local_state_and_says_so() {
    // Nobody listens there.
    let closed = free_port();
    let data = tempfile::tempdir().unwrap();
    let redis_url = format!("redis://127.0.0.1:{closed}");
    let server = common::demo_with_redis(data.path(), &redis_url, "60000");
    let client = reqwest::Client::new();
    wait_for_ads(&client, &server).await;
    for _ in 0..5 {
        // Local caps count impressions, not decisions: every decision is served.
        assert_eq!(
            line_item_served(&client, &server, "offline-user").await,
            Some(1)
        );
    }
    let text = metrics_page(&client, &server.base).await;
    assert_eq!(required_metric(&text, "marquee_redis_breaker_state"), 1.0);
    assert!(
        required_metric(
            &text,
            "marquee_redis_fallbacks_total{reason=\"breaker_open\"}"
        ) >= 3.0
    );
    assert!(required_metric(&text, "marquee_redis_write_behind_total{stage=\"queued\"}") >= 5.0);
    server.stop();
}
