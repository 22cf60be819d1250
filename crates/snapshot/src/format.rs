//! The binary file format: a fixed little-endian header, then a postcard payload. The layout is
//! specified in the crate documentation.

use jiff::Timestamp;

use crate::data::SnapshotData;

/// First eight bytes of every snapshot file.
pub const MAGIC: [u8; 8] = *b"MQSNAP\0\0";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 6;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 44;
/// Bytes covered by the checksum before the payload: the header up to the checksum field.
const CHECKED_HEADER_LEN: usize = 40;

/// A compiled snapshot: immutable once built; share it behind an `Arc`.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Grows with every publish. `compile` sets the store's change counter; the manager
    /// publishes it × 2³² plus its live-statistics revision (`marquee_manager::live`).
    pub version: u64,
    /// When it was compiled, to the microsecond.
    pub built_at: Timestamp,
    pub data: SnapshotData,
}

/// The fixed header of an encoded snapshot, as read by [`Header::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u64,
    pub built_at: Timestamp,
    pub payload_len: u64,
    /// CRC-32 (ISO-HDLC, as zlib) over the header bytes before this field and the payload.
    pub checksum: u32,
}

/// Why bytes are not a usable snapshot.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{len} bytes is too short for a snapshot header of {HEADER_LEN} bytes")]
    TooShort { len: usize },
    #[error("not a snapshot: the file starts with {found:02x?}, not the snapshot magic")]
    BadMagic { found: [u8; 8] },
    #[error(
        "snapshot format version {found} is not supported; this build reads version {supported}"
    )]
    UnsupportedFormat { found: u32, supported: u32 },
    #[error("snapshot header sets unknown flags {0:#010x}")]
    UnsupportedFlags(u32),
    #[error("snapshot build time {0} µs since the epoch is out of range")]
    BuildTime(i64),
    #[error(
        "header declares a payload of {declared} bytes but {actual} follow (truncated or padded)"
    )]
    PayloadLength { declared: u64, actual: u64 },
    #[error("checksum mismatch: header says {expected:08x}, content gives {computed:08x}")]
    Checksum { expected: u32, computed: u32 },
    #[error("payload does not decode: {0}")]
    Payload(#[from] postcard::Error),
    #[error("payload has {0} bytes left over after the snapshot data")]
    TrailingPayload(usize),
    #[error("payload list {0} is not strictly ascending by id")]
    Unsorted(&'static str),
}

impl Header {
    /// Reads and checks the header at the start of `bytes` (which may be just the first
    /// [`HEADER_LEN`] bytes of a file). Does not verify the checksum: that needs the payload.
    ///
    /// The format version is checked before anything else after the magic, since a later format
    /// may lay out the rest of the header, and compute the checksum, differently.
    pub fn parse(bytes: &[u8]) -> Result<Header, LoadError> {
        let Some(header) = bytes.first_chunk::<HEADER_LEN>() else {
            return Err(LoadError::TooShort { len: bytes.len() });
        };
        let mut fields = Fields(header);
        let magic: [u8; 8] = fields.take();
        if magic != MAGIC {
            return Err(LoadError::BadMagic { found: magic });
        }
        let format = u32::from_le_bytes(fields.take());
        if format != FORMAT_VERSION {
            return Err(LoadError::UnsupportedFormat {
                found: format,
                supported: FORMAT_VERSION,
            });
        }
        let flags = u32::from_le_bytes(fields.take());
        if flags != 0 {
            return Err(LoadError::UnsupportedFlags(flags));
        }
        let version = u64::from_le_bytes(fields.take());
        let built_at_micros = i64::from_le_bytes(fields.take());
        let built_at = Timestamp::from_microsecond(built_at_micros)
            .map_err(|_| LoadError::BuildTime(built_at_micros))?;
        let payload_len = u64::from_le_bytes(fields.take());
        let checksum = u32::from_le_bytes(fields.take());
        Ok(Header {
            version,
            built_at,
            payload_len,
            checksum,
        })
    }

    /// The header's bytes as written to the file.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0; HEADER_LEN];
        bytes[..CHECKED_HEADER_LEN].copy_from_slice(&self.checked_bytes());
        bytes[CHECKED_HEADER_LEN..].copy_from_slice(&self.checksum.to_le_bytes());
        bytes
    }

    /// The HTTP entity tag of the snapshot, quoted: `"v42-1a2b3c4d"`. Version and checksum
    /// identify the content, so equal tags mean equal bytes.
    pub fn etag(&self) -> String {
        format!("\"v{}-{:08x}\"", self.version, self.checksum)
    }

    /// The header bytes the checksum covers.
    fn checked_bytes(&self) -> [u8; CHECKED_HEADER_LEN] {
        let mut bytes = [0; CHECKED_HEADER_LEN];
        let parts: [&[u8]; 6] = [
            &MAGIC,
            &FORMAT_VERSION.to_le_bytes(),
            &0u32.to_le_bytes(),
            &self.version.to_le_bytes(),
            &self.built_at.as_microsecond().to_le_bytes(),
            &self.payload_len.to_le_bytes(),
        ];
        let mut at = 0;
        for part in parts {
            bytes[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        bytes
    }
}

/// Reads fixed-size fields in order from the header.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (field, rest) = self.0.split_at(N);
        self.0 = rest;
        let mut out = [0; N];
        out.copy_from_slice(field);
        out
    }
}

fn checksum(checked_header: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(checked_header);
    hasher.update(payload);
    hasher.finalize()
}

impl Snapshot {
    /// The complete file: header then payload.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with_header().1
    }

    /// The complete file and its header, for publishing under the header's version and ETag.
    pub fn encode_with_header(&self) -> (Header, Vec<u8>) {
        #[expect(
            clippy::expect_used,
            reason = "postcard into a Vec fails only for sequences of unknown length or a \
                      Serialize impl that errors; the snapshot types have neither"
        )]
        let mut bytes = postcard::to_extend(&self.data, vec![0; HEADER_LEN])
            .expect("snapshot data always serializes");
        let payload_len = (bytes.len() - HEADER_LEN) as u64;
        let mut header = Header {
            version: self.version,
            built_at: self.built_at,
            payload_len,
            checksum: 0,
        };
        header.checksum = checksum(&header.checked_bytes(), &bytes[HEADER_LEN..]);
        bytes[..HEADER_LEN].copy_from_slice(&header.to_bytes());
        (header, bytes)
    }

    /// Checks and decodes a complete file. Checks run in this order: length of the header,
    /// magic, format version, flags, build time, payload length, checksum, payload.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, LoadError> {
        let header = Header::parse(bytes)?;
        let payload = &bytes[HEADER_LEN..];
        if payload.len() as u64 != header.payload_len {
            return Err(LoadError::PayloadLength {
                declared: header.payload_len,
                actual: payload.len() as u64,
            });
        }
        let computed = checksum(&bytes[..CHECKED_HEADER_LEN], payload);
        if computed != header.checksum {
            return Err(LoadError::Checksum {
                expected: header.checksum,
                computed,
            });
        }
        let (data, rest) = postcard::take_from_bytes::<SnapshotData>(payload)?;
        if !rest.is_empty() {
            return Err(LoadError::TrailingPayload(rest.len()));
        }
        if let Some(list) = data.first_unsorted() {
            return Err(LoadError::Unsorted(list));
        }
        Ok(Snapshot {
            version: header.version,
            built_at: header.built_at,
            data,
        })
    }
}
