#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use marquee_geo::demo::{DEMO_DATABASE_TYPE, demo_database};
use marquee_geo::{GeoDatabase, Point};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Country, region, city, metro, postal code and point of an address, as text.
fn describe(db: &GeoDatabase, address: &str) -> Option<String> {
    let l = db.lookup(ip(address))?;
    Some(format!(
        "{} {} {} {:?} {} {:?}",
        l.country.unwrap(),
        l.region.unwrap(),
        l.city.unwrap(),
        l.metro,
        l.postal.unwrap(),
        l.point.map(|Point { lat, lon }| (lat, lon)).unwrap(),
    ))
}

#[test]
fn loopback_and_private_addresses_have_made_up_locations() {
    let db = GeoDatabase::from_bytes(demo_database(), None).unwrap();
    let san_francisco = "US US-CA San Francisco Some(807) 94103 (37.7749, -122.4194)";
    let berlin = "DE DE-BE Berlin None 10115 (52.52, 13.405)";
    let london = "GB GB-ENG London None EC1A (51.5074, -0.1278)";
    let paris = "FR FR-IDF Paris None 75001 (48.8566, 2.3522)";
    for (address, expected) in [
        ("127.0.0.1", san_francisco),
        ("127.255.255.255", san_francisco),
        ("::1", san_francisco),
        ("::ffff:127.0.0.1", san_francisco),
        ("10.0.0.1", berlin),
        ("10.255.255.255", berlin),
        ("fc00::1", berlin),
        ("fd12:3456:789a::1", berlin),
        ("192.168.0.1", london),
        ("192.168.255.254", london),
        ("172.16.0.1", paris),
        ("172.31.255.255", paris),
    ] {
        assert_eq!(
            describe(&db, address).as_deref(),
            Some(expected),
            "{address}"
        );
    }
    for address in [
        "8.8.8.8",
        "172.32.0.1",
        "172.15.255.255",
        "192.169.0.1",
        "11.0.0.1",
        "::2",
        "fe80::1",
        "2001:db8::1",
    ] {
        assert_eq!(db.lookup(ip(address)), None, "{address}");
    }
}

#[test]
fn the_demo_database_says_what_it_is() {
    let db = GeoDatabase::from_bytes(demo_database(), None).unwrap();
    assert_eq!(db.location_info().database_type, DEMO_DATABASE_TYPE);
    assert_eq!(db.location_info().networks, 6);
    let reader = maxminddb::Reader::from_source(demo_database()).unwrap();
    reader.verify().unwrap();
    let description = &reader.metadata().description["en"];
    assert!(
        description.contains("not real geolocation"),
        "{description}"
    );
    assert!(
        description.contains("loopback and private"),
        "{description}"
    );
    // The same bytes every time: the build time is fixed.
    assert_eq!(demo_database(), demo_database());
}
