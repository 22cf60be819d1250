use std::fs;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use marquee_eventlog::{AppendError, Budget, CloseError, EventKind, EventLog};

use crate::common::*;

/// A waker that records the log's fsync count at the moment it is woken.
struct RecordFsyncs {
    log: Arc<EventLog>,
    seen: AtomicU64,
}

impl Wake for RecordFsyncs {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.seen
            .store(self.log.counters().fsyncs, Ordering::SeqCst);
    }
}

#[test]
fn append_durable_resolves_only_after_the_fsync_that_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    // No background flush during the test: only the waiter can cause an fsync.
    let log = Arc::new(EventLog::open(dir.path(), slow(strict)).unwrap());
    log.append(&event(EventKind::Decision, 1)).unwrap();
    assert_eq!(log.counters().fsyncs, 0);

    let recorder = Arc::new(RecordFsyncs {
        log: Arc::clone(&log),
        seen: AtomicU64::new(u64::MAX),
    });
    let waker = Waker::from(Arc::clone(&recorder));
    let mut cx = Context::from_waker(&waker);
    let mut durable = pin!(log.append_durable(&event(EventKind::Impression, 2)));
    // The first poll comes right after the append, long before a file can be created and
    // fsynced, so it registers and the flusher must wake it.
    if durable.as_mut().poll(&mut cx).is_pending() {
        eventually("the wake-up", || {
            recorder.seen.load(Ordering::SeqCst) != u64::MAX
        });
        assert_eq!(
            recorder.seen.load(Ordering::SeqCst),
            1,
            "woken after the fsync, not before"
        );
        assert!(matches!(
            durable.as_mut().poll(&mut cx),
            Poll::Ready(Ok(()))
        ));
    } else {
        assert_eq!(log.counters().fsyncs, 1);
    }
    // Both records, the one buffered before it included, are durable and readable.
    let batch = log.read(0, 1, 0, Budget::default()).unwrap();
    assert_eq!(
        batch.events,
        vec![
            event(EventKind::Decision, 1),
            event(EventKind::Impression, 2)
        ]
    );
}

#[test]
fn commit_waits_for_billing_events_only_in_strict_mode() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(strict)).unwrap();
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);

    // A decision is not billing: ready at once, no fsync.
    let mut decision = pin!(log.commit(&event(EventKind::Decision, 1)));
    assert!(matches!(
        decision.as_mut().poll(&mut cx),
        Poll::Ready(Ok(()))
    ));
    assert_eq!(log.counters().fsyncs, 0);

    for (id, kind) in [
        (2, EventKind::Impression),
        (3, EventKind::Click),
        (4, EventKind::Conversion),
    ] {
        let before = log.counters().fsyncs;
        block_on(log.commit(&event(kind, id))).unwrap();
        assert!(
            log.counters().fsyncs > before,
            "{kind:?} waited for an fsync"
        );
    }
    let ids: Vec<u128> = read_shard(&log, 0).iter().map(|e| e.event_id).collect();
    assert_eq!(ids, vec![1, 2, 3, 4]);

    // In group mode nothing waits.
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(group)).unwrap();
    let mut impression = pin!(log.commit(&event(EventKind::Impression, 1)));
    assert!(matches!(
        impression.as_mut().poll(&mut cx),
        Poll::Ready(Ok(()))
    ));
    assert_eq!(log.counters().fsyncs, 0);
}

#[test]
fn one_fsync_serves_many_waiters() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(strict)).unwrap();
    let waiting: Vec<_> = (0..200)
        .map(|id| log.append_durable(&event(EventKind::Impression, id)))
        .collect();
    for durable in waiting {
        block_on(durable).unwrap();
    }
    let fsyncs = log.counters().fsyncs;
    assert!(fsyncs < 50, "200 waiters took {fsyncs} fsyncs");
    assert_eq!(read_shard(&log, 0).len(), 200);
}

#[test]
fn many_threads_waiting_share_fsyncs_and_all_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(
        EventLog::open(
            dir.path(),
            marquee_eventlog::Config {
                shards: 2,
                ..slow(strict)
            },
        )
        .unwrap(),
    );
    let done = Arc::new(Mutex::new(0));
    let handles: Vec<_> = (0..8u128)
        .map(|t| {
            let (log, done) = (Arc::clone(&log), Arc::clone(&done));
            std::thread::spawn(move || {
                for i in 0..25 {
                    block_on(log.append_durable(&event(EventKind::Click, t << 32 | i))).unwrap();
                    *done.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(*done.lock().unwrap(), 200);
    let c = log.counters();
    assert!(c.fsyncs <= 200, "{c:?}");
    let total: usize = (0..2).map(|k| read_shard(&log, k).len()).sum();
    assert_eq!(total, 200);
}

#[test]
fn a_failed_fsync_or_write_stops_the_shard_and_tells_every_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), slow(strict)).unwrap();
    log.append(&event(EventKind::Decision, 1)).unwrap();
    // The flusher cannot create its segment file once the shard directory is gone.
    fs::remove_dir_all(dir.path().join("shard-0")).unwrap();
    let result = block_on(log.append_durable(&event(EventKind::Impression, 2)));
    assert!(matches!(result, Err(AppendError::Failed { shard: 0, .. })));
    assert!(!log.is_healthy());
    assert_eq!(log.counters().io_errors, 1);
    assert!(matches!(
        log.append(&event(EventKind::Click, 3)),
        Err(AppendError::Failed { shard: 0, .. })
    ));
    assert!(matches!(
        log.flush_and_close(),
        Err(CloseError::Failed { shard: 0, .. })
    ));
}

#[test]
fn the_log_and_its_futures_can_cross_threads() {
    // Compile-time: an async handler holding a `Durable` across `.await` must be `Send`, and
    // the log is shared between worker threads.
    fn send_static<T: Send + 'static>() {}
    fn sync<T: Sync>() {}
    send_static::<marquee_eventlog::Durable>();
    send_static::<EventLog>();
    sync::<EventLog>();
}
