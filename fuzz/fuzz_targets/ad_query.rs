//! The query string of an ad request (`GET /ad?...`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = marquee_edge::query::parse(text);
    }
});
