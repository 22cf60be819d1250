//! Counted events: bids and no-bids tallied per shard and written as counter records with the
//! shard's next flush.

use marquee_eventlog::{AppendError, Event, EventKind, EventLog};

use crate::common::*;

const MINUTE: i64 = 60_000_000;

/// A bid (or no-bid) at `at` microseconds into the minute of `common::event`'s first id.
fn counted(kind: EventKind, id: u128, at: i64, line_item: u64) -> Event {
    let base = event(kind, 0).time_micros;
    Event {
        time_micros: base - base.rem_euclid(MINUTE) + at,
        line_item,
        ..event(kind, id)
    }
}

/// `(kind, minute start, line item, count)` of each counter record, sorted.
fn tallies(events: &[Event]) -> Vec<(EventKind, i64, u64, i64)> {
    let mut out: Vec<_> = events
        .iter()
        .inspect(|e| assert!(e.kind.is_counter(), "only counter records: {e:?}"))
        .map(|e| (e.kind, e.time_micros, e.line_item, e.amount_micros))
        .collect();
    out.sort_unstable_by_key(|t| (t.0.code(), t.1, t.2));
    out
}

#[test]
fn equal_rows_merge_and_minutes_stay_apart_in_the_records_of_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(group)).unwrap();
    let start = counted(EventKind::Bid, 0, 0, 0).time_micros;
    for (id, at, line_item) in [(1, 5, 11), (2, MINUTE - 1, 11), (3, 7, 12), (4, MINUTE, 11)] {
        log.count(&counted(EventKind::Bid, id, at, line_item))
            .unwrap();
    }
    log.count(&counted(EventKind::NoBid, 5, 3, 0)).unwrap();
    log.count(&counted(EventKind::NoBid, 6, 4, 0)).unwrap();
    assert!(
        read_shard(&log, 0).is_empty(),
        "nothing written before a flush"
    );
    assert_eq!(log.counters().counted, 6);
    assert_eq!(log.counters().appended, 0, "no record per counted event");

    // A durable append wakes the flusher: the counts go out in the same write.
    let click = event(EventKind::Click, 9);
    block_on(log.append_durable(&click)).unwrap();
    let written = read_shard(&log, 0);
    assert_eq!(written[0], click);
    assert_eq!(
        tallies(&written[1..]),
        [
            (EventKind::BidsCounted, start, 11, 2),
            (EventKind::BidsCounted, start, 12, 1),
            (EventKind::BidsCounted, start + MINUTE, 11, 1),
            (EventKind::NoBidsCounted, start, 0, 2),
        ]
    );
    let bid = written[1..]
        .iter()
        .find(|e| e.kind == EventKind::BidsCounted && e.line_item == 12)
        .unwrap();
    assert_eq!(bid.user, 0, "users are not kept");
    assert_eq!(bid.event_id, 3, "the first counted event's id");
    assert_eq!((bid.creative, bid.placement, bid.country), (20, 30, *b"NL"));
    assert_eq!(log.counters().appended, 5);

    // Drained once: the next flush writes only what was counted since.
    log.count(&counted(EventKind::Bid, 7, 9, 11)).unwrap();
    log.flush_and_close().unwrap();
    assert_eq!(
        tallies(&read_shard(&log, 0)[5..]),
        [(EventKind::BidsCounted, start, 11, 1)]
    );
}

#[test]
fn counts_are_flushed_by_the_background_interval_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = EventLog::open(dir.path(), config()).unwrap();
        for id in 0..100 {
            log.count(&counted(EventKind::Bid, id, 1, 11)).unwrap();
        }
        eventually("the interval's flush", || !read_shard(&log, 0).is_empty());
        log.count(&counted(EventKind::NoBid, 100, 1, 0)).unwrap();
        // Closed by dropping, which flushes what is counted.
    }
    let log = EventLog::open(dir.path(), config()).unwrap();
    let written = read_shard(&log, 0);
    let total = |kind| -> u64 {
        written
            .iter()
            .filter(|e| e.kind == kind)
            .map(Event::event_count)
            .sum()
    };
    assert_eq!(total(EventKind::BidsCounted), 100);
    assert_eq!(total(EventKind::NoBidsCounted), 1);
}

#[test]
fn a_full_table_goes_into_the_buffer_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(group)).unwrap();
    let rows = 5_000;
    for line_item in 0..rows {
        log.count(&counted(EventKind::Bid, 1, 0, line_item))
            .unwrap();
    }
    assert!(
        log.counters().appended > 0,
        "rows beyond the table's size were written into the buffer before any flush"
    );
    log.flush_and_close().unwrap();
    let written = read_shard(&log, 0);
    assert_eq!(written.len(), rows as usize);
    assert_eq!(written.iter().map(Event::event_count).sum::<u64>(), rows);
    let mut line_items: Vec<u64> = written.iter().map(|e| e.line_item).collect();
    line_items.sort_unstable();
    line_items.dedup();
    assert_eq!(line_items.len(), rows as usize, "each row written once");
}

#[test]
fn only_bids_and_no_bids_are_counted_and_a_closed_log_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(group)).unwrap();
    for kind in EventKind::ALL {
        let result = log.count(&event(kind, 1));
        assert_eq!(
            result.is_ok(),
            kind.counted_as().is_some(),
            "{kind:?}: {result:?}"
        );
    }
    log.flush_and_close().unwrap();
    assert!(matches!(
        log.count(&event(EventKind::Bid, 2)),
        Err(AppendError::Closed)
    ));
    assert_eq!(log.counters().rejected, 1);
    assert_eq!(
        tallies(&read_shard(&log, 0))
            .iter()
            .map(|t| (t.0, t.3))
            .collect::<Vec<_>>(),
        [(EventKind::BidsCounted, 1), (EventKind::NoBidsCounted, 1)]
    );
}
