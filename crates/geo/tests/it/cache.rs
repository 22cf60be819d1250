#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::IpAddr;
use std::sync::Arc;

use marquee_geo::ConnectionType;
use marquee_geo::{GeoDatabase, LookupCache};
use support::{city, city_database, country, network, network_database};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn database() -> GeoDatabase {
    GeoDatabase::from_bytes(
        city_database(&[
            (
                "10.0.0.0/8",
                &city("DE", "BE", "Berlin", "10115", 52.52, 13.405),
            ),
            ("2001:db8::/32", &country("FR")),
        ]),
        None,
    )
    .unwrap()
}

#[test]
fn a_hit_is_the_same_location_without_a_lookup() {
    let db = database();
    let mut cache = LookupCache::new(64);
    let first = cache.lookup(&db, ip("10.1.2.3")).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (0, 1));
    let second = cache.lookup(&db, ip("10.1.2.3")).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(second.city.as_deref(), Some("Berlin"));
    assert_eq!(*second, db.lookup(ip("10.1.2.3")).unwrap());
}

#[test]
fn addresses_in_no_network_are_cached_too() {
    let db = database();
    let mut cache = LookupCache::new(64);
    assert_eq!(cache.lookup(&db, ip("192.0.2.1")), None);
    assert_eq!(cache.lookup(&db, ip("192.0.2.1")), None);
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
}

#[test]
fn another_database_is_never_answered_from_the_cache() {
    let old = database();
    let new =
        GeoDatabase::from_bytes(city_database(&[("10.0.0.0/8", &country("AT"))]), None).unwrap();
    let mut cache = LookupCache::new(64);
    assert_eq!(
        cache.lookup(&old, ip("10.1.2.3")).unwrap().city.as_deref(),
        Some("Berlin")
    );
    let after = cache.lookup(&new, ip("10.1.2.3")).unwrap();
    assert_eq!(after.country.unwrap().as_str(), "AT");
    assert_eq!(after.city, None);
    assert_eq!((cache.hits(), cache.misses()), (0, 2));
    assert_eq!(
        cache
            .lookup(&new, ip("10.1.2.3"))
            .unwrap()
            .country
            .unwrap()
            .as_str(),
        "AT"
    );
    assert_eq!(cache.hits(), 1);
}

#[test]
fn addresses_sharing_a_set_get_their_own_answers() {
    let db = database();
    // One set of four: every address shares it.
    let mut cache = LookupCache::new(1);
    assert_eq!(cache.capacity(), 4);
    let addresses = [
        "10.1.2.3",
        "2001:db8::1",
        "192.0.2.1",
        "10.9.9.9",
        "2001:db8::2",
    ];
    for _ in 0..3 {
        // Five addresses in turn through four places: each is evicted before it recurs.
        for address in addresses {
            let cached = cache.lookup(&db, ip(address)).map(|l| (*l).clone());
            assert_eq!(cached, db.lookup(ip(address)), "{address}");
        }
    }
    assert_eq!((cache.hits(), cache.misses()), (0, 15));
}

#[test]
fn the_least_recently_used_address_is_evicted() {
    let db = database();
    let mut cache = LookupCache::new(4);
    for address in ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"] {
        cache.lookup(&db, ip(address));
    }
    // The first is used again, so the second is now the least recently used.
    cache.lookup(&db, ip("10.0.0.1"));
    assert_eq!(cache.hits(), 1);
    cache.lookup(&db, ip("10.0.0.5"));
    cache.lookup(&db, ip("10.0.0.1"));
    assert_eq!(cache.hits(), 2);
    cache.lookup(&db, ip("10.0.0.2"));
    assert_eq!((cache.hits(), cache.misses()), (2, 6));
}

#[test]
fn addresses_of_one_record_share_one_decoded_location() {
    let db = database();
    let mut cache = LookupCache::new(64);
    let first = cache.lookup(&db, ip("10.0.0.1")).unwrap();
    let second = cache.lookup(&db, ip("10.200.0.1")).unwrap();
    // Two addresses, so two misses, but one record: decoded once.
    assert_eq!(cache.misses(), 2);
    assert!(Arc::ptr_eq(&first, &second));
    let other = cache.lookup(&db, ip("2001:db8::1")).unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
}

#[test]
fn an_ipv4_address_and_its_mapped_form_share_an_entry() {
    let db = database();
    let mut cache = LookupCache::new(1024);
    assert_eq!(
        cache.lookup(&db, ip("10.1.2.3")).unwrap().city.as_deref(),
        Some("Berlin")
    );
    assert_eq!(
        cache
            .lookup(&db, ip("::ffff:10.1.2.3"))
            .unwrap()
            .city
            .as_deref(),
        Some("Berlin")
    );
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
    // `::10.1.2.3` is an IPv6 address with an entry of its own (a database stores IPv4
    // networks under ::/96, so it finds the same record).
    assert_eq!(
        cache.lookup(&db, ip("::10.1.2.3")).unwrap().city.as_deref(),
        Some("Berlin")
    );
    assert_eq!((cache.hits(), cache.misses()), (1, 2));
    assert_eq!(
        cache.lookup(&db, ip("10.1.2.3")).unwrap().city.as_deref(),
        Some("Berlin")
    );
    assert_eq!(cache.hits(), 2);
}

#[test]
fn many_addresses_are_answered_as_the_database_answers() {
    let db = database();
    let mut cache = LookupCache::new(256);
    for round in 0..2 {
        for i in 0..2_000u32 {
            let address = if i % 2 == 0 {
                IpAddr::from([10, (i >> 8) as u8, i as u8, 7])
            } else {
                IpAddr::from([0x2001, 0xdb8 + (i % 3) as u16, 0, 0, 0, 0, 0, i as u16])
            };
            let cached = cache.lookup(&db, address).map(|l| (*l).clone());
            assert_eq!(cached, db.lookup(address), "{address} (round {round})");
        }
    }
    assert_eq!(cache.capacity(), 256);
    assert_eq!(cache.hits() + cache.misses(), 4_000);
}

#[test]
fn locations_made_of_two_cached_records_are_answered_as_the_database_answers() {
    let db = GeoDatabase::from_bytes(
        city_database(&[
            (
                "10.0.0.0/8",
                &city("DE", "BE", "Berlin", "10115", 52.52, 13.405),
            ),
            ("10.128.0.0/9", &country("AT")),
            ("2001:db8::/32", &country("FR")),
        ]),
        Some(network_database(&[
            (
                "10.0.0.0/9",
                &network(64496, "First", Some(ConnectionType::Cellular)),
            ),
            ("10.192.0.0/10", &network(64497, "Second", None)),
            ("192.0.2.0/24", &network(64498, "Third", None)),
        ])),
    )
    .unwrap();
    // Few addresses per set, so that records are found decoded while addresses are not.
    let mut cache = LookupCache::new(16);
    for round in 0..3 {
        for i in 0..512u32 {
            let address = match i % 4 {
                0 | 1 => IpAddr::from([10, (i >> 1) as u8, 1, 1]),
                2 => IpAddr::from([192, 0, 2, i as u8]),
                _ => IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i as u16]),
            };
            let cached = cache.lookup(&db, address).map(|l| (*l).clone());
            assert_eq!(cached, db.lookup(address), "{address} (round {round})");
        }
    }
    let both = cache.lookup(&db, ip("10.1.1.1")).unwrap();
    assert_eq!(
        (both.city.as_deref(), both.asn),
        (Some("Berlin"), Some(64496))
    );
}

#[test]
fn capacities_are_rounded_up_to_a_power_of_two() {
    assert_eq!(LookupCache::new(0).capacity(), 4);
    assert_eq!(LookupCache::new(1000).capacity(), 1024);
    assert_eq!(LookupCache::new(4096).capacity(), 4096);
}
