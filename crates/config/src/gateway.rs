//! `[gateway]` and `[gateway.bidders.NAME]`: gateway mode (`/openrtb2/auction`), the auction
//! rules and the external bidders. See `docs/life-of-a-gateway-auction.md`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{
    BidderUrl, CurrencyCode, Name, Token, empty_is_none, in_range, is_name, millis,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewaySection {
    /// Serve `POST /openrtb2/auction[/{exchange}]`.
    pub enabled: bool,
    pub auction: AuctionKind,
    /// Added to the second price, as decimal text in the answer currency (second price only;
    /// read by the OpenRTB library's decimal parser).
    pub increment: String,
    /// Deal bids rank above open-market bids.
    pub deals_first: bool,
    /// The answer's currency when the request allows it (rates from `[currency]`).
    pub currency: CurrencyCode,
    /// Kept free before the deadline for the auction and the answer.
    #[serde(rename = "response_margin_ms", with = "millis")]
    pub response_margin: Duration,
    /// Registry name under which our own line items bid (empty: they do not).
    #[serde(with = "empty_is_none")]
    pub internal_bidder: Option<Name>,
    /// Bearer token of the registry API `/gateway/bidders` (empty: not served).
    #[serde(with = "empty_is_none")]
    pub admin_token: Option<Token>,
    /// The largest answer read from a bidder, in bytes.
    pub max_response_bytes: u64,
    /// How long a call may go on after its auction stopped waiting (its answer is then counted
    /// as late and ignored, and its connection kept).
    #[serde(rename = "late_grace_ms", with = "millis")]
    pub late_grace: Duration,
    /// Time allowed for a forwarded win or loss notice.
    #[serde(rename = "notice_timeout_ms", with = "millis")]
    pub notice_timeout: Duration,
    /// A bidder whose health score (0–1000) falls below this is throttled to one probe per
    /// `health_probe_interval_ms`.
    pub health_throttle_below: u32,
    #[serde(rename = "health_probe_interval_ms", with = "millis")]
    pub health_probe_interval: Duration,
    /// A PEM file of CA certificates trusted for `https://` bidders and notice URLs besides
    /// the platform's roots (a private CA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca_file: Option<PathBuf>,
    /// The external bidders, `[gateway.bidders.NAME]`.
    pub bidders: BTreeMap<String, GatewayBidderSection>,
}

impl Default for GatewaySection {
    fn default() -> Self {
        GatewaySection {
            enabled: false,
            auction: AuctionKind::FirstPrice,
            increment: "0.01".into(),
            deals_first: true,
            currency: CurrencyCode::USD,
            response_margin: Duration::from_millis(5),
            internal_bidder: Some(Name::internal()),
            admin_token: None,
            max_response_bytes: 262_144,
            late_grace: Duration::from_millis(1_000),
            notice_timeout: Duration::from_millis(2_000),
            health_throttle_below: 500,
            health_probe_interval: Duration::from_millis(100),
            tls_ca_file: None,
            bidders: BTreeMap::new(),
        }
    }
}

impl Name {
    /// Our own line items' default registry name.
    fn internal() -> Name {
        Name("marquee".into())
    }
}

/// How the gateway's auction clears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuctionKind {
    FirstPrice,
    /// The winner pays the larger of the next bid of its tier and its floor, plus
    /// `increment`.
    SecondPrice,
}

/// The OpenRTB version a bidder speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OpenRtbVersion {
    #[serde(rename = "2.5")]
    V25,
    #[default]
    #[serde(rename = "2.6")]
    V26,
}

/// A media type of imps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaType {
    Banner,
    Video,
    Audio,
    Native,
}

/// One external bidder of the gateway. Every key but `endpoint` has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayBidderSection {
    /// `http://host[:port]/path` or `https://…`.
    pub endpoint: BidderUrl,
    #[serde(default)]
    pub openrtb: OpenRtbVersion,
    /// HTTP/2 without TLS (h2c) instead of HTTP/1.1, for an `http://` endpoint (over `https://`
    /// the version is negotiated).
    #[serde(default)]
    pub http2: bool,
    /// Per cent of the remaining time this bidder may take.
    #[serde(default = "bidder_defaults::timeout_percent")]
    pub timeout_percent: u32,
    #[serde(default = "bidder_defaults::max_in_flight")]
    pub max_in_flight: u64,
    /// Idle kept-alive connections.
    #[serde(default = "bidder_defaults::pool_size")]
    pub pool_size: u64,
    #[serde(default)]
    pub gzip: bool,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Media types of the imps it takes; empty: all.
    #[serde(default)]
    pub media: Vec<MediaType>,
    /// Exchanges whose requests it gets (`""` for `/openrtb2/auction`); empty: all.
    #[serde(default)]
    pub exchanges: Vec<String>,
    /// Its bids count at this many thousandths of their price.
    #[serde(default = "bidder_defaults::price_permille")]
    pub price_permille: u32,
    #[serde(default = "bidder_defaults::enabled")]
    pub enabled: bool,
    /// Hosts its win and loss notices may go to besides the endpoint's: `win.example.com`,
    /// `10.0.0.9`, `[fd00::9]`, or `*.example.net` for any subdomain of `example.net`.
    #[serde(default)]
    pub notice_hosts: Vec<NoticeHost>,
}

/// The defaults of a gateway bidder's keys that are not their type's.
mod bidder_defaults {
    pub(super) fn timeout_percent() -> u32 {
        100
    }
    pub(super) fn max_in_flight() -> u64 {
        64
    }
    pub(super) fn pool_size() -> u64 {
        16
    }
    pub(super) fn price_permille() -> u32 {
        1_000
    }
    pub(super) fn enabled() -> bool {
        true
    }
}

impl GatewayBidderSection {
    /// A bidder at `endpoint` with every other key at its default.
    pub fn new(endpoint: BidderUrl) -> GatewayBidderSection {
        GatewayBidderSection {
            endpoint,
            openrtb: OpenRtbVersion::default(),
            http2: false,
            timeout_percent: bidder_defaults::timeout_percent(),
            max_in_flight: bidder_defaults::max_in_flight(),
            pool_size: bidder_defaults::pool_size(),
            gzip: false,
            headers: BTreeMap::new(),
            media: Vec::new(),
            exchanges: Vec::new(),
            price_permille: bidder_defaults::price_permille(),
            enabled: bidder_defaults::enabled(),
            notice_hosts: Vec::new(),
        }
    }
}

/// A host a bidder's notices may go to: a bare host, or `*.` and a domain name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NoticeHost(String);

impl NoticeHost {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NoticeHost {
    type Error = String;
    fn try_from(entry: String) -> Result<Self, String> {
        match notice_host_problem(&entry) {
            Some(problem) => Err(format!("has {entry:?}: {problem}")),
            None => Ok(NoticeHost(entry)),
        }
    }
}

impl From<NoticeHost> for String {
    fn from(host: NoticeHost) -> String {
        host.0
    }
}

impl GatewaySection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let ms = millis::count;
        in_range(
            "gateway.response_margin_ms",
            ms(&self.response_margin),
            0,
            1_000,
        )?;
        in_range(
            "gateway.max_response_bytes",
            self.max_response_bytes,
            1_024,
            16_777_216,
        )?;
        in_range("gateway.late_grace_ms", ms(&self.late_grace), 0, 60_000)?;
        in_range(
            "gateway.notice_timeout_ms",
            ms(&self.notice_timeout),
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
            ms(&self.health_probe_interval),
            10,
            3_600_000,
        )?;
        for (name, bidder) in &self.bidders {
            let internal = self.internal_bidder.as_ref().map(Name::as_str);
            if !is_name(name) || internal == Some(name.as_str()) {
                return Err(ConfigError::value(
                    "gateway.bidders",
                    format!(
                        "name {name:?} must be 1 to 64 letters, digits, `-` or `_`, and not the \
                         internal bidder's"
                    ),
                ));
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
                in_range(&format!("gateway.bidders.{name}.{key}"), value, min, max)?;
            }
        }
        Ok(())
    }
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
