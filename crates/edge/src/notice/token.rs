//! Notice tokens: what a bid's win, billing and loss URLs carry, so that a notice counts only
//! for a bid this edge (or another with the same tracking keys) made.
//!
//! One token per bid serves its three notice URLs: the path says which notice it is, and each
//! kind has its own replay guard, so a win and its billing each count once. The MAC is the
//! tracking keys' ([`KeyRing::mac`]), so rotation works as for tracking links.
//!
//! # Layout, versions `N` (0x4e) and `O` (0x4f)
//!
//! Version `N`: 86 bytes written as unpadded URL-safe base64 ([`TOKEN_LEN`] = 115 characters);
//! integers little-endian.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | version, `0x4e` (never a tracking token's `1`) |
//! | 1 | 1 | key id |
//! | 2 | 1 | flags: bit 0 = the request was a test |
//! | 3 | 8 | nonce: the bid id, and the event id of every event of the bid |
//! | 11 | 8 | line item id |
//! | 19 | 8 | creative id |
//! | 27 | 8 | user key (`0`: none) |
//! | 35 | 8 | our bid price, micros of CPM (`i64`) |
//! | 43 | 3 | the bid's currency |
//! | 46 | 4 | digest of the exchange's name (`0`: `/openrtb2/bid` without a name) |
//! | 50 | 8 | digest of the auction id and imp id |
//! | 58 | 8 | issued at (`i64`, unix seconds) |
//! | 66 | 4 | lifetime (seconds) |
//! | 70 | 16 | MAC of bytes 0..70 |
//!
//! Version `O`, for a bid in another currency than its line item's price: the same 70 bytes
//! with `0x4f` first, then at 70 the bid price in the line item's currency at the rates the bid
//! was made with (`i64` micros, rounded up), then the MAC of bytes 0..78: 94 bytes,
//! [`CONVERTED_TOKEN_LEN`] = 126 characters. A clearing price then converts at the bid's own
//! rate, whatever the rates are when the notice arrives (or on the edge it reaches). Bids in
//! their line item's currency keep version `N`, which edges of earlier builds read.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use marquee_model::Currency;
use marquee_tracking::{CLOCK_SKEW_SECS, KeyRing, MAC_LEN, TokenError};

const VERSION: u8 = 0x4e;
const VERSION_CONVERTED: u8 = 0x4f;
const SIGNED_LEN: usize = 70;
const CONVERTED_SIGNED_LEN: usize = SIGNED_LEN + 8;
const RAW_LEN: usize = SIGNED_LEN + MAC_LEN;
const CONVERTED_RAW_LEN: usize = CONVERTED_SIGNED_LEN + MAC_LEN;
/// Characters of a notice token of a bid in its line item's currency.
pub const TOKEN_LEN: usize = 115;
/// Characters of a notice token of a bid in another currency.
pub const CONVERTED_TOKEN_LEN: usize = 126;
const _: () = assert!(TOKEN_LEN == (RAW_LEN * 4).div_ceil(3));
const _: () = assert!(CONVERTED_TOKEN_LEN == (CONVERTED_RAW_LEN * 4).div_ceil(3));

/// What a notice token asserts about its bid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoticeClaims {
    pub nonce: u64,
    pub line_item: u64,
    pub creative: u64,
    pub user: u64,
    pub price_micros: i64,
    pub currency: Currency,
    pub exchange: u32,
    pub auction: u64,
    /// The bid request had `test` set: its notices are answered but not counted.
    pub test: bool,
    pub issued_at: i64,
    pub lifetime: u32,
    /// The bid price in the line item's currency at the bid's rates, when the bid is in
    /// another currency (version `O`).
    pub price_in_line_item_currency: Option<i64>,
}

/// Why a notice token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    #[error("malformed notice token")]
    Malformed,
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("notice token expired")]
    Expired,
    #[error("notice for another auction or imp")]
    OtherAuction,
}

impl NoticeClaims {
    pub fn expires_at(&self) -> i64 {
        self.issued_at.saturating_add(i64::from(self.lifetime))
    }

    /// Writes the signed bytes at the start of `out`: [`SIGNED_LEN`] of them, or
    /// [`CONVERTED_SIGNED_LEN`] with the price in the line item's currency; returns how many.
    fn encode(&self, key_id: u8, out: &mut [u8; CONVERTED_RAW_LEN]) -> usize {
        out[0] = if self.price_in_line_item_currency.is_some() {
            VERSION_CONVERTED
        } else {
            VERSION
        };
        out[1] = key_id;
        out[2] = u8::from(self.test);
        out[3..11].copy_from_slice(&self.nonce.to_le_bytes());
        out[11..19].copy_from_slice(&self.line_item.to_le_bytes());
        out[19..27].copy_from_slice(&self.creative.to_le_bytes());
        out[27..35].copy_from_slice(&self.user.to_le_bytes());
        out[35..43].copy_from_slice(&self.price_micros.to_le_bytes());
        out[43..46].copy_from_slice(self.currency.as_str().as_bytes());
        out[46..50].copy_from_slice(&self.exchange.to_le_bytes());
        out[50..58].copy_from_slice(&self.auction.to_le_bytes());
        out[58..66].copy_from_slice(&self.issued_at.to_le_bytes());
        out[66..70].copy_from_slice(&self.lifetime.to_le_bytes());
        match self.price_in_line_item_currency {
            Some(price) => {
                out[70..78].copy_from_slice(&price.to_le_bytes());
                CONVERTED_SIGNED_LEN
            }
            None => SIGNED_LEN,
        }
    }

    /// Claims from signed bytes whose version and length were checked.
    fn decode(raw: &[u8]) -> Option<NoticeClaims> {
        let u64_at = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(raw.get(at..at + 8)?);
            Some(u64::from_le_bytes(bytes))
        };
        let u32_at = |at: usize| {
            let mut bytes = [0u8; 4];
            bytes.copy_from_slice(raw.get(at..at + 4)?);
            Some(u32::from_le_bytes(bytes))
        };
        let currency = std::str::from_utf8(raw.get(43..46)?)
            .ok()
            .and_then(|c| Currency::try_from(c).ok())?;
        let price_in_line_item_currency = match raw.len() {
            CONVERTED_SIGNED_LEN => Some(u64_at(70)?.cast_signed()),
            _ => None,
        };
        Some(NoticeClaims {
            test: raw[2] & 1 == 1,
            nonce: u64_at(3)?,
            line_item: u64_at(11)?,
            creative: u64_at(19)?,
            user: u64_at(27)?,
            price_micros: u64_at(35)?.cast_signed(),
            currency,
            exchange: u32_at(46)?,
            auction: u64_at(50)?,
            issued_at: u64_at(58)?.cast_signed(),
            lifetime: u32_at(66)?,
            price_in_line_item_currency,
        })
    }
}

/// Appends the token for `claims` to `out`.
pub fn sign_into(keys: &KeyRing, claims: &NoticeClaims, out: &mut String) {
    let mut raw = [0u8; CONVERTED_RAW_LEN];
    let signed_len = claims.encode(keys.signing_id(), &mut raw);
    let (_, tag) = keys.mac(&raw[..signed_len]);
    raw[signed_len..signed_len + MAC_LEN].copy_from_slice(&tag);
    URL_SAFE_NO_PAD.encode_string(&raw[..signed_len + MAC_LEN], out);
}

/// Checks a token's form, key, MAC and validity at `now` (unix seconds).
pub fn verify(keys: &KeyRing, token: &str, now: i64) -> Result<NoticeClaims, NoticeError> {
    let (version, raw_len) = match token.len() {
        TOKEN_LEN => (VERSION, RAW_LEN),
        CONVERTED_TOKEN_LEN => (VERSION_CONVERTED, CONVERTED_RAW_LEN),
        _ => return Err(NoticeError::Malformed),
    };
    let mut buf = [0u8; CONVERTED_RAW_LEN + 2];
    match URL_SAFE_NO_PAD.decode_slice(token, &mut buf) {
        Ok(len) if len == raw_len => {}
        _ => return Err(NoticeError::Malformed),
    }
    if buf[0] != version {
        return Err(NoticeError::Malformed);
    }
    let signed_len = raw_len - MAC_LEN;
    keys.verify_mac(buf[1], &buf[..signed_len], &buf[signed_len..raw_len])?;
    let claims = NoticeClaims::decode(&buf[..signed_len]).ok_or(NoticeError::Malformed)?;
    if claims.issued_at > now.saturating_add(CLOCK_SKEW_SECS) || now >= claims.expires_at() {
        return Err(NoticeError::Expired);
    }
    Ok(claims)
}

/// A stable 64-bit FNV-1a digest: the same on every edge and build, unlike std's hasher.
pub fn digest(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            // A separator no id contains, so ("ab", "c") and ("a", "bc") differ.
            hash ^= 0xff;
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        for byte in part.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The digest of an exchange's name as a token stores it; `0` for the unnamed endpoint.
pub fn exchange_digest(name: &str) -> u32 {
    if name.is_empty() {
        return 0;
    }
    // The low half of the 64-bit digest; `max(1)` keeps 0 for the unnamed endpoint.
    u32::try_from(digest(&[name]) & 0xffff_ffff)
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(id: u8, secret: u8) -> KeyRing {
        KeyRing::new(id, [(id, &[secret; 32][..])]).unwrap()
    }

    fn claims() -> NoticeClaims {
        NoticeClaims {
            nonce: 0x0102_0304_0506_0708,
            line_item: 7,
            creative: 70,
            user: 99,
            price_micros: 1_250_000,
            currency: Currency::EUR,
            exchange: exchange_digest("adx"),
            auction: digest(&["auction-1", "imp-1"]),
            test: true,
            issued_at: 1_790_000_000,
            lifetime: 3_600,
            price_in_line_item_currency: None,
        }
    }

    /// The layouts byte for byte (tokens computed outside the code base from the table in the
    /// module doc): edges of other builds read what this one writes, and the reverse.
    #[test]
    fn both_versions_are_written_and_read_as_documented() {
        const PLAIN: &str = "TgMBCAcGBQQDAgEHAAAAAAAAAEYAAAAAAAAAYwAAAAAAAADQEhMAAAAAAEVVUsC2MAXDfRP9YS9vtIA7sWoAAAAAEA4AABseaOFZh_LCgUuwzYUj92Q";
        const CONVERTED: &str = "TwMBCAcGBQQDAgEHAAAAAAAAAEYAAAAAAAAAYwAAAAAAAADQEhMAAAAAAEVVUsC2MAXDfRP9YS9vtIA7sWoAAAAAEA4AAGi7FAAAAAAA-bnOSa-TucVSrSR6Iwux7g";
        let ring = keys(3, 9);
        let now = 1_790_000_010;
        let converted = NoticeClaims {
            price_in_line_item_currency: Some(1_358_696),
            ..claims()
        };
        for (claims, token, len) in [
            (claims(), PLAIN, TOKEN_LEN),
            (converted, CONVERTED, CONVERTED_TOKEN_LEN),
        ] {
            let mut signed = String::new();
            sign_into(&ring, &claims, &mut signed);
            assert_eq!(signed, token);
            assert_eq!(token.len(), len);
            assert_eq!(verify(&ring, token, now), Ok(claims));
        }
        // A version byte that does not match the length is refused, though correctly signed.
        let mut buf = [0u8; CONVERTED_RAW_LEN + 2];
        let len = URL_SAFE_NO_PAD.decode_slice(CONVERTED, &mut buf).unwrap();
        let raw = &mut buf[..len];
        raw[0] = VERSION;
        let (_, tag) = ring.mac(&raw[..CONVERTED_SIGNED_LEN]);
        raw[CONVERTED_SIGNED_LEN..].copy_from_slice(&tag);
        let relabelled = URL_SAFE_NO_PAD.encode(raw);
        assert_eq!(verify(&ring, &relabelled, now), Err(NoticeError::Malformed));
    }

    #[test]
    fn tokens_round_trip_and_are_url_safe() {
        let ring = keys(3, 9);
        let mut token = String::new();
        sign_into(&ring, &claims(), &mut token);
        assert_eq!(token.len(), TOKEN_LEN);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(verify(&ring, &token, 1_790_000_010), Ok(claims()));
    }

    #[test]
    fn forged_altered_expired_and_foreign_tokens_are_refused() {
        let ring = keys(3, 9);
        let mut token = String::new();
        sign_into(&ring, &claims(), &mut token);
        let now = 1_790_000_010;
        assert_eq!(
            verify(&keys(3, 8), &token, now),
            Err(NoticeError::Token(TokenError::BadMac))
        );
        assert_eq!(
            verify(&keys(4, 9), &token, now),
            Err(NoticeError::Token(TokenError::UnknownKey(3)))
        );
        for at in [5, 40, 60, 100] {
            let mut altered = token.clone().into_bytes();
            altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(altered).unwrap();
            assert!(verify(&ring, &altered, now).is_err(), "character {at}");
        }
        assert_eq!(
            verify(&ring, &token, 1_790_003_600),
            Err(NoticeError::Expired)
        );
        assert_eq!(verify(&ring, &token[1..], now), Err(NoticeError::Malformed));
        let mut tracking = String::new();
        ring.sign_into(
            &marquee_tracking::Claims {
                kind: marquee_tracking::TokenKind::Impression,
                line_item: 1,
                creative: 2,
                placement: std::num::NonZeroU64::new(3),
                user: 4,
                issued_at: now,
                lifetime: 60,
                nonce: 5,
                amount_micros: None,
            },
            &mut tracking,
        );
        assert_eq!(verify(&ring, &tracking, now), Err(NoticeError::Malformed));
    }

    #[test]
    fn digests_separate_their_parts_and_name_exchanges_non_zero() {
        assert_ne!(digest(&["ab", "c"]), digest(&["a", "bc"]));
        assert_eq!(digest(&["a", "b"]), digest(&["a", "b"]));
        assert_eq!(exchange_digest(""), 0);
        assert_ne!(exchange_digest("adx"), 0);
        assert_ne!(exchange_digest("adx"), exchange_digest("xandr"));
    }
}
