//! The image tag's two requests, which carry no signed token, judged before they count:
//!
//! 1. **Placement**: a placement that does not take the image tag (`image_tag = off`) answers
//!    the fallback; the request is logged as invalid (`untokened_disabled`).
//! 2. **Click of a served image**: a click whose image this installation served within the
//!    click window (found here, or in Redis) goes to that image's ad and counts once, unless the
//!    screen finds it invalid or too fast. Its line item charges it only if it charges
//!    untokened clicks.
//! 3. Otherwise the decision is made as for any ad request (`handlers::ad`), and then:
//!    **the image** counts once per cache buster if its cache buster is real and the screen
//!    (with the image-tag rate) passes it, and is remembered for its click; **a click** whose
//!    image was not found is redirected to the ad the same draw picks, and logged as invalid
//!    (`click_without_impression`, or `no_cache_buster`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::HeaderMap;
use hyper::{Response, StatusCode};
use jiff::Timestamp;
use marquee_eventlog::InvalidReason;
use marquee_model::{ImageTag, UntokenedClicks};
use marquee_tracking::{Claims, Kind};

use super::{
    Body, Counted, Source, UntokenedEvent, Visitor, count_once, fallback, landing_with_conversion,
    log_invalid, not_found, redirect, untokened_expiry, worth,
};
use crate::client::Client;
use crate::image_tag::{self, ImageServed};
use crate::metrics::Outcome;
use crate::query::{AdFormat, AdQuery};
use crate::{Edge, Loaded};

/// Steps 1 and 2: an answer, or `None` to decide as usual.
pub(super) async fn before_decision(
    edge: &Arc<Edge>,
    loaded: &Arc<Loaded>,
    query: &AdQuery<'_>,
    format: AdFormat,
    headers: &HeaderMap,
    client: &Client<'_>,
    deadline: Instant,
) -> Option<(Response<Body>, Outcome)> {
    let now = Timestamp::now();
    let placement = *query.placements.first()?;
    let data = &loaded.engine.snapshot().data;
    let entry = data.placement(placement);
    if entry.is_none_or(|p| p.image_tag != ImageTag::On) {
        // A placement not in the snapshot is logged under none: the manager would drop it.
        let known = entry.map_or(0, |p| p.id.0);
        let claims = claims_of(edge, Kind::Impression, known, 0, 0, 0, 0, now);
        let visitor = Visitor::of(edge, headers, client);
        let kind = counted_kind(format);
        log_invalid(
            edge,
            kind,
            &claims,
            InvalidReason::UntokenedDisabled,
            &visitor,
            now,
        );
        return Some((fallback(edge, Some(format), false), Outcome::Fallback));
    }
    if format != AdFormat::Click {
        return None;
    }
    let cache_buster = image_tag::cache_buster(query.cache_buster.as_deref())?;
    let key = image_tag::key(&query.placements, cache_buster);
    let served = find_image(edge, key, now, deadline).await?;
    Some(click(edge, loaded, &served, headers, client, now).await)
}

/// What an image-tag request says of its image: the cache buster it brought and the key of
/// placement and cache buster (`image_tag::key`, computed once for the draws' seed).
pub(super) struct Image<'q> {
    pub key: Option<u64>,
    pub cache_buster: Option<&'q str>,
}

/// Step 3, once the decision's answer was made (an image or a redirect actually sent).
pub(super) async fn after_decision(
    edge: &Arc<Edge>,
    image: Image<'_>,
    event: &UntokenedEvent,
    headers: &HeaderMap,
    client: &Client<'_>,
) {
    let (kind, claims) = (event.kind, &event.claims);
    let rate_user = if event.new_user { 0 } else { claims.user };
    let now = Timestamp::now();
    let visitor = Visitor::of(edge, headers, client);
    let cache_buster = image_tag::cache_buster(image.cache_buster);
    let invalid = match (kind, cache_buster) {
        (_, None) => Some(InvalidReason::NoCacheBuster),
        (Kind::Click, Some(_)) => Some(InvalidReason::ClickWithoutImpression),
        _ => edge
            .quality
            .screen_image(client, rate_user, now.as_second()),
    };
    if let Some(reason) = invalid {
        log_invalid(edge, kind, claims, reason, &visitor, now);
        return;
    }
    let Some(key) = image.key.filter(|_| cache_buster.is_some()) else {
        return;
    };
    let loaded = edge.holder.current();
    let click_worth = loaded
        .as_deref()
        .and_then(|l| {
            let data = &l.engine.snapshot().data;
            data.line_item(marquee_model::LineItemId(claims.line_item))
                .map(|li| worth(&li.price, Kind::Click))
        })
        .unwrap_or(0);
    // Not recorded against caps: a cap the image filled must not change which ad another
    // image of the same cache buster shows (the draw is seeded by it).
    let expires_at = untokened_expiry(claims, now.as_second());
    let counted = count_once(
        edge,
        loaded,
        kind,
        claims,
        expires_at,
        now,
        &visitor,
        Source::ImageTag,
    )
    .await;
    // Remembered for its click once counted; a fetch again of the same image changes nothing.
    if counted == Counted::First {
        let served = ImageServed {
            line_item: claims.line_item,
            creative: claims.creative,
            placement: claims.placement,
            nonce: claims.nonce,
            user: claims.user,
            served_at_ms: now.as_millisecond(),
            click_worth,
        };
        remember_image(edge, key, served);
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
    edge: &Arc<Edge>,
    loaded: &Arc<Loaded>,
    served: &ImageServed,
    headers: &HeaderMap,
    client: &Client<'_>,
    now: Timestamp,
) -> (Response<Body>, Outcome) {
    let data = &loaded.engine.snapshot().data;
    let charged = data
        .line_item(marquee_model::LineItemId(served.line_item))
        .is_some_and(|li| li.untokened_clicks == UntokenedClicks::Charged);
    let mut claims = claims_of(
        edge,
        Kind::Click,
        served.placement,
        served.line_item,
        served.creative,
        served.user,
        served.nonce,
        now,
    );
    claims.issued_at = served.served_at_ms.div_euclid(1_000);
    claims.amount_micros = Some(if charged { served.click_worth } else { 0 });
    let answer = match data.creative(marquee_model::CreativeId(served.creative)) {
        Some(creative) => {
            match landing_with_conversion(edge, &claims, &creative.landing_url, now) {
                Some(location) => redirect(&location),
                None => not_found(),
            }
        }
        None => not_found(),
    };
    if answer.status() != StatusCode::FOUND {
        return (answer, Outcome::Fallback);
    }
    let visitor = Visitor::of(edge, headers, client);
    let elapsed_ms = now.as_millisecond() - served.served_at_ms;
    let invalid = edge
        .quality
        .screen(client, served.user, now.as_second())
        .or_else(|| {
            edge.quality
                .too_fast(Duration::from_millis(elapsed_ms.max(0).unsigned_abs()))
                .then_some(InvalidReason::TooFast)
        });
    match invalid {
        Some(reason) => log_invalid(edge, Kind::Click, &claims, reason, &visitor, now),
        None => {
            let expires_at = untokened_expiry(&claims, now.as_second());
            count_once(
                edge,
                Some(Arc::clone(loaded)),
                Kind::Click,
                &claims,
                expires_at,
                now,
                &visitor,
                Source::ImageTag,
            )
            .await;
        }
    }
    (answer, Outcome::Ok)
}

/// The event an image-tag request of `format` would count.
fn counted_kind(format: AdFormat) -> Kind {
    match format {
        AdFormat::Click => Kind::Click,
        _ => Kind::Impression,
    }
}

/// The claims an untokened event is logged and counted under, living the click window.
#[allow(clippy::too_many_arguments)]
fn claims_of(
    edge: &Edge,
    kind: Kind,
    placement: u64,
    line_item: u64,
    creative: u64,
    user: u64,
    nonce: u64,
    now: Timestamp,
) -> Claims {
    Claims {
        kind,
        line_item,
        creative,
        placement,
        user,
        issued_at: now.as_second(),
        lifetime: u32::try_from(edge.quality.rules.image_click_window.as_secs())
            .unwrap_or(u32::MAX)
            .max(1),
        nonce,
        amount_micros: None,
    }
}
