//! The edge's HTTP endpoints: ad requests (`/ad`, `/ad.json`), tracking (`/t/i`, `/t/c`,
//! `/t/v`) and the async tag loader (`/tag.js`).

use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use jiff::Timestamp;
use marquee_engine::{Blocked, Context, Decision, Device, Request, Scratch, Slot, User, user_key};
use marquee_eventlog::{AppendError, Event, InvalidReason, Kind as EventKind};
use marquee_model::{CampaignId, Channel, Format, LineItemId, PlacementId};
use marquee_sharedstate::Profile;
use marquee_sharedstate::profiles::ATTRIBUTE_PREFIX;
use marquee_snapshot::{AdCode, CreativeEntry, SnapshotData};
use marquee_tracking::{Claims, Kind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::client::Client;
use crate::metrics::Outcome;
use crate::profiles;
use crate::query::{self, AdFormat, AdQuery};
use crate::render::{self, Values};
use crate::shared::{self, EdgeCaps};
pub(crate) use crate::visitor::Visitor;
use crate::{Edge, Fallback, Loaded, Stats};

pub(crate) type Body = Full<Bytes>;

/// The 1×1 transparent GIF answered by beacons.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];
const TAG_JS: &str = include_str!("tag.js");
pub(crate) const USER_COOKIE: &str = "mq_uid";
/// The sandbox of a creative's document: scripts and click-through windows, no same origin.
const CREATIVE_SANDBOX_POLICY: &str =
    "sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox";
/// Added to a landing URL: the conversion token the advertiser's page may send back.
const CONVERSION_PARAMETER: &str = "mq_conv";

/// Per worker thread: the engine's scratch memory, a random generator and text buffers, so
/// the hot path allocates little and shares nothing across cores.
pub(crate) struct Worker {
    pub(crate) scratch: Scratch,
    pub(crate) rng: Xoshiro256PlusPlus,
    text: String,
    /// The tracking URLs of the ad being filled ([`fill_tracked`]).
    pub(crate) urls: String,
}

thread_local! {
    pub(crate) static WORKER: RefCell<Worker> = RefCell::new(Worker {
        scratch: Scratch::default(),
        rng: Xoshiro256PlusPlus::seed_from_u64(seed()),
        text: String::with_capacity(8 * 1024),
        urls: String::with_capacity(512),
    });
}

/// A per-thread seed from the OS, or from the clock and thread if the OS has none to give.
fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut hasher);
    Timestamp::now().as_nanosecond().hash(&mut hasher);
    hasher.finish()
}

/// The generator an image tag's image and click requests both draw from, seeded by the key of
/// what they share (`image_tag::key`). The hash (SipHash-1-3) and the generator (xoshiro256++)
/// are fixed by their definitions, not left to std or rand, whose choices may change between
/// releases: during a rolling upgrade the image and its click may reach edges of different
/// builds.
fn image_tag_rng(key: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(key)
}

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

pub(crate) fn redirect(location: &str) -> Response<Body> {
    let mut answer = response(StatusCode::FOUND, "text/plain; charset=utf-8", Bytes::new());
    match HeaderValue::from_str(location) {
        Ok(value) => {
            answer.headers_mut().insert(header::LOCATION, value);
            answer
        }
        Err(_) => response(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "no such ad\n",
        ),
    }
}

fn bad_request(stats: &Stats, message: String) -> Response<Body> {
    Stats::bump(&stats.bad_requests);
    response(
        StatusCode::BAD_REQUEST,
        "text/plain; charset=utf-8",
        message + "\n",
    )
}

pub(crate) fn pixel() -> Response<Body> {
    response(StatusCode::OK, "image/gif", Bytes::from_static(PIXEL))
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

pub(crate) fn not_found() -> Response<Body> {
    response(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        "not found\n",
    )
}

/// `GET /metrics`: Prometheus text format.
pub(crate) fn metrics(edge: &Edge) -> Response<Body> {
    response(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        crate::metrics::render(edge),
    )
}

/// `GET /readyz`: 200 once a snapshot is loaded (ads can be served), 503 before.
pub(crate) fn readyz(edge: &Edge) -> Response<Body> {
    match edge.holder.version() {
        Some(version) => response(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            format!("ready: snapshot {version}\n"),
        ),
        None => response(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            "not ready: no snapshot loaded\n",
        ),
    }
}

/// The tag script, asking the browser for the client hints the ad requests it makes are read
/// by (`visitor.rs`).
pub(crate) fn tag_js() -> Response<Body> {
    let mut answer = response(
        StatusCode::OK,
        "application/javascript; charset=utf-8",
        Bytes::from_static(TAG_JS.as_bytes()),
    );
    answer.headers_mut().insert(
        hyper::header::HeaderName::from_static("accept-ch"),
        HeaderValue::from_static(marquee_device::ACCEPT_CH),
    );
    answer
}

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

/// One served ad, ready to answer in any format.
struct Served<'s> {
    placement: PlacementId,
    decision: Decision,
    creative: &'s CreativeEntry,
    /// The impression claims of the decision (its nonce identifies it).
    claims: Claims,
    /// Start and end of the filled HTML in the worker's text buffer.
    html: std::ops::Range<usize>,
}

/// The user id for this request, and whether a cookie must be set for it.
fn identify(
    edge: &Edge,
    query: &AdQuery<'_>,
    headers: &HeaderMap,
    rng: &mut Xoshiro256PlusPlus,
) -> (Option<String>, bool) {
    if !query.may_identify() {
        return (None, false);
    }
    if let Some(uid) = known_user(query, headers) {
        return (Some(uid.to_owned()), false);
    }
    if !edge.config.cookies {
        return (None, false);
    }
    (
        Some(format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())),
        true,
    )
}

/// The user id the request brings (`uid`, else the cookie), when it may be used.
fn known_user<'q>(query: &'q AdQuery<'_>, headers: &'q HeaderMap) -> Option<&'q str> {
    if !query.may_identify() {
        return None;
    }
    query
        .user_id
        .as_deref()
        .filter(|u| !u.is_empty() && u.len() <= 128)
        .or_else(|| cookie(headers, USER_COOKIE))
}

/// The format a shed request asked for, found without parsing the whole query: the fallback
/// must still be of the right kind (a pixel for an image tag, a script for the js tag).
fn format_only(query_text: &str) -> Option<AdFormat> {
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

/// An ad request that could not start (`max_in_flight` in progress): the fallback, at once.
pub(crate) fn ad_shed(edge: &Edge, query_text: &str, json: bool) -> Response<Body> {
    Stats::bump(&edge.stats.ad_requests);
    Stats::bump(&edge.stats.shed);
    fallback(edge, format_only(query_text), json)
}

/// `GET /ad` and `GET /ad.json`. Work still to do at `deadline` is abandoned: the answer is
/// the fallback (a placement already decided keeps its logged decision, which is not billed).
pub(crate) async fn ad(
    edge: &Arc<Edge>,
    query_text: &str,
    headers: &HeaderMap,
    client: &Client<'_>,
    json: bool,
    deadline: Instant,
) -> (Response<Body>, Outcome) {
    Stats::bump(&edge.stats.ad_requests);
    let query = match query::parse(query_text) {
        Ok(query) => query,
        Err(error) => {
            return (
                bad_request(&edge.stats, error.to_string()),
                Outcome::ClientError,
            );
        }
    };
    if query.placements.is_empty() {
        return (
            bad_request(&edge.stats, "query parameter `placement`: required".into()),
            Outcome::ClientError,
        );
    }
    if !json && query.placements.len() > 1 {
        return (
            bad_request(
                &edge.stats,
                "query parameter `placement`: one per /ad request; use /ad.json for several".into(),
            ),
            Outcome::ClientError,
        );
    }
    let Some(loaded) = edge.holder.current() else {
        return (fallback(edge, query.format, json), Outcome::Fallback);
    };
    // The image tag: refused where the placement does not take it, and a click whose image
    // was served goes to that image's ad (`untokened.rs`).
    let image_tag = query
        .format
        .filter(|f| !json && matches!(f, AdFormat::Img | AdFormat::Click));
    if let Some(format) = image_tag
        && let Some(answer) =
            untokened::before_decision(edge, &loaded, &query, format, headers, client, deadline)
                .await
    {
        return answer;
    }
    let late = |edge: &Edge| {
        Stats::bump(&edge.stats.late);
        (fallback(edge, query.format, json), Outcome::Late)
    };
    // The image tag's click request re-derives the decision its image request counted: it
    // must not count it again, nor see the cap that count may have filled.
    let shared = edge
        .shared
        .as_ref()
        .filter(|_| query.format != Some(AdFormat::Click));
    let profile = profiles::lookup(edge, known_user(&query, headers), deadline).await;
    // The key of the image tag's placement and cache buster: the seed of its draws, and where
    // its image is remembered for the click.
    let image_key = matches!(query.format, Some(AdFormat::Img | AdFormat::Click))
        .then(|| query.cache_buster.as_deref())
        .flatten()
        .map(|cb| crate::image_tag::key(&query.placements, cb));
    let visitor = Visitor::of(edge, headers, client);
    let step = WORKER.with(|worker| {
        let mut worker = worker.borrow_mut();
        let worker = &mut *worker;
        let (user_id, set_cookie) = identify(edge, &query, headers, &mut worker.rng);
        worker.text.clear();
        // The image tag's two requests (image, click) must reach the same decision: both draw
        // from a generator seeded by the placement and cache buster they share.
        let seeded = image_key.map(|key| std::mem::replace(&mut worker.rng, image_tag_rng(key)));
        let now = Timestamp::now();
        let mut served = Vec::with_capacity(query.placements.len());
        let mut decided: Vec<(LineItemId, CampaignId)> = Vec::new();
        for &placement in &query.placements {
            let caps = EdgeCaps {
                local: &edge.caps,
                shared,
                decided: &decided,
            };
            if Instant::now() >= deadline {
                if let Some(own) = seeded {
                    worker.rng = own;
                }
                return Step::Answered(late(edge), None);
            }
            if let Some(ad) = serve_one(
                edge,
                &loaded,
                &query,
                &visitor,
                user_id.as_deref(),
                profile.as_deref(),
                placement,
                now,
                &caps,
                worker,
            ) {
                // Only a request with more placements to come needs the list.
                if query.placements.len() > 1
                    && let Some(li) = loaded
                        .engine
                        .snapshot()
                        .data
                        .line_item(ad.decision.line_item)
                {
                    decided.push((li.id, li.campaign_id));
                }
                served.push(ad);
            }
        }
        if let Some(own) = seeded {
            worker.rng = own;
        }
        let data = &loaded.engine.snapshot().data;
        let counts_pending = shared.is_some()
            && served
                .iter()
                .any(|ad| shared::needs_count(data, ad.claims.user, ad.claims.line_item));
        let decided = Decided {
            served,
            user_id,
            set_cookie,
        };
        if counts_pending {
            // The answer waits for Redis: the text leaves the worker's buffer.
            return Step::Counting(decided, worker.text.clone());
        }
        Step::Answered(
            finish(edge, &query, json, &decided, &worker.text),
            untokened(query.format, json, &decided),
        )
    });
    let (answer, count) = match step {
        Step::Answered(answer, count) => (answer, count),
        Step::Counting(mut decided, text) => {
            if let Some(shared) = shared {
                let data = &loaded.engine.snapshot().data;
                let mut kept = Vec::with_capacity(decided.served.len());
                for ad in decided.served.drain(..) {
                    let (user, line_item) = (ad.claims.user, ad.claims.line_item);
                    if !shared::needs_count(data, user, line_item)
                        || shared::count_decision(shared, data, user, line_item, deadline).await
                    {
                        kept.push(ad);
                    } else {
                        Stats::bump(&edge.stats.shared_cap_refusals);
                        Stats::bump(&edge.stats.fallbacks);
                    }
                }
                decided.served = kept;
            }
            (
                finish(edge, &query, json, &decided, &text),
                untokened(query.format, json, &decided),
            )
        }
    };
    // Only an image or click actually sent counts: a redirect that could not be made (a URL
    // that is no valid `Location`) was answered with a 404.
    if let Some(counts) = count
        && answer.0.status() == StatusCode::FOUND
    {
        let image = untokened::Image {
            key: image_key,
            cache_buster: query.cache_buster.as_deref(),
        };
        untokened::after_decision(edge, image, &counts, headers, client).await;
    }
    answer
}

/// What an image tag's request counts once it is answered.
pub(crate) struct UntokenedEvent {
    kind: Kind,
    claims: Claims,
    /// The user id was made for this request (no cookie, no `uid`): it says nothing of the
    /// client, so no per-user rate is counted for it.
    new_user: bool,
}

/// What an image tag's request counts once it is answered: serving the image is the
/// impression, following the click the click (neither can carry a token).
fn untokened(
    format: Option<AdFormat>,
    json: bool,
    decided: &Decided<'_>,
) -> Option<UntokenedEvent> {
    let ad = decided.served.first().filter(|_| !json)?;
    let kind = match format? {
        AdFormat::Img if matches!(ad.creative.content, marquee_snapshot::Content::Image { .. }) => {
            Kind::Impression
        }
        AdFormat::Click => Kind::Click,
        _ => return None,
    };
    Some(UntokenedEvent {
        kind,
        claims: ad.claims,
        new_user: decided.set_cookie,
    })
}

/// Where an ad request stands once the engine has decided.
enum Step<'s> {
    /// The answer, and what its image tag request counts.
    Answered((Response<Body>, Outcome), Option<UntokenedEvent>),
    /// Decisions to count in Redis before answering, and the text their HTML ranges point in.
    Counting(Decided<'s>, String),
}

/// The decisions of one ad request, before they become its answer.
struct Decided<'s> {
    served: Vec<Served<'s>>,
    user_id: Option<String>,
    set_cookie: bool,
}

/// The answer to an ad request: its ads (or the fallback) and the user cookie if one is new.
fn finish(
    edge: &Edge,
    query: &AdQuery<'_>,
    json: bool,
    decided: &Decided<'_>,
    text: &str,
) -> (Response<Body>, Outcome) {
    let served = &decided.served;
    let outcome = if served.is_empty() {
        Outcome::Fallback
    } else {
        Outcome::Ok
    };
    let mut answer = if json {
        json_answer(served, text)
    } else {
        match served.first() {
            Some(ad) => single_answer(edge, ad, text, query.format, query.element.as_deref()),
            None => fallback(edge, query.format, false),
        }
    };
    if decided.set_cookie
        && let Some(uid) = &decided.user_id
        && let Ok(value) = HeaderValue::from_str(&user_cookie(edge, uid))
    {
        answer.headers_mut().insert(header::SET_COOKIE, value);
    }
    (answer, outcome)
}

/// The `Set-Cookie` value for our user id.
pub(crate) fn user_cookie(edge: &Edge, uid: &str) -> String {
    // The tag's request comes from the publisher's page, another site: a cookie must be
    // `SameSite=None`, which browsers accept only with `Secure`, so only over https.
    let same_site = if edge.config.public_url.starts_with("https://") {
        "None; Secure"
    } else {
        "Lax"
    };
    format!("{USER_COOKIE}={uid}; Max-Age=31536000; Path=/; SameSite={same_site}; HttpOnly")
}

#[allow(clippy::too_many_arguments)]
fn serve_one<'s>(
    edge: &Edge,
    loaded: &'s Loaded,
    query: &AdQuery<'_>,
    visitor: &Visitor,
    user_id: Option<&str>,
    profile: Option<&Profile>,
    placement: PlacementId,
    now: Timestamp,
    caps: &EdgeCaps<'_>,
    worker: &mut Worker,
) -> Option<Served<'s>> {
    let data: &'s SnapshotData = &loaded.engine.snapshot().data;
    let entry = data.placement(placement)?;
    let domain = data.site(entry.site_id).map(|site| site.domain.as_str());
    // `u_*` key-values are the profile's attributes; the page cannot claim them.
    let mut key_values: Vec<(&str, &str)> = query
        .key_values
        .iter()
        .filter(|(k, _)| !k.starts_with(ATTRIBUTE_PREFIX))
        .map(|(k, v)| (k.as_ref(), v.as_ref()))
        .collect();
    let mut segments: Vec<&str> = Vec::new();
    profiles::add_targeting(profile, &mut segments, &mut key_values);
    let sizes = if query.sizes.is_empty() {
        &entry.sizes[..]
    } else {
        &query.sizes[..]
    };
    // Our tags put banners and native ads in pages; a VAST creative (video, audio) has no
    // markup there, so it must not win the slot. (No formats at all means banner.)
    let mut page_formats = [Format::Banner; 2];
    let mut kept = 0;
    for format in entry
        .formats
        .iter()
        .filter(|f| matches!(f, Format::Banner | Format::Native))
    {
        if let Some(slot) = page_formats.get_mut(kept) {
            *slot = *format;
            kept += 1;
        }
    }
    if kept == 0 && !entry.formats.is_empty() {
        Stats::bump(&edge.stats.fallbacks);
        return None;
    }
    let request = Request {
        now,
        channel: Channel::Direct,
        placement: Some(placement),
        site: Some(entry.site_id),
        slot: Slot {
            sizes,
            formats: &page_formats[..kept],
            floor: None,
            ..Slot::default()
        },
        domain,
        page_url: query.page_url.as_deref(),
        device: Device {
            device_type: visitor.device.device_type,
            os: visitor.device.os,
            browser: visitor.device.browser,
            language: None,
            ip: None,
        },
        geo: visitor.geo(),
        user: User {
            id: user_id,
            segments: &segments,
        },
        key_values: &key_values,
        blocked: Blocked::default(),
        bid_currency: None,
    };
    let paced = edge.pacing.view(loaded, now);
    let mut context = Context {
        rng: &mut worker.rng,
        caps,
        pacing: &paced,
        // Ad requests carry no floor and no bid currency: the rates only rank remnant and
        // house bids of line items priced in different currencies (`select::rank`).
        rates: &edge.bidder.config.rates,
        scratch: &mut worker.scratch,
    };
    let Some(decision) = loaded.engine.decide(&request, &mut context) else {
        Stats::bump(&edge.stats.fallbacks);
        return None;
    };
    Stats::bump(&edge.stats.decisions);
    let creative = data.creative(decision.creative)?;
    let code = creative.ad_code.as_ref()?;
    let price = &data.line_item(decision.line_item)?.price;
    let claims = Claims {
        kind: Kind::Impression,
        line_item: decision.line_item.0,
        creative: decision.creative.0,
        placement: placement.0,
        user: user_id.map_or(0, user_key),
        issued_at: now.as_second(),
        lifetime: u32::try_from(edge.config.token_lifetime.as_secs()).unwrap_or(u32::MAX),
        nonce: worker.rng.next_u64(),
        amount_micros: Some(worth(price, Kind::Impression)),
    };
    let start = worker.text.len();
    let mut digits = itoa::Buffer::new();
    fill_tracked(
        edge,
        code,
        &claims,
        worth(price, Kind::Click),
        cache_buster(query.cache_buster.as_deref(), &mut worker.rng, &mut digits),
        &mut worker.urls,
        &mut worker.text,
    );
    // An image tag's image is its own impression (counted, and charged, as it is fetched);
    // every other answer carries a beacon whose impression is reserved now, on this edge's
    // lease, wherever the beacon lands.
    if !matches!(query.format, Some(AdFormat::Img | AdFormat::Click)) {
        edge.pacing.reserve(loaded, decision.line_item.0, now);
    }
    // An image tag's click request re-derives the decision its image request made and logged.
    if query.format != Some(AdFormat::Click) {
        log(edge, event(EventKind::Decision, &claims, now, visitor, 0));
    }
    Some(Served {
        placement,
        decision,
        creative,
        claims,
        html: start..worker.text.len(),
    })
}

/// Appends a tracking URL with its token signed straight into it.
fn append_tracking_url(edge: &Edge, path: &str, claims: &Claims, out: &mut String) {
    let base = edge.config.public_url.trim_end_matches('/');
    out.reserve(base.len() + path.len() + marquee_tracking::TOKEN_LEN);
    out.push_str(base);
    out.push_str(path);
    edge.keys.sign_into(claims, out);
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
        kind: Kind::Click,
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

/// Appends `code` filled for the impression `claims` describes: its signed impression beacon
/// and click redirect (the click's token carrying `click_worth`), the `cache_buster`, the
/// claims' placement and time. The URLs are built in `urls`, a buffer the worker keeps, so
/// filling allocates nothing but `out`'s growth (the ad path and the bid path both fill here).
pub(crate) fn fill_tracked(
    edge: &Edge,
    code: &AdCode,
    claims: &Claims,
    click_worth: u64,
    cache_buster: &str,
    urls: &mut String,
    out: &mut String,
) {
    let (impression_url, click_url) = signed_urls(edge, claims, click_worth, urls);
    render::fill(
        code,
        &Values {
            click_url,
            impression_url,
            cache_buster,
            placement: claims.placement,
            timestamp: claims.issued_at,
        },
        out,
    );
}

fn single_answer(
    edge: &Edge,
    ad: &Served<'_>,
    text: &str,
    format: Option<AdFormat>,
    element: Option<&str>,
) -> Response<Body> {
    let html = &text[ad.html.clone()];
    match format.unwrap_or(AdFormat::Html) {
        AdFormat::Html => {
            let mut answer = response(StatusCode::OK, "text/html; charset=utf-8", html.to_owned());
            // The creative is an advertiser's HTML, served from our origin (in `marquee serve`
            // the dashboard's too): the header sandboxes it as the async tag's iframe is, even
            // when the URL is opened on its own, so its scripts run in an opaque origin.
            answer.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CREATIVE_SANDBOX_POLICY),
            );
            answer
        }
        AdFormat::Js => {
            let (w, h) = ad.creative.size.map_or((0, 0), |s| (s.w, s.h));
            let mut js = String::with_capacity(html.len() + 512);
            js.push_str("(function(){var h=");
            render::json_string(html, &mut js);
            js.push_str(";var f=document.createElement('iframe');f.setAttribute('sandbox','allow-scripts allow-popups allow-popups-to-escape-sandbox');f.style.border='0';");
            js.push_str(&format!("f.width={w};f.height={h};f.srcdoc=h;var t="));
            match element {
                Some(id) => {
                    js.push_str("document.getElementById(");
                    render::json_string(id, &mut js);
                    js.push_str(");");
                }
                None => js.push_str("null;"),
            }
            js.push_str("var s=document.currentScript;if(t){t.appendChild(f);}else if(s&&s.parentNode){s.parentNode.insertBefore(f,s);}})();");
            response(StatusCode::OK, "application/javascript; charset=utf-8", js)
        }
        // The image tag cannot fire a beacon: serving the image is the impression, counted by
        // the caller once the answer is made (see `untokened`), as the click is.
        AdFormat::Img => match &ad.creative.content {
            marquee_snapshot::Content::Image { image_url, .. } => redirect(image_url),
            _ => pixel(),
        },
        AdFormat::Click => {
            let now = Timestamp::now();
            match landing_with_conversion(edge, &ad.claims, &ad.creative.landing_url, now) {
                Some(location) => redirect(&location),
                None => not_found(),
            }
        }
    }
}

fn json_answer(served: &[Served<'_>], text: &str) -> Response<Body> {
    use std::fmt::Write;
    let mut json = String::with_capacity(text.len() + 128 * served.len() + 16);
    json.push_str("{\"ads\":[");
    for (i, ad) in served.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        let (w, h) = ad.creative.size.map_or((0, 0), |s| (s.w, s.h));
        let _ = write!(
            json,
            "{{\"placement\":{},\"line_item\":{},\"creative\":{},\"width\":{w},\"height\":{h},\"html\":",
            ad.placement, ad.decision.line_item, ad.decision.creative
        );
        render::json_string(&text[ad.html.clone()], &mut json);
        json.push('}');
    }
    json.push_str("]}");
    response(StatusCode::OK, "application/json", json)
}

fn fallback(edge: &Edge, format: Option<AdFormat>, json: bool) -> Response<Body> {
    if json {
        return response(
            StatusCode::OK,
            "application/json",
            Bytes::from_static(b"{\"ads\":[]}"),
        );
    }
    match (&edge.config.fallback, format.unwrap_or(AdFormat::Html)) {
        (Fallback::Passback(url), AdFormat::Html | AdFormat::Img) => redirect(url),
        (_, AdFormat::Js) => response(
            StatusCode::OK,
            "application/javascript; charset=utf-8",
            Bytes::new(),
        ),
        (_, AdFormat::Click) => not_found(),
        (_, AdFormat::Img) => pixel(),
        (Fallback::Empty, AdFormat::Html) => {
            response(StatusCode::OK, "text/html; charset=utf-8", Bytes::new())
        }
    }
}

fn event(
    kind: EventKind,
    claims: &Claims,
    now: Timestamp,
    visitor: &Visitor,
    amount_micros: i64,
) -> Event {
    Event {
        kind,
        time_micros: now.as_microsecond(),
        line_item: claims.line_item,
        creative: claims.creative,
        placement: claims.placement,
        user: claims.user,
        country: visitor.country_bytes(),
        region: visitor.region_bytes(),
        device: visitor.device_type().map_or(0, |d| d as u8 + 1),
        amount_micros,
        event_id: u128::from(claims.nonce),
    }
}

/// Appends a non-billing event; a failure is counted, never fails the answer. Whether the log
/// took it.
pub(crate) fn log(edge: &Edge, event: Event) -> bool {
    match edge.log.append(&event) {
        Ok(_) => true,
        Err(error) => {
            Stats::bump(&edge.stats.log_errors);
            tracing::warn!(%error, "event not logged");
            false
        }
    }
}

/// Verifies a tracking token; counts the invalid ones.
fn verify(edge: &Edge, query_text: &str, kind: Kind, now: i64) -> Option<Claims> {
    let token = url::form_urlencoded::parse(query_text.as_bytes())
        .find(|(key, _)| key == "t")
        .map(|(_, value)| value)?;
    match edge.keys.verify_kind(&token, kind, now) {
        Ok(claims) => Some(claims),
        Err(error) => {
            Stats::bump(&edge.stats.invalid_tokens);
            tracing::debug!(%error, ?kind, "tracking token refused");
            None
        }
    }
}

/// What an event of `kind` is worth for a line item priced `price`, in micros of its
/// currency: for an impression the CPM rate (spend is the sum of rates / 1000, divided once
/// when aggregated, so no impression is rounded), for a click the CPC price; nothing for other
/// events or pricing. Signed into the decision's tokens, so that the price when the ad was
/// chosen is the one its beacon and click are logged at.
fn worth(price: &marquee_model::Price, kind: Kind) -> u64 {
    use marquee_model::PricingModel;
    match (kind, price.model) {
        (Kind::Impression, PricingModel::Cpm) | (Kind::Click, PricingModel::Cpc) => {
            u64::try_from(price.amount_micros.0).unwrap_or(0)
        }
        _ => 0,
    }
}

/// What a counted event of `kind` is worth: what its token carries for its own kind, else (a
/// version 1 token from before an upgrade, or an image tag's click, whose decision is made again
/// now) its line item's price now. Nothing for an exchange bid's tokens (no placement): what it
/// costs is the clearing price its billing notice brings.
fn amount(data: &SnapshotData, claims: &Claims, kind: Kind) -> i64 {
    if claims.placement == 0 {
        return 0;
    }
    let carried = claims.amount_micros.filter(|_| claims.kind == kind);
    let micros = match carried {
        Some(carried) => carried,
        None => data
            .line_item(LineItemId(claims.line_item))
            .map_or(0, |li| worth(&li.price, kind)),
    };
    i64::try_from(micros).unwrap_or(i64::MAX)
}

/// `GET /t/i`, `/t/c`, `/t/v`: count the event once if its token holds, then answer. A click's
/// answer is made first: one whose landing URL makes no redirect gets a 404 and is not counted.
pub(crate) async fn track(
    edge: &Arc<Edge>,
    kind: Kind,
    query_text: &str,
    headers: &HeaderMap,
    client: &Client<'_>,
) -> Response<Body> {
    let now = Timestamp::now();
    let claims = verify(edge, query_text, kind, now.as_second());
    let loaded = edge.holder.current();
    let (answer, counts) = match kind {
        Kind::Impression | Kind::Conversion => (pixel(), true),
        Kind::Click => click_redirect(edge, loaded.as_deref(), claims.as_ref(), now),
    };
    if let Some(claims) = &claims
        && counts
    {
        let visitor = Visitor::of(edge, headers, client);
        // A click within the minimum delay of its decision (the token's issue time, in whole
        // seconds: a click is judged at most a second later than it came) is no person's.
        let elapsed_ms = now.as_millisecond() - claims.issued_at.saturating_mul(1_000);
        let too_fast = kind == Kind::Click
            && edge.quality.too_fast(std::time::Duration::from_millis(
                elapsed_ms.max(0).unsigned_abs(),
            ));
        let expires_at = claims.expires_at();
        let without_impression = kind == Kind::Click
            && edge.quality.rules.clicks_need_impression
            && !edge
                .replay_guard(Kind::Impression)
                .seen(claims.nonce, expires_at, now.as_second());
        let invalid = edge
            .quality
            .screen(client, claims.user, now.as_second())
            .or(too_fast.then_some(InvalidReason::TooFast))
            .or(without_impression.then_some(InvalidReason::ClickWithoutImpression));
        if let Some(reason) = invalid {
            log_invalid(edge, kind, claims, reason, &visitor, now);
            return answer;
        }
        let counted = count_once(
            edge,
            loaded,
            kind,
            claims,
            expires_at,
            now,
            &visitor,
            Source::Token,
        )
        .await;
        // A conversion token sent again is logged as invalid; repeated impressions and clicks
        // are the same event seen twice (a browser's retry), not a second one.
        if kind == Kind::Conversion && counted == Counted::Repeat {
            log_invalid(
                edge,
                Kind::Conversion,
                claims,
                InvalidReason::RepeatConversion,
                &visitor,
                now,
            );
        }
    }
    answer
}

/// Logs an event the traffic-quality screen judged invalid, with its reason (in the amount
/// field) and an id of its own: each invalid request is a record of its own. It is counted,
/// capped, charged and paced nowhere.
pub(crate) fn log_invalid(
    edge: &Edge,
    kind: Kind,
    claims: &Claims,
    reason: InvalidReason,
    visitor: &Visitor,
    now: Timestamp,
) {
    edge.quality.count(kind, reason);
    let event_kind = match kind {
        Kind::Impression => EventKind::InvalidImpression,
        Kind::Click => EventKind::InvalidClick,
        Kind::Conversion => EventKind::InvalidConversion,
    };
    let id = WORKER.with(|worker| worker.borrow_mut().rng.next_u64());
    log(
        edge,
        Event {
            event_id: u128::from(id),
            ..event(event_kind, claims, now, visitor, i64::from(reason.code()))
        },
    );
}

/// Counts a delivery (an impression, or an exchange's billing notice) against the user's
/// frequency caps.
pub(crate) fn record_delivery(
    edge: &Edge,
    loaded: &Loaded,
    user: u64,
    line_item: u64,
    now: Timestamp,
) {
    if user == 0 {
        return;
    }
    let data = &loaded.engine.snapshot().data;
    let Some(li) = data.line_item(marquee_model::LineItemId(line_item)) else {
        return;
    };
    let campaign_caps = data
        .campaign(li.campaign_id)
        .map_or(&[][..], |c| &c.frequency_caps[..]);
    edge.caps.record(
        user,
        (li.id, &li.frequency_caps),
        (li.campaign_id, campaign_caps),
        now,
    );
}

/// Sends a click to its creative's landing URL, with a conversion token appended; nothing in
/// the request can name another destination. Also whether the click may be counted: not when
/// the landing URL makes no redirect (the visitor never reaches the advertiser). A click on a
/// creative no longer in the snapshot gets a 404 too, but its ad was shown and clicked: it
/// counts, as before.
fn click_redirect(
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
        let gone = response(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "this ad is no longer available\n",
        );
        return (gone, true);
    };
    let answer = match landing_with_conversion(edge, claims, landing, now) {
        Some(location) => redirect(&location),
        None => not_found(),
    };
    let redirected = answer.status() == StatusCode::FOUND;
    (answer, redirected)
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
        kind: Kind::Conversion,
        issued_at: now.as_second(),
        ..*claims
    });
    url.query_pairs_mut()
        .append_pair(CONVERSION_PARAMETER, &conversion);
    Some(url.into())
}

/// Until when the replay guard remembers an image tag's event, which has no token to expire:
/// the end of the current window of a grid of token lifetimes offset by the nonce. Every
/// fetch of the same image or click within one window files it under the same expiry, so
/// repeats are found wherever in the window they come (an expiry of fetch time + lifetime
/// would file each fetch in the bucket of its own minute, where the first is not). A re-fetch
/// after the window's end counts again on this edge (with a gap `g`, probability `g` /
/// lifetime); the manager dedupes it by event id.
fn untokened_expiry(claims: &Claims, now: i64) -> i64 {
    let lifetime = i64::from(claims.lifetime.max(1));
    // Below `lifetime`, itself below 2^32: fits.
    let phase = i64::try_from(claims.nonce % lifetime.unsigned_abs()).unwrap_or(0);
    now - (now - phase).rem_euclid(lifetime) + lifetime
}

/// Whether [`count_once`] counted its event or found it counted before.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    First,
    Repeat,
}

/// The instant a token's claims were issued at.
fn claim_time(claims: &Claims) -> Timestamp {
    Timestamp::from_second(claims.issued_at).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Where a counted event's decision was made, which says what counting it has left to do.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A signed token of a decision an edge of this installation made: its impression was
    /// reserved on that edge's budget lease and is settled here, and it is recorded against
    /// the user's frequency caps.
    Token,
    /// An image tag's request, which is its own decision: its impression is reserved and
    /// settled at once, and not recorded against caps (a cap the image filled must not change
    /// which ad another image of the same cache buster shows: the draw is seeded by it).
    ImageTag,
}

/// Counts an impression, click or conversion once: its nonce is claimed in the kind's replay
/// guard (remembered until `expires_at`), the event logged with what it is worth — in strict
/// mode durable once the fsync that covers it is done — and only once the log has it, counted,
/// charged to the line item's budget lease and recorded against caps. An event the log refused
/// or lost is none of these, and its nonce is forgotten so that a retry counts.
#[allow(clippy::too_many_arguments)]
async fn count_once(
    edge: &Arc<Edge>,
    loaded: Option<Arc<Loaded>>,
    kind: Kind,
    claims: &Claims,
    expires_at: i64,
    now: Timestamp,
    visitor: &Visitor,
    source: Source,
) -> Counted {
    let event_kind = match kind {
        Kind::Impression => EventKind::Impression,
        Kind::Click => EventKind::Click,
        Kind::Conversion => EventKind::Conversion,
    };
    if !edge
        .replay_guard(kind)
        .first_time(claims.nonce, expires_at, now.as_second())
    {
        Stats::bump(&edge.stats.repeats);
        return Counted::Repeat;
    }
    let amount = loaded
        .as_deref()
        .map_or(0, |l| amount(&l.engine.snapshot().data, claims, kind));
    let event = event(event_kind, claims, now, visitor, amount);
    let claims = *claims;
    commit_and_settle(edge, &event, move |edge, logged| {
        settle(
            edge,
            loaded.as_deref(),
            kind,
            &claims,
            expires_at,
            now,
            source,
            logged,
        );
    })
    .await;
    Counted::First
}

/// What [`count_once`] does once the log has answered for its event.
#[allow(clippy::too_many_arguments)]
fn settle(
    edge: &Edge,
    loaded: Option<&Loaded>,
    kind: Kind,
    claims: &Claims,
    expires_at: i64,
    now: Timestamp,
    source: Source,
    logged: Result<(), AppendError>,
) {
    if let Err(error) = logged {
        edge.replay_guard(kind)
            .forget(claims.nonce, expires_at, now.as_second());
        Stats::bump(&edge.stats.log_errors);
        tracing::error!(%error, ?kind, "billing event not logged");
        return;
    }
    Stats::bump(match kind {
        Kind::Impression => &edge.stats.impressions,
        Kind::Click => &edge.stats.clicks,
        Kind::Conversion => &edge.stats.conversions,
    });
    let Some(loaded) = loaded else {
        return;
    };
    // An exchange bid's impression (no placement) counts towards caps on billing.
    if kind == Kind::Impression && claims.placement != 0 && source == Source::Token {
        record_delivery(edge, loaded, claims.user, claims.line_item, now);
    }
    bill(edge, loaded, claims, kind, source);
}

/// Appends a billing event ([`EventLog::commit`](marquee_eventlog::EventLog::commit)) and
/// runs `settle` with the outcome once the log gives it, whatever happens to the request
/// meanwhile.
///
/// Most commits are settled at once, here: in `group` durability and when the append is
/// refused, the log answers on the first poll (no task, no allocation). In `strict`
/// durability the answer waits for the fsync, and a client that disconnects meanwhile makes
/// hyper drop the handler's future: the event, already appended, would then be counted by the
/// manager but never charged to the budget lease or recorded against caps (and, if the fsync
/// failed, its nonce never forgotten). So the wait and `settle` run in a task of their own,
/// which the answer waits for but a dropped request cannot cancel. Charging before the wait
/// would have been simpler but not correct: an fsync that fails loses the event, which must
/// then be neither charged nor capped, and only the outcome of the wait tells.
pub(crate) async fn commit_and_settle<S>(edge: &Arc<Edge>, event: &Event, settle: S)
where
    S: FnOnce(&Edge, Result<(), AppendError>) + Send + 'static,
{
    use std::task::{Context, Poll, Waker};
    let mut durable = edge.log.commit(event);
    // A no-op waker is enough to ask: if the answer is not there yet, the task below polls
    // again with its own (the log replaces the registered waker), so no wake-up is lost.
    let first = std::pin::Pin::new(&mut durable).poll(&mut Context::from_waker(Waker::noop()));
    let durable = match first {
        Poll::Ready(logged) => return settle(edge, logged),
        Poll::Pending => durable,
    };
    let waiting = {
        let edge = Arc::clone(edge);
        async move { settle(&edge, durable.await) }
    };
    match tokio::runtime::Handle::try_current() {
        // A task that panicked has nothing left to do: the answer is the same either way.
        Ok(runtime) => {
            let _ = runtime.spawn(waiting).await;
        }
        Err(_) => waiting.await,
    }
}

/// Charges a counted impression or click to the line item's budget lease: an impression
/// settles the reservation its decision made (an image tag's is its own decision: reserved and
/// settled at once), a click is charged as it comes. An exchange bid's impression (no
/// placement) is charged by its billing notice instead, and so is its click under a spend goal
/// (the exchange is paid its clearing price, not our price per click).
fn bill(edge: &Edge, loaded: &Loaded, claims: &Claims, kind: Kind, source: Source) {
    use marquee_pacing::Billable;
    let exchange = claims.placement == 0;
    let spend_goal = || {
        crate::pacing::has_spend_goal(&loaded.engine.snapshot().data, LineItemId(claims.line_item))
    };
    // A click its token says is worth nothing (an image tag's click its line item does not
    // charge) spends nothing, so it takes nothing from a spend goal's lease.
    if kind == Kind::Click && claims.amount_micros == Some(0) && !exchange && spend_goal() {
        return;
    }
    let pacing = &edge.pacing;
    let charged = match kind {
        Kind::Impression if !exchange => {
            if source == Source::ImageTag {
                pacing.reserve(loaded, claims.line_item, claim_time(claims));
            }
            pacing.settle(loaded, claims.line_item, claims.issued_at)
        }
        Kind::Click if !exchange || !spend_goal() => {
            pacing.bill(loaded, claims.line_item, Billable::Click, None)
        }
        _ => return,
    };
    shared::charge(edge, claims.line_item, charged);
}

mod untokened;

#[cfg(test)]
mod counting_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// The values come from the algorithms' definitions (SipHash-1-3 with zero keys over the
    /// placements' little-endian bytes, 0xff and the cache buster; SplitMix64 seeding
    /// xoshiro256++), computed outside this code base: a build whose hash or generator differs
    /// would send an image tag's click to another ad than its image showed.
    #[test]
    fn image_tag_draws_do_not_change_between_builds() {
        for (placements, cache_buster, draws) in [
            (
                &[2][..],
                "12345",
                [0xd9e3_cd47_bee7_30e6, 0xa0c9_f54e_8658_a73e],
            ),
            (
                &[2][..],
                "12346",
                [0x84ae_d141_e499_6485, 0xecd6_735a_423c_52a0],
            ),
            (
                &[3][..],
                "12345",
                [0x5acf_ff7a_0b0f_ce05, 0x13bc_6797_bde6_d92e],
            ),
        ] {
            let placements: Vec<PlacementId> = placements.iter().map(|&p| PlacementId(p)).collect();
            let mut rng = image_tag_rng(crate::image_tag::key(&placements, cache_buster));
            assert_eq!(
                [rng.next_u64(), rng.next_u64()],
                draws,
                "{placements:?} {cache_buster}"
            );
        }
    }
}
