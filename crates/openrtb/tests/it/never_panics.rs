#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Whatever arrives, parsing answers with a value or an error, never a panic; and the exact
//! decimal conversions round-trip.

use marquee_openrtb::{
    AuctionMacros, BidRequest, BidResponse, NativeRequest, Rounding, decode_body, expand_macros,
    format_micros, parse_micros,
};
use proptest::prelude::*;

fn bench_request() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/marquee/bench-request.json"
    ))
    .unwrap()
}

/// Runs every parser on `bytes`.
fn parse_everything(bytes: &[u8]) {
    if let Ok(request) = BidRequest::parse(bytes) {
        for imp in &request.imp {
            if let Some(native) = &imp.native {
                let _ = native.parse_request();
            }
        }
    }
    let _ = BidResponse::parse(bytes);
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = NativeRequest::parse(text);
    }
    let _ = decode_body(bytes, Some("gzip"), 1 << 16);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        parse_everything(&bytes);
    }

    #[test]
    fn json_shaped_text(text in r#"[{}\[\]",:0-9a-z\\. -]{0,200}"#) {
        parse_everything(text.as_bytes());
    }

    #[test]
    fn a_real_request_with_bytes_changed(changes in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut bytes = bench_request();
        for (position, byte) in changes {
            let at = position % bytes.len();
            bytes[at] = byte;
        }
        parse_everything(&bytes);
    }

    #[test]
    fn a_real_request_cut_short(cut in any::<usize>()) {
        let bytes = bench_request();
        parse_everything(&bytes[..cut % bytes.len()]);
    }

    #[test]
    fn micros_round_trip_through_decimal_text(micros in any::<i64>()) {
        let text = format_micros(micros);
        prop_assert_eq!(parse_micros(&text, Rounding::Nearest), Ok(micros));
        prop_assert_eq!(parse_micros(&text, Rounding::Up), Ok(micros));
    }

    #[test]
    fn decimals_with_six_places_parse_exactly(units in 0u64..10_000_000, fraction in 0u64..1_000_000) {
        let text = format!("{units}.{fraction:06}");
        let expected = i64::try_from(units * 1_000_000 + fraction).unwrap();
        prop_assert_eq!(parse_micros(&text, Rounding::Nearest), Ok(expected));
        // A seventh digit rounds a floor up, and a price to the nearest micro.
        let longer = format!("{text}5");
        prop_assert_eq!(parse_micros(&longer, Rounding::Up), Ok(expected + 1));
        prop_assert_eq!(parse_micros(&longer, Rounding::Nearest), Ok(expected + 1));
        let shorter = format!("{text}4");
        prop_assert_eq!(parse_micros(&shorter, Rounding::Nearest), Ok(expected));
    }

    #[test]
    fn templates_without_known_macros_are_copied(template in ".{0,80}") {
        let mut out = String::new();
        expand_macros(&template, &AuctionMacros::default(), &mut out);
        prop_assert_eq!(out, template);
    }
}
