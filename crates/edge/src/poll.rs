//! Following a remote manager: poll `GET /snapshot/latest` with `If-None-Match` and swap in
//! what changed. A manager that is away costs nothing but a logged warning: the edge keeps
//! serving its current snapshot (or the copy it kept on disk).
//!
//! A poll gives up, like every edge-to-manager call, when the answer's head has not come
//! within [`CALL_TIMEOUT`] (2 s); its body, a snapshot of up to tens of MB, then gets
//! [`CALL_TIMEOUT`] more plus a second per [`MIN_BYTES_PER_SEC`] of its declared length
//! (a 30 MB snapshot of 100,000 line items: about 62 s, over a link of 4 Mbit/s or more). So
//! a hung connection stops snapshot updates for one bounded poll, not for ever; and a stop
//! ends a poll in progress at once.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, ETAG, IF_NONE_MATCH};
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::Edge;
use crate::periodic::Schedule;
use crate::remote::CALL_TIMEOUT;

/// Largest snapshot accepted over HTTP (a 100,000 line-item snapshot is about 30 MB).
const MAX_SNAPSHOT_BYTES: usize = 1 << 30;
/// The slowest download a snapshot's body is given time for (512 KiB/s, about 4 Mbit/s).
pub const MIN_BYTES_PER_SEC: u64 = 512 << 10;

#[derive(Debug, thiserror::Error)]
pub enum PollError {
    #[error("manager URL {0:?} is not a valid http URL")]
    Url(String),
    #[error("manager unreachable: {0}")]
    Unreachable(String),
    #[error("manager answered {0}")]
    Status(StatusCode),
    #[error("manager's {0} did not come within {1:?}")]
    Timeout(&'static str, Duration),
}

/// What one poll did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polled {
    Unchanged,
    /// Swapped in this snapshot version.
    Installed(u64),
    /// The manager has no snapshot yet.
    NoneYet,
}

/// Polls `manager` (e.g. `http://10.0.0.5:8080`) every `interval` until `stop` resolves, with
/// the shared secret (`aggregation.token`) the manager asks of edges.
pub async fn follow(
    edge: Arc<Edge>,
    manager: String,
    secret: String,
    interval: Duration,
    stop: impl Future<Output = ()>,
) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    // Logged when the manager goes away and when it is back, not at every poll in between.
    let mut reachable = true;
    let mut schedule = Schedule::new(interval, stop);
    while schedule.next().await {
        let Some(polled) = schedule
            .unless_stopped(poll_once(&edge, &client, &manager, &secret))
            .await
        else {
            break;
        };
        match polled {
            Ok(_) if !reachable => {
                reachable = true;
                tracing::info!(%manager, "snapshot polls answered again");
            }
            Ok(_) => {}
            Err(error) if reachable => {
                reachable = false;
                tracing::warn!(%error, "snapshot poll failed; serving the current snapshot");
            }
            Err(error) => tracing::debug!(%error, "snapshot poll failed again"),
        }
    }
}

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

/// How long a snapshot's body may take to arrive, for its declared length (the most accepted
/// when it declares none).
fn body_timeout(declared_len: Option<u64>) -> Duration {
    let len = declared_len.unwrap_or(MAX_SNAPSHOT_BYTES as u64);
    CALL_TIMEOUT + Duration::from_secs(len.div_ceil(MIN_BYTES_PER_SEC))
}

/// One poll: asks for the latest snapshot unless it has the current ETag. Gives up with
/// [`PollError::Timeout`] past the bounds in the module docs.
pub async fn poll_once(
    edge: &Arc<Edge>,
    client: &HttpClient,
    manager: &str,
    secret: &str,
) -> Result<Polled, PollError> {
    let uri: Uri = format!("{}/snapshot/latest", manager.trim_end_matches('/'))
        .parse()
        .map_err(|_| PollError::Url(manager.to_owned()))?;
    let mut request = Request::get(uri).header(AUTHORIZATION, format!("Bearer {secret}"));
    if let Some(loaded) = edge.holder.current() {
        request = request.header(IF_NONE_MATCH, loaded.etag.as_str());
    }
    let request = request
        .body(Empty::new())
        .map_err(|_| PollError::Url(manager.to_owned()))?;
    let response = tokio::time::timeout(CALL_TIMEOUT, client.request(request))
        .await
        .map_err(|_| PollError::Timeout("answer", CALL_TIMEOUT))?
        .map_err(|e| PollError::Unreachable(e.to_string()))?;
    match response.status() {
        StatusCode::NOT_MODIFIED => return Ok(Polled::Unchanged),
        StatusCode::SERVICE_UNAVAILABLE => return Ok(Polled::NoneYet),
        StatusCode::OK => {}
        other => return Err(PollError::Status(other)),
    }
    let offered = response
        .headers()
        .get(ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let declared_len = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let allowed = body_timeout(declared_len);
    let body = tokio::time::timeout(
        allowed,
        Limited::new(response.into_body(), MAX_SNAPSHOT_BYTES).collect(),
    )
    .await
    .map_err(|_| PollError::Timeout("snapshot body", allowed))?
    .map_err(|e| PollError::Unreachable(e.to_string()))?
    .to_bytes();
    if offered.is_some()
        && offered.as_deref() == edge.holder.current().as_deref().map(|l| l.etag.as_str())
    {
        return Ok(Polled::Unchanged);
    }
    let edge = Arc::clone(edge);
    // Building the index takes a while for large snapshots: off the async workers.
    let installed = tokio::task::spawn_blocking(move || edge.accept_snapshot(&body))
        .await
        .map_err(|e| PollError::Unreachable(e.to_string()))?;
    // A rejected snapshot is logged and counted by the holder; keep polling.
    Ok(installed.map_or(Polled::Unchanged, Polled::Installed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_snapshot_gets_time_for_a_slow_link() {
        assert_eq!(body_timeout(Some(0)), CALL_TIMEOUT);
        // 100,000 line items, about 30 MB: a minute over 4 Mbit/s.
        let large = body_timeout(Some(30_000_000));
        assert_eq!(large, CALL_TIMEOUT + Duration::from_secs(58));
        assert!(body_timeout(None) > large);
    }
}
