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
            (11, "forecast_sample"),
            (12, "creative_library")
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

/// The SQL files of migrations 1 to 11, the schema the release before the creative library
/// left behind.
const RELEASED_MIGRATIONS: [(u32, &str, &str); 11] = [
    (
        1,
        "initial",
        include_str!("../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "stats",
        include_str!("../../migrations/sqlite/0002_stats.sql"),
    ),
    (
        3,
        "stats_minute_lean",
        include_str!("../../migrations/sqlite/0003_stats_minute_lean.sql"),
    ),
    (
        4,
        "stats_hour_line_item",
        include_str!("../../migrations/sqlite/0004_stats_hour_line_item.sql"),
    ),
    (
        5,
        "pacing_state",
        include_str!("../../migrations/sqlite/0005_pacing_state.sql"),
    ),
    (
        6,
        "users",
        include_str!("../../migrations/sqlite/0006_users.sql"),
    ),
    (
        7,
        "invalid_traffic",
        include_str!("../../migrations/sqlite/0007_invalid_traffic.sql"),
    ),
    (
        8,
        "stats_region",
        include_str!("../../migrations/sqlite/0008_stats_region.sql"),
    ),
    (
        9,
        "audit",
        include_str!("../../migrations/sqlite/0009_audit.sql"),
    ),
    (
        10,
        "programmatic",
        include_str!("../../migrations/sqlite/0010_programmatic.sql"),
    ),
    (
        11,
        "forecast_sample",
        include_str!("../../migrations/sqlite/0011_forecast_sample.sql"),
    ),
];

/// Builds, by SQL alone, a database as the release before the creative library left it:
/// migrations 1 to 11 recorded as that release records them, and an advertiser with two line
/// items and three creatives inserted as rows.
fn released_database(path: &Path) -> Vec<(u64, u64)> {
    use sha2::Digest as _;
    let conn = raw(path);
    conn.execute_batch(
        "CREATE TABLE schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        )",
    )
    .unwrap();
    for (version, name, sql) in RELEASED_MIGRATIONS {
        conn.execute_batch(sql).unwrap();
        let sha256: String = sha2::Sha256::digest(sql.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        conn.execute(
            "INSERT INTO schema_migrations (version, name, sha256, applied_at)
             VALUES (?1, ?2, ?3, 0)",
            rusqlite::params![version, name, sha256],
        )
        .unwrap();
    }
    let row = |table: &str, id: u64, parent: Option<u64>, name: &str, body: &str| {
        conn.execute(
            &format!(
                "INSERT INTO {table}
                     (id, parent_id, owner_id, name, status, version, created_at, updated_at, body)
                 VALUES (?1, ?2, 1, ?3, 'active', 1, 0, 0, ?4)"
            ),
            rusqlite::params![id, parent, name, body],
        )
        .unwrap();
    };
    row(
        "advertisers",
        1,
        None,
        "Acme",
        r#"{"name":"Acme","status":"active","currency":"EUR","time_zone":"Europe/Berlin","domains":[]}"#,
    );
    row(
        "campaigns",
        2,
        Some(1),
        "Winter",
        r#"{"advertiser_id":1,"name":"Winter","status":"active","frequency_caps":[]}"#,
    );
    let mut creatives = Vec::new();
    for (line_item, creatives_of_it) in [(3u64, [10u64, 11].as_slice()), (4, &[12])] {
        row(
            "line_items",
            line_item,
            Some(2),
            "Line",
            r#"{"campaign_id":2,"name":"Line","status":"active","start":"2026-01-01T00:00:00",
                "end":null,"time_zone":"Europe/Berlin","tier":"standard","weight":100,
                "goal":null,"pacing":"even",
                "price":{"model":"cpm","amount_micros":2000000,"currency":"EUR"},
                "frequency_caps":[],"targeting":null,"rotation":"weighted"}"#,
        );
        for &creative in creatives_of_it {
            let body = format!(
                r#"{{"line_item_id":{line_item},"name":"Banner","status":"active",
                    "size":{{"w":300,"h":250}},"landing_url":"https://shop.example.com/",
                    "weight":10,"content":{{"type":"image",
                    "image_url":"https://cdn.example.com/b.png","alt":"Banner"}}}}"#
            );
            row("creatives", creative, Some(line_item), "Banner", &body);
            creatives.push((creative, line_item));
        }
    }
    creatives
}

/// What decides that a creative serves (the snapshot compiler's input: its line item, its
/// status, its approval) survives the migration; the compiler's use of it is the snapshot
/// crate's tests'.
#[tokio::test]
async fn creatives_keep_their_line_items_and_approval_after_the_library_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let creatives = released_database(&path);

    let clock = clock();
    let store = SqliteStore::open(&path, clock.clone()).unwrap();
    let applied = applied_migrations(&path);
    assert_eq!(applied.last().map(|m| m.0), Some(12));

    let catalog = store.catalog().await.unwrap();
    assert!(catalog.assignments.is_empty());
    let kept: Vec<(u64, u64)> = catalog
        .creatives
        .iter()
        .map(|c| (c.meta.id, c.object.line_item_id.0))
        .collect();
    assert_eq!(kept, creatives);
    for creative in &catalog.creatives {
        assert!(creative.object.approval.is_approved(), "{creative:?}");
        assert_eq!(creative.object.status, marquee_model::Status::Active);
    }
    let line_items: Vec<u64> = catalog.line_items.iter().map(|li| li.meta.id).collect();
    for (_, line_item) in &creatives {
        assert!(line_items.contains(line_item), "{line_items:?}");
    }
}
