//! The audit log: who changed which managed object or account (API token, dashboard user),
//! when, and which fields. Each backend writes an entry in the same transaction as the change
//! it describes (so a change that rolls back leaves none); what an entry says is computed
//! here, once for both.

use jiff::Timestamp;
use marquee_model::{CreativeAssignment, ObjectKind, Principal, Role, Side};
use serde_json::{Map, Value};

use crate::{Record, StoreError, TokenRecord, UserRecord};

/// Most entries one `audit` call returns.
pub const MAX_AUDIT_PAGE: u32 = 500;

/// Who makes a change: an API token, a dashboard user or the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// `token:<id>`, `user:<name>` or `cli`; the audit's `principal` filter matches it exactly.
    pub principal: String,
    pub role: Role,
}

impl Actor {
    /// The holder of an API token.
    pub fn token(principal: &Principal) -> Actor {
        Actor {
            principal: format!("token:{}", principal.token_id),
            role: principal.role,
        }
    }

    /// A signed-in dashboard user.
    pub fn user(name: &str, role: Role) -> Actor {
        Actor {
            principal: format!("user:{name}"),
            role,
        }
    }

    /// The `marquee` command line, which runs with the database's own rights.
    pub fn cli() -> Actor {
        Actor {
            principal: "cli".to_owned(),
            role: Role::Admin,
        }
    }
}

/// What an entry is about: a managed object, or an account that acts on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    Object(ObjectKind),
    /// An API token: created or revoked (never its secret or hash).
    Token,
    /// A dashboard user: created or deleted (never its password or hash).
    User,
}

impl AuditKind {
    /// Every kind: the object kinds, then the accounts.
    pub fn all() -> impl Iterator<Item = AuditKind> {
        ObjectKind::ALL
            .into_iter()
            .map(AuditKind::Object)
            .chain([AuditKind::Token, AuditKind::User])
    }

    /// The object kind's name, `api_token` or `user`: what the `object_kind` column holds.
    pub fn name(self) -> &'static str {
        match self {
            AuditKind::Object(kind) => kind.name(),
            AuditKind::Token => "api_token",
            AuditKind::User => "user",
        }
    }

    pub fn parse(name: &str) -> Option<AuditKind> {
        AuditKind::all().find(|k| k.name() == name)
    }

    /// The managed object kind, none for an account.
    pub fn object(self) -> Option<ObjectKind> {
        match self {
            AuditKind::Object(kind) => Some(kind),
            AuditKind::Token | AuditKind::User => None,
        }
    }
}

impl From<ObjectKind> for AuditKind {
    fn from(kind: ObjectKind) -> Self {
        AuditKind::Object(kind)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    Create,
    Update,
    Archive,
    /// A placement linked to a line item (recorded on the line item).
    Link,
    /// A placement unlinked from a line item (recorded on the line item).
    Unlink,
    /// A library creative assigned to a line item, or its weight or flight there changed
    /// (recorded on the line item).
    Assign,
    /// A library creative's assignment removed from a line item (recorded on the line item).
    Unassign,
    /// An API token revoked.
    Revoke,
    /// A dashboard user deleted (with its sessions).
    Delete,
}

impl AuditAction {
    pub const ALL: [AuditAction; 9] = [
        AuditAction::Create,
        AuditAction::Update,
        AuditAction::Archive,
        AuditAction::Link,
        AuditAction::Unlink,
        AuditAction::Assign,
        AuditAction::Unassign,
        AuditAction::Revoke,
        AuditAction::Delete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Create => "create",
            AuditAction::Update => "update",
            AuditAction::Archive => "archive",
            AuditAction::Link => "link",
            AuditAction::Unlink => "unlink",
            AuditAction::Assign => "assign",
            AuditAction::Unassign => "unassign",
            AuditAction::Revoke => "revoke",
            AuditAction::Delete => "delete",
        }
    }

    pub fn parse(s: &str) -> Option<AuditAction> {
        AuditAction::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// One stored entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: u64,
    pub at: Timestamp,
    pub principal: String,
    pub role: Role,
    pub object_kind: AuditKind,
    pub object_id: u64,
    /// The object's name after the change (an account's: the token's label, the user's name).
    pub object_name: String,
    /// The advertiser or publisher the object belongs to, for tenant-scoped reads (an
    /// account's owner, 0 for an admin's; tenants never read accounts' entries).
    pub owner_id: u64,
    pub action: AuditAction,
    /// The changed fields only: `{"field": {"before": …, "after": …}}`, `null` for a side
    /// that has no value (a create's before).
    pub changes: Value,
}

/// Filters and paging for `Store::audit`, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditQuery {
    /// A tenant's side and owner: only its own objects' entries.
    pub scope: Option<(Side, u64)>,
    pub object_kind: Option<AuditKind>,
    pub object_id: Option<u64>,
    pub principal: Option<String>,
    /// Entries at or after this time.
    pub since: Option<Timestamp>,
    /// Entries before this time.
    pub until: Option<Timestamp>,
    /// Only ids below this (keyset paging: pass the last id of the previous page).
    pub before_id: Option<u64>,
    pub limit: u32,
}

/// What a write inserts into `audit`; the backend adds the id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewEntry {
    pub at: i64,
    pub principal: String,
    pub role: &'static str,
    pub object_kind: &'static str,
    pub object_id: i64,
    pub object_name: String,
    pub owner_id: i64,
    pub action: &'static str,
    pub changes: String,
}

impl NewEntry {
    /// The entry for a create, update or archive that turned `before` (none for a create)
    /// into `after`.
    pub(crate) fn of_write(
        by: &Actor,
        action: AuditAction,
        before: Option<&Record>,
        after: &Record,
    ) -> Result<NewEntry, StoreError> {
        let before = before.map(body_fields).transpose()?.unwrap_or_default();
        let after_fields = body_fields(after)?;
        Self::new(
            by,
            action,
            after,
            changed_fields(&before, &after_fields),
            after.meta.updated_at,
        )
    }

    /// The entry for linking (`Link`) or unlinking (`Unlink`) `placement` on `line_item`.
    pub(crate) fn of_link(
        by: &Actor,
        action: AuditAction,
        line_item: &Record,
        placement: u64,
        now: Timestamp,
    ) -> Result<NewEntry, StoreError> {
        let (before, after) = match action {
            AuditAction::Unlink => (Value::from(placement), Value::Null),
            _ => (Value::Null, Value::from(placement)),
        };
        let mut changes = Map::new();
        changes.insert("placement_id".to_owned(), change(before, after));
        Self::new(by, action, line_item, changes, now)
    }

    /// The entry for an assignment on `line_item` going from `before` to `after` (`None`: not
    /// assigned): `creative_id` always, and the weight and flight where they differ.
    pub(crate) fn of_assignment(
        by: &Actor,
        line_item: &Record,
        before: Option<&CreativeAssignment>,
        after: Option<&CreativeAssignment>,
        now: Timestamp,
    ) -> Result<NewEntry, StoreError> {
        let fields = |a: Option<&CreativeAssignment>| -> Map<String, Value> {
            let mut map = Map::new();
            if let Some(a) = a {
                map.insert("creative_id".to_owned(), a.creative_id.0.into());
                map.insert("weight".to_owned(), a.weight.into());
                let time = |t: Option<Timestamp>| t.map_or(Value::Null, |t| t.to_string().into());
                map.insert("start".to_owned(), time(a.start));
                map.insert("end".to_owned(), time(a.end));
            }
            map
        };
        let mut changes = changed_fields(&fields(before), &fields(after));
        // Named even when a weight change leaves it as it was, so every entry says which.
        if let Some(a) = after.or(before) {
            let id = Value::from(a.creative_id.0);
            changes
                .entry("creative_id")
                .or_insert_with(|| change(id.clone(), id));
        }
        let action = if after.is_some() {
            AuditAction::Assign
        } else {
            AuditAction::Unassign
        };
        Self::new(by, action, line_item, changes, now)
    }

    /// The entry for creating or revoking an API token: its role, owner and label.
    pub(crate) fn of_token(
        by: &Actor,
        action: AuditAction,
        token: &TokenRecord,
        now: Timestamp,
    ) -> Result<NewEntry, StoreError> {
        let fields = [
            ("role", Value::from(token.role.as_str())),
            ("owner_id", Value::from(token.owner_id)),
            ("label", Value::from(token.label.clone())),
        ];
        Self::of_account(
            by,
            action,
            AuditKind::Token,
            (token.id, &token.label, token.owner_id),
            fields,
            now,
        )
    }

    /// The entry for creating or deleting a dashboard user: its name, role and owner.
    pub(crate) fn of_user(
        by: &Actor,
        action: AuditAction,
        user: &UserRecord,
        now: Timestamp,
    ) -> Result<NewEntry, StoreError> {
        let fields = [
            ("name", Value::from(user.name.clone())),
            ("role", Value::from(user.role.as_str())),
            ("owner_id", Value::from(user.owner_id)),
        ];
        Self::of_account(
            by,
            action,
            AuditKind::User,
            (user.id, &user.name, user.owner_id),
            fields,
            now,
        )
    }

    /// An account made (`Create`: every field after) or removed (every field before).
    fn of_account(
        by: &Actor,
        action: AuditAction,
        kind: AuditKind,
        (id, name, owner): (u64, &str, Option<u64>),
        fields: [(&str, Value); 3],
        now: Timestamp,
    ) -> Result<NewEntry, StoreError> {
        let changes: Map<String, Value> = fields
            .into_iter()
            .map(|(field, value)| {
                let pair = match action {
                    AuditAction::Create => change(Value::Null, value),
                    _ => change(value, Value::Null),
                };
                (field.to_owned(), pair)
            })
            .collect();
        let sql_id = |value: u64, what: &str| crate::shared::sql_i64(value, what);
        Ok(NewEntry {
            at: now.as_microsecond(),
            principal: by.principal.clone(),
            role: by.role.as_str(),
            object_kind: kind.name(),
            object_id: sql_id(id, "account id")?,
            object_name: name.to_owned(),
            owner_id: sql_id(owner.unwrap_or(0), "owner id")?,
            action: action.as_str(),
            changes: Value::Object(changes).to_string(),
        })
    }

    fn new(
        by: &Actor,
        action: AuditAction,
        object: &Record,
        changes: Map<String, Value>,
        at: Timestamp,
    ) -> Result<NewEntry, StoreError> {
        let id = |value: u64, what: &str| crate::shared::sql_i64(value, what);
        Ok(NewEntry {
            at: at.as_microsecond(),
            principal: by.principal.clone(),
            role: by.role.as_str(),
            object_kind: object.kind.name(),
            object_id: id(object.meta.id, "object id")?,
            object_name: object.name.clone(),
            owner_id: id(object.owner_id, "owner id")?,
            action: action.as_str(),
            changes: Value::Object(changes).to_string(),
        })
    }
}

fn body_fields(record: &Record) -> Result<Map<String, Value>, StoreError> {
    match serde_json::from_str(&record.body) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err(StoreError::Corrupt(format!(
            "{} {}: body is not a JSON object",
            record.kind.name(),
            record.meta.id
        ))),
        Err(e) => Err(StoreError::Corrupt(format!(
            "{} {}: {e}",
            record.kind.name(),
            record.meta.id
        ))),
    }
}

fn change(before: Value, after: Value) -> Value {
    let mut pair = Map::new();
    pair.insert("before".to_owned(), before);
    pair.insert("after".to_owned(), after);
    Value::Object(pair)
}

/// The top-level fields whose values differ, with both values (`null` where absent). Managed
/// objects hold no secrets (token hashes and passwords live in their own tables and are never
/// audited), so every field may be recorded.
fn changed_fields(before: &Map<String, Value>, after: &Map<String, Value>) -> Map<String, Value> {
    let mut changes = Map::new();
    let keys = before
        .keys()
        .chain(after.keys().filter(|k| !before.contains_key(*k)));
    for key in keys {
        let (old, new) = (before.get(key), after.get(key));
        if old != new {
            changes.insert(
                key.clone(),
                change(
                    old.cloned().unwrap_or(Value::Null),
                    new.cloned().unwrap_or(Value::Null),
                ),
            );
        }
    }
    changes
}

/// The SQL list of the kind names on `side`, quoted (static names, no caller input).
pub(crate) fn side_kinds_sql(side: Side) -> String {
    ObjectKind::ALL
        .into_iter()
        .filter(|k| k.side() == side)
        .map(|k| format!("'{}'", k.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The columns of `audit`, in the order [`crate::shared::rows::audit_entry`] reads them.
pub(crate) const AUDIT_COLUMNS: &str =
    "id, at, principal, role, object_kind, object_id, object_name, owner_id, action, changes";

/// One value bound to an audit query, in placeholder order.
pub(crate) enum AuditParam {
    Int(i64),
    Text(String),
}

/// The `WHERE` clause of `query` and its bound values, with placeholders written by
/// `placeholder(n)` (1-based): `?n` on SQLite, `$n` on PostgreSQL.
pub(crate) fn audit_filter(
    query: &AuditQuery,
    placeholder: fn(usize) -> String,
) -> (String, Vec<AuditParam>) {
    let mut sql = "TRUE".to_owned();
    let mut params = Vec::new();
    let mut bind = |clause: &str, value: AuditParam| {
        params.push(value);
        sql += &format!(" AND {clause} {}", placeholder(params.len()));
    };
    // Ids past i64::MAX match nothing as equalities and everything as upper bounds.
    let clamp = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    if let Some((side, owner)) = query.scope {
        bind(
            &format!("object_kind IN ({}) AND owner_id =", side_kinds_sql(side)),
            AuditParam::Int(clamp(owner)),
        );
    }
    if let Some(kind) = query.object_kind {
        bind("object_kind =", AuditParam::Text(kind.name().to_owned()));
    }
    if let Some(id) = query.object_id {
        bind("object_id =", AuditParam::Int(clamp(id)));
    }
    if let Some(principal) = &query.principal {
        bind("principal =", AuditParam::Text(principal.clone()));
    }
    if let Some(since) = query.since {
        bind("at >=", AuditParam::Int(since.as_microsecond()));
    }
    if let Some(until) = query.until {
        bind("at <", AuditParam::Int(until.as_microsecond()));
    }
    if let Some(before) = query.before_id {
        bind("id <", AuditParam::Int(clamp(before)));
    }
    (sql, params)
}

/// `query.limit` clamped to `1..=`[`MAX_AUDIT_PAGE`].
pub(crate) fn audit_limit(query: &AuditQuery) -> i64 {
    i64::from(query.limit.clamp(1, MAX_AUDIT_PAGE))
}
