//! Overload protection: requests that cannot start now are answered at once with the fallback
//! (or a 204 no-bid) instead of waiting, and every request has a deadline.
//!
//! Two signals say "cannot start now":
//! - **In flight**: a bound on requests in progress. It fills only when requests await (strict
//!   durability, an outgoing call); an ad request never awaits, so it holds at most one place per
//!   worker thread.
//! - **Queue delay**: how long a task that became ready waits before a worker runs it. A thread
//!   outside the runtime makes a socket readable every 4 ms, and a probe task awaiting
//!   it records how long it took to run. Its wake-up comes from the runtime's I/O driver, as a
//!   connection's does when a request arrives, and queues behind the same ready connections,
//!   so the probe waits about as long as a request does. Past the limit (`max_queue_delay`,
//!   or three quarters of the request's deadline when that is longer) the worker is behind,
//!   and it starts only the share `limit / delay` of the requests it reads (a third at three
//!   times the limit), spread evenly; the rest get the cheap answer at once.
//!   This is the signal that catches a backlog of requests that never await.
//!
//!   Two probes before this one were blind to that queue (docs/benchmarks.md, the bid-path
//!   overload runs): a timer inside the runtime read about 1 ms while 2,048 connections' answers
//!   waited up to half a second, and a wake-up sent from another thread through a channel is
//!   taken ahead of the ready connections by a single-threaded runtime.
//!
//!   The share, rather than shedding everything past the limit: a client with more requests
//!   outstanding than the cheap answers clear within the limit (2,048 connections, closed
//!   loop) keeps the queue over the limit whatever the edge does, and an all-or-nothing gate
//!   then answered 98% of its requests with a 204 and made 1,400 bids a second where it could
//!   make 25,000 (docs/benchmarks.md).
//!
//! The in-flight bound is one process-wide atomic counter, not one per worker thread: the bound
//! that protects memory and deadlines is the process's total. The queue delay is per worker
//! (each server worker runs its own probe on its own thread). The bound costs one `fetch_add`
//! and one `fetch_sub` on a shared cache line per admitted request: tens of nanoseconds when the
//! cores contend, against about 13 µs of work per ad request. The queue delay is one
//! thread-local read.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How often the queue-delay probe is woken. Every wake-up costs its ticker thread a trip
/// through the scheduler: at 1 ms the two tickers took 8.7% of the edge's CPU on the ad path
/// (`perf`, docs/benchmarks.md). At 4 ms a backlog past the 10 ms limit still shows within two
/// readings.
const PROBE_PERIOD: Duration = Duration::from_millis(4);

/// Limits that keep the edge answering in time when it is offered more than it can take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Ad requests in progress at once; a request beyond it gets the fallback at once. `0`:
    /// no bound (shedding off).
    pub max_in_flight: usize,
    /// Past this wait between a task becoming ready and a worker running it (or three quarters
    /// of the request's deadline, when that is longer), only the share `limit / wait` of
    /// requests start; the others get the cheap answer at once. `None`: this signal off.
    pub max_queue_delay: Option<Duration>,
    /// How long an ad request may take, counted from when the edge starts it; work past it is
    /// abandoned with the fallback.
    pub deadline: Duration,
    /// A client has this long to send a request's headers, else its connection is closed; a
    /// body to the manager's routes that sends nothing for this long fails.
    pub header_read_timeout: Duration,
    /// A body to the manager's routes must be all there this long after its head was read,
    /// however steadily it trickles in.
    pub body_timeout: Duration,
    /// The largest request head (request line and headers) accepted; beyond it, 431.
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_in_flight: 1024,
            max_queue_delay: Some(Duration::from_millis(10)),
            deadline: Duration::from_millis(50),
            header_read_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
        }
    }
}

/// The counter of requests in progress and the last measured queue delay.
#[derive(Debug)]
pub struct Gate {
    in_flight: AtomicUsize,
    max: usize,
    /// The probe's last measurement, in microseconds.
    queue_delay_micros: AtomicU64,
    /// `u64::MAX` when the signal is off.
    max_queue_delay_micros: u64,
}

/// A request's place in the gate; dropping it frees the place.
#[derive(Debug)]
#[must_use = "the place is freed when this is dropped"]
pub struct Admitted<'g> {
    gate: &'g Gate,
}

impl Gate {
    pub fn new(limits: &Limits) -> Gate {
        let max = limits.max_in_flight;
        Gate {
            in_flight: AtomicUsize::new(0),
            max: if max == 0 { usize::MAX } else { max },
            queue_delay_micros: AtomicU64::new(0),
            max_queue_delay_micros: limits.max_queue_delay.map_or(u64::MAX, micros),
        }
    }

    /// A place for one more request that must be answered within `budget` of its start (an
    /// ad request: `edge.deadline_ms`; a bid request: `tmax` less the network margin), or
    /// `None` when the bound is reached or the workers are behind (the caller answers at once
    /// instead of waiting). The queue may hold the request for three quarters of its budget
    /// before requests are shed, or for the configured limit if that is longer; the last
    /// quarter is for the work itself and the spread of waits around the probe's reading.
    ///
    /// The budget, not a fixed limit, because the limit sets the goodput: with C connections
    /// each holding a request, a worker behind sheds until its queue drains within the limit
    /// L, and when even cheap answers cannot bring C requests under L it sheds a share for
    /// nothing (the delay moves little, the answers lost are real). A fixed 10 ms made a
    /// 2,048-connection closed loop shed half the bids it could have made in time, and on the
    /// ad path serve 52–56% of the peak at twice the peak, for 6 ms less wait
    /// (docs/benchmarks.md).
    pub fn try_enter(&self, budget: Duration) -> Option<Admitted<'_>> {
        // With the signal off the limit is `u64::MAX`, and stays so.
        self.enter_within(self.max_queue_delay_micros.max(micros(budget) / 4 * 3))
    }

    fn enter_within(&self, limit: u64) -> Option<Admitted<'_>> {
        // A worker's own probe's reading when this thread is a server worker, so that one
        // worker behind sheds its own requests only.
        let delay = WORKER_QUEUE_DELAY_MICROS
            .with(Cell::get)
            .unwrap_or_else(|| self.queue_delay_micros.load(Ordering::Relaxed));
        if delay > limit && !admit_share(limit, delay) {
            return None;
        }
        // Optimistic increment: one atomic operation on the common path.
        let before = self.in_flight.fetch_add(1, Ordering::Relaxed);
        if before >= self.max {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Admitted { gate: self })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The bound, `None` when there is none.
    pub fn max(&self) -> Option<usize> {
        (self.max != usize::MAX).then_some(self.max)
    }

    /// The queue delay the probe measured last.
    pub fn queue_delay(&self) -> Duration {
        Duration::from_micros(self.queue_delay_micros.load(Ordering::Relaxed))
    }

    /// Measures the queue delay until dropped: a thread of its own makes a socket readable
    /// every [`PROBE_PERIOD`] and the probe records how long it took to run, the smaller of the last
    /// two measurements. Through a socket, so that the wake-up comes from the runtime's I/O
    /// driver and queues exactly as a connection with a request on it does. One late wake-up
    /// alone is the thread losing its core for a moment (another process, a page fault); a
    /// backlog makes every wake-up late. Run it on the runtime that serves requests.
    pub async fn probe_queue_delay(&self) {
        let started = std::os::unix::net::UnixStream::pair().and_then(|(ticker, probe)| {
            probe.set_nonblocking(true)?;
            let probe = tokio::net::UnixStream::from_std(probe)?;
            let clock = Arc::new(TickClock {
                base: Instant::now(),
                sent_nanos: AtomicU64::new(0),
                pending: AtomicBool::new(false),
            });
            let ticker_clock = Arc::clone(&clock);
            std::thread::Builder::new()
                .name("queue-delay-probe".into())
                .spawn(move || tick(ticker, &ticker_clock))?;
            Ok((probe, clock))
        });
        let (probe, clock) = match started {
            Ok(started) => started,
            Err(error) => {
                tracing::error!(%error, "cannot start the queue-delay probe; that signal is off");
                return;
            }
        };
        // On a single-threaded runtime the probe shares its thread with the requests it
        // measures for.
        let own_thread = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::CurrentThread;
        let mut previous = Duration::ZERO;
        let mut bytes = [0u8; 16];
        loop {
            if probe.readable().await.is_err() {
                return;
            }
            match probe.try_read(&mut bytes) {
                Ok(0) => return,
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return,
            }
            let sent = Duration::from_nanos(clock.sent_nanos.load(Ordering::Acquire));
            let late = clock.base.elapsed().saturating_sub(sent);
            clock.pending.store(false, Ordering::Release);
            let reading = micros(late.min(previous));
            self.queue_delay_micros.store(reading, Ordering::Relaxed);
            if own_thread {
                WORKER_QUEUE_DELAY_MICROS.with(|delay| delay.set(Some(reading)));
            }
            previous = late;
        }
    }
}

thread_local! {
    /// The queue delay measured by the probe running on this thread's single-threaded
    /// runtime, if there is one.
    static WORKER_QUEUE_DELAY_MICROS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// When the ticker last made the probe's socket readable.
struct TickClock {
    base: Instant,
    sent_nanos: AtomicU64,
    /// Written and not read yet: while the probe waits in the queue no new tick is sent, and
    /// the one it finally reads carries the whole wait.
    pending: AtomicBool,
}

/// Makes the probe's socket readable every [`PROBE_PERIOD`] until the probe is gone.
fn tick(mut socket: std::os::unix::net::UnixStream, clock: &Arc<TickClock>) {
    use std::io::Write;
    loop {
        std::thread::sleep(PROBE_PERIOD);
        // A probe dropped with a tick unread leaves no write to fail: its share of the clock
        // is how this thread learns it is gone.
        if Arc::strong_count(clock) == 1 {
            return;
        }
        if clock.pending.load(Ordering::Acquire) {
            continue;
        }
        let now = u64::try_from(clock.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        clock.sent_nanos.store(now, Ordering::Release);
        clock.pending.store(true, Ordering::Release);
        if socket.write_all(&[1]).is_err() {
            return;
        }
    }
}

/// Whether to start this request when the queue delay `delay` is past `limit`: yes for the
/// share `limit / delay` of calls on this thread, spread evenly (each call earns `limit`, a
/// start costs `delay`), so the same inputs give the same answers.
fn admit_share(limit: u64, delay: u64) -> bool {
    thread_local! {
        static CREDIT: Cell<u64> = const { Cell::new(0) };
    }
    CREDIT.with(|credit| {
        // Below `delay` before the call (`limit < delay`), so no overflow and no burst.
        let earned = credit.get().min(delay) + limit;
        let admit = earned >= delay;
        credit.set(if admit { earned - delay } else { earned });
        admit
    })
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.gate.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_holds_and_places_come_back() {
        let gate = Gate::new(&Limits {
            max_in_flight: 2,
            ..Limits::default()
        });
        let a = gate.try_enter(Duration::ZERO);
        let b = gate.try_enter(Duration::ZERO);
        assert!(a.is_some() && b.is_some());
        assert!(gate.try_enter(Duration::ZERO).is_none());
        assert_eq!(gate.in_flight(), 2);
        drop(a);
        assert!(gate.try_enter(Duration::ZERO).is_some());
        drop(b);
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn zero_means_unbounded() {
        let gate = Gate::new(&Limits {
            max_in_flight: 0,
            ..Limits::default()
        });
        let places: Vec<_> = (0..10_000)
            .map_while(|_| gate.try_enter(Duration::ZERO))
            .collect();
        assert_eq!(places.len(), 10_000);
        assert_eq!(gate.max(), None);
    }

    /// Past the limit the share `limit / delay` starts, evenly: at four times the limit, every
    /// fourth request.
    #[test]
    fn past_the_limit_a_share_starts() {
        let admitted = std::thread::spawn(|| {
            (0..100)
                .map(|_| admit_share(10_000, 40_000))
                .collect::<Vec<_>>()
        })
        .join()
        .expect("the counting thread");
        assert_eq!(admitted.iter().filter(|&&a| a).count(), 25);
        assert!(
            admitted
                .chunks(4)
                .all(|four| four.iter().filter(|&&a| a).count() == 1)
        );
        let gate = Gate::new(&Limits::default());
        gate.queue_delay_micros.store(30_000, Ordering::Relaxed);
        let started = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    (0..300)
                        .filter_map(|_| gate.try_enter(Duration::ZERO))
                        .count()
                })
                .join()
                .expect("the requests' thread")
        });
        assert_eq!(started, 100, "a third starts at three times the limit");
    }

    /// A request may wait three quarters of its deadline budget, when that is more than the
    /// limit.
    #[test]
    fn a_deadline_budget_raises_the_limit() {
        let gate = Gate::new(&Limits::default());
        gate.queue_delay_micros.store(30_000, Ordering::Relaxed);
        let started = |budget: Option<Duration>| {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        (0..300)
                            .filter_map(|_| match budget {
                                Some(budget) => gate.try_enter(budget),
                                None => gate.try_enter(Duration::ZERO),
                            })
                            .count()
                    })
                    .join()
                    .expect("the requests' thread")
            })
        };
        assert_eq!(started(None), 100, "10 ms limit: a third");
        assert_eq!(started(Some(Duration::from_millis(60))), 300, "45 ms: all");
        assert_eq!(started(Some(Duration::from_millis(40))), 300, "30 ms: all");
        assert_eq!(started(Some(Duration::from_millis(20))), 150, "15 ms: half");
        assert_eq!(
            started(Some(Duration::from_millis(4))),
            100,
            "never below the limit"
        );
        let off = Gate::new(&Limits {
            max_queue_delay: None,
            ..Limits::default()
        });
        off.queue_delay_micros.store(30_000, Ordering::Relaxed);
        assert!(off.try_enter(Duration::from_millis(4)).is_some());
    }

    /// A worker blocked 30 ms at a time: the probe, due meanwhile, runs late each time, and the
    /// gate turns requests away; once the worker is free again, the gate opens.
    #[tokio::test(flavor = "current_thread")]
    async fn a_worker_behind_closes_the_gate_until_it_catches_up() {
        let gate = std::sync::Arc::new(Gate::new(&Limits::default()));
        let probe = tokio::spawn({
            let gate = std::sync::Arc::clone(&gate);
            async move { gate.probe_queue_delay().await }
        });
        let mut closed = false;
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(30));
            tokio::task::yield_now().await;
            if gate.try_enter(Duration::ZERO).is_none() {
                closed = true;
                break;
            }
        }
        assert!(closed, "a blocked worker closes the gate");
        assert!(gate.queue_delay() >= Duration::from_millis(10));
        let reopened = async {
            while gate.try_enter(Duration::ZERO).is_none() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), reopened)
            .await
            .expect("the gate opens once the worker keeps up");
        probe.abort();
    }

    /// Many connections with work ready, woken by the I/O driver as a server's are: 300 socket
    /// pairs, each answering its peer after 500 µs of work, so a worker needs about 150 ms to
    /// go round them. A connection waits that long for its turn, and so must the probe.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn ready_connections_close_the_gate() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let gate = std::sync::Arc::new(Gate::new(&Limits::default()));
        let mut tasks = vec![tokio::spawn({
            let gate = std::sync::Arc::clone(&gate);
            async move { gate.probe_queue_delay().await }
        })];
        for _ in 0..300 {
            let (mut server, mut client) = tokio::net::UnixStream::pair().expect("socket pair");
            tasks.push(tokio::spawn(async move {
                let mut byte = [0u8; 1];
                while server.read_exact(&mut byte).await.is_ok() {
                    let until = Instant::now() + Duration::from_micros(500);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    if server.write_all(&byte).await.is_err() {
                        return;
                    }
                }
            }));
            tasks.push(tokio::spawn(async move {
                let mut byte = [1u8; 1];
                while client.write_all(&byte).await.is_ok() {
                    if client.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                }
            }));
        }
        let closed = async {
            while gate.try_enter(Duration::ZERO).is_some() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let result = tokio::time::timeout(Duration::from_secs(10), closed).await;
        let delay = gate.queue_delay();
        for task in &tasks {
            task.abort();
        }
        result.expect("the probe waits behind the ready connections and closes the gate");
        assert!(delay >= Duration::from_millis(10), "{delay:?}");
    }
}
