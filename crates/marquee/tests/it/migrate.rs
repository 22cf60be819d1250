//! `marquee migrate` and `--database` from the outside: the binary applies PostgreSQL
//! migrations once even when two start at once, the store it leaves works, and a bad URL stops
//! it with a message naming the problem (never the password). PostgreSQL is the test server of
//! `scripts/test-deps.sh`, one database per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;

use marquee_model::SystemClock;
use marquee_store::test_postgres::TestDatabase;
use marquee_store::{PostgresStore, Store};
use tempfile::TempDir;

/// Starts `marquee ARGS --data TEMP` (the database comes from the arguments only).
fn start(args: &[&str]) -> (Child, TempDir) {
    let data = tempfile::tempdir().unwrap();
    let child = Command::new(common::BIN)
        .args(args)
        .arg("--data")
        .arg(data.path())
        .env_remove("MARQUEE_DATABASE__URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, data)
}

fn marquee(args: &[&str]) -> Output {
    let (child, _data) = start(args);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn two_migrates_at_once_apply_postgres_migrations_once() {
    let db = TestDatabase::create().await;
    let (first, _first_data) = start(&["migrate", "--database", db.url()]);
    let (second, _second_data) = start(&["migrate", "--database", db.url()]);
    let first = first.wait_with_output().unwrap();
    let second = second.wait_with_output().unwrap();
    for output in [&first, &second] {
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert_eq!(
            text(&output.stdout).trim(),
            format!("migrations applied to {}", db.url())
        );
    }
    let applied = |output: &Output| {
        text(&output.stderr)
            .matches("applied database migration")
            .count()
    };
    assert_eq!(
        applied(&first) + applied(&second),
        8,
        "each of the eight migrations is applied by one process only"
    );

    let token = marquee(&["token", "create", "--role", "admin", "--database", db.url()]);
    assert!(token.status.success(), "{}", text(&token.stderr));
    let store = PostgresStore::connect(db.url(), Arc::new(SystemClock))
        .await
        .unwrap();
    assert_eq!(store.change_counter().await.unwrap(), 0);
}

#[test]
fn a_bad_database_url_is_refused_with_its_reason() {
    let unreachable = marquee(&[
        "migrate",
        "--database",
        "postgres://marquee:hunter2@127.0.0.1:9/marquee",
    ]);
    assert_eq!(unreachable.status.code(), Some(1));
    let message = text(&unreachable.stderr);
    assert!(
        message.contains("cannot connect to PostgreSQL at 127.0.0.1:9/marquee"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");

    let wrong_scheme = marquee(&["migrate", "--database", "mysql://db/marquee"]);
    assert_eq!(wrong_scheme.status.code(), Some(64));
    assert!(
        text(&wrong_scheme.stderr).contains("`database.url`"),
        "{}",
        text(&wrong_scheme.stderr)
    );
}

/// From one machine to a manager on PostgreSQL: `marquee serve --demo` serves an ad and counts
/// its impression, stops; `marquee copy-database` copies its SQLite database into an empty
/// PostgreSQL one; a manager on PostgreSQL then answers the same objects, the same report and
/// the same admin token. A second copy into that database is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn copy_database_moves_a_single_machine_install_to_postgres() {
    let data = tempfile::tempdir().unwrap();
    let serve = common::Server::start(data.path(), &["--demo"]);
    let token = common::token_from(&serve.stderr_line("demo admin token"));
    let client = reqwest::Client::new();
    common::wait_for_ad(&client, &serve.base).await;
    let html = common::get_text(&client, &serve.url("/ad?placement=1&format=html")).await;
    let beacon = common::impression_token(&html).unwrap().to_owned();
    let fired = client
        .get(serve.url(&format!("/t/i?t={beacon}")))
        .send()
        .await
        .unwrap();
    assert!(fired.status().is_success());
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let report = format!(
        "/api/v1/reports?tz=UTC&granularity=day&from={}&to={}",
        today.yesterday().unwrap(),
        today.tomorrow().unwrap()
    );
    let listings = [
        "/api/v1/advertisers",
        "/api/v1/line-items",
        "/api/v1/creatives",
        "/api/v1/placements",
    ];
    let mut before = Vec::new();
    for path in listings {
        before.push(common::get_json(&client, &serve.url(path), Some(&token)).await);
    }
    // A graceful stop counts the last events first.
    serve.stop();

    let db = TestDatabase::create().await;
    let copy = |data: &std::path::Path| {
        Command::new(common::BIN)
            .args(["copy-database", "--data"])
            .arg(data)
            .args(["--database", db.url()])
            .env_remove("MARQUEE_DATABASE__URL")
            .output()
            .unwrap()
    };
    let copied = copy(data.path());
    assert!(copied.status.success(), "{}", text(&copied.stderr));
    assert!(
        text(&copied.stdout).starts_with("copied "),
        "{}",
        text(&copied.stdout)
    );
    assert!(
        text(&copied.stderr).contains("line_items: "),
        "{}",
        text(&copied.stderr)
    );

    let manager_data = tempfile::tempdir().unwrap();
    let manager = common::Server::spawn({
        let mut command = Command::new(common::BIN);
        command
            .args(["manager", "--listen", "127.0.0.1:0", "--data"])
            .arg(manager_data.path())
            .args(["--database", db.url()])
            .env("MARQUEE_AGGREGATION__TOKEN", "a-long-shared-secret-0123")
            .env_remove("MARQUEE_DATABASE__URL");
        command
    });
    for (path, before) in listings.iter().zip(&before) {
        let after = common::get_json(&client, &manager.url(path), Some(&token)).await;
        assert_eq!(&after, before, "{path}");
    }
    let totals = common::get_json(&client, &manager.url(&report), Some(&token)).await;
    assert_eq!(totals["totals"]["impressions"], 1, "{totals}");
    manager.stop();

    let again = copy(data.path());
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("already holds data"),
        "{}",
        text(&again.stderr)
    );
}
