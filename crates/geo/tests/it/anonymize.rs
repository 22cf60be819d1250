#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use marquee_geo::anonymize;

fn anonymized(text: &str) -> String {
    anonymize(text.parse::<IpAddr>().unwrap()).to_string()
}

#[test]
fn ipv4_keeps_its_slash_24() {
    assert_eq!(anonymized("203.0.113.77"), "203.0.113.0");
    assert_eq!(anonymized("203.0.113.0"), "203.0.113.0");
    assert_eq!(anonymized("255.255.255.255"), "255.255.255.0");
    assert_eq!(anonymized("0.0.0.1"), "0.0.0.0");
}

#[test]
fn ipv6_keeps_its_slash_48() {
    assert_eq!(
        anonymized("2001:db8:abcd:1234:5678:9abc:def0:1234"),
        "2001:db8:abcd::"
    );
    assert_eq!(anonymized("2001:db8:abcd::"), "2001:db8:abcd::");
    assert_eq!(
        anonymized("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        "ffff:ffff:ffff::"
    );
    assert_eq!(anonymized("::1"), "::");
}

#[test]
fn ipv4_mapped_ipv6_is_truncated_and_returned_as_ipv4() {
    let anonymized_mapped = anonymize("::ffff:203.0.113.77".parse().unwrap());
    assert!(anonymized_mapped.is_ipv4());
    assert_eq!(anonymized_mapped.to_string(), "203.0.113.0");
    // The deprecated IPv4-compatible form is an IPv6 address like any other.
    assert_eq!(anonymized("::203.0.113.77"), "::");
}
