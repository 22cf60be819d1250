//! One active manager per database.
//!
//! Collection, aggregation and pacing keep state in memory between runs (log read positions,
//! the dedupe set, the lease book), so two managers on one database would read the same log
//! bytes and overwrite each other's leases. A process that runs them (`marquee serve`,
//! `marquee manager`) first takes the database's [`ManagerLock`] and holds it for its whole
//! life; commands that only migrate, copy or read take none and run alongside it.
//!
//! Aggregation does not rely on the lock alone: a run's commit moves each checkpoint only from
//! the position the run started from, in the same transaction
//! ([`StatsStore::commit_run`](crate::StatsStore::commit_run)), so a run still in flight when
//! its manager lost the lock (below) is refused ([`CheckpointMoved`](crate::CheckpointMoved))
//! once the new manager has committed those log bytes, never counted twice. The lease book has
//! no such fence: a pacing round in flight may still store it once.
//!
//! - SQLite: an exclusive advisory lock (`flock`) on `FILE.manager-lock` next to the database
//!   file, which holds the holder's process id. The kernel releases it when the process ends,
//!   however it ends.
//! - PostgreSQL: a session-level advisory lock (`pg_try_advisory_lock`, key in
//!   `postgres/manager_lock.rs`) held by a connection of its own. The server releases it when
//!   that session ends: the holder stopped, crashed or lost its connection. The holder then
//!   takes it again once the server answers; if another manager was faster,
//!   [`ManagerLock::lost`] resolves and the holder must stop.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{Store, StoreError};

/// Proof that this process is the database's active manager, until dropped (or until
/// [`lost`](ManagerLock::lost) resolves).
#[derive(Debug)]
pub struct ManagerLock {
    held: Held,
}

#[derive(Debug)]
enum Held {
    /// Closing the file (on drop, or when the process ends) releases the lock.
    File { _file: File },
    /// The task that owns the lock's connection and takes the lock again after a reconnect;
    /// aborting it closes the session, which releases the lock. `lost` turns true when another
    /// manager took the lock in between.
    Session {
        task: JoinHandle<()>,
        lost: watch::Receiver<bool>,
    },
}

/// What an attempt at the manager lock found.
#[derive(Debug)]
pub enum LockAttempt {
    Acquired(ManagerLock),
    /// Another manager holds it; the text says which, as far as the database knows.
    HeldBy(String),
}

impl ManagerLock {
    pub(crate) fn session(task: JoinHandle<()>, lost: watch::Receiver<bool>) -> ManagerLock {
        ManagerLock {
            held: Held::Session { task, lost },
        }
    }

    /// Resolves once another manager holds the lock: this one must stop aggregating and
    /// pacing at once. Never resolves for a lock that cannot be lost (SQLite's file lock).
    pub async fn lost(&self) {
        if let Held::Session { lost, .. } = &self.held {
            let mut lost = lost.clone();
            if lost.wait_for(|lost| *lost).await.is_ok() {
                return;
            }
        }
        std::future::pending().await
    }

    /// Whether [`lost`](ManagerLock::lost) has resolved.
    pub fn is_lost(&self) -> bool {
        match &self.held {
            Held::File { .. } => false,
            Held::Session { lost, .. } => *lost.borrow(),
        }
    }
}

impl Drop for ManagerLock {
    fn drop(&mut self) {
        if let Held::Session { task, .. } = &self.held {
            task.abort();
        }
    }
}

/// Takes the manager lock of the database `store` holds, waiting (and retrying every `retry`)
/// while another manager holds it: a rolling deploy starts the new manager before the old one
/// stops, and the new one takes over when the old one is gone. Says once that it waits.
pub async fn wait_for_manager_lock(
    store: &dyn Store,
    retry: Duration,
) -> Result<ManagerLock, StoreError> {
    let mut waited = false;
    loop {
        match store.try_lock_manager().await? {
            LockAttempt::Acquired(lock) => {
                if waited {
                    tracing::info!("the active manager stopped; this manager takes over");
                }
                return Ok(lock);
            }
            LockAttempt::HeldBy(holder) if !waited => {
                tracing::warn!(
                    %holder,
                    "another manager is active on this database; waiting for the active manager to stop"
                );
                waited = true;
            }
            LockAttempt::HeldBy(_) => {}
        }
        tokio::time::sleep(retry).await;
    }
}

/// The SQLite manager lock of the database file `database`.
pub(crate) fn try_lock_file(database: &Path) -> Result<LockAttempt, StoreError> {
    let path = lock_path(database);
    let failed = |what: &str, e: std::io::Error| {
        StoreError::Backend(format!("cannot {what} {}: {e}", path.display()).into())
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| failed("open", e))?;
    match file.try_lock() {
        Ok(()) => {
            // For the operator, and for the next manager's message; the lock is what counts.
            file.set_len(0).map_err(|e| failed("write", e))?;
            writeln!(file, "{}", std::process::id()).map_err(|e| failed("write", e))?;
            Ok(LockAttempt::Acquired(ManagerLock {
                held: Held::File { _file: file },
            }))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            // A holder that has not written its id yet is still a holder.
            let _ = file.read_to_string(&mut pid);
            Ok(LockAttempt::HeldBy(format!(
                "process {} (lock file {})",
                Some(pid.trim())
                    .filter(|pid| !pid.is_empty())
                    .unwrap_or("?"),
                path.display()
            )))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(failed("lock", e)),
    }
}

/// `DIR/NAME.manager-lock` for the database `DIR/NAME`: one lock per database file, even with
/// several databases in one directory.
fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".manager-lock");
    PathBuf::from(name)
}
