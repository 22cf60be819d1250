//! [`PacingStore`] on SQLite: one row per document in `pacing_state`.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, backend};
use crate::{PacingStore, StoreError};

#[async_trait]
impl PacingStore for SqliteStore {
    async fn pacing_state(&self, name: &str) -> Result<Option<String>, StoreError> {
        let name = name.to_owned();
        self.read(move |tx| {
            tx.query_row(
                "SELECT body FROM pacing_state WHERE name = ?1",
                params![name],
                |row| row.get(0),
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn save_pacing_state(&self, name: &str, body: String) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.write(move |tx, now| {
            tx.execute(
                "INSERT INTO pacing_state (name, body, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET body = excluded.body,
                     updated_at = excluded.updated_at",
                params![name, body, now.as_microsecond()],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use marquee_model::SystemClock;

    use super::*;

    #[tokio::test]
    async fn a_saved_document_replaces_the_last_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pacing.db");
        let store = SqliteStore::open(&path, Arc::new(SystemClock)).unwrap();
        assert_eq!(store.pacing_state("manager").await.unwrap(), None);
        store
            .save_pacing_state("manager", "{\"a\":1}".into())
            .await
            .unwrap();
        store
            .save_pacing_state("manager", "{\"a\":2}".into())
            .await
            .unwrap();
        drop(store);
        let store = SqliteStore::open(&path, Arc::new(SystemClock)).unwrap();
        assert_eq!(
            store.pacing_state("manager").await.unwrap().as_deref(),
            Some("{\"a\":2}")
        );
        assert_eq!(store.pacing_state("other").await.unwrap(), None);
    }
}
