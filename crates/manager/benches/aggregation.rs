//! Aggregation throughput: events aggregated per second of manager CPU (target: at least
//! 1,000,000), over the whole path: reading segments of a real event log from disk, CRC,
//! decode, sanitise against the demo catalog, dedupe, aggregate, HyperLogLog, and the SQLite
//! (or PostgreSQL) commit (twelve statements per run).
//!
//! ```text
//! cargo bench -p marquee-manager --bench aggregation
//! BENCH_EVENTS=4000000 cargo bench -p marquee-manager --bench aggregation
//! BENCH_DATABASE=postgres cargo bench -p marquee-manager --bench aggregation
//! ```
//!
//! `BENCH_DATABASE=postgres` commits to PostgreSQL instead: a fresh database on the test server
//! `scripts/test-deps.sh` starts (or `MARQUEE_TEST_POSTGRES_URL`). The server's CPU is then
//! reported too: its processes serving the bench database, and its WAL writer, checkpointer and
//! background writer (found by their process titles in `/proc`).
//!
//! The log is written first (not measured); then the aggregator drains it, and the process's
//! CPU time (user + system, all threads, from `/proc/self/stat`) over the drain is the
//! denominator. Traffic shape: the demo's line items, creatives and linked placements; each
//! decision followed by its impression (same event id), one click in twenty; 20 countries, 5
//! device types, 200,000 users; 1% of impressions logged twice (repeats). Two scenarios:
//!
//! - `steady`: event times within the last minute, as a run sees them when the manager keeps
//!   up (a 1 s run at a million events per second reads one or two minutes' worth);
//! - `backlog`: event times over the last hour, as after an outage: about seven times as many
//!   rows to write per event, the worst case for the database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use marquee_eventlog::{Config, Event, EventKind, EventLog};
use marquee_manager::{AggregationOptions, Aggregator, LocalLogSource};
use marquee_model::{Clock, SystemClock};
use marquee_store::test_postgres::TestDatabase;
use marquee_store::{PostgresStore, SqliteStore, Store};

/// Clock ticks per second of `/proc/self/stat` (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// This process's CPU time so far (user + system, every thread).
fn cpu_time() -> Duration {
    process_cpu("self").unwrap()
}

/// The CPU time so far of a process (`self` or a pid), if it still exists.
fn process_cpu(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?;
    Some(Duration::from_secs_f64(ticks as f64 / TICKS_PER_SECOND))
}

/// The PostgreSQL processes working for `database` (backends, whose titles name it) or for the
/// whole server's writes (WAL writer, checkpointer, background writer), by pid.
fn postgres_processes(database: &str) -> Vec<String> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(title) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let title = String::from_utf8_lossy(&title);
        let serves = title.starts_with("postgres: ")
            && (title.contains(&format!(" {database} "))
                || ["walwriter", "checkpointer", "background writer"]
                    .iter()
                    .any(|name| title.contains(name)));
        if serves {
            pids.push(pid);
        }
    }
    pids
}

/// The summed CPU time of `pids` (those that still exist).
fn processes_cpu(pids: &[String]) -> Duration {
    pids.iter().filter_map(|pid| process_cpu(pid)).sum()
}

// A deliberate copy of the SplitMix64 in the other crates' benches and tests: no dev-only
// crate serves them all, and a production crate must not carry test helpers.
/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

const COUNTRIES: [&[u8; 2]; 20] = [
    b"DE", b"FR", b"US", b"GB", b"NL", b"AT", b"CH", b"IT", b"ES", b"PL", b"SE", b"DK", b"NO",
    b"BE", b"CZ", b"PT", b"IE", b"FI", b"CA", b"BR",
];

/// Appends, waiting while the flusher catches up (the writer outruns the disk here).
fn append(log: &EventLog, event: &Event) {
    loop {
        match log.append(event) {
            Ok(_) => return,
            Err(marquee_eventlog::AppendError::Full { .. }) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(error) => panic!("append failed: {error}"),
        }
    }
}

fn main() {
    let events: u64 = std::env::var("BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (scenario, window_secs) in [("steady", 60), ("backlog", 3_600)] {
        runtime.block_on(bench(scenario, events, window_secs));
    }
}

async fn bench(scenario: &str, events: u64, window_secs: u64) {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let postgres = match std::env::var("BENCH_DATABASE").as_deref() {
        Ok("postgres") => Some(TestDatabase::create().await),
        Ok("sqlite") | Err(_) => None,
        Ok(other) => panic!("BENCH_DATABASE is {other:?}: sqlite (default) or postgres"),
    };
    let store: Arc<dyn Store> = match &postgres {
        Some(db) => Arc::new(
            PostgresStore::connect(db.url(), Arc::clone(&clock))
                .await
                .unwrap(),
        ),
        None => Arc::new(SqliteStore::open(&dir.path().join("m.db"), Arc::clone(&clock)).unwrap()),
    };
    marquee_manager::demo::load(&*store, &*clock).await.unwrap();
    let catalog = store.catalog().await.unwrap();
    // (line item, creative, placement) the demo can serve.
    let slots = common::slots(&catalog);
    assert!(!slots.is_empty(), "the demo links line items to placements");

    let log_dir = dir.path().join("events");
    let log = Arc::new(
        EventLog::open(
            &log_dir,
            Config {
                shards: 1,
                ..Config::default()
            },
        )
        .unwrap(),
    );
    let mut rng = Rng(7);
    let now = clock.now().as_microsecond();
    let mut written = 0u64;
    let mut id = 0u128;
    while written < events {
        id += 1;
        let (line_item, creative, placement) = slots[(rng.next() % slots.len() as u64) as usize];
        let event = Event {
            kind: EventKind::Decision,
            time_micros: now - (rng.next() % (window_secs * 1_000_000)) as i64,
            line_item,
            creative,
            placement,
            user: rng.next() % 200_000 + 1,
            country: *COUNTRIES[(rng.next() % 20) as usize],
            region: [0; 3],
            device: (rng.next() % 5 + 1) as u8,
            amount_micros: 0,
            event_id: id,
        };
        append(&log, &event);
        let impression = Event {
            kind: EventKind::Impression,
            amount_micros: 2_500_000,
            time_micros: event.time_micros + 500_000,
            ..event
        };
        append(&log, &impression);
        written += 2;
        if id.is_multiple_of(100) {
            append(&log, &impression);
            written += 1;
        }
        if id.is_multiple_of(20) {
            append(
                &log,
                &Event {
                    kind: EventKind::Click,
                    amount_micros: 0,
                    time_micros: event.time_micros + 5_000_000,
                    ..event
                },
            );
            written += 1;
        }
    }
    log.flush_and_close().unwrap();
    let bytes: u64 = log.segments(0).unwrap().iter().map(|s| s.len).sum();

    let aggregator = Aggregator::new(
        Arc::clone(&store),
        Arc::clone(&clock),
        vec![Arc::new(LocalLogSource::new("local", Arc::clone(&log)))],
        AggregationOptions {
            delete_consumed: false,
            ..AggregationOptions::default()
        },
    );
    let server_pids = || {
        postgres
            .as_ref()
            .map_or_else(Vec::new, |db| postgres_processes(db.name()))
    };
    let server_before = processes_cpu(&server_pids());
    let cpu_before = cpu_time();
    let wall = Instant::now();
    let mut runs = Vec::new();
    loop {
        let report = aggregator.run_once().await.unwrap();
        let more = report.more;
        runs.push(report);
        if !more {
            break;
        }
    }
    let wall = wall.elapsed();
    let cpu = cpu_time() - cpu_before;
    // Backends opened during the drain count from zero; any that ended are missed.
    let server_cpu = processes_cpu(&server_pids()).saturating_sub(server_before);
    let records: u64 = runs.iter().map(|r| r.records).sum();
    let accepted: u64 = runs.iter().map(|r| r.accepted).sum();
    let duplicates: u64 = runs.iter().map(|r| r.duplicates).sum();
    let statements: Vec<u32> = runs.iter().map(|r| r.statements).collect();
    assert_eq!(records, written);
    println!(
        "{scenario} ({window_secs} s of event times): {records} records ({:.0} MB; {accepted} counted, {duplicates} repeats dropped) in {} runs",
        bytes as f64 / 1e6,
        runs.len()
    );
    for (i, run) in runs.iter().enumerate() {
        println!(
            "  run {i}: {} records, {} minute rows, {} statements, {:?}",
            run.records, run.rows, run.statements, run.elapsed
        );
    }
    // The same bytes through decode, sanitise, dedupe and aggregation alone (no database).
    let dims = store.dimensions().await.unwrap();
    let seen = marquee_stats::Seen::default();
    let rules = marquee_stats::Rules {
        now_secs: clock.now().as_second(),
        max_age_secs: 86_400,
        max_future_secs: 300,
        token_lifetime_secs: 3_600,
    };
    let ingest_cpu = cpu_time();
    let ingest_wall = Instant::now();
    let mut ingest = marquee_stats::Ingest::new(&dims, &seen, rules);
    for segment in log.segments(0).unwrap() {
        let mut offset = 0;
        loop {
            let batch = log
                .read_frames(
                    0,
                    segment.id,
                    offset,
                    marquee_eventlog::Budget {
                        max_bytes: 8 << 20,
                        max_records: usize::MAX,
                    },
                )
                .unwrap();
            ingest.frames(&batch.frames).unwrap();
            offset = batch.next_offset;
            if batch.end != marquee_eventlog::ReadEnd::Budget {
                break;
            }
        }
    }
    let deltas = ingest.finish();
    println!(
        "  in memory alone (read, decode, sanitise, dedupe, aggregate): CPU {:.2} s, wall {:.2} s for {} minute rows",
        (cpu_time() - ingest_cpu).as_secs_f64(),
        ingest_wall.elapsed().as_secs_f64(),
        deltas.minutes.len()
    );
    println!(
        "  CPU {:.2} s, wall {:.2} s: {:.2} M records per CPU-second ({:.2} M per wall-second); statements per run {statements:?}",
        cpu.as_secs_f64(),
        wall.as_secs_f64(),
        records as f64 / cpu.as_secs_f64() / 1e6,
        records as f64 / wall.as_secs_f64() / 1e6,
    );
    if postgres.is_some() {
        let total = cpu + server_cpu;
        println!(
            "  PostgreSQL server CPU {:.2} s; manager + server {:.2} s: {:.2} M records per CPU-second",
            server_cpu.as_secs_f64(),
            total.as_secs_f64(),
            records as f64 / total.as_secs_f64() / 1e6,
        );
    }
}
