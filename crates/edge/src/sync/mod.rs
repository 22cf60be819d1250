//! User sync (cookie matching) in both directions, under consent: `GET /sync` records which of
//! our user ids an exchange's user id stands for, `GET /sync/out` sends the browser to the
//! exchange with ours; the matches are kept in memory (`matches.rs`).

mod matches;

use std::borrow::Cow;

use hyper::header::HeaderMap;
use hyper::{Response, StatusCode};

pub use matches::{SHARDS, UserSyncs};

use crate::Edge;
use crate::http::{self, Body, USER_COOKIE};
use crate::worker::WORKER;

type Params<'q> = [(Cow<'q, str>, Cow<'q, str>)];

/// `GET /sync?exchange=NAME&uid=THEIRS`: the exchange sends the browser here with its user id;
/// it is recorded against ours (the cookie's, or a new one). A pixel either way.
pub(crate) fn sync_in(edge: &Edge, query: &str, headers: &HeaderMap) -> Response<Body> {
    let params: Vec<(Cow<'_, str>, Cow<'_, str>)> =
        url::form_urlencoded::parse(query.as_bytes()).collect();
    let Some(exchange) =
        param(&params, "exchange").and_then(|name| edge.bidder.exchange(Some(name)))
    else {
        return http::text(
            StatusCode::BAD_REQUEST,
            "query parameter `exchange`: not a configured exchange\n",
        );
    };
    let Some(theirs) = param(&params, "uid").filter(|u| !u.is_empty() && u.len() <= 256) else {
        return http::text(
            StatusCode::BAD_REQUEST,
            "query parameter `uid`: required, at most 256 characters\n",
        );
    };
    if !consent(&params) {
        return http::pixel();
    }
    let Some((ours, new)) = our_user(edge, headers) else {
        return http::pixel();
    };
    edge.bidder.syncs.record(&exchange.name, theirs, &ours);
    edge.bidder.counters.syncs.inc();
    let mut answer = http::pixel();
    if new {
        http::set_user_cookie(edge, &mut answer, &ours);
    }
    answer
}

/// `GET /sync/out?exchange=NAME`: sends the browser to the exchange's sync URL with our user
/// id, so that the exchange can send it back as `buyeruid`.
pub(crate) fn sync_out(edge: &Edge, query: &str, headers: &HeaderMap) -> Response<Body> {
    let params: Vec<(Cow<'_, str>, Cow<'_, str>)> =
        url::form_urlencoded::parse(query.as_bytes()).collect();
    let target = param(&params, "exchange")
        .and_then(|name| edge.bidder.exchange(Some(name)))
        .and_then(|e| e.sync_url.as_deref());
    let Some(target) = target else {
        return http::not_found();
    };
    if !consent(&params) {
        return http::pixel();
    }
    let Some((ours, new)) = our_user(edge, headers) else {
        return http::pixel();
    };
    let encoded: String = url::form_urlencoded::byte_serialize(ours.as_bytes()).collect();
    let mut answer = http::redirect(&target.replace("{uid}", &encoded));
    if new {
        http::set_user_cookie(edge, &mut answer, &ours);
    }
    answer
}

/// The value of the first query parameter `name`.
fn param<'q>(query: &'q Params<'_>, name: &str) -> Option<&'q str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_ref())
}

/// Whether the sync call may identify the user: the ad path's rule (`gdpr` other than `0`
/// applies; then only a consent string consenting to Purpose 1 identifies).
fn consent(query: &Params<'_>) -> bool {
    let gdpr = param(query, "gdpr").map(|g| g != "0");
    marquee_model::may_identify(gdpr, param(query, "gdpr_consent"))
}

/// Our user id from the cookie, or a new one (to set) when cookies are allowed.
fn our_user(edge: &Edge, headers: &HeaderMap) -> Option<(String, bool)> {
    if let Some(uid) = http::cookie(headers, USER_COOKIE) {
        return Some((uid.to_owned(), false));
    }
    if !edge.config.cookies {
        return None;
    }
    let uid = WORKER.with(|w| http::new_user_id(&mut w.borrow_mut().rng));
    Some((uid, true))
}
