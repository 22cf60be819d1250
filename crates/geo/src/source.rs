//! The databases in use, reloaded when their files change.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use arc_swap::{ArcSwap, Guard};

use crate::GeoError;
use crate::database::{DatabaseFile, GeoDatabase, Role};

/// The files a [`GeoSource`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeoPaths {
    /// A City or Country database: GeoIP2, GeoLite2 or DB-IP's lite files.
    pub location: PathBuf,
    /// An ASN or Connection-Type database, if any.
    pub network: Option<PathBuf>,
}

/// What [`GeoSource::reload_if_changed`] did.
#[derive(Debug)]
pub enum Reload {
    /// Neither file looks different from the last look (or the source has no files).
    Unchanged,
    /// A changed file was read and is in use, in the database of this generation.
    Reloaded { generation: u64 },
    /// A changed file (or both) could not be used, for these reasons; the last good copy of
    /// that file stays in use. When the other file changed too and loaded, it is in use, in
    /// the database of generation `generation`. Reported once per change: until the file
    /// changes again, it is `Unchanged`.
    Failed {
        errors: Vec<GeoError>,
        generation: Option<u64>,
    },
}

/// The databases in use, kept from files and reloaded when they change; a file that fails
/// to load keeps the last good copy of it.
///
/// Readers take the current databases with [`load`](Self::load), lock-free and cheap. One
/// periodic task calls [`reload_if_changed`](Self::reload_if_changed), which looks at each
/// file's modification time and length; reading and checking a changed file takes a while
/// (see the README), so it belongs off the request-serving threads. Replace a file by
/// renaming a complete new one over it, as `geoipupdate` does: a file rewritten in place may
/// be read half-written, which fails and is retried when the file changes again.
pub struct GeoSource {
    current: ArcSwap<GeoDatabase>,
    paths: Option<GeoPaths>,
    /// The files as last looked at: location, network.
    seen: Mutex<(Seen, Seen)>,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
}

/// A file's state as far as a reload cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    File {
        modified: SystemTime,
        len: u64,
    },
    Unreadable,
    /// No file configured.
    None,
}

impl fmt::Debug for GeoSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeoSource")
            .field("paths", &self.paths)
            .field("generation", &self.current.load().generation())
            .field("reloads", &self.reloads())
            .field("reload_failures", &self.reload_failures())
            .finish_non_exhaustive()
    }
}

impl GeoSource {
    /// Opens the files (at startup: a bad file is an error naming it), to be reloaded when
    /// they change.
    pub fn open(paths: GeoPaths) -> Result<GeoSource, GeoError> {
        // Looked at before reading, so that a change made during the read is seen next time.
        let seen = (look(Some(&paths.location)), look(paths.network.as_deref()));
        let database = GeoDatabase::open(&paths.location, paths.network.as_deref())?;
        Ok(GeoSource {
            current: ArcSwap::from_pointee(database),
            paths: Some(paths),
            seen: Mutex::new(seen),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
        })
    }

    /// A source that never changes, for a database built in memory (such as the demo one).
    pub fn fixed(database: GeoDatabase) -> GeoSource {
        GeoSource {
            current: ArcSwap::from_pointee(database),
            paths: None,
            seen: Mutex::new((Seen::None, Seen::None)),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
        }
    }

    /// The databases in use. Lock-free; hold the guard briefly (for one request): a reload
    /// waits for no reader, but the old databases' memory is freed only when the last guard
    /// or `Arc` of them goes.
    pub fn load(&self) -> Guard<Arc<GeoDatabase>> {
        self.current.load()
    }

    /// The files read, if any.
    pub fn paths(&self) -> Option<&GeoPaths> {
        self.paths.as_ref()
    }

    /// Reloads that put a changed file in use, since the source was opened.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Changed files that could not be used, since the source was opened.
    pub fn reload_failures(&self) -> u64 {
        self.reload_failures.load(Ordering::Relaxed)
    }

    /// Reads again each file whose modification time or length changed since the last look
    /// (or that became unreadable), and swaps in the databases with it if it parses and
    /// checks. Reloads are serialised: two callers never load the same change twice.
    pub fn reload_if_changed(&self) -> Reload {
        let Some(paths) = &self.paths else {
            return Reload::Unchanged;
        };
        // A poisoned lock only means a reload panicked; the state it guards is still valid.
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let now = (look(Some(&paths.location)), look(paths.network.as_deref()));
        let location_changed = now.0 != seen.0;
        let network_changed = now.1 != seen.1;
        if !location_changed && !network_changed {
            return Reload::Unchanged;
        }
        *seen = now;

        let current = self.current.load_full();
        let mut errors = Vec::new();
        let mut location = Arc::clone(current.location_file());
        let mut network = current.network_file().cloned();
        let mut replaced = false;
        if location_changed {
            match DatabaseFile::read(&paths.location, Role::Location) {
                Ok(file) => {
                    location = Arc::new(file);
                    replaced = true;
                }
                Err(e) => errors.push(e),
            }
        }
        if let (true, Some(path)) = (network_changed, &paths.network) {
            match DatabaseFile::read(path, Role::Network) {
                Ok(file) => {
                    network = Some(Arc::new(file));
                    replaced = true;
                }
                Err(e) => errors.push(e),
            }
        }

        let generation = replaced.then(|| {
            let database = GeoDatabase::from_files(location, network);
            let generation = database.generation();
            self.current.store(Arc::new(database));
            self.reloads.fetch_add(1, Ordering::Relaxed);
            generation
        });
        if errors.is_empty() {
            match generation {
                Some(generation) => Reload::Reloaded { generation },
                // Not reached: a change with no error replaced a file.
                None => Reload::Unchanged,
            }
        } else {
            self.reload_failures
                .fetch_add(errors.len() as u64, Ordering::Relaxed);
            Reload::Failed { errors, generation }
        }
    }
}

// A deliberate twin of `look` in `marquee-traffic`'s `watch.rs`: neither crate may depend on
// the other (ARCHITECTURE.md), and a shared crate for ten lines would cost more than it saves.
fn look(path: Option<&Path>) -> Seen {
    let Some(path) = path else {
        return Seen::None;
    };
    match std::fs::metadata(path) {
        Ok(meta) => match meta.modified() {
            Ok(modified) => Seen::File {
                modified,
                len: meta.len(),
            },
            // No platform the edge runs on lacks modification times.
            Err(_) => Seen::Unreadable,
        },
        Err(_) => Seen::Unreadable,
    }
}
