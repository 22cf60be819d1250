//! The log: configuration, shards, appending and waiting for durability.

use std::cell::Cell;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{error, info};

use crate::counts::{self, CountTable};
use crate::error::{AppendError, CloseError, OpenError};
use crate::event::{Event, MAX_SAMPLE_LEN, SAMPLE_HEADER_LEN, sample_header};
use crate::flusher::{self, Writer};
use crate::frame::FRAME_LEN;
use crate::segment::{self, SEGMENT_HEADER_LEN};

/// The most shards a log may have, configured or found on disk.
pub const MAX_SHARDS: usize = 1024;

/// A shard's buffer at or above this size wakes the flusher before its interval is up, so
/// bursts are written in pieces instead of piling up.
const EARLY_FLUSH_BYTES: usize = 1 << 20;

/// When appended events become durable (written and fsynced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Group commit: buffers are written and fsynced every `interval`. A crash loses at most
    /// the events of about one interval (plus the fsync's own duration).
    Group { interval: Duration },
    /// As `Group`, and in addition [`EventLog::commit`] waits for billing events to be durable.
    /// A waiter starts an fsync at once if none is running; waiters that arrive during one
    /// share the next, so one fsync serves many.
    Strict { interval: Duration },
}

impl Durability {
    /// The background write-and-fsync interval.
    pub fn interval(self) -> Duration {
        match self {
            Durability::Group { interval } | Durability::Strict { interval } => interval,
        }
    }
}

/// How a log is laid out and flushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Shards to append to; one per worker thread avoids all contention. Default: the number
    /// of available cores.
    pub shards: usize,
    /// A segment rolls before it would grow past this. Default 64 MiB.
    pub segment_max_bytes: u64,
    /// A segment rolls (is closed) once it is this old, even when idle. Default 60 s.
    pub segment_max_age: Duration,
    /// Default `Group` every 5 ms.
    pub durability: Durability,
    /// Appends to a shard fail with [`AppendError::Full`] while it has this much waiting for
    /// the flusher, so a stalled disk bounds memory instead of growing it. Default 64 MiB.
    pub max_buffered_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            shards: std::thread::available_parallelism().map_or(1, |n| n.get()),
            segment_max_bytes: 64 << 20,
            segment_max_age: Duration::from_secs(60),
            durability: Durability::Group {
                interval: Duration::from_millis(5),
            },
            max_buffered_bytes: 64 << 20,
        }
    }
}

impl Config {
    fn validate(&self) -> Result<(), OpenError> {
        let invalid = |field, reason| Err(OpenError::InvalidConfig { field, reason });
        if self.shards == 0 || self.shards > MAX_SHARDS {
            return invalid("shards", "must be 1 to 1024");
        }
        if self.segment_max_bytes < SEGMENT_HEADER_LEN + FRAME_LEN as u64 {
            return invalid("segment_max_bytes", "must hold the header and one record");
        }
        if self.segment_max_age.is_zero() {
            return invalid("segment_max_age", "must be positive");
        }
        if self.durability.interval().is_zero() {
            return invalid("durability.interval", "must be positive");
        }
        if self.max_buffered_bytes < FRAME_LEN {
            return invalid("max_buffered_bytes", "must hold one record");
        }
        Ok(())
    }
}

/// Where an append went: the shard and the event's 1-based sequence number in it since the
/// log was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub shard: usize,
    pub seq: u64,
}

/// Totals over all shards since the log was opened, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Records put in the buffers: events accepted by `append`, and the counter records that
    /// counted events became.
    pub appended: u64,
    /// Framed bytes of those records.
    pub appended_bytes: u64,
    /// Events accepted by `count`.
    pub counted: u64,
    /// Appends and counts refused (closed, full or failed log).
    pub rejected: u64,
    /// Segment fsyncs.
    pub fsyncs: u64,
    /// Write, fsync or file-creation failures; each stops its shard.
    pub io_errors: u64,
    /// Records with an intact frame but an unreadable payload met by `read`.
    pub read_rejected: u64,
    /// Bytes cut from torn tails when the log was opened.
    pub truncated_bytes: u64,
}

/// An append-only event log in a directory: `shard-{k}/{segment:020}.log`.
///
/// Each thread appends to one shard, chosen round-robin on its first append, into that
/// shard's in-memory buffer; a flusher thread per shard writes the buffer and fsyncs it every
/// interval (one per shard so a shard's fsync never waits behind another's). Dropping the log
/// does what [`EventLog::flush_and_close`] does.
#[derive(Debug)]
pub struct EventLog {
    pub(crate) inner: Arc<Inner>,
    /// Emptied by `flush_and_close`.
    flushers: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// Tells logs apart in the thread-local shard choice.
    id: u64,
    pub(crate) config: Config,
    pub(crate) shards: Box<[Shard]>,
    /// Shards `0..writable` take appends; any above were found on disk from an earlier run
    /// with more shards and are only read.
    writable: usize,
    next_slot: AtomicUsize,
    pub(crate) read_rejected: AtomicU64,
    truncated_bytes: u64,
    /// Held (advisory lock) for the log's lifetime so a second log cannot write the same files.
    _lock: File,
}

#[derive(Debug, Default)]
struct Wake {
    requested: bool,
    shutdown: bool,
}

/// One shard. Aligned to its own cache lines so shards appended to from different cores share
/// nothing.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Shard {
    pub(crate) dir: PathBuf,
    /// Appenders and the flusher's buffer swap; held for a copy, never across I/O.
    pub(crate) appends: Mutex<Appends>,
    /// What is durable and visible to readers; the flusher updates it after each fsync.
    pub(crate) published: Mutex<Published>,
    /// Wakes the shard's flusher early: a durability waiter, a large buffer, or shutdown.
    wake: Mutex<Wake>,
    wake_cond: Condvar,
    pub(crate) counters: ShardCounters,
}

#[derive(Debug)]
pub(crate) struct Appends {
    /// Framed records not yet taken by the flusher.
    pub(crate) buf: Vec<u8>,
    /// Counted events not yet in `buf`: they become counter records there when the flusher
    /// takes it (or when the table is full), so they are exactly as durable as appended ones.
    counts: CountTable,
    /// Records appended since open: the last receipt's `seq`, and the `appended` counter.
    pub(crate) seq: u64,
    /// Framed bytes appended since open. Kept here rather than in an atomic so an append
    /// costs no atomic operation beyond the lock.
    bytes: u64,
    /// Events counted since open.
    counted: u64,
    closed: bool,
    pub(crate) failed: Option<Arc<io::Error>>,
    /// Set once the buffer passed [`EARLY_FLUSH_BYTES`] and the flusher was woken.
    pub(crate) early_flush: bool,
}

impl Appends {
    /// Why an append of `frame_len` more bytes to shard `k` is refused, if it is.
    fn refusal(&self, k: usize, frame_len: usize, max_buffered: usize) -> Option<AppendError> {
        if self.closed {
            Some(AppendError::Closed)
        } else if let Some(source) = &self.failed {
            Some(AppendError::Failed {
                shard: k,
                source: Arc::clone(source),
            })
        } else if self.buf.len() + frame_len > max_buffered {
            Some(AppendError::Full { shard: k })
        } else {
            None
        }
    }

    /// Writes the counted events into the buffer as counter records, one per row.
    pub(crate) fn drain_counts(&mut self) {
        let before = self.buf.len();
        self.seq += self.counts.drain_into(&mut self.buf);
        self.bytes += (self.buf.len() - before) as u64;
    }

    /// Whether the buffer has just passed [`EARLY_FLUSH_BYTES`]: the flusher is to be woken.
    fn wants_early_flush(&mut self) -> bool {
        let wake = self.buf.len() >= EARLY_FLUSH_BYTES && !self.early_flush;
        self.early_flush |= wake;
        wake
    }
}

#[derive(Debug)]
pub(crate) struct Published {
    /// Records `1..=durable_seq` are written and fsynced.
    pub(crate) durable_seq: u64,
    pub(crate) failed: Option<Arc<io::Error>>,
    /// The segment being appended to and its fsynced length, if one is open.
    pub(crate) open: Option<OpenTail>,
    /// Segments below this id exist for readers; a file at or above it is still being created.
    pub(crate) next_segment: u64,
    pub(crate) waiters: Vec<Waiter>,
    next_waiter: u64,
    /// Records dropped when the shard stopped on a write failure: `(after, through]` ranges of
    /// sequence numbers, with the failure. Kept after the shard restarts, when `durable_seq`
    /// passes them, so their waiters still fail. One range per outage: consecutive failures
    /// with nothing made durable between them extend the last one.
    lost: Vec<(u64, u64, Arc<io::Error>)>,
}

impl Published {
    /// Records that the shard stopped on `source`, dropping every record through `through`
    /// not yet durable.
    pub(crate) fn lose_through(&mut self, through: u64, source: Arc<io::Error>) {
        let after = self.durable_seq;
        match self.lost.last_mut() {
            Some(last) if last.0 == after => {
                last.1 = through;
                last.2 = Arc::clone(&source);
            }
            _ if through > after => self.lost.push((after, through, Arc::clone(&source))),
            _ => {}
        }
        self.failed = Some(source);
    }

    fn lost(&self, seq: u64) -> Option<&Arc<io::Error>> {
        self.lost
            .iter()
            .find(|(after, through, _)| seq > *after && seq <= *through)
            .map(|(_, _, source)| source)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenTail {
    pub(crate) segment: u64,
    pub(crate) len: u64,
}

#[derive(Debug)]
pub(crate) struct Waiter {
    id: u64,
    pub(crate) seq: u64,
    pub(crate) waker: Waker,
}

#[derive(Debug, Default)]
pub(crate) struct ShardCounters {
    rejected: AtomicU64,
    pub(crate) fsyncs: AtomicU64,
    pub(crate) io_errors: AtomicU64,
}

static NEXT_LOG_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// (log id, shard) this thread appends to; log id 0 means not chosen yet.
    static SHARD: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
}

/// Locks a mutex, ignoring poisoning: every critical section in this crate leaves its data
/// consistent at each step (plain assignments and a buffer extend), so the data behind a
/// poisoned lock is still valid.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EventLog {
    /// Opens (creating if needed) the log in `dir`, recovers every shard's last segment and
    /// starts a flusher thread per shard. New appends go to new segments.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<EventLog, OpenError> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(OpenError::io("create", &dir))?;
        let lock_path = dir.join("LOCK");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(OpenError::io("open", &lock_path))?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(OpenError::Locked { path: lock_path }),
            Err(TryLockError::Error(e)) => return Err(OpenError::io("lock", &lock_path)(e)),
        }

        let mut count = config.shards;
        for entry in fs::read_dir(&dir).map_err(OpenError::io("list", &dir))? {
            let entry = entry.map_err(OpenError::io("list", &dir))?;
            let Some(k) = entry
                .file_name()
                .to_str()
                .and_then(segment::parse_shard_name)
            else {
                continue;
            };
            if k >= MAX_SHARDS {
                return Err(OpenError::TooManyShards {
                    path: entry.path(),
                    shard: k,
                    max: MAX_SHARDS,
                });
            }
            count = count.max(k + 1);
        }

        let mut shards = Vec::with_capacity(count);
        let mut writers = Vec::with_capacity(config.shards);
        let mut truncated_bytes = 0;
        for k in 0..count {
            let shard_dir = segment::shard_dir(&dir, k);
            // k < MAX_SHARDS, so it fits a u32.
            let recovered = segment::recover_shard(&shard_dir, k as u32)?;
            truncated_bytes += recovered.truncated_bytes;
            if k < config.shards {
                writers.push(Writer::new(k, recovered.next_segment));
            }
            shards.push(Shard {
                dir: shard_dir,
                appends: Mutex::new(Appends {
                    buf: Vec::new(),
                    counts: CountTable::default(),
                    seq: 0,
                    bytes: 0,
                    counted: 0,
                    closed: false,
                    failed: None,
                    early_flush: false,
                }),
                published: Mutex::new(Published {
                    durable_seq: 0,
                    failed: None,
                    open: None,
                    next_segment: recovered.next_segment,
                    waiters: Vec::new(),
                    next_waiter: 0,
                    lost: Vec::new(),
                }),
                wake: Mutex::new(Wake::default()),
                wake_cond: Condvar::new(),
                counters: ShardCounters::default(),
            });
        }
        // Makes new shard directories' entries durable, so their segments cannot vanish.
        segment::sync_dir(&dir).map_err(OpenError::io("sync", &dir))?;
        info!(dir = %dir.display(), shards = count, writable = config.shards, truncated_bytes,
            "event log open");

        let inner = Arc::new(Inner {
            id: NEXT_LOG_ID.fetch_add(1, Relaxed),
            writable: config.shards,
            config,
            shards: shards.into_boxed_slice(),
            next_slot: AtomicUsize::new(0),
            read_rejected: AtomicU64::new(0),
            truncated_bytes,
            _lock: lock_file,
        });
        let log = EventLog {
            inner,
            flushers: Mutex::new(Vec::with_capacity(writers.len())),
        };
        for writer in writers {
            let inner = Arc::clone(&log.inner);
            let handle = std::thread::Builder::new()
                .name(format!("eventlog-flush-{}", writer.shard()))
                .spawn(move || flusher::run(&inner, writer))
                // Dropping `log` stops the flushers already started.
                .map_err(OpenError::io("start a flusher for", &dir))?;
            lock(&log.flushers).push(handle);
        }
        Ok(log)
    }

    /// Appends to this thread's shard and returns at once; the event becomes durable with the
    /// next flush. Never blocks on I/O.
    pub fn append(&self, event: &Event) -> Result<Receipt, AppendError> {
        // Framed (CRC included) before taking the lock, to keep the critical section a copy.
        let frame = event.to_frame();
        self.append_frame(&[&frame])
    }

    /// Appends a sample record (see [`SAMPLE_KIND`](crate::SAMPLE_KIND)) of `body`, 1 to
    /// [`MAX_SAMPLE_LEN`] bytes, at `time_micros`, as [`append`](Self::append) does an event:
    /// to this thread's shard, at once, without allocating.
    pub fn append_sample(&self, time_micros: i64, body: &[u8]) -> Result<Receipt, AppendError> {
        if body.is_empty() || body.len() > MAX_SAMPLE_LEN {
            return Err(AppendError::BadSample { len: body.len() });
        }
        let header = sample_header(time_micros);
        // At most MAX_PAYLOAD_LEN, checked above.
        let len = ((SAMPLE_HEADER_LEN + body.len()) as u32).to_le_bytes();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&len);
        crc.update(&header);
        crc.update(body);
        let crc = crc.finalize().to_le_bytes();
        self.append_frame(&[&len, &header, body, &crc])
    }

    /// Copies one frame, given in parts, into this thread's shard's buffer.
    fn append_frame(&self, parts: &[&[u8]]) -> Result<Receipt, AppendError> {
        let frame_len: usize = parts.iter().map(|part| part.len()).sum();
        let k = self.inner.pick_shard();
        let shard = &self.inner.shards[k];
        let mut appends = lock(&shard.appends);
        if let Some(e) = appends.refusal(k, frame_len, self.inner.config.max_buffered_bytes) {
            drop(appends);
            shard.counters.rejected.fetch_add(1, Relaxed);
            return Err(e);
        }
        for part in parts {
            appends.buf.extend_from_slice(part);
        }
        appends.seq += 1;
        appends.bytes += frame_len as u64;
        let seq = appends.seq;
        let wake = appends.wants_early_flush();
        drop(appends);
        if wake {
            shard.request_flush();
        }
        Ok(Receipt { shard: k, seq })
    }

    /// Counts a bid or a no-bid ([`EventKind::counted_as`](crate::EventKind::counted_as)) in
    /// this thread's shard instead of appending it: no record is built per event. When the
    /// flusher next takes the shard's buffer it first writes one counter record per kind,
    /// minute, line item, creative, placement, country, region and device, whose
    /// `amount_micros` is the count, so counted events are made durable (or lost in a crash)
    /// exactly as appended ones buffered at the same time. The event's `user` and
    /// `amount_micros` are not kept. Never blocks on I/O.
    pub fn count(&self, event: &Event) -> Result<(), AppendError> {
        let Some(kind) = event.kind.counted_as() else {
            return Err(AppendError::NotCountable { kind: event.kind });
        };
        let k = self.inner.pick_shard();
        let shard = &self.inner.shards[k];
        let max_buffered = self.inner.config.max_buffered_bytes;
        let mut appends = lock(&shard.appends);
        let mut refused = appends.refusal(k, 0, max_buffered);
        if refused.is_none() && !appends.counts.add(kind, event) {
            // A new row and a full table: its records go into the buffer now.
            refused = appends.refusal(k, counts::MAX_DRAIN_BYTES, max_buffered);
            if refused.is_none() {
                appends.drain_counts();
                // Always true: the table is empty after draining.
                appends.counts.add(kind, event);
            }
        }
        if let Some(e) = refused {
            drop(appends);
            shard.counters.rejected.fetch_add(1, Relaxed);
            return Err(e);
        }
        appends.counted += 1;
        let wake = appends.wants_early_flush();
        drop(appends);
        if wake {
            shard.request_flush();
        }
        Ok(())
    }

    /// Appends and resolves once an fsync covers the event, whatever the durability mode. The
    /// flusher is woken at once; concurrent callers share its fsync (group commit).
    pub fn append_durable(&self, event: &Event) -> Durable {
        match self.append(event) {
            Ok(receipt) => {
                self.inner.shards[receipt.shard].request_flush();
                Durable(DurableState::Waiting {
                    inner: Arc::clone(&self.inner),
                    receipt,
                    waiter: None,
                })
            }
            Err(e) => Durable(DurableState::Done(Err(e))),
        }
    }

    /// Appends as the configured durability asks: in `Strict` mode a billing event
    /// ([`EventKind::is_billing`](crate::EventKind::is_billing)) resolves after the fsync covering it,
    /// as [`EventLog::append_durable`]; anything else resolves as soon as it is buffered. Await
    /// it before sending the response.
    pub fn commit(&self, event: &Event) -> Durable {
        match self.inner.config.durability {
            Durability::Strict { .. } if event.kind.is_billing() => self.append_durable(event),
            _ => Durable(DurableState::Done(self.append(event).map(|_| ()))),
        }
    }

    /// Writes and fsyncs everything buffered, closes every open segment and stops the
    /// flusher. Appends after this fail with [`AppendError::Closed`]; reading still works.
    /// Calling it again only reports failures again.
    pub fn flush_and_close(&self) -> Result<(), CloseError> {
        for shard in &self.inner.shards {
            lock(&shard.appends).closed = true;
            lock(&shard.wake).shutdown = true;
            shard.wake_cond.notify_one();
        }
        // Joined under the lock, so a concurrent caller returns only once everything is flushed.
        let mut flushers = lock(&self.flushers);
        let mut panicked = false;
        for handle in flushers.drain(..) {
            panicked |= handle.join().is_err();
        }
        drop(flushers);
        if panicked {
            return Err(CloseError::FlusherPanicked);
        }
        for (k, shard) in self.inner.shards.iter().enumerate() {
            if let Some(source) = &lock(&shard.published).failed {
                return Err(CloseError::Failed {
                    shard: k,
                    source: Arc::clone(source),
                });
            }
        }
        Ok(())
    }

    /// Whether every shard still takes appends (none stopped on a write or fsync failure).
    pub fn is_healthy(&self) -> bool {
        self.inner
            .shards
            .iter()
            .all(|shard| lock(&shard.published).failed.is_none())
    }

    /// Totals for metrics. Each field is exact on its own; fields are not read atomically
    /// together. Takes each shard's append lock for a moment, so call it at metrics pace, not
    /// per event.
    pub fn counters(&self) -> Counters {
        let mut c = Counters {
            read_rejected: self.inner.read_rejected.load(Relaxed),
            truncated_bytes: self.inner.truncated_bytes,
            ..Counters::default()
        };
        for shard in &self.inner.shards {
            {
                let appends = lock(&shard.appends);
                c.appended += appends.seq;
                c.appended_bytes += appends.bytes;
                c.counted += appends.counted;
            }
            let s = &shard.counters;
            c.rejected += s.rejected.load(Relaxed);
            c.fsyncs += s.fsyncs.load(Relaxed);
            c.io_errors += s.io_errors.load(Relaxed);
        }
        c
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        let running = !lock(&self.flushers).is_empty();
        if running && let Err(e) = self.flush_and_close() {
            error!(error = %e, "event log closed with a failure");
        }
    }
}

impl Inner {
    /// This thread's shard, assigned round-robin on its first append to this log.
    fn pick_shard(&self) -> usize {
        SHARD.with(|cell| {
            let (log, shard) = cell.get();
            if log == self.id {
                return shard;
            }
            let shard = self.next_slot.fetch_add(1, Relaxed) % self.writable;
            cell.set((self.id, shard));
            shard
        })
    }
}

impl Shard {
    fn request_flush(&self) {
        lock(&self.wake).requested = true;
        self.wake_cond.notify_one();
    }

    /// Blocks the shard's flusher until a flush is requested, `interval` passed, or shutdown; returns
    /// whether this is the final flush.
    pub(crate) fn wait_for_work(&self, interval: Duration) -> bool {
        let deadline = std::time::Instant::now() + interval;
        let mut wake = lock(&self.wake);
        while !wake.requested && !wake.shutdown {
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            wake = self
                .wake_cond
                .wait_timeout(wake, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        wake.requested = false;
        wake.shutdown
    }
}

/// Resolves when an appended event is durable (or could not be made so). `'static` and
/// `Send`, so it can be awaited on any executor; the flusher wakes it.
#[derive(Debug)]
#[must_use = "the event may not be durable until this resolves"]
pub struct Durable(DurableState);

#[derive(Debug)]
enum DurableState {
    Done(Result<(), AppendError>),
    Waiting {
        inner: Arc<Inner>,
        receipt: Receipt,
        /// Our entry in the shard's waiter list, once registered.
        waiter: Option<u64>,
    },
}

impl Future for Durable {
    type Output = Result<(), AppendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (inner, receipt, waiter) = match &mut self.get_mut().0 {
            DurableState::Done(result) => return Poll::Ready(result.clone()),
            DurableState::Waiting {
                inner,
                receipt,
                waiter,
            } => (inner, receipt, waiter),
        };
        // Checked and registered under the lock the flusher publishes under, so a wake-up
        // cannot fall between the check and the registration.
        let mut published = lock(&inner.shards[receipt.shard].published);
        if let Some(source) = published.lost(receipt.seq) {
            return Poll::Ready(Err(AppendError::Failed {
                shard: receipt.shard,
                source: Arc::clone(source),
            }));
        }
        if published.durable_seq >= receipt.seq {
            return Poll::Ready(Ok(()));
        }
        if let Some(source) = &published.failed {
            return Poll::Ready(Err(AppendError::Failed {
                shard: receipt.shard,
                source: Arc::clone(source),
            }));
        }
        let registered = waiter.and_then(|id| published.waiters.iter_mut().find(|w| w.id == id));
        match registered {
            Some(entry) => entry.waker.clone_from(cx.waker()),
            None => {
                let id = published.next_waiter;
                published.next_waiter += 1;
                published.waiters.push(Waiter {
                    id,
                    seq: receipt.seq,
                    waker: cx.waker().clone(),
                });
                *waiter = Some(id);
            }
        }
        Poll::Pending
    }
}
