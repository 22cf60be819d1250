//! The probes: `GET /metrics` (the edge's metrics, then in `marquee serve` the manager's, for
//! the callers `edge.metrics_access` allows) and `GET /readyz`.

use std::net::SocketAddr;

use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Request, Response, StatusCode};
use tower::ServiceExt;

use super::{Body, response, text};
use crate::Edge;

/// `GET /metrics` for the callers `edge.metrics_access` allows (a refusal carries no metric
/// data): the edge's metrics followed by the manager's (its router's `/metrics`), so that one
/// scrape of `marquee serve` sees both.
pub(crate) async fn metrics(
    edge: &Edge,
    fallback: Option<Router>,
    peer: SocketAddr,
    request: &Request<Incoming>,
) -> Response<Body> {
    let authorization = request.headers().get(hyper::header::AUTHORIZATION);
    let allowed = edge
        .metrics_access
        .check(Some(peer.ip()), authorization.map(HeaderValue::as_bytes));
    if let Err(refusal) = allowed {
        return crate::metrics::refused(refusal);
    }
    let mine = response(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        crate::metrics::render(edge),
    );
    let Some(router) = fallback else {
        return mine;
    };
    // The manager's route decides access again, by the same rule: it gets what this request
    // showed, the caller's address and credentials.
    let mut manager = Request::get("/metrics");
    if let Some(authorization) = authorization {
        manager = manager.header(hyper::header::AUTHORIZATION, authorization.clone());
    }
    let Ok(mut manager) = manager.body(axum::body::Body::empty()) else {
        return mine;
    };
    manager
        .extensions_mut()
        .insert(axum::extract::ConnectInfo(peer));
    with_manager_metrics(mine, router, manager).await
}

/// `edge`'s metrics followed by the manager router's answer to `request`, if that is a 200.
async fn with_manager_metrics(
    edge: Response<Body>,
    router: Router,
    request: Request<axum::body::Body>,
) -> Response<Body> {
    let manager = match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    if !manager.status().is_success() {
        return edge;
    }
    let Ok(manager) = manager.into_body().collect().await else {
        return edge;
    };
    let (parts, body) = edge.into_parts();
    let Ok(mine) = body.collect().await;
    let mut text = mine.to_bytes().to_vec();
    text.extend_from_slice(&manager.to_bytes());
    Response::from_parts(parts, Body::new(bytes::Bytes::from(text)))
}

/// `GET /readyz`: 200 once a snapshot is loaded (ads can be served), 503 before.
pub(crate) fn readyz(edge: &Edge) -> Response<Body> {
    match edge.holder.version() {
        Some(version) => text(StatusCode::OK, format!("ready: snapshot {version}\n")),
        None => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no snapshot loaded\n",
        ),
    }
}
