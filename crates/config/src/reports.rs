//! `[reports]`: limits of the reporting API.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::in_range;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportsSection {
    /// The most rows one report may answer; a larger one is refused with advice to narrow it.
    pub max_rows: u64,
}

impl Default for ReportsSection {
    fn default() -> Self {
        ReportsSection { max_rows: 100_000 }
    }
}

impl ReportsSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range("reports.max_rows", self.max_rows, 1, 10_000_000)
    }

    /// [`ReportsSection::max_rows`] as a count of rows in memory.
    pub fn max_rows(&self) -> usize {
        usize::try_from(self.max_rows).unwrap_or(usize::MAX)
    }
}
