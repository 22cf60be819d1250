//! Split roles on loopback: one `marquee manager` and three `marquee edge`
//! processes, clients fetching ads and firing impression beacons at every edge, and then:
//!
//! - a campaign change (a rename over the API) is served by all three edges; the time it took is
//!   printed (the freshness target is 1 s; this test bounds it at 5 s, twenty-five compile and
//!   poll ticks, so that a loaded CI machine cannot fail it while a lost change still does);
//! - the manager is killed (`kill -9`) and restarted mid-run: edges keep serving meanwhile, and
//!   the stored aggregates equal a direct count of all three edges' logs at the end (nothing
//!   lost, nothing counted twice);
//! - an edge is killed and restarted on its data directory: it keeps its id (so its log is
//!   resumed from the stored checkpoints), and no impression answered by it is missing from its
//!   log unless it was answered within the commit window before the kill;
//! - the shared impression budget is overspent by no more than the bound of
//!   `docs/pacing-and-budgets.md` §6: `B + R + Σ in flight`, with `R` read from the manager's
//!   `marquee_lease_unreported_reclaimed` and at most one decision in flight per client.
//!
//! The manager's database is PostgreSQL (a fresh database on the server `scripts/test-deps.sh`
//! starts). Shared frequency caps across edges need Redis: they have their own test below
//! (`a_frequency_cap_holds_across_edges_sharing_redis`: a manager on SQLite, three edges with
//! `[redis]` on the server `scripts/test-deps.sh` starts, one user, the cap held over all).
//! These tests are ignored by plain `cargo test` and run by `scripts/test.sh` (or
//! `-- --include-ignored`), where an unreachable server fails them naming that script.
//!
//! `bench/multinode.sh` runs the same topology longer, in release, and prints the figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    EDGE_GROUP_COMMIT_MS, Guard, MinuteCheck, Roles, TRACKING_KEY, edge_registry, free_port,
    get_as_german_iphone, impression_token, logged_events, metric, metrics_page, now_secs,
    test_redis, token_from, try_get_text, update_line_item, wait_for_edges,
};
use marquee_eventlog::EventKind;
use marquee_store::test_postgres::TestDatabase;
use marquee_tracking::{KeyRing, TokenKind};
use serde_json::{Value, json};

const SECRET: &str = "multinode-test-secret-0123";
const EDGES: usize = 3;
/// Clients per edge, each fetching an ad and firing its beacon in a loop.
const CLIENTS_PER_EDGE: usize = 2;
/// The impression budget set on one line item for the run.
const BUDGET: u64 = 150;
/// How long before an edge's kill an answered impression may be missing from its log: the
/// commit interval plus scheduling on a busy two-core machine (see `crash.rs`).
const KILL_WINDOW: Duration = Duration::from_millis(EDGE_GROUP_COMMIT_MS + 250);
const GIF: &[u8] = b"GIF89a";

const ROLES: Roles = Roles {
    secret: SECRET,
    tracking_key: TRACKING_KEY,
    common: &[],
};

fn start_manager(data: &Path, database: &str, port: u16, demo: bool) -> Guard {
    let settings = [("MARQUEE_PACING__IN_FLIGHT_ALLOWANCE_MS", "0")];
    ROLES.manager(data, database, port, demo, &settings)
}

/// A manager with the demo on SQLite in `dir/manager` (a free port): its URL and guard.
fn demo_manager(dir: &Path) -> (String, Guard) {
    let port = free_port();
    let manager_dir = dir.join("manager");
    let database = manager_dir.join("marquee.db");
    let guard = start_manager(&manager_dir, database.to_str().unwrap(), port, true);
    (format!("http://127.0.0.1:{port}"), guard)
}

/// `count` edges of `manager` in `dir/edge-N`, sharing `redis`, with `settings` besides.
fn redis_edges(
    dir: &Path,
    manager: &str,
    count: usize,
    redis: &str,
    settings: &[(&str, &str)],
) -> Vec<Guard> {
    let mut all = vec![
        // Generous, so that a slow debug build never decides from local state.
        ("MARQUEE_EDGE__DEADLINE_MS", "2000"),
        ("MARQUEE_REDIS__URL", redis),
        ("MARQUEE_REDIS__TIMEOUT_MS", "1000"),
    ];
    all.extend_from_slice(settings);
    (0..count)
        .map(|i| ROLES.edge(&dir.join(format!("edge-{i}")), manager, "127.0.0.1:0", &all))
        .collect()
}

fn start_edge(data: &Path, manager: &str) -> Guard {
    ROLES.edge(data, manager, "127.0.0.1:0", &[])
}

/// Waits until `want` edges are ready (see [`wait_for_edges`]), for up to 20 s.
async fn edges_ready(client: &reqwest::Client, manager: &str, want: usize, caught_up: bool) {
    let within = Duration::from_secs(20);
    wait_for_edges(client, manager, SECRET, want, caught_up, within).await;
}

/// One beacon answered (200 and the GIF) by an edge.
#[derive(Debug, Clone, Copy)]
struct Answered {
    edge: usize,
    nonce: u64,
    line_item: u64,
    at: Instant,
}

/// What the clients saw.
#[derive(Debug, Default)]
struct Seen {
    answered: Vec<Answered>,
    /// Ad requests answered with an ad while the manager was down.
    ads_without_manager: usize,
    failures: usize,
}

/// Shared between the test and its clients: each edge's current URL, whether the manager is
/// down, and when to stop.
struct Traffic {
    bases: Mutex<Vec<String>>,
    manager_down: AtomicBool,
    stop: AtomicBool,
    seen: Mutex<Seen>,
}

/// The demo's placements 1 and 2 serve line item 5 (no goal: it serves on while the manager is
/// away), 4 and 5 line item 2 (the one given a budget).
const PLACEMENTS: [u64; 4] = [1, 4, 2, 5];

/// One client of one edge: an ad at one of [`PLACEMENTS`] in turn, then its beacon, until
/// stopped. A failed call (the edge is down) is counted and retried after a pause.
async fn drive(traffic: Arc<Traffic>, edge: usize, client_id: usize, ring: Arc<KeyRing>) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut cycle = client_id;
    while !traffic.stop.load(Ordering::Relaxed) {
        cycle += 1;
        let base = traffic.bases.lock().unwrap()[edge].clone();
        let ad = async {
            let placement = PLACEMENTS[cycle % PLACEMENTS.len()];
            let url = format!("{base}/ad?placement={placement}&format=html");
            let html = try_get_text(&client, &url).await?;
            Some(impression_token(&html).map(str::to_owned))
        };
        let token = match ad.await {
            Some(Some(token)) => token,
            Some(None) => continue,
            None => {
                traffic.seen.lock().unwrap().failures += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if traffic.manager_down.load(Ordering::Relaxed) {
            traffic.seen.lock().unwrap().ads_without_manager += 1;
        }
        let claims = ring
            .verify_kind(&token, TokenKind::Impression, now_secs())
            .unwrap();
        let Ok(response) = client.get(format!("{base}/t/i?t={token}")).send().await else {
            traffic.seen.lock().unwrap().failures += 1;
            continue;
        };
        let ok = response.status() == reqwest::StatusCode::OK;
        if ok && response.bytes().await.is_ok_and(|b| b.starts_with(GIF)) {
            traffic.seen.lock().unwrap().answered.push(Answered {
                edge,
                nonce: claims.nonce,
                line_item: claims.line_item,
                at: Instant::now(),
            });
        }
    }
}

/// The demo's line item at placements 4 and 5 (fresh database, so ids are fixed): it gets the
/// impression budget, and loses its weekend-only targeting. Its demo goal is in spend; the budget replaces it before any edge holds a
/// lease, because a lease granted in one goal's unit is not converted when the metric changes.
const BUDGETED: u64 = 2;
/// The demo's line item at placements 1 and 2, without a goal.
const UNPACED: u64 = 5;

/// The snapshot version an edge serves, from its `/metrics`.
async fn served_version(client: &reqwest::Client, edge: &str) -> Option<f64> {
    metric(
        &metrics_page(client, edge).await,
        "marquee_snapshot_version",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn one_manager_three_edges_survive_kills_and_count_every_event_once() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (manager_dir, edge_dirs) = common::cluster_dirs(dir.path(), EDGES);
    let client = reqwest::Client::new();
    let port = free_port();
    let manager_url = format!("http://127.0.0.1:{port}");

    let database = TestDatabase::create().await;
    let mut manager = start_manager(&manager_dir, database.url(), port, true);
    let admin = token_from(&manager.server().stderr_line("demo admin token"));
    update_line_item(&client, &manager_url, &admin, BUDGETED, |item| {
        item["goal"] = json!({ "metric": "impressions", "lifetime": BUDGET });
        item["pacing"] = json!("asap");
        // The demo runs it on weekends only (a sports takeover); this test runs any day.
        let rules = item["targeting"]["all"]
            .as_array_mut()
            .expect("the demo's sports takeover targets a site and weekend days");
        let before = rules.len();
        rules.retain(|rule| rule.get("day_of_week").is_none());
        assert_eq!(rules.len(), before - 1, "{rules:?}");
    })
    .await;
    // Two pacing rounds (500 ms each) and a compile: the book holds the new budget before the
    // first edge asks for a lease.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let mut edges: Vec<Guard> = edge_dirs
        .iter()
        .map(|d| start_edge(d, &manager_url))
        .collect();
    let bases: Vec<String> = edges.iter().map(|e| e.server().base.clone()).collect();
    edges_ready(&client, &manager_url, EDGES, false).await;
    let ids: Vec<String> = edge_registry(&client, &manager_url, SECRET)
        .await
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();

    // A campaign change, timed from the API's answer to the last edge serving it.
    let before: Vec<f64> = served_versions(&client, &bases).await;
    let changed_at = Instant::now();
    update_line_item(&client, &manager_url, &admin, UNPACED, |item| {
        item["name"] = json!("renamed while three edges serve");
    })
    .await;
    let visible = loop {
        let now: Vec<f64> = served_versions(&client, &bases).await;
        if now.iter().zip(&before).all(|(n, b)| n > b) {
            break changed_at.elapsed();
        }
        assert!(
            changed_at.elapsed() < Duration::from_secs(5),
            "the change did not reach every edge in 5 s (compile and poll ticks are 100 ms): \
             {now:?} (before {before:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    println!("campaign change served by all {EDGES} edges {visible:?} after the API answered");

    // Traffic on every edge.
    let traffic = Arc::new(Traffic {
        bases: Mutex::new(bases.clone()),
        manager_down: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        seen: Mutex::new(Seen::default()),
    });
    let ring = Arc::new(KeyRing::from_config(1, [(1, &TRACKING_KEY[2..])]).unwrap());
    let clients: Vec<_> = (0..EDGES * CLIENTS_PER_EDGE)
        .map(|i| tokio::spawn(drive(Arc::clone(&traffic), i % EDGES, i, Arc::clone(&ring))))
        .collect();
    tokio::time::sleep(Duration::from_secs(4)).await;

    // The manager killed mid-run: edges keep serving; it comes back on the same port.
    manager.kill();
    traffic.manager_down.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    traffic.manager_down.store(false, Ordering::Relaxed);
    let mut manager = start_manager(&manager_dir, database.url(), port, false);
    edges_ready(&client, &manager_url, EDGES, false).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // An edge killed mid-run, restarted on its data directory (a new port).
    let victim = 1;
    let killed_at = Instant::now();
    edges[victim].kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    edges[victim] = start_edge(&edge_dirs[victim], &manager_url);
    traffic.bases.lock().unwrap()[victim] = edges[victim].server().base.clone();
    edges_ready(&client, &manager_url, EDGES, false).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    traffic.stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    // Everything collected: the last appends fsynced (5 ms group commit), then every edge read
    // to its tail. The manager stops first, so that its last run still reaches every edge.
    tokio::time::sleep(Duration::from_millis(300)).await;
    edges_ready(&client, &manager_url, EDGES, true).await;
    let manager_page = metrics_page(&client, &manager_url).await;
    let after_restart: Vec<String> = edge_registry(&client, &manager_url, SECRET)
        .await
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        after_restart, ids,
        "the restarted edge reported under its old id"
    );
    manager.stop();
    for edge in &mut edges {
        edge.stop();
    }

    // Reports equal the sum of all edges' logs: every (event id, kind) once.
    let mut events = Vec::new();
    let mut logged_by_edge: Vec<HashSet<u64>> = Vec::new();
    for d in &edge_dirs {
        let logged = logged_events(d);
        logged_by_edge.push(
            logged
                .iter()
                .filter(|e| e.kind == EventKind::Impression)
                .map(|e| u64::try_from(e.event_id).unwrap())
                .collect(),
        );
        events.extend(logged);
    }
    let minutes = MinuteCheck::of(&events, database.url()).await;
    assert!(minutes.distinct > 0);
    assert!(minutes.exact(), "{minutes}");

    // Answered impressions are logged, on the edge that answered them, except the killed
    // edge's last commit window.
    let seen = std::mem::take(&mut *traffic.seen.lock().unwrap());
    let lost: Vec<&Answered> = seen
        .answered
        .iter()
        .filter(|a| !logged_by_edge[a.edge].contains(&a.nonce))
        .collect();
    let beyond_window = lost
        .iter()
        .filter(|a| a.edge != victim || killed_at.saturating_duration_since(a.at) > KILL_WINDOW)
        .count();

    // The budget: billed ≤ B + R + one decision in flight per client.
    let delivered: HashSet<u64> = events
        .iter()
        .filter(|e| e.kind == EventKind::Impression && e.line_item == BUDGETED)
        .map(|e| u64::try_from(e.event_id).unwrap())
        .collect();
    let reclaimed = metric(
        &manager_page,
        &format!("marquee_lease_unreported_reclaimed{{line_item=\"{BUDGETED}\"}}"),
    )
    .unwrap_or(0.0) as u64;
    let bound = BUDGET + reclaimed + (EDGES * CLIENTS_PER_EDGE) as u64;
    let answered_budgeted = seen
        .answered
        .iter()
        .filter(|a| a.line_item == BUDGETED)
        .count();
    println!(
        "multinode: {} s; {} records in {EDGES} logs, {} distinct events, {} counted; \
         {} impressions answered, {} lost ({beyond_window} beyond the killed edge's commit window); \
         {} ads served while the manager was down; {} failed calls (edge down); \
         budget {BUDGET}: {} delivered ({answered_budgeted} answered), bound {bound} (R = {reclaimed})",
        started.elapsed().as_secs(),
        events.len(),
        minutes.distinct,
        minutes.counted,
        seen.answered.len(),
        lost.len(),
        seen.ads_without_manager,
        seen.failures,
        delivered.len(),
    );
    assert_eq!(
        beyond_window, 0,
        "impressions lost beyond the commit window: {lost:?}"
    );
    assert!(
        seen.ads_without_manager > 0,
        "edges served no ad while the manager was down"
    );
    assert!(
        delivered.len() as u64 <= bound,
        "budget {BUDGET} overspent beyond the bound {bound}: {} delivered",
        delivered.len()
    );
    assert!(
        delivered.len() as u64 >= BUDGET / 2,
        "the budgeted line item delivered {} of {BUDGET}: the bound was not exercised",
        delivered.len()
    );
}

/// The snapshot version every edge serves, in order.
async fn served_versions(client: &reqwest::Client, bases: &[String]) -> Vec<f64> {
    let mut versions = Vec::with_capacity(bases.len());
    for base in bases {
        versions.push(served_version(client, base).await.unwrap_or(0.0));
    }
    versions
}

/// A frequency cap of N per user held across edges sharing Redis: the demo's line item 1
/// ("Boots DACH mobile", 3 a day) reaches one user exactly three times over twelve ad requests
/// spread over three `marquee edge` processes. Without Redis each edge would serve it until
/// the user's impressions reached it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_frequency_cap_holds_across_edges_sharing_redis() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let redis = test_redis();
    let dir = tempfile::tempdir().unwrap();
    let (manager_url, _manager) = demo_manager(dir.path());
    let settings = [
        ("MARQUEE_EDGE__COUNTRY_HEADER", "x-country"),
        ("MARQUEE_PACING__SYNC_INTERVAL_MS", "200"),
    ];
    let edges = redis_edges(dir.path(), &manager_url, EDGES, &redis, &settings);
    let client = reqwest::Client::new();
    edges_ready(&client, &manager_url, EDGES, false).await;
    // Line item 1 has a goal: each edge serves it once its lease is granted. Warm-up users are
    // fresh ones, so the capped user's count starts at zero.
    let serves_line_item_1 = |base: String, user: String| {
        let client = client.clone();
        async move {
            let answer: Value =
                get_as_german_iphone(&client, &format!("{base}/ad.json?p=3&uid={user}"))
                    .await
                    .json()
                    .await
                    .unwrap();
            answer["ads"][0]["line_item"] == 1
        }
    };
    for (i, edge) in edges.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut attempt = 0;
        while !serves_line_item_1(
            edge.server().base.clone(),
            format!("warm-up-{i}-{attempt}-{}", std::process::id()),
        )
        .await
        {
            assert!(
                Instant::now() < deadline,
                "edge {i} never served line item 1"
            );
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let user = format!(
        "multinode-{}",
        now_secs() as u128 * 1_000_000_000 + u128::from(std::process::id())
    );
    let mut served_by = Vec::new();
    for round in 0..12 {
        let base = edges[round % EDGES].server().base.clone();
        if serves_line_item_1(base, user.clone()).await {
            served_by.push(round % EDGES);
        }
    }
    assert_eq!(
        served_by.len(),
        3,
        "line item 1 served by edges {served_by:?}"
    );
    for edge in &edges {
        let text = metrics_page(&client, &edge.server().base).await;
        assert_eq!(metric(&text, "marquee_redis_breaker_state"), Some(0.0));
        assert_eq!(
            metric(&text, "marquee_redis_fallbacks_total{reason=\"timeout\"}"),
            Some(0.0)
        );
    }
}

/// A start that must be refused: arguments, environment, what the message names.
type Refusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

/// The split roles refuse to start without what they need, with status 64 and the key named.
#[test]
fn the_roles_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let token = ("MARQUEE_AGGREGATION__TOKEN", SECRET);
    // Held, so that an edge which failed to refuse the unspecified address below could not
    // bind it either and would exit (not serve forever).
    let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let unspecified = taken.local_addr().unwrap().to_string();
    let edge_on_unspecified = [
        "edge",
        "--data",
        data,
        "--manager",
        "http://127.0.0.1:1",
        "--listen",
        &unspecified,
    ];
    let cases: [Refusal; 6] = [
        (&["manager", "--data", data], &[], "aggregation.token"),
        (&["edge", "--data", data], &[token], "--manager"),
        (
            &["edge", "--data", data, "--manager", "ftp://10.0.0.5"],
            &[token],
            "--manager",
        ),
        (
            &[
                "edge",
                "--data",
                data,
                "--manager",
                "http://127.0.0.1:1",
                "--id",
                "local",
            ],
            &[token],
            "edge.id",
        ),
        // 0.0.0.0 names no host the manager could read the log at.
        (
            &edge_on_unspecified,
            &[
                token,
                ("MARQUEE_EDGE__PUBLIC_URL", "https://ads.example.com"),
            ],
            "edge.log_url",
        ),
        (
            &edge_on_unspecified,
            &[token, ("MARQUEE_EDGE__LOG_URL", "http://10.0.0.7:8080")],
            "edge.public_url",
        ),
    ];
    for (args, envs, named) in cases {
        let output = common::run(args, envs);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(
            stderr.contains(named),
            "{args:?} should name {named}: {stderr}"
        );
    }
}

/// The image tag across edges sharing Redis: a newsletter reader's image is fetched from one
/// edge and the click reaches another. The second edge finds the image in Redis: the click
/// counts once, for the image's ad, at its price (the demo's newsletter line item charges
/// image-tag clicks). Without Redis the second edge could not know the image and would log the
/// click as invalid (`click_without_impression`), as `traffic_quality.rs` shows on one edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn an_image_tag_click_counts_on_another_edge_sharing_redis() {
    const NEWSLETTER: u64 = 6;
    const READERS: u64 = 5;
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let redis = test_redis();
    let dir = tempfile::tempdir().unwrap();
    let (manager_url, _manager) = demo_manager(dir.path());
    let mut edges = redis_edges(dir.path(), &manager_url, 2, &redis, &[]);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    edges_ready(&client, &manager_url, 2, false).await;
    for edge in &edges {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let url = format!("{}/ad.json?p={NEWSLETTER}", edge.server().base);
            let answer: Value = client.get(url).send().await.unwrap().json().await.unwrap();
            if answer["ads"].as_array().is_some_and(|ads| !ads.is_empty()) {
                break;
            }
            assert!(Instant::now() < deadline, "the newsletter never served");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Cache busters of this run only: Redis keeps images for the click window.
    let run = now_secs() as u128 * 1_000_000 + u128::from(std::process::id());
    let tag = |edge: &Guard, format: &str, reader: u64| {
        format!(
            "{}/ad?placement={NEWSLETTER}&format={format}&cb={run}{reader}",
            edge.server().base
        )
    };
    let fetch = |url: String| client.get(url).send();
    for reader in 0..READERS {
        let image = fetch(tag(&edges[0], "img", reader)).await.unwrap();
        assert_eq!(image.status(), 302);
    }
    // The image's record goes to Redis off the request's path.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for reader in 0..READERS {
        let click = fetch(tag(&edges[1], "click", reader)).await.unwrap();
        assert_eq!(click.status(), 302);
        let location = click.headers()["location"].to_str().unwrap().to_owned();
        assert!(
            location.starts_with("https://acme-outdoor.example/winter-boots"),
            "{location}"
        );
    }
    for edge in &mut edges {
        edge.stop();
    }
    let clicks = logged_events(&dir.path().join("edge-1"));
    let counted: Vec<_> = clicks
        .iter()
        .filter(|e| e.kind == EventKind::Click)
        .map(|e| (e.placement, e.amount_micros))
        .collect();
    assert_eq!(counted, vec![(NEWSLETTER, 1_000_000); READERS as usize]);
    assert!(
        !clicks.iter().any(|e| e.kind == EventKind::InvalidClick),
        "no click judged invalid"
    );
    let images = logged_events(&dir.path().join("edge-0"));
    let impressions = images
        .iter()
        .filter(|e| e.kind == EventKind::Impression && e.placement == NEWSLETTER)
        .count();
    assert_eq!(impressions, READERS as usize);
}
