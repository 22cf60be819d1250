//! Databases for the tests, written by the crate's writer.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use marquee_geo::writer::{DatabaseWriter, Value, asn_record, city_record};
use marquee_geo::{ConnectionType, CountryCode, Location, Point, RegionCode};

/// A location with the City fields set.
pub fn city(
    country: &str,
    subdivision: &str,
    name: &str,
    postal: &str,
    lat: f64,
    lon: f64,
) -> Location {
    let country = CountryCode::new(country).unwrap();
    Location {
        country: Some(country),
        region: RegionCode::new(country, subdivision),
        city: Some(name.into()),
        postal: Some(postal.into()),
        point: Point::new(lat, lon),
        ..Location::default()
    }
}

/// A location with only a country.
pub fn country(code: &str) -> Location {
    Location {
        country: CountryCode::new(code),
        ..Location::default()
    }
}

/// A location with only network fields.
pub fn network(asn: u32, org: &str, connection_type: Option<ConnectionType>) -> Location {
    Location {
        asn: Some(asn),
        as_org: Some(org.into()),
        connection_type,
        ..Location::default()
    }
}

/// A City database of these networks and locations, in this order.
pub fn city_database(networks: &[(&str, &Location)]) -> Vec<u8> {
    let records: Vec<(&str, Value)> = networks.iter().map(|(n, l)| (*n, city_record(l))).collect();
    database("Test-City", &records)
}

/// A network database of these networks: AS number and organisation, and connection type
/// when set, in one record.
pub fn network_database(networks: &[(&str, &Location)]) -> Vec<u8> {
    let records: Vec<(&str, Value)> = networks
        .iter()
        .map(|(n, l)| {
            let Value::Map(mut entries) = asn_record(l) else {
                unreachable!("asn_record writes a map")
            };
            if let Some(kind) = l.connection_type {
                entries.push((
                    "connection_type".into(),
                    Value::from(marquee_geo::connection_type_database_name(kind)),
                ));
            }
            (*n, Value::Map(entries))
        })
        .collect();
    database("Test-ASN", &records)
}

/// A database of these networks and records.
pub fn database(database_type: &str, records: &[(&str, Value)]) -> Vec<u8> {
    let mut writer = DatabaseWriter::new(database_type, "test");
    writer.language("en").build_epoch(1_700_000_000);
    for (network, record) in records {
        writer.insert(network.parse().unwrap(), record).unwrap();
    }
    writer.to_bytes().unwrap()
}

/// Replaces the file at `path` as an updater does: a complete new file renamed over it. Each
/// replacement gets a modification time of its own, a second after the last, so that a
/// change shows even where the file system's clock is coarse and the length is unchanged.
pub fn replace(path: &Path, bytes: &[u8]) {
    static NEXT: AtomicU64 = AtomicU64::new(1_700_000_000);
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, bytes).unwrap();
    let file = std::fs::File::options()
        .write(true)
        .open(&temporary)
        .unwrap();
    let modified =
        SystemTime::UNIX_EPOCH + Duration::from_secs(NEXT.fetch_add(1, Ordering::Relaxed));
    file.set_modified(modified).unwrap();
    drop(file);
    std::fs::rename(&temporary, path).unwrap();
}

/// `bytes` with the metadata's `record_size` changed to 20, a width the format does not
/// have: a file whose tree and data are fine but whose metadata is not.
pub fn with_bad_record_size(bytes: &[u8]) -> Vec<u8> {
    let marker = b"\xAB\xCD\xEFMaxMind.com";
    let metadata = bytes
        .windows(marker.len())
        .rposition(|w| w == marker)
        .unwrap()
        + marker.len();
    let key = b"\x4brecord_size";
    let at = metadata
        + bytes[metadata..]
            .windows(key.len())
            .position(|w| w == key)
            .unwrap()
        + key.len();
    // The value: uint16 of one byte (type 5, size 1), then the width.
    assert_eq!(bytes[at], 0xa1);
    let mut bad = bytes.to_vec();
    bad[at + 1] = 20;
    bad
}
