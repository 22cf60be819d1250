//! The edge's event log: every decision, impression, click and conversion as a compact binary
//! record in segmented, append-only, CRC-framed files, which the manager reads and aggregates.
//!
//! - [`Event`]: the fixed-layout record; [`Event::to_frame`] / [`parse_frame`] its framing.
//! - [`EventLog`]: open a directory ([`Config`]), [`append`](EventLog::append) from any thread
//!   (one shard per thread, so appends do not contend), or [`count`](EventLog::count) a bid or
//!   a no-bid into the shard's counter records, [`commit`](EventLog::commit) /
//!   [`append_durable`](EventLog::append_durable) to wait for durability (group commit),
//!   [`flush_and_close`](EventLog::flush_and_close) on shutdown.
//! - Reading for the manager: [`segments`](EventLog::segments), [`read`](EventLog::read) from
//!   (shard, segment, offset) (decoded, or [`read_frames`](EventLog::read_frames) as on disk),
//!   [`delete_through`](EventLog::delete_through); [`wire`]: the same over HTTP.
//!
//! Records are raw: nothing is sanitised on append (the manager does it in bulk), and ids are
//! plain `u64`s so this crate depends on no other workspace crate.
//!
//! # On-disk format
//!
//! A log directory holds `LOCK` (an advisory lock held while a log has it open) and one
//! directory per shard, `shard-{k}` (`k` from 0, decimal). A shard directory holds segments
//! named `{segment:020}.log`, the segment id in 20 decimal digits; ids start at 1 and grow by
//! one, never reused. All integers are little-endian.
//!
//! A segment is a 28-byte header followed by records back to back, nothing else:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic: `4D 51 45 56 4C 4F 47 00` (`"MQEVLOG\0"`) |
//! | 8 | 4 | segment format version, u32: `1` |
//! | 12 | 4 | shard, u32 |
//! | 16 | 8 | segment id, u64 (equal to the file name's) |
//! | 24 | 4 | CRC-32 of bytes 0..24 |
//!
//! A record (frame) is `length u32 | payload | crc u32`: the payload's length in bytes
//! (1..=4096 accepted), the payload, and the CRC-32 of the length's 4 bytes followed by the
//! payload. CRC-32 is CRC-32/ISO-HDLC (zlib's; `"123456789"` gives `0xCBF43926`). The first
//! record starts at offset 28; a segment's readable end is always a record boundary.
//!
//! The payload's first byte is the record format version, which decides the rest. Version 2,
//! written now, is 72 bytes (so a frame is 80); version 1, written before regions were
//! recorded, is its first 69 bytes with `1` in byte 0, and is still read (its events have no
//! region):
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | record format version: `2` (or `1`) |
//! | 1 | 1 | kind: 1 decision, 2 impression, 3 click, 4 conversion, 5 bid, 6 win, 7 billing, 8 loss, 9 no-bid, 10 invalid impression, 11 invalid click, 12 invalid conversion, 13 programmatic auction, 14 programmatic impression, 16 bids counted, 17 no-bids counted (15 is a sample record); 0 never |
//! | 2 | 1 | device type, u8 |
//! | 3 | 2 | country: two ASCII letters, or `00 00` |
//! | 5 | 8 | time, i64: microseconds since 1970-01-01T00:00:00Z |
//! | 13 | 8 | line item id, u64 |
//! | 21 | 8 | creative id, u64 |
//! | 29 | 8 | placement id, u64 (0 = none) |
//! | 37 | 8 | user key hash, u64 (0 = none) |
//! | 45 | 8 | amount in micros, i64 (spend on billing events; a counter record's count; an invalid event's reason code: 1 crawler, 2 prefetch, 3 datacenter, 4 rate, 5 click without impression, 6 too fast, 7 untokened disabled, 8 repeat conversion, 9 no cache buster) |
//! | 53 | 16 | event id, u128 (decision id / tracking-token nonce; the dedupe key) |
//! | 69 | 3 | region: the ISO 3166-2 subdivision code within the country (`CA` of `US-CA`), one to three ASCII letters or digits padded with `00`; all `00` when unknown (version 2 only) |
//!
//! A *sample record* (kind 15, [`SAMPLE_KIND`]: an ad request an edge kept for forecasting,
//! written with [`EventLog::append_sample`]) is not an event and has a length of its own:
//! version `2`, kind `15`, the time (i64 microseconds since 1970, UTC), then a body of 1 to
//! [`MAX_SAMPLE_LEN`] bytes this crate does not read. [`Record::decode`] reads either form;
//! [`Event::decode`] refuses a sample with [`DecodeError::Sample`] whatever its length.
//!
//! A *counter record* (kinds 16 and 17, [`EventKind::is_counter`]) is an event whose
//! `amount_micros` is a count: the bids or no-bids [`EventLog::count`] tallied in one shard for
//! one minute and row (see [`EventKind::BidsCounted`]).
//!
//! Reading a frame checks the length bounds, that the whole frame is there, then the CRC. A
//! frame that fails is damage: at the tail of the last segment when the log opens, it and
//! everything after it is cut off (a torn write); anywhere else a reader reports it as
//! [`ReadEnd::Corrupt`]. An intact frame whose payload has another version, another length,
//! or a kind this version does not know is *rejected* ([`DecodeError`]), counted, and skipped:
//! the length prefix keeps the records after it readable.
//!
//! # Durability
//!
//! Appends go to the shard's memory buffer. Each shard's flusher thread writes the buffer to
//! the shard's open segment and fsyncs it every [`Durability`] interval (5 ms by default),
//! earlier when the buffer passes 1 MiB or someone waits for durability. Counted events join the
//! buffer as counter records when the flusher takes it (or when a shard's table fills), so they
//! are written, fsynced and lost in a crash exactly as the events appended beside them, and
//! each counter record is written once. A segment file's
//! directory entry is fsynced with its first records. A segment rolls before a write would take it past
//! `segment_max_bytes`, and closes when older than `segment_max_age` even if idle; a closed
//! segment is fsynced and never written again. Opening a log scans each shard's last segment,
//! cuts a torn tail and starts a new segment, so every existing segment is closed.

mod counts;
mod error;
mod event;
mod flusher;
mod frame;
mod log;
mod reader;
mod segment;
pub mod wire;

pub use error::{AppendError, CloseError, DeleteError, HeaderError, OpenError, ReadError};
pub use event::{
    DecodeError, Event, EventKind, InvalidReason, MAX_SAMPLE_LEN, PAYLOAD_LEN, RECORD_VERSION,
    Record, SAMPLE_HEADER_LEN, SAMPLE_KIND, auction, bidder_id,
};
pub use frame::{FRAME_LEN, FRAME_OVERHEAD, FrameError, MAX_PAYLOAD_LEN, parse_frame};
pub use log::{Config, Counters, Durability, Durable, EventLog, MAX_SHARDS, Receipt};
pub use reader::{Budget, Corrupt, FrameBatch, ReadBatch, ReadEnd, Rejected, SegmentInfo};
pub use segment::{SEGMENT_HEADER_LEN, SEGMENT_MAGIC, SEGMENT_VERSION};
