use jiff::Timestamp;
use marquee_model::{Meta, ObjectKind, Role, Status};

/// One stored object, kind-erased: `body` is the JSON of the model type.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub kind: ObjectKind,
    pub meta: Meta,
    pub parent_id: Option<u64>,
    /// The advertiser or publisher at the root of this object's side (a root owns itself).
    pub owner_id: u64,
    pub name: String,
    pub status: Status,
    pub body: String,
}

/// What a create or update writes: the columns the store indexes plus the JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub parent_id: Option<u64>,
    pub name: String,
    pub status: Status,
    pub body: String,
}

/// Filters and paging for `Store::list`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListQuery {
    pub scope: Option<u64>,
    pub status: Option<Status>,
    pub parent_id: Option<u64>,
    /// Case-insensitive substring of the name.
    pub name_contains: Option<String>,
    /// Only ids greater than this (keyset paging).
    pub after: Option<u64>,
    pub limit: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewToken {
    pub role: Role,
    pub owner_id: Option<u64>,
    pub hash: [u8; 32],
    pub label: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TokenRecord {
    pub id: u64,
    pub role: Role,
    pub owner_id: Option<u64>,
    pub label: String,
    pub created_at: Timestamp,
}
