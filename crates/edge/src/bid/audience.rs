//! Who and where a bid request is for, as the engine sees it: our user (under consent, through
//! user sync) with the profile we hold and the segments the exchange sends, the blocked lists,
//! the device and its location. One template [`Request`] of them serves every imp.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use jiff::Timestamp;
use marquee_engine::{Blocked, Device, Geo, Request, Slot, User, user_key};
use marquee_model::{Channel, Currency, DeviceType};
use marquee_openrtb::BidRequest;
use marquee_sharedstate::Profile;

use super::bidder::Bidder;
use super::config::Exchange;
use super::screen::device_ip;
use crate::visitor::{self, Visitor};
use crate::{Edge, profiles};

/// The request's user, as far as we may know them.
pub(super) struct BidUser<'r> {
    /// Whether user-level data may be used (see [`may_use_user_data`]).
    data: bool,
    /// Our user id.
    id: Option<Cow<'r, str>>,
    /// Our profile of the user (segments and attributes uploaded to `POST /profiles`);
    /// without user-level data there is no user id, so no profile either.
    profile: Option<Arc<Profile>>,
}

impl<'r> BidUser<'r> {
    pub(super) fn of(edge: &Edge, exchange: &Exchange, request: &'r BidRequest<'_>) -> Self {
        let data = may_use_user_data(request);
        let id = data
            .then(|| our_user(&edge.bidder, exchange, request))
            .flatten();
        let profile = profiles::lookup_now(edge, id.as_deref());
        BidUser { data, id, profile }
    }

    /// The user's key in tokens, events and caps (`0`: none).
    pub(super) fn key(&self) -> u64 {
        self.id.as_deref().map_or(0, user_key)
    }
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

/// What the engine targets besides the imp: the user, their segments (the exchange's
/// `user.data` under consent, then our profile's) and attributes, the blocked lists.
pub(super) struct Targeting<'a> {
    user_id: Option<&'a str>,
    segments: Vec<&'a str>,
    key_values: Vec<(&'a str, &'a str)>,
    categories: Vec<&'a str>,
    advertisers: Vec<&'a str>,
    apps: Vec<&'a str>,
}

impl<'a> Targeting<'a> {
    pub(super) fn of(request: &'a BidRequest<'_>, user: &'a BidUser<'_>) -> Targeting<'a> {
        let mut segments: Vec<&str> = Vec::new();
        let mut key_values: Vec<(&str, &str)> = Vec::new();
        if user.data {
            segments.extend(
                request
                    .user
                    .iter()
                    .flat_map(|u| u.data.iter())
                    .flat_map(|d| d.segment.iter())
                    .filter_map(|s| s.id.as_deref()),
            );
        }
        profiles::add_targeting(user.profile.as_deref(), &mut segments, &mut key_values);
        Targeting {
            user_id: user.id.as_deref(),
            segments,
            key_values,
            categories: request.bcat.iter().map(|c| c.as_ref()).collect(),
            advertisers: request.badv.iter().map(|c| c.as_ref()).collect(),
            apps: request.bapp.iter().map(|c| c.as_ref()).collect(),
        }
    }
}

/// Where the request's device is: the exchange's location when it sent one (the device's,
/// else the user's), else the device's address looked up.
pub(super) struct Place<'r> {
    geo: Option<&'r marquee_openrtb::Geo<'r>>,
    ip: Option<IpAddr>,
    located: Visitor,
    /// Where the region's ISO 3166-2 code is written (no allocation per bid).
    region: [u8; 8],
}

impl<'r> Place<'r> {
    pub(super) fn of(edge: &Edge, request: &'r BidRequest<'_>) -> Place<'r> {
        let device = request.device.as_ref();
        let geo = device
            .and_then(|d| d.geo.as_ref())
            .or_else(|| request.user.as_ref().and_then(|u| u.geo.as_ref()));
        let ip = device.and_then(device_ip);
        let located = match geo {
            Some(_) => Visitor::default(),
            None => Visitor::at(ip.and_then(|ip| visitor::locate_address(edge, ip))),
        };
        Place {
            geo,
            ip,
            located,
            region: [0; 8],
        }
    }

    /// The location in targeting's codes (OpenRTB's are ISO 3166-1 alpha-3, and a region
    /// without its country).
    fn geo(&mut self) -> Geo<'_> {
        let Some(geo) = self.geo else {
            return self.located.geo();
        };
        let country = geo.country_alpha2();
        Geo {
            country,
            region: geo.region_code(country, &mut self.region),
            city: geo.city.as_deref(),
            point: geo.lat.zip(geo.lon),
            metro: geo.metro_code(),
            postal: geo.zip.as_deref(),
            ..Geo::default()
        }
    }
}

/// The engine request every imp's is made from: all but the slot.
pub(super) fn template<'a>(
    request: &'a BidRequest<'_>,
    targeting: &'a Targeting<'_>,
    place: &'a mut Place<'_>,
    currency: Currency,
    now: Timestamp,
) -> Request<'a> {
    let site = request.site.as_ref();
    let app = request.app.as_ref();
    let device = request.device.as_ref();
    Request {
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
            ip: place.ip,
        },
        geo: place.geo(),
        user: User {
            id: targeting.user_id,
            segments: &targeting.segments,
        },
        key_values: &targeting.key_values,
        blocked: Blocked {
            categories: &targeting.categories,
            advertisers: &targeting.advertisers,
            apps: &targeting.apps,
        },
        bid_currency: Some(currency),
    }
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
