//! The ad request's query, read and checked before anything is decided.

use hyper::{Response, StatusCode};

use crate::Edge;
use crate::http::{self, Body};
use crate::metrics::Outcome;
use crate::query::{self, AdFormat, AdQuery, QueryError};

/// The query of an ad request: at least one placement, and only one unless the answer is
/// JSON.
pub(super) fn parse(query_text: &str, json: bool) -> Result<AdQuery<'_>, QueryError> {
    let query = query::parse(query_text)?;
    let placement = |problem: &str| QueryError {
        name: "placement",
        problem: problem.into(),
    };
    if query.placements.is_empty() {
        return Err(placement("required"));
    }
    if !json && query.placements.len() > 1 {
        return Err(placement("one per /ad request; use /ad.json for several"));
    }
    Ok(query)
}

/// A query [`parse`] refused: `400` with the reason.
pub(super) fn bad_request(edge: &Edge, error: &QueryError) -> (Response<Body>, Outcome) {
    edge.counters.bad_requests.inc();
    let answer = http::text(StatusCode::BAD_REQUEST, format!("{error}\n"));
    (answer, Outcome::ClientError)
}

/// The format a shed request asked for, found without parsing the whole query: the fallback
/// must still be of the right kind (a pixel for an image tag, a script for the js tag).
pub(super) fn format_only(query_text: &str) -> Option<AdFormat> {
    query_text
        .split('&')
        .find_map(|pair| pair.strip_prefix("format="))
        .and_then(|value| match value {
            "html" => Some(AdFormat::Html),
            "js" => Some(AdFormat::Js),
            "img" => Some(AdFormat::Img),
            "click" => Some(AdFormat::Click),
            _ => None,
        })
}
