//! Whatever a client sends, detection neither panics nor answers outside its closed sets:
//! random bytes, real User-Agents cut, spliced and with bytes changed, and random or mangled
//! client hints, from a fixed seed so that a failure repeats.

use marquee_device::{ClientHints, Device, browser, detect, os};

use crate::corpus_cases as corpus;

// A deliberate copy of the SplitMix64 in the other crates' benches and tests: no dev-only
// crate serves them all, and a production crate must not carry test helpers.
/// SplitMix64: a small generator whose sequence its definition fixes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn check(device: Device) {
    if let Some(name) = device.os {
        assert!(os::ALL.contains(&name), "{name}");
    }
    if let Some(name) = device.browser {
        assert!(browser::ALL.contains(&name), "{name}");
    }
}

/// Pieces hints are made of, to reach the parser's corners more often than random bytes do.
const HINT_PIECES: &[&str] = &[
    "\"",
    "\\",
    ",",
    ";",
    "=",
    " ",
    "\t",
    "?0",
    "?1",
    "v",
    "\"Chromium\"",
    "\"Google Chrome\"",
    "\"Android\"",
    "\"Windows\"",
    "\"Not)A;Brand\"",
    ";v=\"124\"",
    "ü",
    "\u{0}",
];

fn hint(rng: &mut Rng) -> Option<String> {
    match rng.below(3) {
        0 => None,
        1 => {
            let len = rng.below(40);
            Some(String::from_utf8_lossy(&rng.bytes(len)).into_owned())
        }
        _ => Some(
            (0..rng.below(12))
                .map(|_| HINT_PIECES[rng.below(HINT_PIECES.len())])
                .collect(),
        ),
    }
}

#[test]
fn random_bytes_and_hints() {
    let mut rng = Rng(0x5EED);
    for _ in 0..20_000 {
        let len = rng.below(400);
        let ua = rng.bytes(len);
        let (mobile, platform, brands) = (hint(&mut rng), hint(&mut rng), hint(&mut rng));
        check(detect(
            &ua,
            ClientHints {
                mobile: mobile.as_deref(),
                platform: platform.as_deref(),
                brands: brands.as_deref(),
            },
        ));
    }
}

#[test]
fn mangled_real_user_agents() {
    let cases = corpus::cases();
    let mut rng = Rng(0xC0FFEE);
    for _ in 0..20_000 {
        let mut ua = cases[rng.below(cases.len())].user_agent.as_bytes().to_vec();
        match rng.below(4) {
            0 => ua.truncate(rng.below(ua.len() + 1)),
            1 => {
                let other = cases[rng.below(cases.len())].user_agent.as_bytes();
                let at = rng.below(ua.len() + 1);
                ua.splice(at..at, other[rng.below(other.len() + 1)..].iter().copied());
            }
            2 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(ua.len());
                    if let Some(byte) = ua.get_mut(at) {
                        *byte = rng.next() as u8;
                    }
                }
            }
            _ => ua = ua.repeat(1 + rng.below(20)),
        }
        check(detect(&ua, ClientHints::default()));
    }
}

#[test]
fn extreme_lengths() {
    for len in [0, 1, 1023, 1024, 1025, 100_000] {
        for byte in [b' ', b'A', b'/', 0xff] {
            check(detect(&vec![byte; len], ClientHints::default()));
        }
    }
    // A word longer than any known one, and a known word only past the part that is read.
    let long_word = "A".repeat(5000);
    check(detect(long_word.as_bytes(), ClientHints::default()));
    let late = format!("{} iPhone", " ".repeat(2000));
    assert_eq!(
        detect(late.as_bytes(), ClientHints::default()),
        Device::default()
    );
}
