//! `GET /metrics` through the manager's router, with the aggregator and pacing attached on the
//! demo data: OpenMetrics for a scraper that asks for it (as Prometheus does), the Prometheus
//! text format otherwise; every family named by the conventions and listed in
//! `docs/operations.md`, and every metric the page lists under the manager's prefixes exposed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use marquee_manager::{AggregationOptions, Aggregator, Pacing, PacingOptions};
use marquee_metrics::check;
use marquee_model::{Clock, ManualClock};
use tower::ServiceExt;

use crate::support;

/// The families each part of the manager exposes, by name prefix: the documentation check
/// looks for the page's names under these.
const PREFIXES: [&str; 4] = [
    // The aggregator.
    "marquee_aggregation_",
    // Pacing and its lease book.
    "marquee_pacing_",
    "marquee_lease_",
    // The edge registry.
    "marquee_registry_",
];

async fn scrape(router: &axum::Router, accept: Option<&str>) -> (StatusCode, String, String) {
    let mut request = Request::get("/metrics");
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT, accept);
    }
    let mut request = request.body(Body::empty()).unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000))));
    let answer = router.clone().oneshot(request).await.unwrap();
    let status = answer.status();
    let content_type = answer.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn the_manager_serves_conventional_documented_families() {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new("2026-12-01T12:00:00Z".parse().unwrap()));
    let store = support::demo_store(&dir.path().join("m.db"), &clock).await;
    let manager = support::open_manager(&store, &clock, &dir.path().join("snapshots"), 2).await;
    let aggregator = Aggregator::new(
        Arc::clone(&store),
        Arc::clone(&clock),
        Vec::new(),
        AggregationOptions::default(),
    );
    manager.attach_aggregator(Arc::new(aggregator));
    let pacing = Pacing::open(Arc::clone(&store), clock, PacingOptions::default())
        .await
        .unwrap();
    pacing.round().await.unwrap();
    manager.attach_pacing(Arc::new(pacing));
    let router = marquee_manager::router(&manager, "http://ads.example");

    let prometheus =
        "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
    let (status, content_type, page) = scrape(&router, Some(prometheus)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(page.ends_with("# EOF\n"), "{page}");
    // Every part registered, and the per line item series published for the scrape.
    for line in [
        "marquee_aggregation_runs_total 0",
        "marquee_pacing_rounds_total 1",
        "marquee_registry_id_conflicts_total{reason=\"process\"} 0",
    ] {
        assert!(page.lines().any(|l| l == line), "{line} in\n{page}");
    }
    assert!(page.contains("marquee_lease_limit{line_item=\""), "{page}");
    assert_eq!(check::convention_violations(&page), Vec::<String>::new());
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operations.md"
    ))
    .unwrap();
    assert_eq!(
        check::documentation_gaps(&page, &doc, &PREFIXES),
        Vec::<String>::new()
    );

    // Without asking for OpenMetrics (curl, the edge's page in `marquee serve`): the
    // Prometheus text format, counters' HELP and TYPE named as their samples.
    let (status, content_type, text) = scrape(&router, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(
        text.contains(
            "# TYPE marquee_aggregation_runs_total counter\nmarquee_aggregation_runs_total 0\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("# EOF") && !text.contains("# UNIT"),
        "{text}"
    );
}
