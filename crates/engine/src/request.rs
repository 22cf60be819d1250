//! The request view: one ad opportunity, borrowed from whatever the caller parsed (an ad
//! request's query string, an OpenRTB imp). Nothing here allocates.

use std::net::IpAddr;

use jiff::Timestamp;
use marquee_model::{
    Channel, ConnectionType, Currency, DeviceType, Format, Micros, PlacementId, SiteId, Size,
};

/// One opportunity to show an ad.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// When the request arrived; day-of-week and hour targeting resolve it per line item zone.
    pub now: Timestamp,
    /// Where the opportunity comes from: our tags (`Direct`) or an exchange's bid request
    /// (`Exchange`). Only line items that list the channel take part.
    pub channel: Channel,
    /// Our placement, for ad requests; ignored on the exchange channel.
    pub placement: Option<PlacementId>,
    /// Our site, for ad requests; ignored on the exchange channel.
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
    /// What the bid request blocks (OpenRTB `bcat`, `badv`, `bapp`); empty for ad requests.
    pub blocked: Blocked<'a>,
    /// The currency to bid in (the response's `cur`). Bids are converted into it, rounded
    /// down; `None` bids each line item in its own price currency.
    pub bid_currency: Option<Currency>,
}

/// What the ad slot (an OpenRTB imp) accepts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slot<'a> {
    /// Accepted sizes; empty means any size (up to `max_size`).
    pub sizes: &'a [Size],
    /// When `sizes` is empty, the largest banner that may fill the slot (`None`: no limit):
    /// a sizeless web or app slot must not draw a screen-sized out-of-home creative.
    pub max_size: Option<Size>,
    /// Accepted formats; empty means banner only.
    pub formats: &'a [Format],
    /// The lowest price (as CPM) the seller takes in the open auction (`bidfloor`).
    pub floor: Option<Floor>,
    /// Deals offered (`pmp.deals`), in the request's order; leave out deals whose `wseat`
    /// excludes our seat.
    pub deals: &'a [Deal<'a>],
    /// Only deal bids are taken (`pmp.private_auction`).
    pub private_auction: bool,
    /// Only creatives whose every URL is https may bid (`secure`).
    pub secure: bool,
    /// What a video creative must meet, when `formats` takes video.
    pub video: MediaRules<'a>,
    /// What an audio creative must meet, when `formats` takes audio.
    pub audio: MediaRules<'a>,
    /// The assets a native creative must have, when `formats` takes native.
    pub native: NativeNeeds,
}

/// A price per thousand impressions in a currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    pub cpm: Micros,
    pub currency: Currency,
}

/// A deal on offer in an imp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deal<'a> {
    /// The exchange's deal id, matched exactly against line items' deals.
    pub id: &'a str,
    /// The deal's floor, which replaces the imp's floor for bids on this deal; `None` keeps
    /// the imp's floor.
    pub floor: Option<Floor>,
}

/// Constraints of a video or audio imp; empty lists and `None` constrain nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct MediaRules<'a> {
    /// Accepted media types (`mimes`); a creative needs one of them.
    pub mimes: &'a [&'a str],
    /// Shortest and longest duration in seconds (`minduration`, `maxduration`).
    pub min_duration: Option<u32>,
    pub max_duration: Option<u32>,
    /// Exact durations accepted (`rqddurs`); when not empty, the range is not used.
    pub durations: &'a [u32],
    /// Accepted protocols (`protocols`, AdCOM ids); a creative needs one of them.
    pub protocols: &'a [u16],
}

/// The required assets of a native imp (Native 1.2 `assets` with `required: 1`), summarised
/// by the caller. An imp that requires an asset kind not listed here should not offer the
/// native format at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NativeNeeds {
    /// A title (`title`).
    pub title: Option<TextNeed>,
    /// A description (`data` type 2).
    pub body: Option<TextNeed>,
    /// The sponsor's name (`data` type 1).
    pub sponsored_by: Option<TextNeed>,
    /// A call to action (`data` type 12).
    pub call_to_action: Option<TextNeed>,
    /// A main image (`img` type 3).
    pub main_image: Option<ImageNeed>,
    /// An icon (`img` type 1).
    pub icon: Option<ImageNeed>,
}

/// A required text asset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextNeed {
    /// Longest accepted text in characters (`len`); `None` for no limit.
    pub max_chars: Option<u32>,
}

/// A required image asset: at least this many pixels each way (`wmin`/`hmin`, or `w`/`h`
/// when only those are given); 0 accepts any size, even an unknown one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageNeed {
    pub min_w: u32,
    pub min_h: u32,
}

/// What a bid request blocks. Matching is ASCII case-insensitive.
#[derive(Debug, Clone, Copy, Default)]
pub struct Blocked<'a> {
    /// IAB content categories (`bcat`); `IAB7` blocks its subcategories (`IAB7-39`) too.
    pub categories: &'a [&'a str],
    /// Advertiser domains (`badv`); a domain blocks its subdomains too.
    pub advertisers: &'a [&'a str],
    /// App bundles or store ids of advertised apps (`bapp`), matched exactly.
    pub apps: &'a [&'a str],
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Device<'a> {
    pub device_type: Option<DeviceType>,
    pub os: Option<&'a str>,
    pub browser: Option<&'a str>,
    pub language: Option<&'a str>,
    pub ip: Option<IpAddr>,
}

/// Where the request comes from. Each field is matched exactly as targeting spells it (the
/// caller normalises: upper-case country and region codes, a geo database's spelling of
/// cities and postal codes).
#[derive(Debug, Clone, Copy, Default)]
pub struct Geo<'a> {
    /// ISO 3166-1 alpha-2, e.g. `DE`.
    pub country: Option<&'a str>,
    /// ISO 3166-2, e.g. `DE-BY`.
    pub region: Option<&'a str>,
    pub city: Option<&'a str>,
    /// Latitude and longitude in degrees.
    pub point: Option<(f64, f64)>,
    /// Nielsen DMA code, e.g. `807`.
    pub metro: Option<u16>,
    pub postal: Option<&'a str>,
    /// Autonomous system number of the client's network.
    pub asn: Option<u32>,
    pub connection_type: Option<ConnectionType>,
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
            channel: Channel::Direct,
            placement: None,
            site: None,
            slot: Slot::default(),
            domain: None,
            page_url: None,
            device: Device::default(),
            geo: Geo::default(),
            user: User::default(),
            key_values: &[],
            blocked: Blocked::default(),
            bid_currency: None,
        }
    }

    /// The request as the engine reads it: on the exchange channel, our placement and site
    /// are cleared (an exchange's imp is none of our placements, and links admit ad requests
    /// only).
    pub(crate) fn on_its_channel(&self) -> Request<'a> {
        match self.channel {
            Channel::Direct => *self,
            Channel::Exchange => Request {
                placement: None,
                site: None,
                ..*self
            },
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

/// The longest name DNS allows.
const MAX_DOMAIN_LEN: usize = 253;

/// The page host and each parent domain: `a.b.example.com`, `b.example.com`, `example.com`,
/// `com`. A domain target matches the host or any subdomain of it. A host longer than DNS
/// allows is no domain and has none: hashing each suffix of a long one (`a.a.a.…`, from a
/// bid request) would cost time quadratic in its length.
pub(crate) fn domain_suffixes(host: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(host).filter(|host| host.len() <= MAX_DOMAIN_LEN);
    std::iter::from_fn(move || {
        let current = rest?;
        rest = current.split_once('.').map(|(_, parent)| parent);
        Some(current)
    })
    .filter(|suffix| !suffix.is_empty())
}

/// Whether `category` is `blocked` or one of its subcategories (`IAB7-39` under `IAB7`).
pub(crate) fn category_blocked(category: &str, blocked: &str) -> bool {
    match category.get(..blocked.len()) {
        Some(head) if head.eq_ignore_ascii_case(blocked) => {
            category.len() == blocked.len() || category.as_bytes()[blocked.len()] == b'-'
        }
        _ => false,
    }
}

/// Whether `domain` is `blocked` or a subdomain of it.
pub(crate) fn domain_blocked(domain: &str, blocked: &str) -> bool {
    let Some(cut) = domain.len().checked_sub(blocked.len()) else {
        return false;
    };
    domain
        .get(cut..)
        .is_some_and(|tail| tail.eq_ignore_ascii_case(blocked))
        && (cut == 0 || domain.as_bytes()[cut - 1] == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_category_covers_its_subcategories_only() {
        assert!(category_blocked("IAB7", "IAB7"));
        assert!(category_blocked("IAB7-39", "IAB7"));
        assert!(category_blocked("IAB7-39", "iab7-39"));
        assert!(!category_blocked("IAB7", "IAB7-39"));
        assert!(!category_blocked("IAB70", "IAB7"));
        assert!(!category_blocked("IAB1", "IAB17"));
    }

    #[test]
    fn a_host_longer_than_dns_allows_has_no_suffixes() {
        let longest = format!("{}com", "a.".repeat(125));
        assert_eq!(longest.len(), MAX_DOMAIN_LEN);
        assert_eq!(domain_suffixes(&longest).count(), 126);
        assert_eq!(domain_suffixes(&longest).last(), Some("com"));
        let longer = format!("a.{longest}");
        assert_eq!(domain_suffixes(&longer).count(), 0);
        assert_eq!(domain_suffixes(&"a.".repeat(20_000)).count(), 0);
    }

    #[test]
    fn a_blocked_domain_covers_its_subdomains_only() {
        assert!(domain_blocked("apple.com", "apple.com"));
        assert!(domain_blocked("store.apple.com", "Apple.com"));
        assert!(!domain_blocked("pineapple.com", "apple.com"));
        assert!(!domain_blocked("apple.com", "store.apple.com"));
        assert!(!domain_blocked("com", "apple.com"));
    }
}
