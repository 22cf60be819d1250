//! Resident memory of a 100,000 line-item snapshot with its index, as an edge holds it: the
//! snapshot is written to a file by one process and loaded by a fresh one, so the generator's
//! garbage does not count. Run:
//! `cargo run --profile bench -p marquee-engine --example footprint`
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/support/workload.rs"]
mod workload;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use marquee_engine::Engine;
use marquee_snapshot::Snapshot;

const LINE_ITEMS: usize = 100_000;

fn main() {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("load") => load(Path::new(&args.next().expect("a snapshot path"))),
        _ => {
            let path = std::env::temp_dir().join("marquee-footprint.snapshot");
            let bytes = workload::snapshot(LINE_ITEMS, workload::Inventory::Growing, 1).encode();
            std::fs::write(&path, &bytes).expect("write snapshot");
            let status = Command::new(std::env::current_exe().expect("own path"))
                .arg("load")
                .arg(&path)
                .status()
                .expect("run loader");
            std::fs::remove_file(&path).ok();
            assert!(status.success());
        }
    }
}

fn load(path: &Path) {
    let bytes = std::fs::read(path).expect("read snapshot");
    let start = workload::resident_bytes();
    let snapshot = Arc::new(Snapshot::decode(&bytes).expect("valid snapshot"));
    drop(bytes);
    let decoded = workload::resident_bytes();
    let engine = Engine::new(snapshot);
    let indexed = workload::resident_bytes();
    println!(
        "{} line items: resident {:.1} MB at start (file read), {:.1} MB decoded, {:.1} MB with the index ({:.1} MB of index data)",
        engine.snapshot().data.line_items.len(),
        start as f64 / 1e6,
        decoded as f64 / 1e6,
        indexed as f64 / 1e6,
        engine.index_heap_bytes() as f64 / 1e6
    );
}
