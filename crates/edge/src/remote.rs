//! Split roles, the edge's side (`marquee edge --manager URL`): a stable identity, the
//! heartbeat that registers the edge with its manager (`POST /internal/v1/edges`), the HTTP
//! client of the manager's sync (`POST /internal/v1/sync`), and the leases given back on a
//! graceful stop. Snapshots come by [`poll::follow`](crate::poll::follow); the log is served
//! at `/log/…` ([`log_service`](crate::log_service)).
//!
//! Invariants:
//! - The id is configured or kept in the data directory: a restarted edge reports under the
//!   same id, so the manager resumes its log from the stored checkpoints.
//! - Every call to the manager carries the shared secret and gives up after [`CALL_TIMEOUT`]: a
//!   manager that is away or slow never holds the edge up. The edge keeps serving from its
//!   snapshot and leases meanwhile (leases run out by their own expiry).
//! - A heartbeat the manager refuses (a 4xx: another live edge has this id, a log URL it cannot
//!   read, a wrong secret) is an operator's to fix: it is logged as an error whenever the
//!   refusal changes, and the edge keeps serving and retrying (an edge must not stop serving
//!   ads because of its manager).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jiff::Timestamp;
use marquee_pacing::{EdgeReport, SyncRequest, SyncResponse};

use crate::Edge;
use crate::pacing::{SyncClient, SyncError};
use crate::periodic::Schedule;

/// How long one call to the manager may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest answer taken from the manager (a sync answer with every control of 100,000 line
/// items is a few MB).
const MAX_ANSWER_BYTES: usize = 32 << 20;
/// The file in the edge's data directory that keeps a generated id.
const ID_FILE: &str = "edge.id";

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("`edge.id` {0:?} must be 1 to 64 letters, digits, `-`, `_` or `.`, and not `local`")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} holds {1:?}, which is not a valid edge id; remove the file or set `edge.id`")]
    Corrupt(PathBuf, String),
}

/// The edge's id: `configured` if set, else the one kept in `data_dir` (made on first start,
/// `edge-` and 16 random hex digits).
pub fn identity(data_dir: &Path, configured: &str) -> Result<String, IdentityError> {
    if !configured.is_empty() {
        return if EdgeReport::valid_id(configured) {
            Ok(configured.to_owned())
        } else {
            Err(IdentityError::Invalid(configured.to_owned()))
        };
    }
    let path = data_dir.join(ID_FILE);
    let io = |source| IdentityError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(kept) => {
            let kept = kept.trim();
            return if EdgeReport::valid_id(kept) {
                Ok(kept.to_owned())
            } else {
                Err(IdentityError::Corrupt(path.clone(), kept.to_owned()))
            };
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io(error)),
    }
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| io(std::io::Error::other(e.to_string())))?;
    let id = format!("edge-{:016x}", u64::from_le_bytes(bytes));
    std::fs::create_dir_all(data_dir).map_err(io)?;
    // Written whole and renamed into place: a crash leaves no half-written id.
    let temporary = data_dir.join(format!("{ID_FILE}.tmp"));
    std::fs::write(&temporary, format!("{id}\n")).map_err(io)?;
    std::fs::File::open(&temporary)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    std::fs::rename(&temporary, &path).map_err(io)?;
    Ok(id)
}

/// Where this edge is reached: by browsers, and by the manager for its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    pub public_url: String,
    pub log_url: String,
}

/// The edge's heartbeat now.
pub fn report(edge: &Edge, id: &str, addresses: &Addresses) -> EdgeReport {
    let loaded = edge.holder.current();
    let snapshot = loaded.as_ref().map(|l| l.engine.snapshot());
    EdgeReport {
        id: id.to_owned(),
        public_url: addresses.public_url.clone(),
        log_url: addresses.log_url.clone(),
        pacing_edge: edge.pacing.edge_id(),
        snapshot_version: snapshot.map(|s| s.version),
        snapshot_built_at: snapshot.map(|s| s.built_at),
        requests_total: edge.metrics.traffic_total(),
        sent_at: Timestamp::now(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("manager URL {0:?} is not a valid http:// URL")]
    Url(String),
    #[error("manager unreachable: {0}")]
    Unreachable(String),
    #[error("manager gave no answer within {CALL_TIMEOUT:?}")]
    Timeout,
    #[error("manager answered {status}: {message}")]
    Refused { status: StatusCode, message: String },
    #[error("manager's answer unreadable: {0}")]
    Answer(String),
}

/// The edge's HTTP client of its manager's internal endpoints.
#[derive(Debug, Clone)]
pub struct ManagerClient {
    base: String,
    secret: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl ManagerClient {
    /// `base`: the manager's URL (`http://10.0.0.5:8080`); `secret`: `aggregation.token`.
    pub fn new(base: &str, secret: &str) -> Result<ManagerClient, CallError> {
        let base = base.trim_end_matches('/');
        let valid = base
            .strip_prefix("http://")
            .is_some_and(|rest| !rest.is_empty() && !rest.contains(['?', '#']))
            && base.parse::<Uri>().is_ok();
        if !valid {
            return Err(CallError::Url(base.to_owned()));
        }
        Ok(ManagerClient {
            base: base.to_owned(),
            secret: secret.to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// POSTs JSON to `path`; the answer's status and body.
    async fn post(&self, path: &str, body: Vec<u8>) -> Result<(StatusCode, Bytes), CallError> {
        let uri: Uri = format!("{}{path}", self.base)
            .parse()
            .map_err(|_| CallError::Url(self.base.clone()))?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(AUTHORIZATION, format!("Bearer {}", self.secret))
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|_| CallError::Url(self.base.clone()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| CallError::Unreachable(e.to_string()))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| CallError::Unreachable(e.to_string()))?
                .to_bytes();
            if !status.is_success() {
                return Err(CallError::Refused {
                    status,
                    message: String::from_utf8_lossy(&body).trim().to_owned(),
                });
            }
            Ok((status, body))
        };
        tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| CallError::Timeout)?
    }

    /// Sends a heartbeat (the first registers the edge).
    pub async fn heartbeat(&self, report: &EdgeReport) -> Result<(), CallError> {
        let body = serde_json::to_vec(report).map_err(|e| CallError::Answer(e.to_string()))?;
        self.post("/internal/v1/edges", body).await.map(|_| ())
    }

    async fn call_sync(&self, request: SyncRequest) -> Result<SyncResponse, CallError> {
        let body = serde_json::to_vec(&request).map_err(|e| CallError::Answer(e.to_string()))?;
        let (_, answer) = self.post("/internal/v1/sync", body).await?;
        serde_json::from_slice(&answer).map_err(|e| CallError::Answer(e.to_string()))
    }
}

impl SyncClient for ManagerClient {
    fn sync(
        &self,
        request: SyncRequest,
    ) -> Pin<Box<dyn Future<Output = Result<SyncResponse, SyncError>> + Send + '_>> {
        Box::pin(async move {
            self.call_sync(request)
                .await
                .map_err(|e| SyncError(e.to_string()))
        })
    }
}

/// Sends a heartbeat every `interval` until `stop`. A failure is logged when it changes (the
/// manager goes away, refuses with another message, answers again), not every beat; a refusal
/// as an error, since it lasts until someone fixes it.
pub async fn run_heartbeat(
    edge: Arc<Edge>,
    client: ManagerClient,
    id: String,
    addresses: Addresses,
    interval: Duration,
    stop: impl Future<Output = ()>,
) {
    let mut last = Beat::Answered;
    let mut schedule = Schedule::new(interval, stop);
    while schedule.next().await {
        let outcome = client.heartbeat(&report(&edge, &id, &addresses)).await;
        let beat = Beat::of(&outcome);
        let changed = beat != last;
        match (&outcome, changed) {
            (Ok(()), true) => {
                tracing::info!(manager = %client.base(), "manager answers heartbeats again");
            }
            (Err(error), true) if matches!(beat, Beat::Refused(_)) => tracing::error!(
                manager = %client.base(),
                %error,
                "manager refused the heartbeat; serving from the current snapshot and leases, \
                 retrying every heartbeat"
            ),
            (Err(error), true) => {
                tracing::warn!(%error, "heartbeat failed; serving from the current snapshot and leases");
            }
            (Err(error), false) => tracing::debug!(%error, "heartbeat failed again"),
            (Ok(()), false) => {}
        }
        last = beat;
    }
}

/// A heartbeat's outcome as far as logging goes: what changes is logged.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Beat {
    Answered,
    /// Unreachable, no answer in time, or a server error: passes by itself.
    Failed,
    /// A 4xx, with its status and message: lasts until the edge or the manager is changed.
    Refused(String),
}

impl Beat {
    fn of(outcome: &Result<(), CallError>) -> Beat {
        match outcome {
            Ok(()) => Beat::Answered,
            Err(CallError::Refused { status, message }) if status.is_client_error() => {
                Beat::Refused(format!("{status}: {message}"))
            }
            Err(_) => Beat::Failed,
        }
    }
}

/// Gives every lease back with its final count (a graceful stop, after the last request was
/// answered), so the unused part returns to the budget at once instead of at expiry.
pub async fn release_leases(edge: &Edge, client: &dyn SyncClient) -> Result<usize, SyncError> {
    let request = edge.pacing.releases();
    let released = request.releases.len();
    if released == 0 {
        return Ok(0);
    }
    client.sync(request).await?;
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_id_is_kept_across_starts() {
        let dir = tempfile::tempdir().unwrap();
        let first = identity(dir.path(), "").unwrap();
        assert!(first.starts_with("edge-") && EdgeReport::valid_id(&first));
        assert_eq!(identity(dir.path(), "").unwrap(), first);
        assert_eq!(identity(dir.path(), "eu-1").unwrap(), "eu-1");
    }

    #[test]
    fn bad_ids_are_refused_naming_where_they_came_from() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            identity(dir.path(), "local"),
            Err(IdentityError::Invalid(_))
        ));
        assert!(matches!(
            identity(dir.path(), "a/b"),
            Err(IdentityError::Invalid(_))
        ));
        std::fs::write(dir.path().join(ID_FILE), "no spaces allowed").unwrap();
        let error = identity(dir.path(), "").unwrap_err();
        assert!(error.to_string().contains("edge.id"), "{error}");
    }

    /// The order that hid a refusal: the manager away at first, then refusing (a new edge's
    /// id in use, a log URL it cannot read). Each refusal with a new message is a change, and so
    /// logged as an error; a repeat is not.
    #[test]
    fn a_refusal_after_an_outage_and_each_new_refusal_are_changes() {
        let refused = |status: u16, message: &str| {
            Err(CallError::Refused {
                status: StatusCode::from_u16(status).unwrap(),
                message: message.into(),
            })
        };
        let outcomes = [
            Err(CallError::Timeout),
            Err(CallError::Unreachable("connection refused".into())),
            refused(409, "edge id \"eu-1\" is in use"),
            refused(409, "edge id \"eu-1\" is in use"),
            refused(400, "`log_url` has an unspecified host"),
            refused(503, "busy"),
            refused(400, "`log_url` has an unspecified host"),
            Ok(()),
            Ok(()),
        ];
        let mut last = Beat::Answered;
        let mut logged = Vec::new();
        for outcome in &outcomes {
            let beat = Beat::of(outcome);
            logged.push((beat != last).then(|| beat.clone()));
            last = beat;
        }
        let refusal = |text: &str| Some(Beat::Refused(text.into()));
        assert_eq!(
            logged,
            [
                Some(Beat::Failed),
                None,
                refusal("409 Conflict: edge id \"eu-1\" is in use"),
                None,
                refusal("400 Bad Request: `log_url` has an unspecified host"),
                Some(Beat::Failed),
                refusal("400 Bad Request: `log_url` has an unspecified host"),
                Some(Beat::Answered),
                None,
            ]
        );
    }

    #[test]
    fn manager_urls_must_be_plain_http() {
        assert!(ManagerClient::new("http://10.0.0.5:8080/", "s").is_ok());
        for bad in ["https://m:1", "m:8080", "http://", "http://m?x=1"] {
            assert!(
                matches!(ManagerClient::new(bad, "s"), Err(CallError::Url(_))),
                "{bad}"
            );
        }
    }
}
