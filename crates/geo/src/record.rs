//! The fields this crate reads from a record, decoded in place.
//!
//! Each struct names only the keys it needs: the decoder skips every other key without
//! expanding it, and strings are borrowed from the database's buffer, so a lookup allocates
//! only for the names it keeps. The key layout is GeoIP2's, which GeoLite2 and DB-IP's lite
//! files share.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};

use crate::location::{
    CountryCode, Location, Point, RegionCode, connection_type_from_database_name,
};

/// A City or Country database's record.
#[derive(Debug, Deserialize)]
pub(crate) struct CityRecord<'a> {
    #[serde(borrow)]
    country: Option<Country<'a>>,
    #[serde(borrow)]
    subdivisions: Option<FirstSubdivision<'a>>,
    #[serde(borrow)]
    city: Option<City<'a>>,
    location: Option<Coordinates>,
    #[serde(borrow)]
    postal: Option<Postal<'a>>,
}

#[derive(Debug, Deserialize)]
struct Country<'a> {
    iso_code: Option<&'a str>,
}

#[derive(Debug, Deserialize)]
struct Subdivision<'a> {
    iso_code: Option<&'a str>,
}

#[derive(Debug, Deserialize)]
struct City<'a> {
    #[serde(borrow)]
    names: Option<Names<'a>>,
}

#[derive(Debug, Deserialize)]
struct Names<'a> {
    en: Option<&'a str>,
}

#[derive(Debug, Deserialize)]
struct Coordinates {
    latitude: Option<Number>,
    longitude: Option<Number>,
    metro_code: Option<Number>,
}

#[derive(Debug, Deserialize)]
struct Postal<'a> {
    code: Option<&'a str>,
}

/// An ASN, Connection-Type (or ISP) database's record.
#[derive(Debug, Deserialize)]
pub(crate) struct NetworkRecord<'a> {
    autonomous_system_number: Option<Number>,
    autonomous_system_organization: Option<&'a str>,
    connection_type: Option<&'a str>,
}

/// A record that fills some of a [`Location`]'s fields.
pub(crate) trait Record<'a>: Deserialize<'a> {
    /// Fills the fields this kind of record has (leaving the others alone); returns whether
    /// the record had any of them.
    fn fill(&self, location: &mut Location) -> bool;
}

impl<'a> Record<'a> for CityRecord<'a> {
    fn fill(&self, location: &mut Location) -> bool {
        let country = self
            .country
            .as_ref()
            .and_then(|c| c.iso_code)
            .and_then(CountryCode::new);
        location.country = country;
        location.region = country.and_then(|country| {
            let subdivision = self.subdivisions.as_ref()?.0.as_ref()?.iso_code?;
            RegionCode::new(country, subdivision)
        });
        location.city = self
            .city
            .as_ref()
            .and_then(|c| c.names.as_ref())
            .and_then(|n| n.en)
            .and_then(non_empty);
        location.postal = self
            .postal
            .as_ref()
            .and_then(|p| p.code)
            .and_then(non_empty);
        if let Some(coordinates) = &self.location {
            location.metro = coordinates
                .metro_code
                .and_then(Number::as_u64)
                .and_then(|m| u16::try_from(m).ok());
            location.point = match (coordinates.latitude, coordinates.longitude) {
                (Some(lat), Some(lon)) => Point::new(lat.as_f64(), lon.as_f64()),
                _ => None,
            };
        }
        location.country.is_some()
            || location.city.is_some()
            || location.postal.is_some()
            || location.metro.is_some()
            || location.point.is_some()
    }
}

impl<'a> Record<'a> for NetworkRecord<'a> {
    fn fill(&self, location: &mut Location) -> bool {
        location.asn = self
            .autonomous_system_number
            .and_then(Number::as_u64)
            .and_then(|n| u32::try_from(n).ok());
        location.as_org = self.autonomous_system_organization.and_then(non_empty);
        location.connection_type = self
            .connection_type
            .and_then(connection_type_from_database_name);
        location.asn.is_some() || location.as_org.is_some() || location.connection_type.is_some()
    }
}

fn non_empty(text: &str) -> Option<Arc<str>> {
    (!text.is_empty()).then(|| text.into())
}

/// The first subdivision of a list: the largest, the one an ISO 3166-2 region is built from.
/// The rest are skipped without being collected.
#[derive(Debug)]
struct FirstSubdivision<'a>(Option<Subdivision<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstSubdivision<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct First<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for First<'a> {
            type Value = FirstSubdivision<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of subdivisions")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<Subdivision<'a>>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FirstSubdivision(first))
            }
        }

        deserializer.deserialize_seq(First(std::marker::PhantomData))
    }
}

/// A number of any of the format's numeric types. Databases differ in the width they store a
/// field in (a metro code as uint16 or uint32, a coordinate as double or float); reading
/// each field in one exact type would turn a harmless difference into an unreadable database.
#[derive(Debug, Clone, Copy)]
enum Number {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
}

impl Number {
    fn as_u64(self) -> Option<u64> {
        match self {
            Number::Unsigned(n) => Some(n),
            Number::Signed(n) => u64::try_from(n).ok(),
            Number::Float(_) => None,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Number::Unsigned(n) => n as f64,
            Number::Signed(n) => n as f64,
            Number::Float(x) => x,
        }
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AnyNumber;

        impl Visitor<'_> for AnyNumber {
            type Value = Number;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Number, E> {
                Ok(Number::Unsigned(n))
            }

            fn visit_u128<E: de::Error>(self, n: u128) -> Result<Number, E> {
                // A number this wide fits no field read here: out of range, like any other.
                Ok(Number::Unsigned(u64::try_from(n).unwrap_or(u64::MAX)))
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Number, E> {
                Ok(Number::Signed(n))
            }

            fn visit_f64<E: de::Error>(self, x: f64) -> Result<Number, E> {
                Ok(Number::Float(x))
            }
        }

        deserializer.deserialize_any(AnyNumber)
    }
}
