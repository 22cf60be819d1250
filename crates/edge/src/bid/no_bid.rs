//! Bid requests answered without a bid: the no-bid reasons, the `204` (or `nbr` body), and the
//! answers of requests that were shed, late or malformed.

use std::borrow::Cow;

use hyper::{Response, StatusCode};
use jiff::Timestamp;
use marquee_eventlog::{Event, EventKind};
use marquee_openrtb::{BidRequest, BidResponse, NoBidReason};

use super::body::BadRequest;
use super::config::Exchange;
use crate::http::{self, Body};
use crate::metrics::Outcome;
use crate::{Edge, events, worker};

/// Codes in the `creative` field of no-bid events: OpenRTB's no-bid reasons where one fits,
/// Marquee's own from 500 (the range OpenRTB leaves to others) where none does.
pub mod no_bid_code {
    /// No snapshot loaded yet.
    pub const TECHNICAL_ERROR: u64 = 1;
    /// The device's user agent is a known crawler's.
    pub const KNOWN_WEB_CRAWLER: u64 = 3;
    /// The device's address is in a data-centre or hosting network.
    pub const DATA_CENTER: u64 = 5;
    /// `tmax` left no time, or the deadline passed while deciding.
    pub const INSUFFICIENT_TIME: u64 = 15;
    /// No line item could bid on the imp.
    pub const NO_MATCH: u64 = 500;
    /// `wseat`/`bseat` exclude our seat.
    pub const SEAT_EXCLUDED: u64 = 501;
    /// None of the request's currencies is ours or in the rate table.
    pub const CURRENCY: u64 = 502;
    /// The bid failed the response validation and was dropped.
    pub const INVALID_BID: u64 = 503;
    /// `bcat` is in another taxonomy than our categories' (IAB 1.0, `cattax` 1): none of our
    /// creatives can be shown to be allowed.
    pub const CATEGORY_TAXONOMY: u64 = 504;
}

/// A malformed bid request: 400 with a short reason, counted by label.
pub(super) fn bad_request(edge: &Edge, bad: BadRequest) -> (Response<Body>, Outcome) {
    edge.bidder.counters.bad_request(bad.label);
    (
        http::text(bad.status, bad.reason + "\n"),
        Outcome::ClientError,
    )
}

/// A bid request not started because `max_in_flight` are in progress: 204 at once.
pub(super) fn shed(edge: &Edge) -> (Response<Body>, Outcome) {
    edge.bidder.counters.requests.inc();
    edge.bidder.counters.shed.inc();
    (http::no_content(), Outcome::Shed)
}

/// A bid request whose body did not arrive before its deadline.
pub(super) fn late(edge: &Edge) -> (Response<Body>, Outcome) {
    edge.bidder.counters.requests.inc();
    edge.bidder.counters.late.inc();
    (http::no_content(), Outcome::Late)
}

/// A bid request whose deadline passed once its body was read: a no-bid for lack of time.
pub(super) fn late_bid(
    edge: &Edge,
    exchange: &Exchange,
    request: &BidRequest<'_>,
    now: Timestamp,
) -> (Response<Body>, Outcome) {
    edge.bidder.counters.late.inc();
    let (answer, _) = no_bid(edge, exchange, request, no_bid_code::INSUFFICIENT_TIME, now);
    (answer, Outcome::Late)
}

/// No bid for the whole request: every imp counted in the log as a no-bid with `reason`, then
/// the answer.
pub(super) fn no_bid(
    edge: &Edge,
    exchange: &Exchange,
    request: &BidRequest<'_>,
    reason: u64,
    now: Timestamp,
) -> (Response<Body>, Outcome) {
    if !request.test {
        for _ in &request.imp {
            let id = worker::random_u64();
            events::count(
                edge,
                Event {
                    event_id: u128::from(id),
                    ..events::bidder(EventKind::NoBid, now, 0, reason, 0)
                },
            );
        }
    }
    no_bid_answer(edge, exchange, request, reason)
}

/// The no-bid answer: 204, or a body with `nbr` where the exchange asks for one.
pub(super) fn no_bid_answer(
    edge: &Edge,
    exchange: &Exchange,
    request: &BidRequest<'_>,
    reason: u64,
) -> (Response<Body>, Outcome) {
    edge.bidder.counters.no_bids.inc();
    let nbr = match reason {
        no_bid_code::TECHNICAL_ERROR => NoBidReason::TECHNICAL_ERROR,
        no_bid_code::INSUFFICIENT_TIME => NoBidReason::INSUFFICIENT_AUCTION_TIME,
        no_bid_code::KNOWN_WEB_CRAWLER => NoBidReason::KNOWN_WEB_CRAWLER,
        no_bid_code::DATA_CENTER => NoBidReason::CLOUD_DATA_CENTER_OR_PROXY_IP,
        _ => NoBidReason::UNKNOWN_ERROR,
    };
    let answer = no_bid_body(exchange, Cow::Borrowed(request.id.as_ref()), nbr);
    (answer, Outcome::Fallback)
}

/// A no-bid as `exchange` wants it: an empty 204, or a 200 with `{"id":…,"nbr":…}`.
pub(crate) fn no_bid_body(
    exchange: &Exchange,
    request_id: Cow<'_, str>,
    nbr: NoBidReason,
) -> Response<Body> {
    if !exchange.no_bid_reason {
        return http::no_content();
    }
    let json = BidResponse::no_bid(request_id, nbr).to_json();
    http::response(StatusCode::OK, "application/json", json)
}
