//! The pacing side of the store: the manager's pacing state (lease book, controller states),
//! kept as opaque JSON documents by name. The lease book must be persisted before the manager
//! answers the renewals that changed it, so that a restart never forgets a ceiling it granted.

use async_trait::async_trait;

use crate::StoreError;

#[async_trait]
pub trait PacingStore: Send + Sync {
    /// The document stored under `name`, if any.
    async fn pacing_state(&self, name: &str) -> Result<Option<String>, StoreError>;

    /// Replaces the document stored under `name`, durably (one transaction).
    async fn save_pacing_state(&self, name: &str, body: String) -> Result<(), StoreError>;
}
