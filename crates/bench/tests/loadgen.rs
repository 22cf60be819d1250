//! The load generator and the reference server against small servers on loopback. Every test
//! is bounded by a request count or well under two seconds of load.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use marquee_bench::load::{self, Plan};
use marquee_bench::reference::ReferenceServer;
use marquee_bench::report::Report;
use marquee_bench::{BenchError, RunArgs, svg};
use tokio::net::TcpListener;

/// The command line of `marquee bench run`, as the binary flattens it.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

async fn plan(args: &[&str]) -> Result<Plan, BenchError> {
    let cli = Cli::parse_from(std::iter::once("run").chain(args.iter().copied()));
    marquee_bench::cli::plan(&cli.run).await
}

async fn run(args: &[&str]) -> Report {
    load::run(&plan(args).await.unwrap()).await.unwrap()
}

/// `run` against `target` with the options written as one line, split at white space (so a
/// long option list stays one readable line rather than one word a line).
async fn run_on(target: &str, options: &str) -> Report {
    let args: Vec<&str> = std::iter::once(target)
        .chain(options.split_whitespace())
        .collect();
    run(&args).await
}

/// What the test server does before answering "ok".
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    Immediate,
    Delay(Duration),
    /// The request with this number (from 1) waits this long; the others answer at once.
    StallOnce(usize, Duration),
}

/// A server that counts connections that carried requests, counts requests and keeps the
/// bodies it received.
struct TestServer {
    url: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<(String, String, Bytes)>>>,
}

async fn test_server(behaviour: Behaviour) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(Mutex::new(Vec::new()));
    let server = TestServer {
        url: format!("http://{addr}"),
        connections: Arc::clone(&connections),
        requests: Arc::clone(&requests),
        received: Arc::clone(&received),
    };
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (connections, requests, received) = (
                Arc::clone(&connections),
                Arc::clone(&requests),
                Arc::clone(&received),
            );
            let counted = Arc::new(AtomicBool::new(false));
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    if !counted.swap(true, Ordering::SeqCst) {
                        connections.fetch_add(1, Ordering::SeqCst);
                    }
                    let number = requests.fetch_add(1, Ordering::SeqCst) + 1;
                    let received = Arc::clone(&received);
                    async move {
                        let method = request.method().to_string();
                        let path = request.uri().to_string();
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        received.lock().unwrap().push((method, path, body));
                        match behaviour {
                            Behaviour::Immediate => {}
                            Behaviour::Delay(delay) => tokio::time::sleep(delay).await,
                            Behaviour::StallOnce(at, stall) if at == number => {
                                tokio::time::sleep(stall).await;
                            }
                            Behaviour::StallOnce(..) => {}
                        }
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    server
}

fn nanos(value: Duration) -> u64 {
    u64::try_from(value.as_nanos()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percentiles_match_a_known_delay() {
    let server = test_server(Behaviour::Delay(Duration::from_millis(20))).await;
    let report = run(&[&server.url, "-c", "4", "-n", "80", "-q"]).await;
    assert_eq!(report.responses, 80);
    assert_eq!(report.statuses.get(&200), Some(&80));
    assert_eq!(report.bids, 80, "200 with a body counts as a bid");
    assert_eq!(report.errors_total, 0);
    // No answer can beat the server's delay; the upper bounds only catch a wrong unit or
    // scale (seconds, or connection set-up counted in), since a busy machine (parallel tests,
    // CI) stretches real latencies well past the delay.
    let l = report.latency;
    assert!(l.min_ms >= 19.5, "min {} ms", l.min_ms);
    assert!(
        (19.5..200.0).contains(&l.p50_ms),
        "p50 {} ms for a 20 ms server",
        l.p50_ms
    );
    assert!(l.p99_ms < 1_000.0, "p99 {} ms", l.p99_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_shows_a_stall_that_closed_loop_hides() {
    let stall = Duration::from_millis(300);
    let slow = nanos(Duration::from_millis(100));

    // Open loop, 200 req/s on one connection: every request due during the stall waits for
    // it, and its latency counts from when it was due.
    let server = test_server(Behaviour::StallOnce(5, stall)).await;
    let open = run(&[&server.url, "-c", "1", "-r", "200", "-d", "1s", "-q"]).await;
    let open_slow = open.histogram.count_between(slow, u64::MAX);
    assert!(
        open_slow >= 20,
        "open loop: only {open_slow} of {} requests took over 100 ms",
        open.responses
    );
    assert!(open.latency.max_ms >= 290.0, "max {}", open.latency.max_ms);

    // Closed loop: the connection simply waits, and only the stalled request looks slow.
    let server = test_server(Behaviour::StallOnce(5, stall)).await;
    let closed = run(&[&server.url, "-c", "1", "-n", "200", "-q"]).await;
    assert_eq!(closed.histogram.count_between(slow, u64::MAX), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_count_is_exact() {
    let server = test_server(Behaviour::Immediate).await;
    let report = run(&[&server.url, "-c", "8", "-t", "2", "-n", "1000", "-q"]).await;
    assert_eq!(server.requests.load(Ordering::SeqCst), 1000);
    assert_eq!(report.requests, 1000);
    assert_eq!(report.responses, 1000);
    assert_eq!(report.threads, 2);
    let server = test_server(Behaviour::Immediate).await;
    let report = run(&[&server.url, "-c", "3", "-r", "2000", "-n", "77", "-q"]).await;
    assert_eq!(server.requests.load(Ordering::SeqCst), 77);
    assert_eq!(report.responses, 77);
}

/// The spinning task that keeps a worker polling must neither hold the run open nor change
/// what is counted, in closed and open loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_poll_counts_the_same_and_ends() {
    let server = test_server(Behaviour::Delay(Duration::from_millis(2))).await;
    let report = run_on(&server.url, "-c 4 -t 2 -n 300 -q --busy-poll").await;
    assert_eq!(server.requests.load(Ordering::SeqCst), 300);
    assert_eq!((report.requests, report.responses), (300, 300));
    let server = test_server(Behaviour::Immediate).await;
    let report = run_on(&server.url, "-c 2 -r 1000 -n 120 -q --busy-poll").await;
    assert_eq!(server.requests.load(Ordering::SeqCst), 120);
    assert_eq!(report.responses, 120);
    assert_eq!(report.errors_total, 0);
}

/// The report says how busy the generator itself was: a busy-polling thread keeps about one
/// core busy for the whole run. (The figure is the test process's, other tests' threads
/// included, so the bounds are loose; a wrong unit, ten or a hundred times off, still fails.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_gives_the_generators_own_cpu() {
    let server = test_server(Behaviour::Delay(Duration::from_millis(2))).await;
    let report = run_on(&server.url, "-c 1 -t 1 -d 600ms -q --busy-poll").await;
    let percent = report
        .client_cpu_percent
        .expect("/proc/self/stat is there on Linux");
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    assert!(
        (40.0..=100.0 * cores + 10.0).contains(&percent),
        "a spinning thread measured {percent:.0}% of one core"
    );
    assert!(report.table().contains("client CPU"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_reuses_connections_and_no_keep_alive_does_not() {
    let server = test_server(Behaviour::Immediate).await;
    run(&[&server.url, "-c", "4", "-n", "200", "-q"]).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), 4);

    let server = test_server(Behaviour::Immediate).await;
    let report = run(&[&server.url, "-c", "4", "-n", "200", "--no-keep-alive", "-q"]).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), 200);
    assert_eq!(report.responses, 200);
    assert!(!report.keep_alive);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrtb_requests_get_fresh_ids() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("request.json"),
        r#"{"id":"r1","imp":[{"id":"1","banner":{"w":300,"h":250}},{"id":"2"}],"tmax":100}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("response.json"),
        r#"{"id":"r1","seatbid":[]}"#,
    )
    .unwrap();
    let server = test_server(Behaviour::Immediate).await;
    let url = format!("{}/openrtb2/bid", server.url);
    let folder = dir.path().to_str().unwrap();
    let report = run(&[&url, "--openrtb", folder, "-c", "2", "-n", "50", "-q"]).await;
    assert_eq!(report.responses, 50);
    let received = server.received.lock().unwrap();
    let mut request_ids = std::collections::HashSet::new();
    let mut imp_ids = std::collections::HashSet::new();
    for (method, path, body) in received.iter() {
        assert_eq!(method, "POST");
        assert_eq!(path, "/openrtb2/bid");
        let request: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(request["tmax"], 100);
        assert_eq!(request["imp"][0]["banner"]["w"], 300);
        request_ids.insert(request["id"].as_str().unwrap().to_owned());
        for imp in request["imp"].as_array().unwrap() {
            imp_ids.insert(imp["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(request_ids.len(), 50, "every request has its own id");
    assert_eq!(imp_ids.len(), 100, "every impression has its own id");
    assert!(!request_ids.contains("r1"));
}

/// A stand-in edge: `/ad.json` answers one ad whose html carries tracking URLs under a public
/// URL that is not the server's own address (a proxy's, with a path prefix the proxy strips),
/// with tokens naming this edge; placement 9 gets no ad. `/t/i` answers a GIF, `/t/c` a
/// redirect. It records the path and `Host` of every request, and the tokens it issued.
struct FakeEdge {
    url: String,
    authority: String,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    issued: Arc<Mutex<std::collections::HashSet<String>>>,
}

const PUBLIC_URL: &str = "http://ads.public.invalid/mq";
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";

async fn fake_edge(name: &'static str) -> FakeEdge {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let issued = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let served = Arc::new(AtomicUsize::new(0));
    let edge = FakeEdge {
        url: format!("http://{addr}/"),
        authority: addr.to_string(),
        seen: Arc::clone(&seen),
        issued: Arc::clone(&issued),
    };
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (seen, issued, served) =
                (Arc::clone(&seen), Arc::clone(&issued), Arc::clone(&served));
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let path = request.uri().to_string();
                    let host = request
                        .headers()
                        .get("host")
                        .map(|h| h.to_str().unwrap().to_owned())
                        .unwrap_or_default();
                    seen.lock().unwrap().push((path.clone(), host));
                    let n = served.fetch_add(1, Ordering::SeqCst);
                    let response = match request.uri().path() {
                        "/ad.json" if path.contains("p=9&") => Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(br#"{"ads":[]}"#))),
                        "/ad.json" => {
                            let token = format!("{name}-{n}");
                            issued.lock().unwrap().insert(token.clone());
                            let html = format!(
                                "<a href=\"{PUBLIC_URL}/t/c?t={token}\" target=\"_blank\"><img src=\"https://cdn.invalid/b.png\"></a><img src='{PUBLIC_URL}/t/i?t={token}' width=\"1\" height=\"1\">"
                            );
                            let body = serde_json::json!({"ads": [{"placement": 1, "line_item": 2,
                                "creative": 3, "width": 300, "height": 250, "html": html}]});
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body.to_string())))
                        }
                        "/t/i" => Response::builder()
                            .header("content-type", "image/gif")
                            .body(Full::new(Bytes::from_static(GIF))),
                        "/t/c" => Response::builder()
                            .status(302)
                            .header("location", "https://advertiser.invalid/landing")
                            .body(Full::new(Bytes::new())),
                        _ => Response::builder()
                            .status(404)
                            .body(Full::new(Bytes::new())),
                    };
                    async move { Ok::<_, Infallible>(response.unwrap()) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    edge
}

impl FakeEdge {
    /// Paths received that start with `prefix`.
    fn paths(&self, prefix: &str) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(path, _)| path.starts_with(prefix))
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// The edges named in the tokens of the beacons (or clicks) this edge received.
    fn token_sources(&self, prefix: &str) -> Vec<String> {
        self.paths(prefix)
            .iter()
            .map(|path| {
                let token = path.split("t=").nth(1).unwrap();
                token.split('-').next().unwrap().to_owned()
            })
            .collect()
    }
}

/// A session model with many clicks (30% of impressions) and a placement without ads.
fn session_config(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("session.toml");
    std::fs::write(
        &path,
        r#"
        placements = ["1", "2", "9"]
        [transitions.impression]
        click = 0.3
        ad_request = 0.4
        page_view = 0.2
        "#,
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

fn count(map: &BTreeMap<u16, u64>, code: u16) -> u64 {
    map.get(&code).copied().unwrap_or(0)
}

/// Sessions fetch ads from `/ad.json` and fire the beacon and click URLs their answers carry
/// (the old workload requested `/imp` and `/click`, which the edge does not serve); the report
/// counts what the server saw, and clicks follow the model's probability.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_fetch_ads_and_fire_their_beacons() {
    let dir = tempfile::tempdir().unwrap();
    let config = session_config(&dir);
    let edge = fake_edge("a").await;
    let report = run_on(
        &edge.url,
        &format!("--session-config {config} --seed 42 -c 2 -n 2000 -q"),
    )
    .await;
    let seen = edge.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2000);
    for (path, host) in &seen {
        assert!(
            ["/ad.json?p=", "/t/i?t=a-", "/t/c?t=a-"]
                .iter()
                .any(|prefix| path.starts_with(prefix)),
            "unexpected request {path}"
        );
        assert_eq!(host, &edge.authority, "the public URL's host is not sent");
    }
    let session = report.session.as_ref().expect("a session report");
    let total = &session.total;
    let (ads, beacons, clicks) = (
        edge.paths("/ad.json").len() as u64,
        edge.paths("/t/i").len() as u64,
        edge.paths("/t/c").len() as u64,
    );
    assert_eq!(
        (total.ad_requests, total.impressions, total.clicks),
        (ads, beacons, clicks)
    );
    assert_eq!(total.ads + total.no_ads, ads);
    assert_eq!(total.ads_unreadable, 0);
    assert_eq!(count(&total.ad_statuses, 200), ads);
    assert_eq!(count(&total.impression_statuses, 200), beacons);
    assert_eq!(
        count(&total.click_statuses, 302),
        clicks,
        "redirects are not followed"
    );
    assert_eq!(report.errors_total, 0);
    // Placement 9 of three answers no ad, and its slot fires nothing.
    let empty_share = total.no_ads as f64 / ads as f64;
    assert!(
        (0.23..0.43).contains(&empty_share),
        "no-ad share {empty_share}"
    );
    assert!(session.skipped_no_ad > 0);
    // Every beacon is an ad's own: the tokens the server handed out.
    let issued = edge.issued.lock().unwrap().clone();
    assert_eq!(issued.len() as u64, total.ads);
    for path in edge.paths("/t/") {
        let token = path.split("t=").nth(1).unwrap();
        assert!(issued.contains(token), "{path} was never issued");
    }
    let click_rate = clicks as f64 / beacons as f64;
    assert!(
        (0.22..0.38).contains(&click_rate),
        "{clicks} clicks for {beacons} beacons: {click_rate:.3}, the model says 0.3"
    );
    // Every session starts with a page view, which sends nothing, then an ad request.
    assert!((1..=total.ad_requests).contains(&session.sessions));
    for kind in ["ad_request", "impression", "click"] {
        assert!(session.latency[kind].p50_ms > 0.0, "{kind}");
    }
    let table = report.table();
    assert!(table.contains("beacons"), "{table}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["session"]["impressions"], beacons);
    assert_eq!(json["session"]["click_statuses"]["302"], clicks);
    assert_eq!(json["session"]["targets"][0]["ads"], total.ads);
    assert_eq!(json["session"]["beacon_target"], "same");
}

/// Open loop: the session's requests keep their intended send times (each an ad fetch, beacon
/// or click of its own), and the timeline and chart split answers by kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_run_open_loop() {
    let dir = tempfile::tempdir().unwrap();
    let config = session_config(&dir);
    let edge = fake_edge("a").await;
    let report = run_on(
        &edge.url,
        &format!("--session-config {config} --seed 7 -c 4 -r 600 -d 1200ms -q"),
    )
    .await;
    assert_eq!(report.mode, "open");
    assert_eq!(report.errors_total, 0);
    assert_eq!(report.responses, edge.seen.lock().unwrap().len() as u64);
    let session = report.session.as_ref().unwrap();
    let by_kind: u64 = report
        .timeline
        .iter()
        .map(|tick| {
            let counts = tick.session.unwrap();
            counts.ad_requests + counts.impressions + counts.clicks
        })
        .sum();
    assert_eq!(by_kind, report.responses);
    assert!(session.total.impressions > 50 && session.total.clicks > 0);
    let chart = svg::run_chart(&report);
    assert_well_formed(&chart);
    assert!(chart.contains("User sessions"));
}

/// Two edges: sessions take them in turn for their ads, and each beacon and click goes to the
/// edge `--beacon-target` names, its public URL's host replaced by that edge's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beacons_reach_the_target_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let config = session_config(&dir);
    for policy in ["same", "other", "random"] {
        let (a, b) = (fake_edge("a").await, fake_edge("b").await);
        let report = run_on(&a.url, &format!("--target {} --beacon-target {policy} --session-config {config} --seed 9 -c 2 -n 1500 -q", b.url)).await;
        let session = report.session.as_ref().unwrap();
        assert_eq!(session.beacon_target, policy);
        for (edge, counts) in [(&a, &session.targets[0]), (&b, &session.targets[1])] {
            assert_eq!(counts.url, edge.url);
            let c = &counts.counts;
            assert!(c.ad_requests > 200, "{policy}: ads {}", c.ad_requests);
            assert_eq!(c.ad_requests, edge.paths("/ad.json").len() as u64);
            assert_eq!(c.impressions, edge.paths("/t/i").len() as u64);
            assert_eq!(c.clicks, edge.paths("/t/c").len() as u64);
            for (path, host) in edge.seen.lock().unwrap().iter() {
                assert_eq!(host, &edge.authority, "{policy}: {path}");
            }
        }
        let from = |edge: &FakeEdge, source: &str| {
            let sources = edge.token_sources("/t/");
            sources.iter().filter(|s| *s == source).count() as f64 / sources.len() as f64
        };
        match policy {
            "same" => {
                assert_eq!(from(&a, "a"), 1.0);
                assert_eq!(from(&b, "b"), 1.0);
            }
            "other" => {
                assert_eq!(from(&a, "b"), 1.0);
                assert_eq!(from(&b, "a"), 1.0);
            }
            _ => {
                for share in [from(&a, "a"), from(&b, "b")] {
                    assert!((0.35..0.65).contains(&share), "random: own share {share}");
                }
            }
        }
    }
    let one = plan(&[
        "http://127.0.0.1:9/",
        "--session",
        "--beacon-target",
        "other",
    ])
    .await;
    assert!(matches!(one, Err(BenchError::Usage(_))));
    let fixed = plan(&["http://127.0.0.1:9/", "--target", "http://127.0.0.1:10/"]).await;
    assert!(matches!(fixed, Err(BenchError::Usage(_))));
    // A comma-separated list is several targets too.
    let listed = plan(&[
        "http://127.0.0.1:9/",
        "--session",
        "--target",
        "http://127.0.0.1:10/,http://127.0.0.1:11/",
    ])
    .await
    .unwrap();
    assert_eq!(listed.targets.len(), 3);
}

#[tokio::test]
async fn non_loopback_targets_are_refused() {
    for url in ["http://10.1.2.3:8080/", "http://192.0.2.7/"] {
        let error = plan(&[url]).await.unwrap_err();
        assert!(matches!(error, BenchError::NotLoopback { .. }), "{error}");
        assert!(error.to_string().contains("--allow-remote"), "{error}");
    }
    let other = plan(&["http://10.1.2.3:8080/", "--allow-remote", "10.9.9.9"]).await;
    assert!(matches!(other, Err(BenchError::NotLoopback { .. })));
    // Naming the address allows it; `plan` only resolves, it sends nothing.
    let named = plan(&["http://10.1.2.3:8080/", "--allow-remote", "10.1.2.3"]).await;
    assert_eq!(named.unwrap().targets[0].addr.to_string(), "10.1.2.3:8080");
    // Every target is checked, not only the first.
    let second = plan(&[
        "http://127.0.0.1:9/",
        "--session",
        "--target",
        "http://10.1.2.3:8080/",
    ])
    .await;
    assert!(matches!(second, Err(BenchError::NotLoopback { .. })));
    for url in [
        "http://127.0.0.1:9/",
        "http://[::1]:9/",
        "http://localhost:9/",
    ] {
        plan(&[url]).await.unwrap();
    }
    assert!(matches!(
        plan(&["https://127.0.0.1/"]).await,
        Err(BenchError::Usage(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_answers_exact_sizes() {
    let server = ReferenceServer::bind("127.0.0.1:0".parse().unwrap(), 5000, 600)
        .await
        .unwrap();
    let url = format!("http://{}/", server.local_addr().unwrap());
    let task = tokio::spawn(server.serve());
    let get = run(&[&url, "-c", "2", "-n", "20", "-q"]).await;
    assert_eq!(get.statuses.get(&200), Some(&20));
    assert_eq!(get.bytes_received, 20 * 5000);
    let body = "x".repeat(1500);
    let post = run(&[&url, "--body", &body, "-c", "2", "-n", "20", "-q"]).await;
    assert_eq!(post.statuses.get(&200), Some(&20));
    assert_eq!(post.bytes_received, 20 * 600);
    let delete = run(&[&url, "-X", "DELETE", "-n", "1", "-q"]).await;
    assert_eq!(delete.statuses.get(&405), Some(&1));
    assert_eq!(delete.non_2xx, 1);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn svg_and_json_are_well_formed() {
    let server = test_server(Behaviour::Immediate).await;
    let report = run(&[&server.url, "-c", "2", "-r", "400", "-d", "1200ms", "-q"]).await;
    assert!(!report.timeline.is_empty());
    let chart = svg::run_chart(&report);
    assert_well_formed(&chart);
    assert!(chart.contains("<polyline"));
    let json: serde_json::Value = serde_json::to_value(&report).unwrap();
    assert_eq!(json["mode"], "open");
    assert!(json["latency"]["p99_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(json["statuses"]["200"], report.responses);

    let plan = plan(&[&server.url, "-c", "2", "-d", "300ms", "-q"])
        .await
        .unwrap();
    let steps = load::sweep(&plan, &[100.0, 300.0], Duration::from_millis(10))
        .await
        .unwrap();
    assert_eq!(steps.len(), 2);
    assert!(steps[1].report.responses > steps[0].report.responses);
    assert_well_formed(&svg::sweep_chart(&steps));
    // Nothing to draw still makes a valid document.
    assert_well_formed(&svg::render(&[svg::Panel {
        title: "empty <chart> & co".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        series: vec![],
    }]));
}

/// Checks that the document is one `<svg>` element whose tags nest properly, and that every
/// `&` in it starts an entity.
fn assert_well_formed(document: &str) {
    assert!(document.starts_with("<svg "), "{document}");
    assert!(document.trim_end().ends_with("</svg>"));
    let mut open: Vec<String> = Vec::new();
    let mut rest = document;
    let mut roots = 0;
    while let Some(start) = rest.find('<') {
        let text = &rest[..start];
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;"]
                    .iter()
                    .any(|e| entity.starts_with(e)),
                "bare & in {text:?}"
            );
        }
        let end = start + rest[start..].find('>').expect("unclosed tag");
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "< inside a tag: {tag:?}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                open.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
        } else {
            if open.is_empty() {
                roots += 1;
            }
            if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().expect("empty tag");
                open.push(name.to_owned());
            }
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "unclosed {open:?}");
    assert_eq!(roots, 1, "one root element");
}

/// One connection to a server that takes 20 ms per answer, offered 400 requests per second:
/// it can send one request in eight, and with `--max-wait` the others are skipped, not sent
/// late. Every intended request is either sent or counted unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_wait_skips_what_no_connection_could_send_in_time() {
    let server = test_server(Behaviour::Delay(Duration::from_millis(20))).await;
    let report = run_on(&server.url, "-c 1 --rate 400 -n 80 --max-wait 2ms -q").await;
    assert_eq!(report.requests + report.unsent, 80);
    assert!(report.unsent >= 40, "unsent {}", report.unsent);
    assert_eq!(report.requests, report.responses);
    assert_eq!(
        server.requests.load(Ordering::SeqCst) as u64,
        report.requests,
        "skipped requests never reach the server"
    );
}
