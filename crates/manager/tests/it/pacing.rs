//! The manager's pacing against a real SQLite store holding the demo data, with a manual
//! clock: rounds read delivery from the stats store and stop a line item at its goal, the sync
//! grants leases within the budget and sends controls only when they changed, the book survives
//! a restart, and silent edges' leases are reclaimed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use marquee_manager::{Pacing, PacingOptions};
use marquee_model::{Clock, LineItemId, ManualClock, ObjectKind, Status};
use marquee_pacing::{EdgeId, LeaseGrant, Renewal, SyncRequest};
use marquee_stats::Counters;
use marquee_store::{Actor, Draft, Store};
use tempfile::TempDir;

use crate::support;

/// A Tuesday noon in Berlin's winter (UTC+1).
const NOW: &str = "2026-12-01T12:00:00Z";

struct Setup {
    dir: TempDir,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    /// "Boots DACH mobile": impressions, 20,000 a day, 1,000,000 over the flight, even.
    boots: LineItemId,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW.parse().unwrap()));
    let store = support::demo_store(&dir.path().join("m.db"), &(Arc::clone(&clock) as _)).await;
    let catalog = store.catalog().await.unwrap();
    let boots = catalog
        .line_items
        .iter()
        .find(|li| li.object.name == "Boots DACH mobile")
        .map(|li| LineItemId(li.meta.id))
        .unwrap();
    Setup {
        dir,
        store,
        clock,
        boots,
    }
}

async fn open(setup: &Setup) -> Pacing {
    Pacing::open(
        Arc::clone(&setup.store),
        Arc::clone(&setup.clock) as Arc<dyn Clock>,
        PacingOptions::default(),
    )
    .await
    .unwrap()
}

fn renewal(line_item: LineItemId, consumed: u64, held_ceiling: u64) -> Renewal {
    Renewal {
        edge: EdgeId(7),
        line_item,
        consumed,
        held_ceiling,
        on_billing: 0,
    }
}

fn request(control_version: u64, renewals: Vec<Renewal>) -> SyncRequest {
    SyncRequest {
        edge: EdgeId(7),
        control_version,
        renewals,
        releases: Vec::new(),
        settlements: Vec::new(),
    }
}

/// Commits `impressions` of a line item at `at` as an aggregation run would (minute, hour,
/// line item hour and day rows).
async fn deliver(store: &dyn Store, line_item: LineItemId, impressions: i64, at: Timestamp) {
    let counters = Counters {
        impressions,
        ..Counters::default()
    };
    support::commit(store, line_item.0, 0, counters, at).await;
}

/// Pacing's metrics as a scrape reads them.
async fn scrape(pacing: &Pacing) -> String {
    pacing.publish_metrics().await;
    let mut registry = marquee_metrics::Registry::default();
    pacing.register_metrics(&mut registry);
    marquee_metrics::encode(&registry, marquee_metrics::Format::Text)
}

#[tokio::test]
async fn a_round_paces_goals_and_stops_a_line_item_at_its_daily_goal() {
    let setup = setup().await;
    let pacing = open(&setup).await;
    let first = pacing.round().await.unwrap();
    // The demo has three line items with a goal; boots_sports is a weekend sponsorship but
    // its flight runs, so all three have a budget today.
    assert_eq!(first.paced, 3);
    assert_eq!(first.budgeted, 3);
    assert!(
        first.next_period_end.is_some(),
        "daily budgets end at midnight"
    );

    let answer = pacing.sync(request(0, vec![])).await.unwrap();
    let controls = answer.controls.expect("a first sync gets the control set");
    let boots = controls
        .iter()
        .find(|c| c.line_item == setup.boots)
        .unwrap();
    assert!(!boots.stopped);
    // A new line item starts low (5%, one step up of at most 4× per round), not at full speed.
    assert!((1..=200_000).contains(&boots.throttle_ppm), "{boots:?}");

    // The whole daily goal delivered an hour ago: the next round stops it.
    let an_hour_ago = setup.clock.now() - SignedDuration::from_hours(1);
    deliver(&*setup.store, setup.boots, 20_000, an_hour_ago).await;
    setup.clock.advance(SignedDuration::from_secs(10));
    let second = pacing.round().await.unwrap();
    assert!(second.control_version > answer.control_version);
    let answer = pacing
        .sync(request(answer.control_version, vec![]))
        .await
        .unwrap();
    let controls = answer.controls.expect("the control set changed");
    let boots = controls
        .iter()
        .find(|c| c.line_item == setup.boots)
        .unwrap();
    assert!(boots.stopped, "goal reached: {boots:?}");
    let metrics = scrape(&pacing).await;
    let stopped = format!("marquee_pacing_stopped{{line_item=\"{}\"}} 1", setup.boots);
    assert!(metrics.contains(&stopped), "{metrics}");

    let unchanged = pacing
        .sync(request(answer.control_version, vec![]))
        .await
        .unwrap();
    assert_eq!(unchanged.controls, None, "nothing changed, nothing sent");
}

#[tokio::test]
async fn grants_stay_within_the_budget_survive_a_restart_and_silent_edges_are_reclaimed() {
    let setup = setup().await;
    let pacing = open(&setup).await;
    pacing.round().await.unwrap();
    let answer = pacing
        .sync(request(0, vec![renewal(setup.boots, 0, 0)]))
        .await
        .unwrap();
    assert_eq!(answer.grants.len(), 1);
    let grant = answer.grants[0];
    assert!(grant.ceiling > 0 && grant.ceiling <= 20_000, "{grant:?}");
    assert_eq!(
        grant.expires_at,
        setup.clock.now() + SignedDuration::from_secs(15)
    );

    // A line item without a goal has no budget.
    let house = pacing
        .sync(request(0, vec![renewal(LineItemId(999_999), 0, 0)]))
        .await
        .unwrap();
    assert_eq!(house.unbudgeted, vec![LineItemId(999_999)]);

    // A restarted manager remembers the grant: the edge's report lands on its account.
    drop(pacing);
    let pacing = open(&setup).await;
    let metrics = scrape(&pacing).await;
    let committed = format!(
        "marquee_lease_committed{{line_item=\"{}\"}} {}",
        setup.boots, grant.ceiling
    );
    // Metrics list line items once a round has resolved the goals.
    pacing.round().await.unwrap();
    let metrics_after = scrape(&pacing).await;
    assert!(
        metrics_after.contains(&committed),
        "{metrics}\n---\n{metrics_after}"
    );

    // The edge goes silent: after expiry and grace the lease is reclaimed.
    setup.clock.advance(SignedDuration::from_secs(21));
    pacing.round().await.unwrap();
    let metrics = scrape(&pacing).await;
    assert!(
        metrics.contains("marquee_lease_expiries_total 1"),
        "{metrics}"
    );
    let live = format!(
        "marquee_lease_live_edges{{line_item=\"{}\"}} 0",
        setup.boots
    );
    assert!(metrics.contains(&live), "{metrics}");
}

/// `POST /internal/v1/sync` through the manager's router: the shared secret is required, a
/// bad body is a 400 naming the problem, and a good one is answered like the in-process call.
#[tokio::test]
async fn the_sync_endpoint_needs_the_secret() {
    use axum::body::Body;
    use axum::http::{Request, StatusCode, header};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let setup = setup().await;
    let manager = support::open_manager(
        &setup.store,
        &(Arc::clone(&setup.clock) as _),
        &setup.dir.path().join("snapshots"),
        2,
    )
    .await;
    let router = marquee_manager::router(&manager, "http://ads.example");
    let post = |secret: Option<&str>, body: String| {
        let mut request = Request::post("/internal/v1/sync");
        if let Some(secret) = secret {
            request = request.header(header::AUTHORIZATION, format!("Bearer {secret}"));
        }
        request.body(Body::from(body)).unwrap()
    };
    let body = serde_json::to_string(&request(0, vec![renewal(setup.boots, 0, 0)])).unwrap();

    let answer = router
        .clone()
        .oneshot(post(None, body.clone()))
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "no pacing yet"
    );

    let pacing = Pacing::open(
        Arc::clone(&setup.store),
        Arc::clone(&setup.clock) as Arc<dyn Clock>,
        PacingOptions {
            secret: "0123456789abcdef".into(),
            ..PacingOptions::default()
        },
    )
    .await
    .unwrap();
    pacing.round().await.unwrap();
    manager.attach_pacing(Arc::new(pacing));

    for secret in [None, Some("wrong-secret-0000")] {
        let answer = router
            .clone()
            .oneshot(post(secret, body.clone()))
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{secret:?}");
    }
    let answer = router
        .clone()
        .oneshot(post(Some("0123456789abcdef"), "{\"edge\":1}".into()))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let text = answer.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("control_version"), "{text}");

    let answer = router
        .oneshot(post(Some("0123456789abcdef"), body))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    let response: marquee_pacing::SyncResponse = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(response.grants.len(), 1);
    assert_eq!(response.grants[0].line_item, setup.boots);
    assert!(response.controls.is_some());
}

/// Sets a line item's status in its columns and its body, as the API does.
async fn set_status(store: &dyn Store, line_item: LineItemId, status: Status) {
    update(store, line_item, |body| {
        body["status"] = serde_json::json!(status.as_str())
    })
    .await;
}

/// Changes a line item's body with `change` (its status column follows the body's).
async fn update(
    store: &dyn Store,
    line_item: LineItemId,
    change: impl FnOnce(&mut serde_json::Value),
) {
    update_object(store, ObjectKind::LineItem, line_item.0, change).await;
}

/// Changes any object's body with `change`, its status column following the body's, as the
/// API does.
async fn update_object(
    store: &dyn Store,
    kind: ObjectKind,
    id: u64,
    change: impl FnOnce(&mut serde_json::Value),
) {
    let record = store.get(kind, id, None).await.unwrap();
    let mut body: serde_json::Value = serde_json::from_str(&record.body).unwrap();
    change(&mut body);
    let status = Status::parse(body["status"].as_str().unwrap()).unwrap();
    let draft = Draft {
        parent_id: record.parent_id,
        name: record.name,
        status,
        body: body.to_string(),
    };
    store
        .update(kind, id, record.meta.version, draft, None, &Actor::cli())
        .await
        .unwrap();
}

/// Pacing opened on `setup` after one round, and the first grant of boots' lease to an edge
/// that has consumed nothing.
async fn first_grant(setup: &Setup) -> (Pacing, LeaseGrant) {
    let pacing = open(setup).await;
    pacing.round().await.unwrap();
    let grant = pacing
        .sync(request(0, vec![renewal(setup.boots, 0, 0)]))
        .await
        .unwrap()
        .grants[0];
    (pacing, grant)
}

/// A paused line item's budget is suspended, not dropped: while paused its edges' renewals get
/// no room (rather than "no budget"), and once resumed its accounts are the ones from before,
/// so what the edge billed before the pause stays counted where it belongs.
#[tokio::test]
async fn a_paused_line_item_keeps_its_budget_s_accounts_for_its_return() {
    let setup = setup().await;
    let (pacing, first) = first_grant(&setup).await;
    let consumed = first.ceiling;
    let held = pacing
        .sync(request(
            0,
            vec![renewal(setup.boots, consumed, first.ceiling)],
        ))
        .await
        .unwrap()
        .grants[0]
        .ceiling;

    set_status(&*setup.store, setup.boots, Status::Paused).await;
    setup.clock.advance(SignedDuration::from_secs(10));
    pacing.round().await.unwrap();
    let paused = pacing
        .sync(request(0, vec![renewal(setup.boots, consumed, held)]))
        .await
        .unwrap();
    assert!(paused.unbudgeted.is_empty(), "{paused:?}");
    assert_eq!(paused.grants[0].ceiling, consumed, "no room: {paused:?}");

    set_status(&*setup.store, setup.boots, Status::Active).await;
    setup.clock.advance(SignedDuration::from_secs(10));
    pacing.round().await.unwrap();
    let resumed = pacing
        .sync(request(0, vec![renewal(setup.boots, consumed, held)]))
        .await
        .unwrap()
        .grants[0];
    assert!(resumed.ceiling > consumed, "{resumed:?}");
    let metrics = scrape(&pacing).await;
    let used = format!(
        "marquee_lease_used{{line_item=\"{}\"}} {consumed}",
        setup.boots
    );
    assert!(metrics.contains(&used), "{metrics}");
}

/// A flight from midnight in Kolkata starts at :30 UTC. What it delivered in that first half
/// hour stays in its lifetime once the minute rows are pruned (a week later by default): the
/// lifetime is read from the hour rows, from the hour the flight starts in.
#[tokio::test]
async fn lifetime_delivery_survives_the_pruning_of_its_first_minutes() {
    let setup = setup().await;
    update(&*setup.store, setup.boots, |body| {
        body["time_zone"] = serde_json::json!("Asia/Kolkata");
        body["start"] = serde_json::json!("2026-11-20T00:00:00");
        body["goal"] = serde_json::json!({ "metric": "impressions", "lifetime": 1_000 });
        body["pacing"] = serde_json::json!("asap");
    })
    .await;
    // The whole goal, delivered at 2026-11-19T18:40Z (00:10 in Kolkata on the 20th).
    let early: Timestamp = "2026-11-19T18:40:00Z".parse().unwrap();
    deliver(&*setup.store, setup.boots, 1_000, early).await;
    // A later run prunes minute rows older than a week.
    let week_ago = setup.clock.now() - SignedDuration::from_hours(7 * 24);
    setup
        .store
        .commit_run(marquee_store::RunWrite {
            minute_cutoff_secs: week_ago.as_second(),
            now: setup.clock.now(),
            ..marquee_store::RunWrite::default()
        })
        .await
        .unwrap();
    let pacing = open(&setup).await;
    let boots = boots_control_after_a_round(&pacing, &setup).await;
    assert!(boots.stopped, "the lifetime goal was reached: {boots:?}");
}

/// Sets the status of any object in its column and its body, as the API does.
async fn set_object_status(store: &dyn Store, kind: ObjectKind, id: u64, status: Status) {
    update_object(store, kind, id, |body| {
        body["status"] = serde_json::json!(status.as_str())
    })
    .await;
}

/// An edge renewing at one instant and billing all it is granted each time, from its counter
/// at `from`, until the book grants no more: what it could bill. (At one instant its rate stays
/// 0, so no margin is held back for billing in flight.)
async fn bill_all(pacing: &Pacing, edge: u64, line_item: LineItemId, from: u64, upto: u64) -> u64 {
    let mut consumed = from;
    let mut held = 0;
    for _ in 0..1_000 {
        let answer = pacing
            .sync(SyncRequest {
                edge: EdgeId(edge),
                control_version: 0,
                renewals: vec![Renewal {
                    edge: EdgeId(edge),
                    line_item,
                    consumed,
                    held_ceiling: held,
                    on_billing: 0,
                }],
                releases: Vec::new(),
                settlements: Vec::new(),
            })
            .await
            .unwrap();
        assert!(answer.unbudgeted.is_empty(), "{answer:?}");
        held = answer.grants[0].ceiling;
        let next = held.min(upto);
        if next == consumed {
            break;
        }
        consumed = next;
    }
    consumed - from
}

/// A lifetime-only cap of 1,000 impressions with 905 delivered; paused over a day, so the book
/// forgets its budget; the edges redeployed meanwhile (a new id, its counter at 0). On resume
/// the budget is made afresh from what the aggregation shows: 95 are left, not 1,000.
#[tokio::test]
async fn a_lifetime_cap_is_not_granted_again_after_a_long_pause_and_a_redeploy() {
    let setup = setup().await;
    update(&*setup.store, setup.boots, |body| {
        body["goal"] = serde_json::json!({ "metric": "impressions", "lifetime": 1_000 });
    })
    .await;
    let pacing = open(&setup).await;
    pacing.round().await.unwrap();
    assert_eq!(bill_all(&pacing, 7, setup.boots, 0, 905).await, 905);
    deliver(&*setup.store, setup.boots, 905, setup.clock.now()).await;

    set_status(&*setup.store, setup.boots, Status::Paused).await;
    setup.clock.advance(SignedDuration::from_secs(10));
    pacing.round().await.unwrap();
    setup.clock.advance(SignedDuration::from_hours(25));
    pacing.round().await.unwrap();
    assert_eq!(
        pacing.line_item_state(setup.boots).await.1,
        None,
        "forgotten after a day"
    );

    set_status(&*setup.store, setup.boots, Status::Active).await;
    setup.clock.advance(SignedDuration::from_secs(10));
    pacing.round().await.unwrap();
    let usage = pacing.line_item_state(setup.boots).await.1.unwrap();
    assert_eq!((usage.limit, usage.used), (1_000, 905), "{usage:?}");
    assert_eq!(bill_all(&pacing, 8, setup.boots, 0, u64::MAX).await, 95);
}

/// A daily goal added to a line item that has served 700 impressions today: 300 are left
/// today, not the whole 1,000.
#[tokio::test]
async fn a_goal_added_to_a_serving_line_item_counts_what_it_delivered_today() {
    let setup = setup().await;
    update(&*setup.store, setup.boots, |body| {
        body["goal"] = serde_json::Value::Null;
    })
    .await;
    let pacing = open(&setup).await;
    pacing.round().await.unwrap();
    let an_hour_ago = setup.clock.now() - SignedDuration::from_hours(1);
    deliver(&*setup.store, setup.boots, 700, an_hour_ago).await;

    update(&*setup.store, setup.boots, |body| {
        body["goal"] = serde_json::json!({ "metric": "impressions", "daily": 1_000 });
    })
    .await;
    setup.clock.advance(SignedDuration::from_secs(10));
    pacing.round().await.unwrap();
    // The edge's lease is new with the goal: its counter starts at 0.
    assert_eq!(bill_all(&pacing, 7, setup.boots, 0, u64::MAX).await, 300);
}

/// Pauses `kind` `id` (boots or one of its ancestors), runs rounds for an hour while it is
/// paused, resumes it and returns boots' control after the next round. While paused, boots has
/// no control and its budget is suspended: the edge's renewals get no room, and no "no budget".
async fn paused_for_an_hour_and_resumed(
    setup: &Setup,
    kind: ObjectKind,
    id: u64,
) -> marquee_pacing::ControlEntry {
    let (pacing, first) = first_grant(setup).await;
    let consumed = first.ceiling;

    set_object_status(&*setup.store, kind, id, Status::Paused).await;
    for _ in 0..6 {
        setup.clock.advance(SignedDuration::from_mins(10));
        pacing.round().await.unwrap();
        let paused = pacing
            .sync(request(
                0,
                vec![renewal(setup.boots, consumed, first.ceiling)],
            ))
            .await
            .unwrap();
        assert!(paused.unbudgeted.is_empty(), "suspended: {paused:?}");
        assert_eq!(paused.grants[0].ceiling, consumed, "no room: {paused:?}");
        let controls = paused.controls.unwrap();
        assert!(
            controls.iter().all(|c| c.line_item != setup.boots),
            "not paced while paused: {controls:?}"
        );
    }

    set_object_status(&*setup.store, kind, id, Status::Active).await;
    setup.clock.advance(SignedDuration::from_secs(10));
    boots_control_after_a_round(&pacing, setup).await
}

/// Boots' control as an edge's sync gets it after one more pacing round.
async fn boots_control_after_a_round(
    pacing: &Pacing,
    setup: &Setup,
) -> marquee_pacing::ControlEntry {
    pacing.round().await.unwrap();
    let controls = pacing
        .sync(request(0, vec![]))
        .await
        .unwrap()
        .controls
        .unwrap();
    *controls
        .iter()
        .find(|c| c.line_item == setup.boots)
        .unwrap()
}

/// A campaign (or advertiser) paused is a pause for its line items, not a shortfall: while
/// paused they are not paced and their budgets are suspended; resumed, their controllers start
/// as after a line item's own pause, not at full throttle with a raised bid.
#[tokio::test]
async fn a_paused_campaign_or_advertiser_pauses_the_pacing_of_its_line_items() {
    let line_item_paused = {
        let setup = setup().await;
        paused_for_an_hour_and_resumed(&setup, ObjectKind::LineItem, setup.boots.0).await
    };
    assert!(!line_item_paused.stopped);
    assert!(
        (1..=200_000).contains(&line_item_paused.throttle_ppm),
        "{line_item_paused:?}"
    );
    assert_eq!(line_item_paused.bid_multiplier_permille, 1_000);

    for kind in [ObjectKind::Campaign, ObjectKind::Advertiser] {
        let setup = setup().await;
        let catalog = setup.store.catalog().await.unwrap();
        let boots = catalog
            .line_items
            .iter()
            .find(|li| li.meta.id == setup.boots.0)
            .unwrap();
        let campaign = boots.object.campaign_id;
        let advertiser = catalog
            .campaigns
            .iter()
            .find(|c| c.meta.id == campaign.0)
            .unwrap()
            .object
            .advertiser_id;
        let id = match kind {
            ObjectKind::Campaign => campaign.0,
            _ => advertiser.0,
        };
        let resumed = paused_for_an_hour_and_resumed(&setup, kind, id).await;
        assert_eq!(resumed, line_item_paused, "{kind:?}");
    }
}
