#![allow(clippy::expect_used)] // A bench has nothing better to do on failure than stop.
//! Append throughput, one and two threads (each on its own shard).
//!
//! - `append`: the request path only: time to append N events into the shard buffers while the
//!   flusher writes and fsyncs in the background; the buffers are drained (untimed) after each
//!   sample.
//! - `append_until_durable`: sustained throughput: N appends plus waiting until all of them
//!   are written and fsynced, so the disk's write speed counts.
//!
//! Run: `cargo bench -p marquee-eventlog --bench append` (add `-- --quick` for a fast pass).

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use marquee_eventlog::{Config, Durability, Event, EventKind, EventLog};

fn event(id: u64) -> Event {
    Event {
        kind: EventKind::Impression,
        time_micros: 1_790_000_000_000_000 + id as i64,
        line_item: id % 1_000,
        creative: id % 3_000,
        placement: id % 500,
        user: id.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        country: *b"DE",
        region: [0; 3],
        device: 1,
        amount_micros: 1_500,
        event_id: u128::from(id) << 64 | 0xABCD,
    }
}

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

/// Appends `count` events from this thread, then (if `durable`) waits until they are fsynced.
fn append_from_this_thread(log: &EventLog, count: u64, durable: bool) {
    for id in 0..count {
        black_box(log.append(black_box(&event(id))).expect("append"));
    }
    if durable {
        block_on(log.append_durable(&event(count))).expect("durable");
    }
}

/// Runs `iters` appends split over `threads` threads; returns the time from the common start
/// until the last thread is done (with its events durable when `durable`). Each thread drains
/// its shard afterwards, untimed, so buffers never carry over between samples.
fn run(log: &Arc<EventLog>, threads: u64, iters: u64, durable: bool) -> Duration {
    let start = Arc::new(Barrier::new(threads as usize + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (log, start) = (Arc::clone(log), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                let began = Instant::now();
                append_from_this_thread(&log, iters / threads, durable);
                let took = began.elapsed();
                block_on(log.append_durable(&event(0))).expect("drain");
                took
            })
        })
        .collect();
    start.wait();
    let took = handles
        .into_iter()
        .map(|h| h.join().expect("bench thread"))
        .max()
        .unwrap_or_default();
    // Keep the disk from filling up over the run.
    for shard in 0..log.shards() {
        let segments = log.segments(shard).expect("segments");
        if let Some(last_closed) = segments.iter().rev().find(|s| s.closed) {
            log.delete_through(shard, last_closed.id).expect("delete");
        }
    }
    took
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(
        EventLog::open(
            dir.path(),
            Config {
                shards: 2,
                durability: Durability::Group {
                    interval: Duration::from_millis(5),
                },
                // Room for a whole sample, so the bench measures appending, not refusals.
                max_buffered_bytes: 1 << 30,
                ..Config::default()
            },
        )
        .expect("open"),
    );
    for (name, durable) in [("append", false), ("append_until_durable", true)] {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(1));
        for threads in [1, 2] {
            group.bench_with_input(
                BenchmarkId::new("threads", threads),
                &threads,
                |b, &threads| b.iter_custom(|iters| run(&log, threads, iters, durable)),
            );
        }
        group.finish();
    }
    log.flush_and_close().expect("close");
}

criterion_group!(benches, bench);
criterion_main!(benches);
