//! `[events]`: the edge's event log.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{in_range, millis, secs};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsSection {
    /// `group`: fsync every `group_commit_ms`; `strict`: impressions, clicks and conversions are
    /// durable before the response is sent.
    pub durability: DurabilityMode,
    #[serde(rename = "group_commit_ms", with = "millis")]
    pub group_commit: Duration,
    /// Segment files roll at this size (MiB) or age (seconds).
    pub segment_max_mb: u64,
    #[serde(rename = "segment_max_age_secs", with = "secs")]
    pub segment_max_age: Duration,
}

impl Default for EventsSection {
    fn default() -> Self {
        EventsSection {
            durability: DurabilityMode::Group,
            group_commit: Duration::from_millis(5),
            segment_max_mb: 64,
            segment_max_age: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurabilityMode {
    Group,
    Strict,
}

impl EventsSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "events.group_commit_ms",
            millis::count(&self.group_commit),
            1,
            1_000,
        )?;
        in_range("events.segment_max_mb", self.segment_max_mb, 1, 4_096)?;
        in_range(
            "events.segment_max_age_secs",
            secs::count(&self.segment_max_age),
            1,
            86_400,
        )
    }
}
