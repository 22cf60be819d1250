//! Sets of networks (CIDR blocks), IPv4 and IPv6, held as sorted disjoint ranges: a lookup is
//! one binary search.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use crate::{ListError, read_list};

/// A set of IPv4 and IPv6 networks, such as data-centre and hosting ranges.
///
/// IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, as a dual-stack socket reports IPv4 clients)
/// are looked up as the IPv4 address they carry.
#[derive(Clone, Default)]
pub struct NetworkList {
    entries: usize,
    v4_starts: Box<[u32]>,
    v4_ends: Box<[u32]>,
    v6_starts: Box<[u128]>,
    v6_ends: Box<[u128]>,
}

impl fmt::Debug for NetworkList {
    // Sizes only: the ranges can be thousands.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkList")
            .field("entries", &self.entries)
            .field("v4_ranges", &self.v4_starts.len())
            .field("v6_ranges", &self.v6_starts.len())
            .finish()
    }
}

impl NetworkList {
    /// The shipped data-centre list. None ships (no openly licensed list small and precise
    /// enough was found; see the README), so this is [`NetworkList::empty`]: name a list file
    /// in configuration to filter data-centre traffic.
    pub fn builtin() -> NetworkList {
        NetworkList::empty()
    }

    /// A list that contains no address.
    pub fn empty() -> NetworkList {
        NetworkList::default()
    }

    /// Reads a list: one network per line as `ADDRESS/PREFIX` (a bare address is a single
    /// host), IPv4 or IPv6; `#` starts a comment, to the end of the line; blank lines are
    /// ignored. An error names `file` and the line: an entry that is not a network, host bits
    /// set below the prefix (`10.0.0.1/8`: which was meant?), a prefix of length 0 (every
    /// address), or no entries at all (more likely a truncated file than an intent).
    pub fn parse(text: &str, file: &str) -> Result<NetworkList, ListError> {
        let mut entries = 0;
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let entry = line.split('#').next().unwrap_or_default().trim();
            if entry.is_empty() {
                continue;
            }
            match parse_network(entry).map_err(|m| ListError::new(file, index + 1, m))? {
                Network::V4(start, end) => v4.push((start, end)),
                Network::V6(start, end) => v6.push((start, end)),
            }
            entries += 1;
        }
        if entries == 0 {
            return Err(ListError::new(file, 0, "no networks"));
        }
        let (v4_starts, v4_ends) = merge(v4);
        let (v6_starts, v6_ends) = merge(v6);
        Ok(NetworkList {
            entries,
            v4_starts,
            v4_ends,
            v6_starts,
            v6_ends,
        })
    }

    /// Reads a list file; an unreadable file is an error naming it (line 0).
    pub fn load(path: &Path) -> Result<NetworkList, ListError> {
        let (text, file) = read_list(path)?;
        NetworkList::parse(&text, &file)
    }

    /// Whether `ip` is in one of the networks.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => find(&self.v4_starts, &self.v4_ends, u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => find(&self.v4_starts, &self.v4_ends, u32::from(v4)),
                None => find(&self.v6_starts, &self.v6_ends, u128::from(v6)),
            },
        }
    }

    /// Networks in the list as written (overlapping ones are merged for lookups, but counted
    /// here as written).
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
}

/// The key a client's rate is counted under: its /24 for IPv4 (IPv4-mapped IPv6 included) and
/// its /48 for IPv6, the blocks one household, office or server is commonly given. IPv4 keys
/// are below 2^24 and IPv6 keys have the top bit set, so the two never meet.
pub fn prefix_key(ip: IpAddr) -> u64 {
    let v6 = match ip {
        IpAddr::V4(v4) => return v4_key(v4),
        IpAddr::V6(v6) => v6,
    };
    match v6.to_ipv4_mapped() {
        Some(v4) => v4_key(v4),
        None => (1 << 63) | (u128::from(v6) >> 80) as u64,
    }
}

fn v4_key(v4: Ipv4Addr) -> u64 {
    u64::from(u32::from(v4) >> 8)
}

enum Network {
    V4(u32, u32),
    V6(u128, u128),
}

fn parse_network(entry: &str) -> Result<Network, String> {
    let (address, prefix) = match entry.split_once('/') {
        Some((address, prefix)) => (address.trim(), Some(prefix.trim())),
        None => (entry, None),
    };
    let address: IpAddr = address
        .parse()
        .map_err(|_| format!("`{entry}` is not a network: `{address}` is not an IP address"))?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|&p| p <= max)
            .ok_or_else(|| format!("`{entry}`: the prefix length must be 0 to {max}"))?,
    };
    if prefix == 0 {
        return Err(format!("`{entry}` is every address"));
    }
    match address {
        IpAddr::V4(v4) => {
            let (start, end) = v4_range(u32::from(v4), prefix);
            if start != u32::from(v4) {
                return Err(host_bits(entry, Ipv4Addr::from(start), prefix));
            }
            Ok(Network::V4(start, end))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let host = if prefix == 128 {
                0
            } else {
                u128::MAX >> prefix
            };
            if bits & host != 0 {
                return Err(host_bits(entry, Ipv6Addr::from(bits & !host), prefix));
            }
            // An IPv4-mapped block is kept as the IPv4 block it covers, where lookups of
            // mapped addresses go.
            if let Some(v4) = v6.to_ipv4_mapped()
                && prefix >= 96
            {
                let (start, end) = v4_range(u32::from(v4), prefix - 96);
                return Ok(Network::V4(start, end));
            }
            Ok(Network::V6(bits, bits | host))
        }
    }
}

/// The first and last address of `address/prefix` (prefix 0 to 32).
fn v4_range(address: u32, prefix: u32) -> (u32, u32) {
    let host = u32::MAX.checked_shr(prefix).unwrap_or(0);
    (address & !host, address | host)
}

fn host_bits(entry: &str, network: impl fmt::Display, prefix: u32) -> String {
    format!("`{entry}` has host bits set (the network would be {network}/{prefix})")
}

/// Sorts ranges and merges overlapping and adjacent ones into disjoint ranges.
fn merge<T: Ord + Copy + Step>(mut ranges: Vec<(T, T)>) -> (Box<[T]>, Box<[T]>) {
    ranges.sort_unstable();
    let mut starts: Vec<T> = Vec::with_capacity(ranges.len());
    let mut ends: Vec<T> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        if let Some(last) = ends.last_mut()
            && last.next().is_none_or(|after| start <= after)
        {
            if end > *last {
                *last = end;
            }
            continue;
        }
        starts.push(start);
        ends.push(end);
    }
    (starts.into_boxed_slice(), ends.into_boxed_slice())
}

/// The address after, if any (for merging adjacent ranges).
trait Step: Sized {
    fn next(&self) -> Option<Self>;
}

impl Step for u32 {
    fn next(&self) -> Option<u32> {
        self.checked_add(1)
    }
}

impl Step for u128 {
    fn next(&self) -> Option<u128> {
        self.checked_add(1)
    }
}

fn find<T: Ord + Copy>(starts: &[T], ends: &[T], address: T) -> bool {
    let after = starts.partition_point(|&start| start <= address);
    // `after` is 0 when every range starts above the address: wrapping gives no index.
    ends.get(after.wrapping_sub(1))
        .is_some_and(|&end| address <= end)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn overlapping_and_adjacent_ranges_merge() {
        let list = NetworkList::parse(
            "10.0.0.0/25\n10.0.0.128/25\n10.0.0.0/24\n10.0.2.0/24\n255.255.255.255\n",
            "t",
        )
        .unwrap();
        assert_eq!(list.len(), 5);
        assert_eq!(&list.v4_starts[..], &[0x0a00_0000, 0x0a00_0200, u32::MAX]);
        assert_eq!(&list.v4_ends[..], &[0x0a00_00ff, 0x0a00_02ff, u32::MAX]);
    }

    #[test]
    fn mapped_blocks_are_kept_as_ipv4() {
        let list = NetworkList::parse("::ffff:192.0.2.0/120\n", "t").unwrap();
        assert_eq!(&list.v4_starts[..], &[0xc000_0200]);
        assert!(list.v6_starts.is_empty());
    }
}
