//! Snapshot versions never go back: an edge installs only a version above the one it serves,
//! so a manager whose own next version would be lower (its snapshot directory lost, or its
//! database restored from a backup, taking the change counter back) publishes above the
//! highest version published or reported by an edge, and keeps doing so across restarts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use jiff::Timestamp;
use marquee_manager::{Manager, Refresh, live};
use marquee_model::{Clock, ManualClock};
use marquee_pacing::{EdgeId, EdgeReport};
use marquee_snapshot::{Header, Snapshot};
use marquee_store::Store;

use crate::support;

const SECRET: &str = "0123456789abcdef";
const NOW: &str = "2026-12-01T12:00:00Z";

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(NOW.parse().unwrap()))
}

async fn open(store: &Arc<dyn Store>, clock: &Arc<dyn Clock>, snapshots: &Path) -> Arc<Manager> {
    support::open_manager(store, clock, snapshots, 3).await
}

/// A catalog change: the first line item's weight.
async fn change(store: &dyn Store) {
    let id = store.catalog().await.unwrap().line_items[0].meta.id;
    support::raise_weight(store, id).await;
}

fn serving(version: u64) -> EdgeReport {
    EdgeReport {
        id: "eu-1".into(),
        public_url: "http://ads.example.com".into(),
        log_url: "http://10.0.0.7:8080".into(),
        pacing_edge: EdgeId(7),
        snapshot_version: Some(version),
        snapshot_built_at: None,
        requests_total: 0,
        sent_at: NOW.parse::<Timestamp>().unwrap(),
    }
}

/// The published snapshot's version, checked to decode whole as an edge would.
fn published_version(manager: &Manager) -> u64 {
    let latest = manager.latest().unwrap();
    let header = Header::parse(&latest.bytes).unwrap();
    assert_eq!(
        Snapshot::decode(&latest.bytes).unwrap().version,
        header.version
    );
    header.version
}

/// The snapshot directory was lost: the manager restarts at revision 0 of the counter, below
/// the live revisions its edges installed. Once an edge reports its version, the next refresh
/// publishes above it (an edge holding V installs only versions above V), once, and a restart
/// neither goes back nor publishes again.
#[tokio::test]
async fn a_manager_behind_an_edge_publishes_above_the_version_the_edge_reports() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let store = support::demo_store(&dir.path().join("m.db"), &clock).await;
    let snapshots = dir.path().join("snapshots");
    let manager = open(&store, &clock, &snapshots).await;
    manager.accept_remote_edges(SECRET.into()).await.unwrap();
    let counter = store.change_counter().await.unwrap();
    let Refresh::Published { version: own, .. } = manager.refresh().await.unwrap() else {
        panic!("the first refresh publishes");
    };
    assert_eq!(own, live::version(counter, 0));

    let edge_holds = live::version(counter, 5);
    manager
        .report_edge(serving(edge_holds), false)
        .await
        .unwrap();
    let Refresh::Published { version, .. } = manager.refresh().await.unwrap() else {
        panic!("an edge ahead of the manager gets a new snapshot");
    };
    assert!(version > edge_holds, "{version} > {edge_holds}");
    assert_eq!(published_version(&manager), version);
    // Published once: the edge still reports its old version until it polls, and the next
    // refreshes have nothing to do.
    assert_eq!(
        manager.refresh().await.unwrap(),
        Refresh::Unchanged { version }
    );
    manager.report_edge(serving(version), false).await.unwrap();
    assert_eq!(
        manager.refresh().await.unwrap(),
        Refresh::Unchanged { version }
    );

    // A restart adopts the raised version from disk and publishes nothing new.
    let restarted = open(&store, &clock, &snapshots).await;
    assert_eq!(
        restarted.refresh().await.unwrap(),
        Refresh::Unchanged { version }
    );
    assert_eq!(published_version(&restarted), version);
    change(&*store).await;
    let Refresh::Published { version: next, .. } = restarted.refresh().await.unwrap() else {
        panic!("a change is published");
    };
    assert!(next > version, "{next} > {version}");
}

/// The database was restored from a backup: its change counter is below the one the published
/// snapshot was compiled at. The manager publishes above its published version rather than at
/// the restored counter, compiles only when the counter moves again, and stays above.
#[tokio::test]
async fn a_change_counter_gone_back_does_not_take_the_version_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let snapshots = dir.path().join("snapshots");
    let before_restore = support::demo_store(&dir.path().join("live.db"), &clock).await;
    change(&*before_restore).await;
    change(&*before_restore).await;
    let manager = open(&before_restore, &clock, &snapshots).await;
    let Refresh::Published { version: old, .. } = manager.refresh().await.unwrap() else {
        panic!("the first refresh publishes");
    };
    drop(manager);

    // The backup: two changes behind.
    let restored = support::demo_store(&dir.path().join("backup.db"), &clock).await;
    let counter = restored.change_counter().await.unwrap();
    assert!(live::version(counter, 0) < old);
    let manager = open(&restored, &clock, &snapshots).await;
    let Refresh::Published { version, .. } = manager.refresh().await.unwrap() else {
        panic!("the restored catalog is published");
    };
    assert!(version > old, "{version} > {old}");
    assert_eq!(
        manager.refresh().await.unwrap(),
        Refresh::Unchanged { version }
    );
    change(&*restored).await;
    let Refresh::Published { version: next, .. } = manager.refresh().await.unwrap() else {
        panic!("a change is published");
    };
    assert!(next > version, "{next} > {version}");
    assert_eq!(published_version(&manager), next);
}
