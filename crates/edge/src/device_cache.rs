//! Each worker's memory of the devices it read, by User-Agent and client hints: most traffic
//! comes from a few hundred browser builds, and a hit (a hash and a compare) costs a fraction of
//! reading a User-Agent with its hints (see `docs/benchmarks.md`, "Geo and device").
//!
//! Direct-mapped and bounded: a new key replaces the one in its slot, and keys longer than
//! [`MAX_KEY`] are read every time and never kept, so no client can make it grow. Keys are
//! compared whole, so a collision (crafted or not) costs only a miss.

use marquee_device::{ClientHints, Device};

/// Slots per worker (a power of two).
const SLOTS: usize = 1024;
/// The longest key kept, in bytes (the four header values and their lengths).
const MAX_KEY: usize = 1024;

/// The headers a device is read from, as received.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DeviceHeaders<'h> {
    pub(crate) user_agent: &'h [u8],
    pub(crate) mobile: Option<&'h str>,
    pub(crate) platform: Option<&'h str>,
    pub(crate) brands: Option<&'h str>,
}

impl DeviceHeaders<'_> {
    fn parts(&self) -> [&[u8]; 4] {
        [
            self.user_agent,
            self.mobile.map_or(&[][..], str::as_bytes),
            self.platform.map_or(&[][..], str::as_bytes),
            self.brands.map_or(&[][..], str::as_bytes),
        ]
    }

    fn read(&self) -> Device {
        marquee_device::detect(
            self.user_agent,
            ClientHints {
                mobile: self.mobile,
                platform: self.platform,
                brands: self.brands,
            },
        )
    }
}

struct Entry {
    hash: u64,
    /// Each part as a 16-bit length and its bytes, so that different splits never compare
    /// equal.
    key: Box<[u8]>,
    device: Device,
}

pub(crate) struct DeviceCache {
    slots: Vec<Option<Entry>>,
}

impl DeviceCache {
    pub(crate) fn new() -> DeviceCache {
        DeviceCache {
            slots: (0..SLOTS).map(|_| None).collect(),
        }
    }

    /// The device `headers` describe: remembered, or read and remembered.
    pub(crate) fn device(&mut self, headers: &DeviceHeaders<'_>) -> Device {
        let parts = headers.parts();
        let hash = key_hash(&parts);
        // SLOTS is a power of two: the mask keeps the index in range.
        let slot = (hash as usize) & (SLOTS - 1);
        if let Some(Some(entry)) = self.slots.get(slot)
            && entry.hash == hash
            && same_key(&entry.key, &parts)
        {
            return entry.device;
        }
        let device = headers.read();
        if let (Some(key), Some(place)) = (key_of(&parts), self.slots.get_mut(slot)) {
            *place = Some(Entry { hash, key, device });
        }
        device
    }
}

/// The key of `parts`, or `None` when it is longer than [`MAX_KEY`].
fn key_of(parts: &[&[u8]; 4]) -> Option<Box<[u8]>> {
    let len: usize = parts.iter().map(|part| part.len() + 2).sum();
    if len > MAX_KEY {
        return None;
    }
    let mut key = Vec::with_capacity(len);
    for part in parts {
        // Below MAX_KEY, so it fits.
        let part_len = u16::try_from(part.len()).ok()?;
        key.extend_from_slice(&part_len.to_le_bytes());
        key.extend_from_slice(part);
    }
    Some(key.into_boxed_slice())
}

fn same_key(key: &[u8], parts: &[&[u8]; 4]) -> bool {
    let mut rest = key;
    for part in parts {
        let Some((len, tail)) = rest.split_first_chunk::<2>() else {
            return false;
        };
        let len = usize::from(u16::from_le_bytes(*len));
        if len != part.len() || tail.get(..len) != Some(*part) {
            return false;
        }
        rest = &tail[len..];
    }
    rest.is_empty()
}

/// A fast hash of the parts, eight bytes a step. Not keyed: a collision costs a miss only
/// (keys are compared whole). Hand-written because the standard SipHash costs several times
/// as much on a 150-byte User-Agent, which is most of what a hit costs.
fn key_hash(parts: &[&[u8]; 4]) -> u64 {
    let mut hash: u64 = 0x9E37_79B9_7F4A_7C15;
    for part in parts {
        hash = mix(hash ^ part.len() as u64);
        let mut chunks = part.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            hash = mix(hash ^ u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        hash = mix(hash ^ u64::from_le_bytes(word));
    }
    hash
}

fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHROME: &[u8] = b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
    const IPHONE: &[u8] = b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";

    fn headers(user_agent: &[u8]) -> DeviceHeaders<'_> {
        DeviceHeaders {
            user_agent,
            ..DeviceHeaders::default()
        }
    }

    #[test]
    fn a_remembered_device_is_the_one_read() {
        let mut cache = DeviceCache::new();
        for request in [
            headers(CHROME),
            headers(IPHONE),
            DeviceHeaders {
                mobile: Some("?1"),
                platform: Some("\"Android\""),
                ..headers(CHROME)
            },
            headers(b""),
        ] {
            let read = request.read();
            assert_eq!(cache.device(&request), read, "first");
            assert_eq!(cache.device(&request), read, "remembered");
        }
        // The hints are part of the key: the same User-Agent with other hints is read again.
        let android = DeviceHeaders {
            mobile: Some("?1"),
            platform: Some("\"Android\""),
            ..headers(CHROME)
        };
        assert_ne!(cache.device(&android), cache.device(&headers(CHROME)));
    }

    #[test]
    fn keys_compare_whole_and_by_part() {
        let a: [&[u8]; 4] = [b"ab", b"c", b"", b""];
        let b: [&[u8]; 4] = [b"a", b"bc", b"", b""];
        let key = key_of(&a).unwrap();
        assert!(same_key(&key, &a));
        assert!(!same_key(&key, &b), "another split of the same bytes");
        assert!(!same_key(&key[..key.len() - 1], &a));
    }

    #[test]
    fn a_key_too_long_is_read_every_time_and_never_kept() {
        let long = vec![b'x'; MAX_KEY];
        let mut cache = DeviceCache::new();
        let request = headers(&long);
        assert_eq!(cache.device(&request), request.read());
        assert!(cache.slots.iter().all(Option::is_none));
    }
}
