//! What the report tests share: the routes over a store, and hour rows committed as a run.

use std::sync::Arc;

use axum::Router;
use marquee_api::{RouteTable, add_routes};
use marquee_model::ManualClock;
use marquee_stats::{Counters, RowKey};
use marquee_store::Store;

/// The API's routes over `store`, with the default options.
pub(crate) fn router(store: &Arc<dyn Store>, clock: Arc<ManualClock>) -> Router {
    add_routes(
        RouteTable::new(),
        Arc::clone(store),
        clock,
        "https://ads.example.com",
    )
    .into_router("test", "0")
}

/// Commits a run of these hour rows (in any order) and their line-item totals.
pub(crate) async fn commit_hours(store: &dyn Store, mut hours: Vec<(RowKey, Counters)>) {
    hours.sort_unstable_by_key(|(k, _)| *k);
    store
        .commit_run(marquee_store::stats_suite::hour_rows(hours))
        .await
        .unwrap();
}
