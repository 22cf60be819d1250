//! Addresses truncated before they are stored.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `address` with its host part zeroed, for anything stored (logs, reports): IPv4 kept to its
/// /24 and IPv6 to its /48, a common choice for pseudonymised client addresses; both still
/// locate a client to about its city. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is
/// treated, and returned, as the IPv4 address it carries, so that one client is stored one
/// way whichever socket family it came in on.
pub fn anonymize(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from_bits(v4.to_bits() & !0xff)),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !((1u128 << 80) - 1))),
    }
}
