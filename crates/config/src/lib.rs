//! Configuration: built-in defaults, then a TOML file, then `MARQUEE_*` environment variables
//! (nested keys joined with `__`, e.g. `MARQUEE_SNAPSHOT__KEEP=5`), then command-line flags.
//! Everything is validated at start; an error names the key and what is wrong.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

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
    pub snapshot: SnapshotConfig,
    pub log: LogConfig,
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
}

/// IP geolocation from MaxMind DB format files (GeoIP2 / GeoLite2 City or Country, DB-IP's
/// lite files): where the edge learns a visitor's country, region, city, metro, postal code and
/// location, and a bid request's when it carries an address but no `device.geo`. See
/// `docs/geo-and-device.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeoSection {
    /// A City or Country database; reloaded when the file changes (a bad file keeps the last
    /// good one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<PathBuf>,
    /// An ASN or connection-type database, for `asn` and `connection_type` targeting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asn_database: Option<PathBuf>,
    /// How often the database files are checked for changes, in seconds.
    pub reload_interval_secs: u64,
}

impl Default for GeoSection {
    fn default() -> Self {
        GeoSection {
            database: None,
            asn_database: None,
            reload_interval_secs: 60,
        }
    }
}

impl GeoSection {
    fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "geo.reload_interval_secs",
            self.reload_interval_secs,
            1,
            86_400,
        )
    }
}

/// Traffic quality: the general invalid traffic screen of events and bid requests (see
/// `docs/traffic-quality.md`). A limit of 0 switches its rule off.
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
    /// How often the list files are checked for changes, in seconds.
    pub reload_interval_secs: u64,
    /// Counted events (impressions, clicks, conversions) one user may make per minute.
    pub events_per_user_per_minute: u32,
    /// Counted events one client address prefix (/24, /48) may make per minute.
    pub events_per_prefix_per_minute: u32,
    /// Image-tag impressions one client address prefix may make per minute.
    pub image_tags_per_prefix_per_minute: u32,
    /// A click sooner than this after its ad was decided (or its image served) is invalid, in
    /// milliseconds.
    pub min_click_delay_ms: u64,
    /// How long after its image an image tag's click counts, in seconds.
    pub image_click_window_secs: u64,
    /// A signed click whose impression beacon the edge did not count is invalid. Only where a
    /// client's beacon and click reach the same edge.
    pub clicks_need_impression: bool,
}

impl Default for TrafficSection {
    fn default() -> Self {
        TrafficSection {
            crawlers_file: None,
            datacenters_file: None,
            reload_interval_secs: 60,
            events_per_user_per_minute: 120,
            events_per_prefix_per_minute: 1_200,
            image_tags_per_prefix_per_minute: 30,
            min_click_delay_ms: 1_000,
            image_click_window_secs: 3_600,
            clicks_need_impression: false,
        }
    }
}

impl TrafficSection {
    fn validate(&self) -> Result<(), ConfigError> {
        in_range(
            "traffic.reload_interval_secs",
            self.reload_interval_secs,
            1,
            86_400,
        )?;
        in_range(
            "traffic.min_click_delay_ms",
            self.min_click_delay_ms,
            0,
            60_000,
        )?;
        in_range(
            "traffic.image_click_window_secs",
            self.image_click_window_secs,
            60,
            7 * 86_400,
        )?;
        Ok(())
    }
}

impl EdgeSection {
    fn validate_proxies(&self) -> Result<(), ConfigError> {
        for (i, proxy) in self.trusted_proxies.iter().enumerate() {
            if parse_network(proxy).is_none() {
                return Err(ConfigError::Invalid(format!(
                    "`edge.trusted_proxies[{i}]` is {proxy:?}; it must be an address or a CIDR \
                     network such as 10.0.0.0/8"
                )));
            }
        }
        Ok(())
    }

    /// The trusted proxies as networks (a plain address is a network of one).
    pub fn trusted_networks(&self) -> Vec<ipnet::IpNet> {
        self.trusted_proxies
            .iter()
            .filter_map(|proxy| parse_network(proxy))
            .collect()
    }
}

fn parse_network(text: &str) -> Option<ipnet::IpNet> {
    text.parse::<ipnet::IpNet>().ok().or_else(|| {
        text.parse::<std::net::IpAddr>()
            .ok()
            .map(ipnet::IpNet::from)
    })
}

/// The web dashboard the manager serves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DashboardSection {
    /// Whether its cookies are `Secure` (sent back over https only): true when browsers reach
    /// the dashboard over https. Unset: in `marquee serve`, whether `edge.public_url` is https
    /// (the dashboard shares the edge's origin); in `marquee manager`, true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secure_cookies: Option<bool>,
}

impl DashboardSection {
    /// The cookies' `Secure` flag. `shared_origin` is the edge's public URL when the dashboard
    /// is served under it (`marquee serve`), `None` when it has an origin of its own (the
    /// manager's, which the edge's URL says nothing about). Unknown, the flag is on: a
    /// session cookie must not travel over plain http when the dashboard is behind TLS, and a
    /// plain-http dashboard that refuses it fails loudly (sign-in does not stick), not silently.
    pub fn secure_cookies(&self, shared_origin: Option<&str>) -> bool {
        self.secure_cookies
            .unwrap_or_else(|| shared_origin.is_none_or(|url| url.starts_with("https://")))
    }
}

/// Who may read `/metrics` on the edge and the manager (its series name every line item's
/// budget and spend, and the ad port is public).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSection {
    /// Bearer token scrapers send (`Authorization: Bearer <token>`), from any address; at least
    /// 16 printable ASCII characters, no spaces. Unset: only loopback peers may scrape.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "secret_text"
    )]
    pub token: Option<String>,
}

/// A secret that must be text. The environment's parser reads `MARQUEE_…=0123…` as a number,
/// which would drop leading zeros and put the value into figment's type error (and so into
/// logs): a number is refused with advice instead, and never echoed.
fn secret_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("text")
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(text.to_owned()))
        }
        fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Self::Value, E> {
            Ok(Some(text))
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(not_text())
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Err(not_text())
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(not_text())
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(not_text())
        }
    }
    fn not_text<E: serde::de::Error>() -> E {
        E::custom(
            "must be text; a value of digits only is read as a number from the environment: \
             quote it (MARQUEE_METRICS__TOKEN='\"…\"') or use letters too",
        )
    }
    deserializer.deserialize_any(Text)
}

/// The token is a secret: `Debug` (a logged configuration) says only whether one is set.
impl std::fmt::Debug for MetricsSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsSection")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The shortest `metrics.token` accepted: guessing must not be an option.
pub const METRICS_TOKEN_MIN_LEN: usize = 16;

impl MetricsSection {
    fn validate(&self) -> Result<(), ConfigError> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        // The token's value is never echoed: error messages end up in logs.
        let message = if token.is_empty() {
            "is empty; leave it unset to serve metrics to loopback addresses only".to_owned()
        } else if !token.bytes().all(|b| b.is_ascii_graphic()) {
            "must be printable ASCII without spaces (it is sent in an HTTP header)".to_owned()
        } else if token.len() < METRICS_TOKEN_MIN_LEN {
            format!(
                "is {} characters; it must be at least {METRICS_TOKEN_MIN_LEN}",
                token.len()
            )
        } else {
            return Ok(());
        };
        Err(ConfigError::OutOfRange {
            key: "metrics.token",
            message,
        })
    }
}

/// Redis for state shared by edges: frequency caps and budget counters. An empty `url` means
/// none: each edge keeps them in its own memory, as `marquee serve` does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSection {
    /// `redis://[user:password@]host:port[/db]`; empty: no Redis.
    pub url: String,
    /// The longest one round trip may take (ms), within the request's own deadline.
    pub timeout_ms: u64,
    /// Entries of the cache of caps Redis reported full.
    pub cache_entries: u64,
    /// How often queued counts and budget charges are sent (ms).
    pub flush_interval_ms: u64,
    /// The longest one flushed chunk (up to 500 counts and charges) may take (ms).
    pub flush_timeout_ms: u64,
    /// Queued counts beyond this are dropped (counted in `/metrics`).
    pub queue_limit: u64,
    /// Failures in a row (errors or timeouts) that open the circuit breaker.
    pub failures_to_open: u32,
    /// How long the open breaker answers from local state before it probes Redis again (ms).
    pub open_ms: u64,
}

impl RedisSection {
    fn validate(&self) -> Result<(), ConfigError> {
        if !self.url.is_empty() && self.url.strip_prefix("redis://").is_none_or(str::is_empty) {
            return Err(ConfigError::OutOfRange {
                key: "redis.url",
                message: format!("is {:?}; it must be a redis:// URL or empty", self.url),
            });
        }
        in_range("redis.timeout_ms", self.timeout_ms, 1, 1_000)?;
        in_range("redis.cache_entries", self.cache_entries, 1, 100_000_000)?;
        in_range("redis.flush_interval_ms", self.flush_interval_ms, 1, 60_000)?;
        in_range("redis.flush_timeout_ms", self.flush_timeout_ms, 1, 60_000)?;
        in_range("redis.queue_limit", self.queue_limit, 1, 100_000_000)?;
        in_range(
            "redis.failures_to_open",
            u64::from(self.failures_to_open),
            1,
            1_000,
        )?;
        in_range("redis.open_ms", self.open_ms, 10, 600_000)
    }
}

/// The manager's database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSection {
    /// Empty: SQLite in `data_dir/marquee.db`. `sqlite:PATH` or a plain path: SQLite in that
    /// file. `postgres://user:password@host:port/database` (or `postgresql://`): PostgreSQL.
    pub url: String,
}

/// Which database [`DatabaseSection::url`] selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    Sqlite(PathBuf),
    /// The URL as configured (with its password, if any; see [`Database::describe`]).
    Postgres(String),
}

impl Database {
    /// The database for messages and logs: the file, or the URL without its password.
    pub fn describe(&self) -> String {
        match self {
            Database::Sqlite(path) => path.display().to_string(),
            Database::Postgres(url) => without_query_password(&without_password(url)),
        }
    }
}

/// `url` with a `password=` query parameter's value, if any, replaced by `***` (libpq accepts
/// the password there too).
fn without_query_password(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let pairs: Vec<&str> = query
        .split('&')
        .map(|pair| {
            if pair.starts_with("password=") {
                "password=***"
            } else {
                pair
            }
        })
        .collect();
    format!("{base}?{}", pairs.join("&"))
}

/// `url` with the password of its user info, if any, replaced by `***`.
fn without_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_owned(),
    }
}

impl DatabaseSection {
    fn validate(&self) -> Result<(), ConfigError> {
        let url = self.url.as_str();
        let bad = |message: String| ConfigError::OutOfRange {
            key: "database.url",
            message,
        };
        if let Some(rest) = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
        {
            if rest.is_empty() || rest.starts_with(['/', '?']) {
                return Err(bad("names no PostgreSQL host".into()));
            }
            return Ok(());
        }
        if url.strip_prefix("sqlite:").is_some_and(str::is_empty) {
            return Err(bad("is `sqlite:` without a file path".into()));
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(bad(format!(
                "has scheme {scheme:?}; use postgres://… for PostgreSQL, or a file path \
                 (or empty) for SQLite"
            )));
        }
        Ok(())
    }
}

/// The OpenRTB bidder: settings for `/openrtb2/bid` and the defaults of every exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BidderSection {
    /// Our seat id (`seatbid.seat`, matched against `wseat`/`bseat`).
    pub seat: String,
    /// The currency we bid in when the request allows it (`cur`).
    pub currency: String,
    /// Price decryption keys for `${AUCTION_PRICE}`, base64 (empty: prices come plain).
    pub price_encryption_key: String,
    pub price_integrity_key: String,
    /// Taken off `tmax` for the network between the exchange and us, in milliseconds.
    pub latency_margin_ms: u64,
    /// The time to answer when a request has no `tmax`, in milliseconds.
    pub default_tmax_ms: u64,
    /// The largest bid request body accepted, in bytes (sent and after gzip).
    pub max_body_bytes: u64,
    /// Bids written to the event log, per thousand (1000: all; sampling saves disk, nothing
    /// else: wins, billing and losses are always logged).
    pub log_bids_per_mille: u32,
    /// Answer a no-bid with a JSON body carrying `nbr` instead of an empty 204.
    pub no_bid_reason: bool,
    /// The exchange's user sync URL `/sync/out` redirects to; `{uid}` is replaced by our user
    /// id. Empty: no outgoing sync.
    pub sync_url: String,
    /// The exchange filters invalid traffic itself: its requests skip the bidder's crawler and
    /// data-centre screen (otherwise answered no-bid with `nbr` 3 or 5).
    #[serde(default)]
    pub filters_invalid_traffic: bool,
}

/// One exchange's settings; each one left out is `[bidder]`'s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_encryption_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_integrity_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_margin_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_tmax_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bids_per_mille: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_bid_reason: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters_invalid_traffic: Option<bool>,
}

impl BidderSection {
    /// An exchange's settings: its own where given, `[bidder]`'s otherwise.
    pub fn for_exchange(&self, exchange: &ExchangeSection) -> BidderSection {
        let pick = |own: &Option<String>, default: &String| own.clone().unwrap_or(default.clone());
        BidderSection {
            seat: pick(&exchange.seat, &self.seat),
            currency: pick(&exchange.currency, &self.currency),
            price_encryption_key: pick(&exchange.price_encryption_key, &self.price_encryption_key),
            price_integrity_key: pick(&exchange.price_integrity_key, &self.price_integrity_key),
            latency_margin_ms: exchange.latency_margin_ms.unwrap_or(self.latency_margin_ms),
            default_tmax_ms: exchange.default_tmax_ms.unwrap_or(self.default_tmax_ms),
            max_body_bytes: exchange.max_body_bytes.unwrap_or(self.max_body_bytes),
            log_bids_per_mille: exchange
                .log_bids_per_mille
                .unwrap_or(self.log_bids_per_mille),
            no_bid_reason: exchange.no_bid_reason.unwrap_or(self.no_bid_reason),
            sync_url: pick(&exchange.sync_url, &self.sync_url),
            filters_invalid_traffic: exchange
                .filters_invalid_traffic
                .unwrap_or(self.filters_invalid_traffic),
        }
    }

    fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        // The section is `bidder` or `exchanges.NAME`: keys are built, so errors carry text.
        let bad = |name: &str, message: String| {
            Err(ConfigError::Invalid(format!("`{prefix}.{name}` {message}")))
        };
        let range = |name: &str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                return Ok(());
            }
            bad(
                name,
                format!("is {value}; it must be between {min} and {max}"),
            )
        };
        if self.seat.is_empty() {
            return bad("seat", "must not be empty".into());
        }
        if !is_currency(&self.currency) {
            return bad(
                "currency",
                format!(
                    "is {:?}; it must be three upper-case letters",
                    self.currency
                ),
            );
        }
        if self.price_encryption_key.is_empty() != self.price_integrity_key.is_empty() {
            return bad(
                "price_integrity_key",
                "and price_encryption_key must be given together".into(),
            );
        }
        range("latency_margin_ms", self.latency_margin_ms, 0, 1_000)?;
        range("default_tmax_ms", self.default_tmax_ms, 10, 10_000)?;
        range("max_body_bytes", self.max_body_bytes, 1_024, 16_777_216)?;
        range(
            "log_bids_per_mille",
            u64::from(self.log_bids_per_mille),
            0,
            1_000,
        )?;
        let url_ok = self.sync_url.is_empty()
            || self.sync_url.starts_with("https://")
            || self.sync_url.starts_with("http://");
        if !url_ok {
            return bad(
                "sync_url",
                format!("is {:?}; it must be an http(s) URL", self.sync_url),
            );
        }
        Ok(())
    }
}

/// Gateway mode (`/openrtb2/auction`): the auction rules and the external bidders. See
/// `docs/life-of-a-gateway-auction.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewaySection {
    /// Serve `POST /openrtb2/auction[/{exchange}]`.
    pub enabled: bool,
    /// `first_price` or `second_price`.
    pub auction: String,
    /// Added to the second price, as decimal text in the answer currency (second price only).
    pub increment: String,
    /// Deal bids rank above open-market bids.
    pub deals_first: bool,
    /// The answer's currency when the request allows it (rates from `[currency]`).
    pub currency: String,
    /// Kept free before the deadline for the auction and the answer, in milliseconds.
    pub response_margin_ms: u64,
    /// Registry name under which our own line items bid (empty: they do not).
    pub internal_bidder: String,
    /// Bearer token of the registry API `/gateway/bidders` (empty: not served; at least 16
    /// characters).
    pub admin_token: String,
    /// The largest answer read from a bidder, in bytes.
    pub max_response_bytes: u64,
    /// How long a call may go on after its auction stopped waiting (its answer is then counted
    /// as late and ignored, and its connection kept), in milliseconds.
    pub late_grace_ms: u64,
    /// Time allowed for a forwarded win or loss notice, in milliseconds.
    pub notice_timeout_ms: u64,
    /// A bidder whose health score (0–1000) falls below this is throttled to one probe per
    /// `health_probe_interval_ms`.
    pub health_throttle_below: u32,
    pub health_probe_interval_ms: u64,
    /// The external bidders, `[gateway.bidders.NAME]`.
    pub bidders: BTreeMap<String, GatewayBidderSection>,
}

impl Default for GatewaySection {
    fn default() -> Self {
        GatewaySection {
            enabled: false,
            auction: "first_price".into(),
            increment: "0.01".into(),
            deals_first: true,
            currency: "USD".into(),
            response_margin_ms: 5,
            internal_bidder: "marquee".into(),
            admin_token: String::new(),
            max_response_bytes: 262_144,
            late_grace_ms: 1_000,
            notice_timeout_ms: 2_000,
            health_throttle_below: 500,
            health_probe_interval_ms: 100,
            bidders: BTreeMap::new(),
        }
    }
}

/// One external bidder of the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayBidderSection {
    /// `http://host[:port]/path`.
    pub endpoint: String,
    /// `2.5` or `2.6`.
    pub openrtb: String,
    /// HTTP/2 without TLS (h2c) instead of HTTP/1.1.
    pub http2: bool,
    /// Per cent of the remaining time this bidder may take.
    pub timeout_percent: u32,
    pub max_in_flight: u64,
    /// Idle kept-alive connections.
    pub pool_size: u64,
    pub gzip: bool,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// Media types of the imps it takes (`banner`, `video`, `audio`, `native`); empty: all.
    pub media: Vec<String>,
    /// Exchanges whose requests it gets (`""` for `/openrtb2/auction`); empty: all.
    pub exchanges: Vec<String>,
    /// Its bids count at this many thousandths of their price.
    pub price_permille: u32,
    pub enabled: bool,
    /// Hosts its win and loss notices may go to besides the endpoint's: `win.example.com`,
    /// `10.0.0.9`, `[fd00::9]`, or `*.example.net` for any subdomain of `example.net`.
    pub notice_hosts: Vec<String>,
}

impl Default for GatewayBidderSection {
    fn default() -> Self {
        GatewayBidderSection {
            endpoint: String::new(),
            openrtb: "2.6".into(),
            http2: false,
            timeout_percent: 100,
            max_in_flight: 64,
            pool_size: 16,
            gzip: false,
            headers: BTreeMap::new(),
            media: Vec::new(),
            exchanges: Vec::new(),
            price_permille: 1_000,
            enabled: true,
            notice_hosts: Vec::new(),
        }
    }
}

impl GatewaySection {
    fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.auction.as_str(), "first_price" | "second_price") {
            return Err(ConfigError::OutOfRange {
                key: "gateway.auction",
                message: format!(
                    "is {:?}; it must be `first_price` or `second_price`",
                    self.auction
                ),
            });
        }
        if !is_currency(&self.currency) {
            return Err(ConfigError::OutOfRange {
                key: "gateway.currency",
                message: format!(
                    "is {:?}; it must be three upper-case letters",
                    self.currency
                ),
            });
        }
        in_range(
            "gateway.response_margin_ms",
            self.response_margin_ms,
            0,
            1_000,
        )?;
        in_range(
            "gateway.max_response_bytes",
            self.max_response_bytes,
            1_024,
            16_777_216,
        )?;
        in_range("gateway.late_grace_ms", self.late_grace_ms, 0, 60_000)?;
        in_range(
            "gateway.notice_timeout_ms",
            self.notice_timeout_ms,
            10,
            60_000,
        )?;
        in_range(
            "gateway.health_throttle_below",
            u64::from(self.health_throttle_below),
            0,
            1_000,
        )?;
        in_range(
            "gateway.health_probe_interval_ms",
            self.health_probe_interval_ms,
            10,
            3_600_000,
        )?;
        if !self.admin_token.is_empty() && self.admin_token.len() < 16 {
            return Err(ConfigError::OutOfRange {
                key: "gateway.admin_token",
                message: "must be at least 16 characters (or empty to not serve the registry API)"
                    .into(),
            });
        }
        if !self.internal_bidder.is_empty() && !is_exchange_name(&self.internal_bidder) {
            return Err(ConfigError::OutOfRange {
                key: "gateway.internal_bidder",
                message: "must be 1 to 64 letters, digits, `-` or `_` (or empty)".into(),
            });
        }
        for (name, bidder) in &self.bidders {
            let bad = |key: &str, message: String| {
                Err(ConfigError::Invalid(format!(
                    "`gateway.bidders.{name}.{key}` {message}"
                )))
            };
            if !is_exchange_name(name) || *name == self.internal_bidder {
                return Err(ConfigError::Invalid(format!(
                    "`gateway.bidders`: name {name:?} must be 1 to 64 letters, digits, `-` or \
                     `_`, and not the internal bidder's"
                )));
            }
            let rest = bidder.endpoint.strip_prefix("http://").unwrap_or("");
            if rest.is_empty() || rest.starts_with('/') {
                return bad(
                    "endpoint",
                    format!(
                        "is {:?}; it must be an http:// URL with a host (TLS ends in front)",
                        bidder.endpoint
                    ),
                );
            }
            if !matches!(bidder.openrtb.as_str(), "2.5" | "2.6") {
                return bad(
                    "openrtb",
                    format!("is {:?}; it must be \"2.5\" or \"2.6\"", bidder.openrtb),
                );
            }
            let ranges = [
                ("timeout_percent", u64::from(bidder.timeout_percent), 1, 100),
                ("max_in_flight", bidder.max_in_flight, 1, 1_000_000),
                ("pool_size", bidder.pool_size, 0, 10_000),
                (
                    "price_permille",
                    u64::from(bidder.price_permille),
                    1,
                    10_000,
                ),
            ];
            for (key, value, min, max) in ranges {
                if !(min..=max).contains(&value) {
                    return bad(
                        key,
                        format!("is {value}; it must be between {min} and {max}"),
                    );
                }
            }
            if let Some(media) = bidder
                .media
                .iter()
                .find(|m| !matches!(m.as_str(), "banner" | "video" | "audio" | "native"))
            {
                return bad(
                    "media",
                    format!("has {media:?}; each must be banner, video, audio or native"),
                );
            }
            if let Some((entry, problem)) = bidder
                .notice_hosts
                .iter()
                .find_map(|entry| notice_host_problem(entry).map(|problem| (entry, problem)))
            {
                return bad("notice_hosts", format!("has {entry:?}: {problem}"));
            }
        }
        Ok(())
    }
}

/// Exchange rates for floors and bids in other currencies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrencySection {
    /// The currency the rates are against.
    pub base: String,
    /// Units of each currency one unit of `base` buys, as decimal text: `{ EUR = "0.92" }`
    /// (codes in any case).
    pub rates: BTreeMap<String, String>,
}

fn is_currency(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

/// What is wrong with a `notice_hosts` entry, if anything: it must be a bare host (a domain
/// name, an IPv4 address, an IPv6 address in brackets) as the URL parser reads hosts, or `*.`
/// and a domain name; no other `*`. The gateway reads entries with the same parser.
fn notice_host_problem(entry: &str) -> Option<String> {
    let (wildcard, host) = match entry.strip_prefix("*.") {
        Some(domain) => (true, domain),
        None => (false, entry),
    };
    if host.contains('*') {
        return Some("`*` is allowed only as a leading `*.` followed by a domain name".into());
    }
    match url::Host::parse(host) {
        Err(error) => Some(format!(
            "it is not a host name or IP address ({error}); give a bare host: no scheme, port \
             or path, an IPv6 address in brackets"
        )),
        Ok(url::Host::Domain(_)) => None,
        Ok(_) if wildcard => Some("`*.` must be followed by a domain name, not an address".into()),
        Ok(_) => None,
    }
}

/// An exchange's name: letters, digits, `-`, `_` (it is a path segment).
fn is_exchange_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregationSection {
    /// Time between aggregation runs, in milliseconds.
    pub interval_ms: u64,
    /// The most event log data one run reads (MiB); a run that reaches it is followed at once.
    pub max_run_mb: u64,
    /// Events older than this (hours) when the manager reads them are dropped, counted.
    pub max_event_age_hours: u64,
    /// How far edge clocks may be ahead of or behind the manager's (seconds).
    pub max_clock_skew_secs: u64,
    /// How long per-minute rows are kept (days); hour and day rows are kept.
    pub minute_retention_days: u64,
    /// Whether edges delete segments once the manager has counted them.
    pub delete_consumed: bool,
    /// Remote edges to collect from, each `NAME=URL` (`edge-2=http://10.0.0.7:8080`). The
    /// name keys the stored checkpoints: keep it stable.
    pub edges: Vec<String>,
    /// Shared secret: an edge serves its log at `/log/…` only with it set, and only to callers
    /// sending it; the manager sends it to the edges above. Empty: not served.
    pub token: String,
    /// The most disk an edge's event log may use (MiB) while the manager is away; past it the
    /// oldest closed segments are deleted, and their events lost.
    pub log_disk_limit_mb: u64,
}

/// Pacing rounds on the manager, budget leases, and the edge's sync with the manager.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacingSection {
    /// Time between controller rounds (ms); a round also runs as a budget period ends.
    pub interval_ms: u64,
    /// Ceiling of the bid multiplier, per mille (1000 turns bid pacing off).
    pub max_bid_permille: u32,
    /// Throttle of a line item with no measurements yet, per million (a small goal on a busy
    /// site must not burn its first minutes).
    pub initial_throttle_ppm: u32,
    /// How often an edge renews each lease (ms); a slice is sized to last this long.
    pub lease_renew_ms: u64,
    /// How long a grant is good for at the edge (ms); at least `lease_renew_ms`.
    pub lease_duration_ms: u64,
    /// How long after expiry the manager reclaims a silent edge's lease (ms): above the worst
    /// clock skew.
    pub lease_grace_ms: u64,
    /// Billing in flight the manager holds budget back for (ms of the edges' rate).
    pub in_flight_allowance_ms: u64,
    /// How often an edge syncs with the manager (ms): renewals and controls.
    pub sync_interval_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportsSection {
    /// The most rows one report may answer; a larger one is refused with advice to narrow it.
    pub max_rows: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeSection {
    /// Base URL under which browsers reach the edge (for tags and tracking URLs); empty means
    /// `http://` plus the listen address.
    pub public_url: String,
    /// Whether the edge may set a first-party user id cookie (only with consent).
    pub cookies: bool,
    /// A request header carrying the client's country code, set by a CDN in front; empty for
    /// none.
    pub country_header: String,
    /// Proxies (addresses or CIDR networks) whose `X-Forwarded-For` / `Forwarded` client
    /// address the edge believes: the load balancer or CDN in front of it. Empty: the socket's
    /// peer is the client.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// What to answer when no ad may serve: `empty`, or a passback URL (`https://…`).
    pub fallback: String,
    /// How long tracking links stay valid, in seconds (60 to 3600).
    pub token_lifetime_secs: u32,
    /// Ad requests in progress at once; beyond it a request gets the fallback at once instead
    /// of waiting. 0 switches shedding off.
    pub max_in_flight: u64,
    /// Past this wait (milliseconds) between a request being ready and a worker starting it,
    /// or three quarters of the request's deadline when that is longer (`deadline_ms` for ad
    /// requests, `tmax` less the latency margin for bids), a share of requests get the fallback
    /// (or a 204) at once. 0 switches this signal off.
    pub max_queue_delay_ms: u64,
    /// How long an ad request may take, in milliseconds; work past it is abandoned with the
    /// fallback.
    pub deadline_ms: u64,
    /// How long a client may take to send a request's headers, in milliseconds.
    pub header_read_timeout_ms: u64,
    /// How long after its head a request body to the manager's routes must be all there, in
    /// milliseconds, however steadily it trickles in.
    pub body_timeout_ms: u64,
    /// The largest request head (request line and headers) accepted, in bytes; beyond it, 431.
    pub max_header_bytes: u64,
    /// `marquee edge`: the manager's URL (`http://10.0.0.5:8080`); `--manager` wins over it.
    pub manager_url: String,
    /// `marquee edge`: this edge's id, under which the manager stores its log checkpoints;
    /// empty: one is made on first start and kept in the data directory.
    pub id: String,
    /// `marquee edge`: where the manager reads this edge's log (`/log/…`); empty: `http://`
    /// plus the listen address.
    pub log_url: String,
    /// `marquee edge`: how often it asks the manager for a newer snapshot (ms).
    pub poll_interval_ms: u64,
    /// How often an edge sends its heartbeat to the manager (ms); the manager lists an edge
    /// silent for 5 s as not live.
    pub heartbeat_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsSection {
    /// `group`: fsync every `group_commit_ms`; `strict`: impressions, clicks and conversions are
    /// durable before the response is sent.
    pub durability: DurabilityMode,
    pub group_commit_ms: u64,
    /// Segment files roll at this size (MiB) or age (seconds).
    pub segment_max_mb: u64,
    pub segment_max_age_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurabilityMode {
    Group,
    Strict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackingSection {
    /// Keys that sign and verify tracking links, each `ID:hex:…` or `ID:base64:…` (ID 0–255,
    /// at least 32 bytes). Empty: a key is generated on first start and kept in the data
    /// directory.
    pub keys: Vec<String>,
    /// The id of the key that signs; the others only verify (rotation).
    pub signing_key: u8,
    /// How many new tokens of one kind (impression, click, conversion; the bidder's win,
    /// billing, loss) expiring in the same minute each replay guard of an edge remembers.
    /// Beyond it the guard forgets some early (`marquee_tracking_replay_overflows_total`) and
    /// repeats of those count again on the edge (the manager still dedupes them). Memory: at
    /// most this × 61 ids of 10–20 bytes per kind, used only as traffic fills it.
    pub replay_capacity_per_minute: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotConfig {
    /// How often the manager checks the change counter and recompiles if it moved.
    pub compile_interval_ms: u64,
    /// How many published snapshot files to keep.
    pub keep: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// A tracing filter: `info`, `debug`, `marquee_store=debug,info`, …
    pub level: String,
    pub format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            database: DatabaseSection::default(),
            demo: false,
            snapshot: SnapshotConfig {
                compile_interval_ms: 1_000,
                keep: 3,
            },
            log: LogConfig {
                level: "info".into(),
                format: LogFormat::Text,
            },
            edge: EdgeSection {
                public_url: String::new(),
                cookies: true,
                country_header: String::new(),
                trusted_proxies: Vec::new(),
                fallback: "empty".into(),
                token_lifetime_secs: 3_600,
                max_in_flight: 1_024,
                max_queue_delay_ms: 10,
                deadline_ms: 50,
                header_read_timeout_ms: 10_000,
                body_timeout_ms: 10_000,
                max_header_bytes: 16_384,
                manager_url: String::new(),
                id: String::new(),
                log_url: String::new(),
                poll_interval_ms: 250,
                heartbeat_ms: 1_000,
            },
            events: EventsSection {
                durability: DurabilityMode::Group,
                group_commit_ms: 5,
                segment_max_mb: 64,
                segment_max_age_secs: 60,
            },
            tracking: TrackingSection {
                keys: Vec::new(),
                signing_key: 1,
                replay_capacity_per_minute: 262_144,
            },
            aggregation: AggregationSection {
                interval_ms: 1_000,
                max_run_mb: 64,
                max_event_age_hours: 24,
                max_clock_skew_secs: 300,
                minute_retention_days: 7,
                delete_consumed: true,
                edges: Vec::new(),
                token: String::new(),
                log_disk_limit_mb: 10_240,
            },
            reports: ReportsSection { max_rows: 100_000 },
            pacing: PacingSection {
                interval_ms: 10_000,
                max_bid_permille: 1_200,
                initial_throttle_ppm: 50_000,
                lease_renew_ms: 5_000,
                lease_duration_ms: 15_000,
                lease_grace_ms: 5_000,
                in_flight_allowance_ms: 10_000,
                sync_interval_ms: 1_000,
            },
            bidder: BidderSection {
                seat: "marquee".into(),
                currency: "USD".into(),
                price_encryption_key: String::new(),
                price_integrity_key: String::new(),
                latency_margin_ms: 10,
                default_tmax_ms: 100,
                max_body_bytes: 65_536,
                log_bids_per_mille: 1_000,
                no_bid_reason: false,
                sync_url: String::new(),
                filters_invalid_traffic: false,
            },
            exchanges: BTreeMap::new(),
            currency: CurrencySection {
                base: "USD".into(),
                rates: BTreeMap::new(),
            },
            gateway: GatewaySection::default(),
            redis: RedisSection {
                url: String::new(),
                timeout_ms: 10,
                cache_entries: 100_000,
                flush_interval_ms: 100,
                flush_timeout_ms: 1_000,
                queue_limit: 100_000,
                failures_to_open: 5,
                open_ms: 1_000,
            },
            metrics: MetricsSection::default(),
            dashboard: DashboardSection::default(),
            traffic: TrafficSection::default(),
            geo: GeoSection::default(),
        }
    }
}

/// Values given on the command line; they win over file and environment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demo: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseSection>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("invalid configuration: `{key}` {message}")]
    OutOfRange { key: &'static str, message: String },
}

/// Environment variable prefix.
pub const ENV_PREFIX: &str = "MARQUEE_";

/// Top-level keys; a `MARQUEE_*` variable naming anything else is left alone.
const SECTIONS: [&str; 21] = [
    "listen",
    "data_dir",
    "database",
    "demo",
    "snapshot",
    "log",
    "edge",
    "events",
    "tracking",
    "aggregation",
    "reports",
    "pacing",
    "bidder",
    "exchanges",
    "currency",
    "redis",
    "gateway",
    "metrics",
    "dashboard",
    "traffic",
    "geo",
];

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

    fn extract(figment: Figment, overrides: &Overrides) -> Result<Config, ConfigError> {
        let config: Config = figment
            .merge(
                Env::prefixed(ENV_PREFIX)
                    .split("__")
                    // Other tools' `MARQUEE_*` variables (MARQUEE_BIN in scripts) are not ours.
                    .filter(|key| {
                        let key = key.as_str().to_ascii_lowercase();
                        let section = key.split('.').next().unwrap_or("");
                        let section = section.split("__").next().unwrap_or("");
                        SECTIONS.contains(&section)
                    }),
            )
            .merge(Serialized::defaults(overrides))
            .extract()
            .map_err(|e| ConfigError::Invalid(describe(e)))?;
        config.validate()?;
        Ok(config)
    }

    /// The database `database.url` selects (checked at load).
    pub fn database(&self) -> Database {
        let url = self.database.url.as_str();
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Database::Postgres(url.to_owned());
        }
        match url.strip_prefix("sqlite:").unwrap_or(url) {
            "" => Database::Sqlite(self.default_sqlite_path()),
            path => Database::Sqlite(PathBuf::from(path)),
        }
    }

    /// Where the SQLite database is when `database.url` is empty.
    pub fn default_sqlite_path(&self) -> PathBuf {
        self.data_dir.join("marquee.db")
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.database.validate()?;
        self.traffic.validate()?;
        self.geo.validate()?;
        self.edge.validate_proxies()?;
        in_range(
            "snapshot.compile_interval_ms",
            self.snapshot.compile_interval_ms,
            10,
            60_000,
        )?;
        in_range("snapshot.keep", self.snapshot.keep as u64, 1, 100)?;
        in_range(
            "edge.token_lifetime_secs",
            u64::from(self.edge.token_lifetime_secs),
            60,
            3_600,
        )?;
        in_range("edge.max_in_flight", self.edge.max_in_flight, 0, 1_000_000)?;
        in_range("edge.deadline_ms", self.edge.deadline_ms, 1, 10_000)?;
        in_range(
            "edge.max_queue_delay_ms",
            self.edge.max_queue_delay_ms,
            0,
            10_000,
        )?;
        in_range(
            "edge.header_read_timeout_ms",
            self.edge.header_read_timeout_ms,
            100,
            300_000,
        )?;
        in_range(
            "edge.body_timeout_ms",
            self.edge.body_timeout_ms,
            100,
            300_000,
        )?;
        in_range(
            "edge.max_header_bytes",
            self.edge.max_header_bytes,
            8_192,
            1_048_576,
        )?;
        in_range(
            "edge.poll_interval_ms",
            self.edge.poll_interval_ms,
            20,
            60_000,
        )?;
        in_range("edge.heartbeat_ms", self.edge.heartbeat_ms, 100, 2_000)?;
        for (key, url) in [
            ("edge.manager_url", &self.edge.manager_url),
            ("edge.log_url", &self.edge.log_url),
        ] {
            if !url.is_empty() && url.strip_prefix("http://").is_none_or(str::is_empty) {
                return Err(ConfigError::OutOfRange {
                    key,
                    message: format!("is {url:?}; it must be an http:// URL or empty"),
                });
            }
        }
        // The edge writes this URL as it is into HTML attributes (quoted with `'`), JSON strings
        // and redirects: a character that would need escaping there is refused here.
        let public_url = &self.edge.public_url;
        let unsafe_char = |c: char| c.is_whitespace() || c.is_control() || "\"'<>\\`".contains(c);
        let has_scheme = ["http://", "https://"].iter().any(|scheme| {
            public_url
                .strip_prefix(scheme)
                .is_some_and(|rest| !rest.is_empty())
        });
        if !public_url.is_empty() && (!has_scheme || public_url.contains(unsafe_char)) {
            return Err(ConfigError::OutOfRange {
                key: "edge.public_url",
                message: format!(
                    "is {public_url:?}; it must be an http:// or https:// URL without spaces, \
                     quotes, `<`, `>`, `\\` or backticks, or empty"
                ),
            });
        }
        in_range(
            "events.group_commit_ms",
            self.events.group_commit_ms,
            1,
            1_000,
        )?;
        in_range(
            "tracking.replay_capacity_per_minute",
            self.tracking.replay_capacity_per_minute,
            1_024,
            100_000_000,
        )?;
        in_range(
            "events.segment_max_mb",
            self.events.segment_max_mb,
            1,
            4_096,
        )?;
        in_range(
            "events.segment_max_age_secs",
            self.events.segment_max_age_secs,
            1,
            86_400,
        )?;
        self.aggregation.validate()?;
        in_range("reports.max_rows", self.reports.max_rows, 1, 10_000_000)?;
        self.pacing.validate()?;
        self.gateway.validate()?;
        self.redis.validate()?;
        self.metrics.validate()?;
        self.bidder.validate("bidder")?;
        for (name, exchange) in &self.exchanges {
            if !is_exchange_name(name) {
                return Err(ConfigError::OutOfRange {
                    key: "exchanges",
                    message: format!("name {name:?} must be 1 to 64 letters, digits, `-` or `_`"),
                });
            }
            self.bidder
                .for_exchange(exchange)
                .validate(&format!("exchanges.{name}"))?;
        }
        // Rate keys are taken in any case: environment variables reach them lower-cased.
        for (key, code) in std::iter::once(("currency.base", self.currency.base.clone())).chain(
            self.currency
                .rates
                .keys()
                .map(|c| ("currency.rates", c.to_ascii_uppercase())),
        ) {
            if !is_currency(&code) {
                return Err(ConfigError::OutOfRange {
                    key,
                    message: format!("currency {code:?} must be three upper-case letters"),
                });
            }
        }
        let fallback = self.edge.fallback.as_str();
        if fallback != "empty"
            && !(fallback.starts_with("https://") || fallback.starts_with("http://"))
        {
            return Err(ConfigError::OutOfRange {
                key: "edge.fallback",
                message: format!("is {fallback:?}; it must be `empty` or an http(s) URL"),
            });
        }
        for (key, empty) in [
            ("log.level", self.log.level.trim().is_empty()),
            ("data_dir", self.data_dir.as_os_str().is_empty()),
        ] {
            if empty {
                return Err(ConfigError::OutOfRange {
                    key,
                    message: "must not be empty".into(),
                });
            }
        }
        Ok(())
    }
}

impl PacingSection {
    fn validate(&self) -> Result<(), ConfigError> {
        in_range("pacing.interval_ms", self.interval_ms, 100, 600_000)?;
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
        in_range("pacing.lease_renew_ms", self.lease_renew_ms, 100, 600_000)?;
        in_range(
            "pacing.lease_duration_ms",
            self.lease_duration_ms,
            self.lease_renew_ms,
            3_600_000,
        )?;
        in_range("pacing.lease_grace_ms", self.lease_grace_ms, 0, 600_000)?;
        in_range(
            "pacing.in_flight_allowance_ms",
            self.in_flight_allowance_ms,
            0,
            600_000,
        )?;
        in_range("pacing.sync_interval_ms", self.sync_interval_ms, 50, 60_000)
    }
}

impl AggregationSection {
    fn validate(&self) -> Result<(), ConfigError> {
        in_range("aggregation.interval_ms", self.interval_ms, 10, 60_000)?;
        in_range("aggregation.max_run_mb", self.max_run_mb, 1, 1_024)?;
        in_range(
            "aggregation.max_event_age_hours",
            self.max_event_age_hours,
            1,
            24 * 366,
        )?;
        in_range(
            "aggregation.max_clock_skew_secs",
            self.max_clock_skew_secs,
            0,
            3_600,
        )?;
        in_range(
            "aggregation.minute_retention_days",
            self.minute_retention_days,
            1,
            3_660,
        )?;
        in_range(
            "aggregation.log_disk_limit_mb",
            self.log_disk_limit_mb,
            1,
            100_000_000,
        )?;
        if !self.token.is_empty() && self.token.len() < 16 {
            return Err(ConfigError::OutOfRange {
                key: "aggregation.token",
                message: "must be at least 16 characters (or empty to not serve the log)".into(),
            });
        }
        if !self.edges.is_empty() && self.token.is_empty() {
            return Err(ConfigError::OutOfRange {
                key: "aggregation.token",
                message: "must be set to collect from `aggregation.edges`".into(),
            });
        }
        let mut names = Vec::new();
        for entry in &self.edges {
            let (name, _) = parse_edge(entry).ok_or_else(|| ConfigError::OutOfRange {
                key: "aggregation.edges",
                message: format!(
                    "entry {entry:?} is not NAME=URL with NAME of letters, digits, `-`, `_`, `.` \
                     (not `local`) and an http:// URL"
                ),
            })?;
            if names.contains(&name) {
                return Err(ConfigError::OutOfRange {
                    key: "aggregation.edges",
                    message: format!("edge name {name:?} appears twice"),
                });
            }
            names.push(name);
        }
        Ok(())
    }

    /// The remote edges as `(name, url)`; entries were checked at load.
    pub fn remote_edges(&self) -> Vec<(&str, &str)> {
        self.edges.iter().filter_map(|e| parse_edge(e)).collect()
    }
}

/// `NAME=URL`: a name other than `local` (the in-process edge's) and an http URL.
fn parse_edge(entry: &str) -> Option<(&str, &str)> {
    let (name, url) = entry.split_once('=')?;
    let name_ok = !name.is_empty()
        && name != "local"
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    (name_ok && url.starts_with("http://") && url.len() > "http://".len()).then_some((name, url))
}

fn in_range(key: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    Err(ConfigError::OutOfRange {
        key,
        message: format!("is {value}; it must be between {min} and {max}"),
    })
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
// figment's Jail closures must return figment's own (large) error type.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;
    use figment::Jail;

    fn load_in(jail: &Jail, toml: &str) -> Result<Config, ConfigError> {
        jail.create_file("marquee.toml", toml)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Config::load(Some(Path::new("marquee.toml")), &Overrides::default())
    }

    #[test]
    fn defaults_need_no_file() {
        Jail::expect_with(|_| {
            let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config, Config::default());
            Ok(())
        });
    }

    #[test]
    fn dashboard_cookies_follow_the_dashboard_s_origin_not_the_edges() {
        Jail::expect_with(|jail| {
            let https_edges = "[edge]\npublic_url = \"https://ads.example.com\"\n";
            let http_edges = "[edge]\npublic_url = \"http://ads.example.com\"\n";
            let config = |jail: &Jail, toml: &str| load_in(jail, toml).map_err(|e| e.to_string());
            // `marquee serve`: one origin, the edge's.
            let serve = |c: &Config| c.dashboard.secure_cookies(Some(&c.edge.public_url));
            assert!(serve(&config(jail, https_edges)?));
            assert!(!serve(&config(jail, http_edges)?));
            // `marquee manager`: the setting, whatever the edges' URL; on when unset.
            let manager = |c: &Config| c.dashboard.secure_cookies(None);
            let plain = "[dashboard]\nsecure_cookies = false\n";
            assert!(!manager(&config(jail, &format!("{https_edges}{plain}"))?));
            let tls = "[dashboard]\nsecure_cookies = true\n";
            assert!(manager(&config(jail, &format!("{http_edges}{tls}"))?));
            assert!(manager(&config(jail, http_edges)?));
            // Set, it wins in `marquee serve` too.
            assert!(!serve(&config(jail, &format!("{https_edges}{plain}"))?));
            jail.set_env("MARQUEE_DASHBOARD__SECURE_COOKIES", "false");
            assert!(!manager(&config(jail, "")?));
            Ok(())
        });
    }

    #[test]
    fn text_loads_like_a_file_and_bad_text_is_named() {
        Jail::expect_with(|_| {
            let config = Config::from_toml("[snapshot]\nkeep = 7\n").map_err(|e| e.to_string())?;
            assert_eq!(config.snapshot.keep, 7);
            let error = Config::from_toml("[snapshot]\nkeep = \"seven\"\n")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains("keep"), "{error}");
            Ok(())
        });
    }

    #[test]
    fn the_replay_capacity_is_set_by_file_or_environment_and_checked() {
        Jail::expect_with(|jail| {
            let config = |jail: &Jail, toml: &str| load_in(jail, toml).map_err(|e| e.to_string());
            assert_eq!(
                config(jail, "")?.tracking.replay_capacity_per_minute,
                262_144
            );
            let toml = "[tracking]\nreplay_capacity_per_minute = 8000000\n";
            assert_eq!(
                config(jail, toml)?.tracking.replay_capacity_per_minute,
                8_000_000
            );
            jail.set_env("MARQUEE_TRACKING__REPLAY_CAPACITY_PER_MINUTE", "1000");
            let error = config(jail, "").err().unwrap_or_default();
            assert!(
                error.contains("`tracking.replay_capacity_per_minute` is 1000; it must be between"),
                "{error}"
            );
            Ok(())
        });
    }

    #[test]
    fn geo_databases_are_set_by_file_or_environment_and_the_interval_checked() {
        Jail::expect_with(|jail| {
            let config = |jail: &Jail, toml: &str| load_in(jail, toml).map_err(|e| e.to_string());
            assert_eq!(config(jail, "")?.geo, GeoSection::default());
            let toml = "[geo]\ndatabase = \"/srv/GeoLite2-City.mmdb\"\n";
            let geo = config(jail, toml)?.geo;
            assert_eq!(geo.database, Some(PathBuf::from("/srv/GeoLite2-City.mmdb")));
            assert_eq!(geo.asn_database, None);
            jail.set_env("MARQUEE_GEO__ASN_DATABASE", "/srv/asn.mmdb");
            jail.set_env("MARQUEE_GEO__RELOAD_INTERVAL_SECS", "0");
            let error = config(jail, toml).err().unwrap_or_default();
            assert!(
                error.contains("`geo.reload_interval_secs` is 0; it must be between"),
                "{error}"
            );
            jail.set_env("MARQUEE_GEO__RELOAD_INTERVAL_SECS", "30");
            let geo = config(jail, toml)?.geo;
            assert_eq!(geo.asn_database, Some(PathBuf::from("/srv/asn.mmdb")));
            assert_eq!(geo.reload_interval_secs, 30);
            Ok(())
        });
    }

    #[test]
    fn file_then_environment_then_flags() {
        Jail::expect_with(|jail| {
            jail.create_file(
                "marquee.toml",
                "listen = \"127.0.0.1:9000\"\ndata_dir = \"/tmp/a\"\n[snapshot]\nkeep = 7\n",
            )?;
            jail.set_env("MARQUEE_DATA_DIR", "/tmp/b");
            jail.set_env("MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS", "250");
            let overrides = Overrides {
                demo: Some(true),
                ..Overrides::default()
            };
            let config = Config::load(Some(Path::new("marquee.toml")), &overrides)
                .map_err(|e| e.to_string())?;
            assert_eq!(config.listen.port(), 9000);
            assert_eq!(config.data_dir, PathBuf::from("/tmp/b"));
            assert_eq!(config.snapshot.keep, 7);
            assert_eq!(config.snapshot.compile_interval_ms, 250);
            assert!(config.demo);
            Ok(())
        });
    }

    #[test]
    fn database_url_selects_the_store() {
        Jail::expect_with(|jail| {
            let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(
                config.database(),
                Database::Sqlite(PathBuf::from("./data/marquee.db"))
            );
            let config = load_in(jail, "[database]\nurl = \"sqlite:/srv/m.db\"")
                .map_err(|e| e.to_string())?;
            assert_eq!(
                config.database(),
                Database::Sqlite(PathBuf::from("/srv/m.db"))
            );
            jail.set_env("MARQUEE_DATABASE__URL", "postgres://m:pw@db:5432/marquee");
            let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
            let database = config.database();
            assert_eq!(
                database,
                Database::Postgres("postgres://m:pw@db:5432/marquee".into())
            );
            assert_eq!(database.describe(), "postgres://m:***@db:5432/marquee");
            let flag = Overrides {
                database: Some(DatabaseSection {
                    url: "postgresql://db/other".into(),
                }),
                ..Overrides::default()
            };
            let config = Config::load(None, &flag).map_err(|e| e.to_string())?;
            assert_eq!(
                config.database(),
                Database::Postgres("postgresql://db/other".into())
            );
            Ok(())
        });
    }

    #[test]
    fn passwords_are_hidden_from_descriptions() {
        for (url, shown) in [
            ("postgres://u:p@h/d", "postgres://u:***@h/d"),
            ("postgres://u@h/d", "postgres://u@h/d"),
            ("postgres://h:5432/d", "postgres://h:5432/d"),
            ("postgres://u:p:q@h:1/d?x=@", "postgres://u:***@h:1/d?x=@"),
        ] {
            assert_eq!(without_password(url), shown);
        }
        let database = Database::Postgres("postgres://u@h/d?sslmode=require&password=s3".into());
        assert_eq!(
            database.describe(),
            "postgres://u@h/d?sslmode=require&password=***"
        );
    }

    #[test]
    fn errors_name_the_key() {
        Jail::expect_with(|jail| {
            let cases = [
                ("listen = \"nowhere\"", "listen"),
                ("[snapshot]\nkeep = \"many\"", "snapshot.keep"),
                ("[snapshot]\nkeep = 0", "snapshot.keep"),
                (
                    "[snapshot]\ncompile_interval_ms = 1",
                    "snapshot.compile_interval_ms",
                ),
                ("[log]\nformat = \"xml\"", "log.format"),
                ("colour = \"blue\"", "colour"),
                ("[edge]\nfallback = \"ftp://x\"", "edge.fallback"),
                (
                    "[edge]\ntoken_lifetime_secs = 5",
                    "edge.token_lifetime_secs",
                ),
                ("[edge]\nmax_in_flight = 2000000", "edge.max_in_flight"),
                ("[edge]\nmax_in_flight = -1", "edge.max_in_flight"),
                ("[edge]\ndeadline_ms = 0", "edge.deadline_ms"),
                (
                    "[edge]\nheader_read_timeout_ms = 5",
                    "edge.header_read_timeout_ms",
                ),
                ("[edge]\nbody_timeout_ms = 5", "edge.body_timeout_ms"),
                ("[edge]\nmax_header_bytes = 1024", "edge.max_header_bytes"),
                ("[edge]\npoll_interval_ms = 0", "edge.poll_interval_ms"),
                ("[edge]\nheartbeat_ms = 5000", "edge.heartbeat_ms"),
                ("[edge]\nmanager_url = \"ftp://m\"", "edge.manager_url"),
                (
                    "[edge]\npublic_url = \"ads.example.com\"",
                    "edge.public_url",
                ),
                ("[edge]\npublic_url = \"https://\"", "edge.public_url"),
                (
                    "[edge]\npublic_url = \"https://ads.example.com/a'b\"",
                    "edge.public_url",
                ),
                (
                    "[edge]\npublic_url = \"https://ads.example.com/a b\"",
                    "edge.public_url",
                ),
                ("[edge]\nlog_url = \"10.0.0.1:8080\"", "edge.log_url"),
                ("[database]\nurl = \"mysql://db/m\"", "database.url"),
                ("[database]\nurl = \"postgres://\"", "database.url"),
                ("[database]\nurl = \"sqlite:\"", "database.url"),
                ("[redis]\nurl = \"http://cache:6379\"", "redis.url"),
                ("[redis]\ntimeout_ms = 0", "redis.timeout_ms"),
                ("[redis]\nflush_timeout_ms = 0", "redis.flush_timeout_ms"),
                ("[redis]\nopen_ms = 1", "redis.open_ms"),
                ("[redis]\nurl = \"http://cache:6379\"", "redis.url"),
                ("[redis]\ntimeout_ms = 0", "redis.timeout_ms"),
                ("[redis]\nopen_ms = 1", "redis.open_ms"),
                ("[events]\ndurability = \"sometimes\"", "events.durability"),
                ("[events]\ngroup_commit_ms = 0", "events.group_commit_ms"),
                ("[events]\nsegment_max_mb = 0", "events.segment_max_mb"),
                ("[tracking]\nsigning_key = 300", "tracking.signing_key"),
                (
                    "[tracking]\nreplay_capacity_per_minute = 100",
                    "tracking.replay_capacity_per_minute",
                ),
                (
                    "[tracking]\nreplay_capacity_per_minute = 200000000",
                    "tracking.replay_capacity_per_minute",
                ),
                ("[aggregation]\ninterval_ms = 0", "aggregation.interval_ms"),
                ("[aggregation]\nmax_run_mb = 0", "aggregation.max_run_mb"),
                (
                    "[aggregation]\nminute_retention_days = 0",
                    "aggregation.minute_retention_days",
                ),
                ("[aggregation]\ntoken = \"short\"", "aggregation.token"),
                (
                    "[aggregation]\nedges = [\"e1=http://10.0.0.1:8080\"]",
                    "aggregation.token",
                ),
                (
                    "[aggregation]\ntoken = \"0123456789abcdef\"\nedges = [\"local=http://x\"]",
                    "aggregation.edges",
                ),
                (
                    "[aggregation]\ntoken = \"0123456789abcdef\"\nedges = [\"e1=ftp://x\"]",
                    "aggregation.edges",
                ),
                (
                    "[aggregation]\ntoken = \"0123456789abcdef\"\nedges = [\"e1=http://a\", \"e1=http://b\"]",
                    "aggregation.edges",
                ),
                ("[reports]\nmax_rows = 0", "reports.max_rows"),
                ("[pacing]\ninterval_ms = 0", "pacing.interval_ms"),
                (
                    "[pacing]\nlease_renew_ms = 5000\nlease_duration_ms = 1000",
                    "pacing.lease_duration_ms",
                ),
                ("[pacing]\nsync_interval_ms = 0", "pacing.sync_interval_ms"),
                ("[bidder]\nseat = \"\"", "bidder.seat"),
                ("[bidder]\ncurrency = \"usd\"", "bidder.currency"),
                ("[bidder]\ndefault_tmax_ms = 1", "bidder.default_tmax_ms"),
                (
                    "[bidder]\nprice_encryption_key = \"AAAA\"",
                    "bidder.price_integrity_key",
                ),
                (
                    "[exchanges.x1]\nlog_bids_per_mille = 1001",
                    "exchanges.x1.log_bids_per_mille",
                ),
                (
                    "[exchanges.x1]\nsync_url = \"ftp://x\"",
                    "exchanges.x1.sync_url",
                ),
                ("[exchanges.\"a b\"]\nseat = \"s\"", "exchanges"),
                ("[currency]\nrates = { EURO = \"0.9\" }", "currency.rates"),
                ("[gateway]\nauction = \"vickrey\"", "gateway.auction"),
                ("[gateway]\nadmin_token = \"short\"", "gateway.admin_token"),
                (
                    "[gateway.bidders.b1]\nendpoint = \"https://b.test\"",
                    "gateway.bidders.b1.endpoint",
                ),
                (
                    "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\nopenrtb = \"3.0\"",
                    "gateway.bidders.b1.openrtb",
                ),
                (
                    "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\nmedia = [\"radio\"]",
                    "gateway.bidders.b1.media",
                ),
                (
                    "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\ntimeout_percent = 0",
                    "gateway.bidders.b1.timeout_percent",
                ),
                (
                    "[gateway.bidders.marquee]\nendpoint = \"http://b.test\"",
                    "gateway.bidders",
                ),
                (
                    "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\n\
                     notice_hosts = [\"win.test:8080\"]",
                    "gateway.bidders.b1.notice_hosts",
                ),
            ];
            for (toml, key) in cases {
                let error = load_in(jail, toml).expect_err(toml).to_string();
                assert!(error.contains(key), "{toml:?} gave {error:?}");
            }
            // Variables of other tools that share the prefix are ignored.
            jail.set_env("MARQUEE_BIN", "/usr/bin/marquee");
            assert!(Config::load(None, &Overrides::default()).is_ok());
            jail.set_env("MARQUEE_LISTEN", "not-an-address");
            let error = Config::load(None, &Overrides::default())
                .expect_err("bad env")
                .to_string();
            assert!(
                error.contains("listen") && error.contains("MARQUEE_"),
                "{error}"
            );
            Ok(())
        });
    }

    #[test]
    fn gateway_notice_hosts_are_bare_hosts_or_a_leading_wildcard() {
        Jail::expect_with(|jail| {
            let config = load_in(
                jail,
                "[gateway.bidders.b1]\nendpoint = \"http://10.0.0.7/bid\"\n\
                 notice_hosts = [\"win.example.com\", \"*.example.net\", \"10.0.0.9\", \"[fd00::9]\"]",
            )
            .map_err(|e| e.to_string())?;
            assert_eq!(
                config.gateway.bidders["b1"].notice_hosts,
                ["win.example.com", "*.example.net", "10.0.0.9", "[fd00::9]"]
            );
            assert_eq!(
                GatewayBidderSection::default().notice_hosts,
                Vec::<String>::new(),
                "the endpoint's host only"
            );
            for (entry, says) in [
                ("http://win.example.com", "not a host name"),
                ("win.example.com:8080", "not a host name"),
                ("win.example.com/path", "not a host name"),
                ("", "not a host name"),
                ("::1", "IPv6 address in brackets"),
                ("*", "leading `*.`"),
                ("win.*.example.com", "leading `*.`"),
                ("*example.com", "leading `*.`"),
                ("*.10.0.0.1", "not an address"),
            ] {
                let toml = format!(
                    "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\n\
                     notice_hosts = [\"ok.test\", {entry:?}]"
                );
                let error = load_in(jail, &toml).expect_err(&toml).to_string();
                assert!(
                    error.contains("`gateway.bidders.b1.notice_hosts`")
                        && error.contains(&format!("{entry:?}"))
                        && error.contains(says),
                    "{entry:?} gave {error:?}"
                );
            }
            Ok(())
        });
    }

    #[test]
    fn exchanges_take_what_they_leave_out_from_the_bidder() {
        Jail::expect_with(|jail| {
            jail.set_env("MARQUEE_EXCHANGES__ADX__SEAT", "s2");
            jail.set_env("MARQUEE_CURRENCY__RATES__EUR", "\"0.92\"");
            let config = load_in(
                jail,
                "[bidder]\nseat = \"s1\"\nlatency_margin_ms = 15\n\
                 [exchanges.adx]\nno_bid_reason = true\n",
            )
            .map_err(|e| e.to_string())?;
            let adx = config.bidder.for_exchange(&config.exchanges["adx"]);
            assert_eq!(adx.seat, "s2");
            assert!(adx.no_bid_reason);
            assert_eq!(adx.latency_margin_ms, 15, "from [bidder]");
            assert_eq!(adx.currency, "USD", "the default");
            assert_eq!(
                config.currency.rates["eur"], "0.92",
                "as the environment names it"
            );
            Ok(())
        });
    }

    #[test]
    fn remote_edges_are_named_urls() {
        Jail::expect_with(|jail| {
            let config = load_in(
                jail,
                "[aggregation]\ntoken = \"0123456789abcdef\"\n\
                 edges = [\"edge-2=http://10.0.0.7:8080\", \"b.3=http://h\"]\n",
            )
            .map_err(|e| e.to_string())?;
            assert_eq!(
                config.aggregation.remote_edges(),
                vec![("edge-2", "http://10.0.0.7:8080"), ("b.3", "http://h")]
            );
            Ok(())
        });
    }

    #[test]
    fn a_metrics_token_is_long_printable_and_set_or_absent() {
        Jail::expect_with(|jail| {
            let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.metrics.token, None);
            let config = load_in(jail, "[metrics]\ntoken = \"0123456789abcdef\"")
                .map_err(|e| e.to_string())?;
            assert_eq!(config.metrics.token.as_deref(), Some("0123456789abcdef"));
            assert!(!format!("{config:?}").contains("0123456789abcdef"));
            for (toml, says) in [
                ("token = \"\"", "is empty"),
                ("token = \"0123456789abcde\"", "at least 16"),
                ("token = \"0123456789 abcdef\"", "without spaces"),
                ("token = \"0123456789abcdef\\n\"", "without spaces"),
                ("token = \"0123456789abcdéf\"", "printable ASCII"),
            ] {
                let error = load_in(jail, &format!("[metrics]\n{toml}"))
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                assert!(error.contains("`metrics.token`"), "{toml}: {error}");
                assert!(error.contains(says), "{toml}: {error}");
                assert!(!error.contains("0123456789"), "{toml} echoed: {error}");
            }
            // From the environment too, over the file.
            jail.set_env("MARQUEE_METRICS__TOKEN", "from-the-environment");
            let config = load_in(jail, "[metrics]\ntoken = \"0123456789abcdef\"")
                .map_err(|e| e.to_string())?;
            assert_eq!(
                config.metrics.token.as_deref(),
                Some("from-the-environment")
            );
            // Digits only are a number to the environment's parser: refused without echoing
            // them (or dropping a leading zero); quoted, they are text.
            jail.set_env("MARQUEE_METRICS__TOKEN", "0123456789012345678");
            let error = Config::load(None, &Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                error.contains("`metrics.token`") && error.contains("quote it"),
                "{error}"
            );
            assert!(!error.contains("123456789"), "echoed: {error}");
            jail.set_env("MARQUEE_METRICS__TOKEN", "\"0123456789012345678\"");
            let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.metrics.token.as_deref(), Some("0123456789012345678"));
            jail.set_env("MARQUEE_METRICS__TOKEN", "short");
            let error = Config::load(None, &Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains("`metrics.token`"), "{error}");
            Ok(())
        });
    }

    #[test]
    fn a_named_file_must_exist() {
        let error = Config::load(
            Some(Path::new("/nonexistent/marquee.toml")),
            &Overrides::default(),
        );
        assert!(matches!(error, Err(ConfigError::MissingFile(_))));
    }
}
