//! What the bid path leaves in the event log: no-bids counted per imp and reason in counter
//! records, and nothing for a test request.

use std::sync::Arc;

use marquee_eventlog::{Budget, Event, EventKind, EventLog, ReadEnd};

use crate::common;
use crate::overload::{limits, snapshot};

/// Two imps: each is a no-bid.
const TWO_IMPS: &str = r#"{"id":"r1","imp":[{"id":"1","banner":{"w":300,"h":250}},{"id":"2","banner":{"w":728,"h":90}}]}"#;
const TEST: &str = r#"{"id":"r2","test":1,"imp":[{"id":"1","banner":{"w":300,"h":250}}]}"#;

/// Every event of every segment (the log is closed: all of it is readable).
fn all_events(log: &EventLog) -> Vec<Event> {
    let mut events = Vec::new();
    for shard in 0..log.shards() {
        for segment in log.segments(shard).unwrap() {
            let mut offset = 0;
            loop {
                let batch = log
                    .read(shard, segment.id, offset, Budget::default())
                    .unwrap();
                events.extend(batch.events);
                offset = batch.next_offset;
                match batch.end {
                    ReadEnd::Budget => {}
                    ReadEnd::Tail | ReadEnd::Closed => break,
                    ReadEnd::Corrupt(damage) => panic!("damaged log: {damage:?}"),
                }
            }
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_bids_are_counted_per_imp_and_reason_and_test_requests_log_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(common::log(dir.path()));
    let edge = Arc::new(common::edge_with_log(
        dir.path(),
        limits(),
        Arc::clone(&log),
    ));
    let address = common::serve(&edge).await;
    // Before a snapshot: a technical error for each imp.
    let (status, _) = common::send(address, "POST", "/openrtb2/bid", "", TWO_IMPS).await;
    assert_eq!(status, 204);
    edge.accept_snapshot(&snapshot(1)).unwrap();
    let requests = 5;
    for _ in 0..requests {
        let (status, _) = common::send(address, "POST", "/openrtb2/bid", "", TWO_IMPS).await;
        assert_eq!(status, 204, "no line item to bid with");
    }
    let (status, _) = common::send(address, "POST", "/openrtb2/bid", "", TEST).await;
    assert_eq!(status, 204);
    assert_eq!(log.counters().counted, 2 * (requests + 1));
    log.flush_and_close().unwrap();

    let events = all_events(&log);
    assert!(
        events.iter().all(|e| e.kind == EventKind::NoBidsCounted),
        "no-bids are counted, never logged one by one: {events:?}"
    );
    let by_reason = |reason: u64| -> u64 {
        events
            .iter()
            .filter(|e| e.creative == reason)
            .map(Event::event_count)
            .sum()
    };
    // Reasons 1 (no snapshot) and 500 (no match); the test request's imp is not there.
    assert_eq!((by_reason(1), by_reason(500)), (2, 2 * requests));
}
