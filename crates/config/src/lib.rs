//! Configuration: built-in defaults, then a TOML file, then `MARQUEE_*` environment variables
//! (nested keys joined with `__`, e.g. `MARQUEE_SNAPSHOT__KEEP=5`), then command-line flags.
//! Everything is validated as it is read, into types the binary uses as they are; an error
//! names the key and what is wrong. Each section is a module of its own.

mod aggregation;
mod bidder;
mod currency;
mod dashboard;
mod database;
mod edge;
mod events;
mod forecast;
mod gateway;
mod geo;
mod keys;
mod log;
mod metrics;
mod pacing;
mod redis;
mod reports;
mod snapshot;
mod tracking;
mod traffic;
mod value;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize, Serializer};

pub use aggregation::{AggregationSection, RemoteEdge};
pub use bidder::{BidderSection, ExchangeSection, PriceKeys};
pub use currency::CurrencySection;
pub use dashboard::DashboardSection;
pub use database::{Database, DatabaseSection, DatabaseUrl};
pub use edge::{EdgeSection, Fallback, PublicUrl};
pub use events::{DurabilityMode, EventsSection};
pub use forecast::ForecastSection;
pub use gateway::{
    AuctionKind, GatewayBidderSection, GatewaySection, MediaType, NoticeHost, OpenRtbVersion,
};
pub use geo::GeoSection;
pub use log::{LogFormat, LogLevel, LogSection};
pub use metrics::{METRICS_TOKEN_MIN_LEN, MetricsSection};
pub use pacing::PacingSection;
pub use redis::{RedisSection, RedisUrl};
pub use reports::ReportsSection;
pub use snapshot::SnapshotSection;
pub use tracking::{TrackingKey, TrackingSection};
pub use traffic::TrafficSection;
pub use value::{BidderUrl, CurrencyCode, HttpUrl, Name, TOKEN_MIN_LEN, Token, WebUrl};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP server listens on.
    pub listen: SocketAddr,
    /// Directory holding the database, snapshots and event logs.
    pub data_dir: PathBuf,
    pub database: DatabaseSection,
    /// Load the demo data set into an empty database.
    pub demo: bool,
    pub snapshot: SnapshotSection,
    pub log: LogSection,
    pub edge: EdgeSection,
    pub events: EventsSection,
    pub tracking: TrackingSection,
    pub aggregation: AggregationSection,
    pub reports: ReportsSection,
    pub pacing: PacingSection,
    pub bidder: BidderSection,
    /// Per-exchange settings, `[exchanges.NAME]`, for bid requests to `/openrtb2/bid/NAME`;
    /// every key left out is taken from `[bidder]`.
    pub exchanges: BTreeMap<String, ExchangeSection>,
    pub currency: CurrencySection,
    #[serde(default)]
    pub gateway: GatewaySection,
    pub redis: RedisSection,
    #[serde(default)]
    pub metrics: MetricsSection,
    #[serde(default)]
    pub dashboard: DashboardSection,
    #[serde(default)]
    pub traffic: TrafficSection,
    #[serde(default)]
    pub geo: GeoSection,
    #[serde(default)]
    pub forecast: ForecastSection,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            database: DatabaseSection::default(),
            demo: false,
            snapshot: SnapshotSection::default(),
            log: LogSection::default(),
            edge: EdgeSection::default(),
            events: EventsSection::default(),
            tracking: TrackingSection::default(),
            aggregation: AggregationSection::default(),
            reports: ReportsSection::default(),
            pacing: PacingSection::default(),
            bidder: BidderSection::default(),
            exchanges: BTreeMap::new(),
            currency: CurrencySection::default(),
            gateway: GatewaySection::default(),
            redis: RedisSection::default(),
            metrics: MetricsSection::default(),
            dashboard: DashboardSection::default(),
            traffic: TrafficSection::default(),
            geo: GeoSection::default(),
            forecast: ForecastSection::default(),
        }
    }
}

/// Values given on the command line; they win over file and environment. They are read and
/// checked as the file's are.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demo: Option<bool>,
    /// `database.url`, as given.
    #[serde(
        rename = "database",
        skip_serializing_if = "Option::is_none",
        serialize_with = "as_database_section"
    )]
    pub database_url: Option<String>,
}

/// `--database URL` as `[database] url = URL`.
fn as_database_section<S: Serializer>(
    url: &Option<String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Section<'a> {
        url: &'a str,
    }
    match url {
        Some(url) => Section { url }.serialize(serializer),
        None => serializer.serialize_none(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    /// What the file format or the types refused, each error with its key.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// A value of the right type that is out of range or contradicts another.
    #[error("invalid configuration: `{key}` {message}")]
    Value { key: String, message: String },
}

impl ConfigError {
    pub(crate) fn value(key: &str, message: String) -> ConfigError {
        ConfigError::Value {
            key: key.to_owned(),
            message,
        }
    }
}

/// Environment variable prefix.
pub const ENV_PREFIX: &str = "MARQUEE_";

impl Config {
    /// Loads defaults ← `file` ← environment ← `overrides`, then validates.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.is_file() {
                return Err(ConfigError::MissingFile(file.to_owned()));
            }
            figment = figment.merge(Toml::file_exact(file));
        }
        Self::extract(figment, overrides)
    }

    /// Loads defaults ← `text` (a configuration file's contents) ← environment, then
    /// validates: what [`Config::load`] does with a file, for callers that hold the text.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let figment =
            Figment::from(Serialized::defaults(Config::default())).merge(Toml::string(text));
        Self::extract(figment, &Overrides::default())
    }

    /// The top-level keys: a `MARQUEE_*` variable naming anything else is another tool's.
    pub fn top_level_keys() -> &'static [&'static str] {
        keys::field_names::<Config>()
    }

    fn extract(figment: Figment, overrides: &Overrides) -> Result<Config, ConfigError> {
        let sections = Self::top_level_keys();
        let config: Config = figment
            .merge(
                Env::prefixed(ENV_PREFIX)
                    .split("__")
                    // Other tools' `MARQUEE_*` variables (MARQUEE_BIN in scripts) are not ours.
                    .filter(|key| {
                        let key = key.as_str().to_ascii_lowercase();
                        let section = key.split('.').next().unwrap_or("");
                        let section = section.split("__").next().unwrap_or("");
                        sections.contains(&section)
                    }),
            )
            .merge(Serialized::defaults(overrides))
            .extract()
            .map_err(|e| ConfigError::Invalid(describe(e)))?;
        config.validate()?;
        Ok(config)
    }

    /// The database `database.url` selects.
    pub fn database(&self) -> Database {
        match &self.database.url {
            None => Database::Sqlite(self.default_sqlite_path()),
            Some(DatabaseUrl::Sqlite(path)) => Database::Sqlite(path.clone()),
            Some(DatabaseUrl::Postgres(url)) => Database::Postgres(url.clone()),
        }
    }

    /// Where the SQLite database is when `database.url` is empty.
    pub fn default_sqlite_path(&self) -> PathBuf {
        self.data_dir.join("marquee.db")
    }

    /// What the types cannot say on their own: ranges, and keys that depend on each other.
    fn validate(&self) -> Result<(), ConfigError> {
        if self.data_dir.as_os_str().is_empty() {
            return Err(ConfigError::value("data_dir", "must not be empty".into()));
        }
        self.snapshot.validate()?;
        self.edge.validate()?;
        self.events.validate()?;
        self.tracking.validate()?;
        self.aggregation.validate()?;
        self.reports.validate()?;
        self.forecast.validate()?;
        self.pacing.validate()?;
        self.bidder.validate("bidder")?;
        for (name, exchange) in &self.exchanges {
            if !value::is_name(name) {
                return Err(ConfigError::value(
                    "exchanges",
                    format!("name {name:?} must be 1 to 64 letters, digits, `-` or `_`"),
                ));
            }
            self.bidder
                .for_exchange(exchange)
                .validate(&format!("exchanges.{name}"))?;
        }
        self.gateway.validate()?;
        self.redis.validate()?;
        self.metrics.validate()?;
        self.traffic.validate()?;
        self.geo.validate()
    }
}

/// Every error figment found, each naming its key and where the value came from.
fn describe(error: figment::Error) -> String {
    error
        .into_iter()
        .map(|e| {
            let key = e.path.join(".");
            let source = e
                .metadata
                .as_ref()
                .map(|m| match &m.source {
                    Some(source) => format!(" (from {source})"),
                    None => format!(" (from {})", m.name),
                })
                .unwrap_or_default();
            let kind = e.kind.to_string();
            if key.is_empty() {
                format!("{kind}{source}")
            } else {
                format!("`{key}`: {kind}{source}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
