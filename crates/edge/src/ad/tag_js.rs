//! `GET /tag.js`: the async tag, which makes the page's ad requests.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Response, StatusCode};

use crate::http::{Body, response};

const TAG_JS: &str = include_str!("../tag.js");

/// The tag script, asking the browser for the client hints the ad requests it makes are read
/// by (`visitor.rs`).
pub(crate) fn tag_js() -> Response<Body> {
    let mut answer = response(
        StatusCode::OK,
        "application/javascript; charset=utf-8",
        Bytes::from_static(TAG_JS.as_bytes()),
    );
    answer.headers_mut().insert(
        HeaderName::from_static("accept-ch"),
        HeaderValue::from_static(marquee_device::ACCEPT_CH),
    );
    answer
}
