//! PostgreSQL restarted mid-run: `marquee serve --demo` keeps its
//! database on a PostgreSQL cluster of the test's own (so the shared test server of
//! `scripts/test-deps.sh` is left alone; its binaries are used), aggregating every 20 ms while
//! clients fetch ads and fire beacons. The cluster is stopped (`pg_ctl stop -m fast`, which
//! cuts every connection) for a second and started again. Every request is answered
//! meanwhile, the aggregation runs fail and say so, the pool reconnects, and at the end the
//! stored minute rows equal a direct count of the logs: nothing lost, nothing counted twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    Server, event_count, free_port, logged_events, metrics_page, postgres_minute_rows,
    serve_and_fire, wait_for_ad,
};
use marquee_store::stats_suite::direct_minute_count;

/// A PostgreSQL cluster in a temporary directory, run by the `postgres` user when root (the
/// server refuses root); stopped and removed on drop.
struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

fn pg_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: run scripts/test-deps.sh")
        .map(|e| e.unwrap().path().join("bin"))
        .filter(|bin| bin.join("pg_ctl").exists())
        .collect();
    dirs.sort();
    dirs.pop()
        .expect("no pg_ctl under /usr/lib/postgresql: run scripts/test-deps.sh")
}

impl Cluster {
    fn as_postgres(program: &Path) -> Command {
        if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let status = Self::as_postgres(&self.bin.join(program))
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{program} {args:?} failed");
    }

    fn create() -> Cluster {
        let bin = pg_bin();
        let data = std::env::temp_dir().join(format!("marquee-pg-restart-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).unwrap();
        if is_root() {
            assert!(
                Command::new("chown")
                    .arg("postgres:")
                    .arg(&data)
                    .status()
                    .unwrap()
                    .success()
            );
        }
        let cluster = Cluster {
            bin,
            data,
            port: free_port(),
        };
        let dir = cluster.data.to_str().unwrap().to_owned();
        cluster.run(
            "initdb",
            &[
                "-D",
                &dir,
                "-U",
                "marquee",
                "--auth=trust",
                "--no-locale",
                "-E",
                "UTF8",
            ],
        );
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{dir}'\nfsync = off\n",
            cluster.port
        );
        let path = cluster.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&conf);
        std::fs::write(&path, text).unwrap();
        cluster.start();
        cluster
    }

    fn start(&self) {
        let dir = self.data.to_str().unwrap();
        let log = format!("{dir}/server.log");
        self.run(
            "pg_ctl",
            &["-D", dir, "-l", &log, "-w", "-t", "60", "start"],
        );
    }

    fn stop(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    fn url(&self) -> String {
        format!("postgres://marquee@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Self::as_postgres(&self.bin.join("pg_ctl"))
            .args([
                "-D",
                self.data.to_str().unwrap_or(""),
                "-m",
                "immediate",
                "stop",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// A counter on the page, 0 until it first moves.
fn metric(page: &str, name: &str) -> f64 {
    common::metric(page, name).unwrap_or(0.0)
}

/// Fetches ads and fires their beacons until `until`; every one must be answered. Returns the
/// beacons fired.
async fn client_loop(base: String, until: Instant) -> usize {
    let client = reqwest::Client::new();
    let mut fired = 0;
    while Instant::now() < until {
        serve_and_fire(&client, &base, 2).await;
        fired += 1;
    }
    fired
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_postgresql_restart_mid_run_loses_and_doubles_no_aggregate() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::create();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let url = cluster.url();
    let server = Server::start_with(
        data,
        &["--demo", "--database", &url],
        &[
            ("MARQUEE_AGGREGATION__INTERVAL_MS", "20"),
            ("MARQUEE_LOG__LEVEL", "warn"),
        ],
    );
    let base = server.base.clone();
    let client = reqwest::Client::new();
    wait_for_ad(&client, &base).await;

    let until = Instant::now() + Duration::from_secs(4);
    let clients: Vec<_> = (0..2)
        .map(|_| tokio::spawn(client_loop(base.clone(), until)))
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;
    cluster.stop();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let failures_while_down = metric(
        &metrics_page(&client, &base).await,
        "marquee_aggregation_failures_total",
    );
    cluster.start();
    let mut fired = 0;
    for c in clients {
        fired += c.await.unwrap();
    }

    // Caught up: two more successful runs and no backlog.
    let deadline = Instant::now() + Duration::from_secs(30);
    let runs_before = metric(
        &metrics_page(&client, &base).await,
        "marquee_aggregation_runs_total",
    );
    loop {
        let page = metrics_page(&client, &base).await;
        if metric(&page, "marquee_aggregation_runs_total") >= runs_before + 2.0
            && metric(&page, "marquee_aggregation_backlog_bytes") == 0.0
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never caught up after the restart: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop();

    let events = logged_events(data);
    let expected = direct_minute_count(&events);
    let got = postgres_minute_rows(&url).await;
    let logged: i64 = expected.values().map(event_count).sum();
    let counted: i64 = got.values().map(event_count).sum();
    let lost: i64 = expected
        .iter()
        .map(|(k, v)| (event_count(v) - got.get(k).map_or(0, event_count)).max(0))
        .sum();
    let doubled: i64 = got
        .iter()
        .map(|(k, v)| (event_count(v) - expected.get(k).map_or(0, event_count)).max(0))
        .sum();
    println!(
        "postgres restart: {fired} beacons answered, {logged} events logged, {counted} counted, \
         {lost} lost, {doubled} doubled, {failures_while_down} aggregation runs failed while down"
    );
    assert!(
        failures_while_down >= 1.0,
        "the outage was seen by the aggregator"
    );
    assert_eq!((lost, doubled), (0, 0));
    assert_eq!(got, expected);
}
