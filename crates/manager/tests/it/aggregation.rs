//! The aggregation run against a real SQLite store and in-memory or on-disk logs: exactly
//! once across restarts at any point, repeats counted once, a constant number of statements
//! whatever the run holds, acknowledgements only after commits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use jiff::Timestamp;
use marquee_eventlog::wire::WireEnd;
use marquee_eventlog::{Event, EventKind, EventLog, PAYLOAD_LEN, SEGMENT_HEADER_LEN, SegmentInfo};
use marquee_manager::sources::{Chunk, Listed, SourceError};
use marquee_manager::{AggregationOptions, Aggregator, LocalLogSource, LogSource};
use marquee_model::{ManualClock, ObjectKind};
use marquee_stats::Counters;
use marquee_store::stats_suite::{MinuteKey, all_minute_rows, create_named, direct_minute_count};
use marquee_store::test_postgres::TestDatabase;
use marquee_store::{PostgresStore, SqliteStore, Store};
use tempfile::TempDir;

const NOW: &str = "2026-12-01T12:00:00Z";

/// One in-memory segment: id, bytes (header and frames), closed.
type Segment = (u64, Vec<u8>, bool);

/// An edge's log in memory: segments of frames, some closed; reads can be made to fail.
#[derive(Debug, Default)]
struct MemorySource {
    name: String,
    shards: Mutex<BTreeMap<u32, Vec<Segment>>>,
    /// Segment ids are never reused, even once every segment was deleted.
    next_id: Mutex<BTreeMap<u32, u64>>,
    acks: Mutex<Vec<(u32, u64)>>,
    fail_reads: Mutex<usize>,
    /// Listing fails while set (an edge whose log cannot be reached).
    fail_listing: Mutex<bool>,
}

impl MemorySource {
    /// The ids of the segments it lists now.
    async fn listed_ids(&self) -> Vec<u64> {
        self.segments()
            .await
            .unwrap()
            .iter()
            .map(|l| l.segment.id)
            .collect()
    }

    fn named(name: &str) -> Arc<MemorySource> {
        Arc::new(MemorySource {
            name: name.into(),
            ..MemorySource::default()
        })
    }

    fn push_segment(&self, shard: u32, events: &[Event], closed: bool) {
        let mut shards = self.shards.lock().unwrap();
        let segments = shards.entry(shard).or_default();
        let mut next = self.next_id.lock().unwrap();
        let id = next.entry(shard).or_insert(1);
        let id = std::mem::replace(id, *id + 1);
        let mut bytes = vec![0u8; SEGMENT_HEADER_LEN as usize];
        for e in events {
            bytes.extend_from_slice(&e.to_frame());
        }
        segments.push((id, bytes, closed));
    }

    /// Rewrites record `index` of a segment with `edit` applied to its payload, in an intact
    /// frame (a record as another build would write it).
    fn edit_record(&self, shard: u32, segment: u64, index: usize, edit: impl Fn(&mut [u8])) {
        let mut shards = self.shards.lock().unwrap();
        let bytes = &mut shards
            .get_mut(&shard)
            .and_then(|s| s.iter_mut().find(|s| s.0 == segment))
            .unwrap()
            .1;
        let frame = SEGMENT_HEADER_LEN as usize + index * marquee_eventlog::FRAME_LEN;
        let crc_at = frame + 4 + PAYLOAD_LEN;
        edit(&mut bytes[frame + 4..crc_at]);
        let crc = crc32fast::hash(&bytes[frame..crc_at]);
        bytes[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    }

    fn close_all(&self) {
        for segments in self.shards.lock().unwrap().values_mut() {
            for s in segments.iter_mut() {
                s.2 = true;
            }
        }
    }
}

#[async_trait]
impl LogSource for MemorySource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn segments(&self) -> Result<Vec<Listed>, SourceError> {
        if *self.fail_listing.lock().unwrap() {
            return Err(SourceError::Read {
                source_name: self.name.clone(),
                message: "unreachable".into(),
            });
        }
        let shards = self.shards.lock().unwrap();
        Ok(shards
            .iter()
            .flat_map(|(&shard, segments)| {
                segments.iter().map(move |(id, bytes, closed)| Listed {
                    shard,
                    segment: SegmentInfo {
                        id: *id,
                        len: bytes.len() as u64,
                        closed: *closed,
                    },
                })
            })
            .collect())
    }

    // The signature is `LogSource::read`'s: a deliberate twin in every source, as the trait
    // requires.
    async fn read(
        &self,
        shard: u32,
        segment: u64,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Chunk, SourceError> {
        {
            let mut fail = self.fail_reads.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(SourceError::Read {
                    source_name: "memory".into(),
                    message: "injected".into(),
                });
            }
        }
        let shards = self.shards.lock().unwrap();
        let Some((_, bytes, closed)) = shards
            .get(&shard)
            .and_then(|s| s.iter().find(|s| s.0 == segment))
        else {
            return Err(SourceError::Missing {
                source_name: "memory".into(),
                shard,
                segment,
            });
        };
        let start = (offset as usize).max(SEGMENT_HEADER_LEN as usize);
        let frame = marquee_eventlog::FRAME_LEN;
        let available = (bytes.len() - start) / frame;
        let take = available.min((max_bytes / frame).max(1));
        let end = start + take * frame;
        let wire_end = match (end == bytes.len(), *closed) {
            (false, _) => WireEnd::Budget,
            (true, true) => WireEnd::Closed,
            (true, false) => WireEnd::Tail,
        };
        Ok(Chunk {
            frames: Bytes::copy_from_slice(&bytes[start..end]),
            next_offset: end as u64,
            end: wire_end,
        })
    }

    async fn ack(&self, shard: u32, segment: u64) -> Result<(), SourceError> {
        self.acks.lock().unwrap().push((shard, segment));
        let mut shards = self.shards.lock().unwrap();
        if let Some(segments) = shards.get_mut(&shard) {
            segments.retain(|s| s.0 > segment);
        }
        Ok(())
    }
}

fn append_all(log: &EventLog, events: &[Event]) {
    for e in events {
        log.append(e).unwrap();
    }
}

struct World {
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    line_items: Vec<u64>,
    creatives: Vec<u64>,
    placements: Vec<u64>,
    _dir: TempDir,
    _postgres: Option<TestDatabase>,
}

async fn world() -> World {
    world_on(None).await
}

/// The world on SQLite, or on PostgreSQL in `postgres` (a test database of its own).
async fn world_on(postgres: Option<TestDatabase>) -> World {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW.parse().unwrap()));
    // The same store choice as the dashboard tests' site, deliberately: the crates' test binaries
    // share no code.
    let store: Arc<dyn Store> = match &postgres {
        Some(db) => Arc::new(
            PostgresStore::connect(db.url(), clock.clone())
                .await
                .unwrap(),
        ),
        None => Arc::new(SqliteStore::open(&dir.path().join("m.db"), clock.clone()).unwrap()),
    };
    let create = |kind, parent: Option<u64>, body: &'static str| {
        let store = Arc::clone(&store);
        async move { create_named(store.as_ref(), kind, parent, "x", body).await }
    };
    let advertiser = create(
        ObjectKind::Advertiser,
        None,
        r#"{"time_zone":"Europe/Berlin","currency":"EUR"}"#,
    )
    .await;
    let campaign = create(ObjectKind::Campaign, Some(advertiser), "{}").await;
    let mut line_items = Vec::new();
    let mut creatives = Vec::new();
    for _ in 0..4 {
        let li = create(ObjectKind::LineItem, Some(campaign), "{}").await;
        line_items.push(li);
        creatives.push(create(ObjectKind::Creative, Some(li), "{}").await);
    }
    let publisher = create(ObjectKind::Publisher, None, "{}").await;
    let site = create(ObjectKind::Site, Some(publisher), "{}").await;
    let mut placements = Vec::new();
    for _ in 0..3 {
        placements.push(create(ObjectKind::Placement, Some(site), "{}").await);
    }
    World {
        store,
        clock,
        line_items,
        creatives,
        placements,
        _dir: dir,
        _postgres: postgres,
    }
}

impl World {
    /// Event `n`: spread over line items, placements, countries, devices and the last hour.
    fn event(&self, n: u64, kind: EventKind) -> Event {
        let li = (n % self.line_items.len() as u64) as usize;
        let now = NOW.parse::<Timestamp>().unwrap().as_second();
        Event {
            kind,
            time_micros: (now - 3_000 + (n % 2_900) as i64) * 1_000_000,
            line_item: self.line_items[li],
            creative: self.creatives[li],
            placement: self.placements[(n % 3) as usize],
            user: n % 997 + 1,
            country: [b"DE", b"FR", b"US"][(n / 7 % 3) as usize].to_owned(),
            region: [0; 3],
            device: (n % 6) as u8,
            amount_micros: if kind == EventKind::Impression {
                1_500_000
            } else {
                0
            },
            event_id: u128::from(n) + 1,
        }
    }

    fn aggregator(&self, source: Arc<dyn LogSource>, max_run_bytes: usize) -> Aggregator {
        Aggregator::new(
            Arc::clone(&self.store),
            self.clock.clone(),
            vec![source],
            AggregationOptions {
                max_run_bytes,
                ..AggregationOptions::default()
            },
        )
    }

    /// An aggregator reading `log` in process (source "local"), runs of at most 1 MiB.
    fn local_aggregator(&self, log: &Arc<EventLog>) -> Aggregator {
        let source = Arc::new(LocalLogSource::new("local", Arc::clone(log)));
        self.aggregator(source, 1 << 20)
    }

    async fn minutes(&self) -> HashMap<MinuteKey, Counters> {
        all_minute_rows(self.store.as_ref()).await
    }
}

#[tokio::test]
async fn restarts_between_any_runs_count_every_event_once() {
    let w = world().await;
    let source = MemorySource::named("memory");
    let mut logged = Vec::new();
    let mut n = 0;
    for round in 0..6u32 {
        for shard in 0..2 {
            // Every tenth event has no id, so only the checkpoints keep it from counting twice.
            let events: Vec<Event> = (0..150)
                .map(|_| {
                    n += 1;
                    let kind = [EventKind::Decision, EventKind::Impression, EventKind::Click]
                        [n as usize % 3];
                    let event = w.event(n, kind);
                    if n.is_multiple_of(10) {
                        Event {
                            event_id: 0,
                            ..event
                        }
                    } else {
                        event
                    }
                })
                .collect();
            // Repeats of earlier ids (an edge restarted and a beacon came again).
            let repeats: Vec<Event> = logged.iter().rev().step_by(37).take(5).copied().collect();
            let mut segment = events.clone();
            segment.extend_from_slice(&repeats);
            source.push_segment(shard, &segment, round < 5);
            logged.extend(segment);
        }
        // A fresh aggregator (a restart) every round, small runs, a failed read now and then.
        let aggregator = w.aggregator(source.clone(), 3_000 + 1_000 * round as usize);
        for step in 0..4 {
            if step == 2 {
                *source.fail_reads.lock().unwrap() = 1;
            }
            aggregator.run_once().await.unwrap();
        }
    }
    source.close_all();
    let aggregator = w.aggregator(source.clone(), 1 << 20);
    aggregator.drain().await.unwrap();

    let expected = direct_minute_count(&logged);
    let got = w.minutes().await;
    let differing = expected
        .iter()
        .filter(|(key, counters)| got.get(*key) != Some(counters))
        .count();
    assert_eq!(differing, 0, "nothing lost, nothing twice");
    assert_eq!(got.len(), expected.len());
    // Every closed segment was acknowledged, and only after it was committed.
    let acks = source.acks.lock().unwrap().clone();
    assert!(acks.contains(&(0, 6)) && acks.contains(&(1, 6)), "{acks:?}");
    assert!(source.segments().await.unwrap().is_empty());
}

#[tokio::test]
async fn statements_per_run_are_the_same_for_a_thousand_and_a_million_events() {
    let statements = statements_per_run(&world().await, [1_000, 1_000_000]).await;
    println!("statements per run: {statements:?} for 1,000 and 1,000,000 events");
    assert_eq!(statements[0], statements[1]);
}

/// The same on PostgreSQL (a database of its own on the server `scripts/test-deps.sh` starts),
/// with 100,000 events for the larger run.
#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn statements_per_run_on_postgres_are_the_same_for_a_thousand_and_100_000_events() {
    let w = world_on(Some(TestDatabase::create().await)).await;
    let statements = statements_per_run(&w, [1_000, 100_000]).await;
    println!("statements per run on PostgreSQL: {statements:?} for 1,000 and 100,000 events");
    assert_eq!(statements[0], statements[1]);
}

/// The statements of one run over `counts[i]` events, for each count.
async fn statements_per_run(w: &World, counts: [u64; 2]) -> Vec<u32> {
    let mut statements = Vec::new();
    for count in counts {
        let source = MemorySource::named(&format!("edge-{count}"));
        let events: Vec<Event> = (0..count)
            .map(|n| w.event(count * 10 + n, EventKind::Impression))
            .collect();
        source.push_segment(0, &events, true);
        let aggregator = w.aggregator(source.clone(), 128 << 20);
        let report = aggregator.run_once().await.unwrap();
        assert_eq!(report.records, count);
        assert_eq!(report.accepted, count);
        assert!(!report.more);
        statements.push(report.statements);
        let metrics = scrape(&aggregator);
        assert!(
            metrics.contains(&format!(
                "marquee_aggregation_statements {}",
                report.statements
            )),
            "{metrics}"
        );
    }
    statements
}

/// A takeover while a run is in flight: the old manager's aggregator started from positions
/// that the new manager's commit has since moved past (here: the old one's next run, still on
/// its positions in memory). Its commit is fenced: the events the new manager counted are not
/// counted again, no segment is acknowledged on the old run's word, and its next run starts
/// from the database's state.
async fn a_fenced_run_counts_and_acknowledges_nothing(w: World) {
    let source = MemorySource::named("eu-1");
    let first: Vec<Event> = (1..=6).map(|n| w.event(n, EventKind::Impression)).collect();
    source.push_segment(0, &first, true);
    let old = w.aggregator(source.clone(), 1 << 20);
    assert_eq!(old.run_once().await.unwrap().accepted, 6);
    assert_eq!(*source.acks.lock().unwrap(), [(0, 1)]);

    // The new manager counts the next segment (without deleting it, so that the old one
    // still finds it: as when the old run read it before the new one's acknowledgement).
    let second: Vec<Event> = (7..=12)
        .map(|n| w.event(n, EventKind::Impression))
        .collect();
    source.push_segment(0, &second, true);
    let new = Aggregator::new(
        Arc::clone(&w.store),
        w.clock.clone(),
        vec![source.clone()],
        AggregationOptions {
            delete_consumed: false,
            ..AggregationOptions::default()
        },
    );
    assert_eq!(new.run_once().await.unwrap().accepted, 6);

    let fenced = old.run_once().await.unwrap_err();
    assert!(fenced.is_fenced(), "{fenced}");
    let counted: Vec<Event> = first.iter().chain(&second).copied().collect();
    assert_eq!(w.minutes().await, direct_minute_count(&counted));
    assert_eq!(
        *source.acks.lock().unwrap(),
        [(0, 1)],
        "nothing acknowledged"
    );
    let listed = source.listed_ids().await;
    assert_eq!(listed, [2], "nothing deleted");
    let metrics = scrape(&old);
    for line in [
        "marquee_aggregation_fenced_runs_total 1\n",
        "marquee_aggregation_failures_total 0\n",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }

    // Its next run reads on from where the new manager left off.
    let report = old.run_once().await.unwrap();
    assert_eq!(report.records, 0);
    assert_eq!(w.minutes().await, direct_minute_count(&counted));
    assert_eq!(*source.acks.lock().unwrap(), [(0, 1), (0, 2)]);
}

#[tokio::test]
async fn a_fenced_run_counts_and_acknowledges_nothing_on_sqlite() {
    a_fenced_run_counts_and_acknowledges_nothing(world().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_fenced_run_counts_and_acknowledges_nothing_on_postgres() {
    a_fenced_run_counts_and_acknowledges_nothing(
        world_on(Some(TestDatabase::create().await)).await,
    )
    .await;
}

#[tokio::test]
async fn invalid_and_old_events_are_dropped_and_counted() {
    let w = world().await;
    let source = MemorySource::named("memory");
    let good = w.event(1, EventKind::Impression);
    let too_old = Event {
        time_micros: good.time_micros - 2 * 86_400 * 1_000_000,
        event_id: 2,
        ..good
    };
    let unknown = Event {
        line_item: 999_999,
        event_id: 3,
        ..good
    };
    source.push_segment(0, &[good, too_old, unknown, good], true);
    let aggregator = w.aggregator(source.clone(), 1 << 20);
    let report = aggregator.run_once().await.unwrap();
    assert_eq!((report.accepted, report.duplicates), (1, 1));
    assert_eq!(report.invalid.total(), 2);
    let metrics = scrape(&aggregator);
    for line in [
        "marquee_aggregation_invalid_total{reason=\"too_old\"} 1",
        "marquee_aggregation_invalid_total{reason=\"unknown_line_item\"} 1",
        "marquee_aggregation_duplicates_total 1",
        "marquee_aggregation_events_total 1",
        "marquee_aggregation_lag_seconds 0",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

/// An edge upgraded before the manager logs records this manager cannot read: its shard waits
/// at the first one (nothing from there on counted, its segment not acknowledged, the lag
/// and a gauge say so), and once the manager reads them, everything counts exactly once.
#[tokio::test]
async fn records_of_a_later_build_wait_for_the_upgraded_manager() {
    let w = world().await;
    let source = MemorySource::named("memory");
    let first: Vec<Event> = (1..=6).map(|n| w.event(n, EventKind::Impression)).collect();
    let second: Vec<Event> = (7..=9).map(|n| w.event(n, EventKind::Impression)).collect();
    source.push_segment(0, &first, true);
    source.push_segment(0, &second, true);
    // Record 3 as a later build writes it: the format version after this build's.
    source.edit_record(0, 1, 2, |payload| {
        payload[0] = marquee_eventlog::RECORD_VERSION + 1;
    });
    let aggregator = w.aggregator(source.clone(), 1 << 20);
    for _ in 0..3 {
        let report = aggregator.run_once().await.unwrap();
        assert_eq!(report.invalid.total(), 0, "nothing dropped");
    }
    assert_eq!(w.minutes().await, direct_minute_count(&first[..2]));
    assert!(source.acks.lock().unwrap().is_empty());
    let metrics = scrape(&aggregator);
    assert!(
        metrics.contains("marquee_aggregation_shards_waiting_for_upgrade 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("marquee_aggregation_lag_seconds 0\n"),
        "{metrics}"
    );

    // The upgraded manager reads the record (here: it is rewritten as this build's).
    source.edit_record(0, 1, 2, |payload| {
        payload[0] = marquee_eventlog::RECORD_VERSION;
    });
    aggregator.drain().await.unwrap();
    let all: Vec<Event> = first.iter().chain(&second).copied().collect();
    assert_eq!(w.minutes().await, direct_minute_count(&all));
    assert!(source.acks.lock().unwrap().contains(&(0, 2)));
    assert!(scrape(&aggregator).contains("marquee_aggregation_shards_waiting_for_upgrade 0"),);
}

/// An edge whose log has never been read (unreachable from the start) may still hold repeats
/// of ids counted from other edges: until it is read, the dedupe memory reaches back as far as
/// events are accepted, so its repeat counts once however long it took.
#[tokio::test]
async fn an_edge_never_read_yet_keeps_the_ids_it_may_repeat() {
    let w = world().await;
    let read = MemorySource::named("a");
    let unreachable = MemorySource::named("b");
    *unreachable.fail_listing.lock().unwrap() = true;
    let impression = w.event(1, EventKind::Impression);
    read.push_segment(0, &[impression], true);
    let options = AggregationOptions::default();
    let aggregator = Aggregator::new(
        Arc::clone(&w.store),
        w.clock.clone(),
        vec![read.clone(), unreachable.clone()],
        options.clone(),
    );
    assert_eq!(aggregator.run_once().await.unwrap().accepted, 1);
    // Past a token lifetime and twice the skew: ids from read logs alone would be forgotten.
    w.clock.advance(
        jiff::SignedDuration::try_from(
            options.token_lifetime + 2 * options.max_clock_skew + Duration::from_secs(120),
        )
        .unwrap(),
    );
    aggregator.run_once().await.unwrap();
    // The edge becomes readable; its log repeats the beacon (a retry that reached it).
    *unreachable.fail_listing.lock().unwrap() = false;
    unreachable.push_segment(0, &[impression], true);
    let report = aggregator.run_once().await.unwrap();
    assert_eq!((report.accepted, report.duplicates), (0, 1));
}

#[tokio::test]
async fn listeners_get_each_runs_delivery_per_line_item() {
    let w = world().await;
    let source = MemorySource::named("memory");
    let seen: Arc<Mutex<Vec<(u64, i64)>>> = Arc::default();
    let aggregator = w.aggregator(source.clone(), 1 << 20);
    let sink = Arc::clone(&seen);
    aggregator.on_commit(move |run| {
        sink.lock()
            .unwrap()
            .extend(run.per_line_item.iter().map(|(id, c)| (*id, c.impressions)));
    });
    let events: Vec<Event> = (0..8).map(|n| w.event(n, EventKind::Impression)).collect();
    source.push_segment(0, &events, false);
    aggregator.run_once().await.unwrap();
    let mut got = seen.lock().unwrap().clone();
    got.sort_unstable();
    let expected: Vec<(u64, i64)> = w.line_items.iter().map(|&id| (id, 2)).collect();
    assert_eq!(got, expected);
    // Delivery from the database agrees.
    let now: Timestamp = NOW.parse().unwrap();
    let delivered = w
        .store
        .delivery(None, now - Duration::from_secs(7_200), now)
        .await
        .unwrap();
    assert_eq!(delivered[&w.line_items[0]].impressions, 2);
    assert_eq!(delivered[&w.line_items[0]].spend_micros(), 3_000);
}

#[tokio::test]
async fn the_local_log_is_read_and_consumed_segments_are_deleted() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    // Two shards, ten records a segment.
    let open = || {
        let config = marquee_eventlog::Config {
            shards: 2,
            segment_max_bytes: marquee_eventlog::SEGMENT_HEADER_LEN
                + 10 * marquee_eventlog::FRAME_LEN as u64,
            ..marquee_eventlog::Config::default()
        };
        Arc::new(EventLog::open(dir.path(), config).unwrap())
    };
    let log = open();
    let events: Vec<Event> = (0..95).map(|n| w.event(n, EventKind::Decision)).collect();
    append_all(&log, &events);
    log.flush_and_close().unwrap();
    let aggregator = w.local_aggregator(&log);
    let report = aggregator.run_once().await.unwrap();
    assert_eq!(report.accepted, 95);
    assert_eq!(w.minutes().await, direct_minute_count(&events));
    // All closed and consumed: deleted, but for each shard's newest, kept as an empty header
    // (it carries the numbering).
    let left: Vec<Vec<u64>> = (0..log.shards())
        .map(|s| log.segments(s).unwrap().iter().map(|s| s.len).collect())
        .collect();
    assert!(
        left.iter()
            .all(|lens| lens.len() <= 1 && lens.iter().all(|&len| len == SEGMENT_HEADER_LEN)),
        "{left:?}"
    );
    // A second run finds nothing new and counts nothing twice.
    let again = aggregator.run_once().await.unwrap();
    assert_eq!(again.records, 0);
    assert_eq!(w.minutes().await, direct_minute_count(&events));

    // The edge restarts on the same directory (as `marquee serve` does after a graceful
    // stop, which leaves every segment consumed): what it logs next is counted, not taken
    // for segments already consumed.
    drop(aggregator);
    drop(log);
    let log = open();
    let later: Vec<Event> = (95..105).map(|n| w.event(n, EventKind::Decision)).collect();
    append_all(&log, &later);
    log.flush_and_close().unwrap();
    let aggregator = w.local_aggregator(&log);
    let report = aggregator.run_once().await.unwrap();
    assert_eq!(report.accepted, 10);
    let all: Vec<Event> = events.iter().chain(&later).copied().collect();
    assert_eq!(w.minutes().await, direct_minute_count(&all));
}

/// A source whose listing waits until another source has been read, then fails: an edge that
/// accepted the connection and never answered, until its timeout.
#[derive(Debug)]
struct Stalled {
    others_read: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl LogSource for Stalled {
    fn name(&self) -> &str {
        "stalled"
    }

    async fn segments(&self) -> Result<Vec<Listed>, SourceError> {
        self.others_read.notified().await;
        Err(SourceError::Timeout {
            source_name: "stalled".into(),
            call: "listing",
            after: Duration::from_secs(3),
        })
    }

    async fn read(&self, _: u32, _: u64, _: u64, _: usize) -> Result<Chunk, SourceError> {
        unreachable!("never listed")
    }

    async fn ack(&self, _: u32, _: u64) -> Result<(), SourceError> {
        unreachable!("never read")
    }
}

/// Reads through to a memory source and tells the stalled one once it has been read.
#[derive(Debug)]
struct Telling {
    inner: Arc<MemorySource>,
    others_read: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl LogSource for Telling {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn segments(&self) -> Result<Vec<Listed>, SourceError> {
        self.inner.segments().await
    }

    // The same signature as `MemorySource::read`, deliberately: the trait's.
    async fn read(
        &self,
        shard: u32,
        segment: u64,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Chunk, SourceError> {
        let chunk = self.inner.read(shard, segment, offset, max_bytes).await;
        self.others_read.notify_one();
        chunk
    }

    async fn ack(&self, shard: u32, segment: u64) -> Result<(), SourceError> {
        self.inner.ack(shard, segment).await
    }
}

/// An edge that is away (listed first, answering only once another edge was read: never, if
/// sources were read one after another) does not hold back the other edges' events: they are
/// counted in the run, and the silent one is counted as a source error.
#[tokio::test]
async fn a_silent_edge_does_not_hold_back_the_others() {
    let w = world().await;
    let others_read = Arc::new(tokio::sync::Notify::new());
    let good = MemorySource::named("good");
    let events: Vec<Event> = (1..=12)
        .map(|n| w.event(n, EventKind::Impression))
        .collect();
    good.push_segment(0, &events, false);
    let aggregator = Aggregator::new(
        Arc::clone(&w.store),
        w.clock.clone(),
        vec![
            Arc::new(Stalled {
                others_read: Arc::clone(&others_read),
            }),
            Arc::new(Telling {
                inner: good.clone(),
                others_read,
            }),
        ],
        AggregationOptions::default(),
    );
    // A guard against hanging for ever (sources read one after another), not a measurement.
    let report = tokio::time::timeout(Duration::from_secs(120), aggregator.run_once())
        .await
        .expect("the run finishes while one edge is silent")
        .unwrap();
    assert_eq!(report.accepted, 12);
    assert_eq!(w.minutes().await, direct_minute_count(&events));
    let metrics = scrape(&aggregator);
    assert!(
        metrics.contains("marquee_aggregation_source_errors_total 1"),
        "{metrics}"
    );
}

/// An edge restored from a backup lists segments below the stored checkpoint (same id, ids
/// gone back). Reading on would skip them as consumed and the acknowledgement would delete
/// them: instead nothing is read or acknowledged, and a gauge says so.
#[tokio::test]
async fn a_log_restored_behind_its_checkpoint_is_neither_read_nor_acknowledged() {
    let w = world().await;
    let source = MemorySource::named("eu-1");
    let counted: Vec<Event> = (1..=9).map(|n| w.event(n, EventKind::Impression)).collect();
    for part in counted.chunks(3) {
        source.push_segment(0, part, true);
    }
    let aggregator = w.aggregator(source.clone(), 1 << 20);
    assert_eq!(aggregator.run_once().await.unwrap().accepted, 9);
    assert_eq!(*source.acks.lock().unwrap(), [(0, 3)]);

    // The backup held segments 1 and 2; the restored edge logs on in a new segment 3, below
    // the checkpoint (segment 4). The manager restarted meanwhile (nothing acknowledged yet
    // in this process).
    {
        let mut shards = source.shards.lock().unwrap();
        let backup = counted[..6].chunks(3).zip(1u64..).map(|(part, id)| {
            let mut bytes = vec![0u8; SEGMENT_HEADER_LEN as usize];
            for e in part {
                bytes.extend_from_slice(&e.to_frame());
            }
            (id, bytes, true)
        });
        shards.insert(0, backup.collect());
        source.next_id.lock().unwrap().insert(0, 3);
    }
    let after_restore: Vec<Event> = (10..=12)
        .map(|n| w.event(n, EventKind::Impression))
        .collect();
    source.push_segment(0, &after_restore, false);
    let restarted = w.aggregator(source.clone(), 1 << 20);
    for _ in 0..2 {
        let report = restarted.run_once().await.unwrap();
        assert_eq!(report.records, 0);
    }
    assert_eq!(
        *source.acks.lock().unwrap(),
        [(0, 3)],
        "nothing acknowledged"
    );
    let listed = source.listed_ids().await;
    assert_eq!(listed, [1, 2, 3], "nothing deleted");
    assert_eq!(w.minutes().await, direct_minute_count(&counted));
    let metrics = scrape(&restarted);
    assert!(
        metrics.contains("marquee_aggregation_shards_behind_checkpoint 1"),
        "{metrics}"
    );
}

/// Polls `log`'s shard 0 until `ready` holds for its segments (the flusher writes every 5 ms
/// and closes segments by age).
async fn wait_for_segments(log: &EventLog, ready: impl Fn(&[SegmentInfo]) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let segments = log.segments(0).unwrap();
        if ready(&segments) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "segments never got there: {segments:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The stored checkpoint of (`source`, shard 0) as (segment, offset).
async fn checkpoint(w: &World, source: &str) -> Option<(u64, u64)> {
    w.store
        .collection_state()
        .await
        .unwrap()
        .checkpoints
        .iter()
        .find(|c| c.source == source && c.shard == 0)
        .map(|c| (c.segment, c.offset))
}

/// The aggregator's metrics as a scrape reads them.
fn scrape(aggregator: &Aggregator) -> String {
    let mut registry = marquee_metrics::Registry::default();
    aggregator.register_metrics(&mut registry);
    marquee_metrics::encode(&registry, marquee_metrics::Format::Text)
}

fn metric_line(metrics: &str, name: &str) -> String {
    metrics
        .lines()
        .find(|line| line.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {metrics}"))
        .to_owned()
}

/// Asserts the shards-behind-checkpoint gauge and the lost-segments counter in `metrics`.
fn assert_behind_and_lost(metrics: &str, behind: u64, lost: u64) {
    for (name, value) in [
        ("marquee_aggregation_shards_behind_checkpoint", behind),
        ("marquee_aggregation_lost_segments_total", lost),
    ] {
        assert_eq!(metric_line(metrics, name), format!("{name} {value}"));
    }
}

/// The edge's disk limit cuts the shard's newest segment to its bare header (it is not
/// deleted: it carries the numbering) after the manager counted part of it while it was open.
/// The segment is closed and shorter than the checkpoint: its unread rest is lost by policy
/// (counted as a lost segment), but it is not a log restored from a backup, and the shard goes
/// on at the next segment, whose events all count. (Before, the shard was reported behind its
/// checkpoint and, once the next segment existed, every run read the cut segment at the old
/// offset, failed and retried for ever: nothing of the shard was counted again.)
#[tokio::test]
async fn a_segment_cut_by_the_disk_limit_after_a_partial_read_is_passed_and_the_rest_counted() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let config = marquee_eventlog::Config {
        shards: 1,
        // Long enough for the first run to read segment 1 while it is open.
        segment_max_age: Duration::from_secs(2),
        ..marquee_eventlog::Config::default()
    };
    let log = Arc::new(EventLog::open(dir.path(), config).unwrap());
    let aggregator = w.local_aggregator(&log);
    let frame = marquee_eventlog::FRAME_LEN as u64;
    let header = SEGMENT_HEADER_LEN;

    // 1. The manager reads segment 1 while it is open: checkpoint (1, after 3 records).
    let counted: Vec<Event> = (1..=3).map(|n| w.event(n, EventKind::Impression)).collect();
    append_all(&log, &counted);
    wait_for_segments(&log, |s| s.len() == 1 && s[0].len == header + 3 * frame).await;
    assert_eq!(aggregator.run_once().await.unwrap().accepted, 3);
    assert_eq!(
        checkpoint(&w, "local").await,
        Some((1, header + 3 * frame)),
        "read while open (the segment closed before the run: a slow machine)"
    );

    // 2. Two more records, then segment 1 closes by age and is the shard's newest file.
    let trimmed: Vec<Event> = (4..=5).map(|n| w.event(n, EventKind::Impression)).collect();
    append_all(&log, &trimmed);
    wait_for_segments(&log, |s| {
        s == [SegmentInfo {
            id: 1,
            len: header + 5 * frame,
            closed: true,
        }]
    })
    .await;

    // 3. The manager is away; the disk limit picks segment 1 (the oldest closed one with
    // records: what `trim_to_limit` deletes) and, as it is the newest, cuts it to its header.
    log.delete_through(0, 1).unwrap();
    assert_eq!(
        log.segments(0).unwrap(),
        [SegmentInfo {
            id: 1,
            len: header,
            closed: true
        }]
    );

    // 4. The next run is not held back as a restored log: the shard moves to segment 2.
    let report = aggregator.run_once().await.unwrap();
    assert_eq!(report.records, 0);
    let metrics = scrape(&aggregator);
    assert_behind_and_lost(&metrics, 0, 1);
    assert_eq!(checkpoint(&w, "local").await, Some((2, 0)));

    // What the edge logs next is counted, run after run: nothing after the cut is lost.
    let later: Vec<Event> = (6..=8).map(|n| w.event(n, EventKind::Impression)).collect();
    append_all(&log, &later);
    wait_for_segments(&log, |s| {
        s.iter().any(|s| s.id == 2 && s.len == header + 3 * frame)
    })
    .await;
    let report = aggregator.run_once().await.unwrap();
    assert_eq!(report.accepted, 3);
    let last: Vec<Event> = (9..=10)
        .map(|n| w.event(n, EventKind::Impression))
        .collect();
    append_all(&log, &last);
    wait_for_segments(&log, |s| {
        s.iter().any(|s| s.id == 2 && s.len == header + 5 * frame)
    })
    .await;
    assert_eq!(aggregator.run_once().await.unwrap().accepted, 2);
    assert_eq!(checkpoint(&w, "local").await, Some((2, header + 5 * frame)));
    let all: Vec<Event> = counted.iter().chain(&later).chain(&last).copied().collect();
    assert_eq!(w.minutes().await, direct_minute_count(&all));
    // Counted once: the lost segment is not counted again.
    assert_eq!(
        metric_line(
            &scrape(&aggregator),
            "marquee_aggregation_lost_segments_total"
        ),
        "marquee_aggregation_lost_segments_total 1"
    );
}

/// The same shape with a real log directory, where the ids did go back: the edge is restored
/// from a backup holding only segment 1 after the manager counted into segment 3. Its
/// segments end before the checkpoint's segment, so the shard is held: nothing read, nothing
/// acknowledged, before and after the restored edge logs again (into a new segment 2, below
/// the checkpoint).
#[tokio::test]
async fn a_real_log_restored_from_a_backup_is_still_held_back() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let backup = tempfile::tempdir().unwrap();
    let frame = marquee_eventlog::FRAME_LEN as u64;
    let header = SEGMENT_HEADER_LEN;
    let open = || {
        let config = marquee_eventlog::Config {
            shards: 1,
            // Three records a segment.
            segment_max_bytes: header + 3 * frame,
            ..marquee_eventlog::Config::default()
        };
        Arc::new(EventLog::open(dir.path(), config).unwrap())
    };
    let log = open();
    let first: Vec<Event> = (1..=3).map(|n| w.event(n, EventKind::Impression)).collect();
    append_all(&log, &first);
    log.flush_and_close().unwrap();
    drop(log);
    // The backup: segment 1 alone.
    std::fs::create_dir(backup.path().join("shard-0")).unwrap();
    let segment_1 = std::path::Path::new("shard-0").join(format!("{:020}.log", 1));
    std::fs::copy(dir.path().join(&segment_1), backup.path().join(&segment_1)).unwrap();

    let log = open();
    let second: Vec<Event> = (4..=8).map(|n| w.event(n, EventKind::Impression)).collect();
    append_all(&log, &second);
    // Segment 2 full and closed, segment 3 open with two records.
    wait_for_segments(&log, |s| {
        s.last()
            .is_some_and(|s| s.id == 3 && s.len == header + 2 * frame)
    })
    .await;
    let aggregator = w.local_aggregator(&log);
    assert_eq!(aggregator.run_once().await.unwrap().accepted, 8);
    assert_eq!(checkpoint(&w, "local").await, Some((3, header + 2 * frame)));
    drop(aggregator);
    log.flush_and_close().unwrap();
    drop(log);

    // Restored: the directory holds the backup's segment 1 only.
    std::fs::remove_dir_all(dir.path().join("shard-0")).unwrap();
    std::fs::create_dir(dir.path().join("shard-0")).unwrap();
    std::fs::copy(backup.path().join(&segment_1), dir.path().join(&segment_1)).unwrap();
    let log = open();
    let aggregator = w.local_aggregator(&log);
    let held = |aggregator: &Aggregator| {
        let metrics = scrape(aggregator);
        assert_behind_and_lost(&metrics, 1, 0);
    };
    assert_eq!(aggregator.run_once().await.unwrap().records, 0);
    held(&aggregator);

    // The restored edge logs on, into a new segment 2: still held, nothing read or deleted.
    let after_restore: Vec<Event> = (9..=10)
        .map(|n| w.event(n, EventKind::Impression))
        .collect();
    append_all(&log, &after_restore);
    wait_for_segments(&log, |s| {
        s.iter().any(|s| s.id == 2 && !s.closed && s.len > header)
    })
    .await;
    for _ in 0..2 {
        assert_eq!(aggregator.run_once().await.unwrap().records, 0);
        held(&aggregator);
    }
    let listed: Vec<u64> = log.segments(0).unwrap().iter().map(|s| s.id).collect();
    assert_eq!(listed, [1, 2], "nothing acknowledged, nothing deleted");
    assert_eq!(checkpoint(&w, "local").await, Some((3, header + 2 * frame)));
    let counted: Vec<Event> = first.iter().chain(&second).copied().collect();
    assert_eq!(w.minutes().await, direct_minute_count(&counted));
}

/// The forecast's sample records ride the log with the events: a run stores them by UTC day
/// with its checkpoints, so a run after a restart stores none twice; a body that is no record
/// is left out; days past the history are deleted.
#[tokio::test]
async fn sample_records_are_stored_once_by_day_and_pruned_past_the_history() {
    use marquee_forecast::SampleRecord;
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EventLog::open(dir.path(), marquee_eventlog::Config::default()).unwrap());
    let now = NOW.parse::<Timestamp>().unwrap().as_second();
    let records: Vec<SampleRecord> = (0..5u32)
        .map(|n| SampleRecord {
            minute: u32::try_from(now / 60).unwrap() - 10 * n,
            user: u64::from(n),
            placement: marquee_model::PlacementId(w.placements[0]),
            country: Some("DE".into()),
            ..SampleRecord::default()
        })
        .collect();
    for (n, record) in records.iter().enumerate() {
        log.append(&w.event(n as u64, EventKind::Decision)).unwrap();
        let mut body = Vec::new();
        record.encode(&mut body);
        log.append_sample(i64::from(record.minute) * 60_000_000, &body)
            .unwrap();
    }
    log.append_sample(now * 1_000_000, b"not a record").unwrap();
    log.flush_and_close().unwrap();

    let today = i32::try_from(now / 86_400).unwrap();
    let first = w.local_aggregator(&log);
    assert_eq!(first.run_once().await.unwrap().accepted, 5);
    drop(first);
    let again = w.local_aggregator(&log);
    assert_eq!(again.run_once().await.unwrap().records, 0);
    let stored = w.store.samples(0, i32::MAX).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].0, today);
    assert_eq!(SampleRecord::decode_all(&stored[0].1).unwrap(), records);

    // 29 days on, the day is past the 28 kept.
    w.clock.advance(jiff::SignedDuration::from_hours(29 * 24));
    again.run_once().await.unwrap();
    assert!(w.store.samples(0, i32::MAX).await.unwrap().is_empty());
}
