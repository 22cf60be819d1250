//! Typed access: model objects in, `Stored<T>` out, on top of the kind-erased trait.

use marquee_model::{Object, Stored};

use crate::{Actor, Draft, ListQuery, Record, Store, StoreError};

impl Record {
    /// Decodes the body into the model type of this record's kind.
    pub fn decode<T: Object>(&self) -> Result<Stored<T>, StoreError> {
        if self.kind != T::KIND {
            return Err(StoreError::Corrupt(format!(
                "{} {} decoded as {}",
                self.kind.name(),
                self.meta.id,
                T::KIND.name()
            )));
        }
        let object = serde_json::from_str(&self.body).map_err(|e| {
            StoreError::Corrupt(format!("{} {}: {e}", self.kind.name(), self.meta.id))
        })?;
        Ok(Stored {
            meta: self.meta,
            object,
        })
    }
}

impl Draft {
    pub fn of<T: Object>(object: &T) -> Result<Draft, StoreError> {
        let body = serde_json::to_string(object)
            .map_err(|e| StoreError::Corrupt(format!("cannot encode {}: {e}", T::KIND.name())))?;
        Ok(Draft {
            parent_id: object.parent_id(),
            name: object.name().to_owned(),
            status: object.status(),
            body,
        })
    }
}

impl dyn Store + '_ {
    pub async fn create_object<T: Object>(
        &self,
        object: &T,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Stored<T>, StoreError> {
        self.create(T::KIND, Draft::of(object)?, scope, by)
            .await?
            .decode()
    }

    pub async fn get_object<T: Object>(
        &self,
        id: u64,
        scope: Option<u64>,
    ) -> Result<Stored<T>, StoreError> {
        self.get(T::KIND, id, scope).await?.decode()
    }

    pub async fn update_object<T: Object>(
        &self,
        id: u64,
        expected_version: u64,
        object: &T,
        scope: Option<u64>,
        by: &Actor,
    ) -> Result<Stored<T>, StoreError> {
        self.update(T::KIND, id, expected_version, Draft::of(object)?, scope, by)
            .await?
            .decode()
    }

    pub async fn list_objects<T: Object>(
        &self,
        query: &ListQuery,
    ) -> Result<Vec<Stored<T>>, StoreError> {
        self.list(T::KIND, query)
            .await?
            .iter()
            .map(Record::decode)
            .collect()
    }
}
