//! Lists kept from files and reloaded when the file changes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use arc_swap::{ArcSwap, Guard};

use crate::{CrawlerList, ListError, NetworkList};

/// A list that can be read from a file.
pub trait Loadable: Sized {
    /// Reads and compiles the list; errors name the file and, where one is at fault, the line.
    fn load(path: &Path) -> Result<Self, ListError>;

    /// Entries in the list, for [`Reload::Reloaded`].
    fn entries(&self) -> usize;
}

impl Loadable for CrawlerList {
    fn load(path: &Path) -> Result<Self, ListError> {
        CrawlerList::load(path)
    }

    fn entries(&self) -> usize {
        self.len()
    }
}

impl Loadable for NetworkList {
    fn load(path: &Path) -> Result<Self, ListError> {
        NetworkList::load(path)
    }

    fn entries(&self) -> usize {
        self.len()
    }
}

/// What [`Watched::reload_if_changed`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// The file looks as it did at the last look (or there is no file: a builtin list).
    Unchanged,
    /// The file changed and its new list is in use.
    Reloaded { entries: usize },
    /// The file changed (or became unreadable) and could not be used; the last good list stays
    /// in use. Reported once per change: until the file changes again, it is `Unchanged`.
    Failed(ListError),
}

/// A list kept from a file, reloaded when the file changes, the last good one kept on a bad
/// reload.
///
/// Readers take the current list with [`current`](Self::current), lock-free; one task calls
/// [`reload_if_changed`](Self::reload_if_changed) now and then (reloads are serialised, so
/// two callers never load the same change twice). A change is a different modification time
/// or length: replace the file by renaming a complete new one over it, so that a reload never
/// reads a half-written file (such a file would fail to parse, or worse, parse short).
pub struct Watched<T> {
    current: ArcSwap<T>,
    path: Option<PathBuf>,
    /// The file as last looked at; `None` before the first look.
    seen: Mutex<Option<Seen>>,
}

/// A file's state as far as a reload cares.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    File { modified: SystemTime, len: u64 },
    Unreadable,
}

impl<T> fmt::Debug for Watched<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watched")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<T: Loadable> Watched<T> {
    /// Keeps `initial`. With a path, the first [`reload_if_changed`](Self::reload_if_changed)
    /// loads that file; without one (a builtin list), the list never changes.
    pub fn new(initial: T, path: Option<PathBuf>) -> Self {
        Watched {
            current: ArcSwap::from_pointee(initial),
            path,
            seen: Mutex::new(None),
        }
    }

    /// Loads the list from `path` (at startup: a bad file is an error naming its file and
    /// line), to be reloaded when the file changes.
    pub fn open(path: &Path) -> Result<Self, ListError> {
        // Looked at before reading, so that a change made during the read is seen next time.
        let seen = look(path);
        let list = T::load(path)?;
        Ok(Watched {
            current: ArcSwap::from_pointee(list),
            path: Some(path.to_path_buf()),
            seen: Mutex::new(Some(seen)),
        })
    }

    /// The list in use. Lock-free; hold the guard briefly (for one request), as a reload waits
    /// for no reader but the old list is freed only when its last guard goes.
    pub fn current(&self) -> Guard<Arc<T>> {
        self.current.load()
    }

    /// The file the list is kept from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Loads the file again if its modification time or length changed since the last look.
    /// On failure the current list stays in use.
    pub fn reload_if_changed(&self) -> Reload {
        let Some(path) = &self.path else {
            return Reload::Unchanged;
        };
        // A poisoned lock only means a reload panicked; the state it guards is still valid.
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let now = look(path);
        if seen.as_ref() == Some(&now) {
            return Reload::Unchanged;
        }
        *seen = Some(now);
        match T::load(path) {
            Ok(list) => {
                let entries = list.entries();
                self.current.store(Arc::new(list));
                Reload::Reloaded { entries }
            }
            Err(e) => Reload::Failed(e),
        }
    }
}

// A deliberate twin of `look` in `marquee-geo`'s `source.rs`: neither crate may depend on the
// other (ARCHITECTURE.md), and a shared crate for ten lines would cost more than it saves.
fn look(path: &Path) -> Seen {
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
