//! Live statistics rendered by the manager into prepared ad code, against a real SQLite store
//! holding the demo data, with a manual clock and statistics committed through the store: a
//! new value shows in the next snapshot once the creative is due, a creative on quiet
//! placements is re-rendered less often than one on busy placements, and nothing is compiled
//! when no value changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use marquee_manager::{LiveOptions, Manager, ManagerOptions, Refresh, live};
use marquee_model::{
    Clock, Creative, CreativeContent, LineItemId, ManualClock, PlacementId, Size, Status,
};
use marquee_snapshot::{Part, Snapshot};
use marquee_stats::Counters;
use marquee_store::{Actor, Store};
use tempfile::TempDir;

use crate::support;
use support::commit;

/// A Tuesday noon in Berlin's winter (UTC+1).
const NOW: &str = "2026-12-01T12:00:00Z";

struct Setup {
    _dir: TempDir,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    manager: Arc<Manager>,
    /// "Boots DACH mobile", linked to the busy mobile placement (and the quiet sidebar).
    busy_line_item: u64,
    busy_placement: u64,
    /// "Berlin weekend deals", linked to the quiet sidebar only.
    quiet_line_item: u64,
    /// A creative of each with live statistics.
    busy: u64,
    quiet: u64,
}

async fn line_item_named(store: &dyn Store, name: &str) -> u64 {
    let catalog = store.catalog().await.unwrap();
    let found = catalog.line_items.iter().find(|li| li.object.name == name);
    found.map(|li| li.meta.id).unwrap()
}

// The same shape as the snapshot tests' `creative` fixture, deliberately: this one goes through the
// store, that one is a stored value, and the crates share no test code.
async fn add_live_creative(store: &dyn Store, line_item: u64, html: &str) -> u64 {
    let creative = Creative {
        line_item_id: LineItemId(line_item),
        name: format!("live {line_item}"),
        status: Status::Active,
        size: Some(Size { w: 300, h: 250 }),
        landing_url: "https://shop.example.com/".into(),
        weight: 100,
        content: CreativeContent::Html { html: html.into() },
        categories: Vec::new(),
        approval: marquee_model::Approval::Approved,
    };
    marquee_model::Object::validate(&creative).unwrap();
    store
        .create_object(&creative, None, &Actor::cli())
        .await
        .unwrap()
        .meta
        .id
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW.parse().unwrap()));
    let store = support::demo_store(&dir.path().join("m.db"), &(Arc::clone(&clock) as _)).await;
    let busy_line_item = line_item_named(&*store, "Boots DACH mobile").await;
    let quiet_line_item = line_item_named(&*store, "Berlin weekend deals").await;
    let quiet_placements = store
        .placements_of(LineItemId(quiet_line_item), None)
        .await
        .unwrap();
    let busy_placement = store
        .placements_of(LineItemId(busy_line_item), None)
        .await
        .unwrap()
        .into_iter()
        .find(|p| !quiet_placements.contains(p))
        .map(|p: PlacementId| p.0)
        .unwrap();
    let busy = add_live_creative(
        &*store,
        busy_line_item,
        "<b>{{STAT:IMPRESSIONS_TODAY}} seen today, #{{STAT:RANK}} of {{STAT:RANK_OF}}</b>",
    )
    .await;
    let quiet = add_live_creative(&*store, quiet_line_item, "<b>{{STAT:CLICKS_TODAY}}</b>").await;
    let manager = Manager::open_with_live(
        Arc::clone(&store),
        Arc::clone(&clock) as Arc<dyn Clock>,
        ManagerOptions {
            snapshot_dir: dir.path().join("snapshots"),
            keep: 2,
            compile_interval: Duration::from_secs(1),
        },
        LiveOptions {
            min_interval: Duration::from_secs(2),
            max_interval: Duration::from_secs(60),
            requests_per_render: 100,
        },
    )
    .await
    .unwrap();
    Setup {
        _dir: dir,
        store,
        clock,
        manager,
        busy_line_item,
        busy_placement,
        quiet_line_item,
        busy,
        quiet,
    }
}

/// The text of a creative's ad code in the latest published snapshot.
fn ad_text(manager: &Manager, creative: u64) -> String {
    let published = manager.latest().unwrap();
    let snapshot = Snapshot::decode(&published.bytes).unwrap();
    let entry = snapshot
        .data
        .creatives
        .iter()
        .find(|c| c.id.0 == creative)
        .unwrap();
    let parts = &entry.ad_code.as_ref().unwrap().parts;
    parts
        .iter()
        .filter_map(|part| match part {
            Part::Text(text) => Some(text.as_str()),
            Part::Hole(_) | Part::KeyValue(_) => None,
        })
        .collect()
}

/// Commits 36,000 requests an hour on the busy placement at `at`: 100 requests take 10 s.
async fn busy_traffic(setup: &Setup, at: Timestamp) {
    let traffic = Counters {
        decisions: 36_000,
        ..Counters::default()
    };
    commit(
        &*setup.store,
        setup.busy_line_item,
        setup.busy_placement,
        traffic,
        at,
    )
    .await;
}

fn advance(setup: &Setup, seconds: i64) {
    setup.clock.advance(SignedDuration::from_secs(seconds));
}

#[tokio::test]
async fn a_new_value_shows_in_the_next_snapshot_once_the_creative_is_due() {
    let setup = setup().await;
    let now = setup.clock.now();
    busy_traffic(&setup, now).await;

    let first = setup.manager.refresh().await.unwrap();
    let Refresh::Published { version, .. } = first else {
        panic!("the first refresh publishes: {first:?}");
    };
    let counter = setup.store.change_counter().await.unwrap();
    assert_eq!(version, live::version(counter, 0));
    let text = ad_text(&setup.manager, setup.busy);
    // Boots' campaign has three line items, none clicked: ties go to the lower id.
    assert!(text.contains("<b>0 seen today, #1 of 3</b>"), "{text}");
    let status = setup.manager.live_status(setup.busy).await.unwrap();
    assert_eq!(status.next_render, now + SignedDuration::from_secs(10));

    let impressions = Counters {
        impressions: 1_234,
        ..Counters::default()
    };
    commit(
        &*setup.store,
        setup.busy_line_item,
        setup.busy_placement,
        impressions,
        now,
    )
    .await;
    // Not due yet: the snapshot keeps the old value.
    advance(&setup, 5);
    assert_eq!(
        setup.manager.refresh().await.unwrap(),
        Refresh::Unchanged { version }
    );
    assert!(ad_text(&setup.manager, setup.busy).contains("<b>0 seen today"));

    advance(&setup, 5);
    let second = setup.manager.refresh().await.unwrap();
    assert!(
        matches!(second, Refresh::Published { version: v, .. } if v == version + 1),
        "{second:?}"
    );
    let text = ad_text(&setup.manager, setup.busy);
    assert!(text.contains("<b>1234 seen today, #1 of 3</b>"), "{text}");
    assert_eq!(
        setup.manager.latest().unwrap().header.version,
        live::version(counter, 1),
        "a live re-render keeps the catalog's counter and moves the revision"
    );

    // A catalog change starts the next counter at revision 0.
    support::raise_weight(setup.store.as_ref(), setup.quiet_line_item).await;
    let third = setup.manager.refresh().await.unwrap();
    let counter = setup.store.change_counter().await.unwrap();
    assert_eq!(
        third,
        Refresh::Published {
            version: live::version(counter, 0),
            bytes: setup.manager.latest().unwrap().bytes.len()
        }
    );
    assert!(ad_text(&setup.manager, setup.busy).contains("1234 seen today"));
}

#[tokio::test]
async fn quiet_creatives_are_rendered_less_often_and_unchanged_values_compile_nothing() {
    let setup = setup().await;
    let now = setup.clock.now();
    busy_traffic(&setup, now).await;
    assert!(matches!(
        setup.manager.refresh().await.unwrap(),
        Refresh::Published { .. }
    ));
    let compiles = setup.manager.compiles().await;
    let version = setup.manager.latest().unwrap().header.version;

    // Two minutes of compile ticks, one a second, with no statistic moving.
    for _ in 0..120 {
        advance(&setup, 1);
        assert_eq!(
            setup.manager.refresh().await.unwrap(),
            Refresh::Unchanged { version }
        );
    }
    assert_eq!(
        setup.manager.compiles().await,
        compiles,
        "no value changed, so nothing was compiled"
    );
    let busy = setup.manager.live_status(setup.busy).await.unwrap();
    let quiet = setup.manager.live_status(setup.quiet).await.unwrap();
    // Busy: every 10 s (13 renders in 120 s counting the first); quiet (no traffic on its
    // placement): every 60 s, the maximum.
    assert_eq!(busy.renders, 13, "{busy:?}");
    assert_eq!(quiet.renders, 3, "{quiet:?}");

    // A click on the quiet line item shows at its next render, not before.
    let click = Counters {
        clicks: 1,
        ..Counters::default()
    };
    let clicked_at = setup.clock.now();
    commit(&*setup.store, setup.quiet_line_item, 0, click, clicked_at).await;
    let wait = quiet.next_render.duration_since(clicked_at).as_secs();
    for _ in 1..wait {
        advance(&setup, 1);
        setup.manager.refresh().await.unwrap();
    }
    assert!(ad_text(&setup.manager, setup.quiet).contains("<b>0</b>"));
    advance(&setup, 1);
    assert!(matches!(
        setup.manager.refresh().await.unwrap(),
        Refresh::Published { .. }
    ));
    assert!(ad_text(&setup.manager, setup.quiet).contains("<b>1</b>"));
    assert_eq!(setup.manager.compiles().await, compiles + 1);
}

#[tokio::test]
async fn a_restart_with_unchanged_values_publishes_nothing() {
    let setup = setup().await;
    assert!(matches!(
        setup.manager.refresh().await.unwrap(),
        Refresh::Published { .. }
    ));
    let version = setup.manager.latest().unwrap().header.version;
    let reopened = support::open_manager(
        &setup.store,
        &(Arc::clone(&setup.clock) as _),
        &setup._dir.path().join("snapshots"),
        2,
    )
    .await;
    assert_eq!(
        reopened.refresh().await.unwrap(),
        Refresh::Unchanged { version }
    );
}
