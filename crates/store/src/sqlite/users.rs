//! [`UserStore`] on SQLite: `users` and `user_sessions` (migration 6).

use async_trait::async_trait;
use marquee_model::Role;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{SqliteStore, backend, owner_fits_role};
use crate::shared::timestamp;
use crate::{NewSession, NewUser, SessionRecord, StoreError, UserRecord, UserStore};

const USER_COLUMNS: &str = "u.id, u.name, u.role, u.owner_id, u.password_hash, u.created_at";

/// Reads the user columns starting at column 0 of `row`.
fn read_user(row: &Row<'_>) -> Result<UserRecord, StoreError> {
    let id: u64 = row.get(0).map_err(backend)?;
    let role: String = row.get(2).map_err(backend)?;
    let role = Role::parse(&role)
        .ok_or_else(|| StoreError::Corrupt(format!("user {id}: role {role:?}")))?;
    Ok(UserRecord {
        id,
        name: row.get(1).map_err(backend)?,
        role,
        owner_id: row.get(3).map_err(backend)?,
        password_hash: row.get(4).map_err(backend)?,
        created_at: timestamp(row.get(5).map_err(backend)?, &format!("user {id}"))?,
    })
}

fn find_user_in(conn: &Connection, name: &str) -> Result<Option<UserRecord>, StoreError> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users u WHERE u.name = ?1");
    let mut stmt = conn.prepare(&sql).map_err(backend)?;
    let mut rows = stmt.query([name]).map_err(backend)?;
    rows.next().map_err(backend)?.map(read_user).transpose()
}

fn find_session_in(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<SessionRecord>, StoreError> {
    let sql = format!(
        "SELECT {USER_COLUMNS}, s.csrf_token, s.created_at, s.expires_at
         FROM user_sessions s JOIN users u ON u.id = s.user_id WHERE s.session_hash = ?1"
    );
    let mut stmt = conn.prepare(&sql).map_err(backend)?;
    let mut rows = stmt.query([&hash[..]]).map_err(backend)?;
    let Some(row) = rows.next().map_err(backend)? else {
        return Ok(None);
    };
    let user = read_user(row)?;
    let what = format!("session of user {}", user.id);
    Ok(Some(SessionRecord {
        csrf_token: row.get(6).map_err(backend)?,
        created_at: timestamp(row.get(7).map_err(backend)?, &what)?,
        expires_at: timestamp(row.get(8).map_err(backend)?, &what)?,
        user,
    }))
}

#[async_trait]
impl UserStore for SqliteStore {
    async fn create_user(&self, user: NewUser) -> Result<UserRecord, StoreError> {
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
            Ok(UserRecord {
                id,
                name: user.name,
                role: user.role,
                owner_id: user.owner_id,
                password_hash: user.password_hash,
                created_at: now,
            })
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
}
