//! `[forecast]`: the sample of ad requests edges keep for inventory forecasts (see
//! `docs/forecasting.md`).

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::in_range;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForecastSection {
    /// The share of ad requests an edge keeps, per million (`0`: none).
    pub sample_rate_ppm: u32,
    /// The most sample an edge writes a UTC day, in MiB; past it the day's sampling stops.
    pub max_mb_per_day: u64,
    /// Whole UTC days of sample the manager keeps.
    pub history_days: u32,
}

impl Default for ForecastSection {
    fn default() -> Self {
        ForecastSection {
            sample_rate_ppm: 10_000,
            max_mb_per_day: 256,
            history_days: 28,
        }
    }
}

impl ForecastSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "forecast.sample_rate_ppm",
            u64::from(self.sample_rate_ppm),
            0,
            1_000_000,
        )?;
        in_range("forecast.max_mb_per_day", self.max_mb_per_day, 1, 1_000_000)?;
        // Eight weeks: as far back as the traffic model looks.
        in_range("forecast.history_days", u64::from(self.history_days), 7, 56)
    }

    /// The kept share of ad requests, in `[0, 1]`.
    pub fn sample_rate(&self) -> f64 {
        f64::from(self.sample_rate_ppm) / 1_000_000.0
    }

    /// [`ForecastSection::max_mb_per_day`] in bytes.
    pub fn max_bytes_per_day(&self) -> u64 {
        self.max_mb_per_day.saturating_mul(1 << 20)
    }
}
