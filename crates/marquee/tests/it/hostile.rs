//! Hostile HTTP against every server the binary runs (`marquee serve`: the edge's hyper server
//! with the manager's router behind it, and `marquee bench reference`): broken framing, huge
//! heads and bodies, a slowloris trickle, invalid UTF-8, deep JSON and seeded random bodies.
//! Each request gets a 4xx or a closed connection, never a 5xx; the server keeps answering
//! after every group and its resident memory stays bounded. Figures are printed per group
//! (`cargo test -p marquee --test it hostile:: -- --nocapture`) and copied into docs/reliability.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Server, token_from};

/// How a server answered one hostile request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reply {
    Status(u16),
    Closed,
}

/// Answers seen in one group, by status.
#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    replies: BTreeMap<Reply, usize>,
}

impl Tally {
    fn record(&mut self, what: &str, reply: Reply) {
        self.record_allowing(what, reply, &[]);
    }

    /// Records `reply`, accepting the statuses in `also` besides a 4xx or a closed connection.
    fn record_allowing(&mut self, what: &str, reply: Reply, also: &[u16]) {
        self.sent += 1;
        *self.replies.entry(reply).or_default() += 1;
        if let Reply::Status(status) = reply {
            assert!(
                (400..500).contains(&status) || also.contains(&status),
                "{what}: answered {status}, wanted a 4xx or a closed connection"
            );
        }
    }

    fn print(&self, group: &str) {
        let answers: Vec<String> = self
            .replies
            .iter()
            .map(|(reply, n)| match reply {
                Reply::Status(status) => format!("{status}: {n}"),
                Reply::Closed => format!("closed: {n}"),
            })
            .collect();
        println!("{group}: {} sent; {}", self.sent, answers.join(", "));
    }
}

/// The host:port of a base URL `http://HOST:PORT`.
fn address(base: &str) -> String {
    base.trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

fn connect(addr: &str) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// The status of the first answer on `stream`, or `Closed` when the server ends the
/// connection (or resets it) without one.
fn read_reply(stream: TcpStream) -> Reply {
    let mut line = Vec::new();
    match BufReader::new(stream).read_until(b'\n', &mut line) {
        Ok(0) | Err(_) => return Reply::Closed,
        Ok(_) => {}
    }
    let text = String::from_utf8_lossy(&line);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {text:?}"));
    Reply::Status(status)
}

/// Sends `bytes` on a new connection and reads the answer.
fn exchange(addr: &str, bytes: &[u8]) -> Reply {
    let mut stream = connect(addr);
    if stream.write_all(bytes).is_err() {
        return read_reply(stream);
    }
    read_reply(stream)
}

/// Sends `head`, then up to `body_bytes` bytes of filler (stopping at the first write error:
/// the server may answer and close early), then reads the answer.
fn exchange_streaming(addr: &str, head: &str, body_bytes: usize) -> Reply {
    let mut stream = connect(addr);
    stream.write_all(head.as_bytes()).unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < body_bytes {
        let n = chunk.len().min(body_bytes - sent);
        if stream.write_all(&chunk[..n]).is_err() {
            break;
        }
        sent += n;
    }
    read_reply(stream)
}

fn post(path: &str, extra_headers: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// A plain request still answers 200.
fn assert_alive(addr: &str, after: &str) {
    let reply = exchange(
        addr,
        b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(reply, Reply::Status(200), "no healthy answer after {after}");
}

fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// Request heads whose framing is broken: conflicting, negative, huge or non-numeric
/// Content-Length, Transfer-Encoding with Content-Length, chunked-encoding errors.
fn framing_attacks(path: &str, auth: &str) -> Vec<(String, Vec<u8>)> {
    let head = |headers: &str, body: &str| {
        format!("POST {path} HTTP/1.1\r\nHost: t\r\n{auth}{headers}\r\n{body}").into_bytes()
    };
    vec![
        (
            "two different Content-Lengths".into(),
            head("Content-Length: 2\r\nContent-Length: 7\r\n", "{}"),
        ),
        (
            "a Content-Length list".into(),
            head("Content-Length: 2, 7\r\n", "{}"),
        ),
        (
            "negative Content-Length".into(),
            head("Content-Length: -1\r\n", "{}"),
        ),
        (
            "Content-Length beyond u64".into(),
            head("Content-Length: 99999999999999999999999999\r\n", "{}"),
        ),
        (
            "non-numeric Content-Length".into(),
            head("Content-Length: two\r\n", "{}"),
        ),
        (
            "Content-Length with a sign".into(),
            head("Content-Length: +2\r\n", "{}"),
        ),
        (
            "Transfer-Encoding and Content-Length".into(),
            head(
                "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n",
                "2\r\n{}\r\n0\r\n\r\n",
            ),
        ),
        (
            "Transfer-Encoding not ending in chunked".into(),
            head(
                "Transfer-Encoding: chunked, gzip\r\n",
                "2\r\n{}\r\n0\r\n\r\n",
            ),
        ),
        (
            "chunk size not hex".into(),
            head("Transfer-Encoding: chunked\r\n", "zz\r\n{}\r\n0\r\n\r\n"),
        ),
        (
            "chunk size overflowing".into(),
            head(
                "Transfer-Encoding: chunked\r\n",
                "fffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
            ),
        ),
        (
            "chunk without its CRLF".into(),
            head("Transfer-Encoding: chunked\r\n", "2\r\n{}XX0\r\n\r\n"),
        ),
        (
            "chunk longer than its size".into(),
            head("Transfer-Encoding: chunked\r\n", "1\r\n{}\r\n0\r\n\r\n"),
        ),
        (
            "truncated chunked body".into(),
            head("Transfer-Encoding: chunked\r\n", "10\r\n{\"id\""),
        ),
        (
            "body shorter than Content-Length".into(),
            head("Content-Length: 100\r\n", "{}"),
        ),
        (
            "header without a colon".into(),
            head("Content-Length 2\r\n", "{}"),
        ),
        (
            "NUL in a header value".into(),
            head("X-A: a\0b\r\nContent-Length: 2\r\n", "{}"),
        ),
        (
            "obsolete line folding".into(),
            head("X-A: a\r\n b\r\nContent-Length: 2\r\n", "{}"),
        ),
        (
            "bad HTTP version".into(),
            format!("POST {path} HTTP/9.9\r\nHost: t\r\nContent-Length: 2\r\n\r\n{{}}")
                .into_bytes(),
        ),
        (
            "garbage request line".into(),
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
        ),
    ]
}

/// Heads too large: one huge header, thousands of small ones, a huge request target.
fn huge_heads(path: &str) -> Vec<(String, Vec<u8>)> {
    let many: String = (0..5_000).map(|i| format!("X-H{i}: v\r\n")).collect();
    vec![
        (
            "a 1 MiB header".into(),
            format!(
                "GET {path} HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
                "a".repeat(1 << 20)
            )
            .into_bytes(),
        ),
        (
            "5,000 headers".into(),
            format!("GET {path} HTTP/1.1\r\nHost: t\r\n{many}\r\n").into_bytes(),
        ),
        (
            "a 1 MiB request target".into(),
            format!(
                "GET {path}?q={} HTTP/1.1\r\nHost: t\r\n\r\n",
                "a".repeat(1 << 20)
            )
            .into_bytes(),
        ),
    ]
}

/// A small deterministic generator (xorshift64*), so a failing body can be reproduced.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Random bytes, JSON-ish token soup, or a valid-looking document with a byte mutated.
    fn body(&mut self, sample: &[u8]) -> Vec<u8> {
        match self.below(3) {
            0 => (0..self.below(512)).map(|_| self.next() as u8).collect(),
            1 => {
                const TOKENS: [&str; 16] = [
                    "{",
                    "}",
                    "[",
                    "]",
                    ",",
                    ":",
                    "\"id\"",
                    "\"imp\"",
                    "\"banner\"",
                    "1e999",
                    "-0",
                    "null",
                    "true",
                    "\"\\ud800\"",
                    "\"\u{1F600}\"",
                    "18446744073709551616",
                ];
                let n = self.below(64);
                (0..n)
                    .flat_map(|_| TOKENS[self.below(TOKENS.len())].bytes())
                    .collect()
            }
            _ => {
                let mut body = sample.to_vec();
                for _ in 0..1 + self.below(4) {
                    let at = self.below(body.len());
                    body[at] = self.next() as u8;
                }
                body
            }
        }
    }
}

/// What every JSON endpoint is sent; `auth` is the API's bearer header.
fn json_endpoints(auth: &str) -> Vec<(&'static str, String)> {
    vec![
        ("/openrtb2/bid", String::new()),
        ("/openrtb2/auction", String::new()),
        ("/api/v1/campaigns", auth.to_owned()),
        ("/api/v1/line-items", auth.to_owned()),
        ("/api/v1/advertisers", auth.to_owned()),
    ]
}

const BID_SAMPLE: &[u8] = br#"{"id":"r1","imp":[{"id":"1","banner":{"w":300,"h":250},"bidfloor":0.5}],"site":{"id":"s","page":"https://news.example/"},"device":{"ua":"Mozilla/5.0","ip":"10.0.0.1"},"user":{"id":"u1"},"tmax":100}"#;
const CAMPAIGN_SAMPLE: &[u8] = br#"{"advertiser_id":1,"name":"Spring","status":"active"}"#;

#[test]
fn serve_survives_hostile_http() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        data.path(),
        &["--demo"],
        // A short header timeout keeps the slowloris group quick.
        &[
            ("MARQUEE_EDGE__HEADER_READ_TIMEOUT_MS", "1000"),
            // The gateway's auction endpoint, with our own line items as its one bidder.
            ("MARQUEE_GATEWAY__ENABLED", "true"),
            ("MARQUEE_GATEWAY__INTERNAL_BIDDER", "house"),
        ],
    );
    let token = token_from(&server.stderr_line("demo admin token"));
    let auth = format!("Authorization: Bearer {token}\r\n");
    let addr = address(&server.base);
    let pid = server.child.id();
    assert_alive(&addr, "start");
    let started = Instant::now();
    let rss_before = resident_kib(pid);

    // Every server path that reads a request body, and two that do not.
    let paths = [
        "/openrtb2/bid",
        "/openrtb2/auction",
        "/api/v1/campaigns",
        "/login",
        "/profiles",
        "/ad",
    ];

    let mut framing = Tally::default();
    for path in paths {
        // A bid request whose body has not arrived when the exchange's tmax is over is
        // answered "no bid" (204), as the protocol expects of a late request.
        let late = if path.starts_with("/openrtb2") {
            &[204][..]
        } else {
            &[]
        };
        for (what, bytes) in framing_attacks(path, &auth) {
            framing.record_allowing(&format!("{what} to {path}"), exchange(&addr, &bytes), late);
        }
    }
    framing.print("framing (Content-Length, chunked, head syntax)");
    assert_alive(&addr, "framing");

    let mut heads = Tally::default();
    for path in paths {
        for (what, bytes) in huge_heads(path) {
            heads.record(&format!("{what} to {path}"), exchange(&addr, &bytes));
        }
    }
    heads.print("huge heads");
    assert_alive(&addr, "huge heads");

    let mut bodies = Tally::default();
    for (path, headers) in json_endpoints(&auth) {
        // Declared huge, 8 MiB actually sent; then a chunked body with no declared end.
        let declared = format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\n{headers}Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
        );
        bodies.record(
            &format!("1 GB declared to {path}"),
            exchange_streaming(&addr, &declared, 8 << 20),
        );
        let chunked = format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\n{headers}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n800000\r\n"
        );
        bodies.record(
            &format!("8 MiB chunk to {path}"),
            exchange_streaming(&addr, &chunked, 8 << 20),
        );
    }
    bodies.print("huge bodies (8 MiB sent each)");
    assert_alive(&addr, "huge bodies");

    let mut slow = Tally::default();
    for _ in 0..3 {
        let mut stream = connect(&addr);
        let begun = Instant::now();
        let head = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ";
        let mut cut = false;
        for byte in head.iter().chain(std::iter::repeat(&b'a')) {
            if stream.write_all(&[*byte]).is_err() {
                cut = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            if begun.elapsed() > Duration::from_secs(6) {
                break;
            }
        }
        let reply = if cut {
            Reply::Closed
        } else {
            read_reply(stream)
        };
        assert!(
            begun.elapsed() < Duration::from_secs(6),
            "a trickled head was not cut by the 1 s header timeout"
        );
        slow.record("slowloris", reply);
    }
    slow.print("slowloris (1 byte / 100 ms, header timeout 1 s)");
    assert_alive(&addr, "slowloris");

    // A head, then a body held back: the manager's routes cut it after the same time.
    let mut held = Tally::default();
    for (path, headers) in [("/login", ""), ("/api/v1/campaigns", auth.as_str())] {
        let begun = Instant::now();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\n{headers}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
        );
        held.record(
            &format!("held body to {path}"),
            exchange(&addr, head.as_bytes()),
        );
        assert!(
            begun.elapsed() < Duration::from_secs(5),
            "a held-back body to {path} was not cut within 5 s"
        );
    }
    held.print("held-back bodies (idle timeout 1 s)");
    assert_alive(&addr, "held-back bodies");

    let mut utf8 = Tally::default();
    let raw_targets: [&[u8]; 3] = [
        b"GET /ad?placement=\xff\xfe HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /api/v1/\xc3\x28 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /t/c?t=\x80 HTTP/1.1\r\nHost: t\r\n\r\n",
    ];
    for target in raw_targets {
        utf8.record("raw invalid UTF-8 in the target", exchange(&addr, target));
    }
    for target in [
        "/ad?placement=%ff%fe",
        "/ad.json?placement=1&url=%c3%28",
        "/t/i?t=%ff",
        "/t/c?t=%c3%28",
        "/openrtb2/win?t=%80",
        "/api/v1/advertisers/%ff",
        "/api/v1/advertisers?name=%ff%fe",
        "/api/v1/line-items?q=%c3%28",
        "/api/v1/reports?group_by=%ff&from=%c3%28",
        "/login?next=%ff",
        "/sync?uid=%ff",
    ] {
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n");
        let reply = exchange(&addr, request.as_bytes());
        // The edge answers an untrusted query with its fallback (200 with a pixel or an
        // empty ad) by design; what matters here is that nothing fails.
        utf8.record_allowing(
            &format!("percent-encoded invalid UTF-8 in {target}"),
            reply,
            &[200, 204],
        );
    }
    for (path, headers) in json_endpoints(&auth) {
        utf8.record(
            &format!("invalid UTF-8 JSON to {path}"),
            exchange(
                &addr,
                &post(
                    path,
                    &headers,
                    b"{\"id\":\"\xff\xfe\",\"name\":\"\xc3\x28\"}",
                ),
            ),
        );
    }
    utf8.print("invalid UTF-8 (targets, queries, JSON)");
    assert_alive(&addr, "invalid UTF-8");

    let mut deep = Tally::default();
    for (path, headers) in json_endpoints(&auth) {
        for body in [
            "[".repeat(100_000),
            "{\"a\":".repeat(50_000),
            format!("{{\"id\":\"x\",\"imp\":{}", "[".repeat(60_000)),
        ] {
            deep.record(
                &format!("deep JSON to {path}"),
                exchange(&addr, &post(path, &headers, body.as_bytes())),
            );
        }
    }
    deep.print("deep JSON nesting");
    assert_alive(&addr, "deep JSON");

    let mut random = Tally::default();
    let mut generator = Random(0x5eed_1234_abcd_0011);
    let per_endpoint = 600;
    for (path, headers) in json_endpoints(&auth) {
        let sample = if path.starts_with("/openrtb2") {
            BID_SAMPLE
        } else {
            CAMPAIGN_SAMPLE
        };
        for i in 0..per_endpoint {
            let body = generator.body(sample);
            let reply = exchange(&addr, &post(path, &headers, &body));
            // A mutation can leave a valid bid request (answered with a bid or no bid) or a
            // valid object (created): fine, as long as it is not a failure.
            random.record_allowing(
                &format!("random body #{i} to {path}: {body:?}"),
                reply,
                &[200, 201, 204],
            );
        }
    }
    random.print("random bodies (seed 0x5eed1234abcd0011)");
    assert_alive(&addr, "random bodies");

    let rss_after = resident_kib(pid);
    println!(
        "resident memory: {rss_before} KiB before, {rss_after} KiB after ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    assert!(
        rss_after < rss_before + 128 * 1024,
        "resident memory grew from {rss_before} KiB to {rss_after} KiB"
    );
    server.stop();
}

/// The bench reference is bare hyper by design (no header timeout, no body limit: it is the
/// baseline ratio runs compare against, bound to loopback by scripts); it must still reject
/// broken framing and drain huge bodies without holding them.
#[test]
fn bench_reference_rejects_broken_framing() {
    let mut command = Command::new(BIN);
    command
        .args(["bench", "reference", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = address(
        first
            .trim()
            .strip_prefix("marquee bench reference listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}")),
    );
    let alive = |after: &str| {
        let reply = exchange(
            &addr,
            b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(reply, Reply::Status(200), "no answer after {after}");
    };
    let rss_before = resident_kib(child.id());
    let mut tally = Tally::default();
    for (what, bytes) in framing_attacks("/", "") {
        // The reference has no body timeout by design: a body that never comes is waited for.
        if what.starts_with("truncated") || what.starts_with("body shorter") {
            continue;
        }
        let reply = exchange(&addr, &bytes);
        // A POST whose broken body is read to its end is answered like any POST.
        tally.record_allowing(&what, reply, &[200]);
    }
    for (what, bytes) in huge_heads("/") {
        tally.record(&what, exchange(&addr, &bytes));
    }
    alive("framing and heads");
    let reply = exchange_streaming(
        &addr,
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 33554432\r\n\r\n",
        32 << 20,
    );
    assert_eq!(
        reply,
        Reply::Status(200),
        "a 32 MiB body is drained and answered"
    );
    alive("a 32 MiB body");
    let rss_after = resident_kib(child.id());
    tally.print("bench reference (framing, heads)");
    println!("bench reference resident memory: {rss_before} KiB before, {rss_after} KiB after");
    assert!(
        rss_after < rss_before + 64 * 1024,
        "the reference held the body: {rss_before} KiB then {rss_after} KiB"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
