//! The manager's HTTP surface: the management API plus health, metrics and snapshot
//! distribution.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use marquee_api::openapi::{public_operation, response, responses};
use marquee_api::{ApiOptions, RouteTable};
use serde_json::json;

use crate::Manager;

/// Every route the manager serves, documented at `/api/v1/openapi.json`, with default API
/// options. `ad_url` is the edges' public base URL, for the generated ad tags.
pub fn router(manager: &Arc<Manager>, ad_url: &str) -> axum::Router {
    router_with(manager, ad_url, ApiOptions::default())
}

/// [`router`] with the API's options (report limits).
pub fn router_with(manager: &Arc<Manager>, ad_url: &str, api: ApiOptions) -> axum::Router {
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
                "Aggregation metrics in the Prometheus text format (in `marquee serve`, after the edge's)",
                "meta",
                responses([(
                    200,
                    json!({ "description": "metrics", "content": { "text/plain": {} } }),
                )]),
            ),
        )
        .route(
            Method::GET,
            "/snapshot/latest",
            latest_snapshot,
            Arc::clone(manager),
            public_operation(
                "The latest compiled campaign snapshot (binary); send If-None-Match to poll cheaply",
                "snapshots",
                responses([
                    (
                        200,
                        json!({ "description": "snapshot bytes", "content": { "application/octet-stream": {} } }),
                    ),
                    (304, json!({ "description": "unchanged since the ETag sent" })),
                    (503, json!({ "description": "no snapshot compiled yet" })),
                ]),
            ),
        );
    marquee_api::add_routes_with(table, Arc::clone(manager.store()), ad_url, api)
        .into_router("Marquee", env!("CARGO_PKG_VERSION"))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn metrics(State(manager): State<Arc<Manager>>) -> Response {
    let text = manager
        .aggregator()
        .map(|aggregator| aggregator.render_metrics())
        .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn latest_snapshot(State(manager): State<Arc<Manager>>, headers: HeaderMap) -> Response {
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
