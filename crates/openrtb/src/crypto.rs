//! The HMAC-SHA1 price-confirmation encryption large exchanges use for `${AUCTION_PRICE}`.
//!
//! ```text
//! pad       = HMAC-SHA1(encryption_key, iv)[0..8]
//! enc_price = price_micros (u64 big-endian) XOR pad
//! signature = HMAC-SHA1(integrity_key, price bytes ‖ iv)[0..4]
//! token     = web-safe base64 of iv (16) ‖ enc_price (8) ‖ signature (4)   — 28 bytes
//! ```
//!
//! Tokens are written unpadded (38 characters); decryption also takes the padded form (40)
//! and the standard alphabet (`+` `/`), which some exchanges send (a `+` left unescaped in the
//! URL comes back from form decoding as a space, read as `+`). The signature is checked
//! in constant time before the price is returned.

use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

type HmacSha1 = Hmac<Sha1>;

const IV_LEN: usize = 16;
const PRICE_LEN: usize = 8;
const SIGNATURE_LEN: usize = 4;
const TOKEN_LEN: usize = IV_LEN + PRICE_LEN + SIGNATURE_LEN;
/// Base64 characters of a 28-byte token without padding.
const TOKEN_CHARS: usize = 38;

/// Why an encrypted price was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("no price")]
    Empty,
    #[error("the price macro came back unsubstituted")]
    Unsubstituted,
    #[error("malformed decimal price: {0}")]
    Decimal(#[from] crate::decimal::DecimalError),
    #[error("negative price")]
    Negative,
    #[error("encrypted price has {0} characters; 38, or 40 with padding, expected")]
    TokenLength(usize),
    #[error("encrypted price is not base64")]
    TokenBase64,
    #[error("encrypted price fails its integrity check (wrong keys or tampered)")]
    Integrity,
    #[error("encrypted price but no price keys for this exchange")]
    NoKeys,
}

/// Why price keys were refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{0} key is not base64")]
    Base64(&'static str),
    #[error("{0} key is empty")]
    Empty(&'static str),
}

/// One exchange's encryption and integrity keys, each HMAC keyed once.
#[derive(Clone)]
pub struct PriceCrypto {
    encryption: HmacSha1,
    integrity: HmacSha1,
}

impl fmt::Debug for PriceCrypto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PriceCrypto { keys: <redacted> }")
    }
}

impl PriceCrypto {
    /// From the raw key bytes (exchanges hand out 32-byte keys as base64; see
    /// [`PriceCrypto::from_base64`]).
    pub fn new(encryption_key: &[u8], integrity_key: &[u8]) -> Self {
        PriceCrypto {
            encryption: keyed(encryption_key),
            integrity: keyed(integrity_key),
        }
    }

    /// From keys written in base64, web-safe or standard, padded or not.
    pub fn from_base64(encryption_key: &str, integrity_key: &str) -> Result<Self, KeyError> {
        let e = decode_key(encryption_key, "encryption")?;
        let i = decode_key(integrity_key, "integrity")?;
        Ok(Self::new(&e, &i))
    }

    /// Encrypts `price_micros` with the caller's 16-byte `iv` (unique per impression: a
    /// timestamp and server id, or random bytes) into the 38-character web-safe token.
    pub fn encrypt(&self, price_micros: u64, iv: [u8; IV_LEN]) -> String {
        let mut out = String::with_capacity(TOKEN_CHARS);
        self.encrypt_into(price_micros, iv, &mut out);
        out
    }

    /// [`Self::encrypt`], appending to `out`.
    pub fn encrypt_into(&self, price_micros: u64, iv: [u8; IV_LEN], out: &mut String) {
        let price = price_micros.to_be_bytes();
        let mut token = [0u8; TOKEN_LEN];
        token[..IV_LEN].copy_from_slice(&iv);
        let pad = self.pad(&iv);
        for (i, byte) in price.iter().enumerate() {
            token[IV_LEN + i] = byte ^ pad[i];
        }
        let signature = self.signature(&price, &iv).finalize().into_bytes();
        token[IV_LEN + PRICE_LEN..].copy_from_slice(&signature[..SIGNATURE_LEN]);
        URL_SAFE_NO_PAD.encode_string(token, out);
    }

    /// Decrypts a token into micros, after checking its integrity signature.
    pub fn decrypt(&self, token: &str) -> Result<u64, PriceError> {
        let token = decode_token(token)?;
        let (iv, rest) = token.split_at(IV_LEN);
        let (encrypted, signature) = rest.split_at(PRICE_LEN);
        let pad = self.pad(iv);
        let mut price = [0u8; PRICE_LEN];
        for (i, byte) in encrypted.iter().enumerate() {
            price[i] = byte ^ pad[i];
        }
        self.signature(&price, iv)
            .verify_truncated_left(signature)
            .map_err(|_| PriceError::Integrity)?;
        Ok(u64::from_be_bytes(price))
    }

    fn pad(&self, iv: &[u8]) -> [u8; PRICE_LEN] {
        let mut mac = self.encryption.clone();
        mac.update(iv);
        let digest = mac.finalize().into_bytes();
        let mut pad = [0u8; PRICE_LEN];
        pad.copy_from_slice(&digest[..PRICE_LEN]);
        pad
    }

    fn signature(&self, price: &[u8; PRICE_LEN], iv: &[u8]) -> HmacSha1 {
        let mut mac = self.integrity.clone();
        mac.update(price);
        mac.update(iv);
        mac
    }
}

fn keyed(key: &[u8]) -> HmacSha1 {
    // HMAC takes keys of any length (longer ones are hashed); the trait's error exists for
    // ciphers with fixed key sizes.
    #[allow(clippy::expect_used)]
    HmacSha1::new_from_slice(key).expect("HMAC accepts any key length")
}

/// Web-safe alphabet, padding optional: keys are handed out both ways.
const KEY_ENGINE: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn decode_key(text: &str, which: &'static str) -> Result<Vec<u8>, KeyError> {
    let web_safe: String = text.trim().chars().map(to_web_safe).collect();
    let key = KEY_ENGINE
        .decode(web_safe)
        .map_err(|_| KeyError::Base64(which))?;
    if key.is_empty() {
        return Err(KeyError::Empty(which));
    }
    Ok(key)
}

fn to_web_safe(c: char) -> char {
    match c {
        '+' => '-',
        '/' => '_',
        other => other,
    }
}

/// The 28 token bytes from any of the accepted spellings, without allocating.
fn decode_token(token: &str) -> Result<[u8; TOKEN_LEN], PriceError> {
    let unpadded = token.trim_end_matches('=');
    let padding = token.len() - unpadded.len();
    if unpadded.len() != TOKEN_CHARS || padding > 2 {
        return Err(PriceError::TokenLength(token.len()));
    }
    // Normalise to the web-safe alphabet on the stack.
    let mut chars = [0u8; TOKEN_CHARS];
    for (slot, byte) in chars.iter_mut().zip(unpadded.bytes()) {
        *slot = match byte {
            // A `+` the exchange left unescaped in the URL, read back by form decoding.
            b'+' | b' ' => b'-',
            b'/' => b'_',
            other => other,
        };
    }
    let mut bytes = [0u8; TOKEN_LEN + 2];
    let written = URL_SAFE_NO_PAD
        .decode_slice(chars, &mut bytes)
        .map_err(|_| PriceError::TokenBase64)?;
    if written != TOKEN_LEN {
        return Err(PriceError::TokenBase64);
    }
    let mut token = [0u8; TOKEN_LEN];
    token.copy_from_slice(&bytes[..TOKEN_LEN]);
    Ok(token)
}
