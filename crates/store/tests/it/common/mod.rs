//! What the backend tests (`sqlite.rs`, `postgres.rs`) share: the clock, objects, the schema
//! every backend's migrations build, the refusals of migrations the binary does not know, and
//! the consistency check of a catalog read during writes.

use std::sync::Arc;

use jiff::Timestamp;
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, Currency, ManualClock, ObjectKind, Status, Stored,
};
use marquee_store::{Actor, MigrationError, Store, StoreError};

/// Marks migration 1 as changed since it was applied.
pub const CHANGE_MIGRATION_1: &str =
    "UPDATE schema_migrations SET sha256 = 'f00d' WHERE version = 1";

/// Records a migration no binary knows (one from a newer binary).
pub const RECORD_MIGRATION_9999: &str = "INSERT INTO schema_migrations \
     (version, name, sha256, applied_at) VALUES (9999, 'from_the_future', 'abc', 0)";

pub fn clock() -> Arc<ManualClock> {
    // Sub-second on purpose: timestamps must survive to the microsecond.
    Arc::new(ManualClock::new(
        Timestamp::from_microsecond(1_780_000_000_123_456).unwrap(),
    ))
}

pub fn advertiser(name: &str) -> Advertiser {
    Advertiser {
        name: name.to_owned(),
        status: Status::Active,
        currency: Currency::USD,
        time_zone: "America/New_York".to_owned(),
        domains: Vec::new(),
    }
}

pub fn campaign(advertiser: u64, name: String) -> Campaign {
    Campaign {
        advertiser_id: AdvertiserId(advertiser),
        name,
        status: Status::Active,
        frequency_caps: Vec::new(),
        categories: Vec::new(),
        app_bundle: None,
    }
}

/// The tables of a fully migrated database, sorted.
pub fn expected_tables() -> Vec<String> {
    let mut expected: Vec<String> = ObjectKind::ALL
        .iter()
        .map(|k| format!("{}s", k.name()))
        .collect();
    expected.extend(
        [
            "api_tokens",
            "audit",
            "change_counter",
            "forecast_sample",
            "line_item_creatives",
            "line_item_placements",
            "pacing_state",
            "schema_migrations",
            "stats_checkpoints",
            "stats_day",
            "stats_hour",
            "stats_hour_line_item",
            "stats_minute",
            "stats_seen",
            "stats_users",
            "user_sessions",
            "users",
        ]
        .map(str::to_owned),
    );
    expected.sort();
    expected
}

/// Checks a store opened again on a database whose one change was creating `created`: the
/// advertiser is as it was, and the change counter still counts that one create.
pub async fn assert_kept(store: &dyn Store, created: &Stored<Advertiser>) {
    assert_eq!(
        &store
            .get_object::<Advertiser>(created.meta.id, None)
            .await
            .unwrap(),
        created
    );
    assert_eq!(store.change_counter().await.unwrap(), 1);
}

/// Fails unless opening refused the database after [`CHANGE_MIGRATION_1`].
pub fn assert_refused_as_changed(error: &StoreError) {
    assert!(
        matches!(
            error,
            StoreError::Migration(MigrationError::Changed { version: 1, name }) if name == "initial"
        ),
        "{error:?}"
    );
}

/// Fails unless opening refused the database after [`RECORD_MIGRATION_9999`].
pub fn assert_refused_as_unknown(error: &StoreError) {
    assert!(
        matches!(
            error,
            StoreError::Migration(MigrationError::Unknown { version: 9999 })
        ),
        "{error:?}"
    );
}

/// Reads a catalog while campaigns of one advertiser are being created and checks it: its
/// campaigns match the change counter it was read at (the advertiser's create, then one a
/// campaign), and the counter is not below `last`, the one read before. Returns the counter.
pub async fn check_catalog(store: &dyn Store, last: u64) -> u64 {
    let catalog = store.catalog().await.unwrap();
    assert_eq!(catalog.campaigns.len() as u64 + 1, catalog.version);
    assert!(catalog.version >= last, "the counter went back");
    catalog.version
}

/// A task creating campaigns of `owner`, named `{prefix}{i}` for `i` in `0..writes`, for the
/// consistency checks of reads during writes.
pub fn spawn_campaign_writer(
    store: &Arc<dyn Store>,
    owner: u64,
    prefix: String,
    writes: u64,
) -> tokio::task::JoinHandle<()> {
    let store = Arc::clone(store);
    tokio::spawn(async move {
        for i in 0..writes {
            let campaign = campaign(owner, format!("{prefix}{i}"));
            store
                .create_object(&campaign, None, &Actor::cli())
                .await
                .unwrap();
        }
    })
}

/// A task reading the catalog `reads` times during writes, each checked by [`check_catalog`].
pub fn spawn_catalog_reader(store: &Arc<dyn Store>, reads: u64) -> tokio::task::JoinHandle<()> {
    let store = Arc::clone(store);
    tokio::spawn(async move {
        let mut last = 0;
        for _ in 0..reads {
            last = check_catalog(store.as_ref(), last).await;
        }
    })
}
