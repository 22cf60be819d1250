//! `[traffic]`: traffic quality, the general invalid traffic screen of events and bid
//! requests (see `docs/traffic-quality.md`). A limit of 0 switches its rule off.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{in_range, millis, secs};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrafficSection {
    /// A file of crawler user-agent patterns (one regular expression a line) used instead of
    /// the shipped list; reloaded when it changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crawlers_file: Option<PathBuf>,
    /// A file of data-centre networks (one CIDR a line) used instead of the shipped list;
    /// reloaded when it changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datacenters_file: Option<PathBuf>,
    /// How often the list files are checked for changes.
    #[serde(rename = "reload_interval_secs", with = "secs")]
    pub reload_interval: Duration,
    /// Counted events (impressions, clicks, conversions) one user may make per minute.
    pub events_per_user_per_minute: u32,
    /// Counted events one client address prefix (/24, /48) may make per minute.
    pub events_per_prefix_per_minute: u32,
    /// Image-tag impressions one client address prefix may make per minute.
    pub image_tags_per_prefix_per_minute: u32,
    /// A click sooner than this after its ad was decided (or its image served) is invalid.
    #[serde(rename = "min_click_delay_ms", with = "millis")]
    pub min_click_delay: Duration,
    /// How long after its image an image tag's click counts.
    #[serde(rename = "image_click_window_secs", with = "secs")]
    pub image_click_window: Duration,
    /// A signed click whose impression beacon the edge did not count is invalid. Only where a
    /// client's beacon and click reach the same edge.
    pub clicks_need_impression: bool,
}

impl Default for TrafficSection {
    fn default() -> Self {
        TrafficSection {
            crawlers_file: None,
            datacenters_file: None,
            reload_interval: Duration::from_secs(60),
            events_per_user_per_minute: 120,
            events_per_prefix_per_minute: 1_200,
            image_tags_per_prefix_per_minute: 30,
            min_click_delay: Duration::from_millis(1_000),
            image_click_window: Duration::from_secs(3_600),
            clicks_need_impression: false,
        }
    }
}

impl TrafficSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "traffic.reload_interval_secs",
            secs::count(&self.reload_interval),
            1,
            86_400,
        )?;
        in_range(
            "traffic.min_click_delay_ms",
            millis::count(&self.min_click_delay),
            0,
            60_000,
        )?;
        in_range(
            "traffic.image_click_window_secs",
            secs::count(&self.image_click_window),
            60,
            7 * 86_400,
        )
    }
}
