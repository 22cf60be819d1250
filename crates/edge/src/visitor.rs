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
//! Nothing here is stored: the event log keeps the country, the region and the device type only
//! (`docs/privacy.md`).

use std::cell::RefCell;
use std::sync::Arc;

use hyper::header::HeaderMap;
use marquee_device::Device;
use marquee_engine::Geo;
use marquee_geo::{CountryCode, GeoSource, Location, LookupCache};
use marquee_model::DeviceType;

use crate::Edge;
use crate::client::Client;
use crate::device_cache::{DeviceCache, DeviceHeaders};

/// Addresses each worker remembers with their location. A hit costs a hash and a compare; a
/// miss, a lookup in the database (see `crates/geo/README.md` for both).
const CACHED_ADDRESSES: usize = 8192;

thread_local! {
    static LOOKUPS: RefCell<LookupCache> = RefCell::new(LookupCache::new(CACHED_ADDRESSES));
    static DEVICES: RefCell<DeviceCache> = RefCell::new(DeviceCache::new());
}

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

    /// The region as the event log stores it: the subdivision code of the region the engine
    /// sees (so none when a country header disagrees with the database), `0`-padded.
    pub(crate) fn region_bytes(&self) -> [u8; 3] {
        let mut bytes = [0u8; 3];
        if let Some(region) = self.geo().region {
            let subdivision = region.split_once('-').map_or("", |(_, code)| code);
            for (slot, byte) in bytes.iter_mut().zip(subdivision.bytes()) {
                *slot = byte;
            }
        }
        bytes
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
            connection_type: location.connection_type,
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

/// The device from the client hints and the User-Agent, through this worker's cache. The
/// headers are found in one pass over the request's few headers, which costs less than a
/// hashed lookup of each of the four names; the first of each counts.
fn device(headers: &HeaderMap) -> Device {
    let mut found = DeviceHeaders::default();
    let mut user_agent = None;
    for (name, value) in headers {
        let slot = match name.as_str() {
            "user-agent" => {
                user_agent.get_or_insert(value.as_bytes());
                continue;
            }
            "sec-ch-ua" => &mut found.brands,
            "sec-ch-ua-mobile" => &mut found.mobile,
            "sec-ch-ua-platform" => &mut found.platform,
            _ => continue,
        };
        if slot.is_none() {
            *slot = value.to_str().ok();
        }
    }
    found.user_agent = user_agent.unwrap_or_default();
    DEVICES.with(|cache| cache.borrow_mut().device(&found))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::net::{IpAddr, SocketAddr};
    use std::time::Duration;

    use hyper::Method;
    use hyper::header::HeaderValue;
    use ipnet::IpNet;
    use marquee_eventlog::EventLog;
    use marquee_geo::GeoDatabase;
    use marquee_tracking::KeyRing;

    use super::*;
    use crate::{EdgeConfig, Fallback, Limits};

    /// An edge locating visitors with the demo database (10/8 Berlin, 192.168/16 London,
    /// loopback San Francisco), reading the country from `X-Country` if `header`.
    fn edge(dir: &std::path::Path, geo: bool, header: bool) -> Edge {
        let log = EventLog::open(dir.join("events"), marquee_eventlog::Config::default()).unwrap();
        let keys = KeyRing::new(1, [(1u8, &[9u8; 32][..])]).unwrap();
        let edge = Edge::new(
            EdgeConfig {
                public_url: "http://127.0.0.1".into(),
                token_lifetime: Duration::from_secs(600),
                fallback: Fallback::Empty,
                cookies: false,
                country_header: header.then(|| "x-country".to_owned()),
                data_dir: dir.join("edge"),
                limits: Limits::default(),
            },
            Arc::new(log),
            keys,
        );
        if !geo {
            return edge;
        }
        let database = GeoDatabase::from_bytes(marquee_geo::demo::demo_database(), None).unwrap();
        edge.with_geo(Arc::new(GeoSource::fixed(database)))
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn visitor(edge: &Edge, peer: &str, headers: &HeaderMap, trusted: &[IpNet]) -> Visitor {
        let peer = SocketAddr::new(peer.parse::<IpAddr>().unwrap(), 40_000);
        let client = Client::of(Some(peer), &Method::GET, headers, trusted);
        Visitor::of(edge, headers, &client)
    }

    #[test]
    fn the_peer_s_address_is_located_with_every_field_the_database_has() {
        let dir = tempfile::tempdir().unwrap();
        let edge = edge(dir.path(), true, false);
        let berlin = visitor(&edge, "10.1.2.3", &HeaderMap::new(), &[]);
        let geo = berlin.geo();
        assert_eq!(geo.country, Some("DE"));
        assert_eq!(geo.region, Some("DE-BE"));
        assert_eq!(geo.city, Some("Berlin"));
        assert_eq!(geo.postal, Some("10115"));
        let (lat, lon) = geo.point.unwrap();
        assert!((lat - 52.52).abs() < 0.01 && (lon - 13.405).abs() < 0.01);
        assert_eq!(berlin.country_bytes(), *b"DE");
        assert_eq!(berlin.region_bytes(), *b"BE\0");

        let here = visitor(&edge, "127.0.0.1", &HeaderMap::new(), &[]);
        assert_eq!(here.geo().metro, Some(807));
        assert_eq!(here.geo().region, Some("US-CA"));
        assert_eq!(here.region_bytes(), *b"CA\0");

        // An address the database does not know: nothing, and the log stores no country.
        let unknown = visitor(&edge, "203.0.113.9", &HeaderMap::new(), &[]);
        assert_eq!(unknown.geo().country, None);
        assert_eq!(unknown.country_bytes(), [0, 0]);
        assert_eq!(unknown.region_bytes(), [0; 3]);
    }

    #[test]
    fn a_forwarded_address_is_located_only_behind_a_trusted_proxy() {
        let dir = tempfile::tempdir().unwrap();
        let edge = edge(dir.path(), true, false);
        let forwarded = headers(&[("x-forwarded-for", "192.168.7.7")]);
        let proxy: IpNet = "10.0.0.0/8".parse().unwrap();
        // From the trusted proxy (Berlin's range), the forwarded client is in London.
        let behind = visitor(&edge, "10.9.9.9", &forwarded, &[proxy]);
        assert_eq!(behind.country(), Some("GB"));
        // The same header from a peer that is no proxy of ours is not believed.
        let claimed = visitor(&edge, "10.9.9.9", &forwarded, &[]);
        assert_eq!(claimed.country(), Some("DE"));
    }

    #[test]
    fn the_country_header_overrides_and_a_disagreeing_database_keeps_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let edge = edge(dir.path(), true, true);
        let agreeing = visitor(&edge, "10.1.2.3", &headers(&[("x-country", "de")]), &[]);
        assert_eq!(agreeing.geo().country, Some("DE"));
        assert_eq!(agreeing.geo().city, Some("Berlin"));
        let disagreeing = visitor(&edge, "10.1.2.3", &headers(&[("x-country", "FR")]), &[]);
        let geo = disagreeing.geo();
        assert_eq!(geo.country, Some("FR"));
        assert_eq!((geo.region, geo.city, geo.point), (None, None, None));
        assert_eq!(disagreeing.country_bytes(), *b"FR");
        assert_eq!(
            disagreeing.region_bytes(),
            [0; 3],
            "Berlin's region is not France's"
        );
        // A header that is not a country code is ignored.
        let junk = visitor(
            &edge,
            "10.1.2.3",
            &headers(&[("x-country", "Germany")]),
            &[],
        );
        assert_eq!(junk.country(), Some("DE"));
    }

    #[test]
    fn without_a_database_only_the_country_header_locates() {
        let dir = tempfile::tempdir().unwrap();
        let edge = edge(dir.path(), false, true);
        let none = visitor(&edge, "10.1.2.3", &HeaderMap::new(), &[]);
        assert_eq!(none.geo().country, None);
        let header = visitor(&edge, "10.1.2.3", &headers(&[("x-country", "at")]), &[]);
        assert_eq!(header.geo().country, Some("AT"));
        assert_eq!(header.geo().region, None);
    }

    #[test]
    fn client_hints_and_the_user_agent_give_the_device() {
        let dir = tempfile::tempdir().unwrap();
        let edge = edge(dir.path(), false, false);
        let phone = visitor(
            &edge,
            "10.1.2.3",
            &headers(&[
                (
                    "user-agent",
                    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
                ),
                ("sec-ch-ua-mobile", "?1"),
                ("sec-ch-ua-platform", "\"Android\""),
                (
                    "sec-ch-ua",
                    "\"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"",
                ),
            ]),
            &[],
        );
        assert_eq!(phone.device_type(), Some(DeviceType::Phone));
        assert_eq!(phone.device.os, Some("Android"));
        assert_eq!(phone.device.browser, Some("Chrome"));
        let none = visitor(&edge, "10.1.2.3", &HeaderMap::new(), &[]);
        assert_eq!(none.device.browser, None);
    }
}
