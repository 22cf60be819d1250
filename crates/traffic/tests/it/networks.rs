#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use marquee_traffic::{NetworkList, prefix_key};

use crate::common::Rng;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn ipv4_blocks_hold_exactly_their_addresses() {
    let list = NetworkList::parse(
        "192.0.2.0/24\n198.51.100.7/32\n203.0.113.9\n0.0.0.0/8\n255.255.255.0/24\n",
        "t",
    )
    .unwrap();
    assert_eq!(list.len(), 5);
    for (address, inside) in [
        ("192.0.1.255", false),
        ("192.0.2.0", true),
        ("192.0.2.128", true),
        ("192.0.2.255", true),
        ("192.0.3.0", false),
        ("198.51.100.6", false),
        ("198.51.100.7", true),
        ("198.51.100.8", false),
        ("203.0.113.9", true),
        ("203.0.113.10", false),
        ("0.0.0.0", true),
        ("0.255.255.255", true),
        ("1.0.0.0", false),
        ("255.255.254.255", false),
        ("255.255.255.0", true),
        ("255.255.255.255", true),
    ] {
        assert_eq!(list.contains(ip(address)), inside, "{address}");
    }
}

#[test]
fn ipv6_blocks_hold_exactly_their_addresses() {
    let list =
        NetworkList::parse("2001:db8::/32\n2001:db8:1::/48\n::1/128\nfe80::/10\n", "t").unwrap();
    for (address, inside) in [
        ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("2001:db8::", true),
        ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", true),
        ("2001:db9::", false),
        ("::1", true),
        ("::2", false),
        ("::", false),
        ("fe80::1", true),
        ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
        ("fec0::", false),
    ] {
        assert_eq!(list.contains(ip(address)), inside, "{address}");
    }
}

#[test]
fn mapped_ipv6_addresses_match_ipv4_entries_and_families_stay_apart() {
    let list = NetworkList::parse("192.0.2.0/24\n2001:db8::/32\n", "t").unwrap();
    assert!(list.contains(ip("::ffff:192.0.2.1")));
    assert!(!list.contains(ip("::ffff:192.0.3.1")));
    // The deprecated IPv4-compatible form is an IPv6 address like any other.
    assert!(!list.contains(ip("::192.0.2.1")));
    // An IPv4 address whose bits begin like the IPv6 block is not in it.
    assert!(!list.contains(IpAddr::V4(Ipv4Addr::from(0x2001_0db8))));

    // A mapped block in the list holds the IPv4 addresses it maps.
    let mapped = NetworkList::parse("::ffff:198.51.100.0/120\n", "t").unwrap();
    assert!(mapped.contains(ip("198.51.100.200")));
    assert!(mapped.contains(ip("::ffff:198.51.100.200")));
    assert!(!mapped.contains(ip("198.51.101.0")));
}

#[test]
fn comments_blank_lines_and_spaces_are_allowed() {
    let text = "# data centres\n\n  192.0.2.0/24   # example net\r\n2001:db8::/32#doc\n\t\n";
    let list = NetworkList::parse(text, "t").unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.contains(ip("192.0.2.5")));
    assert!(list.contains(ip("2001:db8::5")));
}

#[test]
fn a_malformed_network_names_file_and_line() {
    for (entry, needle) in [
        ("192.0.2.0/33", "prefix length must be 0 to 32"),
        ("2001:db8::/129", "prefix length must be 0 to 128"),
        ("192.0.2.0/x", "prefix length"),
        ("192.0.2.0/-1", "prefix length"),
        (
            "192.0.2.1/24",
            "host bits set (the network would be 192.0.2.0/24)",
        ),
        (
            "2001:db8::1/32",
            "host bits set (the network would be 2001:db8::/32)",
        ),
        ("192.0.2/24", "is not an IP address"),
        ("example.com", "is not an IP address"),
        ("0.0.0.0/0", "every address"),
        ("::/0", "every address"),
    ] {
        let text = format!("# list\n10.0.0.0/8\n{entry}\n172.16.0.0/12\n");
        let e = NetworkList::parse(&text, "lists/datacentres.txt").unwrap_err();
        assert_eq!(e.file, "lists/datacentres.txt", "{entry}");
        assert_eq!(e.line, 3, "{entry}");
        assert!(e.message.contains(needle), "{entry}: {}", e.message);
        assert!(
            e.to_string()
                .starts_with(&format!("lists/datacentres.txt:3: `{entry}`")),
            "{e}"
        );
    }
}

#[test]
fn a_list_without_networks_is_refused() {
    let e = NetworkList::parse("# nothing yet\n", "dc.txt").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("dc.txt", 0));
    assert_eq!(e.to_string(), "dc.txt: no networks");
}

#[test]
fn empty_and_builtin_lists_hold_nothing() {
    for list in [NetworkList::empty(), NetworkList::builtin()] {
        assert_eq!(list.len(), 0);
        assert!(list.is_empty());
        assert!(!list.contains(ip("192.0.2.1")));
        assert!(!list.contains(ip("2001:db8::1")));
        assert!(!list.contains(ip("::ffff:192.0.2.1")));
    }
}

#[test]
fn load_reads_a_file_and_names_an_unreadable_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dc.txt");
    std::fs::write(&path, "192.0.2.0/24\n2001:db8::/32\n").unwrap();
    let list = NetworkList::load(&path).unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.contains(ip("2001:db8::1")));

    std::fs::write(&path, "192.0.2.0/24\nnonsense\n").unwrap();
    let e = NetworkList::load(&path).unwrap_err();
    assert_eq!((e.file.clone(), e.line), (path.display().to_string(), 2));

    let e = NetworkList::load(&dir.path().join("missing.txt")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.file.ends_with("missing.txt"));
    assert!(e.message.starts_with("cannot read"), "{e}");
}

#[test]
fn lookups_agree_with_checking_every_block() {
    let mut rng = Rng(0x0bad_cafe_f00d_0001);
    let mut blocks4 = Vec::new();
    let mut blocks6 = Vec::new();
    let mut text = String::new();
    for _ in 0..2_000 {
        let prefix = 8 + (rng.next() % 25) as u32; // /8 to /32, overlapping freely
        let host = u32::MAX.checked_shr(prefix).unwrap_or(0);
        let network = (rng.next() as u32) & !host;
        blocks4.push((network, network | host));
        text.push_str(&format!("{}/{prefix}\n", Ipv4Addr::from(network)));
    }
    for _ in 0..500 {
        let prefix = 16 + (rng.next() % 113) as u32; // /16 to /128
        let host = u128::MAX.checked_shr(prefix).unwrap_or(0);
        let bits = (u128::from(rng.next()) << 64 | u128::from(rng.next())) & !host;
        // Keep clear of the IPv4-mapped block, which lookups treat as IPv4.
        let bits = bits | (1 << 127);
        let network = bits & !host;
        blocks6.push((network, network | host));
        text.push_str(&format!("{}/{prefix}\n", Ipv6Addr::from(network)));
    }
    let list = NetworkList::parse(&text, "random").unwrap();
    assert_eq!(list.len(), 2_500);
    let probe4 = |a: u32| {
        let expected = blocks4.iter().any(|&(s, e)| s <= a && a <= e);
        assert_eq!(
            list.contains(IpAddr::V4(a.into())),
            expected,
            "{}",
            Ipv4Addr::from(a)
        );
    };
    for &(s, e) in &blocks4 {
        for a in [s.wrapping_sub(1), s, e, e.wrapping_add(1)] {
            probe4(a);
        }
    }
    for _ in 0..20_000 {
        probe4(rng.next() as u32);
    }
    let probe6 = |a: u128| {
        let expected = blocks6.iter().any(|&(s, e)| s <= a && a <= e);
        assert_eq!(
            list.contains(IpAddr::V6(a.into())),
            expected,
            "{}",
            Ipv6Addr::from(a)
        );
    };
    for &(s, e) in &blocks6 {
        for a in [s.wrapping_sub(1), s, e, e.wrapping_add(1)] {
            if a >> 127 == 1 {
                probe6(a);
            }
        }
    }
}

#[test]
fn prefix_keys_group_by_slash_24_and_slash_48() {
    let key = |s: &str| prefix_key(ip(s));
    assert_eq!(key("198.51.100.1"), key("198.51.100.254"));
    assert_ne!(key("198.51.100.1"), key("198.51.101.1"));
    assert_eq!(key("198.51.100.1"), key("::ffff:198.51.100.9"));
    assert_eq!(key("0.0.0.0"), 0);
    assert_eq!(key("255.255.255.255"), 0x00ff_ffff);

    assert_eq!(
        key("2001:db8:1::1"),
        key("2001:db8:1:ffff:ffff:ffff:ffff:ffff")
    );
    assert_ne!(key("2001:db8:1::1"), key("2001:db8:2::1"));
    assert_eq!(key("::"), 1 << 63);
    assert_eq!(key("ffff:ffff:ffff::"), (1 << 63) | 0xffff_ffff_ffff);
    // The two families never share a key.
    assert!(key("255.255.255.255") < 1 << 24);
    assert!(key("::1") >= 1 << 63);
    assert_ne!(key("0.0.0.0"), key("::"));
}
