//! The edge's HTTP server on bare hyper: edge paths are answered here without a router
//! framework on the hot path; every other path goes to the fallback service (the manager's
//! axum router in `marquee serve`).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use http_body_util::{BodyExt, Either};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use marquee_tracking::Kind;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::Edge;
use crate::handlers::{self, Body};

/// Resolves when the server should stop accepting and drain.
pub type Shutdown = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

type Answer = Response<Either<Body, axum::body::Body>>;

async fn dispatch(
    edge: Arc<Edge>,
    fallback: Option<Router>,
    request: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let query = request.uri().query().unwrap_or("");
    let edge_answer = match (request.method(), request.uri().path()) {
        (&Method::GET, "/ad") => Some(handlers::ad(&edge, query, request.headers(), false)),
        (&Method::GET, "/ad.json") => {
            let mut answer = handlers::ad(&edge, query, request.headers(), true);
            handlers::allow_origin(request.headers(), &mut answer);
            Some(answer)
        }
        (&Method::GET, "/t/i") => {
            Some(handlers::track(&edge, Kind::Impression, query, request.headers()).await)
        }
        (&Method::GET, "/t/c") => {
            Some(handlers::track(&edge, Kind::Click, query, request.headers()).await)
        }
        (&Method::GET, "/t/v") => {
            Some(handlers::track(&edge, Kind::Conversion, query, request.headers()).await)
        }
        (&Method::GET | &Method::HEAD, "/tag.js") => Some(handlers::tag_js()),
        _ => None,
    };
    if let Some(answer) = edge_answer {
        return Ok(answer.map(Either::Left));
    }
    let Some(router) = fallback else {
        return Ok(handlers::not_found().map(Either::Left));
    };
    let request = request.map(|body| axum::body::Body::new(body.map_err(axum::Error::new)));
    // An axum router never fails: its error type is Infallible.
    let response = match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    Ok(response.map(Either::Right))
}

/// Serves until `shutdown` resolves, then stops accepting and waits for open connections to
/// finish their requests.
pub async fn serve(
    listener: TcpListener,
    edge: Arc<Edge>,
    fallback: Option<Router>,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(connection) => connection,
                Err(error) => {
                    // Out of file descriptors and the like: keep serving the open connections.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let edge = Arc::clone(&edge);
        let fallback = fallback.clone();
        let service =
            service_fn(move |request| dispatch(Arc::clone(&edge), fallback.clone(), request));
        let connection = http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(std::time::Duration::from_secs(10))
            .serve_connection(TokioIo::new(stream), service);
        let watched = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = watched.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
