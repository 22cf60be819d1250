//! What both backends share: table names, id conversion, the literal LIKE pattern of
//! `name_contains`, the records a write returns and the checks before it, migration checksums,
//! the stats tables and report grouping; reading result rows in [`rows`].

pub(crate) mod rows;

use std::fmt::Write as _;

use jiff::Timestamp;
use marquee_model::{
    Creative, CreativeAssignment, CreativeId, LineItemId, Meta, ObjectKind, Role, Status,
};
use marquee_stats::{COLUMNS, DAY, Granularity, HOUR, MINUTE, RowQuery};
use sha2::{Digest, Sha256};

use crate::{
    CheckpointMove, Draft, MigrationError, NewToken, NewUser, Record, StoreError, TokenRecord,
    UserRecord,
};

pub(crate) fn table(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Advertiser => "advertisers",
        ObjectKind::Campaign => "campaigns",
        ObjectKind::LineItem => "line_items",
        ObjectKind::Creative => "creatives",
        ObjectKind::Publisher => "publishers",
        ObjectKind::Site => "sites",
        ObjectKind::Placement => "placements",
    }
}

/// An id as both databases store it (a signed 64-bit integer). Caller-supplied ids above
/// `i64::MAX` cannot be stored, so they match nothing rather than fail.
pub(crate) fn sql_id(id: u64) -> Option<i64> {
    i64::try_from(id).ok()
}

/// The id and scope of a lookup as both databases store them, or `None` if either is above
/// `i64::MAX`: no row can match then.
pub(crate) fn sql_id_in_scope(id: u64, scope: Option<u64>) -> Option<(i64, Option<i64>)> {
    let scope = match scope {
        Some(scope) => Some(sql_id(scope)?),
        None => None,
    };
    Some((sql_id(id)?, scope))
}

/// A count or id the model keeps as `u64` as both databases store it; above `i64::MAX` it
/// cannot be stored, and the write fails naming `what`.
pub(crate) fn sql_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Backend(format!("{what} {value} is above i64::MAX").into()))
}

/// A stored timestamp (unix microseconds); out of range is corruption of `what`.
pub(crate) fn timestamp(micros: i64, what: &str) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(micros)
        .map_err(|e| StoreError::Corrupt(format!("{what}: timestamp {micros}: {e}")))
}

/// A LIKE pattern (escape character `\`) matching names that contain `needle` literally.
pub(crate) fn like_pattern(needle: &str) -> String {
    let mut pattern = String::with_capacity(needle.len() + 2);
    pattern.push('%');
    for c in needle.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The record's body with its `status` field replaced.
pub(crate) fn with_status(record: &Record, status: Status) -> Result<String, StoreError> {
    let corrupt = |what: String| {
        StoreError::Corrupt(format!("{} {}: {what}", record.kind.name(), record.meta.id))
    };
    let mut body: serde_json::Value =
        serde_json::from_str(&record.body).map_err(|e| corrupt(e.to_string()))?;
    let object = body
        .as_object_mut()
        .ok_or_else(|| corrupt("body is not a JSON object".to_owned()))?;
    object.insert("status".to_owned(), status.as_str().into());
    serde_json::to_string(&body).map_err(|e| corrupt(e.to_string()))
}

/// The record of an object just inserted with `id` and `owner_id`, at version 1.
pub(crate) fn created_record(
    kind: ObjectKind,
    id: u64,
    owner_id: u64,
    draft: Draft,
    now: Timestamp,
) -> Record {
    Record {
        kind,
        meta: Meta {
            id,
            version: 1,
            created_at: now,
            updated_at: now,
        },
        parent_id: draft.parent_id,
        owner_id,
        name: draft.name,
        status: draft.status,
        body: draft.body,
    }
}

/// `current` with a new name, status and body as its next version, updated `now`.
fn next_version(
    current: Record,
    name: String,
    status: Status,
    body: String,
    now: Timestamp,
) -> Record {
    Record {
        meta: Meta {
            version: current.meta.version + 1,
            updated_at: now,
            ..current.meta
        },
        name,
        status,
        body,
        ..current
    }
}

/// The next version of `current` that an update with `draft` writes. Fails as
/// [`Store::update`](crate::Store::update) documents: `Archived`, `ParentImmutable`,
/// `VersionConflict`, checked in that order.
pub(crate) fn updated_version(
    current: Record,
    expected_version: u64,
    draft: Draft,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let (kind, id) = (current.kind, current.meta.id);
    if current.status == Status::Archived {
        return Err(StoreError::Archived { kind, id });
    }
    if draft.parent_id != current.parent_id {
        return Err(StoreError::ParentImmutable { kind, id });
    }
    if current.meta.version != expected_version {
        return Err(StoreError::VersionConflict {
            kind,
            id,
            expected: expected_version,
            current: current.meta.version,
        });
    }
    Ok(next_version(
        current,
        draft.name,
        draft.status,
        draft.body,
        now,
    ))
}

/// The next version of `current` (not archived yet) that archiving writes.
pub(crate) fn archived_version(current: Record, now: Timestamp) -> Result<Record, StoreError> {
    // The body carries the status too, and it is what callers decode.
    let body = with_status(&current, Status::Archived)?;
    let name = current.name.clone();
    Ok(next_version(current, name, Status::Archived, body, now))
}

/// Checks that `line_item` may use `creative` from the library (both found in the caller's
/// scope): neither archived, the same advertiser, and not the line item it was uploaded under.
pub(crate) fn check_assignment(line_item: &Record, creative: &Record) -> Result<(), StoreError> {
    for record in [line_item, creative] {
        if record.status == Status::Archived {
            return Err(StoreError::Archived {
                kind: record.kind,
                id: record.meta.id,
            });
        }
    }
    let (line_item_id, creative_id) = (line_item.meta.id, creative.meta.id);
    if creative.owner_id != line_item.owner_id {
        return Err(StoreError::OtherAdvertiser {
            creative: creative_id,
            line_item: line_item_id,
        });
    }
    if creative.parent_id == Some(line_item_id) {
        return Err(StoreError::UploadedUnder {
            creative: creative_id,
            line_item: line_item_id,
        });
    }
    Ok(())
}

/// An assignment's flight as both databases store it (unix microseconds, `NULL` for none).
pub(crate) fn flight_micros(assignment: &CreativeAssignment) -> (Option<i64>, Option<i64>) {
    (
        assignment.start.map(Timestamp::as_microsecond),
        assignment.end.map(Timestamp::as_microsecond),
    )
}

/// The draft of a copy of the line item `original`: in the same campaign, paused (a copy is
/// reviewed before it serves), named `name` or "Copy of" the original's name.
pub(crate) fn copy_draft(original: &Record, name: Option<String>) -> Result<Draft, StoreError> {
    let name = name.unwrap_or_else(|| format!("Copy of {}", original.name));
    let corrupt = |what: String| {
        StoreError::Corrupt(format!(
            "{} {}: {what}",
            original.kind.name(),
            original.meta.id
        ))
    };
    let mut body: serde_json::Value =
        serde_json::from_str(&original.body).map_err(|e| corrupt(e.to_string()))?;
    let object = body
        .as_object_mut()
        .ok_or_else(|| corrupt("body is not a JSON object".to_owned()))?;
    object.insert("status".to_owned(), Status::Paused.as_str().into());
    object.insert("name".to_owned(), name.clone().into());
    Ok(Draft {
        parent_id: original.parent_id,
        name,
        status: Status::Paused,
        body: serde_json::to_string(&body).map_err(|e| corrupt(e.to_string()))?,
    })
}

/// The assignments a copy (`copy`) of a line item starts with: each creative uploaded under the
/// original (`own`, archived ones left out) with its own weight, and each of the original's
/// assignments as it is. The creatives are shared, never duplicated.
pub(crate) fn copied_assignments(
    copy: LineItemId,
    own: &[Record],
    assigned: Vec<CreativeAssignment>,
) -> Result<Vec<CreativeAssignment>, StoreError> {
    let mut all = Vec::with_capacity(own.len() + assigned.len());
    for record in own.iter().filter(|r| r.status != Status::Archived) {
        let creative: Creative = record.decode()?.object;
        all.push(CreativeAssignment {
            line_item_id: copy,
            creative_id: CreativeId(record.meta.id),
            weight: creative.weight,
            start: None,
            end: None,
        });
    }
    all.extend(assigned.into_iter().map(|a| CreativeAssignment {
        line_item_id: copy,
        ..a
    }));
    Ok(all)
}

/// The record of a token just stored with `id`.
pub(crate) fn token_record(id: u64, token: NewToken, now: Timestamp) -> TokenRecord {
    TokenRecord {
        id,
        role: token.role,
        owner_id: token.owner_id,
        label: token.label,
        created_at: now,
    }
}

/// The record of a user just stored with `id`.
pub(crate) fn user_record(id: u64, user: NewUser, now: Timestamp) -> UserRecord {
    UserRecord {
        id,
        name: user.name,
        role: user.role,
        owner_id: user.owner_id,
        password_hash: user.password_hash,
        created_at: now,
    }
}

/// One versioned schema change, compiled into the binary. A released entry is never edited (the
/// checksum check would refuse every database it was applied to); changes go in a new one.
pub(crate) struct Migration {
    pub(crate) version: u32,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// The [`Migration`] list of one backend's `migrations/<dir>/`: `(version, name, file)` each.
macro_rules! migrations {
    ($dir:literal: $(($version:literal, $name:literal, $file:literal)),+ $(,)?) => {
        &[$(crate::shared::Migration {
            version: $version,
            name: $name,
            sql: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/", $dir, "/", $file)),
        }),+]
    };
}
pub(crate) use migrations;

/// Refuses a database whose applied migrations (version, checksum) differ from `known` or
/// include one `known` lacks (written by a newer binary).
pub(crate) fn check_applied(
    applied: impl IntoIterator<Item = (u32, String)>,
    known: &[Migration],
) -> Result<(), MigrationError> {
    for (version, sha256) in applied {
        let migration = known
            .iter()
            .find(|m| m.version == version)
            .ok_or(MigrationError::Unknown { version })?;
        if checksum(migration.sql) != sha256 {
            return Err(MigrationError::Changed {
                version,
                name: migration.name.to_owned(),
            });
        }
    }
    Ok(())
}

/// The parent a new object's draft names, which the backend then looks up in `scope`; `None`
/// for a root, which owns itself. Fails as [`Store::create`](crate::Store::create) documents
/// for drafts that can never be created.
pub(crate) fn parent_of_new(
    kind: ObjectKind,
    draft: &Draft,
    scope: Option<u64>,
) -> Result<Option<(ObjectKind, u64)>, StoreError> {
    match (kind.parent(), draft.parent_id) {
        (Some(parent_kind), Some(parent_id)) => Ok(Some((parent_kind, parent_id))),
        (Some(parent_kind), None) => Err(StoreError::ParentNotFound {
            kind: parent_kind,
            id: 0,
        }),
        (None, Some(parent_id)) => Err(StoreError::Corrupt(format!(
            "a {} has no parent, but the draft names {parent_id}",
            kind.name()
        ))),
        // A scoped caller is confined to its own root and cannot make another.
        (None, None) => match scope {
            Some(scope) => Err(StoreError::ParentNotFound { kind, id: scope }),
            None => Ok(None),
        },
    }
}

/// The owner a new object inherits from its parent as found in scope (`None`: missing): the
/// parent's owner, unless the parent is archived.
pub(crate) fn owner_from_parent(
    kind: ObjectKind,
    id: u64,
    parent: Option<Record>,
) -> Result<u64, StoreError> {
    let parent = parent.ok_or(StoreError::ParentNotFound { kind, id })?;
    if parent.status == Status::Archived {
        return Err(StoreError::ParentArchived { kind, id });
    }
    Ok(parent.owner_id)
}

/// What the owner of a token or dashboard user must be for its role.
pub(crate) enum RoleOwner {
    /// Nothing: an admin without owner.
    None,
    /// This advertiser or publisher, which must exist.
    Existing(ObjectKind, u64),
    /// Never valid: an admin with an owner, a tenant without one.
    Invalid,
}

pub(crate) fn role_owner(role: Role, owner: Option<u64>) -> RoleOwner {
    match (role, owner) {
        (Role::Admin, None) => RoleOwner::None,
        (Role::Advertiser, Some(id)) => RoleOwner::Existing(ObjectKind::Advertiser, id),
        (Role::Publisher, Some(id)) => RoleOwner::Existing(ObjectKind::Publisher, id),
        _ => RoleOwner::Invalid,
    }
}

/// Lower-case hex SHA-256 of a migration's text.
pub(crate) fn checksum(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

pub(crate) fn stats_table(granularity: Granularity) -> &'static str {
    match granularity {
        Granularity::Minute => "stats_minute",
        Granularity::Hour => "stats_hour",
        Granularity::Day => "stats_day",
    }
}

/// The key columns of the full stats tables, in [`RowKey`](marquee_stats::RowKey) order.
pub(crate) const FULL_KEYS: &[&str] = &[
    "line_item",
    "bucket_start",
    "creative",
    "placement",
    "country",
    "region",
    "device",
];
/// The key columns of `stats_hour_line_item`.
pub(crate) const LINE_ITEM_KEYS: &[&str] = &["line_item", "bucket_start"];

/// One checkpoint move of a run as both backends bind it: the key, the new position, and the
/// position the stored row must still hold (`None`: the row must still not exist).
pub(crate) struct CheckpointRow<'a> {
    pub source: &'a str,
    pub shard: u32,
    pub segment: i64,
    pub offset: i64,
    pub max_time: i64,
    pub from: Option<[i64; 3]>,
}

/// A run's checkpoint moves in (source, shard) order, the order in which the checkpoint
/// statement takes their row locks (two managers' commits queue instead of deadlocking). A
/// shard named twice is refused: its fence would be ambiguous.
pub(crate) fn checkpoint_rows(
    moves: &[CheckpointMove],
) -> Result<Vec<CheckpointRow<'_>>, StoreError> {
    let mut rows = Vec::with_capacity(moves.len());
    for CheckpointMove { from, to } in moves {
        let from = match from {
            Some(p) => Some([
                sql_i64(p.segment, "segment")?,
                sql_i64(p.offset, "offset")?,
                p.max_event_time_micros,
            ]),
            None => None,
        };
        rows.push(CheckpointRow {
            source: &to.source,
            shard: to.shard,
            segment: sql_i64(to.segment, "segment")?,
            offset: sql_i64(to.offset, "offset")?,
            max_time: to.max_event_time_micros,
            from,
        });
    }
    rows.sort_unstable_by(|a, b| (a.source, a.shard).cmp(&(b.source, b.shard)));
    if let Some(twice) = rows
        .windows(2)
        .find(|pair| (pair[0].source, pair[0].shard) == (pair[1].source, pair[1].shard))
    {
        return Err(StoreError::Backend(
            format!(
                "a run moves the checkpoint of shard {} of source {:?} twice",
                twice[0].shard, twice[0].source
            )
            .into(),
        ));
    }
    Ok(rows)
}

/// The counter columns of the stats tables, each as `write` puts it, comma-separated.
/// `left + right` for counters (never negative), held at the largest `BIGINT` instead of failing
/// the statement: spend is stored as sums of CPM rates (1,000 × micros), which a large line item
/// in a currency of many units (rupiah, dong) can carry past 64 bits, and an error there would
/// stop every aggregation run. Held, the sum is wrong only past what 64 bits hold.
pub(crate) fn saturating_add(left: &str, right: &str) -> String {
    format!(
        "CASE WHEN {right} > 0 AND {left} > {MAX} - {right} THEN {MAX} ELSE {left} + {right} END",
        MAX = i64::MAX
    )
}

pub(crate) fn each_counter(write: impl Fn(&str) -> String) -> String {
    COLUMNS
        .iter()
        .map(|column| write(column))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table a report reads. Hourly totals per line item answer any hourly query without
/// supply, country or device detail, from a small fraction of the rows.
pub(crate) fn report_table(q: &RowQuery) -> &'static str {
    let per_line_item = q.table == Granularity::Hour
        && !(q.by_creative || q.by_placement || q.by_country || q.by_region || q.by_device)
        && q.placements.is_none()
        && q.countries.is_none()
        && q.regions.is_none()
        && q.devices.is_none();
    if per_line_item {
        "stats_hour_line_item"
    } else {
        stats_table(q.table)
    }
}

/// The six dimension columns of a report's SELECT (line item, creative, placement, country,
/// region, device; each the column where the query groups by it, else its entry in `zeros`, the
/// dialect's constant of that column's type) and its GROUP BY list, `bucket_start` first.
pub(crate) fn report_grouping(q: &RowQuery, zeros: [&str; 6]) -> (String, String) {
    let grouped = [
        ("line_item", q.by_line_item),
        ("creative", q.by_creative),
        ("placement", q.by_placement),
        ("country", q.by_country),
        ("region", q.by_region),
        ("device", q.by_device),
    ];
    let select = grouped
        .iter()
        .zip(zeros)
        .map(|(&(column, on), zero)| if on { column } else { zero })
        .collect::<Vec<_>>()
        .join(", ");
    let group = grouped.iter().filter(|(_, on)| *on).fold(
        String::from("bucket_start"),
        |mut acc, (column, _)| {
            acc.push_str(", ");
            acc.push_str(column);
            acc
        },
    );
    (select, group)
}

/// The end of a report's SELECT: ` LIMIT n` when the caller needs no more than `n` rows (the
/// same in both dialects), else nothing.
pub(crate) fn report_limit(limit: Option<usize>) -> String {
    limit.map_or_else(String::new, |n| format!(" LIMIT {n}"))
}

/// `[since, until)` split into the parts each table serves: whole UTC days, then whole hours,
/// then minutes. Each part is a list of `[from, to)` bucket-start ranges.
pub(crate) fn delivery_parts(since: i64, until: i64) -> [(&'static str, Vec<(i64, i64)>); 3] {
    let floor = |t: i64, w: i64| t - t.rem_euclid(w);
    let ceil = |t: i64, w: i64| floor(t + w - 1, w);
    let since = floor(since, MINUTE);
    let until = ceil(until, MINUTE).max(since);
    let (day_from, day_to) = (ceil(since, DAY), floor(until, DAY));
    let (hour_from, hour_to) = (ceil(since, HOUR), floor(until, HOUR));
    let mut days = Vec::new();
    let mut hours = Vec::new();
    let mut minutes = Vec::new();
    if day_from < day_to {
        days.push((day_from, day_to));
        hours.push((hour_from, day_from));
        hours.push((day_to, hour_to));
    } else if hour_from < hour_to {
        hours.push((hour_from, hour_to));
    }
    if hour_from < hour_to {
        minutes.push((since, hour_from));
        minutes.push((hour_to, until));
    } else {
        minutes.push((since, until));
    }
    let keep = |parts: Vec<(i64, i64)>| parts.into_iter().filter(|(a, b)| a < b).collect();
    [
        ("stats_day", keep(days)),
        ("stats_hour_line_item", keep(hours)),
        ("stats_minute", keep(minutes)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_named_after_kinds() {
        for kind in ObjectKind::ALL {
            assert_eq!(table(kind), format!("{}s", kind.name()));
        }
    }

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
        assert_eq!(like_pattern(""), "%%");
    }

    #[test]
    fn checksum_is_hex_sha256() {
        assert_eq!(
            checksum("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_report_limit_ends_the_select() {
        assert_eq!(report_limit(Some(100_001)), " LIMIT 100001");
        assert_eq!(report_limit(None), "");
    }

    #[test]
    fn delivery_is_split_into_whole_days_hours_and_minutes() {
        let t = |text: &str| text.parse::<jiff::Timestamp>().unwrap().as_second();
        let [days, hours, minutes] =
            delivery_parts(t("2026-01-01T22:30:10Z"), t("2026-01-03T01:15:00Z"));
        assert_eq!(
            days.1,
            vec![(t("2026-01-02T00:00:00Z"), t("2026-01-03T00:00:00Z"))]
        );
        assert_eq!(
            hours.1,
            vec![
                (t("2026-01-01T23:00:00Z"), t("2026-01-02T00:00:00Z")),
                (t("2026-01-03T00:00:00Z"), t("2026-01-03T01:00:00Z")),
            ]
        );
        assert_eq!(
            minutes.1,
            vec![
                (t("2026-01-01T22:30:00Z"), t("2026-01-01T23:00:00Z")),
                (t("2026-01-03T01:00:00Z"), t("2026-01-03T01:15:00Z")),
            ]
        );
        // Within one hour: minutes only.
        let [days, hours, minutes] =
            delivery_parts(t("2026-01-01T10:05:00Z"), t("2026-01-01T10:06:30Z"));
        assert!(days.1.is_empty() && hours.1.is_empty());
        assert_eq!(
            minutes.1,
            vec![(t("2026-01-01T10:05:00Z"), t("2026-01-01T10:07:00Z"))]
        );
    }
}
