//! [`PacingStore`] on PostgreSQL: one row per document in `pacing_state`.

use async_trait::async_trait;

use super::{PostgresStore, execute, get, query};
use crate::{PacingStore, StoreError};

#[async_trait]
impl PacingStore for PostgresStore {
    async fn pacing_state(&self, name: &str) -> Result<Option<String>, StoreError> {
        in_read!(self, |tx| {
            let rows = query(
                &tx,
                "SELECT body FROM pacing_state WHERE name = $1",
                &[&name],
            )
            .await?;
            rows.first().map(|row| get(row, 0)).transpose()?
        })
    }

    async fn save_pacing_state(&self, name: &str, body: String) -> Result<(), StoreError> {
        // Not an object write: no change-counter lock, only this row's.
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(super::pg)?;
        execute(
            &tx,
            "INSERT INTO pacing_state (name, body, updated_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET body = excluded.body,
                 updated_at = excluded.updated_at",
            &[&name, &body, &self.clock.now().as_microsecond()],
        )
        .await?;
        tx.commit().await.map_err(super::pg)
    }
}
