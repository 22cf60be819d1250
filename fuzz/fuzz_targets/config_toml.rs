//! A configuration file's text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_config::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::from_toml(text);
    }
});
