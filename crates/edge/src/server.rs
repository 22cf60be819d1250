//! The edge's HTTP server on bare hyper: edge paths are answered here without a router
//! framework on the hot path; every other path goes to the fallback service (the manager's
//! axum router in `marquee serve`).
//!
//! A connection speaks HTTP/1.1, or HTTP/2 without TLS when its first bytes are HTTP/2's
//! connection preface (h2c with prior knowledge, as exchanges' bidders and `curl
//! --http2-prior-knowledge` send it); TLS ends in front of the edge.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use http_body_util::{BodyExt, Either};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use marquee_tracking::TokenKind;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

use crate::client::Client;
use crate::http::{self, Body};
use crate::idle_body::IdleTimeout;
use crate::metrics::{Endpoint, Outcome};
use crate::notice::NoticeKind;
use crate::{Edge, ad, bid, log_service, notice, sync, track};

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

/// Who sent `request`, for the traffic-quality screen.
fn client<'r>(edge: &'r Edge, peer: SocketAddr, request: &'r Request<Incoming>) -> Client<'r> {
    Client::of(
        Some(peer),
        request.method(),
        request.headers(),
        &edge.quality.rules.trusted_proxies,
    )
}

/// The tracking call a path is, with its endpoint.
fn tracking(path: &str) -> Option<(Endpoint, TokenKind)> {
    match path {
        "/t/i" => Some((Endpoint::Impression, TokenKind::Impression)),
        "/t/c" => Some((Endpoint::Click, TokenKind::Click)),
        "/t/v" => Some((Endpoint::Conversion, TokenKind::Conversion)),
        _ => None,
    }
}

/// The notice a path is.
fn notice_kind(path: &str) -> Option<NoticeKind> {
    match path {
        "/openrtb2/win" => Some(NoticeKind::Win),
        "/openrtb2/bill" => Some(NoticeKind::Billing),
        "/openrtb2/loss" => Some(NoticeKind::Loss),
        _ => None,
    }
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
            let client = client(edge, peer, &request);
            let (answer, outcome) = ad::request(edge, &request, &client, false, started).await;
            return (Endpoint::Ad, (answer.map(Either::Left), outcome));
        }
        (&Method::GET, "/ad.json") => {
            let client = client(edge, peer, &request);
            let (answer, outcome) = ad::request(edge, &request, &client, true, started).await;
            return (Endpoint::AdJson, (answer.map(Either::Left), outcome));
        }
        (&Method::GET | &Method::HEAD, path) if let Some((endpoint, kind)) = tracking(path) => {
            let client = client(edge, peer, &request);
            let headers = request.headers();
            (
                endpoint,
                track::track(edge, kind, query, headers, &client).await,
            )
        }
        (&Method::POST, path) if path.starts_with("/openrtb2/bid") => {
            let (answer, outcome) = bid::request(edge, request, started).await;
            return (Endpoint::Bid, (answer.map(Either::Left), outcome));
        }
        (&Method::POST, "/profiles") => (
            Endpoint::Profiles,
            crate::profiles::upload(edge, request).await,
        ),
        (&Method::POST, path) if path.starts_with("/openrtb2/auction") => {
            let (answer, outcome) = crate::gateway::auction(edge, request, started).await;
            return (Endpoint::Auction, (answer.map(Either::Left), outcome));
        }
        (_, path) if path.starts_with("/gateway/") => (
            Endpoint::GatewayRegistry,
            crate::gateway::registry(edge, &request),
        ),
        (&Method::GET, path) if let Some(kind) = notice_kind(path) => {
            (Endpoint::Notice, notice::notice(edge, kind, query).await)
        }
        (&Method::GET, "/sync") => (
            Endpoint::Sync,
            sync::sync_in(edge, query, request.headers()),
        ),
        (&Method::GET, "/sync/out") => (
            Endpoint::Sync,
            sync::sync_out(edge, query, request.headers()),
        ),
        (&Method::GET | &Method::HEAD, "/tag.js") => (Endpoint::TagJs, ad::tag_js()),
        (&Method::GET, "/metrics") => (
            Endpoint::Probe,
            http::metrics(edge, fallback, peer, &request).await,
        ),
        (&Method::GET | &Method::HEAD, "/readyz") => (Endpoint::Probe, http::readyz(edge)),
        (_, path) if path.starts_with("/log/") && edge.log_access.is_some() => (
            Endpoint::LogService,
            log_service::answer(edge, &request).await,
        ),
        _ => {
            return (
                Endpoint::Manager,
                manager(edge, fallback, peer, request, started).await,
            );
        }
    };
    (endpoint, edge_answer(answer))
}

/// Every other path: the manager's router (in `marquee serve`), else 404.
async fn manager(
    edge: &Edge,
    fallback: Option<Router>,
    peer: SocketAddr,
    request: Request<Incoming>,
    started: Instant,
) -> (Answer, Outcome) {
    let Some(router) = fallback else {
        return edge_answer(http::not_found());
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
    (response.map(Either::Right), outcome)
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
    // Dropped when the worker stops accepting: connections still telling their protocol stop.
    let (stopping, stop_waiting) = tokio::sync::watch::channel(());
    let builders = Arc::new(Builders::new(&edge.config.limits));
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
        let header_read_timeout = edge.config.limits.header_read_timeout;
        let edge = Arc::clone(&edge);
        let fallback = fallback.clone();
        let service =
            service_fn(move |request| dispatch(Arc::clone(&edge), fallback.clone(), peer, request));
        let builders = Arc::clone(&builders);
        let watcher = graceful.watcher();
        let mut stop_waiting = stop_waiting.clone();
        tokio::spawn(async move {
            // A client that sends nothing, or only part of the preface, is cut after the header
            // timeout as an unfinished HTTP/1.1 head is.
            let protocol = tokio::select! {
                told = tokio::time::timeout(header_read_timeout, protocol(&stream)) => told,
                _ = stop_waiting.changed() => return,
            };
            let io = TokioIo::new(stream);
            let served = match protocol {
                Ok(Ok(Protocol::Http1)) => {
                    watcher
                        .watch(builders.http1.serve_connection(io, service))
                        .await
                }
                Ok(Ok(Protocol::Http2)) => {
                    watcher
                        .watch(builders.http2.serve_connection(io, service))
                        .await
                }
                Ok(Err(_)) | Err(_) => return,
            };
            if let Err(error) = served {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    drop(stopping);
    graceful.shutdown().await;
    probe.abort();
}

/// The connection settings of a worker, made once.
struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Builders {
    fn new(limits: &crate::Limits) -> Builders {
        let mut http1 = http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            // A client that does not finish its headers in time loses its connection.
            .header_read_timeout(limits.header_read_timeout)
            // A longer request head is answered 431 (hyper's own minimum is 8 KiB).
            .max_buf_size(limits.max_header_bytes.max(8192));
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            // The same bound on a request's headers (HPACK-decoded; a longer list is refused).
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            // An idle HTTP/1.1 connection ends at the header timeout; an idle HTTP/2 one is
            // pinged then, and ends when the ping goes unanswered (a peer gone silently).
            .keep_alive_interval(limits.header_read_timeout);
        Builders { http1, http2 }
    }
}

/// What a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// The first bytes of an HTTP/2 connection (RFC 9113, section 3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the client speaks, from its first bytes, which are left in the socket for the server
/// to read: one `recv(MSG_PEEK)` per connection, nothing per request (the HTTP/1.1 server
/// reads the socket itself, not through a wrapper). An error when the client closes first.
async fn protocol(stream: &TcpStream) -> std::io::Result<Protocol> {
    let mut first = [0u8; H2_PREFACE.len()];
    let mut pause = Duration::from_millis(1);
    loop {
        let peeked = stream.peek(&mut first).await?;
        if peeked == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if first[..peeked] != H2_PREFACE[..peeked] {
            return Ok(Protocol::Http1);
        }
        if peeked == H2_PREFACE.len() {
            return Ok(Protocol::Http2);
        }
        // The start of the preface only (clients send it in one write, so this is rare or
        // deliberate): a peek returns the same bytes at once until more arrive, so wait between
        // peeks, longer each time (a few dozen peeks until the header timeout).
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}
