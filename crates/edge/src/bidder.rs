//! The OpenRTB bidder: `POST /openrtb2/bid` and `/openrtb2/bid/{exchange}`, the win, billing and
//! loss notices (`GET /openrtb2/win|bill|loss`), and user sync (`GET /sync`, `/sync/out`).
//!
//! A bid request is decided imp by imp with the same engine as ad requests, on the exchange
//! channel: each imp becomes an engine [`Request`] borrowed from the parsed body, one user and
//! cap context serves every imp. The response is checked with
//! [`marquee_openrtb::validate_response`] before it leaves; a bid that fails is dropped and
//! counted. Spend and frequency caps count on billing notices, never on wins or on the `adm`'s
//! own impression beacon (whose impression is logged with amount 0). See
//! `docs/life-of-a-bid-request.md`.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use jiff::Timestamp;
use marquee_engine::{
    Blocked, Context, Deal, Decision, Device, Floor, Geo, ImageNeed, MediaRules, NativeNeeds,
    Request, Slot, TextNeed, User, user_key,
};
use marquee_eventlog::{Event, Kind as EventKind};
use marquee_gateway::RateConverter;
use marquee_model::{
    CampaignId, Channel, Currency, CurrencyRates, DeviceType, Format, LineItemId, Micros, Rounding,
    Size,
};
use marquee_openrtb::{
    Bid, BidRequest, BidResponse, DataAssetType, ImageAssetType, Imp, MarkupType, NativeCreative,
    NativeImage, NativeRequest, NoBidReason, PriceCrypto, PriceError, SeatBid, decode_body,
    parse_notice_price, validate_response,
};
use marquee_snapshot::{Content, CreativeEntry, SnapshotData};
use marquee_tracking::{Claims, Kind, ReplayConfig, ReplayGuard};
use rand::{Rng, RngExt as _};

use crate::handlers::{self, Body, WORKER, Worker};
use crate::metrics::Outcome;
use crate::notice::{self, NoticeClaims};
use crate::profiles;
use crate::shared::{self, EdgeCaps};
use crate::sync::UserSyncs;
use crate::visitor::{self, Visitor};
use crate::{Edge, Loaded, Stats};

/// One exchange's settings (`[exchanges.NAME]` over `[bidder]`; the unnamed endpoint uses
/// `[bidder]` alone).
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The path segment of `/openrtb2/bid/{name}`; empty for `/openrtb2/bid`.
    pub name: String,
    /// Our seat (`seatbid.seat`, checked against `wseat`/`bseat`).
    pub seat: String,
    /// The currency we bid in when the request allows it.
    pub currency: Currency,
    /// Keys for encrypted `${AUCTION_PRICE}` values.
    pub crypto: Option<PriceCrypto>,
    /// Taken off `tmax` for the network to and from the exchange.
    pub latency_margin: Duration,
    /// The time allowed when a request has no `tmax`.
    pub default_tmax: Duration,
    /// The largest body accepted (as sent, and after gzip).
    pub max_body_bytes: usize,
    /// Bids logged, per thousand.
    pub log_bids_per_mille: u32,
    /// Answer a no-bid with `{"id":…,"nbr":…}` (200) instead of an empty 204.
    pub no_bid_reason: bool,
    /// Where `/sync/out` sends the browser; `{uid}` becomes our user id.
    pub sync_url: Option<String>,
    /// The exchange filters invalid traffic itself: its requests skip our crawler and
    /// data-centre screen.
    pub filters_invalid_traffic: bool,
}

/// The longest `tmax` honoured. Exchanges allow a second or so; a request asking for more is
/// answered within this, so that no request holds a worker for minutes.
const MAX_TMAX: Duration = Duration::from_secs(10);

impl Exchange {
    /// When work on a request that arrived at `started` stops: its `tmax` (milliseconds, at
    /// most [`MAX_TMAX`]) or this exchange's default, less the latency margin.
    pub(crate) fn deadline(&self, started: Instant, tmax: Option<u32>) -> Instant {
        let tmax = tmax.map_or(self.default_tmax, |ms| {
            Duration::from_millis(u64::from(ms)).min(MAX_TMAX)
        });
        started + tmax.saturating_sub(self.latency_margin)
    }
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange {
            name: String::new(),
            seat: "marquee".into(),
            currency: Currency::USD,
            crypto: None,
            latency_margin: Duration::from_millis(10),
            default_tmax: Duration::from_millis(100),
            max_body_bytes: 64 * 1024,
            log_bids_per_mille: 1_000,
            no_bid_reason: false,
            sync_url: None,
            filters_invalid_traffic: false,
        }
    }
}

/// The bidder's settings.
#[derive(Debug, Clone)]
pub struct BidderConfig {
    /// `/openrtb2/bid`'s settings.
    pub default: Exchange,
    /// Named exchanges, for `/openrtb2/bid/{name}`.
    pub exchanges: Vec<Exchange>,
    /// Rates for floors and bids in other currencies.
    pub rates: CurrencyRates,
    /// How many user matches the edge keeps in memory.
    pub sync_capacity: usize,
}

impl Default for BidderConfig {
    fn default() -> Self {
        BidderConfig {
            default: Exchange::default(),
            exchanges: Vec::new(),
            rates: CurrencyRates::new(Currency::USD),
            sync_capacity: 1_000_000,
        }
    }
}

/// Codes in the `creative` field of no-bid events: OpenRTB's no-bid reasons where one fits,
/// Marquee's own from 500 (the range OpenRTB leaves to others) where none does.
pub mod no_bid_code {
    /// No snapshot loaded yet.
    pub const TECHNICAL_ERROR: u64 = 1;
    /// The device's user agent is a known crawler's.
    pub const KNOWN_WEB_CRAWLER: u64 = 3;
    /// The device's address is in a data-centre or hosting network.
    pub const DATA_CENTER: u64 = 5;
    /// `tmax` left no time, or the deadline passed while deciding.
    pub const INSUFFICIENT_TIME: u64 = 15;
    /// No line item could bid on the imp.
    pub const NO_MATCH: u64 = 500;
    /// `wseat`/`bseat` exclude our seat.
    pub const SEAT_EXCLUDED: u64 = 501;
    /// None of the request's currencies is ours or in the rate table.
    pub const CURRENCY: u64 = 502;
    /// The bid failed the response validation and was dropped.
    pub const INVALID_BID: u64 = 503;
    /// `bcat` is in another taxonomy than our categories' (IAB 1.0, `cattax` 1): none of our
    /// creatives can be shown to be allowed.
    pub const CATEGORY_TAXONOMY: u64 = 504;
}

/// The bidder's counters; exported as metrics.
#[derive(Debug, Default)]
pub struct BidStats {
    pub requests: AtomicU64,
    pub bids: AtomicU64,
    /// Requests answered without a bid.
    pub no_bids: AtomicU64,
    /// Bids dropped because they failed the response validation.
    pub invalid_bids: AtomicU64,
    /// Requests answered 204 at once because `max_in_flight` were in progress.
    pub shed: AtomicU64,
    /// Requests answered 204 because their deadline (`tmax` less the margin) passed.
    pub late: AtomicU64,
    pub test_requests: AtomicU64,
    pub wins: AtomicU64,
    pub billings: AtomicU64,
    pub losses: AtomicU64,
    /// Notices whose token was malformed, forged, expired or for another auction, or whose
    /// price could not be read.
    pub invalid_notices: AtomicU64,
    /// Notices already counted (exchanges retry billing).
    pub repeated_notices: AtomicU64,
    /// Notices of test requests: answered, not counted.
    pub test_notices: AtomicU64,
    pub syncs: AtomicU64,
    /// Malformed bid requests by reason label (rare: a lock is fine here).
    bad_requests: Mutex<Vec<(&'static str, u64)>>,
}

impl BidStats {
    fn bad_request(&self, label: &'static str) {
        let mut counts = self
            .bad_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }

    /// Malformed bid requests counted so far, by reason label.
    pub fn bad_requests(&self) -> Vec<(&'static str, u64)> {
        self.bad_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn load(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// The bidder's state on one edge.
#[derive(Debug)]
pub struct Bidder {
    pub config: BidderConfig,
    pub syncs: UserSyncs,
    pub stats: BidStats,
    wins_seen: ReplayGuard,
    billings_seen: ReplayGuard,
    losses_seen: ReplayGuard,
}

impl Bidder {
    pub fn new(config: BidderConfig) -> Bidder {
        Bidder::with_replay(config, ReplayConfig::default())
    }

    /// [`Bidder::new`] with its notices' replay guards sized by `replay`.
    pub(crate) fn with_replay(config: BidderConfig, replay: ReplayConfig) -> Bidder {
        Bidder {
            syncs: UserSyncs::new(config.sync_capacity),
            config,
            stats: BidStats::default(),
            wins_seen: ReplayGuard::new(replay),
            billings_seen: ReplayGuard::new(replay),
            losses_seen: ReplayGuard::new(replay),
        }
    }

    /// Replaces the notices' replay guards with empty ones sized by `replay` (before serving).
    pub(crate) fn set_replay(&mut self, replay: ReplayConfig) {
        self.wins_seen = ReplayGuard::new(replay);
        self.billings_seen = ReplayGuard::new(replay);
        self.losses_seen = ReplayGuard::new(replay);
    }

    /// The notices' replay guards with their kinds, as labelled in metrics.
    pub(crate) fn replay_guards(&self) -> [(&'static str, &ReplayGuard); 3] {
        [
            ("win", &self.wins_seen),
            ("billing", &self.billings_seen),
            ("loss", &self.losses_seen),
        ]
    }

    /// The settings for `/openrtb2/bid` (`None`) or `/openrtb2/bid/{name}`.
    pub fn exchange(&self, name: Option<&str>) -> Option<&Exchange> {
        match name {
            None => Some(&self.config.default),
            Some(name) => self.config.exchanges.iter().find(|e| e.name == name),
        }
    }

    fn by_digest(&self, digest: u32) -> Option<&Exchange> {
        if digest == 0 {
            return Some(&self.config.default);
        }
        self.config
            .exchanges
            .iter()
            .find(|e| notice::exchange_digest(&e.name) == digest)
    }
}

fn no_content() -> Response<Body> {
    let mut answer = Response::new(Body::new(Bytes::new()));
    *answer.status_mut() = StatusCode::NO_CONTENT;
    answer
}

/// A malformed bid request: 400 with a short reason, counted by label.
pub(crate) fn bad_bid_request(
    edge: &Edge,
    status: StatusCode,
    label: &'static str,
    reason: String,
) -> (Response<Body>, Outcome) {
    edge.bidder.stats.bad_request(label);
    (
        handlers::response(status, "text/plain; charset=utf-8", reason + "\n"),
        Outcome::ClientError,
    )
}

/// A bid request not started because `max_in_flight` are in progress: 204 at once.
pub(crate) fn shed(edge: &Edge) -> (Response<Body>, Outcome) {
    Stats::bump(&edge.bidder.stats.requests);
    Stats::bump(&edge.bidder.stats.shed);
    (no_content(), Outcome::Shed)
}

/// A bid request whose body did not arrive before its deadline.
pub(crate) fn late(edge: &Edge) -> (Response<Body>, Outcome) {
    Stats::bump(&edge.bidder.stats.requests);
    Stats::bump(&edge.bidder.stats.late);
    (no_content(), Outcome::Late)
}

/// Whether user-level data may be used: not under COPPA, and where GDPR applies only with a TCF
/// v2 consent string recording consent to Purpose 1 (the ad path's rule,
/// [`marquee_model::may_identify`]). Without it the request has no user id (no caps, no user
/// sync lookup) and no segments.
fn may_use_user_data(request: &BidRequest<'_>) -> bool {
    if request.coppa() {
        return false;
    }
    let gdpr = request.regs.as_ref().and_then(|r| r.gdpr);
    let consent = request.user.as_ref().and_then(|u| u.consent.as_deref());
    marquee_model::may_identify(gdpr, consent)
}

/// Our user id for the request: `buyeruid` (matched through user sync when the exchange sent
/// its own id there, else taken as ours), or the exchange's `user.id` when it was matched.
fn our_user<'r>(
    bidder: &Bidder,
    exchange: &Exchange,
    request: &'r BidRequest<'_>,
) -> Option<Cow<'r, str>> {
    let user = request.user.as_ref()?;
    if let Some(buyeruid) = user.buyeruid.as_deref().filter(|u| !u.is_empty()) {
        return Some(
            bidder
                .syncs
                .resolve(&exchange.name, buyeruid)
                .map_or(Cow::Borrowed(buyeruid), Cow::Owned),
        );
    }
    let id = user.id.as_deref().filter(|u| !u.is_empty())?;
    bidder.syncs.resolve(&exchange.name, id).map(Cow::Owned)
}

/// The currency to bid in: `preferred` when the request allows it, else the first of the
/// request's that the rate table knows.
fn bid_currency(
    preferred: Currency,
    request: &BidRequest<'_>,
    rates: &CurrencyRates,
) -> Option<Currency> {
    if request.allows_currency(preferred.as_str()) {
        return Some(preferred);
    }
    request
        .cur
        .iter()
        .filter_map(|c| Currency::try_from(c.as_ref()).ok())
        .find(|&c| rates.knows(c))
}

fn device_type(device: marquee_openrtb::DeviceType) -> DeviceType {
    use marquee_openrtb::DeviceType as Rtb;
    match device {
        Rtb::MOBILE_TABLET | Rtb::PHONE => DeviceType::Phone,
        Rtb::PERSONAL_COMPUTER => DeviceType::Desktop,
        Rtb::CONNECTED_TV | Rtb::SET_TOP_BOX => DeviceType::Ctv,
        Rtb::TABLET => DeviceType::Tablet,
        _ => DeviceType::Other,
    }
}

fn floor(micros: i64, currency: &str) -> Option<Floor> {
    Some(Floor {
        cpm: Micros(micros),
        currency: Currency::try_from(currency).ok()?,
    })
}

/// What the engine needs from one imp, owned here so that [`Slot`] can borrow it.
struct ImpView<'r> {
    sizes: Vec<Size>,
    formats: Vec<Format>,
    deals: Vec<Deal<'r>>,
    video_mimes: Vec<&'r str>,
    video_protocols: Vec<u16>,
    audio_mimes: Vec<&'r str>,
    audio_protocols: Vec<u16>,
    native: Option<NativeRequest<'r>>,
    native_needs: NativeNeeds,
}

impl<'r> ImpView<'r> {
    fn new(imp: &'r Imp<'_>, seat: &str) -> ImpView<'r> {
        let mut formats = Vec::with_capacity(2);
        if imp.banner.is_some() {
            formats.push(Format::Banner);
        }
        if imp.video.is_some() {
            formats.push(Format::Video);
        }
        if imp.audio.is_some() {
            formats.push(Format::Audio);
        }
        let protocols = |list: &[marquee_openrtb::Protocol]| -> Vec<u16> {
            list.iter()
                .filter_map(|p| u16::try_from(p.0).ok())
                .collect()
        };
        let native = imp
            .native
            .as_ref()
            .and_then(|n| n.parse_request().ok())
            .and_then(|request| Some((native_needs(&request)?, request)));
        let native_needs = native.as_ref().map(|(needs, _)| *needs).unwrap_or_default();
        if native.is_some() {
            formats.push(Format::Native);
        }
        ImpView {
            sizes: imp.banner_sizes().map(|(w, h)| Size { w, h }).collect(),
            formats,
            // A deal whose `wseat` leaves us out is not on offer to us.
            deals: imp
                .pmp
                .iter()
                .flat_map(|p| p.deals.iter())
                .filter(|d| d.wseat.is_empty() || d.wseat.iter().any(|s| s == seat))
                .map(|d| Deal {
                    id: &d.id,
                    floor: floor(d.bidfloor_micros, &d.bidfloorcur),
                })
                .collect(),
            video_mimes: imp
                .video
                .iter()
                .flat_map(|v| v.mimes.iter().map(|m| m.as_ref()))
                .collect(),
            video_protocols: imp
                .video
                .as_ref()
                .map(|v| protocols(&v.protocols))
                .unwrap_or_default(),
            audio_mimes: imp
                .audio
                .iter()
                .flat_map(|a| a.mimes.iter().map(|m| m.as_ref()))
                .collect(),
            audio_protocols: imp
                .audio
                .as_ref()
                .map(|a| protocols(&a.protocols))
                .unwrap_or_default(),
            native: native.map(|(_, request)| request),
            native_needs,
        }
    }

    fn slot(&self, imp: &Imp<'_>) -> Slot<'_> {
        let rules = |mimes, protocols, min_duration, max_duration| MediaRules {
            mimes,
            min_duration,
            max_duration,
            durations: &[],
            protocols,
        };
        Slot {
            sizes: &self.sizes,
            formats: &self.formats,
            floor: (imp.bidfloor_micros > 0)
                .then(|| floor(imp.bidfloor_micros, &imp.bidfloorcur))
                .flatten(),
            deals: &self.deals,
            private_auction: imp.is_private_auction(),
            secure: imp.secure,
            video: imp.video.as_ref().map_or_else(MediaRules::default, |v| {
                rules(
                    &self.video_mimes,
                    &self.video_protocols,
                    v.minduration,
                    v.maxduration,
                )
            }),
            audio: imp.audio.as_ref().map_or_else(MediaRules::default, |a| {
                rules(
                    &self.audio_mimes,
                    &self.audio_protocols,
                    a.minduration,
                    a.maxduration,
                )
            }),
            native: self.native_needs,
        }
    }
}

/// The required assets of a native request in the engine's terms; `None` when it requires an
/// asset no creative of ours can fill (a video asset, an unknown data type), so that the imp
/// does not offer native at all.
fn native_needs(request: &NativeRequest<'_>) -> Option<NativeNeeds> {
    let mut needs = NativeNeeds::default();
    let text = |len: Option<u32>| TextNeed {
        max_chars: len.filter(|&l| l > 0),
    };
    for asset in request.assets.iter().filter(|a| a.required) {
        if let Some(title) = &asset.title {
            needs.title = Some(text(Some(title.len)));
        } else if let Some(img) = &asset.img {
            let need = ImageNeed {
                min_w: img.wmin.or(img.w).unwrap_or(0),
                min_h: img.hmin.or(img.h).unwrap_or(0),
            };
            match img.image_type {
                Some(ImageAssetType::ICON) | Some(ImageAssetType::LOGO) => needs.icon = Some(need),
                _ => needs.main_image = Some(need),
            }
        } else if let Some(data) = &asset.data {
            match data.data_type {
                DataAssetType::SPONSORED => needs.sponsored_by = Some(text(data.len)),
                DataAssetType::DESC => needs.body = Some(text(data.len)),
                DataAssetType::CTA_TEXT => needs.call_to_action = Some(text(data.len)),
                _ => return None,
            }
        } else {
            return None;
        }
    }
    Some(needs)
}

fn mtype(format: Format) -> MarkupType {
    match format {
        Format::Banner => MarkupType::BANNER,
        Format::Video => MarkupType::VIDEO,
        Format::Audio => MarkupType::AUDIO,
        Format::Native => MarkupType::NATIVE,
    }
}

/// What every imp of one request shares.
struct Auction<'x> {
    edge: &'x Edge,
    exchange: &'x Exchange,
    loaded: &'x Loaded,
    auction_id: &'x str,
    user: u64,
    test: bool,
    now: Timestamp,
}

/// `POST /openrtb2/bid[/{exchange}]` once the body is read: decide every imp, answer the bids
/// that pass validation, or 204. Work still to do at `started` + `tmax` − margin is abandoned
/// with a 204. We bid in `currency` when the request allows it (`exchange.currency`, or in
/// gateway mode the answer's).
pub(crate) fn bid(
    edge: &Edge,
    exchange: &Exchange,
    currency: Currency,
    body: &[u8],
    content_encoding: Option<&str>,
    started: Instant,
) -> (Response<Body>, Outcome) {
    let stats = &edge.bidder.stats;
    Stats::bump(&stats.requests);
    let json = match decode_body(body, content_encoding, exchange.max_body_bytes) {
        Ok(json) => json,
        Err(error) => {
            let status = match error {
                marquee_openrtb::BodyError::TooLarge { .. }
                | marquee_openrtb::BodyError::DecompressedTooLarge { .. } => {
                    StatusCode::PAYLOAD_TOO_LARGE
                }
                _ => StatusCode::BAD_REQUEST,
            };
            return bad_bid_request(edge, status, error.label(), error.to_string());
        }
    };
    let request = match BidRequest::parse(&json) {
        Ok(request) => request,
        Err(error) => {
            return bad_bid_request(
                edge,
                StatusCode::BAD_REQUEST,
                error.label(),
                error.to_string(),
            );
        }
    };
    let now = Timestamp::now();
    let deadline = exchange.deadline(started, request.tmax);
    if request.test {
        Stats::bump(&stats.test_requests);
    }
    let Some(loaded) = edge.holder.current() else {
        return no_bid(edge, exchange, &request, no_bid_code::TECHNICAL_ERROR, now);
    };
    if !request.allows_seat(&exchange.seat) {
        return no_bid(edge, exchange, &request, no_bid_code::SEAT_EXCLUDED, now);
    }
    if !exchange.filters_invalid_traffic
        && let Some(reason) = invalid_device(edge, &request)
    {
        return no_bid(edge, exchange, &request, reason, now);
    }
    // Our categories are IAB 1.0 (the API's rule), the default taxonomy of `cattax`.
    if !request.bcat.is_empty() && !request.bcat_taxonomy_is(None) {
        return no_bid(
            edge,
            exchange,
            &request,
            no_bid_code::CATEGORY_TAXONOMY,
            now,
        );
    }
    let rates = &edge.bidder.config.rates;
    let Some(currency) = bid_currency(currency, &request, rates) else {
        return no_bid(edge, exchange, &request, no_bid_code::CURRENCY, now);
    };
    if Instant::now() >= deadline {
        return late_bid(edge, exchange, &request, now);
    }

    let user_data = may_use_user_data(&request);
    let user_id = user_data
        .then(|| our_user(&edge.bidder, exchange, &request))
        .flatten();
    // Our profile of the user (segments and attributes uploaded to `POST /profiles`) joins
    // the segments the exchange sends in `user.data`; without user-level data there is no
    // user id, so no profile either.
    let profile = profiles::lookup_now(edge, user_id.as_deref());
    let mut segments: Vec<&str> = Vec::new();
    let mut key_values: Vec<(&str, &str)> = Vec::new();
    if user_data {
        segments.extend(
            request
                .user
                .iter()
                .flat_map(|u| u.data.iter())
                .flat_map(|d| d.segment.iter())
                .filter_map(|s| s.id.as_deref()),
        );
    }
    profiles::add_targeting(profile.as_deref(), &mut segments, &mut key_values);
    let categories: Vec<&str> = request.bcat.iter().map(|c| c.as_ref()).collect();
    let advertisers: Vec<&str> = request.badv.iter().map(|c| c.as_ref()).collect();
    let apps: Vec<&str> = request.bapp.iter().map(|c| c.as_ref()).collect();
    let site = request.site.as_ref();
    let app = request.app.as_ref();
    let device = request.device.as_ref();
    let geo = device
        .and_then(|d| d.geo.as_ref())
        .or_else(|| request.user.as_ref().and_then(|u| u.geo.as_ref()));
    let ip = device.and_then(|d| {
        d.ip.as_deref()
            .or(d.ipv6.as_deref())
            .and_then(|ip| ip.parse::<IpAddr>().ok())
    });
    // The exchange's location when it sent one; else the device's address looked up.
    let located = match geo {
        Some(_) => Visitor::default(),
        None => Visitor::at(ip.and_then(|ip| visitor::locate_address(edge, ip))),
    };
    // OpenRTB's codes (ISO 3166-1 alpha-3, a region without its country) in targeting's.
    let country = geo.and_then(|g| g.country_alpha2());
    let mut region_buf = [0u8; 8];
    let region = geo.and_then(|g| g.region_code(country, &mut region_buf));
    let template = Request {
        now,
        channel: Channel::Exchange,
        placement: None,
        site: None,
        slot: Slot::default(),
        domain: site
            .and_then(|s| s.domain.as_deref())
            .or_else(|| app.and_then(|a| a.domain.as_deref())),
        page_url: site.and_then(|s| s.page.as_deref()),
        device: Device {
            device_type: device.and_then(|d| d.devicetype).map(device_type),
            os: device.and_then(|d| d.os.as_deref()),
            browser: None,
            language: device.and_then(|d| d.language.as_deref()),
            ip,
        },
        geo: match geo {
            Some(geo) => Geo {
                country,
                region,
                city: geo.city.as_deref(),
                point: geo.lat.zip(geo.lon),
                metro: geo.metro_code(),
                postal: geo.zip.as_deref(),
                ..Geo::default()
            },
            None => located.geo(),
        },
        user: User {
            id: user_id.as_deref(),
            segments: &segments,
        },
        key_values: &key_values,
        blocked: Blocked {
            categories: &categories,
            advertisers: &advertisers,
            apps: &apps,
        },
        bid_currency: Some(currency),
    };
    let auction = Auction {
        edge,
        exchange,
        loaded: &loaded,
        auction_id: &request.id,
        user: user_id.as_deref().map_or(0, user_key),
        test: request.test,
        now,
    };
    let device_code = template.device.device_type.map_or(0, |d| d as u8 + 1);

    // One pacing view for all imps of the request.
    let paced = edge.pacing.view(&loaded, now);
    let decided = WORKER.with(|worker| {
        let mut worker = worker.borrow_mut();
        let worker = &mut *worker;
        let mut bids: Vec<Bid<'_>> = Vec::with_capacity(request.imp.len());
        let mut decisions: Vec<Decision> = Vec::with_capacity(request.imp.len());
        let mut capped: Vec<(LineItemId, CampaignId)> = Vec::new();
        for imp in &request.imp {
            if Instant::now() >= deadline {
                return None;
            }
            let view = ImpView::new(imp, &exchange.seat);
            // Nothing we can fill (an empty slot would mean "banner" to the engine).
            if view.formats.is_empty() {
                continue;
            }
            let imp_request = Request {
                slot: view.slot(imp),
                ..template
            };
            let caps = EdgeCaps {
                local: &edge.caps,
                shared: edge.shared.as_ref(),
                decided: &capped,
            };
            let mut context = Context {
                rng: &mut worker.rng,
                caps: &caps,
                pacing: &paced,
                rates,
                scratch: &mut worker.scratch,
            };
            let Some(decision) = loaded.engine.decide(&imp_request, &mut context) else {
                continue;
            };
            if let Some(bid) = make_bid(&auction, imp, &view, &decision, worker) {
                // Only a request with more imps to come needs the list.
                if request.imp.len() > 1
                    && let Some(li) = loaded.engine.snapshot().data.line_item(decision.line_item)
                {
                    capped.push((li.id, li.campaign_id));
                }
                bids.push(bid);
                decisions.push(decision);
            }
        }
        Some((bids, decisions))
    });
    let Some((bids, mut decisions)) = decided else {
        return late_bid(edge, exchange, &request, now);
    };

    let mut response = BidResponse {
        id: Cow::Borrowed(&request.id),
        seatbid: Vec::new(),
        bidid: None,
        cur: Some(Cow::Borrowed(currency.as_str())),
        nbr: None,
    };
    let converter = RateConverter(rates);
    response.seatbid.push(SeatBid {
        bid: bids,
        seat: Some(Cow::Borrowed(&exchange.seat)),
    });
    // Imps whose bid failed the checks.
    let mut dropped: Vec<String> = Vec::new();
    if let Err(violations) = validate_response(&request, &response, &converter) {
        for violation in &violations {
            tracing::warn!(%violation, "bid dropped: it fails the response checks");
        }
        // A violation not tied to one bid (the response as a whole) leaves nothing to send.
        let whole = violations.iter().any(|v| v.bid_id.is_none());
        let bids = &mut response.seatbid[0].bid;
        let keep: Vec<bool> = bids
            .iter()
            .map(|bid| {
                !whole
                    && !violations
                        .iter()
                        .any(|v| v.bid_id.as_deref() == Some(bid.id.as_ref()))
            })
            .collect();
        dropped = bids
            .iter()
            .zip(&keep)
            .filter(|(_, keep)| !**keep)
            .map(|(bid, _)| bid.impid.to_string())
            .collect();
        let mut kept = keep.iter();
        bids.retain(|_| kept.next().copied().unwrap_or(false));
        let mut kept = keep.iter();
        decisions.retain(|_| kept.next().copied().unwrap_or(false));
        stats
            .invalid_bids
            .fetch_add(dropped.len() as u64, Ordering::Relaxed);
    }
    if Instant::now() >= deadline {
        return late_bid(edge, exchange, &request, now);
    }
    // Imps without a bid are logged as no-bids, each with its reason; bids as sampled.
    for imp in &request.imp {
        if response.seatbid[0].bid.iter().any(|b| b.impid == imp.id) {
            continue;
        }
        let reason = if dropped.iter().any(|d| *d == imp.id) {
            no_bid_code::INVALID_BID
        } else {
            no_bid_code::NO_MATCH
        };
        log_no_bid(&auction, reason, device_code);
    }
    if response.seatbid[0].bid.is_empty() {
        return no_bid_answer(edge, exchange, &request, no_bid_code::NO_MATCH);
    }
    for (bid, decision) in response.seatbid[0].bid.iter().zip(&decisions) {
        Stats::bump(&stats.bids);
        log_bid(&auction, bid, decision, device_code);
    }
    let mut json = String::with_capacity(2048);
    response.write_json(&mut json);
    (handlers::openrtb_answer(json), Outcome::Ok)
}

/// One bid for a decision: markup, notice URLs with their token, and what the response
/// validation checks. `None` when the creative cannot fill the imp after all (a native request
/// its assets do not satisfy).
fn make_bid<'r>(
    auction: &Auction<'r>,
    imp: &'r Imp<'_>,
    view: &ImpView<'_>,
    decision: &Decision,
    worker: &mut Worker,
) -> Option<Bid<'r>> {
    let edge = auction.edge;
    let data: &'r SnapshotData = &auction.loaded.engine.snapshot().data;
    let creative = data.creative(decision.creative)?;
    let line_item = data.line_item(decision.line_item)?;
    let campaign = data.campaign(line_item.campaign_id);
    let advertiser = data.advertiser(line_item.advertiser_id);
    let nonce = worker.rng.next_u64();
    let claims = Claims {
        kind: Kind::Impression,
        line_item: decision.line_item.0,
        creative: decision.creative.0,
        // No placement: the token is an exchange bid's, whose impression does not spend.
        placement: 0,
        user: auction.user,
        issued_at: auction.now.as_second(),
        lifetime: u32::try_from(edge.config.token_lifetime.as_secs()).unwrap_or(u32::MAX),
        nonce,
        // An exchange bid's beacon and click are worth nothing: its billing notice brings
        // the price.
        amount_micros: Some(0),
    };
    let adm = markup(auction, creative, view, &claims, worker)?;
    // A bid in another currency than the line item's carries its price in the line item's
    // currency, so that its clearing price converts at the rates the bid was made with.
    let price_in_line_item_currency = (decision.currency != line_item.price.currency)
        .then(|| {
            edge.bidder.config.rates.convert(
                decision.bid_cpm,
                decision.currency,
                line_item.price.currency,
                Rounding::Up,
            )
        })
        .flatten()
        .map(|price| price.0);
    let token = {
        let mut token = String::with_capacity(notice::CONVERTED_TOKEN_LEN);
        notice::sign_into(
            &edge.keys,
            &NoticeClaims {
                nonce,
                line_item: decision.line_item.0,
                creative: decision.creative.0,
                user: auction.user,
                price_micros: decision.bid_cpm.0,
                currency: decision.currency,
                exchange: notice::exchange_digest(&auction.exchange.name),
                auction: notice::digest(&[auction.auction_id, &imp.id]),
                test: auction.test,
                issued_at: claims.issued_at,
                lifetime: claims.lifetime,
                price_in_line_item_currency,
            },
            &mut token,
        );
        token
    };
    let base = edge.config.public_url.trim_end_matches('/');
    let notice_url = |path: &str, extra: &str| {
        const MACROS: &str = "&auction=${AUCTION_ID}&imp=${AUCTION_IMP_ID}&p=${AUCTION_PRICE}";
        [base, path, "?t=", &token, MACROS, extra].concat()
    };
    let size = (decision.format == Format::Banner)
        .then_some(decision.size)
        .flatten();
    Some(Bid {
        id: Cow::Owned(format!("{nonce:016x}")),
        impid: Cow::Borrowed(&imp.id),
        price_micros: decision.bid_cpm.0,
        adm: Some(Cow::Owned(adm)),
        nurl: Some(Cow::Owned(notice_url("/openrtb2/win", ""))),
        burl: Some(Cow::Owned(notice_url("/openrtb2/bill", ""))),
        lurl: Some(Cow::Owned(notice_url(
            "/openrtb2/loss",
            "&r=${AUCTION_LOSS}",
        ))),
        adid: None,
        adomain: advertiser
            .map(|a| {
                a.domains
                    .iter()
                    .map(|d| Cow::Borrowed(d.as_str()))
                    .collect()
            })
            .unwrap_or_default(),
        bundle: campaign
            .and_then(|c| c.app_bundle.as_deref())
            .map(Cow::Borrowed),
        iurl: None,
        cid: Some(Cow::Owned(line_item.campaign_id.0.to_string())),
        crid: Some(Cow::Owned(creative.id.0.to_string())),
        cat: data
            .categories_of(creative)
            .iter()
            .map(|c| Cow::Borrowed(c.as_str()))
            .collect(),
        attr: Vec::new(),
        dealid: decision
            .deal
            .and_then(|i| view.deals.get(i))
            .map(|d| Cow::Borrowed(deal_id(imp, d.id))),
        w: size.map(|s| s.w),
        h: size.map(|s| s.h),
        mtype: Some(mtype(decision.format)),
        exp: None,
        cattax: None,
        ext: None,
        tactic: None,
        apis: Vec::new(),
        api: None,
        protocol: None,
        qagmediarating: None,
        language: None,
        langb: None,
        wratio: None,
        hratio: None,
        slotinpod: None,
        dur: None,
    })
}

/// The deal id as the imp holds it (the view's copy borrows the same text, with the imp's
/// lifetime here).
fn deal_id<'r>(imp: &'r Imp<'_>, id: &str) -> &'r str {
    imp.pmp
        .iter()
        .flat_map(|p| p.deals.iter())
        .find(|d| d.id == id)
        .map_or("", |d| d.id.as_ref())
}

/// The `adm`: banner code filled with a click redirect and an impression beacon (logged with
/// amount 0: an exchange impression spends on billing), the VAST document of video and audio,
/// the native response for native.
fn markup(
    auction: &Auction<'_>,
    creative: &CreativeEntry,
    view: &ImpView<'_>,
    claims: &Claims,
    worker: &mut Worker,
) -> Option<String> {
    let edge = auction.edge;
    // Signed only for the markups that carry them: VAST goes out as stored.
    match &creative.content {
        Content::Native(native) => {
            let request = view.native.as_ref()?;
            let (impression_url, click_url) =
                handlers::signed_urls(edge, claims, 0, &mut worker.urls);
            fn image(url: Option<&str>, size: Option<Size>) -> Option<NativeImage<'_>> {
                url.map(|url| NativeImage {
                    url,
                    w: size.map(|s| s.w),
                    h: size.map(|s| s.h),
                    mime: None,
                })
            }
            let trackers = [impression_url];
            let native_creative = NativeCreative {
                title: Some(&native.title),
                body: Some(&native.body)
                    .filter(|b| !b.is_empty())
                    .map(|b| b.as_str()),
                sponsored_by: Some(&native.sponsored_by),
                call_to_action: native.call_to_action.as_deref(),
                image: image(native.image_url.as_deref(), native.image_size),
                icon: image(native.icon_url.as_deref(), native.icon_size),
                link_url: click_url,
                click_trackers: &[],
                impression_trackers: &trackers,
            };
            let mut out = String::with_capacity(1024);
            native_creative.write_response(request, &mut out).ok()?;
            Some(out)
        }
        Content::Vast { xml: Some(xml), .. } => Some(xml.clone()),
        Content::Vast { url: Some(url), .. } => Some(vast_wrapper(url)),
        Content::Vast { .. } => None,
        Content::Image { .. } | Content::Html { .. } | Content::ThirdPartyTag { .. } => {
            let code = creative.ad_code.as_ref()?;
            let mut out = String::with_capacity(1024);
            let mut digits = itoa::Buffer::new();
            handlers::fill_tracked(
                edge,
                code,
                claims,
                0,
                handlers::cache_buster(None, &mut worker.rng, &mut digits),
                &mut worker.urls,
                &mut out,
            );
            Some(out)
        }
    }
}

/// A VAST wrapper pointing at a creative served by URL.
fn vast_wrapper(url: &str) -> String {
    format!(
        "<VAST version=\"3.0\"><Ad><Wrapper><AdSystem>Marquee</AdSystem>\
         <VASTAdTagURI><![CDATA[{}]]></VASTAdTagURI></Wrapper></Ad></VAST>",
        url.replace("]]>", "]]]]><![CDATA[>")
    )
}

fn bidder_event(
    kind: EventKind,
    now: Timestamp,
    line_item: u64,
    creative: u64,
    user: u64,
) -> Event {
    Event {
        kind,
        time_micros: now.as_microsecond(),
        line_item,
        creative,
        placement: 0,
        user,
        country: [0, 0],
        region: [0; 3],
        device: 0,
        amount_micros: 0,
        event_id: 0,
    }
}

/// A bid goes to the log when sampled (test requests log nothing).
fn log_bid(auction: &Auction<'_>, bid: &Bid<'_>, decision: &Decision, device: u8) {
    if auction.test {
        return;
    }
    let per_mille = auction.exchange.log_bids_per_mille;
    if per_mille < 1_000 {
        let draw = WORKER.with(|w| w.borrow_mut().rng.random_range(0..1_000u32));
        if draw >= per_mille {
            return;
        }
    }
    let nonce = u64::from_str_radix(&bid.id, 16).unwrap_or(0);
    handlers::log(
        auction.edge,
        Event {
            device,
            amount_micros: bid.price_micros,
            event_id: u128::from(nonce),
            ..bidder_event(
                EventKind::Bid,
                auction.now,
                decision.line_item.0,
                decision.creative.0,
                auction.user,
            )
        },
    );
}

/// A no-bid for one imp, its reason in `creative` (test requests log nothing).
fn log_no_bid(auction: &Auction<'_>, reason: u64, device: u8) {
    if auction.test {
        return;
    }
    let id = WORKER.with(|w| w.borrow_mut().rng.next_u64());
    handlers::log(
        auction.edge,
        Event {
            device,
            event_id: u128::from(id),
            ..bidder_event(EventKind::NoBid, auction.now, 0, reason, auction.user)
        },
    );
}

fn late_bid(
    edge: &Edge,
    exchange: &Exchange,
    request: &BidRequest<'_>,
    now: Timestamp,
) -> (Response<Body>, Outcome) {
    Stats::bump(&edge.bidder.stats.late);
    let (answer, _) = no_bid(edge, exchange, request, no_bid_code::INSUFFICIENT_TIME, now);
    (answer, Outcome::Late)
}

/// The no-bid reason of a request whose device is a known crawler or in a data centre, if it
/// is (general invalid traffic: see `quality.rs`).
fn invalid_device(edge: &Edge, request: &BidRequest<'_>) -> Option<u64> {
    let device = request.device.as_ref()?;
    let user_agent = device.ua.as_deref().unwrap_or("").as_bytes();
    let ip = device
        .ip
        .as_deref()
        .or(device.ipv6.as_deref())
        .and_then(|ip| ip.parse().ok());
    match edge.quality.screen_bid(user_agent, ip)? {
        marquee_eventlog::InvalidReason::Datacenter => Some(no_bid_code::DATA_CENTER),
        _ => Some(no_bid_code::KNOWN_WEB_CRAWLER),
    }
}

/// No bid for the whole request: every imp logged as a no-bid with `reason`, then the answer.
fn no_bid(
    edge: &Edge,
    exchange: &Exchange,
    request: &BidRequest<'_>,
    reason: u64,
    now: Timestamp,
) -> (Response<Body>, Outcome) {
    if !request.test {
        for _ in &request.imp {
            let id = WORKER.with(|w| w.borrow_mut().rng.next_u64());
            handlers::log(
                edge,
                Event {
                    event_id: u128::from(id),
                    ..bidder_event(EventKind::NoBid, now, 0, reason, 0)
                },
            );
        }
    }
    no_bid_answer(edge, exchange, request, reason)
}

/// The no-bid answer: 204, or a body with `nbr` where the exchange asks for one.
fn no_bid_answer(
    edge: &Edge,
    exchange: &Exchange,
    request: &BidRequest<'_>,
    reason: u64,
) -> (Response<Body>, Outcome) {
    Stats::bump(&edge.bidder.stats.no_bids);
    if !exchange.no_bid_reason {
        return (no_content(), Outcome::Fallback);
    }
    let nbr = match reason {
        no_bid_code::TECHNICAL_ERROR => NoBidReason::TECHNICAL_ERROR,
        no_bid_code::INSUFFICIENT_TIME => NoBidReason::INSUFFICIENT_AUCTION_TIME,
        no_bid_code::KNOWN_WEB_CRAWLER => NoBidReason::KNOWN_WEB_CRAWLER,
        no_bid_code::DATA_CENTER => NoBidReason::CLOUD_DATA_CENTER_OR_PROXY_IP,
        _ => NoBidReason::UNKNOWN_ERROR,
    };
    let json = BidResponse::no_bid(Cow::Borrowed(request.id.as_ref()), nbr).to_json();
    (
        handlers::response(StatusCode::OK, "application/json", json),
        Outcome::Fallback,
    )
}

/// Which notice a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    Win,
    Billing,
    Loss,
}

/// `GET /openrtb2/win|bill|loss`: counts the notice once if its token holds, then answers a
/// pixel either way (exchanges and browsers get the same answer for a refused notice).
pub(crate) async fn notice(edge: &Arc<Edge>, kind: NoticeKind, query: &str) -> Response<Body> {
    if let Err(why) = count_notice(edge, kind, query).await {
        tracing::debug!(?kind, why, "notice not counted");
    }
    handlers::pixel()
}

async fn count_notice(edge: &Arc<Edge>, kind: NoticeKind, query: &str) -> Result<(), &'static str> {
    let bidder = &edge.bidder;
    let stats = &bidder.stats;
    let invalid = |why: &'static str| {
        Stats::bump(&stats.invalid_notices);
        why
    };
    let now = Timestamp::now();
    let mut token = None;
    let mut price = None;
    let mut loss = None;
    let mut auction = None;
    let mut imp = None;
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "t" => token = Some(value),
            "p" => price = Some(value),
            "r" => loss = Some(value),
            "auction" => auction = Some(value),
            "imp" => imp = Some(value),
            _ => {}
        }
    }
    let token = token.ok_or_else(|| invalid("no token"))?;
    let claims = notice::verify(&edge.keys, &token, now.as_second())
        .map_err(|_| invalid("token refused"))?;
    // The exchange echoes the auction and imp ids through the macros; when it did, they must
    // be the ones the bid was for.
    let echoed = |value: &Option<Cow<'_, str>>| {
        value
            .as_deref()
            .filter(|v| !v.is_empty() && !v.starts_with("${"))
            .map(str::to_owned)
    };
    if let (Some(auction), Some(imp)) = (echoed(&auction), echoed(&imp))
        && notice::digest(&[&auction, &imp]) != claims.auction
    {
        return Err(invalid("notice for another auction or imp"));
    }
    let crypto = bidder
        .by_digest(claims.exchange)
        .and_then(|e| e.crypto.as_ref());
    let clearing = match (crypto, kind) {
        // An exchange with price keys sends its win and billing prices encrypted. A plain or
        // missing one may come from anyone who saw the notice URL (every bid answer carries
        // it, and the bid endpoint answers whoever asks): not counted. (No trimming at the
        // start: a token's first `+`, sent unescaped, comes back from form decoding as a space.)
        (Some(keys), NoticeKind::Win | NoticeKind::Billing) => price
            .as_deref()
            .map(|p| keys.decrypt(p.trim_end()))
            .and_then(Result::ok)
            .ok_or_else(|| invalid("price not encrypted with the exchange's keys"))
            .map(|micros| i64::try_from(micros).unwrap_or(i64::MAX))?,
        _ => match price.as_deref().map(|p| parse_notice_price(p, crypto)) {
            Some(Ok(micros)) => i64::try_from(micros).unwrap_or(i64::MAX),
            // Without a price (or with the macro left as it was) our bid is what was paid at
            // most.
            None | Some(Err(PriceError::Unsubstituted | PriceError::Empty)) => claims.price_micros,
            Some(Err(_)) if kind == NoticeKind::Loss => 0,
            Some(Err(_)) => return Err(invalid("price unreadable")),
        },
    }
    // Never more than we bid: an exchange's clearing price above it is an error on its side.
    .min(claims.price_micros);
    if claims.test {
        Stats::bump(&stats.test_notices);
        return Err("test request");
    }
    let (seen, counter) = match kind {
        NoticeKind::Win => (&bidder.wins_seen, &stats.wins),
        NoticeKind::Billing => (&bidder.billings_seen, &stats.billings),
        NoticeKind::Loss => (&bidder.losses_seen, &stats.losses),
    };
    let (nonce, expires_at, second) = (claims.nonce, claims.expires_at(), now.as_second());
    if !seen.first_time(nonce, expires_at, second) {
        Stats::bump(&stats.repeated_notices);
        return Err("repeat");
    }
    let loaded = edge.holder.current();
    let base = Event {
        event_id: u128::from(claims.nonce),
        ..bidder_event(
            EventKind::Win,
            now,
            claims.line_item,
            claims.creative,
            claims.user,
        )
    };
    let logged = match kind {
        NoticeKind::Win => {
            let amount = in_line_item_currency(edge, loaded.as_deref(), &claims, clearing);
            handlers::log(
                edge,
                Event {
                    amount_micros: amount,
                    ..base
                },
            )
        }
        NoticeKind::Billing => {
            let amount = in_line_item_currency(edge, loaded.as_deref(), &claims, clearing);
            let event = Event {
                kind: EventKind::Billing,
                amount_micros: amount,
                ..base
            };
            // Counted, capped and charged only once the log has it (in strict mode, once the
            // fsync that covers it is done), even if the exchange hangs up meanwhile; a notice
            // the log refused or lost is forgotten, so that the exchange's retry counts.
            handlers::commit_and_settle(edge, &event, move |edge, logged| {
                let bidder = &edge.bidder;
                if let Err(error) = logged {
                    bidder.billings_seen.forget(nonce, expires_at, second);
                    Stats::bump(&edge.stats.log_errors);
                    tracing::error!(%error, "billing event not logged");
                    return;
                }
                if let Some(loaded) = &loaded {
                    handlers::record_delivery(edge, loaded, claims.user, claims.line_item, now);
                    shared::count_delivery(edge, loaded, claims.user, claims.line_item);
                    let on = marquee_pacing::Billable::Impression;
                    let charged = edge.pacing.bill(loaded, claims.line_item, on, Some(amount));
                    shared::charge(edge, claims.line_item, charged);
                }
                Stats::bump(&bidder.stats.billings);
            })
            .await;
            return Ok(());
        }
        NoticeKind::Loss => {
            let reason = loss
                .as_deref()
                .and_then(|r| r.parse::<u64>().ok())
                .unwrap_or(0);
            handlers::log(
                edge,
                Event {
                    kind: EventKind::Loss,
                    creative: reason,
                    ..base
                },
            )
        }
    };
    if !logged {
        // Not in the log: the exchange's retry should count.
        seen.forget(nonce, expires_at, second);
        return Err("not logged");
    }
    Stats::bump(counter);
    Ok(())
}

/// A clearing price in the bid's currency expressed in the line item's, rounded up (spend is
/// never under-counted): at the bid's own rate when its token carries its price in the line
/// item's currency, else at the configured rates (tokens of earlier builds); unchanged when
/// the bid was in the line item's currency, or the line item is gone or no rate is known.
fn in_line_item_currency(
    edge: &Edge,
    loaded: Option<&Loaded>,
    claims: &NoticeClaims,
    clearing: i64,
) -> i64 {
    if let Some(price) = claims.price_in_line_item_currency
        && claims.price_micros > 0
    {
        // clearing × price in the line item's currency / price in the bid's, rounded up.
        let numerator = i128::from(clearing) * i128::from(price);
        let denominator = i128::from(claims.price_micros);
        let quotient =
            numerator.div_euclid(denominator) + i128::from(numerator.rem_euclid(denominator) != 0);
        return i64::try_from(quotient).unwrap_or(clearing);
    }
    let Some(line_item) = loaded.and_then(|l| {
        l.engine
            .snapshot()
            .data
            .line_item(LineItemId(claims.line_item))
    }) else {
        return clearing;
    };
    edge.bidder
        .config
        .rates
        .convert(
            Micros(clearing),
            claims.currency,
            line_item.price.currency,
            Rounding::Up,
        )
        .map_or(clearing, |m| m.0)
}

/// The value of the first query parameter `name`.
fn param<'q>(query: &'q [(Cow<'_, str>, Cow<'_, str>)], name: &str) -> Option<&'q str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_ref())
}

/// Whether the sync call may identify the user: the ad path's rule (`gdpr` other than `0`
/// applies; then only a consent string consenting to Purpose 1 identifies).
fn sync_consent(query: &[(Cow<'_, str>, Cow<'_, str>)]) -> bool {
    let gdpr = param(query, "gdpr").map(|g| g != "0");
    marquee_model::may_identify(gdpr, param(query, "gdpr_consent"))
}

/// Our user id from the cookie, or a new one (to set) when cookies are allowed.
fn sync_user(edge: &Edge, headers: &HeaderMap) -> Option<(String, bool)> {
    if let Some(uid) = handlers::cookie(headers, handlers::USER_COOKIE) {
        return Some((uid.to_owned(), false));
    }
    if !edge.config.cookies {
        return None;
    }
    let uid = WORKER.with(|w| {
        let rng = &mut w.borrow_mut().rng;
        format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())
    });
    Some((uid, true))
}

fn set_user_cookie(edge: &Edge, answer: &mut Response<Body>, uid: &str) {
    if let Ok(value) = HeaderValue::from_str(&handlers::user_cookie(edge, uid)) {
        answer.headers_mut().insert(header::SET_COOKIE, value);
    }
}

/// `GET /sync?exchange=NAME&uid=THEIRS`: the exchange sends the browser here with its user id;
/// it is recorded against ours (the cookie's, or a new one). A pixel either way.
pub(crate) fn sync_in(edge: &Edge, query: &str, headers: &HeaderMap) -> Response<Body> {
    let params: Vec<(Cow<'_, str>, Cow<'_, str>)> =
        url::form_urlencoded::parse(query.as_bytes()).collect();
    let Some(exchange) =
        param(&params, "exchange").and_then(|name| edge.bidder.exchange(Some(name)))
    else {
        return handlers::response(
            StatusCode::BAD_REQUEST,
            "text/plain; charset=utf-8",
            "query parameter `exchange`: not a configured exchange\n",
        );
    };
    let Some(theirs) = param(&params, "uid").filter(|u| !u.is_empty() && u.len() <= 256) else {
        return handlers::response(
            StatusCode::BAD_REQUEST,
            "text/plain; charset=utf-8",
            "query parameter `uid`: required, at most 256 characters\n",
        );
    };
    if !sync_consent(&params) {
        return handlers::pixel();
    }
    let Some((ours, new)) = sync_user(edge, headers) else {
        return handlers::pixel();
    };
    edge.bidder.syncs.record(&exchange.name, theirs, &ours);
    Stats::bump(&edge.bidder.stats.syncs);
    let mut answer = handlers::pixel();
    if new {
        set_user_cookie(edge, &mut answer, &ours);
    }
    answer
}

/// `GET /sync/out?exchange=NAME`: sends the browser to the exchange's sync URL with our user
/// id, so that the exchange can send it back as `buyeruid`.
pub(crate) fn sync_out(edge: &Edge, query: &str, headers: &HeaderMap) -> Response<Body> {
    let params: Vec<(Cow<'_, str>, Cow<'_, str>)> =
        url::form_urlencoded::parse(query.as_bytes()).collect();
    let target = param(&params, "exchange")
        .and_then(|name| edge.bidder.exchange(Some(name)))
        .and_then(|e| e.sync_url.as_deref());
    let Some(target) = target else {
        return handlers::not_found();
    };
    if !sync_consent(&params) {
        return handlers::pixel();
    }
    let Some((ours, new)) = sync_user(edge, headers) else {
        return handlers::pixel();
    };
    let encoded: String = url::form_urlencoded::byte_serialize(ours.as_bytes()).collect();
    let mut answer = handlers::redirect(&target.replace("{uid}", &encoded));
    if new {
        set_user_cookie(edge, &mut answer, &ours);
    }
    answer
}

/// The bidder's lines of `/metrics`.
pub(crate) fn render_metrics(edge: &Edge, out: &mut String) {
    use std::fmt::Write;
    let stats = &edge.bidder.stats;
    for (name, help, value) in [
        (
            "marquee_bidder_requests_total",
            "Bid requests received.",
            &stats.requests,
        ),
        ("marquee_bidder_bids_total", "Bids sent.", &stats.bids),
        (
            "marquee_bidder_no_bids_total",
            "Bid requests answered without a bid (204, or nbr).",
            &stats.no_bids,
        ),
        (
            "marquee_bidder_invalid_bids_total",
            "Bids dropped because they failed the response checks.",
            &stats.invalid_bids,
        ),
        (
            "marquee_bidder_shed_total",
            "Bid requests answered 204 at once because max_in_flight were in progress.",
            &stats.shed,
        ),
        (
            "marquee_bidder_late_total",
            "Bid requests answered 204 because tmax less the margin passed.",
            &stats.late,
        ),
        (
            "marquee_bidder_test_requests_total",
            "Bid requests with test set (bid normally, nothing logged or counted).",
            &stats.test_requests,
        ),
        (
            "marquee_bidder_wins_total",
            "Win notices counted.",
            &stats.wins,
        ),
        (
            "marquee_bidder_billings_total",
            "Billing notices counted (each spends).",
            &stats.billings,
        ),
        (
            "marquee_bidder_losses_total",
            "Loss notices counted.",
            &stats.losses,
        ),
        (
            "marquee_bidder_invalid_notices_total",
            "Notices refused: malformed, forged or expired token, another auction, unreadable price.",
            &stats.invalid_notices,
        ),
        (
            "marquee_bidder_repeated_notices_total",
            "Notices for a bid already counted (retries).",
            &stats.repeated_notices,
        ),
        (
            "marquee_bidder_test_notices_total",
            "Notices of test requests (answered, not counted).",
            &stats.test_notices,
        ),
        (
            "marquee_bidder_syncs_total",
            "User matches recorded.",
            &stats.syncs,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            BidStats::load(value)
        );
    }
    out.push_str("# HELP marquee_bidder_bad_requests_total Malformed bid requests (400, 413), by reason.\n# TYPE marquee_bidder_bad_requests_total counter\n");
    for (label, count) in stats.bad_requests() {
        let _ = writeln!(
            out,
            "marquee_bidder_bad_requests_total{{reason=\"{label}\"}} {count}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP marquee_bidder_user_matches User sync matches held in memory.\n# TYPE marquee_bidder_user_matches gauge\nmarquee_bidder_user_matches {}",
        edge.bidder.syncs.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_honours_tmax_up_to_ten_seconds() {
        let exchange = Exchange::default();
        let started = Instant::now();
        let margin = exchange.latency_margin;
        assert_eq!(
            exchange.deadline(started, None),
            started + exchange.default_tmax - margin
        );
        assert_eq!(
            exchange.deadline(started, Some(250)),
            started + Duration::from_millis(250) - margin
        );
        assert_eq!(
            exchange.deadline(started, Some(u32::MAX)),
            started + MAX_TMAX - margin
        );
        assert_eq!(exchange.deadline(started, Some(0)), started);
    }
}
