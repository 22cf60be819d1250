//! Where a click goes: its creative's landing URL with a conversion token appended; nothing in
//! the request can name another destination.

use hyper::{Response, StatusCode};
use jiff::Timestamp;
use marquee_tracking::{Claims, TokenKind};

use crate::http::{self, Body};
use crate::{Edge, Loaded};

/// Added to a landing URL: the conversion token the advertiser's page may send back.
pub(crate) const CONVERSION_PARAMETER: &str = "mq_conv";

/// The answer to a signed click, and whether the click may be counted: not when the landing
/// URL makes no redirect (the visitor never reaches the advertiser). A click on a creative no
/// longer in the snapshot gets a 404 too, but its ad was shown and clicked: it counts, as
/// before.
pub(super) fn redirect(
    edge: &Edge,
    loaded: Option<&Loaded>,
    claims: Option<&Claims>,
    now: Timestamp,
) -> (Response<Body>, bool) {
    let landing = claims.and_then(|claims| {
        let creative = loaded?
            .engine
            .snapshot()
            .data
            .creative(marquee_model::CreativeId(claims.creative))?;
        Some((claims, creative.landing_url.as_str()))
    });
    let Some((claims, landing)) = landing else {
        let gone = http::text(StatusCode::NOT_FOUND, "this ad is no longer available\n");
        return (gone, true);
    };
    let answer = to_landing(edge, claims, landing, now);
    let redirected = answer.status() == StatusCode::FOUND;
    (answer, redirected)
}

/// The redirect of the click `claims` describe to `landing`, with its conversion token; a 404
/// when that makes no URL.
pub(crate) fn to_landing(
    edge: &Edge,
    claims: &Claims,
    landing: &str,
    now: Timestamp,
) -> Response<Body> {
    match landing_with_conversion(edge, claims, landing, now) {
        Some(location) => http::redirect(&location),
        None => http::not_found(),
    }
}

/// The landing URL with a conversion token the advertiser's page can send back to `/t/v`, as
/// one more query parameter: before the fragment, which browsers never send to the server.
/// Written as the URL parser serialises it (ASCII, with controls and spaces percent-encoded),
/// so it is always a valid `Location`. `None` if `landing` is not a URL at all (creatives are
/// validated as http(s) URLs; only a snapshot from an older build could hold one).
fn landing_with_conversion(
    edge: &Edge,
    claims: &Claims,
    landing: &str,
    now: Timestamp,
) -> Option<String> {
    let mut url = url::Url::parse(landing).ok()?;
    let conversion = edge.keys.sign(&Claims {
        kind: TokenKind::Conversion,
        issued_at: now.as_second(),
        ..*claims
    });
    url.query_pairs_mut()
        .append_pair(CONVERSION_PARAMETER, &conversion);
    Some(url.into())
}
