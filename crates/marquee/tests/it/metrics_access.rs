//! `/metrics` through the real binary: `marquee serve` (the edge's port, which carries the
//! manager's per-line-item budget and spend series too) and `marquee manager` (the management
//! port) answer it only to the bearer of `metrics.token` when one is set (401 otherwise), and
//! without one only to loopback peers (403 otherwise). A refusal carries no metric data.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Command;

use common::{BIN, Server};
use reqwest::StatusCode;

const TOKEN: &str = "metrics-test-token-0123456789";

/// Starts `marquee ROLE` on `listen` with `envs`; its server and port.
fn start(role: &str, data: &Path, listen: &str, envs: &[(&str, &str)]) -> (Server, u16) {
    let mut command = Command::new(BIN);
    command
        .args([role, "--demo", "--listen", listen, "--data"])
        .arg(data)
        .env("MARQUEE_LOG__LEVEL", "warn")
        // `marquee manager` needs the split roles' shared secret.
        .env("MARQUEE_AGGREGATION__TOKEN", "metrics-test-secret-0123")
        .envs(envs.iter().copied());
    let server = Server::spawn(command);
    let port = server
        .base
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .expect("a port in the announced address");
    (server, port)
}

/// An address of this host that is not loopback (where the default route leaves from), if it
/// has one. No packet is sent: connecting a UDP socket only picks the route.
fn outside_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// `METHOD /metrics` on `to` from a connection bound to `to`'s address (so the server sees
/// that peer), with `token` as the bearer if given.
async fn scrape(
    to: SocketAddr,
    method: reqwest::Method,
    token: Option<&str>,
) -> (StatusCode, String) {
    let client = reqwest::Client::builder()
        .local_address(Some(to.ip()))
        .build()
        .unwrap();
    let mut request = client.request(method, format!("http://{to}/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn assert_refused(answer: &(StatusCode, String), status: StatusCode, what: &str) {
    assert_eq!(answer.0, status, "{what}: {}", answer.1);
    assert!(
        !answer.1.contains("marquee_"),
        "{what}: a refusal carried metrics: {}",
        answer.1
    );
}

/// The series of both roles that `marquee serve`'s page shows.
fn assert_edge_and_manager_metrics(page: &str) {
    for series in [
        "marquee_edge_requests_total",
        "marquee_aggregation_runs_total",
        "marquee_pacing_rounds_total",
    ] {
        assert!(page.contains(series), "no {series} in:\n{page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_a_token_answers_only_its_bearer() {
    let data = tempfile::tempdir().unwrap();
    let (server, port) = start(
        "serve",
        data.path(),
        "0.0.0.0:0",
        &[("MARQUEE_METRICS__TOKEN", TOKEN)],
    );
    let get = reqwest::Method::GET;
    let local = loopback(port);
    let missing = scrape(local, get.clone(), None).await;
    assert_refused(&missing, StatusCode::UNAUTHORIZED, "no token");
    assert!(missing.1.contains("metrics.token"), "{}", missing.1);
    let wrong = scrape(local, get.clone(), Some("metrics-test-token-012345678X")).await;
    assert_refused(&wrong, StatusCode::UNAUTHORIZED, "wrong token");
    // HEAD is not the edge's route: the manager's router answers it, by the same rule.
    let head = scrape(local, reqwest::Method::HEAD, None).await;
    assert_eq!(head.0, StatusCode::UNAUTHORIZED, "HEAD without a token");

    let (status, page) = scrape(local, get.clone(), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_edge_and_manager_metrics(&page);
    assert!(
        page.contains("marquee_edge_requests_total{endpoint=\"probe\",outcome=\"client_error\"} 2"),
        "the two refused GETs are counted as a probe's client errors:\n{page}"
    );
    assert!(
        page.contains(
            "marquee_edge_requests_total{endpoint=\"manager\",outcome=\"client_error\"} 1"
        ),
        "the refused HEAD as the manager's:\n{page}"
    );

    // The token opens it to other addresses too.
    if let Some(outside) = outside_address() {
        let outside = SocketAddr::new(outside, port);
        let refused = scrape(outside, get.clone(), None).await;
        assert_refused(&refused, StatusCode::UNAUTHORIZED, "outside, no token");
        let (status, page) = scrape(outside, get, Some(TOKEN)).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_edge_and_manager_metrics(&page);
    } else {
        eprintln!("this host has no non-loopback address: scrapes from outside not exercised");
    }
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_a_token_answers_loopback_peers_only() {
    let data = tempfile::tempdir().unwrap();
    let (server, port) = start("serve", data.path(), "0.0.0.0:0", &[]);
    let (status, page) = scrape(loopback(port), reqwest::Method::GET, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_edge_and_manager_metrics(&page);

    let Some(outside) = outside_address() else {
        // The decision is unit-tested with such peers in marquee-model's metrics_access.
        eprintln!("this host has no non-loopback address: the 403 over TCP is not exercised");
        server.stop();
        return;
    };
    let outside = SocketAddr::new(outside, port);
    for method in [reqwest::Method::GET, reqwest::Method::HEAD] {
        let refused = scrape(outside, method.clone(), Some(TOKEN)).await;
        assert_refused(&refused, StatusCode::FORBIDDEN, method.as_str());
    }
    let refused = scrape(outside, reqwest::Method::GET, None).await;
    assert_refused(&refused, StatusCode::FORBIDDEN, "outside");
    assert!(
        refused.1.contains("MARQUEE_METRICS__TOKEN"),
        "the reason says how to open it: {}",
        refused.1
    );
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_alone_guards_its_metrics_the_same_way() {
    let get = reqwest::Method::GET;
    let data = tempfile::tempdir().unwrap();
    let (manager, port) = start("manager", data.path(), "0.0.0.0:0", &[]);
    let (status, page) = scrape(loopback(port), get.clone(), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("marquee_pacing_rounds_total"), "{page}");
    if let Some(outside) = outside_address() {
        let refused = scrape(SocketAddr::new(outside, port), get.clone(), None).await;
        assert_refused(&refused, StatusCode::FORBIDDEN, "manager, outside");
    } else {
        eprintln!("this host has no non-loopback address: the 403 over TCP is not exercised");
    }
    manager.stop();

    let data = tempfile::tempdir().unwrap();
    let (manager, port) = start(
        "manager",
        data.path(),
        "127.0.0.1:0",
        &[("MARQUEE_METRICS__TOKEN", TOKEN)],
    );
    let local = loopback(port);
    let missing = scrape(local, get.clone(), None).await;
    assert_refused(&missing, StatusCode::UNAUTHORIZED, "manager, no token");
    let wrong = scrape(local, get.clone(), Some("not-the-metrics-token-at-all")).await;
    assert_refused(&wrong, StatusCode::UNAUTHORIZED, "manager, wrong token");
    let (status, page) = scrape(local, get, Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("marquee_pacing_rounds_total"), "{page}");
    manager.stop();
}
