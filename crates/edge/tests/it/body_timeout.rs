//! A request body to the manager's routes (the edge's fallback) must be all there by
//! `Limits::body_timeout` after its head, however steadily it trickles: a client sending a byte
//! well inside the idle (header) timeout must not hold its connection for as long as it likes.
//! No test measures time: only that the server ends the request at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use marquee_edge::{Edge, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common;

fn edge(dir: &std::path::Path, limits: Limits) -> Arc<Edge> {
    Arc::new(common::edge(dir, limits))
}

/// Serves `edge` with a fallback that reads whole bodies (as the manager's routes do) on a
/// free loopback port until the test ends.
async fn start(edge: &Arc<Edge>) -> SocketAddr {
    let fallback = axum::Router::new().route(
        "/echo",
        post(|body: Bytes| async move { body.len().to_string() }),
    );
    common::serve_on(edge, "127.0.0.1:0", Some(fallback)).await
}

/// Sends a head announcing `length` bytes of body, then one byte every `every` until the server
/// stops reading; what the server answered before closing the connection, or `None` when it was
/// still open after `guard`.
async fn trickle(
    address: SocketAddr,
    length: usize,
    every: Duration,
    guard: Duration,
) -> Option<Vec<u8>> {
    let stream = TcpStream::connect(address).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: edge\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    write.write_all(head.as_bytes()).await.unwrap();
    let writer = tokio::spawn(async move {
        for _ in 0..length {
            tokio::time::sleep(every).await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
        }
        // Dropping the half would shut our side down, and the server closes a half-closed
        // connection without answering: keep it until the test is done reading.
        std::future::pending::<()>().await;
    });
    let mut answer = Vec::new();
    let ended = tokio::time::timeout(guard, read.read_to_end(&mut answer)).await;
    writer.abort();
    ended.ok().map(|_| answer)
}

#[tokio::test]
async fn a_trickled_body_ends_at_the_body_timeout_though_never_idle() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(
        dir.path(),
        Limits {
            max_queue_delay: None,
            // The idle limit: the trickle below never comes near it.
            header_read_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    );
    let address = start(&edge).await;
    // 1,000 bytes at 20 a second would take 50 s: only the body timeout ends it before the
    // guard.
    let answer = trickle(
        address,
        1_000,
        Duration::from_millis(50),
        Duration::from_secs(20),
    )
    .await
    .expect("the server ends a trickled body at its body timeout");
    let answer = String::from_utf8_lossy(&answer);
    // The manager's route could not read its body: 400, and the connection closes.
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
}

#[tokio::test]
async fn a_body_sent_in_time_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(
        dir.path(),
        Limits {
            max_queue_delay: None,
            body_timeout: Duration::from_secs(30),
            ..Limits::default()
        },
    );
    let address = start(&edge).await;
    let answer = trickle(
        address,
        3,
        Duration::from_millis(10),
        Duration::from_secs(20),
    )
    .await
    .expect("the server answers and closes the connection");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer.ends_with("\r\n\r\n3"), "{answer:?}");
}
