//! The aggregation run: collect new log bytes from every edge, aggregate them in bulk, and
//! commit the aggregates together with the positions they were read up to.
//!
//! Exactly once: a run's counters, sketches, dedupe entries and source checkpoints are one
//! transaction ([`StatsStore::commit_run`]). A crash before the commit loses nothing (the next
//! run reads the same bytes again from the stored checkpoints); after it, nothing is read
//! twice. In-memory state (positions, the dedupe set) changes only after a commit, and any
//! failed run reloads it from the database. Edges delete segments only after the commit that
//! moved every checkpoint past them ([`LogSource::ack`]), so a lost acknowledgement only delays
//! a deletion.
//!
//! Dedupe retention (the watermark): an event id must be remembered while a repeat of it can
//! still be logged and accepted. A repeat needs an unexpired tracking token, so it is logged at
//! most one token lifetime after the original, on some edge. Each shard's watermark is how far
//! its log has been read: "now" once caught up with its tail, else the latest event time read
//! there; both less the allowed clock skew. Ids older than the lowest watermark, less a token
//! lifetime and the skew, can never meet a repeat again and are forgotten. Events older than
//! `max_event_age` are dropped (counted), which bounds the set while an edge is away.
//!
//! Sources are collected concurrently (at most [`SOURCES_AT_ONCE`] at a time) within one run,
//! sharing its byte budget: an edge that is away holds the run up by its own timeouts (see
//! [`HttpLogSource`](crate::HttpLogSource)), not by the sum of every unreachable edge's, and
//! the others' events are committed in that run. Nothing of exactly-once changes: every read
//! ends before the run's one commit.
//!
//! One manager per database aggregates (the manager lock), and the commit does not take that on
//! trust: each checkpoint moves only from the position the run started reading at (a
//! compare-and-set in the commit's transaction, see [`StatsStore::commit_run`]). A run whose
//! commit finds a checkpoint moved (another manager took over and committed those log bytes
//! first, while this run was in flight) is rolled back whole: it is logged, counted in
//! `marquee_aggregation_fenced_runs_total`, nothing is acknowledged, and the next run starts
//! from the database's state.
//!
//! [`StatsStore::commit_run`]: marquee_store::StatsStore::commit_run
//!
//! A log behind its checkpoint (a shard whose listed segments end before the stored position:
//! an edge restored from a backup, or its log replaced under the same id) is neither read nor
//! acknowledged: acknowledging it would delete segments nobody counted. It is logged as an
//! error naming the edge and shown by `marquee_aggregation_shards_behind_checkpoint` until an
//! operator resolves it (`docs/operations.md`). Not to be confused with the position's own
//! segment *closed* and shorter than the position: the edge's disk limit cut it to its header
//! (it was the shard's newest file, which is never removed) after part of it was counted.
//! Nothing of it is left to read and every later id is new, so the shard goes on at the next
//! segment; its unread rest is lost, logged as an error naming edge, shard and segment and
//! counted in `marquee_aggregation_lost_segments_total` with the segments the edge deleted
//! outright (see `behind_checkpoint` and `cut_below_checkpoint`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use marquee_eventlog::wire::WireEnd;
use marquee_eventlog::{SEGMENT_HEADER_LEN, SegmentInfo};
use marquee_forecast::SampleRecord;
use marquee_metrics::{Counter, Def, FloatGauge, Gauge, Labelled, Registry, Unit};
use marquee_model::Clock;
use marquee_stats::{
    Counters, DAY, Deltas, Dimensions, Ingest, Invalid, InvalidCounts, MINUTE, Rules, Seen,
};
use marquee_store::{Checkpoint, CheckpointMove, CheckpointPosition, RunWrite, Store, StoreError};

use crate::sources::{Chunk, LogSource, SourceError};

/// The most one read asks a source for.
const MAX_CHUNK_BYTES: usize = 8 << 20;
/// How many sources a run reads at once: each holds a connection and at most one chunk in
/// flight. Beyond it sources wait their turn, so this many unreachable edges at once cost a
/// run one listing timeout, not one each.
const SOURCES_AT_ONCE: usize = 16;

/// How the aggregation runs.
#[derive(Debug, Clone)]
pub struct AggregationOptions {
    /// Time between runs (a run that stopped at its byte budget is followed at once).
    pub interval: Duration,
    /// The most log bytes one run reads, over all sources.
    pub max_run_bytes: usize,
    /// Events older than this when read are dropped.
    pub max_event_age: Duration,
    /// How far edge clocks may be from the manager's: events further in the future are
    /// dropped, and the dedupe window is widened by it.
    pub max_clock_skew: Duration,
    /// The edges' tracking-token lifetime: how late a repeat can come.
    pub token_lifetime: Duration,
    /// How long minute rows are kept (hours and days are kept).
    pub minute_retention: Duration,
    /// Whether consumed segments are acknowledged (and so deleted by the edge).
    pub delete_consumed: bool,
    /// Whole UTC days of the forecast's sample kept before today's.
    pub sample_history_days: u32,
}

impl Default for AggregationOptions {
    fn default() -> Self {
        AggregationOptions {
            interval: Duration::from_secs(1),
            max_run_bytes: 64 << 20,
            max_event_age: Duration::from_secs(24 * 3_600),
            max_clock_skew: Duration::from_secs(300),
            token_lifetime: Duration::from_secs(3_600),
            minute_retention: Duration::from_secs(7 * 86_400),
            delete_consumed: true,
            sample_history_days: 28,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AggregationError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("aggregation task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl AggregationError {
    /// Whether the run was fenced: another manager had committed the log bytes it read
    /// ([`marquee_store::CheckpointMoved`]). Nothing of it was written or acknowledged.
    pub fn is_fenced(&self) -> bool {
        matches!(self, AggregationError::Store(error) if error.checkpoint_moved().is_some())
    }
}

/// What one committed run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    /// SQL statements the commit executed.
    pub statements: u32,
    /// Log bytes and records read.
    pub bytes: u64,
    pub records: u64,
    pub accepted: u64,
    pub duplicates: u64,
    pub invalid: InvalidCounts,
    /// Minute rows written.
    pub rows: usize,
    /// Stopped at the byte budget: run again at once.
    pub more: bool,
    pub elapsed: Duration,
}

/// What listeners see after each committed run.
#[derive(Debug)]
pub struct RunSummary<'a> {
    pub now: jiff::Timestamp,
    /// This run's additions per line item, ascending by line item.
    pub per_line_item: &'a [(u64, Counters)],
}

type Listener = Box<dyn Fn(&RunSummary<'_>) + Send + Sync>;

/// How far behind one source's log aggregation is, as of the last run that reached it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceLag {
    /// Log bytes written (and fsynced) but not read yet.
    pub backlog_bytes: u64,
    /// Seconds between now and the newest event read, for shards not caught up with their
    /// tail (0 when every shard is).
    pub behind_secs: u64,
}

/// Where one shard of one source has been read to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    segment: u64,
    offset: u64,
    /// The latest event time read (µs), `None` before the first event.
    max_time_micros: Option<i64>,
}

impl Position {
    /// As the store keeps it: no event time yet is `i64::MIN`.
    fn stored(self) -> CheckpointPosition {
        CheckpointPosition {
            segment: self.segment,
            offset: self.offset,
            max_event_time_micros: self.max_time_micros.unwrap_or(i64::MIN),
        }
    }
}

type ShardKey = (String, u32);

#[derive(Debug, Default)]
struct State {
    loaded: bool,
    seen: Seen,
    positions: HashMap<ShardKey, Position>,
    /// The last segment acknowledged per shard, since this process started.
    acked: HashMap<ShardKey, u64>,
    dims: Arc<Dimensions>,
    dims_counter: Option<u64>,
}

/// One chunk read, with where it came from.
#[derive(Debug)]
struct Planned {
    segment: u64,
    closed: bool,
    segment_len: u64,
    chunk: Chunk,
}

/// One shard's reads in a run.
#[derive(Debug)]
struct ShardRead {
    key: ShardKey,
    source: usize,
    /// The stored position, and where reading starts (after a gap, the first listed segment).
    stored: Option<Position>,
    start: Position,
    chunks: Vec<Planned>,
    listed: Vec<SegmentInfo>,
    caught_up: bool,
    lost_segments: u64,
    /// The listed segments end before the stored position: nothing read, nothing acknowledged.
    behind: bool,
}

/// One shard after ingestion.
#[derive(Debug)]
struct ShardDone {
    key: ShardKey,
    source: usize,
    /// The stored position the run started from (`None`: no checkpoint yet): the commit's
    /// fence.
    stored: Option<Position>,
    position: Position,
    moved: bool,
    caught_up: bool,
    behind: bool,
    backlog_bytes: u64,
}

/// Counters and gauges exported at `/metrics` ([`Aggregator::register_metrics`]).
#[derive(Debug, Default)]
struct Metrics {
    runs: Counter,
    failures: Counter,
    fenced: Counter,
    statements: Gauge,
    bytes: Counter,
    records: Counter,
    events: Counter,
    duplicates: Counter,
    invalid: [Counter; Invalid::ALL.len()],
    source_errors: Counter,
    lost_segments: Counter,
    corrupt_skipped: Counter,
    shards_waiting: Gauge,
    shards_behind: Gauge,
    lag_seconds: Gauge,
    backlog_bytes: Gauge,
    last_run_seconds: FloatGauge,
    throughput: Gauge,
    seen_ids: Gauge,
}

/// A count as a gauge's value.
/// The run's sample records, each day's back to back, by day. A record that is not one whole
/// [`SampleRecord`] (an edge of a later build, or damage the frame's CRC missed) is left out,
/// so every stored day decodes.
fn samples_by_day(samples: Vec<(i32, Vec<u8>)>) -> Vec<(i32, Vec<u8>)> {
    let mut days: BTreeMap<i32, Vec<u8>> = BTreeMap::new();
    let mut dropped = 0usize;
    for (day, body) in samples {
        match SampleRecord::decode(&body) {
            Ok((_, used)) if used == body.len() => days.entry(day).or_default().extend(body),
            _ => dropped += 1,
        }
    }
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "sample records this build cannot read were left out"
        );
    }
    days.into_iter().collect()
}

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Collects from every source and commits aggregates; see the module docs.
pub struct Aggregator {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// Configured sources, and those of edges registered since (see [`Aggregator::set_source`]);
    /// each run works on the list as it was when the run started.
    sources: Mutex<Vec<Arc<dyn LogSource>>>,
    options: AggregationOptions,
    state: tokio::sync::Mutex<State>,
    metrics: Metrics,
    /// Per source after its last successful read: bytes not yet read, seconds behind its tail.
    source_lag: Mutex<HashMap<String, SourceLag>>,
    listeners: Mutex<Vec<Listener>>,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field(
                "sources",
                &self.sources.lock().map(|s| s.len()).unwrap_or(0),
            )
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

impl Aggregator {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sources: Vec<Arc<dyn LogSource>>,
        options: AggregationOptions,
    ) -> Aggregator {
        Aggregator {
            store,
            clock,
            sources: Mutex::new(sources),
            options,
            state: tokio::sync::Mutex::new(State::default()),
            metrics: Metrics::default(),
            source_lag: Mutex::new(HashMap::new()),
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// Adds a source, or replaces the one of the same name (an edge that moved): from the next
    /// run on it is read from its stored checkpoints.
    pub fn set_source(&self, source: Arc<dyn LogSource>) {
        let Ok(mut sources) = self.sources.lock() else {
            return;
        };
        match sources.iter_mut().find(|s| s.name() == source.name()) {
            Some(existing) => *existing = source,
            None => sources.push(source),
        }
    }

    /// Stops reading a source (an edge gone for good); its checkpoints stay stored. Whether
    /// it was read.
    pub fn remove_source(&self, name: &str) -> bool {
        let Ok(mut sources) = self.sources.lock() else {
            return false;
        };
        let before = sources.len();
        sources.retain(|s| s.name() != name);
        sources.len() < before
    }

    /// The names of the sources read.
    pub fn source_names(&self) -> Vec<String> {
        self.sources
            .lock()
            .map(|s| s.iter().map(|s| s.name().to_owned()).collect())
            .unwrap_or_default()
    }

    /// How far behind a source's log the last run that reached it left off.
    pub fn source_lag(&self, name: &str) -> Option<SourceLag> {
        self.source_lag.lock().ok()?.get(name).copied()
    }

    /// Calls `listener` after every committed run with its additions per line item (pacing
    /// keeps its running totals this way; [`StatsStore::delivery`](marquee_store::StatsStore)
    /// gives the totals from the database at start).
    pub fn on_commit(&self, listener: impl Fn(&RunSummary<'_>) + Send + Sync + 'static) {
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.push(Box::new(listener));
        }
    }

    /// Runs every `interval` (at once again after a run that hit its byte budget) until
    /// `shutdown` resolves; a run in progress is finished first. Failures are logged and the
    /// next run starts from the database's state.
    pub async fn run_loop(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut next = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep_until(next) => {}
            }
            let started = tokio::time::Instant::now();
            next = started + self.options.interval;
            match self.run_once().await {
                Ok(report) if report.more => next = tokio::time::Instant::now(),
                Ok(_) => {}
                // Said when it happened (see `run_locked`).
                Err(error) if error.is_fenced() => {}
                Err(error) => tracing::error!(%error, "aggregation run failed; retrying"),
            }
        }
    }

    /// Runs until a run ends below its byte budget: everything readable now is counted.
    pub async fn drain(&self) -> Result<(), AggregationError> {
        while self.run_once().await?.more {}
        Ok(())
    }

    /// One run: read, aggregate, commit, acknowledge.
    pub async fn run_once(&self) -> Result<RunReport, AggregationError> {
        let started = Instant::now();
        let mut state = self.state.lock().await;
        let result = self.run_locked(&mut state, started).await;
        match &result {
            Ok(report) => {
                self.metrics.runs.inc();
                self.metrics.statements.set(i64::from(report.statements));
            }
            Err(error) => {
                let counter = if error.is_fenced() {
                    &self.metrics.fenced
                } else {
                    &self.metrics.failures
                };
                counter.inc();
                // Whatever was in memory may be ahead of or behind the database now.
                state.loaded = false;
            }
        }
        result
    }

    async fn load(&self, state: &mut State) -> Result<(), AggregationError> {
        let stored = self.store.collection_state().await?;
        state.positions = stored
            .checkpoints
            .into_iter()
            .map(|c| {
                (
                    (c.source, c.shard),
                    Position {
                        segment: c.segment,
                        offset: c.offset,
                        max_time_micros: (c.max_event_time_micros != i64::MIN)
                            .then_some(c.max_event_time_micros),
                    },
                )
            })
            .collect();
        state.seen = stored.seen;
        state.acked.clear();
        state.loaded = true;
        Ok(())
    }

    async fn refresh_dims(&self, state: &mut State) -> Result<(), AggregationError> {
        let counter = self.store.change_counter().await?;
        if state.dims_counter != Some(counter) {
            state.dims = Arc::new(self.store.dimensions().await?);
            state.dims_counter = Some(counter);
        }
        Ok(())
    }

    async fn run_locked(
        &self,
        state: &mut State,
        started: Instant,
    ) -> Result<RunReport, AggregationError> {
        if !state.loaded {
            self.load(state).await?;
        }
        self.refresh_dims(state).await?;
        let now = self.clock.now();
        let now_secs = now.as_second();

        let budget = Arc::new(RunBudget::new(self.options.max_run_bytes));
        let mut reads = Vec::new();
        let mut failed_sources = Vec::new();
        let sources: Vec<Arc<dyn LogSource>> =
            self.sources.lock().map(|s| s.clone()).unwrap_or_default();
        for (index, collected) in collect(&sources, &state.positions, &budget).await? {
            match collected {
                Ok(mut shards) => reads.append(&mut shards),
                Err(error) => {
                    self.metrics.source_errors.inc();
                    tracing::warn!(%error, "cannot read an edge's log this run");
                    failed_sources.push(index);
                }
            }
        }
        let more = budget.exhausted();

        let rules = Rules {
            now_secs,
            max_age_secs: secs(self.options.max_event_age),
            max_future_secs: secs(self.options.max_clock_skew),
            token_lifetime_secs: secs(self.options.token_lifetime),
        };
        let seen = std::mem::take(&mut state.seen);
        let dims = Arc::clone(&state.dims);
        let (seen, deltas, shards, stats) = tokio::task::spawn_blocking(move || {
            let mut ingest = Ingest::new(&dims, &seen, rules);
            let mut total = ShardStats::default();
            let shards: Vec<ShardDone> = reads
                .into_iter()
                .map(|read| {
                    // Summed field by field: the same shape as other tallies' sums (the crash
                    // test's `Figures::add`), deliberately not shared across a library and a test.
                    let (done, stats) = ingest_shard(&mut ingest, read);
                    total.bytes += stats.bytes;
                    total.records += stats.records;
                    total.corrupt += stats.corrupt;
                    total.lost += stats.lost;
                    total.waiting += stats.waiting;
                    total.behind += stats.behind;
                    done
                })
                .collect();
            let deltas = ingest.finish();
            (seen, deltas, shards, total)
        })
        .await?;
        state.seen = seen;

        let failed_names: Vec<&str> = failed_sources.iter().map(|&i| sources[i].name()).collect();
        let (watermark, lag) = self.watermark(state, &shards, &failed_names, now_secs);
        let skew = secs(self.options.max_clock_skew);
        let seen_cutoff =
            watermark.max(now_secs - rules.max_age_secs) - secs(self.options.token_lifetime) - skew;
        let minute_cutoff = {
            let cutoff = now_secs - secs(self.options.minute_retention);
            cutoff - cutoff.rem_euclid(MINUTE)
        };
        let checkpoints: Vec<CheckpointMove> = shards
            .iter()
            .filter(|s| s.moved)
            .map(|s| {
                let to = s.position.stored();
                CheckpointMove {
                    from: s.stored.map(Position::stored),
                    to: Checkpoint {
                        source: s.key.0.clone(),
                        shard: s.key.1,
                        segment: to.segment,
                        offset: to.offset,
                        max_event_time_micros: to.max_event_time_micros,
                    },
                }
            })
            .collect();
        let Deltas {
            minutes,
            hours,
            days,
            line_item_hours,
            sketches,
            seen: pending,
            per_line_item,
            accepted,
            duplicates,
            invalid,
            samples,
        } = deltas;
        let today = i32::try_from(now_secs.div_euclid(DAY)).unwrap_or(i32::MAX);
        let sample_cutoff_day =
            today.saturating_sub(i32::try_from(self.options.sample_history_days).unwrap_or(0));
        let samples = samples_by_day(samples);
        let rows = minutes.len();
        let (seen_entries, seen_max_time) = pending.encode();
        let written = self
            .store
            .commit_run(RunWrite {
                minutes,
                hours,
                days,
                line_item_hours,
                sketches,
                seen_entries,
                seen_max_time,
                seen_cutoff_secs: seen_cutoff,
                minute_cutoff_secs: minute_cutoff,
                samples,
                sample_cutoff_day,
                checkpoints,
                now,
            })
            .await
            .inspect_err(|error| {
                if let Some(moved) = error.checkpoint_moved() {
                    // Another manager took over and counted these bytes: this run is void, and
                    // acknowledging would delete segments on this manager's stale word.
                    tracing::error!(
                        edge = %moved.source_name,
                        shard = moved.shard,
                        "another manager committed the log positions this run started from \
                         (it took over the database): the run was rolled back, nothing of it \
                         counted or acknowledged; the next run starts from the database's state"
                    );
                }
            })?;

        // Committed: now memory may follow.
        state.seen.apply(pending);
        state.seen.prune(seen_cutoff);
        for shard in &shards {
            state.positions.insert(shard.key.clone(), shard.position);
        }
        let mut per_line_item: Vec<(u64, Counters)> = per_line_item.into_iter().collect();
        per_line_item.sort_unstable_by_key(|(id, _)| *id);
        if let Ok(listeners) = self.listeners.lock() {
            let summary = RunSummary {
                now,
                per_line_item: &per_line_item,
            };
            for listener in listeners.iter() {
                listener(&summary);
            }
        }
        if self.options.delete_consumed {
            self.acknowledge(&sources, state, &shards).await;
        }
        self.record_source_lag(&sources, &failed_sources, &shards, now_secs);

        let elapsed = started.elapsed();
        let ShardStats {
            bytes,
            records,
            corrupt,
            lost,
            waiting,
            behind,
        } = stats;
        let m = &self.metrics;
        m.bytes.inc_by(bytes);
        m.records.inc_by(records);
        m.events.inc_by(accepted);
        m.duplicates.inc_by(duplicates);
        for (counter, reason) in m.invalid.iter().zip(Invalid::ALL) {
            counter.inc_by(invalid.get(reason));
        }
        m.corrupt_skipped.inc_by(corrupt);
        m.lost_segments.inc_by(lost);
        m.shards_waiting.set(gauge(waiting));
        m.shards_behind.set(gauge(behind));
        m.lag_seconds.set(lag);
        m.backlog_bytes
            .set(gauge(shards.iter().map(|s| s.backlog_bytes).sum()));
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        m.last_run_seconds.set(elapsed.as_secs_f64());
        if records > 0 {
            m.throughput.set(gauge(records * 1_000_000 / micros.max(1)));
        }
        m.seen_ids.set(gauge(state.seen.len() as u64));
        Ok(RunReport {
            statements: written.statements,
            bytes,
            records,
            accepted,
            duplicates,
            invalid,
            rows,
            more,
            elapsed,
        })
    }

    /// The lowest shard watermark (seconds) and the largest lag behind a tail (seconds).
    fn watermark(
        &self,
        state: &State,
        shards: &[ShardDone],
        failed_sources: &[&str],
        now_secs: i64,
    ) -> (i64, i64) {
        let skew = secs(self.options.max_clock_skew);
        let oldest_kept = now_secs - secs(self.options.max_event_age);
        let behind = |position: Option<&Position>| {
            position
                .and_then(|p| p.max_time_micros)
                .map_or(oldest_kept, |t| t.div_euclid(1_000_000))
        };
        let mut watermark = now_secs;
        let mut lag = 0;
        for shard in shards {
            let at = if shard.caught_up {
                now_secs
            } else {
                behind(Some(&shard.position))
            };
            watermark = watermark.min(at - skew);
            lag = lag.max(now_secs - at);
        }
        // Sources not reached this run hold the watermark where they were left; one never
        // read yet, as far back as an event is still accepted (its log may repeat any id
        // counted since).
        for &name in failed_sources {
            let mut held = state
                .positions
                .iter()
                .filter(|(key, _)| key.0 == name)
                .peekable();
            if held.peek().is_none() {
                watermark = watermark.min(oldest_kept - skew);
                lag = lag.max(now_secs - oldest_kept);
            }
            for (_, position) in held {
                let at = behind(Some(position));
                watermark = watermark.min(at - skew);
                lag = lag.max(now_secs - at);
            }
        }
        (watermark, lag.max(0))
    }

    /// Tells each source which segments are fully counted. Failures are retried next run.
    async fn acknowledge(
        &self,
        sources: &[Arc<dyn LogSource>],
        state: &mut State,
        shards: &[ShardDone],
    ) {
        for shard in shards.iter().filter(|s| !s.behind) {
            let done = shard.position.segment.saturating_sub(1);
            let acked = state.acked.get(&shard.key).copied().unwrap_or(0);
            if done == 0 || done <= acked {
                continue;
            }
            match sources[shard.source].ack(shard.key.1, done).await {
                Ok(()) => {
                    state.acked.insert(shard.key.clone(), done);
                }
                Err(error) => tracing::warn!(%error, "acknowledgement failed; retrying next run"),
            }
        }
    }

    /// Sums each source's shards read this run; sources that failed keep their last figures.
    fn record_source_lag(
        &self,
        sources: &[Arc<dyn LogSource>],
        failed: &[usize],
        shards: &[ShardDone],
        now_secs: i64,
    ) {
        let mut fresh: HashMap<usize, SourceLag> = HashMap::new();
        for shard in shards {
            let lag = fresh.entry(shard.source).or_default();
            lag.backlog_bytes += shard.backlog_bytes;
            let behind = if shard.caught_up {
                0
            } else {
                shard
                    .position
                    .max_time_micros
                    .map_or(0, |t| now_secs - t.div_euclid(1_000_000))
            };
            lag.behind_secs = lag.behind_secs.max(u64::try_from(behind).unwrap_or(0));
        }
        let Ok(mut recorded) = self.source_lag.lock() else {
            return;
        };
        for (index, source) in sources.iter().enumerate() {
            if !failed.contains(&index) {
                let lag = fresh.get(&index).copied().unwrap_or_default();
                recorded.insert(source.name().to_owned(), lag);
            }
        }
    }

    /// Registers the `marquee_aggregation_*` families into `registry` (names in
    /// `docs/operations.md`).
    pub fn register_metrics(&self, registry: &mut Registry) {
        let m = &self.metrics;
        for (def, counter) in [
            (RUNS, &m.runs),
            (FAILURES, &m.failures),
            (FENCED, &m.fenced),
            (READ_BYTES, &m.bytes),
            (RECORDS, &m.records),
            (EVENTS, &m.events),
            (DUPLICATES, &m.duplicates),
            (SOURCE_ERRORS, &m.source_errors),
            (LOST_SEGMENTS, &m.lost_segments),
            (CORRUPT_SEGMENTS, &m.corrupt_skipped),
        ] {
            def.register(registry, counter.clone());
        }
        let invalid = m
            .invalid
            .iter()
            .zip(Invalid::ALL)
            .map(|(counter, reason)| ([("reason", reason.label())], counter.clone()));
        INVALID.register(registry, Labelled::new(invalid));
        for (def, gauge) in [
            (STATEMENTS, &m.statements),
            (SHARDS_WAITING, &m.shards_waiting),
            (SHARDS_BEHIND, &m.shards_behind),
            (LAG, &m.lag_seconds),
            (BACKLOG, &m.backlog_bytes),
            (THROUGHPUT, &m.throughput),
            (SEEN_IDS, &m.seen_ids),
        ] {
            def.register(registry, gauge.clone());
        }
        LAST_RUN.register(registry, m.last_run_seconds.clone());
    }
}

const RUNS: Def = Def::new("marquee_aggregation_runs", "Aggregation runs committed.");
const FAILURES: Def = Def::new(
    "marquee_aggregation_failures",
    "Aggregation runs that failed (and were retried from the database's state).",
);
const FENCED: Def = Def::new(
    "marquee_aggregation_fenced_runs",
    "Aggregation runs rolled back because another manager had committed the log positions \
     they started from (a takeover): nothing counted twice or acknowledged.",
);
const STATEMENTS: Def = Def::new(
    "marquee_aggregation_statements",
    "SQL statements the last run's commit executed (constant by design).",
);
const READ_BYTES: Def =
    Def::new("marquee_aggregation_read", "Event log bytes read.").with_unit(Unit::Bytes);
const RECORDS: Def = Def::new("marquee_aggregation_records", "Event log records read.");
const EVENTS: Def = Def::new(
    "marquee_aggregation_events",
    "Events counted (valid and first seen); rate() gives events per second.",
);
const DUPLICATES: Def = Def::new(
    "marquee_aggregation_duplicates",
    "Events dropped as repeats of an event id already counted.",
);
const INVALID: Def = Def::new(
    "marquee_aggregation_invalid",
    "Records dropped by sanitising, by reason.",
);
const SOURCE_ERRORS: Def = Def::new(
    "marquee_aggregation_source_errors",
    "Edges whose log could not be listed in a run.",
);
const LOST_SEGMENTS: Def = Def::new(
    "marquee_aggregation_lost_segments",
    "Unread segments an edge deleted (its disk limit) before they were counted, and partly \
     counted ones it cut below the checkpoint (their unread rest is lost).",
);
const CORRUPT_SEGMENTS: Def = Def::new(
    "marquee_aggregation_corrupt_segments",
    "Closed segments whose damaged rest was skipped.",
);
const SHARDS_WAITING: Def = Def::new(
    "marquee_aggregation_shards_waiting_for_upgrade",
    "Edge log shards stopped at a record a later Marquee build wrote (upgrade the manager).",
);
const SHARDS_BEHIND: Def = Def::new(
    "marquee_aggregation_shards_behind_checkpoint",
    "Edge log shards whose segments end before the stored checkpoint (a log restored from a \
     backup): not read, not acknowledged until an operator resolves it.",
);
const LAG: Def = Def::new(
    "marquee_aggregation_lag",
    "How far behind the newest logged events the counts are (0 when caught up).",
)
.with_unit(Unit::Seconds);
const BACKLOG: Def = Def::new(
    "marquee_aggregation_backlog",
    "Log bytes listed but not yet read after the last run.",
)
.with_unit(Unit::Bytes);
const LAST_RUN: Def =
    Def::new("marquee_aggregation_last_run", "Wall time of the last run.").with_unit(Unit::Seconds);
const THROUGHPUT: Def = Def::new(
    "marquee_aggregation_throughput_events_per_second",
    "Records processed per second of the last run that read any.",
);
const SEEN_IDS: Def = Def::new(
    "marquee_aggregation_seen_ids",
    "Event ids remembered for dedupe.",
);

/// The run's byte budget, shared by the sources read at once: a read reserves what it asks
/// for and gives back what it did not get, so a run holds about `max_run_bytes` however many
/// sources it reads concurrently.
#[derive(Debug)]
struct RunBudget {
    left: AtomicUsize,
    /// A read found nothing left: the run stopped short of something readable.
    exhausted: AtomicBool,
}

impl RunBudget {
    fn new(bytes: usize) -> RunBudget {
        RunBudget {
            left: AtomicUsize::new(bytes),
            exhausted: AtomicBool::new(false),
        }
    }

    /// Reserves up to `most` bytes; 0 once none are left.
    fn take(&self, most: usize) -> usize {
        let mut taken = 0;
        let _ = self.left.fetch_update(Relaxed, Relaxed, |left| {
            taken = left.min(most);
            Some(left - taken)
        });
        if taken == 0 {
            self.exhausted.store(true, Relaxed);
        }
        taken
    }

    /// Settles a reservation of `reserved` bytes of which `used` arrived (a source may send a
    /// little more than asked: always at least one frame).
    fn settle(&self, reserved: usize, used: usize) {
        if used <= reserved {
            self.left.fetch_add(reserved - used, Relaxed);
        } else {
            let over = used - reserved;
            let _ = self
                .left
                .fetch_update(Relaxed, Relaxed, |left| Some(left.saturating_sub(over)));
        }
    }

    /// Whether the run ended with more to read: a read was refused, or nothing is left.
    fn exhausted(&self) -> bool {
        self.exhausted.load(Relaxed) || self.left.load(Relaxed) == 0
    }
}

/// Reads every source, at most [`SOURCES_AT_ONCE`] at a time, each from its stored
/// positions; what each gave (or why not), by index into `sources`, in their order.
async fn collect(
    sources: &[Arc<dyn LogSource>],
    positions: &HashMap<ShardKey, Position>,
    budget: &Arc<RunBudget>,
) -> Result<Vec<(usize, Result<Vec<ShardRead>, SourceError>)>, AggregationError> {
    let mut waiting = sources.iter().enumerate();
    let mut running = tokio::task::JoinSet::new();
    let mut collected = Vec::with_capacity(sources.len());
    loop {
        while running.len() < SOURCES_AT_ONCE
            && let Some((index, source)) = waiting.next()
        {
            let source = Arc::clone(source);
            let held: HashMap<u32, Position> = positions
                .iter()
                .filter(|(key, _)| key.0 == source.name())
                .map(|(key, position)| (key.1, *position))
                .collect();
            let budget = Arc::clone(budget);
            running.spawn(async move {
                let read = read_source(index, source.as_ref(), &held, &budget).await;
                (index, read)
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        collected.push(joined?);
    }
    // In the sources' order, as read one after another: ingestion stays deterministic.
    collected.sort_unstable_by_key(|(index, _)| *index);
    Ok(collected)
}

/// Lists a source's segments and reads each shard from its position (`positions`, by shard)
/// within `budget`.
async fn read_source(
    index: usize,
    source: &dyn LogSource,
    positions: &HashMap<u32, Position>,
    budget: &RunBudget,
) -> Result<Vec<ShardRead>, SourceError> {
    let mut by_shard: BTreeMap<u32, Vec<SegmentInfo>> = BTreeMap::new();
    for listed in source.segments().await? {
        by_shard
            .entry(listed.shard)
            .or_default()
            .push(listed.segment);
    }
    let mut reads = Vec::with_capacity(by_shard.len());
    for (shard, mut listed) in by_shard {
        listed.sort_unstable_by_key(|s| s.id);
        let key = (source.name().to_owned(), shard);
        let stored = positions.get(&shard).copied();
        reads.push(read_shard(index, source, key, stored, listed, budget).await);
    }
    Ok(reads)
}

/// Whether a shard's log ends before its stored position: it went back (restored from a
/// backup, or replaced under the same edge id). A log never does so by itself: ids are never
/// reused and the newest file stays (emptied to its header once consumed, or cut to it by the
/// disk limit), so its newest segment is the position's, or the one before once the position
/// passed that one's closed end (at offset 0 or the header: nothing of the position's own
/// segment read yet); and the part of an open segment read is fsynced, so it never gets
/// shorter.
///
/// The position's own segment *closed* and shorter than the position is not behind: the
/// edge's disk limit cut it (see [`cut_below_checkpoint`]); nothing of it is left to read, and
/// every later id is new, so the shard goes on at the next segment. Open and shorter, it is:
/// a log reopened appends to a new segment, so only one whose ids went back appends to the
/// position's segment again.
fn behind_checkpoint(stored: Position, listed: &[SegmentInfo]) -> bool {
    let Some(newest) = listed.last() else {
        return false;
    };
    if newest.id > stored.segment {
        false
    } else if newest.id == stored.segment {
        !newest.closed && newest.len < stored.offset
    } else {
        newest.id + 1 < stored.segment || !newest.closed || stored.offset > SEGMENT_HEADER_LEN
    }
}

/// The position's segment if it is closed and shorter than the position: the edge's disk limit
/// cut it (to its header: it was the shard's newest file) after part of it was counted, or a
/// backup restored a shorter copy of it. Its bytes below the position were counted and none
/// are at or past it, nor will be (closed), so it is consumed: reading goes on at the next
/// segment, skipping nothing that exists and counting nothing twice. Its unread rest, if the
/// cut took one, is lost.
fn cut_below_checkpoint(stored: Position, listed: &[SegmentInfo]) -> Option<SegmentInfo> {
    listed
        .iter()
        .find(|s| s.id == stored.segment)
        .filter(|s| s.closed && s.len < stored.offset)
        .copied()
}

async fn read_shard(
    source_index: usize,
    source: &dyn LogSource,
    key: ShardKey,
    stored: Option<Position>,
    listed: Vec<SegmentInfo>,
    budget: &RunBudget,
) -> ShardRead {
    let mut start = stored.unwrap_or(Position {
        segment: 0,
        offset: 0,
        max_time_micros: None,
    });
    let mut read = ShardRead {
        key,
        source: source_index,
        stored,
        start,
        chunks: Vec::new(),
        listed,
        caught_up: false,
        lost_segments: 0,
        behind: false,
    };
    if let Some(stored) = stored
        && behind_checkpoint(stored, &read.listed)
    {
        // Its segments are below the position: reading on would skip them as consumed, and
        // the acknowledgement would delete them. Stay, and say so every run until resolved.
        let newest = read.listed.last().map(|s| (s.id, s.len));
        tracing::error!(
            edge = %read.key.0,
            shard = read.key.1,
            checkpoint_segment = stored.segment,
            checkpoint_offset = stored.offset,
            ?newest,
            "the edge's log is behind its stored checkpoint (restored from a backup, or \
             replaced under the same edge id): nothing of this shard is read or acknowledged \
             until an operator resolves it (docs/operations.md, \"A log behind its checkpoint\")"
        );
        read.behind = true;
        return read;
    }
    if let Some(stored) = stored
        && let Some(cut) = cut_below_checkpoint(stored, &read.listed)
    {
        // The edge's disk limit lost what was unread of it: counted with the segments it
        // deleted, and passed (reading it at the position would fail every run).
        read.lost_segments += 1;
        tracing::error!(
            edge = %read.key.0,
            shard = read.key.1,
            segment = cut.id,
            checkpoint_offset = stored.offset,
            len = cut.len,
            "a partly counted segment was cut below the checkpoint (the edge's disk limit \
             emptied it, or a backup restored it shorter): its unread rest is lost; reading \
             on at the next segment"
        );
        start = Position {
            segment: cut.id.saturating_add(1),
            offset: 0,
            ..start
        };
        read.start = start;
    }
    // Segments below the position were consumed (their deletion may still be pending).
    let remaining: Vec<SegmentInfo> = read
        .listed
        .iter()
        .copied()
        .filter(|s| s.id >= start.segment)
        .collect();
    if let Some(first) = remaining.first()
        && first.id > start.segment
    {
        if stored.is_some() {
            // Unread segments the edge deleted (its disk limit): their events are lost.
            read.lost_segments += first.id - start.segment;
            tracing::error!(
                source = %read.key.0,
                shard = read.key.1,
                from = start.segment,
                to = first.id - 1,
                "unread segments are gone from the edge; their events are lost"
            );
        }
        start = Position {
            segment: first.id,
            offset: 0,
            ..start
        };
        read.start = start;
    }
    let shard = read.key.1;
    'segments: for segment in remaining {
        let mut offset = if segment.id == start.segment {
            start.offset
        } else {
            0
        };
        loop {
            let want = budget.take(MAX_CHUNK_BYTES);
            if want == 0 {
                return read;
            }
            let chunk = match source.read(shard, segment.id, offset, want).await {
                Ok(chunk) => chunk,
                Err(error) => {
                    budget.settle(want, 0);
                    tracing::warn!(%error, "log read failed; retrying next run");
                    return read;
                }
            };
            budget.settle(want, chunk.frames.len());
            offset = chunk.next_offset;
            let end = chunk.end;
            read.chunks.push(Planned {
                segment: segment.id,
                closed: segment.closed,
                segment_len: segment.len,
                chunk,
            });
            match end {
                WireEnd::Budget => {}
                WireEnd::Tail => break 'segments,
                WireEnd::Closed => continue 'segments,
                WireEnd::Corrupt if segment.closed => continue 'segments,
                // Damage in the open segment: stay there (and say so) until it closes.
                WireEnd::Corrupt => return read,
            }
        }
    }
    read.caught_up = true;
    read
}

/// Ingests one shard's chunks in order; returns where the shard now stands and what it read.
/// A chunk that fails to parse stops the shard there.
fn ingest_shard(ingest: &mut Ingest<'_>, read: ShardRead) -> (ShardDone, ShardStats) {
    let ShardRead {
        key,
        source,
        stored,
        start,
        chunks,
        listed,
        mut caught_up,
        lost_segments,
        behind,
    } = read;
    let mut position = start;
    let mut bytes = 0u64;
    let mut records = 0u64;
    let mut corrupt = 0u64;
    let mut waiting = false;
    for planned in chunks {
        match ingest.frames(&planned.chunk.frames) {
            Ok(summary) => {
                records += summary.records as u64;
                if let Some(t) = summary.max_time_micros {
                    position.max_time_micros =
                        Some(position.max_time_micros.map_or(t, |m| m.max(t)));
                }
                if let Some(at) = summary.newer_at {
                    // The chunk's frames end at `next_offset`, back to back from its start.
                    let start = planned.chunk.next_offset - planned.chunk.frames.len() as u64;
                    let offset = start + at as u64;
                    bytes += at as u64;
                    waiting = true;
                    tracing::error!(
                        source = %key.0,
                        shard = key.1,
                        segment = planned.segment,
                        offset,
                        "a record from a later Marquee build: this shard waits there until the \
                         manager is upgraded (nothing is dropped; upgrade the manager first)"
                    );
                    position = Position {
                        segment: planned.segment,
                        offset,
                        ..position
                    };
                    caught_up = false;
                    break;
                }
                bytes += planned.chunk.frames.len() as u64;
                let next_segment = Position {
                    segment: planned.segment + 1,
                    offset: 0,
                    ..position
                };
                position = match planned.chunk.end {
                    WireEnd::Closed => next_segment,
                    WireEnd::Corrupt if planned.closed => {
                        corrupt += 1;
                        tracing::error!(
                            source = %key.0,
                            shard = key.1,
                            segment = planned.segment,
                            offset = planned.chunk.next_offset,
                            lost_bytes = planned.segment_len.saturating_sub(planned.chunk.next_offset),
                            "damaged record in a closed segment; skipping the rest of it"
                        );
                        next_segment
                    }
                    _ => Position {
                        segment: planned.segment,
                        offset: planned.chunk.next_offset,
                        ..position
                    },
                };
            }
            Err(error) => {
                tracing::warn!(
                    source = %key.0,
                    shard = key.1,
                    segment = planned.segment,
                    %error,
                    "damaged frames in an answer; reading them again next run"
                );
                caught_up = false;
                break;
            }
        }
    }
    let backlog_bytes = listed
        .iter()
        .map(|s| {
            if s.id > position.segment {
                s.len.saturating_sub(SEGMENT_HEADER_LEN)
            } else if s.id == position.segment {
                s.len
                    .saturating_sub(position.offset.max(SEGMENT_HEADER_LEN))
            } else {
                0
            }
        })
        .sum();
    let done = ShardDone {
        moved: Some(position) != stored,
        key,
        source,
        stored,
        position,
        caught_up,
        behind,
        backlog_bytes,
    };
    (
        done,
        ShardStats {
            bytes,
            records,
            corrupt,
            lost: lost_segments,
            waiting: u64::from(waiting),
            behind: u64::from(behind),
        },
    )
}

/// What one shard's ingestion read and skipped.
#[derive(Debug, Clone, Copy, Default)]
struct ShardStats {
    bytes: u64,
    records: u64,
    /// Closed segments whose damaged rest was skipped.
    corrupt: u64,
    /// Unread segments found deleted.
    lost: u64,
    /// Shards stopped at a record of a later build.
    waiting: u64,
    /// Shards whose log is behind the stored checkpoint.
    behind: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: u64 = 77;

    fn at(segment: u64, offset: u64) -> Position {
        Position {
            segment,
            offset,
            max_time_micros: None,
        }
    }

    fn seg(id: u64, records: u64, closed: bool) -> SegmentInfo {
        SegmentInfo {
            id,
            len: SEGMENT_HEADER_LEN + records * FRAME,
            closed,
        }
    }

    /// Checkpoint (5, after 3 records) against listings: which went back (held), which were
    /// cut by the edge's disk limit (passed), which are plain.
    #[test]
    fn a_log_behind_its_checkpoint_is_told_from_a_segment_cut_below_it() {
        let stored = at(5, SEGMENT_HEADER_LEN + 3 * FRAME);
        let cases: &[(&str, Vec<SegmentInfo>, bool, Option<u64>)] = &[
            ("nothing listed", vec![], false, None),
            (
                "read on in the open segment",
                vec![seg(5, 4, false)],
                false,
                None,
            ),
            (
                "exactly at the open tail",
                vec![seg(5, 3, false)],
                false,
                None,
            ),
            ("closed at the position", vec![seg(5, 3, true)], false, None),
            (
                "more segments since",
                vec![seg(5, 7, true), seg(6, 1, false)],
                false,
                None,
            ),
            // The disk limit cut the newest file to its header; later, the next segment.
            ("cut to the header", vec![seg(5, 0, true)], false, Some(5)),
            (
                "cut, then a new segment",
                vec![seg(5, 0, true), seg(6, 2, false)],
                false,
                Some(5),
            ),
            // A backup's shorter copy, closed: nothing there to read, every later id is new.
            (
                "restored shorter, closed",
                vec![seg(5, 1, true)],
                false,
                Some(5),
            ),
            // Ids went back: the position's segment is appended to again, or is gone.
            (
                "open and shorter",
                vec![seg(4, 9, true), seg(5, 1, false)],
                true,
                None,
            ),
            ("an open one just below", vec![seg(4, 1, false)], true, None),
            ("two or more below", vec![seg(3, 9, true)], true, None),
            (
                "the read segment gone, the one below closed",
                vec![seg(4, 9, true)],
                true,
                None,
            ),
        ];
        for (name, listed, behind, cut) in cases {
            assert_eq!(behind_checkpoint(stored, listed), *behind, "{name}");
            assert_eq!(
                cut_below_checkpoint(stored, listed).map(|s| s.id),
                *cut,
                "{name}"
            );
        }
        // Past a closed segment's end, nothing of the next read yet: not behind.
        for offset in [0, SEGMENT_HEADER_LEN] {
            assert!(!behind_checkpoint(at(5, offset), &[seg(4, 9, true)]));
        }
    }
}
