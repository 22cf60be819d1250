//! One active manager per database: a second `marquee manager` on the same database (a rolling
//! deploy that starts the new one before the old one stops) waits, without listening,
//! aggregating or pacing, until the first stops, then takes over. Commands that only migrate
//! or manage tokens keep working meanwhile. On SQLite (one data directory) and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{BIN, Server, run};
use marquee_store::test_postgres::TestDatabase;

const SECRET: &str = "one-manager-test-shared-secret";

fn manager(data: &Path, database: Option<&str>) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(["manager", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(
            database
                .map(|url| ["--database", url])
                .into_iter()
                .flatten(),
        )
        .env("MARQUEE_AGGREGATION__TOKEN", SECRET)
        .env("MARQUEE_AGGREGATION__INTERVAL_MS", "50")
        .env("MARQUEE_LOG__LEVEL", "info");
    command
}

/// A manager that may not announce itself at once: its stdout and stderr lines as they come.
struct Waiting {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

fn lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

impl Waiting {
    fn start(mut command: Command) -> Waiting {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Waiting {
            stdout: lines(child.stdout.take().unwrap()),
            stderr: lines(child.stderr.take().unwrap()),
            child,
        }
    }

    fn stderr_line(&self, needle: &str, within: Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .stderr
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no stderr line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn healthz(base: &str) -> reqwest::StatusCode {
    reqwest::get(format!("{base}/healthz"))
        .await
        .unwrap()
        .status()
}

/// Starts a manager, then a second on the same database; the second waits until the first
/// stops and then serves. `second_data` is the second's data directory (the first's for
/// SQLite, another for PostgreSQL); `database` the PostgreSQL URL, if any.
async fn second_manager_waits_then_takes_over(
    first_data: &Path,
    second_data: &Path,
    database: Option<&str>,
) {
    let first = Server::spawn(manager(first_data, database));
    assert_eq!(healthz(&first.base).await, 200);

    let second = Waiting::start(manager(second_data, database));
    let waiting = second.stderr_line(
        "waiting for the active manager to stop",
        Duration::from_secs(20),
    );
    assert!(waiting.contains("holder"), "says who holds it: {waiting}");
    // Neither listening nor aggregating: nothing past the lock has started.
    assert!(
        second.stdout.recv_timeout(Duration::from_secs(2)).is_err(),
        "the second manager started while the first runs"
    );

    // Commands that only migrate or manage tokens do not take the manager lock.
    let mut database_args = vec!["--data", first_data.to_str().unwrap()];
    if let Some(url) = database {
        database_args.extend(["--database", url]);
    }
    for command in [
        &["migrate"][..],
        &["token", "create", "--role", "admin"],
        &["token", "list"],
    ] {
        let output = run(&[command, &database_args].concat(), &[]);
        assert!(
            output.status.success(),
            "marquee {command:?} while a manager runs: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    first.stop();
    let announced = second
        .stdout
        .recv_timeout(Duration::from_secs(20))
        .expect("the second manager takes over once the first stopped");
    let base = announced
        .strip_prefix("marquee listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {announced:?}"))
        .to_owned();
    second.stderr_line("this manager takes over", Duration::from_secs(5));
    assert_eq!(healthz(&base).await, 200);
    let mut second = second;
    Command::new("kill")
        .args(["-TERM", &second.child.id().to_string()])
        .status()
        .unwrap();
    let status = second.child.wait().unwrap();
    assert!(status.success(), "graceful stop exited with {status}");
}

#[tokio::test]
async fn a_second_manager_on_one_sqlite_data_directory_waits_for_the_first() {
    let data = tempfile::tempdir().unwrap();
    second_manager_waits_then_takes_over(data.path(), data.path(), None).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_second_manager_on_one_postgres_database_waits_for_the_first() {
    let db = TestDatabase::create().await;
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    second_manager_waits_then_takes_over(first.path(), second.path(), Some(db.url())).await;
}

/// A manager told to stop while it waits exits cleanly, having started nothing.
#[test]
fn a_waiting_manager_stops_on_sigterm() {
    let data = tempfile::tempdir().unwrap();
    let _first = Server::spawn(manager(data.path(), None));
    let mut second = Waiting::start(manager(data.path(), None));
    second.stderr_line(
        "waiting for the active manager to stop",
        Duration::from_secs(20),
    );
    Command::new("kill")
        .args(["-TERM", &second.child.id().to_string()])
        .status()
        .unwrap();
    let status = second.child.wait().unwrap();
    assert!(status.success(), "a waiting manager stopped with {status}");
    assert!(second.stdout.try_recv().is_err(), "it never listened");
}
