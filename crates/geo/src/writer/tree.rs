//! The search tree: a binary trie over the 128 bits of an IPv6 address.
//!
//! Each node has two records, for a next bit of 0 and of 1. A record is another node's
//! number, the node count (no data), or the node count plus 16 plus an offset in the data
//! section. IPv4 networks live under `::/96`, where readers look an IPv4 address up: they
//! follow 96 zero bits from the root and go on from there with the address's 32 bits.

use super::WriteError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    Empty,
    Node(u32),
    /// An offset in the data section.
    Data(u32),
}

/// The width of a record; a wider one addresses a larger tree and data section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RecordSize {
    Bits24,
    Bits28,
    Bits32,
}

impl RecordSize {
    /// The narrowest that holds every record value below `bound`.
    pub(crate) fn fitting(bound: u64) -> Option<RecordSize> {
        match bound {
            0..=0x100_0000 => Some(RecordSize::Bits24),
            0x100_0001..=0x1000_0000 => Some(RecordSize::Bits28),
            0x1000_0001..=0x1_0000_0000 => Some(RecordSize::Bits32),
            _ => None,
        }
    }

    pub(crate) fn bits(self) -> u16 {
        match self {
            RecordSize::Bits24 => 24,
            RecordSize::Bits28 => 28,
            RecordSize::Bits32 => 32,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Tree {
    nodes: Vec<[Record; 2]>,
}

/// The bit of `bits` at `depth`, counted from the most significant.
fn bit_at(bits: u128, depth: u8) -> usize {
    (bits >> (127 - depth)) as usize & 1
}

impl Tree {
    pub(crate) fn new() -> Tree {
        Tree {
            nodes: vec![[Record::Empty; 2]],
        }
    }

    /// Points every address whose first `prefix_len` bits are those of `bits` at `data`,
    /// splitting the record of a broader network on the way. Networks must come in order
    /// of prefix length, broadest first, so that a more specific one is never painted over.
    pub(crate) fn insert(
        &mut self,
        bits: u128,
        prefix_len: u8,
        data: u32,
    ) -> Result<(), WriteError> {
        let Some(last) = prefix_len.checked_sub(1) else {
            // `::/0`: the root is a node, whatever the tree holds, so both its records.
            self.nodes[0] = [Record::Data(data); 2];
            return Ok(());
        };
        let mut node = 0;
        for depth in 0..last {
            let bit = bit_at(bits, depth);
            node = match self.nodes[node][bit] {
                Record::Node(next) => next as usize,
                // An empty record, or a broader network's: split it in two copies of itself.
                record => {
                    let next = self.push([record; 2])?;
                    self.nodes[node][bit] = Record::Node(next);
                    next as usize
                }
            };
        }
        self.nodes[node][bit_at(bits, last)] = Record::Data(data);
        Ok(())
    }

    /// Makes `::ffff:0:0/96`, the IPv4-mapped addresses, lead to the IPv4 networks too, as
    /// MaxMind's databases do, for readers that look such an address up as it is. Left
    /// alone where no IPv4 network was inserted, or where IPv6 networks were inserted over
    /// that range.
    pub(crate) fn alias_ipv4_mapped(&mut self) -> Result<(), WriteError> {
        // The record for ::/96: the IPv4 subtree, or one network covering all of IPv4.
        let mut node = 0;
        for _ in 0..95 {
            match self.nodes[node][0] {
                Record::Node(next) => node = next as usize,
                _ => return Ok(()),
            }
        }
        let ipv4 = self.nodes[node][0];
        if ipv4 == Record::Empty {
            return Ok(());
        }
        let mapped: u128 = 0xffff << 32;
        let mut node = 0;
        for depth in 0..95 {
            let bit = bit_at(mapped, depth);
            node = match self.nodes[node][bit] {
                Record::Node(next) => next as usize,
                Record::Empty => {
                    let next = self.push([Record::Empty; 2])?;
                    self.nodes[node][bit] = Record::Node(next);
                    next as usize
                }
                Record::Data(_) => return Ok(()),
            };
        }
        let last = &mut self.nodes[node][bit_at(mapped, 95)];
        if *last == Record::Empty {
            *last = ipv4;
        }
        Ok(())
    }

    fn push(&mut self, node: [Record; 2]) -> Result<u32, WriteError> {
        let index = u32::try_from(self.nodes.len()).map_err(|_| WriteError::DatabaseTooLarge)?;
        self.nodes.push(node);
        Ok(index)
    }

    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The tree in the format (the caller adds the data section's separator); a data
    /// record's value is `data_base` plus its offset.
    pub(crate) fn write(&self, record_size: RecordSize, data_base: u64, out: &mut Vec<u8>) {
        let node_count = self.nodes.len() as u64;
        let value = |record: Record| match record {
            Record::Empty => node_count,
            Record::Node(next) => u64::from(next),
            Record::Data(offset) => data_base + u64::from(offset),
        };
        for [left, right] in &self.nodes {
            let (left, right) = (value(*left), value(*right));
            match record_size {
                RecordSize::Bits24 => {
                    out.extend_from_slice(&left.to_be_bytes()[5..]);
                    out.extend_from_slice(&right.to_be_bytes()[5..]);
                }
                RecordSize::Bits28 => {
                    // Each record's low 24 bits, with their top four bits sharing the middle
                    // byte, the left record's in its high half.
                    out.extend_from_slice(&left.to_be_bytes()[5..]);
                    out.push(((left >> 24) as u8 & 0xf) << 4 | ((right >> 24) as u8 & 0xf));
                    out.extend_from_slice(&right.to_be_bytes()[5..]);
                }
                RecordSize::Bits32 => {
                    out.extend_from_slice(&left.to_be_bytes()[4..]);
                    out.extend_from_slice(&right.to_be_bytes()[4..]);
                }
            }
        }
    }
}
