//! The conformance suites and PostgreSQL-specific behaviour (migrations under the advisory
//! lock, concurrent writers) of `PostgresStore`. Each test gets a database of its own on the
//! server `scripts/test-deps.sh` starts (see `marquee_store::test_postgres`); those tests are
//! ignored by plain `cargo test` and run by `scripts/test.sh`.

// Test code: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    CHANGE_MIGRATION_1, RECORD_MIGRATION_9999, advertiser, assert_kept, assert_refused_as_changed,
    assert_refused_as_unknown, clock, expected_tables, spawn_campaign_writer, spawn_catalog_reader,
};
use jiff::SignedDuration;
use marquee_model::{Clock, ManualClock, ObjectKind};
use marquee_store::test_postgres::TestDatabase;
use marquee_store::{
    Actor, Checkpoint, CheckpointMove, ListQuery, LockAttempt, ManagerLock, PostgresStore,
    RunWrite, Store,
};
use tokio_postgres::NoTls;

async fn fresh_store() -> (Arc<dyn Store>, Arc<ManualClock>, TestDatabase) {
    let db = TestDatabase::create().await;
    let clock = clock();
    let store = PostgresStore::connect(db.url(), clock.clone())
        .await
        .unwrap();
    (Arc::new(store), clock, db)
}

mod conformance {
    marquee_store::store_suite!(
        super::fresh_store(),
        #[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
    );
}

mod stats_conformance {
    marquee_store::stats_suite!(
        super::fresh_store(),
        #[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
    );
}

/// A plain client of the test database, for looking behind the store.
async fn raw(db: &TestDatabase) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(db.url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn applied_migrations(db: &TestDatabase) -> Vec<(i32, String, String, i64)> {
    raw(db)
        .await
        .query(
            "SELECT version, name, sha256, applied_at FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect()
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn migrations_build_the_schema_on_an_empty_database() {
    let db = TestDatabase::create().await;
    let clock = clock();
    let store = PostgresStore::connect(db.url(), clock.clone())
        .await
        .unwrap();
    let tables: Vec<String> = raw(&db)
        .await
        .query(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = 'public' ORDER BY table_name",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(tables, expected_tables());

    let applied = applied_migrations(&db).await;
    let names: Vec<(i32, &str)> = applied.iter().map(|m| (m.0, m.1.as_str())).collect();
    assert_eq!(
        names,
        vec![
            (1, "initial"),
            (2, "users"),
            (3, "invalid_traffic"),
            (4, "stats_region"),
            (5, "audit"),
            (6, "programmatic"),
            (7, "forecast_sample"),
            (8, "creative_library")
        ]
    );
    assert_eq!(applied[0].2.len(), 64);
    assert_eq!(applied[0].3, clock.now().as_microsecond());
    assert_eq!(store.change_counter().await.unwrap(), 0);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn reconnecting_keeps_data_and_applies_nothing_twice() {
    let db = TestDatabase::create().await;
    let clock = clock();
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect(db.url(), clock.clone())
            .await
            .unwrap(),
    );
    let created = store
        .create_object(&advertiser("Acme"), None, &Actor::cli())
        .await
        .unwrap();
    let before = applied_migrations(&db).await;
    drop(store);

    clock.advance(SignedDuration::from_secs(86_400));
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect(db.url(), clock.clone())
            .await
            .unwrap(),
    );
    assert_kept(store.as_ref(), &created).await;
    assert_eq!(applied_migrations(&db).await, before);
}

/// Two managers starting at once on an empty database: both connect, each migration is
/// applied once (the second waits on the advisory lock, then finds it applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn concurrent_migrations_apply_each_version_once() {
    let db = TestDatabase::create().await;
    let url = db.url().to_owned();
    let starts: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PostgresStore::connect(&url, clock()).await })
        })
        .collect();
    for start in starts {
        start.await.unwrap().unwrap();
    }
    let applied = applied_migrations(&db).await;
    assert_eq!(
        applied.iter().map(|m| m.0).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6, 7, 8]
    );
    let counters = raw(&db)
        .await
        .query_one("SELECT count(*) FROM change_counter", &[])
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(counters, 1, "the initial migration ran once");
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_changed_migration_is_refused() {
    let db = TestDatabase::create().await;
    drop(PostgresStore::connect(db.url(), clock()).await.unwrap());
    raw(&db)
        .await
        .execute(CHANGE_MIGRATION_1, &[])
        .await
        .unwrap();
    let error = PostgresStore::connect(db.url(), clock()).await.unwrap_err();
    assert_refused_as_changed(&error);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_database_from_a_newer_binary_is_refused() {
    let db = TestDatabase::create().await;
    drop(PostgresStore::connect(db.url(), clock()).await.unwrap());
    raw(&db)
        .await
        .execute(RECORD_MIGRATION_9999, &[])
        .await
        .unwrap();
    let error = PostgresStore::connect(db.url(), clock()).await.unwrap_err();
    assert_refused_as_unknown(&error);
}

#[tokio::test]
async fn an_unreachable_server_is_named_in_the_error() {
    // Port 9 (discard) on loopback: nothing listens there.
    let error = PostgresStore::connect("postgres://marquee:secret@127.0.0.1:9/app", clock())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("127.0.0.1:9/app"), "{error}");
    assert!(!error.contains("secret"), "{error}");
}

/// Writers on several connections at once: every create bumps the counter once, ids are
/// unique, and readers see catalogs whose campaigns match the counter they were read at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn concurrent_writers_and_readers_stay_consistent() {
    const WRITERS: u64 = 4;
    const WRITES: u64 = 10;
    let (store, _clock, _db) = fresh_store().await;
    let owner = store
        .create_object(&advertiser("Acme"), None, &Actor::cli())
        .await
        .unwrap()
        .meta
        .id;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| spawn_campaign_writer(&store, owner, format!("Campaign {w}-"), WRITES))
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| spawn_catalog_reader(&store, WRITES))
        .collect();
    for task in writers.into_iter().chain(readers) {
        task.await.unwrap();
    }
    assert_eq!(store.change_counter().await.unwrap(), WRITERS * WRITES + 1);
    let query = ListQuery {
        scope: Some(owner),
        limit: 500,
        ..ListQuery::default()
    };
    let listed = store.list(ObjectKind::Campaign, &query).await.unwrap();
    assert_eq!(listed.len() as u64, WRITERS * WRITES);
}

/// Ends the session holding the manager lock (as a server restart or a broken connection
/// would), and returns how many there were.
async fn end_lock_sessions(db: &TestDatabase) -> u64 {
    raw(db)
        .await
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'marquee manager lock' AND datname = current_database()",
            &[],
        )
        .await
        .unwrap()
        .len() as u64
}

async fn take_lock(store: &dyn Store) -> ManagerLock {
    match store.try_lock_manager().await.unwrap() {
        LockAttempt::Acquired(lock) => lock,
        LockAttempt::HeldBy(holder) => panic!("held by {holder}"),
    }
}

/// The lock is per database: a manager of another database on the same server is not kept
/// waiting.
#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn manager_locks_of_two_databases_do_not_contend() {
    let (first, _, _db) = fresh_store().await;
    let (second, _, _other) = fresh_store().await;
    let _held = take_lock(&*first).await;
    let _also_held = take_lock(&*second).await;
}

/// A holder whose session ends (the server restarted, the connection broke) takes the lock
/// again when no other manager did, and goes on as the active manager.
#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_manager_lock_whose_session_ends_is_taken_again() {
    let (store, _clock, db) = fresh_store().await;
    let lock = take_lock(&*store).await;
    assert_eq!(end_lock_sessions(&db).await, 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let sessions = raw(&db)
            .await
            .query(
                "SELECT 1 FROM pg_stat_activity
                 WHERE application_name = 'marquee manager lock' AND datname = current_database()",
                &[],
            )
            .await
            .unwrap()
            .len();
        if sessions == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was not taken again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(matches!(
        store.try_lock_manager().await.unwrap(),
        LockAttempt::HeldBy(_)
    ));
    assert!(!lock.is_lost());
}

/// If another manager takes the lock while the holder's session is gone, the holder learns
/// that it lost it (and must stop).
#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_manager_lock_taken_by_another_meanwhile_is_lost() {
    let (store, _clock, db) = fresh_store().await;
    let lock = take_lock(&*store).await;
    assert_eq!(end_lock_sessions(&db).await, 1);
    // Within the holder's pause before it tries again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let _other = loop {
        match store.try_lock_manager().await.unwrap() {
            LockAttempt::Acquired(other) => break other,
            LockAttempt::HeldBy(_) => {
                assert!(std::time::Instant::now() < deadline, "never released");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), lock.lost())
        .await
        .expect("the holder learns that it lost the lock");
    assert!(lock.is_lost());
}

/// The takeover race on PostgreSQL: a run commits while another transaction (the other
/// manager's run) is moving the same checkpoint. Its checkpoint upsert waits for that
/// transaction's row lock, then compares with the outcome: refused if the row moved, made if
/// the other transaction rolled back.
#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_run_meeting_a_concurrent_checkpoint_move_waits_and_compares_with_its_outcome() {
    let checkpoint = |segment| Checkpoint {
        source: "eu-1".into(),
        shard: 0,
        segment,
        offset: 28,
        max_event_time_micros: 5,
    };
    for other_commits in [true, false] {
        let (store, _clock, db) = fresh_store().await;
        let first = RunWrite {
            checkpoints: vec![CheckpointMove {
                from: None,
                to: checkpoint(1),
            }],
            ..RunWrite::default()
        };
        store.commit_run(first).await.unwrap();
        let mut other = raw(&db).await;
        let tx = other.transaction().await.unwrap();
        tx.execute(
            "UPDATE stats_checkpoints SET segment = 2 WHERE source = 'eu-1' AND shard = 0",
            &[],
        )
        .await
        .unwrap();
        let run = RunWrite {
            checkpoints: vec![CheckpointMove {
                from: Some(checkpoint(1).position()),
                to: checkpoint(3),
            }],
            ..RunWrite::default()
        };
        let commit = tokio::spawn({
            let store = Arc::clone(&store);
            async move { store.commit_run(run).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!commit.is_finished(), "waits for the other transaction");
        if other_commits {
            tx.commit().await.unwrap();
        } else {
            tx.rollback().await.unwrap();
        }
        let result = tokio::time::timeout(Duration::from_secs(10), commit)
            .await
            .expect("the run goes on once the other transaction ended")
            .unwrap();
        let stored = store.collection_state().await.unwrap().checkpoints;
        if other_commits {
            let refused = result.unwrap_err();
            assert_eq!(
                refused.checkpoint_moved().map(|m| m.shard),
                Some(0),
                "{refused}"
            );
            assert_eq!(stored, vec![checkpoint(2)]);
        } else {
            result.unwrap();
            assert_eq!(stored, vec![checkpoint(3)]);
        }
    }
}
