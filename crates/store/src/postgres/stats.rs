//! [`StatsStore`] on PostgreSQL. A run's rows travel as one array per column, bound to one
//! `INSERT … SELECT … FROM unnest(…) … ON CONFLICT DO UPDATE` per table, so a run executes the
//! same statements whatever it holds (see [`commit_run_in`] for the list). Rows of the same key
//! in one run are summed first (`GROUP BY`), as SQLite adds them one after another; PostgreSQL
//! refuses to update one row twice in a statement.
//!
//! Deliberate twin of `sqlite/stats.rs` (the same statements in PostgreSQL's dialect).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use async_trait::async_trait;
use jiff::Timestamp;
use marquee_stats::{
    COLUMN_COUNT, COLUMNS, Counters, Dimensions, Hll, RowKey, RowQuery, SketchKey, StoredRow,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{PostgresStore, Tx, pg, query};
use crate::shared::rows::{self, CHILD_DIMENSIONS, Columns};
use crate::shared::{
    FULL_KEYS, LINE_ITEM_KEYS, checkpoint_rows, delivery_parts, each_counter, report_grouping,
    report_limit, report_table, saturating_add, sql_i64,
};
use crate::stats::{CollectionState, RunWrite, RunWritten, StatsStore};
use crate::{CheckpointMoved, StoreError};

type Params<'a> = [&'a (dyn ToSql + Sync)];

/// Runs statements and counts them: every statement of a run goes through here, so the count
/// reported is the count executed.
struct Counted<'a, 'b> {
    tx: &'a Tx<'b>,
    statements: u32,
}

impl Counted<'_, '_> {
    async fn execute(&mut self, sql: &str, params: &Params<'_>) -> Result<u64, StoreError> {
        self.statements += 1;
        super::execute(self.tx, sql, params).await
    }

    async fn query(&mut self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>, StoreError> {
        self.statements += 1;
        query(self.tx, sql, params).await
    }
}

/// The upsert adding rows, bound as one array per column (`$1` the first key column…), into
/// `table`.
fn upsert_rows_sql(table: &str, keys: &[&str]) -> String {
    let keys_list = keys.join(", ");
    let columns = COLUMNS.join(", ");
    let types = keys
        .iter()
        .map(|k| match *k {
            "country" | "region" => "text[]",
            "device" => "int2[]",
            _ => "int8[]",
        })
        .chain(COLUMNS.iter().map(|_| "int8[]"))
        .enumerate()
        .map(|(i, t)| format!("${}::{t}", i + 1))
        .collect::<Vec<_>>()
        .join(", ");
    let sums = sums();
    let updates = each_counter(|c| {
        format!(
            "{c} = {}",
            saturating_add(&format!("{table}.{c}"), &format!("excluded.{c}"))
        )
    });
    format!(
        "INSERT INTO {table} ({keys_list}, {columns}) \
         SELECT {keys_list}, {sums} FROM unnest({types}) AS r({keys_list}, {columns}) \
         GROUP BY {keys_list} \
         ON CONFLICT ({keys_list}) DO UPDATE SET {updates}"
    )
}

/// A table's rows as one vector per column.
#[derive(Default)]
struct RowColumns<'a> {
    line_item: Vec<i64>,
    bucket: Vec<i64>,
    creative: Vec<i64>,
    placement: Vec<i64>,
    country: Vec<&'a str>,
    region: Vec<String>,
    device: Vec<i16>,
    counters: [Vec<i64>; COLUMN_COUNT],
}

impl<'a> RowColumns<'a> {
    fn of(rows: &'a [(RowKey, Counters)], full: bool) -> Result<RowColumns<'a>, StoreError> {
        let n = rows.len();
        let mut c = RowColumns {
            line_item: Vec::with_capacity(n),
            bucket: Vec::with_capacity(n),
            counters: std::array::from_fn(|_| Vec::with_capacity(n)),
            ..RowColumns::default()
        };
        for (key, counters) in rows {
            c.line_item.push(sql_i64(key.line_item, "line item")?);
            c.bucket.push(key.bucket);
            if full {
                c.creative.push(sql_i64(key.creative, "creative")?);
                c.placement.push(sql_i64(key.placement, "placement")?);
                // Only two capitals are ever stored as a country.
                c.country
                    .push(if key.country.iter().all(u8::is_ascii_uppercase) {
                        key.country_str()
                    } else {
                        ""
                    });
                c.region.push(key.region_code());
                c.device.push(i16::from(key.device));
            }
            for (column, value) in c.counters.iter_mut().zip(counters.values()) {
                column.push(value);
            }
        }
        Ok(c)
    }

    /// The parameters in the order of [`upsert_rows_sql`].
    fn params(&self, full: bool) -> Vec<&(dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&self.line_item, &self.bucket];
        if full {
            params.extend([
                &self.creative as &(dyn ToSql + Sync),
                &self.placement,
                &self.country,
                &self.region,
                &self.device,
            ]);
        }
        params.extend(self.counters.iter().map(|c| c as &(dyn ToSql + Sync)));
        params
    }
}

/// The checkpoint moves of a run, fenced: each row moves only if it still holds the position
/// the run started from (a shard the run found without a row: only if it still has none). One
/// statement makes the moves and answers the shards it could not move. At READ COMMITTED an
/// upsert meeting a row another transaction is moving (or inserting) waits for that one to end
/// and then tests the `WHERE` against the row as committed, so a run that lost the race sees
/// the winner's position. A row the run expected but that is gone is not recreated.
const MOVE_CHECKPOINTS: &str = "\
    WITH c AS ( \
      SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::int8[], \
                           $7::int8[], $8::int8[], $9::int8[]) \
        AS c(source, shard, segment, byte_offset, max_time, from_segment, from_offset, from_max_time) \
    ), moved AS ( \
      INSERT INTO stats_checkpoints AS s \
        (source, shard, segment, byte_offset, max_event_time, updated_at) \
      SELECT source, shard, segment, byte_offset, max_time, $6 FROM c \
      WHERE from_segment IS NULL OR EXISTS \
        (SELECT 1 FROM stats_checkpoints AS k WHERE k.source = c.source AND k.shard = c.shard) \
      ORDER BY source, shard \
      ON CONFLICT (source, shard) DO UPDATE SET segment = excluded.segment, \
        byte_offset = excluded.byte_offset, max_event_time = excluded.max_event_time, \
        updated_at = excluded.updated_at \
      WHERE (s.segment, s.byte_offset, s.max_event_time) = \
        (SELECT f.from_segment, f.from_offset, f.from_max_time FROM c AS f \
         WHERE f.source = excluded.source AND f.shard = excluded.shard) \
      RETURNING source, shard \
    ) \
    SELECT c.source, c.shard FROM c \
    WHERE NOT EXISTS (SELECT 1 FROM moved AS m WHERE m.source = c.source AND m.shard = c.shard) \
    ORDER BY c.source, c.shard LIMIT 1";

/// The statements of one run, always the same fourteen in the same order: `BEGIN`, the fenced
/// checkpoint upsert, four upserts (minute, hour, hour per line item, day), the sketch SELECT
/// and upsert, the dedupe insert and prune, the minute prune, the forecast sample's insert and
/// prune, `COMMIT` (the first and last are
/// counted by [`PostgresStore::commit_run`]). The checkpoints come first: a run that lost the
/// race to another manager stops there, before it touched (and locked) any aggregate row. Its
/// error drops the transaction, which rolls it back.
async fn commit_run_in(tx: &Tx<'_>, run: &RunWrite) -> Result<RunWritten, StoreError> {
    let mut sql = Counted { tx, statements: 0 };
    move_checkpoints(&mut sql, run).await?;

    for (table, keys, rows) in [
        ("stats_minute", FULL_KEYS, &run.minutes),
        ("stats_hour", FULL_KEYS, &run.hours),
        ("stats_hour_line_item", LINE_ITEM_KEYS, &run.line_item_hours),
        ("stats_day", FULL_KEYS, &run.days),
    ] {
        let full = keys.len() == FULL_KEYS.len();
        let columns = RowColumns::of(rows, full)?;
        sql.execute(&upsert_rows_sql(table, keys), &columns.params(full))
            .await?;
    }

    let sketches_changed = merge_sketches(&mut sql, &run.sketches).await?;

    sql.execute(
        "INSERT INTO stats_seen (max_time, entries) SELECT $1, $2 WHERE length($2::bytea) > 0",
        &[&run.seen_max_time, &run.seen_entries],
    )
    .await?;
    sql.execute(
        "DELETE FROM stats_seen WHERE max_time < $1",
        &[&run.seen_cutoff_secs],
    )
    .await?;
    sql.execute(
        "DELETE FROM stats_minute WHERE bucket_start < $1",
        &[&run.minute_cutoff_secs],
    )
    .await?;
    // Always both, so a run is the same statements whatever it read.
    let (days, records): (Vec<i32>, Vec<&[u8]>) = run
        .samples
        .iter()
        .map(|(day, records)| (*day, records.as_slice()))
        .unzip();
    sql.execute(
        "INSERT INTO forecast_sample (day, records) SELECT * FROM unnest($1::int4[], $2::bytea[])",
        &[&days, &records],
    )
    .await?;
    sql.execute(
        "DELETE FROM forecast_sample WHERE day < $1",
        &[&run.sample_cutoff_day],
    )
    .await?;
    Ok(RunWritten {
        statements: sql.statements,
        sketches_changed,
    })
}

/// [`MOVE_CHECKPOINTS`] with the run's moves bound as one array per column; the first shard
/// it could not move is the run's [`CheckpointMoved`](crate::CheckpointMoved).
async fn move_checkpoints(sql: &mut Counted<'_, '_>, run: &RunWrite) -> Result<(), StoreError> {
    let rows = checkpoint_rows(&run.checkpoints)?;
    let n = rows.len();
    let mut sources = Vec::with_capacity(n);
    let mut shards = Vec::with_capacity(n);
    let mut segments = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    let mut max_times = Vec::with_capacity(n);
    let mut from_segments: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut from_offsets: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut from_max_times: Vec<Option<i64>> = Vec::with_capacity(n);
    for row in &rows {
        sources.push(row.source);
        shards.push(i64::from(row.shard));
        segments.push(row.segment);
        offsets.push(row.offset);
        max_times.push(row.max_time);
        from_segments.push(row.from.map(|f| f[0]));
        from_offsets.push(row.from.map(|f| f[1]));
        from_max_times.push(row.from.map(|f| f[2]));
    }
    let unmoved = sql
        .query(
            MOVE_CHECKPOINTS,
            &[
                &sources,
                &shards,
                &segments,
                &offsets,
                &max_times,
                &run.now.as_microsecond(),
                &from_segments,
                &from_offsets,
                &from_max_times,
            ],
        )
        .await?;
    match unmoved.first() {
        None => Ok(()),
        Some(row) => Err(CheckpointMoved {
            source_name: row.string(0)?,
            shard: row.u32(1, "checkpoint shard")?,
        }
        .into()),
    }
}

/// One SELECT of the stored sketches the run touches, the merge in memory, and one upsert of
/// those that changed, each bound as arrays.
async fn merge_sketches(
    sql: &mut Counted<'_, '_>,
    sketches: &[(SketchKey, Hll)],
) -> Result<usize, StoreError> {
    let mut line_items = Vec::with_capacity(sketches.len());
    let mut days = Vec::with_capacity(sketches.len());
    for (key, _) in sketches {
        line_items.push(sql_i64(key.line_item, "line item")?);
        days.push(key.day);
    }
    let stored = sql
        .query(
            "SELECT u.line_item, u.day, u.sketch \
             FROM unnest($1::int8[], $2::int4[]) AS k(line_item, day) \
             JOIN stats_users AS u ON u.line_item = k.line_item AND u.day = k.day",
            &[&line_items, &days],
        )
        .await?;
    // Each touched key: its sketch so far, and whether it differs from the stored one.
    let mut merged: HashMap<SketchKey, (Hll, bool)> = HashMap::with_capacity(sketches.len());
    for row in &stored {
        let (key, sketch) = rows::sketch(row)?;
        merged.insert(key, (sketch, false));
    }
    for (key, sketch) in sketches {
        match merged.entry(*key) {
            Entry::Occupied(mut known) => {
                let (known, changed) = known.get_mut();
                *changed |= known.merge(sketch);
            }
            Entry::Vacant(new) => {
                if !sketch.is_empty() {
                    new.insert((sketch.clone(), true));
                }
            }
        }
    }
    let mut line_items = Vec::new();
    let mut days = Vec::new();
    let mut bytes = Vec::new();
    for (key, (sketch, changed)) in &merged {
        if *changed {
            line_items.push(sql_i64(key.line_item, "line item")?);
            days.push(key.day);
            bytes.push(sketch.to_bytes());
        }
    }
    sql.execute(
        "INSERT INTO stats_users (line_item, day, sketch) \
         SELECT * FROM unnest($1::int8[], $2::int4[], $3::bytea[]) \
         ON CONFLICT (line_item, day) DO UPDATE SET sketch = excluded.sketch",
        &[&line_items, &days, &bytes],
    )
    .await?;
    Ok(bytes.len())
}

async fn dimensions_in(tx: &Tx<'_>) -> Result<Dimensions, StoreError> {
    let mut builder = Dimensions::builder();
    for row in query(
        tx,
        "SELECT id, coalesce(body::jsonb ->> 'time_zone', 'UTC'), \
         coalesce(body::jsonb ->> 'currency', ''), name FROM advertisers",
        &[],
    )
    .await?
    {
        rows::add_advertiser(&mut builder, &row)?;
    }
    for row in query(tx, "SELECT id, name FROM publishers", &[]).await? {
        rows::add_publisher(&mut builder, &row)?;
    }
    for (table, dimension, add) in CHILD_DIMENSIONS {
        for row in query(tx, &format!("SELECT id, parent_id, name FROM {table}"), &[]).await? {
            rows::add_child(&mut builder, (dimension, add), &row)?;
        }
    }
    Ok(builder.build())
}

async fn collection_state_in(tx: &Tx<'_>) -> Result<CollectionState, StoreError> {
    let mut state = CollectionState {
        checkpoints: query(
            tx,
            "SELECT source, shard, segment, byte_offset, max_event_time FROM stats_checkpoints \
             ORDER BY source, shard",
            &[],
        )
        .await?
        .iter()
        .map(rows::checkpoint)
        .collect::<Result<_, _>>()?,
        ..CollectionState::default()
    };
    for row in query(tx, "SELECT run, entries FROM stats_seen ORDER BY run", &[]).await? {
        rows::load_seen(&mut state.seen, &row)?;
    }
    Ok(state)
}

/// Sums of the counters; PostgreSQL's `sum` of `int8` is `numeric`, cast back, held at the
/// largest `int8` (the cast fails past it: see `shared::saturating_add`).
fn sums() -> String {
    each_counter(|c| format!("least(sum({c}), {})::int8", i64::MAX))
}

fn id_array(ids: &[u64]) -> Result<Vec<i64>, StoreError> {
    ids.iter().map(|&id| sql_i64(id, "id")).collect()
}

async fn report_rows_in(
    tx: &Tx<'_>,
    q: &RowQuery,
    limit: Option<usize>,
) -> Result<Vec<StoredRow>, StoreError> {
    let (select, group) = report_grouping(
        q,
        [
            "0::int8", "0::int8", "0::int8", "''::text", "''::text", "0::int2",
        ],
    );
    let line_items = q.line_items.as_deref().map(id_array).transpose()?;
    let placements = q.placements.as_deref().map(id_array).transpose()?;
    let devices: Option<Vec<i16>> = q
        .devices
        .as_ref()
        .map(|d| d.iter().map(|&d| i16::from(d)).collect());
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&q.from, &q.to];
    let mut filters = String::new();
    for (column, kind, list) in [
        (
            "line_item",
            "int8[]",
            line_items.as_ref().map(|l| l as &(dyn ToSql + Sync)),
        ),
        (
            "placement",
            "int8[]",
            placements.as_ref().map(|l| l as &(dyn ToSql + Sync)),
        ),
        (
            "country",
            "text[]",
            q.countries.as_ref().map(|l| l as &(dyn ToSql + Sync)),
        ),
        (
            "region",
            "text[]",
            q.regions.as_ref().map(|l| l as &(dyn ToSql + Sync)),
        ),
        (
            "device",
            "int2[]",
            devices.as_ref().map(|l| l as &(dyn ToSql + Sync)),
        ),
    ] {
        if let Some(list) = list {
            params.push(list);
            filters.push_str(&format!(" AND {column} = ANY(${}::{kind})", params.len()));
        }
    }
    let sql = format!(
        "SELECT bucket_start, {select}, {} FROM {} \
         WHERE bucket_start >= $1 AND bucket_start < $2{filters} GROUP BY {group}{}",
        sums(),
        report_table(q),
        report_limit(limit),
    );
    query(tx, &sql, &params)
        .await?
        .iter()
        .map(rows::stored_row)
        .collect()
}

async fn sketches_in(
    tx: &Tx<'_>,
    line_items: Option<&[u64]>,
    first_day: i32,
    last_day: i32,
) -> Result<Vec<(SketchKey, Hll)>, StoreError> {
    let ids = line_items.map(id_array).transpose()?;
    query(
        tx,
        "SELECT line_item, day, sketch FROM stats_users WHERE day >= $1 AND day <= $2 \
         AND ($3::int8[] IS NULL OR line_item = ANY($3))",
        &[&first_day, &last_day, &ids],
    )
    .await?
    .iter()
    .map(rows::sketch)
    .collect()
}

async fn samples_in(
    tx: &Tx<'_>,
    first_day: i32,
    last_day: i32,
) -> Result<Vec<(i32, Vec<u8>)>, StoreError> {
    let mut days: Vec<(i32, Vec<u8>)> = Vec::new();
    for row in query(
        tx,
        "SELECT day, records FROM forecast_sample WHERE day >= $1 AND day <= $2 ORDER BY day",
        &[&first_day, &last_day],
    )
    .await?
    {
        rows::add_sample(&mut days, &row)?;
    }
    Ok(days)
}

async fn delivery_in(
    tx: &Tx<'_>,
    line_items: Option<&[u64]>,
    since: i64,
    until: i64,
) -> Result<HashMap<u64, Counters>, StoreError> {
    let mut totals: HashMap<u64, Counters> = HashMap::new();
    let ids = line_items.map(id_array).transpose()?;
    for (table, ranges) in delivery_parts(since, until) {
        if ranges.is_empty() {
            continue;
        }
        let (from, to): (Vec<i64>, Vec<i64>) = ranges.into_iter().unzip();
        let sql = format!(
            "SELECT line_item, {} FROM {table} \
             WHERE EXISTS (SELECT 1 FROM unnest($1::int8[], $2::int8[]) AS r(a, b) \
                           WHERE bucket_start >= r.a AND bucket_start < r.b) \
             AND ($3::int8[] IS NULL OR line_item = ANY($3)) GROUP BY line_item",
            sums()
        );
        for row in query(tx, &sql, &[&from, &to, &ids]).await? {
            totals
                .entry(row.u64(0, "line item")?)
                .or_default()
                .add(&rows::counters(&row, 1)?);
        }
    }
    Ok(totals)
}

#[async_trait]
impl StatsStore for PostgresStore {
    async fn dimensions(&self) -> Result<Dimensions, StoreError> {
        in_read!(self, |tx| dimensions_in(&tx).await?)
    }

    async fn collection_state(&self) -> Result<CollectionState, StoreError> {
        in_read!(self, |tx| collection_state_in(&tx).await?)
    }

    async fn commit_run(&self, run: RunWrite) -> Result<RunWritten, StoreError> {
        // Not an object write: no change-counter lock. BEGIN and COMMIT are counted here.
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg)?;
        let written = commit_run_in(&tx, &run).await?;
        tx.commit().await.map_err(pg)?;
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
        let _turn = self.reports.enter().await?;
        in_read!(self, |tx| report_rows_in(&tx, &query, limit).await?)
    }

    async fn sketches(
        &self,
        line_items: Option<Vec<u64>>,
        first_day: i32,
        last_day: i32,
    ) -> Result<Vec<(SketchKey, Hll)>, StoreError> {
        in_read!(self, |tx| sketches_in(
            &tx,
            line_items.as_deref(),
            first_day,
            last_day
        )
        .await?)
    }

    async fn delivery(
        &self,
        line_items: Option<Vec<u64>>,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<HashMap<u64, Counters>, StoreError> {
        in_read!(self, |tx| delivery_in(
            &tx,
            line_items.as_deref(),
            since.as_second(),
            until.as_second()
        )
        .await?)
    }

    async fn samples(
        &self,
        first_day: i32,
        last_day: i32,
    ) -> Result<Vec<(i32, Vec<u8>)>, StoreError> {
        in_read!(self, |tx| samples_in(&tx, first_day, last_day).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upserts_name_every_counter_and_bind_one_array_per_column() {
        let sql = upsert_rows_sql("stats_hour", FULL_KEYS);
        for column in COLUMNS {
            assert!(sql.contains(&format!(
                "{column} = CASE WHEN excluded.{column} > 0 AND stats_hour.{column} > "
            )));
        }
        assert!(sql.contains("$5::text[], $6::text[], $7::int2[], $8::int8[]"));
        // Seven key columns, then one array per counter.
        let last = FULL_KEYS.len() + COLUMN_COUNT;
        assert_eq!(last, 38);
        assert!(sql.contains(&format!("${last}::int8[])")));
        assert!(!sql.contains(&format!("${}", last + 1)));
    }
}
