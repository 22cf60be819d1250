//! User profiles on the edge: `POST /profiles` takes a bulk upload (JSON, or
//! CSV with `Content-Type: text/csv`; see `marquee_sharedstate::profiles` for both formats and
//! the checks) behind the edges' shared secret (`aggregation.token`), and answers a report of
//! the rows refused, each with where it is and why. Ad requests look the user's profile up
//! before deciding; its segments and attributes (as `u_<name>` key-values) are targeted by the
//! engine.
//!
//! Where profiles live:
//! - without `[redis]` (the embedded default): in this edge's memory, and appended to
//!   `<data_dir>/edge/profiles.jsonl`, read back at start. An upload reaches the edge it is
//!   sent to (in `marquee serve`, the only one);
//! - with `[redis]`: in Redis (`mq:{u:<user key>}:profile`), so an upload to any edge reaches
//!   all; each edge keeps what it read in a bounded cache for a while, and looks a user up
//!   within the request's deadline (past it, the request goes on without a profile).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use marquee_engine::user_key;
use marquee_sharedstate::profiles::{self, Parsed, Rejected, Rejections};
use marquee_sharedstate::{MemoryProfiles, Profile};
use serde::{Deserialize, Serialize};

use crate::Edge;
use crate::http::{Body, response};
use crate::log_service::bearer_matches;

/// The largest upload accepted.
const MAX_UPLOAD_BYTES: usize = 64 << 20;
/// How long an upload may take to arrive and to be stored.
const UPLOAD_TIME: Duration = Duration::from_secs(60);

/// One line of `profiles.jsonl`.
#[derive(Serialize, Deserialize)]
struct Stored {
    user: String,
    profile: Profile,
}

fn file(data_dir: &Path) -> PathBuf {
    data_dir.join("profiles.jsonl")
}

/// The profiles kept by earlier uploads in `data_dir` (later lines replace earlier ones); a
/// line that does not read is skipped with a warning.
pub(crate) fn load(data_dir: &Path) -> MemoryProfiles {
    let profiles = MemoryProfiles::default();
    let Ok(text) = std::fs::read_to_string(file(data_dir)) else {
        return profiles;
    };
    let mut read = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match serde_json::from_str::<Stored>(line) {
            Ok(stored) => read.push((user_key(&stored.user), stored.profile)),
            Err(error) => tracing::warn!(line = i + 1, %error, "skipping a stored profile"),
        }
    }
    profiles.insert(read);
    profiles
}

/// The profile of a bid request's user without waiting: from memory, or with Redis from this
/// edge's cache, a user it does not hold going without a profile this once while one fetch in
/// the background caches it for the user's next request (exchanges send the same user many
/// times a page): an exchange's deadline leaves no room for a round trip per bid.
pub(crate) fn lookup_now(edge: &Edge, user: Option<&str>) -> Option<Arc<Profile>> {
    let key = user_key(user?);
    match &edge.shared {
        Some(shared) => shared.profile_now(key),
        None => edge.profiles.get(key),
    }
}

/// Adds what a profile targets to a request's view: its segments, and its attributes as
/// `u_<name>` key-values.
pub(crate) fn add_targeting<'p>(
    profile: Option<&'p Profile>,
    segments: &mut Vec<&'p str>,
    key_values: &mut Vec<(&'p str, &'p str)>,
) {
    let Some(profile) = profile else {
        return;
    };
    segments.extend(profile.segments.iter().map(String::as_str));
    key_values.extend(
        profile
            .key_values
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
}

/// The profile of the request's user, if it has one: from memory, or from Redis within
/// `deadline` (nothing when Redis does not answer in time).
pub(crate) async fn lookup(
    edge: &Edge,
    user: Option<&str>,
    deadline: Instant,
) -> Option<Arc<Profile>> {
    let key = user_key(user?);
    match &edge.shared {
        Some(shared) => shared
            .profile(key, deadline)
            .await
            .unwrap_or_else(|_| edge.profiles.get(key)),
        None => edge.profiles.get(key),
    }
}

#[derive(Serialize)]
struct Report<'a> {
    /// Rows stored.
    accepted: usize,
    /// Rows refused, each with where it is and why (the first `MAX_REJECTED_SHOWN`).
    rejected: &'a [Rejected],
    /// Every row refused, those not listed included.
    rejected_total: usize,
    /// `memory` (this edge) or `redis` (every edge).
    store: &'static str,
}

fn json(status: StatusCode, body: String) -> Response<Body> {
    response(status, "application/json", body)
}

fn report(
    status: StatusCode,
    accepted: usize,
    rejected: &Rejections,
    store: &'static str,
) -> Response<Body> {
    let body = serde_json::to_string(&Report {
        accepted,
        rejected,
        rejected_total: rejected.total(),
        store,
    })
    .unwrap_or_default();
    json(status, body)
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, serde_json::json!({ "error": message }).to_string())
}

/// `POST /profiles`.
pub(crate) async fn upload(edge: &Edge, request: Request<Incoming>) -> Response<Body> {
    let Some(access) = edge.log_access.as_ref() else {
        return error(
            StatusCode::NOT_FOUND,
            "profile uploads need aggregation.token set",
        );
    };
    if !bearer_matches(request.headers(), &access.token) {
        let mut refused = error(
            StatusCode::UNAUTHORIZED,
            "profile uploads need `Authorization: Bearer <aggregation.token>`",
        );
        refused
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return refused;
    }
    let csv = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/csv"));
    let deadline = Instant::now() + UPLOAD_TIME;
    let body = http_body_util::Limited::new(request.into_body(), MAX_UPLOAD_BYTES);
    let bytes =
        match tokio::time::timeout(UPLOAD_TIME, http_body_util::BodyExt::collect(body)).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(error_)) if error_.is::<http_body_util::LengthLimitError>() => {
                return error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("body: larger than {MAX_UPLOAD_BYTES} bytes; split the upload"),
                );
            }
            Ok(Err(error_)) => return error(StatusCode::BAD_REQUEST, &format!("body: {error_}")),
            Err(_) => return error(StatusCode::REQUEST_TIMEOUT, "body: not received in time"),
        };
    let parsed = if csv {
        profiles::parse_csv(&bytes)
    } else {
        profiles::parse_json(&bytes)
    };
    let Parsed {
        profiles: rows,
        rejected,
    } = match parsed {
        Ok(parsed) => parsed,
        Err(why) => return error(StatusCode::BAD_REQUEST, &why.to_string()),
    };
    let keyed: Vec<(u64, Profile)> = rows
        .iter()
        .map(|(user, profile)| (user_key(user), profile.clone()))
        .collect();
    if let Some(shared) = &edge.shared {
        return match shared.put_profiles(&keyed, deadline).await {
            Ok(stored) => report(StatusCode::OK, stored, &rejected, "redis"),
            Err((stored, why)) => {
                tracing::warn!(stored, ?why, "profile upload to Redis stopped");
                report(StatusCode::SERVICE_UNAVAILABLE, stored, &rejected, "redis")
            }
        };
    }
    let path = file(&edge.config.data_dir);
    let kept = tokio::task::spawn_blocking(move || append(&path, &rows)).await;
    if let Err(why) = kept
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        tracing::error!(%why, "cannot keep uploaded profiles");
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot keep the profiles on disk: {why}"),
        );
    }
    let accepted = keyed.len();
    edge.profiles.insert(keyed);
    report(StatusCode::OK, accepted, &rejected, "memory")
}

/// Appends the rows to the profile file and syncs it, so an answered upload survives a restart.
fn append(path: &Path, rows: &[(String, Profile)]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut out = std::io::BufWriter::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?,
    );
    for (user, profile) in rows {
        let line = serde_json::to_string(&Stored {
            user: user.clone(),
            profile: profile.clone(),
        })
        .map_err(std::io::Error::other)?;
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()
}
