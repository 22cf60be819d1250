//! `copy_sqlite_to_postgres`: a SQLite database with every kind of row is copied into an empty
//! PostgreSQL database (the server `scripts/test-deps.sh` starts) and every table reads back
//! the same; the copy refuses a database that holds data and leaves it as it was. Ignored by
//! plain `cargo test`, run by `scripts/test.sh`.

// Test code: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use jiff::Timestamp;
use marquee_model::{
    CreativeAssignment, CreativeId, LineItemId, ManualClock, ObjectKind, PlacementId, Role, Status,
};
use marquee_stats::{Counters, Hll, RowKey, SketchKey};
use marquee_store::test_postgres::TestDatabase;
use marquee_store::{
    Actor, Checkpoint, CheckpointMove, CopyError, Draft, NewSession, NewToken, NewUser,
    PacingStore, PostgresStore, RunWrite, SqliteStore, StatsStore, Store, UserStore,
    copy_sqlite_to_postgres,
};
use rusqlite::types::Value;
use tokio_postgres::NoTls;
use tokio_postgres::types::Type;

/// Every table of the SQLite schema but the migrations' own: a table the copy does not know
/// fails the test.
fn data_tables(path: &std::path::Path) -> Vec<String> {
    let connection = rusqlite::Connection::open(path).unwrap();
    let mut statement = connection
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT IN ('schema_migrations', 'sqlite_sequence') ORDER BY name",
        )
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new("2026-12-01T12:00:00Z".parse().unwrap()))
}

/// One cell as either database holds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Cell {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

async fn create(store: &dyn Store, kind: ObjectKind, parent_id: Option<u64>, body: &str) -> u64 {
    let name = format!("{} \"quoted\" ü", kind.name());
    marquee_store::stats_suite::create_named(store, kind, parent_id, &name, body).await
}

/// Objects of every kind (one archived after an update, so versions differ), links, a creative
/// assignment, tokens,
/// users and a session, pacing state, and an aggregation run with rows in every statistics
/// table, checkpoints and dedupe entries.
async fn fill(store: &SqliteStore) {
    let advertiser = create(
        store,
        ObjectKind::Advertiser,
        None,
        r#"{"time_zone":"Europe/Berlin","currency":"EUR"}"#,
    )
    .await;
    let campaign = create(store, ObjectKind::Campaign, Some(advertiser), "{}").await;
    let mut line_items = Vec::new();
    let mut creatives = Vec::new();
    for _ in 0..3 {
        let line_item = create(store, ObjectKind::LineItem, Some(campaign), "{}").await;
        creatives.push(create(store, ObjectKind::Creative, Some(line_item), "{}").await);
        line_items.push(line_item);
    }
    // A library creative used by a second line item, with a flight.
    store
        .assign(
            CreativeAssignment {
                line_item_id: LineItemId(line_items[1]),
                creative_id: CreativeId(creatives[0]),
                weight: 40,
                start: Some("2026-12-01T00:00:00Z".parse().unwrap()),
                end: None,
            },
            None,
            &Actor::cli(),
        )
        .await
        .unwrap();
    let publisher = create(store, ObjectKind::Publisher, None, "{}").await;
    let site = create(store, ObjectKind::Site, Some(publisher), "{}").await;
    let placement = create(store, ObjectKind::Placement, Some(site), "{}").await;
    store
        .link(
            LineItemId(line_items[0]),
            PlacementId(placement),
            &Actor::cli(),
        )
        .await
        .unwrap();
    let updated = store
        .update(
            ObjectKind::LineItem,
            line_items[2],
            1,
            Draft {
                parent_id: Some(campaign),
                name: "renamed".into(),
                status: Status::Paused,
                body: "{}".into(),
            },
            None,
            &Actor::cli(),
        )
        .await
        .unwrap();
    assert_eq!(updated.meta.version, 2);
    store
        .archive(ObjectKind::LineItem, line_items[2], None, &Actor::cli())
        .await
        .unwrap();
    for (role, owner_id, byte) in [
        (Role::Admin, None, 1u8),
        (Role::Advertiser, Some(advertiser), 2),
    ] {
        store
            .create_token(
                NewToken {
                    role,
                    owner_id,
                    hash: [byte; 32],
                    label: "t".into(),
                },
                &marquee_store::Actor::cli(),
            )
            .await
            .unwrap();
    }
    let user = store
        .create_user(
            NewUser {
                name: "alice".into(),
                role: Role::Publisher,
                owner_id: Some(publisher),
                password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
            },
            &marquee_store::Actor::cli(),
        )
        .await
        .unwrap();
    store
        .create_session(NewSession {
            hash: [7; 32],
            user_id: user.id,
            csrf_token: "csrf".into(),
            expires_at: "2030-01-01T00:00:00Z".parse().unwrap(),
        })
        .await
        .unwrap();
    store
        .save_pacing_state("budgets", r#"{"spent":[1,2,3]}"#.into())
        .await
        .unwrap();

    let minute = "2026-12-01T10:05:00Z"
        .parse::<Timestamp>()
        .unwrap()
        .as_second();
    let key = |line_item: u64, bucket: i64| RowKey {
        line_item,
        bucket,
        creative: line_item * 10,
        placement,
        country: *b"DE",
        region: *b"BE\0",
        device: 2,
    };
    // Invalid traffic too: its columns come along with the others.
    let counters = Counters {
        impressions: 40,
        clicks: 3,
        cpm_micros: 123_456,
        invalid_impressions: 5,
        invalid_clicks: 2,
        invalid_crawler: 4,
        invalid_too_fast: 2,
        invalid_no_cache_buster: 1,
        ..Counters::default()
    };
    let mut sketch = Hll::new();
    for user in 1..500 {
        sketch.insert(user);
    }
    let run = RunWrite {
        minutes: vec![(key(line_items[0], minute), counters)],
        hours: vec![(key(line_items[0], minute - minute % 3_600), counters)],
        days: vec![(key(line_items[0], minute - minute % 86_400), counters)],
        line_item_hours: vec![(
            RowKey {
                creative: 0,
                placement: 0,
                country: [0, 0],
                region: [0; 3],
                device: 0,
                ..key(line_items[0], minute - minute % 3_600)
            },
            counters,
        )],
        sketches: vec![(
            SketchKey {
                line_item: line_items[0],
                day: 20_261_201,
            },
            sketch,
        )],
        seen_entries: (0..26 * 3).map(|i| i as u8).collect(),
        seen_max_time: minute,
        samples: vec![(20_423, (0..=255).collect())],
        checkpoints: vec![CheckpointMove {
            from: None,
            to: Checkpoint {
                source: "edge \"a\"".into(),
                shard: 1,
                segment: 4,
                offset: 1_234,
                max_event_time_micros: minute * 1_000_000,
            },
        }],
        now: Timestamp::from_second(minute).unwrap(),
        ..RunWrite::default()
    };
    store.commit_run(run).await.unwrap();
}

/// Every row of `table` in the SQLite file, sorted.
fn sqlite_rows(path: &std::path::Path, table: &str) -> Vec<Vec<Cell>> {
    let connection = rusqlite::Connection::open(path).unwrap();
    let mut statement = connection
        .prepare(&format!("SELECT * FROM {table}"))
        .unwrap();
    let columns = statement.column_count();
    let mut rows: Vec<Vec<Cell>> = statement
        .query_map([], |row| {
            Ok((0..columns)
                .map(|i| match row.get::<_, Value>(i).unwrap() {
                    Value::Null => Cell::Null,
                    Value::Integer(n) => Cell::Int(n),
                    Value::Text(t) => Cell::Text(t),
                    Value::Blob(b) => Cell::Bytes(b),
                    Value::Real(r) => panic!("{table}: a real {r}"),
                })
                .collect())
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort();
    rows
}

/// Every row of `table` in the PostgreSQL database, sorted.
async fn postgres_rows(client: &tokio_postgres::Client, table: &str) -> Vec<Vec<Cell>> {
    let mut rows: Vec<Vec<Cell>> = client
        .query(&format!("SELECT * FROM {table}"), &[])
        .await
        .unwrap()
        .iter()
        .map(|row| {
            row.columns()
                .iter()
                .enumerate()
                .map(|(i, column)| {
                    let int = |value: Option<i64>| value.map_or(Cell::Null, Cell::Int);
                    match *column.type_() {
                        Type::INT8 => int(row.get(i)),
                        Type::INT4 => int(row.get::<_, Option<i32>>(i).map(i64::from)),
                        Type::INT2 => int(row.get::<_, Option<i16>>(i).map(i64::from)),
                        Type::TEXT => row
                            .get::<_, Option<String>>(i)
                            .map_or(Cell::Null, Cell::Text),
                        Type::BYTEA => row
                            .get::<_, Option<Vec<u8>>>(i)
                            .map_or(Cell::Null, Cell::Bytes),
                        ref other => panic!("{table}.{}: type {other}", column.name()),
                    }
                })
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

async fn raw(db: &TestDatabase) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(db.url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn every_row_reaches_postgres_and_new_rows_follow_the_copied_ids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let sqlite = SqliteStore::open(&path, clock()).unwrap();
    fill(&sqlite).await;
    drop(sqlite);

    let db = TestDatabase::create().await;
    let postgres = PostgresStore::connect(db.url(), clock()).await.unwrap();
    let summary = copy_sqlite_to_postgres(&path, &postgres).await.unwrap();
    let client = raw(&db).await;
    let tables = data_tables(&path);
    assert_eq!(tables.len(), 23, "{tables:?}");
    for table in &tables {
        let expected = sqlite_rows(&path, table);
        assert!(!expected.is_empty(), "{table} has rows to copy");
        assert_eq!(postgres_rows(&client, table).await, expected, "{table}");
    }
    // All but the change counter, which is set rather than copied.
    assert_eq!(summary.tables.len(), tables.len() - 1);
    assert!(
        summary.tables.iter().all(|(_, rows)| *rows > 0),
        "{summary:?}"
    );

    // The store finds what was copied, and new rows take ids after the copied ones.
    assert_eq!(
        postgres.change_counter().await.unwrap(),
        u64::try_from(summary.change_counter).unwrap()
    );
    let principal = postgres.find_token(&[2; 32]).await.unwrap().unwrap();
    assert_eq!(principal.role, Role::Advertiser);
    assert!(postgres.find_session(&[7; 32]).await.unwrap().is_some());
    let next = create(
        &postgres,
        ObjectKind::Advertiser,
        None,
        r#"{"time_zone":"UTC","currency":"USD"}"#,
    )
    .await;
    // One advertiser was copied.
    assert_eq!(next, 2);
    let user = postgres
        .create_user(
            NewUser {
                name: "bob".into(),
                role: Role::Admin,
                owner_id: None,
                password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
            },
            &marquee_store::Actor::cli(),
        )
        .await
        .unwrap();
    assert_eq!(user.id, 2);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_database_with_data_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    fill(&SqliteStore::open(&path, clock()).unwrap()).await;
    let db = TestDatabase::create().await;
    let postgres = PostgresStore::connect(db.url(), clock()).await.unwrap();
    let only = create(&postgres, ObjectKind::Publisher, None, "{}").await;
    let error = copy_sqlite_to_postgres(&path, &postgres).await.unwrap_err();
    assert!(
        matches!(
            error,
            CopyError::NotEmpty {
                table: "publishers"
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("empty database"), "{error}");
    let client = raw(&db).await;
    for table in data_tables(&path) {
        let rows = postgres_rows(&client, &table).await.len();
        let expected = match table.as_str() {
            // The publisher's creation was audited with it.
            "publishers" | "change_counter" | "audit" => 1,
            _ => 0,
        };
        assert_eq!(rows, expected, "{table}");
    }
    assert_eq!(only, 1);
}
