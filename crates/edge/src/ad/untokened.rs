//! The image tag's two requests, which carry no signed token, judged before they count:
//!
//! 1. **Placement**: a placement that does not take the image tag (`image_tag = off`) answers
//!    the fallback; the request is logged as invalid (`untokened_disabled`).
//! 2. **Click of a served image**: a click whose image this installation served within the
//!    click window (found here, or in Redis) goes to that image's ad and counts once, unless the
//!    screen finds it invalid or too fast. Its line item charges it only if it charges
//!    untokened clicks.
//! 3. Otherwise the decision is made as for any ad request (`ad::ad`), and then:
//!    **the image** counts once per cache buster if its cache buster is real and the screen
//!    (with the image-tag rate) passes it, and is remembered for its click; **a click** whose
//!    image was not found is redirected to the ad the same draw picks, and logged as invalid
//!    (`click_without_impression`, or `no_cache_buster`).

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::{Response, StatusCode};
use jiff::Timestamp;
use marquee_eventlog::InvalidReason;
use marquee_model::{ImageTag, UntokenedClicks};
use marquee_tracking::{Claims, TokenKind};

use super::{AdRequest, Decided, answer};
use crate::http::Body;
use crate::image_tag::{self, ImageServed};
use crate::metrics::Outcome;
use crate::query::{AdFormat, AdQuery};
use crate::track::{self, Counted, Source, TrackedEvent, log_invalid, untokened_expiry};
use crate::visitor::Visitor;
use crate::{Edge, Loaded};

/// What an image tag's request counts once it is answered: serving the image is the
/// impression, following the click the click (neither can carry a token).
pub(super) struct UntokenedEvent {
    kind: TokenKind,
    claims: Claims,
    /// The user id was made for this request (no cookie, no `uid`): it says nothing of the
    /// client, so no per-user rate is counted for it.
    new_user: bool,
}

/// The key of an image-tag request's placement and cache buster (`image_tag::key`): the seed
/// of its draws, and where its image is remembered for the click.
pub(super) fn image_key(query: &AdQuery<'_>) -> Option<u64> {
    matches!(query.format, Some(AdFormat::Img | AdFormat::Click))
        .then(|| query.cache_buster.as_deref())
        .flatten()
        .map(|cb| image_tag::key(&query.placements, cb))
}

/// Steps 1 and 2 for an image tag's request: an answer, or `None` to decide as usual.
pub(super) async fn before_decision(
    request: &AdRequest<'_>,
    loaded: &Arc<Loaded>,
) -> Option<(Response<Body>, Outcome)> {
    let format = request
        .query
        .format
        .filter(|f| !request.json && matches!(f, AdFormat::Img | AdFormat::Click))?;
    let (edge, query) = (request.edge, request.query);
    let now = edge.now();
    let placement = *query.placements.first()?;
    let data = &loaded.engine.snapshot().data;
    let entry = data.placement(placement);
    if entry.is_none_or(|p| p.image_tag != ImageTag::On) {
        // A placement not in the snapshot is logged under none: the manager would drop it.
        let claims = Claims {
            placement: entry.and_then(|p| NonZeroU64::new(p.id.0)),
            ..claims_of(edge, TokenKind::Impression, now)
        };
        let visitor = Visitor::of(edge, request.headers, request.client);
        let reason = InvalidReason::UntokenedDisabled;
        log_invalid(edge, counted_kind(format), &claims, reason, &visitor, now);
        return Some((
            answer::fallback(edge, Some(format), false),
            Outcome::Fallback,
        ));
    }
    if format != AdFormat::Click {
        return None;
    }
    let cache_buster = image_tag::cache_buster(query.cache_buster.as_deref())?;
    let key = image_tag::key(&query.placements, cache_buster);
    let served = find_image(edge, key, now, request.deadline).await?;
    Some(click(request, loaded, &served, now).await)
}

/// What the image tag's request `decided` counts once its answer is made.
pub(super) fn event_of(request: &AdRequest<'_>, decided: &Decided<'_>) -> Option<UntokenedEvent> {
    let ad = decided.served.first().filter(|_| !request.json)?;
    let kind = match request.query.format? {
        AdFormat::Img
            if matches!(
                ad.creative.map(|c| &c.content),
                Some(marquee_snapshot::Content::Image { .. })
            ) =>
        {
            TokenKind::Impression
        }
        AdFormat::Click => TokenKind::Click,
        _ => return None,
    };
    Some(UntokenedEvent {
        kind,
        claims: ad.claims,
        new_user: decided.set_cookie,
    })
}

/// Step 3, once the decision's answer was made (an image or a redirect actually sent).
pub(super) async fn after_decision(request: &AdRequest<'_>, event: &UntokenedEvent) {
    let edge = request.edge;
    let (kind, claims) = (event.kind, &event.claims);
    let rate_user = if event.new_user { 0 } else { claims.user };
    let now = edge.now();
    let visitor = Visitor::of(edge, request.headers, request.client);
    let cache_buster = image_tag::cache_buster(request.query.cache_buster.as_deref());
    let invalid = match (kind, cache_buster) {
        (_, None) => Some(InvalidReason::NoCacheBuster),
        (TokenKind::Click, Some(_)) => Some(InvalidReason::ClickWithoutImpression),
        _ => edge
            .quality
            .screen_image(request.client, rate_user, now.as_second()),
    };
    if let Some(reason) = invalid {
        log_invalid(edge, kind, claims, reason, &visitor, now);
        return;
    }
    let Some(key) = request.image_key.filter(|_| cache_buster.is_some()) else {
        return;
    };
    let loaded = edge.holder.current();
    let click_worth = loaded
        .as_deref()
        .and_then(|l| {
            let data = &l.engine.snapshot().data;
            data.line_item(marquee_model::LineItemId(claims.line_item))
                .map(|li| track::worth(&li.price, TokenKind::Click))
        })
        .unwrap_or(0);
    // Not recorded against caps: a cap the image filled must not change which ad another
    // image of the same cache buster shows (the draw is seeded by it).
    let counted = track::count_once(edge, loaded, untokened(kind, claims, now), &visitor).await;
    // Remembered for its click once counted; a fetch again of the same image changes nothing.
    if counted == Counted::First {
        let served = ImageServed {
            line_item: claims.line_item,
            creative: claims.creative,
            placement: claims.placement.map_or(0, NonZeroU64::get),
            nonce: claims.nonce,
            user: claims.user,
            served_at_ms: now.as_millisecond(),
            click_worth,
        };
        remember_image(edge, key, served);
    }
}

/// An image tag's event to count once, remembered until the end of its window.
fn untokened(kind: TokenKind, claims: &Claims, now: Timestamp) -> TrackedEvent {
    TrackedEvent {
        kind,
        claims: *claims,
        expires_at: untokened_expiry(claims, now.as_second()),
        now,
        source: Source::ImageTag,
    }
}

/// The image served under `key` within the click window: from this edge's memory, else from
/// Redis within `deadline`.
async fn find_image(
    edge: &Edge,
    key: u64,
    now: Timestamp,
    deadline: Instant,
) -> Option<ImageServed> {
    let now_ms = now.as_millisecond();
    let window_ms = window_ms(edge);
    if let Some(served) = edge.images.find(key, now_ms, window_ms) {
        return Some(served);
    }
    let shared = edge.shared.as_ref()?;
    let record = shared.image(key, deadline).await?;
    ImageServed::decode(&record).filter(|s| now_ms - s.served_at_ms <= window_ms)
}

/// Keeps a counted image for its click: here, and with `[redis]` for every edge.
fn remember_image(edge: &Edge, key: u64, served: ImageServed) {
    edge.images.remember(key, served, window_ms(edge));
    if let Some(shared) = &edge.shared {
        let window = edge.quality.rules.image_click_window;
        shared.remember_image(key, served.encode(), window.max(Duration::from_secs(1)));
    }
}

fn window_ms(edge: &Edge) -> i64 {
    i64::try_from(edge.quality.rules.image_click_window.as_millis()).unwrap_or(i64::MAX)
}

/// The click of a served image: to its ad's landing URL, counted once unless invalid.
async fn click(
    request: &AdRequest<'_>,
    loaded: &Arc<Loaded>,
    served: &ImageServed,
    now: Timestamp,
) -> (Response<Body>, Outcome) {
    let edge = request.edge;
    let data = &loaded.engine.snapshot().data;
    let charged = data
        .line_item(marquee_model::LineItemId(served.line_item))
        .is_some_and(|li| li.untokened_clicks == UntokenedClicks::Charged);
    let claims = Claims {
        placement: NonZeroU64::new(served.placement),
        line_item: served.line_item,
        creative: served.creative,
        user: served.user,
        nonce: served.nonce,
        issued_at: served.served_at_ms.div_euclid(1_000),
        amount_micros: Some(if charged { served.click_worth } else { 0 }),
        ..claims_of(edge, TokenKind::Click, now)
    };
    let answer = match data.creative(marquee_model::CreativeId(served.creative)) {
        Some(creative) => track::to_landing(edge, &claims, &creative.landing_url, now),
        None => crate::http::not_found(),
    };
    if answer.status() != StatusCode::FOUND {
        return (answer, Outcome::Fallback);
    }
    let visitor = Visitor::of(edge, request.headers, request.client);
    let elapsed_ms = now.as_millisecond() - served.served_at_ms;
    let invalid = edge
        .quality
        .screen(request.client, served.user, now.as_second())
        .or_else(|| {
            edge.quality
                .too_fast(Duration::from_millis(elapsed_ms.max(0).unsigned_abs()))
                .then_some(InvalidReason::TooFast)
        });
    match invalid {
        Some(reason) => log_invalid(edge, TokenKind::Click, &claims, reason, &visitor, now),
        None => {
            let event = untokened(TokenKind::Click, &claims, now);
            track::count_once(edge, Some(Arc::clone(loaded)), event, &visitor).await;
        }
    }
    (answer, Outcome::Ok)
}

/// The event an image-tag request of `format` would count.
fn counted_kind(format: AdFormat) -> TokenKind {
    match format {
        AdFormat::Click => TokenKind::Click,
        _ => TokenKind::Impression,
    }
}

/// The claims of an untokened event of `kind` issued `now`, living the click window; of no
/// decision until the caller names one.
fn claims_of(edge: &Edge, kind: TokenKind, now: Timestamp) -> Claims {
    Claims {
        kind,
        line_item: 0,
        creative: 0,
        placement: None,
        user: 0,
        issued_at: now.as_second(),
        lifetime: u32::try_from(edge.quality.rules.image_click_window.as_secs())
            .unwrap_or(u32::MAX)
            .max(1),
        nonce: 0,
        amount_micros: None,
    }
}
