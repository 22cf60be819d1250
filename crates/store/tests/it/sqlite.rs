//! The conformance suite and SQLite-specific behaviour (migrations, concurrency) of
//! `SqliteStore`.

// Test code: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{
    CHANGE_MIGRATION_1, RECORD_MIGRATION_9999, advertiser, assert_kept, assert_refused_as_changed,
    assert_refused_as_unknown, check_catalog, clock, expected_tables, spawn_campaign_writer,
};
use jiff::SignedDuration;
use marquee_model::{Clock, ManualClock, ObjectKind};
use marquee_store::{Actor, ListQuery, SqliteStore, Store};
use tempfile::TempDir;

fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("marquee.db")
}

async fn fresh_store() -> (Arc<dyn Store>, Arc<ManualClock>, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let store = SqliteStore::open(&db_path(&dir), clock.clone()).unwrap();
    (Arc::new(store), clock, dir)
}

mod conformance {
    marquee_store::store_suite!(super::fresh_store());
}

mod stats_conformance {
    marquee_store::stats_suite!(super::fresh_store());
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn applied_migrations(path: &Path) -> Vec<(u32, String, String, i64)> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare("SELECT version, name, sha256, applied_at FROM schema_migrations ORDER BY version")
        .unwrap();
    stmt.query_map([], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

#[tokio::test]
async fn migrations_build_the_schema_on_an_empty_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let clock = clock();
    let store = SqliteStore::open(&path, clock.clone()).unwrap();

    let conn = raw(&path);
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    let tables: Vec<String> = stmt
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(tables, expected_tables());

    let applied = applied_migrations(&path);
    let names: Vec<(u32, &str)> = applied.iter().map(|m| (m.0, m.1.as_str())).collect();
    assert_eq!(
        names,
        vec![
            (1, "initial"),
            (2, "stats"),
            (3, "stats_minute_lean"),
            (4, "stats_hour_line_item"),
            (5, "pacing_state"),
            (6, "users"),
            (7, "invalid_traffic"),
            (8, "stats_region"),
            (9, "audit"),
            (10, "programmatic"),
            (11, "forecast_sample")
        ]
    );
    // The stats tables rebuilt with a region keep their indexes.
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN \
             ('stats_minute', 'stats_hour', 'stats_day') AND sql IS NOT NULL ORDER BY name",
        )
        .unwrap();
    let indexes: Vec<String> = stmt
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        indexes,
        [
            "stats_day_bucket",
            "stats_day_placement",
            "stats_hour_bucket",
            "stats_hour_placement",
            "stats_minute_bucket"
        ]
    );
    let (_, _, sha256, applied_at) = &applied[0];
    assert_eq!(sha256.len(), 64);
    assert!(
        sha256
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(*applied_at, clock.now().as_microsecond());

    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(store.change_counter().await.unwrap(), 0);
}

#[tokio::test]
async fn reopening_keeps_data_and_applies_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let clock = clock();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, clock.clone()).unwrap());
    let created = store
        .create_object(&advertiser("Acme"), None, &Actor::cli())
        .await
        .unwrap();
    let before = applied_migrations(&path);
    drop(store);

    clock.advance(SignedDuration::from_secs(86_400));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, clock.clone()).unwrap());
    assert_kept(store.as_ref(), &created).await;
    assert_eq!(applied_migrations(&path), before);
    let next = store
        .create_object(&advertiser("Globex"), None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(next.meta.id, 2);
}

#[tokio::test]
async fn a_changed_migration_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    drop(SqliteStore::open(&path, clock()).unwrap());
    raw(&path).execute(CHANGE_MIGRATION_1, []).unwrap();

    let error = SqliteStore::open(&path, clock()).unwrap_err();
    assert_refused_as_changed(&error);
}

#[tokio::test]
async fn a_database_from_a_newer_binary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    drop(SqliteStore::open(&path, clock()).unwrap());
    raw(&path).execute(RECORD_MIGRATION_9999, []).unwrap();

    let error = SqliteStore::open(&path, clock()).unwrap_err();
    assert_refused_as_unknown(&error);
}

/// Readers see consistent snapshots while a writer commits: every catalog's campaigns match
/// the counter it was read at, and the counter never goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_run_while_writing() {
    const WRITES: u64 = 40;
    let (store, _clock, _dir) = fresh_store().await;
    let advertiser = store
        .create_object(&advertiser("Acme"), None, &Actor::cli())
        .await
        .unwrap();
    let owner = advertiser.meta.id;

    let writer = spawn_campaign_writer(&store, owner, "Campaign ".to_owned(), WRITES);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut last = 0;
                for _ in 0..WRITES {
                    last = check_catalog(store.as_ref(), last).await;
                    let query = ListQuery {
                        scope: Some(owner),
                        limit: 500,
                        ..ListQuery::default()
                    };
                    let listed = store.list(ObjectKind::Campaign, &query).await.unwrap();
                    assert!(listed.len() as u64 + 1 >= last);
                }
            })
        })
        .collect();
    writer.await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    assert_eq!(store.change_counter().await.unwrap(), WRITES + 1);
}
