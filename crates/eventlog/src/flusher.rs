//! A shard's flusher thread: takes the shard's buffer, writes it into segments (rolling by size and
//! age), fsyncs, then publishes the durable length and wakes the waiters it covers.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::mem;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tracing::error;

use crate::frame::whole_frames_within;
use crate::log::{Inner, OpenTail, Published, Shard, Waiter, lock};
use crate::segment::{self, SEGMENT_HEADER_LEN};

/// The flusher's own state for one writable shard; only its flusher thread touches it.
#[derive(Debug)]
pub(crate) struct Writer {
    shard: usize,
    next_segment: u64,
    open: Option<OpenSegment>,
    /// The buffer taken from the shard, swapped back empty so neither side reallocates in
    /// steady state.
    chunk: Vec<u8>,
    /// When the shard last stopped on a write or fsync failure; cleared once it takes appends
    /// again.
    failed_at: Option<Instant>,
}

/// How long a stopped shard waits before it tries to take appends again (a full disk may have
/// been given space back).
const RETRY_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct OpenSegment {
    id: u64,
    file: File,
    len: u64,
    created: Instant,
    /// Whether the directory entry has been fsynced.
    dir_synced: bool,
}

/// The body of a shard's flusher thread: flush every interval, or sooner when asked, until
/// the final flush at shutdown.
pub(crate) fn run(inner: &Inner, mut writer: Writer) {
    let interval = inner.config.durability.interval();
    let shard = &inner.shards[writer.shard];
    loop {
        let last = shard.wait_for_work(interval);
        writer.flush(inner, last);
        if last {
            return;
        }
    }
}

impl Writer {
    pub(crate) fn shard(&self) -> usize {
        self.shard
    }

    pub(crate) fn new(shard: usize, next_segment: u64) -> Writer {
        Writer {
            shard,
            next_segment,
            open: None,
            chunk: Vec::new(),
            failed_at: None,
        }
    }

    fn flush(&mut self, inner: &Inner, last: bool) {
        let shard = &inner.shards[self.shard];
        if let Some(at) = self.failed_at {
            if last || at.elapsed() < RETRY_AFTER {
                return;
            }
            if let Err(e) = self.restart(shard) {
                error!(shard = self.shard, error = %e, "event log shard still stopped");
                shard.counters.io_errors.fetch_add(1, Relaxed);
                self.failed_at = Some(Instant::now());
                return;
            }
        }
        let seq = {
            let mut appends = lock(&shard.appends);
            // Counted events join this write, so they are durable with the records beside them.
            appends.drain_counts();
            mem::swap(&mut appends.buf, &mut self.chunk);
            appends.early_flush = false;
            appends.seq
        };
        if !self.chunk.is_empty() {
            let written = self.write_chunk(inner, shard);
            self.chunk.clear();
            match written {
                Ok(tail) => publish(shard, |p| {
                    p.durable_seq = seq;
                    p.open = Some(tail);
                    p.next_segment = self.next_segment;
                }),
                Err(e) => return self.fail(shard, e),
            }
        }
        // An idle segment closes by age too, so a quiet edge's data becomes a closed segment
        // the manager can acknowledge and delete.
        let expired = self
            .open
            .as_ref()
            .is_some_and(|s| last || s.created.elapsed() >= inner.config.segment_max_age);
        if expired {
            self.close_segment(shard);
        }
    }

    /// Writes the chunk, rolling segments at record boundaries, and fsyncs it. Returns the
    /// open segment's new durable tail.
    fn write_chunk(&mut self, inner: &Inner, shard: &Shard) -> io::Result<OpenTail> {
        let max = inner.config.segment_max_bytes;
        let mut seg = match self.open.take() {
            Some(seg) => seg,
            None => self.create_segment(shard)?,
        };
        let mut pos = 0;
        while pos < self.chunk.len() {
            let room = usize::try_from(max.saturating_sub(seg.len)).unwrap_or(usize::MAX);
            let n = whole_frames_within(&self.chunk[pos..], room);
            if n == 0 {
                // Unreachable: the chunk holds only frames `append` built. Dropping the rest
                // beats looping forever.
                break;
            }
            if n > room && seg.len > SEGMENT_HEADER_LEN {
                // Not even one more record fits: close this segment (fsynced first) and go on
                // in a fresh one, which always takes a record.
                sync(&mut seg, shard)?;
                self.publish_closed(shard);
                seg = self.create_segment(shard)?;
                continue;
            }
            seg.file.write_all(&self.chunk[pos..pos + n])?;
            seg.len += n as u64;
            pos += n;
        }
        sync(&mut seg, shard)?;
        let tail = OpenTail {
            segment: seg.id,
            len: seg.len,
        };
        self.open = Some(seg);
        Ok(tail)
    }

    fn create_segment(&mut self, shard: &Shard) -> io::Result<OpenSegment> {
        let id = self.next_segment;
        let path = segment::segment_path(&shard.dir, id);
        // The shard index is below MAX_SHARDS, so it fits a u32.
        let file = segment::create_segment(&path, self.shard as u32, id)?;
        self.next_segment = id
            .checked_add(1)
            .ok_or_else(|| io::Error::other("segment ids exhausted"))?;
        Ok(OpenSegment {
            id,
            file,
            len: SEGMENT_HEADER_LEN,
            created: Instant::now(),
            dir_synced: false,
        })
    }

    /// Closes the open segment. Its records were fsynced when they were written, so this only
    /// publishes that it is closed (readers then see its full length as final).
    fn close_segment(&mut self, shard: &Shard) {
        if self.open.take().is_some() {
            self.publish_closed(shard);
        }
    }

    fn publish_closed(&self, shard: &Shard) {
        publish(shard, |p| {
            p.open = None;
            p.next_segment = self.next_segment;
        });
    }

    /// Stops the shard: appends fail until [`restart`](Self::restart) succeeds, and every
    /// waiter is told. The unwritten buffer is dropped, its records remembered as lost (their
    /// waiters fail even once later records are durable); `restart` cuts whatever part of it
    /// reached the disk.
    fn fail(&mut self, shard: &Shard, e: io::Error) {
        error!(shard = self.shard, error = %e, "event log shard stopped: write or fsync failed");
        self.failed_at = Some(Instant::now());
        self.open = None;
        shard.counters.io_errors.fetch_add(1, Relaxed);
        let source = Arc::new(e);
        let lost_through = {
            let mut appends = lock(&shard.appends);
            appends.failed = Some(Arc::clone(&source));
            appends.buf = Vec::new();
            appends.seq
        };
        publish(shard, |p| p.lose_through(lost_through, source));
    }

    /// Makes a stopped shard take appends again: the open segment is cut back to its fsynced
    /// length and becomes closed, and segments created since (never visible to readers) are
    /// removed, so readers find no torn record; the next flush starts a fresh segment.
    fn restart(&mut self, shard: &Shard) -> io::Result<()> {
        let (open, visible) = {
            let published = lock(&shard.published);
            (published.open, published.next_segment)
        };
        if let Some(tail) = open {
            let file = OpenOptions::new()
                .write(true)
                .open(segment::segment_path(&shard.dir, tail.segment))?;
            file.set_len(tail.len)?;
            file.sync_all()?;
        }
        // Through `next_segment` itself: a segment whose creation failed left its file behind.
        for id in visible..=self.next_segment {
            match std::fs::remove_file(segment::segment_path(&shard.dir, id)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        segment::sync_dir(&shard.dir)?;
        self.next_segment = visible;
        self.failed_at = None;
        publish(shard, |p| {
            p.open = None;
            p.failed = None;
        });
        lock(&shard.appends).failed = None;
        Ok(())
    }
}

/// Fsyncs a segment's data, and the directory entry of a new segment.
fn sync(seg: &mut OpenSegment, shard: &Shard) -> io::Result<()> {
    seg.file.sync_data()?;
    shard.counters.fsyncs.fetch_add(1, Relaxed);
    if !seg.dir_synced {
        segment::sync_dir(&shard.dir)?;
        seg.dir_synced = true;
    }
    Ok(())
}

/// Updates what readers and waiters see, then wakes the waiters that are done: their records
/// are durable, or the shard failed.
fn publish(shard: &Shard, update: impl FnOnce(&mut Published)) {
    let ready: Vec<Waiter> = {
        let mut published = lock(&shard.published);
        update(&mut published);
        let durable = published.durable_seq;
        let failed = published.failed.is_some();
        published
            .waiters
            .extract_if(.., |w| failed || w.seq <= durable)
            .collect()
    };
    // Woken outside the lock: a waker may run the task inline, and the task locks it.
    for waiter in ready {
        waiter.waker.wake();
    }
}
