//! What a lookup yields.

use std::fmt;
use std::sync::Arc;

/// Where an address is, as far as the databases know. Every field is optional: a database may
/// lack a field altogether (a Country database has no city) or for some networks (many have a
/// country but no city).
///
/// Compact and owned, so that a per-worker cache can keep it behind an `Arc`: the two codes
/// are stored inline, only the free-text names are allocated, and those are shared (`Arc`)
/// so that a location made of a City record and a network record decoded earlier copies
/// none of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Location {
    /// ISO 3166-1 alpha-2, e.g. `US`.
    pub country: Option<CountryCode>,
    /// ISO 3166-2, e.g. `US-CA`: the country and the first (largest) subdivision's code.
    pub region: Option<RegionCode>,
    /// The city's English name, e.g. `San Francisco`.
    pub city: Option<Arc<str>>,
    /// The Nielsen DMA code (`807` for San Francisco–Oakland–San Jose); United States only.
    pub metro: Option<u16>,
    /// The postal code as the database writes it (for the UK and Canada, only its first part).
    pub postal: Option<Arc<str>>,
    /// An approximate point for the network, often the centre of a city or a country.
    pub point: Option<Point>,
    /// The autonomous system announcing the network, from the optional network database.
    pub asn: Option<u32>,
    /// The autonomous system's organisation, from the optional network database.
    pub as_org: Option<Arc<str>>,
    /// The kind of access network, from the optional network database.
    pub connection_type: Option<ConnectionType>,
}

/// Latitude and longitude in degrees (WGS 84). Only in-range, finite values are read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub lat: f64,
    pub lon: f64,
}

impl Point {
    /// The point, if both coordinates are finite and in range.
    pub fn new(lat: f64, lon: f64) -> Option<Point> {
        ((-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon))
            .then_some(Point { lat, lon })
    }
}

/// An ISO 3166-1 alpha-2 country code, two uppercase ASCII letters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountryCode([u8; 2]);

impl CountryCode {
    /// Two ASCII letters in either case; anything else is `None`.
    pub fn new(code: &str) -> Option<CountryCode> {
        match code.as_bytes() {
            &[a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => Some(CountryCode([
                a.to_ascii_uppercase(),
                b.to_ascii_uppercase(),
            ])),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &str {
        // Both bytes are ASCII letters (checked in `new`), so this never fails.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// An ISO 3166-2 subdivision code as `CC-SUB`: the country, a hyphen and one to three
/// uppercase ASCII letters or digits (`US-CA`, `GB-ENG`, `FR-75C`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionCode {
    /// `CC-SUB`, padded with zeros after `len` bytes.
    bytes: [u8; 6],
    len: u8,
}

impl RegionCode {
    /// The region of `country` whose subdivision code is `subdivision` (one to three ASCII
    /// letters or digits, in either case); anything else is `None`.
    pub fn new(country: CountryCode, subdivision: &str) -> Option<RegionCode> {
        let sub = subdivision.as_bytes();
        if !(1..=3).contains(&sub.len()) || !sub.iter().all(u8::is_ascii_alphanumeric) {
            return None;
        }
        let mut bytes = [0; 6];
        bytes[..2].copy_from_slice(&country.0);
        bytes[2] = b'-';
        for (to, from) in bytes[3..].iter_mut().zip(sub) {
            *to = from.to_ascii_uppercase();
        }
        Some(RegionCode {
            bytes,
            len: 3 + sub.len() as u8,
        })
    }

    /// Parses `CC-SUB`, e.g. `US-CA`.
    pub fn parse(code: &str) -> Option<RegionCode> {
        let (country, subdivision) = code.split_once('-')?;
        RegionCode::new(CountryCode::new(country)?, subdivision)
    }

    pub fn as_str(&self) -> &str {
        // ASCII only (checked in `new`), so this never fails.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }

    pub fn country(&self) -> CountryCode {
        CountryCode([self.bytes[0], self.bytes[1]])
    }

    /// The part after the hyphen, e.g. `CA` of `US-CA`.
    pub fn subdivision(&self) -> &str {
        &self.as_str()[3..]
    }
}

/// The kind of access network targeting names ([`marquee_model::ConnectionType`]), read from a
/// GeoIP2 Connection-Type database's `connection_type`.
///
/// Values the database may gain later, and the retired `Dialup`, are read as no connection
/// type at all rather than as a catch-all variant: targeting names one of these four, and an
/// unknown kind matches none of them either way.
pub use marquee_model::ConnectionType;

/// The connection type a database names (`Cable/DSL`, `Cellular`, `Corporate`,
/// `Satellite`); `None` for any other string.
pub fn connection_type_from_database_name(name: &str) -> Option<ConnectionType> {
    match name {
        "Cable/DSL" => Some(ConnectionType::CableDsl),
        "Cellular" => Some(ConnectionType::Cellular),
        "Corporate" => Some(ConnectionType::Corporate),
        "Satellite" => Some(ConnectionType::Satellite),
        _ => None,
    }
}

/// The database's name for a connection type, e.g. `Cable/DSL`.
pub fn connection_type_database_name(kind: ConnectionType) -> &'static str {
    match kind {
        ConnectionType::CableDsl => "Cable/DSL",
        ConnectionType::Cellular => "Cellular",
        ConnectionType::Corporate => "Corporate",
        ConnectionType::Satellite => "Satellite",
    }
}

impl fmt::Debug for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountryCode({})", self.as_str())
    }
}

impl fmt::Display for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for RegionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RegionCode({})", self.as_str())
    }
}

impl fmt::Display for RegionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_in_either_case_and_shown_in_upper_case() {
        let us = CountryCode::new("us").unwrap();
        assert_eq!(us.as_str(), "US");
        let region = RegionCode::new(us, "ca").unwrap();
        assert_eq!(region.as_str(), "US-CA");
        assert_eq!(region.subdivision(), "CA");
        assert_eq!(region.country(), us);
        assert_eq!(RegionCode::parse("fr-75c").unwrap().as_str(), "FR-75C");
        assert_eq!(RegionCode::parse("GB-ENG").unwrap().to_string(), "GB-ENG");
    }

    #[test]
    fn malformed_codes_are_none() {
        for bad in ["", "U", "USA", "U1", "é", "\0\0"] {
            assert_eq!(CountryCode::new(bad), None, "{bad:?}");
        }
        let us = CountryCode::new("US").unwrap();
        for bad in ["", "ABCD", "C-A", "é"] {
            assert_eq!(RegionCode::new(us, bad), None, "{bad:?}");
        }
        for bad in ["US", "USCA", "U-CA", "-CA", "US-"] {
            assert_eq!(RegionCode::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn points_out_of_range_are_none() {
        assert!(Point::new(37.7749, -122.4194).is_some());
        assert!(Point::new(90.0, 180.0).is_some());
        assert!(Point::new(90.5, 0.0).is_none());
        assert!(Point::new(0.0, -180.5).is_none());
        assert!(Point::new(f64::NAN, 0.0).is_none());
        assert!(Point::new(0.0, f64::INFINITY).is_none());
    }

    #[test]
    fn connection_types_round_trip_their_database_names() {
        for kind in [
            ConnectionType::CableDsl,
            ConnectionType::Cellular,
            ConnectionType::Corporate,
            ConnectionType::Satellite,
        ] {
            assert_eq!(
                connection_type_from_database_name(connection_type_database_name(kind)),
                Some(kind)
            );
        }
        assert_eq!(connection_type_from_database_name("Dialup"), None);
        assert_eq!(connection_type_from_database_name("cellular"), None);
    }
}
