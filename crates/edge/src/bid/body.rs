//! A bid request's body: its endpoint's exchange, read within the exchange's size limit and
//! default `tmax`, decompressed and parsed (the gateway's auction reads its body here too).

use std::borrow::Cow;
use std::time::Instant;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use marquee_openrtb::{BidRequest, BodyError, decode_body};

use super::config::Exchange;

/// The `{exchange}` of `PREFIX` (`Some(None)`) or `PREFIX/{exchange}`; `None` for another path
/// (`/openrtb2/bidder` and the like are not bid endpoints).
pub(crate) fn exchange_name<'p>(path: &'p str, prefix: &str) -> Option<Option<&'p str>> {
    match path.strip_prefix(prefix)? {
        "" => Some(None),
        rest => rest.strip_prefix('/').map(Some),
    }
}

/// Why a bid request's body could not be read.
pub(crate) enum BodyFailure {
    /// Not all there by the exchange's default `tmax`.
    Late,
    /// Too large, or broken off.
    Bad(BadRequest),
}

/// A malformed bid request: its status, a metrics label and the reason.
pub(crate) struct BadRequest {
    pub(crate) status: StatusCode,
    pub(crate) label: &'static str,
    pub(crate) reason: String,
}

/// Reads a bid request's body within the exchange's size limit and default `tmax`; gives it
/// with its `Content-Encoding`.
pub(crate) async fn read_bid_body(
    exchange: &Exchange,
    request: Request<Incoming>,
    started: Instant,
) -> Result<(bytes::Bytes, Option<String>), BodyFailure> {
    let encoding = request
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = http_body_util::Limited::new(request.into_body(), exchange.max_body_bytes);
    let read_by = tokio::time::Instant::from_std(started + exchange.default_tmax);
    match tokio::time::timeout_at(read_by, body.collect()).await {
        Err(_) => Err(BodyFailure::Late),
        Ok(Err(error)) => {
            let (status, label) = if error.is::<http_body_util::LengthLimitError>() {
                (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
            } else {
                (StatusCode::BAD_REQUEST, "body_read")
            };
            let reason = format!("body: {error}");
            Err(BodyFailure::Bad(BadRequest {
                status,
                label,
                reason,
            }))
        }
        Ok(Ok(collected)) => Ok((collected.to_bytes(), encoding)),
    }
}

/// The body's JSON, decompressed within the exchange's limit.
pub(super) fn decode<'b>(
    exchange: &Exchange,
    body: &'b [u8],
    content_encoding: Option<&str>,
) -> Result<Cow<'b, [u8]>, BadRequest> {
    decode_body(body, content_encoding, exchange.max_body_bytes).map_err(|error| {
        let status = match error {
            BodyError::TooLarge { .. } | BodyError::DecompressedTooLarge { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            _ => StatusCode::BAD_REQUEST,
        };
        BadRequest {
            status,
            label: error.label(),
            reason: error.to_string(),
        }
    })
}

/// The bid request in `json`. A media type left out of an imp (malformed, or breaking a rule)
/// is logged at debug level with its reason; the rest of the request is decided.
pub(super) fn parse(json: &[u8]) -> Result<BidRequest<'_>, BadRequest> {
    let request = BidRequest::parse(json).map_err(|error| BadRequest {
        status: StatusCode::BAD_REQUEST,
        label: error.label(),
        reason: error.to_string(),
    })?;
    for imp in &request.imp {
        for dropped in &imp.dropped {
            tracing::debug!(
                request = %request.id,
                imp = %imp.id,
                label = dropped.error.label(),
                "{dropped}"
            );
        }
    }
    Ok(request)
}
