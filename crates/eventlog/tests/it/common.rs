//! Helpers shared by the tests.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use marquee_eventlog::{
    Budget, Config, Durability, Event, EventKind, EventLog, ReadEnd, SEGMENT_HEADER_LEN,
};

pub fn event(kind: EventKind, id: u128) -> Event {
    Event {
        kind,
        time_micros: 1_790_000_000_000_000 + id as i64,
        line_item: 10 + id as u64,
        creative: 20,
        placement: 30,
        user: 0xABCD,
        country: *b"NL",
        region: [0; 3],
        device: 2,
        amount_micros: if kind.is_billing() { 1_250 } else { 0 },
        event_id: id,
    }
}

/// Events with ids `from..to`, kinds cycling.
pub fn events(from: u128, to: u128) -> Vec<Event> {
    (from..to)
        .map(|id| event(EventKind::ALL[id as usize % EventKind::ALL.len()], id))
        .collect()
}

/// One shard, flushing every 2 ms.
pub fn config() -> Config {
    Config {
        shards: 1,
        durability: Durability::Group {
            interval: Duration::from_millis(2),
        },
        ..Config::default()
    }
}

/// A config whose background flush never comes during a test.
pub fn slow(durability: fn(Duration) -> Durability) -> Config {
    Config {
        shards: 1,
        durability: durability(Duration::from_secs(3600)),
        ..Config::default()
    }
}

pub fn group(interval: Duration) -> Durability {
    Durability::Group { interval }
}

pub fn strict(interval: Duration) -> Durability {
    Durability::Strict { interval }
}

/// Every readable event of every segment of a shard, segment by segment.
pub fn read_segments(log: &EventLog, shard: usize) -> Vec<Vec<Event>> {
    log.segments(shard)
        .unwrap()
        .iter()
        .map(|seg| {
            let mut events = Vec::new();
            let mut offset = 0;
            loop {
                let batch = log.read(shard, seg.id, offset, Budget::default()).unwrap();
                assert!(batch.rejected.is_empty(), "{:?}", batch.rejected);
                events.extend(batch.events);
                offset = batch.next_offset;
                match batch.end {
                    ReadEnd::Budget => {}
                    ReadEnd::Closed | ReadEnd::Tail => break,
                    ReadEnd::Corrupt(c) => panic!("corrupt segment {}: {c:?}", seg.id),
                }
            }
            assert_eq!(offset, seg.len, "read to the segment's end");
            events
        })
        .collect()
}

pub fn read_shard(log: &EventLog, shard: usize) -> Vec<Event> {
    read_segments(log, shard).concat()
}

pub fn segment_file(dir: &Path, shard: usize, segment: u64) -> PathBuf {
    dir.join(format!("shard-{shard}"))
        .join(format!("{segment:020}.log"))
}

/// Number of whole records in the first `len` bytes of a segment.
pub fn records_within(len: u64) -> usize {
    (len.saturating_sub(SEGMENT_HEADER_LEN) / marquee_eventlog::FRAME_LEN as u64) as usize
}

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread; fails the test after 10 s.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        assert!(Instant::now() < deadline, "future did not resolve");
        thread::park_timeout(Duration::from_millis(100));
    }
}

/// Polls `check` every 5 ms until it holds; fails the test after 2 s.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}
