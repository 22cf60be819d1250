//! Versioned schema migrations for PostgreSQL: SQL files compiled into the binary, checked
//! against the checksums recorded when they were applied, and the pending ones applied in one
//! transaction that first takes a transaction-level advisory lock. Managers starting at once
//! queue on that lock; each then finds what the first applied, so every migration runs once.
//!
//! Deliberate twin of `sqlite/migrate.rs`: PostgreSQL applies pending migrations in one
//! transaction under an advisory lock, SQLite one transaction each.

use deadpool_postgres::Object;
use marquee_model::Clock;

use super::pg;
use crate::StoreError;
use crate::shared::{Migration, check_applied, checksum};

/// The advisory lock key migrations hold (any constant shared by every Marquee binary; the
/// bytes spell "marqmigr").
const MIGRATION_LOCK: i64 = 0x6d61_7271_6d69_6772;

/// Every migration this binary knows, in version order.
const MIGRATIONS: &[Migration] = crate::shared::migrations!("postgres":
    (1, "initial", "0001_initial.sql"),
    (2, "users", "0002_users.sql"),
    (3, "invalid_traffic", "0003_invalid_traffic.sql"),
    (4, "stats_region", "0004_stats_region.sql"),
    (5, "audit", "0005_audit.sql"),
    (6, "programmatic", "0006_programmatic.sql"),
    (7, "forecast_sample", "0007_forecast_sample.sql"),
    (8, "creative_library", "0008_creative_library.sql"),
);

/// Checks the migrations already applied against the compiled-in ones, then applies the rest,
/// all under the advisory lock.
pub(super) async fn migrate(client: &mut Object, clock: &dyn Clock) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(pg)?;
    // Released when the transaction ends, committed or not.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        )",
    )
    .await
    .map_err(pg)?;
    let rows = tx
        .query(
            "SELECT version, sha256 FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .map_err(pg)?;
    let mut applied = Vec::with_capacity(rows.len());
    for row in &rows {
        let version: i32 = row.try_get(0).map_err(pg)?;
        let version = u32::try_from(version)
            .map_err(|_| StoreError::Corrupt(format!("migration version {version}")))?;
        applied.push((version, row.try_get::<_, String>(1).map_err(pg)?));
    }
    check_applied(applied.iter().cloned(), MIGRATIONS)?;
    for migration in MIGRATIONS {
        if applied
            .iter()
            .any(|(version, _)| *version == migration.version)
        {
            continue;
        }
        tx.batch_execute(migration.sql).await.map_err(|e| {
            StoreError::Backend(
                format!(
                    "migration {} ({}): {}",
                    migration.version,
                    migration.name,
                    super::pg_message(&e)
                )
                .into(),
            )
        })?;
        let version = i32::try_from(migration.version).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO schema_migrations (version, name, sha256, applied_at)
             VALUES ($1, $2, $3, $4)",
            &[
                &version,
                &migration.name,
                &checksum(migration.sql),
                &clock.now().as_microsecond(),
            ],
        )
        .await
        .map_err(pg)?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "applied database migration"
        );
    }
    tx.commit().await.map_err(pg)
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
