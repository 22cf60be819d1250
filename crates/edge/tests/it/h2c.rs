//! HTTP/2 without TLS (h2c, prior knowledge) on the edge's port beside HTTP/1.1: a real HTTP/2
//! client (hyper's, and curl where it is installed) gets the same answers as an HTTP/1.1 one,
//! several requests at once; a client that sends only part of the preface is
//! cut at the header timeout as an unfinished HTTP/1.1 head is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, StatusCode, Version};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use marquee_edge::{Endpoint, Outcome};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::common;
use crate::overload::{edge, impatient, limits, snapshot};

const BID: &str = r#"{"id":"a1","imp":[{"id":"1","banner":{"w":300,"h":250}}]}"#;

/// Sends `method path` with `body` and answers the status, version and body.
async fn send(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    address: SocketAddr,
    method: Method,
    path: &str,
    body: &str,
) -> (StatusCode, Version, Bytes) {
    let request = Request::builder()
        .method(method)
        .uri(format!("http://{address}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let (status, version) = (response.status(), response.version());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, version, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_with_prior_knowledge_gets_the_answers_an_http1_client_gets() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path(), limits());
    edge.accept_snapshot(&snapshot(1)).unwrap();
    let address = common::serve(&edge).await;
    let http2 = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let http1 = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    for (method, path, body) in [
        (Method::GET, "/readyz", ""),
        (Method::POST, "/openrtb2/bid", BID),
        (Method::GET, "/nowhere", ""),
    ] {
        let (status, version, answer) = send(&http2, address, method.clone(), path, body).await;
        assert_eq!(version, Version::HTTP_2, "{method} {path}");
        let (status1, version1, answer1) = send(&http1, address, method.clone(), path, body).await;
        assert_eq!(version1, Version::HTTP_11);
        assert_eq!((status, answer), (status1, answer1), "{method} {path}");
    }
    // Bid requests at once over HTTP/2 (streams of one connection): each is answered.
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let http2 = http2.clone();
            tokio::spawn(
                async move { send(&http2, address, Method::POST, "/openrtb2/bid", BID).await },
            )
        })
        .collect();
    for call in calls {
        let (status, version, _) = call.await.unwrap();
        assert_eq!((status, version), (StatusCode::NO_CONTENT, Version::HTTP_2));
    }
    // Two bid requests above, one per protocol, and these eight.
    assert_eq!(edge.metrics.requests(Endpoint::Bid, Outcome::Fallback), 10);
}

#[tokio::test]
async fn a_client_that_sends_part_of_the_preface_or_nothing_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let address = impatient(dir.path()).await;
    for sent in [&b"PRI * HTTP/2.0\r\n"[..], b""] {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(sent).await.unwrap();
        let mut answer = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
            .await
            .expect("the server closes the connection");
        // Closed with the unread bytes still in its socket, the server's end resets.
        match ended {
            Ok(_) => assert_eq!(answer, b"", "{sent:?}"),
            Err(error) => assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{sent:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_with_http2_prior_knowledge_is_answered_over_http2() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path(), limits());
    edge.accept_snapshot(&snapshot(1)).unwrap();
    let address = common::serve(&edge).await;
    let curl = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args([
                "--silent",
                "--http2-prior-knowledge",
                "--max-time",
                "10",
                "--output",
                "/dev/null",
                "--write-out",
                "%{http_version} %{http_code}",
                "--data",
                BID,
                "--header",
                "content-type: application/json",
            ])
            .arg(format!("http://{address}/openrtb2/bid"))
            .output()
    })
    .await
    .unwrap();
    let Ok(output) = curl else {
        eprintln!("curl is not installed: the hyper HTTP/2 client's test stands for it");
        return;
    };
    let written = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        written,
        "2 204",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
