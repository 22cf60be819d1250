//! The gateway's settings: the auction rules and the bidder registry. Plain data, built by the
//! binary from `[gateway]` and `[gateway.bidders.NAME]` (see `docs/configuration.md`).

use std::path::PathBuf;
use std::time::Duration;

use marquee_model::{Currency, CurrencyRates};

/// Which OpenRTB version a bidder speaks. Requests are read as 2.6; a 2.5 bidder gets the
/// fields 2.6 moved out of `ext` put back there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenRtbVersion {
    V25,
    V26,
}

impl OpenRtbVersion {
    /// The `x-openrtb-version` header value.
    pub fn header(self) -> &'static str {
        match self {
            OpenRtbVersion::V25 => "2.5",
            OpenRtbVersion::V26 => "2.6",
        }
    }
}

/// The media types an imp offers, as a bidder filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    Banner,
    Video,
    Audio,
    Native,
}

/// How the clearing price is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuctionKind {
    /// The winner pays its bid.
    FirstPrice,
    /// The winner pays the larger of the next bid of its tier and its floor, plus `increment`
    /// micros, never more than its bid.
    SecondPrice { increment_micros: i64 },
}

/// One external bidder.
#[derive(Debug, Clone)]
pub struct BidderSpec {
    /// Registry name: letters, digits, `-`, `_` (metrics label, API path segment).
    pub name: String,
    /// `https://host[:port]/path`, or `http://…` for a bidder on a private network or behind
    /// a TLS proxy of ours.
    pub endpoint: String,
    pub version: OpenRtbVersion,
    /// Speak HTTP/2 without TLS (h2c, prior knowledge) instead of HTTP/1.1; `http://` only
    /// (over TLS the version is negotiated: HTTP/2 when the bidder offers it).
    pub http2: bool,
    /// Per cent of the time left (after the response margin) this bidder may take, 1–100.
    pub timeout_percent: u32,
    /// Calls in flight at once; when reached the bidder is skipped for the request, never
    /// waited for.
    pub max_in_flight: usize,
    /// Idle kept-alive connections kept per bidder.
    pub pool_size: usize,
    /// Gzip the request body (and accept a gzipped answer).
    pub gzip: bool,
    /// Extra request headers (authentication, routing).
    pub headers: Vec<(String, String)>,
    /// Media types it takes; an imp goes to it when the imp offers one of them. Empty: all.
    pub media: Vec<Media>,
    /// Exchanges (the `{exchange}` of `/openrtb2/auction/{exchange}`, empty for the bare
    /// path) whose requests it gets. Empty: all.
    pub exchanges: Vec<String>,
    /// Its bids count at this many thousandths of their price (1000: as bid; 900: a bidder
    /// known to bill gross is ranked at 90 %).
    pub price_permille: u32,
    /// Taken part in auctions at start (the management API switches it at run time).
    pub enabled: bool,
    /// Hosts its win and loss notices may go to besides the endpoint's own: a host name, an
    /// IPv4 address, an IPv6 address in brackets, or `*.example.net` for any subdomain of
    /// `example.net`. A notice to any other host is refused (see `notice.rs`).
    pub notice_hosts: Vec<String>,
}

impl BidderSpec {
    /// A bidder with the defaults: 2.6, HTTP/1.1, all of the time, 64 in flight, 16 idle
    /// connections, no gzip, every imp and exchange, price as bid, enabled, notices to the
    /// endpoint's host only.
    pub fn new(name: impl Into<String>, endpoint: impl Into<String>) -> BidderSpec {
        BidderSpec {
            name: name.into(),
            endpoint: endpoint.into(),
            version: OpenRtbVersion::V26,
            http2: false,
            timeout_percent: 100,
            max_in_flight: 64,
            pool_size: 16,
            gzip: false,
            headers: Vec::new(),
            media: Vec::new(),
            exchanges: Vec::new(),
            price_permille: 1_000,
            enabled: true,
            notice_hosts: Vec::new(),
        }
    }
}

/// How the health score throttles a failing bidder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthConfig {
    /// Below this score (of 1000) the bidder is throttled.
    pub throttle_below: u32,
    /// While throttled, one call (a probe) per this interval.
    pub probe_interval: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            throttle_below: 500,
            probe_interval: Duration::from_millis(100),
        }
    }
}

/// The gateway's settings.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub auction: AuctionKind,
    /// Deal bids rank above open-market bids (under `private_auction` only deal bids are
    /// valid anyway).
    pub deals_first: bool,
    /// The currency of the answer when the request allows it (else the first of the
    /// request's `cur` the rates know).
    pub currency: Currency,
    pub rates: CurrencyRates,
    /// Kept free before the deadline for running the auction and writing the answer.
    pub response_margin: Duration,
    /// Let our own line items bid (through the edge's bidder), under this registry name.
    pub internal_bidder: Option<String>,
    pub bidders: Vec<BidderSpec>,
    pub health: HealthConfig,
    /// The largest answer read from a bidder.
    pub max_response_bytes: usize,
    /// How long a call may go on after its auction stopped waiting, so that its connection is
    /// kept (an answer in that time is counted as late).
    pub late_grace: Duration,
    /// Time allowed for a forwarded win or loss notice.
    pub notice_timeout: Duration,
    /// A PEM file of CA certificates trusted for `https://` bidders and notices besides the
    /// platform's roots (`tls.rs`).
    pub tls_ca_file: Option<PathBuf>,
    /// Bearer token of the registry's management API on the edge (`/gateway/bidders`);
    /// empty: the API is not served.
    pub admin_token: String,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            auction: AuctionKind::FirstPrice,
            deals_first: true,
            currency: Currency::USD,
            rates: CurrencyRates::new(Currency::USD),
            response_margin: Duration::from_millis(5),
            internal_bidder: None,
            bidders: Vec::new(),
            health: HealthConfig::default(),
            max_response_bytes: 256 * 1024,
            late_grace: Duration::from_secs(1),
            notice_timeout: Duration::from_secs(2),
            tls_ca_file: None,
            admin_token: String::new(),
        }
    }
}
