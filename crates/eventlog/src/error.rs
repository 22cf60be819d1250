//! Typed errors, one enum per operation.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Opening the log failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("invalid event log config: {field} {reason}")]
    InvalidConfig {
        field: &'static str,
        reason: &'static str,
    },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{} is in use by another event log", path.display())]
    Locked { path: PathBuf },
    #[error("{} is damaged beyond a torn tail: {source}", path.display())]
    CorruptSegment { path: PathBuf, source: HeaderError },
    #[error("{}: shard directory number {shard} is above the limit of {max} shards", path.display())]
    TooManyShards {
        path: PathBuf,
        shard: usize,
        max: usize,
    },
    #[error("{}: no segment ids left", dir.display())]
    SegmentIdsExhausted { dir: PathBuf },
}

impl OpenError {
    /// For `map_err`: an I/O error as the failure to `action` the file or directory at `path`.
    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> OpenError {
        let path = path.to_path_buf();
        move |source| OpenError::Io {
            action,
            path,
            source,
        }
    }
}

/// An event was not appended, or (for the durable variants) not made durable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AppendError {
    #[error("the event log is closed")]
    Closed,
    #[error("shard {shard} has more than its limit buffered; the disk is not keeping up")]
    Full { shard: usize },
    #[error("shard {shard} stopped after a write or fsync failure: {source}")]
    Failed {
        shard: usize,
        #[source]
        source: Arc<io::Error>,
    },
    #[error("a sample record's body of {len} bytes is not within 1..={max}", max = crate::MAX_SAMPLE_LEN)]
    BadSample { len: usize },
    #[error("{kind:?} events are appended, not counted")]
    NotCountable { kind: crate::EventKind },
}

/// `flush_and_close` could not make everything durable.
#[derive(Debug, thiserror::Error)]
pub enum CloseError {
    #[error("shard {shard} stopped after a write or fsync failure: {source}")]
    Failed {
        shard: usize,
        #[source]
        source: Arc<io::Error>,
    },
    #[error("a flusher thread panicked")]
    FlusherPanicked,
}

/// Why a segment header is not the one expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("header of {len} bytes is short")]
    Short { len: usize },
    #[error("bad magic")]
    Magic,
    #[error("segment format version {0} is not supported")]
    Version(u32),
    #[error("header CRC mismatch")]
    Crc,
    #[error("header names shard {shard} segment {segment}")]
    Mismatch { shard: u32, segment: u64 },
}

/// Listing or reading segments failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no shard {shard} (the log has {shards})")]
    UnknownShard { shard: usize, shards: usize },
    #[error("shard {shard} has no segment {segment}")]
    NoSegment { shard: usize, segment: u64 },
    #[error("offset {offset} is past the readable end {end} of shard {shard} segment {segment}")]
    OffsetPastEnd {
        shard: usize,
        segment: u64,
        offset: u64,
        end: u64,
    },
    #[error("{}: {source}", path.display())]
    BadHeader { path: PathBuf, source: HeaderError },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl ReadError {
    /// For `map_err`: an I/O error as the failure to `action` the file or directory at `path`.
    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ReadError {
        let path = path.to_path_buf();
        move |source| ReadError::Io {
            action,
            path,
            source,
        }
    }
}

/// `delete_through` refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("no shard {shard} (the log has {shards})")]
    UnknownShard { shard: usize, shards: usize },
    #[error("shard {shard} segment {segment} is not closed yet")]
    NotClosed { shard: usize, segment: u64 },
    #[error("cannot remove {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}
