//! Key layout. Every key of one user carries the hash tag `{u:<user key>}`, so Redis Cluster
//! puts them in one slot and a script may touch all of them; a line item's budget counter
//! carries `{b:<line item>}`.
//!
//! - `mq:{u:<user key, 16 hex digits>}:cap:li:<line item id>:<window seconds>` and
//!   `mq:{u:…}:cap:ca:<campaign id>:<window seconds>`: a sorted set of the impression times
//!   (unix milliseconds) counted in the window, each member unique.
//! - `mq:{u:…}:profile`: the user's profile, JSON, no TTL (replaced by the next upload).
//! - `mq:{b:<line item id>}:spent`: what the line item's goal metric has consumed on all
//!   edges (an integer, the same units as its lease).
//! - `mq:{b:<line item id>}:mark:<writer, 16 hex digits>`: the sequence number of the last
//!   queued charge one edge process (the writer) applied to that counter, so that a charge
//!   sent again is not applied again; expires a while after that charge.

use std::fmt::Write as _;

/// What a cap counts: a line item's or a campaign's impressions for one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    LineItem(u64),
    Campaign(u64),
}

/// A cap key: `mq:{u:<user>}:cap:<scope>:<window seconds>`.
pub fn cap_key(user: u64, scope: Scope, window_seconds: u32) -> String {
    let mut key = String::with_capacity(48);
    let (kind, id) = match scope {
        Scope::LineItem(id) => ("li", id),
        Scope::Campaign(id) => ("ca", id),
    };
    // Writing to a String cannot fail.
    let _ = write!(key, "mq:{{u:{user:016x}}}:cap:{kind}:{id}:{window_seconds}");
    key
}

/// A user's profile (JSON of `profiles::Profile`): `mq:{u:<user>}:profile`, in the slot of the
/// user's caps.
pub fn profile_key(user: u64) -> String {
    format!("mq:{{u:{user:016x}}}:profile")
}

/// A line item's shared budget counter: `mq:{b:<line item>}:spent`.
pub fn budget_key(line_item: u64) -> String {
    format!("mq:{{b:{line_item}}}:spent")
}

/// An image tag's served impression, by the key of its placement and cache buster:
/// `mq:{i:<key>}:image`.
pub fn image_key(key: u64) -> String {
    format!("mq:{{i:{key:016x}}}:image")
}

/// A writer's mark on a line item's budget counter: `mq:{b:<line item>}:mark:<writer>`, in
/// the counter's slot, so one script reads the mark and charges the counter.
pub fn charge_mark_key(line_item: u64, writer: u64) -> String {
    format!("mq:{{b:{line_item}}}:mark:{writer:016x}")
}

/// The Redis Cluster slot of a key: CRC-16/XMODEM of its hash tag (the text between the first
/// `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(bytes)) % 16384
}

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster slots use.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_matches_the_cluster_specification() {
        // The specification's check value: CRC-16/XMODEM("123456789") = 0x31C3.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot("123456789"), 0x31C3);
        // Only the tag counts; an empty tag means the whole key.
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
    }

    #[test]
    fn one_users_keys_share_a_slot_and_differ_from_anothers() {
        let a = [
            cap_key(7, Scope::LineItem(1), 3600),
            cap_key(7, Scope::LineItem(99), 86_400),
            cap_key(7, Scope::Campaign(1), 3600),
        ];
        assert_eq!(a[0], "mq:{u:0000000000000007}:cap:li:1:3600");
        assert_eq!(a[2], "mq:{u:0000000000000007}:cap:ca:1:3600");
        assert!(a.iter().all(|k| key_slot(k) == key_slot(&a[0])));
        assert_eq!(key_slot(&a[0]), key_slot("u:0000000000000007"));
        assert_eq!(budget_key(42), "mq:{b:42}:spent");
        let mark = charge_mark_key(42, 0xab);
        assert_eq!(mark, "mq:{b:42}:mark:00000000000000ab");
        assert_eq!(key_slot(&mark), key_slot(&budget_key(42)));
    }
}
