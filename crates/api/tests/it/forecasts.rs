//! The forecast endpoints over a stand-in forecasting service (the manager's own is tested
//! with the demo's sample in `crates/manager/tests/it/forecasts.rs`): what reaches the
//! service, what a tenant sees of other advertisers' contending line items, the answer
//! without enough sample, and no routes without a service.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use jiff::Timestamp;
use marquee_api::forecasts::{
    Availability, BoxFuture, Contending, ForecastFailure, Forecasts, Outcome, Proposal, Range,
};
use marquee_api::{ApiOptions, GeoAvailability, RouteTable, add_routes_with};
use marquee_model::{AdvertiserId, LineItemId, ManualClock, Role};
use marquee_store::Store;
use serde_json::{Value, json};
use tower::ServiceExt;

const NOW: &str = "2026-12-02T10:30:00Z";

/// Answers every proposal with `answer`, and keeps the proposals it was asked.
#[derive(Debug)]
struct StandIn {
    answer: Outcome<Availability>,
    asked: Mutex<Vec<Proposal>>,
}

impl Forecasts for StandIn {
    fn now(&self) -> Timestamp {
        NOW.parse().unwrap()
    }

    fn availability(
        &self,
        proposal: Proposal,
    ) -> BoxFuture<'_, Result<Outcome<Availability>, ForecastFailure>> {
        self.asked.lock().unwrap().push(proposal);
        let answer = self.answer.clone();
        Box::pin(async move { Ok(answer) })
    }

    fn delivery(
        &self,
        _line_item: LineItemId,
    ) -> BoxFuture<'_, Result<(Range, Outcome<marquee_api::forecasts::Delivery>), ForecastFailure>>
    {
        let range = Range::days_from(self.now(), 30);
        Box::pin(async move { Ok((range, Outcome::NotReady)) })
    }
}

/// Line item 7 of advertiser 1 and line item 9 of another take impressions.
fn contended() -> Availability {
    let contending = |id: u64, advertiser: u64, name: &str| Contending {
        line_item_id: Some(id),
        name: Some(name.into()),
        advertiser: AdvertiserId(advertiser),
        other_advertiser: false,
        impressions: 500,
    };
    Availability {
        matching: 10_000,
        available: 8_000,
        requested: Some(5_000),
        probability: Some(0.97),
        daily: Vec::new(),
        contending: vec![contending(7, 1, "Ours"), contending(9, 2, "Theirs")],
        sample_days: 28,
    }
}

struct App {
    router: Router,
    store: Arc<dyn Store>,
    service: Arc<StandIn>,
    _dir: tempfile::TempDir,
}

async fn app(answer: Outcome<Availability>) -> App {
    let dir = tempfile::TempDir::new().unwrap();
    let clock = Arc::new(ManualClock::new(NOW.parse().unwrap()));
    let store: Arc<dyn Store> = Arc::new(
        marquee_store::SqliteStore::open(&dir.path().join("api.db"), clock.clone()).unwrap(),
    );
    let service = Arc::new(StandIn {
        answer,
        asked: Mutex::new(Vec::new()),
    });
    let router = add_routes_with(
        RouteTable::new(),
        Arc::clone(&store),
        clock,
        "https://ads.example.com",
        ApiOptions {
            forecasts: Some(service.clone() as Arc<dyn Forecasts>),
            ..ApiOptions::default()
        },
        GeoAvailability::default(),
    )
    .into_router("test", "0");
    App {
        router,
        store,
        service,
        _dir: dir,
    }
}

// `call` is deliberately the twin of the manager's forecast tests' (crates/manager/tests):
// each crate's test binary drives its own router, and neither may depend on the other's tests.
impl App {
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

    async fn token(&self, role: Role, owner: Option<u64>) -> String {
        crate::common::token(&*self.store, "mq_forecast", role, owner).await
    }

    /// Advertiser 1 (USD) and its campaign 1.
    async fn campaign(&self, admin: &str) {
        for (path, body) in [
            (
                "/api/v1/advertisers",
                json!({ "name": "Acme", "currency": "USD", "time_zone": "UTC" }),
            ),
            (
                "/api/v1/campaigns",
                json!({ "advertiser_id": 1, "name": "Winter" }),
            ),
            (
                "/api/v1/advertisers",
                json!({ "name": "Globex", "currency": "USD", "time_zone": "UTC" }),
            ),
            (
                "/api/v1/campaigns",
                json!({ "advertiser_id": 2, "name": "Summer" }),
            ),
        ] {
            let (status, answer) = self.call("POST", path, admin, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{answer}");
        }
    }
}

fn proposal(campaign: u64) -> Value {
    json!({
        "campaign_id": campaign,
        "name": "Proposal",
        "start": "2026-12-03T00:00:00",
        "time_zone": "UTC",
        "price": { "model": "cpm", "amount": "2.50", "currency": "USD" },
        "goal": { "metric": "impressions", "lifetime": 5000 },
        "from": "2026-11-20T08:00:00Z",
        "to": "2026-12-09T13:00:00Z"
    })
}

#[tokio::test]
async fn a_proposal_reaches_the_service_as_whole_days_from_today() {
    let app = app(Outcome::Ready(contended())).await;
    let admin = app.token(Role::Admin, None).await;
    app.campaign(&admin).await;
    let (status, body) = app
        .call("POST", "/api/v1/forecasts", &admin, Some(proposal(1)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    assert_eq!(
        body["from"], "2026-12-02T00:00:00Z",
        "today at the earliest"
    );
    assert_eq!(
        body["to"], "2026-12-10T00:00:00Z",
        "the day holding `to`, whole"
    );
    assert_eq!(body["available"], 8_000);
    assert_eq!(
        body["contending"][1]["name"], "Theirs",
        "an admin sees every name"
    );
    let asked = app.service.asked.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].line_item.name, "Proposal");
    assert_eq!(asked[0].line_item.price.amount_micros.0, 2_500_000);
    assert!(asked[0].placements.is_empty() && asked[0].replaces.is_none());
}

#[tokio::test]
async fn an_advertiser_sees_other_advertisers_contending_line_items_unnamed() {
    let app = app(Outcome::Ready(contended())).await;
    let admin = app.token(Role::Admin, None).await;
    app.campaign(&admin).await;
    let acme = app.token(Role::Advertiser, Some(1)).await;
    let (status, body) = app
        .call("POST", "/api/v1/forecasts", &acme, Some(proposal(1)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["contending"][0]["name"], "Ours");
    assert_eq!(body["contending"][0]["other_advertiser"], false);
    assert_eq!(body["contending"][1]["name"], Value::Null);
    assert_eq!(body["contending"][1]["line_item_id"], Value::Null);
    assert_eq!(body["contending"][1]["other_advertiser"], true);
    assert_eq!(body["contending"][1]["impressions"], 500);
    // Globex's campaign is not Acme's to forecast under: as a create's missing parent.
    let (status, body) = app
        .call("POST", "/api/v1/forecasts", &acme, Some(proposal(2)))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["fields"][0]["path"], "campaign_id");
    assert_eq!(app.service.asked.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn without_enough_sample_the_answer_says_how_many_days_are_needed() {
    let app = app(Outcome::NotEnoughSample { days: 3, needed: 7 }).await;
    let admin = app.token(Role::Admin, None).await;
    app.campaign(&admin).await;
    let (status, body) = app
        .call("POST", "/api/v1/forecasts", &admin, Some(proposal(1)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "not_enough_sample");
    assert_eq!(body["sample_days"], 3);
    assert_eq!(body["sample_days_needed"], 7);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("7 whole days") && message.contains("3 stored"),
        "{message}"
    );
}

#[tokio::test]
async fn without_a_service_there_are_no_forecast_routes() {
    let dir = tempfile::TempDir::new().unwrap();
    let clock = Arc::new(ManualClock::new(NOW.parse().unwrap()));
    let store: Arc<dyn Store> = Arc::new(
        marquee_store::SqliteStore::open(&dir.path().join("api.db"), clock.clone()).unwrap(),
    );
    let router = crate::common::router(&store, clock);
    let admin = crate::common::token(&*store, "mq_none", Role::Admin, None).await;
    let request = Request::post("/api/v1/forecasts")
        .header(header::AUTHORIZATION, format!("Bearer {admin}"))
        .body(Body::from(proposal(1).to_string()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let request = Request::get("/api/v1/openapi.json")
        .body(Body::empty())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let document: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(document["paths"]["/api/v1/forecasts"].is_null());
}
