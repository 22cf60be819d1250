//! The request view: one ad opportunity, borrowed from whatever the caller parsed (an ad
//! request's query string, an OpenRTB imp). Nothing here allocates.

use std::net::IpAddr;

use jiff::Timestamp;
use marquee_model::{Currency, DeviceType, Format, Micros, PlacementId, SiteId, Size};

/// One opportunity to show an ad.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// When the request arrived; day-of-week and hour targeting resolve it per line item zone.
    pub now: Timestamp,
    /// Our placement, for ad requests; `None` for bid requests from an exchange.
    pub placement: Option<PlacementId>,
    pub site: Option<SiteId>,
    pub slot: Slot<'a>,
    /// The page's host name, e.g. `www.news.example.com`.
    pub domain: Option<&'a str>,
    pub page_url: Option<&'a str>,
    pub device: Device<'a>,
    pub geo: Geo<'a>,
    pub user: User<'a>,
    /// Key-values from the ad tag, e.g. `("section", "sport")`.
    pub key_values: &'a [(&'a str, &'a str)],
}

/// What the ad slot accepts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slot<'a> {
    /// Accepted sizes; empty means any size.
    pub sizes: &'a [Size],
    /// Accepted formats; empty means banner only.
    pub formats: &'a [Format],
    /// The lowest price (as CPM) the seller takes, for bids.
    pub floor: Option<Floor>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    pub cpm: Micros,
    pub currency: Currency,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Device<'a> {
    pub device_type: Option<DeviceType>,
    pub os: Option<&'a str>,
    pub browser: Option<&'a str>,
    pub language: Option<&'a str>,
    pub ip: Option<IpAddr>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Geo<'a> {
    pub country: Option<&'a str>,
    pub region: Option<&'a str>,
    pub city: Option<&'a str>,
    /// Latitude and longitude in degrees.
    pub point: Option<(f64, f64)>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct User<'a> {
    /// A stable id for frequency capping; `None` when unknown or without consent.
    pub id: Option<&'a str>,
    pub segments: &'a [&'a str],
}

impl<'a> Request<'a> {
    /// A request with nothing known but the time; fill in the rest with struct update syntax.
    pub fn at(now: Timestamp) -> Request<'a> {
        Request {
            now,
            placement: None,
            site: None,
            slot: Slot::default(),
            domain: None,
            page_url: None,
            device: Device::default(),
            geo: Geo::default(),
            user: User::default(),
            key_values: &[],
        }
    }

    /// The formats the slot accepts (banner when it names none).
    pub fn formats(&self) -> &'a [Format] {
        if self.slot.formats.is_empty() {
            &[Format::Banner]
        } else {
            self.slot.formats
        }
    }
}

/// The page host and each parent domain: `a.b.example.com`, `b.example.com`, `example.com`,
/// `com`. A domain target matches the host or any subdomain of it.
pub(crate) fn domain_suffixes(host: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(host);
    std::iter::from_fn(move || {
        let current = rest?;
        rest = current.split_once('.').map(|(_, parent)| parent);
        Some(current)
    })
    .filter(|suffix| !suffix.is_empty())
}
