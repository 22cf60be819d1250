//! Versioned schema migrations: SQL files compiled into the binary, applied in order at open,
//! one transaction each, and recorded with their checksum so that a changed one is noticed.
//!
//! Deliberate twin of `postgres/migrate.rs` (which also takes an advisory lock).

use marquee_model::Clock;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::backend;
use crate::StoreError;
use crate::shared::{self, Migration, checksum};

/// Every migration this binary knows, in version order. The SQL files repeat one another
/// deliberately (a table rebuilt by a later migration restates its columns; each SQLite file has
/// its PostgreSQL twin in that dialect): an applied migration is history, checksummed, and is
/// never edited to share text.
const MIGRATIONS: &[Migration] = shared::migrations!("sqlite":
    (1, "initial", "0001_initial.sql"),
    (2, "stats", "0002_stats.sql"),
    (3, "stats_minute_lean", "0003_stats_minute_lean.sql"),
    (4, "stats_hour_line_item", "0004_stats_hour_line_item.sql"),
    (5, "pacing_state", "0005_pacing_state.sql"),
    (6, "users", "0006_users.sql"),
    (7, "invalid_traffic", "0007_invalid_traffic.sql"),
    (8, "stats_region", "0008_stats_region.sql"),
    (9, "audit", "0009_audit.sql"),
    (10, "programmatic", "0010_programmatic.sql"),
    (11, "forecast_sample", "0011_forecast_sample.sql"),
    (12, "creative_library", "0012_creative_library.sql"),
);

/// Checks the migrations already applied against the compiled-in ones, then applies the rest.
pub(super) fn migrate(conn: &mut Connection, clock: &dyn Clock) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        )",
    )
    .map_err(backend)?;
    check_applied(conn)?;
    for migration in MIGRATIONS {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)?;
        // Another process may have applied it between the check above and this transaction.
        let applied = tx
            .query_row(
                "SELECT 1 FROM schema_migrations WHERE version = ?1",
                [migration.version],
                |_| Ok(()),
            )
            .optional()
            .map_err(backend)?
            .is_some();
        if applied {
            continue;
        }
        tx.execute_batch(migration.sql).map_err(backend)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, sha256, applied_at)
             VALUES (?1, ?2, ?3, ?4)",
            params![
                migration.version,
                migration.name,
                checksum(migration.sql),
                clock.now().as_microsecond()
            ],
        )
        .map_err(backend)?;
        tx.commit().map_err(backend)?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "applied database migration"
        );
    }
    Ok(())
}

/// Refuses a database that was migrated by a different or newer binary.
fn check_applied(conn: &Connection) -> Result<(), StoreError> {
    let mut stmt = conn
        .prepare("SELECT version, sha256 FROM schema_migrations ORDER BY version")
        .map_err(backend)?;
    let applied = stmt
        .query_map([], |row| {
            Ok((row.get::<_, u32>(0)?, row.get::<_, String>(1)?))
        })
        .map_err(backend)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(backend)?;
    Ok(shared::check_applied(applied, MIGRATIONS)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SqliteStore, StatsStore};
    use marquee_model::ManualClock;
    use marquee_stats::{Counters, Granularity, RowKey, RowQuery};
    use std::sync::Arc;

    /// A database migrated by a build before invalid traffic (migrations 1 to 6) with stats
    /// rows in it: migration 7 keeps every counter, the new ones read 0, and runs then add to
    /// them.
    #[tokio::test]
    async fn invalid_traffic_columns_join_rows_stored_before_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, \
                 sha256 TEXT NOT NULL, applied_at INTEGER NOT NULL)",
            )
            .unwrap();
            for migration in MIGRATIONS.iter().take_while(|m| m.version <= 6) {
                conn.execute_batch(migration.sql).unwrap();
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?1, ?2, ?3, 0)",
                    params![migration.version, migration.name, checksum(migration.sql)],
                )
                .unwrap();
            }
            // One hour row of 3 impressions, 1 click and 4,500 CPM micros, as the old
            // schema held it.
            for (table, keys) in [
                ("stats_hour", "7, 3600, 70, 5, 'DE', 2"),
                ("stats_hour_line_item", "7, 3600"),
            ] {
                conn.execute(
                    &format!(
                        "INSERT INTO {table} VALUES ({keys}, 0, 0, 0, 0, 0, 0, 3, 1, 0, 4500, 0)"
                    ),
                    [],
                )
                .unwrap();
            }
        }
        let clock = Arc::new(ManualClock::new(jiff::Timestamp::UNIX_EPOCH));
        let store = SqliteStore::open(&path, clock).unwrap();
        // Spelled out rather than shared with the stats suite's `all` (the same as its shape):
        // that suite is behind the `test-suite` feature, these tests are not.
        let query = |by_line_item_only: bool| RowQuery {
            table: Granularity::Hour,
            from: 0,
            to: 7_200,
            line_items: None,
            placements: None,
            countries: None,
            regions: None,
            devices: None,
            by_line_item: true,
            by_creative: !by_line_item_only,
            by_placement: !by_line_item_only,
            by_country: !by_line_item_only,
            by_region: !by_line_item_only,
            by_device: !by_line_item_only,
        };
        let old = Counters {
            impressions: 3,
            clicks: 1,
            cpm_micros: 4_500,
            ..Counters::default()
        };
        for detailed in [false, true] {
            let rows = store.report_rows(query(!detailed)).await.unwrap();
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].counters, old, "detailed: {detailed}");
        }

        let invalid = Counters {
            invalid_clicks: 2,
            invalid_too_fast: 2,
            ..Counters::default()
        };
        let key = RowKey {
            line_item: 7,
            bucket: 3_600,
            creative: 70,
            placement: 5,
            country: *b"DE",
            region: [0; 3],
            device: 2,
        };
        let hours = vec![(key, invalid)];
        store
            .commit_run(crate::stats_suite::hour_rows(hours))
            .await
            .unwrap();
        let mut both = old;
        both.add(&invalid);
        for detailed in [false, true] {
            let rows = store.report_rows(query(!detailed)).await.unwrap();
            assert_eq!(rows[0].counters, both, "detailed: {detailed}");
            assert_eq!(rows[0].counters.spend_micros(), 4);
        }
    }

    #[test]
    fn migrations_are_numbered_in_order_from_one() {
        for (i, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version as usize, i + 1, "{}", migration.name);
        }
    }
}
