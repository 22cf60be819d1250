//! The tracking URLs a decision's markup carries, their tokens signed straight into a buffer
//! the worker keeps, and ad code filled with them (the ad path and the bid path both fill here).

use marquee_snapshot::AdCode;
use marquee_tracking::{Claims, TokenKind};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::borrow::Cow;
use std::num::NonZeroU64;

use crate::Edge;
use crate::render::{self, Values};

/// Appends a tracking URL with its token signed straight into it.
fn append_tracking_url(edge: &Edge, path: &str, claims: &Claims, out: &mut String) {
    let base = edge.config.public_url.trim_end_matches('/');
    out.reserve(base.len() + path.len() + marquee_tracking::TOKEN_LEN);
    out.push_str(base);
    out.push_str(path);
    edge.keys.sign_into(claims, out);
}

/// Appends the impression beacon's URL for `claims`.
pub(crate) fn impression_url(edge: &Edge, claims: &Claims, out: &mut String) {
    append_tracking_url(edge, "/t/i?t=", claims, out);
}

/// The impression beacon and click redirect of the ad `claims` describes, built in `urls`
/// (cleared first); the click's token carries `click_worth`.
pub(crate) fn signed_urls<'u>(
    edge: &Edge,
    claims: &Claims,
    click_worth: u64,
    urls: &'u mut String,
) -> (&'u str, &'u str) {
    urls.clear();
    append_tracking_url(edge, "/t/i?t=", claims, urls);
    let impression_end = urls.len();
    let click = Claims {
        kind: TokenKind::Click,
        amount_micros: Some(click_worth),
        ..*claims
    };
    append_tracking_url(edge, "/t/c?t=", &click, urls);
    urls.split_at(impression_end)
}

/// The cache buster `given` if it is safe in HTML, else a random one written in `digits`.
pub(crate) fn cache_buster<'d>(
    given: Option<&'d str>,
    rng: &mut Xoshiro256PlusPlus,
    digits: &'d mut itoa::Buffer,
) -> &'d str {
    match render::safe_cache_buster(given) {
        Some(given) => given,
        None => digits.format(rng.next_u32() % 1_000_000_000),
    }
}

/// What the ad request gives an ad's code: a cache buster safe in HTML, and its key-values (none
/// for a bid request).
pub(crate) struct FromRequest<'a> {
    pub(crate) cache_buster: &'a str,
    pub(crate) key_values: &'a [(Cow<'a, str>, Cow<'a, str>)],
}

/// Appends `code` filled for the impression `claims` describes: its signed impression beacon
/// and click redirect (the click's token carrying `click_worth`), the request's cache buster
/// and key-values, the claims' placement and time. The URLs are built in `urls`, a buffer the
/// worker keeps, so filling allocates nothing but `out`'s growth.
pub(crate) fn fill_tracked(
    edge: &Edge,
    code: &AdCode,
    claims: &Claims,
    click_worth: u64,
    request: &FromRequest<'_>,
    urls: &mut String,
    out: &mut String,
) {
    let (impression_url, click_url) = signed_urls(edge, claims, click_worth, urls);
    render::fill(
        code,
        &Values {
            click_url,
            impression_url,
            cache_buster: request.cache_buster,
            placement: claims.placement.map_or(0, NonZeroU64::get),
            timestamp: claims.issued_at,
            key_values: request.key_values,
        },
        out,
    );
}
