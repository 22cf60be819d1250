//! The edge registry through the manager's router: `POST /internal/v1/edges` needs the shared
//! secret (403 while remote edges are off, 401 without it), names what is wrong with a bad
//! report (400), registers a good one (204) as a log source of the aggregator, a manager
//! reopened on the same store collects from it again before it reports, and
//! `DELETE /internal/v1/edges/{id}` forgets it for good.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use jiff::Timestamp;
use marquee_manager::{AggregationOptions, Aggregator, Manager};
use marquee_model::{Clock, ManualClock};
use marquee_pacing::{EdgeId, EdgeReport};
use marquee_store::{SqliteStore, Store};
use tempfile::TempDir;
use tower::ServiceExt;

use crate::support;

const SECRET: &str = "0123456789abcdef";

fn report(id: &str, requests: u64, at: Timestamp) -> EdgeReport {
    EdgeReport {
        id: id.into(),
        public_url: "http://ads.example.com".into(),
        log_url: "http://10.0.0.7:8080".into(),
        pacing_edge: EdgeId(42),
        snapshot_version: None,
        snapshot_built_at: None,
        requests_total: requests,
        sent_at: at,
    }
}

/// A manager on `store` with an aggregator of no configured sources attached.
async fn manager(
    dir: &TempDir,
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
) -> (Arc<Manager>, Arc<Aggregator>) {
    let manager = support::open_manager(store, clock, &dir.path().join("snapshots"), 2).await;
    let aggregator = Arc::new(Aggregator::new(
        Arc::clone(store),
        Arc::clone(clock),
        Vec::new(),
        AggregationOptions::default(),
    ));
    manager.attach_aggregator(Arc::clone(&aggregator));
    (manager, aggregator)
}

fn post(secret: Option<&str>, body: String) -> Request<Body> {
    let mut request = Request::post("/internal/v1/edges");
    if let Some(secret) = secret {
        request = request.header(header::AUTHORIZATION, format!("Bearer {secret}"));
    }
    request.body(Body::from(body)).unwrap()
}

async fn answer(router: &axum::Router, request: Request<Body>) -> (StatusCode, String) {
    let answer = router.clone().oneshot(request).await.unwrap();
    let status = answer.status();
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn edges_register_with_the_secret_and_are_collected_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let start = Timestamp::from_second(1_780_000_000).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(start));
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("m.db"), Arc::clone(&clock)).unwrap());
    let (first, aggregator) = manager(&dir, &store, &clock).await;
    let router = marquee_manager::router(&first, "http://ads.example.com");
    let good = serde_json::to_string(&report("eu-1", 0, start)).unwrap();

    let (status, text) = answer(&router, post(Some(SECRET), good.clone())).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "remote edges are off: {text}"
    );

    first.accept_remote_edges(SECRET.into()).await.unwrap();
    for secret in [None, Some("wrong-secret-0000")] {
        let (status, _) = answer(&router, post(secret, good.clone())).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{secret:?}");
    }
    let (status, text) = answer(&router, post(Some(SECRET), "{\"id\":\"x\"}".into())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("public_url"), "{text}");
    let bad_id = serde_json::to_string(&report("local", 0, start)).unwrap();
    let (status, text) = answer(&router, post(Some(SECRET), bad_id)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("`id`"), "{text}");
    assert!(aggregator.source_names().is_empty());

    let (status, text) = answer(&router, post(Some(SECRET), good)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    let later = start
        .checked_add(jiff::SignedDuration::from_secs(2))
        .unwrap();
    let second = serde_json::to_string(&report("eu-1", 1_000, later)).unwrap();
    assert_eq!(
        answer(&router, post(Some(SECRET), second)).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(aggregator.source_names(), ["eu-1"]);
    let listed = first.edges();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "eu-1");
    assert_eq!(listed[0].log_url.as_deref(), Some("http://10.0.0.7:8080"));
    assert_eq!(listed[0].request_rate, 500.0);
    assert!(listed[0].live);

    let list = Request::get("/internal/v1/edges")
        .header(header::AUTHORIZATION, format!("Bearer {SECRET}"))
        .body(Body::empty())
        .unwrap();
    let (status, text) = answer(&router, list).await;
    assert_eq!(status, StatusCode::OK);
    let listed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(listed["edges"][0]["id"], "eu-1");
    assert_eq!(listed["edges"][0]["request_rate"], 500.0);

    // A new manager on the same store: the edge is a source before it reports again.
    drop(router);
    let (reopened, aggregator) = manager(&dir, &store, &clock).await;
    reopened.accept_remote_edges(SECRET.into()).await.unwrap();
    assert_eq!(aggregator.source_names(), ["eu-1"]);
    let listed = reopened.edges();
    assert_eq!(listed[0].last_seen, None);
    assert!(!listed[0].live);

    // Removed for good: no longer listed or read, and still gone after another restart.
    let router = marquee_manager::router(&reopened, "http://ads.example.com");
    let delete = || {
        Request::delete("/internal/v1/edges/eu-1")
            .header(header::AUTHORIZATION, format!("Bearer {SECRET}"))
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(answer(&router, delete()).await.0, StatusCode::NO_CONTENT);
    assert!(aggregator.source_names().is_empty() && reopened.edges().is_empty());
    let (status, text) = answer(&router, delete()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(text.contains("eu-1"), "{text}");
    let (third, aggregator) = manager(&dir, &store, &clock).await;
    third.accept_remote_edges(SECRET.into()).await.unwrap();
    assert!(aggregator.source_names().is_empty() && third.edges().is_empty());
}

/// `marquee edge --listen 0.0.0.0:8080` without `edge.log_url` reports its listen address as
/// where its log is read: refused with what to set (the edge logs the answer), never
/// registered, so the manager does not read its own host in the edge's stead.
#[tokio::test]
async fn a_log_url_on_the_unspecified_address_is_refused_with_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let start = Timestamp::from_second(1_780_000_000).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(start));
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("m.db"), Arc::clone(&clock)).unwrap());
    let (manager, aggregator) = manager(&dir, &store, &clock).await;
    manager.accept_remote_edges(SECRET.into()).await.unwrap();
    let router = marquee_manager::router(&manager, "http://ads.example.com");
    for listen in ["http://0.0.0.0:8080", "http://[::]:8080"] {
        let mut unreachable = report("eu-1", 0, start);
        unreachable.log_url = listen.into();
        let body = serde_json::to_string(&unreachable).unwrap();
        let (status, text) = answer(&router, post(Some(SECRET), body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{listen}: {text}");
        assert!(
            text.contains(listen) && text.contains("edge.log_url"),
            "{text}"
        );
    }
    assert!(aggregator.source_names().is_empty() && manager.edges().is_empty());
}

/// Two edges under one id (a cloned VM image, a copied `DATA/edge/edge.id`): while the first
/// is live, the second, reporting another log address, is refused with 409 and a message
/// saying what to do, and the registry and the aggregator's source stay the first's. Once the
/// first has been silent for longer than the registry's window, the same report is an edge
/// that moved, and is taken.
#[tokio::test]
async fn a_second_edge_under_a_live_id_is_refused_and_a_moved_one_taken() {
    let dir = tempfile::tempdir().unwrap();
    let start = Timestamp::from_second(1_780_000_000).unwrap();
    let manual = Arc::new(ManualClock::new(start));
    let clock: Arc<dyn Clock> = manual.clone();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("m.db"), Arc::clone(&clock)).unwrap());
    let (manager, aggregator) = manager(&dir, &store, &clock).await;
    manager.accept_remote_edges(SECRET.into()).await.unwrap();
    let router = marquee_manager::router(&manager, "http://ads.example.com");
    let first = serde_json::to_string(&report("eu-1", 0, start)).unwrap();
    assert_eq!(
        answer(&router, post(Some(SECRET), first)).await.0,
        StatusCode::NO_CONTENT
    );

    let mut clone = report("eu-1", 0, start);
    clone.log_url = "http://10.0.0.8:8080".into();
    clone.pacing_edge = EdgeId(43);
    let clone = serde_json::to_string(&clone).unwrap();
    let (status, text) = answer(&router, post(Some(SECRET), clone.clone())).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert!(
        text.contains("eu-1") && text.contains("10.0.0.8") && text.contains("edge.id"),
        "{text}"
    );
    let listed = manager.edges();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].log_url.as_deref(), Some("http://10.0.0.7:8080"));
    assert_eq!(aggregator.source_names(), ["eu-1"]);
    let stored = store.pacing_state("edge-registry").await.unwrap().unwrap();
    assert!(
        stored.contains("10.0.0.7") && !stored.contains("10.0.0.8"),
        "{stored}"
    );

    manual.advance(jiff::SignedDuration::from_secs(6));
    let (status, text) = answer(&router, post(Some(SECRET), clone)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(
        manager.edges()[0].log_url.as_deref(),
        Some("http://10.0.0.8:8080")
    );
    let stored = store.pacing_state("edge-registry").await.unwrap().unwrap();
    assert!(stored.contains("10.0.0.8"), "{stored}");
}
