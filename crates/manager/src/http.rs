//! The manager's HTTP surface: the management API plus health, metrics and snapshot
//! distribution.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use marquee_api::openapi::{public_operation, response, responses};
use marquee_api::{ApiOptions, RouteTable};
use marquee_metrics::{CONTENT_TYPE_OPENMETRICS, CONTENT_TYPE_TEXT, Format};
use marquee_model::same_secret;
use serde_json::json;

use crate::{EdgeReportError, Manager, ReportError};

/// Every route the manager serves, documented at `/api/v1/openapi.json`, with default API
/// options. `ad_url` is the edges' public base URL, for the generated ad tags.
pub fn router(manager: &Arc<Manager>, ad_url: &str) -> axum::Router {
    router_with(manager, ad_url, ApiOptions::default())
}

/// [`router`] with the API's options (report limits). Forecasts are served by the manager's
/// attached forecasting service unless `api` names another.
pub fn router_with(manager: &Arc<Manager>, ad_url: &str, mut api: ApiOptions) -> axum::Router {
    if api.forecasts.is_none() {
        api.forecasts = manager.forecasts().map(|service| {
            Arc::new(crate::forecasts::ForecastsApi(Arc::clone(service)))
                as Arc<dyn marquee_api::Forecasts>
        });
    }
    let table = RouteTable::new()
        .route(
            Method::GET,
            "/healthz",
            healthz,
            (),
            public_operation(
                "Liveness: the process answers",
                "meta",
                responses([(200, response("alive", json!({ "type": "object" })))]),
            ),
        )
        .route(
            Method::GET,
            "/metrics",
            metrics,
            Arc::clone(manager),
            public_operation(
                "Aggregation and pacing metrics: OpenMetrics text when `Accept` asks for `application/openmetrics-text` (as Prometheus does), else the Prometheus text format (in `marquee serve`, after the edge's); not an API token but `Authorization: Bearer <metrics.token>`, or without `metrics.token` a loopback peer",
                "meta",
                responses([
                    (
                        200,
                        json!({ "description": "metrics", "content": { CONTENT_TYPE_OPENMETRICS: {}, CONTENT_TYPE_TEXT: {} } }),
                    ),
                    (
                        401,
                        json!({ "description": "metrics.token is set and the request does not carry it", "content": { "text/plain": {} } }),
                    ),
                    (
                        403,
                        json!({ "description": "metrics.token is not set and the peer is not a loopback address", "content": { "text/plain": {} } }),
                    ),
                ]),
            ),
        );
    marquee_api::add_routes_with(
        table,
        Arc::clone(manager.store()),
        Arc::clone(manager.clock()),
        ad_url,
        api,
        manager.geo_availability(),
    )
    .into_router("Marquee", env!("CARGO_PKG_VERSION"))
    .merge(internal_routes(manager))
}

/// Edge-to-manager routes, outside the public API document: authenticated by the shared
/// secret, not by API tokens.
fn internal_routes(manager: &Arc<Manager>) -> axum::Router {
    axum::Router::new()
        .route("/snapshot/latest", axum::routing::get(latest_snapshot))
        .route("/internal/v1/sync", axum::routing::post(sync))
        .route(
            "/internal/v1/edges",
            axum::routing::post(edge_heartbeat).get(list_edges),
        )
        .route(
            "/internal/v1/edges/{id}",
            axum::routing::delete(forget_edge),
        )
        .with_state(Arc::clone(manager))
}

/// `POST /internal/v1/sync`: an edge's lease renewals in, grants and controls out (JSON,
/// `marquee_pacing::SyncRequest` and `SyncResponse`), with `Authorization: Bearer <secret>`.
async fn sync(
    State(manager): State<Arc<Manager>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(pacing) = manager.pacing() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "pacing is not running\n").into_response();
    };
    if let Some(refused) = refuse_unless_secret(&headers, &pacing.options().secret) {
        return refused;
    }
    let request: marquee_pacing::SyncRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("sync request unreadable: {error}\n"),
            )
                .into_response();
        }
    };
    match pacing.sync(request).await {
        Ok(response) => Json(response).into_response(),
        Err(error) => {
            tracing::error!(%error, "sync failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "sync failed\n").into_response()
        }
    }
}

/// `None` when the request carries `Authorization: Bearer <secret>`; else the refusal (403
/// when no secret is set, so remote edges are off; 401 otherwise).
fn refuse_unless_secret(headers: &HeaderMap, secret: &str) -> Option<Response> {
    if secret.is_empty() {
        return Some(
            (
                StatusCode::FORBIDDEN,
                "remote edges are off: set aggregation.token on the manager and the edge\n",
            )
                .into_response(),
        );
    }
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if sent.is_some_and(|sent| same_secret(sent.trim().as_bytes(), secret.as_bytes())) {
        return None;
    }
    Some(
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "edge calls need `Authorization: Bearer <aggregation.token>`\n",
        )
            .into_response(),
    )
}

/// `POST /internal/v1/edges`: an edge's heartbeat (JSON `marquee_pacing::EdgeReport`), which
/// registers it on first call; 204 once taken (and persisted, for a new edge); 409 when another
/// live edge reports under the id (the registry unchanged).
async fn edge_heartbeat(
    State(manager): State<Arc<Manager>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(refused) = refuse_unless_secret(&headers, manager.remote_secret().unwrap_or("")) {
        return refused;
    }
    let report: marquee_pacing::EdgeReport = match serde_json::from_slice(&body) {
        Ok(report) => report,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("edge report unreadable: {error}\n"),
            )
                .into_response();
        }
    };
    match manager.report_edge(report, false).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(EdgeReportError::Report(error)) => {
            let status = match error {
                ReportError::IdInUse { .. } => StatusCode::CONFLICT,
                _ => StatusCode::BAD_REQUEST,
            };
            (status, format!("{error}\n")).into_response()
        }
        Err(EdgeReportError::Off) => {
            (StatusCode::FORBIDDEN, "remote edges are off\n").into_response()
        }
        Err(EdgeReportError::Store(error)) => {
            tracing::error!(%error, "cannot register an edge");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot register the edge now\n",
            )
                .into_response()
        }
    }
}

/// `GET /internal/v1/edges`: the edge registry as JSON (for operators and scripts; the
/// dashboard reads [`Manager::edges`] in process).
async fn list_edges(State(manager): State<Arc<Manager>>, headers: HeaderMap) -> Response {
    if let Some(refused) = refuse_unless_secret(&headers, manager.remote_secret().unwrap_or("")) {
        return refused;
    }
    let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let edges: Vec<serde_json::Value> = manager
        .edges()
        .into_iter()
        .map(|edge| {
            json!({
                "id": edge.id,
                "address": edge.address,
                "log_url": edge.log_url,
                "snapshot_version": edge.snapshot_version,
                "snapshot_age_ms": edge.snapshot_age.map(millis),
                "snapshot_current": edge.snapshot_current,
                "log_backlog_bytes": edge.log_lag.map(|l| l.backlog_bytes),
                "log_behind_secs": edge.log_lag.map(|l| l.behind_secs),
                "request_rate": edge.request_rate,
                "last_seen": edge.last_seen.map(|t| t.to_string()),
                "live": edge.live,
            })
        })
        .collect();
    Json(json!({ "edges": edges })).into_response()
}

/// `DELETE /internal/v1/edges/{id}`: forgets a remote edge gone for good (204), 404 if it is
/// not listed.
async fn forget_edge(
    State(manager): State<Arc<Manager>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse_unless_secret(&headers, manager.remote_secret().unwrap_or("")) {
        return refused;
    }
    match manager.forget_edge(&id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => (
            StatusCode::NOT_FOUND,
            format!("no remote edge {id:?} is registered\n"),
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot remove an edge");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot remove the edge now\n",
            )
                .into_response()
        }
    }
}

/// Compares secrets in time independent of where they differ.
async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// `GET /metrics`, for the callers [`Manager::metrics_access`] allows: the peer is the TCP
/// peer the server accepted (`ConnectInfo`, set by the edge's server and by `marquee
/// manager`'s), never a forwarded header.
async fn metrics(
    State(manager): State<Arc<Manager>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> Response {
    let peer = peer.map(|Extension(ConnectInfo(peer))| peer.ip());
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if let Err(refusal) = manager.metrics_access().check(peer, authorization) {
        let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
        let reason = format!("{refusal}\n");
        return if status == StatusCode::UNAUTHORIZED {
            (status, [(header::WWW_AUTHENTICATE, "Bearer")], reason).into_response()
        } else {
            (status, reason).into_response()
        };
    }
    // Prometheus asks for OpenMetrics; the edge, which appends this page to its own 0.0.4
    // text in `marquee serve`, asks for nothing.
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let text = manager.encode_metrics(format).await;
    ([(header::CONTENT_TYPE, format.content_type())], text).into_response()
}

/// `GET /snapshot/latest`: the published snapshot for remote edges, with the shared secret
/// (it holds every campaign's prices, budgets, targeting and landing URLs); `If-None-Match`
/// with the current ETag answers 304.
async fn latest_snapshot(State(manager): State<Arc<Manager>>, headers: HeaderMap) -> Response {
    if let Some(refused) = refuse_unless_secret(&headers, manager.remote_secret().unwrap_or("")) {
        return refused;
    }
    let Some(published) = manager.latest() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no snapshot compiled yet").into_response();
    };
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|tag| tag.trim() == published.etag));
    let builder = Response::builder()
        .header(header::ETAG, &published.etag)
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-marquee-snapshot-version", published.header.version);
    let built = if unchanged {
        builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
    } else {
        builder
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .body(Body::from(published.bytes.clone()))
    };
    // Every header value above is ASCII made here, so building cannot fail.
    built.unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
