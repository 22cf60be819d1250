use std::thread;
use std::time::Duration;

use marquee_eventlog::{Config, EventLog, FRAME_LEN, SEGMENT_HEADER_LEN, SegmentInfo};

use crate::common::*;

#[test]
fn segments_roll_by_size_at_record_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let max = SEGMENT_HEADER_LEN + 3 * FRAME_LEN as u64 + 10;
    let log = EventLog::open(
        dir.path(),
        Config {
            segment_max_bytes: max,
            ..config()
        },
    )
    .unwrap();
    let written = events(0, 10);
    for e in &written {
        log.append(e).unwrap();
    }
    log.flush_and_close().unwrap();
    let full = SEGMENT_HEADER_LEN + 3 * FRAME_LEN as u64;
    let segments = log.segments(0).unwrap();
    let lens: Vec<u64> = segments.iter().map(|s| s.len).collect();
    assert_eq!(
        lens,
        vec![full, full, full, SEGMENT_HEADER_LEN + FRAME_LEN as u64]
    );
    assert_eq!(
        segments.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert!(segments.iter().all(|s| s.closed));
    assert!(lens.iter().all(|&len| len <= max));
    assert_eq!(read_shard(&log, 0), written);
}

#[test]
fn segments_roll_by_age_even_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(
        dir.path(),
        Config {
            segment_max_age: Duration::from_millis(80),
            ..config()
        },
    )
    .unwrap();
    log.append(&event(marquee_eventlog::EventKind::Decision, 1))
        .unwrap();
    eventually("the first segment to be written", || {
        log.segments(0).unwrap().len() == 1
    });
    assert!(!log.segments(0).unwrap()[0].closed, "young segment is open");
    eventually("the idle segment to close by age", || {
        log.segments(0).unwrap()[0].closed
    });
    // Nothing was appended since: no empty segment appears.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(log.segments(0).unwrap().len(), 1);

    log.append(&event(marquee_eventlog::EventKind::Decision, 2))
        .unwrap();
    eventually("a second segment", || log.segments(0).unwrap().len() == 2);
    let segments = log.segments(0).unwrap();
    assert_eq!(
        segments[0],
        SegmentInfo {
            id: 1,
            len: SEGMENT_HEADER_LEN + FRAME_LEN as u64,
            closed: true
        }
    );
    assert_eq!(segments[1].id, 2);
    log.flush_and_close().unwrap();
    let ids: Vec<u128> = read_shard(&log, 0).iter().map(|e| e.event_id).collect();
    assert_eq!(ids, vec![1, 2]);
}
