//! Damaged databases are errors, never panics: every byte of a small database flipped,
//! and bytes cut from its end, each opened and, if it opens, looked up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::IpAddr;

use marquee_geo::{ConnectionType, GeoDatabase};
use support::{city, city_database, country, network, network_database};

fn addresses() -> Vec<IpAddr> {
    [
        "10.1.2.3",
        "10.200.0.1",
        "192.0.2.1",
        "2001:db8::1",
        "::1",
        "::ffff:10.1.2.3",
        "255.255.255.255",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect()
}

fn try_everything(location: Vec<u8>, network: Option<Vec<u8>>) -> bool {
    match GeoDatabase::from_bytes(location, network) {
        Ok(db) => {
            for address in addresses() {
                let _ = db.lookup(address);
            }
            true
        }
        Err(_) => false,
    }
}

#[test]
fn flipped_bytes_are_errors_or_harmless() {
    let good = city_database(&[
        (
            "10.0.0.0/8",
            &city("DE", "BE", "Berlin", "10115", 52.52, 13.405),
        ),
        ("10.1.0.0/16", &country("AT")),
        (
            "2001:db8::/32",
            &city("FR", "IDF", "Paris", "75001", 48.8566, 2.3522),
        ),
    ]);
    let mut refused = 0;
    for at in 0..good.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[at] ^= flip;
            if !try_everything(bad, None) {
                refused += 1;
            }
        }
    }
    // Most damage is caught (a flipped byte in a name or a coordinate is not).
    assert!(
        refused > good.len(),
        "{refused} of {} refused",
        good.len() * 3
    );
}

#[test]
fn flipped_bytes_in_the_network_database_are_errors_or_harmless() {
    let location = city_database(&[("10.0.0.0/8", &country("DE"))]);
    let good = network_database(&[
        (
            "10.0.0.0/8",
            &network(64496, "Example", Some(ConnectionType::Cellular)),
        ),
        ("2001:db8::/32", &network(64497, "Other", None)),
    ]);
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0xff;
        try_everything(location.clone(), Some(bad));
    }
}

#[test]
fn shortened_files_are_errors() {
    let good = city_database(&[
        ("10.0.0.0/8", &country("DE")),
        ("2001:db8::/32", &country("FR")),
    ]);
    for len in 0..good.len() {
        assert!(
            !try_everything(good[..len].to_vec(), None),
            "cut to {len} bytes"
        );
    }
}
