//! Records in the layouts of GeoIP2's databases, from a [`Location`]'s fields. Only the
//! fields that are set are written, and only the keys this crate reads.

use crate::location::Location;

use super::Value;

/// A City database's record: `country.iso_code`, `subdivisions[0].iso_code` (the part of
/// the region after the hyphen), `city.names.en`, `location.latitude`, `.longitude` and
/// `.metro_code`, and `postal.code`. With only a country set, it is a Country database's
/// record.
pub fn city_record(location: &Location) -> Value {
    let mut entries = Vec::new();
    if let Some(country) = location.country {
        entries.push(("country", iso_code(country.as_str())));
    }
    if let Some(region) = location.region {
        entries.push((
            "subdivisions",
            Value::Array(vec![iso_code(region.subdivision())]),
        ));
    }
    if let Some(city) = &location.city {
        entries.push((
            "city",
            Value::map([("names", Value::map([("en", Value::from(&**city))]))]),
        ));
    }
    let mut coordinates = Vec::new();
    if let Some(point) = location.point {
        coordinates.push(("latitude", Value::Double(point.lat)));
        coordinates.push(("longitude", Value::Double(point.lon)));
    }
    if let Some(metro) = location.metro {
        coordinates.push(("metro_code", Value::Uint16(metro)));
    }
    if !coordinates.is_empty() {
        entries.push(("location", Value::map(coordinates)));
    }
    if let Some(postal) = &location.postal {
        entries.push(("postal", Value::map([("code", Value::from(&**postal))])));
    }
    Value::map(entries)
}

/// An ASN database's record: `autonomous_system_number` and
/// `autonomous_system_organization`.
pub fn asn_record(location: &Location) -> Value {
    let mut entries = Vec::new();
    if let Some(asn) = location.asn {
        entries.push(("autonomous_system_number", Value::Uint32(asn)));
    }
    if let Some(org) = &location.as_org {
        entries.push(("autonomous_system_organization", Value::from(&**org)));
    }
    Value::map(entries)
}

/// A Connection-Type database's record: `connection_type`, e.g. `Cable/DSL`.
pub fn connection_type_record(location: &Location) -> Value {
    let mut entries = Vec::new();
    if let Some(kind) = location.connection_type {
        entries.push((
            "connection_type",
            Value::from(crate::location::connection_type_database_name(kind)),
        ));
    }
    Value::map(entries)
}

fn iso_code(code: &str) -> Value {
    Value::map([("iso_code", Value::from(code))])
}
