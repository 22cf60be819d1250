//! What the edge's tests share: an edge on a temporary directory, and HTTP/1.1 spoken by hand
//! on a new connection (so a test controls every byte the server sees).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use marquee_edge::{Edge, EdgeConfig, Fallback, Limits};
use marquee_eventlog::EventLog;
use marquee_tracking::KeyRing;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An edge with its event log in `dir/events` and its state in `dir/edge`, answering with
/// `limits`; callers add a gateway, metrics access or shared state as they need.
pub fn edge(dir: &Path, limits: Limits) -> Edge {
    edge_with_log(dir, limits, Arc::new(log(dir)))
}

/// The event log [`edge`] opens, for a test that reads it back.
pub fn log(dir: &Path) -> EventLog {
    EventLog::open(dir.join("events"), marquee_eventlog::Config::default()).unwrap()
}

/// [`edge`] appending to `log`.
pub fn edge_with_log(dir: &Path, limits: Limits, log: Arc<EventLog>) -> Edge {
    let keys = KeyRing::new(1, [(1u8, &[9u8; 32][..])]).unwrap();
    Edge::new(
        EdgeConfig {
            public_url: "http://127.0.0.1".into(),
            token_lifetime: Duration::from_secs(600),
            fallback: Fallback::Empty,
            cookies: false,
            country_header: None,
            data_dir: dir.join("edge"),
            limits,
        },
        log,
        keys,
    )
}

/// Serves `edge` on a free loopback port until the test ends; the address it listens on.
pub async fn serve(edge: &Arc<Edge>) -> SocketAddr {
    serve_on(edge, "127.0.0.1:0", None).await
}

/// Serves `edge` on `bind` (port 0), with the manager's routes replaced by `fallback`, until
/// the test ends; the address it listens on.
pub async fn serve_on(edge: &Arc<Edge>, bind: &str, fallback: Option<axum::Router>) -> SocketAddr {
    let listener = TcpListener::bind(bind).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(marquee_edge::serve(
        listener,
        Arc::clone(edge),
        fallback,
        Box::pin(std::future::pending()),
    ));
    address
}

/// Writes `request` on `stream` and reads until the server closes the connection (10 s at
/// most, else the test fails).
pub async fn exchange(mut stream: TcpStream, request: &[u8]) -> Vec<u8> {
    stream.write_all(request).await.unwrap();
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .expect("the server closes the connection")
        .unwrap();
    bytes
}

/// Sends raw request bytes on a new connection and reads until the server closes it.
pub async fn raw(address: SocketAddr, request: &[u8]) -> Vec<u8> {
    exchange(TcpStream::connect(address).await.unwrap(), request).await
}

/// Sends one request (`headers` are whole lines, each ending in CRLF) on a new connection;
/// gives the status and the body.
pub async fn send(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let text = String::from_utf8_lossy(&raw(address, request.as_bytes()).await).into_owned();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}
