//! Copies a SQLite database into an empty PostgreSQL one: the way from `marquee serve` on one
//! machine (SQLite) to a manager on PostgreSQL, keeping every object with its id and version,
//! links, API tokens, dashboard users and sessions, delivery statistics, the aggregation's
//! checkpoints and dedupe memory, pacing state and the change counter.
//!
//! The two schemas have the same tables and columns (one renamed: a checkpoint's `offset` is
//! `byte_offset` on PostgreSQL). For each table the copy takes PostgreSQL's columns and types
//! and reads the same columns from SQLite, so a column added to one schema and not the other
//! fails the copy by name instead of dropping data. SQLite is read in one read transaction (a
//! consistent picture even of a database in use); PostgreSQL is written in one transaction,
//! with `COPY … FROM STDIN BINARY`, so the copy lands whole or not at all, and only into a
//! database that holds nothing yet.

use std::path::Path;
use std::sync::Arc;

use bytes::BytesMut;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::mpsc;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::postgres::pg_message;
use crate::{PostgresStore, SqliteStore, StoreError};

/// Every table that holds data, parents before children (PostgreSQL checks the foreign keys
/// row by row). The change counter is set on its own; `schema_migrations` is each database's.
const TABLES: [&str; 22] = [
    "advertisers",
    "campaigns",
    "line_items",
    "creatives",
    "publishers",
    "sites",
    "placements",
    "line_item_placements",
    "line_item_creatives",
    "api_tokens",
    "users",
    "user_sessions",
    "pacing_state",
    "stats_minute",
    "stats_hour",
    "stats_day",
    "stats_hour_line_item",
    "stats_users",
    "stats_checkpoints",
    "stats_seen",
    "audit",
    "forecast_sample",
];

/// Rows sent from the SQLite reader to the PostgreSQL writer at a time.
const BATCH_ROWS: usize = 4_096;

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(
        "the PostgreSQL database already holds data ({table} has rows); \
         copy into a new, empty database"
    )]
    NotEmpty { table: &'static str },
    #[error("{table}.{column}: {found} cannot go into PostgreSQL's {expected} column")]
    Value {
        table: &'static str,
        column: String,
        found: String,
        expected: String,
    },
    #[error("reading the SQLite database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("writing the PostgreSQL database: {0}")]
    Postgres(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<tokio_postgres::Error> for CopyError {
    fn from(error: tokio_postgres::Error) -> Self {
        CopyError::Postgres(pg_message(&error))
    }
}

/// Rows copied per table, in [`TABLES`] order, and the change counter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySummary {
    pub tables: Vec<(&'static str, u64)>,
    pub change_counter: i64,
}

/// One value on its way, typed as its PostgreSQL column.
#[derive(Debug)]
enum Cell {
    Int8(Option<i64>),
    Int4(Option<i32>),
    Int2(Option<i16>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

impl ToSql for Cell {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Cell::Int8(value) => value.to_sql(ty, out),
            Cell::Int4(value) => value.to_sql(ty, out),
            Cell::Int2(value) => value.to_sql(ty, out),
            Cell::Text(value) => value.to_sql(ty, out),
            Cell::Bytes(value) => value.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        [Type::INT8, Type::INT4, Type::INT2, Type::TEXT, Type::BYTEA].contains(ty)
    }

    to_sql_checked!();
}

/// A table's columns as PostgreSQL has them.
struct TablePlan {
    table: &'static str,
    columns: Vec<(String, Type)>,
}

impl TablePlan {
    /// The `SELECT` that reads the same columns from SQLite.
    fn sqlite_select(&self) -> String {
        let columns: Vec<String> = self
            .columns
            .iter()
            .map(|(name, _)| format!("\"{}\"", sqlite_column(self.table, name)))
            .collect();
        format!("SELECT {} FROM {}", columns.join(", "), self.table)
    }

    fn copy_statement(&self) -> String {
        let columns: Vec<&str> = self.columns.iter().map(|(name, _)| name.as_str()).collect();
        format!(
            "COPY {} ({}) FROM STDIN BINARY",
            self.table,
            columns.join(", ")
        )
    }

    fn types(&self) -> Vec<Type> {
        self.columns.iter().map(|(_, ty)| ty.clone()).collect()
    }

    /// Column `index`'s SQLite value as its PostgreSQL type takes it.
    fn cell(&self, index: usize, value: Value) -> Result<Cell, CopyError> {
        let Some((name, ty)) = self.columns.get(index) else {
            return Err(CopyError::Postgres(format!(
                "{} has no column {index}",
                self.table
            )));
        };
        let mismatch = |found: &Value| CopyError::Value {
            table: self.table,
            column: name.clone(),
            found: describe(found),
            expected: ty.name().to_owned(),
        };
        let integer = |value: &Value| match value {
            Value::Null => Ok(None),
            Value::Integer(number) => Ok(Some(*number)),
            other => Err(mismatch(other)),
        };
        Ok(match *ty {
            Type::INT8 => Cell::Int8(integer(&value)?),
            Type::INT4 => Cell::Int4(
                integer(&value)?
                    .map(i32::try_from)
                    .transpose()
                    .map_err(|_| mismatch(&value))?,
            ),
            Type::INT2 => Cell::Int2(
                integer(&value)?
                    .map(i16::try_from)
                    .transpose()
                    .map_err(|_| mismatch(&value))?,
            ),
            Type::TEXT => Cell::Text(match value {
                Value::Null => None,
                Value::Text(text) => Some(text),
                other => return Err(mismatch(&other)),
            }),
            Type::BYTEA => Cell::Bytes(match value {
                Value::Null => None,
                Value::Blob(bytes) => Some(bytes),
                other => return Err(mismatch(&other)),
            }),
            _ => return Err(mismatch(&value)),
        })
    }
}

/// SQLite's name for a PostgreSQL column.
fn sqlite_column<'a>(table: &str, column: &'a str) -> &'a str {
    match (table, column) {
        ("stats_checkpoints", "byte_offset") => "offset",
        _ => column,
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "NULL".into(),
        Value::Integer(number) => format!("the integer {number}"),
        Value::Real(number) => format!("the real {number}"),
        Value::Text(text) => format!("the text {text:?}"),
        Value::Blob(bytes) => format!("a blob of {} bytes", bytes.len()),
    }
}

/// What the SQLite reader sends the PostgreSQL writer.
enum Message {
    /// The change counter, first.
    Counter(i64),
    Rows(Vec<Vec<Cell>>),
    /// The current table is read to its end.
    TableDone,
    Failed(CopyError),
}

/// Copies the SQLite database at `sqlite` (its pending migrations applied first) into
/// `postgres`, which must hold no data yet. Nothing is written unless everything is.
pub async fn copy_sqlite_to_postgres(
    sqlite: &Path,
    postgres: &PostgresStore,
) -> Result<CopySummary, CopyError> {
    // Opening the store applies SQLite's pending migrations, or refuses a database a newer
    // Marquee wrote.
    drop(SqliteStore::open(sqlite, postgres.clock())?);
    let source = Connection::open_with_flags(sqlite, OpenFlags::SQLITE_OPEN_READ_ONLY)?;

    let mut client = postgres.client().await?;
    let tx = client.transaction().await?;
    let mut plans = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let has_rows: bool = tx
            .query_one(&format!("SELECT EXISTS (SELECT 1 FROM {table})"), &[])
            .await?
            .get(0);
        if has_rows {
            return Err(CopyError::NotEmpty { table });
        }
        let statement = tx.prepare(&format!("SELECT * FROM {table}")).await?;
        let columns = statement
            .columns()
            .iter()
            .map(|c| (c.name().to_owned(), c.type_().clone()))
            .collect();
        plans.push(TablePlan { table, columns });
    }
    let counter: i64 = tx
        .query_one("SELECT value FROM change_counter WHERE id = 1", &[])
        .await?
        .get(0);
    if counter != 0 {
        return Err(CopyError::NotEmpty {
            table: "change_counter",
        });
    }

    let plans = Arc::new(plans);
    let (sender, mut receiver) = mpsc::channel::<Message>(4);
    let reader = tokio::task::spawn_blocking({
        let plans = Arc::clone(&plans);
        move || {
            if let Err(error) = read_all(&source, &plans, &sender) {
                // The writer is waiting for this table's rows; a closed channel means it has
                // stopped already and needs no message.
                let _ = sender.blocking_send(Message::Failed(error));
            }
        }
    });
    let Some(Message::Counter(change_counter)) = receiver.recv().await else {
        return Err(reader_stopped(reader).await);
    };
    let mut tables = Vec::with_capacity(TABLES.len());
    for plan in plans.iter() {
        let sink = tx.copy_in(&plan.copy_statement()).await?;
        let types = plan.types();
        let mut writer = std::pin::pin!(BinaryCopyInWriter::new(sink, &types));
        loop {
            match receiver.recv().await {
                Some(Message::Rows(rows)) => {
                    for row in &rows {
                        writer.as_mut().write_raw(row.iter()).await?;
                    }
                }
                Some(Message::TableDone) => break,
                Some(Message::Failed(error)) => return Err(error),
                Some(Message::Counter(_)) | None => return Err(reader_stopped(reader).await),
            }
        }
        tables.push((plan.table, writer.finish().await?));
    }

    // Identity columns go on from the copied ids, so that new rows do not collide.
    let identities = tx
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND is_identity = 'YES'",
            &[],
        )
        .await?;
    for identity in identities {
        let (table, column): (String, String) = (identity.get(0), identity.get(1));
        // Names from the catalog of our own schema, not from input.
        tx.execute(
            &format!(
                "SELECT setval(pg_get_serial_sequence($1, $2), max({column})) FROM {table} \
                 HAVING max({column}) IS NOT NULL"
            ),
            &[&table, &column],
        )
        .await?;
    }
    tx.execute(
        "UPDATE change_counter SET value = $1 WHERE id = 1",
        &[&change_counter],
    )
    .await?;
    tx.commit().await?;
    Ok(CopySummary {
        tables,
        change_counter,
    })
}

/// Why the reader ended before the writer had everything.
async fn reader_stopped(reader: tokio::task::JoinHandle<()>) -> CopyError {
    match reader.await {
        Ok(()) => CopyError::Postgres("the SQLite reader stopped early".into()),
        Err(error) => CopyError::Postgres(format!("the SQLite reader failed: {error}")),
    }
}

/// Reads the change counter and then every table, in one read transaction, into `sender`.
fn read_all(
    source: &Connection,
    plans: &[TablePlan],
    sender: &mpsc::Sender<Message>,
) -> Result<(), CopyError> {
    let send = |message| {
        sender
            .blocking_send(message)
            .map_err(|_| CopyError::Postgres("the PostgreSQL writer stopped".into()))
    };
    source.execute_batch("BEGIN")?;
    let counter: i64 =
        source.query_row("SELECT value FROM change_counter WHERE id = 1", [], |row| {
            row.get(0)
        })?;
    send(Message::Counter(counter))?;
    for plan in plans {
        let mut statement = source.prepare(&plan.sqlite_select())?;
        let mut rows = statement.query([])?;
        let mut batch = Vec::with_capacity(BATCH_ROWS);
        while let Some(row) = rows.next()? {
            let mut cells = Vec::with_capacity(plan.columns.len());
            for index in 0..plan.columns.len() {
                cells.push(plan.cell(index, row.get::<_, Value>(index)?)?);
            }
            batch.push(cells);
            if batch.len() == BATCH_ROWS {
                send(Message::Rows(std::mem::replace(
                    &mut batch,
                    Vec::with_capacity(BATCH_ROWS),
                )))?;
            }
        }
        if !batch.is_empty() {
            send(Message::Rows(batch))?;
        }
        send(Message::TableDone)?;
    }
    source.execute_batch("COMMIT")?;
    Ok(())
}
