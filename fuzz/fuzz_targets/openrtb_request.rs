//! A bid request body as an exchange sends it: the first byte picks plain or gzip, the rest is
//! the body. Decoding, parsing, the request's helpers and its native requests must not panic;
//! and whenever the hand-written reader answers, serde gives the same request (the invariant
//! of `crates/openrtb/src/fast.rs`, also tested in `crates/openrtb/tests/it/fast_parse.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_openrtb::{BidRequest, decode_body};

/// The edge's default body limit.
const LIMIT: usize = 256 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let encoding = (selector & 1 == 1).then_some("gzip");
    let Ok(json) = decode_body(body, encoding, LIMIT) else {
        return;
    };
    if let Some(fast) = BidRequest::read_json_fast(&json) {
        match BidRequest::read_json_serde(&json) {
            Ok(serde) => assert_eq!(format!("{fast:?}"), format!("{serde:?}")),
            Err(error) => panic!("the fast reader answered {fast:?}, serde refused: {error}"),
        }
    }
    let Ok(request) = BidRequest::parse(&json) else {
        return;
    };
    let _ = request.coppa();
    for imp in &request.imp {
        let _ = imp.single_media();
        let _ = imp.banner_sizes().count();
        let _ = imp.floor_for(None);
        let _ = imp.is_private_auction();
        if let Some(native) = &imp.native {
            let _ = native.parse_request();
        }
    }
});
