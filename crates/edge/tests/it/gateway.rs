//! Gateway mode through the edge's server: `POST /openrtb2/auction` runs the auction among
//! mock bidders on loopback and answers the winner; a full gate answers 204 at once; the
//! registry API lists bidders and switches them behind its token; `/metrics` shows them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use marquee_edge::{Edge, Limits};
use marquee_gateway::{BidderSpec, Gateway, GatewayConfig};
use tokio::net::TcpListener;

use crate::common::{self, send};

const TOKEN: &str = "gateway-admin-token-0123";

/// A bidder that answers every request with one bid at `price` for imp "1" of auction "g1".
async fn fixed_bidder(name: &'static str, price: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let service = service_fn(
                    move |_request: Request<hyper::body::Incoming>| async move {
                        let body = format!(
                            r#"{{"id":"g1","seatbid":[{{"seat":"{name}","bid":[{{"id":"b1","impid":"1","price":{price},"adm":"<b>{name}</b>","w":300,"h":250}}]}}]}}"#
                        );
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(
                            body,
                        ))))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    address
}

async fn start(
    dir: &std::path::Path,
    bidders: &[(&'static str, SocketAddr)],
) -> (Arc<Edge>, SocketAddr) {
    let edge = common::edge(
        dir,
        Limits {
            max_in_flight: 1,
            // A loaded test machine runs late by more than the default now and then;
            // these tests are about the auction, not about shedding on queue delay.
            max_queue_delay: None,
            ..Limits::default()
        },
    );
    let gateway = Gateway::new(GatewayConfig {
        bidders: bidders
            .iter()
            .map(|(name, address)| BidderSpec::new(*name, format!("http://{address}/bid")))
            .collect(),
        internal_bidder: Some("marquee".into()),
        admin_token: TOKEN.into(),
        ..GatewayConfig::default()
    })
    .unwrap();
    let edge = Arc::new(edge.with_gateway(gateway));
    let address = common::serve(&edge).await;
    (edge, address)
}

const REQUEST: &str = r#"{"id":"g1","imp":[{"id":"1","banner":{"w":300,"h":250}}],"tmax":2000}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auction_endpoint_answers_the_winner_and_the_registry_switches_bidders() {
    let dir = tempfile::tempdir().unwrap();
    let low = fixed_bidder("low", "1").await;
    let high = fixed_bidder("high", "2").await;
    let (edge, address) = start(dir.path(), &[("low", low), ("high", high)]).await;

    let (status, body) = send(address, "POST", "/openrtb2/auction", "", REQUEST).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"seat\":\"high\"") && body.contains("\"price\":2"),
        "{body}"
    );
    let (status, _) = send(address, "POST", "/openrtb2/auction/nosuch", "", REQUEST).await;
    assert_eq!(status, 404, "an exchange that is not configured");
    let (status, _) = send(address, "POST", "/openrtb2/auction", "", "{\"id\":").await;
    assert_eq!(status, 400);

    // Full: the one place is held, so the next request is answered 204 at once.
    let held = edge.try_admit().unwrap();
    let (status, _) = send(address, "POST", "/openrtb2/auction", "", REQUEST).await;
    assert_eq!(status, 204);
    drop(held);

    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let (status, _) = send(address, "GET", "/gateway/bidders", "", "").await;
    assert_eq!(status, 401);
    let (status, body) = send(address, "GET", "/gateway/bidders", &auth, "").await;
    assert_eq!(status, 200);
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = listed["bidders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["marquee", "low", "high"]);
    assert_eq!(listed["bidders"][2]["wins"], 1);
    let (status, body) = send(address, "POST", "/gateway/bidders/high/disable", &auth, "").await;
    assert_eq!(status, 200);
    assert!(body.contains("\"enabled\":false"), "{body}");
    let (status, _) = send(
        address,
        "POST",
        "/gateway/bidders/nobody/disable",
        &auth,
        "",
    )
    .await;
    assert_eq!(status, 404);
    let (_, body) = send(address, "POST", "/openrtb2/auction", "", REQUEST).await;
    assert!(
        body.contains("\"seat\":\"low\""),
        "the disabled bidder is not called: {body}"
    );

    let (_, metrics) = send(address, "GET", "/metrics", "", "").await;
    assert!(
        metrics.contains("marquee_gateway_bidder_requests_total{bidder=\"high\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("marquee_edge_requests_total{endpoint=\"auction\",outcome=\"shed\"} 1")
    );
}
