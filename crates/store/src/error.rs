use marquee_model::{ObjectKind, Role};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no {} with id {id}", kind.name())]
    NotFound { kind: ObjectKind, id: u64 },
    #[error("no {} with id {id}", kind.name())]
    ParentNotFound { kind: ObjectKind, id: u64 },
    #[error("{} {id} is archived", kind.name())]
    ParentArchived { kind: ObjectKind, id: u64 },
    #[error("{} {id} is at version {current}, not {expected}", kind.name())]
    VersionConflict {
        kind: ObjectKind,
        id: u64,
        expected: u64,
        current: u64,
    },
    #[error("{} {id} is archived and can no longer change", kind.name())]
    Archived { kind: ObjectKind, id: u64 },
    #[error("{} {id} cannot move to another parent", kind.name())]
    ParentImmutable { kind: ObjectKind, id: u64 },
    /// A creative assigned to a line item of another advertiser.
    #[error(
        "creative {creative} belongs to another advertiser than line item {line_item}; \
         a line item can use only its own advertiser's creatives"
    )]
    OtherAdvertiser { creative: u64, line_item: u64 },
    /// A creative assigned to the line item it was uploaded under, which uses it already.
    #[error(
        "creative {creative} was uploaded under line item {line_item}, which uses it already; \
         change the creative's own weight instead"
    )]
    UploadedUnder { creative: u64, line_item: u64 },
    #[error("{}", describe_bad_owner("token", *role, *owner))]
    BadTokenOwner { role: Role, owner: Option<u64> },
    #[error("{}", describe_bad_owner("user", *role, *owner))]
    BadUserOwner { role: Role, owner: Option<u64> },
    #[error("a user named {name:?} already exists")]
    UserNameTaken { name: String },
    #[error("no user with id {id}")]
    UnknownUser { id: u64 },
    /// Every turn for a report query was taken and none came free in time.
    #[error("too many reports are running; try again in {retry_after_secs} s")]
    Busy { retry_after_secs: u64 },
    #[error(transparent)]
    Migration(#[from] MigrationError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A fenced aggregation run: another manager committed its log bytes first.
    #[error(transparent)]
    CheckpointMoved(#[from] CheckpointMoved),
    #[error("database error: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// The fence of [`StatsStore::commit_run`](crate::StatsStore::commit_run) that stopped a
    /// run, if that is what this error is.
    pub fn checkpoint_moved(&self) -> Option<&CheckpointMoved> {
        match self {
            StoreError::CheckpointMoved(moved) => Some(moved),
            _ => None,
        }
    }
}

/// An aggregation run's commit found a checkpoint it moves no longer where the run started
/// reading (or a shard the run found without one now has one): another manager committed the
/// same log bytes first. The whole run was rolled back; nothing of it was written. Returned by
/// [`StatsStore::commit_run`](crate::StatsStore::commit_run) as
/// [`StoreError::CheckpointMoved`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the checkpoint of shard {shard} of source {source_name:?} moved after this run started \
     reading there: another manager committed those log bytes first, so nothing of this run \
     was written"
)]
pub struct CheckpointMoved {
    /// The source (edge) of the first such shard, in (source, shard) order.
    pub source_name: String,
    pub shard: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error(
        "migration {version} ({name}) was changed after it was applied to this database; \
         restore the original or use a new migration"
    )]
    Changed { version: u32, name: String },
    #[error(
        "the database has migration {version}, which this binary does not know; \
         it was written by a newer Marquee"
    )]
    Unknown { version: u32 },
}

/// `what` is the thing bound to the owner: "token" or "user".
fn describe_bad_owner(what: &str, role: Role, owner: Option<u64>) -> String {
    match (role, owner) {
        (Role::Admin, _) => format!("an admin {what} has no owner; drop --owner"),
        (_, None) => format!(
            "a {} {what} needs an owner: the id of its {}",
            role.as_str(),
            role.as_str()
        ),
        (_, Some(id)) => format!(
            "a {} {what} needs an existing {} as owner; there is no {} {id}",
            role.as_str(),
            role.as_str(),
            role.as_str()
        ),
    }
}
