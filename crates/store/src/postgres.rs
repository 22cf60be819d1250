//! PostgreSQL store: the same [`Store`] on a PostgreSQL server, through a pool of
//! `tokio-postgres` connections (`deadpool-postgres`), for deployments where the manager's
//! database is a server of its own.
//!
//! The schema mirrors SQLite's (see `migrations/postgres/`): one table per kind with the same
//! columns, so one generic code path serves all kinds. Table names come only from [`ObjectKind`];
//! every value is a bound parameter. Every write of objects, links, tokens or users starts by
//! locking the change counter's row: that orders those writes as SQLite's single writer does,
//! so the clock is read in commit order and the check-then-write steps (parent alive, version
//! current, name free) see no concurrent change. Reads run in a read-only `REPEATABLE READ`
//! transaction: one consistent snapshot, never waiting for a writer.
//!
//! Connections are plain TCP (no TLS): reach the server over a private network or a local
//! socket.
//!
//! Deliberate twin of `sqlite.rs`: the same statements in PostgreSQL's dialect through an async
//! driver, where SQLite's is synchronous on its own threads; what is dialect-free is in `shared`.

/// Runs `$body` (an expression using `tx` and `now`) in a write transaction and commits it.
macro_rules! in_write {
    ($store:expr, |$tx:ident, $now:ident| $body:expr) => {{
        let mut client = $store.client().await?;
        let ($tx, $now) = $crate::postgres::begin_write(&mut client, $store.clock.as_ref()).await?;
        let value = $body;
        $tx.commit().await.map_err($crate::postgres::pg)?;
        Ok(value)
    }};
}

/// Runs `$body` (an expression using `tx`) in a read-only transaction.
macro_rules! in_read {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut client = $store.client().await?;
        let $tx = $crate::postgres::begin_read(&mut client).await?;
        let value = $body;
        $tx.commit().await.map_err($crate::postgres::pg)?;
        Ok(value)
    }};
}

mod manager_lock;
mod migrate;
mod pacing;
mod stats;
mod users;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use jiff::Timestamp;
use marquee_model::{
    Catalog, Clock, CreativeAssignment, CreativeId, LineItemId, Object as ModelObject, ObjectKind,
    PlacementId, Principal, Role, Status, Stored,
};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, NoTls, Row};

use crate::audit::{AUDIT_COLUMNS, AuditParam, NewEntry, audit_filter, audit_limit};
use crate::manager_lock::LockAttempt;
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

/// Connections the pool opens at most; the manager's loops and API handlers share them.
const POOL_SIZE: usize = 8;
/// Report queries at once: half the pool, so that heavy reports leave connections to token
/// lookups and the manager's loops.
const REPORTS_AT_ONCE: usize = POOL_SIZE / 2;
/// How long a caller waits for a free connection, and a new connection for the server.
const POOL_TIMEOUT: Duration = Duration::from_secs(10);

type Tx<'a> = deadpool_postgres::Transaction<'a>;

/// The manager's database on a PostgreSQL server.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: Pool,
    clock: Arc<dyn Clock>,
    /// The pool's connection settings, for the manager lock's connection of its own.
    config: tokio_postgres::Config,
    reports: Arc<ReportGate>,
}

impl PostgresStore {
    /// Connects to the server at `url` (`postgres://user:password@host:port/database`, or the
    /// key-value form libpq accepts) and applies pending migrations, under an advisory lock so
    /// that managers starting at once apply each migration once.
    pub async fn connect(url: &str, clock: Arc<dyn Clock>) -> Result<PostgresStore, StoreError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::Backend(format!("invalid PostgreSQL URL: {}", pg_message(&e)).into())
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(POOL_TIMEOUT);
        }
        let target = describe(&config);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Backend(format!("PostgreSQL pool: {e}").into()))?;
        let store = PostgresStore {
            pool,
            clock,
            config,
            reports: Arc::new(ReportGate::new(REPORTS_AT_ONCE)),
        };
        let mut client = store.pool.get().await.map_err(|e| {
            StoreError::Backend(
                format!(
                    "cannot connect to PostgreSQL at {target}: {}",
                    pool_message(e)
                )
                .into(),
            )
        })?;
        migrate::migrate(&mut client, store.clock.as_ref()).await?;
        Ok(store)
    }

    /// The clock this store stamps rows with.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Backend(pool_message(e).into()))
    }
}

fn pool_message(e: deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg_message(&e),
        other => other.to_string(),
    }
}

/// `host:port/database` of a connection configuration, without credentials, for messages.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or_default();
    format!("{host}:{port}/{database}")
}

/// A driver error with its cause: tokio-postgres's own text is only the error's category
/// ("db error"), the server's message is in its source.
pub(crate) fn pg_message(e: &tokio_postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

fn pg(e: tokio_postgres::Error) -> StoreError {
    StoreError::Backend(pg_message(&e).into())
}

/// Starts a write transaction of objects, links, tokens or users: locks the change counter's
/// row, which queues such writes one after another, and reads the clock under that lock so
/// that timestamps follow commit order.
async fn begin_write<'a>(
    client: &'a mut Object,
    clock: &dyn Clock,
) -> Result<(Tx<'a>, Timestamp), StoreError> {
    let tx = client.transaction().await.map_err(pg)?;
    let lock = tx
        .prepare_cached("SELECT value FROM change_counter WHERE id = 1 FOR UPDATE")
        .await
        .map_err(pg)?;
    tx.query_one(&lock, &[]).await.map_err(pg)?;
    Ok((tx, clock.now()))
}

/// Starts a read-only transaction: one consistent snapshot for all its statements.
async fn begin_read(client: &mut Object) -> Result<Tx<'_>, StoreError> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg)
}

/// Runs `sql` (prepared once per connection) and returns its rows.
async fn query(
    tx: &Tx<'_>,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let statement = tx.prepare_cached(sql).await.map_err(pg)?;
    tx.query(&statement, params).await.map_err(pg)
}

/// Runs `sql` (prepared once per connection) and returns the number of rows it changed.
async fn execute(
    tx: &Tx<'_>,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let statement = tx.prepare_cached(sql).await.map_err(pg)?;
    tx.execute(&statement, params).await.map_err(pg)
}

/// A stored id or count as the model's `u64`; a negative one is corruption.
fn to_u64(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {what}: {value}")))
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    column: usize,
) -> Result<T, StoreError> {
    row.try_get(column).map_err(pg)
}

/// A small integer column as the model's unsigned type; one that does not fit is corruption,
/// named `what`.
fn small<'a, T, U>(row: &'a Row, column: usize, what: &str) -> Result<U, StoreError>
where
    T: tokio_postgres::types::FromSql<'a> + Copy + std::fmt::Display,
    U: TryFrom<T>,
{
    let value: T = get(row, column)?;
    U::try_from(value).map_err(|_| StoreError::Corrupt(format!("{what} {value}")))
}

// PostgreSQL has no unsigned types: ids and counts are `int8`, a device `int2`, a shard
// `int8`; a stored value the model's type cannot hold is corruption.
impl Columns for Row {
    fn u64(&self, column: usize, what: &str) -> Result<u64, StoreError> {
        to_u64(get(self, column)?, what)
    }

    fn optional_u64(&self, column: usize, what: &str) -> Result<Option<u64>, StoreError> {
        let value: Option<i64> = get(self, column)?;
        value.map(|v| to_u64(v, what)).transpose()
    }

    fn u8(&self, column: usize, what: &str) -> Result<u8, StoreError> {
        small::<i16, u8>(self, column, what)
    }

    fn u32(&self, column: usize, what: &str) -> Result<u32, StoreError> {
        small::<i64, u32>(self, column, what)
    }

    fn i32(&self, column: usize) -> Result<i32, StoreError> {
        get(self, column)
    }

    fn i64(&self, column: usize) -> Result<i64, StoreError> {
        get(self, column)
    }

    fn optional_i64(&self, column: usize) -> Result<Option<i64>, StoreError> {
        get(self, column)
    }

    fn string(&self, column: usize) -> Result<String, StoreError> {
        get(self, column)
    }

    fn bytes(&self, column: usize) -> Result<Cow<'_, [u8]>, StoreError> {
        get(self, column).map(Cow::Borrowed)
    }
}

async fn query_records(
    tx: &Tx<'_>,
    kind: ObjectKind,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Record>, StoreError> {
    query(tx, sql, params)
        .await?
        .iter()
        .map(|row| rows::record(kind, row))
        .collect()
}

/// The object with this id, if it exists and is in `scope`.
async fn find(
    tx: &Tx<'_>,
    kind: ObjectKind,
    id: u64,
    scope: Option<u64>,
) -> Result<Option<Record>, StoreError> {
    let Some((id, scope)) = sql_id_in_scope(id, scope) else {
        return Ok(None);
    };
    let sql = format!(
        "SELECT {RECORD_COLUMNS} FROM {} WHERE id = $1 AND ($2::int8 IS NULL OR owner_id = $2)",
        table(kind)
    );
    Ok(query_records(tx, kind, &sql, &[&id, &scope]).await?.pop())
}

/// Like [`find`], but a missing object is `NotFound`.
async fn require(
    tx: &Tx<'_>,
    kind: ObjectKind,
    id: u64,
    scope: Option<u64>,
) -> Result<Record, StoreError> {
    find(tx, kind, id, scope)
        .await?
        .ok_or(StoreError::NotFound { kind, id })
}

async fn bump_change_counter(tx: &Tx<'_>) -> Result<(), StoreError> {
    execute(
        tx,
        "UPDATE change_counter SET value = value + 1 WHERE id = 1",
        &[],
    )
    .await?;
    Ok(())
}

async fn read_change_counter(tx: &Tx<'_>) -> Result<u64, StoreError> {
    let rows = query(tx, "SELECT value FROM change_counter WHERE id = 1", &[]).await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Corrupt("the change counter row is missing".to_owned()))?;
    row.u64(0, "change counter")
}

/// The owner a new object gets: its parent's, checked to exist in scope and not be archived.
/// `None` for a root, which owns itself once it has an id.
async fn new_owner(
    tx: &Tx<'_>,
    kind: ObjectKind,
    draft: &Draft,
    scope: Option<u64>,
) -> Result<Option<u64>, StoreError> {
    let Some((parent_kind, parent_id)) = parent_of_new(kind, draft, scope)? else {
        return Ok(None);
    };
    let parent = find(tx, parent_kind, parent_id, scope).await?;
    owner_from_parent(parent_kind, parent_id, parent).map(Some)
}

async fn create_in(
    tx: &Tx<'_>,
    kind: ObjectKind,
    draft: Draft,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let owner = new_owner(tx, kind, &draft, scope).await?;
    let table = table(kind);
    // Found above, so they fit.
    let parent = draft.parent_id.and_then(sql_id);
    let owner_param = owner.and_then(sql_id);
    let micros = now.as_microsecond();
    // A root owns itself: its owner is its own id, drawn first so one statement inserts it.
    let rows = query(
        tx,
        &format!(
            "WITH new AS (SELECT nextval(pg_get_serial_sequence('{table}', 'id')) AS id)
             INSERT INTO {table}
                 (id, parent_id, owner_id, name, status, version, created_at, updated_at, body)
             OVERRIDING SYSTEM VALUE
             SELECT id, $1, coalesce($2, id), $3, $4, 1, $5, $5, $6 FROM new
             RETURNING id, owner_id"
        ),
        &[
            &parent,
            &owner_param,
            &draft.name,
            &draft.status.as_str(),
            &micros,
            &draft.body,
        ],
    )
    .await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Corrupt(format!("no id returned by {table}")))?;
    let id = row.u64(0, "id")?;
    let owner_id = row.u64(1, "owner id")?;
    bump_change_counter(tx).await?;
    let created = created_record(kind, id, owner_id, draft, now);
    write_audit(
        tx,
        &NewEntry::of_write(by, AuditAction::Create, None, &created)?,
    )
    .await?;
    Ok(created)
}

async fn write_audit(tx: &Tx<'_>, entry: &NewEntry) -> Result<(), StoreError> {
    execute(
        tx,
        "INSERT INTO audit
             (at, principal, role, object_kind, object_id, object_name, owner_id, action, changes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &entry.at,
            &entry.principal,
            &entry.role,
            &entry.object_kind,
            &entry.object_id,
            &entry.object_name,
            &entry.owner_id,
            &entry.action,
            &entry.changes,
        ],
    )
    .await?;
    Ok(())
}

async fn audit_in(tx: &Tx<'_>, q: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
    let (filter, values) = audit_filter(q, |n| format!("${n}"));
    let sql = format!(
        "SELECT {AUDIT_COLUMNS} FROM audit WHERE {filter} ORDER BY id DESC LIMIT {}",
        audit_limit(q)
    );
    let params: Vec<&(dyn ToSql + Sync)> = values
        .iter()
        .map(|value| match value {
            AuditParam::Int(int) => int as &(dyn ToSql + Sync),
            AuditParam::Text(text) => text as &(dyn ToSql + Sync),
        })
        .collect();
    // Not prepared once per connection: the filters make many statements, each rare.
    tx.query(&sql, &params)
        .await
        .map_err(pg)?
        .iter()
        .map(rows::audit_entry)
        .collect()
}

/// Audits linking or unlinking `placement` on `line_item`, which exists (checked before).
async fn audit_link(
    tx: &Tx<'_>,
    by: &Actor,
    action: AuditAction,
    line_item: LineItemId,
    placement: PlacementId,
    now: Timestamp,
) -> Result<(), StoreError> {
    let record = require(tx, ObjectKind::LineItem, line_item.0, None).await?;
    write_audit(
        tx,
        &NewEntry::of_link(by, action, &record, placement.0, now)?,
    )
    .await
}

/// Writes `next`, the next version of `current` (name, status, body, version, update time),
/// audits the change as `action`, and returns it.
async fn write_version(
    tx: &Tx<'_>,
    by: &Actor,
    action: AuditAction,
    current: &Record,
    next: Record,
) -> Result<Record, StoreError> {
    let version = next.meta.version;
    let stored_version = i64::try_from(version)
        .map_err(|_| StoreError::Corrupt(format!("version {version} above i64::MAX")))?;
    let id = sql_id(next.meta.id)
        .ok_or_else(|| StoreError::Corrupt(format!("id {} above i64::MAX", next.meta.id)))?;
    execute(
        tx,
        &format!(
            "UPDATE {} SET name = $1, status = $2, body = $3, version = $4, updated_at = $5
             WHERE id = $6",
            table(next.kind)
        ),
        &[
            &next.name,
            &next.status.as_str(),
            &next.body,
            &stored_version,
            &next.meta.updated_at.as_microsecond(),
            &id,
        ],
    )
    .await?;
    bump_change_counter(tx).await?;
    write_audit(tx, &NewEntry::of_write(by, action, Some(current), &next)?).await?;
    Ok(next)
}

// The trait method's arguments plus the transaction and its time.
#[allow(clippy::too_many_arguments)]
async fn update_in(
    tx: &Tx<'_>,
    kind: ObjectKind,
    id: u64,
    expected_version: u64,
    draft: Draft,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let current = require(tx, kind, id, scope).await?;
    let next = updated_version(current.clone(), expected_version, draft, now)?;
    write_version(tx, by, AuditAction::Update, &current, next).await
}

async fn archive_in(
    tx: &Tx<'_>,
    kind: ObjectKind,
    id: u64,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let current = require(tx, kind, id, scope).await?;
    if current.status == Status::Archived {
        return Ok(current);
    }
    let next = archived_version(current.clone(), now)?;
    write_version(tx, by, AuditAction::Archive, &current, next).await
}

async fn list_in(tx: &Tx<'_>, kind: ObjectKind, q: &ListQuery) -> Result<Vec<Record>, StoreError> {
    let mut sql = format!("SELECT {RECORD_COLUMNS} FROM {} WHERE true", table(kind));
    let mut ids: Vec<i64> = Vec::new();
    let mut clauses = Vec::new();
    for (column, op, id) in [
        ("owner_id", "=", q.scope),
        ("parent_id", "=", q.parent_id),
        ("id", ">", q.after),
    ] {
        if let Some(id) = id {
            let Some(id) = sql_id(id) else {
                return Ok(Vec::new());
            };
            ids.push(id);
            clauses.push((column, op));
        }
    }
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
    for ((column, op), id) in clauses.iter().zip(&ids) {
        params.push(id);
        sql.push_str(&format!(" AND {column} {op} ${}", params.len()));
    }
    let status = q.status.map(Status::as_str);
    if let Some(status) = &status {
        params.push(status);
        sql.push_str(&format!(" AND status = ${}", params.len()));
    }
    // Case-insensitive for ASCII letters only, as SQLite's LIKE; other characters match
    // exactly whatever the database's collation.
    let pattern = q
        .name_contains
        .as_deref()
        .map(|needle| like_pattern(&needle.to_ascii_lowercase()));
    if let Some(pattern) = &pattern {
        params.push(pattern);
        sql.push_str(&format!(
            " AND translate(name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') \
             LIKE ${} ESCAPE '\\'",
            params.len()
        ));
    }
    let limit = i64::from(q.limit.clamp(1, MAX_PAGE));
    params.push(&limit);
    sql.push_str(&format!(" ORDER BY id LIMIT ${}", params.len()));
    query_records(tx, kind, &sql, &params).await
}

/// Links and unlinks need both ends to exist and not be archived (archived objects are final).
async fn require_linkable(tx: &Tx<'_>, kind: ObjectKind, id: u64) -> Result<i64, StoreError> {
    match find(tx, kind, id, None).await? {
        Some(record) if record.status != Status::Archived => {
            sql_id(id).ok_or(StoreError::NotFound { kind, id })
        }
        _ => Err(StoreError::NotFound { kind, id }),
    }
}

async fn require_link_ends(
    tx: &Tx<'_>,
    line_item: LineItemId,
    placement: PlacementId,
) -> Result<(i64, i64), StoreError> {
    Ok((
        require_linkable(tx, ObjectKind::LineItem, line_item.0).await?,
        require_linkable(tx, ObjectKind::Placement, placement.0).await?,
    ))
}

/// Whether `owner` is what `role` needs: none for an admin, an existing advertiser or publisher
/// for the tenant roles. Shared by tokens and dashboard users.
async fn owner_fits_role(tx: &Tx<'_>, role: Role, owner: Option<u64>) -> Result<bool, StoreError> {
    match role_owner(role, owner) {
        RoleOwner::None => Ok(true),
        RoleOwner::Existing(kind, id) => Ok(find(tx, kind, id, None).await?.is_some()),
        RoleOwner::Invalid => Ok(false),
    }
}

async fn create_token_in(
    tx: &Tx<'_>,
    token: NewToken,
    now: Timestamp,
) -> Result<TokenRecord, StoreError> {
    if !owner_fits_role(tx, token.role, token.owner_id).await? {
        return Err(StoreError::BadTokenOwner {
            role: token.role,
            owner: token.owner_id,
        });
    }
    let owner = token.owner_id.and_then(sql_id);
    let rows = query(
        tx,
        "INSERT INTO api_tokens (token_hash, role, owner_id, label, created_at)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
        &[
            &&token.hash[..],
            &token.role.as_str(),
            &owner,
            &token.label,
            &now.as_microsecond(),
        ],
    )
    .await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Corrupt("no id returned by api_tokens".to_owned()))?;
    Ok(token_record(row.u64(0, "token id")?, token, now))
}

async fn find_token_in(tx: &Tx<'_>, hash: &[u8; 32]) -> Result<Option<Principal>, StoreError> {
    query(
        tx,
        "SELECT id, role, owner_id FROM api_tokens WHERE token_hash = $1",
        &[&&hash[..]],
    )
    .await?
    .first()
    .map(rows::principal)
    .transpose()
}

/// Every active object of type `T`, in id order.
async fn active<T: ModelObject>(tx: &Tx<'_>) -> Result<Vec<Stored<T>>, StoreError> {
    let sql = format!(
        "SELECT {RECORD_COLUMNS} FROM {} WHERE status = 'active' ORDER BY id",
        table(T::KIND)
    );
    query_records(tx, T::KIND, &sql, &[])
        .await?
        .iter()
        .map(Record::decode)
        .collect()
}

async fn links(tx: &Tx<'_>) -> Result<Vec<(LineItemId, PlacementId)>, StoreError> {
    query(
        tx,
        "SELECT line_item_id, placement_id FROM line_item_placements
         ORDER BY line_item_id, placement_id",
        &[],
    )
    .await?
    .iter()
    .map(rows::link)
    .collect()
}

async fn all_assignments(tx: &Tx<'_>) -> Result<Vec<CreativeAssignment>, StoreError> {
    let sql = format!(
        "SELECT {ASSIGNMENT_COLUMNS} FROM line_item_creatives ORDER BY line_item_id, creative_id"
    );
    query(tx, &sql, &[])
        .await?
        .iter()
        .map(rows::assignment)
        .collect()
}

async fn catalog_in(tx: &Tx<'_>) -> Result<Catalog, StoreError> {
    Ok(Catalog {
        version: read_change_counter(tx).await?,
        advertisers: active(tx).await?,
        campaigns: active(tx).await?,
        line_items: active(tx).await?,
        creatives: active(tx).await?,
        publishers: active(tx).await?,
        sites: active(tx).await?,
        placements: active(tx).await?,
        links: links(tx).await?,
        assignments: all_assignments(tx).await?,
    })
}

// Twins of sqlite.rs's `assignment_in`, `assign_in`, `unassign_in`, `assignments_where` and
// `copy_line_item_in`, deliberately: the same steps, asynchronous, in PostgreSQL's placeholders
// and types. Ids come from records `require` found, so they fit an `i64`.
/// The assignment of `creative` to `line_item`, if there is one.
async fn assignment_in(
    tx: &Tx<'_>,
    line_item: i64,
    creative: i64,
) -> Result<Option<CreativeAssignment>, StoreError> {
    let sql = format!(
        "SELECT {ASSIGNMENT_COLUMNS} FROM line_item_creatives
         WHERE line_item_id = $1 AND creative_id = $2"
    );
    query(tx, &sql, &[&line_item, &creative])
        .await?
        .first()
        .map(rows::assignment)
        .transpose()
}

async fn assign_in(
    tx: &Tx<'_>,
    assignment: CreativeAssignment,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let line_item = require(tx, ObjectKind::LineItem, assignment.line_item_id.0, scope).await?;
    let creative = require(tx, ObjectKind::Creative, assignment.creative_id.0, scope).await?;
    check_assignment(&line_item, &creative)?;
    let line_item_id = sql_id(line_item.meta.id).unwrap_or_default();
    let creative_id = sql_id(creative.meta.id).unwrap_or_default();
    let before = assignment_in(tx, line_item_id, creative_id).await?;
    if before.as_ref() == Some(&assignment) {
        return Ok(false);
    }
    let (start, end) = flight_micros(&assignment);
    execute(
        tx,
        "INSERT INTO line_item_creatives
             (line_item_id, creative_id, weight, start_at, end_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (line_item_id, creative_id) DO UPDATE
         SET weight = excluded.weight, start_at = excluded.start_at, end_at = excluded.end_at",
        &[
            &line_item_id,
            &creative_id,
            &i64::from(assignment.weight),
            &start,
            &end,
            &now.as_microsecond(),
        ],
    )
    .await?;
    bump_change_counter(tx).await?;
    write_audit(
        tx,
        &NewEntry::of_assignment(by, &line_item, before.as_ref(), Some(&assignment), now)?,
    )
    .await?;
    Ok(before.is_none())
}

async fn unassign_in(
    tx: &Tx<'_>,
    line_item: LineItemId,
    creative: CreativeId,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let record = require(tx, ObjectKind::LineItem, line_item.0, scope).await?;
    if record.status == Status::Archived {
        return Err(StoreError::Archived {
            kind: ObjectKind::LineItem,
            id: line_item.0,
        });
    }
    let line_item_id = sql_id(line_item.0).unwrap_or_default();
    // A creative id past i64 has no assignment.
    let Some(creative_id) = sql_id(creative.0) else {
        return Ok(false);
    };
    let Some(before) = assignment_in(tx, line_item_id, creative_id).await? else {
        return Ok(false);
    };
    execute(
        tx,
        "DELETE FROM line_item_creatives WHERE line_item_id = $1 AND creative_id = $2",
        &[&line_item_id, &creative_id],
    )
    .await?;
    bump_change_counter(tx).await?;
    write_audit(
        tx,
        &NewEntry::of_assignment(by, &record, Some(&before), None, now)?,
    )
    .await?;
    Ok(true)
}

/// The assignments whose `column` (`line_item_id` or `creative_id`) is `id`, in line item, then
/// creative order.
async fn assignments_where(
    tx: &Tx<'_>,
    column: &str,
    id: i64,
) -> Result<Vec<CreativeAssignment>, StoreError> {
    let sql = format!(
        "SELECT {ASSIGNMENT_COLUMNS} FROM line_item_creatives WHERE {column} = $1
         ORDER BY line_item_id, creative_id"
    );
    query(tx, &sql, &[&id])
        .await?
        .iter()
        .map(rows::assignment)
        .collect()
}

async fn copy_line_item_in(
    tx: &Tx<'_>,
    line_item: LineItemId,
    name: Option<String>,
    scope: Option<u64>,
    by: &Actor,
    now: Timestamp,
) -> Result<Record, StoreError> {
    let original = require(tx, ObjectKind::LineItem, line_item.0, scope).await?;
    if original.status == Status::Archived {
        return Err(StoreError::Archived {
            kind: ObjectKind::LineItem,
            id: line_item.0,
        });
    }
    let id = sql_id(line_item.0).unwrap_or_default();
    let copy = create_in(
        tx,
        ObjectKind::LineItem,
        copy_draft(&original, name)?,
        scope,
        by,
        now,
    )
    .await?;
    let copy_id = LineItemId(copy.meta.id);
    // Archived placements keep their links but take no new ones.
    let placements = query(
        tx,
        "SELECT l.placement_id FROM line_item_placements l
         JOIN placements p ON p.id = l.placement_id
         WHERE l.line_item_id = $1 AND p.status <> 'archived' ORDER BY l.placement_id",
        &[&id],
    )
    .await?
    .iter()
    .map(|row| Ok(PlacementId(row.u64(0, "placement id")?)))
    .collect::<Result<Vec<_>, StoreError>>()?;
    for placement in placements {
        change_link(tx, by, true, copy_id, placement, now).await?;
    }
    let own = query_records(
        tx,
        ObjectKind::Creative,
        &format!("SELECT {RECORD_COLUMNS} FROM creatives WHERE parent_id = $1 ORDER BY id"),
        &[&id],
    )
    .await?;
    let assigned = assignments_where(tx, "line_item_id", id).await?;
    for assignment in copied_assignments(copy_id, &own, assigned)? {
        match assign_in(tx, assignment, scope, by, now).await {
            // An archived creative serves nowhere; the copy leaves it out.
            Err(StoreError::Archived { .. }) => {}
            other => {
                other?;
            }
        }
    }
    Ok(copy)
}

// Twin of sqlite.rs's `change_link`, deliberately: the same steps, asynchronous, in PostgreSQL's
// placeholders and types.
/// Links (`link`) or unlinks `placement` on `line_item`, both of which must exist and not be
/// archived; only a change is counted and audited. Returns whether anything changed.
async fn change_link(
    tx: &Tx<'_>,
    by: &Actor,
    link: bool,
    line_item: LineItemId,
    placement: PlacementId,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let (line_item_id, placement_id) = require_link_ends(tx, line_item, placement).await?;
    let (changed, action) = if link {
        let inserted = execute(
            tx,
            "INSERT INTO line_item_placements (line_item_id, placement_id, created_at)
             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&line_item_id, &placement_id, &now.as_microsecond()],
        )
        .await?;
        (inserted, AuditAction::Link)
    } else {
        let deleted = execute(
            tx,
            "DELETE FROM line_item_placements WHERE line_item_id = $1 AND placement_id = $2",
            &[&line_item_id, &placement_id],
        )
        .await?;
        (deleted, AuditAction::Unlink)
    };
    let changed = changed == 1;
    if changed {
        bump_change_counter(tx).await?;
        audit_link(tx, by, action, line_item, placement, now).await?;
    }
    Ok(changed)
}

// The signatures are the `Store` trait's, so they repeat it and each other; each body is
// deliberately the twin of sqlite.rs's: a transaction opened by `in_write!` or `in_read!`.
#[async_trait]
impl Store for PostgresStore {
    async fn create(
        &self,
        kind: ObjectKind,
        draft: Draft,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        in_write!(self, |tx, now| create_in(&tx, kind, draft, scope, by, now)
            .await?)
    }

    async fn get(
        &self,
        kind: ObjectKind,
        id: u64,
        scope: Option<u64>,
    ) -> Result<Record, StoreError> {
        in_read!(self, |tx| require(&tx, kind, id, scope).await?)
    }

    async fn list(&self, kind: ObjectKind, query: &ListQuery) -> Result<Vec<Record>, StoreError> {
        in_read!(self, |tx| list_in(&tx, kind, query).await?)
    }

    // Same as the trait's signature and sqlite.rs's method, deliberately (see the impl's note).
    async fn update(
        &self,
        kind: ObjectKind,
        id: u64,
        expected_version: u64,
        draft: Draft,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        in_write!(self, |tx, now| update_in(
            &tx,
            kind,
            id,
            expected_version,
            draft,
            scope,
            by,
            now
        )
        .await?)
    }

    async fn archive(
        &self,
        kind: ObjectKind,
        id: u64,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        in_write!(self, |tx, now| archive_in(&tx, kind, id, scope, by, now)
            .await?)
    }

    // Same as the trait's signatures and sqlite.rs's methods, deliberately (see the impl's note).
    async fn link(
        &self,
        line_item: LineItemId,
        placement: PlacementId,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        in_write!(self, |tx, now| change_link(
            &tx, by, true, line_item, placement, now
        )
        .await?)
    }

    async fn unlink(
        &self,
        line_item: LineItemId,
        placement: PlacementId,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        in_write!(self, |tx, now| change_link(
            &tx, by, false, line_item, placement, now
        )
        .await?)
    }

    async fn placements_of(
        &self,
        line_item: LineItemId,
        scope: Option<u64>,
    ) -> Result<Vec<PlacementId>, StoreError> {
        in_read!(self, |tx| {
            require(&tx, ObjectKind::LineItem, line_item.0, scope).await?;
            // `require` found it, so the id fits.
            let id = sql_id(line_item.0).unwrap_or_default();
            query(
                &tx,
                "SELECT placement_id FROM line_item_placements
                 WHERE line_item_id = $1 ORDER BY placement_id",
                &[&id],
            )
            .await?
            .iter()
            .map(|row| Ok(PlacementId(row.u64(0, "placement id")?)))
            .collect::<Result<Vec<_>, StoreError>>()?
        })
    }

    async fn assign(
        &self,
        assignment: CreativeAssignment,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        in_write!(self, |tx, now| assign_in(&tx, assignment, scope, by, now)
            .await?)
    }

    async fn unassign(
        &self,
        line_item: LineItemId,
        creative: CreativeId,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<bool, StoreError> {
        in_write!(self, |tx, now| unassign_in(
            &tx, line_item, creative, scope, by, now
        )
        .await?)
    }

    async fn assignments_of(
        &self,
        line_item: LineItemId,
        scope: Option<u64>,
    ) -> Result<Vec<CreativeAssignment>, StoreError> {
        in_read!(self, |tx| {
            let record = require(&tx, ObjectKind::LineItem, line_item.0, scope).await?;
            let id = sql_id(record.meta.id).unwrap_or_default();
            assignments_where(&tx, "line_item_id", id).await?
        })
    }

    // Same as `assignments_of` and sqlite.rs's methods, deliberately (see the impl's note).
    async fn assignments_to(
        &self,
        creative: CreativeId,
        scope: Option<u64>,
    ) -> Result<Vec<CreativeAssignment>, StoreError> {
        in_read!(self, |tx| {
            let record = require(&tx, ObjectKind::Creative, creative.0, scope).await?;
            let id = sql_id(record.meta.id).unwrap_or_default();
            assignments_where(&tx, "creative_id", id).await?
        })
    }

    async fn copy_line_item(
        &self,
        line_item: LineItemId,
        name: Option<String>,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Record, StoreError> {
        in_write!(self, |tx, now| copy_line_item_in(
            &tx, line_item, name, scope, by, now
        )
        .await?)
    }

    async fn create_token(&self, token: NewToken, by: &Actor) -> Result<TokenRecord, StoreError> {
        in_write!(self, |tx, now| {
            let created = create_token_in(&tx, token, now).await?;
            write_audit(
                &tx,
                &NewEntry::of_token(by, AuditAction::Create, &created, now)?,
            )
            .await?;
            created
        })
    }

    async fn find_token(&self, hash: &[u8; 32]) -> Result<Option<Principal>, StoreError> {
        in_read!(self, |tx| find_token_in(&tx, hash).await?)
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        in_read!(self, |tx| audit_in(&tx, query).await?)
    }

    async fn change_counter(&self) -> Result<u64, StoreError> {
        in_read!(self, |tx| read_change_counter(&tx).await?)
    }

    async fn catalog(&self) -> Result<Catalog, StoreError> {
        in_read!(self, |tx| catalog_in(&tx).await?)
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM api_tokens ORDER BY id");
        in_read!(self, |tx| query(&tx, &sql, &[])
            .await?
            .iter()
            .map(rows::token)
            .collect::<Result<Vec<_>, _>>()?)
    }

    async fn revoke_token(&self, id: u64, by: &Actor) -> Result<Option<TokenRecord>, StoreError> {
        // An id no row can have (past i64) is simply not found.
        let Some(id) = sql_id(id) else {
            return Ok(None);
        };
        let sql = format!("DELETE FROM api_tokens WHERE id = $1 RETURNING {TOKEN_COLUMNS}");
        in_write!(self, |tx, now| {
            let revoked = query(&tx, &sql, &[&id])
                .await?
                .first()
                .map(rows::token)
                .transpose()?;
            if let Some(revoked) = &revoked {
                write_audit(
                    &tx,
                    &NewEntry::of_token(by, AuditAction::Revoke, revoked, now)?,
                )
                .await?;
            }
            revoked
        })
    }

    async fn try_lock_manager(&self) -> Result<LockAttempt, StoreError> {
        self.try_lock_manager_session().await
    }
}
