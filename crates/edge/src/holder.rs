//! The snapshot in memory: one immutable [`Loaded`] (snapshot, targeting index, pacing
//! controls) behind an atomic pointer. Readers take a reference without waiting; a new snapshot
//! is swapped in whole, and the old one is freed when its last reader is done.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwapOption;
use marquee_engine::{ControlArray, Engine};
use marquee_snapshot::{LoadError, Snapshot};

/// Everything one snapshot brings.
#[derive(Debug)]
pub struct Loaded {
    pub engine: Engine,
    pub controls: ControlArray,
    /// The snapshot's ETag, to poll for the next one.
    pub etag: String,
}

/// Where the edge keeps its last good snapshot, to start from when the manager is away.
const LOCAL_COPY: &str = "last-good.snapshot";

#[derive(Debug, Default)]
pub struct Holder {
    current: ArcSwapOption<Loaded>,
    swaps: AtomicU64,
    rejected: AtomicU64,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("snapshot rejected: {0}")]
    Invalid(#[from] LoadError),
    #[error("snapshot version {offered} is not newer than version {current}")]
    Stale { offered: u64, current: u64 },
}

impl Holder {
    /// The current snapshot, if one is loaded. Cheap; never blocks.
    pub fn current(&self) -> Option<Arc<Loaded>> {
        self.current.load_full()
    }

    pub fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }

    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    pub fn version(&self) -> Option<u64> {
        self.current
            .load()
            .as_ref()
            .map(|l| l.engine.snapshot().version)
    }

    /// Decodes, indexes and swaps in a snapshot. A bad one (checksum, format version) or an
    /// older one is rejected, logged and counted; the current one keeps serving.
    pub fn install(&self, bytes: &[u8]) -> Result<u64, InstallError> {
        let result = self.try_install(bytes);
        if let Err(error) = &result {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, "snapshot rejected; the current one keeps serving");
        }
        result
    }

    fn try_install(&self, bytes: &[u8]) -> Result<u64, InstallError> {
        let header = marquee_snapshot::Header::parse(bytes)?;
        if let Some(current) = self.version()
            && header.version <= current
        {
            return Err(InstallError::Stale {
                offered: header.version,
                current,
            });
        }
        let snapshot = Snapshot::decode(bytes)?;
        let version = snapshot.version;
        let line_items = snapshot.data.line_items.len();
        let engine = Engine::new(Arc::new(snapshot));
        self.current.store(Some(Arc::new(Loaded {
            engine,
            controls: ControlArray::new(line_items),
            etag: header.etag(),
        })));
        self.swaps.fetch_add(1, Ordering::Relaxed);
        tracing::info!(version, line_items, "snapshot swapped in");
        Ok(version)
    }

    /// Installs the snapshot kept on disk by an earlier run, if any.
    pub fn install_local_copy(&self, dir: &Path) -> Option<u64> {
        let bytes = std::fs::read(local_copy(dir)).ok()?;
        self.install(&bytes).ok()
    }
}

pub fn local_copy(dir: &Path) -> PathBuf {
    dir.join(LOCAL_COPY)
}

/// Keeps a snapshot on disk (write, fsync, rename), so a restart without the manager serves.
pub fn save_local_copy(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!("{LOCAL_COPY}.tmp"));
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, local_copy(dir))
}
