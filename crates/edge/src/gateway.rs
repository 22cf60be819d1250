//! Gateway mode on the edge (see `marquee-gateway`): `POST /openrtb2/auction` and
//! `/openrtb2/auction/{exchange}` run an auction among the configured external bidders and our
//! own line items (the bidder of `bid/`, called in process as the internal bidder), and
//! `/gateway/bidders` is the registry's management API.
//!
//! The overload rules are the bid path's: through the in-flight gate (full: 204 at once), the
//! body read within the exchange's size limit and default `tmax`, the deadline `tmax` less the
//! exchange's latency margin.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use std::borrow::Cow;

use bytes::Bytes;
use hyper::body::{Body as _, Incoming};
use hyper::{Method, Request, Response, StatusCode, Uri};
use marquee_gateway::{Gateway, InternalBidder};
use marquee_model::Currency;
use marquee_openrtb::{NoBidReason, decode_body};

use crate::bid::{self, BodyFailure, Exchange};
use crate::http::{self, Body};
use crate::metrics::Outcome;
use crate::notice::{self, NoticeKind};
use crate::{Edge, log_service};

/// Our own line items, bidding through the edge's bid path on the same request.
struct OwnLineItems<'e> {
    edge: &'e Edge,
    exchange: &'e Exchange,
    started: Instant,
}

impl InternalBidder for OwnLineItems<'_> {
    fn bid(&self, json: &[u8], currency: Currency) -> Option<Bytes> {
        let (response, _) = bid::bid(self.edge, self.exchange, currency, json, None, self.started);
        if response.status() != StatusCode::OK {
            return None;
        }
        // The answer is a `Full` body: its one frame is ready at the first poll.
        let mut body = response.into_body();
        match Pin::new(&mut body).poll_frame(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Some(Ok(frame))) => frame.into_data().ok(),
            _ => None,
        }
    }
}

fn client_error(status: StatusCode, reason: String) -> (Response<Body>, Outcome) {
    (http::text(status, reason + "\n"), Outcome::ClientError)
}

/// `POST /openrtb2/auction[/{exchange}]`.
pub(crate) async fn auction(
    edge: &Arc<Edge>,
    request: Request<Incoming>,
    started: Instant,
) -> (Response<Body>, Outcome) {
    let Some(gateway) = edge.gateway.as_ref() else {
        return (http::not_found(), Outcome::ClientError);
    };
    let Some(name) = bid::exchange_name(request.uri().path(), "/openrtb2/auction") else {
        return (http::not_found(), Outcome::ClientError);
    };
    let name = name.map(str::to_owned);
    let Some(exchange) = edge.bidder.exchange(name.as_deref()) else {
        return (http::not_found(), Outcome::ClientError);
    };
    let Some(_admitted) = edge.try_admit_bid(exchange) else {
        return (http::no_content(), Outcome::Shed);
    };
    let (body, encoding) = match bid::read_bid_body(exchange, request, started).await {
        Ok(read) => read,
        Err(BodyFailure::Late) => return (http::no_content(), Outcome::Late),
        Err(BodyFailure::Bad(bad)) => return client_error(bad.status, bad.reason),
    };
    let json = match decode_body(&body, encoding.as_deref(), exchange.max_body_bytes) {
        Ok(json) => json,
        Err(error) => return client_error(StatusCode::BAD_REQUEST, error.to_string()),
    };
    let own = OwnLineItems {
        edge,
        exchange,
        started,
    };
    let deadline = |tmax: Option<u32>| exchange.deadline(started, tmax);
    let auctioned = match gateway
        .auction(&json, name.as_deref().unwrap_or(""), deadline, Some(&own))
        .await
    {
        Ok(auctioned) => auctioned,
        Err(error) => return client_error(StatusCode::BAD_REQUEST, error.to_string()),
    };
    for url in auctioned.internal_notices {
        internal_notice(edge, &url);
    }
    let Some(text) = auctioned.response else {
        let reason = auctioned.no_bid.unwrap_or(NoBidReason::UNKNOWN_ERROR);
        let answer = bid::no_bid_body(exchange, Cow::Owned(auctioned.request_id), reason);
        return (answer, Outcome::Fallback);
    };
    (http::openrtb_answer(text), Outcome::Ok)
}

/// A win or loss notice for our own bid, handled in process as if the exchange had sent it.
fn internal_notice(edge: &Arc<Edge>, url: &str) {
    let Ok(uri) = url.parse::<Uri>() else {
        return;
    };
    let kind = match uri.path() {
        path if path.ends_with("/openrtb2/win") => NoticeKind::Win,
        path if path.ends_with("/openrtb2/loss") => NoticeKind::Loss,
        _ => return,
    };
    let edge = Arc::clone(edge);
    tokio::spawn(async move {
        let _ = notice::notice(&edge, kind, uri.query().unwrap_or("")).await;
    });
}

/// The registry's management API, behind `gateway.admin_token`:
/// `GET /gateway/bidders` lists every bidder with its state and counters;
/// `POST /gateway/bidders/{name}/enable` and `/disable` switch one until the next start.
pub(crate) fn registry(edge: &Edge, request: &Request<Incoming>) -> Response<Body> {
    let Some(gateway) = edge.gateway.as_ref() else {
        return http::not_found();
    };
    let token = gateway.config().admin_token.as_str();
    if token.is_empty() {
        return http::not_found();
    }
    if !log_service::bearer_matches(request.headers(), token) {
        return http::text(
            StatusCode::UNAUTHORIZED,
            "the gateway registry needs `Authorization: Bearer <gateway.admin_token>`\n",
        );
    }
    let path = request.uri().path();
    match (request.method(), path) {
        (&Method::GET, "/gateway/bidders") => list(gateway),
        (&Method::POST, path) => {
            let switch = path.strip_prefix("/gateway/bidders/").and_then(|rest| {
                rest.strip_suffix("/enable")
                    .map(|name| (name, true))
                    .or_else(|| rest.strip_suffix("/disable").map(|name| (name, false)))
            });
            let Some((name, enabled)) = switch else {
                return http::not_found();
            };
            match gateway.set_enabled(name, enabled) {
                Ok(()) => list(gateway),
                Err(error) => http::text(StatusCode::NOT_FOUND, format!("{error}\n")),
            }
        }
        _ => http::not_found(),
    }
}

fn list(gateway: &Gateway) -> Response<Body> {
    let body = serde_json::json!({ "bidders": gateway.bidders() }).to_string();
    http::response(StatusCode::OK, "application/json", body)
}
