//! Our first-party user id: read from its cookie, made new, and set (ad requests and user sync
//! both identify users this way, each under its own consent rule).

use hyper::Response;
use hyper::header::{self, HeaderMap, HeaderValue};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::Body;
use crate::Edge;

pub(crate) const USER_COOKIE: &str = "mq_uid";

pub(crate) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
        .filter(|value| {
            !value.is_empty()
                && value.len() <= 64
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A new user id: 32 hex digits.
pub(crate) fn new_user_id(rng: &mut Xoshiro256PlusPlus) -> String {
    format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())
}

/// Adds the `Set-Cookie` of our user id `uid` to `answer`.
pub(crate) fn set_user_cookie(edge: &Edge, answer: &mut Response<Body>, uid: &str) {
    if let Ok(value) = HeaderValue::from_str(&user_cookie(edge, uid)) {
        answer.headers_mut().insert(header::SET_COOKIE, value);
    }
}

/// The `Set-Cookie` value for our user id.
fn user_cookie(edge: &Edge, uid: &str) -> String {
    // The tag's request comes from the publisher's page, another site: a cookie must be
    // `SameSite=None`, which browsers accept only with `Secure`, so only over https.
    let same_site = if edge.config.public_url.starts_with("https://") {
        "None; Secure"
    } else {
        "Lax"
    };
    format!("{USER_COOKIE}={uid}; Max-Age=31536000; Path=/; SameSite={same_site}; HttpOnly")
}
