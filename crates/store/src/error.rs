use marquee_model::{Kind, Role};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no {} with id {id}", kind.name())]
    NotFound { kind: Kind, id: u64 },
    #[error("no {} with id {id}", kind.name())]
    ParentNotFound { kind: Kind, id: u64 },
    #[error("{} {id} is archived", kind.name())]
    ParentArchived { kind: Kind, id: u64 },
    #[error("{} {id} is at version {current}, not {expected}", kind.name())]
    VersionConflict {
        kind: Kind,
        id: u64,
        expected: u64,
        current: u64,
    },
    #[error("{} {id} is archived and can no longer change", kind.name())]
    Archived { kind: Kind, id: u64 },
    #[error("{} {id} cannot move to another parent", kind.name())]
    ParentImmutable { kind: Kind, id: u64 },
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
    #[error("database error: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
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
