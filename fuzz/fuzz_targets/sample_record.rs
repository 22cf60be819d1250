//! The forecast's sample records, as the manager reads them back from edge logs and the store
//! (`SampleRecord::decode`, `decode_all`). A record that decodes must encode and decode back to
//! itself; anything else is a typed error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_forecast::SampleRecord;

fuzz_target!(|data: &[u8]| {
    let _ = SampleRecord::decode_all(data);
    let Ok((record, used)) = SampleRecord::decode(data) else {
        return;
    };
    assert!(used <= data.len());
    let mut encoded = Vec::new();
    record.encode(&mut encoded);
    let (again, len) = SampleRecord::decode(&encoded).expect("an encoded record decodes");
    assert_eq!(len, encoded.len());
    assert_eq!(again, record);
});
