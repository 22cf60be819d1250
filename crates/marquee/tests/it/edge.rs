//! The edge through the real binary: tracking counted once and only with valid tokens, clicks
//! going only to the creative's landing URL, caps, bad requests and fallbacks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::{Server, get_as_german_iphone, get_json, logged_events, token_from, tracking_keys};
use marquee_eventlog::EventKind;
use marquee_tracking::{Claims, KeyRing};
use serde_json::Value;

/// "News mobile banner" in the demo: "Boots DACH mobile" (standard tier, capped 3 a day) and
/// the house promotion are linked to it.
const NEWS_MOBILE: u64 = 3;
const NEWS_SIDEBAR: u64 = 2;

fn start(data: &Path) -> Server {
    Server::start_with(
        data,
        &["--demo"],
        &[("MARQUEE_EDGE__COUNTRY_HEADER", "x-country")],
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// One ad from `/ad.json`: (line item, creative, impression URL, click URL).
async fn ad(
    client: &reqwest::Client,
    server: &Server,
    placement: u64,
    uid: &str,
) -> Option<(u64, u64, String, String)> {
    let url = server.url(&format!("/ad.json?p={placement}&uid={uid}"));
    let answer: Value = get_as_german_iphone(client, &url)
        .await
        .json()
        .await
        .unwrap();
    let ad = answer["ads"].as_array().unwrap().first()?.clone();
    let html = ad["html"].as_str().unwrap();
    let url = |marker: &str| {
        let start = html
            .find(marker)
            .unwrap_or_else(|| panic!("no {marker} in {html}"));
        let rest = &html[start..];
        let end = rest.find(['"', '\'']).unwrap();
        rest[..end].to_owned()
    };
    let base = &server.base;
    Some((
        ad["line_item"].as_u64().unwrap(),
        ad["creative"].as_u64().unwrap(),
        url(&format!("{base}/t/i?t=")),
        url(&format!("{base}/t/c?t=")),
    ))
}

fn token_of(url: &str) -> &str {
    url.split("t=").nth(1).unwrap()
}

/// Fetches without following redirects, as from a German visitor (the CDN's country header).
async fn status(client: &reqwest::Client, url: &str) -> (u16, Option<String>) {
    let reply = client
        .get(url)
        .header("x-country", "DE")
        .send()
        .await
        .unwrap();
    let location = reply
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned());
    (reply.status().as_u16(), location)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracking_counts_valid_tokens_once() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    server.stderr_line("demo admin token");
    let client = client();
    let (line_item, creative, impression, click) = ad(&client, &server, NEWS_SIDEBAR, "u1")
        .await
        .expect("an ad");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let keys = tracking_keys(data.path());
    let valid = keys.verify(token_of(&impression), now).unwrap();

    // Repeats of the same impression count once.
    for _ in 0..3 {
        assert_eq!(status(&client, &impression).await.0, 200);
    }
    // Forged, altered, expired, foreign-key and wrong-kind tokens are answered but not counted.
    let mut altered = token_of(&impression).to_owned();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    let expired = keys.sign(&Claims {
        issued_at: now - 7_200,
        lifetime: 3_600,
        nonce: 77,
        ..valid
    });
    let foreign = KeyRing::new(1, [(1u8, &[7u8; 32][..])])
        .unwrap()
        .sign(&Claims { nonce: 78, ..valid });
    let wrong_kind = token_of(&click).to_owned();
    for token in [
        altered.as_str(),
        expired.as_str(),
        foreign.as_str(),
        wrong_kind.as_str(),
        "garbage",
        "",
    ] {
        let (code, _) = status(&client, &server.url(&format!("/t/i?t={token}"))).await;
        assert_eq!(code, 200, "a beacon always answers the browser");
    }
    server.stop();

    let impressions: Vec<_> = logged_events(data.path())
        .into_iter()
        .filter(|e| e.kind == EventKind::Impression)
        .collect();
    assert_eq!(impressions.len(), 1, "{impressions:?}");
    assert_eq!(impressions[0].event_id, u128::from(valid.nonce));
    assert_eq!(
        (impressions[0].line_item, impressions[0].creative),
        (line_item, creative)
    );
    assert_eq!(&impressions[0].country, b"DE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_go_only_to_the_landing_url_and_count_once() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = client();
    let (_, creative, _, click) = ad(&client, &server, NEWS_SIDEBAR, "u2")
        .await
        .expect("an ad");
    let url = server.url(&format!("/api/v1/creatives/{creative}"));
    let landing = get_json(&client, &url, Some(&token)).await;
    let landing = landing["landing_url"].as_str().unwrap().to_owned();

    let (code, location) = status(&client, &click).await;
    assert_eq!(code, 302);
    let location = location.unwrap();
    assert!(location.starts_with(&landing), "{location} vs {landing}");
    assert!(location.contains("mq_conv="));

    // The usual tricks: extra destination parameters are ignored, a destination without a
    // valid token goes nowhere, header injection and altered tokens are refused.
    let evil = "https%3A%2F%2Fevil.example%2F";
    for url in [
        format!("{click}&url={evil}"),
        format!("{click}&redirect={evil}&landing={evil}"),
        format!("{}&t=x", click.replace("t=", "url=https://evil.example&t=")),
    ] {
        let (code, location) = status(&client, &url).await;
        assert_eq!(code, 302, "{url}");
        assert!(location.unwrap().starts_with(&landing), "{url}");
    }
    // Alter one character of the token (its creative id), keeping it well-formed.
    let mut tampered = click.clone().into_bytes();
    let at = click.find("t=").unwrap() + 2 + 30;
    tampered[at] = if tampered[at] == b'B' { b'C' } else { b'B' };
    let tampered = String::from_utf8(tampered).unwrap();
    for url in [
        server.url(&format!("/t/c?url={evil}")),
        server.url("/t/c?t=%0d%0aLocation:%20https://evil.example"),
        tampered,
        server.url("/t/c"),
    ] {
        let (code, location) = status(&client, &url).await;
        assert_eq!((code, location), (404, None), "{url}");
    }

    // The conversion token handed to the landing page counts once too.
    let conversion = location.split("mq_conv=").nth(1).unwrap().to_owned();
    for _ in 0..2 {
        let url = server.url(&format!("/t/v?t={conversion}"));
        assert_eq!(status(&client, &url).await.0, 200);
    }
    server.stop();
    let events = logged_events(data.path());
    let count = |kind| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(
        count(EventKind::Click),
        1,
        "the click was followed four times, counted once"
    );
    assert_eq!(count(EventKind::Conversion), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frequency_caps_count_impressions_not_decisions() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    server.stderr_line("demo admin token");
    let client = client();
    // "Boots DACH mobile" (line item 1) is capped at 3 a day. Decisions alone do not count.
    for _ in 0..5 {
        let (line_item, ..) = ad(&client, &server, NEWS_MOBILE, "capped")
            .await
            .expect("an ad");
        assert_eq!(
            line_item, 1,
            "the standard line item outranks the house one"
        );
    }
    for _ in 0..3 {
        let (line_item, _, impression, _) =
            ad(&client, &server, NEWS_MOBILE, "capped").await.unwrap();
        assert_eq!(line_item, 1);
        assert_eq!(status(&client, &impression).await.0, 200);
    }
    for _ in 0..5 {
        // Nothing else fits a 320x50 slot in the demo, so the answer is the (empty) fallback.
        let served = ad(&client, &server, NEWS_MOBILE, "capped").await;
        assert!(
            served.is_none_or(|(line_item, ..)| line_item != 1),
            "capped after three impressions"
        );
    }
    // Another user is not capped.
    let (line_item, ..) = ad(&client, &server, NEWS_MOBILE, "fresh").await.unwrap();
    assert_eq!(line_item, 1);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ad_requests_are_named_and_misses_fall_back() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    server.stderr_line("demo admin token");
    let client = client();
    let ad_request = |query: &str| client.get(server.url(&format!("/ad?{query}"))).send();
    for (query, name) in [
        ("", "placement"),
        ("placement=abc", "placement"),
        ("placement=2&size=big", "size"),
        ("placement=2&format=pdf", "format"),
        ("placement=2,3", "placement"),
    ] {
        let reply = ad_request(query).await.unwrap();
        assert_eq!(reply.status(), 400, "{query}");
        assert!(reply.text().await.unwrap().contains(name), "{query}");
    }
    // An unknown placement answers the (empty) fallback, fast and cacheless.
    let reply = ad_request("placement=999").await.unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.headers()["cache-control"], "no-store");
    assert!(reply.headers().get("server").is_none());
    assert_eq!(reply.text().await.unwrap(), "");
    let json = get_json(&client, &server.url("/ad.json?p=999"), None).await;
    assert_eq!(json["ads"], serde_json::json!([]));

    // A served ad: minimal headers, correct type and length.
    let reply = ad_request(&format!("placement={NEWS_SIDEBAR}&format=js"))
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(
        reply.headers()["content-type"],
        "application/javascript; charset=utf-8"
    );
    let length: usize = reply.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = reply.text().await.unwrap();
    assert_eq!(length, body.len());
    assert!(
        body.contains("srcdoc") && body.contains("allow-scripts"),
        "{body}"
    );
    server.stop();
}

/// A beacon and a click count at what they were worth when the ad was chosen: its line item
/// repriced, then paused, while the ad is on screen changes neither (before, the price was looked
/// up when the beacon came: the new price, or nothing once the line item left the snapshot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_count_at_the_price_of_their_decision() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = client();
    let (line_item, _, impression, _) = ad(&client, &server, NEWS_SIDEBAR, "u-price")
        .await
        .expect("an ad");
    let url = server.url(&format!("/api/v1/line-items/{line_item}"));
    let price = get_json(&client, &url, Some(&token)).await["price"]["amount_micros"]
        .as_i64()
        .unwrap();
    assert!(price > 0, "a priced line item");
    let version = || async {
        let page = common::metrics_page(&client, &server.base).await;
        common::metric(&page, "marquee_snapshot_version").unwrap_or(0.0)
    };
    for change in [
        (|item: &mut Value| {
            let doubled = item["price"]["amount_micros"].as_i64().unwrap() * 2;
            item["price"]["amount_micros"] = serde_json::json!(doubled);
        }) as fn(&mut Value),
        |item: &mut Value| item["status"] = serde_json::json!("paused"),
    ] {
        let before = version().await;
        common::update_line_item(&client, &server.base, &token, line_item, change).await;
        while version().await <= before {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    assert_eq!(status(&client, &impression).await.0, 200);
    server.stop();
    let impressions: Vec<_> = logged_events(data.path())
        .into_iter()
        .filter(|e| e.kind == EventKind::Impression)
        .map(|e| (e.line_item, e.amount_micros))
        .collect();
    assert_eq!(impressions, [(line_item, price)]);
}

/// The image tag: the image redirects to the creative's picture, the click to its landing page,
/// and both count once per cache buster, each with what it is worth (a CPM line item's
/// impression its price, its click nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_tag_clicks_through_to_the_ad_it_showed() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = client();
    // The house promotion is free in the demo; priced, its events carry amounts to check.
    let line_items = get_json(&client, &server.url("/api/v1/line-items"), Some(&token)).await;
    let house = common::id_named(&line_items, "Subscribe to the Daily Planet");
    let version = || async {
        let page = common::metrics_page(&client, &server.base).await;
        common::metric(&page, "marquee_snapshot_version").unwrap_or(0.0)
    };
    // The sidebar takes the image tag only once its publisher turns it on.
    let before = version().await;
    let placement = server.url(&format!("/api/v1/placements/{NEWS_SIDEBAR}"));
    let mut sidebar = get_json(&client, &placement, Some(&token)).await;
    sidebar["image_tag"] = serde_json::json!("on");
    let reply = common::put_json(&client, &placement, &token, &sidebar).await;
    assert_eq!(reply.status(), 200);
    while version().await <= before {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let before = version().await;
    common::update_line_item(&client, &server.base, &token, house, |item| {
        item["price"]["amount_micros"] = serde_json::json!(1_500_000);
    })
    .await;
    while version().await <= before {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for cb in ["101", "202", "303"] {
        let tag = |format: &str| {
            server.url(&format!(
                "/ad?placement={NEWS_SIDEBAR}&format={format}&cb={cb}"
            ))
        };
        let image = status(&client, &tag("img")).await;
        let click = status(&client, &tag("click")).await;
        assert_eq!((image.0, click.0), (302, 302));
        // Without geo or device, only the house promotion's image fits this placement.
        assert_eq!(image.1.unwrap(), "https://cdn.example.com/demo/300x250.png");
        let click = click.1.unwrap();
        assert!(
            click.starts_with("https://news.dailyplanet.example/subscribe?mq_conv="),
            "{click}"
        );
        // An e-mail client fetching the image again does not count twice.
        let again = status(&client, &tag("img")).await;
        assert_eq!(again.0, 302);
    }
    server.stop();
    let events = logged_events(data.path());
    let count = |kind| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count(EventKind::Impression), 3);
    assert_eq!(count(EventKind::Click), 3);
    // One per image request (each fetch is answered); a click is no new decision.
    assert_eq!(count(EventKind::Decision), 6);
    let amounts = |kind| {
        events
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.amount_micros)
            .collect::<Vec<_>>()
    };
    assert_eq!(amounts(EventKind::Impression), [1_500_000; 3]);
    assert_eq!(amounts(EventKind::Click), [0; 3]);
}

/// The iframe tag's answer is an advertiser's HTML on our origin (in `marquee serve` the
/// dashboard's too): the header sandboxes it even when the URL is opened on its own, so its
/// scripts cannot read the dashboard as a signed-in user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_ad_is_sandboxed_by_its_own_header() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let client = client();
    common::wait_for_ad(&client, &server.base).await;
    let reply = client
        .get(server.url(&format!("/ad?placement={NEWS_SIDEBAR}&format=html")))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let policy = reply.headers()["content-security-policy"].to_str().unwrap();
    assert_eq!(
        policy,
        "sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox"
    );
    assert!(!policy.contains("allow-same-origin"));
    server.stop();
}

/// A placement taking banners and video: our tags cannot play a VAST creative, so a video
/// sponsorship there must not win over the banner that can be shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_slot_is_filled_with_what_a_page_can_show() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = client();
    let post = |path: &'static str, body: Value| {
        let (client, server, token) = (&client, &server, &token);
        async move { common::create_object(client, server, token, path, &body).await }
    };
    let list = |path: &str| {
        let url = server.url(&format!("/api/v1/{path}"));
        let (client, token) = (&client, &token);
        async move { get_json(client, &url, Some(token)).await }
    };
    let site = list("sites").await["items"][0]["id"].as_u64().unwrap();
    let campaign = list("campaigns").await["items"][0]["id"].as_u64().unwrap();
    let vast = list("creatives?limit=100").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["content"]["type"] == "vast")
        .expect("the demo has VAST creatives")["content"]
        .clone();
    let mixed = post(
        "placements",
        serde_json::json!({ "site_id": site, "name": "Mixed", "sizes": [{ "w": 300, "h": 250 }], "formats": ["banner", "video"] }),
    )
    .await;
    let line_item = |name: &str, tier: &str| {
        serde_json::json!({
            "campaign_id": campaign, "name": name, "start": "2026-01-01T00:00:00",
            "time_zone": "UTC", "tier": tier, "channels": ["direct"],
            "price": { "model": "cpm", "amount_micros": 1_000_000, "currency": "EUR" }
        })
    };
    let sponsor = post("line-items", line_item("Video sponsor", "sponsorship")).await;
    post(
        "creatives",
        serde_json::json!({ "line_item_id": sponsor, "name": "Spot", "landing_url": "https://v.example/", "content": vast }),
    )
    .await;
    let banner = post("line-items", line_item("Mixed banner", "standard")).await;
    post(
        "creatives",
        serde_json::json!({ "line_item_id": banner, "name": "Rectangle", "size": { "w": 300, "h": 250 },
            "landing_url": "https://b.example/", "content": { "type": "html", "html": "<p>mixed-banner</p>" } }),
    )
    .await;
    for line_item in [sponsor, banner] {
        let url = server.url(&format!(
            "/api/v1/line-items/{line_item}/placements/{mixed}"
        ));
        let linked = client.put(url).bearer_auth(&token).send().await.unwrap();
        assert!(
            linked.status().is_success(),
            "{}",
            linked.text().await.unwrap()
        );
    }
    let ad = format!("/ad?placement={mixed}&format=html");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let html = common::get_text(&client, &server.url(&ad)).await;
        if html.contains("mixed-banner") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the banner never served: {html:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    server.stop();
}

/// Remnant line items priced in different currencies compete on the ad path in the configured
/// rates' base currency: 1,000 yen at 150 to the dollar (6.67 USD) beats 5 USD, although the
/// dollars' micros are 200 times fewer (with the ad path's old rate-less table, an unrated yen
/// bid would rank below the dollars).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remnant_line_items_in_two_currencies_compete_at_the_configured_rate() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("marquee.toml");
    std::fs::write(&config, "[currency]\nrates = { JPY = \"150\" }\n").unwrap();
    let server = Server::start_with(
        &data.path().join("data"),
        &["--demo", "--config", config.to_str().unwrap()],
        &[],
    );
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = client();
    let post = |path: &'static str, body: Value| {
        let (client, server, token) = (&client, &server, &token);
        async move { common::create_object(client, server, token, path, &body).await }
    };
    let sites = get_json(&client, &server.url("/api/v1/sites"), Some(&token)).await;
    let site = sites["items"][0]["id"].as_u64().unwrap();
    // A size no demo creative has, so only these two line items can fill it.
    let placement = post(
        "placements",
        serde_json::json!({ "site_id": site, "name": "Strip", "sizes": [{ "w": 320, "h": 100 }], "formats": ["banner"] }),
    )
    .await;
    let mut bidders = Vec::new();
    for (name, currency, micros) in [
        ("dollars", "USD", 5_000_000_u64),
        ("yen", "JPY", 1_000_000_000),
    ] {
        let advertiser = post(
            "advertisers",
            serde_json::json!({ "name": name, "currency": currency, "time_zone": "UTC" }),
        )
        .await;
        let campaign = post(
            "campaigns",
            serde_json::json!({ "advertiser_id": advertiser, "name": name }),
        )
        .await;
        let line_item = post(
            "line-items",
            serde_json::json!({
                "campaign_id": campaign, "name": name, "start": "2026-01-01T00:00:00",
                "time_zone": "UTC", "tier": "remnant", "channels": ["direct"],
                "price": { "model": "cpm", "amount_micros": micros, "currency": currency }
            }),
        )
        .await;
        post(
            "creatives",
            serde_json::json!({ "line_item_id": line_item, "name": name, "size": { "w": 320, "h": 100 },
                "landing_url": "https://c.example/", "content": { "type": "html", "html": format!("<p>{name}-ad</p>") } }),
        )
        .await;
        // The dollars are linked first: any snapshot holding the yen holds them too.
        let url = server.url(&format!(
            "/api/v1/line-items/{line_item}/placements/{placement}"
        ));
        let linked = client.put(url).bearer_auth(&token).send().await.unwrap();
        assert!(linked.status().is_success());
        bidders.push(line_item);
    }
    let ad = server.url(&format!("/ad?placement={placement}&format=html"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let html = common::get_text(&client, &ad).await;
        if html.contains("yen-ad") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the yen never won: {html:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for _ in 0..20 {
        let html = common::get_text(&client, &ad).await;
        assert!(html.contains("yen-ad"), "the higher bid lost: {html:?}");
    }
    server.stop();
}

/// TCF v2 consent strings: a CMP's "reject all" (no purpose consented to), and the IAB
/// specification's example (consent to purposes 1, 3, 9 and 10).
const REJECT_ALL: &str = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA";
const ACCEPT: &str = "CLcVDxRMWfGmWAVAHCENAXCkAKDAADnAABRgA5mdfCKZuYJez-NQm0TBMYA4oCAAGQYIAAAAAAEAIAEgAA.argAC0gAAAAAAAAAAAA";
const NEWS_LEADERBOARD: u64 = 1;

/// Under the GDPR the edge identifies a visitor (sets `mq_uid`, reads it, writes a user key
/// into the events) only when the consent string records consent to Purpose 1, storage on the
/// device: a "reject all" string is a refusal (it used to count as consent, being non-empty),
/// and so are a string that is no TCF v2 string and the iframe and image tags' consent
/// placeholders left unfilled. The ads are served either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_consent_to_device_storage_identifies_the_visitor() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let client = client();
    common::wait_for_ad(&client, &server.base).await;
    let fetch = |path: String, cookie: Option<&'static str>| {
        let mut request = client.get(server.url(&path));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send()
    };

    // Refusals, on the sidebar: no cookie set, the cookie sent not read (checked in the events
    // below), an ad all the same.
    let mut refused = 0;
    for query in [
        format!("gdpr=1&gdpr_consent={REJECT_ALL}"),
        format!("gdpr_consent={REJECT_ALL}"),
        "gdpr=1".to_owned(),
        "gdpr=1&gdpr_consent=CO".to_owned(),
    ] {
        for cookie in [None, Some("mq_uid=KNOWN-VISITOR")] {
            let reply = fetch(format!("/ad.json?p={NEWS_SIDEBAR}&{query}"), cookie)
                .await
                .unwrap();
            assert_eq!(reply.status(), 200, "{query}");
            assert_eq!(common::set_cookie(&reply, "mq_uid"), None, "{query}");
            let answer: Value = reply.json().await.unwrap();
            assert_eq!(answer["ads"].as_array().unwrap().len(), 1, "{query}");
            refused += 1;
        }
    }
    for format in ["html", "img"] {
        let tag = format!(
            "/ad?placement={NEWS_SIDEBAR}&format={format}&cb=7&gdpr=[GDPR]&gdpr_consent=[GDPR_CONSENT]"
        );
        let reply = fetch(tag.clone(), None).await.unwrap();
        assert!([200, 302].contains(&reply.status().as_u16()), "{tag}");
        assert_eq!(common::set_cookie(&reply, "mq_uid"), None, "{tag}");
        // The sidebar does not take the image tag: its request gets the fallback, no decision.
        if format == "html" {
            refused += 1;
        }
    }

    // Consent, on the leaderboard: a new visitor gets the cookie, a known one keeps theirs; a
    // page without consent parameters (no CMP, outside the GDPR) too.
    let reply = fetch(
        format!("/ad.json?p={NEWS_LEADERBOARD}&gdpr=1&gdpr_consent={ACCEPT}"),
        None,
    )
    .await
    .unwrap();
    assert!(common::set_cookie(&reply, "mq_uid").is_some());
    let reply = fetch(
        format!("/ad.json?p={NEWS_LEADERBOARD}&gdpr=1&gdpr_consent={ACCEPT}"),
        Some("mq_uid=KNOWN-VISITOR"),
    )
    .await
    .unwrap();
    assert_eq!(common::set_cookie(&reply, "mq_uid"), None, "known already");
    let reply = fetch(format!("/ad.json?p={NEWS_LEADERBOARD}"), None)
        .await
        .unwrap();
    assert!(common::set_cookie(&reply, "mq_uid").is_some());
    server.stop();

    let decisions: Vec<_> = logged_events(data.path())
        .into_iter()
        .filter(|e| e.kind == EventKind::Decision)
        .collect();
    let users = |placement: u64| {
        decisions
            .iter()
            .filter(|e| e.placement == placement)
            .map(|e| e.user)
            .collect::<Vec<_>>()
    };
    let sidebar = users(NEWS_SIDEBAR);
    assert_eq!(sidebar.len(), refused, "{sidebar:?}");
    assert!(sidebar.iter().all(|&user| user == 0), "{sidebar:?}");
    let leaderboard = users(NEWS_LEADERBOARD);
    assert!(leaderboard.len() >= 3, "{leaderboard:?}");
    assert!(leaderboard.iter().all(|&user| user != 0), "{leaderboard:?}");
}
