//! `[edge]`: the edge that answers ad requests, tracking and bids; in `marquee edge`, also
//! how it follows its manager.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::ConfigError;
use crate::value::{HttpUrl, WebUrl, empty_is_none, in_range, millis, secs};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeSection {
    /// Base URL under which browsers reach the edge (for tags and tracking URLs); empty means
    /// `http://` plus the listen address.
    #[serde(default, with = "empty_is_none")]
    pub public_url: Option<PublicUrl>,
    /// Whether the edge may set a first-party user id cookie (only with consent).
    pub cookies: bool,
    /// A request header carrying the client's country code, set by a CDN in front; empty for
    /// none.
    #[serde(default, with = "empty_is_none")]
    pub country_header: Option<String>,
    /// Proxies (addresses or CIDR networks; an address is a network of one) whose
    /// `X-Forwarded-For` / `Forwarded` client address the edge believes: the load balancer or
    /// CDN in front of it. Empty: the socket's peer is the client.
    #[serde(default, deserialize_with = "networks")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// What to answer when no ad may serve: `empty`, or a passback URL (`https://…`).
    pub fallback: Fallback,
    /// How long tracking links stay valid (60 to 3600 seconds).
    #[serde(rename = "token_lifetime_secs", with = "secs")]
    pub token_lifetime: Duration,
    /// Ad requests in progress at once; beyond it a request gets the fallback at once instead
    /// of waiting. 0 switches shedding off.
    pub max_in_flight: u64,
    /// Past this wait between a request being ready and a worker starting it, or three
    /// quarters of the request's deadline when that is longer (`deadline_ms` for ad requests,
    /// `tmax` less the latency margin for bids), a share of requests get the fallback (or a
    /// 204) at once. Zero switches this signal off.
    #[serde(rename = "max_queue_delay_ms", with = "millis")]
    pub max_queue_delay: Duration,
    /// How long an ad request may take; work past it is abandoned with the fallback.
    #[serde(rename = "deadline_ms", with = "millis")]
    pub deadline: Duration,
    /// How long a client may take to send a request's headers.
    #[serde(rename = "header_read_timeout_ms", with = "millis")]
    pub header_read_timeout: Duration,
    /// How long after its head a request body to the manager's routes must be all there,
    /// however steadily it trickles in.
    #[serde(rename = "body_timeout_ms", with = "millis")]
    pub body_timeout: Duration,
    /// The largest request head (request line and headers) accepted, in bytes; beyond it, 431.
    pub max_header_bytes: u64,
    /// `marquee edge`: the manager's URL (`http://10.0.0.5:8080`); `--manager` wins over it.
    #[serde(default, with = "empty_is_none")]
    pub manager_url: Option<HttpUrl>,
    /// `marquee edge`: this edge's id, under which the manager stores its log checkpoints;
    /// empty: one is made on first start and kept in the data directory.
    #[serde(default, with = "empty_is_none")]
    pub id: Option<String>,
    /// `marquee edge`: where the manager reads this edge's log (`/log/…`); empty: `http://`
    /// plus the listen address.
    #[serde(default, with = "empty_is_none")]
    pub log_url: Option<HttpUrl>,
    /// `marquee edge`: how often it asks the manager for a newer snapshot.
    #[serde(rename = "poll_interval_ms", with = "millis")]
    pub poll_interval: Duration,
    /// How often an edge sends its heartbeat to the manager; the manager lists an edge silent
    /// for 5 s as not live.
    #[serde(rename = "heartbeat_ms", with = "millis")]
    pub heartbeat: Duration,
}

impl Default for EdgeSection {
    fn default() -> Self {
        EdgeSection {
            public_url: None,
            cookies: true,
            country_header: None,
            trusted_proxies: Vec::new(),
            fallback: Fallback::Empty,
            token_lifetime: Duration::from_secs(3_600),
            max_in_flight: 1_024,
            max_queue_delay: Duration::from_millis(10),
            deadline: Duration::from_millis(50),
            header_read_timeout: Duration::from_millis(10_000),
            body_timeout: Duration::from_millis(10_000),
            max_header_bytes: 16_384,
            manager_url: None,
            id: None,
            log_url: None,
            poll_interval: Duration::from_millis(250),
            heartbeat: Duration::from_millis(1_000),
        }
    }
}

impl EdgeSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let ms = millis::count;
        in_range(
            "edge.token_lifetime_secs",
            secs::count(&self.token_lifetime),
            60,
            3_600,
        )?;
        in_range("edge.max_in_flight", self.max_in_flight, 0, 1_000_000)?;
        in_range("edge.deadline_ms", ms(&self.deadline), 1, 10_000)?;
        in_range(
            "edge.max_queue_delay_ms",
            ms(&self.max_queue_delay),
            0,
            10_000,
        )?;
        in_range(
            "edge.header_read_timeout_ms",
            ms(&self.header_read_timeout),
            100,
            300_000,
        )?;
        in_range("edge.body_timeout_ms", ms(&self.body_timeout), 100, 300_000)?;
        in_range(
            "edge.max_header_bytes",
            self.max_header_bytes,
            8_192,
            1_048_576,
        )?;
        in_range("edge.poll_interval_ms", ms(&self.poll_interval), 20, 60_000)?;
        in_range("edge.heartbeat_ms", ms(&self.heartbeat), 100, 2_000)
    }
}

/// What the edge answers when no ad may serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Fallback {
    /// `empty`: an empty answer.
    Empty,
    /// A passback URL the answer sends the slot to.
    Passback(WebUrl),
}

impl TryFrom<String> for Fallback {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        if text == "empty" {
            return Ok(Fallback::Empty);
        }
        WebUrl::try_from(text)
            .map(Fallback::Passback)
            .map_err(|_| "must be `empty` or an http(s) URL".into())
    }
}

impl From<Fallback> for String {
    fn from(fallback: Fallback) -> String {
        match fallback {
            Fallback::Empty => "empty".into(),
            Fallback::Passback(url) => url.into(),
        }
    }
}

/// The edge's public base URL: `http://` or `https://` and a host. The edge writes it as it
/// is into HTML attributes (quoted with `'`), JSON strings and redirects, so a character that
/// would need escaping there is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PublicUrl(String);

impl PublicUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether browsers reach it over TLS.
    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }
}

impl TryFrom<String> for PublicUrl {
    type Error = String;
    fn try_from(url: String) -> Result<Self, String> {
        let unsafe_char = |c: char| c.is_whitespace() || c.is_control() || "\"'<>\\`".contains(c);
        let has_scheme = ["http://", "https://"].iter().any(|scheme| {
            url.strip_prefix(scheme)
                .is_some_and(|rest| !rest.is_empty())
        });
        if !has_scheme || url.contains(unsafe_char) {
            return Err(format!(
                "is {url:?}; it must be an http:// or https:// URL without spaces, quotes, `<`, \
                 `>`, `\\` or backticks, or empty"
            ));
        }
        Ok(PublicUrl(url))
    }
}

impl From<PublicUrl> for String {
    fn from(url: PublicUrl) -> String {
        url.0
    }
}

impl std::fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `trusted_proxies`: each an address or a CIDR network.
fn networks<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<ipnet::IpNet>, D::Error> {
    Vec::<String>::deserialize(deserializer)?
        .iter()
        .enumerate()
        .map(|(i, text)| {
            text.parse::<ipnet::IpNet>()
                .ok()
                .or_else(|| {
                    text.parse::<std::net::IpAddr>()
                        .ok()
                        .map(ipnet::IpNet::from)
                })
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "entry {i} is {text:?}; it must be an address or a CIDR network such \
                         as 10.0.0.0/8"
                    ))
                })
        })
        .collect()
}
