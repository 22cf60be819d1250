//! `[geo]`: IP geolocation from MaxMind DB format files (GeoIP2 / GeoLite2 City or Country,
//! DB-IP's lite files): where the edge learns a visitor's country, region, city, metro, postal
//! code and location, and a bid request's when it carries an address but no `device.geo`. See
//! `docs/geo-and-device.md`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{in_range, secs};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeoSection {
    /// A City or Country database; reloaded when the file changes (a bad file keeps the last
    /// good one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<PathBuf>,
    /// An ASN or connection-type database, for `asn` and `connection_type` targeting; needs
    /// `database`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asn_database: Option<PathBuf>,
    /// How often the database files are checked for changes.
    #[serde(rename = "reload_interval_secs", with = "secs")]
    pub reload_interval: Duration,
}

impl Default for GeoSection {
    fn default() -> Self {
        GeoSection {
            database: None,
            asn_database: None,
            reload_interval: Duration::from_secs(60),
        }
    }
}

impl GeoSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.asn_database.is_some() && self.database.is_none() {
            return Err(ConfigError::value(
                "geo.asn_database",
                "is set without `geo.database`; set both (a City or Country database, and an \
                 ASN or Connection-Type one)"
                    .into(),
            ));
        }
        in_range(
            "geo.reload_interval_secs",
            secs::count(&self.reload_interval),
            1,
            86_400,
        )
    }
}
