//! The bidder's settings: one [`Exchange`] per bid endpoint, and what they share.

use std::time::{Duration, Instant};

use marquee_model::{Currency, CurrencyRates};
use marquee_openrtb::PriceCrypto;

/// One exchange's settings (`[exchanges.NAME]` over `[bidder]`; the unnamed endpoint uses
/// `[bidder]` alone).
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The path segment of `/openrtb2/bid/{name}`; empty for `/openrtb2/bid`.
    pub name: String,
    /// Our seat (`seatbid.seat`, checked against `wseat`/`bseat`).
    pub seat: String,
    /// The currency we bid in when the request allows it.
    pub currency: Currency,
    /// Keys for encrypted `${AUCTION_PRICE}` values.
    pub crypto: Option<PriceCrypto>,
    /// Taken off `tmax` for the network to and from the exchange.
    pub latency_margin: Duration,
    /// The time allowed when a request has no `tmax`.
    pub default_tmax: Duration,
    /// The largest body accepted (as sent, and after gzip).
    pub max_body_bytes: usize,
    /// Answer a no-bid with `{"id":…,"nbr":…}` (200) instead of an empty 204.
    pub no_bid_reason: bool,
    /// Where `/sync/out` sends the browser; `{uid}` becomes our user id.
    pub sync_url: Option<String>,
    /// The exchange filters invalid traffic itself: its requests skip our crawler and
    /// data-centre screen.
    pub filters_invalid_traffic: bool,
}

/// The longest `tmax` honoured. Exchanges allow a second or so; a request asking for more is
/// answered within this, so that no request holds a worker for minutes.
const MAX_TMAX: Duration = Duration::from_secs(10);

impl Exchange {
    /// When work on a request that arrived at `started` stops: its `tmax` (milliseconds, at
    /// most [`MAX_TMAX`]) or this exchange's default, less the latency margin.
    pub(crate) fn deadline(&self, started: Instant, tmax: Option<u32>) -> Instant {
        let tmax = tmax.map_or(self.default_tmax, |ms| {
            Duration::from_millis(u64::from(ms)).min(MAX_TMAX)
        });
        started + tmax.saturating_sub(self.latency_margin)
    }
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange {
            name: String::new(),
            seat: "marquee".into(),
            currency: Currency::USD,
            crypto: None,
            latency_margin: Duration::from_millis(10),
            default_tmax: Duration::from_millis(100),
            max_body_bytes: 64 * 1024,
            no_bid_reason: false,
            sync_url: None,
            filters_invalid_traffic: false,
        }
    }
}

/// The bidder's settings.
#[derive(Debug, Clone)]
pub struct BidderConfig {
    /// `/openrtb2/bid`'s settings.
    pub default: Exchange,
    /// Named exchanges, for `/openrtb2/bid/{name}`.
    pub exchanges: Vec<Exchange>,
    /// Rates for floors and bids in other currencies.
    pub rates: CurrencyRates,
    /// How many user matches the edge keeps in memory.
    pub sync_capacity: usize,
}

impl Default for BidderConfig {
    fn default() -> Self {
        BidderConfig {
            default: Exchange::default(),
            exchanges: Vec::new(),
            rates: CurrencyRates::new(Currency::USD),
            sync_capacity: 1_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_honours_tmax_up_to_ten_seconds() {
        let exchange = Exchange::default();
        let started = Instant::now();
        let margin = exchange.latency_margin;
        assert_eq!(
            exchange.deadline(started, None),
            started + exchange.default_tmax - margin
        );
        assert_eq!(
            exchange.deadline(started, Some(250)),
            started + Duration::from_millis(250) - margin
        );
        assert_eq!(
            exchange.deadline(started, Some(u32::MAX)),
            started + MAX_TMAX - margin
        );
        assert_eq!(exchange.deadline(started, Some(0)), started);
    }
}
