//! Image tag impressions in Redis, so that a click reaches its impression on any edge
//! ([`SharedState::remember_image`], [`SharedState::image`]).

use std::time::{Duration, Instant};

use crate::keys;
use crate::round_trip::Fallback;
use crate::state::SharedState;

impl SharedState {
    /// Remembers an image tag's served impression (`record`, the edge's encoding) under `key`
    /// for `ttl`, so that its click may reach any edge: one `SET … EX … NX` in the background
    /// on the current Tokio runtime (the first image served under a key is the one its clicks
    /// belong to). A failure is counted with the round trips; the click then finds the image
    /// only on the edge that served it.
    pub fn remember_image(&self, key: u64, record: Vec<u8>, ttl: Duration) {
        self.in_background(move |state| async move {
            let mut connection = state.inner.connection.clone();
            let mut command = redis::cmd("SET");
            command
                .arg(keys::image_key(key))
                .arg(record)
                .arg("EX")
                .arg(ttl.as_secs().max(1))
                .arg("NX");
            let deadline = Instant::now() + state.inner.config.flush_timeout;
            let _: Result<Option<String>, Fallback> = state
                .inner
                .round_trip(deadline, command.query_async(&mut connection))
                .await;
        });
    }

    /// The image tag impression remembered under `key` ([`remember_image`]), within
    /// `deadline`; `None` when there is none or Redis did not answer in time.
    ///
    /// [`remember_image`]: SharedState::remember_image
    pub async fn image(&self, key: u64, deadline: Instant) -> Option<Vec<u8>> {
        self.inner
            .get_bytes(keys::image_key(key), deadline)
            .await
            .ok()
            .flatten()
    }
}
