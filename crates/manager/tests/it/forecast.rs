//! The backtest on the stored sample: days of sample committed as aggregation runs store them,
//! fitted on the first days and measured on the last; its refusals.

use std::sync::Arc;

use jiff::Timestamp;
use marquee_forecast::SampleRecord;
use marquee_manager::forecast::{BacktestDays, BacktestError, backtest, report};
use marquee_model::{LineItemId, PlacementId, Tier};
use marquee_store::{RunWrite, SqliteStore, StatsStore};

const PLACEMENT: u64 = 100;
/// 2026-12-01T00:00:00Z, a UTC midnight.
const TODAY: i64 = 1_796_083_200;

/// One standard line item without a goal on the one placement.
fn snapshot() -> Arc<marquee_snapshot::Snapshot> {
    let catalog = marquee_snapshot::fixtures::catalog(PLACEMENT, Tier::Standard, "<i>ad</i>");
    Arc::new(marquee_snapshot::compile(&catalog, Timestamp::now()))
}

/// A store holding `days` whole UTC days before today, each with a request every 5 minutes.
async fn store_with(days: i64) -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(marquee_model::ManualClock::new(
        Timestamp::from_second(TODAY).unwrap(),
    ));
    let store = SqliteStore::open(&dir.path().join("m.db"), clock).unwrap();
    for back in (1..=days).rev() {
        let day = TODAY / 86_400 - back;
        let mut records = Vec::new();
        for minute in (0..1_440).step_by(5) {
            SampleRecord {
                minute: u32::try_from(day * 1_440 + minute).unwrap(),
                placement: PlacementId(PLACEMENT),
                ..SampleRecord::default()
            }
            .encode(&mut records);
        }
        store
            .commit_run(RunWrite {
                samples: vec![(i32::try_from(day).unwrap(), records)],
                ..RunWrite::default()
            })
            .await
            .unwrap();
    }
    (dir, store)
}

#[tokio::test]
async fn steady_traffic_is_forecast_within_a_few_percent() {
    let (_dir, store) = store_with(8).await;
    let days = BacktestDays {
        train: 7,
        test: 1,
        rate: 0.01,
    };
    let now = Timestamp::from_second(TODAY + 3_600).unwrap();
    let result = backtest(&store, &snapshot(), now, days).await.unwrap();
    assert_eq!(result.line_items.len(), 1);
    let li = &result.line_items[0];
    assert_eq!(li.line_item, LineItemId(20));
    // 288 sampled requests at 1%.
    assert!((li.matching - 28_800.0).abs() < 1.0, "{li:?}");
    assert!(li.matching_error < 0.05, "{li:?}");
    let table = report(&result);
    assert!(table.starts_with("line_item\tmatching"), "{table}");
    assert!(table.contains("\n20\t28800\t"), "{table}");
    assert!(table.contains("overall (1 line items)"), "{table}");
}

#[tokio::test]
async fn days_out_of_range_or_an_empty_test_are_refused() {
    let (_dir, store) = store_with(3).await;
    let now = Timestamp::from_second(TODAY).unwrap();
    let with = |train, test| BacktestDays {
        train,
        test,
        rate: 0.01,
    };
    for (train, test) in [(0, 1), (3, 0), (50, 7)] {
        assert!(matches!(
            backtest(&store, &snapshot(), now, with(train, test)).await,
            Err(BacktestError::Days)
        ));
    }
    // Two days on, the stored days are all before the split.
    let later = Timestamp::from_second(TODAY + 2 * 86_400).unwrap();
    assert!(matches!(
        backtest(&store, &snapshot(), later, with(3, 1)).await,
        Err(BacktestError::NoTestDays)
    ));
}
