//! The Native 1.0–1.2 request string carried inside an impression.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_openrtb::NativeRequest;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = NativeRequest::parse(text);
    }
});
