//! Where the manager collects events from: an edge's log, read by (shard, segment, offset).
//! [`LocalLogSource`] reads the log of the edge in the same process (`marquee serve`);
//! [`HttpLogSource`] reads a remote edge over HTTP (`marquee_eventlog::wire`). Both hand
//! back whole frames undecoded: the aggregator decodes and sanitises them in bulk.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::AUTHORIZATION;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use marquee_eventlog::wire::{self, END_HEADER, NEXT_OFFSET_HEADER, WireEnd};
use marquee_eventlog::{Budget, EventLog, ReadError, SegmentInfo};

/// One segment of one shard, as listed by a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    pub shard: u32,
    pub segment: SegmentInfo,
}

/// Frames read from one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Whole frames, back to back.
    pub frames: Bytes,
    pub next_offset: u64,
    pub end: WireEnd,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{source_name}: {message}")]
    Read {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: segment {segment} of shard {shard} is gone")]
    Missing {
        source_name: String,
        shard: u32,
        segment: u64,
    },
    #[error("{source_name}: {call} gave no answer within {after:?}")]
    Timeout {
        source_name: String,
        call: &'static str,
        after: Duration,
    },
}

/// An edge's log as the manager reads it.
///
/// Its implementations (a local log, a remote edge, the tests' scripted ones) repeat these
/// signatures, as every implementation of a trait does; their bodies differ.
#[async_trait]
pub trait LogSource: Send + Sync + Debug {
    /// A stable name: checkpoints are stored under it, so it must not change for an edge.
    fn name(&self) -> &str;

    /// Every readable segment of every shard, ascending per shard.
    async fn segments(&self) -> Result<Vec<Listed>, SourceError>;

    /// Whole frames of one segment from `offset`, at most about `max_bytes` (at least one
    /// frame when one is readable).
    async fn read(
        &self,
        shard: u32,
        segment: u64,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Chunk, SourceError>;

    /// The shard's segments up to and including `segment` are counted and committed: the
    /// edge may delete them.
    async fn ack(&self, shard: u32, segment: u64) -> Result<(), SourceError>;
}

/// The log of the edge running in this process.
#[derive(Debug, Clone)]
pub struct LocalLogSource {
    name: String,
    log: Arc<EventLog>,
}

impl LocalLogSource {
    pub fn new(name: impl Into<String>, log: Arc<EventLog>) -> LocalLogSource {
        LocalLogSource {
            name: name.into(),
            log,
        }
    }

    fn error(&self, error: impl std::fmt::Display) -> SourceError {
        SourceError::Read {
            source_name: self.name.clone(),
            message: error.to_string(),
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&EventLog) -> T + Send + 'static,
    ) -> Result<T, SourceError> {
        let log = Arc::clone(&self.log);
        tokio::task::spawn_blocking(move || f(&log))
            .await
            .map_err(|e| self.error(e))
    }
}

#[async_trait]
impl LogSource for LocalLogSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn segments(&self) -> Result<Vec<Listed>, SourceError> {
        self.blocking(|log| {
            let mut out = Vec::new();
            for shard in 0..log.shards() {
                // Shards are below MAX_SHARDS, far under u32::MAX.
                let shard_id = shard as u32;
                out.extend(log.segments(shard)?.into_iter().map(|segment| Listed {
                    shard: shard_id,
                    segment,
                }));
            }
            Ok::<_, ReadError>(out)
        })
        .await?
        .map_err(|e| self.error(e))
    }

    // The signature is `LogSource::read`'s: a deliberate twin in every source (and the tests'
    // sources), as the trait requires.
    async fn read(
        &self,
        shard: u32,
        segment: u64,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Chunk, SourceError> {
        let budget = Budget {
            max_bytes,
            max_records: usize::MAX,
        };
        let batch = self
            .blocking(move |log| log.read_frames(shard as usize, segment, offset, budget))
            .await?;
        match batch {
            Ok(batch) => Ok(Chunk {
                frames: Bytes::from(batch.frames),
                next_offset: batch.next_offset,
                end: WireEnd::from(batch.end),
            }),
            Err(ReadError::NoSegment { .. }) => Err(SourceError::Missing {
                source_name: self.name.clone(),
                shard,
                segment,
            }),
            Err(error) => Err(self.error(error)),
        }
    }

    async fn ack(&self, shard: u32, segment: u64) -> Result<(), SourceError> {
        self.blocking(move |log| log.delete_through(shard as usize, segment))
            .await?
            .map(|_| ())
            .map_err(|e| self.error(e))
    }
}

/// Largest answer accepted from an edge (its own limit is 64 MiB per read).
const MAX_ANSWER_BYTES: usize = 80 << 20;
/// How long connecting to an edge may take. A peer that silently drops packets (a VPC link
/// gone) would otherwise hold the connection attempt for the system's SYN retries, minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long listing an edge's segments, or acknowledging them, may take: answers of a few
/// hundred bytes, so a few seconds means the edge is away, not busy. It also bounds how long
/// an unreachable edge holds up a run (sources are collected concurrently, see the
/// aggregator), whether its connection was kept alive or is new.
const LIST_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one read may take: up to 8 MiB of frames (the aggregator's largest chunk), so
/// generous enough for a link of about 2 Mbit/s.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A remote edge's log over HTTP, authenticated with the shared secret.
#[derive(Debug, Clone)]
pub struct HttpLogSource {
    name: String,
    base: String,
    token: String,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl HttpLogSource {
    /// `base` is the edge's URL (`http://10.0.0.7:8080`); `token` the shared secret
    /// (`aggregation.token`).
    pub fn new(name: impl Into<String>, base: &str, token: &str) -> HttpLogSource {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        HttpLogSource {
            name: name.into(),
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    fn error(&self, message: impl Into<String>) -> SourceError {
        SourceError::Read {
            source_name: self.name.clone(),
            message: message.into(),
        }
    }

    /// One call, given up after `timeout` (the answer's head and body); returns the status,
    /// the headers and the body. `call` names it in errors.
    async fn call(
        &self,
        call: &'static str,
        timeout: Duration,
        method: Method,
        path_and_query: &str,
    ) -> Result<(StatusCode, hyper::HeaderMap, Bytes), SourceError> {
        let uri: Uri = format!("{}{path_and_query}", self.base)
            .parse()
            .map_err(|_| self.error(format!("{:?} is not a valid URL", self.base)))?;
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(AUTHORIZATION, format!("Bearer {}", self.token))
            .body(Empty::new())
            .map_err(|e| self.error(e.to_string()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| self.error(format!("unreachable: {e}")))?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| self.error(format!("answer cut: {e}")))?
                .to_bytes();
            Ok((parts.status, parts.headers, body))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| SourceError::Timeout {
                source_name: self.name.clone(),
                call,
                after: timeout,
            })?
    }

    fn refused(&self, status: StatusCode, body: &Bytes) -> SourceError {
        self.error(format!(
            "answered {status}: {}",
            String::from_utf8_lossy(body).trim()
        ))
    }
}

#[async_trait]
impl LogSource for HttpLogSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn segments(&self) -> Result<Vec<Listed>, SourceError> {
        let (status, _, body) = self
            .call("listing", LIST_TIMEOUT, Method::GET, "/log/segments")
            .await?;
        if status != StatusCode::OK {
            return Err(self.refused(status, &body));
        }
        let text =
            std::str::from_utf8(&body).map_err(|_| self.error("segment list is not UTF-8"))?;
        let listed = wire::parse_segments(text).map_err(|e| self.error(e.to_string()))?;
        listed
            .into_iter()
            .map(|(shard, segment)| {
                let shard = u32::try_from(shard)
                    .map_err(|_| self.error(format!("shard {shard} is out of range")))?;
                Ok(Listed { shard, segment })
            })
            .collect()
    }

    // The same signature as `LocalLogSource::read`, deliberately: the trait's.
    async fn read(
        &self,
        shard: u32,
        segment: u64,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Chunk, SourceError> {
        let (status, headers, frames) = self
            .call(
                "read",
                READ_TIMEOUT,
                Method::GET,
                &format!("/log/read?shard={shard}&segment={segment}&offset={offset}&max_bytes={max_bytes}"),
            )
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Err(SourceError::Missing {
                source_name: self.name.clone(),
                shard,
                segment,
            });
        }
        if status != StatusCode::OK {
            return Err(self.refused(status, &frames));
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let next_offset = header(NEXT_OFFSET_HEADER)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| self.error(format!("answer without a valid {NEXT_OFFSET_HEADER}")))?;
        let end = header(END_HEADER)
            .and_then(wire::parse_end)
            .ok_or_else(|| self.error(format!("answer without a valid {END_HEADER}")))?;
        Ok(Chunk {
            frames,
            next_offset,
            end,
        })
    }

    async fn ack(&self, shard: u32, segment: u64) -> Result<(), SourceError> {
        let (status, _, body) = self
            .call(
                "acknowledgement",
                LIST_TIMEOUT,
                Method::POST,
                &format!("/log/ack?shard={shard}&segment={segment}"),
            )
            .await?;
        if status != StatusCode::OK {
            return Err(self.refused(status, &body));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// An edge that accepts connections and never answers (a peer whose process hangs, or a
    /// kept-alive connection whose packets vanish): the listing gives up after
    /// [`LIST_TIMEOUT`], saying so, instead of the read timeout.
    #[tokio::test]
    async fn a_silent_edge_fails_the_listing_at_the_listing_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                open.push(stream);
            }
        });
        let source = HttpLogSource::new("silent", &format!("http://{address}"), "secret");
        // A guard against hanging, far above every bound: not a measurement.
        let listed = tokio::time::timeout(Duration::from_secs(300), source.segments())
            .await
            .unwrap();
        match listed {
            Err(SourceError::Timeout { call, after, .. }) => {
                assert_eq!((call, after), ("listing", LIST_TIMEOUT));
            }
            other => panic!("expected the listing timeout, got {other:?}"),
        }
        held.abort();
    }
}
