//! A small database of made-up locations for loopback and private addresses, so that a
//! demo or a test on one machine shows geotargeting at work without a real database: the
//! requests of such a setup come from exactly those addresses, which no real database
//! locates.
//!
//! | network | location |
//! |---|---|
//! | `127.0.0.0/8`, `::1/128` | US, US-CA, San Francisco, metro 807, 94103, 37.7749 −122.4194 |
//! | `10.0.0.0/8`, `fc00::/7` | DE, DE-BE, Berlin, 10115, 52.52 13.405 |
//! | `192.168.0.0/16` | GB, GB-ENG, London, EC1A, 51.5074 −0.1278 |
//! | `172.16.0.0/12` | FR, FR-IDF, Paris, 75001, 48.8566 2.3522 |

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::location::{CountryCode, Location, Point, RegionCode};
use crate::writer::{DatabaseWriter, WriteError, city_record};

/// The demo database's `database_type`.
pub const DEMO_DATABASE_TYPE: &str = "Marquee-Demo-City";

/// The demo database (City layout), as a file's bytes: open it with
/// [`GeoDatabase::from_bytes`](crate::GeoDatabase::from_bytes) or write it to a file.
/// Its build time is fixed, so the bytes are the same on every call.
pub fn demo_database() -> Vec<u8> {
    match write_demo() {
        Ok(bytes) => bytes,
        // Five small records and seven networks are far inside every limit of the format,
        // the only thing the writer can fail on.
        Err(e) => unreachable!("the demo database could not be written: {e}"),
    }
}

fn write_demo() -> Result<Vec<u8>, WriteError> {
    let mut writer = DatabaseWriter::new(
        DEMO_DATABASE_TYPE,
        "Marquee demo locations for loopback and private addresses: made up for \
         demonstrations and tests, not real geolocation.",
    );
    writer
        .language("en")
        // 2025-01-01T00:00:00Z.
        .build_epoch(1_735_689_600);

    let san_francisco = demo_location(
        "US",
        "CA",
        "San Francisco",
        Some(807),
        "94103",
        37.7749,
        -122.4194,
    );
    let berlin = demo_location("DE", "BE", "Berlin", None, "10115", 52.52, 13.405);
    let london = demo_location("GB", "ENG", "London", None, "EC1A", 51.5074, -0.1278);
    let paris = demo_location("FR", "IDF", "Paris", None, "75001", 48.8566, 2.3522);
    let networks = [
        (v4(127, 0, 0, 0, 8), &san_francisco),
        (v6(Ipv6Addr::LOCALHOST, 128), &san_francisco),
        (v4(10, 0, 0, 0, 8), &berlin),
        (v6(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7), &berlin),
        (v4(192, 168, 0, 0, 16), &london),
        (v4(172, 16, 0, 0, 12), &paris),
    ];
    for (network, location) in networks {
        writer.insert(network, &city_record(location))?;
    }
    writer.to_bytes()
}

// `new_assert` panics only for a prefix longer than the address, which the constant
// prefixes above are not.
const fn v4(a: u8, b: u8, c: u8, d: u8, prefix_len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), prefix_len))
}

const fn v6(address: Ipv6Addr, prefix_len: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new_assert(address, prefix_len))
}

fn demo_location(
    country: &str,
    subdivision: &str,
    city: &str,
    metro: Option<u16>,
    postal: &str,
    lat: f64,
    lon: f64,
) -> Location {
    let country = CountryCode::new(country);
    Location {
        country,
        region: country.and_then(|c| RegionCode::new(c, subdivision)),
        city: Some(city.into()),
        metro,
        postal: Some(postal.into()),
        point: Point::new(lat, lon),
        ..Location::default()
    }
}
