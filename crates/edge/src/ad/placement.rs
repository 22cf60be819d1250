//! One placement of an ad request: its engine request built → decided → its impression
//! claims signed and its ad code filled → its impression reserved → its decision logged; or,
//! with programmatic demand, the filled decision handed to the auction (`programmatic.rs`),
//! reserved and logged only if it wins there.

use jiff::Timestamp;
use marquee_engine::{Blocked, Context, Decision, Device, Request, Slot, User};
use marquee_eventlog::EventKind;
use marquee_model::{Channel, Format, PlacementId, Price};
use marquee_sharedstate::Profile;
use marquee_sharedstate::profiles::ATTRIBUTE_PREFIX;
use marquee_snapshot::{AdCode, PlacementEntry, SnapshotData};
use marquee_tracking::{Claims, TokenKind};
use rand::Rng;
use std::num::NonZeroU64;

use super::Served;
use super::programmatic::{self, Auction};
use crate::query::{AdFormat, AdQuery};
use crate::shared::EdgeCaps;
use crate::visitor::Visitor;
use crate::worker::Worker;
use crate::{Edge, Loaded, events, profiles, track};

/// What every placement of one ad request shares.
pub(super) struct PageContext<'a> {
    pub(super) edge: &'a Edge,
    pub(super) query: &'a AdQuery<'a>,
    pub(super) visitor: &'a Visitor,
    pub(super) user_id: Option<&'a str>,
    /// The user's key in claims and events; 0 for none.
    pub(super) user_key: u64,
    pub(super) profile: Option<&'a Profile>,
    pub(super) now: Timestamp,
    /// What an auction's bid request tells of the device.
    pub(super) user_agent: Option<&'a str>,
    pub(super) ip: Option<std::net::IpAddr>,
    /// Random, identifying the request's auctions.
    pub(super) request_id: u64,
}

/// The ad of `placement`, if one may serve there now. A placement with programmatic demand
/// whose direct winner competes with it goes to `auctions` instead (its ad decided by the
/// auction, `programmatic.rs`).
pub(super) fn serve_one<'s>(
    page: &PageContext<'_>,
    loaded: &'s Loaded,
    placement: PlacementId,
    caps: &EdgeCaps<'_>,
    worker: &mut Worker,
    auctions: &mut Vec<Auction<'s>>,
) -> Option<Served<'s>> {
    let data: &'s SnapshotData = &loaded.engine.snapshot().data;
    let entry = data.placement(placement)?;
    let targeting = Targeting::of(page.query, page.profile);
    let Some(formats) = PageFormats::of(entry) else {
        page.edge.counters.fallbacks.inc();
        return None;
    };
    let request = engine_request(page, data, entry, placement, &formats, &targeting);
    let decision = decide(page, loaded, &request, caps, worker);
    // An image tag's click request re-derives the decision its image request made (and kept).
    if page.query.format != Some(AdFormat::Click) {
        let asked = (placement, &page.query.sizes[..]);
        crate::sampling::sample(page.edge, &request, asked, page.user_key);
    }
    if let Some(settings) = programmatic::settings(page, entry)
        && decision
            .as_ref()
            .is_none_or(|d| programmatic::competes(data, d))
    {
        let direct_cpm = programmatic::direct_cpm(page.edge, decision.as_ref());
        let direct = decision.and_then(|d| filled(page, data, placement, d, worker));
        auctions.push(Auction {
            placement,
            entry,
            settings,
            direct,
            direct_cpm,
        });
        return None;
    }
    let ad = filled(page, data, placement, decision?, worker)?;
    commit(page, loaded, &ad);
    Some(ad)
}

/// The decision's ad: its impression claims signed and its ad code filled.
fn filled<'s>(
    page: &PageContext<'_>,
    data: &'s SnapshotData,
    placement: PlacementId,
    decision: Decision,
    worker: &mut Worker,
) -> Option<Served<'s>> {
    let creative = data.creative(decision.creative)?;
    let code = creative.ad_code.as_ref()?;
    let price = &data.line_item(decision.line_item)?.price;
    let claims = impression_claims(page, placement, &decision, price, worker);
    let html = render(page, code, &claims, price, worker);
    Some(Served {
        placement,
        line_item: decision.line_item.0,
        creative_id: decision.creative.0,
        creative: Some(creative),
        size: creative.size,
        claims,
        html,
    })
}

/// A direct ad that serves: its impression reserved, its decision logged.
pub(super) fn commit(page: &PageContext<'_>, loaded: &Loaded, ad: &Served<'_>) {
    reserve(page, loaded, ad.line_item);
    log_decision(page, &ad.claims);
}

/// The key-values and segments the engine targets: the page's key-values, less the `u_*` ones
/// (the profile's attributes; the page cannot claim them), then the profile's.
struct Targeting<'a> {
    key_values: Vec<(&'a str, &'a str)>,
    segments: Vec<&'a str>,
}

impl<'a> Targeting<'a> {
    fn of(query: &'a AdQuery<'_>, profile: Option<&'a Profile>) -> Targeting<'a> {
        let mut key_values: Vec<(&str, &str)> = query
            .key_values
            .iter()
            .filter(|(k, _)| !k.starts_with(ATTRIBUTE_PREFIX))
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .collect();
        let mut segments: Vec<&str> = Vec::new();
        profiles::add_targeting(profile, &mut segments, &mut key_values);
        Targeting {
            key_values,
            segments,
        }
    }
}

/// The formats a placement takes in a page. Our tags put banners and native ads in pages; a
/// VAST creative (video, audio) has no markup there, so it must not win the slot.
#[derive(Clone, Copy)]
struct PageFormats {
    formats: [Format; 2],
    kept: usize,
}

impl PageFormats {
    /// `None` when the placement takes only formats a page cannot show. (No formats at all
    /// means banner.)
    fn of(entry: &PlacementEntry) -> Option<PageFormats> {
        let mut page = PageFormats {
            formats: [Format::Banner; 2],
            kept: 0,
        };
        for format in entry
            .formats
            .iter()
            .filter(|f| matches!(f, Format::Banner | Format::Native))
        {
            if let Some(slot) = page.formats.get_mut(page.kept) {
                *slot = *format;
                page.kept += 1;
            }
        }
        (page.kept > 0 || entry.formats.is_empty()).then_some(page)
    }

    fn as_slice(&self) -> &[Format] {
        &self.formats[..self.kept]
    }
}

/// The engine's view of the placement on this page, for this visitor.
fn engine_request<'r>(
    page: &'r PageContext<'_>,
    data: &'r SnapshotData,
    entry: &'r PlacementEntry,
    placement: PlacementId,
    formats: &'r PageFormats,
    targeting: &'r Targeting<'_>,
) -> Request<'r> {
    let query = page.query;
    let sizes = if query.sizes.is_empty() {
        &entry.sizes[..]
    } else {
        &query.sizes[..]
    };
    Request {
        now: page.now,
        channel: Channel::Direct,
        placement: Some(placement),
        site: Some(entry.site_id),
        slot: Slot {
            sizes,
            formats: formats.as_slice(),
            floor: None,
            ..Slot::default()
        },
        domain: data.site(entry.site_id).map(|site| site.domain.as_str()),
        page_url: query.page_url.as_deref(),
        device: Device {
            device_type: page.visitor.device.device_type,
            os: page.visitor.device.os,
            browser: page.visitor.device.browser,
            language: None,
            ip: None,
        },
        geo: page.visitor.geo(),
        user: User {
            id: page.user_id,
            segments: &targeting.segments,
        },
        key_values: &targeting.key_values,
        blocked: Blocked::default(),
        bid_currency: None,
    }
}

/// The engine's decision for `request`, counted either way.
fn decide(
    page: &PageContext<'_>,
    loaded: &Loaded,
    request: &Request<'_>,
    caps: &EdgeCaps<'_>,
    worker: &mut Worker,
) -> Option<Decision> {
    let edge = page.edge;
    let paced = edge.pacing.view(loaded, page.now);
    let mut context = Context {
        rng: &mut worker.rng,
        caps,
        pacing: &paced,
        // Ad requests carry no floor and no bid currency: the rates only rank remnant and
        // house bids of line items priced in different currencies (`select::rank`).
        rates: &edge.bidder.config.rates,
        scratch: &mut worker.scratch,
    };
    let Some(decision) = loaded.engine.decide(request, &mut context) else {
        edge.counters.fallbacks.inc();
        return None;
    };
    edge.counters.decisions.inc();
    Some(decision)
}

/// The claims of the decision's impression, signed into its beacon: a new nonce, and what
/// it is worth at the line item's price now.
fn impression_claims(
    page: &PageContext<'_>,
    placement: PlacementId,
    decision: &Decision,
    price: &Price,
    worker: &mut Worker,
) -> Claims {
    Claims {
        kind: TokenKind::Impression,
        line_item: decision.line_item.0,
        creative: decision.creative.0,
        placement: NonZeroU64::new(placement.0),
        user: page.user_key,
        issued_at: page.now.as_second(),
        lifetime: page.edge.token_lifetime_secs(),
        nonce: worker.rng.next_u64(),
        amount_micros: Some(track::worth(price, TokenKind::Impression)),
    }
}

/// Fills the ad code with its tracking URLs at the end of the worker's text; where it is.
fn render(
    page: &PageContext<'_>,
    code: &AdCode,
    claims: &Claims,
    price: &Price,
    worker: &mut Worker,
) -> std::ops::Range<usize> {
    let start = worker.text.len();
    let mut digits = itoa::Buffer::new();
    let cache_buster = page.query.cache_buster.as_deref();
    track::fill_tracked(
        page.edge,
        code,
        claims,
        track::worth(price, TokenKind::Click),
        &track::FromRequest {
            cache_buster: track::cache_buster(cache_buster, &mut worker.rng, &mut digits),
            key_values: &page.query.key_values,
        },
        &mut worker.urls,
        &mut worker.text,
    );
    start..worker.text.len()
}

/// An image tag's image is its own impression (counted, and charged, as it is fetched);
/// every other answer carries a beacon whose impression is reserved now, on this edge's
/// lease, wherever the beacon lands.
fn reserve(page: &PageContext<'_>, loaded: &Loaded, line_item: u64) {
    if !matches!(page.query.format, Some(AdFormat::Img | AdFormat::Click)) {
        page.edge.pacing.reserve(loaded, line_item, page.now);
    }
}

/// Logs the decision; not an image tag's click request, which re-derives the decision its
/// image request made and logged.
fn log_decision(page: &PageContext<'_>, claims: &Claims) {
    if page.query.format != Some(AdFormat::Click) {
        let event = events::tracked(EventKind::Decision, claims, page.now, page.visitor, 0);
        events::log(page.edge, event);
    }
}
