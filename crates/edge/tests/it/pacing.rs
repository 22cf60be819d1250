//! The edge's pacing state against a scripted manager: a line item with a goal is held until
//! its lease is granted and again once the slice is billed, one without a goal is never held;
//! controls are applied by line item id and re-applied to a snapshot swapped in later; the
//! lease's counter survives the swap and is reported with the next renewal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use marquee_edge::pacing::{SyncClient, SyncError, sync_once};
use marquee_edge::{Edge, Limits};
use marquee_engine::Pacing;
use marquee_model::{Currency, Goal, GoalMetric, LineItemId, Micros, Price, PricingModel};
use marquee_pacing::{Billable, ControlEntry, LeaseGrant, SyncRequest, SyncResponse};
use marquee_snapshot::{LineItemEntry, Snapshot, SnapshotData, fixtures};

use crate::common;

const PACED: LineItemId = LineItemId(10);
const FREE: LineItemId = LineItemId(20);

fn line_item(id: LineItemId, goal: Option<Goal>) -> LineItemEntry {
    LineItemEntry {
        goal,
        price: fixtures::cpm(2_000_000),
        ..fixtures::line_item(id.0)
    }
}

/// A snapshot of `version` holding the paced line item (an impression goal) and a free one;
/// `extra` adds line items in front, moving the others' positions.
fn snapshot(version: u64, extra: &[u64]) -> Vec<u8> {
    let goal = Goal {
        metric: GoalMetric::Impressions,
        daily: None,
        lifetime: Some(1_000),
    };
    let mut line_items: Vec<LineItemEntry> = extra
        .iter()
        .map(|&id| line_item(LineItemId(id), None))
        .collect();
    line_items.push(line_item(PACED, Some(goal)));
    line_items.push(line_item(FREE, None));
    line_items.sort_by_key(|li| li.id);
    Snapshot {
        version,
        built_at: "2026-11-21T12:00:00Z".parse().unwrap(),
        data: SnapshotData {
            line_items,
            ..SnapshotData::default()
        },
    }
    .encode_with_header()
    .1
}

fn edge(dir: &std::path::Path) -> Arc<Edge> {
    Arc::new(common::edge(dir, Limits::default()))
}

/// A manager that answers every renewal with a ceiling of `consumed + 2` (renew below 1 left)
/// and sends `control` (version 1) to an edge that has not got it; it keeps the requests.
#[derive(Default)]
struct Scripted {
    control: Mutex<Option<ControlEntry>>,
    requests: Mutex<Vec<SyncRequest>>,
}

impl SyncClient for Scripted {
    fn sync(
        &self,
        request: SyncRequest,
    ) -> Pin<Box<dyn Future<Output = Result<SyncResponse, SyncError>> + Send + '_>> {
        let now = Timestamp::now();
        let grants = request
            .renewals
            .iter()
            .map(|r| LeaseGrant {
                line_item: r.line_item,
                ceiling: r.consumed + 2,
                expires_at: now + SignedDuration::from_secs(60),
                renew_at: now + SignedDuration::from_secs(30),
                low_water: 1,
            })
            .collect();
        let control = *self.control.lock().unwrap();
        let controls = (request.control_version != 1).then(|| control.into_iter().collect());
        self.requests.lock().unwrap().push(request);
        Box::pin(async move {
            Ok(SyncResponse {
                manager: 1,
                control_version: 1,
                controls,
                grants,
                unbudgeted: Vec::new(),
            })
        })
    }
}

/// The engine's view of one line item of the current snapshot.
fn control(edge: &Edge, id: LineItemId) -> marquee_engine::Control {
    let loaded = edge.holder.current().unwrap();
    let position = loaded
        .engine
        .snapshot()
        .data
        .line_items
        .iter()
        .position(|li| li.id == id)
        .unwrap();
    edge.pacing
        .view(&loaded, Timestamp::now())
        .control(position)
}

#[tokio::test]
async fn leases_hold_and_release_line_items_and_controls_follow_swaps() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path());
    edge.accept_snapshot(&snapshot(1, &[])).unwrap();
    assert!(control(&edge, PACED).stopped, "no grant yet: held");
    assert!(!control(&edge, FREE).stopped, "no goal: never held");

    let manager = Scripted::default();
    *manager.control.lock().unwrap() = Some(ControlEntry {
        line_item: PACED,
        stopped: false,
        throttle_ppm: 250_000,
        bid_multiplier_permille: 1_100,
    });
    sync_once(&edge, &manager).await.unwrap();
    let paced = control(&edge, PACED);
    assert!(!paced.stopped, "granted");
    assert_eq!(paced.throttle, 0.25);
    assert_eq!(paced.bid_multiplier_permille, 1_100);
    assert_eq!(control(&edge, FREE).throttle, 1.0);

    // Two impressions use the slice of two.
    let loaded = edge.holder.current().unwrap();
    edge.pacing
        .bill(&loaded, PACED.0, Billable::Impression, None);
    assert!(!control(&edge, PACED).stopped);
    edge.pacing.bill(&loaded, PACED.0, Billable::Click, None);
    assert!(!control(&edge, PACED).stopped, "a click does not charge it");
    edge.pacing
        .bill(&loaded, PACED.0, Billable::Impression, None);
    assert!(control(&edge, PACED).stopped, "slice used: held");

    // A new snapshot moves the line items: the control and the used lease follow by id.
    edge.accept_snapshot(&snapshot(2, &[1, 2, 3])).unwrap();
    let paced = control(&edge, PACED);
    assert!(paced.stopped, "the lease's counter survives the swap");
    assert_eq!(paced.throttle, 0.25, "the control is re-applied");
    assert_eq!(control(&edge, LineItemId(1)).throttle, 1.0);

    // The next renewal reports both impressions and brings room again.
    sync_once(&edge, &manager).await.unwrap();
    let requests = manager.requests.lock().unwrap();
    let renewal = requests[1].renewals[0];
    assert_eq!((renewal.line_item, renewal.consumed), (PACED, 2));
    assert_eq!(requests[1].control_version, 1);
    drop(requests);
    assert!(!control(&edge, PACED).stopped);
}

/// A line item paused after its ads were shown leaves the next snapshot, but their late beacons
/// and billing notices still spend: they charge the lease the manager granted (before, a line
/// item missing from the current snapshot was charged nothing).
#[tokio::test]
async fn a_line_item_gone_from_the_snapshot_is_still_charged() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path());
    edge.accept_snapshot(&snapshot(1, &[])).unwrap();
    sync_once(&edge, &Scripted::default()).await.unwrap();
    let without_paced = Snapshot {
        version: 2,
        built_at: "2026-11-21T12:00:01Z".parse().unwrap(),
        data: SnapshotData {
            line_items: vec![line_item(FREE, None)],
            ..SnapshotData::default()
        },
    }
    .encode_with_header()
    .1;
    edge.accept_snapshot(&without_paced).unwrap();
    let loaded = edge.holder.current().unwrap();
    assert_eq!(
        edge.pacing
            .bill(&loaded, PACED.0, Billable::Impression, None),
        Some(1)
    );
}

/// A CPC line item with a spend goal bidding on exchanges: its exchange bids cost their billing
/// notices' clearing CPM (÷ 1000), as the aggregation counts them, not its price per click
/// (before, billing notices charged its click-charged lease nothing).
#[tokio::test]
async fn an_exchange_billing_notice_charges_a_cpc_spend_goal_its_clearing_price() {
    let dir = tempfile::tempdir().unwrap();
    let edge = edge(dir.path());
    let spend = Goal {
        metric: GoalMetric::Spend,
        daily: None,
        lifetime: Some(1_000_000_000),
    };
    let mut cpc = line_item(PACED, Some(spend));
    cpc.price = Price {
        model: PricingModel::Cpc,
        amount_micros: Micros(500_000),
        currency: Currency::USD,
    };
    let encoded = Snapshot {
        version: 1,
        built_at: "2026-11-21T12:00:00Z".parse().unwrap(),
        data: SnapshotData {
            line_items: vec![cpc, line_item(FREE, None)],
            ..SnapshotData::default()
        },
    }
    .encode_with_header()
    .1;
    edge.accept_snapshot(&encoded).unwrap();
    sync_once(&edge, &Scripted::default()).await.unwrap();
    let loaded = edge.holder.current().unwrap();
    assert_eq!(
        edge.pacing
            .bill(&loaded, PACED.0, Billable::Impression, Some(1_234_000)),
        Some(1_234),
        "the clearing CPM ÷ 1000"
    );
    assert_eq!(
        edge.pacing.bill(&loaded, PACED.0, Billable::Click, None),
        Some(500_000),
        "a direct click, at its price"
    );
    let data = &loaded.engine.snapshot().data;
    assert!(marquee_edge::pacing::has_spend_goal(data, PACED));
    assert!(!marquee_edge::pacing::has_spend_goal(data, FREE));
}
