//! A shard's last segment with arbitrary contents after its header (as a crash or a bad disk
//! leaves it): opening the log recovers it (cuts a torn tail), and reading every segment back
//! must end cleanly or report the damage, never panic. When the first input byte is odd the
//! header itself comes from the input too.
#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use marquee_eventlog::{Budget, Config, Durability, EventLog, ReadEnd, SEGMENT_HEADER_LEN};

static RUN: AtomicU64 = AtomicU64::new(0);

/// A valid header for shard 0, segment 1: magic, version, shard, id, CRC of the 24 bytes before.
fn header() -> Vec<u8> {
    let mut bytes = b"MQEVLOG\0".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    let crc = crc32(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// CRC-32/ISO-HDLC, bitwise: only for the header.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut segment = if selector & 1 == 1 {
        Vec::new()
    } else {
        header()
    };
    assert!(segment.is_empty() || segment.len() as u64 == SEGMENT_HEADER_LEN);
    segment.extend_from_slice(rest);

    let dir: PathBuf = std::env::temp_dir().join(format!(
        "marquee-fuzz-eventlog-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    let shard = dir.join("shard-0");
    std::fs::create_dir_all(&shard).expect("temporary directory");
    std::fs::write(shard.join(format!("{:020}.log", 1)), &segment).expect("segment file");

    let config = Config {
        shards: 1,
        durability: Durability::Group {
            interval: Duration::from_millis(1),
        },
        ..Config::default()
    };
    if let Ok(log) = EventLog::open(&dir, config) {
        for info in log.segments(0).unwrap_or_default() {
            let mut offset = 0;
            // Each read moves forward or ends: bounded by the segment's length.
            for _ in 0..=info.len {
                let Ok(batch) = log.read(0, info.id, offset, Budget::default()) else {
                    break;
                };
                match batch.end {
                    ReadEnd::Budget if batch.next_offset > offset => offset = batch.next_offset,
                    _ => break,
                }
            }
        }
        let _ = log.flush_and_close();
    }
    let _ = std::fs::remove_dir_all(&dir);
});
