#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use marquee_tracking::{
    CLOCK_SKEW_SECS, Claims, KeyError, KeyRing, Malformed, TOKEN_LEN, TokenError, TokenKind,
};
use std::num::NonZeroU64;

const KEY_1: &str = "hex:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
// 32 bytes, standard base64 as `openssl rand -base64 32` prints it.
const KEY_2: &str = "base64:q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=";
const NOW: i64 = 1_790_000_000;

fn claims(kind: TokenKind) -> Claims {
    Claims {
        kind,
        line_item: 42,
        creative: 4_200,
        placement: NonZeroU64::new(7),
        user: 0xdead_beef,
        issued_at: NOW,
        lifetime: 3_600,
        nonce: 0x0123_4567_89ab_cdef,
        amount_micros: Some(1_250_000),
    }
}

fn ring(signing: u8, keys: &[(u8, &str)]) -> KeyRing {
    KeyRing::from_config(signing, keys.iter().copied()).unwrap()
}

fn decode(token: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(token).unwrap()
}

#[test]
fn round_trip() {
    let ring = ring(1, &[(1, KEY_1)]);
    for kind in [
        TokenKind::Impression,
        TokenKind::Click,
        TokenKind::Conversion,
    ] {
        let claims = claims(kind);
        let token = ring.sign(&claims);
        assert_eq!(token.len(), TOKEN_LEN);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{token}"
        );
        assert_eq!(ring.verify(&token, NOW), Ok(claims));
        assert_eq!(ring.verify_kind(&token, kind, NOW + 10), Ok(claims));
    }
}

#[test]
fn layout_matches_the_documented_format() {
    let ring = ring(9, &[(9, KEY_1)]);
    let raw = decode(&ring.sign(&claims(TokenKind::Click)));
    assert_eq!(raw.len(), 71);
    assert_eq!(raw[0], 2, "version");
    assert_eq!(raw[1], 9, "key id");
    assert_eq!(raw[2], 2, "kind");
    assert_eq!(raw[3..11], 0x0123_4567_89ab_cdef_u64.to_le_bytes());
    assert_eq!(raw[11..19], 42u64.to_le_bytes());
    assert_eq!(raw[19..27], 4_200u64.to_le_bytes());
    assert_eq!(raw[27..35], 7u64.to_le_bytes());
    // The user key is masked: XORed with SipHash-2-4 of the nonce, keyed by the first 16
    // bytes of HMAC-SHA256(key, "marquee tracking token: user key mask").
    use hmac::{Hmac, KeyInit, Mac};
    use std::hash::Hasher;
    let secret: Vec<u8> = (0u8..32).collect();
    let mut derive = Hmac::<sha2::Sha256>::new_from_slice(&secret).unwrap();
    derive.update(b"marquee tracking token: user key mask");
    let derived = derive.finalize().into_bytes();
    let half = |at: usize| u64::from_le_bytes(derived[at..at + 8].try_into().unwrap());
    let mut mask = siphasher::sip::SipHasher24::new_with_keys(half(0), half(8));
    mask.write_u64(0x0123_4567_89ab_cdef);
    assert_eq!(raw[35..43], (0xdead_beef_u64 ^ mask.finish()).to_le_bytes());
    assert_eq!(raw[43..47], u32::try_from(NOW).unwrap().to_le_bytes());
    assert_eq!(raw[47..49], 3_600u16.to_le_bytes());
    assert_eq!(raw[49..55], 1_250_000u64.to_le_bytes()[..6]);
}

/// A version 1 token (issued at as an `i64`, lifetime as a `u32`, no amount), as an earlier
/// build handed out, still verifies: its beacon counts after an upgrade.
#[test]
fn version_1_tokens_still_verify_without_an_amount() {
    let ring = ring(9, &[(9, KEY_1)]);
    let mut signed = vec![1u8, 9, TokenKind::Click as u8];
    for field in [0x0123_4567_89ab_cdef_u64, 42, 4_200, 7, 0xdead_beef] {
        signed.extend_from_slice(&field.to_le_bytes());
    }
    signed.extend_from_slice(&NOW.to_le_bytes());
    signed.extend_from_slice(&3_600u32.to_le_bytes());
    assert_eq!(signed.len(), 55);
    let (key_id, mac) = ring.mac(&signed);
    assert_eq!(key_id, 9);
    signed.extend_from_slice(&mac);
    let token = URL_SAFE_NO_PAD.encode(&signed);
    assert_eq!(
        ring.verify(&token, NOW + 5),
        Ok(Claims {
            amount_micros: None,
            ..claims(TokenKind::Click)
        })
    );
    // Any other version is refused before its MAC is looked at.
    signed[0] = 3;
    assert_eq!(
        ring.verify(&URL_SAFE_NO_PAD.encode(&signed), NOW),
        Err(TokenError::Malformed(Malformed::Version(3)))
    );
}

#[test]
fn mac_is_truncated_hmac_sha256_of_the_first_55_bytes() {
    // Independent check against RFC 4231 test case 2 ("Jefe"), which the ring cannot sign
    // with (short key); the MAC layout is then checked with a real key through `hmac` directly.
    use hmac::{Hmac, KeyInit, Mac};
    let mut known = Hmac::<sha2::Sha256>::new_from_slice(b"Jefe").unwrap();
    known.update(b"what do ya want for nothing?");
    let tag = known.finalize().into_bytes();
    assert_eq!(tag[..4], [0x5b, 0xdc, 0xc1, 0x46]);

    let key: Vec<u8> = (0u8..32).collect();
    let ring = KeyRing::new(1, [(1, key.as_slice())]).unwrap();
    let raw = decode(&ring.sign(&claims(TokenKind::Impression)));
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(&raw[..55]);
    assert_eq!(raw[55..], mac.finalize().into_bytes()[..16]);
}

#[test]
fn sign_into_appends_to_the_buffer() {
    let ring = ring(1, &[(1, KEY_1)]);
    let claims = claims(TokenKind::Impression);
    let mut url = String::with_capacity(128);
    url.push_str("/t/i?t=");
    ring.sign_into(&claims, &mut url);
    assert_eq!(url.len(), 7 + TOKEN_LEN);
    assert_eq!(url[7..], ring.sign(&claims));
    assert_eq!(ring.verify(&url[7..], NOW), Ok(claims));
}

#[test]
fn every_altered_byte_fails() {
    let ring = ring(1, &[(1, KEY_1)]);
    let token = ring.sign(&claims(TokenKind::Impression));
    let raw = decode(&token);
    for position in 0..raw.len() {
        for mask in [0x01, 0x02, 0x10, 0x80, 0xff] {
            let mut altered = raw.clone();
            altered[position] ^= mask;
            let result = ring.verify(&URL_SAFE_NO_PAD.encode(&altered), NOW);
            let expected = match position {
                0 => TokenError::Malformed(Malformed::Version(2 ^ mask)),
                1 => TokenError::UnknownKey(1 ^ mask),
                _ => TokenError::BadMac,
            };
            assert_eq!(result, Err(expected), "byte {position} ^ {mask:#x}");
        }
    }
}

#[test]
fn every_altered_character_fails() {
    let ring = ring(1, &[(1, KEY_1)]);
    let token = ring.sign(&claims(TokenKind::Impression));
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=.~ ";
    for position in 0..token.len() {
        for &replacement in alphabet {
            if token.as_bytes()[position] == replacement {
                continue;
            }
            let mut altered = token.clone().into_bytes();
            altered[position] = replacement;
            let altered = String::from_utf8(altered).unwrap();
            assert!(ring.verify(&altered, NOW).is_err(), "{altered}");
        }
    }
}

#[test]
fn altered_key_id_naming_another_known_key_fails_the_mac() {
    let ring = ring(1, &[(1, KEY_1), (2, KEY_2)]);
    let mut raw = decode(&ring.sign(&claims(TokenKind::Impression)));
    raw[1] = 2;
    assert_eq!(
        ring.verify(&URL_SAFE_NO_PAD.encode(&raw), NOW),
        Err(TokenError::BadMac)
    );
}

#[test]
fn wrong_length_and_bad_base64_are_malformed() {
    let ring = ring(1, &[(1, KEY_1)]);
    let token = ring.sign(&claims(TokenKind::Impression));
    assert_eq!(
        ring.verify("", NOW),
        Err(TokenError::Malformed(Malformed::Length(0)))
    );
    assert_eq!(
        ring.verify(&token[1..], NOW),
        Err(TokenError::Malformed(Malformed::Length(94)))
    );
    assert_eq!(
        ring.verify(&format!("{token}A"), NOW),
        Err(TokenError::Malformed(Malformed::Length(96)))
    );
    let padded_std = token.replace('-', "+").replace('_', "/");
    if padded_std != token {
        assert_eq!(
            ring.verify(&padded_std, NOW),
            Err(TokenError::Malformed(Malformed::Base64))
        );
    }
    let mut bad = token.clone();
    bad.replace_range(10..11, "*");
    assert_eq!(
        ring.verify(&bad, NOW),
        Err(TokenError::Malformed(Malformed::Base64))
    );
    // Non-zero spare bits in the last character: the encoding is canonical, one string per token.
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let last = alphabet
        .iter()
        .position(|&c| c == token.as_bytes()[TOKEN_LEN - 1])
        .unwrap();
    assert_eq!(
        last % 4,
        0,
        "71 bytes leave the last character's two low bits unused"
    );
    let mut spare = token.clone().into_bytes();
    spare[TOKEN_LEN - 1] = alphabet[last + 1];
    let spare = String::from_utf8(spare).unwrap();
    assert_eq!(
        ring.verify(&spare, NOW),
        Err(TokenError::Malformed(Malformed::Base64))
    );
    // A multi-byte character at the right byte length is still not base64.
    let unicode = format!("é{}", &token[2..]);
    assert_eq!(unicode.len(), TOKEN_LEN);
    assert_eq!(
        ring.verify(&unicode, NOW),
        Err(TokenError::Malformed(Malformed::Base64))
    );
}

#[test]
fn unknown_kind_with_valid_mac_is_malformed() {
    // Only a signer with the key can produce this: sign by hand with the same layout.
    use hmac::{Hmac, KeyInit, Mac};
    let key: Vec<u8> = (0u8..32).collect();
    let ring = KeyRing::new(1, [(1, key.as_slice())]).unwrap();
    let mut raw = decode(&ring.sign(&claims(TokenKind::Impression)));
    raw[2] = 9;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(&raw[..55]);
    let tag = mac.finalize().into_bytes();
    raw[55..].copy_from_slice(&tag[..16]);
    assert_eq!(
        ring.verify(&URL_SAFE_NO_PAD.encode(&raw), NOW),
        Err(TokenError::Malformed(Malformed::TokenKind(9)))
    );
}

#[test]
fn rotation() {
    let claims = claims(TokenKind::Click);
    let old = ring(1, &[(1, KEY_1)]);
    let token = old.sign(&claims);

    // Key 2 added and signing; key 1 still verifies.
    let rotated = ring(2, &[(1, KEY_1), (2, KEY_2)]);
    assert_eq!(rotated.verify(&token, NOW), Ok(claims));
    let new_token = rotated.sign(&claims);
    assert_eq!(decode(&new_token)[1], 2);
    assert_eq!(rotated.verify(&new_token, NOW), Ok(claims));
    // An edge not yet given key 2 refuses the new tokens by key id, not as forgeries.
    assert_eq!(old.verify(&new_token, NOW), Err(TokenError::UnknownKey(2)));

    // Key 1 removed.
    let retired = ring(2, &[(2, KEY_2)]);
    assert_eq!(retired.verify(&token, NOW), Err(TokenError::UnknownKey(1)));
    assert_eq!(retired.verify(&new_token, NOW), Ok(claims));
}

#[test]
fn same_id_different_secret_is_a_bad_mac() {
    let token = ring(1, &[(1, KEY_1)]).sign(&claims(TokenKind::Impression));
    assert_eq!(
        ring(1, &[(1, KEY_2)]).verify(&token, NOW),
        Err(TokenError::BadMac)
    );
}

#[test]
fn validity_window() {
    let ring = ring(1, &[(1, KEY_1)]);
    let claims = claims(TokenKind::Impression);
    let token = ring.sign(&claims);
    let expires_at = NOW + 3_600;
    assert_eq!(claims.expires_at(), expires_at);

    assert!(ring.verify(&token, expires_at - 1).is_ok());
    assert_eq!(
        ring.verify(&token, expires_at),
        Err(TokenError::Expired {
            expires_at,
            now: expires_at
        })
    );
    assert_eq!(
        ring.verify(&token, expires_at + 86_400),
        Err(TokenError::Expired {
            expires_at,
            now: expires_at + 86_400
        })
    );

    // Issued in the future: tolerated within the skew allowance only.
    assert!(ring.verify(&token, NOW - CLOCK_SKEW_SECS).is_ok());
    let early = NOW - CLOCK_SKEW_SECS - 1;
    assert_eq!(
        ring.verify(&token, early),
        Err(TokenError::NotYetValid {
            issued_at: NOW,
            now: early
        })
    );

    // Extreme clocks are refused, not overflowed.
    assert!(matches!(
        ring.verify(&token, i64::MIN),
        Err(TokenError::NotYetValid { .. })
    ));
    assert!(matches!(
        ring.verify(&token, i64::MAX),
        Err(TokenError::Expired { .. })
    ));

    // A zero lifetime is never valid.
    let instant = ring.sign(&Claims {
        lifetime: 0,
        ..claims
    });
    assert!(matches!(
        ring.verify(&instant, NOW),
        Err(TokenError::Expired { .. })
    ));
}

#[test]
fn forged_tokens_are_bad_macs_not_expired() {
    // Checks run MAC first: an expired forgery is counted as a forgery.
    let ring = ring(1, &[(1, KEY_1)]);
    let mut raw = decode(&ring.sign(&claims(TokenKind::Impression)));
    raw[60] ^= 1;
    let forged = URL_SAFE_NO_PAD.encode(&raw);
    assert_eq!(
        ring.verify(&forged, NOW + 1_000_000),
        Err(TokenError::BadMac)
    );
}

#[test]
fn kind_is_bound() {
    let ring = ring(1, &[(1, KEY_1)]);
    let click = ring.sign(&claims(TokenKind::Click));
    assert_eq!(
        ring.verify_kind(&click, TokenKind::Impression, NOW),
        Err(TokenError::WrongKind {
            expected: TokenKind::Impression,
            found: TokenKind::Click
        })
    );
    assert!(ring.verify_kind(&click, TokenKind::Click, NOW).is_ok());
    // Relabelling the kind byte breaks the MAC.
    let mut raw = decode(&click);
    raw[2] = TokenKind::Impression as u8;
    assert_eq!(
        ring.verify_kind(&URL_SAFE_NO_PAD.encode(&raw), TokenKind::Impression, NOW),
        Err(TokenError::BadMac)
    );
}

#[test]
fn error_labels_are_distinct() {
    let errors = [
        TokenError::Malformed(Malformed::Base64),
        TokenError::UnknownKey(3),
        TokenError::BadMac,
        TokenError::Expired {
            expires_at: 1,
            now: 2,
        },
        TokenError::NotYetValid {
            issued_at: 2,
            now: 1,
        },
        TokenError::WrongKind {
            expected: TokenKind::Click,
            found: TokenKind::Impression,
        },
    ];
    let mut labels: Vec<&str> = errors.iter().map(TokenError::label).collect();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), errors.len());
}

#[test]
fn key_config_errors_name_the_key() {
    let short = "hex:00112233";
    assert_eq!(
        KeyRing::from_config(1, [(1, KEY_1), (5, short)]).unwrap_err(),
        KeyError::TooShort { id: 5, len: 4 }
    );
    assert_eq!(
        KeyRing::from_config(1, [(1, "hex:zz")]).unwrap_err(),
        KeyError::Hex { id: 1 }
    );
    assert_eq!(
        KeyRing::from_config(1, [(1, "hex:abc")]).unwrap_err(),
        KeyError::Hex { id: 1 }
    );
    assert_eq!(
        KeyRing::from_config(1, [(1, "base64:***")]).unwrap_err(),
        KeyError::Base64 { id: 1 }
    );
    let bare = &KEY_1[4..];
    assert_eq!(
        KeyRing::from_config(1, [(1, bare)]).unwrap_err(),
        KeyError::UnknownEncoding { id: 1 }
    );
    assert_eq!(
        KeyRing::from_config(1, [(1, KEY_1), (1, KEY_2)]).unwrap_err(),
        KeyError::Duplicate { id: 1 }
    );
    assert_eq!(
        KeyRing::from_config(3, [(1, KEY_1), (2, KEY_2)]).unwrap_err(),
        KeyError::MissingSigningKey { id: 3 }
    );
    assert_eq!(
        KeyRing::from_config(0, []).unwrap_err(),
        KeyError::MissingSigningKey { id: 0 }
    );

    // Messages name the key and never echo the secret.
    let error = KeyRing::from_config(1, [(4, "base64:c2VjcmV0")]).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("key 4"), "{message}");
    assert!(!message.contains("c2VjcmV0"), "{message}");
}

#[test]
fn debug_shows_ids_not_secrets() {
    let ring = ring(2, &[(1, KEY_1), (2, KEY_2)]);
    let debug = format!("{ring:?}");
    assert_eq!(debug, "KeyRing { signing_id: 2, key_ids: [1, 2] }");
}

#[test]
fn macs_of_other_layouts_verify_with_the_key_that_made_them_only() {
    let old = ring(1, &[(1, KEY_1)]);
    let rotated = ring(2, &[(1, KEY_1), (2, KEY_2)]);
    let message = b"\x4e notice claims";
    let (id, tag) = old.mac(message);
    assert_eq!(id, 1);
    assert_eq!(rotated.verify_mac(id, message, &tag), Ok(()));
    assert_eq!(
        rotated.verify_mac(2, message, &tag),
        Err(TokenError::BadMac),
        "another key"
    );
    assert_eq!(
        rotated.verify_mac(id, b"\x4e notice claimz", &tag),
        Err(TokenError::BadMac)
    );
    assert_eq!(
        rotated.verify_mac(id, message, &tag[..15]),
        Err(TokenError::BadMac)
    );
    assert_eq!(
        ring(2, &[(2, KEY_2)]).verify_mac(1, message, &tag),
        Err(TokenError::UnknownKey(1))
    );
    let (id, new_tag) = rotated.mac(message);
    assert_eq!(id, 2);
    assert_ne!(new_tag, tag);
}

/// The same visitor's tokens show different user fields (each decision's nonce masks it), and
/// another key's tokens others again: a page or creative reading tokens cannot follow the
/// visitor by them. Verified, each gives the user key back.
#[test]
fn the_user_key_is_not_readable_in_tokens() {
    let ring = ring(1, &[(1, KEY_1)]);
    let other = ring_other();
    let field = |token: &str| decode(token)[35..43].to_vec();
    let first = ring.sign(&claims(TokenKind::Impression));
    let second = ring.sign(&Claims {
        nonce: 42,
        ..claims(TokenKind::Impression)
    });
    let elsewhere = other.sign(&claims(TokenKind::Impression));
    assert_ne!(field(&first), 0xdead_beef_u64.to_le_bytes());
    assert_ne!(field(&first), field(&second));
    assert_ne!(field(&first), field(&elsewhere));
    for (ring, token) in [(&ring, &first), (&ring, &second), (&other, &elsewhere)] {
        assert_eq!(ring.verify(token, NOW).unwrap().user, 0xdead_beef);
    }
}

fn ring_other() -> KeyRing {
    ring(2, &[(2, KEY_2)])
}
