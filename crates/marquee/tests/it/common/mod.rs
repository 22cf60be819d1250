//! What the binary's end-to-end tests share: starting `marquee` and talking to it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use marquee_model::ManualClock;
use marquee_stats::Counters;
use marquee_store::PostgresStore;
use marquee_store::stats_suite::{MinuteKey, all_minute_rows};
use marquee_tracking::KeyRing;
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_marquee");

/// Every edge signs and verifies tracking links with the same key, as a deployment must when a
/// beacon may reach another edge than the ad did.
pub const TRACKING_KEY: &str =
    "1:hex:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

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
        // random. Overload tests set it themselves (and crates/edge/tests/it/overload.rs,
        // bench/overload.sh cover it).
        let queue_delay = std::ffi::OsStr::new("MARQUEE_EDGE__MAX_QUEUE_DELAY_MS");
        if !command.get_envs().any(|(key, _)| key == queue_delay) {
            command.env(queue_delay, "0");
        }
        // Tests click the ads they fetch at once, faster than a person; the traffic-quality
        // tests set the delay themselves.
        let click_delay = std::ffi::OsStr::new("MARQUEE_TRAFFIC__MIN_CLICK_DELAY_MS");
        if !command.get_envs().any(|(key, _)| key == click_delay) {
            command.env(click_delay, "0");
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

/// `marquee token create` for an advertiser user (`owner`, the advertiser's id) on the data
/// directory `data`.
/// `marquee token create --role admin` on the data directory `data` (before any server starts
/// there): the token it prints.
pub fn create_admin_token(data: &Path) -> String {
    let data = data.to_str().unwrap();
    let made = run(&["token", "create", "--role", "admin", "--data", data], &[]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    String::from_utf8(made.stdout).unwrap().trim().to_owned()
}

pub fn create_advertiser_token(data: &str, owner: &str) -> Output {
    run(
        &[
            "token",
            "create",
            "--role",
            "advertiser",
            "--owner",
            owner,
            "--data",
            data,
        ],
        &[],
    )
}

/// A loopback port nobody listened on when asked (free until something binds it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Seconds since the Unix epoch (the clock of tracking tokens).
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The environment variable `name` parsed, or `default` when unset or unparsable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// splitmix64: a small seeded generator, enough to pick kill moments reproducibly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn in_range(&mut self, range: std::ops::Range<u64>) -> u64 {
        range.start + self.next() % (range.end - range.start)
    }
}

/// The body of a GET of `url`.
/// Sends `request` and reads its answer's body, whatever its status.
pub async fn text(request: reqwest::RequestBuilder) -> String {
    request.send().await.unwrap().text().await.unwrap()
}

/// `marquee serve --demo` in `data` with a Redis at `redis_url` whose breaker opens after two
/// failures for `open_ms`, and visitors' countries from `X-Country`.
pub fn demo_with_redis(data: &Path, redis_url: &str, open_ms: &str) -> Server {
    Server::start_with(
        data,
        &["--demo"],
        &[
            ("MARQUEE_EDGE__COUNTRY_HEADER", "x-country"),
            ("MARQUEE_EDGE__DEADLINE_MS", "2000"),
            ("MARQUEE_REDIS__URL", redis_url),
            ("MARQUEE_REDIS__FAILURES_TO_OPEN", "2"),
            ("MARQUEE_REDIS__OPEN_MS", open_ms),
        ],
    )
}

pub async fn get_text(client: &reqwest::Client, url: &str) -> String {
    client.get(url).send().await.unwrap().text().await.unwrap()
}

/// The body of a GET of `url`, or `None` when the server does not answer (it is being killed
/// or stopped).
pub async fn try_get_text(client: &reqwest::Client, url: &str) -> Option<String> {
    client.get(url).send().await.ok()?.text().await.ok()
}

/// The Prometheus page of the server at `base` (in `marquee serve`, the edge's and the
/// manager's metrics together).
pub async fn metrics_page(client: &reqwest::Client, base: &str) -> String {
    get_text(client, &format!("{base}/metrics")).await
}

/// PUTs `body` to `url` of the management API as `token`.
pub async fn put_json(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: &Value,
) -> reqwest::Response {
    client
        .put(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Changes a line item over the management API of the server at `base`: `change` edits its
/// JSON, and the change must be accepted.
pub async fn update_line_item(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    line_item: u64,
    change: impl FnOnce(&mut Value),
) {
    let url = format!("{base}/api/v1/line-items/{line_item}");
    let mut item = get_json(client, &url, Some(token)).await;
    change(&mut item);
    let response = put_json(client, &url, token, &item).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

/// The user agent of an iPhone: the demo's "Boots DACH mobile" line item (capped 3 a day)
/// serves mobile users in Germany only.
pub const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1";

/// GETs `url` (an ad request) as a visitor on an iPhone in Germany: the country goes in the
/// `x-country` header, which servers started with `MARQUEE_EDGE__COUNTRY_HEADER=x-country`
/// read it from.
pub async fn get_as_german_iphone(client: &reqwest::Client, url: &str) -> reqwest::Response {
    client
        .get(url)
        .header("user-agent", IPHONE)
        .header("x-country", "DE")
        .send()
        .await
        .unwrap()
}

/// The line item of the first ad in the `/ad.json` answer at `url` to a visitor on an iPhone in
/// Germany ([`get_as_german_iphone`]), if any.
pub async fn line_item_for_german_iphone(client: &reqwest::Client, url: &str) -> Option<u64> {
    let answer: Value = get_as_german_iphone(client, url)
        .await
        .json()
        .await
        .unwrap();
    answer["ads"].as_array().unwrap().first()?["line_item"].as_u64()
}

/// Fires the impression beacon of `token` at the edge at `base`; it must be answered with 200.
/// Returns the answer (its body is the GIF).
pub async fn fire_impression(
    client: &reqwest::Client,
    base: &str,
    token: &str,
) -> reqwest::Response {
    let response = client
        .get(format!("{base}/t/i?t={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    response
}

/// Fetches an HTML ad at `placement` from the edge at `base`, which must be one, and fires its
/// impression beacon ([`fire_impression`]). Returns the impression token and the beacon's
/// answer.
pub async fn serve_and_fire(
    client: &reqwest::Client,
    base: &str,
    placement: u64,
) -> (String, reqwest::Response) {
    let html = get_text(
        client,
        &format!("{base}/ad?placement={placement}&format=html"),
    )
    .await;
    let token = impression_token(&html)
        .unwrap_or_else(|| panic!("no impression URL in the ad: {html:?}"))
        .to_owned();
    let response = fire_impression(client, base, &token).await;
    (token, response)
}

/// The data directory's own tracking key, as the server made it on first start.
pub fn tracking_keys(data: &Path) -> KeyRing {
    let entry = std::fs::read_to_string(data.join("tracking.key")).unwrap();
    let (id, secret) = entry.trim().split_once(':').unwrap();
    let id: u8 = id.parse().unwrap();
    KeyRing::from_config(id, [(id, secret)]).unwrap()
}

/// Events of every kind in a row (invalid ones by kind; their reason counters count the same
/// events again).
pub fn event_count(c: &Counters) -> i64 {
    c.decisions
        + c.bids
        + c.wins
        + c.billings
        + c.losses
        + c.no_bids
        + c.impressions
        + c.clicks
        + c.conversions
        + c.invalid_impressions
        + c.invalid_clicks
        + c.invalid_conversions
}

/// Every stored minute row of the PostgreSQL database at `url`.
pub async fn postgres_minute_rows(url: &str) -> HashMap<MinuteKey, Counters> {
    let clock = Arc::new(ManualClock::new(jiff::Timestamp::now()));
    let store = PostgresStore::connect(url, clock).await.unwrap();
    all_minute_rows(&store).await
}

/// The minute rows a PostgreSQL database stores against a direct count of the logs' events:
/// exact when no row differs and no row is missing or extra.
pub struct MinuteCheck {
    /// Events in the logs, each once.
    pub distinct: i64,
    /// Events the stored rows count.
    pub counted: i64,
    pub differing: usize,
    pub stored_rows: usize,
    pub expected_rows: usize,
}

impl MinuteCheck {
    pub async fn of(events: &[marquee_eventlog::Event], database_url: &str) -> MinuteCheck {
        let expected = marquee_store::stats_suite::direct_minute_count(events);
        let stored = postgres_minute_rows(database_url).await;
        MinuteCheck {
            distinct: expected.values().map(event_count).sum(),
            counted: stored.values().map(event_count).sum(),
            differing: expected
                .iter()
                .filter(|(k, v)| stored.get(*k) != Some(v))
                .count(),
            stored_rows: stored.len(),
            expected_rows: expected.len(),
        }
    }

    pub fn exact(&self) -> bool {
        self.differing == 0 && self.stored_rows == self.expected_rows
    }
}

impl std::fmt::Display for MinuteCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} minute rows differ ({} stored, {} from the logs): {} events counted, {} in the logs",
            self.differing, self.stored_rows, self.expected_rows, self.counted, self.distinct
        )
    }
}

/// The Redis of scripts/test-deps.sh, or `MARQUEE_TEST_REDIS_URL`.
pub fn redis_url() -> String {
    std::env::var("MARQUEE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:26379".into())
}

/// [`redis_url`], checked reachable: a test needing it fails naming the script that starts it.
pub fn test_redis() -> String {
    let url = redis_url();
    let address = url
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap();
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(address)
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
    assert!(
        reachable,
        "Redis is unreachable at {url}: run scripts/test-deps.sh, which installs and starts it"
    );
    url
}

/// A file of the OpenRTB sample requests and responses (`crates/openrtb/testdata`).
pub fn openrtb_testdata(path: &str) -> PathBuf {
    [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "openrtb",
        "testdata",
        path,
    ]
    .iter()
    .collect()
}

/// The JSON of [`openrtb_testdata`] `path`.
pub fn openrtb_sample(path: &str) -> Value {
    serde_json::from_slice(&std::fs::read(openrtb_testdata(path)).unwrap()).unwrap()
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What the browser tests need outside Rust; returns Chromium's path. Missing pieces fail the
/// test, naming the script that installs them (CI runs it first).
pub fn require_browser_tools(root: &Path) -> PathBuf {
    let chromium =
        std::env::var_os("CHROMIUM").map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from);
    assert!(
        chromium.is_file(),
        "Chromium is missing at {} (Debian package `chromium`): run scripts/test-deps.sh",
        chromium.display()
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "node is missing or broken ({node:?}): run scripts/test-deps.sh"
    );
    let driver = root.join("tests/browser/node_modules/playwright-core/package.json");
    assert!(
        driver.is_file(),
        "playwright-core is not installed in tests/browser: run scripts/test-deps.sh (npm ci there)"
    );
    chromium
}

/// The id of the item called `name` in a listing of the management API (`{"items": [...]}`).
pub fn id_named(list: &Value, name: &str) -> u64 {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["name"] == name)
        .and_then(|item| item["id"].as_u64())
        .unwrap_or_else(|| panic!("no {name:?} in {list}"))
}

/// Creates a dashboard user with `marquee user create` (the password on stdin); `owner` for a
/// tenant role.
pub fn create_user(data: &Path, name: &str, password: &str, role: &str, owner: Option<u64>) {
    let mut command = Command::new(BIN);
    command.args(["user", "create", "--name", name, "--role", role]);
    if let Some(owner) = owner {
        command.args(["--owner", &owner.to_string()]);
    }
    let mut child = command
        .arg("--data")
        .arg(data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        format!("{password}\n").as_bytes(),
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "marquee user create failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The `name=value` of the cookie `name` a response sets.
pub fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next())
        .find(|pair| pair.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// Signs in through the dashboard's form at `base` (the form posted to `/login{query}`): the
/// answer, and the session cookie when it succeeded. `password` goes into the form as given.
pub async fn sign_in(
    client: &reqwest::Client,
    base: &str,
    query: &str,
    name: &str,
    password: &str,
) -> (reqwest::Response, Option<String>) {
    let form = client.get(format!("{base}/login")).send().await.unwrap();
    let bound = set_cookie(&form, "marquee_login").expect("the sign-in form's cookie");
    let form = form.text().await.unwrap();
    let marker = "name=\"csrf\" value=\"";
    let start = form.find(marker).expect("a CSRF field on the sign-in form") + marker.len();
    let csrf = &form[start..start + form[start..].find('"').unwrap()];
    let response = client
        .post(format!("{base}/login{query}"))
        .header("cookie", bound)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&name={name}&password={password}"))
        .send()
        .await
        .unwrap();
    let session = set_cookie(&response, "marquee_session");
    (response, session)
}

/// Creates an object through the API as `token` (`path` below `/api/v1/`): its id; asserts
/// 201.
pub async fn create_object(
    client: &reqwest::Client,
    server: &Server,
    token: &str,
    path: &str,
    body: &Value,
) -> u64 {
    let response = client
        .post(server.url(&format!("/api/v1/{path}")))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{path}: {body}");
    body["id"].as_u64().unwrap()
}

/// The data directories of a manager and `edges` edges under `dir`: `manager`, `edge-0`, ….
pub fn cluster_dirs(dir: &Path, edges: usize) -> (PathBuf, Vec<PathBuf>) {
    let edge_dirs = (0..edges).map(|i| dir.join(format!("edge-{i}"))).collect();
    (dir.join("manager"), edge_dirs)
}

/// The JSON answer to `request`.
pub async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// PUTs `url` with `token`, which must succeed: a line item's link to a placement.
pub async fn put_ok(client: &reqwest::Client, url: &str, token: &str) {
    let answer = client.put(url).bearer_auth(token).send().await.unwrap();
    let status = answer.status();
    assert!(
        status.is_success(),
        "{url}: {}",
        answer.text().await.unwrap()
    );
}

/// A bid's notice URL (`nurl`, `burl`, `lurl`) as an exchange sends it: aimed at `server`
/// instead of the edge's public URL `public`, its macros filled, `price` the clearing price.
pub fn notice_url(
    url: &str,
    public: &str,
    server: &Server,
    request: &Value,
    price: &str,
) -> String {
    url.replace(public, &server.base)
        .replace("${AUCTION_ID}", request["id"].as_str().unwrap())
        .replace(
            "${AUCTION_IMP_ID}",
            request["imp"][0]["id"].as_str().unwrap(),
        )
        .replace("${AUCTION_PRICE}", price)
        .replace("${AUCTION_LOSS}", "102")
}

/// A crawler list for servers a headless Chromium visits, whose user agent says
/// `HeadlessChrome`: the shipped list rightly names it, so these tests' list holds one crawler
/// of its own instead (the screen itself is tested in `traffic_quality.rs`). Written in `data`;
/// its path, for `MARQUEE_TRAFFIC__CRAWLERS_FILE`.
pub fn crawlers_for_headless_chromium(data: &Path) -> String {
    std::fs::create_dir_all(data).unwrap();
    let crawlers = data.join("crawlers.txt");
    std::fs::write(&crawlers, "# the browser tests' crawler list\nExampleBot\n").unwrap();
    crawlers.to_str().unwrap().to_owned()
}

/// A Redis server of a test's own, without persistence, on `port`; killed on drop.
// Deliberately the same start as the shared-state crate's own Redis tests: two crates' test
// binaries, with no test-support crate between them.
pub struct RedisServer(Child);

impl RedisServer {
    pub fn start(port: u16) -> RedisServer {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is missing: run scripts/test-deps.sh, which installs it");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        RedisServer(child)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The manager's edge registry (`GET /internal/v1/edges` with the shared secret).
pub async fn edge_registry(client: &reqwest::Client, manager: &str, secret: &str) -> Vec<Value> {
    let answer = get_json(
        client,
        &format!("{manager}/internal/v1/edges"),
        Some(secret),
    )
    .await;
    answer["edges"].as_array().cloned().unwrap_or_default()
}

/// Waits up to `within` until `want` edges are live, serve the manager's current snapshot and
/// (with `caught_up`) have nothing left to collect.
pub async fn wait_for_edges(
    client: &reqwest::Client,
    manager: &str,
    secret: &str,
    want: usize,
    caught_up: bool,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    loop {
        let edges = edge_registry(client, manager, secret).await;
        let ready = edges
            .iter()
            .filter(|e| e["live"] == true && e["snapshot_current"] == true)
            .filter(|e| !caught_up || (e["log_backlog_bytes"] == 0 && e["log_behind_secs"] == 0))
            .count();
        if ready == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "edges not ready within {within:?}: {edges:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The edges' group commit interval in the multi-process tests (`events.group_commit_ms`).
pub const EDGE_GROUP_COMMIT_MS: u64 = 5;
/// How often their edges sync with the manager (`pacing.sync_interval_ms`).
pub const EDGE_SYNC_INTERVAL_MS: u64 = 200;

/// Split roles as the multi-process tests start them (`marquee manager`, `marquee edge`): one
/// shared secret and tracking key (a beacon may reach another edge than its ad), short
/// intervals, and each test's own settings on top (later settings win).
pub struct Roles<'a> {
    pub secret: &'a str,
    pub tracking_key: &'a str,
    /// Settings every process of the test gets.
    pub common: &'a [(&'a str, &'a str)],
}

impl Roles<'_> {
    pub fn command(&self, args: &[&str], data: &Path, envs: &[(&str, &str)]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .arg("--data")
            .arg(data)
            .env("MARQUEE_AGGREGATION__TOKEN", self.secret)
            .env(
                "MARQUEE_TRACKING__KEYS",
                format!("[\"{}\"]", self.tracking_key),
            )
            .env("MARQUEE_LOG__LEVEL", "warn")
            .env("NO_COLOR", "1")
            .envs(self.common.iter().copied())
            .envs(envs.iter().copied());
        command
    }

    /// A manager on `database` (a PostgreSQL URL or a SQLite path) at `port`.
    pub fn manager(
        &self,
        data: &Path,
        database: &str,
        port: u16,
        demo: bool,
        envs: &[(&str, &str)],
    ) -> Guard {
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["manager", "--listen", &listen, "--database", database];
        if demo {
            args.push("--demo");
        }
        let mut settings = vec![
            ("MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS", "100"),
            ("MARQUEE_AGGREGATION__INTERVAL_MS", "200"),
            // The logs stay whole, to be counted directly at the end.
            ("MARQUEE_AGGREGATION__DELETE_CONSUMED", "false"),
            ("MARQUEE_PACING__INTERVAL_MS", "500"),
            ("MARQUEE_PACING__INITIAL_THROTTLE_PPM", "1000000"),
            // Small slices, renewed often: the last ones are small as the budget runs out.
            ("MARQUEE_PACING__LEASE_RENEW_MS", "500"),
            // Longer than a manager's planned absence: edges keep serving on their leases.
            ("MARQUEE_PACING__LEASE_DURATION_MS", "5000"),
            ("MARQUEE_PACING__LEASE_GRACE_MS", "500"),
        ];
        settings.extend_from_slice(envs);
        Guard::new(Server::spawn(self.command(&args, data, &settings)))
    }

    /// An edge of the manager at `manager`, listening on `listen`.
    pub fn edge(&self, data: &Path, manager: &str, listen: &str, envs: &[(&str, &str)]) -> Guard {
        let commit = EDGE_GROUP_COMMIT_MS.to_string();
        let sync = EDGE_SYNC_INTERVAL_MS.to_string();
        let mut settings = vec![
            ("MARQUEE_EDGE__POLL_INTERVAL_MS", "100"),
            ("MARQUEE_EDGE__HEARTBEAT_MS", "200"),
            ("MARQUEE_PACING__SYNC_INTERVAL_MS", sync.as_str()),
            ("MARQUEE_EVENTS__GROUP_COMMIT_MS", commit.as_str()),
        ];
        settings.extend_from_slice(envs);
        Guard::new(Server::spawn(self.command(
            &["edge", "--listen", listen, "--manager", manager],
            data,
            &settings,
        )))
    }
}

/// Taken for its whole run by each test that runs a topology of several servers and times
/// kills, restarts or delivery (`multinode`, `budgets`, `crash`, `aggregation_crash`, the
/// PostgreSQL and Redis restarts, `disk_full`), and by the browser tests (a headless Chromium
/// against a server started cold, with deadlines), so that no two of them run at once: the
/// tests of all files share one process and its test threads, and two such tests together on a
/// small machine make those timings flaky (a browser test beside the kill -9 test once found
/// its freshly started demo serving nothing yet).
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The temporary directory, kept (and its path printed) when the test fails or
/// `BROWSER_TEST_KEEP` is set.
pub struct Scratch(Option<tempfile::TempDir>);

impl Scratch {
    /// A new scratch directory named `prefix…`, with the `browser` folder the page driver
    /// writes its screenshots and logs to.
    pub fn new(prefix: &str) -> Scratch {
        let scratch = Scratch(Some(
            tempfile::Builder::new().prefix(prefix).tempdir().unwrap(),
        ));
        std::fs::create_dir_all(scratch.browser()).unwrap();
        scratch
    }

    pub fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }

    pub fn browser(&self) -> std::path::PathBuf {
        self.path().join("browser")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if (std::thread::panicking() || std::env::var_os("BROWSER_TEST_KEEP").is_some())
            && let Some(dir) = self.0.take()
        {
            eprintln!("browser test: kept {}", dir.keep().display());
        }
    }
}
