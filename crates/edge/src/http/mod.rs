//! The answers every edge path builds on: a body type, plain responses with the headers the edge
//! always sends, the beacon pixel, redirects, and the first-party user id cookie
//! (`cookie.rs`); the probes `/metrics` and `/readyz` (`probes.rs`).

mod cookie;
mod probes;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};

pub(crate) use cookie::{USER_COOKIE, cookie, new_user_id, set_user_cookie};
pub(crate) use probes::{metrics, readyz};

pub(crate) type Body = Full<Bytes>;

/// The 1×1 transparent GIF answered by beacons.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

pub(crate) fn response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A plain-text answer.
pub(crate) fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    response(status, "text/plain; charset=utf-8", body)
}

/// A `200` OpenRTB answer: JSON with the `x-openrtb-version` header exchanges expect. The
/// name is a static one: a `&str` name would be parsed and copied on every bid.
pub(crate) fn openrtb_answer(json: String) -> Response<Body> {
    let mut answer = response(StatusCode::OK, "application/json", json);
    answer.headers_mut().insert(
        HeaderName::from_static("x-openrtb-version"),
        HeaderValue::from_static("2.6"),
    );
    answer
}

/// An empty `204`: no bid.
pub(crate) fn no_content() -> Response<Body> {
    let mut answer = Response::new(Body::new(Bytes::new()));
    *answer.status_mut() = StatusCode::NO_CONTENT;
    answer
}

pub(crate) fn redirect(location: &str) -> Response<Body> {
    let mut answer = text(StatusCode::FOUND, Bytes::new());
    match HeaderValue::from_str(location) {
        Ok(value) => {
            answer.headers_mut().insert(header::LOCATION, value);
            answer
        }
        Err(_) => text(StatusCode::NOT_FOUND, "no such ad\n"),
    }
}

pub(crate) fn pixel() -> Response<Body> {
    response(StatusCode::OK, "image/gif", Bytes::from_static(PIXEL))
}

pub(crate) fn not_found() -> Response<Body> {
    text(StatusCode::NOT_FOUND, "not found\n")
}

/// Lets the publisher's page read an `/ad.json` answer: `tag.js` fetches it from another
/// origin, with credentials (the user cookie), so the origin is echoed rather than `*`.
pub(crate) fn allow_origin(request: &HeaderMap, answer: &mut Response<Body>) {
    let Some(origin) = request.get(header::ORIGIN) else {
        return;
    };
    let headers = answer.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
}
