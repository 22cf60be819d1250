//! The edge's win/loss/billing notice token, checked at a time taken from the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_edge::notice;
use marquee_tracking::KeyRing;

fuzz_target!(|data: &[u8]| {
    let Ok(keys) = KeyRing::new(1, [(1, [3u8; 32].as_slice()), (2, [4u8; 32].as_slice())]) else {
        return;
    };
    let Some((now, token)) = data.split_at_checked(8) else {
        return;
    };
    let now = i64::from_le_bytes(now.try_into().unwrap_or_default());
    if let Ok(token) = std::str::from_utf8(token) {
        let _ = notice::verify(&keys, token, now);
    }
});
