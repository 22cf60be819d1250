//! [`UserStore`] on PostgreSQL: `users` and `user_sessions` (migration 2).
//!
//! Deliberate twin of `sqlite/users.rs` (the same statements in PostgreSQL's dialect).

use async_trait::async_trait;
use jiff::Timestamp;

use super::{PostgresStore, Tx, execute, owner_fits_role, query, write_audit};
use crate::audit::NewEntry;
use crate::shared::rows::{self, Columns, USER_COLUMNS};
use crate::shared::{sql_id, user_record};
use crate::{
    Actor, AuditAction, DeletedUser, NewSession, NewUser, SessionRecord, StoreError, UserRecord,
    UserStore,
};

async fn find_user_in(tx: &Tx<'_>, name: &str) -> Result<Option<UserRecord>, StoreError> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users u WHERE u.name = $1");
    query(tx, &sql, &[&name])
        .await?
        .first()
        .map(rows::user)
        .transpose()
}

async fn find_session_in(
    tx: &Tx<'_>,
    hash: &[u8; 32],
) -> Result<Option<SessionRecord>, StoreError> {
    let sql = format!(
        "SELECT {USER_COLUMNS}, s.csrf_token, s.created_at, s.expires_at
         FROM user_sessions s JOIN users u ON u.id = s.user_id WHERE s.session_hash = $1"
    );
    query(tx, &sql, &[&&hash[..]])
        .await?
        .first()
        .map(rows::session)
        .transpose()
}

async fn create_user_in(
    tx: &Tx<'_>,
    user: NewUser,
    now: Timestamp,
) -> Result<UserRecord, StoreError> {
    if !owner_fits_role(tx, user.role, user.owner_id).await? {
        return Err(StoreError::BadUserOwner {
            role: user.role,
            owner: user.owner_id,
        });
    }
    // Under the write lock, so no other writer takes the name in between.
    if find_user_in(tx, &user.name).await?.is_some() {
        return Err(StoreError::UserNameTaken { name: user.name });
    }
    let owner = user.owner_id.and_then(sql_id);
    let rows = query(
        tx,
        "INSERT INTO users (name, role, owner_id, password_hash, created_at)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
        &[
            &user.name,
            &user.role.as_str(),
            &owner,
            &user.password_hash,
            &now.as_microsecond(),
        ],
    )
    .await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Corrupt("no id returned by users".to_owned()))?;
    Ok(user_record(row.u64(0, "user id")?, user, now))
}

async fn delete_user_in(tx: &Tx<'_>, name: &str) -> Result<Option<DeletedUser>, StoreError> {
    let Some(user) = find_user_in(tx, name).await? else {
        return Ok(None);
    };
    let id = sql_id(user.id)
        .ok_or_else(|| StoreError::Corrupt(format!("user id {} out of range", user.id)))?;
    let sessions = execute(tx, "DELETE FROM user_sessions WHERE user_id = $1", &[&id]).await?;
    execute(tx, "DELETE FROM users WHERE id = $1", &[&id]).await?;
    Ok(Some(DeletedUser { user, sessions }))
}

async fn create_session_in(
    tx: &Tx<'_>,
    session: NewSession,
    now: Timestamp,
) -> Result<(), StoreError> {
    let unknown = StoreError::UnknownUser {
        id: session.user_id,
    };
    let Some(user_id) = sql_id(session.user_id) else {
        return Err(unknown);
    };
    if query(tx, "SELECT 1 FROM users WHERE id = $1", &[&user_id])
        .await?
        .is_empty()
    {
        return Err(unknown);
    }
    execute(
        tx,
        "DELETE FROM user_sessions WHERE expires_at <= $1",
        &[&now.as_microsecond()],
    )
    .await?;
    execute(
        tx,
        "INSERT INTO user_sessions (session_hash, user_id, csrf_token, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &&session.hash[..],
            &user_id,
            &session.csrf_token,
            &now.as_microsecond(),
            &session.expires_at.as_microsecond(),
        ],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl UserStore for PostgresStore {
    async fn create_user(&self, user: NewUser, by: &Actor) -> Result<UserRecord, StoreError> {
        in_write!(self, |tx, now| {
            let created = create_user_in(&tx, user, now).await?;
            write_audit(
                &tx,
                &NewEntry::of_user(by, AuditAction::Create, &created, now)?,
            )
            .await?;
            created
        })
    }

    async fn find_user(&self, name: &str) -> Result<Option<UserRecord>, StoreError> {
        in_read!(self, |tx| find_user_in(&tx, name).await?)
    }

    async fn create_session(&self, session: NewSession) -> Result<(), StoreError> {
        in_write!(self, |tx, now| create_session_in(&tx, session, now).await?)
    }

    async fn find_session(&self, hash: &[u8; 32]) -> Result<Option<SessionRecord>, StoreError> {
        in_read!(self, |tx| find_session_in(&tx, hash).await?)
    }

    async fn delete_session(&self, hash: &[u8; 32]) -> Result<bool, StoreError> {
        in_write!(self, |tx, _now| execute(
            &tx,
            "DELETE FROM user_sessions WHERE session_hash = $1",
            &[&&hash[..]]
        )
        .await?
            == 1)
    }

    async fn delete_user(&self, name: &str, by: &Actor) -> Result<Option<DeletedUser>, StoreError> {
        in_write!(self, |tx, now| {
            let deleted = delete_user_in(&tx, name).await?;
            if let Some(deleted) = &deleted {
                write_audit(
                    &tx,
                    &NewEntry::of_user(by, AuditAction::Delete, &deleted.user, now)?,
                )
                .await?;
            }
            deleted
        })
    }
}
