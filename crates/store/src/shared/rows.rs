//! Result rows read into the model's types, once for both backends. Each backend implements
//! [`Columns`] for its row type and keeps its own column types and driver errors there; what
//! the columns of a row mean is written here.

use std::borrow::Cow;

use jiff::Timestamp;
use marquee_model::{
    CreativeAssignment, CreativeId, LineItemId, Meta, ObjectKind, PlacementId, Principal, Role,
    Status,
};
use marquee_stats::{
    COLUMN_COUNT, Counters, Dimension, DimensionsBuilder, Hll, Seen, SketchKey, StoredRow,
};

use crate::stats::Checkpoint;
use crate::{Record, SessionRecord, StoreError, TokenRecord, UserRecord};

use super::timestamp;

/// The columns of every object table, in the order [`record`] reads them.
pub(crate) const RECORD_COLUMNS: &str =
    "id, parent_id, owner_id, name, status, version, created_at, updated_at, body";

/// The columns of `users` (aliased `u`), in the order [`user`] reads them.
pub(crate) const USER_COLUMNS: &str =
    "u.id, u.name, u.role, u.owner_id, u.password_hash, u.created_at";

/// The columns of `api_tokens`, in the order [`token`] reads them.
pub(crate) const TOKEN_COLUMNS: &str = "id, role, owner_id, label, created_at";

/// One result row, read by column position.
pub(crate) trait Columns {
    /// An id or count the model keeps as `u64`; `what` names it where a stored value does not
    /// fit.
    fn u64(&self, column: usize, what: &str) -> Result<u64, StoreError>;
    /// A nullable [`u64`](Columns::u64).
    fn optional_u64(&self, column: usize, what: &str) -> Result<Option<u64>, StoreError>;
    /// A small code the model keeps as `u8` (a device); `what` names it where it does not fit.
    fn u8(&self, column: usize, what: &str) -> Result<u8, StoreError>;
    /// A number the model keeps as `u32` (a shard); `what` names it where it does not fit.
    fn u32(&self, column: usize, what: &str) -> Result<u32, StoreError>;
    fn i32(&self, column: usize) -> Result<i32, StoreError>;
    fn i64(&self, column: usize) -> Result<i64, StoreError>;
    fn optional_i64(&self, column: usize) -> Result<Option<i64>, StoreError>;
    fn string(&self, column: usize) -> Result<String, StoreError>;
    fn bytes(&self, column: usize) -> Result<Cow<'_, [u8]>, StoreError>;
}

/// An object of `kind` selected as [`RECORD_COLUMNS`].
pub(crate) fn record(kind: ObjectKind, row: &impl Columns) -> Result<Record, StoreError> {
    let id = row.u64(0, "id")?;
    let corrupt = |what: String| StoreError::Corrupt(format!("{} {id}: {what}", kind.name()));
    let status = row.string(4)?;
    let status = Status::parse(&status).ok_or_else(|| corrupt(format!("status {status:?}")))?;
    let timestamp = |column: usize| -> Result<Timestamp, StoreError> {
        Timestamp::from_microsecond(row.i64(column)?).map_err(|e| corrupt(e.to_string()))
    };
    Ok(Record {
        kind,
        meta: Meta {
            id,
            version: row.u64(5, "version")?,
            created_at: timestamp(6)?,
            updated_at: timestamp(7)?,
        },
        parent_id: row.optional_u64(1, "parent id")?,
        owner_id: row.u64(2, "owner id")?,
        name: row.string(3)?,
        status,
        body: row.string(8)?,
    })
}

/// A user selected as [`USER_COLUMNS`] from column 0.
pub(crate) fn user(row: &impl Columns) -> Result<UserRecord, StoreError> {
    let id = row.u64(0, "user id")?;
    let role = row.string(2)?;
    let role = Role::parse(&role)
        .ok_or_else(|| StoreError::Corrupt(format!("user {id}: role {role:?}")))?;
    Ok(UserRecord {
        id,
        name: row.string(1)?,
        role,
        owner_id: row.optional_u64(3, "owner id")?,
        password_hash: row.string(4)?,
        created_at: timestamp(row.i64(5)?, &format!("user {id}"))?,
    })
}

/// A session selected as [`USER_COLUMNS`] followed by its CSRF token, creation and expiry.
pub(crate) fn session(row: &impl Columns) -> Result<SessionRecord, StoreError> {
    let user = user(row)?;
    let what = format!("session of user {}", user.id);
    Ok(SessionRecord {
        csrf_token: row.string(6)?,
        created_at: timestamp(row.i64(7)?, &what)?,
        expires_at: timestamp(row.i64(8)?, &what)?,
        user,
    })
}

/// An API token selected as `id, role, owner_id`.
pub(crate) fn principal(row: &impl Columns) -> Result<Principal, StoreError> {
    let token_id = row.u64(0, "token id")?;
    let role = row.string(1)?;
    let role = Role::parse(&role)
        .ok_or_else(|| StoreError::Corrupt(format!("api token {token_id}: role {role:?}")))?;
    Ok(Principal {
        token_id,
        role,
        owner_id: row.optional_u64(2, "owner id")?,
    })
}

/// An API token selected as [`TOKEN_COLUMNS`].
pub(crate) fn token(row: &impl Columns) -> Result<TokenRecord, StoreError> {
    let principal = principal(row)?;
    Ok(TokenRecord {
        id: principal.token_id,
        role: principal.role,
        owner_id: principal.owner_id,
        label: row.string(3)?,
        created_at: timestamp(row.i64(4)?, &format!("api token {}", principal.token_id))?,
    })
}

/// A link selected as `line_item_id, placement_id`.
pub(crate) fn link(row: &impl Columns) -> Result<(LineItemId, PlacementId), StoreError> {
    Ok((
        LineItemId(row.u64(0, "line item id")?),
        PlacementId(row.u64(1, "placement id")?),
    ))
}

/// The columns of `line_item_creatives`, in the order [`assignment`] reads them.
pub(crate) const ASSIGNMENT_COLUMNS: &str = "line_item_id, creative_id, weight, start_at, end_at";

/// A creative assignment selected as [`ASSIGNMENT_COLUMNS`].
pub(crate) fn assignment(row: &impl Columns) -> Result<CreativeAssignment, StoreError> {
    let time = |column: usize| -> Result<Option<Timestamp>, StoreError> {
        row.optional_i64(column)?
            .map(|micros| timestamp(micros, "assignment flight"))
            .transpose()
    };
    Ok(CreativeAssignment {
        line_item_id: LineItemId(row.u64(0, "line item id")?),
        creative_id: CreativeId(row.u64(1, "creative id")?),
        weight: row.u32(2, "weight")?,
        start: time(3)?,
        end: time(4)?,
    })
}

/// The counters of a stats row (`marquee_stats::COLUMN_COUNT` of them: the kinds', the money
/// and the invalid traffic's), from column `first` on (in `marquee_stats::COLUMNS` order).
pub(crate) fn counters(row: &impl Columns, first: usize) -> Result<Counters, StoreError> {
    let mut values = [0i64; COLUMN_COUNT];
    for (i, value) in values.iter_mut().enumerate() {
        *value = row.i64(first + i)?;
    }
    Ok(Counters::from_values(values))
}

/// A report row selected as `bucket_start`, the six dimension columns, then the counters.
pub(crate) fn stored_row(row: &impl Columns) -> Result<StoredRow, StoreError> {
    Ok(StoredRow {
        bucket: row.i64(0)?,
        line_item: row.u64(1, "line item")?,
        creative: row.u64(2, "creative")?,
        placement: row.u64(3, "placement")?,
        country: row.string(4)?,
        region: row.string(5)?,
        device: row.u8(6, "device code")?,
        counters: counters(row, 7)?,
    })
}

/// A `stats_users` row selected as `line_item, day, sketch`.
pub(crate) fn sketch(row: &impl Columns) -> Result<(SketchKey, Hll), StoreError> {
    let key = SketchKey {
        line_item: row.u64(0, "line item")?,
        day: row.i32(1)?,
    };
    let sketch = Hll::from_bytes(&row.bytes(2)?).map_err(|e| {
        StoreError::Corrupt(format!(
            "unique-users sketch of line item {} day {}: {e}",
            key.line_item, key.day
        ))
    })?;
    Ok((key, sketch))
}

/// A `stats_checkpoints` row selected as `source, shard, segment, offset, max_event_time`.
/// Adds a `forecast_sample` row (`day, records`, read in day order) to the days read so far:
/// a day's rows become one run of records.
pub(crate) fn add_sample(
    days: &mut Vec<(i32, Vec<u8>)>,
    row: &impl Columns,
) -> Result<(), StoreError> {
    let day = row.i32(0)?;
    let records = row.bytes(1)?;
    match days.last_mut() {
        Some((last, all)) if *last == day => all.extend_from_slice(&records),
        _ => days.push((day, records.into_owned())),
    }
    Ok(())
}

pub(crate) fn checkpoint(row: &impl Columns) -> Result<Checkpoint, StoreError> {
    Ok(Checkpoint {
        source: row.string(0)?,
        shard: row.u32(1, "checkpoint shard")?,
        segment: row.u64(2, "segment")?,
        offset: row.u64(3, "offset")?,
        max_event_time_micros: row.i64(4)?,
    })
}

/// Adds a `stats_seen` row selected as `run, entries` to `seen`.
pub(crate) fn load_seen(seen: &mut Seen, row: &impl Columns) -> Result<(), StoreError> {
    let run = row.i64(0)?;
    seen.load(&row.bytes(1)?)
        .map_err(|e| StoreError::Corrupt(format!("dedupe entries of run {run}: {e}")))
}

/// The builder method adding an object below an advertiser or publisher to the dimensions.
pub(crate) type AddChild = fn(&mut DimensionsBuilder, u64, u64) -> &mut DimensionsBuilder;

/// The tables whose `id, parent_id, name` rows the dimensions hold besides advertisers and
/// publishers, each with the dimension its ids are values of and the builder method that adds
/// a row.
pub(crate) const CHILD_DIMENSIONS: [(&str, Dimension, AddChild); 5] = [
    (
        "campaigns",
        Dimension::Campaign,
        DimensionsBuilder::campaign,
    ),
    (
        "line_items",
        Dimension::LineItem,
        DimensionsBuilder::line_item,
    ),
    (
        "creatives",
        Dimension::Creative,
        DimensionsBuilder::creative,
    ),
    ("sites", Dimension::Site, DimensionsBuilder::site),
    (
        "placements",
        Dimension::Placement,
        DimensionsBuilder::placement,
    ),
];

/// Adds an advertiser selected as `id, time zone, currency, name` to the dimensions.
pub(crate) fn add_advertiser(
    builder: &mut DimensionsBuilder,
    row: &impl Columns,
) -> Result<(), StoreError> {
    let id = row.u64(0, "advertiser id")?;
    builder
        .advertiser(id, &row.string(1)?, &row.string(2)?)
        .name(Dimension::Advertiser, id, &row.string(3)?);
    Ok(())
}

/// Adds a publisher selected as `id, name` to the dimensions (its name only: placements reach
/// their publisher through their site).
pub(crate) fn add_publisher(
    builder: &mut DimensionsBuilder,
    row: &impl Columns,
) -> Result<(), StoreError> {
    let id = row.u64(0, "publisher id")?;
    builder.name(Dimension::Publisher, id, &row.string(1)?);
    Ok(())
}

/// Adds a row of one of the [`CHILD_DIMENSIONS`] tables, selected as `id, parent_id, name`,
/// with its `add` method.
pub(crate) fn add_child(
    builder: &mut DimensionsBuilder,
    (dimension, add): (Dimension, AddChild),
    row: &impl Columns,
) -> Result<(), StoreError> {
    let id = row.u64(0, "id")?;
    add(builder, id, row.u64(1, "parent id")?).name(dimension, id, &row.string(2)?);
    Ok(())
}

/// An audit entry selected as [`AUDIT_COLUMNS`](crate::audit::AUDIT_COLUMNS).
pub(crate) fn audit_entry(row: &impl Columns) -> Result<crate::AuditEntry, StoreError> {
    let id = row.u64(0, "audit id")?;
    let corrupt = |what: String| StoreError::Corrupt(format!("audit entry {id}: {what}"));
    let role = row.string(3)?;
    let kind = row.string(4)?;
    let action = row.string(8)?;
    let changes = row.string(9)?;
    Ok(crate::AuditEntry {
        id,
        at: timestamp(row.i64(1)?, "audit time")?,
        principal: row.string(2)?,
        role: Role::parse(&role).ok_or_else(|| corrupt(format!("role {role:?}")))?,
        object_kind: crate::AuditKind::parse(&kind)
            .ok_or_else(|| corrupt(format!("object kind {kind:?}")))?,
        object_id: row.u64(5, "object id")?,
        object_name: row.string(6)?,
        owner_id: row.u64(7, "owner id")?,
        action: crate::AuditAction::parse(&action)
            .ok_or_else(|| corrupt(format!("action {action:?}")))?,
        changes: serde_json::from_str(&changes).map_err(|e| corrupt(e.to_string()))?,
    })
}
