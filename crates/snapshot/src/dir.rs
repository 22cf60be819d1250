//! Snapshot files in a directory: atomic publish, pruning, finding and loading the latest.

use std::cmp::Reverse;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::format::{HEADER_LEN, Header, LoadError, Snapshot};

const PREFIX: &str = "snapshot-";
const SUFFIX: &str = ".bin";
const TMP_SUFFIX: &str = ".bin.tmp";

/// A directory of snapshot files named `snapshot-{version:020}.bin`. One publisher per
/// directory; any number of readers.
#[derive(Debug, Clone)]
pub struct SnapshotDir {
    path: PathBuf,
    keep: usize,
}

/// A file-system failure or an unusable file, naming the path.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{}: {source}", path.display())]
    Load { path: PathBuf, source: LoadError },
    #[error("the header given for snapshot version {version} does not describe the bytes")]
    HeaderMismatch { version: u64 },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> DirError {
    let path = path.to_path_buf();
    move |source| DirError::Io {
        action,
        path,
        source,
    }
}

/// What a file name says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Complete,
    Tmp,
}

/// Parses `snapshot-{20 digits}.bin` and `….bin.tmp`; anything else is not ours.
fn parse_name(name: &str) -> Option<(u64, FileKind)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (digits, kind) = match rest.strip_suffix(TMP_SUFFIX) {
        Some(digits) => (digits, FileKind::Tmp),
        None => (rest.strip_suffix(SUFFIX)?, FileKind::Complete),
    };
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, kind))
}

fn file_name(version: u64, kind: FileKind) -> String {
    let suffix = match kind {
        FileKind::Complete => SUFFIX,
        FileKind::Tmp => TMP_SUFFIX,
    };
    format!("{PREFIX}{version:020}{suffix}")
}

/// Our files in a directory, each list newest first.
#[derive(Debug, Default)]
struct Listing {
    complete: Vec<(u64, PathBuf)>,
    tmp: Vec<(u64, PathBuf)>,
}

impl Listing {
    fn newest_complete(&self) -> Option<u64> {
        self.complete.first().map(|(version, _)| *version)
    }
}

impl SnapshotDir {
    pub const DEFAULT_KEEP: usize = 3;

    /// Does no I/O; [`publish`](Self::publish) creates the directory when needed.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            keep: Self::DEFAULT_KEEP,
        }
    }

    /// How many complete snapshots [`publish`](Self::publish) leaves; at least 1.
    pub fn with_keep(mut self, keep: usize) -> Self {
        self.keep = keep.max(1);
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` (an encoded snapshot described by `header`) atomically as
    /// `snapshot-{version:020}.bin`: to a `.tmp` file, fsynced, renamed into place, directory
    /// fsynced. Then deletes complete snapshots beyond the keep count and leftover `.tmp` files
    /// older than the newest snapshot; failures there are logged, not returned, since the
    /// snapshot is published by then. Publishing a version again replaces its file.
    pub fn publish(&self, bytes: &[u8], header: &Header) -> Result<PathBuf, DirError> {
        let consistent = bytes.len() as u64 == HEADER_LEN as u64 + header.payload_len
            && bytes.get(..HEADER_LEN) == Some(&header.to_bytes()[..]);
        if !consistent {
            return Err(DirError::HeaderMismatch {
                version: header.version,
            });
        }
        fs::create_dir_all(&self.path).map_err(io_error("create directory", &self.path))?;
        let tmp = self.path.join(file_name(header.version, FileKind::Tmp));
        let target = self
            .path
            .join(file_name(header.version, FileKind::Complete));
        if let Err(e) = write_synced(&tmp, bytes) {
            // Best effort: a leftover is also ignored by readers and removed later.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, &target).map_err(io_error("rename into place", &tmp))?;
        sync_dir(&self.path).map_err(io_error("sync directory", &self.path))?;
        self.prune(header.version);
        Ok(target)
    }

    /// The newest snapshot file (by the version in its name) whose header parses and names that
    /// version, with its header; `None` if there is none or the directory does not exist.
    /// Ignores `.tmp` files, deleting those older than the newest complete snapshot.
    pub fn latest(&self) -> Result<Option<(PathBuf, Header)>, DirError> {
        Ok(self.candidates()?.into_iter().next())
    }

    /// Loads the newest snapshot that decodes. If newer files fail to decode, logs them and
    /// falls back to older ones; if none decodes, returns the newest one's error.
    pub fn load_latest(&self) -> Result<Option<Snapshot>, DirError> {
        let mut newest_error = None;
        for (path, _) in self.candidates()? {
            match Self::load(&path) {
                Ok(snapshot) => return Ok(Some(snapshot)),
                Err(DirError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                    // Pruned by the publisher since we listed it.
                }
                Err(e @ DirError::Load { .. }) => {
                    warn!(error = %e, "skipping a snapshot that does not load");
                    newest_error.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        newest_error.map_or(Ok(None), Err)
    }

    /// Reads and decodes one snapshot file.
    pub fn load(path: &Path) -> Result<Snapshot, DirError> {
        let bytes = fs::read(path).map_err(io_error("read", path))?;
        Snapshot::decode(&bytes).map_err(|source| DirError::Load {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Complete files whose header parses and agrees with the name, newest first.
    fn candidates(&self) -> Result<Vec<(PathBuf, Header)>, DirError> {
        let listing = self.list()?;
        self.remove_stale_tmp(&listing);
        let mut found = Vec::new();
        for (version, path) in listing.complete {
            match read_header(&path)? {
                None => {} // Deleted since we listed it.
                Some(Ok(header)) if header.version == version => found.push((path, header)),
                Some(Ok(header)) => warn!(
                    path = %path.display(),
                    header_version = header.version,
                    "ignoring a snapshot whose name and header disagree on the version"
                ),
                Some(Err(e)) => warn!(
                    path = %path.display(),
                    error = %e,
                    "ignoring a snapshot whose header does not parse"
                ),
            }
        }
        Ok(found)
    }

    fn list(&self) -> Result<Listing, DirError> {
        let entries = match fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Listing::default()),
            Err(e) => return Err(io_error("list", &self.path)(e)),
        };
        let mut listing = Listing::default();
        for entry in entries {
            let entry = entry.map_err(io_error("list", &self.path))?;
            let name = entry.file_name();
            let Some((version, kind)) = name.to_str().and_then(parse_name) else {
                continue;
            };
            let list = match kind {
                FileKind::Complete => &mut listing.complete,
                FileKind::Tmp => &mut listing.tmp,
            };
            list.push((version, entry.path()));
        }
        listing.complete.sort_unstable_by_key(|(v, _)| Reverse(*v));
        listing.tmp.sort_unstable_by_key(|(v, _)| Reverse(*v));
        Ok(listing)
    }

    /// Deletes `.tmp` files older than the newest complete snapshot: with one publisher per
    /// directory, they are leftovers of interrupted publishes and can never become the latest.
    fn remove_stale_tmp(&self, listing: &Listing) {
        let Some(newest) = listing.newest_complete() else {
            return;
        };
        for (_, path) in listing.tmp.iter().filter(|(v, _)| *v < newest) {
            remove_logged(path, "stale temporary snapshot");
        }
    }

    /// Keeps the newest `keep` complete snapshots and always the one just published.
    fn prune(&self, published: u64) {
        let listing = match self.list() {
            Ok(listing) => listing,
            Err(e) => {
                warn!(error = %e, "cannot list snapshots to prune");
                return;
            }
        };
        self.remove_stale_tmp(&listing);
        let old = listing.complete.iter().skip(self.keep);
        for (_, path) in old.filter(|(v, _)| *v != published) {
            remove_logged(path, "old snapshot");
        }
    }
}

fn remove_logged(path: &Path, what: &str) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => warn!(path = %path.display(), error = %e, "cannot delete {what}"),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), DirError> {
    let mut file = File::create(path).map_err(io_error("create", path))?;
    file.write_all(bytes).map_err(io_error("write", path))?;
    file.sync_all().map_err(io_error("sync", path))
}

/// Makes a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Windows cannot open a directory as a file; its renames are durable once the call returns.
#[cfg(not(unix))]
fn sync_dir(_: &Path) -> io::Result<()> {
    Ok(())
}

/// The header of the file at `path`: `None` if the file is gone, `Some(Err)` if it does not
/// parse (short files included).
fn read_header(path: &Path) -> Result<Option<Result<Header, LoadError>>, DirError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("open", path)(e)),
    };
    let mut bytes = Vec::with_capacity(HEADER_LEN);
    file.take(HEADER_LEN as u64)
        .read_to_end(&mut bytes)
        .map_err(io_error("read", path))?;
    Ok(Some(Header::parse(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip_and_foreign_names_are_ignored() {
        assert_eq!(
            file_name(42, FileKind::Complete),
            "snapshot-00000000000000000042.bin"
        );
        for (version, kind) in [(0, FileKind::Complete), (u64::MAX, FileKind::Tmp)] {
            assert_eq!(parse_name(&file_name(version, kind)), Some((version, kind)));
        }
        for foreign in [
            "snapshot-42.bin",
            "snapshot-0000000000000000004x.bin",
            "snapshot-00000000000000000042.bin.bak",
            "snapshot-99999999999999999999.bin",
            "other-00000000000000000042.bin",
            "snapshot-00000000000000000042",
        ] {
            assert_eq!(parse_name(foreign), None, "{foreign}");
        }
    }
}
