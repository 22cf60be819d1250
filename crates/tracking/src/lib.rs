//! Signed tracking tokens for impression beacons, click redirects and conversion pixels.
//!
//! The edge signs one token per tracking URL when it serves an ad ([`KeyRing::sign_into`]) and
//! verifies it when the browser calls back ([`KeyRing::verify_kind`]); a [`ReplayGuard`] then
//! decides whether this is the first time the decision's nonce is seen, so repeats within the
//! token's life count once.
//!
//! Pure: no I/O, no clock (every time is a parameter, unix seconds), no randomness (the edge
//! generates the nonce). Ids are plain `u64`s so that this crate depends on no other.
//!
//! ```
//! use marquee_tracking::{Claims, KeyRing, TokenKind, ReplayConfig, ReplayGuard, TokenError};
//!
//! let ring = KeyRing::from_config(
//!     1,
//!     [(1, "hex:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")],
//! )?;
//! let now = 1_790_000_000;
//! let claims = Claims {
//!     kind: TokenKind::Impression,
//!     line_item: 10,
//!     creative: 11,
//!     placement: std::num::NonZeroU64::new(12),
//!     user: 0,
//!     issued_at: now,
//!     lifetime: 3_600,
//!     nonce: 0x5eed,
//!     amount_micros: Some(2_500_000),
//! };
//! let mut url = String::from("/t/i?t=");
//! ring.sign_into(&claims, &mut url);
//!
//! // Later, at the beacon endpoint:
//! let token = &url["/t/i?t=".len()..];
//! let impressions = ReplayGuard::new(ReplayConfig::default());
//! let verified = ring.verify_kind(token, TokenKind::Impression, now + 5)?;
//! assert!(impressions.first_time(verified.nonce, verified.expires_at(), now + 5));
//! assert!(!impressions.first_time(verified.nonce, verified.expires_at(), now + 9)); // repeat
//! assert!(matches!(
//!     ring.verify_kind(token, TokenKind::Click, now + 5),
//!     Err(TokenError::WrongKind { .. })
//! ));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Token format, version 2
//!
//! A token is 71 bytes written as unpadded URL-safe base64 (RFC 4648 §5): exactly
//! [`TOKEN_LEN`] = 95 characters from `A–Z a–z 0–9 - _`, so it needs no escaping in a URL.
//! Integers are little-endian.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | format version, `2` |
//! | 1 | 1 | key id of the signing key |
//! | 2 | 1 | kind: `1` impression, `2` click, `3` conversion |
//! | 3 | 8 | nonce (`u64`), unique per decision |
//! | 11 | 8 | line item id (`u64`) |
//! | 19 | 8 | creative id (`u64`) |
//! | 27 | 8 | placement id (`u64`) |
//! | 35 | 8 | user key (`u64`, `0` = none), masked: XOR SipHash-2-4(nonce) under the key's mask key |
//! | 43 | 4 | issued at (`u32`, unix seconds) |
//! | 47 | 2 | lifetime (`u16`, seconds; expiry = issued at + lifetime) |
//! | 49 | 6 | amount (48 bits, micros of the line item's currency; all ones = not carried) |
//! | 55 | 16 | MAC: the first 16 bytes of HMAC-SHA256(key, bytes 0..55) |
//!
//! The user key is masked so that a token does not show it: the page and every creative the
//! URLs pass through can read a token, and the same key in every token of a visitor would be
//! an identifier of them across every site the edge serves. The mask is SipHash-2-4 of the
//! token's nonce (a PRF, so each decision's is unrelated to the others'), keyed by the first 16
//! bytes of HMAC-SHA256(tracking key, `"marquee tracking token: user key mask"`), read as two
//! little-endian `u64`s. The MAC covers the masked bytes.
//!
//! The amount is what the event is worth, fixed at the decision: a price edited or a line item
//! paused while its ads are on screen does not reprice their beacons and clicks.
//!
//! Version 1 (still verified, so that tokens an earlier build handed out count after an upgrade)
//! is the same up to offset 43, then issued at as an `i64` (8 bytes) and the lifetime as a `u32`
//! (4 bytes), and carries no amount; its user key is not masked.
//!
//! The MAC covers the version and key id too, so neither can be swapped without detection. The
//! signed part is 55 bytes on purpose: that is the most SHA-256 fits in one block with its
//! padding, so with the key's inner and outer pads hashed once per key (see [`KeyRing`]) a
//! token costs two SHA-256 compressions instead of three. Storing a lifetime rather than a second
//! timestamp is what makes it fit, and it also makes "expires before issued"
//! unrepresentable.
//!
//! Why 128 bits of MAC suffice: nobody can compute tags without the key, so a forger can only
//! submit guesses to an edge, each verified online with a 2⁻¹²⁸ chance. Even 10⁹ guesses a second
//! for a century (≈ 2⁶²) succeed with probability ≈ 2⁻⁶⁶. Collisions (birthday bounds) do not
//! help an attacker who cannot produce tags, and key recovery depends on the key (≥ 256 bits), not
//! the tag length. Truncating to half the hash output is what RFC 2104 §5 recommends as the
//! minimum.
//!
//! Verification checks, in order: length, base64, version, key id, MAC (constant time), then
//! kind and times. Nothing the sender controls is interpreted before the MAC has passed, and a
//! forged token is reported as [`TokenError::BadMac`], never as expired. A token is valid from
//! `issued_at - CLOCK_SKEW_SECS` until just before its expiry (`now < expires_at`).

mod claims;
mod keys;
mod replay;

pub use claims::{Claims, MAX_AMOUNT_MICROS, TokenKind};
pub use keys::{
    CLOCK_SKEW_SECS, KeyError, KeyRing, MAC_LEN, MIN_KEY_LEN, Malformed, TOKEN_LEN, TokenError,
};
pub use replay::{ReplayConfig, ReplayGuard};
