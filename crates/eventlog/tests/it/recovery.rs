use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use marquee_eventlog::{
    EventKind, EventLog, FRAME_LEN, HeaderError, OpenError, SEGMENT_HEADER_LEN,
};

use crate::common::*;

/// Writes ten events into segment 1 of shard 0 and closes the log.
fn ten_events(dir: &Path) -> Vec<marquee_eventlog::Event> {
    let log = EventLog::open(dir, config()).unwrap();
    let written = events(0, 10);
    for e in &written {
        log.append(e).unwrap();
    }
    log.flush_and_close().unwrap();
    written
}

/// Reopens, checks what survived, and that appending goes on in a new segment after it.
fn reopen_expecting(dir: &Path, kept: &[marquee_eventlog::Event], truncated: u64) {
    let log = EventLog::open(dir, config()).unwrap();
    assert_eq!(log.counters().truncated_bytes, truncated);
    assert_eq!(read_shard(&log, 0), kept);
    log.append(&event(EventKind::Click, 100)).unwrap();
    log.flush_and_close().unwrap();
    let segments = read_segments(&log, 0);
    assert_eq!(segments.len(), 2, "appends continue in a new segment");
    assert_eq!(segments[0], kept);
    assert_eq!(segments[1], vec![event(EventKind::Click, 100)]);
}

fn record_end(n: usize) -> u64 {
    SEGMENT_HEADER_LEN + (n * FRAME_LEN) as u64
}

#[test]
fn garbage_after_the_last_record_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let written = ten_events(dir.path());
    let path = segment_file(dir.path(), 0, 1);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"\x4d\x00\x00\x00 not a record at all")
        .unwrap();
    drop(file);
    reopen_expecting(dir.path(), &written, 24);
    assert_eq!(fs::metadata(&path).unwrap().len(), record_end(10));
}

#[test]
fn a_record_cut_in_the_middle_is_dropped_with_nothing_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let written = ten_events(dir.path());
    let path = segment_file(dir.path(), 0, 1);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(record_end(10) - 30).unwrap();
    drop(file);
    reopen_expecting(dir.path(), &written[..9], FRAME_LEN as u64 - 30);
}

#[test]
fn a_flipped_byte_cuts_from_its_record_on() {
    let dir = tempfile::tempdir().unwrap();
    let written = ten_events(dir.path());
    let path = segment_file(dir.path(), 0, 1);
    let mut bytes = fs::read(&path).unwrap();
    // A byte inside the fifth record's payload.
    bytes[record_end(4) as usize + 20] ^= 0x01;
    fs::write(&path, bytes).unwrap();
    reopen_expecting(dir.path(), &written[..4], 6 * FRAME_LEN as u64);
}

#[test]
fn a_zeroed_tail_is_cut() {
    // What a crash can leave when the file grew but its last blocks were never written.
    let dir = tempfile::tempdir().unwrap();
    let written = ten_events(dir.path());
    let path = segment_file(dir.path(), 0, 1);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(record_end(10) + 4096).unwrap();
    drop(file);
    reopen_expecting(dir.path(), &written, 4096);
}

#[test]
fn a_segment_with_a_torn_header_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let written = ten_events(dir.path());
    let torn = segment_file(dir.path(), 0, 2);
    fs::write(&torn, b"MQEVLOG\0\x01\x00").unwrap();
    let log = EventLog::open(dir.path(), config()).unwrap();
    assert!(!torn.exists());
    assert_eq!(log.counters().truncated_bytes, 10);
    assert_eq!(read_shard(&log, 0), written);
    log.append(&event(EventKind::Click, 100)).unwrap();
    log.flush_and_close().unwrap();
    // Ids are never reused, even of a removed segment.
    let ids: Vec<u64> = log.segments(0).unwrap().iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![1, 3]);
}

#[test]
fn a_damaged_header_with_records_after_it_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    ten_events(dir.path());
    let path = segment_file(dir.path(), 0, 1);
    let mut bytes = fs::read(&path).unwrap();
    bytes[0] = b'X';
    fs::write(&path, &bytes).unwrap();
    match EventLog::open(dir.path(), config()) {
        Err(OpenError::CorruptSegment { source, .. }) => assert_eq!(source, HeaderError::Magic),
        other => panic!("{other:?}"),
    }
    // Nothing was changed.
    assert_eq!(fs::read(&path).unwrap(), bytes);
}

#[test]
fn only_the_last_segment_is_recovered_and_earlier_ones_stay_intact() {
    let dir = tempfile::tempdir().unwrap();
    ten_events(dir.path());
    let second = {
        let log = EventLog::open(dir.path(), config()).unwrap();
        let written = events(10, 15);
        for e in &written {
            log.append(e).unwrap();
        }
        log.flush_and_close().unwrap();
        written
    };
    let last = segment_file(dir.path(), 0, 2);
    let file = OpenOptions::new().write(true).open(&last).unwrap();
    file.set_len(record_end(3) + 1).unwrap();
    drop(file);
    let log = EventLog::open(dir.path(), config()).unwrap();
    let segments = read_segments(&log, 0);
    assert_eq!(segments[0], events(0, 10));
    assert_eq!(segments[1], second[..3]);
}
