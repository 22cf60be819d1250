//! The manager's database behind one trait, [`Store`], and its embedded implementation,
//! [`SqliteStore`].
//!
//! Invariants:
//! - Callers only see [`Store`]; nothing outside this crate names a database type, so another
//!   backend (PostgreSQL) can be added without changing callers. Every backend passes the
//!   conformance suite in [`suite`] (feature `test-suite`).
//! - Every mutation of a managed object or link bumps the change counter in the same
//!   transaction, so "counter unchanged" means "snapshot unchanged".
//! - Every mutation of a managed object or link, and every creation or removal of an API token
//!   or dashboard user, writes its audit entry (who, as an [`Actor`]) in the same transaction:
//!   a change that rolls back leaves none.
//! - Tenant scoping is enforced here: a scoped call never reads or writes another owner's row.
//! - Applied migrations are immutable: a database whose applied migration differs from the one
//!   compiled in is refused.

mod audit;
mod copy;
mod error;
mod manager_lock;
mod pacing;
mod postgres;
mod record;
mod report_gate;
mod shared;
mod sqlite;
mod stats;
#[cfg(feature = "test-suite")]
pub mod stats_suite;
#[cfg(feature = "test-suite")]
pub mod suite;
#[cfg(feature = "test-suite")]
pub mod test_postgres;
mod typed;
mod users;

pub use audit::{Actor, AuditAction, AuditEntry, AuditKind, AuditQuery, MAX_AUDIT_PAGE};
pub use copy::{CopyError, CopySummary, copy_sqlite_to_postgres};
pub use error::{CheckpointMoved, MigrationError, StoreError};
pub use manager_lock::{LockAttempt, ManagerLock, wait_for_manager_lock};
pub use marquee_model::{Catalog, Meta, Stored};
pub use pacing::PacingStore;
pub use postgres::PostgresStore;
pub use record::{Draft, ListQuery, NewToken, Record, TokenRecord};
pub use sqlite::SqliteStore;
pub use stats::{
    Checkpoint, CheckpointMove, CheckpointPosition, CollectionState, RunWrite, RunWritten,
    StatsStore,
};
pub use users::{DeletedUser, NewSession, NewUser, SessionRecord, UserRecord, UserStore};

use async_trait::async_trait;
use marquee_model::{
    CreativeAssignment, CreativeId, LineItemId, ObjectKind, PlacementId, Principal,
};

/// Most rows one `list` call returns.
pub const MAX_PAGE: u32 = 500;

/// The manager's database: managed objects, links and tokens here, aggregates through the
/// [`StatsStore`] supertrait, dashboard users and sessions through [`UserStore`]. Object bodies are the JSON of the model types; the typed helpers on
/// `dyn Store` (see `typed.rs`) convert.
///
/// `scope` is the owner (advertiser or publisher id) a tenant is confined to, or `None` for
/// admins. A row outside the scope behaves exactly as a missing row. A scope is only an id:
/// advertiser 5 and publisher 5 share it, so callers must also check the side
/// (`Principal::may_access`).
#[async_trait]
pub trait Store: StatsStore + PacingStore + UserStore + Send + Sync + std::fmt::Debug {
    /// Inserts a new object at version 1. Its owner is derived from its parent (a root is its
    /// own owner). Fails with `ParentNotFound` if the parent is missing or outside `scope`, and
    /// `ParentArchived` if it is archived.
    ///
    /// A draft of a child kind without a parent fails with `ParentNotFound` (id 0); a draft of a
    /// root kind with a parent is `Corrupt` (`Draft::of` never makes either). A root cannot be
    /// created with a `scope` (a tenant cannot make another tenant): `ParentNotFound` naming
    /// the root kind and the scope.
    async fn create(
        &self,
        kind: ObjectKind,
        draft: Draft,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError>;

    async fn get(
        &self,
        kind: ObjectKind,
        id: u64,
        scope: Option<u64>,
    ) -> Result<Record, StoreError>;

    /// Rows in id order after `query.after`, at most `query.limit` (clamped to
    /// `1..=`[`MAX_PAGE`]). `name_contains` is literal (`%` and `_` are no wildcards) and
    /// case-insensitive for ASCII letters.
    async fn list(&self, kind: ObjectKind, query: &ListQuery) -> Result<Vec<Record>, StoreError>;

    /// Replaces name, status and body if the stored version is `expected_version`, and bumps
    /// the version. Fails with `VersionConflict` on a stale version, `Archived` if the object is
    /// archived, `ParentImmutable` if the draft names another parent.
    async fn update(
        &self,
        kind: ObjectKind,
        id: u64,
        expected_version: u64,
        draft: Draft,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError>;

    /// Sets the status to archived (idempotent: archiving an archived object returns it as is).
    /// The body's `status` field is set too, so the decoded object says archived.
    async fn archive(
        &self,
        kind: ObjectKind,
        id: u64,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError>;

    /// Links a line item to a placement; both must exist and not be archived. Returns whether a
    /// new link was made (and only then is the change audited, on the line item).
    async fn link(
        &self,
        line_item: LineItemId,
        placement: PlacementId,
        by: &Actor,
    ) -> Result<bool, StoreError>;

    /// Returns whether a link was removed. Both ends must exist and not be archived, as for
    /// `link`.
    async fn unlink(
        &self,
        line_item: LineItemId,
        placement: PlacementId,
        by: &Actor,
    ) -> Result<bool, StoreError>;

    /// Audit entries matching `query`, newest first, at most `query.limit` (clamped to
    /// `1..=`[`MAX_AUDIT_PAGE`]).
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError>;

    /// The placements a line item is linked to, in id order. The line item must be in `scope`.
    async fn placements_of(
        &self,
        line_item: LineItemId,
        scope: Option<u64>,
    ) -> Result<Vec<PlacementId>, StoreError>;

    /// Assigns a library creative to a line item, or changes the weight and flight of its
    /// assignment there. Both must be in `scope` (else `NotFound`) and not archived
    /// (`Archived`), of the same advertiser (`OtherAdvertiser`), and the line item must not be
    /// the one the creative was uploaded under (`UploadedUnder`). Returns whether the
    /// assignment is new; a change is counted and audited on the line item, a write that
    /// changes nothing is neither.
    async fn assign(
        &self,
        assignment: CreativeAssignment,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<bool, StoreError>;

    /// Removes a creative's assignment from a line item (in `scope`, not archived). Returns
    /// whether there was one; only then is the change counted and audited.
    async fn unassign(
        &self,
        line_item: LineItemId,
        creative: CreativeId,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<bool, StoreError>;

    /// The creatives assigned to a line item (in `scope`) from the library, in creative id
    /// order; not those uploaded under it.
    async fn assignments_of(
        &self,
        line_item: LineItemId,
        scope: Option<u64>,
    ) -> Result<Vec<CreativeAssignment>, StoreError>;

    /// The line items a creative (in `scope`) is assigned to, in line item id order; not the
    /// one it was uploaded under.
    async fn assignments_to(
        &self,
        creative: CreativeId,
        scope: Option<u64>,
    ) -> Result<Vec<CreativeAssignment>, StoreError>;

    /// Copies a line item (in `scope`, any status but archived) in one transaction: a new,
    /// paused line item in the same campaign with the same body (targeting, caps, goal, …),
    /// named `name` or "Copy of …", linked to the same placements and using the same creatives
    /// (the original's own with their weight, and its assignments) without duplicating any.
    /// Each step is audited as its own change. Returns the new line item.
    async fn copy_line_item(
        &self,
        line_item: LineItemId,
        name: Option<String>,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError>;

    /// Stores a token's hash, audited as made `by`. A tenant role's owner must exist (an
    /// advertiser for the advertiser role, a publisher for the publisher role); an admin has
    /// none.
    async fn create_token(&self, token: NewToken, by: &Actor) -> Result<TokenRecord, StoreError>;

    /// The principal of the token with this SHA-256 hash, if any.
    async fn find_token(&self, hash: &[u8; 32]) -> Result<Option<Principal>, StoreError>;

    /// Every API token, in id order (their hashes stay in the database).
    async fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;

    /// Deletes the token with this id, so that `find_token` no longer finds it: the next API
    /// call with it is refused. Returns what was deleted, or `None` if no token has this id.
    /// A revocation is audited as made `by`.
    async fn revoke_token(&self, id: u64, by: &Actor) -> Result<Option<TokenRecord>, StoreError>;

    /// Monotonic counter of changes to objects and links.
    async fn change_counter(&self) -> Result<u64, StoreError>;

    /// Every active object and every link, read in one transaction, with the change counter
    /// they correspond to.
    async fn catalog(&self) -> Result<Catalog, StoreError>;

    /// Tries to become this database's one active manager (see [`ManagerLock`]); a process
    /// that aggregates or paces holds the lock for its whole life. Does not wait: see
    /// [`wait_for_manager_lock`].
    async fn try_lock_manager(&self) -> Result<LockAttempt, StoreError>;
}
