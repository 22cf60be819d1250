#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::IpAddr;

use marquee_geo::writer::{Value, city_record, connection_type_record};
use marquee_geo::{ConnectionType, GeoDatabase, GeoError, Location, Point};
use support::{city, city_database, country, database, network, network_database};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn berlin() -> Location {
    city("DE", "BE", "Berlin", "10115", 52.52, 13.405)
}

fn new_york() -> Location {
    Location {
        metro: Some(501),
        ..city("US", "NY", "New York", "10001", 40.7128, -74.006)
    }
}

#[test]
fn ipv4_addresses_are_found_in_the_ipv6_tree() {
    let db = GeoDatabase::from_bytes(
        city_database(&[
            ("198.51.100.0/24", &berlin()),
            ("203.0.113.0/24", &new_york()),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(db.lookup(ip("198.51.100.1")), Some(berlin()));
    assert_eq!(db.lookup(ip("198.51.100.255")), Some(berlin()));
    let found = db.lookup(ip("203.0.113.9")).unwrap();
    assert_eq!(found, new_york());
    assert_eq!(found.country.unwrap().as_str(), "US");
    assert_eq!(found.region.unwrap().as_str(), "US-NY");
    assert_eq!(found.city.as_deref(), Some("New York"));
    assert_eq!(found.metro, Some(501));
    assert_eq!(found.postal.as_deref(), Some("10001"));
    assert_eq!(found.point, Point::new(40.7128, -74.006));
    assert_eq!(
        (found.asn, found.as_org, found.connection_type),
        (None, None, None)
    );
}

#[test]
fn ipv6_addresses_are_found() {
    let db = GeoDatabase::from_bytes(
        city_database(&[
            ("2001:db8:1::/48", &berlin()),
            ("2001:db8:2::/48", &new_york()),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(db.lookup(ip("2001:db8:1::1")), Some(berlin()));
    assert_eq!(
        db.lookup(ip("2001:db8:1:ffff:ffff:ffff:ffff:ffff")),
        Some(berlin())
    );
    assert_eq!(db.lookup(ip("2001:db8:2:abcd::42")), Some(new_york()));
    assert_eq!(db.lookup(ip("2001:db8:3::1")), None);
}

#[test]
fn ipv4_mapped_ipv6_addresses_are_looked_up_as_ipv4() {
    let db =
        GeoDatabase::from_bytes(city_database(&[("198.51.100.0/24", &berlin())]), None).unwrap();
    assert_eq!(db.lookup(ip("::ffff:198.51.100.7")), Some(berlin()));
    // `::a.b.c.d` (the deprecated IPv4-compatible form) is an IPv6 address like any other;
    // the writer stores IPv4 networks there, so it finds the same record.
    assert_eq!(db.lookup(ip("::198.51.100.7")), Some(berlin()));
    assert_eq!(db.lookup(ip("::ffff:198.51.101.7")), None);
}

#[test]
fn addresses_in_no_network_are_not_found() {
    let db =
        GeoDatabase::from_bytes(city_database(&[("198.51.100.0/24", &berlin())]), None).unwrap();
    for address in [
        "198.51.99.255",
        "198.51.101.0",
        "0.0.0.0",
        "255.255.255.255",
        "::",
        "2001:db8::1",
        "ffff::1",
    ] {
        assert_eq!(db.lookup(ip(address)), None, "{address}");
    }
}

#[test]
fn a_record_with_only_a_country_leaves_the_rest_empty() {
    let db = GeoDatabase::from_bytes(city_database(&[("198.51.100.0/24", &country("FR"))]), None)
        .unwrap();
    let found = db.lookup(ip("198.51.100.1")).unwrap();
    assert_eq!(found.country.unwrap().as_str(), "FR");
    assert_eq!(found, country("FR"));
    assert_eq!(found.region, None);
    assert_eq!(found.city, None);
    assert_eq!(found.point, None);
}

#[test]
fn a_record_without_any_field_read_here_is_found_but_empty() {
    let db = GeoDatabase::from_bytes(
        database(
            "Test-City",
            &[
                (
                    "198.51.100.0/24",
                    Value::map([("continent", Value::map([("code", Value::from("EU"))]))]),
                ),
                ("203.0.113.0/24", city_record(&berlin())),
            ],
        ),
        None,
    )
    .unwrap();
    assert_eq!(db.lookup(ip("198.51.100.1")), Some(Location::default()));
}

#[test]
fn more_specific_networks_win_whatever_the_order() {
    let paris = city("FR", "IDF", "Paris", "75001", 48.8566, 2.3522);
    let broad_first = city_database(&[
        ("10.0.0.0/8", &berlin()),
        ("10.1.0.0/16", &paris),
        ("10.1.2.0/24", &new_york()),
    ]);
    let narrow_first = city_database(&[
        ("10.1.2.0/24", &new_york()),
        ("10.1.0.0/16", &paris),
        ("10.0.0.0/8", &berlin()),
    ]);
    for bytes in [broad_first, narrow_first] {
        let db = GeoDatabase::from_bytes(bytes, None).unwrap();
        assert_eq!(db.lookup(ip("10.200.0.1")), Some(berlin()));
        assert_eq!(db.lookup(ip("10.1.200.1")), Some(paris.clone()));
        assert_eq!(db.lookup(ip("10.1.2.3")), Some(new_york()));
        assert_eq!(db.lookup(ip("10.1.3.0")), Some(paris.clone()));
        assert_eq!(db.lookup(ip("10.1.1.255")), Some(paris.clone()));
        assert_eq!(db.lookup(ip("11.0.0.0")), None);
    }
}

#[test]
fn the_same_network_inserted_twice_keeps_the_later_record() {
    let db = GeoDatabase::from_bytes(
        city_database(&[("10.0.0.0/8", &berlin()), ("10.0.0.0/8", &new_york())]),
        None,
    )
    .unwrap();
    assert_eq!(db.lookup(ip("10.9.9.9")), Some(new_york()));
}

#[test]
fn a_network_database_adds_the_as_number_and_connection_type() {
    let cable = network(3320, "Deutsche Telekom AG", Some(ConnectionType::CableDsl));
    let mobile = network(16509, "Example Mobile", Some(ConnectionType::Cellular));
    let db = GeoDatabase::from_bytes(
        city_database(&[("198.51.100.0/24", &berlin())]),
        Some(network_database(&[
            ("198.51.100.0/25", &cable),
            ("2001:db8::/32", &mobile),
            ("203.0.113.0/24", &network(64496, "Only ASN", None)),
        ])),
    )
    .unwrap();

    let both = db.lookup(ip("198.51.100.5")).unwrap();
    assert_eq!(both.city.as_deref(), Some("Berlin"));
    assert_eq!(both.asn, Some(3320));
    assert_eq!(both.as_org.as_deref(), Some("Deutsche Telekom AG"));
    assert_eq!(both.connection_type, Some(ConnectionType::CableDsl));

    // In the location database only.
    let location_only = db.lookup(ip("198.51.100.200")).unwrap();
    assert_eq!(location_only, berlin());

    // In the network database only.
    assert_eq!(db.lookup(ip("2001:db8::1")), Some(mobile));
    let asn_only = db.lookup(ip("203.0.113.1")).unwrap();
    assert_eq!(
        (asn_only.asn, asn_only.connection_type),
        (Some(64496), None)
    );
    assert_eq!(asn_only.country, None);

    assert_eq!(db.lookup(ip("192.0.2.1")), None);
    assert_eq!(db.network_info().unwrap().database_type, "Test-ASN");
    assert_eq!(db.network_info().unwrap().networks, 3);
}

#[test]
fn connection_type_databases_alone_are_read() {
    let db = GeoDatabase::from_bytes(
        city_database(&[("0.0.0.0/0", &country("US"))]),
        Some(database(
            "GeoIP2-Connection-Type",
            &[
                (
                    "198.51.100.0/24",
                    connection_type_record(&network(1, "", Some(ConnectionType::Satellite))),
                ),
                (
                    "203.0.113.0/24",
                    Value::map([("connection_type", Value::from("Dialup"))]),
                ),
            ],
        )),
    )
    .unwrap();
    let satellite = db.lookup(ip("198.51.100.1")).unwrap();
    assert_eq!(satellite.connection_type, Some(ConnectionType::Satellite));
    assert_eq!((satellite.asn, satellite.as_org), (None, None));
    // A kind this crate does not name is no connection type.
    assert_eq!(db.lookup(ip("203.0.113.1")).unwrap().connection_type, None);
}

#[test]
fn codes_are_normalised_and_malformed_ones_dropped() {
    let record = |country: &str, subdivisions: &[&str]| {
        Value::map([
            ("country", Value::map([("iso_code", Value::from(country))])),
            (
                "subdivisions",
                Value::Array(
                    subdivisions
                        .iter()
                        .map(|s| {
                            Value::map([
                                ("iso_code", Value::from(*s)),
                                ("names", Value::map([("en", Value::from("x"))])),
                            ])
                        })
                        .collect(),
                ),
            ),
        ])
    };
    let db = GeoDatabase::from_bytes(
        database(
            "Test-City",
            &[
                ("10.0.0.0/24", record("gb", &["eng", "LND"])),
                ("10.0.1.0/24", record("GB", &["TOOLONG"])),
                ("10.0.2.0/24", record("GBR", &["ENG"])),
                ("10.0.3.0/24", record("US", &[])),
            ],
        ),
        None,
    )
    .unwrap();
    let first = db.lookup(ip("10.0.0.1")).unwrap();
    assert_eq!(first.country.unwrap().as_str(), "GB");
    assert_eq!(first.region.unwrap().as_str(), "GB-ENG");
    let long = db.lookup(ip("10.0.1.1")).unwrap();
    assert_eq!((long.country.unwrap().as_str(), long.region), ("GB", None));
    // A three-letter country is no ISO 3166-1 alpha-2 code, and without a country there is
    // no region.
    assert_eq!(db.lookup(ip("10.0.2.1")).unwrap(), Location::default());
    assert_eq!(db.lookup(ip("10.0.3.1")).unwrap(), country("US"));
}

#[test]
fn numbers_are_read_whatever_their_width() {
    let db = GeoDatabase::from_bytes(
        database(
            "Test-City",
            &[
                (
                    "10.0.0.0/24",
                    Value::map([(
                        "location",
                        Value::map([
                            ("latitude", Value::Uint16(52)),
                            ("longitude", Value::Uint16(13)),
                            ("metro_code", Value::Uint32(807)),
                        ]),
                    )]),
                ),
                (
                    "10.0.1.0/24",
                    Value::map([(
                        "location",
                        Value::map([
                            ("latitude", Value::Double(95.0)),
                            ("longitude", Value::Double(13.0)),
                            ("metro_code", Value::Uint32(70_000)),
                        ]),
                    )]),
                ),
                (
                    "10.0.2.0/24",
                    Value::map([("location", Value::map([("latitude", Value::Double(1.0))]))]),
                ),
            ],
        ),
        Some(database(
            "Test-ASN",
            &[(
                "10.0.0.0/8",
                Value::map([("autonomous_system_number", Value::Uint64(64_500))]),
            )],
        )),
    )
    .unwrap();
    let widths = db.lookup(ip("10.0.0.1")).unwrap();
    assert_eq!(widths.point, Point::new(52.0, 13.0));
    assert_eq!(widths.metro, Some(807));
    assert_eq!(widths.asn, Some(64_500));
    // Out of range: a latitude past the pole, a metro code past u16.
    let out_of_range = db.lookup(ip("10.0.1.1")).unwrap();
    assert_eq!((out_of_range.point, out_of_range.metro), (None, None));
    // A latitude without a longitude is no point.
    assert_eq!(db.lookup(ip("10.0.2.1")).unwrap().point, None);
}

#[test]
fn a_field_of_the_wrong_type_refuses_the_database() {
    let bytes = database(
        "Test-City",
        &[
            ("10.0.0.0/24", city_record(&berlin())),
            (
                "10.0.1.0/24",
                Value::map([(
                    "city",
                    Value::map([("names", Value::map([("en", Value::Uint32(5))]))]),
                )]),
            ),
        ],
    );
    let err = GeoDatabase::from_bytes(bytes, None).unwrap_err();
    assert!(matches!(err, GeoError::Invalid { .. }), "{err}");
    assert_eq!(err.file(), "location database (in memory)");
}

#[test]
fn a_database_of_the_wrong_kind_is_refused() {
    let asn = network_database(&[("10.0.0.0/8", &network(64496, "Example", None))]);
    let city = city_database(&[("10.0.0.0/8", &berlin())]);
    let err = GeoDatabase::from_bytes(asn.clone(), None).unwrap_err();
    assert!(matches!(err, GeoError::Unusable { .. }), "{err}");
    assert!(err.to_string().contains("City or Country"), "{err}");
    let err = GeoDatabase::from_bytes(city.clone(), Some(city.clone())).unwrap_err();
    assert!(matches!(err, GeoError::Unusable { .. }), "{err}");
    assert_eq!(err.file(), "network database (in memory)");
    let empty = database("Test-City", &[]);
    assert!(matches!(
        GeoDatabase::from_bytes(empty, None),
        Err(GeoError::Unusable { .. })
    ));
    assert!(GeoDatabase::from_bytes(city, Some(asn)).is_ok());
}

#[test]
fn the_database_describes_itself() {
    let db = GeoDatabase::from_bytes(
        city_database(&[
            ("10.0.0.0/8", &berlin()),
            ("2001:db8::/32", &berlin()),
            ("192.0.2.0/24", &new_york()),
        ]),
        None,
    )
    .unwrap();
    let info = db.location_info();
    assert_eq!(info.database_type, "Test-City");
    assert_eq!(info.build_epoch, 1_700_000_000);
    assert_eq!(info.networks, 3);
    assert_eq!(info.file, "location database (in memory)");
    assert!(db.network_info().is_none());
}

#[test]
fn generations_increase() {
    let bytes = city_database(&[("10.0.0.0/8", &berlin())]);
    let first = GeoDatabase::from_bytes(bytes.clone(), None).unwrap();
    let second = GeoDatabase::from_bytes(bytes, None).unwrap();
    assert!(first.generation() > 0);
    assert!(second.generation() > first.generation());
}
