//! Serving the event log to a remote manager (format in `marquee_eventlog::wire`):
//! `GET /log/segments`, `GET /log/read?shard=&segment=&offset=&max_bytes=` (raw frames),
//! `POST /log/ack?shard=&segment=` (delete what the manager durably counted).
//!
//! The routes exist only when a shared secret is configured ([`LogAccess`]); every call must
//! send it as `Authorization: Bearer <secret>`, because the log holds user keys and an ack
//! deletes data. Reads run on the blocking pool: they are file I/O, and never on the ad path.
//!
//! Disk limit ([`enforce_disk_limit`]): an edge keeps unacknowledged segments while its
//! manager is away, up to a limit. Past it, the oldest closed segments are deleted (largest
//! shard first) until the log fits again, and each deletion is logged as an error. Serving
//! ads matters more than keeping old events: the loss is of the oldest data, and the manager
//! sees it as a gap in segment ids and counts it (`marquee_aggregation_lost_segments_total`).
//! A shard's newest file is cut to its header instead ([`EventLog::delete_through`]); a
//! manager that had counted part of it sees it closed and shorter than its checkpoint, counts
//! it the same way and goes on at the next segment.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use marquee_eventlog::wire::{self, END_HEADER, NEXT_OFFSET_HEADER, WireEnd};
use marquee_eventlog::{Budget, DeleteError, EventLog, ReadError, SEGMENT_HEADER_LEN};
use marquee_model::same_secret;

use crate::Edge;
use crate::http::Body;
use crate::periodic::Schedule;

/// The most one `/log/read` answers, whatever `max_bytes` asks.
pub const MAX_READ_BYTES: usize = 64 << 20;
/// What one `/log/read` answers without `max_bytes`.
const DEFAULT_READ_BYTES: usize = 8 << 20;

/// Who may read the log: the shared secret the manager sends.
#[derive(Debug, Clone)]
pub struct LogAccess {
    pub token: String,
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Compares without stopping at the first difference, so timing says nothing of the secret.
fn authorised(access: &LogAccess, request: &Request<Incoming>) -> bool {
    bearer_matches(request.headers(), &access.token)
}

/// Whether `Authorization: Bearer …` carries `token` (compared in constant time).
pub(crate) fn bearer_matches(headers: &header::HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|sent| same_secret(sent.trim().as_bytes(), token.as_bytes()))
}

/// Why a log call is refused: the status and a message naming what is wrong.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    message: String,
}

fn refuse(status: StatusCode, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

/// A query parameter parsed as `T`, or a 400 refusal naming it.
fn param<T: std::str::FromStr>(query: &str, name: &str, default: Option<T>) -> Result<T, Refusal> {
    let found = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value);
    match (found, default) {
        (Some(value), _) => value.parse().map_err(|_| {
            refuse(
                StatusCode::BAD_REQUEST,
                format!("{name}: {value:?} is not a non-negative integer"),
            )
        }),
        (None, Some(default)) => Ok(default),
        (None, None) => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("{name}: missing query parameter"),
        )),
    }
}

/// Answers a `/log/…` request. Only called when [`Edge::log_access`] is set.
pub(crate) async fn answer(edge: &Edge, request: &Request<Incoming>) -> Response<Body> {
    let Some(access) = edge.log_access.as_ref() else {
        return text(StatusCode::NOT_FOUND, "not found\n");
    };
    if !authorised(access, request) {
        let mut refused = text(
            StatusCode::UNAUTHORIZED,
            "the log needs `Authorization: Bearer <aggregation.token>`\n",
        );
        refused
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return refused;
    }
    let query = request.uri().query().unwrap_or("");
    let log = Arc::clone(&edge.log);
    let result = match (request.method(), request.uri().path()) {
        (&Method::GET, "/log/segments") => segments(log).await,
        (&Method::GET, "/log/read") => read(log, query).await,
        (&Method::POST, "/log/ack") => ack(log, query).await,
        _ => Err(refuse(StatusCode::NOT_FOUND, "not found")),
    };
    result.unwrap_or_else(|refusal| text(refusal.status, refusal.message + "\n"))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Refusal> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| refuse(StatusCode::INTERNAL_SERVER_ERROR, "the log task failed"))
}

fn read_error(error: &ReadError) -> Refusal {
    let status = match error {
        ReadError::UnknownShard { .. } | ReadError::NoSegment { .. } => StatusCode::NOT_FOUND,
        ReadError::OffsetPastEnd { .. } => StatusCode::BAD_REQUEST,
        ReadError::BadHeader { .. } | ReadError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refuse(status, error.to_string())
}

async fn segments(log: Arc<EventLog>) -> Result<Response<Body>, Refusal> {
    let listed = blocking(move || {
        (0..log.shards())
            .map(|shard| Ok((shard, log.segments(shard)?)))
            .collect::<Result<Vec<_>, ReadError>>()
    })
    .await?
    .map_err(|e| read_error(&e))?;
    Ok(text(StatusCode::OK, wire::format_segments(&listed)))
}

async fn read(log: Arc<EventLog>, query: &str) -> Result<Response<Body>, Refusal> {
    let shard: usize = param(query, "shard", None)?;
    let segment: u64 = param(query, "segment", None)?;
    let offset: u64 = param(query, "offset", Some(0))?;
    let max_bytes: usize = param(query, "max_bytes", Some(DEFAULT_READ_BYTES))?;
    let budget = Budget {
        max_bytes: max_bytes.clamp(1, MAX_READ_BYTES),
        max_records: usize::MAX,
    };
    let batch = blocking(move || log.read_frames(shard, segment, offset, budget))
        .await?
        .map_err(|e| read_error(&e))?;
    let mut response = Response::new(Full::new(Bytes::from(batch.frames)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(NEXT_OFFSET_HEADER, HeaderValue::from(batch.next_offset));
    headers.insert(
        END_HEADER,
        HeaderValue::from_static(wire::end_label(WireEnd::from(batch.end))),
    );
    Ok(response)
}

async fn ack(log: Arc<EventLog>, query: &str) -> Result<Response<Body>, Refusal> {
    let shard: usize = param(query, "shard", None)?;
    let segment: u64 = param(query, "segment", None)?;
    let removed = blocking(move || log.delete_through(shard, segment))
        .await?
        .map_err(|error| {
            let status = match error {
                DeleteError::UnknownShard { .. } => StatusCode::NOT_FOUND,
                DeleteError::NotClosed { .. } => StatusCode::CONFLICT,
                DeleteError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            };
            refuse(status, error.to_string())
        })?;
    Ok(text(StatusCode::OK, format!("removed {removed}\n")))
}

/// Deletes the oldest closed segments while the log holds more than `limit_bytes`; returns
/// how many segments and bytes went. Open segments are never deleted.
pub fn trim_to_limit(log: &EventLog, limit_bytes: u64) -> Result<(usize, u64), ReadError> {
    let mut removed = (0, 0);
    loop {
        let mut shards = Vec::with_capacity(log.shards());
        for shard in 0..log.shards() {
            shards.push((shard, log.segments(shard)?));
        }
        let total: u64 = shards
            .iter()
            .flat_map(|(_, segments)| segments.iter().map(|s| s.len))
            .sum();
        if total <= limit_bytes {
            return Ok(removed);
        }
        // The largest shard's oldest closed segment with records (a shard's newest segment
        // may be just a header: deleting keeps it, and it frees nothing).
        let victim = shards
            .iter()
            .filter_map(|(shard, segments)| {
                let oldest = segments
                    .iter()
                    .find(|s| s.len > SEGMENT_HEADER_LEN)
                    .filter(|s| s.closed)?;
                let size: u64 = segments.iter().map(|s| s.len).sum();
                Some((size, *shard, *oldest))
            })
            .max_by_key(|(size, _, _)| *size);
        let Some((_, shard, segment)) = victim else {
            // Only open segments are left: nothing may be deleted.
            return Ok(removed);
        };
        match log.delete_through(shard, segment.id) {
            Ok(_) => {
                tracing::error!(
                    shard,
                    segment = segment.id,
                    bytes = segment.len,
                    limit_bytes,
                    "event log over its disk limit: deleted an unacknowledged segment; its events are lost"
                );
                removed.0 += 1;
                removed.1 += segment.len;
            }
            Err(error) => {
                tracing::warn!(%error, shard, segment = segment.id, "cannot trim the event log");
                return Ok(removed);
            }
        }
    }
}

/// Runs [`trim_to_limit`] every `every` until `shutdown` resolves.
pub async fn enforce_disk_limit(
    log: Arc<EventLog>,
    limit_bytes: u64,
    every: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut schedule = Schedule::new(every, shutdown);
    while schedule.next().await {
        let log = Arc::clone(&log);
        let trimmed = tokio::task::spawn_blocking(move || trim_to_limit(&log, limit_bytes)).await;
        if let Ok(Err(error)) = trimmed {
            tracing::warn!(%error, "cannot measure the event log against its disk limit");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use marquee_eventlog::{FRAME_LEN, SEGMENT_HEADER_LEN};

    #[test]
    fn over_the_limit_the_oldest_closed_segments_go() {
        let dir = tempfile::tempdir().unwrap();
        let config = marquee_eventlog::Config {
            shards: 1,
            segment_max_bytes: SEGMENT_HEADER_LEN + 2 * FRAME_LEN as u64,
            ..marquee_eventlog::Config::default()
        };
        let log = EventLog::open(dir.path(), config).unwrap();
        for i in 0..10u128 {
            log.append(&marquee_eventlog::Event {
                kind: marquee_eventlog::EventKind::Decision,
                time_micros: 1,
                line_item: 1,
                creative: 1,
                placement: 1,
                user: 0,
                country: [0, 0],
                region: [0; 3],
                device: 0,
                amount_micros: 0,
                event_id: i,
            })
            .unwrap();
        }
        log.flush_and_close().unwrap();
        let before: Vec<u64> = log.segments(0).unwrap().iter().map(|s| s.id).collect();
        assert_eq!(before.len(), 5);
        let segment_len = SEGMENT_HEADER_LEN + 2 * FRAME_LEN as u64;
        let (segments, bytes) = trim_to_limit(&log, 3 * segment_len).unwrap();
        assert_eq!((segments, bytes), (2, 2 * segment_len));
        let after: Vec<u64> = log.segments(0).unwrap().iter().map(|s| s.id).collect();
        assert_eq!(after, before[2..]);
        assert_eq!(trim_to_limit(&log, 3 * segment_len).unwrap(), (0, 0));
    }
}
