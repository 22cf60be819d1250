//! The query string of an ad request (`GET /ad?...`), and its consent (a TCF v2 string read
//! for Purpose 1).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(query) = marquee_edge::query::parse(text)
    {
        let _ = query.may_identify();
    }
});
