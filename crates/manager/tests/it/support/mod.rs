//! Helpers shared by the manager's integration tests.

use jiff::Timestamp;
use marquee_stats::{Counters, RowKey};
use marquee_store::{RunWrite, Store};

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
