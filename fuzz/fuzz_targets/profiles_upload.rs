//! A user profile upload, as JSON and as CSV.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_sharedstate::profiles::{parse_csv, parse_json};

fuzz_target!(|data: &[u8]| {
    let _ = parse_json(data);
    let _ = parse_csv(data);
});
