//! Following a manager over HTTP: ETag polling, swaps, rejection of bad snapshots, serving on
//! while the manager is away, and the local copy at restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Empty, Full};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use marquee_edge::Edge;
use marquee_edge::poll::{PollError, Polled, poll_once};
use marquee_snapshot::{Snapshot, SnapshotData};

use crate::common;

fn snapshot(version: u64) -> (Bytes, String) {
    let snapshot = Snapshot {
        version,
        built_at: "2026-11-21T12:00:00Z".parse().unwrap(),
        data: SnapshotData::default(),
    };
    let (header, bytes) = snapshot.encode_with_header();
    (Bytes::from(bytes), header.etag())
}

fn edge(dir: &std::path::Path) -> Arc<Edge> {
    Arc::new(common::edge(dir, marquee_edge::Limits::default()))
}

const SECRET: &str = "a-shared-secret";

/// A stand-in manager serving whatever `published` holds, with ETags, to callers with the
/// shared secret.
async fn manager(published: Arc<Mutex<(Bytes, String)>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let published = Arc::clone(&published);
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let (bytes, etag) = published.lock().unwrap().clone();
                let authorized = request
                    .headers()
                    .get("authorization")
                    .is_some_and(|v| v.to_str().unwrap() == format!("Bearer {SECRET}"));
                let unchanged = request
                    .headers()
                    .get("if-none-match")
                    .is_some_and(|v| v.to_str().unwrap() == etag);
                let response = if !authorized {
                    Response::builder()
                        .status(StatusCode::UNAUTHORIZED)
                        .body(Full::new(Bytes::new()))
                } else if unchanged {
                    Response::builder()
                        .status(StatusCode::NOT_MODIFIED)
                        .body(Full::new(Bytes::new()))
                } else {
                    Response::builder()
                        .header("etag", etag)
                        .body(Full::new(bytes))
                };
                async move { Ok::<_, Infallible>(response.unwrap()) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn polls_swap_reject_and_survive_an_absent_manager() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path());
    let published = Arc::new(Mutex::new(snapshot(1)));
    let url = manager(Arc::clone(&published)).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();

    // Without the shared secret the manager refuses, and nothing is installed.
    assert!(matches!(
        poll_once(&edge, &client, &url, "wrong").await,
        Err(PollError::Status(StatusCode::UNAUTHORIZED))
    ));
    assert_eq!(edge.holder.version(), None);

    assert_eq!(
        poll_once(&edge, &client, &url, SECRET).await.unwrap(),
        Polled::Installed(1)
    );
    assert_eq!(
        poll_once(&edge, &client, &url, SECRET).await.unwrap(),
        Polled::Unchanged
    );

    *published.lock().unwrap() = snapshot(2);
    assert_eq!(
        poll_once(&edge, &client, &url, SECRET).await.unwrap(),
        Polled::Installed(2)
    );
    assert_eq!(edge.holder.swaps(), 2);

    // A corrupted snapshot is rejected and counted; version 2 keeps serving.
    let (mut bytes, etag) = snapshot(3);
    let mut corrupt = bytes.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    bytes = Bytes::from(corrupt);
    *published.lock().unwrap() = (bytes, etag);
    assert_eq!(
        poll_once(&edge, &client, &url, SECRET).await.unwrap(),
        Polled::Unchanged
    );
    assert_eq!(edge.holder.rejected(), 1);
    assert_eq!(edge.holder.version(), Some(2));

    // A manager that is away is an error to log, not an outage.
    let gone = "http://127.0.0.1:9";
    assert!(matches!(
        poll_once(&edge, &client, gone, SECRET).await,
        Err(PollError::Unreachable(_))
    ));
    assert_eq!(edge.holder.version(), Some(2));

    // A restarted edge starts from the copy it kept.
    drop(edge);
    let restarted = edge_again(dir.path());
    assert_eq!(
        restarted
            .holder
            .install_local_copy(&dir.path().join("edge")),
        Some(2)
    );
}

fn edge_again(dir: &std::path::Path) -> Arc<Edge> {
    let other = dir.join("second");
    std::fs::create_dir_all(&other).unwrap();
    edge(&other)
}

/// A manager that accepts the connection and never answers (a hung process, a dropped link):
/// the poll gives up with a timeout instead of holding every later snapshot update back, and
/// the next poll of a manager that answers installs its snapshot.
#[tokio::test]
async fn a_manager_that_never_answers_times_the_poll_out() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path());
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    // A guard against hanging for ever, far above the bound: not a measurement.
    let polled = tokio::time::timeout(
        Duration::from_secs(120),
        poll_once(&edge, &client, &silent_url, SECRET),
    )
    .await
    .expect("the poll gives up on a silent manager");
    assert!(
        matches!(polled, Err(PollError::Timeout("answer", _))),
        "{polled:?}"
    );
    assert_eq!(edge.holder.version(), None);

    let url = manager(Arc::new(Mutex::new(snapshot(5)))).await;
    assert_eq!(
        poll_once(&edge, &client, &url, SECRET).await.unwrap(),
        Polled::Installed(5)
    );
    held.abort();
}
