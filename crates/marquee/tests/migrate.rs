//! `marquee migrate` and `--database` from the outside: the binary applies PostgreSQL
//! migrations once even when two start at once, the store it leaves works, and a bad URL stops
//! it with a message naming the problem (never the password). PostgreSQL is the test server of
//! `scripts/test-deps.sh`, one database per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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
        2,
        "each of the two migrations is applied by one process only"
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
