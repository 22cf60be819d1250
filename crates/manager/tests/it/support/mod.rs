//! Helpers shared by the manager's integration tests.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use marquee_manager::{Manager, ManagerOptions, demo};
use marquee_model::{Clock, LineItem};
use marquee_stats::{Counters, RowKey};
use marquee_store::{Actor, RunWrite, SqliteStore, Store};

/// A SQLite store at `path` holding the demo catalog.
pub async fn demo_store(path: &Path, clock: &Arc<dyn Clock>) -> Arc<dyn Store> {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path, Arc::clone(clock)).unwrap());
    demo::load(&*store, &**clock).await.unwrap();
    store
}

/// A manager over `store` keeping `keep` snapshot files in `snapshots`.
pub async fn open_manager(
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    snapshots: &Path,
    keep: usize,
) -> Arc<Manager> {
    Manager::open(
        Arc::clone(store),
        Arc::clone(clock),
        ManagerOptions {
            snapshot_dir: snapshots.to_owned(),
            keep,
            compile_interval: Duration::from_secs(1),
        },
    )
    .await
    .unwrap()
}

/// Commits `counters` of a line item on a placement at `at` as an aggregation run would
/// (minute, hour, line item hour and day rows).
pub async fn commit(
    store: &dyn Store,
    line_item: u64,
    placement: u64,
    counters: Counters,
    at: Timestamp,
) {
    let key = |width: i64| RowKey {
        line_item,
        bucket: at.as_second() - at.as_second().rem_euclid(width),
        creative: 0,
        placement,
        country: [0, 0],
        region: [0; 3],
        device: 0,
    };
    store
        .commit_run(RunWrite {
            minutes: vec![(key(60), counters)],
            hours: vec![(key(3_600), counters)],
            line_item_hours: vec![(key(3_600), counters)],
            days: vec![(key(86_400), counters)],
            now: at,
            ..RunWrite::default()
        })
        .await
        .unwrap();
}

/// A catalog change: line item `id`'s weight raised by one, by the CLI.
pub async fn raise_weight(store: &dyn Store, id: u64) {
    let mut line_item = store.get_object::<LineItem>(id, None).await.unwrap();
    line_item.object.weight += 1;
    store
        .update_object(
            id,
            line_item.meta.version,
            &line_item.object,
            None,
            &Actor::cli(),
        )
        .await
        .unwrap();
}
