//! A snapshot file as an edge loads it from disk or from the manager. One that decodes must
//! encode and decode back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_snapshot::{Header, Snapshot};

fuzz_target!(|data: &[u8]| {
    let _ = Header::parse(data);
    let Ok(snapshot) = Snapshot::decode(data) else {
        return;
    };
    let again = Snapshot::decode(&snapshot.encode()).expect("an encoded snapshot decodes");
    assert_eq!(again, snapshot);
});
