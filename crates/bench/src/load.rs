//! The load generator's engine.
//!
//! Each worker thread runs its own single-threaded tokio runtime (pin the generator with
//! `taskset` and one thread costs no cross-core traffic) and one task per connection, which
//! writes prepared request bytes and parses answers in place ([`crate::client`]).
//!
//! Requests are numbered by one shared counter, which makes a request-count bound exact. In
//! open loop request `n` is due at `start + n / rate` whatever happened before, and its latency
//! counts from that intended time: when the server stalls, every request that should have been
//! sent meanwhile carries the stall in its latency (coordinated omission corrected, as wrk2
//! does). In closed loop a connection sends its next request when the previous answer arrived.
//!
//! Counters live in one shard per worker thread behind an uncontended mutex; the reporter
//! drains the per-second part once a second for the progress line and the timeline.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::net::TcpStream;
use tokio::sync::Barrier;

use crate::BenchError;
use crate::client::{Answer, Connection};
use crate::report::{ErrorKind, Latency, Report, SweepStep, Tick, answers_over};
use crate::target::Target;
use crate::workload::{Generator, Workload};

/// Latencies above this are recorded as this (100 s); far beyond any sensible timeout.
const HISTOGRAM_MAX_NS: u64 = 100_000_000_000;
/// tokio's timer has millisecond ticks and never fires early.
const TIMER_TICK: Duration = Duration::from_millis(1);
/// A refusing server would otherwise be hammered in a tight loop.
const CONNECT_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub workload: Arc<Workload>,
    pub connections: usize,
    pub threads: usize,
    /// Open loop at this many requests per second; closed loop when `None`.
    pub rate: Option<f64>,
    pub duration: Option<Duration>,
    /// Exactly this many requests, at most.
    pub requests: Option<u64>,
    pub keep_alive: bool,
    pub timeout: Duration,
    /// Open loop: requests not sent within this long of their intended time are skipped.
    pub max_wait: Option<Duration>,
    /// Worker threads poll their sockets without sleeping (see `--busy-poll`).
    pub busy_poll: bool,
    /// Answers slower than this are counted in the report.
    pub deadline: Option<Duration>,
    pub seed: u64,
    /// Print a progress line to stderr once a second.
    pub progress: bool,
}

/// Open loop at each rate in turn, pausing between steps so the server drains its queue.
pub async fn sweep(
    plan: &Plan,
    rates: &[f64],
    pause: Duration,
) -> Result<Vec<SweepStep>, BenchError> {
    let mut steps = Vec::with_capacity(rates.len());
    for (i, &rate) in rates.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(pause).await;
        }
        if plan.progress {
            eprintln!("sweep step {}/{}: {rate} req/s offered", i + 1, rates.len());
        }
        let step_plan = Plan {
            rate: Some(rate),
            ..plan.clone()
        };
        let report = run(&step_plan).await?;
        steps.push(SweepStep {
            offered_rate: rate,
            report,
        });
    }
    Ok(steps)
}

/// State every connection task shares.
#[derive(Debug)]
struct Shared {
    addr: SocketAddr,
    keep_alive: bool,
    timeout: Duration,
    max_wait: Option<Duration>,
    rate: Option<f64>,
    duration: Option<Duration>,
    limit: u64,
    next: AtomicU64,
    /// Every connection (and the reporter) waits here so that pre-connecting is not timed.
    ready: Barrier,
    start: OnceLock<Instant>,
}

impl Shared {
    /// Claims the next request: `None` when the run is over, else its intended send time in
    /// open loop (`Some(None)` in closed loop).
    fn claim(&self, start: Instant) -> Option<Option<Instant>> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        if n >= self.limit {
            return None;
        }
        let end = self.duration.map(|duration| start + duration);
        match self.rate {
            Some(rate) => {
                let due = start + Duration::from_secs_f64(n as f64 / rate);
                if end.is_some_and(|end| due >= end) {
                    None
                } else {
                    Some(Some(due))
                }
            }
            None if end.is_some_and(|end| Instant::now() >= end) => None,
            None => Some(None),
        }
    }
}

/// The counters of one worker thread.
#[derive(Debug)]
struct Shard {
    /// Latencies (ns) since the reporter last drained it.
    interval: Histogram<u64>,
    interval_responses: u64,
    interval_errors: u64,
    statuses: Vec<u64>,
    bids: u64,
    no_bids: u64,
    bytes: u64,
    errors: [u64; ErrorKind::ALL.len()],
    /// Requests skipped because no connection was free within `max_wait`.
    unsent: u64,
    last_done: Option<Instant>,
}

impl Shard {
    fn new() -> Result<Self, BenchError> {
        Ok(Shard {
            interval: new_histogram()?,
            interval_responses: 0,
            interval_errors: 0,
            statuses: vec![0; 1000],
            bids: 0,
            no_bids: 0,
            bytes: 0,
            errors: [0; ErrorKind::ALL.len()],
            unsent: 0,
            last_done: None,
        })
    }

    fn record(&mut self, outcome: Result<Answer, ErrorKind>, latency: Duration) {
        match outcome {
            Ok(answer) => {
                self.interval
                    .saturating_record(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
                self.interval_responses += 1;
                // httparse accepts three-digit codes only.
                if let Some(count) = self.statuses.get_mut(usize::from(answer.status)) {
                    *count += 1;
                }
                if answer.status == 200 && answer.body_bytes > 0 {
                    self.bids += 1;
                } else if answer.status == 204 {
                    self.no_bids += 1;
                }
                self.bytes += answer.body_bytes;
            }
            Err(kind) => {
                self.errors[kind.index()] += 1;
                self.interval_errors += 1;
            }
        }
    }
}

fn new_histogram() -> Result<Histogram<u64>, BenchError> {
    Histogram::new_with_bounds(1, HISTOGRAM_MAX_NS, 3)
        .map_err(|error| BenchError::Runtime(format!("histogram: {error:?}")))
}

fn lock(shard: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    // A panic while holding the lock leaves plain counters, still worth reporting.
    shard
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs one load test and returns its report.
pub async fn run(plan: &Plan) -> Result<Report, BenchError> {
    if plan.connections == 0 || plan.threads == 0 {
        return Err(BenchError::Usage(
            "connections and threads must be at least 1".into(),
        ));
    }
    if plan.duration.is_none() && plan.requests.is_none() {
        return Err(BenchError::Usage(
            "give a duration or a request count".into(),
        ));
    }
    if plan
        .rate
        .is_some_and(|rate| !(rate > 0.0 && rate.is_finite()))
    {
        return Err(BenchError::Usage("the rate must be above 0".into()));
    }
    // Fail fast, with the reason, when nothing listens there.
    match tokio::time::timeout(plan.timeout, TcpStream::connect(plan.target.addr)).await {
        Ok(Ok(_)) => {}
        Ok(Err(source)) => {
            return Err(BenchError::Connect {
                addr: plan.target.addr,
                source,
            });
        }
        Err(_) => {
            return Err(BenchError::Connect {
                addr: plan.target.addr,
                source: std::io::ErrorKind::TimedOut.into(),
            });
        }
    }
    let threads = plan.threads.min(plan.connections);
    let shared = Arc::new(Shared {
        addr: plan.target.addr,
        keep_alive: plan.keep_alive,
        timeout: plan.timeout,
        max_wait: plan.max_wait,
        rate: plan.rate,
        duration: plan.duration,
        limit: plan.requests.unwrap_or(u64::MAX),
        next: AtomicU64::new(0),
        ready: Barrier::new(plan.connections + 1),
        start: OnceLock::new(),
    });
    let mut shards = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    for thread in 0..threads {
        let shard = Arc::new(Mutex::new(Shard::new()?));
        shards.push(Arc::clone(&shard));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| BenchError::Runtime(error.to_string()))?;
        // Connections are dealt out round-robin: thread t runs t, t + threads, …
        let generators: Vec<Generator> = (thread..plan.connections)
            .step_by(threads)
            .map(|index| Generator::new(Arc::clone(&plan.workload), plan.seed, index))
            .collect();
        let shared = Arc::clone(&shared);
        let busy_poll = plan.busy_poll;
        let handle = std::thread::Builder::new()
            .name(format!("bench-{thread}"))
            .spawn(move || {
                runtime.block_on(async move {
                    let mut tasks = tokio::task::JoinSet::new();
                    for generator in generators {
                        tasks.spawn(connection(
                            Arc::clone(&shared),
                            Arc::clone(&shard),
                            generator,
                        ));
                    }
                    // A task that is always ready makes the runtime poll the sockets with a
                    // zero timeout instead of sleeping in epoll_wait.
                    let spinner = busy_poll.then(|| {
                        tokio::spawn(async {
                            loop {
                                tokio::task::yield_now().await;
                            }
                        })
                    });
                    while tasks.join_next().await.is_some() {}
                    if let Some(spinner) = spinner {
                        spinner.abort();
                    }
                });
            })
            .map_err(|error| BenchError::Runtime(format!("cannot start a thread: {error}")))?;
        handles.push(handle);
    }
    let joined = tokio::task::spawn_blocking(move || {
        handles
            .into_iter()
            .map(std::thread::JoinHandle::join)
            .all(|result| result.is_ok())
    });
    tokio::pin!(joined);
    tokio::select! {
        // Checked first: a short run's workers may pass the barrier and finish before this
        // task is polled again, and then both branches are ready.
        biased;
        _ = shared.ready.wait() => {}
        _ = &mut joined => {
            return Err(BenchError::Runtime("the workers stopped before the start".into()));
        }
    }
    let start = *shared.start.get_or_init(Instant::now);
    let cpu_at_start = process_cpu();
    let mut reporter = Reporter::new(start, plan.progress)?;
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::from_std(start + Duration::from_secs(1)),
        Duration::from_secs(1),
    );
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticker.tick() => reporter.collect(&shards, true),
            result = &mut joined => {
                match result {
                    Ok(true) => break,
                    _ => return Err(BenchError::Runtime("a worker thread panicked".into())),
                }
            }
        }
    }
    reporter.collect(&shards, false);
    reporter.finish();
    let wall = start.elapsed();
    let client_cpu_percent = cpu_at_start
        .zip(process_cpu())
        .filter(|_| !wall.is_zero())
        .map(|(before, after)| {
            100.0 * after.saturating_sub(before).as_secs_f64() / wall.as_secs_f64()
        });
    Ok(build_report(
        plan,
        threads,
        start,
        reporter,
        &shards,
        client_cpu_percent,
    ))
}

/// Clock ticks per second of `/proc/PID/stat`'s times: the kernel's `USER_HZ`, 100 on every
/// architecture Marquee builds for (x86-64, arm64).
const USER_HZ: u64 = 100;

/// This process's CPU time so far, user and system, every thread's (exited ones included),
/// from `/proc/self/stat`; `None` where that file is not (not Linux).
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    let after_name = stat.get(stat.rfind(')')? + 1..)?;
    // The text after the name starts at field 3; utime and stime are fields 14 and 15.
    let mut fields = after_name.split_ascii_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 1_000 / USER_HZ))
}

/// Collects the shards' intervals into the timeline and the run's histogram.
struct Reporter {
    start: Instant,
    last: Instant,
    progress: bool,
    terminal: bool,
    total: Histogram<u64>,
    tick: Histogram<u64>,
    responses: u64,
    errors: u64,
    timeline: Vec<Tick>,
}

impl Reporter {
    fn new(start: Instant, progress: bool) -> Result<Self, BenchError> {
        Ok(Reporter {
            start,
            last: start,
            progress,
            terminal: std::io::stderr().is_terminal(),
            total: new_histogram()?,
            tick: new_histogram()?,
            responses: 0,
            errors: 0,
            timeline: Vec::new(),
        })
    }

    /// `whole`: a full one-second tick (always recorded); otherwise the last, partial
    /// interval, recorded only if something happened in it.
    fn collect(&mut self, shards: &[Arc<Mutex<Shard>>], whole: bool) {
        let now = Instant::now();
        let (mut responses, mut errors) = (0, 0);
        self.tick.reset();
        for shard in shards {
            let mut shard = lock(shard);
            // Both histograms share bounds, so adding cannot fail.
            let _ = self.tick.add(&shard.interval);
            shard.interval.reset();
            responses += std::mem::take(&mut shard.interval_responses);
            errors += std::mem::take(&mut shard.interval_errors);
        }
        let _ = self.total.add(&self.tick);
        self.responses += responses;
        self.errors += errors;
        let seconds = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        if !whole && responses + errors == 0 {
            return;
        }
        let tick = Tick {
            t_s: now.duration_since(self.start).as_secs_f64(),
            responses,
            errors,
            rate: if seconds > 0.0 {
                responses as f64 / seconds
            } else {
                0.0
            },
            latency: Latency::from_histogram(&self.tick),
        };
        if self.progress && whole {
            let so_far = Latency::from_histogram(&self.total);
            let line = format!(
                "{:>5.0}s {:>9} req/s   errors {:<6} p50 {:<10} p99 {:<10} (so far; {} answered)",
                tick.t_s,
                crate::report::group(tick.rate.round() as u64),
                crate::report::group(self.errors),
                crate::report::ms(so_far.p50_ms),
                crate::report::ms(so_far.p99_ms),
                crate::report::group(self.responses),
            );
            let mut stderr = std::io::stderr().lock();
            // Progress is best effort: a closed stderr must not stop the run.
            let _ = if self.terminal {
                write!(stderr, "\r\x1b[K{line}")
            } else {
                writeln!(stderr, "{line}")
            };
            let _ = stderr.flush();
        }
        self.timeline.push(tick);
    }

    fn finish(&self) {
        if self.progress && self.terminal && !self.timeline.is_empty() {
            eprintln!();
        }
    }
}

fn build_report(
    plan: &Plan,
    threads: usize,
    start: Instant,
    reporter: Reporter,
    shards: &[Arc<Mutex<Shard>>],
    client_cpu_percent: Option<f64>,
) -> Report {
    let mut statuses = std::collections::BTreeMap::new();
    let (mut bids, mut no_bids, mut bytes, mut unsent) = (0, 0, 0, 0);
    let mut errors = [0u64; ErrorKind::ALL.len()];
    let mut last_done = start;
    for shard in shards {
        let shard = lock(shard);
        for (code, count) in shard.statuses.iter().enumerate() {
            if *count > 0 {
                // Indices stop below 1000.
                let code = u16::try_from(code).unwrap_or(u16::MAX);
                *statuses.entry(code).or_insert(0) += count;
            }
        }
        bids += shard.bids;
        no_bids += shard.no_bids;
        bytes += shard.bytes;
        unsent += shard.unsent;
        for (total, count) in errors.iter_mut().zip(shard.errors) {
            *total += count;
        }
        if let Some(done) = shard.last_done {
            last_done = last_done.max(done);
        }
    }
    let elapsed = last_done.duration_since(start).as_secs_f64();
    let per_second = |count: u64| {
        if elapsed > 0.0 {
            count as f64 / elapsed
        } else {
            0.0
        }
    };
    let responses: u64 = statuses.values().sum();
    let ok: u64 = statuses
        .iter()
        .filter(|(code, _)| (200..300).contains(*code))
        .map(|(_, count)| count)
        .sum();
    let errors_total = errors.iter().sum();
    Report {
        url: plan.target.url.clone(),
        workload: plan.workload.describe().to_owned(),
        mode: if plan.rate.is_some() {
            "open"
        } else {
            "closed"
        },
        offered_rate: plan.rate,
        connections: plan.connections,
        threads,
        keep_alive: plan.keep_alive,
        elapsed_s: elapsed,
        requests: responses + errors_total,
        responses,
        throughput: per_second(responses),
        goodput: per_second(ok),
        latency: Latency::from_histogram(&reporter.total),
        statuses,
        bids,
        no_bids,
        errors: ErrorKind::ALL
            .iter()
            .map(|kind| (kind.name(), errors[kind.index()]))
            .collect(),
        errors_total,
        unsent,
        over_deadline: plan
            .deadline
            .map(|deadline| answers_over(&reporter.total, deadline)),
        non_2xx: responses - ok,
        client_cpu_percent,
        bytes_received: bytes,
        timeline: reporter.timeline,
        histogram: reporter.total,
    }
}

/// One connection's loop: claim a request, wait for its time (open loop), send, record.
async fn connection(shared: Arc<Shared>, shard: Arc<Mutex<Shard>>, mut generator: Generator) {
    let mut open = None;
    if shared.keep_alive {
        // A failure here shows up as a connect error on the first request.
        open = Connection::open(shared.addr).await.ok();
    }
    shared.ready.wait().await;
    let start = *shared.start.get_or_init(Instant::now);
    while let Some(due) = shared.claim(start) {
        if let Some(due) = due {
            pace(due).await;
            if shared.max_wait.is_some_and(|wait| due.elapsed() > wait) {
                lock(&shard).unsent += 1;
                continue;
            }
        }
        let sent = Instant::now();
        // From the intended time when late (the queue counts), from the actual send when the
        // coarse timer let it leave a little early.
        let from = due.map_or(sent, |due| due.min(sent));
        let request = generator.next_request();
        let outcome =
            match tokio::time::timeout(shared.timeout, exchange(&mut open, shared.addr, request))
                .await
            {
                Ok(outcome) => outcome,
                Err(_) => Err(ErrorKind::Timeout),
            };
        let done = Instant::now();
        // After a failure the connection's state is unknown; without keep-alive, or when the
        // server said close, it is spent.
        if !shared.keep_alive || !outcome.is_ok_and(|answer| !answer.close) {
            open = None;
        }
        {
            let mut shard = lock(&shard);
            shard.record(outcome, done.duration_since(from));
            shard.last_done = Some(done);
        }
        if outcome == Err(ErrorKind::Connect) {
            tokio::time::sleep(CONNECT_RETRY_PAUSE).await;
        }
    }
}

/// Sleeps until about `due`: aims one timer tick early, so a request leaves at most a tick
/// early (and is then timed from its actual send) rather than up to a tick late.
async fn pace(due: Instant) {
    if let Some(wake) = due.checked_sub(TIMER_TICK)
        && wake > Instant::now()
    {
        tokio::time::sleep_until(tokio::time::Instant::from_std(wake)).await;
    }
}

/// Sends one request on the open connection, opening one first when there is none.
async fn exchange(
    open: &mut Option<Connection>,
    addr: std::net::SocketAddr,
    request: &[u8],
) -> Result<Answer, ErrorKind> {
    let connection = match open {
        Some(connection) => connection,
        None => open.insert(Connection::open(addr).await?),
    };
    connection.exchange(request).await
}
