//! How an edge serves its log to a remote manager over HTTP, defined once for both sides:
//!
//! - `GET /log/segments`: text, one line per readable segment, `{shard} {segment} {len}
//!   {open|closed}` ([`format_segments`], [`parse_segments`]).
//! - `GET /log/read?shard=&segment=&offset=&max_bytes=`: the body is whole intact frames as
//!   on disk ([`EventLog::read_frames`](crate::EventLog::read_frames)); the header
//!   [`NEXT_OFFSET_HEADER`] says where the next read starts and [`END_HEADER`] why the
//!   answer ended ([`end_label`], [`parse_end`]).
//! - `POST /log/ack?shard=&segment=`: the manager has durably counted every segment of the
//!   shard up to and including `segment`; the edge deletes them
//!   ([`EventLog::delete_through`](crate::EventLog::delete_through)).

use crate::reader::{ReadEnd, SegmentInfo};

/// Response header of `/log/read`: the offset after the frames sent.
pub const NEXT_OFFSET_HEADER: &str = "x-marquee-next-offset";
/// Response header of `/log/read`: `budget`, `tail`, `closed` or `corrupt`.
pub const END_HEADER: &str = "x-marquee-end";

/// Why a served read ended, without the damage details (the next offset is where damage
/// starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireEnd {
    Budget,
    Tail,
    Closed,
    Corrupt,
}

impl From<ReadEnd> for WireEnd {
    fn from(end: ReadEnd) -> Self {
        match end {
            ReadEnd::Budget => WireEnd::Budget,
            ReadEnd::Tail => WireEnd::Tail,
            ReadEnd::Closed => WireEnd::Closed,
            ReadEnd::Corrupt(_) => WireEnd::Corrupt,
        }
    }
}

pub fn end_label(end: WireEnd) -> &'static str {
    match end {
        WireEnd::Budget => "budget",
        WireEnd::Tail => "tail",
        WireEnd::Closed => "closed",
        WireEnd::Corrupt => "corrupt",
    }
}

/// The inverse of [`end_label`].
pub fn parse_end(label: &str) -> Option<WireEnd> {
    [
        WireEnd::Budget,
        WireEnd::Tail,
        WireEnd::Closed,
        WireEnd::Corrupt,
    ]
    .into_iter()
    .find(|&end| end_label(end) == label)
}

/// The `/log/segments` body for every shard's segments.
pub fn format_segments(shards: &[(usize, Vec<SegmentInfo>)]) -> String {
    let mut out = String::new();
    for (shard, segments) in shards {
        for s in segments {
            let state = if s.closed { "closed" } else { "open" };
            out.push_str(&format!("{shard} {} {} {state}\n", s.id, s.len));
        }
    }
    out
}

/// A `/log/segments` line that is not `{shard} {segment} {len} {open|closed}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("segment list line {line}: {text:?} is not `shard segment len open|closed`")]
pub struct SegmentsError {
    pub line: usize,
    pub text: String,
}

/// Reads a `/log/segments` body: `(shard, segment)` pairs in the order sent.
pub fn parse_segments(body: &str) -> Result<Vec<(usize, SegmentInfo)>, SegmentsError> {
    let mut out = Vec::new();
    for (i, line) in body.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || SegmentsError {
            line: i + 1,
            text: line.to_owned(),
        };
        let mut fields = line.split_ascii_whitespace();
        let mut number = || fields.next().and_then(|f| f.parse::<u64>().ok());
        let shard = number()
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(bad)?;
        let id = number().ok_or_else(bad)?;
        let len = number().ok_or_else(bad)?;
        let closed = match fields.next() {
            Some("closed") => true,
            Some("open") => false,
            _ => return Err(bad()),
        };
        if fields.next().is_some() {
            return Err(bad());
        }
        out.push((shard, SegmentInfo { id, len, closed }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_lists_round_trip_and_bad_lines_are_named() {
        let shards = vec![
            (
                0,
                vec![
                    SegmentInfo {
                        id: 1,
                        len: 1_000,
                        closed: true,
                    },
                    SegmentInfo {
                        id: 2,
                        len: 28,
                        closed: false,
                    },
                ],
            ),
            (3, vec![]),
        ];
        let text = format_segments(&shards);
        assert_eq!(text, "0 1 1000 closed\n0 2 28 open\n");
        let parsed = parse_segments(&text).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1], (0, shards[0].1[1]));
        for bad in ["0 1 x closed", "0 1 2", "0 1 2 ajar", "0 1 2 open extra"] {
            assert_eq!(parse_segments(bad).unwrap_err().line, 1, "{bad}");
        }
        for end in [
            WireEnd::Budget,
            WireEnd::Tail,
            WireEnd::Closed,
            WireEnd::Corrupt,
        ] {
            assert_eq!(parse_end(end_label(end)), Some(end));
        }
        assert_eq!(parse_end("later"), None);
    }
}
