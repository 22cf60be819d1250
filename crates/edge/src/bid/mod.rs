//! The OpenRTB bidder, `POST /openrtb2/bid` and `/openrtb2/bid/{exchange}`: the body read
//! (`body.rs`) → the request screened (`screen.rs`) → its user, targeting and place
//! (`audience.rs`) → every imp decided (`decide.rs`, `imp.rs`) into a bid with its markup and
//! notice URLs (`make_bid.rs`, `markup.rs`) → the response checked (`validate.rs`) → bids and
//! no-bids logged (`log.rs`) → the answer, or a no-bid (`no_bid.rs`). The win, billing and loss
//! notices are in `crate::notice`, user sync in `crate::sync`.
//!
//! A bid request is decided imp by imp with the same engine as ad requests, on the exchange
//! channel: each imp becomes an engine [`Request`](marquee_engine::Request) borrowed from the
//! parsed body, one user and cap context serves every imp. The response is checked with
//! [`marquee_openrtb::validate_response`] before it leaves; a bid that fails is dropped and
//! counted. Spend and frequency caps count on billing notices, never on wins or on the `adm`'s
//! own impression beacon (whose impression is logged with amount 0). See
//! `docs/life-of-a-bid-request.md`.

mod audience;
mod bidder;
mod body;
mod config;
mod counters;
mod decide;
mod imp;
mod log;
mod make_bid;
mod markup;
mod no_bid;
mod screen;
mod validate;

use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Request, Response};
use jiff::Timestamp;
use marquee_model::Currency;

pub use bidder::Bidder;
pub(crate) use body::{BodyFailure, exchange_name, read_bid_body};
pub use config::{BidderConfig, Exchange};
pub use counters::BidCounters;
pub(crate) use counters::register_metrics;
pub(crate) use no_bid::no_bid_body;
pub use no_bid::no_bid_code;

use self::audience::{BidUser, Place, Targeting};
use self::no_bid::{late_bid, no_bid, no_bid_answer};
use crate::http::{self, Body};
use crate::metrics::Outcome;
use crate::{Edge, Loaded};

/// `POST /openrtb2/bid[/{exchange}]`: through the gate (full: 204 at once), the body read
/// within its size limit and the exchange's default `tmax`, then decided.
pub(crate) async fn request(
    edge: &Edge,
    request: Request<Incoming>,
    started: Instant,
) -> (Response<Body>, Outcome) {
    let Some(name) = exchange_name(request.uri().path(), "/openrtb2/bid") else {
        return (http::not_found(), Outcome::ClientError);
    };
    let Some(exchange) = edge.bidder.exchange(name) else {
        return (http::not_found(), Outcome::ClientError);
    };
    let Some(_admitted) = edge.try_admit_bid(exchange) else {
        return no_bid::shed(edge);
    };
    let (body, encoding) = match read_bid_body(exchange, request, started).await {
        Ok(read) => read,
        Err(BodyFailure::Late) => return no_bid::late(edge),
        Err(BodyFailure::Bad(bad)) => return no_bid::bad_request(edge, bad),
    };
    let currency = exchange.currency;
    bid(
        edge,
        exchange,
        currency,
        &body,
        encoding.as_deref(),
        started,
    )
}

/// What every imp of one request shares.
struct Auction<'x> {
    edge: &'x Edge,
    exchange: &'x Exchange,
    loaded: &'x Loaded,
    auction_id: &'x str,
    /// The user's key (`0`: none).
    user: u64,
    test: bool,
    now: Timestamp,
    /// The device type as logged (`0`: unknown).
    device: u8,
}

/// `POST /openrtb2/bid[/{exchange}]` once the body is read: decide every imp, answer the bids
/// that pass validation, or 204. Work still to do at `started` + `tmax` − margin is abandoned
/// with a 204. We bid in `currency` when the request allows it (`exchange.currency`, or in
/// gateway mode the answer's).
pub(crate) fn bid(
    edge: &Edge,
    exchange: &Exchange,
    currency: Currency,
    body: &[u8],
    content_encoding: Option<&str>,
    started: Instant,
) -> (Response<Body>, Outcome) {
    edge.bidder.counters.requests.inc();
    let json = match body::decode(exchange, body, content_encoding) {
        Ok(json) => json,
        Err(bad) => return no_bid::bad_request(edge, bad),
    };
    let request = match body::parse(&json) {
        Ok(request) => request,
        Err(bad) => return no_bid::bad_request(edge, bad),
    };
    for dropped in request.imp.iter().flat_map(|imp| &imp.dropped) {
        edge.bidder.counters.dropped_media(dropped.media);
    }
    let now = edge.now();
    let deadline = exchange.deadline(started, request.tmax);
    if request.test {
        edge.bidder.counters.test_requests.inc();
    }
    let Some(loaded) = edge.holder.current() else {
        let reason = no_bid_code::TECHNICAL_ERROR;
        return no_bid(edge, exchange, &request, reason, now);
    };
    let currency = match screen::screen(edge, exchange, &request, currency) {
        Ok(currency) => currency,
        Err(reason) => return no_bid(edge, exchange, &request, reason, now),
    };
    if Instant::now() >= deadline {
        return late_bid(edge, exchange, &request, now);
    }

    let user = BidUser::of(edge, exchange, &request);
    let targeting = Targeting::of(&request, &user);
    let mut place = Place::of(edge, &request);
    let template = audience::template(&request, &targeting, &mut place, currency, now);
    let auction = Auction {
        edge,
        exchange,
        loaded: &loaded,
        auction_id: &request.id,
        user: user.key(),
        test: request.test,
        now,
        device: template.device.device_type.map_or(0, |d| d as u8 + 1),
    };
    let Some((bids, decisions)) = decide::decide(&auction, &request, &template, deadline) else {
        return late_bid(edge, exchange, &request, now);
    };
    let checked = validate::checked(&auction, &request, &currency, bids, decisions);
    if Instant::now() >= deadline {
        return late_bid(edge, exchange, &request, now);
    }
    log::log_no_bids(&auction, &request, &checked);
    if checked.response.seatbid[0].bid.is_empty() {
        return no_bid_answer(edge, exchange, &request, no_bid_code::NO_MATCH);
    }
    log::log_bids(&auction, &checked);
    let mut json = String::with_capacity(2048);
    checked.response.write_json(&mut json);
    (http::openrtb_answer(json), Outcome::Ok)
}
