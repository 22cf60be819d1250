//! A bid request screened before anything is decided: our seat allowed, the device not invalid
//! traffic, the blocked categories in our taxonomy, a currency we can bid in.

use std::net::IpAddr;

use marquee_model::{Currency, CurrencyRates};
use marquee_openrtb::{BidRequest, Device};

use super::config::Exchange;
use super::no_bid::no_bid_code;
use crate::Edge;

/// The currency to bid in, or the no-bid reason of a request the bidder does not decide.
pub(super) fn screen(
    edge: &Edge,
    exchange: &Exchange,
    request: &BidRequest<'_>,
    preferred: Currency,
) -> Result<Currency, u64> {
    if !request.allows_seat(&exchange.seat) {
        return Err(no_bid_code::SEAT_EXCLUDED);
    }
    if !exchange.filters_invalid_traffic
        && let Some(reason) = invalid_device(edge, request)
    {
        return Err(reason);
    }
    // Our categories are IAB 1.0 (the API's rule), the default taxonomy of `cattax`.
    if !request.bcat.is_empty() && !request.bcat_taxonomy_is(None) {
        return Err(no_bid_code::CATEGORY_TAXONOMY);
    }
    bid_currency(preferred, request, &edge.bidder.config.rates).ok_or(no_bid_code::CURRENCY)
}

/// The device's address, v4 or else v6.
#[inline]
pub(super) fn device_ip(device: &Device<'_>) -> Option<IpAddr> {
    device
        .ip
        .as_deref()
        .or(device.ipv6.as_deref())
        .and_then(|ip| ip.parse().ok())
}

/// The no-bid reason of a request whose device is a known crawler or in a data centre, if it
/// is (general invalid traffic: see `quality.rs`).
fn invalid_device(edge: &Edge, request: &BidRequest<'_>) -> Option<u64> {
    let device = request.device.as_ref()?;
    let user_agent = device.ua.as_deref().unwrap_or("").as_bytes();
    match edge.quality.screen_bid(user_agent, device_ip(device))? {
        marquee_eventlog::InvalidReason::Datacenter => Some(no_bid_code::DATA_CENTER),
        _ => Some(no_bid_code::KNOWN_WEB_CRAWLER),
    }
}

/// The currency to bid in: `preferred` when the request allows it, else the first of the
/// request's that the rate table knows.
fn bid_currency(
    preferred: Currency,
    request: &BidRequest<'_>,
    rates: &CurrencyRates,
) -> Option<Currency> {
    if request.allows_currency(preferred.as_str()) {
        return Some(preferred);
    }
    request
        .cur
        .iter()
        .filter_map(|c| Currency::try_from(c.as_ref()).ok())
        .find(|&c| rates.knows(c))
}
