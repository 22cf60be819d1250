use std::collections::HashMap;
use std::sync::Arc;
use std::thread;

use marquee_eventlog::{
    AppendError, Config, Event, EventKind, EventLog, FRAME_LEN, OpenError, SEGMENT_HEADER_LEN,
};

use crate::common::*;

#[test]
fn every_kind_round_trips_through_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    {
        let log = EventLog::open(dir.path(), config()).unwrap();
        for (i, kind) in EventKind::ALL.into_iter().enumerate() {
            let event = Event {
                kind,
                time_micros: -5 + i as i64,
                line_item: u64::MAX - i as u64,
                creative: 1 << 40,
                placement: 0,
                user: 0,
                country: [0, 0],
                region: [0; 3],
                device: 255,
                amount_micros: -1_000_000 * i as i64,
                event_id: u128::MAX / (i as u128 + 1),
            };
            log.append(&event).unwrap();
            written.push(event);
        }
        log.flush_and_close().unwrap();
        let c = log.counters();
        assert_eq!(c.appended, EventKind::ALL.len() as u64);
        assert_eq!(
            c.appended_bytes,
            EventKind::ALL.len() as u64 * FRAME_LEN as u64
        );
    }
    let log = EventLog::open(dir.path(), config()).unwrap();
    assert_eq!(read_shard(&log, 0), written);
    let segments = log.segments(0).unwrap();
    assert_eq!(segments.len(), 1);
    assert_eq!(
        segments[0].len,
        SEGMENT_HEADER_LEN + EventKind::ALL.len() as u64 * FRAME_LEN as u64
    );
    assert!(segments[0].closed);
}

#[test]
fn concurrent_appenders_are_read_back_exactly_once_in_order() {
    const THREADS: u128 = 4;
    const EACH: u128 = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(
        EventLog::open(
            dir.path(),
            Config {
                shards: 2,
                // Small segments so rolls happen while appends race.
                segment_max_bytes: 64 * 1024,
                ..config()
            },
        )
        .unwrap(),
    );
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            thread::spawn(move || {
                let mut shard = None;
                for i in 0..EACH {
                    let receipt = log
                        .append(&event(EventKind::Impression, t << 64 | i))
                        .unwrap();
                    // A thread always appends to the same shard.
                    assert_eq!(*shard.get_or_insert(receipt.shard), receipt.shard);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    log.flush_and_close().unwrap();
    assert_eq!(log.counters().appended, (THREADS * EACH) as u64);
    assert!(log.segments(0).unwrap().len() > 1, "segments rolled");

    let mut next: HashMap<u128, u128> = HashMap::new();
    let mut shard_of: HashMap<u128, usize> = HashMap::new();
    for shard in 0..log.shards() {
        for e in read_shard(&log, shard) {
            let (t, i) = (e.event_id >> 64, e.event_id & u128::from(u64::MAX));
            assert_eq!(*shard_of.entry(t).or_insert(shard), shard);
            let expected = next.entry(t).or_insert(0);
            assert_eq!(
                i, *expected,
                "thread {t}: per-shard order kept, nothing twice"
            );
            *expected += 1;
        }
    }
    assert_eq!(next.len(), THREADS as usize);
    assert!(next.values().all(|&n| n == EACH), "nothing lost: {next:?}");
    // Four threads over two shards, assigned round-robin: both shards used.
    let mut used: Vec<usize> = shard_of.values().copied().collect();
    used.sort_unstable();
    used.dedup();
    assert_eq!(used, vec![0, 1]);
}

#[test]
fn appends_after_close_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), config()).unwrap();
    log.append(&event(EventKind::Click, 1)).unwrap();
    log.flush_and_close().unwrap();
    assert!(matches!(
        log.append(&event(EventKind::Click, 2)),
        Err(AppendError::Closed)
    ));
    assert!(matches!(
        block_on(log.append_durable(&event(EventKind::Click, 3))),
        Err(AppendError::Closed)
    ));
    log.flush_and_close().unwrap();
    assert_eq!(log.counters().rejected, 2);
    assert_eq!(read_shard(&log, 0), vec![event(EventKind::Click, 1)]);
}

#[test]
fn a_full_buffer_refuses_instead_of_growing() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(
        dir.path(),
        Config {
            max_buffered_bytes: 3 * FRAME_LEN,
            ..slow(group)
        },
    )
    .unwrap();
    for id in 0..3 {
        log.append(&event(EventKind::Decision, id)).unwrap();
    }
    assert!(matches!(
        log.append(&event(EventKind::Decision, 3)),
        Err(AppendError::Full { shard: 0 })
    ));
    assert_eq!(log.counters().rejected, 1);
    log.flush_and_close().unwrap();
    let expected: Vec<Event> = (0..3).map(|id| event(EventKind::Decision, id)).collect();
    assert_eq!(read_shard(&log, 0), expected);
}

#[test]
fn a_directory_is_opened_by_one_log_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let first = EventLog::open(dir.path(), config()).unwrap();
    assert!(matches!(
        EventLog::open(dir.path(), config()),
        Err(OpenError::Locked { .. })
    ));
    drop(first);
    EventLog::open(dir.path(), config()).unwrap();
}

#[test]
fn bad_configs_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "shards",
            Config {
                shards: 0,
                ..config()
            },
        ),
        (
            "segment_max_bytes",
            Config {
                segment_max_bytes: 50,
                ..config()
            },
        ),
        (
            "segment_max_age",
            Config {
                segment_max_age: std::time::Duration::ZERO,
                ..config()
            },
        ),
        (
            "durability.interval",
            Config {
                durability: group(std::time::Duration::ZERO),
                ..config()
            },
        ),
        (
            "max_buffered_bytes",
            Config {
                max_buffered_bytes: 10,
                ..config()
            },
        ),
    ];
    for (name, config) in cases {
        match EventLog::open(dir.path(), config) {
            Err(OpenError::InvalidConfig { field, .. }) => assert_eq!(field, name),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn shards_from_an_earlier_run_with_more_shards_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Arc::new(
            EventLog::open(
                dir.path(),
                Config {
                    shards: 3,
                    ..config()
                },
            )
            .unwrap(),
        );
        // Three fresh threads take the three shards round-robin.
        let handles: Vec<_> = (0..3u128)
            .map(|id| {
                let log = Arc::clone(&log);
                thread::spawn(move || log.append(&event(EventKind::Decision, id)).unwrap().shard)
            })
            .collect();
        let mut shards: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        shards.sort_unstable();
        assert_eq!(shards, vec![0, 1, 2]);
        log.flush_and_close().unwrap();
    }
    let log = EventLog::open(dir.path(), config()).unwrap();
    assert_eq!(log.shards(), 3);
    let receipt = log.append(&event(EventKind::Click, 9)).unwrap();
    assert_eq!(receipt.shard, 0);
    log.flush_and_close().unwrap();
    let mut ids: Vec<u128> = (0..3)
        .flat_map(|k| read_shard(&log, k))
        .map(|e| e.event_id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![0, 1, 2, 9]);
}
