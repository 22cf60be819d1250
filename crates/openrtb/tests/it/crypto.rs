#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Price encryption against the published vectors, round trips, and tampered tokens.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use marquee_openrtb::{PriceCrypto, PriceError, parse_notice_price};
use proptest::prelude::*;
use serde_json::Value;

struct VectorSet {
    name: String,
    crypto: PriceCrypto,
    iv: [u8; 16],
    vectors: Vec<(String, u64)>,
}

fn vector_sets() -> Vec<VectorSet> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/price-encryption-vectors.json"
    ))
    .unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    let sets = file["sets"].as_array().unwrap();
    sets.iter()
        .map(|set| {
            let key = |web_safe: &str, standard: &str| -> Vec<u8> {
                match (set[web_safe].as_str(), set[standard].as_str()) {
                    (Some(k), _) => URL_SAFE.decode(k).unwrap(),
                    (None, Some(k)) => STANDARD.decode(k).unwrap(),
                    (None, None) => panic!("set without {web_safe}"),
                }
            };
            let e_key = key("e_key_websafe_b64", "e_key_std_b64");
            let i_key = key("i_key_websafe_b64", "i_key_std_b64");
            let iv: Vec<u8> = match (set["iv_ascii"].as_str(), set["iv_hex"].as_str()) {
                (Some(ascii), _) => ascii.as_bytes().to_vec(),
                (None, Some(hex)) => (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect(),
                (None, None) => panic!("set without iv"),
            };
            let vectors = set["vectors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    (
                        v["ciphertext"].as_str().unwrap().to_owned(),
                        v["price_micros"].as_u64().unwrap(),
                    )
                })
                .collect();
            VectorSet {
                name: set["name"].as_str().unwrap().to_owned(),
                crypto: PriceCrypto::new(&e_key, &i_key),
                iv: iv.try_into().unwrap(),
                vectors,
            }
        })
        .collect()
}

#[test]
fn decrypts_and_reproduces_every_published_vector() {
    let sets = vector_sets();
    assert_eq!(sets.len(), 2);
    let mut checked = 0;
    for set in &sets {
        for (ciphertext, price) in &set.vectors {
            assert_eq!(
                set.crypto.decrypt(ciphertext),
                Ok(*price),
                "{} {ciphertext}",
                set.name
            );
            // Encryption with the same IV gives the same token (unpadded, web-safe).
            let ours = set.crypto.encrypt(*price, set.iv);
            assert_eq!(ours, ciphertext.trim_end_matches('='), "{}", set.name);
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}

#[test]
fn keys_in_base64_either_alphabet_with_or_without_padding() {
    let from_doc = PriceCrypto::from_base64(
        "skU7Ax_NL5pPAFyKdkfZjZz2-VhIN8bjj1rVFOaJ_5o=",
        "arO23ykdNqUQ5LEoQ0FVmPkBd7xB5CO89PDZlSjpFxo",
    )
    .unwrap();
    assert_eq!(
        from_doc.decrypt("YWJjMTIzZGVmNDU2Z2hpN7fhCuPemCce_6msaw"),
        Ok(100)
    );
    let standard = PriceCrypto::from_base64(
        "sIxwz7yw62yrfoLGt12lIHKuYrK/S5kLuApI2BQe7Ac=",
        "v3fsVcMBMMHYzRhi7SpM0sdqwzvAxM6KPTu9OtVod5I=",
    )
    .unwrap();
    assert_eq!(
        standard.decrypt("OG46wAAMCggBI0VniavN7-mNy0VTKPbB3o5CMQ"),
        Ok(1_200_000)
    );
    assert!(PriceCrypto::from_base64("not base64!", "aaaa").is_err());
    assert!(PriceCrypto::from_base64("", "aaaa").is_err());
}

#[test]
fn tokens_in_every_accepted_spelling() {
    let set = &vector_sets()[1];
    let (web_safe_padded, price) = &set.vectors[0];
    let unpadded = web_safe_padded.trim_end_matches('=');
    let standard_padded = web_safe_padded.replace('-', "+").replace('_', "/");
    let standard_unpadded = standard_padded.trim_end_matches('=');
    for token in [
        web_safe_padded.as_str(),
        unpadded,
        &standard_padded,
        standard_unpadded,
    ] {
        assert_eq!(set.crypto.decrypt(token), Ok(*price), "{token}");
        assert_eq!(
            parse_notice_price(token, Some(&set.crypto)),
            Ok(*price),
            "{token}"
        );
    }
}

/// An exchange that puts a standard-alphabet token in a URL without escaping its `+` has it
/// read back as a space by form decoding (`url::form_urlencoded`, as the notice endpoints read
/// their query): still the same token.
#[test]
fn a_plus_read_back_as_a_space_is_still_a_plus() {
    let crypto = &vector_sets()[1].crypto;
    let token = (0u8..=255)
        .map(|seed| crypto.encrypt(1_500_000, [seed; 16]))
        .find(|t| t[1..].contains('-'))
        .expect("some IV gives a `-` after the first character");
    let standard = token.replace('-', "+").replace('_', "/");
    let query = format!("p={standard}");
    let (_, read) = url::form_urlencoded::parse(query.as_bytes())
        .next()
        .expect("one pair");
    assert!(read.contains(' '), "{read}");
    assert_eq!(crypto.decrypt(&read), Ok(1_500_000));
}

#[test]
fn tampered_tokens_fail_the_integrity_check() {
    let set = &vector_sets()[0];
    let (token, _) = &set.vectors[0];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut failures = 0;
    // Every single-character change of the token (the last one carries spare bits, which a
    // canonical decoder refuses as base64 instead).
    for position in 0..token.len() {
        for &replacement in alphabet {
            let mut tampered = token.clone().into_bytes();
            if tampered[position] == replacement {
                continue;
            }
            tampered[position] = replacement;
            let tampered = String::from_utf8(tampered).unwrap();
            let result = set.crypto.decrypt(&tampered);
            assert!(
                matches!(
                    result,
                    Err(PriceError::Integrity) | Err(PriceError::TokenBase64)
                ),
                "{tampered}: {result:?}"
            );
            failures += 1;
        }
    }
    assert!(failures > 2000);
    // The right token under other keys.
    let other = PriceCrypto::new(b"other encryption key", b"other integrity key");
    assert_eq!(other.decrypt(token), Err(PriceError::Integrity));
}

#[test]
fn malformed_tokens_are_named() {
    let set = &vector_sets()[0];
    assert_eq!(set.crypto.decrypt(""), Err(PriceError::TokenLength(0)));
    assert_eq!(
        set.crypto.decrypt("YWJjMTIzZGVmNDU2Z2hpN7fhCuPemCce_6msa"),
        Err(PriceError::TokenLength(37))
    );
    assert_eq!(
        set.crypto
            .decrypt("YWJjMTIzZGVmNDU2Z2hpN7fhCuPemCce_6msaw==="),
        Err(PriceError::TokenLength(41))
    );
    assert_eq!(
        set.crypto.decrypt("YWJjMTIzZGVmNDU2Z2hpN7fhCuPemCce_6ms!w"),
        Err(PriceError::TokenBase64)
    );
    // Multi-byte characters count as characters of the wrong length, never a panic.
    assert!(
        set.crypto
            .decrypt("YWJjMTIzZGVmNDU2Z2hpN7fhCuPemCce_6msé")
            .is_err()
    );
}

proptest! {
    #[test]
    fn encryption_round_trips(price in any::<u64>(), iv in any::<[u8; 16]>(),
                              e_key in proptest::collection::vec(any::<u8>(), 1..80),
                              i_key in proptest::collection::vec(any::<u8>(), 1..80)) {
        let crypto = PriceCrypto::new(&e_key, &i_key);
        let token = crypto.encrypt(price, iv);
        prop_assert_eq!(token.len(), 38);
        prop_assert!(token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        prop_assert_eq!(crypto.decrypt(&token), Ok(price));
        prop_assert_eq!(parse_notice_price(&token, Some(&crypto)), Ok(price));
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,60}") {
        let crypto = PriceCrypto::new(b"e", b"i");
        let _ = crypto.decrypt(&text);
        let _ = parse_notice_price(&text, Some(&crypto));
    }
}
