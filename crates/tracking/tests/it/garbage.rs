#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Whatever arrives in a tracking URL, verification answers without panicking, and only tokens
//! this ring signed pass.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use marquee_tracking::{Claims, KeyRing, MAX_AMOUNT_MICROS, TOKEN_LEN, TokenError, TokenKind};
use proptest::prelude::*;
use std::num::NonZeroU64;

const KEY: &str = "hex:8f2a51c94d0e7b3316aa0c5e9b72d4f1e03c6a8b5d17f9e2c40b6a39d5e8f712";

fn ring() -> KeyRing {
    KeyRing::from_config(1, [(1, KEY)]).unwrap()
}

fn kind() -> impl Strategy<Value = TokenKind> {
    prop_oneof![
        Just(TokenKind::Impression),
        Just(TokenKind::Click),
        Just(TokenKind::Conversion)
    ]
}

fn claims() -> impl Strategy<Value = Claims> {
    // Times and amounts within their fields (outside them, see the crate's unit tests).
    (
        kind(),
        any::<[u64; 5]>(),
        any::<u32>(),
        any::<u16>(),
        proptest::option::of(0..=MAX_AMOUNT_MICROS),
    )
        .prop_map(
            |(kind, [line_item, creative, placement, user, nonce], issued_at, lifetime, amount)| {
                Claims {
                    kind,
                    line_item,
                    creative,
                    placement: NonZeroU64::new(placement),
                    user,
                    issued_at: i64::from(issued_at),
                    lifetime: u32::from(lifetime),
                    nonce,
                    amount_micros: amount,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>(), now in any::<i64>()) {
        let ring = ring();
        prop_assert!(ring.verify(&text, now).is_err());
        prop_assert!(ring.verify_kind(&text, TokenKind::Click, now).is_err());
    }

    #[test]
    fn right_length_base64_alphabet_strings_fail(text in "[A-Za-z0-9_-]{95}", now in any::<i64>()) {
        prop_assert!(ring().verify(&text, now).is_err());
    }

    #[test]
    fn random_bytes_with_a_valid_header_fail_the_mac(mut raw in any::<[u8; 71]>(), now in any::<i64>()) {
        // Version and key id right, so every case reaches the MAC check.
        raw[0] = 1;
        raw[1] = 1;
        let token = URL_SAFE_NO_PAD.encode(raw);
        prop_assert_eq!(token.len(), TOKEN_LEN);
        prop_assert_eq!(ring().verify(&token, now), Err(TokenError::BadMac));
    }

    #[test]
    fn signed_claims_round_trip(claims in claims(), age in 0u32..) {
        let ring = ring();
        let token = ring.sign(&claims);
        prop_assert_eq!(token.len(), TOKEN_LEN);
        // Verify at a time inside the window when there is one.
        let now = claims.issued_at.saturating_add(i64::from(age.min(claims.lifetime.saturating_sub(1))));
        match ring.verify(&token, now) {
            Ok(verified) => prop_assert_eq!(verified, claims),
            // An empty window, or one cut short by `i64::MAX`.
            Err(TokenError::Expired { .. }) => prop_assert!(claims.lifetime == 0 || now >= claims.expires_at()),
            Err(other) => prop_assert!(false, "{other}"),
        }
    }
}
