//! Notice tokens: what a bid's win, billing and loss URLs carry, so that a notice counts only
//! for a bid this edge (or another with the same tracking keys) made.
//!
//! One token per bid serves its three notice URLs: the path says which notice it is, and each
//! kind has its own replay guard, so a win and its billing each count once. The MAC is the
//! tracking keys' ([`KeyRing::mac`]), so rotation works as for tracking links.
//!
//! # Layout, version `N` (0x4e)
//!
//! 86 bytes written as unpadded URL-safe base64 ([`TOKEN_LEN`] = 115 characters); integers
//! little-endian.
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

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use marquee_model::Currency;
use marquee_tracking::{CLOCK_SKEW_SECS, KeyRing, MAC_LEN, TokenError};

const VERSION: u8 = 0x4e;
const SIGNED_LEN: usize = 70;
const RAW_LEN: usize = SIGNED_LEN + MAC_LEN;
/// Characters of a notice token.
pub const TOKEN_LEN: usize = 115;
const _: () = assert!(TOKEN_LEN == (RAW_LEN * 4).div_ceil(3));

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

    fn encode(&self, key_id: u8) -> [u8; SIGNED_LEN] {
        let mut out = [0u8; SIGNED_LEN];
        out[0] = VERSION;
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
        out
    }

    fn decode(raw: &[u8; SIGNED_LEN]) -> Option<NoticeClaims> {
        let u64_at = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&raw[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        let mut four = [0u8; 4];
        four.copy_from_slice(&raw[46..50]);
        let exchange = u32::from_le_bytes(four);
        four.copy_from_slice(&raw[66..70]);
        let lifetime = u32::from_le_bytes(four);
        let currency = std::str::from_utf8(&raw[43..46])
            .ok()
            .and_then(|c| Currency::try_from(c).ok())?;
        Some(NoticeClaims {
            test: raw[2] & 1 == 1,
            nonce: u64_at(3),
            line_item: u64_at(11),
            creative: u64_at(19),
            user: u64_at(27),
            price_micros: u64_at(35).cast_signed(),
            currency,
            exchange,
            auction: u64_at(50),
            issued_at: u64_at(58).cast_signed(),
            lifetime,
        })
    }
}

/// Appends the token for `claims` to `out`.
pub fn sign_into(keys: &KeyRing, claims: &NoticeClaims, out: &mut String) {
    let mut raw = [0u8; RAW_LEN];
    raw[..SIGNED_LEN].copy_from_slice(&claims.encode(keys.signing_id()));
    let (_, tag) = keys.mac(&raw[..SIGNED_LEN]);
    raw[SIGNED_LEN..].copy_from_slice(&tag);
    URL_SAFE_NO_PAD.encode_string(raw, out);
}

/// Checks a token's form, key, MAC and validity at `now` (unix seconds).
pub fn verify(keys: &KeyRing, token: &str, now: i64) -> Result<NoticeClaims, NoticeError> {
    if token.len() != TOKEN_LEN {
        return Err(NoticeError::Malformed);
    }
    let mut buf = [0u8; RAW_LEN + 2];
    match URL_SAFE_NO_PAD.decode_slice(token, &mut buf) {
        Ok(RAW_LEN) => {}
        _ => return Err(NoticeError::Malformed),
    }
    if buf[0] != VERSION {
        return Err(NoticeError::Malformed);
    }
    keys.verify_mac(buf[1], &buf[..SIGNED_LEN], &buf[SIGNED_LEN..RAW_LEN])?;
    let mut signed = [0u8; SIGNED_LEN];
    signed.copy_from_slice(&buf[..SIGNED_LEN]);
    let claims = NoticeClaims::decode(&signed).ok_or(NoticeError::Malformed)?;
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
        }
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
                kind: marquee_tracking::Kind::Impression,
                line_item: 1,
                creative: 2,
                placement: 3,
                user: 4,
                issued_at: now,
                lifetime: 60,
                nonce: 5,
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
