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
use crate::report::{
    ErrorKind, KindCounts, Latency, Report, SessionCounts, SessionReport, SweepStep, TargetCounts,
    Tick, answers_over,
};
use crate::session::State;
use crate::target::Target;
use crate::workload::{AdOutcome, Generator, Workload};

/// Latencies above this are recorded as this (100 s); far beyond any sensible timeout.
const HISTOGRAM_MAX_NS: u64 = 100_000_000_000;
/// tokio's timer has millisecond ticks and never fires early.
const TIMER_TICK: Duration = Duration::from_millis(1);
/// A refusing server would otherwise be hammered in a tight loop.
const CONNECT_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where load goes: one target, or for the user-session workload several (its sessions
    /// take them in turn; beacons go where the workload's beacon policy says).
    pub targets: Vec<Target>,
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
    /// The targets' addresses, in the plan's order.
    addrs: Vec<SocketAddr>,
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
    /// User-session workload only.
    session: Option<SessionShard>,
}

/// The user-session counters of one worker thread.
#[derive(Debug)]
struct SessionShard {
    /// Per target.
    targets: Vec<SessionCounts>,
    /// Latencies (ns) of the whole run, per kind in [`State::ALL`] order.
    latency: [Histogram<u64>; 4],
    /// Answers per kind since the reporter last drained them.
    interval: KindCounts,
    sessions: u64,
    skipped: u64,
}

/// One session request as sent and answered, for the counters.
struct SessionEvent {
    kind: State,
    target: usize,
    /// The answer's status, `None` when there was none.
    status: Option<u16>,
    /// Ad requests: what the answer held.
    ad: Option<AdOutcome>,
    skipped: u64,
    new_session: bool,
}

impl SessionShard {
    fn new(targets: usize) -> Result<Self, BenchError> {
        Ok(SessionShard {
            targets: vec![SessionCounts::default(); targets],
            latency: [
                new_histogram()?,
                new_histogram()?,
                new_histogram()?,
                new_histogram()?,
            ],
            interval: KindCounts::default(),
            sessions: 0,
            skipped: 0,
        })
    }

    fn record(&mut self, event: &SessionEvent, latency_ns: u64) {
        self.sessions += u64::from(event.new_session);
        self.skipped += event.skipped;
        let Some(counts) = self.targets.get_mut(event.target) else {
            return;
        };
        let (sent, statuses) = counts.kind_mut(event.kind);
        *sent += 1;
        match event.status {
            Some(status) => {
                *statuses.entry(status).or_insert(0) += 1;
                *self.interval.get_mut(event.kind) += 1;
                self.latency[event.kind.index()].saturating_record(latency_ns);
            }
            None => *counts.errors.get_mut(event.kind) += 1,
        }
        match event.ad {
            Some(AdOutcome::Ad) => counts.ads += 1,
            Some(AdOutcome::Empty) => counts.no_ads += 1,
            // A request without an answer is an error, already counted.
            Some(AdOutcome::Unreadable) if event.status.is_some() => counts.ads_unreadable += 1,
            Some(AdOutcome::Unreadable) | None => {}
        }
    }
}

impl Shard {
    fn new(session_targets: Option<usize>) -> Result<Self, BenchError> {
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
            session: session_targets.map(SessionShard::new).transpose()?,
        })
    }

    fn record(
        &mut self,
        outcome: Result<Answer, ErrorKind>,
        latency: Duration,
        session: Option<&SessionEvent>,
    ) {
        let latency_ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        if let (Some(shard), Some(event)) = (&mut self.session, session) {
            shard.record(event, latency_ns);
        }
        match outcome {
            Ok(answer) => {
                self.interval.saturating_record(latency_ns);
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
    if plan.targets.is_empty() {
        return Err(BenchError::Usage("no target".into()));
    }
    // Fail fast, with the reason, when nothing listens there.
    for target in &plan.targets {
        match tokio::time::timeout(plan.timeout, TcpStream::connect(target.addr)).await {
            Ok(Ok(_)) => {}
            Ok(Err(source)) => {
                return Err(BenchError::Connect {
                    addr: target.addr,
                    source,
                });
            }
            Err(_) => {
                return Err(BenchError::Connect {
                    addr: target.addr,
                    source: std::io::ErrorKind::TimedOut.into(),
                });
            }
        }
    }
    let session_targets = plan.workload.beacons().map(|_| plan.targets.len());
    let threads = plan.threads.min(plan.connections);
    let shared = Arc::new(Shared {
        addrs: plan.targets.iter().map(|target| target.addr).collect(),
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
        let shard = Arc::new(Mutex::new(Shard::new(session_targets)?));
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
    let mut reporter = Reporter::new(start, plan.progress, session_targets.is_some())?;
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
    /// Whether ticks carry the user-session workload's answers by kind.
    session: bool,
}

impl Reporter {
    fn new(start: Instant, progress: bool, session: bool) -> Result<Self, BenchError> {
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
            session,
        })
    }

    /// `whole`: a full one-second tick (always recorded); otherwise the last, partial
    /// interval, recorded only if something happened in it.
    fn collect(&mut self, shards: &[Arc<Mutex<Shard>>], whole: bool) {
        let now = Instant::now();
        let (mut responses, mut errors) = (0, 0);
        let mut kinds = KindCounts::default();
        self.tick.reset();
        for shard in shards {
            let mut shard = lock(shard);
            if let Some(session) = &mut shard.session {
                kinds.add(&std::mem::take(&mut session.interval));
            }
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
            session: self.session.then_some(kinds),
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
    let mut session = plan.workload.beacons().map(|beacons| SessionReport {
        beacon_target: beacons.name(),
        sessions: 0,
        skipped_no_ad: 0,
        total: SessionCounts::default(),
        latency: std::collections::BTreeMap::new(),
        targets: plan
            .targets
            .iter()
            .map(|target| TargetCounts {
                url: target.url.clone(),
                counts: SessionCounts::default(),
            })
            .collect(),
    });
    let mut kind_latency: Option<[Histogram<u64>; 4]> = None;
    for shard in shards {
        let shard = lock(shard);
        if let (Some(report), Some(own)) = (&mut session, &shard.session) {
            report.sessions += own.sessions;
            report.skipped_no_ad += own.skipped;
            for (target, counts) in report.targets.iter_mut().zip(&own.targets) {
                target.counts.add(counts);
                report.total.add(counts);
            }
            let merged =
                kind_latency.get_or_insert_with(|| own.latency.each_ref().map(Histogram::new_from));
            for (total, histogram) in merged.iter_mut().zip(&own.latency) {
                // Same bounds: adding cannot fail.
                let _ = total.add(histogram);
            }
        }
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
        url: plan
            .targets
            .iter()
            .map(|target| target.url.as_str())
            .collect::<Vec<_>>()
            .join(", "),
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
        session: session.map(|mut report| {
            for (kind, histogram) in State::ALL.iter().zip(kind_latency.iter().flatten()) {
                if !histogram.is_empty() {
                    report
                        .latency
                        .insert(kind.name(), Latency::from_histogram(histogram));
                }
            }
            report
        }),
        timeline: reporter.timeline,
        histogram: reporter.total,
    }
}

/// One connection's loop: claim a request, wait for its time (open loop), send, record. With
/// several targets (user sessions) it keeps a connection to each it has used; a session's
/// beacon is sent only after its ad's answer came, since it is taken from that answer.
async fn connection(shared: Arc<Shared>, shard: Arc<Mutex<Shard>>, mut generator: Generator) {
    let mut open: Vec<Option<Connection>> = Vec::with_capacity(shared.addrs.len());
    for &addr in &shared.addrs {
        // A failure here shows up as a connect error on the first request.
        let connection = if shared.keep_alive {
            Connection::open(addr).await.ok()
        } else {
            None
        };
        open.push(connection);
    }
    let mut body = Vec::new();
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
        let next = generator.next_request();
        let (target, kind) = (next.target, next.kind);
        let (skipped, new_session) = (next.skipped, next.new_session);
        body.clear();
        let keep = Generator::wants_body(kind).then_some(&mut body);
        let (Some(slot), Some(&addr)) = (open.get_mut(target), shared.addrs.get(target)) else {
            // The workload names only targets of the plan.
            continue;
        };
        let outcome = match tokio::time::timeout(
            shared.timeout,
            exchange(slot, addr, next.bytes, keep),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err(ErrorKind::Timeout),
        };
        let done = Instant::now();
        // After a failure the connection's state is unknown; without keep-alive, or when the
        // server said close, it is spent.
        if !shared.keep_alive || !outcome.is_ok_and(|answer| !answer.close) {
            *slot = None;
        }
        let event = kind.map(|kind| SessionEvent {
            kind,
            target,
            status: outcome.ok().map(|answer| answer.status),
            ad: (kind == State::AdRequest).then(|| {
                generator.answered(
                    target,
                    outcome.ok().map(|answer| (answer.status, body.as_slice())),
                )
            }),
            skipped,
            new_session,
        });
        {
            let mut shard = lock(&shard);
            shard.record(outcome, done.duration_since(from), event.as_ref());
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

/// Sends one request on the open connection, opening one first when there is none; keeps the
/// answer's body in `body` when given.
async fn exchange(
    open: &mut Option<Connection>,
    addr: std::net::SocketAddr,
    request: &[u8],
    body: Option<&mut Vec<u8>>,
) -> Result<Answer, ErrorKind> {
    let connection = match open {
        Some(connection) => connection,
        None => open.insert(Connection::open(addr).await?),
    };
    connection.exchange_into(request, body).await
}
