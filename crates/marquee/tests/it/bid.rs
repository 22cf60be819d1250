//! The OpenRTB bidder end to end, against `marquee serve --demo` (Northwind Gadgets buys on
//! exchanges): every sample request answered, every bid valid, each request-level rule, the
//! notices counted once and only when signed, user sync feeding frequency caps.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use common::{Server, logged_events, metrics_page, openrtb_sample, openrtb_testdata, token_from};
use marquee_eventlog::EventKind;
use marquee_model::{Currency, CurrencyRates, Micros, Rounding};
use marquee_openrtb::{BidRequest, BidResponse, PriceCrypto, validate_response};
use serde_json::{Value, json};

const PUBLIC: &str = "https://ads.example.com";
const E_KEY: [u8; 32] = [7; 32];
const I_KEY: [u8; 32] = [9; 32];
/// TCF v2 consent strings: a CMP's "reject all" (no purpose consented to), and the IAB
/// specification's example (consent to purposes 1, 3, 9 and 10).
const REJECT_ALL: &str = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA";
const ACCEPT: &str = "CLcVDxRMWfGmWAVAHCENAXCkAKDAADnAABRgA5mdfCKZuYJez-NQm0TBMYA4oCAAGQYIAAAAAAEAIAEgAA.argAC0gAAAAAAAAAAAA";

fn rates() -> CurrencyRates {
    let mut rates = CurrencyRates::new(Currency::USD);
    rates.set(Currency::EUR, "0.92").unwrap();
    rates
        .set(Currency::try_from("GBP").unwrap(), "0.79")
        .unwrap();
    rates
}

/// The demo (its event log kept after aggregation, for `logged_events`), https tracking URLs,
/// price keys, rates, and three exchanges: `agency` (whose
/// seat the pmp sample's deals admit), `partner` (user sync), `nbr` (no-bid bodies).
fn start(dir: &Path) -> Server {
    start_with(dir, &[])
}

fn start_with(dir: &Path, envs: &[(&str, &str)]) -> Server {
    let config = write_config(dir, "EUR = \"0.92\", GBP = \"0.79\"");
    let data = dir.join("data");
    Server::start_with(
        &data,
        &["--demo", "--config", config.to_str().unwrap()],
        envs,
    )
}

/// `DIR/marquee.toml` for [`start`], with `rates` inside `[currency]`'s `rates = { … }`.
fn write_config(dir: &Path, rates: &str) -> std::path::PathBuf {
    let b64 = |k: &[u8]| base64::engine::general_purpose::STANDARD.encode(k);
    let config = dir.join("marquee.toml");
    std::fs::write(
        &config,
        format!(
            "[edge]\npublic_url = \"{PUBLIC}\"\n\
             [aggregation]\ndelete_consumed = false\n\
             [bidder]\nprice_encryption_key = \"{}\"\nprice_integrity_key = \"{}\"\n\
             [exchanges.agency]\nseat = \"Agency1\"\n\
             [exchanges.partner]\nsync_url = \"https://partner.example/match?buyer={{uid}}\"\n\
             [exchanges.nbr]\nno_bid_reason = true\n\
             [currency]\nrates = {{ {rates} }}\n",
            b64(&E_KEY),
            b64(&I_KEY)
        ),
    )
    .unwrap();
    config
}

struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn response(&self) -> BidResponse<'_> {
        BidResponse::parse(self.body.as_bytes()).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    fn bids(&self) -> Vec<Value> {
        if self.status != 200 {
            return Vec::new();
        }
        let v: Value = serde_json::from_str(&self.body).unwrap();
        v["seatbid"]
            .as_array()
            .map(|s| {
                s.iter()
                    .flat_map(|sb| sb["bid"].as_array().cloned().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default()
    }
}

async fn post_bytes(client: &reqwest::Client, url: &str, body: Vec<u8>, gzip: bool) -> Answer {
    let mut request = client.post(url).header("content-type", "application/json");
    if gzip {
        request = request.header("content-encoding", "gzip");
    }
    let response = request.body(body).send().await.unwrap();
    Answer {
        status: response.status().as_u16(),
        body: response.text().await.unwrap(),
    }
}

async fn post(client: &reqwest::Client, server: &Server, path: &str, body: &Value) -> Answer {
    post_bytes(
        client,
        &server.url(path),
        serde_json::to_vec(body).unwrap(),
        false,
    )
    .await
}

/// Asserts a 200 answer validates against its request (with the configured rates).
fn assert_valid(request_body: &[u8], answer: &Answer, what: &str) {
    assert_eq!(answer.status, 200, "{what}: {}", answer.body);
    let request = BidRequest::parse(request_body).unwrap();
    let response = answer.response();
    let rates = rates();
    let convert = |micros: i64, from: &str, to: &str| {
        rates
            .convert(
                Micros(micros),
                Currency::try_from(from).ok()?,
                Currency::try_from(to).ok()?,
                Rounding::Up,
            )
            .map(|m| m.0)
    };
    if let Err(violations) = validate_response(&request, &response, &convert) {
        panic!("{what}: {violations:?}");
    }
    assert!(response.bids().count() > 0, "{what}: no bid in a 200");
}

/// Waits until the demo snapshot bids (the edge installs it just after the listener opens).
async fn wait_for_bids(client: &reqwest::Client, server: &Server, request: &Value) {
    for _ in 0..500 {
        if post(client, server, "/openrtb2/bid", request).await.status == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no bid within 10 s for {request}");
}

fn banner() -> Value {
    openrtb_sample("iab-2.6/iab-2.6-req-1-simple-banner.json")
}

/// A bid request around one native request (the Native 1.2 samples come alone).
fn native_request(native: &Value) -> Value {
    let mut request = banner();
    request["imp"][0] = json!({
        "id": "n1",
        "native": { "request": native.to_string(), "ver": "1.2" }
    });
    request
}

fn audio_request() -> Value {
    let mut request = banner();
    request["imp"][0] = json!({ "id": "a1", "audio": openrtb_sample("bsm/audio.json") });
    request
}

/// The request files of `testdata/` and whether each is well-formed.
fn request_files() -> Vec<(String, bool)> {
    let mut files = Vec::new();
    for dir in ["iab-2.6", "bsm", "marquee", "spec-samples"] {
        for entry in std::fs::read_dir(openrtb_testdata(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let is_request = name.contains("-req-")
                || name.contains("request.json")
                || name.starts_with("breq.")
                || name.starts_with("openrtb2__bid-request__")
                || name.starts_with("openrtb3__request")
                || (dir == "marquee" && name.ends_with(".json"));
            let native_alone = name.starts_with("native");
            if is_request && !native_alone {
                files.push((format!("{dir}/{name}"), !name.starts_with("openrtb3")));
            }
        }
    }
    // Malformed JSON as published: a request body like any other to the bidder.
    files.push((
        "iab-2.6/iab-2.6-impl-7.9.6.4-dooh-video-response.AS-PUBLISHED-invalid-json.txt".into(),
        false,
    ));
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_is_answered_and_every_bid_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let client = reqwest::Client::new();
    wait_for_bids(&client, &server, &banner()).await;

    let files = request_files();
    assert!(files.len() >= 27, "{files:?}");
    let mut bid_on = Vec::new();
    for (file, valid) in &files {
        let body = std::fs::read(openrtb_testdata(file)).unwrap();
        let answer = post_bytes(&client, &server.url("/openrtb2/bid"), body.clone(), false).await;
        if !valid {
            assert_eq!(answer.status, 400, "{file}: {}", answer.body);
            assert!(!answer.body.is_empty(), "{file}: a 400 says why");
            continue;
        }
        assert!(
            matches!(answer.status, 200 | 204),
            "{file}: {} {}",
            answer.status,
            answer.body
        );
        if answer.status == 200 {
            assert_valid(&body, &answer, file);
            bid_on.push(file.clone());
        }
    }
    // Banner, DOOH in GBP (a converted bid), video, 2.5 moved into 2.6 with an EUR floor.
    for expected in [
        "iab-2.6/iab-2.6-req-1-simple-banner.json",
        "iab-2.6/iab-2.6-impl-7.9.6.1-dooh-banner-request.json",
        "iab-2.6/iab-2.6-req-4-video.json",
        "bsm/breq.video.json",
        "marquee/moves-2.5.json",
        "marquee/moves-2.6.json",
        "spec-samples/openrtb2__bid-request__2.5__mobile.json",
    ] {
        assert!(bid_on.iter().any(|f| f == expected), "no bid on {expected}");
    }

    // The pmp sample's deals admit only the seats Agency1/Agency2: through the exchange whose
    // seat is Agency1, the private auction gets a deal bid.
    let pmp = std::fs::read(openrtb_testdata(
        "iab-2.6/iab-2.6-req-5-pmp-direct-deal.json",
    ))
    .unwrap();
    let answer = post_bytes(
        &client,
        &server.url("/openrtb2/bid/agency"),
        pmp.clone(),
        false,
    )
    .await;
    assert_valid(&pmp, &answer, "pmp through agency");
    assert_eq!(answer.bids()[0]["dealid"], "AB-Agency1-0001");
    let answer = post_bytes(&client, &server.url("/openrtb2/bid"), pmp, false).await;
    assert_eq!(answer.status, 204, "our own seat is not admitted");

    // Native (each Native 1.2 sample) and audio.
    for native in [
        "spec-samples/native1__request__v1.2__content-context.json",
        "spec-samples/native1__request__v1.2__social-context.json",
        "bsm/native__request__request1.json",
    ] {
        let request = native_request(&openrtb_sample(native));
        let body = serde_json::to_vec(&request).unwrap();
        let answer = post_bytes(&client, &server.url("/openrtb2/bid"), body.clone(), false).await;
        assert_valid(&body, &answer, native);
        let bid = &answer.bids()[0];
        assert_eq!(bid["mtype"], 4, "{native}");
        let adm: Value = serde_json::from_str(bid["adm"].as_str().unwrap()).unwrap();
        assert!(adm.to_string().contains("Northwind"), "{native}: {adm}");
    }
    let audio = serde_json::to_vec(&audio_request()).unwrap();
    let answer = post_bytes(&client, &server.url("/openrtb2/bid"), audio.clone(), false).await;
    assert_valid(&audio, &answer, "audio");
    assert_eq!(answer.bids()[0]["mtype"], 3);
    assert!(
        answer.bids()[0]["adm"]
            .as_str()
            .unwrap()
            .starts_with("<DAAST")
    );

    // A gzip body is read like a plain one.
    let plain = serde_json::to_vec(&banner()).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let answer = post_bytes(
        &client,
        &server.url("/openrtb2/bid"),
        gz.finish().unwrap(),
        true,
    )
    .await;
    assert_valid(&plain, &answer, "gzip");
    // Not gzip at all, too large, not JSON, unknown exchange.
    let answer = post_bytes(&client, &server.url("/openrtb2/bid"), plain.clone(), true).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let answer = post_bytes(
        &client,
        &server.url("/openrtb2/bid"),
        vec![b' '; 70_000],
        false,
    )
    .await;
    assert_eq!(answer.status, 413);
    let answer = post_bytes(
        &client,
        &server.url("/openrtb2/bid"),
        b"{\"id\":".to_vec(),
        false,
    )
    .await;
    assert_eq!(answer.status, 400);
    let answer = post_bytes(
        &client,
        &server.url("/openrtb2/bid/nowhere"),
        plain.clone(),
        false,
    )
    .await;
    assert_eq!(answer.status, 404);
    let answer = post_bytes(&client, &server.url("/openrtb2/bidagency"), plain, false).await;
    assert_eq!(answer.status, 404, "not the agency exchange");

    // A no-bid body where the exchange asks for one.
    let mut nothing = banner();
    nothing["imp"][0]["bidfloor"] = json!(100);
    let answer = post(&client, &server, "/openrtb2/bid/nbr", &nothing).await;
    assert_eq!(answer.status, 200);
    let response = answer.response();
    assert!(
        response.nbr.is_some() && response.bids().count() == 0,
        "{}",
        answer.body
    );

    let metrics = metrics_page(&client, &server.base).await;
    for line in [
        "marquee_bidder_bad_requests_total{reason=\"malformed_json\"}",
        "marquee_bidder_bad_requests_total{reason=\"too_large\"}",
        "marquee_bidder_bad_requests_total{reason=\"gzip\"}",
        "marquee_edge_requests_total{endpoint=\"bid\",outcome=\"ok\"}",
        "marquee_edge_requests_total{endpoint=\"bid\",outcome=\"fallback\"}",
        // No bid of ours ever failed the response checks.
        "marquee_bidder_invalid_bids_total 0",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    server.stop();
}

/// The first bid answering a request mutated by `change` (checked valid), `None` on a 204.
async fn bids_when(
    client: &reqwest::Client,
    server: &Server,
    path: &str,
    base: &Value,
    change: impl FnOnce(&mut Value),
) -> Option<Value> {
    let mut request = base.clone();
    change(&mut request);
    let answer = post(client, server, path, &request).await;
    match answer.status {
        200 => {
            assert_valid(&serde_json::to_vec(&request).unwrap(), &answer, path);
            answer.bids().into_iter().next()
        }
        204 => None,
        status => panic!("{status}: {}", answer.body),
    }
}

/// Asserts that a request mutated by `change` gets a bid (`bids`) or a 204.
async fn assert_bids(
    client: &reqwest::Client,
    server: &Server,
    path: &str,
    base: &Value,
    bids: bool,
    change: impl FnOnce(&mut Value),
) {
    let mut request = base.clone();
    change(&mut request);
    let bid = bids_when(client, server, path, &request, |_| {}).await;
    assert_eq!(bid.is_some(), bids, "{path}: {request}");
}

/// Extra exchange demand made through the API, on sizes the demo does not use: an http
/// (not secure) banner at 468x60, a segment-targeted banner at 970x250, a banner capped at
/// once a day at 320x480, one for the US at 300x1050 and one for California at 300x600.
async fn extra_demand(client: &reqwest::Client, server: &Server, token: &str) {
    let create = |path: &'static str, body: Value| async move {
        common::create_object(client, server, token, path, &body).await
    };
    let northwind = 4; // the demo's fourth advertiser
    let campaign = |name: &str, caps: Value| json!({ "advertiser_id": northwind, "name": name, "frequency_caps": caps, "categories": ["IAB19"] });
    let line_item = |campaign: u64, name: &str, targeting: Value| {
        json!({
            "campaign_id": campaign, "name": name, "start": "2026-01-01T00:00:00",
            "time_zone": "UTC", "tier": "standard", "channels": ["exchange"],
            "price": { "model": "cpm", "amount_micros": 2_000_000, "currency": "USD" },
            "targeting": targeting
        })
    };
    let creative = |line_item: u64, w: u32, h: u32, image: &str| {
        json!({
            "line_item_id": line_item, "name": format!("{w}x{h}"), "size": { "w": w, "h": h },
            "landing_url": "https://northwind-gadgets.example/extra",
            "content": { "type": "html", "html": format!("<a href=\"{{{{CLICK_URL}}}}\"><img src=\"{image}\"></a>") }
        })
    };
    let plain = create("campaigns", campaign("Extra", json!([]))).await;
    let capped = create(
        "campaigns",
        campaign("Capped", json!([{ "count": 1, "window": "1d" }])),
    )
    .await;
    let insecure = create("line-items", line_item(plain, "Insecure", Value::Null)).await;
    create(
        "creatives",
        creative(insecure, 468, 60, "http://cdn.example.com/468x60.png"),
    )
    .await;
    let segment = create(
        "line-items",
        line_item(plain, "Sports fans", json!({ "segment": ["sports-fans"] })),
    )
    .await;
    create(
        "creatives",
        creative(segment, 970, 250, "https://cdn.example.com/970x250.png"),
    )
    .await;
    let once = create("line-items", line_item(capped, "Once a day", Value::Null)).await;
    create(
        "creatives",
        creative(once, 320, 480, "https://cdn.example.com/320x480.png"),
    )
    .await;
    let american = create(
        "line-items",
        line_item(plain, "Americans", json!({ "country": ["US"] })),
    )
    .await;
    create(
        "creatives",
        creative(american, 300, 1050, "https://cdn.example.com/300x1050.png"),
    )
    .await;
    let californian = create(
        "line-items",
        line_item(plain, "Californians", json!({ "region": ["US-CA"] })),
    )
    .await;
    create(
        "creatives",
        creative(californian, 300, 600, "https://cdn.example.com/300x600.png"),
    )
    .await;
}

fn sized(w: u32, h: u32) -> Value {
    let mut request = banner();
    request["imp"][0]["banner"] = json!({ "w": w, "h": h });
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_rule_allows_and_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::new();
    extra_demand(&client, &server, &token).await;
    let with_segment = {
        let mut request = sized(970, 250);
        request["user"]["data"] = json!([{ "id": "dmp", "segment": [{ "id": "sports-fans" }] }]);
        request
    };
    wait_for_bids(&client, &server, &with_segment).await;
    let base = banner();
    let bid = "/openrtb2/bid";
    let c = &client;
    let s = &server;

    // Floor: the open banner line item bids 1.20 USD.
    assert_bids(c, s, bid, &base, true, |r| {
        r["imp"][0]["bidfloor"] = json!(1.2)
    })
    .await;
    assert_bids(c, s, bid, &base, false, |r| {
        r["imp"][0]["bidfloor"] = json!(1.21)
    })
    .await;
    // A floor in EUR is converted: 1.10 EUR is 1.19565… USD, 1.11 EUR 1.2065… USD.
    let eur = |floor: f64| {
        move |r: &mut Value| {
            r["imp"][0]["bidfloor"] = json!(floor);
            r["imp"][0]["bidfloorcur"] = json!("EUR");
        }
    };
    assert_bids(c, s, bid, &base, true, eur(1.10)).await;
    assert_bids(c, s, bid, &base, false, eur(1.11)).await;

    // Deals: ours gets a deal bid (3.00, the deal line item's price) over its floor; a private
    // auction of another buyer's deal, or of ours with a floor above our price, gets nothing.
    let deal = |id: &'static str, floor: f64, private: u8| {
        move |r: &mut Value| {
            r["imp"][0]["pmp"] =
                json!({ "private_auction": private, "deals": [{ "id": id, "bidfloor": floor }] });
        }
    };
    let won = bids_when(c, s, bid, &base, deal("AB-Agency1-0001", 2.5, 0))
        .await
        .unwrap();
    assert_eq!(
        (won["dealid"].as_str(), won["price"].as_f64()),
        (Some("AB-Agency1-0001"), Some(3.0))
    );
    let open = bids_when(c, s, bid, &base, deal("SOMEONE-ELSE", 2.5, 0))
        .await
        .unwrap();
    assert!(
        open.get("dealid").is_none(),
        "the open auction still takes our open bid"
    );
    assert_bids(c, s, bid, &base, true, deal("AB-Agency1-0001", 2.5, 1)).await;
    assert_bids(c, s, bid, &base, false, deal("SOMEONE-ELSE", 2.5, 1)).await;
    assert_bids(c, s, bid, &base, false, deal("AB-Agency1-0001", 3.5, 1)).await;
    // A deal whose wseat leaves us out is not ours to bid on.
    assert_bids(c, s, bid, &base, false, |r| {
        let deal = json!({ "id": "AB-Agency1-0001", "wseat": ["Agency1"] });
        r["imp"][0]["pmp"] = json!({ "private_auction": 1, "deals": [deal] });
    })
    .await;

    // Blocked categories, advertisers, apps.
    assert_bids(c, s, bid, &base, true, |r| {
        r["bcat"] = json!(["IAB25", "IAB26"])
    })
    .await;
    assert_bids(c, s, bid, &base, false, |r| r["bcat"] = json!(["IAB19"])).await;
    // The same codes in another taxonomy (`cattax` 2) cannot be checked against our IAB 1.0
    // categories: no bid, whatever they are.
    assert_bids(c, s, bid, &base, false, |r| {
        r["bcat"] = json!(["IAB25", "IAB26"]);
        r["cattax"] = json!(2);
    })
    .await;
    assert_bids(c, s, bid, &base, true, |r| {
        r["bcat"] = json!(["IAB25", "IAB26"]);
        r["cattax"] = json!(1);
    })
    .await;
    assert_bids(c, s, bid, &base, true, |r| {
        r["badv"] = json!(["other.example"])
    })
    .await;
    assert_bids(c, s, bid, &base, false, |r| {
        r["badv"] = json!(["northwind-gadgets.example"])
    })
    .await;
    let native = native_request(&openrtb_sample(
        "spec-samples/native1__request__v1.2__content-context.json",
    ));
    assert_bids(c, s, bid, &native, true, |r| {
        r["bapp"] = json!(["com.other.app"])
    })
    .await;
    assert_bids(c, s, bid, &native, false, |r| {
        r["bapp"] = json!(["com.northwind.gadgets"])
    })
    .await;

    // Seats.
    assert_bids(c, s, bid, &base, true, |r| r["wseat"] = json!(["marquee"])).await;
    assert_bids(c, s, bid, &base, false, |r| r["wseat"] = json!(["other"])).await;
    assert_bids(c, s, bid, &base, false, |r| r["bseat"] = json!(["marquee"])).await;
    assert_bids(c, s, "/openrtb2/bid/agency", &base, true, |r| {
        r["wseat"] = json!(["Agency1"])
    })
    .await;

    // Secure: the 468x60 creative loads its image over http.
    let insecure = sized(468, 60);
    assert_bids(c, s, bid, &insecure, true, |r| {
        r["imp"][0]["secure"] = json!(0)
    })
    .await;
    assert_bids(c, s, bid, &insecure, false, |r| {
        r["imp"][0]["secure"] = json!(1)
    })
    .await;
    assert_bids(c, s, bid, &base, true, |r| r["imp"][0]["secure"] = json!(1)).await;

    // User data: the segment line item needs the user's segments, which COPPA and GDPR without
    // consent to Purpose 1 (storage on the device) take away: no consent string, a "reject
    // all", or a string that is no TCF v2 string.
    assert_bids(c, s, bid, &with_segment, true, |_| {}).await;
    assert_bids(c, s, bid, &with_segment, false, |r| {
        r["regs"] = json!({ "coppa": 1 })
    })
    .await;
    assert_bids(c, s, bid, &with_segment, false, |r| {
        r["regs"] = json!({ "gdpr": 1 })
    })
    .await;
    for refusal in [REJECT_ALL, "1", "BOEFEAyOEFEAyAHABDENAI4AAAB9vABAASA"] {
        assert_bids(c, s, bid, &with_segment, false, |r| {
            r["regs"] = json!({ "gdpr": 1 });
            r["user"]["consent"] = json!(refusal);
        })
        .await;
    }
    assert_bids(c, s, bid, &with_segment, true, |r| {
        r["regs"] = json!({ "gdpr": 1 });
        r["user"]["consent"] = json!(ACCEPT);
    })
    .await;
    // GDPR not flagged, a refusal sent anyway: refused all the same.
    assert_bids(c, s, bid, &with_segment, false, |r| {
        r["user"]["consent"] = json!(REJECT_ALL);
    })
    .await;
    assert_bids(c, s, bid, &with_segment, true, |r| {
        r["regs"] = json!({ "gdpr": 0 });
        r["user"]["consent"] = json!(REJECT_ALL);
    })
    .await;

    // Test requests bid like any other (their events are not logged: see the notices test).
    assert_bids(c, s, bid, &base, true, |r| r["test"] = json!(1)).await;

    // tmax: less than the latency margin (10 ms) leaves no time.
    assert_bids(c, s, bid, &base, true, |r| r["tmax"] = json!(500)).await;
    assert_bids(c, s, bid, &base, false, |r| r["tmax"] = json!(5)).await;

    // Geography as OpenRTB writes it: ISO 3166-1 alpha-3 countries, regions without their
    // country; targeting names them `US` and `US-CA`.
    let at = |country: &'static str, region: &'static str| {
        move |r: &mut Value| r["device"]["geo"] = json!({ "country": country, "region": region })
    };
    let us = sized(300, 1050);
    let california = sized(300, 600);
    // Made last by `extra_demand`: wait for a snapshot that holds them.
    for (request, region) in [(&us, "NY"), (&california, "CA")] {
        let mut request = request.clone();
        at("USA", region)(&mut request);
        wait_for_bids(c, s, &request).await;
    }
    assert_bids(c, s, bid, &us, true, at("USA", "NY")).await;
    assert_bids(c, s, bid, &us, true, at("usa", "NY")).await;
    assert_bids(c, s, bid, &us, false, at("DEU", "BY")).await;
    assert_bids(c, s, bid, &california, true, at("USA", "CA")).await;
    assert_bids(c, s, bid, &california, false, at("USA", "NY")).await;
    assert_bids(c, s, bid, &california, false, at("CAN", "CA")).await;
    // Without `device.geo`, the device's address is looked up (here in the demo's database:
    // loopback is San Francisco, 10/8 Berlin); the exchange's own `geo` wins over the address.
    let from = |ip: &'static str| {
        move |r: &mut Value| {
            r["device"] = json!({ "ip": ip, "ua": "Mozilla/5.0 (Windows NT 10.0; Win64; x64)" })
        }
    };
    assert_bids(c, s, bid, &california, true, from("127.0.0.1")).await;
    assert_bids(c, s, bid, &california, false, from("10.1.2.3")).await;
    assert_bids(c, s, bid, &california, true, |r| {
        r["device"] = json!({ "ipv6": "::1" })
    })
    .await;
    assert_bids(c, s, bid, &california, false, |r| {
        from("127.0.0.1")(r);
        at("DEU", "BY")(r);
    })
    .await;

    // Currency: one we have no rate for.
    assert_bids(c, s, bid, &base, false, |r| r["cur"] = json!(["JPY"])).await;
    let in_eur = bids_when(c, s, bid, &base, |r| r["cur"] = json!(["EUR"]))
        .await
        .unwrap();
    assert_eq!(
        in_eur["price"].as_f64(),
        Some(1.104),
        "1.20 USD at 0.92, rounded down"
    );
    // Every refusal above was decided before answering, none by dropping a bid that failed
    // the response checks (a `bcat` in another taxonomy included).
    let metrics = metrics_page(c, &s.base).await;
    assert!(
        metrics.contains("marquee_bidder_invalid_bids_total 0"),
        "{metrics}"
    );
    server.stop();
}

/// The notice URL of a bid aimed at the test server, with the exchange's substitutions.
fn notice(server: &Server, url: &str, request: &Value, price: &str) -> String {
    common::notice_url(url, PUBLIC, server, request, price)
}

async fn get(client: &reqwest::Client, url: &str) -> u16 {
    client.get(url).send().await.unwrap().status().as_u16()
}

/// A bid in euros for a dollar line item is billed in dollars at the rate it was bid with,
/// whatever the rates when the billing arrives: here the edge restarts without a euro rate
/// (before, the clearing price was then logged unconverted: euros counted as dollars).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bid_in_another_currency_is_billed_at_the_rate_it_was_made_with() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let client = reqwest::Client::new();
    let mut request = banner();
    request["cur"] = json!(["EUR"]);
    wait_for_bids(&client, &server, &request).await;
    let answer = post(&client, &server, "/openrtb2/bid", &request).await;
    assert_eq!(answer.response().cur.as_deref(), Some("EUR"));
    let bid = answer.bids().remove(0);
    let burl = bid["burl"].as_str().unwrap().to_owned();
    server.stop();

    let config = write_config(dir.path(), "GBP = \"0.79\"");
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--demo", "--config", config.to_str().unwrap()],
        &[],
    );
    // 0.46 EUR CPM is 0.50 USD at 0.92.
    let billed = PriceCrypto::new(&E_KEY, &I_KEY).encrypt(460_000, [5; 16]);
    let url = notice(&server, &burl, &request, &billed);
    assert_eq!(get(&client, &url).await, 200);
    server.stop();

    let events = logged_events(&dir.path().join("data"));
    let billings: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::Billing)
        .collect();
    assert_eq!(billings.len(), 1, "{billings:?}");
    // The bid's own rate, rounded up twice (its price, then the clearing price): 0.50 USD
    // or a micro more, never the 460,000 euro micros.
    assert!(
        (500_000..=500_001).contains(&billings[0].amount_micros),
        "{}",
        billings[0].amount_micros
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_count_once_and_only_when_signed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let client = reqwest::Client::new();
    let request = banner();
    wait_for_bids(&client, &server, &request).await;

    let answer = post(&client, &server, "/openrtb2/bid", &request).await;
    let bid = answer.bids().remove(0);
    let burl = bid["burl"].as_str().unwrap();
    assert!(
        burl.starts_with("https://ads.example.com/openrtb2/bill?t="),
        "{burl}"
    );
    // The exchange has price keys: a billing priced in plain text, or not priced, could come
    // from anyone who saw the notice URL, and is not counted.
    for price in ["0.50", "", "${AUCTION_PRICE}"] {
        assert_eq!(
            get(&client, &notice(&server, burl, &request, price)).await,
            200
        );
    }
    // Billing retried three times counts once.
    let billed = PriceCrypto::new(&E_KEY, &I_KEY).encrypt(950_000, [5; 16]);
    for _ in 0..3 {
        assert_eq!(
            get(&client, &notice(&server, burl, &request, &billed)).await,
            200
        );
    }
    // The win notice brings the price encrypted with the exchange's keys.
    let encrypted = PriceCrypto::new(&E_KEY, &I_KEY).encrypt(1_050_000, [3; 16]);
    let nurl = bid["nurl"].as_str().unwrap();
    assert_eq!(
        get(&client, &notice(&server, nurl, &request, &encrypted)).await,
        200
    );

    // Forged: another token, an altered one, a notice for another auction.
    let second = post(&client, &server, "/openrtb2/bid", &request)
        .await
        .bids()
        .remove(0);
    let lurl = second["lurl"].as_str().unwrap();
    let forged_token = "A".repeat(115);
    let (_, query) = burl.split_once("t=").unwrap();
    let token = &query[..115];
    let mut altered = token.to_owned().into_bytes();
    altered[60] = if altered[60] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for url in [
        burl.replace(token, &forged_token),
        burl.replace(token, &altered),
    ] {
        assert_eq!(
            get(&client, &notice(&server, &url, &request, "0.95")).await,
            200
        );
    }
    let mut other_auction = request.clone();
    other_auction["id"] = json!("another-auction");
    let other = notice(
        &server,
        second["burl"].as_str().unwrap(),
        &other_auction,
        "0.95",
    );
    assert_eq!(get(&client, &other).await, 200);
    // The second bid lost.
    assert_eq!(
        get(&client, &notice(&server, lurl, &request, "")).await,
        200
    );

    // A test request's notices are answered and not counted.
    let mut test = request.clone();
    test["test"] = json!(1);
    let test_bid = post(&client, &server, "/openrtb2/bid", &test)
        .await
        .bids()
        .remove(0);
    assert_eq!(
        get(
            &client,
            &notice(&server, test_bid["burl"].as_str().unwrap(), &test, "1")
        )
        .await,
        200
    );
    server.stop();

    let events = logged_events(&dir.path().join("data"));
    let id =
        |bid: &Value| u128::from(u64::from_str_radix(bid["id"].as_str().unwrap(), 16).unwrap());
    let of = |kind: EventKind| events.iter().filter(move |e| e.kind == kind);
    let billings: Vec<_> = of(EventKind::Billing).collect();
    assert_eq!(billings.len(), 1, "{billings:?}");
    assert_eq!(billings[0].event_id, id(&bid));
    assert_eq!(
        billings[0].amount_micros, 950_000,
        "the clearing price, CPM"
    );
    let wins: Vec<_> = of(EventKind::Win).collect();
    assert_eq!(wins.len(), 1);
    assert_eq!(wins[0].amount_micros, 1_050_000, "decrypted");
    let losses: Vec<_> = of(EventKind::Loss).collect();
    assert_eq!(losses.len(), 1);
    assert_eq!((losses[0].event_id, losses[0].creative), (id(&second), 102));
    // Bids are counted (counter records): the one `wait_for_bids` got, `bid` and `second`;
    // the test request's is not.
    let bids: u64 = of(EventKind::BidsCounted).map(|e| e.event_count()).sum();
    assert_eq!(bids, 3, "test requests are not logged");
    assert_eq!(of(EventKind::Bid).count(), 0, "no record per bid");
    assert!(
        events.iter().all(|e| e.event_id != id(&test_bid)),
        "nothing of the test bid"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_sync_lets_buyeruid_reach_our_frequency_caps() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    extra_demand(&client, &server, &token).await;
    let capped = sized(320, 480);
    wait_for_bids(&client, &server, &capped).await;
    let partner = "/openrtb2/bid/partner";
    let as_user =
        |buyeruid: &'static str| move |r: &mut Value| r["user"]["buyeruid"] = json!(buyeruid);

    // Every sync call comes from the browser of our user OURS-1.
    let from_ours_1 = |path: &str| {
        client
            .get(server.url(path))
            .header("cookie", "mq_uid=OURS-1")
            .send()
    };

    // The partner's user EX-1 is our user OURS-1; EX-2 too (another device of theirs).
    for theirs in ["EX-1", "EX-2"] {
        let synced = from_ours_1(&format!("/sync?exchange=partner&uid={theirs}"))
            .await
            .unwrap();
        assert_eq!(synced.status(), 200);
    }
    // Without consent where GDPR applies, nothing is recorded: no string, or one refusing
    // Purpose 1 (device storage).
    for refusing in ["gdpr=1", &format!("gdpr=1&gdpr_consent={REJECT_ALL}")] {
        let refused = from_ours_1(&format!("/sync?exchange=partner&uid=EX-3&{refusing}"))
            .await
            .unwrap();
        assert_eq!(refused.status(), 200);
    }
    // The reverse: our id sent to the partner's match URL.
    let out = from_ours_1("/sync/out?exchange=partner").await.unwrap();
    assert_eq!(out.status(), 302);
    assert_eq!(
        out.headers()["location"],
        "https://partner.example/match?buyer=OURS-1"
    );

    // A bid for the partner's `user`, and its notice `kind` ("burl", "nurl") sent and answered.
    let bid_and_notify = async |user: &'static str, kind: &str| {
        let bid = bids_when(&client, &server, partner, &capped, as_user(user))
            .await
            .unwrap();
        // The partner shares [bidder]'s price keys: its prices come encrypted.
        let price = PriceCrypto::new(&E_KEY, &I_KEY).encrypt(2_000_000, [9; 16]);
        let url = notice(&server, bid[kind].as_str().unwrap(), &capped, &price);
        assert_eq!(get(&client, &url).await, 200);
    };

    // EX-1 sees the capped line item once it is billed; EX-2, the same user of ours, is then
    // capped; EX-3 (not matched) is another user.
    bid_and_notify("EX-1", "burl").await;
    assert_bids(&client, &server, partner, &capped, false, as_user("EX-2")).await;
    assert_bids(&client, &server, partner, &capped, false, as_user("OURS-1")).await;
    assert_bids(&client, &server, partner, &capped, true, as_user("EX-3")).await;
    // Under the GDPR, the cap follows the user only with consent to Purpose 1: a "reject all"
    // leaves the request without a user (its buyeruid unread), so the cap cannot refuse it.
    let under_gdpr = |buyeruid: &'static str, consent: &'static str| {
        move |r: &mut Value| {
            r["user"]["buyeruid"] = json!(buyeruid);
            r["user"]["consent"] = json!(consent);
            r["regs"] = json!({ "gdpr": 1 });
        }
    };
    assert_bids(
        &client,
        &server,
        partner,
        &capped,
        true,
        under_gdpr("EX-2", REJECT_ALL),
    )
    .await;
    assert_bids(
        &client,
        &server,
        partner,
        &capped,
        false,
        under_gdpr("EX-2", ACCEPT),
    )
    .await;
    // A win alone does not count towards caps.
    bid_and_notify("EX-9", "nurl").await;
    assert_bids(&client, &server, partner, &capped, true, as_user("EX-9")).await;
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bid_failing_the_response_checks_is_dropped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    // Notice URLs on plain http cannot go to a secure imp: the engine picks an https creative,
    // the response check then finds `http:` in `nurl`.
    let server = start_with(
        dir.path(),
        &[("MARQUEE_EDGE__PUBLIC_URL", "http://ads.example.com")],
    );
    let client = reqwest::Client::new();
    let request = banner();
    wait_for_bids(&client, &server, &request).await;
    let mut secure = request.clone();
    secure["imp"][0]["secure"] = json!(1);
    assert_eq!(
        post(&client, &server, "/openrtb2/bid", &secure)
            .await
            .status,
        204
    );
    let metrics = metrics_page(&client, &server.base).await;
    assert!(
        metrics.contains("marquee_bidder_invalid_bids_total 1"),
        "{metrics}"
    );
    server.stop();
    let no_bids: Vec<(u64, u64)> = logged_events(&dir.path().join("data"))
        .into_iter()
        // Reason 1: a request of `wait_for_bids` that came before the snapshot.
        .filter(|e| e.kind == EventKind::NoBidsCounted && e.creative != 1)
        .map(|e| (e.creative, e.event_count()))
        .collect();
    assert_eq!(
        no_bids,
        vec![(503, 1)],
        "the imp counted once, with the invalid-bid reason"
    );
}

/// What real exchanges send that the spec allows: a Prebid Server request with `null` members
/// and a `w`-only banner is bid on; a malformed banner in one imp leaves the request's other
/// imps bid on; a sizeless web banner never draws an out-of-home screen-sized creative.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_exchange_shapes_are_accepted_and_a_bad_imp_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let client = reqwest::Client::new();
    wait_for_bids(&client, &server, &banner()).await;
    let bid = "/openrtb2/bid";

    let body = std::fs::read(openrtb_testdata("marquee/prebid-server-nulls.json")).unwrap();
    let answer = post_bytes(&client, &server.url(bid), body.clone(), false).await;
    assert_valid(&body, &answer, "prebid server with nulls");

    // imp 0: a format entry with a string width (banner dropped from it); imp 1 intact.
    let mut request = banner();
    let good = request["imp"][0].clone();
    request["imp"] = json!([
        { "id": "bad", "banner": { "format": [{ "w": "300", "h": 250 }] } },
        good,
    ]);
    let body = serde_json::to_vec(&request).unwrap();
    let answer = post_bytes(&client, &server.url(bid), body.clone(), false).await;
    assert_valid(&body, &answer, "one malformed imp");
    assert!(answer.bids().iter().all(|b| b["impid"] != "bad"));
    let metrics = client.get(server.url("/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(
        metrics.contains("marquee_bidder_dropped_media_total{media=\"banner\"} 1\n"),
        "the dropped banner is counted"
    );
    // Nothing usable left: refused, naming the member.
    request["imp"] = json!([{ "id": "bad", "banner": { "format": [{ "w": "300", "h": 250 }] } }]);
    let answer = post(&client, &server, bid, &request).await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.body.contains("imp[0].banner.format[0].w"),
        "{}",
        answer.body
    );

    // `"banner": {}` on a web page: whatever is drawn fits a web page.
    let mut sizeless = banner();
    sizeless["imp"][0]["banner"] = json!({});
    let mut drawn = 0;
    for _ in 0..30 {
        let Some(bid) = bids_when(&client, &server, bid, &sizeless, |_| {}).await else {
            continue;
        };
        drawn += 1;
        let (w, h) = (
            bid["w"].as_u64().unwrap_or(0),
            bid["h"].as_u64().unwrap_or(0),
        );
        assert!(w <= 970 && h <= 1050, "{w}x{h} drawn on a web page");
    }
    assert!(drawn > 0, "a sizeless web banner is still bid on");
    server.stop();
}
