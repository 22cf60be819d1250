//! What the binary's end-to-end tests share: starting `marquee` and talking to it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_marquee");

pub struct Server {
    pub child: Child,
    pub base: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    pub fn start(data: &Path, extra: &[&str]) -> Server {
        Server::start_with(data, extra, &[])
    }

    /// Starts with extra environment variables (configuration).
    pub fn start_with(data: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Server {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(extra)
            .env("MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS", "50")
            .env("MARQUEE_LOG__LEVEL", "info")
            // The demo's line items with goals start at full speed (tests about pacing set
            // their own values).
            .env("MARQUEE_PACING__INITIAL_THROTTLE_PPM", "1000000")
            // Keep aggregated segments, so tests can read the whole log (`logged_events`).
            .env("MARQUEE_AGGREGATION__DELETE_CONSUMED", "false")
            .envs(envs.iter().copied());
        Server::spawn(command)
    }

    /// Starts `command` (any `marquee` subcommand that prints its address on the first
    /// stdout line) and waits for that line.
    pub fn spawn(mut command: Command) -> Server {
        // Tests run many processes on a small machine, where a worker 10 ms behind is normal;
        // shedding on queue delay would turn the ads these tests count into fallbacks at
        // random. Overload tests set it themselves (and crates/edge/tests/overload.rs,
        // bench/overload.sh cover it).
        let queue_delay = std::ffi::OsStr::new("MARQUEE_EDGE__MAX_QUEUE_DELAY_MS");
        if !command.get_envs().any(|(key, _)| key == queue_delay) {
            command.env(queue_delay, "0");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let base = first
            .trim()
            .strip_prefix("marquee listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        let (lines, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            child,
            base,
            stderr,
        }
    }

    /// Waits for a stderr line containing `needle` and returns it.
    pub fn stderr_line(&self, needle: &str) -> String {
        loop {
            let line = self
                .stderr
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("no stderr line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn stop(mut self) {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "graceful stop exited with {status}");
    }
}

pub fn run(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

pub fn token_from(line: &str) -> String {
    line.split_whitespace()
        .find(|word| word.starts_with("mq_"))
        .expect("a token on the line")
        .to_owned()
}

pub async fn get_json(client: &reqwest::Client, url: &str, token: Option<&str>) -> Value {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().json().await.unwrap()
}

/// Every event in a stopped server's log (`DATA/events`), shard by shard in log order.
pub fn logged_events(data: &Path) -> Vec<marquee_eventlog::Event> {
    use marquee_eventlog::{Budget, EventLog, ReadEnd};
    // Opening runs recovery, as a restart would; then everything is closed and readable.
    let log = EventLog::open(data.join("events"), marquee_eventlog::Config::default())
        .expect("open the event log");
    let mut events = Vec::new();
    for shard in 0..log.shards() {
        for segment in log.segments(shard).expect("list segments") {
            let mut offset = 0;
            loop {
                let batch = log
                    .read(shard, segment.id, offset, Budget::default())
                    .expect("read segment");
                events.extend(batch.events);
                offset = batch.next_offset;
                match batch.end {
                    ReadEnd::Budget => continue,
                    ReadEnd::Corrupt(damage) => panic!("damaged log: {damage:?}"),
                    ReadEnd::Tail | ReadEnd::Closed => break,
                }
            }
        }
    }
    log.flush_and_close().expect("close the event log");
    events
}

impl Server {
    /// The stderr lines that arrived since the last call (or `stderr_line`), without waiting.
    pub fn stderr_so_far(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

/// A server that can be killed or stopped once from a shared place (a dropped `Server` is
/// killed anyway).
pub struct Guard(Option<Server>);

impl Guard {
    pub fn new(server: Server) -> Guard {
        Guard(Some(server))
    }

    pub fn server(&self) -> &Server {
        self.0.as_ref().expect("the server is still running")
    }

    /// `kill -9`, and reap it.
    pub fn kill(&mut self) {
        let mut server = self.0.take().expect("the server is still running");
        server.child.kill().unwrap();
        server.child.wait().unwrap();
    }

    /// SIGTERM, and check that it exited cleanly (see [`Server::stop`]).
    pub fn stop(&mut self) {
        self.0.take().expect("the server is still running").stop();
    }
}

/// A server still running when dropped (a failing test) is SIGKILLed and reaped, so no test
/// leaves a process behind.
impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The impression token (`…/t/i?t=TOKEN`) in an ad's HTML.
pub fn impression_token(html: &str) -> Option<&str> {
    let start = html.find("/t/i?t=")? + "/t/i?t=".len();
    let rest = &html[start..];
    let end = rest.find(['"', '\'', '&']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Requests `/ad?placement=1` until an ad is served (the edge installs its first snapshot just
/// after the listener opens), for at most 10 s.
pub async fn wait_for_ad(client: &reqwest::Client, base: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if let Ok(response) = client
            .get(format!("{base}/ad?placement=1&format=html"))
            .send()
            .await
            && let Ok(body) = response.text().await
            && impression_token(&body).is_some()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no ad served within 10 s");
}

/// The value of the Prometheus series `series` (a metric name, or a name with its labels) on
/// the metrics `page`, if it has one.
pub fn metric(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// [`metric`] for a series the page must have.
pub fn required_metric(page: &str, series: &str) -> f64 {
    metric(page, series).unwrap_or_else(|| panic!("no {series} in the metrics"))
}
