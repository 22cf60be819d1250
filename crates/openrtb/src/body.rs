//! Request bodies: `Content-Encoding` handled, size bounded after decompression.

use std::borrow::Cow;
use std::io::Read;

use flate2::read::MultiGzDecoder;

/// Why a body was refused.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("body larger than the {limit}-byte limit")]
    TooLarge { limit: usize },
    #[error("decompressed body larger than the {limit}-byte limit")]
    DecompressedTooLarge { limit: usize },
    #[error("content encoding {0:?} is not supported (gzip and identity are)")]
    UnsupportedEncoding(String),
    #[error("body is not valid gzip: {0}")]
    Gzip(std::io::Error),
}

impl BodyError {
    /// A short, fixed label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } | Self::DecompressedTooLarge { .. } => "too_large",
            Self::UnsupportedEncoding(_) => "encoding",
            Self::Gzip(_) => "gzip",
        }
    }
}

/// The body as JSON bytes: borrowed when it was sent plain, decompressed when gzip. Both the
/// body as sent and the decompressed bytes are limited to `limit`; decompression stops at the
/// limit, so a gzip bomb costs at most `limit` bytes of memory.
pub fn decode_body<'b>(
    body: &'b [u8],
    content_encoding: Option<&str>,
    limit: usize,
) -> Result<Cow<'b, [u8]>, BodyError> {
    if body.len() > limit {
        return Err(BodyError::TooLarge { limit });
    }
    let encoding = content_encoding.map(str::trim).unwrap_or("");
    if encoding.is_empty() || encoding.eq_ignore_ascii_case("identity") {
        return Ok(Cow::Borrowed(body));
    }
    if !(encoding.eq_ignore_ascii_case("gzip") || encoding.eq_ignore_ascii_case("x-gzip")) {
        return Err(BodyError::UnsupportedEncoding(
            encoding.chars().take(40).collect(),
        ));
    }
    // JSON compresses about 4 to 10 times; start there and let the vector grow to the limit.
    let mut decoded = Vec::with_capacity(body.len().saturating_mul(6).min(limit));
    let read_limit = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    MultiGzDecoder::new(body)
        .take(read_limit)
        .read_to_end(&mut decoded)
        .map_err(BodyError::Gzip)?;
    if decoded.len() > limit {
        return Err(BodyError::DecompressedTooLarge { limit });
    }
    Ok(Cow::Owned(decoded))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).unwrap_or_default();
        encoder.finish().unwrap_or_default()
    }

    #[test]
    fn identity_is_borrowed() {
        let body = br#"{"id":"1"}"#;
        for encoding in [None, Some(""), Some("identity"), Some(" IDENTITY ")] {
            let decoded = decode_body(body, encoding, 100);
            assert!(matches!(decoded, Ok(Cow::Borrowed(b)) if b == body));
        }
        assert!(matches!(
            decode_body(body, None, 5),
            Err(BodyError::TooLarge { limit: 5 })
        ));
    }

    #[test]
    fn gzip_is_decompressed() {
        let body = br#"{"id":"1","imp":[]}"#;
        let compressed = gzip(body);
        for encoding in ["gzip", "GZIP", "x-gzip"] {
            let decoded = decode_body(&compressed, Some(encoding), 100);
            assert_eq!(decoded.ok().as_deref(), Some(&body[..]));
        }
        // Decompressed exactly to the limit is fine, one byte less is not.
        let long = format!("{{\"id\":\"{}\"}}", "x".repeat(500));
        let long_compressed = gzip(long.as_bytes());
        let decoded = decode_body(&long_compressed, Some("gzip"), long.len());
        assert_eq!(decoded.ok().as_deref(), Some(long.as_bytes()));
        assert!(matches!(
            decode_body(&long_compressed, Some("gzip"), long.len() - 1),
            Err(BodyError::DecompressedTooLarge { .. })
        ));
        // A truncated stream is an error.
        let truncated = &compressed[..compressed.len() - 6];
        assert!(matches!(
            decode_body(truncated, Some("gzip"), 100),
            Err(BodyError::Gzip(_))
        ));
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit() {
        let bomb = gzip(&vec![b' '; 50_000_000]);
        assert!(bomb.len() < 100_000, "{}", bomb.len());
        let error = decode_body(&bomb, Some("gzip"), 64 * 1024);
        assert!(matches!(
            error,
            Err(BodyError::DecompressedTooLarge { limit: 65_536 })
        ));
    }

    #[test]
    fn bad_gzip_and_unknown_encodings_are_named() {
        let error = decode_body(b"not gzip", Some("gzip"), 100);
        assert!(matches!(error, Err(BodyError::Gzip(_))));
        let error = decode_body(b"{}", Some("br"), 100);
        assert_eq!(
            error.map_err(|e| e.to_string()).err().as_deref(),
            Some("content encoding \"br\" is not supported (gzip and identity are)")
        );
        assert!(matches!(
            decode_body(b"{}", Some("gzip, br"), 100),
            Err(BodyError::UnsupportedEncoding(_))
        ));
    }
}
