//! A bid response as a bidder sends it back to the gateway.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_openrtb::BidResponse;

fuzz_target!(|data: &[u8]| {
    let _ = BidResponse::parse(data);
});
