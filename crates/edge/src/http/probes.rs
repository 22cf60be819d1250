//! The probes: `GET /metrics` (the edge's metrics, then in `marquee serve` the manager's, for
//! the callers `edge.metrics_access` allows) and `GET /readyz`.

use std::net::SocketAddr;

use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tower::ServiceExt;

use super::{Body, response, text};
use crate::Edge;
use crate::metrics::Format;

/// `GET /metrics` for the callers `edge.metrics_access` allows (a refusal carries no metric
/// data): the edge's families followed by the manager's (its router's `/metrics`), so that one
/// scrape of `marquee serve` sees both; OpenMetrics for a scraper that asks for it, the
/// Prometheus text format otherwise.
pub(crate) async fn metrics(
    edge: &Edge,
    fallback: Option<Router>,
    peer: SocketAddr,
    request: &Request<Incoming>,
) -> Response<Body> {
    let headers = request.headers();
    let authorization = headers.get(AUTHORIZATION);
    let allowed = edge
        .metrics_access
        .check(Some(peer.ip()), authorization.map(HeaderValue::as_bytes));
    if let Err(refusal) = allowed {
        return crate::metrics::refused(refusal);
    }
    let accept = headers.get(ACCEPT);
    let format = Format::negotiate(accept.and_then(|v| v.to_str().ok()));
    let mine = crate::metrics::encode(edge, format);
    let Some(router) = fallback else {
        return response(StatusCode::OK, format.content_type(), mine);
    };
    // The manager's route decides access again, by the same rule: it gets what this request
    // showed, the caller's address and credentials, and the format it asked for.
    let mut manager = Request::get("/metrics");
    for (name, value) in [(AUTHORIZATION, authorization), (ACCEPT, accept)] {
        if let Some(value) = value {
            manager = manager.header(name, value.clone());
        }
    }
    let page = match manager.body(axum::body::Body::empty()) {
        Ok(mut manager) => {
            manager
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            with_manager_metrics(mine, format, router, manager).await
        }
        Err(_) => mine,
    };
    response(StatusCode::OK, format.content_type(), page)
}

/// The end of an OpenMetrics document.
const EOF: &str = "# EOF\n";

/// `edge`'s page in `format` followed by the manager router's answer to `request`, if that is
/// a 200 in the same format.
async fn with_manager_metrics(
    mut edge: String,
    format: Format,
    router: Router,
    request: Request<axum::body::Body>,
) -> String {
    let manager = match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let same_format = manager
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes() == format.content_type().as_bytes());
    if !manager.status().is_success() || !same_format {
        return edge;
    }
    let Ok(body) = manager.into_body().collect().await else {
        return edge;
    };
    let body = body.to_bytes();
    let Ok(text) = std::str::from_utf8(&body) else {
        return edge;
    };
    // One OpenMetrics document ends once, after the last family: the manager's end.
    if format == Format::OpenMetrics
        && let Some(families) = edge.strip_suffix(EOF)
    {
        edge.truncate(families.len());
    }
    edge.push_str(text);
    edge
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
