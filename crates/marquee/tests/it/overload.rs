//! Operability through the real binary: `/readyz` and `/metrics` answer, and a SIGTERM under
//! load stops accepting, finishes the requests in progress and flushes the log, so that every
//! event behind an answer a client got is on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{Server, impression_token, logged_events, metrics_page, try_get_text, wait_for_ad};
use marquee_eventlog::EventKind;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_loses_no_logged_event() {
    let data = tempfile::tempdir().unwrap();
    let mut server = Server::start(data.path(), &["--demo"]);
    let client = reqwest::Client::new();
    wait_for_ad(&client, &server.base).await;

    let ready = client.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let metrics = metrics_page(&client, &server.base).await;
    assert!(metrics.contains("marquee_edge_requests_total{endpoint=\"ad\",outcome=\"ok\"}"));
    assert!(metrics.contains("marquee_snapshot_version "));

    // Eight clients request ads (each for a new user, so no cap stops them) and fire each
    // ad's impression beacon, until the server goes away.
    let served = Arc::new(AtomicU64::new(0));
    let beacons = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for task in 0..8 {
        let (client, base) = (client.clone(), server.base.clone());
        let (served, beacons) = (Arc::clone(&served), Arc::clone(&beacons));
        clients.push(tokio::spawn(async move {
            for n in 0..5_000 {
                let url = format!("{base}/ad?placement=1&format=html&uid=t{task}n{n}");
                let Some(html) = try_get_text(&client, &url).await else {
                    return;
                };
                let Some(token) = impression_token(&html) else {
                    continue;
                };
                served.fetch_add(1, Ordering::Relaxed);
                let beacon = format!("{base}/t/i?t={token}");
                match client.get(beacon).send().await {
                    Ok(answer) if answer.status() == 200 => {
                        beacons.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => return,
                }
            }
        }));
    }
    // SIGTERM once the load is well under way (a count, not a time).
    while served.load(Ordering::Relaxed) < 300 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    for client in clients {
        client.await.unwrap();
    }
    let status = tokio::task::spawn_blocking(move || server.child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "graceful stop exited with {status}");

    let events = logged_events(data.path());
    let count = |kind| events.iter().filter(|e| e.kind == kind).count() as u64;
    let (served, beacons) = (
        served.load(Ordering::Relaxed),
        beacons.load(Ordering::Relaxed),
    );
    assert!(served >= 300 && beacons > 0);
    // Every answered ad has its decision on disk, every answered beacon its impression (a
    // request cut off by the stop may have logged without its answer arriving: `>=`).
    assert!(
        count(EventKind::Decision) >= served,
        "{} decisions logged for {served} ads answered",
        count(EventKind::Decision)
    );
    assert!(
        count(EventKind::Impression) >= beacons,
        "{} impressions logged for {beacons} beacons answered",
        count(EventKind::Impression)
    );
}
