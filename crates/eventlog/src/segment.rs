//! Segment files: names, the header, listing a shard's directory and recovering its last
//! segment after a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::error::{HeaderError, OpenError};
use crate::frame::{FrameError, parse_frame};

/// `"MQEVLOG\0"`.
pub const SEGMENT_MAGIC: [u8; 8] = *b"MQEVLOG\0";

/// The segment format version written by this crate.
pub const SEGMENT_VERSION: u32 = 1;

/// Length of the segment header; the first record starts at this offset.
pub const SEGMENT_HEADER_LEN: u64 = 28;

const HEADER_LEN: usize = SEGMENT_HEADER_LEN as usize;
const SUFFIX: &str = ".log";
const SHARD_PREFIX: &str = "shard-";

pub(crate) fn shard_dir(dir: &Path, shard: usize) -> PathBuf {
    dir.join(format!("{SHARD_PREFIX}{shard}"))
}

pub(crate) fn segment_path(shard_dir: &Path, segment: u64) -> PathBuf {
    shard_dir.join(format!("{segment:020}{SUFFIX}"))
}

/// Parses `shard-{k}`; anything else in the log directory is not ours.
pub(crate) fn parse_shard_name(name: &str) -> Option<usize> {
    let digits = name.strip_prefix(SHARD_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses `{segment:020}.log`.
fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segment ids in a shard directory, ascending.
pub(crate) fn list_segments(shard_dir: &Path) -> io::Result<Vec<u64>> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(shard_dir)? {
        let entry = entry?;
        if let Some(id) = entry.file_name().to_str().and_then(parse_segment_name) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

pub(crate) fn encode_header(shard: u32, segment: u64) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(&SEGMENT_MAGIC);
    header[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&shard.to_le_bytes());
    header[16..24].copy_from_slice(&segment.to_le_bytes());
    let crc = crc32fast::hash(&header[..24]);
    header[24..28].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Checks a header read from the file of (`shard`, `segment`). The version is checked right
/// after the magic, because a later version may lay out the rest differently.
pub(crate) fn check_header(bytes: &[u8], shard: u32, segment: u64) -> Result<(), HeaderError> {
    let Some(header) = bytes.first_chunk::<HEADER_LEN>() else {
        return Err(HeaderError::Short { len: bytes.len() });
    };
    if header[0..8] != SEGMENT_MAGIC {
        return Err(HeaderError::Magic);
    }
    let field = |at: usize| [header[at], header[at + 1], header[at + 2], header[at + 3]];
    let version = u32::from_le_bytes(field(8));
    if version != SEGMENT_VERSION {
        return Err(HeaderError::Version(version));
    }
    let stored = u32::from_le_bytes(field(24));
    if stored != crc32fast::hash(&header[..24]) {
        return Err(HeaderError::Crc);
    }
    let found_shard = u32::from_le_bytes(field(12));
    let found_segment = u64::from_le_bytes([
        header[16], header[17], header[18], header[19], header[20], header[21], header[22],
        header[23],
    ]);
    if (found_shard, found_segment) != (shard, segment) {
        return Err(HeaderError::Mismatch {
            shard: found_shard,
            segment: found_segment,
        });
    }
    Ok(())
}

/// Walks whole, intact frames from the start of `records`; returns where they end and, if
/// they end before `records` does, why.
pub(crate) fn valid_prefix(records: &[u8]) -> (usize, Option<FrameError>) {
    let mut end = 0;
    while end < records.len() {
        match parse_frame(&records[end..]) {
            Ok((_, len)) => end += len,
            Err(e) => return (end, Some(e)),
        }
    }
    (end, None)
}

/// Creates a segment file holding only its header. The directory entry is made durable by
/// the caller's directory fsync once records are in it.
pub(crate) fn create_segment(path: &Path, shard: u32, segment: u64) -> io::Result<File> {
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(path)?;
    file.write_all(&encode_header(shard, segment))?;
    Ok(file)
}

/// Cuts a closed segment back to its header: its records are gone, its id stays on disk.
pub(crate) fn empty_to_header(path: &Path) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len(SEGMENT_HEADER_LEN)
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// What recovery found in a shard directory.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// The id the next segment takes: above every id ever seen, so ids are never reused.
    pub next_segment: u64,
    /// Bytes cut from a torn tail (or a torn segment header).
    pub truncated_bytes: u64,
}

/// Makes the shard directory ready for appending: its last segment is scanned and a torn tail
/// (partial record, bad length or CRC mismatch) is cut off, keeping every intact record before
/// it. Earlier segments were fsynced before the next one was created and are left alone.
pub(crate) fn recover_shard(dir: &Path, shard: u32) -> Result<Recovered, OpenError> {
    fs::create_dir_all(dir).map_err(OpenError::io("create", dir))?;
    let ids = list_segments(dir).map_err(OpenError::io("list", dir))?;
    let Some(&last) = ids.last() else {
        return Ok(Recovered {
            next_segment: 1,
            truncated_bytes: 0,
        });
    };
    let next_segment = last.checked_add(1).ok_or(OpenError::SegmentIdsExhausted {
        dir: dir.to_path_buf(),
    })?;
    let path = segment_path(dir, last);
    let bytes = fs::read(&path).map_err(OpenError::io("read", &path))?;
    let truncated_bytes = if let Err(e) = check_header(&bytes, shard, last) {
        // A crash between creating a segment and syncing its first records leaves a short or
        // unwritten header and nothing after it. Anything longer is damage we must not guess
        // about.
        if bytes.len() > HEADER_LEN {
            return Err(OpenError::CorruptSegment { path, source: e });
        }
        warn!(path = %path.display(), len = bytes.len(), error = %e,
            "removing a segment whose header was torn");
        fs::remove_file(&path).map_err(OpenError::io("remove", &path))?;
        sync_dir(dir).map_err(OpenError::io("sync", dir))?;
        bytes.len() as u64
    } else {
        let (valid, error) = valid_prefix(&bytes[HEADER_LEN..]);
        let keep = (HEADER_LEN + valid) as u64;
        let dropped = bytes.len() as u64 - keep;
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(OpenError::io("open", &path))?;
        if let Some(error) = error {
            warn!(path = %path.display(), kept = keep, dropped, %error,
                "truncating a torn tail");
            file.set_len(keep)
                .map_err(OpenError::io("truncate", &path))?;
        }
        // Synced whether cut or not: after a kill the kept records may still be only in the
        // page cache, and from now on readers take the segment as closed and durable.
        file.sync_all().map_err(OpenError::io("sync", &path))?;
        dropped
    };
    Ok(Recovered {
        next_segment,
        truncated_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let path = segment_path(Path::new("x"), 42);
        assert_eq!(path, Path::new("x/00000000000000000042.log"));
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        assert_eq!(parse_segment_name(name), Some(42));
        assert_eq!(parse_segment_name("42.log"), None);
        assert_eq!(parse_segment_name("0000000000000000004x.log"), None);
        assert_eq!(parse_shard_name("shard-3"), Some(3));
        assert_eq!(parse_shard_name("shard-"), None);
        assert_eq!(parse_shard_name("shard-a"), None);
    }

    #[test]
    fn headers_are_checked() {
        let header = encode_header(3, 7);
        assert_eq!(check_header(&header, 3, 7), Ok(()));
        assert_eq!(
            check_header(&header, 3, 8),
            Err(HeaderError::Mismatch {
                shard: 3,
                segment: 7
            })
        );
        assert_eq!(
            check_header(&header[..27], 3, 7),
            Err(HeaderError::Short { len: 27 })
        );
        let mut bad = header;
        bad[0] = b'X';
        assert_eq!(check_header(&bad, 3, 7), Err(HeaderError::Magic));
        let mut bad = header;
        bad[8] = 2;
        assert_eq!(check_header(&bad, 3, 7), Err(HeaderError::Version(2)));
        let mut bad = header;
        bad[20] ^= 1;
        assert_eq!(check_header(&bad, 3, 7), Err(HeaderError::Crc));
    }
}
