//! [`UserStore`] on SQLite: `users` and `user_sessions` (migration 6).
//!
//! Deliberate twin of `postgres/users.rs` (the same statements in SQLite's dialect).

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStore, backend, owner_fits_role, query_rows, write_audit};
use crate::audit::NewEntry;
use crate::shared::rows::{self, USER_COLUMNS};
use crate::shared::user_record;
use crate::{
    Actor, AuditAction, DeletedUser, NewSession, NewUser, SessionRecord, StoreError, UserRecord,
    UserStore,
};

fn find_user_in(conn: &Connection, name: &str) -> Result<Option<UserRecord>, StoreError> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users u WHERE u.name = ?1");
    let mut found = query_rows(conn, &sql, [name], |row| rows::user(row))?;
    Ok(found.pop())
}

fn find_session_in(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<SessionRecord>, StoreError> {
    let sql = format!(
        "SELECT {USER_COLUMNS}, s.csrf_token, s.created_at, s.expires_at
         FROM user_sessions s JOIN users u ON u.id = s.user_id WHERE s.session_hash = ?1"
    );
    let mut found = query_rows(conn, &sql, [&hash[..]], |row| rows::session(row))?;
    Ok(found.pop())
}

#[async_trait]
impl UserStore for SqliteStore {
    async fn create_user(&self, user: NewUser, by: &Actor) -> Result<UserRecord, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| {
            if !owner_fits_role(tx, user.role, user.owner_id)? {
                return Err(StoreError::BadUserOwner {
                    role: user.role,
                    owner: user.owner_id,
                });
            }
            if find_user_in(tx, &user.name)?.is_some() {
                return Err(StoreError::UserNameTaken { name: user.name });
            }
            tx.execute(
                "INSERT INTO users (name, role, owner_id, password_hash, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    user.name,
                    user.role.as_str(),
                    user.owner_id,
                    user.password_hash,
                    now.as_microsecond()
                ],
            )
            .map_err(backend)?;
            let id = u64::try_from(tx.last_insert_rowid())
                .map_err(|_| StoreError::Corrupt("negative id in users".to_owned()))?;
            let created = user_record(id, user, now);
            write_audit(
                tx,
                &NewEntry::of_user(&by, AuditAction::Create, &created, now)?,
            )?;
            Ok(created)
        })
        .await
    }

    async fn find_user(&self, name: &str) -> Result<Option<UserRecord>, StoreError> {
        let name = name.to_owned();
        self.read(move |tx| find_user_in(tx, &name)).await
    }

    async fn create_session(&self, session: NewSession) -> Result<(), StoreError> {
        self.write(move |tx, now| {
            let user_exists = tx
                .query_row(
                    "SELECT 1 FROM users WHERE id = ?1",
                    [session.user_id],
                    |_| Ok(()),
                )
                .optional()
                .map_err(backend)?
                .is_some();
            if !user_exists {
                return Err(StoreError::UnknownUser {
                    id: session.user_id,
                });
            }
            tx.execute(
                "DELETE FROM user_sessions WHERE expires_at <= ?1",
                [now.as_microsecond()],
            )
            .map_err(backend)?;
            tx.execute(
                "INSERT INTO user_sessions
                     (session_hash, user_id, csrf_token, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    &session.hash[..],
                    session.user_id,
                    session.csrf_token,
                    now.as_microsecond(),
                    session.expires_at.as_microsecond()
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn find_session(&self, hash: &[u8; 32]) -> Result<Option<SessionRecord>, StoreError> {
        let hash = *hash;
        self.read(move |tx| find_session_in(tx, &hash)).await
    }

    async fn delete_session(&self, hash: &[u8; 32]) -> Result<bool, StoreError> {
        let hash = *hash;
        self.write(move |tx, _| {
            let deleted = tx
                .execute(
                    "DELETE FROM user_sessions WHERE session_hash = ?1",
                    [&hash[..]],
                )
                .map_err(backend)?;
            Ok(deleted == 1)
        })
        .await
    }

    async fn delete_user(&self, name: &str, by: &Actor) -> Result<Option<DeletedUser>, StoreError> {
        let name = name.to_owned();
        let by = by.clone();
        self.write(move |tx, now| {
            let Some(user) = find_user_in(tx, &name)? else {
                return Ok(None);
            };
            let sessions = tx
                .execute("DELETE FROM user_sessions WHERE user_id = ?1", [user.id])
                .map_err(backend)?;
            tx.execute("DELETE FROM users WHERE id = ?1", [user.id])
                .map_err(backend)?;
            write_audit(
                tx,
                &NewEntry::of_user(&by, AuditAction::Delete, &user, now)?,
            )?;
            Ok(Some(DeletedUser {
                user,
                sessions: u64::try_from(sessions).unwrap_or(u64::MAX),
            }))
        })
        .await
    }
}
