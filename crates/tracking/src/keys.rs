//! Keys, signing and verification. The token format is specified in the crate documentation.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{
    STANDARD_PAD_INDIFFERENT, URL_SAFE_NO_PAD, URL_SAFE_PAD_INDIFFERENT,
};
use std::hash::Hasher as _;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use siphasher::sip::SipHasher24;
use thiserror::Error;

use crate::claims::{CLAIMS_LEN, Claims, TokenKind};

type HmacSha256 = Hmac<Sha256>;

/// The format written; tokens of [`VERSION_1`] (no amount) are still read, so that those an
/// earlier build handed out count after an upgrade.
const VERSION: u8 = 2;
const VERSION_1: u8 = 1;
/// Version, key id, claims: what the MAC covers.
const SIGNED_LEN: usize = 2 + CLAIMS_LEN;
/// Length of a MAC, in bytes: tokens and [`KeyRing::mac`] keep the first 16 bytes of HMAC-SHA256.
pub const MAC_LEN: usize = 16;
const RAW_LEN: usize = SIGNED_LEN + MAC_LEN;

/// Length of every token, in characters: 71 bytes as unpadded base64.
pub const TOKEN_LEN: usize = 95;
const _: () = assert!(TOKEN_LEN == (RAW_LEN * 4).div_ceil(3));

/// Shortest key accepted, in bytes: the MAC's strength cannot exceed the key's.
pub const MIN_KEY_LEN: usize = 32;

/// How far in the future `issued_at` may lie and the token still verify: tokens signed by one
/// edge are verified by another, whose clock may be slightly behind.
pub const CLOCK_SKEW_SECS: i64 = 60;

/// Why a tracking token was refused. The edge answers the browser normally either way and counts
/// the refusal under [`TokenError::label`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TokenError {
    #[error("malformed token: {0}")]
    Malformed(#[from] Malformed),
    #[error("token signed with unknown key id {0}")]
    UnknownKey(u8),
    #[error("token MAC does not match")]
    BadMac,
    #[error("token expired at {expires_at} (now {now})")]
    Expired { expires_at: i64, now: i64 },
    #[error("token issued at {issued_at}, in the future (now {now})")]
    NotYetValid { issued_at: i64, now: i64 },
    #[error("{found:?} token where a {expected:?} token was expected")]
    WrongKind {
        expected: TokenKind,
        found: TokenKind,
    },
}

impl TokenError {
    /// A stable, low-cardinality name for metrics labels.
    pub fn label(&self) -> &'static str {
        match self {
            TokenError::Malformed(_) => "malformed",
            TokenError::UnknownKey(_) => "unknown_key",
            TokenError::BadMac => "bad_mac",
            TokenError::Expired { .. } => "expired",
            TokenError::NotYetValid { .. } => "not_yet_valid",
            TokenError::WrongKind { .. } => "wrong_kind",
        }
    }
}

/// How a token failed to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Malformed {
    #[error("{0} characters, expected {TOKEN_LEN}")]
    Length(usize),
    #[error("not unpadded URL-safe base64")]
    Base64,
    #[error("unknown format version {0}")]
    Version(u8),
    /// Only reachable with a valid MAC, i.e. from a signer that knows a kind this one does not.
    #[error("unknown kind {0}")]
    TokenKind(u8),
}

/// A key that cannot be used. Never contains the secret, so it is safe to log.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    #[error("tracking key {id}: the secret must start with \"hex:\" or \"base64:\"")]
    UnknownEncoding { id: u8 },
    #[error("tracking key {id}: invalid hex")]
    Hex { id: u8 },
    #[error("tracking key {id}: invalid base64")]
    Base64 { id: u8 },
    #[error("tracking key {id}: {len} bytes, at least {MIN_KEY_LEN} needed")]
    TooShort { id: u8, len: usize },
    #[error("tracking key {id} is configured twice")]
    Duplicate { id: u8 },
    #[error("signing key {id} is not among the configured tracking keys")]
    MissingSigningKey { id: u8 },
}

/// The tracking keys: one signs, all verify.
///
/// Rotation: add the new key everywhere, then make it the signing key, then remove the old one
/// once the longest token lifetime has passed. Each step is a new `KeyRing` built from config.
///
/// Each key is held as its HMAC state after hashing the inner and outer pads, cloned per token,
/// so signing never rehashes the key.
#[derive(Clone)]
pub struct KeyRing {
    signing_id: u8,
    signing: Key,
    /// Few keys (the current one and those being rotated out): a linear scan beats a map.
    keys: Vec<(u8, Key)>,
}

/// One tracking key: its HMAC state, and the key of the mask that hides a token's user key.
#[derive(Clone)]
struct Key {
    mac: HmacSha256,
    /// SipHash-2-4 keys, the first 16 bytes of HMAC-SHA256(key, [`USER_MASK_LABEL`]).
    mask: (u64, u64),
}

/// What the user mask's key is derived under: a use of the tracking key no token's MAC shares.
const USER_MASK_LABEL: &[u8] = b"marquee tracking token: user key mask";

impl Key {
    fn new(mac: HmacSha256) -> Key {
        let derived = mac
            .clone()
            .chain_update(USER_MASK_LABEL)
            .finalize()
            .into_bytes();
        let half = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&derived[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        Key {
            mac,
            mask: (half(0), half(8)),
        }
    }

    /// What a token with `nonce` XORs its user key with: SipHash-2-4 of the nonce, a PRF keyed
    /// by the tracking key. Without it a token's user key, readable to the page and to every
    /// creative the URL passes through, would be one identifier of the visitor across every
    /// site the edge serves.
    fn user_mask(&self, nonce: u64) -> u64 {
        let mut hasher = SipHasher24::new_with_keys(self.mask.0, self.mask.1);
        hasher.write_u64(nonce);
        hasher.finish()
    }
}

impl fmt::Debug for KeyRing {
    // Ids only: the HMAC state is as secret as the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u8> = self.keys.iter().map(|(id, _)| *id).collect();
        // `Key` holds secrets: never printed.
        f.debug_struct("KeyRing")
            .field("signing_id", &self.signing_id)
            .field("key_ids", &ids)
            .finish()
    }
}

impl KeyRing {
    /// Builds a ring from configuration: `keys` pairs each key id with its secret, written as
    /// `hex:` followed by hex digits (`openssl rand -hex 32`) or `base64:` followed by base64,
    /// standard or URL-safe, padding optional (`openssl rand -base64 32`). `signing_id` names the
    /// key that signs.
    pub fn from_config<'a>(
        signing_id: u8,
        keys: impl IntoIterator<Item = (u8, &'a str)>,
    ) -> Result<KeyRing, KeyError> {
        let secrets = keys
            .into_iter()
            .map(|(id, text)| parse_secret(id, text).map(|secret| (id, secret)))
            .collect::<Result<Vec<_>, _>>()?;
        KeyRing::new(
            signing_id,
            secrets.iter().map(|(id, secret)| (*id, secret.as_slice())),
        )
    }

    /// Builds a ring from raw secrets, each at least [`MIN_KEY_LEN`] bytes.
    pub fn new<'a>(
        signing_id: u8,
        keys: impl IntoIterator<Item = (u8, &'a [u8])>,
    ) -> Result<KeyRing, KeyError> {
        let mut ring: Vec<(u8, Key)> = Vec::new();
        for (id, secret) in keys {
            if secret.len() < MIN_KEY_LEN {
                return Err(KeyError::TooShort {
                    id,
                    len: secret.len(),
                });
            }
            if ring.iter().any(|(known, _)| *known == id) {
                return Err(KeyError::Duplicate { id });
            }
            // HMAC takes keys of any length (longer ones are hashed); the trait's error type
            // exists for ciphers with fixed key sizes.
            #[allow(clippy::expect_used)]
            let mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts any key length");
            ring.push((id, Key::new(mac)));
        }
        let signing = ring
            .iter()
            .find(|(id, _)| *id == signing_id)
            .map(|(_, key)| key.clone())
            .ok_or(KeyError::MissingSigningKey { id: signing_id })?;
        Ok(KeyRing {
            signing_id,
            signing,
            keys: ring,
        })
    }

    /// Signs `claims` with the signing key. Allocates only the returned string.
    pub fn sign(&self, claims: &Claims) -> String {
        let mut out = String::with_capacity(TOKEN_LEN);
        self.sign_into(claims, &mut out);
        out
    }

    /// Appends the token for `claims` to `out` (exactly [`TOKEN_LEN`] URL-safe characters), so a
    /// URL can be built in one buffer. Allocates nothing when `out` has room.
    pub fn sign_into(&self, claims: &Claims, out: &mut String) {
        let mut raw = [0u8; RAW_LEN];
        raw[0] = VERSION;
        raw[1] = self.signing_id;
        let masked = Claims {
            user: claims.user ^ self.signing.user_mask(claims.nonce),
            ..*claims
        };
        raw[2..SIGNED_LEN].copy_from_slice(&masked.encode());
        let tag = self
            .signing
            .mac
            .clone()
            .chain_update(&raw[..SIGNED_LEN])
            .finalize()
            .into_bytes();
        raw[SIGNED_LEN..].copy_from_slice(&tag[..MAC_LEN]);
        out.reserve(TOKEN_LEN);
        URL_SAFE_NO_PAD.encode_string(raw, out);
    }

    /// Checks a token's form, key, MAC and validity window at `now` (unix seconds) and returns
    /// its claims.
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, TokenError> {
        // Length first: cheap, and it bounds the work an attacker can ask for.
        if token.len() != TOKEN_LEN {
            return Err(Malformed::Length(token.len()).into());
        }
        // One spare byte: the decoder wants room for its rounded-up estimate (72).
        let mut buf = [0u8; RAW_LEN + 1];
        match URL_SAFE_NO_PAD.decode_slice(token, &mut buf) {
            Ok(RAW_LEN) => {}
            _ => return Err(Malformed::Base64.into()),
        }
        let raw = &buf[..RAW_LEN];
        let version = raw[0];
        if version != VERSION && version != VERSION_1 {
            return Err(Malformed::Version(version).into());
        }
        let key = self
            .keys
            .iter()
            .find(|(id, _)| *id == raw[1])
            .map(|(_, key)| key)
            .ok_or(TokenError::UnknownKey(raw[1]))?;
        // Constant-time comparison of the truncated tag, done by the hmac crate.
        key.mac
            .clone()
            .chain_update(&raw[..SIGNED_LEN])
            .verify_truncated_left(&raw[SIGNED_LEN..])
            .map_err(|_| TokenError::BadMac)?;

        let mut claims_bytes = [0u8; CLAIMS_LEN];
        claims_bytes.copy_from_slice(&raw[2..SIGNED_LEN]);
        let mut claims = Claims::decode(version, &claims_bytes).map_err(Malformed::TokenKind)?;
        // Version 1 tokens carry the user key as it is.
        if version != VERSION_1 {
            claims.user ^= key.user_mask(claims.nonce);
        }
        if claims.issued_at > now.saturating_add(CLOCK_SKEW_SECS) {
            return Err(TokenError::NotYetValid {
                issued_at: claims.issued_at,
                now,
            });
        }
        if now >= claims.expires_at() {
            return Err(TokenError::Expired {
                expires_at: claims.expires_at(),
                now,
            });
        }
        Ok(claims)
    }

    /// The id of the key that signs.
    pub fn signing_id(&self) -> u8 {
        self.signing_id
    }

    /// A MAC over `message` with the signing key, for tokens of another layout (the bidder's
    /// notice tokens), and the id of the key that made it, to store beside it. The caller's
    /// layout must never equal a tracking token's signed bytes (version `1` or `2`, 55 bytes):
    /// start it with another version byte.
    pub fn mac(&self, message: &[u8]) -> (u8, [u8; MAC_LEN]) {
        let tag = self
            .signing
            .mac
            .clone()
            .chain_update(message)
            .finalize()
            .into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&tag[..MAC_LEN]);
        (self.signing_id, out)
    }

    /// Checks a [`mac`](Self::mac) in constant time with the key `key_id` names.
    pub fn verify_mac(&self, key_id: u8, message: &[u8], tag: &[u8]) -> Result<(), TokenError> {
        let key = self
            .keys
            .iter()
            .find(|(id, _)| *id == key_id)
            .map(|(_, key)| &key.mac)
            .ok_or(TokenError::UnknownKey(key_id))?;
        if tag.len() != MAC_LEN {
            return Err(TokenError::BadMac);
        }
        key.clone()
            .chain_update(message)
            .verify_truncated_left(tag)
            .map_err(|_| TokenError::BadMac)
    }

    /// [`verify`](Self::verify), and the token must be of `expected` kind: the tracking endpoint
    /// for impressions must not count a click token, whose signature is just as valid.
    pub fn verify_kind(
        &self,
        token: &str,
        expected: TokenKind,
        now: i64,
    ) -> Result<Claims, TokenError> {
        let claims = self.verify(token, now)?;
        if claims.kind != expected {
            return Err(TokenError::WrongKind {
                expected,
                found: claims.kind,
            });
        }
        Ok(claims)
    }
}

fn parse_secret(id: u8, text: &str) -> Result<Vec<u8>, KeyError> {
    if let Some(hex) = text.strip_prefix("hex:") {
        decode_hex(hex).ok_or(KeyError::Hex { id })
    } else if let Some(b64) = text.strip_prefix("base64:") {
        let engine = if b64.contains(['-', '_']) {
            URL_SAFE_PAD_INDIFFERENT
        } else {
            STANDARD_PAD_INDIFFERENT
        };
        engine.decode(b64).map_err(|_| KeyError::Base64 { id })
    } else {
        // A prefix rather than guessing: a hex string is also valid base64.
        Err(KeyError::UnknownEncoding { id })
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            let high = char::from(pair[0]).to_digit(16)?;
            let low = char::from(pair[1]).to_digit(16)?;
            // Two hex digits make at most 255.
            u8::try_from(high * 16 + low).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_decoding() {
        assert_eq!(decode_hex("00ff10Ab"), Some(vec![0x00, 0xff, 0x10, 0xab]));
        assert_eq!(decode_hex(""), Some(vec![]));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex("+1"), None);
    }

    #[test]
    fn base64_secrets_in_either_alphabet() {
        let bytes: Vec<u8> = (0..32).map(|i| i * 8 + 3).collect();
        for engine in [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            let text = format!("base64:{}", engine.encode(&bytes));
            assert_eq!(parse_secret(7, &text), Ok(bytes.clone()), "{text}");
        }
    }
}
