//! A tracking token (impression, click, conversion beacon) checked at a time taken from the
//! input; and claims taken from the input, signed, must verify back to themselves.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_tracking::{Claims, KeyRing, TokenKind};
use std::num::NonZeroU64;

fn word(data: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    for (i, byte) in data.iter().skip(at * 8).take(8).enumerate() {
        bytes[i] = *byte;
    }
    u64::from_le_bytes(bytes)
}

fuzz_target!(|data: &[u8]| {
    let Ok(keys) = KeyRing::new(2, [(1, [3u8; 32].as_slice()), (2, [4u8; 32].as_slice())]) else {
        return;
    };
    let now = word(data, 0) as i64;
    if let Ok(token) = std::str::from_utf8(data.get(8..).unwrap_or_default()) {
        let _ = keys.verify(token, now);
        let _ = keys.verify_kind(token, TokenKind::Click, now);
    }
    // Claims within the token's fields (issue time 32 bits, lifetime 16, amount 48): outside
    // them the narrowing is checked by the crate's tests, and equality would not hold.
    let issued_at = i64::from(now as u32);
    let amount = word(data, 8);
    let claims = Claims {
        kind: [
            TokenKind::Impression,
            TokenKind::Click,
            TokenKind::Conversion,
        ][(word(data, 1) % 3) as usize],
        line_item: word(data, 2),
        creative: word(data, 3),
        placement: NonZeroU64::new(word(data, 4)),
        user: word(data, 5),
        issued_at,
        lifetime: u32::from(word(data, 6) as u16),
        nonce: word(data, 7),
        amount_micros: (amount & 1 == 0).then_some(amount >> 17),
    };
    let token = keys.sign(&claims);
    let verified = keys.verify(&token, issued_at);
    if issued_at < claims.expires_at() {
        assert_eq!(verified.ok(), Some(claims));
    } else {
        assert!(verified.is_err(), "an expired token verified");
    }
});
