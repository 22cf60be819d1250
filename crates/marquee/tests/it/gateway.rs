//! Gateway mode end to end: `marquee serve --demo` with `[gateway]`, our demo line items as the
//! internal bidder and `marquee bench mock-bidder` as an external one. The higher bid wins the
//! auction, the internal bidder's win or loss notice is handled in process (the bidder's
//! counters move), and the registry API switches the external bidder off.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use common::{Server, logged_events, metrics_page, openrtb_sample};
use marquee_eventlog::EventKind;
use marquee_openrtb::{BidResponse, PriceCrypto};
use serde_json::Value;

const TOKEN: &str = "gateway-e2e-admin-token";
const PUBLIC: &str = "https://ads.example.com";
const E_KEY: [u8; 32] = [7; 32];
const I_KEY: [u8; 32] = [9; 32];

struct Mock(Child);

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `marquee bench mock-bidder` bidding `price` on every banner imp; gives its address.
fn mock_bidder(price: &str) -> (Mock, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_marquee"))
        .args([
            "bench",
            "mock-bidder",
            "--listen",
            "127.0.0.1:0",
            "--price",
            price,
        ])
        .args(["--seat", "mockseat"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let address = first
        .trim()
        .rsplit_once("listening on ")
        .map(|(_, a)| a.to_owned())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    (Mock(child), address)
}

fn start(dir: &Path, mock: &str) -> Server {
    serve(
        dir,
        &format!("[gateway.bidders.mock]\nendpoint = \"{mock}/bid\"\n"),
    )
}

/// `marquee serve --demo` with gateway mode on and `more` configuration.
fn serve(dir: &Path, more: &str) -> Server {
    let config = dir.join("marquee.toml");
    std::fs::write(
        &config,
        format!(
            "[edge]\npublic_url = \"{PUBLIC}\"\n\
             [gateway]\nenabled = true\nadmin_token = \"{TOKEN}\"\n{more}"
        ),
    )
    .unwrap();
    Server::start(
        &dir.join("data"),
        &["--demo", "--config", config.to_str().unwrap()],
    )
}

fn banner() -> Value {
    let mut request = openrtb_sample("iab-2.6/iab-2.6-req-1-simple-banner.json");
    // Time enough for a debug build on a busy machine.
    request["tmax"] = 2_000.into();
    request
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> (u16, String) {
    let response = client.post(url).json(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Waits until a counter of the edge's `/metrics` reaches `value`.
async fn wait_metric(client: &reqwest::Client, server: &Server, line: &str) {
    for _ in 0..500 {
        let text = metrics_page(client, &server.base).await;
        if text.lines().any(|l| l == line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("/metrics never showed {line:?}");
}

/// The demo snapshot is installed just after the listener opens.
async fn wait_for_bids(client: &reqwest::Client, server: &Server, request: &Value) {
    for _ in 0..500 {
        if post(client, &server.url("/openrtb2/bid"), request).await.0 == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no bid within 10 s for {request}");
}

fn seats(body: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    value["seatbid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seat"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_line_items_and_an_external_bidder_compete() {
    let dir = tempfile::tempdir().unwrap();
    let (_mock, address) = mock_bidder("500");
    let server = start(dir.path(), &address);
    let client = reqwest::Client::new();
    let request = banner();
    wait_for_bids(&client, &server, &request).await;

    let (status, body) = post(&client, &server.url("/openrtb2/auction"), &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        seats(&body),
        ["mockseat"],
        "500 beats the demo's bid: {body}"
    );
    // Our bid lost: its loss notice went to the edge's own handler.
    wait_metric(&client, &server, "marquee_bidder_losses_total 1").await;

    let switched = client
        .post(server.url("/gateway/bidders/mock/disable"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(switched.status().as_u16(), 200);
    let (status, body) = post(&client, &server.url("/openrtb2/auction"), &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        seats(&body),
        ["marquee"],
        "alone, our line items win: {body}"
    );
    // Our win notice is the caller's to send, with its clearing price (plain: this exchange
    // has no price keys).
    let response = BidResponse::parse(body.as_bytes()).unwrap();
    let (_, bid) = response.bids().next().unwrap();
    let price = marquee_openrtb::format_micros(bid.price_micros);
    let nurl = fill(bid.nurl.as_deref().unwrap(), &server, &request, &price);
    assert_eq!(
        client.get(&nurl).send().await.unwrap().status().as_u16(),
        200
    );
    wait_metric(&client, &server, "marquee_bidder_wins_total 1").await;
    wait_metric(
        &client,
        &server,
        "marquee_gateway_bidder_wins_total{bidder=\"marquee\"} 1",
    )
    .await;
    server.stop();
}

/// A notice URL of our bid as the caller sends it: its macros filled, `price` its clearing
/// price, to this server instead of the public address.
fn fill(url: &str, server: &Server, request: &Value, price: &str) -> String {
    common::notice_url(url, PUBLIC, server, request, price)
}

/// Our line items win an auction for an exchange with price keys; the caller fills the
/// `burl` and `nurl` passed on with its own clearing price, encrypted, as for any bid: the win
/// and the billing are logged at that price (before, the gateway had filled in a plain price,
/// which the notice handler refuses for such an exchange: no spend ever counted, no win
/// logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_bills_our_winning_bid_with_its_encrypted_price() {
    caller_bills_our_winning_bid("").await;
}

/// The same when the exchange's own currency is not the gateway's: our line items bid in the
/// answer's currency, the one the caller's price is in (before, they bid in the exchange's, so
/// the gateway filled in a plain price the notice handler refuses: no spend ever counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_bills_our_winning_bid_when_the_exchange_bids_in_another_currency() {
    caller_bills_our_winning_bid("currency = \"EUR\"\n[currency]\nrates = { EUR = \"0.92\" }\n")
        .await;
}

/// An exchange `keyed` with price keys and `more` settings after them (its own, then other
/// sections).
async fn caller_bills_our_winning_bid(more: &str) {
    let dir = tempfile::tempdir().unwrap();
    let b64 = |k: &[u8]| base64::engine::general_purpose::STANDARD.encode(k);
    let server = serve(
        dir.path(),
        &format!(
            "[exchanges.keyed]\nprice_encryption_key = \"{}\"\nprice_integrity_key = \"{}\"\n{more}",
            b64(&E_KEY),
            b64(&I_KEY)
        ),
    );
    let client = reqwest::Client::new();
    let mut request = banner();
    // Either currency will do for the caller.
    request["cur"] = serde_json::json!(["EUR", "USD"]);
    wait_for_bids(&client, &server, &request).await;
    let (status, body) = post(&client, &server.url("/openrtb2/auction/keyed"), &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(seats(&body), ["marquee"], "{body}");
    let response = BidResponse::parse(body.as_bytes()).unwrap();
    let (_, bid) = response.bids().next().unwrap();
    let burl = bid.burl.as_deref().unwrap();
    assert!(
        burl.contains("p=${AUCTION_PRICE}"),
        "left to the caller: {burl}"
    );
    // The caller cleared a little under our answer's price.
    let cleared = bid.price_micros * 9 / 10;
    let encrypted = PriceCrypto::new(&E_KEY, &I_KEY).encrypt(cleared.unsigned_abs(), [5; 16]);
    let url = fill(burl, &server, &request, &encrypted);
    let fired = client.get(&url).send().await.unwrap();
    assert_eq!(fired.status().as_u16(), 200);
    wait_metric(&client, &server, "marquee_bidder_billings_total 1").await;
    let nurl = bid.nurl.as_deref().expect("our win notice, for the caller");
    assert!(
        nurl.contains("p=${AUCTION_PRICE}"),
        "left to the caller: {nurl}"
    );
    let fired = client
        .get(fill(nurl, &server, &request, &encrypted))
        .send()
        .await
        .unwrap();
    assert_eq!(fired.status().as_u16(), 200);
    wait_metric(&client, &server, "marquee_bidder_wins_total 1").await;
    let nonce = u128::from(u64::from_str_radix(&bid.id, 16).unwrap());
    server.stop();

    let billings: Vec<_> = logged_events(&dir.path().join("data"))
        .into_iter()
        .filter(|e| e.kind == EventKind::Billing)
        .collect();
    assert_eq!(billings.len(), 1, "{billings:?}");
    assert_eq!(billings[0].event_id, nonce);
    assert_eq!(billings[0].amount_micros, cleared, "the caller's price");
    let wins: Vec<_> = logged_events(&dir.path().join("data"))
        .into_iter()
        .filter(|e| e.kind == EventKind::Win)
        .collect();
    assert_eq!(wins.len(), 1, "{wins:?}");
    assert_eq!(wins[0].event_id, nonce);
    assert_eq!(wins[0].amount_micros, cleared, "the caller's price");
}
