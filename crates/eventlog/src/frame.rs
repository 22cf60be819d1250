//! Record framing: `length u32 | payload | crc32 u32`, the CRC over length and payload.

use crate::event::{Event, PAYLOAD_LEN};

/// Bytes a frame adds around its payload: the length before it and the CRC after it.
pub const FRAME_OVERHEAD: usize = 8;

/// Length of a framed record of the version written now, on disk.
pub const FRAME_LEN: usize = PAYLOAD_LEN + FRAME_OVERHEAD;

/// The largest payload length a reader accepts. Bigger lengths can only come from a torn or
/// corrupt frame, and refusing them keeps a garbage length from swallowing the records after it.
pub const MAX_PAYLOAD_LEN: u32 = 4096;

/// Why the bytes at an offset are not a whole, intact frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("partial record: {available} bytes where the frame needs {needed}")]
    Truncated { available: usize, needed: usize },
    #[error("record length {0} is outside 1..={MAX_PAYLOAD_LEN}")]
    BadLength(u32),
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
}

impl Event {
    /// The framed record (the version written now), built on the stack: appending copies it into the shard's
    /// buffer, so no event allocates.
    pub fn to_frame(&self) -> [u8; FRAME_LEN] {
        let mut frame = [0u8; FRAME_LEN];
        let (covered, crc) = frame.split_at_mut(4 + PAYLOAD_LEN);
        let (len, payload) = covered.split_at_mut(4);
        // PAYLOAD_LEN is a small constant, so the cast is exact.
        len.copy_from_slice(&(PAYLOAD_LEN as u32).to_le_bytes());
        // Always Ok: the split points are constants that leave exactly PAYLOAD_LEN bytes.
        if let Ok(payload) = <&mut [u8; PAYLOAD_LEN]>::try_from(payload) {
            self.encode_into(payload);
        }
        crc.copy_from_slice(&crc32fast::hash(covered).to_le_bytes());
        frame
    }
}

/// Parses the frame at the start of `bytes`: its payload and the whole frame's length.
pub fn parse_frame(bytes: &[u8]) -> Result<(&[u8], usize), FrameError> {
    let Some(len_bytes) = bytes.first_chunk::<4>() else {
        return Err(FrameError::Truncated {
            available: bytes.len(),
            needed: 4,
        });
    };
    let len = u32::from_le_bytes(*len_bytes);
    if len == 0 || len > MAX_PAYLOAD_LEN {
        return Err(FrameError::BadLength(len));
    }
    // Bounded by MAX_PAYLOAD_LEN above, so this cannot overflow.
    let payload_end = 4 + len as usize;
    let needed = payload_end + 4;
    let Some(frame) = bytes.get(..needed) else {
        return Err(FrameError::Truncated {
            available: bytes.len(),
            needed,
        });
    };
    let (covered, crc_bytes) = frame.split_at(payload_end);
    let mut stored = [0u8; 4];
    stored.copy_from_slice(crc_bytes);
    let stored = u32::from_le_bytes(stored);
    let computed = crc32fast::hash(covered);
    if stored != computed {
        return Err(FrameError::CrcMismatch { stored, computed });
    }
    Ok((&covered[4..], needed))
}

/// The length of the longest prefix of `frames` made of whole frames and at most `limit` bytes
/// long, but at least one frame when there is one, so a segment always takes a record. Used on
/// buffers this process framed itself, so it follows the length prefixes without checking
/// CRCs; a length that does not fit ends the prefix.
pub(crate) fn whole_frames_within(frames: &[u8], limit: usize) -> usize {
    if frames.len() <= limit {
        return frames.len();
    }
    let mut end = 0;
    while let Some(len_bytes) = frames.get(end..).and_then(|rest| rest.first_chunk::<4>()) {
        // A u32 always fits a usize on the 32- and 64-bit targets we build for.
        let len = u32::from_le_bytes(*len_bytes) as usize + FRAME_OVERHEAD;
        if end + len > frames.len() || (end > 0 && end + len > limit) {
            break;
        }
        end += len;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    fn event(id: u128) -> Event {
        Event {
            kind: EventKind::Impression,
            time_micros: 1,
            line_item: 2,
            creative: 3,
            placement: 4,
            user: 5,
            country: *b"FR",
            region: [0; 3],
            device: 1,
            amount_micros: 1500,
            event_id: id,
        }
    }

    #[test]
    fn a_frame_round_trips_and_is_checked() {
        let frame = event(9).to_frame();
        let (payload, len) = parse_frame(&frame).expect("valid frame");
        assert_eq!(len, FRAME_LEN);
        assert_eq!(Event::decode(payload), Ok(event(9)));
        // The CRC is CRC-32/ISO-HDLC over length and payload.
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&frame[..FRAME_LEN - 4]);
        assert_eq!(frame[FRAME_LEN - 4..], hasher.finalize().to_le_bytes());
    }

    #[test]
    fn damage_is_detected() {
        let frame = event(1).to_frame();
        for cut in 0..FRAME_LEN {
            assert!(matches!(
                parse_frame(&frame[..cut]),
                Err(FrameError::Truncated { .. })
            ));
        }
        for at in 4..FRAME_LEN {
            let mut bad = frame;
            bad[at] ^= 0x10;
            assert!(matches!(
                parse_frame(&bad),
                Err(FrameError::CrcMismatch { .. })
            ));
        }
        assert_eq!(parse_frame(&[0; 16]), Err(FrameError::BadLength(0)));
        assert_eq!(
            parse_frame(&[0xFF; 16]),
            Err(FrameError::BadLength(u32::MAX))
        );
    }

    #[test]
    fn whole_frames_split_at_record_boundaries() {
        let mut buf = Vec::new();
        for i in 0..5 {
            buf.extend_from_slice(&event(i).to_frame());
        }
        assert_eq!(whole_frames_within(&buf, 0), FRAME_LEN);
        assert_eq!(whole_frames_within(&buf, FRAME_LEN + 1), FRAME_LEN);
        assert_eq!(whole_frames_within(&buf, 2 * FRAME_LEN), 2 * FRAME_LEN);
        assert_eq!(whole_frames_within(&buf, usize::MAX), 5 * FRAME_LEN);
        assert_eq!(whole_frames_within(&[], 100), 0);
    }
}
