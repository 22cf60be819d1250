use std::fs::OpenOptions;

use marquee_eventlog::{Config, Event, EventKind, EventLog, FRAME_LEN, SEGMENT_HEADER_LEN};
use proptest::prelude::*;

use crate::common::*;

fn arb_event() -> impl Strategy<Value = Event> {
    (
        0..EventKind::ALL.len(),
        any::<i64>(),
        any::<[u64; 4]>(),
        any::<[u8; 3]>(),
        any::<i64>(),
        any::<u128>(),
    )
        .prop_map(
            |(kind, time_micros, ids, bytes, amount_micros, event_id)| Event {
                kind: EventKind::ALL[kind],
                time_micros,
                line_item: ids[0],
                creative: ids[1],
                placement: ids[2],
                user: ids[3],
                country: [bytes[0], bytes[1]],
                region: [0; 3],
                device: bytes[2],
                amount_micros,
                event_id,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever point the last segment is cut at, reopening keeps exactly the records written
    /// wholly before the cut (and everything in earlier segments), in order.
    #[test]
    fn recovery_keeps_exactly_the_records_before_a_cut(
        written in prop::collection::vec(arb_event(), 1..40),
        per_segment in 1u64..6,
        cut_seed in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            segment_max_bytes: SEGMENT_HEADER_LEN + per_segment * FRAME_LEN as u64,
            ..config()
        };
        let (segments, last) = {
            let log = EventLog::open(dir.path(), config.clone()).unwrap();
            for e in &written {
                log.append(e).unwrap();
            }
            log.flush_and_close().unwrap();
            (read_segments(&log, 0), *log.segments(0).unwrap().last().unwrap())
        };
        prop_assert_eq!(segments.concat(), written.clone());

        let cut = cut_seed % (last.len + 1);
        let file = OpenOptions::new()
            .write(true)
            .open(segment_file(dir.path(), 0, last.id))
            .unwrap();
        file.set_len(cut).unwrap();
        drop(file);

        let (before_last, in_last) = segments.split_at(segments.len() - 1);
        let mut expected = before_last.concat();
        expected.extend_from_slice(&in_last[0][..records_within(cut)]);
        let dropped = if cut < SEGMENT_HEADER_LEN {
            cut
        } else {
            (cut - SEGMENT_HEADER_LEN) % FRAME_LEN as u64
        };

        let log = EventLog::open(dir.path(), config).unwrap();
        prop_assert_eq!(log.counters().truncated_bytes, dropped);
        prop_assert_eq!(read_shard(&log, 0), expected.clone());
        // Appending goes on after the recovered prefix.
        let more = event(EventKind::Conversion, 1);
        log.append(&more).unwrap();
        log.flush_and_close().unwrap();
        expected.push(more);
        prop_assert_eq!(read_shard(&log, 0), expected);
    }
}
