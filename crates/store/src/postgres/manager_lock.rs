//! The manager lock on PostgreSQL (see `crate::manager_lock`): a session-level advisory lock
//! held by a connection of its own, outside the pool (a pooled connection is shared and
//! recycled; the lock must live exactly as long as its session).

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config, NoTls};

use super::{PostgresStore, pg};
use crate::StoreError;
use crate::manager_lock::{LockAttempt, ManagerLock};

/// The advisory lock key of the active manager: any constant shared by every Marquee binary
/// and distinct from the migrations' key (the bytes spell "marqmngr"). Advisory locks belong
/// to one database, so managers of other databases on the same server do not contend.
const MANAGER_LOCK: i64 = 0x6d61_7271_6d6e_6772;

/// How long the holder waits before taking the lock again after its session ended.
const RETAKE_INTERVAL: Duration = Duration::from_secs(1);

/// A session holding the lock: the client, and the task driving its connection (which ends
/// when the session does, and with it the lock).
struct Session {
    _client: Client,
    connection: JoinHandle<Result<(), tokio_postgres::Error>>,
}

impl PostgresStore {
    pub(super) async fn try_lock_manager_session(&self) -> Result<LockAttempt, StoreError> {
        match lock_session(&self.config).await? {
            Ok(session) => {
                let (lost_sender, lost) = watch::channel(false);
                let task = tokio::spawn(keep(self.config.clone(), session, lost_sender));
                Ok(LockAttempt::Acquired(ManagerLock::session(task, lost)))
            }
            Err(holder) => Ok(LockAttempt::HeldBy(holder)),
        }
    }
}

/// Opens a session and takes the lock in it: the session, or who holds the lock.
async fn lock_session(config: &Config) -> Result<Result<Session, String>, StoreError> {
    let mut config = config.clone();
    config.application_name("marquee manager lock");
    // Without these the client notices a vanished server only after the kernel's defaults
    // (hours): a holder cut off from the server would go on while another took over.
    config
        .keepalives_idle(Duration::from_secs(10))
        .keepalives_interval(Duration::from_secs(5))
        .keepalives_retries(3);
    let (client, connection) = config.connect(NoTls).await.map_err(pg)?;
    let connection = tokio::spawn(connection);
    // The same from the server's side, so that a dead holder's lock is released within about
    // 25 s rather than the kernel's default (ignored over a Unix socket, which needs none).
    client
        .batch_execute(
            "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; \
             SET tcp_keepalives_count = 3",
        )
        .await
        .map_err(pg)?;
    let taken: bool = client
        .query_one("SELECT pg_try_advisory_lock($1)", &[&MANAGER_LOCK])
        .await
        .map_err(pg)?
        .get(0);
    if taken {
        return Ok(Ok(Session {
            _client: client,
            connection,
        }));
    }
    // The key's high and low halves are `classid` and `objid` of a bigint advisory lock.
    let holder = client
        .query_opt(
            "SELECT pid FROM pg_locks
             WHERE locktype = 'advisory' AND granted AND objsubid = 1
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND classid::bigint = ($1::bigint >> 32) AND objid::bigint = ($1::bigint & 4294967295)",
            &[&MANAGER_LOCK],
        )
        .await
        .map_err(pg)?
        .map(|row| row.get::<_, i32>(0));
    Ok(Err(match holder {
        Some(pid) => format!("PostgreSQL session {pid} (see pg_stat_activity)"),
        // Released between the two statements: the next attempt takes it.
        None => "a PostgreSQL session that just ended".to_owned(),
    }))
}

/// Holds the lock for as long as the `ManagerLock` lives: when the session ends (the server
/// restarted, the connection broke), takes the lock again in a new one as soon as the server
/// answers, and reports it lost if another manager was faster.
async fn keep(config: Config, mut session: Session, lost: watch::Sender<bool>) {
    loop {
        let ended = (&mut session.connection).await;
        tracing::warn!(
            reason = ?ended,
            "the connection holding the manager lock closed; taking the lock again"
        );
        session = loop {
            tokio::time::sleep(RETAKE_INTERVAL).await;
            match lock_session(&config).await {
                Ok(Ok(session)) => {
                    tracing::info!("manager lock held again");
                    break session;
                }
                Ok(Err(holder)) => {
                    tracing::error!(%holder, "another manager took the manager lock");
                    let _ = lost.send(true);
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot take the manager lock again yet; retrying");
                }
            }
        };
    }
}
