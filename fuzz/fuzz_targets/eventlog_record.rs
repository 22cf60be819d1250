//! One framed record, and the segment list an edge serves a remote manager. A frame that
//! parses and decodes must frame and decode back to the same event; any payload reads as an
//! event, a sample record or a typed error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marquee_eventlog::{Event, Record, parse_frame, wire};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = wire::parse_segments(text);
        let _ = wire::parse_end(text);
    }
    let Ok((payload, _)) = parse_frame(data) else {
        let _ = Event::decode(data);
        let _ = Record::decode(data);
        return;
    };
    let _ = Record::decode(payload);
    let Ok(event) = Event::decode(payload) else {
        return;
    };
    let frame = event.to_frame();
    let (again, len) = parse_frame(&frame).expect("a frame just built parses");
    assert_eq!(len, frame.len());
    assert_eq!(Event::decode(again).ok(), Some(event));
});
