//! Reading for the manager: list segments, read records from (shard, segment, offset), delete
//! acknowledged segments.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering::Relaxed;

use crate::error::{DeleteError, ReadError};
use crate::event::{DecodeError, Event};
use crate::frame::{FRAME_OVERHEAD, FrameError, MAX_PAYLOAD_LEN, parse_frame};
use crate::log::{EventLog, OpenTail, Shard, lock};
use crate::segment::{self, SEGMENT_HEADER_LEN};

/// One segment of a shard as a reader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    pub id: u64,
    /// Readable length in bytes, header included: the whole file when closed, the fsynced
    /// part when open.
    pub len: u64,
    /// Closed segments never change again and may be deleted once consumed.
    pub closed: bool,
}

/// How much one [`EventLog::read`] may return. At least one record is returned when one is
/// readable, whatever the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Framed bytes.
    pub max_bytes: usize,
    /// Records, rejected ones included.
    pub max_records: usize,
}

impl Default for Budget {
    /// 1 MiB or 10,000 records.
    fn default() -> Self {
        Budget {
            max_bytes: 1 << 20,
            max_records: 10_000,
        }
    }
}

/// Records read from one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBatch {
    /// The readable events, in log order (sample records are not events: they are skipped).
    pub events: Vec<Event>,
    /// Intact records this version cannot decode (a newer kind or format version). They are
    /// consumed: `next_offset` is past them. Counted in [`Counters::read_rejected`](crate::Counters).
    pub rejected: Vec<Rejected>,
    /// Where the next read of this segment starts.
    pub next_offset: u64,
    /// Why the batch ended.
    pub end: ReadEnd,
}

/// Intact frames read from one segment, undecoded ([`EventLog::read_frames`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameBatch {
    /// Whole frames (`length | payload | crc`) back to back, as on disk.
    pub frames: Vec<u8>,
    /// How many frames `frames` holds.
    pub records: usize,
    /// Where the next read of this segment starts.
    pub next_offset: u64,
    /// Why the batch ended.
    pub end: ReadEnd,
}

/// What [`EventLog::scan`] read: the window and how far its intact frames reach.
struct Scan {
    buf: Vec<u8>,
    /// Bytes of `buf` that are whole, intact frames within the budget.
    consumed: usize,
    next_offset: u64,
    end: ReadEnd,
}

/// Why a [`ReadBatch`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadEnd {
    /// The budget was used up; more is readable at `next_offset` now.
    Budget,
    /// The fsynced end of the open segment: more may be appended later.
    Tail,
    /// The end of a closed segment: continue with the next segment.
    Closed,
    /// The frame at `next_offset` is damaged; reading from there fails the same way. Only
    /// damage to the disk's contents causes this (torn tails are cut when the log opens).
    Corrupt(Corrupt),
}

/// An intact record whose payload this version cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected {
    /// Byte offset of its frame in the segment file.
    pub offset: u64,
    pub error: DecodeError,
}

/// A damaged frame inside the readable part of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt {
    /// Byte offset of the frame in the segment file.
    pub offset: u64,
    pub error: FrameError,
}

/// The largest frame a reader accepts; a read window is never smaller, so the first record
/// always fits.
const MAX_FRAME: usize = MAX_PAYLOAD_LEN as usize + FRAME_OVERHEAD;

impl EventLog {
    /// Number of shards, including any found on disk above the configured count (read-only).
    pub fn shards(&self) -> usize {
        self.inner.shards.len()
    }

    /// The shard's segments, ascending by id. A segment still being created is not listed.
    pub fn segments(&self, shard: usize) -> Result<Vec<SegmentInfo>, ReadError> {
        let s = self.shard(shard)?;
        let (open, next) = visible(s);
        let ids = segment::list_segments(&s.dir).map_err(ReadError::io("list", &s.dir))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids.into_iter().filter(|&id| id < next) {
            if let Some(tail) = open.filter(|t| t.segment == id) {
                out.push(SegmentInfo {
                    id,
                    len: tail.len,
                    closed: false,
                });
                continue;
            }
            let path = segment::segment_path(&s.dir, id);
            match path.metadata() {
                Ok(meta) => out.push(SegmentInfo {
                    id,
                    len: meta.len(),
                    closed: true,
                }),
                // Deleted since the listing.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ReadError::Io {
                        action: "stat",
                        path,
                        source,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Reads records of one segment from `offset` (a file offset; anything below the header
    /// length means the first record) within `budget`. On the open segment only the fsynced
    /// part is read, so nothing returned can be lost in a crash.
    pub fn read(
        &self,
        shard: usize,
        segment: u64,
        offset: u64,
        budget: Budget,
    ) -> Result<ReadBatch, ReadError> {
        let mut events = Vec::new();
        let mut rejected = Vec::new();
        let scan = self.scan(
            shard,
            segment,
            offset,
            budget,
            |payload, at| match Event::decode(payload) {
                Ok(event) => events.push(event),
                // Not an event: `read_frames` carries samples to those who read them.
                Err(DecodeError::Sample) => {}
                Err(error) => rejected.push(Rejected { offset: at, error }),
            },
        )?;
        if !rejected.is_empty() {
            self.inner
                .read_rejected
                .fetch_add(rejected.len() as u64, Relaxed);
        }
        Ok(ReadBatch {
            events,
            rejected,
            next_offset: scan.next_offset,
            end: scan.end,
        })
    }

    /// Like [`read`](Self::read), but returns the intact frames as they are on disk, undecoded:
    /// what an edge serves to a remote manager, which decodes (and counts what it cannot
    /// decode) itself. Every frame's length and CRC were checked; the bytes are whole frames
    /// back to back, ending at `next_offset`.
    pub fn read_frames(
        &self,
        shard: usize,
        segment: u64,
        offset: u64,
        budget: Budget,
    ) -> Result<FrameBatch, ReadError> {
        let mut records = 0;
        let scan = self.scan(shard, segment, offset, budget, |_, _| records += 1)?;
        let mut frames = scan.buf;
        frames.truncate(scan.consumed);
        Ok(FrameBatch {
            frames,
            records,
            next_offset: scan.next_offset,
            end: scan.end,
        })
    }

    /// Reads a window of one segment from `offset` and walks its intact frames within
    /// `budget`, calling `visit` with each payload and its frame's file offset.
    fn scan(
        &self,
        shard: usize,
        segment: u64,
        offset: u64,
        budget: Budget,
        mut visit: impl FnMut(&[u8], u64),
    ) -> Result<Scan, ReadError> {
        let s = self.shard(shard)?;
        let (open, next) = visible(s);
        let missing = || ReadError::NoSegment { shard, segment };
        if segment >= next {
            return Err(missing());
        }
        let path = segment::segment_path(&s.dir, segment);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(missing()),
            Err(e) => return Err(ReadError::io("open", &path)(e)),
        };
        let (end, closed) = match open.filter(|t| t.segment == segment) {
            Some(tail) => (tail.len, false),
            None => (
                file.metadata().map_err(ReadError::io("stat", &path))?.len(),
                true,
            ),
        };

        let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
        let got = read_fully_at(&file, &mut header, 0).map_err(ReadError::io("read", &path))?;
        // The shard index is below MAX_SHARDS, so it fits a u32.
        segment::check_header(&header[..got], shard as u32, segment).map_err(|source| {
            ReadError::BadHeader {
                path: path.clone(),
                source,
            }
        })?;

        let start = offset.max(SEGMENT_HEADER_LEN);
        if start > end {
            return Err(ReadError::OffsetPastEnd {
                shard,
                segment,
                offset,
                end,
            });
        }
        let window = usize::try_from(end - start)
            .unwrap_or(usize::MAX)
            .min(budget.max_bytes.max(MAX_FRAME));
        let mut buf = vec![0u8; window];
        let got = read_fully_at(&file, &mut buf, start).map_err(ReadError::io("read", &path))?;
        buf.truncate(got);
        // A file shorter than its readable length (only after outside damage) reads short;
        // that is reported as corrupt below.
        let window_end = start + window as u64;

        let mut end_reason = ReadEnd::Budget;
        let mut pos = 0;
        let mut records = 0;
        while pos < buf.len() && records < budget.max_records {
            match parse_frame(&buf[pos..]) {
                Ok((payload, len)) => {
                    if pos > 0 && pos + len > budget.max_bytes {
                        break;
                    }
                    visit(payload, start + pos as u64);
                    records += 1;
                    pos += len;
                }
                // Cut by the window, not by the segment's readable end: the budget stops here.
                Err(FrameError::Truncated { .. }) if got == window && window_end < end => break,
                Err(error) => {
                    end_reason = ReadEnd::Corrupt(Corrupt {
                        offset: start + pos as u64,
                        error,
                    });
                    break;
                }
            }
        }
        let next_offset = start + pos as u64;
        if end_reason == ReadEnd::Budget && pos == got && got < window {
            // The file ended before its readable length: report it rather than return empty
            // batches from here forever.
            end_reason = ReadEnd::Corrupt(Corrupt {
                offset: next_offset,
                error: FrameError::Truncated {
                    available: 0,
                    needed: FRAME_OVERHEAD,
                },
            });
        }
        if next_offset == end && end_reason == ReadEnd::Budget {
            end_reason = if closed {
                ReadEnd::Closed
            } else {
                ReadEnd::Tail
            };
        }
        Ok(Scan {
            buf,
            consumed: pos,
            next_offset,
            end: end_reason,
        })
    }

    /// Deletes the shard's segments up to and including `segment` once the manager has
    /// consumed them. Refuses, deleting nothing, if `segment` is not closed yet. Returns how
    /// many files it removed. (Not fsynced: a deletion lost in a crash leaves segments the
    /// manager has already consumed, which its checkpoint skips.)
    ///
    /// The shard's newest segment is emptied to its header rather than removed: its file is
    /// what tells the next opening where ids go on. Without it a log reopened on an empty
    /// directory would number from 1 again, below the manager's checkpoint, which would skip
    /// every new segment up to the old ids as already consumed.
    ///
    /// The edge's disk limit deletes with it too, segments not consumed yet: then the newest
    /// may be cut below a manager's checkpoint inside it (part of it read while it was open).
    /// Closed and shorter than the checkpoint, it reads as consumed: the manager goes on at the
    /// next id and counts the rest as lost.
    pub fn delete_through(&self, shard: usize, segment: u64) -> Result<usize, DeleteError> {
        let s = self
            .inner
            .shards
            .get(shard)
            .ok_or(DeleteError::UnknownShard {
                shard,
                shards: self.inner.shards.len(),
            })?;
        let (open, next) = visible(s);
        let first_unclosed = open.map_or(next, |t| t.segment);
        if segment >= first_unclosed {
            return Err(DeleteError::NotClosed { shard, segment });
        }
        let ids = segment::list_segments(&s.dir).map_err(|source| DeleteError::Io {
            path: s.dir.clone(),
            source,
        })?;
        let newest = ids.last().copied();
        let mut removed = 0;
        for id in ids.into_iter().take_while(|&id| id <= segment) {
            let path = segment::segment_path(&s.dir, id);
            if Some(id) == newest {
                segment::empty_to_header(&path).map_err(|source| DeleteError::Io {
                    path: path.clone(),
                    source,
                })?;
                removed += 1;
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(DeleteError::Io { path, source }),
            }
        }
        Ok(removed)
    }

    fn shard(&self, shard: usize) -> Result<&Shard, ReadError> {
        self.inner.shards.get(shard).ok_or(ReadError::UnknownShard {
            shard,
            shards: self.inner.shards.len(),
        })
    }
}

/// The open segment's fsynced tail and the first id not yet visible, read together.
fn visible(shard: &Shard) -> (Option<OpenTail>, u64) {
    let published = lock(&shard.published);
    (published.open, published.next_segment)
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_fully_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
