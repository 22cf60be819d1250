//! Who may read `/metrics` over real connections: with a token, only its bearer (401
//! otherwise, with no metric data, counted as a probe's client error); without one, loopback
//! peers only (403 for others). In `marquee serve` the manager's metrics follow the edge's:
//! they are fetched only for an allowed scrape, with its credentials, peer and format passed
//! on. And what an allowed scrape reads: OpenMetrics for a scraper that asks for it, every
//! family named by the conventions and listed in `docs/operations.md`, and every metric the
//! page lists under the edge's prefixes exposed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::http::HeaderMap;
use axum::routing::get;
use marquee_edge::{Edge, Endpoint, Limits, Outcome};
use marquee_model::MetricsAccess;
use tokio::net::TcpSocket;

use crate::common;

const TOKEN: &str = "scrape-token-0123456789";

fn edge(dir: &std::path::Path, access: MetricsAccess) -> Arc<Edge> {
    let limits = Limits {
        max_queue_delay: None,
        ..Limits::default()
    };
    Arc::new(common::edge(dir, limits).with_metrics_access(access))
}

/// A stand-in for the manager's router: its `/metrics` answers, in the format asked for as the
/// manager's does, with a family naming what the edge passed on (the peer it saw, whether the
/// bearer token came along).
fn manager_router() -> axum::Router {
    async fn metrics(
        peer: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
        headers: HeaderMap,
    ) -> ([(&'static str, &'static str); 1], String) {
        let with_token = headers
            .get("authorization")
            .is_some_and(|value| value.as_bytes() == format!("Bearer {TOKEN}").as_bytes());
        let loopback = peer.is_some_and(|p| p.0.0.ip().is_loopback());
        let accept = headers.get("accept").and_then(|v| v.to_str().ok());
        let format = marquee_metrics::Format::negotiate(accept);
        let series = format!(
            "manager_budget_series{{with_token=\"{with_token}\",loopback=\"{loopback}\"}} 1\n"
        );
        let page = match format {
            marquee_metrics::Format::OpenMetrics => format!("{series}# EOF\n"),
            marquee_metrics::Format::Text => series,
        };
        ([("content-type", format.content_type())], page)
    }
    axum::Router::new().route("/metrics", get(metrics))
}

/// An address of this host that is not loopback (where the default route leaves from), if it
/// has one. No packet is sent: connecting a UDP socket only picks the route.
fn outside_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// `GET path` with `headers`, from a socket bound to `from` (so the edge sees that peer).
async fn scrape(to: SocketAddr, from: IpAddr, method: &str, headers: &str) -> Answer {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let stream = socket.connect(to).await.unwrap();
    let request =
        format!("{method} /metrics HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n{headers}\r\n");
    let bytes = common::exchange(stream, request.as_bytes()).await;
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete head");
    Answer {
        status: head.split(' ').nth(1).unwrap().parse().unwrap(),
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

fn loopback() -> IpAddr {
    IpAddr::from([127, 0, 0, 1])
}

fn assert_no_metric_data(answer: &Answer) {
    assert!(
        !answer.body.contains("marquee_") && !answer.body.contains("manager_"),
        "a refusal carried metrics: {}",
        answer.body
    );
}

#[tokio::test]
async fn with_a_token_only_its_bearer_reads_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path(), MetricsAccess::new(Some(TOKEN.into())));
    let address = common::serve_on(&edge, "127.0.0.1:0", Some(manager_router())).await;

    // From loopback too: with a token configured, the token is what counts.
    let missing = scrape(address, loopback(), "GET", "").await;
    assert_eq!(missing.status, 401, "{}", missing.body);
    assert!(
        missing
            .head
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{}",
        missing.head
    );
    assert!(missing.body.contains("metrics.token"), "{}", missing.body);
    assert_no_metric_data(&missing);

    let wrong = scrape(
        address,
        loopback(),
        "GET",
        "Authorization: Bearer scrape-token-0123456788\r\n",
    )
    .await;
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert_no_metric_data(&wrong);

    // Another scheme carrying the right value is no bearer token.
    let basic = scrape(
        address,
        loopback(),
        "GET",
        &format!("Authorization: Basic {TOKEN}\r\n"),
    )
    .await;
    assert_eq!(basic.status, 401, "{}", basic.body);
    assert_no_metric_data(&basic);

    let right = scrape(
        address,
        loopback(),
        "GET",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
    )
    .await;
    assert_eq!(right.status, 200, "{}", right.body);
    assert!(
        right.head.contains("text/plain; version=0.0.4"),
        "{}",
        right.head
    );
    assert!(
        right
            .body
            .contains("marquee_edge_requests_total{endpoint=\"probe\",outcome=\"client_error\"} 3"),
        "the three refusals are counted as a probe's client errors:\n{}",
        right.body
    );
    // The manager's part came with the scrape's token and peer.
    assert!(
        right
            .body
            .contains("manager_budget_series{with_token=\"true\",loopback=\"true\"} 1"),
        "{}",
        right.body
    );
    assert_eq!(
        edge.metrics.requests(Endpoint::Probe, Outcome::ClientError),
        3
    );
    assert_eq!(edge.metrics.requests(Endpoint::Probe, Outcome::Ok), 1);
}

#[tokio::test]
async fn without_a_token_loopback_peers_read_the_metrics_and_others_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path(), MetricsAccess::default());
    let address = common::serve_on(&edge, "0.0.0.0:0", Some(manager_router())).await;
    let to_loopback = SocketAddr::new(loopback(), address.port());

    let local = scrape(to_loopback, loopback(), "GET", "").await;
    assert_eq!(local.status, 200, "{}", local.body);
    assert!(local.body.contains("marquee_edge_requests_total"));
    assert!(
        local
            .body
            .contains("manager_budget_series{with_token=\"false\",loopback=\"true\"} 1"),
        "{}",
        local.body
    );

    let Some(outside) = outside_address() else {
        // The decision itself is unit-tested with such addresses (marquee-model's
        // metrics_access); only this host cannot make the connection.
        eprintln!("this host has no non-loopback address: the 403 over TCP is not exercised");
        return;
    };
    let to_outside = SocketAddr::new(outside, address.port());
    // A token sent without one configured changes nothing.
    for headers in ["", "Authorization: Bearer anything-at-all-123\r\n"] {
        let refused = scrape(to_outside, outside, "GET", headers).await;
        assert_eq!(refused.status, 403, "{}", refused.body);
        assert!(
            refused.body.contains("MARQUEE_METRICS__TOKEN"),
            "the reason says how to open it: {}",
            refused.body
        );
        assert_no_metric_data(&refused);
    }
    assert_eq!(
        edge.metrics.requests(Endpoint::Probe, Outcome::ClientError),
        2
    );
}

#[tokio::test]
async fn a_token_opens_the_metrics_to_other_addresses() {
    let Some(outside) = outside_address() else {
        eprintln!("this host has no non-loopback address: nothing to test");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path(), MetricsAccess::new(Some(TOKEN.into())));
    let address = common::serve_on(&edge, "0.0.0.0:0", None).await;
    let to = SocketAddr::new(outside, address.port());
    let refused = scrape(to, outside, "GET", "").await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    let allowed = scrape(
        to,
        outside,
        "GET",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
    )
    .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert!(allowed.body.contains("marquee_edge_requests_total"));
}

/// The families the edge exposes, by name prefix: the documentation check looks for the page's
/// names under these.
const PREFIXES: [&str; 10] = [
    "marquee_edge_",
    "marquee_bidder_",
    "marquee_eventlog_",
    "marquee_tracking_",
    "marquee_invalid_",
    "marquee_traffic_",
    "marquee_geo_",
    "marquee_snapshot_",
    // With `with_gateway` and `with_shared_state`.
    "marquee_gateway_",
    "marquee_redis_",
];

/// An edge with every part that adds families: a gateway, Redis (never reached), geo
/// databases and a snapshot.
async fn full_edge(dir: &std::path::Path) -> Arc<Edge> {
    let limits = Limits {
        max_queue_delay: None,
        ..Limits::default()
    };
    let gateway = marquee_gateway::Gateway::new(marquee_gateway::GatewayConfig {
        bidders: vec![marquee_gateway::BidderSpec::new(
            "dsp",
            "http://127.0.0.1:9/bid",
        )],
        internal_bidder: Some("marquee".into()),
        admin_token: TOKEN.into(),
        ..marquee_gateway::GatewayConfig::default()
    })
    .unwrap();
    let shared = marquee_sharedstate::SharedState::new(
        marquee_sharedstate::SharedConfig::new("redis://127.0.0.1:1"),
        Arc::new(marquee_model::SystemClock),
    )
    .unwrap();
    let database =
        marquee_geo::GeoDatabase::from_bytes(marquee_geo::demo::demo_database(), None).unwrap();
    let geo = Arc::new(marquee_geo::GeoSource::fixed(database));
    let edge = common::edge(dir, limits)
        .with_gateway(gateway)
        .with_shared_state(shared)
        .with_geo(geo);
    let snapshot = marquee_snapshot::Snapshot {
        version: 3,
        built_at: "2026-11-21T12:00:00Z".parse().unwrap(),
        data: marquee_snapshot::SnapshotData::default(),
    };
    edge.accept_snapshot(&snapshot.encode_with_header().1)
        .unwrap();
    Arc::new(edge)
}

#[tokio::test]
async fn the_edge_serves_conventional_documented_families() {
    let dir = tempfile::tempdir().unwrap();
    let edge = full_edge(dir.path()).await;
    let address = common::serve_on(&edge, "127.0.0.1:0", Some(manager_router())).await;
    let prometheus = "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1\r\n";
    let scraped = scrape(address, loopback(), "GET", prometheus).await;
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    assert!(
        scraped
            .head
            .to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{}",
        scraped.head
    );
    let page = &scraped.body;
    // One document: the manager's families follow the edge's, and one `# EOF` ends both.
    assert!(
        page.ends_with("manager_budget_series{with_token=\"false\",loopback=\"true\"} 1\n# EOF\n"),
        "{page}"
    );
    assert_eq!(page.matches("# EOF").count(), 1, "{page}");
    for line in [
        "# TYPE marquee_edge_requests counter",
        "# TYPE marquee_edge_request_duration_seconds histogram",
        "# UNIT marquee_eventlog_appended_bytes bytes",
        "marquee_snapshot_version 3",
        "marquee_snapshot_swaps_total 1",
        "marquee_geo_database_build_timestamp_seconds{database=\"location\"} 1735689600",
        "marquee_gateway_auctions_total 0",
        "marquee_redis_breaker_state 0",
    ] {
        assert!(page.lines().any(|l| l == line), "{line} in\n{page}");
    }
    assert_eq!(
        marquee_metrics::check::convention_violations(page),
        Vec::<String>::new()
    );
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operations.md"
    ))
    .unwrap();
    assert_eq!(
        marquee_metrics::check::documentation_gaps(page, &doc, &PREFIXES),
        Vec::<String>::new()
    );

    // Without asking for OpenMetrics (curl): the Prometheus text format, the manager's
    // families asked for in it too.
    let text = scrape(address, loopback(), "GET", "").await;
    assert!(
        text.head.contains("text/plain; version=0.0.4"),
        "{}",
        text.head
    );
    assert!(
        text.body
            .contains("# TYPE marquee_edge_requests_total counter\n"),
        "{}",
        text.body
    );
    assert!(
        !text.body.contains("# EOF") && !text.body.contains("# UNIT"),
        "{}",
        text.body
    );
    assert!(
        text.body
            .ends_with("manager_budget_series{with_token=\"false\",loopback=\"true\"} 1\n"),
        "{}",
        text.body
    );
}
