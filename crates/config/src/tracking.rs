//! `[tracking]`: the keys that sign tracking links, and the replay guards.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::in_range;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackingSection {
    /// Keys that sign and verify tracking links, each `ID:hex:…` or `ID:base64:…` (ID 0–255,
    /// at least 32 bytes). Empty: a key is generated on first start and kept in the data
    /// directory.
    pub keys: Vec<TrackingKey>,
    /// The id of the key that signs; the others only verify (rotation).
    pub signing_key: u8,
    /// How many new tokens of one kind (impression, click, conversion; the bidder's win,
    /// billing, loss) expiring in the same minute each replay guard of an edge remembers.
    /// Beyond it the guard forgets some early (`marquee_tracking_replay_overflows_total`) and
    /// repeats of those count again on the edge (the manager still dedupes them). Memory: at
    /// most this × 61 ids of 10–20 bytes per kind, used only as traffic fills it.
    pub replay_capacity_per_minute: u64,
}

impl Default for TrackingSection {
    fn default() -> Self {
        TrackingSection {
            keys: Vec::new(),
            signing_key: 1,
            replay_capacity_per_minute: 262_144,
        }
    }
}

impl TrackingSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "tracking.replay_capacity_per_minute",
            self.replay_capacity_per_minute,
            1_024,
            100_000_000,
        )
    }
}

/// One signing key, `ID:hex:…` or `ID:base64:…`: its id, and the secret's text (decoded, and
/// its length checked, by the tracking library).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TrackingKey {
    pub id: u8,
    pub secret: String,
}

impl TryFrom<String> for TrackingKey {
    type Error = &'static str;
    fn try_from(entry: String) -> Result<Self, Self::Error> {
        entry
            .split_once(':')
            .and_then(|(id, secret)| {
                Some(TrackingKey {
                    id: id.parse().ok()?,
                    secret: secret.to_owned(),
                })
            })
            .ok_or("each entry is ID:hex:… or ID:base64:… with ID from 0 to 255")
    }
}

impl From<TrackingKey> for String {
    fn from(key: TrackingKey) -> String {
        format!("{}:{}", key.id, key.secret)
    }
}

/// The secret is not shown.
impl std::fmt::Debug for TrackingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackingKey")
            .field("id", &self.id)
            .field("secret", &"***")
            .finish()
    }
}
