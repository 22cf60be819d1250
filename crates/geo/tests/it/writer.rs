//! The writer's output read by the `maxminddb` crate, the reader every database here is
//! opened with, as the judge of what the writer wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::net::IpAddr;

use marquee_geo::writer::{
    DatabaseWriter, Value, WriteError, asn_record, city_record, connection_type_record,
};
use marquee_geo::{ConnectionType, Location};
use maxminddb::{PathElement, Reader, geoip2};
use serde::Deserialize;
use support::{city, network};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A database of `networks`, each record `{"n": number}`.
fn numbered(networks: &[(&str, u16)]) -> Reader<Vec<u8>> {
    let mut writer = DatabaseWriter::new("Test", "test");
    for (network, number) in networks {
        writer
            .insert(
                network.parse().unwrap(),
                &Value::map([("n", Value::Uint16(*number))]),
            )
            .unwrap();
    }
    read(writer.to_bytes().unwrap())
}

/// The `n` of the record `address` is in, if any.
fn n_of(reader: &Reader<Vec<u8>>, address: &str) -> Option<u16> {
    reader
        .lookup(ip(address))
        .unwrap()
        .decode_path(&[PathElement::Key("n")])
        .unwrap()
}

fn read(bytes: Vec<u8>) -> Reader<Vec<u8>> {
    let reader = Reader::from_source(bytes).unwrap();
    // The reader's full check: metadata, every search-tree record, the separator, every
    // record in the data section.
    reader.verify().unwrap();
    reader
}

#[test]
fn the_metadata_says_what_was_written() {
    let mut writer = DatabaseWriter::new("Example-City", "An example");
    writer
        .description("de", "Ein Beispiel")
        .language("en")
        .language("de")
        .build_epoch(1_735_689_600);
    writer
        .insert(
            "10.0.0.0/8".parse().unwrap(),
            &Value::map([("a", Value::Uint16(1))]),
        )
        .unwrap();
    let reader = read(writer.to_bytes().unwrap());
    let metadata = reader.metadata();
    assert_eq!(metadata.database_type, "Example-City");
    assert_eq!(metadata.ip_version, 6);
    assert_eq!(metadata.binary_format_major_version, 2);
    assert_eq!(metadata.binary_format_minor_version, 0);
    assert_eq!(metadata.build_epoch, 1_735_689_600);
    assert_eq!(metadata.languages, ["en", "de"]);
    assert_eq!(
        metadata.description,
        BTreeMap::from([
            ("de".to_owned(), "Ein Beispiel".to_owned()),
            ("en".to_owned(), "An example".to_owned())
        ])
    );
    assert_eq!(metadata.record_size, 24);
    // 96 nodes above the IPv4 subtree, 8 in it down to 10/8 (the last one's record holds
    // the data), and 15 for the ::ffff:0:0/96 alias, whose path leaves ::/96's at bit 80.
    assert_eq!(metadata.node_count, 96 + 8 + 15);
}

#[test]
fn every_type_reads_back() {
    #[derive(Debug, Deserialize, PartialEq)]
    struct Everything {
        text: String,
        long_text: String,
        double: f64,
        small: u16,
        medium: u32,
        large: u64,
        yes: bool,
        no: bool,
        list: Vec<u32>,
        nested: BTreeMap<String, String>,
    }
    let long_text = "x".repeat(70_000);
    let record = Value::map([
        ("text", Value::from("héllo")),
        ("long_text", Value::from(long_text.as_str())),
        ("double", Value::Double(-122.4194)),
        ("small", Value::Uint16(807)),
        ("medium", Value::Uint32(4_000_000_000)),
        ("large", Value::Uint64(u64::MAX)),
        ("yes", Value::Boolean(true)),
        ("no", Value::Boolean(false)),
        (
            "list",
            Value::Array(vec![
                Value::Uint32(0),
                Value::Uint32(1),
                Value::Uint32(70_000),
            ]),
        ),
        (
            "nested",
            Value::map([("a", Value::from("b")), ("c", Value::from(""))]),
        ),
    ]);
    let mut writer = DatabaseWriter::new("Test", "test");
    writer
        .insert("2001:db8::/32".parse().unwrap(), &record)
        .unwrap();
    let reader = read(writer.to_bytes().unwrap());
    let found: Everything = reader
        .lookup(ip("2001:db8::1"))
        .unwrap()
        .decode()
        .unwrap()
        .unwrap();
    assert_eq!(
        found,
        Everything {
            text: "héllo".into(),
            long_text,
            double: -122.4194,
            small: 807,
            medium: 4_000_000_000,
            large: u64::MAX,
            yes: true,
            no: false,
            list: vec![0, 1, 70_000],
            nested: BTreeMap::from([("a".into(), "b".into()), ("c".into(), String::new())]),
        }
    );
}

#[test]
fn city_records_read_as_geoip2_city() {
    let location = Location {
        metro: Some(807),
        ..city("US", "CA", "San Francisco", "94103", 37.7749, -122.4194)
    };
    let mut writer = DatabaseWriter::new("Test-City", "test");
    writer.language("en");
    writer
        .insert("198.51.100.0/24".parse().unwrap(), &city_record(&location))
        .unwrap();
    let reader = read(writer.to_bytes().unwrap());
    let found = reader.lookup(ip("198.51.100.7")).unwrap();
    let record: geoip2::City = found.decode().unwrap().unwrap();
    assert_eq!(record.country.iso_code, Some("US"));
    assert_eq!(record.subdivisions[0].iso_code, Some("CA"));
    assert_eq!(record.city.names.english, Some("San Francisco"));
    assert_eq!(record.location.latitude, Some(37.7749));
    assert_eq!(record.location.longitude, Some(-122.4194));
    assert_eq!(record.location.metro_code, Some(807));
    assert_eq!(record.postal.code, Some("94103"));
    assert_eq!(found.network().unwrap().to_string(), "198.51.100.0/24");
}

#[test]
fn asn_and_connection_type_records_read_as_geoip2_layouts() {
    let location = network(64496, "Example Networks", Some(ConnectionType::Cellular));
    let mut writer = DatabaseWriter::new("Test-ASN", "test");
    writer
        .insert("198.51.100.0/24".parse().unwrap(), &asn_record(&location))
        .unwrap();
    writer
        .insert(
            "203.0.113.0/24".parse().unwrap(),
            &connection_type_record(&location),
        )
        .unwrap();
    let reader = read(writer.to_bytes().unwrap());
    let asn: geoip2::Asn = reader
        .lookup(ip("198.51.100.1"))
        .unwrap()
        .decode()
        .unwrap()
        .unwrap();
    assert_eq!(asn.autonomous_system_number, Some(64496));
    assert_eq!(asn.autonomous_system_organization, Some("Example Networks"));
    let kind: geoip2::ConnectionType = reader
        .lookup(ip("203.0.113.1"))
        .unwrap()
        .decode()
        .unwrap()
        .unwrap();
    assert_eq!(kind.connection_type, Some("Cellular"));
}

#[test]
fn ipv4_networks_are_found_as_ipv4_as_mapped_and_under_the_ipv4_subtree() {
    let reader = numbered(&[("10.0.0.0/8", 1), ("10.20.0.0/16", 2)]);
    let n = |address: &str| n_of(&reader, address);
    assert_eq!(n("10.1.2.3"), Some(1));
    assert_eq!(n("10.20.2.3"), Some(2));
    assert_eq!(n("::10.20.2.3"), Some(2));
    // The reader looks a mapped address up as it is: the alias leads it to the same records.
    assert_eq!(n("::ffff:10.20.2.3"), Some(2));
    assert_eq!(n("::ffff:11.0.0.1"), None);
    assert_eq!(n("11.0.0.1"), None);
    assert_eq!(
        reader
            .lookup(ip("10.20.9.9"))
            .unwrap()
            .network()
            .unwrap()
            .to_string(),
        "10.20.0.0/16"
    );
    // Iterating the networks lists each once: the alias is not a network of its own.
    let networks: Vec<String> = reader
        .networks(Default::default())
        .unwrap()
        .map(|n| n.unwrap().network().unwrap().to_string())
        .collect();
    assert_eq!(networks.len(), 9, "{networks:?}");
}

#[test]
fn ipv6_networks_over_the_mapped_range_are_kept_as_inserted() {
    let reader = numbered(&[("10.0.0.0/8", 1), ("::ffff:0:0/96", 2)]);
    let n = |address: &str| n_of(&reader, address);
    assert_eq!(n("10.0.0.1"), Some(1));
    assert_eq!(n("::ffff:10.0.0.1"), Some(2));
}

#[test]
fn all_of_ipv4_as_one_network_is_found_as_mapped_too() {
    let reader = numbered(&[("0.0.0.0/0", 1)]);
    let n = |address: &str| n_of(&reader, address);
    assert_eq!(n("1.2.3.4"), Some(1));
    assert_eq!(n("::ffff:1.2.3.4"), Some(1));
    assert_eq!(n("::1:0:0"), None);
    assert_eq!(n("2001:db8::1"), None);
}

#[test]
fn the_whole_address_space_can_be_one_network() {
    let reader = numbered(&[("::/0", 1), ("10.0.0.0/8", 2)]);
    let n = |address: &str| n_of(&reader, address);
    assert_eq!(n("2001:db8::1"), Some(1));
    assert_eq!(n("11.0.0.1"), Some(1));
    assert_eq!(n("10.0.0.1"), Some(2));
}

#[test]
fn host_bits_below_the_prefix_are_ignored() {
    let mut writer = DatabaseWriter::new("Test", "test");
    let network = ipnet::IpNet::new(ip("10.1.2.3"), 8).unwrap();
    writer
        .insert(network, &Value::map([("n", Value::Uint16(1))]))
        .unwrap();
    let reader = read(writer.to_bytes().unwrap());
    let found = reader.lookup(ip("10.200.0.1")).unwrap();
    assert!(found.has_data());
    assert_eq!(found.network().unwrap().to_string(), "10.0.0.0/8");
}

#[test]
fn large_databases_take_wider_records() {
    // A record past 2^24 bytes into the data section needs records of 28 bits.
    let mut writer = DatabaseWriter::new("Test", "test");
    let filler = "y".repeat(16_800_000);
    writer
        .insert(
            "10.0.0.0/8".parse().unwrap(),
            &Value::map([("filler", Value::from(filler.as_str()))]),
        )
        .unwrap();
    writer
        .insert(
            "11.0.0.0/8".parse().unwrap(),
            &Value::map([("n", Value::Uint16(7))]),
        )
        .unwrap();
    let reader = read(writer.to_bytes().unwrap());
    assert_eq!(reader.metadata().record_size, 28);
    let n: Option<u16> = reader
        .lookup(ip("11.1.1.1"))
        .unwrap()
        .decode_path(&[PathElement::Key("n")])
        .unwrap();
    assert_eq!(n, Some(7));
}

#[test]
fn values_larger_than_the_format_allows_are_an_error() {
    let mut writer = DatabaseWriter::new("Test", "test");
    let huge = "z".repeat(65_821 + (1 << 24));
    let err = writer
        .insert(
            "10.0.0.0/8".parse().unwrap(),
            &Value::map([("huge", Value::from(huge.as_str()))]),
        )
        .unwrap_err();
    assert_eq!(err, WriteError::ValueTooLarge { size: huge.len() });
}

#[test]
fn shared_records_are_stored_once() {
    let record = Value::map([("name", Value::from("a name long enough to notice"))]);
    let mut one = DatabaseWriter::new("Test", "test");
    one.build_epoch(0)
        .insert("10.0.0.0/24".parse().unwrap(), &record)
        .unwrap();
    let mut many = DatabaseWriter::new("Test", "test");
    many.build_epoch(0);
    for i in 0..100u32 {
        let network = ipnet::IpNet::new(ip(&format!("10.0.{i}.0")), 24).unwrap();
        many.insert(network, &record).unwrap();
    }
    let (one, many) = (one.to_bytes().unwrap(), many.to_bytes().unwrap());
    let data_len = |bytes: &[u8]| {
        let reader = Reader::from_source(bytes.to_vec()).unwrap();
        let tree = reader.metadata().node_count as usize * 6;
        let marker = bytes
            .windows(14)
            .rposition(|w| w == b"\xAB\xCD\xEFMaxMind.com")
            .unwrap();
        marker - tree - 16
    };
    assert_eq!(data_len(&one), data_len(&many));
    let reader = read(many);
    assert!(reader.lookup(ip("10.0.99.1")).unwrap().has_data());
    assert!(!reader.lookup(ip("10.0.100.1")).unwrap().has_data());
}
