//! The binary end to end: `marquee serve --demo`, tokens, snapshots, config errors, help.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{Server, create_advertiser_token, get_json, run, token_from};
use serde_json::{Value, json};

/// The shared secret remote edges poll `/snapshot/latest` with.
const EDGE_SECRET: &str = "edge-secret-for-tests";

async fn etag(client: &reqwest::Client, server: &Server) -> String {
    let reply = client
        .get(server.url("/snapshot/latest"))
        .bearer_auth(EDGE_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    reply.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_demo_end_to_end() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        data.path(),
        &["--demo"],
        &[("MARQUEE_AGGREGATION__TOKEN", EDGE_SECRET)],
    );
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::new();

    let health: Value = get_json(&client, &server.url("/healthz"), None).await;
    assert_eq!(health["status"], "ok");
    let doc: Value = get_json(&client, &server.url("/api/v1/openapi.json"), None).await;
    assert!(doc["paths"]["/api/v1/line-items"].is_object());

    let advertisers: Value =
        get_json(&client, &server.url("/api/v1/advertisers"), Some(&token)).await;
    assert_eq!(advertisers["items"].as_array().unwrap().len(), 4);
    let line_items: Value =
        get_json(&client, &server.url("/api/v1/line-items"), Some(&token)).await;
    assert_eq!(line_items["items"].as_array().unwrap().len(), 14);

    // The snapshot goes only to callers with the edges' shared secret: it holds every
    // campaign's prices, budgets and targeting.
    let anonymous = client
        .get(server.url("/snapshot/latest"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    // It is served with an ETag and polls cheaply.
    let first = etag(&client, &server).await;
    let unchanged = client
        .get(server.url("/snapshot/latest"))
        .bearer_auth(EDGE_SECRET)
        .header("if-none-match", &first)
        .send()
        .await
        .unwrap();
    assert_eq!(unchanged.status(), 304);

    // A change reaches a new snapshot through the compile loop.
    let created = client
        .post(server.url("/api/v1/campaigns"))
        .bearer_auth(&token)
        .json(&json!({ "advertiser_id": 1, "name": "Spring" }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let mut changed = first.clone();
    for _ in 0..100 {
        changed = etag(&client, &server).await;
        if changed != first {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_ne!(changed, first, "no new snapshot after a change");

    // A token made by the CLI works against the running server.
    let output = create_advertiser_token(data.path().to_str().unwrap(), "1");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let advertiser_token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let own: Value = get_json(
        &client,
        &server.url("/api/v1/advertisers"),
        Some(&advertiser_token),
    )
    .await;
    assert_eq!(own["items"].as_array().unwrap().len(), 1);

    server.stop();

    // A restart without changes compiles nothing: same snapshot, same ETag, no demo reload.
    let server = Server::start_with(
        data.path(),
        &["--demo"],
        &[("MARQUEE_AGGREGATION__TOKEN", EDGE_SECRET)],
    );
    server.stderr_line("demo data not loaded");
    assert_eq!(etag(&client, &server).await, changed);
    server.stop();
}

/// A demo start that cannot listen makes nothing: its admin token (shown once) would be lost
/// with it, so the next start must make the demo and show the token then.
#[test]
fn a_demo_start_that_cannot_listen_creates_no_token() {
    let data = tempfile::tempdir().unwrap();
    let data = data.path().to_str().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let output = run(
        &["serve", "--demo", "--data", data, "--listen", &address],
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("cannot listen"), "{stderr}");
    assert!(!stderr.contains("demo admin token"), "{stderr}");
    let tokens = run(&["token", "list", "--data", data], &[]);
    assert!(tokens.status.success());
    assert!(
        !String::from_utf8_lossy(&tokens.stdout).contains("demo admin"),
        "no demo token was made: {}",
        String::from_utf8_lossy(&tokens.stdout)
    );
    drop(taken);
}

#[test]
fn bad_configuration_exits_64_naming_the_key() {
    let data = tempfile::tempdir().unwrap();
    let data = data.path().to_str().unwrap();
    let output = run(
        &["serve", "--data", data],
        &[("MARQUEE_SNAPSHOT__KEEP", "0")],
    );
    assert_eq!(output.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&output.stderr).contains("snapshot.keep"));

    let output = run(
        &["serve", "--data", data, "--config", "/nonexistent.toml"],
        &[],
    );
    assert_eq!(output.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent.toml"));

    let output = run(
        &["migrate", "--data", data],
        &[("MARQUEE_LOG__FORMAT", "xml")],
    );
    assert_eq!(output.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&output.stderr).contains("log.format"));
}

#[test]
fn token_create_checks_its_owner() {
    let data = tempfile::tempdir().unwrap();
    let data = data.path().to_str().unwrap();
    let output = run(&["token", "create", "--role", "admin", "--data", data], &[]);
    assert!(output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .starts_with("mq_")
    );

    let output = create_advertiser_token(data, "42");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("owner"));

    let output = run(&["token", "create", "--role", "root", "--data", data], &[]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("admin, advertiser or publisher"));
}

#[test]
fn help_describes_every_command() {
    for (args, needles) in [
        (vec!["--help"], vec!["serve", "token", "migrate"]),
        (
            vec!["serve", "--help"],
            vec!["--listen", "--data", "--demo", "--config"],
        ),
        (
            vec!["token", "create", "--help"],
            vec!["--role", "--owner", "--label"],
        ),
        (vec!["migrate", "--help"], vec!["--data", "--config"]),
    ] {
        let output = run(&args, &[]);
        assert!(output.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&output.stdout);
        for needle in needles {
            assert!(text.contains(needle), "{args:?} help lacks {needle}");
        }
    }
}

/// With the default `aggregation.delete_consumed`, a graceful stop leaves every segment counted
/// and deleted; each restart on the same data directory must go on counting. (Segment ids used
/// to start again at 1 after such a stop, below the manager's checkpoint, which then skipped
/// every new segment as consumed: a restarted `marquee serve` counted nothing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_restart_goes_on_counting_impressions() {
    let data = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let mut token = None;
    for _ in 0..3 {
        let server = Server::start_with(
            data.path(),
            &["--demo"],
            &[("MARQUEE_AGGREGATION__DELETE_CONSUMED", "true")],
        );
        if token.is_none() {
            token = Some(token_from(&server.stderr_line("demo admin token")));
        }
        common::wait_for_ad(&client, &server.base).await;
        for _ in 0..2 {
            common::serve_and_fire(&client, &server.base, 1).await;
        }
        server.stop();
    }
    let server = Server::start(data.path(), &[]);
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let report = get_json(
        &client,
        &server.url(&format!(
            "/api/v1/reports?tz=UTC&granularity=day&from={}&to={}",
            today.yesterday().unwrap(),
            today.tomorrow().unwrap()
        )),
        token.as_deref(),
    )
    .await;
    assert_eq!(report["totals"]["impressions"], 6, "{report}");
    server.stop();
}
