//! The edge's HTTP server on bare hyper: edge paths are answered here without a router
//! framework on the hot path; every other path goes to the fallback service (the manager's
//! axum router in `marquee serve`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use http_body_util::{BodyExt, Either};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use marquee_tracking::Kind;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::Edge;
use crate::bidder::{self, NoticeKind};
use crate::client::Client;
use crate::handlers::{self, Body};
use crate::idle_body::IdleTimeout;
use crate::log_service;
use crate::metrics::{Endpoint, Outcome};

/// Resolves when the server should stop accepting and drain.
pub type Shutdown = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

type Answer = Response<Either<Body, axum::body::Body>>;

async fn dispatch(
    edge: Arc<Edge>,
    fallback: Option<Router>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let started = Instant::now();
    let (endpoint, answer) = answer(&edge, fallback, peer, request, started).await;
    let (answer, outcome) = answer;
    edge.metrics.record(endpoint, outcome, started.elapsed());
    Ok(answer)
}

/// Ad requests go through the gate: one that cannot start now gets the fallback at once.
async fn ad_request(
    edge: &Arc<Edge>,
    request: &Request<Incoming>,
    peer: SocketAddr,
    json: bool,
    started: Instant,
) -> (Response<Body>, Outcome) {
    let query = request.uri().query().unwrap_or("");
    let (mut answer, outcome) = match edge.try_admit() {
        Some(_admitted) => {
            handlers::ad(
                edge,
                query,
                request.headers(),
                &client(edge, peer, request),
                json,
                started + edge.config.limits.deadline,
            )
            .await
        }
        None => (handlers::ad_shed(edge, query, json), Outcome::Shed),
    };
    if json {
        handlers::allow_origin(request.headers(), &mut answer);
    }
    (answer, outcome)
}

/// Who sent `request`, for the traffic-quality screen.
fn client<'r>(edge: &'r Edge, peer: SocketAddr, request: &'r Request<Incoming>) -> Client<'r> {
    Client::of(
        Some(peer),
        request.method(),
        request.headers(),
        &edge.quality.rules.trusted_proxies,
    )
}

/// The `{exchange}` of `PREFIX` (`Some(None)`) or `PREFIX/{exchange}`; `None` for another path
/// (`/openrtb2/bidder` and the like are not bid endpoints).
pub(crate) fn exchange_name<'p>(path: &'p str, prefix: &str) -> Option<Option<&'p str>> {
    match path.strip_prefix(prefix)? {
        "" => Some(None),
        rest => rest.strip_prefix('/').map(Some),
    }
}

/// Why a bid request's body could not be read.
pub(crate) enum BodyFailure {
    /// Not all there by the exchange's default `tmax`.
    Late,
    /// Too large, or broken off: the status, a metrics label and the reason.
    Bad(hyper::StatusCode, &'static str, String),
}

/// Reads a bid request's body within the exchange's size limit and default `tmax`; gives it
/// with its `Content-Encoding`.
pub(crate) async fn read_bid_body(
    exchange: &bidder::Exchange,
    request: Request<Incoming>,
    started: Instant,
) -> Result<(bytes::Bytes, Option<String>), BodyFailure> {
    let encoding = request
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = http_body_util::Limited::new(request.into_body(), exchange.max_body_bytes);
    let read_by = tokio::time::Instant::from_std(started + exchange.default_tmax);
    match tokio::time::timeout_at(read_by, body.collect()).await {
        Err(_) => Err(BodyFailure::Late),
        Ok(Err(error)) => {
            let (status, label) = if error.is::<http_body_util::LengthLimitError>() {
                (hyper::StatusCode::PAYLOAD_TOO_LARGE, "too_large")
            } else {
                (hyper::StatusCode::BAD_REQUEST, "body_read")
            };
            Err(BodyFailure::Bad(status, label, format!("body: {error}")))
        }
        Ok(Ok(collected)) => Ok((collected.to_bytes(), encoding)),
    }
}

/// `POST /openrtb2/bid[/{exchange}]`: through the gate (full: 204 at once), the body read
/// within its size limit and the exchange's default `tmax`, then decided.
async fn bid_request(
    edge: &Edge,
    request: Request<Incoming>,
    started: Instant,
) -> (Response<Body>, Outcome) {
    let Some(name) = exchange_name(request.uri().path(), "/openrtb2/bid") else {
        return (handlers::not_found(), Outcome::ClientError);
    };
    let Some(exchange) = edge.bidder.exchange(name) else {
        return (handlers::not_found(), Outcome::ClientError);
    };
    let Some(_admitted) = edge.try_admit_bid(exchange) else {
        return bidder::shed(edge);
    };
    let (body, encoding) = match read_bid_body(exchange, request, started).await {
        Ok(read) => read,
        Err(BodyFailure::Late) => return bidder::late(edge),
        Err(BodyFailure::Bad(status, label, reason)) => {
            return bidder::bad_bid_request(edge, status, label, reason);
        }
    };
    let currency = exchange.currency;
    bidder::bid(
        edge,
        exchange,
        currency,
        &body,
        encoding.as_deref(),
        started,
    )
}

fn edge_answer(answer: Response<Body>) -> (Answer, Outcome) {
    let outcome = Outcome::from_status(answer.status());
    (answer.map(Either::Left), outcome)
}

async fn answer(
    edge: &Arc<Edge>,
    fallback: Option<Router>,
    peer: SocketAddr,
    request: Request<Incoming>,
    started: Instant,
) -> (Endpoint, (Answer, Outcome)) {
    let query = request.uri().query().unwrap_or("");
    let (endpoint, answer) = match (request.method(), request.uri().path()) {
        // `HEAD` is answered as `GET` (an image or a redirect without its body), and its
        // event logged as a crawler's: nobody saw anything.
        (&Method::GET | &Method::HEAD, "/ad") => {
            let (answer, outcome) = ad_request(edge, &request, peer, false, started).await;
            return (Endpoint::Ad, (answer.map(Either::Left), outcome));
        }
        (&Method::GET, "/ad.json") => {
            let (answer, outcome) = ad_request(edge, &request, peer, true, started).await;
            return (Endpoint::AdJson, (answer.map(Either::Left), outcome));
        }
        (&Method::GET | &Method::HEAD, "/t/i") => (
            Endpoint::Impression,
            handlers::track(
                edge,
                Kind::Impression,
                query,
                request.headers(),
                &client(edge, peer, &request),
            )
            .await,
        ),
        (&Method::GET | &Method::HEAD, "/t/c") => (
            Endpoint::Click,
            handlers::track(
                edge,
                Kind::Click,
                query,
                request.headers(),
                &client(edge, peer, &request),
            )
            .await,
        ),
        (&Method::GET | &Method::HEAD, "/t/v") => (
            Endpoint::Conversion,
            handlers::track(
                edge,
                Kind::Conversion,
                query,
                request.headers(),
                &client(edge, peer, &request),
            )
            .await,
        ),
        (&Method::POST, path) if path.starts_with("/openrtb2/bid") => {
            let (answer, outcome) = bid_request(edge, request, started).await;
            return (Endpoint::Bid, (answer.map(Either::Left), outcome));
        }
        (&Method::POST, "/profiles") => (
            Endpoint::Probe,
            crate::profiles::upload(edge, request).await,
        ),
        (&Method::POST, path) if path.starts_with("/openrtb2/auction") => {
            let (answer, outcome) = crate::gateway::auction(edge, request, started).await;
            return (Endpoint::Auction, (answer.map(Either::Left), outcome));
        }
        (_, path) if path.starts_with("/gateway/") => {
            (Endpoint::Probe, crate::gateway::registry(edge, &request))
        }
        (&Method::GET, "/openrtb2/win") => (
            Endpoint::Notice,
            bidder::notice(edge, NoticeKind::Win, query).await,
        ),
        (&Method::GET, "/openrtb2/bill") => (
            Endpoint::Notice,
            bidder::notice(edge, NoticeKind::Billing, query).await,
        ),
        (&Method::GET, "/openrtb2/loss") => (
            Endpoint::Notice,
            bidder::notice(edge, NoticeKind::Loss, query).await,
        ),
        (&Method::GET, "/sync") => (
            Endpoint::Sync,
            bidder::sync_in(edge, query, request.headers()),
        ),
        (&Method::GET, "/sync/out") => (
            Endpoint::Sync,
            bidder::sync_out(edge, query, request.headers()),
        ),
        (&Method::GET | &Method::HEAD, "/tag.js") => (Endpoint::TagJs, handlers::tag_js()),
        (&Method::GET, "/metrics") => (
            Endpoint::Probe,
            metrics(edge, fallback, peer, &request).await,
        ),
        (&Method::GET | &Method::HEAD, "/readyz") => (Endpoint::Probe, handlers::readyz(edge)),
        (_, path) if path.starts_with("/log/") && edge.log_access.get().is_some() => {
            (Endpoint::Probe, log_service::answer(edge, &request).await)
        }
        _ => {
            let Some(router) = fallback else {
                return (Endpoint::Manager, edge_answer(handlers::not_found()));
            };
            // The manager's routes read whole bodies: a client that holds its body back is cut
            // after the header timeout without a frame (the head alone is covered by hyper),
            // and one that trickles it at the body timeout after its head was read.
            let limits = &edge.config.limits;
            let idle = limits.header_read_timeout;
            let by = tokio::time::Instant::from_std(started + limits.body_timeout);
            let mut request = request.map(|body| {
                axum::body::Body::new(IdleTimeout::new(body, idle, by).map_err(axum::Error::new))
            });
            // The peer's address, for the manager's routes (sign-in rate limiting).
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            // An axum router never fails: its error type is Infallible.
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let outcome = Outcome::from_status(response.status());
            return (Endpoint::Manager, (response.map(Either::Right), outcome));
        }
    };
    (endpoint, edge_answer(answer))
}

/// `GET /metrics` for the callers `edge.metrics_access` allows (a refusal carries no metric
/// data): the edge's metrics followed by the manager's (its router's `/metrics`), so that one
/// scrape of `marquee serve` sees both.
async fn metrics(
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
    let mine = handlers::metrics(edge);
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

/// Serves until `shutdown` resolves, then stops accepting and waits for open connections to
/// finish their requests.
///
/// Connections are served by one worker per CPU this process may run on, each a thread with a
/// single-threaded runtime accepting from the same listener. A worker runs its ready
/// connections first in, first out: on the work-stealing runtime, connections woken last ran
/// first while others waited, and with 2,048 connections on one core the p99 was five times the
/// median (docs/benchmarks.md). Nothing a request touches is shared between workers except the
/// edge's atomics and the snapshot.
pub async fn serve(
    listener: TcpListener,
    edge: Arc<Edge>,
    fallback: Option<Router>,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let listener = listener.into_std()?;
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    // Dropped or sent: either way the workers stop accepting.
    let (stop, stopped) = tokio::sync::watch::channel(());
    let mut finished = Vec::with_capacity(workers);
    for index in 0..workers {
        let listener = listener.try_clone()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (done, finish) = tokio::sync::oneshot::channel::<std::io::Result<()>>();
        let edge = Arc::clone(&edge);
        let fallback = fallback.clone();
        let mut stopped = stopped.clone();
        std::thread::Builder::new()
            .name(format!("edge-worker-{index}"))
            .spawn(move || {
                let served = runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener)?;
                    let stop = Box::pin(async move {
                        let _ = stopped.changed().await;
                    });
                    serve_here(listener, edge, fallback, stop).await;
                    Ok(())
                });
                let _ = done.send(served);
            })?;
        finished.push(finish);
    }
    drop(listener);
    shutdown.await;
    drop(stop);
    // Every worker gets its time to finish, whatever another one did (a worker that panicked
    // dropped its sender); the first error is the answer.
    let mut outcome = Ok(());
    for finish in finished {
        if let Ok(Err(error)) = finish.await {
            outcome = outcome.and(Err(error));
        }
    }
    outcome
}

/// One worker of [`serve`]: accepts and serves connections on the current runtime until
/// `shutdown` resolves, then waits for its open connections to finish their requests. Public
/// so that a test can run the edge on a runtime it controls.
pub async fn serve_here(
    listener: TcpListener,
    edge: Arc<Edge>,
    fallback: Option<Router>,
    shutdown: Shutdown,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let probe = tokio::spawn({
        let edge = Arc::clone(&edge);
        async move { edge.gate.probe_queue_delay().await }
    });
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
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
        let limits = edge.config.limits.clone();
        let edge = Arc::clone(&edge);
        let fallback = fallback.clone();
        let service =
            service_fn(move |request| dispatch(Arc::clone(&edge), fallback.clone(), peer, request));
        let connection = http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            // A client that does not finish its headers in time loses its connection.
            .header_read_timeout(limits.header_read_timeout)
            // A longer request head is answered 431 (hyper's own minimum is 8 KiB).
            .max_buf_size(limits.max_header_bytes.max(8192))
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
    probe.abort();
}
