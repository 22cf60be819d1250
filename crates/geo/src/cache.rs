//! A per-worker cache of lookups.

use std::net::IpAddr;
use std::sync::Arc;

use crate::database::GeoDatabase;
use crate::location::Location;

/// The last lookups of one worker thread, in two levels: by address, and by record (the
/// many networks of a city, or of an AS, share one record in the file). A hit by address
/// costs a hash and a few compares; by record, the walks down the search trees but no
/// decoding; only a record seen by neither is decoded.
///
/// Not shared: each worker (a thread with its own single-threaded runtime) keeps its own, so
/// a hit takes no lock and makes no atomic read-modify-write that other cores contend for,
/// and allocates nothing (it clones an `Arc` only this worker holds). Entries are tagged
/// with the database's [`generation`](GeoDatabase::generation), so that a reload invalidates
/// them without anyone telling the cache. Answers that an address is in no database are
/// cached too.
#[derive(Debug)]
pub struct LookupCache {
    addresses: Table,
    records: RecordCache,
    hits: u64,
    misses: u64,
}

/// Decoded records by their file and offset, for [`GeoDatabase`].
pub(crate) type RecordCache = Table;

impl LookupCache {
    /// A cache of `capacity` addresses and as many decoded records, rounded up to a power of
    /// two between 4 and 2^24. Each entry takes 32 bytes, plus the location it holds (about
    /// 130 bytes, and the names) where no other entry holds it too.
    pub fn new(capacity: usize) -> LookupCache {
        LookupCache {
            addresses: Table::new(capacity),
            records: Table::new(capacity),
            hits: 0,
            misses: 0,
        }
    }

    /// Where `address` is, by `database`: from the cache when it holds this address for this
    /// database, otherwise looked up and kept.
    pub fn lookup(&mut self, database: &GeoDatabase, address: IpAddr) -> Option<Arc<Location>> {
        let bits = match address.to_canonical() {
            // Kept apart from the IPv6 address `::a.b.c.d` by the mapped form.
            IpAddr::V4(v4) => v4.to_ipv6_mapped().to_bits(),
            IpAddr::V6(v6) => v6.to_bits(),
        };
        let key = [database.generation(), (bits >> 64) as u64, bits as u64];
        if let Some(location) = self.addresses.get(key) {
            self.hits += 1;
            return location.clone();
        }
        self.misses += 1;
        let location = database.lookup_in(address, &mut self.records);
        self.addresses.put(key, location.clone());
        location
    }

    /// Lookups answered by address from the cache.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Lookups that went to the databases (some of them finding their records decoded).
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// The number of addresses it holds at most.
    pub fn capacity(&self) -> usize {
        self.addresses.entries.len()
    }
}

/// Four entries a set: an entry may sit in any of its set's four, so that a few keys that
/// hash alike do not keep evicting each other as they would with one place each. The most
/// recently used entry of a set is first, the least recently used goes.
const WAYS: usize = 4;

/// A set-associative table from a key of three words (a generation and two more: an
/// address's halves, or a file and an offset) to a location or its absence.
#[derive(Debug)]
pub(crate) struct Table {
    entries: Box<[Entry]>,
    /// `64 - log2(sets)`: the hash's top bits pick the set.
    shift: u32,
}

#[derive(Debug, Clone, Default)]
struct Entry {
    /// `[0, _, _]` for an entry never filled; generations start at 1.
    key: [u64; 3],
    value: Option<Arc<Location>>,
}

impl Table {
    fn new(capacity: usize) -> Table {
        let entries = capacity.clamp(WAYS, 1 << 24).next_power_of_two();
        let sets = entries / WAYS;
        Table {
            entries: vec![Entry::default(); entries].into_boxed_slice(),
            shift: 64 - sets.trailing_zeros(),
        }
    }

    /// The value kept for `key`, made the most recently used of its set.
    pub(crate) fn get(&mut self, key: [u64; 3]) -> Option<&Option<Arc<Location>>> {
        let set = self.set(key);
        let way = set.iter().position(|entry| entry.key == key)?;
        set[..=way].rotate_right(1);
        Some(&set[0].value)
    }

    /// Keeps `value` for `key` (absent from the table), in place of its set's least
    /// recently used entry.
    pub(crate) fn put(&mut self, key: [u64; 3], value: Option<Arc<Location>>) {
        let set = self.set(key);
        set.rotate_right(1);
        set[0] = Entry { key, value };
    }

    fn set(&mut self, [generation, high, low]: [u64; 3]) -> &mut [Entry] {
        // Folds the words together (an address's network half and interface half, or two
        // record offsets), then Fibonacci hashing: multiplying by 2^64 over the golden ratio
        // spreads neighbouring keys across the sets, and the top bits are the best mixed.
        let folded = high.rotate_left(29) ^ low ^ generation.rotate_left(47);
        let hash = folded.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // With one set the shift is 64, which `checked_shr` turns into set 0.
        let set = hash.checked_shr(self.shift).unwrap_or(0) as usize;
        &mut self.entries[set * WAYS..(set + 1) * WAYS]
    }
}
