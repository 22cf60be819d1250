//! Embedded SQLite store: one database file in WAL mode, one writer connection and a few reader
//! connections, so reads (the API, the snapshot compiler) never wait for a write to commit.
//!
//! Every kind lives in a table with the same columns (see `migrations/sqlite/0001_initial.sql`),
//! so one generic code path serves all kinds. Table names come only from [`ObjectKind`]; every value
//! is a bound parameter.
//!
//! Deliberate twin of `postgres.rs`: the same statements in SQLite's dialect through a
//! synchronous driver on its own threads; what is dialect-free is in `shared`.

mod migrate;
mod pacing;
mod stats;
mod users;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use marquee_model::{
    Catalog, Clock, CreativeAssignment, CreativeId, LineItemId, Object, ObjectKind, PlacementId,
    Principal, Role, Status, Stored,
};
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::Value;
use rusqlite::{
    Connection, OpenFlags, Params, Row, Transaction, TransactionBehavior, params, params_from_iter,
};

use crate::audit::{AUDIT_COLUMNS, AuditParam, NewEntry, audit_filter, audit_limit};
use crate::manager_lock::{LockAttempt, try_lock_file};
use crate::report_gate::ReportGate;
use crate::shared::rows::{self, ASSIGNMENT_COLUMNS, Columns, RECORD_COLUMNS, TOKEN_COLUMNS};
use crate::shared::{
    RoleOwner, archived_version, check_assignment, copied_assignments, copy_draft, created_record,
    flight_micros, like_pattern, owner_from_parent, parent_of_new, role_owner, sql_id,
    sql_id_in_scope, table, token_record, updated_version,
};
use crate::{
    Actor, AuditAction, AuditEntry, AuditQuery, Draft, ListQuery, MAX_PAGE, NewToken, Record,
    Store, StoreError, TokenRecord,
};

/// Reader connections; WAL lets them read while the writer writes.
const READERS: usize = 2;
/// Report queries at once: one, so that a reader is always left to token lookups (every API
/// request's authentication), sessions and the snapshot compile.
const REPORTS_AT_ONCE: usize = READERS - 1;
/// How long a connection waits for a lock held by another process before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The manager's database in one SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The database file, next to which the manager lock lives.
    path: PathBuf,
    clock: Arc<dyn Clock>,
    /// SQLite allows one writer at a time; the mutex queues writers here instead of on the
    /// database lock.
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    reports: ReportGate,
}

impl SqliteStore {
    /// Opens (creating if missing) the database file at `path` and applies pending migrations.
    /// Blocks while doing so; call it at startup or from a blocking task. `path` must be a
    /// file: every connection must see the same database.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<SqliteStore, StoreError> {
        let mut writer = Connection::open(path).map_err(backend)?;
        configure(&writer)?;
        let mode: String = writer
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(backend)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend(
                format!("{} cannot use WAL mode (got {mode})", path.display()).into(),
            ));
        }
        // In WAL mode NORMAL loses at most the last commits on power loss, never consistency.
        writer
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(backend)?;
        migrate::migrate(&mut writer, clock.as_ref())?;

        let readers = (0..READERS)
            .map(|_| {
                let reader = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(backend)?;
                configure(&reader)?;
                // Opened read-write so WAL recovery works, but refuses writes by mistake.
                reader
                    .pragma_update(None, "query_only", true)
                    .map_err(backend)?;
                Ok(Mutex::new(reader))
            })
            .collect::<Result<_, StoreError>>()?;

        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                clock,
                writer: Mutex::new(writer),
                readers,
                next_reader: AtomicUsize::new(0),
                reports: ReportGate::new(REPORTS_AT_ONCE),
            }),
        })
    }

    /// Runs `f` in an immediate write transaction on a blocking thread; commits if it succeeds.
    async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, Timestamp) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = lock(&inner.writer)?;
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            // Read under the write lock so timestamps follow commit order.
            let now = inner.clock.now();
            let value = f(&tx, now)?;
            tx.commit().map_err(backend)?;
            Ok(value)
        })
        .await
        .map_err(backend)?
    }

    // Deliberately the same shape as `write`, kept apart: a read takes a reader connection, needs
    // no clock and never commits.
    /// Runs `f` in a read transaction (one consistent snapshot) on a blocking thread.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.reader()?;
            let tx = conn.transaction().map_err(backend)?;
            // Dropping the transaction rolls back, which for a read only ends the snapshot.
            f(&tx)
        })
        .await
        .map_err(backend)?
    }
}

impl Inner {
    /// A free reader if there is one, else waits for one in turn.
    fn reader(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        for reader in &self.readers {
            match reader.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Poisoned(_)) => return Err(poisoned()),
            }
        }
        let next = self.next_reader.fetch_add(1, Ordering::Relaxed) % self.readers.len();
        lock(&self.readers[next])
    }
}

fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
    conn.create_aggregate_function(
        "sat_sum",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        SaturatingSum,
    )
    .map_err(backend)?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(backend)
}

/// `sat_sum(x)`: the sum of integers held at the largest (or smallest) 64-bit integer, where
/// SQLite's `SUM` fails the statement with "integer overflow" (see `shared::saturating_add` for
/// why counters can get there). `NULL` over no rows, as `SUM`.
struct SaturatingSum;

impl Aggregate<i64, Option<i64>> for SaturatingSum {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<i64> {
        Ok(0)
    }

    fn step(&self, ctx: &mut Context<'_>, sum: &mut i64) -> rusqlite::Result<()> {
        let value: Option<i64> = ctx.get(0)?;
        *sum = sum.saturating_add(value.unwrap_or(0));
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, sum: Option<i64>) -> rusqlite::Result<Option<i64>> {
        Ok(sum)
    }
}

fn lock(mutex: &Mutex<Connection>) -> Result<MutexGuard<'_, Connection>, StoreError> {
    mutex.lock().map_err(|_| poisoned())
}

/// A thread panicked while holding a connection; refuse rather than trust its state.
fn poisoned() -> StoreError {
    StoreError::Backend("a database connection was poisoned by a panic".into())
}

fn backend(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Backend(Box::new(e))
}

// SQLite's integers convert to the model's types in the driver (`fallible_uint`), so a value
// that does not fit is the driver's error and `what` goes unused.
impl Columns for Row<'_> {
    fn u64(&self, column: usize, _what: &str) -> Result<u64, StoreError> {
        self.get(column).map_err(backend)
    }

    fn optional_u64(&self, column: usize, _what: &str) -> Result<Option<u64>, StoreError> {
        self.get(column).map_err(backend)
    }

    fn u8(&self, column: usize, _what: &str) -> Result<u8, StoreError> {
        self.get(column).map_err(backend)
    }

    fn u32(&self, column: usize, _what: &str) -> Result<u32, StoreError> {
        self.get(column).map_err(backend)
    }

    fn i32(&self, column: usize) -> Result<i32, StoreError> {
        self.get(column).map_err(backend)
    }

    fn i64(&self, column: usize) -> Result<i64, StoreError> {
        self.get(column).map_err(backend)
    }

    fn optional_i64(&self, column: usize) -> Result<Option<i64>, StoreError> {
        self.get(column).map_err(backend)
    }

    fn string(&self, column: usize) -> Result<String, StoreError> {
        self.get(column).map_err(backend)
    }

    fn bytes(&self, column: usize) -> Result<Cow<'_, [u8]>, StoreError> {
        self.get(column).map(Cow::Owned).map_err(backend)
    }
}

/// Runs `sql` and hands each row it returns to `each`.
fn for_each_row(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    mut each: impl FnMut(&Row<'_>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut stmt = conn.prepare(sql).map_err(backend)?;
    let mut rows = stmt.query(params).map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        each(row)?;
    }
    Ok(())
}

/// The rows of `sql`, each read by `read`.
fn query_rows<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    mut read: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    for_each_row(conn, sql, params, |row| {
        out.push(read(row)?);
        Ok(())
    })?;
    Ok(out)
}

fn query_records(
    conn: &Connection,
    kind: ObjectKind,
    sql: &str,
    params: impl Params,
) -> Result<Vec<Record>, StoreError> {
    query_rows(conn, sql, params, |row| rows::record(kind, row))
}

// From here to `catalog_in`, each step is deliberately the twin of postgres.rs's: the same logic
// through a synchronous driver, in SQLite's dialect and placeholders (what is dialect-free is in
// `shared`).
/// The object with this id, if it exists and is in `scope`.
fn find(
    conn: &Connection,
    kind: ObjectKind,
    id: u64,
    scope: Option<u64>,
) -> Result<Option<Record>, StoreError> {
    let Some((id, scope)) = sql_id_in_scope(id, scope) else {
        return Ok(None);
    };
    let sql = format!(
        "SELECT {RECORD_COLUMNS} FROM {} WHERE id = ?1 AND (?2 IS NULL OR owner_id = ?2)",
        table(kind)
    );
    Ok(query_records(conn, kind, &sql, params![id, scope])?.pop())
}

/// Like [`find`], but a missing object is `NotFound`.
fn require(
    conn: &Connection,
    kind: ObjectKind,
    id: u64,
    scope: Option<u64>,
) -> Result<Record, StoreError> {
    find(conn, kind, id, scope)?.ok_or(StoreError::NotFound { kind, id })
}

fn bump_change_counter(conn: &Connection) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE change_counter SET value = value + 1 WHERE id = 1",
        [],
    )
    .map_err(backend)?;
    Ok(())
}

fn read_change_counter(conn: &Connection) -> Result<u64, StoreError> {
    conn.query_row("SELECT value FROM change_counter WHERE id = 1", [], |row| {
        row.get(0)
    })
    .map_err(backend)
}

// Twin of postgres.rs's `new_owner` and `create_in` (see `find`).
/// The owner a new object gets: its parent's, checked to exist in scope and not be archived.
/// `None` for a root, which owns itself once it has an id.
fn new_owner(
    conn: &Connection,
    kind: ObjectKind,
    draft: &Draft,
    scope: Option<u64>,
) -> Result<Option<u64>, StoreError> {
    let Some((parent_kind, parent_id)) = parent_of_new(kind, draft, scope)? else {
        return Ok(None);
    };
    let parent = find(conn, parent_kind, parent_id, scope)?;
    owner_from_parent(parent_kind, parent_id, parent).map(Some)
}

fn create_in(
    tx: &Transaction<'_>,
    kind: ObjectKind,
    draft: Draft,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let owner = new_owner(tx, kind, &draft, scope)?;
    let table = table(kind);
    tx.execute(
        &format!(
            "INSERT INTO {table}
                 (parent_id, owner_id, name, status, version, created_at, updated_at, body)
             VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5, ?6)"
        ),
        params![
            draft.parent_id,
            // A root's placeholder, replaced by its own id below.
            owner.unwrap_or(0),
            draft.name,
            draft.status.as_str(),
            now.as_microsecond(),
            draft.body,
        ],
    )
    .map_err(backend)?;
    let id = u64::try_from(tx.last_insert_rowid())
        .map_err(|_| StoreError::Corrupt(format!("negative id in {table}")))?;
    let owner_id = match owner {
        Some(owner) => owner,
        None => {
            tx.execute(
                &format!("UPDATE {table} SET owner_id = id WHERE id = ?1"),
                [id],
            )
            .map_err(backend)?;
            id
        }
    };
    bump_change_counter(tx)?;
    let created = created_record(kind, id, owner_id, draft, now);
    write_audit(
        tx,
        &NewEntry::of_write(by, AuditAction::Create, None, &created)?,
    )?;
    Ok(created)
}

fn write_audit(tx: &Transaction<'_>, entry: &NewEntry) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO audit
             (at, principal, role, object_kind, object_id, object_name, owner_id, action, changes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            entry.at,
            entry.principal,
            entry.role,
            entry.object_kind,
            entry.object_id,
            entry.object_name,
            entry.owner_id,
            entry.action,
            entry.changes,
        ],
    )
    .map_err(backend)?;
    Ok(())
}

fn audit_in(conn: &Connection, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
    let (filter, values) = audit_filter(query, |n| format!("?{n}"));
    let sql = format!(
        "SELECT {AUDIT_COLUMNS} FROM audit WHERE {filter} ORDER BY id DESC LIMIT {}",
        audit_limit(query)
    );
    let values: Vec<Value> = values
        .into_iter()
        .map(|value| match value {
            AuditParam::Int(int) => Value::Integer(int),
            AuditParam::Text(text) => Value::Text(text),
        })
        .collect();
    query_rows(conn, &sql, params_from_iter(values), |row| {
        rows::audit_entry(row)
    })
}

// Twin of postgres.rs's `audit_link` and `write_version` (see `find`).
/// Audits linking or unlinking `placement` on `line_item`, which exists (checked before).
fn audit_link(
    tx: &Transaction<'_>,
    by: &Actor,
    action: AuditAction,
    line_item: LineItemId,
    placement: PlacementId,
    now: Timestamp,
) -> Result<(), StoreError> {
    let record = require(tx, ObjectKind::LineItem, line_item.0, None)?;
    write_audit(
        tx,
        &NewEntry::of_link(by, action, &record, placement.0, now)?,
    )
}

/// Writes `next`, the next version of `current` (name, status, body, version, update time),
/// audits the change as `action`, and returns it.
fn write_version(
    tx: &Transaction<'_>,
    by: &Actor,
    action: AuditAction,
    current: &Record,
    next: Record,
) -> Result<Record, StoreError> {
    tx.execute(
        &format!(
            "UPDATE {} SET name = ?1, status = ?2, body = ?3, version = ?4, updated_at = ?5
             WHERE id = ?6",
            table(next.kind)
        ),
        params![
            next.name,
            next.status.as_str(),
            next.body,
            next.meta.version,
            next.meta.updated_at.as_microsecond(),
            next.meta.id
        ],
    )
    .map_err(backend)?;
    bump_change_counter(tx)?;
    write_audit(tx, &NewEntry::of_write(by, action, Some(current), &next)?)?;
    Ok(next)
}

// The trait method's arguments plus the transaction and its time.
// Twin of postgres.rs's `update_in` and `archive_in` (see `find`).
#[allow(clippy::too_many_arguments)]
fn update_in(
    tx: &Transaction<'_>,
    kind: ObjectKind,
    id: u64,
    expected_version: u64,
    draft: Draft,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let current = require(tx, kind, id, scope)?;
    let next = updated_version(current.clone(), expected_version, draft, now)?;
    write_version(tx, by, AuditAction::Update, &current, next)
}

fn archive_in(
    tx: &Transaction<'_>,
    kind: ObjectKind,
    id: u64,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let current = require(tx, kind, id, scope)?;
    if current.status == Status::Archived {
        return Ok(current);
    }
    let next = archived_version(current.clone(), now)?;
    write_version(tx, by, AuditAction::Archive, &current, next)
}

fn list_in(
    conn: &Connection,
    kind: ObjectKind,
    query: &ListQuery,
) -> Result<Vec<Record>, StoreError> {
    let mut sql = format!("SELECT {RECORD_COLUMNS} FROM {} WHERE 1 = 1", table(kind));
    let mut args = Vec::new();
    for (clause, id) in [
        (" AND owner_id = ?", query.scope),
        (" AND parent_id = ?", query.parent_id),
        (" AND id > ?", query.after),
    ] {
        if let Some(id) = id {
            let Some(id) = sql_id(id) else {
                return Ok(Vec::new());
            };
            sql.push_str(clause);
            args.push(Value::Integer(id));
        }
    }
    if let Some(status) = query.status {
        sql.push_str(" AND status = ?");
        args.push(Value::Text(status.as_str().to_owned()));
    }
    if let Some(needle) = &query.name_contains {
        // LIKE is case-insensitive for ASCII letters; other characters match exactly.
        sql.push_str(" AND name LIKE ? ESCAPE '\\'");
        args.push(Value::Text(like_pattern(needle)));
    }
    sql.push_str(" ORDER BY id LIMIT ?");
    args.push(Value::Integer(i64::from(query.limit.clamp(1, MAX_PAGE))));
    query_records(conn, kind, &sql, params_from_iter(args))
}

/// Links and unlinks need both ends to exist and not be archived (archived objects are final).
fn require_linkable(conn: &Connection, kind: ObjectKind, id: u64) -> Result<(), StoreError> {
    match find(conn, kind, id, None)? {
        Some(record) if record.status != Status::Archived => Ok(()),
        _ => Err(StoreError::NotFound { kind, id }),
    }
}

fn require_link_ends(
    conn: &Connection,
    line_item: LineItemId,
    placement: PlacementId,
) -> Result<(), StoreError> {
    require_linkable(conn, ObjectKind::LineItem, line_item.0)?;
    require_linkable(conn, ObjectKind::Placement, placement.0)
}

// Twin of postgres.rs's `change_link` (see `find`).
/// Links (`link`) or unlinks `placement` on `line_item`, both of which must exist and not be
/// archived; only a change is counted and audited. Returns whether anything changed.
fn change_link(
    tx: &Transaction<'_>,
    by: &Actor,
    link: bool,
    line_item: LineItemId,
    placement: PlacementId,
    now: Timestamp,
) -> Result<bool, StoreError> {
    require_link_ends(tx, line_item, placement)?;
    let (changed, action) = if link {
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO line_item_placements (line_item_id, placement_id, created_at)
             VALUES (?1, ?2, ?3)",
            params![line_item.0, placement.0, now.as_microsecond()],
        );
        (inserted, AuditAction::Link)
    } else {
        let deleted = tx.execute(
            "DELETE FROM line_item_placements WHERE line_item_id = ?1 AND placement_id = ?2",
            params![line_item.0, placement.0],
        );
        (deleted, AuditAction::Unlink)
    };
    let changed = changed.map_err(backend)? == 1;
    if changed {
        bump_change_counter(tx)?;
        audit_link(tx, by, action, line_item, placement, now)?;
    }
    Ok(changed)
}

// Twin of postgres.rs's `assignment_in`, `assign_in`, `unassign_in`, `assignments_where` and
// `copy_line_item_in` (see `find`).
/// The assignment of `creative` to `line_item`, if there is one.
fn assignment_in(
    conn: &Connection,
    line_item: LineItemId,
    creative: CreativeId,
) -> Result<Option<CreativeAssignment>, StoreError> {
    let sql = format!(
        "SELECT {ASSIGNMENT_COLUMNS} FROM line_item_creatives
         WHERE line_item_id = ?1 AND creative_id = ?2"
    );
    Ok(
        query_rows(conn, &sql, params![line_item.0, creative.0], |row| {
            rows::assignment(row)
        })?
        .pop(),
    )
}

fn assign_in(
    tx: &Transaction<'_>,
    assignment: CreativeAssignment,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let line_item = require(tx, ObjectKind::LineItem, assignment.line_item_id.0, scope)?;
    let creative = require(tx, ObjectKind::Creative, assignment.creative_id.0, scope)?;
    check_assignment(&line_item, &creative)?;
    let before = assignment_in(tx, assignment.line_item_id, assignment.creative_id)?;
    if before.as_ref() == Some(&assignment) {
        return Ok(false);
    }
    let (start, end) = flight_micros(&assignment);
    tx.execute(
        "INSERT INTO line_item_creatives
             (line_item_id, creative_id, weight, start_at, end_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (line_item_id, creative_id) DO UPDATE
         SET weight = excluded.weight, start_at = excluded.start_at, end_at = excluded.end_at",
        params![
            assignment.line_item_id.0,
            assignment.creative_id.0,
            assignment.weight,
            start,
            end,
            now.as_microsecond()
        ],
    )
    .map_err(backend)?;
    bump_change_counter(tx)?;
    write_audit(
        tx,
        &NewEntry::of_assignment(by, &line_item, before.as_ref(), Some(&assignment), now)?,
    )?;
    Ok(before.is_none())
}

fn unassign_in(
    tx: &Transaction<'_>,
    line_item: LineItemId,
    creative: CreativeId,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let record = require(tx, ObjectKind::LineItem, line_item.0, scope)?;
    if record.status == Status::Archived {
        return Err(StoreError::Archived {
            kind: ObjectKind::LineItem,
            id: line_item.0,
        });
    }
    // A creative id past i64 has no assignment.
    if sql_id(creative.0).is_none() {
        return Ok(false);
    }
    let Some(before) = assignment_in(tx, line_item, creative)? else {
        return Ok(false);
    };
    tx.execute(
        "DELETE FROM line_item_creatives WHERE line_item_id = ?1 AND creative_id = ?2",
        params![line_item.0, creative.0],
    )
    .map_err(backend)?;
    bump_change_counter(tx)?;
    write_audit(
        tx,
        &NewEntry::of_assignment(by, &record, Some(&before), None, now)?,
    )?;
    Ok(true)
}

/// The assignments whose `column` (`line_item_id` or `creative_id`) is `id`, in line item, then
/// creative order.
fn assignments_where(
    conn: &Connection,
    column: &str,
    id: u64,
) -> Result<Vec<CreativeAssignment>, StoreError> {
    let sql = format!(
        "SELECT {ASSIGNMENT_COLUMNS} FROM line_item_creatives WHERE {column} = ?1
         ORDER BY line_item_id, creative_id"
    );
    query_rows(conn, &sql, [id], |row| rows::assignment(row))
}

fn copy_line_item_in(
    tx: &Transaction<'_>,
    line_item: LineItemId,
    name: Option<String>,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let original = require(tx, ObjectKind::LineItem, line_item.0, scope)?;
    if original.status == Status::Archived {
        return Err(StoreError::Archived {
            kind: ObjectKind::LineItem,
            id: line_item.0,
        });
    }
    let copy = create_in(
        tx,
        ObjectKind::LineItem,
        copy_draft(&original, name)?,
        scope,
        by,
        now,
    )?;
    let copy_id = LineItemId(copy.meta.id);
    // Archived placements keep their links but take no new ones.
    let placements = query_rows(
        tx,
        "SELECT l.placement_id FROM line_item_placements l
         JOIN placements p ON p.id = l.placement_id
         WHERE l.line_item_id = ?1 AND p.status <> 'archived' ORDER BY l.placement_id",
        [line_item.0],
        |row| Ok(PlacementId(row.u64(0, "placement id")?)),
    )?;
    for placement in placements {
        change_link(tx, by, true, copy_id, placement, now)?;
    }
    let own = query_records(
        tx,
        ObjectKind::Creative,
        &format!("SELECT {RECORD_COLUMNS} FROM creatives WHERE parent_id = ?1 ORDER BY id"),
        [line_item.0],
    )?;
    let assigned = assignments_where(tx, "line_item_id", line_item.0)?;
    for assignment in copied_assignments(copy_id, &own, assigned)? {
        match assign_in(tx, assignment, scope, by, now) {
            // An archived creative serves nowhere; the copy leaves it out.
            Err(StoreError::Archived { .. }) => {}
            other => {
                other?;
            }
        }
    }
    Ok(copy)
}

fn create_token_in(
    tx: &Transaction<'_>,
    token: NewToken,
    now: Timestamp,
) -> Result<TokenRecord, StoreError> {
    if !owner_fits_role(tx, token.role, token.owner_id)? {
        return Err(StoreError::BadTokenOwner {
            role: token.role,
            owner: token.owner_id,
        });
    }
    tx.execute(
        "INSERT INTO api_tokens (token_hash, role, owner_id, label, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            &token.hash[..],
            token.role.as_str(),
            token.owner_id,
            token.label,
            now.as_microsecond()
        ],
    )
    .map_err(backend)?;
    let id = u64::try_from(tx.last_insert_rowid())
        .map_err(|_| StoreError::Corrupt("negative id in api_tokens".to_owned()))?;
    Ok(token_record(id, token, now))
}

/// Whether `owner` is what `role` needs: none for an admin, an existing advertiser or publisher
/// for the tenant roles. Shared by tokens and dashboard users.
fn owner_fits_role(
    tx: &Transaction<'_>,
    role: Role,
    owner: Option<u64>,
) -> Result<bool, StoreError> {
    match role_owner(role, owner) {
        RoleOwner::None => Ok(true),
        RoleOwner::Existing(kind, id) => find(tx, kind, id, None).map(|found| found.is_some()),
        RoleOwner::Invalid => Ok(false),
    }
}

fn find_token_in(conn: &Connection, hash: &[u8; 32]) -> Result<Option<Principal>, StoreError> {
    let mut found = query_rows(
        conn,
        "SELECT id, role, owner_id FROM api_tokens WHERE token_hash = ?1",
        [&hash[..]],
        |row| rows::principal(row),
    )?;
    Ok(found.pop())
}

/// Every active object of type `T`, in id order.
fn active<T: Object>(conn: &Connection) -> Result<Vec<Stored<T>>, StoreError> {
    let sql = format!(
        "SELECT {RECORD_COLUMNS} FROM {} WHERE status = 'active' ORDER BY id",
        table(T::KIND)
    );
    query_records(conn, T::KIND, &sql, [])?
        .iter()
        .map(Record::decode)
        .collect()
}

fn links(conn: &Connection) -> Result<Vec<(LineItemId, PlacementId)>, StoreError> {
    query_rows(
        conn,
        "SELECT line_item_id, placement_id FROM line_item_placements
         ORDER BY line_item_id, placement_id",
        [],
        |row| rows::link(row),
    )
}

fn all_assignments(conn: &Connection) -> Result<Vec<CreativeAssignment>, StoreError> {
    let sql = format!(
        "SELECT {ASSIGNMENT_COLUMNS} FROM line_item_creatives ORDER BY line_item_id, creative_id"
    );
    query_rows(conn, &sql, [], |row| rows::assignment(row))
}

fn catalog_in(conn: &Connection) -> Result<Catalog, StoreError> {
    Ok(Catalog {
        version: read_change_counter(conn)?,
        advertisers: active(conn)?,
        campaigns: active(conn)?,
        line_items: active(conn)?,
        creatives: active(conn)?,
        publishers: active(conn)?,
        sites: active(conn)?,
        placements: active(conn)?,
        links: links(conn)?,
        assignments: all_assignments(conn)?,
    })
}

// The signatures are the `Store` trait's, so they repeat it and each other; each body is
// deliberately the twin of postgres.rs's: a closure run on the writer or a reader.
#[async_trait]
impl Store for SqliteStore {
    async fn create(
        &self,
        kind: ObjectKind,
        draft: Draft,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| create_in(tx, kind, draft, scope, &by, now))
            .await
    }

    async fn get(
        &self,
        kind: ObjectKind,
        id: u64,
        scope: Option<u64>,
    ) -> Result<Record, StoreError> {
        self.read(move |tx| require(tx, kind, id, scope)).await
    }

    async fn list(&self, kind: ObjectKind, query: &ListQuery) -> Result<Vec<Record>, StoreError> {
        let query = query.clone();
        self.read(move |tx| list_in(tx, kind, &query)).await
    }

    // Same as the trait's signature and postgres.rs's method, deliberately (see the impl's note).
    async fn update(
        &self,
        kind: ObjectKind,
        id: u64,
        expected_version: u64,
        draft: Draft,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| update_in(tx, kind, id, expected_version, draft, scope, &by, now))
            .await
    }

    async fn archive(
        &self,
        kind: ObjectKind,
        id: u64,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| archive_in(tx, kind, id, scope, &by, now))
            .await
    }

    async fn link(
        &self,
        line_item: LineItemId,
        placement: PlacementId,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| change_link(tx, &by, true, line_item, placement, now))
            .await
    }

    // Same as `link` and postgres.rs's methods, deliberately (see the impl's note).
    async fn unlink(
        &self,
        line_item: LineItemId,
        placement: PlacementId,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| change_link(tx, &by, false, line_item, placement, now))
            .await
    }

    async fn placements_of(
        &self,
        line_item: LineItemId,
        scope: Option<u64>,
    ) -> Result<Vec<PlacementId>, StoreError> {
        self.read(move |tx| {
            require(tx, ObjectKind::LineItem, line_item.0, scope)?;
            query_rows(
                tx,
                "SELECT placement_id FROM line_item_placements
                 WHERE line_item_id = ?1 ORDER BY placement_id",
                [line_item.0],
                |row| Ok(PlacementId(row.u64(0, "placement id")?)),
            )
        })
        .await
    }

    async fn assign(
        &self,
        assignment: CreativeAssignment,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| assign_in(tx, assignment, scope, &by, now))
            .await
    }

    async fn unassign(
        &self,
        line_item: LineItemId,
        creative: CreativeId,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| unassign_in(tx, line_item, creative, scope, &by, now))
            .await
    }

    async fn assignments_of(
        &self,
        line_item: LineItemId,
        scope: Option<u64>,
    ) -> Result<Vec<CreativeAssignment>, StoreError> {
        self.read(move |tx| {
            require(tx, ObjectKind::LineItem, line_item.0, scope)?;
            assignments_where(tx, "line_item_id", line_item.0)
        })
        .await
    }

    // Same as `assignments_of` and postgres.rs's methods, deliberately (see the impl's note).
    async fn assignments_to(
        &self,
        creative: CreativeId,
        scope: Option<u64>,
    ) -> Result<Vec<CreativeAssignment>, StoreError> {
        self.read(move |tx| {
            require(tx, ObjectKind::Creative, creative.0, scope)?;
            assignments_where(tx, "creative_id", creative.0)
        })
        .await
    }

    async fn copy_line_item(
        &self,
        line_item: LineItemId,
        name: Option<String>,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| copy_line_item_in(tx, line_item, name, scope, &by, now))
            .await
    }

    async fn create_token(&self, token: NewToken, by: &Actor) -> Result<TokenRecord, StoreError> {
        let by = by.clone();
        self.write(move |tx, now| {
            let created = create_token_in(tx, token, now)?;
            write_audit(
                tx,
                &NewEntry::of_token(&by, AuditAction::Create, &created, now)?,
            )?;
            Ok(created)
        })
        .await
    }

    async fn find_token(&self, hash: &[u8; 32]) -> Result<Option<Principal>, StoreError> {
        let hash = *hash;
        self.read(move |tx| find_token_in(tx, &hash)).await
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM api_tokens ORDER BY id");
        self.read(move |tx| query_rows(tx, &sql, [], |row| rows::token(row)))
            .await
    }

    async fn revoke_token(&self, id: u64, by: &Actor) -> Result<Option<TokenRecord>, StoreError> {
        // An id no row can have (past i64) is simply not found.
        let Some(id) = sql_id(id) else {
            return Ok(None);
        };
        let sql = format!("DELETE FROM api_tokens WHERE id = ?1 RETURNING {TOKEN_COLUMNS}");
        let by = by.clone();
        self.write(move |tx, now| {
            let Some(revoked) = query_rows(tx, &sql, [id], |row| rows::token(row))?.pop() else {
                return Ok(None);
            };
            write_audit(
                tx,
                &NewEntry::of_token(&by, AuditAction::Revoke, &revoked, now)?,
            )?;
            Ok(Some(revoked))
        })
        .await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let query = query.clone();
        self.read(move |tx| audit_in(tx, &query)).await
    }

    async fn change_counter(&self) -> Result<u64, StoreError> {
        self.read(|tx| read_change_counter(tx)).await
    }

    async fn catalog(&self) -> Result<Catalog, StoreError> {
        self.read(|tx| catalog_in(tx)).await
    }

    async fn try_lock_manager(&self) -> Result<LockAttempt, StoreError> {
        try_lock_file(&self.inner.path)
    }
}
