//! `[bidder]` and `[exchanges.NAME]`: the OpenRTB bidder, `/openrtb2/bid` and each exchange's
//! `/openrtb2/bid/NAME`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::value::{CurrencyCode, WebUrl, empty_is_none, in_range, millis, optional_millis};

/// The bidder's settings, and the defaults of every exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BidderSection {
    /// Our seat id (`seatbid.seat`, matched against `wseat`/`bseat`).
    pub seat: String,
    /// The currency we bid in when the request allows it (`cur`).
    pub currency: CurrencyCode,
    /// Price decryption keys for `${AUCTION_PRICE}`, base64, both or neither (none: prices
    /// come plain); decoded by the OpenRTB library. See [`BidderSection::price_keys`].
    #[serde(default, with = "empty_is_none")]
    pub price_encryption_key: Option<String>,
    #[serde(default, with = "empty_is_none")]
    pub price_integrity_key: Option<String>,
    /// Taken off `tmax` for the network between the exchange and us.
    #[serde(rename = "latency_margin_ms", with = "millis")]
    pub latency_margin: Duration,
    /// The time to answer when a request has no `tmax`.
    #[serde(rename = "default_tmax_ms", with = "millis")]
    pub default_tmax: Duration,
    /// The largest bid request body accepted, in bytes (sent and after gzip).
    pub max_body_bytes: u64,
    /// No longer changes anything: every bid is counted in the event log (counter records cost
    /// little, so there is nothing to save by sampling). Accepted so configuration files that
    /// set it still load; a set value is warned about at startup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bids_per_mille: Option<u32>,
    /// Answer a no-bid with a JSON body carrying `nbr` instead of an empty 204.
    pub no_bid_reason: bool,
    /// The exchange's user sync URL `/sync/out` redirects to; `{uid}` is replaced by our user
    /// id. Empty: no outgoing sync.
    #[serde(default, with = "empty_is_none")]
    pub sync_url: Option<WebUrl>,
    /// The exchange filters invalid traffic itself: its requests skip the bidder's crawler and
    /// data-centre screen (otherwise answered no-bid with `nbr` 3 or 5).
    #[serde(default)]
    pub filters_invalid_traffic: bool,
}

impl Default for BidderSection {
    fn default() -> Self {
        BidderSection {
            seat: "marquee".into(),
            currency: CurrencyCode::USD,
            price_encryption_key: None,
            price_integrity_key: None,
            latency_margin: Duration::from_millis(10),
            default_tmax: Duration::from_millis(100),
            max_body_bytes: 65_536,
            log_bids_per_mille: None,
            no_bid_reason: false,
            sync_url: None,
            filters_invalid_traffic: false,
        }
    }
}

/// One exchange's settings; each one left out is `[bidder]`'s. A key that may be empty in
/// `[bidder]` is `Some(None)` here when the exchange sets it empty (none for that exchange).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<CurrencyCode>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "empty_is_none::overridden"
    )]
    pub price_encryption_key: Option<Option<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "empty_is_none::overridden"
    )]
    pub price_integrity_key: Option<Option<String>>,
    #[serde(
        default,
        rename = "latency_margin_ms",
        skip_serializing_if = "Option::is_none",
        with = "optional_millis"
    )]
    pub latency_margin: Option<Duration>,
    #[serde(
        default,
        rename = "default_tmax_ms",
        skip_serializing_if = "Option::is_none",
        with = "optional_millis"
    )]
    pub default_tmax: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// No longer changes anything, as [`BidderSection::log_bids_per_mille`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bids_per_mille: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_bid_reason: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "empty_is_none::overridden"
    )]
    pub sync_url: Option<Option<WebUrl>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters_invalid_traffic: Option<bool>,
}

/// An exchange's price decryption keys, base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceKeys<'a> {
    pub encryption: &'a str,
    pub integrity: &'a str,
}

impl BidderSection {
    /// An exchange's settings: its own where given, `[bidder]`'s otherwise.
    pub fn for_exchange(&self, exchange: &ExchangeSection) -> BidderSection {
        fn pick<T: Clone>(own: &Option<T>, default: &T) -> T {
            own.as_ref().unwrap_or(default).clone()
        }
        BidderSection {
            seat: pick(&exchange.seat, &self.seat),
            currency: pick(&exchange.currency, &self.currency),
            price_encryption_key: pick(&exchange.price_encryption_key, &self.price_encryption_key),
            price_integrity_key: pick(&exchange.price_integrity_key, &self.price_integrity_key),
            latency_margin: pick(&exchange.latency_margin, &self.latency_margin),
            default_tmax: pick(&exchange.default_tmax, &self.default_tmax),
            max_body_bytes: pick(&exchange.max_body_bytes, &self.max_body_bytes),
            log_bids_per_mille: exchange.log_bids_per_mille.or(self.log_bids_per_mille),
            no_bid_reason: pick(&exchange.no_bid_reason, &self.no_bid_reason),
            sync_url: pick(&exchange.sync_url, &self.sync_url),
            filters_invalid_traffic: pick(
                &exchange.filters_invalid_traffic,
                &self.filters_invalid_traffic,
            ),
        }
    }

    /// The price decryption keys, when set (the load checked they come both or neither).
    pub fn price_keys(&self) -> Option<PriceKeys<'_>> {
        let keys = self
            .price_encryption_key
            .as_deref()
            .zip(self.price_integrity_key.as_deref());
        keys.map(|(encryption, integrity)| PriceKeys {
            encryption,
            integrity,
        })
    }

    /// The largest bid request body, as a size in memory.
    pub fn max_body_bytes(&self) -> usize {
        usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX)
    }

    /// Checks the section `prefix` (`bidder` or `exchanges.NAME`), with an exchange's keys
    /// already over `[bidder]`'s.
    pub(crate) fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        let key = |name: &str| format!("{prefix}.{name}");
        if self.seat.is_empty() {
            return Err(ConfigError::value(&key("seat"), "must not be empty".into()));
        }
        if self.price_encryption_key.is_some() != self.price_integrity_key.is_some() {
            return Err(ConfigError::value(
                &key("price_integrity_key"),
                "and price_encryption_key must be given together".into(),
            ));
        }
        in_range(
            &key("latency_margin_ms"),
            millis::count(&self.latency_margin),
            0,
            1_000,
        )?;
        in_range(
            &key("default_tmax_ms"),
            millis::count(&self.default_tmax),
            10,
            10_000,
        )?;
        in_range(
            &key("max_body_bytes"),
            self.max_body_bytes,
            1_024,
            16_777_216,
        )
    }
}
