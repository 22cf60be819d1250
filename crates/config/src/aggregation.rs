//! `[aggregation]`: the manager's reading of the edges' event logs into statistics, and the
//! shared secret of the split roles.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{HttpUrl, Token, days, empty_is_none, hours, in_range, millis, secs};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregationSection {
    /// Time between aggregation runs.
    #[serde(rename = "interval_ms", with = "millis")]
    pub interval: Duration,
    /// The most event log data one run reads (MiB); a run that reaches it is followed at once.
    pub max_run_mb: u64,
    /// Events older than this when the manager reads them are dropped, counted.
    #[serde(rename = "max_event_age_hours", with = "hours")]
    pub max_event_age: Duration,
    /// How far edge clocks may be ahead of or behind the manager's.
    #[serde(rename = "max_clock_skew_secs", with = "secs")]
    pub max_clock_skew: Duration,
    /// How long per-minute rows are kept; hour and day rows are kept.
    #[serde(rename = "minute_retention_days", with = "days")]
    pub minute_retention: Duration,
    /// Whether edges delete segments once the manager has counted them.
    pub delete_consumed: bool,
    /// Remote edges to collect from, each `NAME=URL` (`edge-2=http://10.0.0.7:8080`). The
    /// name keys the stored checkpoints: keep it stable.
    pub edges: Vec<RemoteEdge>,
    /// Shared secret: an edge serves its log at `/log/…` only with it set, and only to callers
    /// sending it; the manager sends it to the edges above. Empty: not served.
    #[serde(default, with = "empty_is_none")]
    pub token: Option<Token>,
    /// The most disk an edge's event log may use (MiB) while the manager is away; past it the
    /// oldest closed segments are deleted, and their events lost.
    pub log_disk_limit_mb: u64,
}

impl Default for AggregationSection {
    fn default() -> Self {
        AggregationSection {
            interval: Duration::from_millis(1_000),
            max_run_mb: 64,
            max_event_age: Duration::from_secs(24 * 3_600),
            max_clock_skew: Duration::from_secs(300),
            minute_retention: Duration::from_secs(7 * 86_400),
            delete_consumed: true,
            edges: Vec::new(),
            token: None,
            log_disk_limit_mb: 10_240,
        }
    }
}

/// A remote edge, `NAME=URL`: a name other than `local` (the in-process edge's) of letters,
/// digits, `-`, `_`, `.`, and an `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RemoteEdge {
    pub name: String,
    pub url: HttpUrl,
}

impl TryFrom<String> for RemoteEdge {
    type Error = String;
    fn try_from(entry: String) -> Result<Self, String> {
        let bad = || {
            format!(
                "entry {entry:?} is not NAME=URL with NAME of letters, digits, `-`, `_`, `.` \
                 (not `local`) and an http:// URL"
            )
        };
        let (name, url) = entry.split_once('=').ok_or_else(bad)?;
        let name_ok = !name.is_empty()
            && name != "local"
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !name_ok {
            return Err(bad());
        }
        let url = HttpUrl::try_from(url).map_err(|_| bad())?;
        Ok(RemoteEdge {
            name: name.to_owned(),
            url,
        })
    }
}

impl From<RemoteEdge> for String {
    fn from(edge: RemoteEdge) -> String {
        format!("{}={}", edge.name, edge.url)
    }
}

impl AggregationSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "aggregation.interval_ms",
            millis::count(&self.interval),
            10,
            60_000,
        )?;
        in_range("aggregation.max_run_mb", self.max_run_mb, 1, 1_024)?;
        in_range(
            "aggregation.max_event_age_hours",
            hours::count(&self.max_event_age),
            1,
            24 * 366,
        )?;
        in_range(
            "aggregation.max_clock_skew_secs",
            secs::count(&self.max_clock_skew),
            0,
            3_600,
        )?;
        in_range(
            "aggregation.minute_retention_days",
            days::count(&self.minute_retention),
            1,
            3_660,
        )?;
        in_range(
            "aggregation.log_disk_limit_mb",
            self.log_disk_limit_mb,
            1,
            100_000_000,
        )?;
        if !self.edges.is_empty() && self.token.is_none() {
            return Err(ConfigError::value(
                "aggregation.token",
                "must be set to collect from `aggregation.edges`".into(),
            ));
        }
        for (i, edge) in self.edges.iter().enumerate() {
            if self.edges[..i].iter().any(|e| e.name == edge.name) {
                return Err(ConfigError::value(
                    "aggregation.edges",
                    format!("edge name {:?} appears twice", edge.name),
                ));
            }
        }
        Ok(())
    }

    /// The most event log data one run reads, in bytes.
    pub fn max_run_bytes(&self) -> usize {
        usize::try_from(self.max_run_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }

    /// The most disk an edge's event log may use, in bytes.
    pub fn log_disk_limit_bytes(&self) -> u64 {
        self.log_disk_limit_mb.saturating_mul(1 << 20)
    }
}
