//! A full disk under a running edge: `marquee serve --demo` logs to
//! `data/events`, a small tmpfs mounted there for the test (root only: CI runs as root). A
//! filler file takes the space while clients keep fetching ads and firing impression beacons:
//! every request is still answered, the events that cannot be logged are not counted and the
//! metrics say so (`marquee_edge_log_errors_total`, `marquee_eventlog_io_errors_total`). Once
//! the filler is removed the log restarts by itself and every beacon is counted again, the
//! beacons fired while the disk was full included when the browser fires them again: each
//! counts exactly once in the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, fire_impression, metrics_page, required_metric, serve_and_fire, wait_for_ad};

/// A tmpfs mounted on `dir`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, bytes: u64) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "mounting a tmpfs failed: this test fills a disk for real and needs root \
             (CI runs as root)"
        );
        Tmpfs(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

struct Edge {
    client: reqwest::Client,
    base: String,
}

impl Edge {
    /// Fetches an ad and fires its impression beacon; both must be answered. Gives the
    /// beacon's token.
    async fn impression(&self) -> String {
        serve_and_fire(&self.client, &self.base, 2).await.0
    }

    /// (impressions counted, events not logged, event log I/O errors)
    async fn figures(&self) -> (f64, f64, f64) {
        let page = metrics_page(&self.client, &self.base).await;
        (
            required_metric(&page, "marquee_edge_impressions_total"),
            required_metric(&page, "marquee_edge_log_errors_total"),
            required_metric(&page, "marquee_eventlog_io_errors_total"),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_on_a_full_disk_keeps_answering_stops_counting_says_so_and_recovers() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let data = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&data.path().join("events"), 1 << 20);
    let server = Server::start_with(
        data.path(),
        &["--demo"],
        &[("MARQUEE_EVENTS__DURABILITY", "strict")],
    );
    let edge = Edge {
        client: reqwest::Client::new(),
        base: server.url(""),
    };
    wait_for_ad(&edge.client, &edge.base).await;
    for _ in 0..20 {
        edge.impression().await;
    }
    let before = edge.figures().await;
    assert_eq!(
        (before.1, before.2),
        (0.0, 0.0),
        "no log error before the disk fills"
    );

    let filler = disk.0.join("filler");
    assert!(
        std::fs::write(&filler, vec![0u8; 2 << 20]).is_err(),
        "the filler fitted: the disk is not full"
    );
    let mut fired_while_full = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while edge.figures().await.1 < 20.0 {
        fired_while_full.push(edge.impression().await);
        assert!(Instant::now() < deadline, "no log error on a full disk");
    }
    let answered_while_full = fired_while_full.len();
    let full = edge.figures().await;
    assert!(full.2 >= 1.0, "the event log reports its I/O error");

    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // Each shard (one per worker thread) retries every second on its own: give them all that
    // second, then wait until a batch of beacons all count.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    loop {
        let (counted, _, _) = edge.figures().await;
        for _ in 0..10 {
            edge.impression().await;
        }
        if edge.figures().await.0 - counted == 10.0 {
            break;
        }
        assert!(Instant::now() < deadline, "impressions never counted again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let recovered = edge.figures().await;
    for _ in 0..50 {
        edge.impression().await;
    }
    let after = edge.figures().await;

    // The browser fires again the beacons the edge could not log: each counts now, unless it
    // was counted then (a beacon not logged is not remembered as seen).
    for token in &fired_while_full {
        fire_impression(&edge.client, &edge.base, token).await;
    }
    let refired = edge.figures().await;
    assert_eq!(
        (full.0 - before.0) + (refired.0 - after.0),
        answered_while_full as f64,
        "each beacon fired while the disk was full counts exactly once in the end \
         ({} counted then, {} when fired again)",
        full.0 - before.0,
        refired.0 - after.0
    );
    assert!(
        refired.0 > after.0,
        "beacons not logged while the disk was full count when fired again"
    );
    println!(
        "disk full: {answered_while_full} beacons answered while full, {} not counted (log errors), \
         {} event log I/O errors; after space returned 50 of 50 counted, and {} of the beacons \
         not counted while full when fired again",
        full.1,
        full.2,
        refired.0 - after.0
    );
    assert_eq!(
        after.0 - recovered.0,
        50.0,
        "every beacon counted after recovery"
    );
    assert_eq!(after.1, recovered.1, "no log error after recovery");
    server.stop();
}
