//! Forecasts through the manager's router: the demo's synthetic sample answers a proposal and
//! a booked line item's outlook; without sample the answer says how many days are needed;
//! tenancy; and the forecaster rebuilt on a new snapshot and a new day.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use jiff::{SignedDuration, Timestamp};
use marquee_manager::forecasts::{ForecastService, MIN_SAMPLE_DAYS};
use marquee_manager::{Manager, demo};
use marquee_model::{Clock, LineItemId, ManualClock, Role};
use marquee_store::{NewToken, Store};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::{demo_store, open_manager, raise_weight};

/// The demo's ids: advertisers 1 (Acme Outdoor, whose line item 1 has a goal) and 2 (Globex
/// Travel, whose campaign is 2); placements 1 and 2 (News leaderboard and sidebar).
const ACME: u64 = 1;
const GLOBEX: u64 = 2;
const GLOBEX_CAMPAIGN: u64 = 2;

struct Setup {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
    manager: Arc<Manager>,
    service: Arc<ForecastService>,
    router: Router,
}

/// The demo catalog, with its synthetic sample when `sample`, a published snapshot and a
/// forecaster built for it.
async fn setup(sample: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new("2026-12-02T10:30:00Z".parse().unwrap()));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let store = demo_store(&dir.path().join("m.db"), &dyn_clock).await;
    if sample {
        let stored = demo::load_sample(&*store, &*dyn_clock, 0.01).await.unwrap();
        assert!(stored > 10_000, "{stored} records");
    }
    let manager = open_manager(&store, &dyn_clock, &dir.path().join("snapshots"), 3).await;
    manager.refresh().await.unwrap();
    let service = ForecastService::new(Arc::clone(&store), dyn_clock, 0.01).unwrap();
    manager.attach_forecasts(Arc::clone(&service));
    let router = marquee_manager::router(&manager, "https://ads.example.com");
    let setup = Setup {
        _dir: dir,
        clock,
        store,
        manager,
        service,
        router,
    };
    assert!(setup.rebuild().await);
    setup
}

impl Setup {
    async fn rebuild(&self) -> bool {
        let latest = self.manager.latest().unwrap();
        let snapshot = Arc::new(marquee_snapshot::Snapshot::decode(&latest.bytes).unwrap());
        self.service.refresh(&snapshot).await.unwrap()
    }

    async fn token(&self, role: Role, owner_id: Option<u64>) -> String {
        let (token, hash) = marquee_api::generate_token().unwrap();
        self.store
            .create_token(
                NewToken {
                    role,
                    owner_id,
                    hash,
                    label: "test".into(),
                },
                &marquee_store::Actor::cli(),
            )
            .await
            .unwrap();
        token
    }

    // Deliberately the twin of the API's forecast tests' `call` (see there).
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

/// A standard line item of Globex's campaign on the News leaderboard and sidebar, 200,000
/// impressions over a flight of two weeks from tomorrow, asked over its flight.
fn proposal() -> Value {
    json!({
        "campaign_id": GLOBEX_CAMPAIGN,
        "name": "Winter sun (proposal)",
        "status": "active",
        "start": "2026-12-03T00:00:00",
        "end": "2026-12-17T00:00:00",
        "time_zone": "UTC",
        "tier": "standard",
        "goal": { "metric": "impressions", "lifetime": 200000 },
        "price": { "model": "cpm", "amount": "2.50", "currency": "USD" },
        "placements": [1, 2],
        "from": "2026-12-03T00:00:00Z",
        "to": "2026-12-17T00:00:00Z"
    })
}

fn count(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

#[tokio::test]
async fn a_proposal_on_the_demo_sample_answers_consistent_numbers() {
    let setup = setup(true).await;
    let admin = setup.token(Role::Admin, None).await;
    let (status, body) = setup
        .call("POST", "/api/v1/forecasts", &admin, Some(proposal()))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(body["from"], "2026-12-03T00:00:00Z");
    assert_eq!(body["to"], "2026-12-17T00:00:00Z");
    let matching = count(&body["matching"]);
    let available = count(&body["available"]);
    assert!(matching > 100_000, "{body}");
    assert!(available <= matching, "{body}");
    assert_eq!(count(&body["requested"]), 200_000, "{body}");
    let daily = body["daily"].as_array().unwrap();
    assert_eq!(daily.len(), 14, "{body}");
    assert_eq!(daily[0]["date"], "2026-12-03");
    let daily_matching: u64 = daily.iter().map(|d| count(&d["matching"])).sum();
    assert!(daily_matching.abs_diff(matching) <= 14, "{body}");
    assert!(
        daily
            .iter()
            .all(|d| count(&d["available"]) <= count(&d["matching"]))
    );
    let p = body["probability"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&p), "{body}");
    // The line items booked on the News placements contend, by name.
    let contending = body["contending"].as_array().unwrap();
    assert!(!contending.is_empty(), "{body}");
    assert!(
        contending
            .iter()
            .all(|c| c["name"].is_string() && c["line_item_id"].is_u64()),
        "{body}"
    );
    // Asked again: the same answer, from the allocation kept for the range.
    let (_, again) = setup
        .call("POST", "/api/v1/forecasts", &admin, Some(proposal()))
        .await;
    assert_eq!(again["available"], body["available"]);

    // A booked line item's outlook over the standard range.
    let (status, outlook) = setup
        .call("GET", "/api/v1/line-items/1/forecast", &admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{outlook}");
    assert!(
        ["on_track", "at_risk", "shortfall"].contains(&outlook["status"].as_str().unwrap()),
        "{outlook}"
    );
    assert!(count(&outlook["expected"]) <= count(&outlook["availability"]["matching"]));
    // The list's statuses, computed in the background.
    setup.service.compute_statuses().await.unwrap();
    assert!(setup.service.status(LineItemId(1)).is_some());
}

#[tokio::test]
async fn a_proposal_is_read_as_the_create_endpoint_reads_a_line_item() {
    let setup = setup(true).await;
    let admin = setup.token(Role::Admin, None).await;
    let mut body = proposal();
    body["tier"] = json!("premium");
    body.as_object_mut().unwrap().remove("to");
    let (status, answer) = setup
        .call("POST", "/api/v1/forecasts", &admin, Some(body))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let paths: Vec<&str> = answer["error"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"to") && paths.contains(&"tier"), "{answer}");
    let mut body = proposal();
    body["placements"] = json!([999]);
    let (status, answer) = setup
        .call("POST", "/api/v1/forecasts", &admin, Some(body))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["fields"][0]["path"], "placements[0]");
}

#[tokio::test]
async fn without_sample_the_answer_says_how_many_days_are_needed() {
    let setup = setup(false).await;
    let admin = setup.token(Role::Admin, None).await;
    let (status, body) = setup
        .call("POST", "/api/v1/forecasts", &admin, Some(proposal()))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "not_enough_sample", "{body}");
    assert_eq!(body["sample_days"], 0);
    assert_eq!(count(&body["sample_days_needed"]), MIN_SAMPLE_DAYS as u64);
    assert!(
        body["message"].as_str().unwrap().contains("7 whole days"),
        "{body}"
    );
    let (status, body) = setup
        .call("GET", "/api/v1/line-items/1/forecast", &admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "not_enough_sample", "{body}");
}

#[tokio::test]
async fn an_advertiser_forecasts_its_own_line_items_and_sees_others_unnamed() {
    let setup = setup(true).await;
    let globex = setup.token(Role::Advertiser, Some(GLOBEX)).await;
    let acme = setup.token(Role::Advertiser, Some(ACME)).await;
    let publisher = setup.token(Role::Publisher, Some(1)).await;
    let (status, body) = setup
        .call("POST", "/api/v1/forecasts", &globex, Some(proposal()))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let contending = body["contending"].as_array().unwrap();
    assert!(!contending.is_empty(), "{body}");
    for c in contending {
        if c["other_advertiser"] == true {
            assert!(c["name"].is_null() && c["line_item_id"].is_null(), "{c}");
        }
    }
    assert!(
        contending.iter().any(|c| c["other_advertiser"] == true),
        "{body}"
    );
    // Another advertiser's campaign is not Acme's to forecast under.
    let (status, body) = setup
        .call("POST", "/api/v1/forecasts", &acme, Some(proposal()))
        .await;
    assert!(status.is_client_error(), "{status} {body}");
    // Nor is Acme's line item 1 Globex's to look at.
    let (status, _) = setup
        .call("GET", "/api/v1/line-items/1/forecast", &globex, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = setup
        .call("POST", "/api/v1/forecasts", &publisher, Some(proposal()))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_forecaster_is_rebuilt_for_a_new_snapshot_and_a_new_day() {
    let setup = setup(true).await;
    let built = setup.service.key().unwrap();
    assert!(!setup.rebuild().await, "the same snapshot and day: kept");
    raise_weight(&*setup.store, 1).await;
    setup.manager.refresh().await.unwrap();
    assert!(setup.rebuild().await, "a new snapshot");
    let published = setup.service.key().unwrap();
    assert!(published.version > built.version);
    assert_eq!(published.day, built.day);
    setup.clock.advance(SignedDuration::from_hours(14));
    assert!(setup.rebuild().await, "a new UTC day");
    assert_eq!(setup.service.key().unwrap().day, built.day + 1);
    let now: Timestamp = setup.clock.now();
    assert_eq!(now.as_second().div_euclid(86_400), built.day + 1);
}

#[tokio::test]
async fn a_lifetime_goal_counts_what_was_delivered_before_today() {
    let setup = setup(true).await;
    let admin = setup.token(Role::Admin, None).await;
    let delivered = marquee_stats::Counters {
        impressions: 5_000,
        ..marquee_stats::Counters::default()
    };
    let at: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
    crate::support::commit(&*setup.store, 1, 1, delivered, at).await;
    // Read when the forecaster is built: the next day's.
    setup.clock.advance(SignedDuration::from_hours(14));
    assert!(setup.rebuild().await);
    let (status, outlook) = setup
        .call("GET", "/api/v1/line-items/1/forecast", &admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{outlook}");
    assert_eq!(outlook["delivered"], 5_000, "{outlook}");
    assert_eq!(outlook["from"], "2026-12-03T00:00:00Z", "{outlook}");
}
