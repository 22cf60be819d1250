//! Ad requests, `GET /ad` and `GET /ad.json`: the query parsed (`parse.rs`) → the image tag's
//! checks before deciding (`untokened.rs`) → the visitor (who, where, which profile:
//! `user.rs`, `crate::visitor`) → every placement decided, its impression reserved, its ad
//! code filled and its decision logged (`decide.rs`, `placement.rs`) → placements with
//! programmatic demand auctioned among the gateway's bidders (`programmatic.rs`) → capped decisions
//! counted in Redis (`caps.rs`) → the answer (`answer.rs`) → what an image tag counts.
//! `/tag.js` is the async tag that makes them (`tag_js.rs`).

mod answer;
mod caps;
mod decide;
mod parse;
mod placement;
mod programmatic;
mod tag_js;
mod untokened;
mod user;

use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Request, Response, StatusCode};
use marquee_model::{PlacementId, Size};
use marquee_sharedstate::SharedState;
use marquee_snapshot::CreativeEntry;
use marquee_tracking::Claims;

pub(crate) use programmatic::{
    Beacon as ProgrammaticBeacon, beacon as programmatic_beacon, bill as bill_programmatic,
    is_programmatic,
};
pub(crate) use tag_js::tag_js;

use self::decide::Step;
use crate::client::Client;
use crate::metrics::Outcome;
use crate::query::{AdFormat, AdQuery};
use crate::visitor::Visitor;
use crate::worker::WORKER;
use crate::{Edge, http, profiles};

/// `GET /ad` and `GET /ad.json` through the gate: one that cannot start now gets the fallback
/// at once.
pub(crate) async fn request(
    edge: &Arc<Edge>,
    request: &Request<Incoming>,
    client: &Client<'_>,
    json: bool,
    started: Instant,
) -> (Response<http::Body>, Outcome) {
    let query = request.uri().query().unwrap_or("");
    let headers = request.headers();
    let (mut answer, outcome) = match edge.try_admit() {
        Some(_admitted) => {
            let deadline = started + edge.config.limits.deadline;
            ad(edge, query, headers, client, json, deadline).await
        }
        None => (shed(edge, query, json), Outcome::Shed),
    };
    if json {
        http::allow_origin(headers, &mut answer);
    }
    (answer, outcome)
}

/// An ad request that could not start (`max_in_flight` in progress): the fallback, at once.
pub(crate) fn shed(edge: &Edge, query_text: &str, json: bool) -> Response<http::Body> {
    edge.counters.ad_requests.inc();
    edge.counters.shed.inc();
    answer::fallback(edge, parse::format_only(query_text), json)
}

/// What the stages of one ad request share.
struct AdRequest<'a> {
    edge: &'a Arc<Edge>,
    query: &'a AdQuery<'a>,
    headers: &'a HeaderMap,
    client: &'a Client<'a>,
    /// `/ad.json`: every placement's ad in one JSON answer.
    json: bool,
    /// Work still to do then is abandoned.
    deadline: Instant,
    /// Where capped decisions are counted before they are served (`[redis]`). Not for the
    /// image tag's click request, which re-derives the decision its image request counted:
    /// it must not count it again, nor see the cap that count may have filled.
    shared: Option<&'a SharedState>,
    /// The key of the image tag's placement and cache buster: the seed of its draws, and where
    /// its image is remembered for the click.
    image_key: Option<u64>,
}

/// One served ad, ready to answer in any format: a line item's, or a bid's (line item and
/// creative 0, no creative entry).
struct Served<'s> {
    placement: PlacementId,
    line_item: u64,
    creative_id: u64,
    creative: Option<&'s CreativeEntry>,
    size: Option<Size>,
    /// The impression claims of the decision (its nonce identifies it).
    claims: Claims,
    /// Start and end of the filled HTML in the worker's text buffer.
    html: std::ops::Range<usize>,
}

/// The decisions of one ad request, before they become its answer.
struct Decided<'s> {
    served: Vec<Served<'s>>,
    user_id: Option<String>,
    set_cookie: bool,
}

/// `GET /ad` and `GET /ad.json`. Work still to do at `deadline` is abandoned: the answer is
/// the fallback (a placement already decided keeps its logged decision, which is not billed).
async fn ad(
    edge: &Arc<Edge>,
    query_text: &str,
    headers: &HeaderMap,
    client: &Client<'_>,
    json: bool,
    deadline: Instant,
) -> (Response<http::Body>, Outcome) {
    edge.counters.ad_requests.inc();
    let query = match parse::parse(query_text, json) {
        Ok(query) => query,
        Err(error) => return parse::bad_request(edge, &error),
    };
    let Some(loaded) = edge.holder.current() else {
        return (
            answer::fallback(edge, query.format, json),
            Outcome::Fallback,
        );
    };
    let request = AdRequest {
        edge,
        query: &query,
        headers,
        client,
        json,
        deadline,
        shared: edge
            .shared
            .as_ref()
            .filter(|_| query.format != Some(AdFormat::Click)),
        image_key: untokened::image_key(&query),
    };
    if let Some(answer) = untokened::before_decision(&request, &loaded).await {
        return answer;
    }
    let profile = profiles::lookup(edge, user::known(&query, headers), deadline).await;
    let visitor = Visitor::of(edge, headers, client);
    let step = WORKER.with(|worker| {
        let worker = &mut *worker.borrow_mut();
        decide::decide(&request, &loaded, &visitor, profile.as_deref(), worker)
    });
    let (answer, counts) = match step {
        Step::Answered(answer, counts) => (answer, counts),
        Step::Counting(decided, text) => {
            let decided = caps::count_shared(&request, &loaded, decided).await;
            let answer = answer::finish(&request, &decided, &text);
            (answer, untokened::event_of(&request, &decided))
        }
        Step::Auctioning(auctioning) => {
            // The auction's time is the placement's own budget (its timeout), added to the
            // request's: what remains of the request is done in the time it had left.
            let began = Instant::now();
            let (decided, text) = decide::auction(&request, &loaded, &visitor, auctioning).await;
            let request = AdRequest {
                deadline: request.deadline + began.elapsed(),
                ..request
            };
            let decided = caps::count_shared(&request, &loaded, decided).await;
            let answer = answer::finish(&request, &decided, &text);
            (answer, untokened::event_of(&request, &decided))
        }
    };
    // Only an image or click actually sent counts: a redirect that could not be made (a URL
    // that is no valid `Location`) was answered with a 404.
    if let Some(counts) = counts
        && answer.0.status() == StatusCode::FOUND
    {
        untokened::after_decision(&request, &counts).await;
    }
    answer
}
