//! A full disk: the log lives on a small tmpfs mounted for the test
//! (root only: CI runs as root), a filler file takes the space, and the writes fail with
//! ENOSPC. The shard stops and says so (failed appends and waits, `io_errors`), restarts by
//! itself once space returns, and what it acknowledged as durable is exactly what a reader
//! finds after a reopen: nothing acknowledged is lost, nothing refused appears.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use marquee_eventlog::{Config, Durability, EventKind, EventLog};

use crate::common::{block_on, event, read_shard};

/// A tmpfs mounted on a fresh directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(bytes: u64) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap().keep();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
            .arg("tmpfs")
            .arg(&dir)
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "mounting a tmpfs failed: this test makes a disk full for real and needs root \
             (CI runs as root; run `cargo test -p marquee-eventlog` as root)"
        );
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn config() -> Config {
    Config {
        shards: 1,
        durability: Durability::Group {
            interval: Duration::from_millis(1),
        },
        segment_max_bytes: 16 << 10,
        ..Config::default()
    }
}

/// Appends event `id` and waits for its fsync; whether it was acknowledged as durable.
fn durable(log: &EventLog, id: u128) -> bool {
    block_on(log.append_durable(&event(EventKind::Impression, id))).is_ok()
}

/// Takes every free byte of the disk: the write fails with ENOSPC once it is full.
fn fill(path: &Path) {
    let written = std::fs::write(path, vec![0u8; 1 << 20]);
    assert!(written.is_err(), "the filler fitted: the disk is not full");
}

#[test]
fn a_full_disk_stops_the_log_which_restarts_when_space_returns_and_loses_nothing_acknowledged() {
    let disk = Tmpfs::mount(256 << 10);
    let dir = disk.0.join("log");
    let filler = disk.0.join("filler");
    let log = EventLog::open(&dir, config()).unwrap();

    let mut acknowledged = BTreeSet::new();
    let mut refused = 0u64;
    let mut id = 0u128;
    for _ in 0..100 {
        id += 1;
        assert!(durable(&log, id), "event {id} before the disk fills");
        acknowledged.insert(id);
    }

    fill(&filler);
    // The disk is full: appends go on (the edge keeps answering) and fail soon, and the log says so.
    while log.is_healthy() {
        id += 1;
        if durable(&log, id) {
            acknowledged.insert(id);
        } else {
            refused += 1;
        }
        assert!(id < 100_000, "writes never failed on a full disk");
    }
    assert!(log.counters().io_errors >= 1);
    for _ in 0..50 {
        id += 1;
        assert!(
            !durable(&log, id),
            "event {id} acknowledged while the disk is full"
        );
        refused += 1;
    }

    std::fs::remove_file(&filler).unwrap();
    let back = Instant::now();
    loop {
        id += 1;
        if durable(&log, id) {
            acknowledged.insert(id);
            break;
        }
        refused += 1;
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the log never restarted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(log.is_healthy());
    for _ in 0..500 {
        id += 1;
        assert!(durable(&log, id), "event {id} after space returned");
        acknowledged.insert(id);
    }
    log.flush_and_close().unwrap();
    drop(log);

    let reopened = EventLog::open(&dir, config()).unwrap();
    let found: BTreeSet<u128> = read_shard(&reopened, 0)
        .iter()
        .map(|e| e.event_id)
        .collect();
    let lost = acknowledged.difference(&found).count();
    let phantom = found.difference(&acknowledged).count();
    println!(
        "disk full: {} appended, {} acknowledged, {refused} refused, {} read back, {lost} lost, {phantom} refused but logged",
        id,
        acknowledged.len(),
        found.len()
    );
    assert_eq!((lost, phantom), (0, 0));
    assert_eq!(found.len(), acknowledged.len(), "each event once");
    reopened.flush_and_close().unwrap();
}
