//! Traffic quality through the real binary: the untokened image tag and the general invalid
//! traffic screen, attacked as a fraudster would, against `marquee serve --demo`. Every attack
//! request is answered as usual but logged as invalid with its reason; none is counted,
//! charged, capped or paced. Legitimate image-tag traffic (an image, then a click with the
//! same cache buster, from distinct clients) still counts exactly once each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::{Server, get_json, logged_events, token_from};
use marquee_eventlog::{EventKind, InvalidReason};
use serde_json::Value;

/// The demo's newsletter placement, which takes the image tag; its standard line item is
/// "Boots newsletter readers" (CPC 1 EUR, charged for image-tag clicks).
const NEWSLETTER: u64 = 6;
/// A placement that does not take the image tag (the default).
const NEWS_SIDEBAR: u64 = 2;
const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
/// In the data-centre list the test writes.
const DATA_CENTRE_IP: &str = "198.51.100.7";
const ATTACKER_IP: &str = "203.0.113.5";
const CLICK_DELAY_MS: u64 = 400;

fn start(data: &Path) -> Server {
    let list = data.join("datacenters.txt");
    std::fs::write(&list, "# a hosting network\n198.51.100.0/24\n").unwrap();
    let list = list.to_str().unwrap().to_owned();
    let delay = CLICK_DELAY_MS.to_string();
    Server::start_with(
        data,
        &["--demo"],
        &[
            // The test's requests come from loopback, as from a proxy in front that names
            // each client in `X-Forwarded-For`.
            ("MARQUEE_EDGE__TRUSTED_PROXIES", "[\"127.0.0.1\"]"),
            ("MARQUEE_TRAFFIC__DATACENTERS_FILE", list.as_str()),
            ("MARQUEE_TRAFFIC__IMAGE_TAGS_PER_PREFIX_PER_MINUTE", "5"),
            ("MARQUEE_TRAFFIC__MIN_CLICK_DELAY_MS", delay.as_str()),
        ],
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A GET from `ip` with `user_agent` and extra headers: (status, Location).
/// A click's answer: the redirect to the newsletter line item's landing page.
fn assert_lands((status, location): (u16, Option<String>)) {
    assert_eq!(status, 302);
    let location = location.expect("a Location header");
    assert!(
        location.starts_with("https://acme-outdoor.example/winter-boots"),
        "{location}"
    );
}

/// [`fetch`] as desktop Chrome, without other headers.
async fn as_chrome(client: &reqwest::Client, url: &str, ip: &str) -> (u16, Option<String>) {
    fetch(client, url, ip, CHROME, &[]).await
}

async fn fetch(
    client: &reqwest::Client,
    url: &str,
    ip: &str,
    user_agent: &str,
    headers: &[(&str, &str)],
) -> (u16, Option<String>) {
    let mut request = client
        .get(url)
        .header("x-forwarded-for", ip)
        .header("user-agent", user_agent);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let reply = request.send().await.unwrap();
    let location = reply
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned());
    (reply.status().as_u16(), location)
}

/// The signed beacon and click of one ad of `placement`, fetched as a browser would.
async fn tracking_urls(client: &reqwest::Client, server: &Server) -> (String, String) {
    let answer: Value = client
        .get(server.url(&format!("/ad.json?p={NEWS_SIDEBAR}")))
        .header("user-agent", CHROME)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let html = answer["ads"][0]["html"].as_str().unwrap().to_owned();
    let url = |marker: &str| {
        let start = html.find(marker).unwrap();
        let rest = &html[start..];
        rest[..rest.find(['"', '\'']).unwrap()].to_owned()
    };
    (
        url(&format!("{}/t/i?t=", server.base)),
        url(&format!("{}/t/c?t=", server.base)),
    )
}

/// Decisions only (`/ad.json` logs no paid event) until the newsletter placement serves.
async fn wait_for_newsletter_ad(client: &reqwest::Client, server: &Server) {
    for _ in 0..200 {
        let url = server.url(&format!("/ad.json?p={NEWSLETTER}"));
        let answer: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        if answer["ads"].as_array().is_some_and(|ads| !ads.is_empty()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the newsletter placement never served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_on_paid_events_are_logged_as_invalid_and_never_billed() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = client();
    wait_for_newsletter_ad(&client, &server).await;
    let tag = |format: &str, placement: u64, cb: &str| {
        server.url(&format!(
            "/ad?placement={placement}&format={format}&cb={cb}"
        ))
    };
    let mut expected: BTreeMap<(u8, u8), usize> = BTreeMap::new();
    let mut expect = |kind: EventKind, reason: InvalidReason, n| {
        *expected.entry((kind.code(), reason.code())).or_default() += n;
    };
    let (imp, clk) = (EventKind::InvalidImpression, EventKind::InvalidClick);

    // Clicks with random cache busters and no image: redirected to the ad's landing page,
    // never counted.
    for i in 0..50u64 {
        let cb = format!("{}", 7_000_000 + i * 7_919);
        let (status, location) =
            as_chrome(&client, &tag("click", NEWSLETTER, &cb), ATTACKER_IP).await;
        assert_lands((status, location));
    }
    expect(clk, InvalidReason::ClickWithoutImpression, 50);

    // An image flood from one client: the first five images of the minute count, the rest
    // are a flood; their clicks come too fast.
    for i in 0..40u64 {
        let cb = format!("{}", 9_000_000 + i);
        let (status, _) = as_chrome(&client, &tag("img", NEWSLETTER, &cb), "203.0.113.9").await;
        assert_eq!(status, 302);
        let (status, _) = as_chrome(&client, &tag("click", NEWSLETTER, &cb), "203.0.113.9").await;
        assert_eq!(status, 302);
    }
    expect(imp, InvalidReason::Rate, 35);
    // The five counted images' clicks are too fast; the flood's images were never served as
    // impressions, so their clicks have none.
    expect(clk, InvalidReason::TooFast, 5);
    expect(clk, InvalidReason::ClickWithoutImpression, 35);

    // A crawler and a data-centre script through the image tag.
    for (ip, ua, reason) in [
        ("192.0.2.44", GOOGLEBOT, InvalidReason::Crawler),
        (DATA_CENTRE_IP, CHROME, InvalidReason::Datacenter),
    ] {
        let (status, _) = fetch(&client, &tag("img", NEWSLETTER, "4242"), ip, ua, &[]).await;
        assert_eq!(status, 302);
        expect(imp, reason, 1);
    }
    // Signed beacons and clicks fired by a crawler, a prefetch, a data centre, a HEAD.
    let (beacon, click) = tracking_urls(&client, &server).await;
    for (ip, ua, headers, reason) in [
        ("192.0.2.45", GOOGLEBOT, &[][..], InvalidReason::Crawler),
        (
            "192.0.2.46",
            "python-requests/2.32.3",
            &[][..],
            InvalidReason::Crawler,
        ),
        (
            "192.0.2.47",
            CHROME,
            &[("sec-purpose", "prefetch")][..],
            InvalidReason::Prefetch,
        ),
        (DATA_CENTRE_IP, CHROME, &[][..], InvalidReason::Datacenter),
    ] {
        fetch(&client, &beacon, ip, ua, headers).await;
        let (status, _) = fetch(&client, &click, ip, ua, headers).await;
        assert_eq!(status, 302);
        expect(imp, reason, 1);
        expect(clk, reason, 1);
    }
    let head = client
        .head(&beacon)
        .header("x-forwarded-for", "192.0.2.48")
        .header("user-agent", CHROME)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    expect(imp, InvalidReason::Crawler, 1);
    // The image tag where the placement does not take it, and unfilled cache busters.
    let (status, _) = as_chrome(&client, &tag("img", NEWS_SIDEBAR, "5150"), "192.0.2.49").await;
    assert_eq!(status, 200, "the fallback pixel");
    expect(imp, InvalidReason::UntokenedDisabled, 1);
    for cb in ["[CACHEBUSTER]", "%25%25CACHEBUSTER%25%25", ""] {
        as_chrome(&client, &tag("img", NEWSLETTER, cb), "192.0.2.50").await;
        as_chrome(&client, &tag("click", NEWSLETTER, cb), "192.0.2.50").await;
        expect(imp, InvalidReason::NoCacheBuster, 1);
        expect(clk, InvalidReason::NoCacheBuster, 1);
    }

    // Ten readers, each from its own network: the image, a moment later the click.
    let reader = |n: u32| format!("81.2.{n}.10");
    for n in 0..10 {
        let cb = format!("{}", 5_550_000 + n);
        let (status, _) = as_chrome(&client, &tag("img", NEWSLETTER, &cb), &reader(n)).await;
        assert_eq!(status, 302);
    }
    tokio::time::sleep(Duration::from_millis(CLICK_DELAY_MS + 200)).await;
    for n in 0..10 {
        let cb = format!("{}", 5_550_000 + n);
        let (status, location) =
            as_chrome(&client, &tag("click", NEWSLETTER, &cb), &reader(n)).await;
        assert_lands((status, location));
        // A second click on the same image is the same click.
        as_chrome(&client, &tag("click", NEWSLETTER, &cb), &reader(n)).await;
    }

    // The report: ten clicks, ten euros, and every invalid event by reason.
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let report_url = server.url(&format!(
        "/api/v1/reports?from={}&to={}&granularity=day",
        today.yesterday().unwrap(),
        today.tomorrow().unwrap().tomorrow().unwrap()
    ));
    let mut tries = 0;
    let report = loop {
        tries += 1;
        let report = get_json(&client, &report_url, Some(&token)).await;
        let totals = &report["totals"];
        let complete = totals["invalid_clicks"].as_i64()
            == Some(expected_count(&expected, clk) as i64)
            && totals["clicks"].as_i64() == Some(10);
        if complete || tries == 100 {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    server.stop();
    let totals = &report["totals"];
    assert_eq!(totals["clicks"], 10, "{report}");
    assert_eq!(
        totals["invalid_impressions"].as_i64(),
        Some(expected_count(&expected, imp) as i64),
        "{totals}"
    );
    for reason in InvalidReason::ALL {
        let n: usize = expected
            .iter()
            .filter(|((_, r), _)| *r == reason.code())
            .map(|(_, n)| n)
            .sum();
        assert_eq!(
            totals["invalid_by_reason"][reason.label()].as_i64(),
            Some(n as i64),
            "{}: {totals}",
            reason.label()
        );
    }

    // The log: every attack request is there with its reason; the only counted clicks and
    // the only spend are the readers'.
    let events = logged_events(data.path());
    let mut logged: BTreeMap<(u8, u8), usize> = BTreeMap::new();
    for event in events.iter().filter(|e| e.kind.is_invalid()) {
        let reason = InvalidReason::from_code(event.amount_micros).expect("a reason");
        *logged
            .entry((event.kind.code(), reason.code()))
            .or_default() += 1;
    }
    assert_eq!(logged, expected);
    let clicks: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::Click)
        .map(|e| (e.placement, e.amount_micros))
        .collect();
    assert_eq!(clicks, vec![(NEWSLETTER, 1_000_000); 10]);
    let impressions = events
        .iter()
        .filter(|e| e.kind == EventKind::Impression && e.placement == NEWSLETTER)
        .count();
    // The readers' ten and the flood's first five.
    assert_eq!(impressions, 15);
}

fn expected_count(expected: &BTreeMap<(u8, u8), usize>, kind: EventKind) -> usize {
    expected
        .iter()
        .filter(|((k, _), _)| *k == kind.code())
        .map(|(_, n)| n)
        .sum()
}

/// A list file that cannot be used stops the start, naming the file and the line; on a reload
/// the last good list stays, and the log and a metric say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_list_files_fail_the_start_or_keep_the_last_good_list() {
    let data = tempfile::tempdir().unwrap();
    let networks = data.path().join("networks.txt");
    std::fs::write(&networks, "# hosting\n198.51.100.0/24\n10.0.0.0/33\n").unwrap();
    let output = common::run(
        &["serve", "--data", data.path().to_str().unwrap()],
        &[(
            "MARQUEE_TRAFFIC__DATACENTERS_FILE",
            networks.to_str().unwrap(),
        )],
    );
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{}:3", networks.display())),
        "{stderr}"
    );
    let missing = data.path().join("missing.txt");
    let output = common::run(
        &["serve", "--data", data.path().to_str().unwrap()],
        &[("MARQUEE_TRAFFIC__CRAWLERS_FILE", missing.to_str().unwrap())],
    );
    assert_eq!(output.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("missing.txt"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Started on a good file, then the file goes bad: the last good list still screens.
    let serving = data.path().join("serving");
    std::fs::create_dir_all(&serving).unwrap();
    let crawlers = serving.join("crawlers.txt");
    std::fs::write(&crawlers, "ExampleBot\n").unwrap();
    let server = Server::start_with(
        &serving,
        &["--demo"],
        &[
            ("MARQUEE_TRAFFIC__CRAWLERS_FILE", crawlers.to_str().unwrap()),
            ("MARQUEE_TRAFFIC__RELOAD_INTERVAL_SECS", "1"),
        ],
    );
    let client = client();
    wait_for_newsletter_ad(&client, &server).await;
    std::fs::write(&crawlers, "ExampleBot\n(unclosed\n").unwrap();
    let line = server.stderr_line("not reloaded");
    assert!(line.contains("crawlers.txt:2"), "{line}");
    let page = common::metrics_page(&client, &server.base).await;
    assert_eq!(
        common::metric(&page, "marquee_traffic_list_reload_failures_total"),
        Some(1.0)
    );
    let url = server.url(&format!("/ad?placement={NEWSLETTER}&format=img&cb=777"));
    let (status, _) = fetch(&client, &url, "192.0.2.60", "ExampleBot/1.0", &[]).await;
    assert_eq!(status, 302);
    server.stop();
    let crawled = logged_events(&serving)
        .into_iter()
        .filter(|e| {
            e.kind == EventKind::InvalidImpression
                && InvalidReason::from_code(e.amount_micros) == Some(InvalidReason::Crawler)
        })
        .count();
    assert_eq!(crawled, 1, "the last good list still names ExampleBot");
}
