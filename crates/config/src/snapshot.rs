//! `[snapshot]`: compiling and keeping campaign snapshots on the manager.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{in_range, millis};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSection {
    /// How often the manager checks the change counter and recompiles if it moved.
    #[serde(rename = "compile_interval_ms", with = "millis")]
    pub compile_interval: Duration,
    /// How many published snapshot files to keep.
    pub keep: usize,
}

impl Default for SnapshotSection {
    fn default() -> Self {
        SnapshotSection {
            compile_interval: Duration::from_millis(1_000),
            keep: 3,
        }
    }
}

impl SnapshotSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "snapshot.compile_interval_ms",
            millis::count(&self.compile_interval),
            10,
            60_000,
        )?;
        in_range(
            "snapshot.keep",
            u64::try_from(self.keep).unwrap_or(u64::MAX),
            1,
            100,
        )
    }
}
