//! [`StatsStore`] on SQLite. A run's rows travel as one JSON array per table, converted once
//! to SQLite's binary JSON and expanded by `jsonb_each` inside one `INSERT … SELECT … ON
//! CONFLICT DO UPDATE`, so a run executes the same statements whatever it holds (see
//! [`commit_run_in`] for the list). Reading fields from binary JSON instead of re-parsing each
//! row's text cut the commit's CPU by a third in the aggregation bench.
//!
//! Deliberate twin of `postgres/stats.rs` (the same statements in SQLite's dialect).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use async_trait::async_trait;
use jiff::Timestamp;
use marquee_stats::{COLUMNS, Counters, Dimensions, Hll, RowKey, RowQuery, SketchKey, StoredRow};
use rusqlite::types::Value;
use rusqlite::{Connection, Transaction, params, params_from_iter};

use super::{SqliteStore, backend, for_each_row, query_rows};
use crate::shared::rows::{self, CHILD_DIMENSIONS, Columns};
use crate::shared::{
    FULL_KEYS, LINE_ITEM_KEYS, checkpoint_rows, delivery_parts, each_counter, report_grouping,
    report_limit, report_table, saturating_add, sql_i64,
};
use crate::stats::{CollectionState, RunWrite, RunWritten, StatsStore};
use crate::{CheckpointMoved, StoreError};

/// Runs statements and counts them: every statement of a run goes through here, so the count
/// reported is the count executed.
struct Counted<'a> {
    conn: &'a Connection,
    statements: u32,
}

impl Counted<'_> {
    fn execute(&mut self, sql: &str, params: impl rusqlite::Params) -> Result<usize, StoreError> {
        self.statements += 1;
        self.conn
            .prepare(sql)
            .and_then(|mut stmt| stmt.execute(params))
            .map_err(backend)
    }
}

/// The upsert adding a JSON array of rows (`[key columns…, counters…]`) into `table`.
fn upsert_rows_sql(table: &str, keys: &[&str]) -> String {
    let keys_list = keys.join(", ");
    let columns = COLUMNS.join(", ");
    let values = (0..keys.len() + COLUMNS.len())
        .map(|i| format!("value ->> {i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let updates =
        each_counter(|c| format!("{c} = {}", saturating_add(c, &format!("excluded.{c}"))));
    // `WHERE true` keeps SQLite from reading ON CONFLICT as a join constraint.
    format!(
        "INSERT INTO {table} ({keys_list}, {columns}) SELECT {values} FROM jsonb_each(jsonb(?1)) \
         WHERE true ON CONFLICT ({keys_list}) DO UPDATE SET {updates}"
    )
}

/// `[[line_item, bucket, creative, placement, "CC", "CC-RRR", device, counters…], …]`, or only
/// `[line_item, bucket, counters…]` rows without `full`.
fn rows_json(rows: &[(RowKey, Counters)], full: bool) -> Result<String, StoreError> {
    let mut out = String::with_capacity(rows.len() * 64 + 2);
    out.push('[');
    for (i, (key, counters)) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Only two capitals are ever written as a country, and a region only as the country,
        // `-` and capitals or digits, so no escaping is needed.
        let country = if key.country.iter().all(u8::is_ascii_uppercase) {
            key.country_str()
        } else {
            ""
        };
        let region = key.region_code();
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "[{},{}",
            sql_i64(key.line_item, "line item")?,
            key.bucket
        );
        if full {
            let _ = write!(
                out,
                ",{},{},\"{country}\",\"{region}\",{}",
                sql_i64(key.creative, "creative")?,
                sql_i64(key.placement, "placement")?,
                key.device
            );
        }
        for value in counters.values() {
            let _ = write!(out, ",{value}");
        }
        out.push(']');
    }
    out.push(']');
    Ok(out)
}

/// The checkpoint moves of a run, fenced: each row moves only if it still holds the position
/// the run started from (a shard the run found without a row: only if it still has none).
/// `?1` is a JSON array of `[source, shard, segment, offset, max time, from segment, from
/// offset, from max time]`, the `from` values `null` for a shard without a row. `RETURNING`
/// names the rows moved; the others are the fence's refusal. SQLite has one writer at a time,
/// so the row compared is the row committed. A row the run expected but that is gone is not
/// recreated.
const MOVE_CHECKPOINTS: &str = "\
    INSERT INTO stats_checkpoints AS s \
      (source, shard, segment, offset, max_event_time, updated_at) \
    SELECT c.value ->> 0, c.value ->> 1, c.value ->> 2, c.value ->> 3, c.value ->> 4, ?2 \
    FROM json_each(?1) AS c \
    WHERE c.value ->> 5 IS NULL OR EXISTS (SELECT 1 FROM stats_checkpoints AS k \
      WHERE k.source = c.value ->> 0 AND k.shard = c.value ->> 1) \
    ON CONFLICT (source, shard) DO UPDATE SET segment = excluded.segment, \
      offset = excluded.offset, max_event_time = excluded.max_event_time, \
      updated_at = excluded.updated_at \
    WHERE (s.segment, s.offset, s.max_event_time) = \
      (SELECT f.value ->> 5, f.value ->> 6, f.value ->> 7 FROM json_each(?1) AS f \
       WHERE f.value ->> 0 = excluded.source AND f.value ->> 1 = excluded.shard) \
    RETURNING source, shard";

// Deliberately the twin of postgres/stats.rs's `commit_run_in` (see the module note).
/// The statements of one run, always the same fourteen in the same order: `BEGIN`, the fenced
/// checkpoint upsert, four upserts (minute, hour, hour per line item, day), the sketch SELECT
/// and upsert, the dedupe insert and prune, the minute prune, the forecast sample's insert and
/// prune, `COMMIT` (the first and last are counted by [`SqliteStore::commit_run`]). The
/// checkpoints come first, as on PostgreSQL: a run that lost the race stops there. Its error
/// makes `write` roll the transaction back.
fn commit_run_in(tx: &Transaction<'_>, run: &RunWrite) -> Result<RunWritten, StoreError> {
    let mut sql = Counted {
        conn: tx,
        statements: 0,
    };
    move_checkpoints(&mut sql, run)?;

    for (table, keys, rows) in [
        ("stats_minute", FULL_KEYS, &run.minutes),
        ("stats_hour", FULL_KEYS, &run.hours),
        ("stats_hour_line_item", LINE_ITEM_KEYS, &run.line_item_hours),
        ("stats_day", FULL_KEYS, &run.days),
    ] {
        let full = keys.len() == FULL_KEYS.len();
        sql.execute(&upsert_rows_sql(table, keys), [rows_json(rows, full)?])?;
    }

    let sketches_changed = merge_sketches(&mut sql, &run.sketches)?;

    sql.execute(
        "INSERT INTO stats_seen (max_time, entries) SELECT ?1, ?2 WHERE length(?2) > 0",
        params![run.seen_max_time, run.seen_entries],
    )?;
    sql.execute(
        "DELETE FROM stats_seen WHERE max_time < ?1",
        [run.seen_cutoff_secs],
    )?;
    sql.execute(
        "DELETE FROM stats_minute WHERE bucket_start < ?1",
        [run.minute_cutoff_secs],
    )?;
    // Always both, so a run is the same statements whatever it read.
    sql.execute(
        "INSERT INTO forecast_sample (day, records) \
         SELECT value ->> 0, unhex(value ->> 1) FROM json_each(?1)",
        [samples_json(&run.samples)],
    )?;
    sql.execute(
        "DELETE FROM forecast_sample WHERE day < ?1",
        [run.sample_cutoff_day],
    )?;
    Ok(RunWritten {
        statements: sql.statements,
        sketches_changed,
    })
}

/// The run's sample as one JSON array of `[day, records in hexadecimal]`.
fn samples_json(samples: &[(i32, Vec<u8>)]) -> String {
    let mut json = String::from("[");
    for (i, (day, records)) in samples.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        let _ = write!(json, "{comma}[{day},\"");
        for byte in records {
            let _ = write!(json, "{byte:02x}");
        }
        json.push_str("\"]");
    }
    json.push(']');
    json
}

// Deliberately the twin of postgres/stats.rs's `samples_in` (see the module note).
fn samples_in(
    conn: &Connection,
    first_day: i32,
    last_day: i32,
) -> Result<Vec<(i32, Vec<u8>)>, StoreError> {
    let mut days: Vec<(i32, Vec<u8>)> = Vec::new();
    for_each_row(
        conn,
        "SELECT day, records FROM forecast_sample WHERE day >= ?1 AND day <= ?2 \
         ORDER BY day, rowid",
        params![first_day, last_day],
        |row| rows::add_sample(&mut days, row),
    )?;
    Ok(days)
}

/// [`MOVE_CHECKPOINTS`] with the run's moves as one JSON array; the first shard (in source,
/// shard order) it did not move is the run's [`CheckpointMoved`](crate::CheckpointMoved).
fn move_checkpoints(sql: &mut Counted<'_>, run: &RunWrite) -> Result<(), StoreError> {
    let rows = checkpoint_rows(&run.checkpoints)?;
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let null = || serde_json::Value::Null;
            let [from_segment, from_offset, from_max_time] = row.from.map_or_else(
                || [null(), null(), null()],
                |f| f.map(serde_json::Value::from),
            );
            serde_json::json!([
                row.source,
                row.shard,
                row.segment,
                row.offset,
                row.max_time,
                from_segment,
                from_offset,
                from_max_time,
            ])
        })
        .collect();
    let mut moved: HashSet<(String, u32)> = HashSet::with_capacity(rows.len());
    sql.statements += 1;
    for_each_row(
        sql.conn,
        MOVE_CHECKPOINTS,
        params![
            serde_json::Value::Array(json).to_string(),
            run.now.as_microsecond()
        ],
        |row| {
            moved.insert((row.string(0)?, row.u32(1, "checkpoint shard")?));
            Ok(())
        },
    )?;
    match rows
        .iter()
        .find(|row| !moved.contains(&(row.source.to_owned(), row.shard)))
    {
        None => Ok(()),
        Some(row) => Err(CheckpointMoved {
            source_name: row.source.to_owned(),
            shard: row.shard,
        }
        .into()),
    }
}

/// One SELECT of the stored sketches the run touches, the merge in memory, and one upsert of
/// those that changed. The sketches travel as one BLOB of concatenated stored forms, each
/// row naming its offset and length in it.
fn merge_sketches(
    sql: &mut Counted<'_>,
    sketches: &[(SketchKey, Hll)],
) -> Result<usize, StoreError> {
    let mut keys = String::from("[");
    for (i, (key, _)) in sketches.iter().enumerate() {
        if i > 0 {
            keys.push(',');
        }
        let _ = write!(
            keys,
            "[{},{}]",
            sql_i64(key.line_item, "line item")?,
            key.day
        );
    }
    keys.push(']');
    let mut stored: HashMap<SketchKey, Hll> = HashMap::with_capacity(sketches.len());
    sql.statements += 1;
    for_each_row(
        sql.conn,
        "SELECT u.line_item, u.day, u.sketch FROM json_each(?1) AS j \
         JOIN stats_users AS u ON u.line_item = j.value ->> 0 AND u.day = j.value ->> 1",
        [keys],
        |row| {
            let (key, sketch) = rows::sketch(row)?;
            stored.insert(key, sketch);
            Ok(())
        },
    )?;

    let mut blob = Vec::new();
    let mut index = String::from("[");
    let mut changed = 0;
    for (key, sketch) in sketches {
        let merged = match stored.remove(key) {
            Some(mut known) => {
                if !known.merge(sketch) {
                    continue;
                }
                known
            }
            None if sketch.is_empty() => continue,
            None => sketch.clone(),
        };
        // The index is written like `keys` above, deliberately: both are JSON arrays of arrays for
        // `json_each`.
        let bytes = merged.to_bytes();
        if changed > 0 {
            index.push(',');
        }
        let _ = write!(
            index,
            "[{},{},{},{}]",
            sql_i64(key.line_item, "line item")?,
            key.day,
            blob.len() + 1,
            bytes.len()
        );
        blob.extend_from_slice(&bytes);
        changed += 1;
    }
    index.push(']');
    sql.execute(
        "INSERT INTO stats_users (line_item, day, sketch) \
         SELECT value ->> 0, value ->> 1, substr(?2, value ->> 2, value ->> 3) \
         FROM json_each(?1) WHERE true \
         ON CONFLICT (line_item, day) DO UPDATE SET sketch = excluded.sketch",
        params![index, blob],
    )?;
    Ok(changed)
}

fn dimensions_in(conn: &Connection) -> Result<Dimensions, StoreError> {
    let mut builder = Dimensions::builder();
    for_each_row(
        conn,
        "SELECT id, coalesce(body ->> '$.time_zone', 'UTC'), \
         coalesce(body ->> '$.currency', ''), name FROM advertisers",
        [],
        |row| rows::add_advertiser(&mut builder, row),
    )?;
    for_each_row(conn, "SELECT id, name FROM publishers", [], |row| {
        rows::add_publisher(&mut builder, row)
    })?;
    for (table, dimension, add) in CHILD_DIMENSIONS {
        for_each_row(
            conn,
            &format!("SELECT id, parent_id, name FROM {table}"),
            [],
            |row| rows::add_child(&mut builder, (dimension, add), row),
        )?;
    }
    Ok(builder.build())
}

fn collection_state_in(conn: &Connection) -> Result<CollectionState, StoreError> {
    let mut state = CollectionState {
        checkpoints: query_rows(
            conn,
            "SELECT source, shard, segment, offset, max_event_time FROM stats_checkpoints \
             ORDER BY source, shard",
            [],
            |row| rows::checkpoint(row),
        )?,
        ..CollectionState::default()
    };
    for_each_row(
        conn,
        "SELECT run, entries FROM stats_seen ORDER BY run",
        [],
        |row| rows::load_seen(&mut state.seen, row),
    )?;
    Ok(state)
}

/// Sums of the counters, held at the largest integer (SQLite's `SUM` fails the statement past
/// it; `sat_sum` is registered on every connection, see `sqlite::configure`).
fn sums() -> String {
    each_counter(|c| format!("sat_sum({c})"))
}

fn id_list(ids: &[u64]) -> Result<String, StoreError> {
    let ids = ids
        .iter()
        .map(|&id| sql_i64(id, "id"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into()))
}

fn report_rows_in(
    conn: &Connection,
    q: &RowQuery,
    limit: Option<usize>,
) -> Result<Vec<StoredRow>, StoreError> {
    let table = report_table(q);
    let (select, group) = report_grouping(q, ["0", "0", "0", "''", "''", "0"]);
    let mut params: Vec<Value> = vec![Value::Integer(q.from), Value::Integer(q.to)];
    let mut filters = String::new();
    let mut filter = |column: &str, list: String| {
        params.push(Value::Text(list));
        let _ = write!(
            filters,
            " AND {column} IN (SELECT value FROM json_each(?{}))",
            params.len()
        );
    };
    if let Some(ids) = &q.line_items {
        filter("line_item", id_list(ids)?);
    }
    if let Some(ids) = &q.placements {
        filter("placement", id_list(ids)?);
    }
    if let Some(countries) = &q.countries {
        filter(
            "country",
            serde_json::to_string(countries).unwrap_or_else(|_| "[]".into()),
        );
    }
    if let Some(regions) = &q.regions {
        filter(
            "region",
            serde_json::to_string(regions).unwrap_or_else(|_| "[]".into()),
        );
    }
    if let Some(devices) = &q.devices {
        filter(
            "device",
            serde_json::to_string(devices).unwrap_or_else(|_| "[]".into()),
        );
    }
    let sql = format!(
        "SELECT bucket_start, {select}, {} FROM {} \
         WHERE bucket_start >= ?1 AND bucket_start < ?2{filters} GROUP BY {group}{}",
        sums(),
        table,
        report_limit(limit),
    );
    query_rows(conn, &sql, params_from_iter(params), |row| {
        rows::stored_row(row)
    })
}

// Deliberately the twin of postgres/stats.rs's `sketches_in` (see the module note).
fn sketches_in(
    conn: &Connection,
    line_items: Option<&[u64]>,
    first_day: i32,
    last_day: i32,
) -> Result<Vec<(SketchKey, Hll)>, StoreError> {
    let mut params: Vec<Value> = vec![
        Value::Integer(i64::from(first_day)),
        Value::Integer(i64::from(last_day)),
    ];
    let mut sql = String::from(
        "SELECT line_item, day, sketch FROM stats_users WHERE day >= ?1 AND day <= ?2",
    );
    if let Some(ids) = line_items {
        params.push(Value::Text(id_list(ids)?));
        sql.push_str(" AND line_item IN (SELECT value FROM json_each(?3))");
    }
    query_rows(conn, &sql, params_from_iter(params), |row| {
        rows::sketch(row)
    })
}

// Same signature as `sketches_in`, and deliberately the twin of postgres/stats.rs's `delivery_in`:
// the same sums in SQLite's dialect.
fn delivery_in(
    conn: &Connection,
    line_items: Option<&[u64]>,
    since: i64,
    until: i64,
) -> Result<HashMap<u64, Counters>, StoreError> {
    let mut totals: HashMap<u64, Counters> = HashMap::new();
    let list = line_items.map(id_list).transpose()?;
    for (table, ranges) in delivery_parts(since, until) {
        if ranges.is_empty() {
            continue;
        }
        let mut params: Vec<Value> = Vec::new();
        let mut clauses = Vec::new();
        for (from, to) in ranges {
            params.push(Value::Integer(from));
            params.push(Value::Integer(to));
            clauses.push(format!(
                "(bucket_start >= ?{} AND bucket_start < ?{})",
                params.len() - 1,
                params.len()
            ));
        }
        let mut sql = format!(
            "SELECT line_item, {} FROM {table} WHERE ({})",
            sums(),
            clauses.join(" OR ")
        );
        if let Some(list) = &list {
            params.push(Value::Text(list.clone()));
            let _ = write!(
                sql,
                " AND line_item IN (SELECT value FROM json_each(?{}))",
                params.len()
            );
        }
        sql.push_str(" GROUP BY line_item");
        for_each_row(conn, &sql, params_from_iter(params), |row| {
            totals
                .entry(row.u64(0, "line item")?)
                .or_default()
                .add(&rows::counters(row, 1)?);
            Ok(())
        })?;
    }
    Ok(totals)
}

// The signatures are the `StatsStore` trait's; each body is deliberately the twin of
// postgres/stats.rs's, a closure run on the writer or a reader.
#[async_trait]
impl StatsStore for SqliteStore {
    async fn dimensions(&self) -> Result<Dimensions, StoreError> {
        self.read(|tx| dimensions_in(tx)).await
    }

    async fn collection_state(&self) -> Result<CollectionState, StoreError> {
        self.read(|tx| collection_state_in(tx)).await
    }

    async fn commit_run(&self, run: RunWrite) -> Result<RunWritten, StoreError> {
        let written = self.write(move |tx, _| commit_run_in(tx, &run)).await?;
        // BEGIN IMMEDIATE and COMMIT, issued by `write`.
        Ok(RunWritten {
            statements: written.statements + 2,
            ..written
        })
    }

    async fn report_rows_at_most(
        &self,
        query: RowQuery,
        limit: Option<usize>,
    ) -> Result<Vec<StoredRow>, StoreError> {
        let _turn = self.inner.reports.enter().await?;
        self.read(move |tx| report_rows_in(tx, &query, limit)).await
    }

    // Same as postgres/stats.rs's methods, deliberately (see the impl's note).
    async fn sketches(
        &self,
        line_items: Option<Vec<u64>>,
        first_day: i32,
        last_day: i32,
    ) -> Result<Vec<(SketchKey, Hll)>, StoreError> {
        self.read(move |tx| sketches_in(tx, line_items.as_deref(), first_day, last_day))
            .await
    }

    async fn delivery(
        &self,
        line_items: Option<Vec<u64>>,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<HashMap<u64, Counters>, StoreError> {
        self.read(move |tx| {
            delivery_in(
                tx,
                line_items.as_deref(),
                since.as_second(),
                until.as_second(),
            )
        })
        .await
    }

    async fn samples(
        &self,
        first_day: i32,
        last_day: i32,
    ) -> Result<Vec<(i32, Vec<u8>)>, StoreError> {
        self.read(move |tx| samples_in(tx, first_day, last_day))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Deliberately the twin of postgres/stats.rs's test of its upserts: the SQL differs.
    #[test]
    fn upserts_name_every_counter() {
        let sql = upsert_rows_sql("stats_hour", FULL_KEYS);
        for column in COLUMNS {
            assert!(sql.contains(&format!(
                "{column} = CASE WHEN excluded.{column} > 0 AND {column} > "
            )));
        }
        // Seven key columns, then the counters: the last is the row's element 37.
        let last = FULL_KEYS.len() + COLUMNS.len() - 1;
        assert_eq!(last, 37);
        assert!(sql.contains(&format!("value ->> {last} ")));
        assert!(!sql.contains(&format!("value ->> {}", last + 1)));
    }
}
