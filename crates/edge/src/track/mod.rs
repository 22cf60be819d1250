//! Tracking calls, `GET /t/i`, `/t/c`, `/t/v` (impression beacon, click redirect, conversion):
//! the token verified → the answer made (a click's redirect first, `click.rs`) → the
//! traffic-quality screen → counted once (`count.rs`) → settled once the log has the event
//! (`settle.rs`). The image tag's untokened events are counted by the same code
//! (`ad/untokened.rs`); the URLs a decision's markup carries are signed in `urls.rs`.

mod click;
mod count;
mod invalid;
mod settle;
mod urls;
mod worth;

#[cfg(test)]
mod counting_tests;

use std::sync::Arc;
use std::time::Duration;

use hyper::Response;
use hyper::header::HeaderMap;
use jiff::Timestamp;
use marquee_eventlog::InvalidReason;
use marquee_tracking::{Claims, ReplayConfig, ReplayGuard, TokenKind};

pub(crate) use click::to_landing;
pub(crate) use count::{Counted, Source, TrackedEvent, count_once, untokened_expiry};
pub(crate) use invalid::log_invalid;
pub(crate) use settle::{commit_and_settle, record_delivery};
pub(crate) use urls::{FromRequest, cache_buster, fill_tracked, impression_url, signed_urls};
pub(crate) use worth::worth;

use crate::Edge;
use crate::client::Client;
use crate::http::{self, Body};
use crate::visitor::Visitor;

/// `GET /t/i`, `/t/c`, `/t/v`: count the event once if its token holds, then answer. A click's
/// answer is made first: one whose landing URL makes no redirect gets a 404 and is not counted.
pub(crate) async fn track(
    edge: &Arc<Edge>,
    kind: TokenKind,
    query_text: &str,
    headers: &HeaderMap,
    client: &Client<'_>,
) -> Response<Body> {
    let now = edge.now();
    let claims = verify(edge, query_text, kind, now.as_second());
    let loaded = edge.holder.current();
    let (answer, counts) = match kind {
        TokenKind::Impression | TokenKind::Conversion => (http::pixel(), true),
        TokenKind::Click => click::redirect(edge, loaded.as_deref(), claims.as_ref(), now),
    };
    let Some(mut claims) = claims.filter(|_| counts) else {
        return answer;
    };
    // A programmatic impression's token binds its bidder and billing URL, which travel beside
    // it; its events name the bidder (by id) where a line item's name the creative.
    let beacon = (kind == TokenKind::Impression && crate::ad::is_programmatic(&claims))
        .then(|| crate::ad::programmatic_beacon(edge, &claims, query_text));
    if let Some(beacon) = &beacon {
        claims.creative = beacon
            .as_ref()
            .map_or(0, crate::ad::ProgrammaticBeacon::bidder_id);
    }
    let visitor = Visitor::of(edge, headers, client);
    let expires_at = claims.expires_at();
    if let Some(reason) = screen(edge, kind, &claims, client, expires_at, now) {
        log_invalid(edge, kind, &claims, reason, &visitor, now);
        return answer;
    }
    let event = TrackedEvent {
        kind,
        claims,
        expires_at,
        now,
        source: Source::Token,
    };
    let counted = count_once(edge, loaded, event, &visitor).await;
    if counted == Counted::First
        && let Some(Some(beacon)) = &beacon
    {
        crate::ad::bill_programmatic(edge, beacon);
    }
    // A conversion token sent again is logged as invalid; repeated impressions and clicks
    // are the same event seen twice (a browser's retry), not a second one.
    if kind == TokenKind::Conversion && counted == Counted::Repeat {
        let reason = InvalidReason::RepeatConversion;
        log_invalid(edge, kind, &claims, reason, &visitor, now);
    }
    answer
}

/// Verifies a tracking token; counts the invalid ones.
fn verify(edge: &Edge, query_text: &str, kind: TokenKind, now: i64) -> Option<Claims> {
    let token = url::form_urlencoded::parse(query_text.as_bytes())
        .find(|(key, _)| key == "t")
        .map(|(_, value)| value)?;
    match edge.keys.verify_kind(&token, kind, now) {
        Ok(claims) => Some(claims),
        Err(error) => {
            edge.counters.invalid_tokens.inc();
            tracing::debug!(%error, ?kind, "tracking token refused");
            None
        }
    }
}

/// Why the traffic-quality screen refuses a signed event, if it does: the client's own screen,
/// a click within the minimum delay of its decision, or (with `clicks_need_impression`) a click
/// whose impression this edge did not count.
fn screen(
    edge: &Edge,
    kind: TokenKind,
    claims: &Claims,
    client: &Client<'_>,
    expires_at: i64,
    now: Timestamp,
) -> Option<InvalidReason> {
    // The token's issue time is in whole seconds: a click is judged at most a second later
    // than it came.
    let elapsed_ms = now.as_millisecond() - claims.issued_at.saturating_mul(1_000);
    let too_fast = kind == TokenKind::Click
        && edge
            .quality
            .too_fast(Duration::from_millis(elapsed_ms.max(0).unsigned_abs()));
    let without_impression = kind == TokenKind::Click
        && edge.quality.rules.clicks_need_impression
        && !edge.replay_guard(TokenKind::Impression).seen(
            claims.nonce,
            expires_at,
            now.as_second(),
        );
    edge.quality
        .screen(client, claims.user, now.as_second())
        .or(too_fast.then_some(InvalidReason::TooFast))
        .or(without_impression.then_some(InvalidReason::ClickWithoutImpression))
}

/// The replay guards of tracking tokens, one per kind, sized alike.
#[derive(Debug)]
pub(crate) struct TrackingSeen {
    impressions: Arc<ReplayGuard>,
    clicks: Arc<ReplayGuard>,
    conversions: Arc<ReplayGuard>,
}

impl TrackingSeen {
    pub(crate) fn new(replay: ReplayConfig) -> TrackingSeen {
        TrackingSeen {
            impressions: Arc::new(ReplayGuard::new(replay)),
            clicks: Arc::new(ReplayGuard::new(replay)),
            conversions: Arc::new(ReplayGuard::new(replay)),
        }
    }

    pub(crate) fn of(&self, kind: TokenKind) -> &ReplayGuard {
        match kind {
            TokenKind::Impression => &self.impressions,
            TokenKind::Click => &self.clicks,
            TokenKind::Conversion => &self.conversions,
        }
    }

    /// Every guard with its kind, as labelled in metrics.
    pub(crate) fn labelled(&self) -> [(&'static str, &Arc<ReplayGuard>); 3] {
        [
            ("impression", &self.impressions),
            ("click", &self.clicks),
            ("conversion", &self.conversions),
        ]
    }
}
