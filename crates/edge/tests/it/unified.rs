//! The unified decision through the edge's server: a placement with programmatic demand meets
//! mock bidders on loopback. The bid's markup serves when its price net of the revenue share
//! beats the direct line item's; else the line item does; a sponsorship that does not opt in is
//! served without an auction; a slow bidder does not hold the answer past the placement's
//! timeout; the bid's beacon counts a programmatic impression and sends its billing notice; a
//! direct decision that lost is neither logged nor reserved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use jiff::Timestamp;
use marquee_edge::{Edge, Limits};
use marquee_eventlog::{Budget, EventKind, EventLog, auction, bidder_id};
use marquee_gateway::{BidderSpec, Gateway, GatewayConfig};
use marquee_model::{Catalog, Micros, Programmatic, Tier};
use tokio::net::TcpListener;

use crate::common;

const PLACEMENT: u64 = 100;

/// A bidder answering every request with one bid at `price` whose markup names it, after
/// `delay`; it counts the billing notices it gets (`GET /bill`).
struct MockBidder {
    address: SocketAddr,
    billed: Arc<AtomicUsize>,
    /// The last bid request it got.
    asked: Arc<Mutex<serde_json::Value>>,
}

async fn mock_bidder(name: &'static str, price: &'static str, delay: Duration) -> MockBidder {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let billed = Arc::new(AtomicUsize::new(0));
    let asked = Arc::new(Mutex::new(serde_json::Value::Null));
    let (counter, last) = (Arc::clone(&billed), Arc::clone(&asked));
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (counter, last) = (Arc::clone(&counter), Arc::clone(&last));
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let (counter, last) = (Arc::clone(&counter), Arc::clone(&last));
                    async move {
                        if request.uri().path() == "/bill" {
                            counter.fetch_add(1, Ordering::SeqCst);
                            return Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                                Bytes::new(),
                            )));
                        }
                        use http_body_util::BodyExt;
                        let asked = request.into_body().collect().await.unwrap().to_bytes();
                        let asked: serde_json::Value = serde_json::from_slice(&asked).unwrap();
                        let id = asked["id"].as_str().unwrap_or_default().to_owned();
                        *last.lock().unwrap() = asked;
                        tokio::time::sleep(delay).await;
                        let body = format!(
                            r#"{{"id":"{id}","seatbid":[{{"seat":"{name}","bid":[{{"id":"b1","impid":"1","price":{price},"adm":"<b>bid of {name}</b>","burl":"http://{address}/bill?p=${{AUCTION_PRICE}}","w":300,"h":250}}]}}]}}"#
                        );
                        Ok(Response::new(Full::new(Bytes::from(body))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    MockBidder {
        address,
        billed,
        asked,
    }
}

/// One USD line item at a 2.00 CPM of `tier` on one placement with programmatic demand.
fn catalog(tier: Tier, competes: bool, programmatic: Programmatic) -> Catalog {
    let mut catalog =
        marquee_snapshot::fixtures::catalog(PLACEMENT, tier, "<i>direct line item</i>");
    catalog.line_items[0].object.competes_with_programmatic = competes;
    catalog.placements[0].object.programmatic = Some(programmatic);
    catalog
}

fn programmatic(revenue_share_permille: u32, timeout_ms: u32) -> Programmatic {
    Programmatic {
        enabled: true,
        bidders: Vec::new(),
        timeout_ms,
        floor_micros: Micros(0),
        revenue_share_permille,
    }
}

struct Running {
    edge: Arc<Edge>,
    address: SocketAddr,
    log: Arc<EventLog>,
}

async fn start(
    dir: &std::path::Path,
    catalog: &Catalog,
    bidders: &[(&str, SocketAddr)],
) -> Running {
    let log = Arc::new(common::log(dir));
    let limits = Limits {
        max_queue_delay: None,
        ..Limits::default()
    };
    let edge = common::edge_with_log(dir, limits, Arc::clone(&log));
    let gateway = Gateway::new(GatewayConfig {
        bidders: bidders
            .iter()
            .map(|(name, address)| {
                let mut spec = BidderSpec::new(*name, format!("http://{address}/bid"));
                spec.notice_hosts = vec!["127.0.0.1".into()];
                spec
            })
            .collect(),
        response_margin: Duration::ZERO,
        ..GatewayConfig::default()
    })
    .unwrap();
    let edge = Arc::new(edge.with_gateway(gateway));
    let snapshot = marquee_snapshot::compile(catalog, Timestamp::now());
    edge.holder.install(&snapshot.encode()).unwrap();
    let address = common::serve(&edge).await;
    Running { edge, address, log }
}

/// `GET path` on a new connection: the status and the body.
async fn get(address: SocketAddr, path: &str) -> (u16, String) {
    common::send(address, "GET", path, "", "").await
}

async fn ad(running: &Running) -> String {
    let path = format!("/ad?placement={PLACEMENT}&url=http%3A%2F%2Fnews.example%2Fa");
    let (status, body) = get(running.address, &path).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The kind, amount and line item of every event the log has made durable so far.
fn logged(log: &EventLog) -> Vec<(EventKind, i64, u64)> {
    let mut events = Vec::new();
    for shard in 0..log.shards() {
        for segment in log.segments(shard).unwrap() {
            let batch = log.read(shard, segment.id, 0, Budget::default()).unwrap();
            events.extend(
                batch
                    .events
                    .iter()
                    .map(|e| (e.kind, e.amount_micros, e.line_item)),
            );
        }
    }
    events
}

/// The bidder (`creative`) of every event of `kind` the log has made durable so far.
fn bidders_of(log: &EventLog, kind: EventKind) -> Vec<u64> {
    let mut bidders = Vec::new();
    for shard in 0..log.shards() {
        for segment in log.segments(shard).unwrap() {
            let batch = log.read(shard, segment.id, 0, Budget::default()).unwrap();
            bidders.extend(
                batch
                    .events
                    .iter()
                    .filter(|e| e.kind == kind)
                    .map(|e| e.creative),
            );
        }
    }
    bidders
}

/// The events logged once `expected` is among them (the log reads only what it made durable,
/// a few milliseconds after the append).
async fn logged_with(
    log: &EventLog,
    expected: (EventKind, i64, u64),
) -> Vec<(EventKind, i64, u64)> {
    for _ in 0..500 {
        let events = logged(log);
        if events.contains(&expected) {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{expected:?} never logged: {:?}", logged(log));
}

/// The impression beacon's path in an ad's markup.
fn beacon(body: &str) -> String {
    let start = body.find("http://127.0.0.1/t/i?").expect("a beacon");
    let rest = &body[start + "http://127.0.0.1".len()..];
    rest[..rest.find('"').unwrap()].replace("&amp;", "&")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_bid_serves_its_markup_and_its_beacon_bills_it() {
    let dir = tempfile::tempdir().unwrap();
    let bidder = mock_bidder("high", "3", Duration::ZERO).await;
    let catalog = catalog(Tier::Remnant, false, programmatic(0, 300));
    let running = start(dir.path(), &catalog, &[("high", bidder.address)]).await;

    let body = ad(&running).await;
    assert!(body.contains("<b>bid of high</b>"), "{body}");
    assert!(!body.contains("direct line item"), "{body}");
    // The auction, won by the one bidder called with its one bid.
    let won = auction::outcome(auction::AUCTION | auction::WON, 1);
    let events = logged_with(
        &running.log,
        (EventKind::ProgrammaticAuction, 3_000_000, won),
    )
    .await;
    assert_eq!(
        bidders_of(&running.log, EventKind::ProgrammaticAuction),
        [bidder_id("high")]
    );
    // The lost direct decision was not logged, and not reserved on its lease either (the
    // same step does both, `placement::commit`).
    assert!(
        !events.iter().any(|(kind, ..)| *kind == EventKind::Decision),
        "{events:?}"
    );

    let (status, _) = get(running.address, &beacon(&body)).await;
    assert_eq!(status, 200);
    logged_with(
        &running.log,
        (EventKind::ProgrammaticImpression, 3_000_000, 0),
    )
    .await;
    assert_eq!(
        bidders_of(&running.log, EventKind::ProgrammaticImpression),
        [bidder_id("high")],
        "the impression names its bidder"
    );
    for _ in 0..500 {
        if bidder.billed.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        bidder.billed.load(Ordering::SeqCst),
        1,
        "the billing notice"
    );
    // The beacon again: counted once, so billed once.
    get(running.address, &beacon(&body)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(bidder.billed.load(Ordering::SeqCst), 1);
    drop(running.edge);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_bid_loses_to_the_line_item() {
    let dir = tempfile::tempdir().unwrap();
    let bidder = mock_bidder("low", "1", Duration::ZERO).await;
    let catalog = catalog(Tier::Remnant, false, programmatic(0, 300));
    let running = start(dir.path(), &catalog, &[("low", bidder.address)]).await;

    let body = ad(&running).await;
    assert!(body.contains("direct line item"), "{body}");
    // The bid request: the placement's size, floored at the line item's 2.00, the page, the
    // placement's timeout.
    let asked = bidder.asked.lock().unwrap().clone();
    let imp = &asked["imp"][0];
    assert_eq!(
        imp["banner"]["format"][0],
        serde_json::json!({"w": 300, "h": 250})
    );
    assert_eq!(imp["bidfloor"], 2.0, "{asked}");
    assert_eq!(asked["site"]["page"], "http://news.example/a");
    assert_eq!(asked["site"]["domain"], "news.example");
    assert_eq!(
        asked["tmax"].as_u64().map(|t| t <= 300),
        Some(true),
        "{asked}"
    );
    // The winning direct decision is logged, and the auction with no winning bid.
    let direct = auction::outcome(auction::AUCTION | auction::DIRECT, 1);
    let events = logged_with(&running.log, (EventKind::ProgrammaticAuction, 0, direct)).await;
    assert!(
        events.iter().any(|(kind, ..)| *kind == EventKind::Decision),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bid_request_carries_the_page_and_user_as_given_and_no_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let bidder = mock_bidder("low", "1", Duration::ZERO).await;
    let catalog = catalog(Tier::Remnant, false, programmatic(0, 300));
    let running = start(dir.path(), &catalog, &[("low", bidder.address)]).await;
    // A page URL and a user id with characters JSON must escape.
    let path = format!(
        "/ad?placement={PLACEMENT}&uid=a%22b%5Cc%0A%E2%80%A8&url=https%3A%2F%2Fnews.example%2F%3Fq%3D%22x%22%3C%2Fscript%3E"
    );
    let (status, body) = get(running.address, &path).await;
    assert_eq!(status, 200, "{body}");
    let asked = bidder.asked.lock().unwrap().clone();
    assert_eq!(asked["user"]["id"], "a\"b\\c\n\u{2028}", "{asked}");
    assert_eq!(
        asked["site"]["page"],
        "https://news.example/?q=\"x\"</script>"
    );
    assert_eq!(asked["imp"][0]["secure"], 1);
    assert_eq!(asked["imp"][0]["tagid"], PLACEMENT.to_string());
    assert_eq!(asked["cur"][0], asked["imp"][0]["bidfloorcur"], "{asked}");
    // No geo is known here: the member is absent, not null nor empty; nothing is null.
    assert!(asked["device"].get("geo").is_none(), "{asked}");
    assert!(!asked.to_string().contains("null"), "{asked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_revenue_share_is_taken_before_comparing() {
    let dir = tempfile::tempdir().unwrap();
    // 2.10 less 10 % is 1.89: below the line item's 2.00.
    let bidder = mock_bidder("near", "2.1", Duration::ZERO).await;
    let catalog = catalog(Tier::Remnant, false, programmatic(100, 300));
    let running = start(dir.path(), &catalog, &[("near", bidder.address)]).await;
    let body = ad(&running).await;
    assert!(body.contains("direct line item"), "{body}");
    // The floor asks for what nets the line item's 2.00 after the share.
    assert_eq!(bidder.asked.lock().unwrap()["imp"][0]["bidfloor"], 2.222223);

    // Without a share, 2.10 wins.
    let dir = tempfile::tempdir().unwrap();
    let catalog = self::catalog(Tier::Remnant, false, programmatic(0, 300));
    let running = start(dir.path(), &catalog, &[("near", bidder.address)]).await;
    let body = ad(&running).await;
    assert!(body.contains("bid of near"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sponsorship_serves_without_an_auction_unless_it_opts_in() {
    let dir = tempfile::tempdir().unwrap();
    let bidder = mock_bidder("rich", "50", Duration::ZERO).await;
    let catalog = catalog(Tier::Sponsorship, false, programmatic(0, 300));
    let running = start(dir.path(), &catalog, &[("rich", bidder.address)]).await;
    let body = ad(&running).await;
    assert!(body.contains("direct line item"), "{body}");
    let events = logged_with(&running.log, (EventKind::Decision, 0, 20)).await;
    assert!(
        !events
            .iter()
            .any(|(kind, ..)| *kind == EventKind::ProgrammaticAuction),
        "no auction ran: {events:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let catalog = self::catalog(Tier::Sponsorship, true, programmatic(0, 300));
    let running = start(dir.path(), &catalog, &[("rich", bidder.address)]).await;
    let body = ad(&running).await;
    assert!(body.contains("bid of rich"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidder_slower_than_the_timeout_does_not_hold_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let slow = mock_bidder("slow", "9", Duration::from_secs(5)).await;
    let catalog = catalog(Tier::Remnant, false, programmatic(0, 200));
    let running = start(dir.path(), &catalog, &[("slow", slow.address)]).await;
    let started = Instant::now();
    let body = ad(&running).await;
    // The answer came well before the bidder's 5 s: at the 200 ms timeout, with the line item.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(body.contains("direct line item"), "{body}");
    // Its bidder timed out, the direct line item won (an auction event's `line_item`).
    let timed_out = auction::AUCTION | auction::DIRECT | auction::TIMED_OUT;
    logged_with(&running.log, (EventKind::ProgrammaticAuction, 0, timed_out)).await;
}
