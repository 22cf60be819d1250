//! Dashboard users and their sign-in sessions. A user carries the roles of an API token (admin,
//! or a tenant bound to its advertiser or publisher) and an argon2 password hash, which the
//! store keeps as an opaque PHC string: hashing and verifying belong to the dashboard.
//!
//! Sessions are stored by the SHA-256 of their id, with the CSRF token bound to them and their
//! expiry. The store does not judge expiry: the caller compares `expires_at` with its clock.

use async_trait::async_trait;
use jiff::Timestamp;
use marquee_model::Role;

use crate::{Actor, StoreError};

#[derive(Debug, Clone, PartialEq)]
pub struct NewUser {
    pub name: String,
    pub role: Role,
    pub owner_id: Option<u64>,
    /// The password hash in PHC string form (`$argon2id$...`).
    pub password_hash: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UserRecord {
    pub id: u64,
    pub name: String,
    pub role: Role,
    pub owner_id: Option<u64>,
    pub password_hash: String,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// SHA-256 of the session id the browser holds.
    pub hash: [u8; 32],
    pub user_id: u64,
    pub csrf_token: String,
    pub expires_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub user: UserRecord,
    pub csrf_token: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

/// A user removed with [`UserStore::delete_user`], and how many of its sessions went with it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedUser {
    pub user: UserRecord,
    pub sessions: u64,
}

#[async_trait]
pub trait UserStore: Send + Sync {
    /// Stores a new user. Names are unique (`UserNameTaken`); a tenant role's owner must exist
    /// as for tokens (`BadUserOwner`). Audited as made `by`.
    async fn create_user(&self, user: NewUser, by: &Actor) -> Result<UserRecord, StoreError>;

    /// The user with exactly this name, if any.
    async fn find_user(&self, name: &str) -> Result<Option<UserRecord>, StoreError>;

    /// Stores a session for an existing user (`UnknownUser` otherwise). Sessions that expired before the store's clock are deleted in the same
    /// transaction, so the table holds only live and recently expired ones.
    async fn create_session(&self, session: NewSession) -> Result<(), StoreError>;

    /// The session with this hash and its user, expired or not.
    async fn find_session(&self, hash: &[u8; 32]) -> Result<Option<SessionRecord>, StoreError>;

    /// Removes a session (sign-out). Returns whether one was removed.
    async fn delete_session(&self, hash: &[u8; 32]) -> Result<bool, StoreError>;

    /// Removes the user with exactly this name and every session of theirs, in one
    /// transaction, so that no cookie of theirs signs in again. `None` if no user has the name.
    /// Audited as made `by`.
    async fn delete_user(&self, name: &str, by: &Actor) -> Result<Option<DeletedUser>, StoreError>;
}
