//! Writes the binary seeds of fuzz/seeds/ (tokens, frames, a snapshot) that cannot be typed by
//! hand: `cargo run --example seeds` from fuzz/. The text seeds there are written by hand; the
//! OpenRTB ones are copied from crates/openrtb/testdata by scripts/fuzz.sh.

use std::num::NonZeroU64;
use std::path::Path;

use marquee_eventlog::{Event, EventKind};
use marquee_forecast::SampleRecord;
use marquee_openrtb::PriceCrypto;
use marquee_snapshot::{Snapshot, SnapshotData};
use marquee_tracking::{Claims, KeyRing, TokenKind};

const NOW: i64 = 1_790_000_000;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    std::fs::create_dir_all(&dir).expect("seed directory");
    std::fs::write(dir.join(name), bytes).expect("seed file");
}

fn main() {
    // The same keys as the targets use.
    let crypto = PriceCrypto::new(&[7; 32], &[9; 32]);
    write(
        "price_decrypt",
        "token",
        crypto.encrypt(1_250_000, [5; 16]).as_bytes(),
    );

    let keys = KeyRing::new(2, [(1, [3u8; 32].as_slice()), (2, [4u8; 32].as_slice())])
        .expect("keys of 32 bytes");
    let claims = Claims {
        kind: TokenKind::Impression,
        line_item: 7,
        creative: 11,
        placement: NonZeroU64::new(3),
        user: 99,
        issued_at: NOW,
        lifetime: 3600,
        nonce: 42,
        amount_micros: None,
    };
    let mut seed = NOW.to_le_bytes().to_vec();
    seed.extend_from_slice(keys.sign(&claims).as_bytes());
    write("tracking_token", "impression", &seed);

    let event = Event {
        kind: EventKind::Impression,
        time_micros: NOW * 1_000_000,
        line_item: 7,
        creative: 11,
        placement: 3,
        user: 99,
        country: *b"FR",
        region: [0; 3],
        device: 2,
        amount_micros: 1_250,
        event_id: 42,
    };
    write("eventlog_record", "frame", &event.to_frame());
    let mut segment = vec![0u8];
    for _ in 0..3 {
        segment.extend_from_slice(&event.to_frame());
    }
    write("eventlog_recovery", "three-frames", &segment);

    let record = SampleRecord {
        minute: u32::try_from(NOW / 60).expect("minutes fit"),
        user: 99,
        placement: marquee_model::PlacementId(3),
        page_url: Some("https://news.example/sport".into()),
        country: Some("FR".into()),
        key_values: vec![("section".into(), "sport".into())],
        ..SampleRecord::default()
    };
    let mut records = Vec::new();
    record.encode(&mut records);
    record.encode(&mut records);
    write("sample_record", "two-records", &records);

    let snapshot = Snapshot {
        version: 1 << 32,
        built_at: Default::default(),
        data: SnapshotData::default(),
    };
    write("snapshot_decode", "empty", &snapshot.encode());
}
