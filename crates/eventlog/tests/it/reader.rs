use std::fs::{self, OpenOptions};
use std::io::Write;

use marquee_eventlog::{
    AppendError, Budget, Config, DecodeError, DeleteError, Event, EventKind, EventLog, FRAME_LEN,
    FrameError, MAX_SAMPLE_LEN, RECORD_VERSION, ReadEnd, ReadError, Record, Rejected,
    SEGMENT_HEADER_LEN, parse_frame,
};

use crate::common::*;

fn at(n: usize) -> u64 {
    SEGMENT_HEADER_LEN + (n * FRAME_LEN) as u64
}

fn records(max_records: usize) -> Budget {
    Budget {
        max_records,
        ..Budget::default()
    }
}

/// A frame around any payload, with a correct CRC.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn closed_log(dir: &std::path::Path, written: &[Event], config: Config) -> EventLog {
    let log = EventLog::open(dir, config).unwrap();
    for e in written {
        log.append(e).unwrap();
    }
    log.flush_and_close().unwrap();
    log
}

#[test]
fn reading_resumes_from_an_offset_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let written = events(0, 10);
    let log = closed_log(dir.path(), &written, config());

    let first = log.read(0, 1, 0, records(4)).unwrap();
    assert_eq!(first.events, written[..4]);
    assert_eq!(first.next_offset, at(4));
    assert_eq!(first.end, ReadEnd::Budget);

    let second = log.read(0, 1, first.next_offset, records(4)).unwrap();
    assert_eq!(second.events, written[4..8]);

    let third = log.read(0, 1, second.next_offset, records(4)).unwrap();
    assert_eq!(third.events, written[8..]);
    assert_eq!(third.next_offset, at(10));
    assert_eq!(third.end, ReadEnd::Closed);

    // Any record boundary works, including the end.
    let from_seven = log.read(0, 1, at(7), Budget::default()).unwrap();
    assert_eq!(from_seven.events, written[7..]);
    let at_end = log.read(0, 1, at(10), Budget::default()).unwrap();
    assert!(at_end.events.is_empty());
    assert_eq!(at_end.end, ReadEnd::Closed);

    // The byte budget counts whole frames, and at least one is always returned.
    let bytes = |max_bytes| Budget {
        max_bytes,
        ..Budget::default()
    };
    assert_eq!(
        log.read(0, 1, 0, bytes(2 * FRAME_LEN + 1)).unwrap().events,
        written[..2]
    );
    assert_eq!(log.read(0, 1, 0, bytes(1)).unwrap().events, written[..1]);
}

#[test]
fn the_open_segment_is_readable_up_to_its_durable_tail_only() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(group)).unwrap();
    let written = events(0, 4);
    for e in &written[..3] {
        log.append(e).unwrap();
    }
    // Buffered, not flushed: nothing is visible yet.
    assert!(log.segments(0).unwrap().is_empty());

    block_on(log.append_durable(&written[3])).unwrap();
    let segments = log.segments(0).unwrap();
    assert_eq!(segments.len(), 1);
    assert_eq!(segments[0].len, at(4));
    assert!(!segments[0].closed);
    let batch = log.read(0, 1, 0, Budget::default()).unwrap();
    assert_eq!(batch.events, written);
    assert_eq!(batch.end, ReadEnd::Tail);

    log.append(&event(EventKind::Click, 50)).unwrap();
    let unflushed = log
        .read(0, 1, batch.next_offset, Budget::default())
        .unwrap();
    assert!(unflushed.events.is_empty(), "not yet durable, not readable");
    assert_eq!(unflushed.end, ReadEnd::Tail);

    log.flush_and_close().unwrap();
    let rest = log
        .read(0, 1, batch.next_offset, Budget::default())
        .unwrap();
    assert_eq!(rest.events, vec![event(EventKind::Click, 50)]);
    assert_eq!(rest.end, ReadEnd::Closed);
}

#[test]
fn unknown_kinds_and_versions_are_rejected_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let written = events(0, 2);
    drop(closed_log(dir.path(), &written, config()));

    let mut unknown_kind = event(EventKind::Decision, 7).encode();
    unknown_kind[1] = 200;
    let mut newer = event(EventKind::Decision, 8).encode().to_vec();
    newer[0] = RECORD_VERSION + 1;
    newer.extend_from_slice(b"a longer future layout");
    let path = segment_file(dir.path(), 0, 1);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&frame(&unknown_kind)).unwrap();
    file.write_all(&frame(&newer)).unwrap();
    file.write_all(&event(EventKind::Click, 3).to_frame())
        .unwrap();
    // A version-1 record (written before regions were recorded) is read, with no region.
    let mut version_1 = event(EventKind::Impression, 4).encode()[..69].to_vec();
    version_1[0] = 1;
    file.write_all(&frame(&version_1)).unwrap();
    drop(file);

    // Intact frames survive recovery whatever their payload.
    let log = EventLog::open(dir.path(), config()).unwrap();
    assert_eq!(log.counters().truncated_bytes, 0);
    let batch = log.read(0, 1, 0, Budget::default()).unwrap();
    assert_eq!(
        batch.events,
        vec![
            written[0],
            written[1],
            event(EventKind::Click, 3),
            event(EventKind::Impression, 4)
        ]
    );
    assert_eq!(
        batch.rejected,
        vec![
            Rejected {
                offset: at(2),
                error: DecodeError::UnknownKind(200)
            },
            Rejected {
                offset: at(3),
                error: DecodeError::UnsupportedVersion(RECORD_VERSION + 1)
            },
        ]
    );
    assert_eq!(batch.end, ReadEnd::Closed);
    assert_eq!(
        batch.next_offset,
        fs::metadata(&path).unwrap().len(),
        "rejected records are consumed"
    );
    assert_eq!(log.counters().read_rejected, 2);
}

#[test]
fn damage_inside_a_closed_segment_is_reported_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let written = events(0, 6);
    let config = Config {
        segment_max_bytes: at(3),
        ..config()
    };
    drop(closed_log(dir.path(), &written, config.clone()));
    // Segment 1 is not the last one, so recovery leaves it alone.
    let path = segment_file(dir.path(), 0, 1);
    let mut bytes = fs::read(&path).unwrap();
    bytes[at(1) as usize + 10] ^= 0xFF;
    fs::write(&path, bytes).unwrap();

    let log = EventLog::open(dir.path(), config).unwrap();
    let batch = log.read(0, 1, 0, Budget::default()).unwrap();
    assert_eq!(batch.events, written[..1]);
    assert_eq!(batch.next_offset, at(1));
    match batch.end {
        ReadEnd::Corrupt(c) => {
            assert_eq!(c.offset, at(1));
            assert!(matches!(c.error, FrameError::CrcMismatch { .. }));
        }
        other => panic!("{other:?}"),
    }
    // Reading from there reports the same damage; the next segment is fine.
    let again = log
        .read(0, 1, batch.next_offset, Budget::default())
        .unwrap();
    assert!(again.events.is_empty());
    assert_eq!(again.end, batch.end);
    assert_eq!(
        log.read(0, 2, 0, Budget::default()).unwrap().events,
        written[3..]
    );
}

#[test]
fn bad_read_requests_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let log = closed_log(dir.path(), &events(0, 2), config());
    assert!(matches!(
        log.read(1, 1, 0, Budget::default()),
        Err(ReadError::UnknownShard {
            shard: 1,
            shards: 1
        })
    ));
    assert!(matches!(
        log.read(0, 2, 0, Budget::default()),
        Err(ReadError::NoSegment {
            shard: 0,
            segment: 2
        })
    ));
    assert!(matches!(
        log.read(0, 1, at(3), Budget::default()),
        Err(ReadError::OffsetPastEnd { end, .. }) if end == at(2)
    ));
    assert!(matches!(
        log.segments(5),
        Err(ReadError::UnknownShard { .. })
    ));
}

#[test]
fn delete_through_never_deletes_the_open_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(
        dir.path(),
        Config {
            segment_max_bytes: at(2),
            ..slow(group)
        },
    )
    .unwrap();
    let written = events(0, 7);
    for e in &written[..6] {
        log.append(e).unwrap();
    }
    block_on(log.append_durable(&written[6])).unwrap();
    let segments = log.segments(0).unwrap();
    let summary: Vec<(u64, bool)> = segments.iter().map(|s| (s.id, s.closed)).collect();
    assert_eq!(summary, vec![(1, true), (2, true), (3, true), (4, false)]);

    assert!(matches!(
        log.delete_through(0, 4),
        Err(DeleteError::NotClosed {
            shard: 0,
            segment: 4
        })
    ));
    assert!(matches!(
        log.delete_through(0, 9),
        Err(DeleteError::NotClosed { .. })
    ));
    assert_eq!(
        log.segments(0).unwrap().len(),
        4,
        "a refusal deletes nothing"
    );

    assert_eq!(log.delete_through(0, 2).unwrap(), 2);
    let ids: Vec<u64> = log.segments(0).unwrap().iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![3, 4]);
    assert_eq!(log.delete_through(0, 2).unwrap(), 0, "idempotent");
    assert!(matches!(
        log.read(0, 1, 0, Budget::default()),
        Err(ReadError::NoSegment { .. })
    ));
    assert_eq!(
        log.read(0, 4, 0, Budget::default()).unwrap().events,
        written[6..]
    );

    // Once closed, the last one goes too, but its file stays as a header: the next opening
    // numbers on from it, never again from 1 (below the manager's checkpoint).
    log.flush_and_close().unwrap();
    assert_eq!(log.delete_through(0, 4).unwrap(), 2);
    let left: Vec<(u64, u64)> = log
        .segments(0)
        .unwrap()
        .iter()
        .map(|s| (s.id, s.len))
        .collect();
    assert_eq!(left, vec![(4, SEGMENT_HEADER_LEN)]);
    assert!(
        log.read(0, 4, 0, Budget::default())
            .unwrap()
            .events
            .is_empty()
    );
    drop(log);
    let reopened = EventLog::open(dir.path(), slow(group)).unwrap();
    block_on(reopened.append_durable(&written[0])).unwrap();
    let ids: Vec<u64> = reopened.segments(0).unwrap().iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![4, 5]);
    assert_eq!(
        reopened.read(0, 5, 0, Budget::default()).unwrap().events,
        written[..1]
    );
}

#[test]
fn an_open_segment_cut_short_from_outside_is_reported_not_looped_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(group)).unwrap();
    for e in &events(0, 3) {
        log.append(e).unwrap();
    }
    block_on(log.append_durable(&event(EventKind::Click, 3))).unwrap();
    let file = OpenOptions::new()
        .write(true)
        .open(segment_file(dir.path(), 0, 1))
        .unwrap();
    file.set_len(at(2)).unwrap();
    let batch = log.read(0, 1, 0, Budget::default()).unwrap();
    assert_eq!(batch.events, events(0, 2));
    match batch.end {
        ReadEnd::Corrupt(c) => assert_eq!(c.offset, at(2)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn read_frames_returns_the_intact_frames_as_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let written = events(0, 5);
    drop(closed_log(dir.path(), &written, config()));
    let mut unknown_kind = event(EventKind::Decision, 9).encode();
    unknown_kind[1] = 200;
    let path = segment_file(dir.path(), 0, 1);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&frame(&unknown_kind)).unwrap();
    drop(file);
    let log = EventLog::open(dir.path(), config()).unwrap();

    // Frames this reader cannot decode are passed on too: the remote reader counts them.
    let whole = log.read_frames(0, 1, 0, Budget::default()).unwrap();
    let mut expected: Vec<u8> = written.iter().flat_map(|e| e.to_frame()).collect();
    expected.extend_from_slice(&frame(&unknown_kind));
    assert_eq!(whole.frames, expected);
    assert_eq!(whole.records, 6);
    assert_eq!(whole.end, ReadEnd::Closed);
    assert_eq!(whole.next_offset, fs::metadata(&path).unwrap().len());
    assert_eq!(
        log.counters().read_rejected,
        0,
        "nothing decoded, nothing rejected"
    );

    // Same budget and offsets as `read`.
    let part = log.read_frames(0, 1, at(1), records(2)).unwrap();
    let decoded = log.read(0, 1, at(1), records(2)).unwrap();
    assert_eq!(part.frames, expected[FRAME_LEN..3 * FRAME_LEN]);
    assert_eq!(part.next_offset, decoded.next_offset);
    assert_eq!(part.end, ReadEnd::Budget);
    assert_eq!(part.end, decoded.end);
}

/// Sample records ride the log between events: `read_frames` carries them as written and
/// `Record::decode` reads them back, `read` skips them without counting them as rejected.
#[test]
fn sample_records_sit_between_events_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), config()).unwrap();
    let written = events(0, 3);
    let bodies: Vec<Vec<u8>> = vec![vec![1], vec![2; 62], vec![3; MAX_SAMPLE_LEN]];
    for (event, body) in written.iter().zip(&bodies) {
        log.append(event).unwrap();
        log.append_sample(event.time_micros, body).unwrap();
    }
    for len in [0, MAX_SAMPLE_LEN + 1] {
        assert!(matches!(
            log.append_sample(0, &vec![0; len]),
            Err(AppendError::BadSample { .. })
        ));
    }
    log.flush_and_close().unwrap();

    let batch = log.read(0, 1, 0, Budget::default()).unwrap();
    assert_eq!(batch.events, written);
    assert!(batch.rejected.is_empty());
    assert_eq!(log.counters().read_rejected, 0);

    let frames = log.read_frames(0, 1, 0, Budget::default()).unwrap();
    assert_eq!(frames.records, 6);
    let mut records = Vec::new();
    let mut at = 0;
    while at < frames.frames.len() {
        let (payload, len) = parse_frame(&frames.frames[at..]).unwrap();
        records.push(Record::decode(payload).unwrap());
        at += len;
    }
    for (i, (event, body)) in written.iter().zip(&bodies).enumerate() {
        assert_eq!(records[2 * i], Record::Event(*event));
        assert_eq!(
            records[2 * i + 1],
            Record::Sample {
                time_micros: event.time_micros,
                body
            }
        );
    }
}
