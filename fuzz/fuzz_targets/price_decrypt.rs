//! `${AUCTION_PRICE}` as a win notice brings it back: plain decimal or encrypted token. With
//! 16 bytes of initialisation vector and 8 of price, the encryption must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_openrtb::{PriceCrypto, parse_notice_price};

fuzz_target!(|data: &[u8]| {
    let crypto = PriceCrypto::new(&[7; 32], &[9; 32]);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = crypto.decrypt(text);
        let _ = parse_notice_price(text, Some(&crypto));
        let _ = parse_notice_price(text, None);
    }
    if let (Some(iv), Some(price)) = (data.get(..16), data.get(16..24)) {
        let iv: [u8; 16] = iv.try_into().unwrap_or_default();
        let price = u64::from_le_bytes(price.try_into().unwrap_or_default());
        let token = crypto.encrypt(price, iv);
        assert_eq!(crypto.decrypt(&token).ok(), Some(price));
    }
});
