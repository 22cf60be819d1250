//! [`UserStore`] on PostgreSQL: `users` and `user_sessions` (migration 2).

use async_trait::async_trait;
use jiff::Timestamp;
use marquee_model::Role;
use tokio_postgres::Row;

use super::{PostgresStore, Tx, execute, get, owner_fits_role, query, to_u64};
use crate::shared::{sql_id, timestamp};
use crate::{NewSession, NewUser, SessionRecord, StoreError, UserRecord, UserStore};

const USER_COLUMNS: &str = "u.id, u.name, u.role, u.owner_id, u.password_hash, u.created_at";

/// Reads the user columns starting at column 0 of `row`.
fn read_user(row: &Row) -> Result<UserRecord, StoreError> {
    let id = to_u64(get(row, 0)?, "user id")?;
    let role: String = get(row, 2)?;
    let role = Role::parse(&role)
        .ok_or_else(|| StoreError::Corrupt(format!("user {id}: role {role:?}")))?;
    let owner_id: Option<i64> = get(row, 3)?;
    Ok(UserRecord {
        id,
        name: get(row, 1)?,
        role,
        owner_id: owner_id.map(|o| to_u64(o, "owner id")).transpose()?,
        password_hash: get(row, 4)?,
        created_at: timestamp(get(row, 5)?, &format!("user {id}"))?,
    })
}

async fn find_user_in(tx: &Tx<'_>, name: &str) -> Result<Option<UserRecord>, StoreError> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users u WHERE u.name = $1");
    query(tx, &sql, &[&name])
        .await?
        .first()
        .map(read_user)
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
    let rows = query(tx, &sql, &[&&hash[..]]).await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let user = read_user(row)?;
    let what = format!("session of user {}", user.id);
    Ok(Some(SessionRecord {
        csrf_token: get(row, 6)?,
        created_at: timestamp(get(row, 7)?, &what)?,
        expires_at: timestamp(get(row, 8)?, &what)?,
        user,
    }))
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
    Ok(UserRecord {
        id: to_u64(get(row, 0)?, "user id")?,
        name: user.name,
        role: user.role,
        owner_id: user.owner_id,
        password_hash: user.password_hash,
        created_at: now,
    })
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
    async fn create_user(&self, user: NewUser) -> Result<UserRecord, StoreError> {
        in_write!(self, |tx, now| create_user_in(&tx, user, now).await?)
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
}
