//! Versioned schema migrations: SQL files compiled into the binary, applied in order at open,
//! one transaction each, and recorded with their checksum so that a changed one is noticed.

use marquee_model::Clock;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::backend;
use crate::StoreError;
use crate::shared::{self, Migration, checksum};

/// Every migration this binary knows, in version order.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../../migrations/sqlite/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "stats",
        sql: include_str!("../../migrations/sqlite/0002_stats.sql"),
    },
    Migration {
        version: 3,
        name: "stats_minute_lean",
        sql: include_str!("../../migrations/sqlite/0003_stats_minute_lean.sql"),
    },
    Migration {
        version: 4,
        name: "stats_hour_line_item",
        sql: include_str!("../../migrations/sqlite/0004_stats_hour_line_item.sql"),
    },
    Migration {
        version: 5,
        name: "pacing_state",
        sql: include_str!("../../migrations/sqlite/0005_pacing_state.sql"),
    },
    Migration {
        version: 6,
        name: "users",
        sql: include_str!("../../migrations/sqlite/0006_users.sql"),
    },
];

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

    #[test]
    fn migrations_are_numbered_in_order_from_one() {
        for (i, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version as usize, i + 1, "{}", migration.name);
        }
    }
}
