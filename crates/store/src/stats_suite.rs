//! The conformance suite of [`StatsStore`], in the style of [`suite`](crate::suite): every
//! backend runs the same cases, and attributes after the factory expression go on every
//! generated test.
//!
//! ```text
//! marquee_store::stats_suite!(fresh_store());
//! ```
//!
//! Objects are created through [`Store::create`] with minimal bodies (only the fields the
//! aggregates read), so these cases do not depend on the model's other fields.

// Test code: a panic is how a case fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use marquee_model::{ManualClock, ObjectKind, Status};
use marquee_stats::{
    Counters, Dimension, Event, Granularity, Hll, RowKey, RowQuery, SketchKey, StoredRow,
    line_item_totals,
};

use crate::{
    Actor, Checkpoint, CheckpointMove, CheckpointMoved, Draft, RunWrite, StatsStore, Store,
};

/// A minute row's whole key: line item, minute, creative, placement, country, region, device.
pub type MinuteKey = (u64, i64, u64, u64, String, String, u8);

/// Every stored minute row, for tests that compare the aggregates with the logs.
pub async fn all_minute_rows(store: &dyn StatsStore) -> HashMap<MinuteKey, Counters> {
    let rows = store.report_rows(all(Granularity::Minute)).await.unwrap();
    rows.into_iter()
        .map(|r| {
            let key = (
                r.line_item,
                r.bucket,
                r.creative,
                r.placement,
                r.country,
                r.region,
                r.device,
            );
            (key, r.counters)
        })
        .collect()
}

/// The minute rows the events should produce, counted directly (not through the ingest code
/// under test): kinds that may repeat once per (event id, kind); id 0 and the edge's
/// once-per-request kinds each time.
pub fn direct_minute_count(events: &[Event]) -> HashMap<MinuteKey, Counters> {
    let mut seen = HashSet::new();
    let mut rows: HashMap<MinuteKey, Counters> = HashMap::new();
    for e in events {
        if e.event_id != 0 && e.kind.may_repeat() && !seen.insert((e.event_id, e.kind.code())) {
            continue;
        }
        let secs = e.time_micros.div_euclid(1_000_000);
        let country = if e.country.iter().all(u8::is_ascii_uppercase) {
            String::from_utf8(e.country.to_vec()).unwrap()
        } else {
            String::new()
        };
        // A region is kept as `CC-SUB` when the country is and its code is 1-3 capitals or
        // digits padded with zeros.
        let subdivision = String::from_utf8_lossy(&e.region)
            .trim_end_matches('\0')
            .to_owned();
        let region = if !country.is_empty()
            && !subdivision.is_empty()
            && subdivision
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        {
            format!("{country}-{subdivision}")
        } else {
            String::new()
        };
        let key = (
            e.line_item,
            secs - secs.rem_euclid(60),
            e.creative,
            e.placement,
            country,
            region,
            e.device,
        );
        rows.entry(key).or_default().record(e.kind, e.amount_micros);
    }
    rows
}

/// Expands into one `#[tokio::test]` per stats conformance case.
#[macro_export]
macro_rules! stats_suite {
    (@cases $attrs:tt ($factory:expr) $($case:ident),* $(,)?) => {
        $(
            $crate::stats_suite!(@case $attrs ($factory) $case);
        )*
    };
    (@case {$(#[$attr:meta])*} ($factory:expr) $case:ident) => {
        #[tokio::test]
        $(#[$attr])*
        async fn $case() {
            let (store, clock, _guard) = $factory.await;
            $crate::stats_suite::$case(store, clock).await;
        }
    };
    ($factory:expr $(, #[$attr:meta])* $(,)?) => {
        $crate::stats_suite!(@cases {$(#[$attr])*} ($factory)
            runs_add_counters_and_move_checkpoints,
            a_run_from_checkpoints_another_run_moved_writes_nothing,
            a_run_that_found_no_checkpoint_loses_to_one_that_made_it,
            a_run_moving_a_shard_twice_is_refused,
            statements_per_run_do_not_grow_with_rows,
            sketches_merge_across_runs,
            dedupe_entries_survive_and_are_pruned,
            minute_retention_keeps_hours_and_days,
            samples_are_stored_once_by_day_and_pruned,
            reports_group_and_filter_in_one_select,
            delivery_combines_days_hours_and_minutes,
            counters_past_64_bits_are_held_not_refused,
            invalid_traffic_is_stored_by_kind_and_reason,
            dimensions_hold_every_status,
        );
    };
}

type Db = Arc<dyn Store>;

fn at(text: &str) -> i64 {
    text.parse::<Timestamp>().unwrap().as_second()
}

fn key(line_item: u64, bucket: i64) -> RowKey {
    RowKey {
        line_item,
        bucket,
        creative: line_item * 10,
        placement: 7,
        country: *b"DE",
        region: *b"BE\0",
        device: 2,
    }
}

fn counts(impressions: i64, clicks: i64, cpm_micros: i64) -> Counters {
    Counters {
        impressions,
        clicks,
        cpm_micros,
        ..Counters::default()
    }
}

/// A run adding `counters` to one minute (and its hour and day).
fn run_at(line_item: u64, minute: i64, counters: Counters) -> RunWrite {
    let hour = minute - minute.rem_euclid(3_600);
    let day = minute - minute.rem_euclid(86_400);
    let hours = vec![(key(line_item, hour), counters)];
    RunWrite {
        minutes: vec![(key(line_item, minute), counters)],
        line_item_hours: line_item_totals(&hours),
        hours,
        days: vec![(key(line_item, day), counters)],
        now: Timestamp::from_second(minute).unwrap(),
        ..RunWrite::default()
    }
}

/// Every row of `table`, grouped by every column.
fn all(table: Granularity) -> RowQuery {
    grouped(table, true)
}

/// Every row of `table`, grouped by every column (`by`) or by none.
fn grouped(table: Granularity, by: bool) -> RowQuery {
    RowQuery {
        table,
        from: 0,
        to: i64::MAX,
        line_items: None,
        placements: None,
        countries: None,
        regions: None,
        devices: None,
        by_line_item: by,
        by_creative: by,
        by_placement: by,
        by_country: by,
        by_region: by,
        by_device: by,
    }
}

fn checkpoint(shard: u32, segment: u64, offset: u64) -> Checkpoint {
    Checkpoint {
        source: "edge \"a\"".into(),
        shard,
        segment,
        offset,
        max_event_time_micros: 5,
    }
}

/// A move of a shard that has no checkpoint yet.
fn first_move(to: Checkpoint) -> CheckpointMove {
    CheckpointMove { from: None, to }
}

/// A move of a shard from its checkpoint `from`, as stored.
fn move_on(from: &Checkpoint, to: Checkpoint) -> CheckpointMove {
    CheckpointMove {
        from: Some(from.position()),
        to,
    }
}

/// The stored checkpoint of `shard` of the suite's source.
async fn stored_checkpoint(store: &Db, shard: u32) -> Option<Checkpoint> {
    let state = store.collection_state().await.unwrap();
    state.checkpoints.into_iter().find(|c| c.shard == shard)
}

pub async fn runs_add_counters_and_move_checkpoints(store: Db, _clock: Arc<ManualClock>) {
    let minute = at("2026-12-01T10:05:00Z");
    let mut first = run_at(1, minute, counts(3, 1, 4_500));
    first.checkpoints = vec![
        first_move(checkpoint(0, 1, 100)),
        first_move(checkpoint(1, 4, 28)),
    ];
    store.commit_run(first).await.unwrap();
    let mut second = run_at(1, minute, counts(2, 0, 3_000));
    second.checkpoints = vec![move_on(&checkpoint(0, 1, 100), checkpoint(0, 2, 28))];
    store.commit_run(second).await.unwrap();

    for table in [Granularity::Minute, Granularity::Hour, Granularity::Day] {
        let rows = store.report_rows(all(table)).await.unwrap();
        assert_eq!(rows.len(), 1, "{table:?}");
        let row = &rows[0];
        assert_eq!(row.counters, counts(5, 1, 7_500), "{table:?}");
        assert_eq!(
            (row.line_item, row.creative, row.placement, row.device),
            (1, 10, 7, 2)
        );
        assert_eq!((row.country.as_str(), row.region.as_str()), ("DE", "DE-BE"));
        assert_eq!(row.bucket % table.seconds(), 0);
    }
    let state = store.collection_state().await.unwrap();
    assert_eq!(
        state.checkpoints,
        vec![checkpoint(0, 2, 28), checkpoint(1, 4, 28)]
    );
}

pub async fn statements_per_run_do_not_grow_with_rows(store: Db, _clock: Arc<ManualClock>) {
    let minute = at("2026-12-01T10:00:00Z");
    let empty = store.commit_run(RunWrite::default()).await.unwrap();
    let one = store
        .commit_run(run_at(1, minute, counts(1, 0, 0)))
        .await
        .unwrap();
    let mut many = RunWrite::default();
    let mut sketch = Hll::new();
    sketch.insert(1);
    for i in 0..20_000u64 {
        let bucket = minute + 60 * (i % 50) as i64;
        many.minutes
            .push((key(1 + i % 400, bucket), counts(1, 0, 0)));
        many.hours.push((key(1 + i, minute), counts(1, 0, 0)));
        many.days.push((key(1 + i, minute), counts(1, 0, 0)));
    }
    many.minutes.sort_unstable_by_key(|(k, _)| *k);
    many.minutes.dedup_by_key(|(k, _)| *k);
    many.line_item_hours = line_item_totals(&many.hours);
    for i in 0..2_000u64 {
        many.sketches.push((
            SketchKey {
                line_item: i,
                day: 20_261_201,
            },
            sketch.clone(),
        ));
        many.checkpoints
            .push(first_move(checkpoint(i as u32, 1, 28)));
    }
    many.seen_entries = vec![0; 26 * 10_000];
    many.seen_max_time = minute;
    let many = store.commit_run(many).await.unwrap();
    // Every one of those checkpoints moved on from where the last run left it: the fence
    // compares them all in the same statement.
    let mut on = RunWrite::default();
    for i in 0..2_000u32 {
        on.checkpoints
            .push(move_on(&checkpoint(i, 1, 28), checkpoint(i, 2, 28)));
    }
    let on = store.commit_run(on).await.unwrap();
    assert_eq!(empty.statements, one.statements);
    assert_eq!(one.statements, many.statements);
    assert_eq!(many.statements, on.statements);
    assert_eq!(
        stored_checkpoint(&store, 1_999).await,
        Some(checkpoint(1_999, 2, 28))
    );
    assert_eq!(many.sketches_changed, 2_000);
    let rows = store.report_rows(all(Granularity::Hour)).await.unwrap();
    assert_eq!(rows.len(), 20_000);
}

/// Two managers' runs over the same log bytes, both prepared from the same stored checkpoints
/// (the old manager's run in flight when the new one took over): the first commit counts them,
/// the second is refused whole, naming the shard, and writes nothing at all, not even the
/// moves of shards the first did not touch.
pub async fn a_run_from_checkpoints_another_run_moved_writes_nothing(
    store: Db,
    _clock: Arc<ManualClock>,
) {
    use marquee_stats::{EventKind, Pending, Seen};
    let minute = at("2026-12-01T10:05:00Z");
    let mut base = run_at(1, minute, counts(1, 0, 1_500));
    base.checkpoints = vec![
        first_move(checkpoint(0, 1, 100)),
        first_move(checkpoint(1, 4, 28)),
    ];
    store.commit_run(base).await.unwrap();
    let start = store.collection_state().await.unwrap();
    let from = |shard: u32| start.checkpoints.iter().find(|c| c.shard == shard).unwrap();

    let mut winner = run_at(1, minute, counts(3, 1, 4_500));
    winner.checkpoints = vec![move_on(from(1), checkpoint(1, 5, 28))];
    let mut loser = run_at(1, minute, counts(3, 1, 4_500));
    let mut sketch = Hll::new();
    sketch.insert(42);
    loser.sketches = vec![(
        SketchKey {
            line_item: 1,
            day: 20_261_201,
        },
        sketch,
    )];
    let mut pending = Pending::default();
    Seen::default().check_and_add(&mut pending, 77, EventKind::Impression, minute);
    (loser.seen_entries, loser.seen_max_time) = pending.encode();
    loser.checkpoints = vec![
        move_on(from(0), checkpoint(0, 2, 28)),
        move_on(from(1), checkpoint(1, 5, 28)),
    ];

    store.commit_run(winner).await.unwrap();
    let refused = store.commit_run(loser).await.unwrap_err();
    assert_eq!(
        refused.checkpoint_moved(),
        Some(&CheckpointMoved {
            source_name: "edge \"a\"".into(),
            shard: 1
        }),
        "{refused}"
    );
    assert!(refused.to_string().contains("another manager"), "{refused}");

    for table in [Granularity::Minute, Granularity::Hour, Granularity::Day] {
        let rows = store.report_rows(all(table)).await.unwrap();
        let impressions: i64 = rows.iter().map(|r| r.counters.impressions).sum();
        assert_eq!(
            impressions,
            1 + 3,
            "{table:?}: the base run and the winner only"
        );
    }
    let state = store.collection_state().await.unwrap();
    assert_eq!(
        state.checkpoints,
        vec![checkpoint(0, 1, 100), checkpoint(1, 5, 28)],
        "shard 0 stays where the refused run found it"
    );
    assert!(
        state.seen.is_empty(),
        "no dedupe entries of the refused run"
    );
    assert!(
        store
            .sketches(None, 20_261_201, 20_261_201)
            .await
            .unwrap()
            .is_empty(),
        "no sketch of the refused run"
    );
}

/// "No checkpoint yet" is a starting point like any other: of two runs that both found a
/// shard without one, the second to commit finds the first's row and is refused. The winner's
/// checkpoint has no event time yet (`i64::MIN`, a shard moved past segments it found
/// deleted): a run starting from it still matches it.
pub async fn a_run_that_found_no_checkpoint_loses_to_one_that_made_it(
    store: Db,
    _clock: Arc<ManualClock>,
) {
    let minute = at("2026-12-01T10:05:00Z");
    let made = Checkpoint {
        max_event_time_micros: i64::MIN,
        ..checkpoint(3, 2, 28)
    };
    let mut winner = run_at(2, minute, counts(5, 0, 7_500));
    winner.checkpoints = vec![first_move(made.clone())];
    let mut loser = run_at(2, minute, counts(5, 0, 7_500));
    loser.checkpoints = vec![first_move(checkpoint(3, 2, 28))];
    store.commit_run(winner).await.unwrap();
    let refused = store.commit_run(loser).await.unwrap_err();
    assert_eq!(
        refused.checkpoint_moved().map(|m| m.shard),
        Some(3),
        "{refused}"
    );
    let rows = store.report_rows(all(Granularity::Day)).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].counters, counts(5, 0, 7_500));
    assert_eq!(
        store.collection_state().await.unwrap().checkpoints,
        vec![made.clone()]
    );

    let next = RunWrite {
        checkpoints: vec![move_on(&made, checkpoint(3, 3, 28))],
        ..RunWrite::default()
    };
    store.commit_run(next).await.unwrap();
    assert_eq!(
        store.collection_state().await.unwrap().checkpoints,
        vec![checkpoint(3, 3, 28)]
    );
}

/// A shard named twice in one run has no one position to compare with: refused, nothing
/// written.
pub async fn a_run_moving_a_shard_twice_is_refused(store: Db, _clock: Arc<ManualClock>) {
    let minute = at("2026-12-01T10:05:00Z");
    let mut run = run_at(1, minute, counts(1, 0, 0));
    run.checkpoints = vec![
        first_move(checkpoint(0, 1, 100)),
        move_on(&checkpoint(0, 1, 100), checkpoint(0, 2, 28)),
    ];
    let refused = store.commit_run(run).await.unwrap_err();
    assert!(refused.checkpoint_moved().is_none());
    assert!(refused.to_string().contains("twice"), "{refused}");
    assert!(
        store
            .report_rows(all(Granularity::Day))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .collection_state()
            .await
            .unwrap()
            .checkpoints
            .is_empty()
    );
}

pub async fn sketches_merge_across_runs(store: Db, _clock: Arc<ManualClock>) {
    let sketch = |from: u64, to: u64| {
        let mut hll = Hll::new();
        for user in from..to {
            hll.insert(user);
        }
        hll
    };
    let day = |line_item, day| SketchKey { line_item, day };
    let with = |sketches: Vec<(SketchKey, Hll)>| RunWrite {
        sketches,
        ..RunWrite::default()
    };
    store
        .commit_run(with(vec![
            (day(1, 20_261_201), sketch(0, 100)),
            (day(2, 20_261_201), sketch(0, 10)),
        ]))
        .await
        .unwrap();
    let written = store
        .commit_run(with(vec![
            (day(1, 20_261_201), sketch(50, 150)),
            (day(1, 20_261_202), sketch(0, 5)),
            (day(2, 20_261_201), sketch(0, 10)),
        ]))
        .await
        .unwrap();
    assert_eq!(
        written.sketches_changed, 2,
        "an unchanged sketch is not rewritten"
    );

    let stored = store
        .sketches(Some(vec![1]), 20_261_201, 20_261_201)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    let estimate = stored[0].1.estimate();
    assert!((145..=155).contains(&estimate), "{estimate}");
    let all_days = store.sketches(None, 20_261_101, 20_261_231).await.unwrap();
    assert_eq!(all_days.len(), 3);
}

pub async fn dedupe_entries_survive_and_are_pruned(store: Db, _clock: Arc<ManualClock>) {
    use marquee_stats::{EventKind, Pending, Seen};
    let base = Seen::default();
    let mut first = Pending::default();
    base.check_and_add(&mut first, 11, EventKind::Impression, 1_000);
    base.check_and_add(&mut first, 12, EventKind::Click, 1_000);
    let mut second = Pending::default();
    base.check_and_add(&mut second, 13, EventKind::Impression, 5_000);
    for pending in [first, second] {
        let (seen_entries, seen_max_time) = pending.encode();
        store
            .commit_run(RunWrite {
                seen_entries,
                seen_max_time,
                ..RunWrite::default()
            })
            .await
            .unwrap();
    }
    let restored = store.collection_state().await.unwrap().seen;
    assert_eq!(restored.len(), 3);
    for (id, kind) in [
        (11, EventKind::Impression),
        (12, EventKind::Click),
        (13, EventKind::Impression),
    ] {
        assert!(
            restored.check_and_add(&mut Pending::default(), id, kind, 0),
            "{id}"
        );
    }
    // A run with nothing new stores no row; a cutoff drops runs entirely older than it.
    store
        .commit_run(RunWrite {
            seen_cutoff_secs: 2_000,
            ..RunWrite::default()
        })
        .await
        .unwrap();
    let restored = store.collection_state().await.unwrap().seen;
    assert_eq!(restored.len(), 1);
}

/// The forecast's sample goes in with its run's checkpoints: a run collected again from the
/// same position is refused whole, so no record is stored twice; a day's runs read back as one
/// run of records; days before the cutoff are deleted.
pub async fn samples_are_stored_once_by_day_and_pruned(store: Db, _clock: Arc<ManualClock>) {
    let made = checkpoint(0, 1, 200);
    let run = RunWrite {
        samples: vec![(20_500, vec![1, 2, 3]), (20_501, vec![4])],
        checkpoints: vec![first_move(made.clone())],
        ..RunWrite::default()
    };
    store.commit_run(run.clone()).await.unwrap();
    let again = store.commit_run(run).await.unwrap_err();
    assert!(again.checkpoint_moved().is_some(), "{again}");
    let next = RunWrite {
        samples: vec![(20_501, vec![5, 6]), (20_502, (0..=255).collect())],
        checkpoints: vec![move_on(&made, checkpoint(0, 2, 28))],
        ..RunWrite::default()
    };
    store.commit_run(next).await.unwrap();
    assert_eq!(
        store.samples(20_500, 20_501).await.unwrap(),
        vec![(20_500, vec![1, 2, 3]), (20_501, vec![4, 5, 6])]
    );
    assert_eq!(
        store.samples(20_502, 20_502).await.unwrap(),
        vec![(20_502, (0..=255).collect::<Vec<u8>>())]
    );
    store
        .commit_run(RunWrite {
            sample_cutoff_day: 20_502,
            ..RunWrite::default()
        })
        .await
        .unwrap();
    let kept = store.samples(0, i32::MAX).await.unwrap();
    assert_eq!(
        kept.iter().map(|(day, _)| *day).collect::<Vec<_>>(),
        [20_502]
    );
}

pub async fn minute_retention_keeps_hours_and_days(store: Db, _clock: Arc<ManualClock>) {
    let old = at("2026-12-01T10:00:00Z");
    let new = at("2026-12-08T10:00:00Z");
    store
        .commit_run(run_at(1, old, counts(1, 0, 0)))
        .await
        .unwrap();
    let mut later = run_at(1, new, counts(1, 0, 0));
    later.minute_cutoff_secs = new - 86_400;
    store.commit_run(later).await.unwrap();
    let minutes = store.report_rows(all(Granularity::Minute)).await.unwrap();
    assert_eq!(minutes.len(), 1);
    assert_eq!(minutes[0].bucket, new);
    assert_eq!(
        store
            .report_rows(all(Granularity::Hour))
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        store
            .report_rows(all(Granularity::Day))
            .await
            .unwrap()
            .len(),
        2
    );
}

pub async fn reports_group_and_filter_in_one_select(store: Db, _clock: Arc<ManualClock>) {
    let minute = at("2026-12-01T10:00:00Z");
    let mut run = RunWrite::default();
    for (line_item, placement, country, region, device, impressions) in [
        (1u64, 7u64, *b"DE", *b"BE\0", 1u8, 1i64),
        (1, 8, *b"FR", *b"IDF", 2, 2),
        (2, 7, *b"DE", *b"BY\0", 2, 4),
        (3, 8, [0, 0], [0; 3], 0, 8),
    ] {
        let key = RowKey {
            line_item,
            bucket: minute,
            creative: line_item * 10,
            placement,
            country,
            region,
            device,
        };
        run.hours.push((key, counts(impressions, 0, 0)));
    }
    run.hours.sort_unstable_by_key(|(k, _)| *k);
    run.line_item_hours = line_item_totals(&run.hours);
    store.commit_run(run).await.unwrap();

    let query = |f: &dyn Fn(&mut RowQuery)| {
        let mut q = grouped(Granularity::Hour, false);
        f(&mut q);
        q
    };
    let total = |rows: &[StoredRow]| rows.iter().map(|r| r.counters.impressions).sum::<i64>();

    let rows = store.report_rows(query(&|_| {})).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(total(&rows), 15);
    assert_eq!((rows[0].line_item, rows[0].country.as_str()), (0, ""));

    let rows = store
        .report_rows(query(&|q| q.by_country = true))
        .await
        .unwrap();
    let mut countries: Vec<(String, i64)> = rows
        .iter()
        .map(|r| (r.country.clone(), r.counters.impressions))
        .collect();
    countries.sort();
    assert_eq!(
        countries,
        vec![("".into(), 8), ("DE".into(), 5), ("FR".into(), 2)]
    );

    let rows = store
        .report_rows(query(&|q| {
            q.line_items = Some(vec![1, 2]);
            q.placements = Some(vec![7]);
        }))
        .await
        .unwrap();
    assert_eq!(total(&rows), 5);
    let rows = store
        .report_rows(query(&|q| {
            q.countries = Some(vec!["".into()]);
            q.devices = Some(vec![0]);
        }))
        .await
        .unwrap();
    assert_eq!(total(&rows), 8);

    // Regions are ISO 3166-2 codes, the country included; '' is unknown.
    let rows = store
        .report_rows(query(&|q| q.by_region = true))
        .await
        .unwrap();
    let mut regions: Vec<(String, i64)> = rows
        .iter()
        .map(|r| (r.region.clone(), r.counters.impressions))
        .collect();
    regions.sort();
    assert_eq!(
        regions,
        vec![
            ("".into(), 8),
            ("DE-BE".into(), 1),
            ("DE-BY".into(), 4),
            ("FR-IDF".into(), 2)
        ]
    );
    let rows = store
        .report_rows(query(&|q| {
            q.by_country = true;
            q.regions = Some(vec!["DE-BY".into(), "FR-IDF".into()]);
        }))
        .await
        .unwrap();
    let mut by_country: Vec<(String, String, i64)> = rows
        .iter()
        .map(|r| (r.country.clone(), r.region.clone(), r.counters.impressions))
        .collect();
    by_country.sort();
    assert_eq!(
        by_country,
        vec![("DE".into(), "".into(), 4), ("FR".into(), "".into(), 2)]
    );

    let rows = store
        .report_rows(query(&|q| q.from = minute + 3_600))
        .await
        .unwrap();
    assert!(rows.is_empty());
    // The grouping dimensions the report spec asks for map onto these columns.
    assert_eq!(Dimension::parse("device"), Some(Dimension::Device));

    // A limit stops the SELECT there: a report that knows it is too large from that many rows
    // does not load the rest. By line item there are three.
    let detailed = || query(&|q| q.by_line_item = true);
    assert_eq!(store.report_rows(detailed()).await.unwrap().len(), 3);
    let limited = store
        .report_rows_at_most(detailed(), Some(2))
        .await
        .unwrap();
    assert_eq!(limited.len(), 2);
    let all_of_them = store
        .report_rows_at_most(detailed(), Some(3))
        .await
        .unwrap();
    assert_eq!(total(&all_of_them), 15);
}

pub async fn delivery_combines_days_hours_and_minutes(store: Db, _clock: Arc<ManualClock>) {
    // One impression in each of: a whole day, a whole hour, a minute at either end.
    for minute in [
        "2026-12-01T22:30:00Z",
        "2026-12-01T23:10:00Z",
        "2026-12-02T12:00:00Z",
        "2026-12-03T00:20:00Z",
        "2026-12-03T01:05:00Z",
    ] {
        store
            .commit_run(run_at(4, at(minute), counts(1, 0, 2_000)))
            .await
            .unwrap();
    }
    let ts = |text: &str| text.parse::<Timestamp>().unwrap();
    let delivered = store
        .delivery(
            Some(vec![4]),
            ts("2026-12-01T22:30:00Z"),
            ts("2026-12-03T01:06:00Z"),
        )
        .await
        .unwrap();
    assert_eq!(delivered[&4].impressions, 5);
    assert_eq!(delivered[&4].spend_micros(), 10);
    let part = store
        .delivery(None, ts("2026-12-01T22:31:00Z"), ts("2026-12-03T01:00:00Z"))
        .await
        .unwrap();
    assert_eq!(part[&4].impressions, 3);
    let none = store
        .delivery(
            Some(vec![5]),
            ts("2026-12-01T00:00:00Z"),
            ts("2026-12-04T00:00:00Z"),
        )
        .await
        .unwrap();
    assert!(none.is_empty());
}

/// Spend is kept as sums of CPM rates (1,000 × micros): a line item in rupiah or dong can carry
/// a row or a sum past 64 bits. Rows and sums are then held at the largest integer, and runs,
/// reports and pacing's delivery go on (before, the upsert or `SUM` failed the statement:
/// every later aggregation run of the store, or every pacing round, failed with it).
pub async fn counters_past_64_bits_are_held_not_refused(store: Db, _clock: Arc<ManualClock>) {
    let near = i64::MAX - 1_000;
    let day = at("2026-12-01T00:00:00Z");
    for minute in [
        "2026-12-01T10:00:00Z",
        "2026-12-01T10:01:00Z",
        "2026-12-01T11:00:00Z",
    ] {
        store
            .commit_run(run_at(6, at(minute), counts(1, 0, near)))
            .await
            .unwrap();
    }
    // One stored hour row holds two of them, the day row three.
    let hours = store.report_rows(all(Granularity::Hour)).await.unwrap();
    let rates: Vec<i64> = hours.iter().map(|r| r.counters.cpm_micros).collect();
    assert_eq!(rates, [i64::MAX, near]);
    let days = store.report_rows(all(Granularity::Day)).await.unwrap();
    assert_eq!(days[0].counters.cpm_micros, i64::MAX);
    assert_eq!(days[0].counters.impressions, 3, "other counters exact");
    // Summed across rows: the report without grouping, and pacing's delivery.
    let mut total = all(Granularity::Hour);
    total.by_line_item = false;
    total.by_creative = false;
    total.by_placement = false;
    total.by_country = false;
    total.by_device = false;
    let rows = store.report_rows(total).await.unwrap();
    assert_eq!(rows[0].counters.cpm_micros, i64::MAX);
    let ts = |s: i64| Timestamp::from_second(s).unwrap();
    let delivered = store
        .delivery(Some(vec![6]), ts(day), ts(day + 86_400))
        .await
        .unwrap();
    assert_eq!(delivered[&6].impressions, 3);
    assert_eq!(delivered[&6].cpm_micros, i64::MAX);
}

/// Invalid traffic goes through a run into every table and comes back in report rows, each
/// reason in its own column (reason `i` recorded `i + 1` times, so a column read in another's
/// place shows), also for a row without a line item (refused before an ad was decided);
/// pacing's delivery reads the valid impressions and spend alone.
pub async fn invalid_traffic_is_stored_by_kind_and_reason(store: Db, _clock: Arc<ManualClock>) {
    use marquee_stats::{EventKind, InvalidReason};
    let minute = at("2026-12-01T10:05:00Z");
    let mut served = counts(2, 1, 3_000);
    for (i, reason) in InvalidReason::ALL.into_iter().enumerate() {
        let kind = [
            EventKind::InvalidImpression,
            EventKind::InvalidClick,
            EventKind::InvalidConversion,
        ][i % 3];
        for _ in 0..=i {
            served.record(kind, i64::from(reason.code()));
        }
    }
    assert_eq!(served.invalid_total(), 45);
    let mut refused = Counters::default();
    for _ in 0..4 {
        refused.record(
            EventKind::InvalidImpression,
            i64::from(InvalidReason::UntokenedDisabled.code()),
        );
    }
    let mut run = run_at(1, minute, served);
    let other = run_at(0, minute, refused);
    for (mine, theirs) in [
        (&mut run.minutes, other.minutes),
        (&mut run.hours, other.hours),
        (&mut run.days, other.days),
        (&mut run.line_item_hours, other.line_item_hours),
    ] {
        mine.extend(theirs);
        mine.sort_unstable_by_key(|(k, _)| *k);
    }
    store.commit_run(run).await.unwrap();

    for table in [Granularity::Minute, Granularity::Hour, Granularity::Day] {
        let rows = store.report_rows(all(table)).await.unwrap();
        let row = |line_item: u64| {
            rows.iter()
                .find(|r| r.line_item == line_item)
                .map(|r| r.counters)
        };
        assert_eq!(row(1), Some(served), "{table:?}");
        assert_eq!(row(0), Some(refused), "{table:?}");
    }
    // By line item only: the hourly totals per line item.
    let mut by_line_item = all(Granularity::Hour);
    by_line_item.by_creative = false;
    by_line_item.by_placement = false;
    by_line_item.by_country = false;
    by_line_item.by_device = false;
    let rows = store.report_rows(by_line_item).await.unwrap();
    assert_eq!(rows.len(), 2);
    let row = rows.iter().find(|r| r.line_item == 1).unwrap();
    assert_eq!(row.counters, served);
    for (i, reason) in InvalidReason::ALL.into_iter().enumerate() {
        assert_eq!(row.counters.invalid(reason), i as i64 + 1, "{reason:?}");
    }
    assert_eq!(
        (
            row.counters.invalid_impressions,
            row.counters.invalid_clicks,
            row.counters.invalid_conversions
        ),
        (1 + 4 + 7, 2 + 5 + 8, 3 + 6 + 9)
    );

    let ts = |s: i64| Timestamp::from_second(s).unwrap();
    let delivered = store
        .delivery(Some(vec![1]), ts(minute), ts(minute + 60))
        .await
        .unwrap();
    assert_eq!(delivered[&1].impressions, 2);
    assert_eq!(delivered[&1].clicks, 1);
    assert_eq!(delivered[&1].spend_micros(), 3);
}

/// An hour row of `impressions` served by `line_item` on `placement` in the hour starting at
/// `bucket` (Unix seconds), from Bavaria on a desktop, each impression decided once and paid
/// at a 2.00 CPM: the plain row report tests build on.
pub fn impressions_hour(
    line_item: u64,
    placement: u64,
    bucket: i64,
    impressions: i64,
) -> (RowKey, Counters) {
    (
        RowKey {
            line_item,
            bucket,
            creative: 0,
            placement,
            country: *b"DE",
            region: *b"BY\0",
            device: 1,
        },
        Counters {
            decisions: impressions,
            impressions,
            cpm_micros: impressions * 2_000_000,
            ..Counters::default()
        },
    )
}

/// A run writing `hours` (sorted by key) and their line-item totals, nothing else.
pub fn hour_rows(hours: Vec<(RowKey, Counters)>) -> RunWrite {
    RunWrite {
        line_item_hours: line_item_totals(&hours),
        hours,
        ..RunWrite::default()
    }
}

/// Creates an active object named "x" whose body holds only `body` (the fields the aggregates
/// read) and returns its id.
async fn create(store: &Db, kind: ObjectKind, parent_id: Option<u64>, body: &str) -> u64 {
    create_named(store.as_ref(), kind, parent_id, "x", body).await
}

/// Creates an active object called `name` whose body holds only `body`, by the CLI, and returns
/// its id: the bare catalog other crates' statistics tests build their rows on.
pub async fn create_named(
    store: &dyn Store,
    kind: ObjectKind,
    parent_id: Option<u64>,
    name: &str,
    body: &str,
) -> u64 {
    let draft = Draft {
        parent_id,
        name: name.into(),
        status: Status::Active,
        body: body.into(),
    };
    store
        .create(kind, draft, None, &Actor::cli())
        .await
        .unwrap()
        .meta
        .id
}

// Creates one object of each kind, the same chain as the API's report tests build, deliberately:
// this suite runs on the store alone.
pub async fn dimensions_hold_every_status(store: Db, _clock: Arc<ManualClock>) {
    let advertiser = create(
        &store,
        ObjectKind::Advertiser,
        None,
        r#"{"time_zone":"Asia/Kolkata","currency":"INR"}"#,
    )
    .await;
    let campaign = create(&store, ObjectKind::Campaign, Some(advertiser), "{}").await;
    let line_item = create(&store, ObjectKind::LineItem, Some(campaign), "{}").await;
    let creative = create(&store, ObjectKind::Creative, Some(line_item), "{}").await;
    let publisher = create_named(&*store, ObjectKind::Publisher, None, "Daily News", "{}").await;
    let site = create(&store, ObjectKind::Site, Some(publisher), "{}").await;
    let placement = create_named(
        &*store,
        ObjectKind::Placement,
        Some(site),
        "Sidebar, top",
        "{}",
    )
    .await;
    store
        .archive(ObjectKind::LineItem, line_item, None, &Actor::cli())
        .await
        .unwrap();

    let dims = store.dimensions().await.unwrap();
    let li = dims
        .line_item(line_item)
        .expect("archived line items still count");
    assert_eq!((li.campaign, li.advertiser), (campaign, advertiser));
    assert_eq!(dims.zone_name(li.zone), "Asia/Kolkata");
    assert_eq!(dims.advertiser(advertiser).unwrap().currency, "INR");
    assert_eq!(dims.creative(creative), Some(line_item));
    assert_eq!(dims.placement(placement).unwrap().publisher, publisher);
    // Names, for reports to show beside ids, of every kind whatever its status.
    assert_eq!(dims.name(Dimension::LineItem, line_item), Some("x"));
    assert_eq!(dims.name(Dimension::Advertiser, advertiser), Some("x"));
    assert_eq!(
        dims.name(Dimension::Publisher, publisher),
        Some("Daily News")
    );
    assert_eq!(
        dims.name(Dimension::Placement, placement),
        Some("Sidebar, top")
    );
    assert_eq!(dims.name(Dimension::Site, site), Some("x"));
}
