//! Who the visitor of an ad request or a counted event is, and where: the stage every ad
//! request and every event passes before its decision or its count.
//!
//! - **Location** from the geo database (`[geo]`, or the demo's), looked up by the client's
//!   address (the socket's peer, or the address a trusted proxy forwarded: `client.rs`),
//!   through a per-worker cache. A CDN's country header (`edge.country_header`) overrides the
//!   database's country; the database's finer fields are kept only when it agrees.
//! - **Device** type, OS and browser families from User-Agent Client Hints and the User-Agent
//!   (`marquee_device`).
//!
//! Nothing here is stored: the event log keeps the country and the device type only
//! (`docs/privacy.md`).

use std::cell::RefCell;
use std::sync::Arc;

use hyper::header::{HeaderMap, HeaderName, USER_AGENT};
use marquee_device::{ClientHints, Device};
use marquee_engine::Geo;
use marquee_geo::{CountryCode, GeoSource, Location, LookupCache};
use marquee_model::{ConnectionType, DeviceType};

use crate::Edge;
use crate::client::Client;

/// Addresses each worker remembers with their location. A hit costs a hash and a compare; a
/// miss, a lookup in the database (see `crates/geo/README.md` for both).
const CACHED_ADDRESSES: usize = 8192;

thread_local! {
    static LOOKUPS: RefCell<LookupCache> = RefCell::new(LookupCache::new(CACHED_ADDRESSES));
}

const SEC_CH_UA: HeaderName = HeaderName::from_static("sec-ch-ua");
const SEC_CH_UA_MOBILE: HeaderName = HeaderName::from_static("sec-ch-ua-mobile");
const SEC_CH_UA_PLATFORM: HeaderName = HeaderName::from_static("sec-ch-ua-platform");

/// Where the visitor is and what it browses with, as far as the request tells.
#[derive(Debug, Clone, Default)]
pub(crate) struct Visitor {
    /// The database's answer for the client's address.
    location: Option<Arc<Location>>,
    /// The country header's code, which overrides the database's country.
    country_header: Option<CountryCode>,
    pub(crate) device: Device,
}

impl Visitor {
    /// What the request (`headers`, from `client`) tells of its visitor.
    pub(crate) fn of(edge: &Edge, headers: &HeaderMap, client: &Client<'_>) -> Visitor {
        let country_header = edge
            .config
            .country_header
            .as_deref()
            .and_then(|name| headers.get(name))
            .and_then(|value| value.to_str().ok())
            .and_then(CountryCode::new);
        let location = edge.geo.as_ref().and_then(|geo| locate(geo, client));
        Visitor {
            location,
            country_header,
            device: device(headers),
        }
    }

    /// A visitor located at `location` (a bid request's address looked up), with no device.
    pub(crate) fn at(location: Option<Arc<Location>>) -> Visitor {
        Visitor {
            location,
            ..Visitor::default()
        }
    }

    /// ISO 3166-1 alpha-2: the country header's, else the database's.
    pub(crate) fn country(&self) -> Option<&str> {
        self.country_header
            .as_ref()
            .or_else(|| self.location.as_ref()?.country.as_ref())
            .map(CountryCode::as_str)
    }

    /// The country as the event log stores it: two ASCII letters, `[0, 0]` when unknown.
    pub(crate) fn country_bytes(&self) -> [u8; 2] {
        match self.country().map(str::as_bytes) {
            Some(&[a, b]) => [a, b],
            _ => [0, 0],
        }
    }

    pub(crate) fn device_type(&self) -> Option<DeviceType> {
        self.device.device_type
    }

    /// The visitor's location as the engine's targeting reads it. With a country header that
    /// disagrees with the database, only the header's country is known.
    pub(crate) fn geo(&self) -> Geo<'_> {
        let location = self.location.as_deref().filter(|location| {
            self.country_header
                .is_none_or(|header| location.country == Some(header))
        });
        let Some(location) = location else {
            return Geo {
                country: self.country(),
                ..Geo::default()
            };
        };
        Geo {
            country: self.country(),
            region: location.region.as_ref().map(|r| r.as_str()),
            city: location.city.as_deref(),
            point: location.point.map(|p| (p.lat, p.lon)),
            metro: location.metro,
            postal: location.postal.as_deref(),
            asn: location.asn,
            connection_type: location.connection_type.map(connection_type),
        }
    }
}

/// The location of `client`'s address in the current database, through this worker's cache.
fn locate(geo: &GeoSource, client: &Client<'_>) -> Option<Arc<Location>> {
    let address = client.ip()?;
    let database = geo.load();
    LOOKUPS.with(|cache| cache.borrow_mut().lookup(&database, address))
}

/// The location of `address` (a bid request's `device.ip`), through this worker's cache.
pub(crate) fn locate_address(edge: &Edge, address: std::net::IpAddr) -> Option<Arc<Location>> {
    let database = edge.geo.as_ref()?.load();
    LOOKUPS.with(|cache| cache.borrow_mut().lookup(&database, address))
}

/// The device from the client hints and the User-Agent.
fn device(headers: &HeaderMap) -> Device {
    let text = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let user_agent = headers.get(USER_AGENT).map_or(&[][..], |v| v.as_bytes());
    marquee_device::detect(
        user_agent,
        ClientHints {
            mobile: text(&SEC_CH_UA_MOBILE),
            platform: text(&SEC_CH_UA_PLATFORM),
            brands: text(&SEC_CH_UA),
        },
    )
}

fn connection_type(kind: marquee_geo::ConnectionType) -> ConnectionType {
    match kind {
        marquee_geo::ConnectionType::CableDsl => ConnectionType::CableDsl,
        marquee_geo::ConnectionType::Cellular => ConnectionType::Cellular,
        marquee_geo::ConnectionType::Corporate => ConnectionType::Corporate,
        marquee_geo::ConnectionType::Satellite => ConnectionType::Satellite,
    }
}
