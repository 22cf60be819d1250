//! `[pacing]`: pacing rounds on the manager, budget leases, and the edge's sync with the
//! manager.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{in_range, millis};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacingSection {
    /// Time between controller rounds; a round also runs as a budget period ends.
    #[serde(rename = "interval_ms", with = "millis")]
    pub interval: Duration,
    /// Ceiling of the bid multiplier, per mille (1000 turns bid pacing off).
    pub max_bid_permille: u32,
    /// Throttle of a line item with no measurements yet, per million (a small goal on a busy
    /// site must not burn its first minutes).
    pub initial_throttle_ppm: u32,
    /// How often an edge renews each lease; a slice is sized to last this long.
    #[serde(rename = "lease_renew_ms", with = "millis")]
    pub lease_renew: Duration,
    /// How long a grant is good for at the edge; at least `lease_renew_ms`.
    #[serde(rename = "lease_duration_ms", with = "millis")]
    pub lease_duration: Duration,
    /// How long after expiry the manager reclaims a silent edge's lease: above the worst
    /// clock skew.
    #[serde(rename = "lease_grace_ms", with = "millis")]
    pub lease_grace: Duration,
    /// Billing in flight the manager holds budget back for (this long of the edges' rate).
    #[serde(rename = "in_flight_allowance_ms", with = "millis")]
    pub in_flight_allowance: Duration,
    /// How often an edge syncs with the manager: renewals and controls.
    #[serde(rename = "sync_interval_ms", with = "millis")]
    pub sync_interval: Duration,
}

impl Default for PacingSection {
    fn default() -> Self {
        PacingSection {
            interval: Duration::from_millis(10_000),
            max_bid_permille: 1_200,
            initial_throttle_ppm: 50_000,
            lease_renew: Duration::from_millis(5_000),
            lease_duration: Duration::from_millis(15_000),
            lease_grace: Duration::from_millis(5_000),
            in_flight_allowance: Duration::from_millis(10_000),
            sync_interval: Duration::from_millis(1_000),
        }
    }
}

impl PacingSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let ms = millis::count;
        in_range("pacing.interval_ms", ms(&self.interval), 100, 600_000)?;
        in_range(
            "pacing.max_bid_permille",
            u64::from(self.max_bid_permille),
            1_000,
            10_000,
        )?;
        in_range(
            "pacing.initial_throttle_ppm",
            u64::from(self.initial_throttle_ppm),
            1,
            1_000_000,
        )?;
        in_range("pacing.lease_renew_ms", ms(&self.lease_renew), 100, 600_000)?;
        in_range(
            "pacing.lease_duration_ms",
            ms(&self.lease_duration),
            ms(&self.lease_renew),
            3_600_000,
        )?;
        in_range("pacing.lease_grace_ms", ms(&self.lease_grace), 0, 600_000)?;
        in_range(
            "pacing.in_flight_allowance_ms",
            ms(&self.in_flight_allowance),
            0,
            600_000,
        )?;
        in_range(
            "pacing.sync_interval_ms",
            ms(&self.sync_interval),
            50,
            60_000,
        )
    }
}
