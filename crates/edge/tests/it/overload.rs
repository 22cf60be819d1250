//! Overload and operability of the edge's server: shedding answers at once when the edge is
//! saturated, deadlines abandon work, request head limits and the slow-client timeout hold,
//! `/readyz` follows the snapshot, `/metrics` parses and its counts move. No test measures
//! time: saturation is a held place in the gate, a passed deadline is a zero deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use marquee_edge::{Edge, Endpoint, Limits, Outcome};
use marquee_snapshot::{Snapshot, SnapshotData};
use tokio::net::TcpListener;

use crate::common::{self, raw};

pub(crate) fn snapshot(version: u64) -> Vec<u8> {
    Snapshot {
        version,
        built_at: "2026-11-21T12:00:00Z".parse().unwrap(),
        data: SnapshotData::default(),
    }
    .encode_with_header()
    .1
}

/// The default limits without shedding on queue delay: a loaded test machine runs late by
/// more than its default now and then, and only one test here is about that signal.
pub(crate) fn limits() -> Limits {
    Limits {
        max_queue_delay: None,
        ..Limits::default()
    }
}

pub(crate) fn edge(dir: &std::path::Path, limits: Limits) -> Arc<Edge> {
    Arc::new(common::edge(dir, limits))
}

/// A served edge that gives a client 100 ms to send its request head.
pub(crate) async fn impatient(dir: &std::path::Path) -> SocketAddr {
    let edge = edge(
        dir,
        Limits {
            header_read_timeout: Duration::from_millis(100),
            ..limits()
        },
    );
    common::serve(&edge).await
}

/// A served edge with one place for requests in flight and an empty snapshot.
async fn one_place(dir: &std::path::Path) -> (Arc<Edge>, SocketAddr) {
    let edge = edge(
        dir,
        Limits {
            max_in_flight: 1,
            ..limits()
        },
    );
    edge.accept_snapshot(&snapshot(1)).unwrap();
    let address = common::serve(&edge).await;
    (edge, address)
}

struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

async fn get(address: SocketAddr, path: &str) -> Answer {
    let request = format!("GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n");
    let bytes = raw(address, request.as_bytes()).await;
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = String::from_utf8(bytes[..split].to_vec()).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Answer {
        status,
        head,
        body: bytes[split + 4..].to_vec(),
    }
}

#[tokio::test]
async fn a_saturated_edge_answers_ad_requests_at_once_with_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let (edge, address) = one_place(dir.path()).await;

    // A request in progress holds the only place: the next ones are shed, not queued behind it.
    let held = edge.try_admit().expect("a free place");
    let html = get(address, "/ad?placement=1").await;
    assert_eq!(html.status, 200);
    assert!(html.body.is_empty(), "the empty fallback");
    let img = get(address, "/ad?placement=1&format=img").await;
    assert!(img.head.contains("image/gif"), "{}", img.head);
    assert!(img.body.starts_with(b"GIF89a"));
    let json = get(address, "/ad.json?placement=1").await;
    assert_eq!(json.body, b"{\"ads\":[]}");
    // Beacons are never shed: they carry billing events.
    assert_eq!(get(address, "/t/i?t=x").await.status, 200);
    assert_eq!(edge.counters.shed.get(), 3);
    assert_eq!(edge.metrics.requests(Endpoint::Ad, Outcome::Shed), 2);
    assert_eq!(edge.metrics.requests(Endpoint::AdJson, Outcome::Shed), 1);

    // Once the place is free, requests start again (and find no ad in an empty snapshot).
    drop(held);
    get(address, "/ad?placement=1").await;
    assert_eq!(edge.counters.shed.get(), 3);
    assert_eq!(edge.metrics.requests(Endpoint::Ad, Outcome::Fallback), 1);
    assert_eq!(edge.gate.in_flight(), 0, "every place came back");
}

async fn post(address: SocketAddr, path: &str, body: &str) -> Answer {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let bytes = raw(address, request.as_bytes()).await;
    let head = String::from_utf8_lossy(&bytes).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Answer {
        status,
        head,
        body: Vec::new(),
    }
}

#[tokio::test]
async fn a_saturated_edge_answers_bid_requests_at_once_with_no_bid() {
    let dir = tempfile::tempdir().unwrap();
    let (edge, address) = one_place(dir.path()).await;
    let request = r#"{"id":"a1","imp":[{"id":"1","banner":{"w":300,"h":250}}]}"#;

    let held = edge.try_admit().expect("a free place");
    let shed = post(address, "/openrtb2/bid", request).await;
    assert_eq!(shed.status, 204, "{}", shed.head);
    // Notices are never shed: billing spends.
    assert_eq!(get(address, "/openrtb2/bill?t=x").await.status, 200);
    assert_eq!(edge.metrics.requests(Endpoint::Bid, Outcome::Shed), 1);
    assert_eq!(edge.bidder.counters.shed.get(), 1);

    // With the place free, the request is read and decided (nothing to bid on: 204 too).
    drop(held);
    assert_eq!(post(address, "/openrtb2/bid", request).await.status, 204);
    assert_eq!(edge.metrics.requests(Endpoint::Bid, Outcome::Fallback), 1);
    assert_eq!(edge.gate.in_flight(), 0, "every place came back");
}

/// Blocking GET on a new connection, for a client outside the server's runtime.
fn blocking_get(address: SocketAddr, path: &str) -> Vec<u8> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    bytes
}

/// The edge alone on a single-threaded runtime whose only worker is kept busy 60 ms at a time
/// (the stand-in for a backlog of ready requests) until the returned flag is cleared. The
/// in-flight bound is off and `max_queue_delay` 10 ms, so only the queue delay can shed, past
/// the longer of 10 ms and three quarters of the ad `deadline`. Gives the edge, its address
/// and the flag.
fn edge_behind_a_busy_worker(
    dir: &std::path::Path,
    deadline: Duration,
) -> (Arc<Edge>, SocketAddr, Arc<std::sync::atomic::AtomicBool>) {
    let edge = edge(
        dir,
        Limits {
            max_in_flight: 0,
            max_queue_delay: Some(Duration::from_millis(10)),
            deadline,
            ..limits()
        },
    );
    let busy = Arc::new(std::sync::atomic::AtomicBool::new(true));
    edge.accept_snapshot(&snapshot(1)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let (server_edge, busy_worker) = (Arc::clone(&edge), Arc::clone(&busy));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            tokio::spawn(async move {
                while busy_worker.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(60));
                    tokio::task::yield_now().await;
                }
            });
            let listener = TcpListener::from_std(listener).unwrap();
            let _ = tokio::time::timeout(
                Duration::from_secs(30),
                marquee_edge::serve_here(
                    listener,
                    server_edge,
                    None,
                    Box::pin(std::future::pending()),
                ),
            )
            .await;
        });
    });
    (edge, address, busy)
}

/// Behind by about 60 ms, past three quarters of the default 50 ms ad deadline (and the 10 ms
/// limit): requests are shed at once; once the worker is free again, they are served.
#[test]
fn a_worker_behind_its_queue_sheds_requests_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (edge, address, busy) = edge_behind_a_busy_worker(dir.path(), limits().deadline);
    let shed = || edge.counters.shed.get();

    let mut answered = 0;
    while shed() == 0 && answered < 100 {
        let answer = blocking_get(address, "/ad.json?placement=1");
        assert!(answer.starts_with(b"HTTP/1.1 200"));
        assert!(answer.ends_with(b"{\"ads\":[]}"), "the fallback");
        answered += 1;
    }
    assert!(shed() > 0, "a worker behind its queue sheds");
    assert!(edge.metrics.requests(Endpoint::AdJson, Outcome::Shed) > 0);

    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    let started = edge.metrics.requests(Endpoint::AdJson, Outcome::Fallback);
    for _ in 0..1_000 {
        blocking_get(address, "/ad.json?placement=1");
        if edge.metrics.requests(Endpoint::AdJson, Outcome::Fallback) > started {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        edge.metrics.requests(Endpoint::AdJson, Outcome::Fallback) > started,
        "once the worker keeps up, requests start again"
    );
}

/// The same 60 ms backlog with a 200 ms ad deadline: an ad request may wait three quarters of
/// its deadline (150 ms) before any is shed, whatever the shorter `max_queue_delay` says, so
/// every request starts.
#[test]
fn an_ad_request_may_wait_three_quarters_of_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (edge, address, busy) = edge_behind_a_busy_worker(dir.path(), Duration::from_millis(200));
    for _ in 0..20 {
        let answer = blocking_get(address, "/ad.json?placement=1");
        assert!(answer.starts_with(b"HTTP/1.1 200"));
    }
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(edge.counters.shed.get(), 0);
    assert_eq!(edge.metrics.requests(Endpoint::AdJson, Outcome::Shed), 0);
    assert!(edge.metrics.requests(Endpoint::AdJson, Outcome::Fallback) >= 20);
}

#[tokio::test]
async fn work_past_the_deadline_is_abandoned_with_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(
        dir.path(),
        Limits {
            deadline: Duration::ZERO,
            ..limits()
        },
    );
    edge.accept_snapshot(&snapshot(1)).unwrap();
    let address = common::serve(&edge).await;
    let answer = get(address, "/ad.json?placement=1,2").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, b"{\"ads\":[]}");
    let answer = get(address, "/ad?placement=1&format=js").await;
    assert!(answer.head.contains("javascript"), "{}", answer.head);
    assert_eq!(edge.counters.late.get(), 2);
    assert_eq!(edge.metrics.requests(Endpoint::AdJson, Outcome::Late), 1);
    assert_eq!(edge.metrics.requests(Endpoint::Ad, Outcome::Late), 1);
    // Nothing was decided, so nothing was logged.
    assert_eq!(edge.log.counters().appended, 0);
    // A bad request is still a 400, not a late fallback.
    assert_eq!(get(address, "/ad?placement=x").await.status, 400);
}

#[tokio::test]
async fn readyz_follows_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path(), limits());
    let address = common::serve(&edge).await;
    let before = get(address, "/readyz").await;
    assert_eq!(before.status, 503);
    edge.accept_snapshot(&snapshot(7)).unwrap();
    let after = get(address, "/readyz").await;
    assert_eq!(after.status, 200);
    assert_eq!(after.body, b"ready: snapshot 7\n");
}

/// Parses the text format: `name{labels} value` samples, `# HELP` / `# TYPE` comments.
fn parse_metrics(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.insert(name.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line:?}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .filter(|base| typed.contains(*base))
            .unwrap_or(name);
        assert!(typed.contains(family), "{name} has no # TYPE before it");
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            assert!(labels.starts_with('{') && labels.ends_with('}'), "{line:?}");
        }
        assert!(
            samples.insert(series.to_owned(), value).is_none(),
            "{series} twice"
        );
    }
    samples
}

#[tokio::test]
async fn metrics_parse_and_their_counts_move() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path(), limits());
    let address = common::serve(&edge).await;
    let before = parse_metrics(&String::from_utf8(get(address, "/metrics").await.body).unwrap());
    assert_eq!(before["marquee_snapshot_loaded"], 0.0);
    assert!(!before.contains_key("marquee_snapshot_version"));

    edge.accept_snapshot(&snapshot(3)).unwrap();
    for _ in 0..3 {
        get(address, "/ad?placement=1").await;
    }
    get(address, "/ad?placement=bad").await;
    get(address, "/t/c?t=forged").await;
    let metrics = get(address, "/metrics").await;
    assert!(metrics.head.contains("text/plain; version=0.0.4"));
    let after = parse_metrics(&String::from_utf8(metrics.body).unwrap());
    let ad = |outcome: &str| {
        after[&format!("marquee_edge_requests_total{{endpoint=\"ad\",outcome=\"{outcome}\"}}")]
    };
    assert_eq!(ad("fallback"), 3.0);
    assert_eq!(ad("client_error"), 1.0);
    assert_eq!(
        after["marquee_edge_request_duration_seconds_count{endpoint=\"ad\"}"],
        4.0
    );
    assert_eq!(
        after["marquee_edge_request_duration_seconds_bucket{le=\"+Inf\",endpoint=\"ad\"}"],
        4.0
    );
    assert_eq!(after["marquee_edge_invalid_tokens_total"], 1.0);
    assert_eq!(after["marquee_edge_bad_requests_total"], 1.0);
    assert_eq!(after["marquee_snapshot_loaded"], 1.0);
    assert_eq!(after["marquee_snapshot_version"], 3.0);
    assert_eq!(after["marquee_snapshot_swaps_total"], 1.0);
    assert!(after["marquee_snapshot_age_seconds"] > 0.0);
    // The first scrape is counted as a probe by the second.
    assert!(after["marquee_edge_requests_total{endpoint=\"probe\",outcome=\"ok\"}"] >= 1.0);
    assert_eq!(after["marquee_edge_max_in_flight"], 1024.0);
    assert_eq!(after["marquee_edge_in_flight"], 0.0);
    assert!(after.contains_key("marquee_edge_queue_delay_seconds"));
    assert!(after.contains_key("marquee_eventlog_fsyncs_total"));
}

#[tokio::test]
async fn an_oversized_request_head_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(
        dir.path(),
        Limits {
            max_header_bytes: 8_192,
            ..limits()
        },
    );
    let address = common::serve(&edge).await;
    let padding = "a".repeat(10_000);
    let request = format!("GET /ad?placement=1 HTTP/1.1\r\nHost: edge\r\nX-Pad: {padding}\r\n\r\n");
    let answer = raw(address, request.as_bytes()).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 431"),
        "{:?}",
        String::from_utf8_lossy(&answer[..answer.len().min(80)])
    );
    // A head within the limit is served.
    let ok = format!(
        "GET /readyz HTTP/1.1\r\nHost: edge\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
        &padding[..4_000]
    );
    assert!(
        raw(address, ok.as_bytes())
            .await
            .starts_with(b"HTTP/1.1 503")
    );
}

#[tokio::test]
async fn a_client_that_does_not_finish_its_headers_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let address = impatient(dir.path()).await;
    // Half a request head, then silence: the server closes the connection (`raw` fails the
    // test if it is still open after 10 s).
    let answer = raw(address, b"GET /ad?placement=1 HTTP/1.1\r\nHost: ed").await;
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
}
