//! The ad server end to end in a real browser (headless Chromium):
//!
//! - `async_tag_in_headless_chromium`: `marquee serve --demo` and a publisher page carrying
//!   the async tags of two demo placements (so `tag.js` is included twice); the ads render in
//!   sandboxed iframes, each impression is logged once (a repeated beacon included), and a
//!   click goes through the click redirect to the creative's landing URL and is logged once (a
//!   second click on the same ad included). The demo's geo database places this machine in
//!   San Francisco: the sidebar shows the geo demo line item's creative, and the events are
//!   logged with country US.
//! - `async_tag_passes_the_cmps_refusal_on`: the same page behind a consent platform whose
//!   visitor refuses; the ads serve without identifying the visitor.
//! - `forwarded_addresses_serve_exactly_their_geo_line_items`: `marquee serve` with a City
//!   database the test writes (`geo.database`) and loopback as a trusted proxy; a page of five
//!   placements, each with a line item targeted by country, region, city, metro or radius, is
//!   visited from four forwarded addresses (`X-Forwarded-For`) by one browser, a fresh context
//!   each: exactly the matching line items serve, and their impressions are logged with the
//!   address's country.
//! - `unified_auction_in_headless_chromium`: `marquee serve` with gateway mode and a bidder in
//!   the test; placements with programmatic demand show the bid's ad when it beats their line
//!   item and the line item's when not, a sponsorship that does not compete is never
//!   auctioned, a late bidder does not hold the answer, and the report shows direct
//!   impressions beside programmatic impressions and revenue, by placement and by bidder.
//!
//! - `prebid_bids_win_through_their_price_bucket_line_items`: `marquee serve`, a placement with
//!   a direct remnant line item at 3.00 and a Prebid set (granularity low, made with `marquee
//!   prebid create-set`); a page runs a Prebid.js auction (the npm package's prebuilt file, a
//!   local mock bidder) and passes its `hb_*` targeting to the async tag: a 4.20 bid (bucket
//!   4.00) renders in the set's creative (which asks Prebid.js for it as the Prebid Universal
//!   Creative does), a 2.60 bid (bucket 2.50) loses to the direct line item.
//!
//! The browser is driven by `tests/browser/e2e.mjs` (the first two), `tests/browser/prebid.mjs`
//! (the Prebid one) and `tests/browser/geo.mjs` (the others; Node, playwright-core, Debian's
//! Chromium at `/usr/bin/chromium`, or `$CHROMIUM`). Only
//! loopback is contacted: each page is served by a small HTTP server in this test (as
//! `localhost`, so the page and the edge at `127.0.0.1` are different sites, as a publisher
//! and its ad server are); the demo's landing pages and creative images live on `*.example`
//! hosts, which the drivers intercept (landing requests aborted, images answered with a
//! stand-in picture).
//!
//! Run it alone:
//!
//! ```text
//! scripts/test-deps.sh                                   # chromium, node, tests/browser/node_modules
//! cargo test -p marquee --test it browser:: -- --include-ignored --nocapture
//! BROWSER_TEST_KEEP=1 cargo test -p marquee --test it browser:: -- --include-ignored --nocapture   # keep the temp dir
//! ```
//!
//! Plain `cargo test` leaves these tests out (ignored); `scripts/test.sh` runs them, and there
//! they fail when Chromium, Node or the Node dependencies are missing. On a
//! failure the temporary directory is kept and its path printed: it holds the data directory
//! (event log) and the page screenshots (`browser/page.png` or `browser/failure.png`;
//! `browser/geo-N.png` per visit or `browser/geo-failure.png`, and the test's database). The
//! browser runs with a fresh profile there, removed when it closes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    Scratch, Server, create_object, get_json, id_named, logged_events, repo_root,
    require_browser_tools, token_from,
};
use marquee_eventlog::{Event, EventKind};
use marquee_geo::writer::{DatabaseWriter, city_record};
use marquee_geo::{CountryCode, Location, Point, RegionCode};
use marquee_manager::demo::GEO_DEMO_LINE_ITEM;
use serde_json::{Value, json};

/// The demo placements on the page, leaderboard first; the ad in the sidebar is clicked.
const SIDEBAR: &str = "News sidebar rectangle";
const LEADERBOARD: &str = "News leaderboard";
/// How long the browser half may take before it is stopped.
const BROWSER_DEADLINE: Duration = Duration::from_secs(40);

/// A child process, stopped if still running when dropped: SIGTERM first (the driver closes
/// its browser on it), SIGKILL after a grace period.
struct Driver(Child);

impl Driver {
    fn terminate(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Serves `page` at every path but `/favicon.ico` on a loopback port, from a thread that
/// lives as long as the test process. Returns the port.
fn serve_page(page: String) -> u16 {
    serve(move |path| {
        (path != "/favicon.ico").then(|| ("text/html; charset=utf-8", page.clone().into_bytes()))
    })
}

/// Serves what `answer` gives for a request's path (without its query): a content type and
/// body, or `None` for a 404; on a loopback port, from a thread that lives as long as the test
/// process. Returns the port.
fn serve(answer: impl Fn(&str) -> Option<(&'static str, Vec<u8>)> + Send + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&head);
            let target = line.split_whitespace().nth(1).unwrap_or("/");
            let path = target.split('?').next().unwrap_or("/");
            let (status, content_type, body) = match answer(path) {
                Some((content_type, body)) => ("200 OK", content_type, body),
                None => ("404 Not Found", "text/plain", Vec::new()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n\
                 Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
    });
    port
}

/// Runs the click-through driver (`e2e.mjs`) and returns its JSON result; panics with what it
/// saw when it fails.
fn run_driver(
    root: &Path,
    chromium: &Path,
    page_url: &str,
    edge: &str,
    out: &Path,
    click: u64,
) -> Value {
    let click = click.to_string();
    run_node(
        root,
        chromium,
        "e2e.mjs",
        &[page_url, "--edge", edge, "--click", &click],
        out,
    )
}

/// Runs the driver `tests/browser/{script}` with `args` (and `--out`, `--timeout-ms`), and
/// returns its JSON result; panics with what it saw when it fails.
fn run_node(root: &Path, chromium: &Path, script: &str, args: &[&str], out: &Path) -> Value {
    let child = Command::new("node")
        .arg(root.join("tests/browser").join(script))
        .args(args)
        .arg("--out")
        .arg(out)
        // Playwright's fresh browser profile goes there too.
        .env("TMPDIR", out)
        .env("CHROMIUM", chromium)
        .args(["--timeout-ms", "25000"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    let mut driver = Driver(child);
    let mut stdout = driver.0.stdout.take().unwrap();
    let mut stderr = driver.0.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let until = Instant::now() + BROWSER_DEADLINE;
    let status = loop {
        if let Some(status) = driver.0.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > until {
            driver.terminate();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let Some(status) = status else {
        panic!(
            "the browser driver did not finish within {BROWSER_DEADLINE:?} and was stopped\n\
             stdout: {stdout}\nstderr: {stderr}"
        );
    };
    let result: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!(
                "the browser driver printed no JSON ({status})\nstdout: {stdout}\nstderr: {stderr}"
            )
        });
    if !status.success() || result.get("error").is_some() {
        panic!(
            "the browser test failed ({status}): {}\nwhat the driver saw:\n{}\nstderr: {stderr}",
            result["error"],
            serde_json::to_string_pretty(&result).unwrap()
        );
    }
    result
}

fn str_of<'v>(value: &'v Value, what: &str) -> &'v str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what}: expected a string, got {value}"))
}

fn u64_of(value: &Value, what: &str) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: expected a number, got {value}"))
}

/// The events of one kind, by placement.
fn by_placement(events: &[Event], kind: EventKind) -> HashMap<u64, Vec<Event>> {
    let mut map: HashMap<u64, Vec<Event>> = HashMap::new();
    for event in events.iter().filter(|e| e.kind == kind) {
        map.entry(event.placement).or_default().push(*event);
    }
    map
}

/// Serves a publisher page carrying the async tags of the demo's leaderboard and sidebar, as the
/// API hands them out, with `head` in its `<head>`: the page's URL and the two placements'
/// ids (sidebar, leaderboard).
async fn publisher_page(server: &Server, token: &str, head: &str) -> (String, u64, u64) {
    let client = reqwest::Client::new();
    let placements = get_json(&client, &server.url("/api/v1/placements"), Some(token)).await;
    let id_of = |name: &str| {
        placements["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| u64_of(&p["id"], "placement id"))
            .unwrap_or_else(|| panic!("no demo placement {name:?} in {placements}"))
    };
    let (sidebar, leaderboard) = (id_of(SIDEBAR), id_of(LEADERBOARD));
    let url = page_with_tags(server, token, &[leaderboard, sidebar], head).await;
    (url, sidebar, leaderboard)
}

/// Serves a publisher page carrying the async tags of `placements` in this order, as the API
/// hands them out, with `head` in its `<head>`; returns its URL.
async fn page_with_tags(server: &Server, token: &str, placements: &[u64], head: &str) -> String {
    let client = reqwest::Client::new();
    let base = &server.base;
    let mut tags = Vec::new();
    for &id in placements {
        let answer = get_json(
            &client,
            &server.url(&format!("/api/v1/placements/{id}/tags")),
            Some(token),
        )
        .await;
        let tag = str_of(&answer["async"], "async tag").to_owned();
        assert!(
            tag.contains(&format!("src=\"{base}/tag.js\"")),
            "the async tag does not load {base}/tag.js: {tag}"
        );
        tags.push(tag);
    }
    let (first, rest) = tags.split_first().expect("a placement for the page");
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>Daily Planet: an article</title>{head}</head>\n\
         <body style=\"font:16px sans-serif;margin:16px\">\n<h1>Daily Planet</h1>\n{first}\n\
         <p>An article with an ad above and more below; each ad tag includes tag.js.</p>\n{}\n\
         </body></html>\n",
        rest.join("\n")
    );
    format!("http://localhost:{}/article.html", serve_page(page))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn async_tag_in_headless_chromium() {
    let started = Instant::now();
    let (root, chromium, _alone, _scratch, data, out) = headless("marquee-browser-").await;

    // Killed if the test ends without stopping it (a dropped `Server` is).
    let (server, base, token) = demo_for_headless_chromium(&data);
    let client = reqwest::Client::new();

    // The publisher page: the async tags of two placements, as the API hands them out.
    let (page_url, sidebar, leaderboard) = publisher_page(&server, &token, "").await;

    // The browser half.
    let result = run_driver(&root, &chromium, &page_url, &base, &out, sidebar);
    let browser_ms = result["elapsed_ms"].as_u64().unwrap_or(0);

    // One /ad.json request filled both slots, though tag.js ran twice.
    let exchanges = result["ad_json"].as_array().unwrap();
    assert_eq!(
        exchanges.len(),
        1,
        "expected one /ad.json request: {exchanges:#?}"
    );
    let exchange = &exchanges[0];
    assert_eq!(exchange["status"], 200, "/ad.json: {exchange:#}");
    // A page without a consent platform says nothing of the GDPR: the visitor is identified
    // (the user key in the events, checked below).
    let url = str_of(&exchange["url"], "/ad.json url");
    assert!(!url.contains("gdpr"), "{url}");
    let ads = exchange["body"]["ads"]
        .as_array()
        .expect("/ad.json answered ads");
    assert_eq!(ads.len(), 2, "an ad for each placement: {ads:#?}");
    let ad_for = |placement: u64| {
        ads.iter()
            .find(|ad| ad["placement"] == placement)
            .unwrap_or_else(|| panic!("no ad for placement {placement} in {ads:#?}"))
    };

    // The geo demo: without `geo.database`, the demo's geo database places this machine (the
    // browser reaches the edge from loopback) in San Francisco, metro 807, which the geo demo
    // line item targets on the sidebar; the page shows its creative there.
    let line_items = get_json(&client, &server.url("/api/v1/line-items"), Some(&token)).await;
    let geo_demo = id_named(&line_items, GEO_DEMO_LINE_ITEM);
    let sidebar_ad = ad_for(sidebar);
    assert_eq!(
        u64_of(&sidebar_ad["line_item"], "line_item"),
        geo_demo,
        "the sidebar serves the geo demo to a visitor on this machine: {sidebar_ad:#}"
    );
    let geo_creative = u64_of(&sidebar_ad["creative"], "creative");
    let stored = get_json(
        &client,
        &server.url(&format!("/api/v1/creatives/{geo_creative}")),
        Some(&token),
    )
    .await;
    assert_eq!(stored["line_item_id"], geo_demo, "{stored:#}");
    let sidebar_slot = result["slots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|slot| slot["placement"] == sidebar)
        .unwrap_or_else(|| panic!("no sidebar slot: {result:#}"));
    let shown = str_of(&sidebar_slot["ad"]["text"], "sidebar ad text");
    assert!(
        shown.contains("Bay Area city breaks"),
        "the sidebar renders the geo demo's creative: {sidebar_slot:#}"
    );

    // Each slot: filled once, by a sandboxed srcdoc iframe of the creative's size holding the
    // ad (a click link through the edge and a picture or markup) and its impression beacon.
    let slots = result["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 2, "{slots:#?}");
    for slot in slots {
        let placement = u64_of(&slot["placement"], "slot placement");
        let ad = ad_for(placement);
        let what = format!("placement {placement}");
        assert_eq!(slot["state"], "filled", "{what}: {slot:#}");
        assert_eq!(slot["iframes"], 1, "{what}: one iframe per slot: {slot:#}");
        let iframe = &slot["iframe"];
        let sandbox: Vec<&str> = str_of(&iframe["sandbox"], "sandbox")
            .split_whitespace()
            .collect();
        for needed in [
            "allow-scripts",
            "allow-popups",
            "allow-popups-to-escape-sandbox",
        ] {
            assert!(
                sandbox.contains(&needed),
                "{what}: sandbox lacks {needed}: {sandbox:?}"
            );
        }
        for forbidden in ["allow-same-origin", "allow-top-navigation"] {
            assert!(
                !sandbox.contains(&forbidden),
                "{what}: sandbox has {forbidden}: {sandbox:?}"
            );
        }
        assert_eq!(iframe["has_srcdoc"], true, "{what}: {iframe:#}");
        assert_eq!(iframe["width"], ad["width"], "{what}: {iframe:#} vs {ad:#}");
        assert_eq!(
            iframe["height"], ad["height"],
            "{what}: {iframe:#} vs {ad:#}"
        );
        let doc = &slot["ad"];
        assert_eq!(doc["url"], "about:srcdoc", "{what}: {doc:#}");
        assert_eq!(
            doc["origin"], "null",
            "{what}: the ad must run in an opaque origin: {doc:#}"
        );
        let links = doc["links"].as_array().unwrap();
        assert!(
            links
                .iter()
                .any(|l| str_of(&l["href"], "href").starts_with(&format!("{base}/t/c?t="))),
            "{what}: no click link through {base}/t/c: {doc:#}"
        );
        let images = doc["images"].as_array().unwrap();
        let picture = images.iter().any(|i| {
            i["loaded"] == true
                && !str_of(&i["src"], "src").starts_with(&format!("{base}/t/i?"))
                && i["width"].as_u64() > Some(1)
        });
        let markup = !str_of(&doc["text"], "text").is_empty();
        assert!(picture || markup, "{what}: the ad shows nothing: {doc:#}");
        assert!(
            images
                .iter()
                .any(|i| str_of(&i["src"], "src").starts_with(&format!("{base}/t/i?t="))),
            "{what}: no impression beacon: {doc:#}"
        );
    }

    // The beacons: each ad's fired and answered; the repeated one answered the same.
    let beacons = result["beacons"].as_array().unwrap();
    let repeated = str_of(&result["repeat_impression"]["url"], "repeated beacon");
    for beacon in beacons {
        assert_eq!(beacon["status"], 200, "beacon answered: {beacon:#}");
    }
    assert_eq!(beacons.len(), 3, "two beacons and one repeat: {beacons:#?}");
    assert_eq!(
        beacons.iter().filter(|b| b["url"] == repeated).count(),
        2,
        "the repeated beacon was requested twice: {beacons:#?}"
    );
    assert_eq!(
        result["repeat_impression"]["natural_width"], 1,
        "a 1x1 pixel"
    );

    // The clicks: the edge's 302 to the creative's landing URL with the conversion token, whose
    // request the browser then made (and the driver aborted).
    let clicked = ad_for(sidebar);
    let creative = u64_of(&clicked["creative"], "creative");
    let landing = str_of(
        &get_json(
            &client,
            &server.url(&format!("/api/v1/creatives/{creative}")),
            Some(&token),
        )
        .await["landing_url"],
        "landing_url",
    )
    .to_owned();
    let separator = if landing.contains('?') { '&' } else { '?' };
    let clicks = result["clicks"].as_array().unwrap();
    assert_eq!(clicks.len(), 2, "{clicks:#?}");
    for click in clicks {
        assert!(
            str_of(&click["click_url"], "click url").starts_with(&format!("{base}/t/c?t=")),
            "{click:#}"
        );
        assert_eq!(click["status"], 302, "the click redirect: {click:#}");
        let location = str_of(&click["location"], "Location");
        let conversion = location
            .strip_prefix(&format!("{landing}{separator}mq_conv="))
            .unwrap_or_else(|| panic!("Location {location:?} is not {landing:?} + mq_conv"));
        assert!(
            !conversion.is_empty()
                && conversion
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "conversion token {conversion:?}"
        );
        assert_eq!(
            click["next_url"], location,
            "the browser followed the redirect: {click:#}"
        );
        assert_eq!(
            click["next_action"], "aborted",
            "the landing request was intercepted: {click:#}"
        );
        assert_eq!(
            click["popup"], true,
            "the click opened a new page: {click:#}"
        );
    }
    // Nothing but loopback was contacted: requests to other hosts were answered with a
    // stand-in picture (creative images) or aborted (landing pages) inside the browser.
    for request in result["network"].as_array().unwrap() {
        let url = str_of(&request["url"], "request url");
        let loopback = ["http://127.0.0.1:", "http://localhost:"]
            .iter()
            .any(|prefix| url.starts_with(prefix));
        let expected = match str_of(&request["action"], "action") {
            "continued" => loopback,
            "stand-in image" => url.starts_with("https://cdn.example.com/"),
            "aborted" => url.starts_with(&landing),
            _ => false,
        };
        assert!(expected, "unexpected request: {request:#}");
    }

    // The screenshot.
    let shot = PathBuf::from(str_of(&result["screenshot"], "screenshot"));
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        shot.display()
    );

    // The event log, after a graceful stop: one decision, one impression per ad, one click.
    server.stop();
    let events = logged_events(&data);
    let decisions = by_placement(&events, EventKind::Decision);
    let impressions = by_placement(&events, EventKind::Impression);
    let clicks = by_placement(&events, EventKind::Click);
    for placement in [leaderboard, sidebar] {
        let ad = ad_for(placement);
        let (line_item, creative) = (
            u64_of(&ad["line_item"], "line_item"),
            u64_of(&ad["creative"], "creative"),
        );
        let decided = decisions.get(&placement).map_or(&[][..], Vec::as_slice);
        assert_eq!(
            decided.len(),
            1,
            "placement {placement}: decisions {decided:#?}"
        );
        let decision = decided[0];
        assert_eq!(
            (decision.line_item, decision.creative),
            (line_item, creative)
        );
        assert_ne!(
            decision.user, 0,
            "placement {placement}: a user without a CMP"
        );
        let shown = impressions.get(&placement).map_or(&[][..], Vec::as_slice);
        assert_eq!(
            shown.len(),
            1,
            "placement {placement}: one impression event, whatever the beacon repeats: {shown:#?}"
        );
        let impression = shown[0];
        assert_eq!(
            (
                impression.line_item,
                impression.creative,
                impression.event_id
            ),
            (line_item, creative, decision.event_id),
            "placement {placement}: the impression is the decision's"
        );
        // Located by the demo's geo database: loopback is in the United States.
        assert_eq!(
            (&decision.country, &impression.country),
            (b"US", b"US"),
            "placement {placement}: the visitor's country in the log"
        );
    }
    assert_eq!(impressions[&sidebar][0].line_item, geo_demo);
    let clicked_events: Vec<Event> = clicks.values().flatten().copied().collect();
    assert_eq!(
        clicked_events.len(),
        1,
        "one click event for two clicks on one ad: {clicked_events:#?}"
    );
    let click = clicked_events[0];
    let decision = decisions[&sidebar][0];
    assert_eq!(
        (
            click.placement,
            click.line_item,
            click.creative,
            click.event_id
        ),
        (
            sidebar,
            decision.line_item,
            decision.creative,
            decision.event_id
        ),
        "the click is the clicked ad's decision"
    );
    assert!(
        events.iter().all(|e| e.kind != EventKind::Conversion),
        "no conversion: the landing page never loaded"
    );
    eprintln!(
        "browser test: passed in {:?} (browser {browser_ms} ms); screenshot {} (kept with BROWSER_TEST_KEEP=1)",
        started.elapsed(),
        shot.display()
    );
}

/// A CMP's "reject all" (TCF v2, no purpose consented to).
const REJECT_ALL: &str = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA";

/// The async tag on a page whose consent platform (a stand-in for the IAB TCF v2 API) shows its
/// banner and then records the visitor's "reject all": `tag.js` waits for the answer and passes
/// it on, so the edge serves the ads without identifying the visitor: user key 0 in the events
/// (a user key where the page has no CMP, in `async_tag_in_headless_chromium`).
///
/// Whether `mq_uid` was set cannot be seen from here: the driver's interceptor (CDP `Fetch`)
/// is not shown `Set-Cookie`, and over http the browser refuses the edge's `SameSite=Lax` cookie
/// on a cross-site fetch anyway. The header itself is checked in `tests/it/edge.rs`
/// (`only_consent_to_device_storage_identifies_the_visitor`); it goes with the user key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn async_tag_passes_the_cmps_refusal_on() {
    let (root, chromium, _alone, _scratch, data, out) = headless("marquee-browser-consent-").await;
    let (server, base, token) = demo_for_headless_chromium(&data);

    // The CMP answers `addEventListener` at once with its banner shown (no choice yet), and
    // with the refusal 100 ms later, as a visitor clicking "reject all" would.
    let cmp = format!(
        "<script>window.__tcfapi = function (command, version, callback) {{\n\
           if (command !== 'addEventListener') {{ callback(true, true); return; }}\n\
           var data = function (status, tc) {{ return {{ gdprApplies: true, eventStatus: status,\n\
             cmpStatus: 'loaded', listenerId: 1, tcString: tc }}; }};\n\
           callback(data('cmpuishown', ''), true);\n\
           setTimeout(function () {{ callback(data('useractioncomplete', '{REJECT_ALL}'), true); }}, 100);\n\
         }};</script>"
    );
    let (page_url, sidebar, leaderboard) = publisher_page(&server, &token, &cmp).await;
    let result = run_driver(&root, &chromium, &page_url, &base, &out, sidebar);

    let exchanges = result["ad_json"].as_array().unwrap();
    assert_eq!(exchanges.len(), 1, "one /ad.json request: {exchanges:#?}");
    let exchange = &exchanges[0];
    assert_eq!(exchange["status"], 200, "/ad.json: {exchange:#}");
    let url = str_of(&exchange["url"], "/ad.json url");
    assert!(
        url.contains(&format!("&gdpr=1&gdpr_consent={REJECT_ALL}&")),
        "the CMP's answer on the request: {url}"
    );
    let slots = result["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 2, "{slots:#?}");
    assert!(
        slots.iter().all(|slot| slot["state"] == "filled"),
        "the ads are served all the same: {slots:#?}"
    );

    server.stop();
    let events = logged_events(&data);
    for kind in [EventKind::Decision, EventKind::Impression] {
        let by = by_placement(&events, kind);
        for placement in [leaderboard, sidebar] {
            let logged = by.get(&placement).map_or(&[][..], Vec::as_slice);
            assert!(!logged.is_empty(), "{kind:?} on {placement}");
            assert!(
                logged.iter().all(|e| e.user == 0),
                "{kind:?} on {placement} without a user: {logged:#?}"
            );
        }
    }
}

/// Asks for an ad as `request` does until one comes (the test's objects have reached the
/// edge's snapshot), for up to 10 s.
async fn until_served(request: impl Fn() -> reqwest::RequestBuilder) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = common::json_of(request()).await;
        if answer["ads"].as_array().is_some_and(|ads| !ads.is_empty()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the test's line items did not reach the edge in 10 s: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What each headless-Chromium test starts from: the repository root, the Chromium binary
/// (the tools checked), the test's turn (they run one at a time), and a scratch directory named
/// `prefix…` with its data folder and the page driver's output folder.
async fn headless(prefix: &str) -> (PathBuf, PathBuf, Turn, Scratch, PathBuf, PathBuf) {
    let root = repo_root();
    let chromium = require_browser_tools(&root);
    let turn = common::ONE_AT_A_TIME.lock().await;
    let scratch = Scratch::new(prefix);
    let data = scratch.path().join("data");
    let out = scratch.browser();
    (root, chromium, turn, scratch, data, out)
}

/// A headless-Chromium test's hold on [`common::ONE_AT_A_TIME`].
type Turn = tokio::sync::MutexGuard<'static, ()>;

/// [`start_for_headless_chromium`], with the server's base URL and the demo admin token (the
/// edge has its snapshot before the server announces its address).
fn demo_for_headless_chromium(data: &Path) -> (Server, String, String) {
    let server = start_for_headless_chromium(data);
    let base = server.base.clone();
    let token = token_from(&server.stderr_line("demo admin token"));
    (server, base, token)
}

/// `marquee serve --demo` for a headless Chromium (see [`common::crawlers_for_headless_chromium`]).
fn start_for_headless_chromium(data: &Path) -> Server {
    let crawlers = common::crawlers_for_headless_chromium(data);
    Server::start_with(
        data,
        &["--demo"],
        &[("MARQUEE_TRAFFIC__CRAWLERS_FILE", crawlers.as_str())],
    )
}

/// Addresses of the documentation networks (RFC 5737, RFC 3849) that the geo test's database
/// locates, and one it does not: each visit of the geo test forwards one.
const NEW_YORK: &str = "203.0.113.7";
const MUNICH: &str = "198.51.100.23";
const LONDON: &str = "2001:db8::17";
const NOWHERE: &str = "192.0.2.1";

/// The country and region the geo test's database gives `address`, as the event log stores
/// them.
fn location_of(address: &str) -> ([u8; 2], [u8; 3]) {
    match address {
        NEW_YORK => (*b"US", *b"NY\0"),
        MUNICH => (*b"DE", *b"BY\0"),
        LONDON => (*b"GB", *b"ENG"),
        _ => panic!("{address} is located nowhere"),
    }
}

/// An impression as the geo test checks it in the log: line item, country, region.
type LocatedImpression = (u64, ([u8; 2], [u8; 3]));

/// The region of `address` as reports name it (ISO 3166-2).
fn region_code_of(address: &str) -> &'static str {
    match address {
        NEW_YORK => "US-NY",
        MUNICH => "DE-BY",
        LONDON => "GB-ENG",
        _ => panic!("{address} is located nowhere"),
    }
}

fn city(
    country: &str,
    subdivision: &str,
    name: &str,
    metro: Option<u16>,
    postal: &str,
    (lat, lon): (f64, f64),
) -> Location {
    let country = CountryCode::new(country).unwrap();
    Location {
        country: Some(country),
        region: Some(RegionCode::new(country, subdivision).unwrap()),
        city: Some(name.into()),
        metro,
        postal: Some(postal.into()),
        point: Some(Point::new(lat, lon).unwrap()),
        ..Location::default()
    }
}

/// Writes the geo test's City database (GeoIP2's layout) to `path`: New York, Munich and
/// London on documentation networks.
fn write_geo_database(path: &Path) {
    let mut writer = DatabaseWriter::new(
        "Marquee-Test-City",
        "The browser test's locations for documentation networks",
    );
    writer.language("en");
    let networks = [
        (
            "203.0.113.0/24",
            city("US", "NY", "New York", Some(501), "10001", (40.71, -74.00)),
        ),
        (
            "198.51.100.0/24",
            city("DE", "BY", "Munich", None, "80331", (48.14, 11.58)),
        ),
        (
            "2001:db8::/32",
            city("GB", "ENG", "London", None, "EC1A", (51.5074, -0.1278)),
        ),
    ];
    for (network, location) in networks {
        writer
            .insert(network.parse().unwrap(), &city_record(&location))
            .unwrap();
    }
    std::fs::write(path, writer.to_bytes().unwrap()).unwrap();
}

/// A line item of the geo test: its name (its creative shows it), its targeting, and the
/// forwarded addresses it serves.
struct GeoLineItem {
    name: &'static str,
    targeting: Value,
    serves: &'static [&'static str],
}

/// One line item per geo attribute, each on a placement of its own. Each address is served a
/// different set, and each line item has a value its addresses' country shares with one
/// it does not serve (Munich is in DE but not DE-BE; New York has a metro, London none).
fn geo_line_items() -> Vec<GeoLineItem> {
    vec![
        GeoLineItem {
            name: "Country DE or GB",
            targeting: json!({ "country": ["DE", "GB"] }),
            serves: &[MUNICH, LONDON],
        },
        GeoLineItem {
            name: "Region US-NY or DE-BE",
            targeting: json!({ "region": ["US-NY", "DE-BE"] }),
            serves: &[NEW_YORK],
        },
        GeoLineItem {
            name: "City New York or London",
            targeting: json!({ "city": ["New York", "London"] }),
            serves: &[NEW_YORK, LONDON],
        },
        GeoLineItem {
            name: "Metro 501 or 807",
            targeting: json!({ "metro": [501, 807] }),
            serves: &[NEW_YORK],
        },
        GeoLineItem {
            name: "Within 50 km of Munich",
            targeting: json!({ "geo_radius": { "lat": 48.137, "lon": 11.575, "radius_km": 50.0 } }),
            serves: &[MUNICH],
        },
    ]
}

/// Geo targeting from a real browser behind a trusted proxy: `marquee serve` with a City
/// database the test writes (`geo.database`) and `edge.trusted_proxies` naming loopback; a page
/// with five placements, each with one line item targeted by country, region, city, metro or
/// radius (made through the API); visited four times, each visit in a fresh browser context
/// whose requests carry `X-Forwarded-For` with another address (New York, Munich, London, and
/// one the database does not know). Exactly the line items targeting the forwarded address's
/// location serve, every other slot stays empty, and each impression is logged with that
/// address's country.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn forwarded_addresses_serve_exactly_their_geo_line_items() {
    let started = Instant::now();
    let (root, chromium, _alone, scratch, data, out) = headless("marquee-browser-geo-").await;
    let database = scratch.path().join("test-city.mmdb");
    write_geo_database(&database);

    // No demo: the test's objects are the only ones. The admin token is made before the start.
    let token = common::create_admin_token(&data);
    let crawlers = common::crawlers_for_headless_chromium(&data);
    let server = Server::start_with(
        &data,
        &[],
        &[
            ("MARQUEE_GEO__DATABASE", database.to_str().unwrap()),
            ("MARQUEE_EDGE__TRUSTED_PROXIES", "[\"127.0.0.1\", \"::1\"]"),
            ("MARQUEE_TRAFFIC__CRAWLERS_FILE", crawlers.as_str()),
            // The log is read after the report: keep what the aggregation consumed.
            ("MARQUEE_AGGREGATION__DELETE_CONSUMED", "false"),
        ],
    );
    let base = server.base.clone();
    let client = reqwest::Client::new();

    let publisher = create_object(
        &client,
        &server,
        &token,
        "publishers",
        &json!({ "name": "Geo Gazette" }),
    )
    .await;
    let site = create_object(
        &client,
        &server,
        &token,
        "sites",
        &json!({ "publisher_id": publisher, "name": "Geo Gazette", "domain": "geo.example" }),
    )
    .await;
    let advertiser = create_object(
        &client,
        &server,
        &token,
        "advertisers",
        &json!({ "name": "Geo Tours", "currency": "USD", "time_zone": "UTC" }),
    )
    .await;
    let campaign = create_object(
        &client,
        &server,
        &token,
        "campaigns",
        &json!({ "advertiser_id": advertiser, "name": "Everywhere" }),
    )
    .await;
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let line_items = geo_line_items();
    // By placement: the line item's id and its row in `line_items`.
    let mut placements: Vec<(u64, u64, &GeoLineItem)> = Vec::new();
    for item in &line_items {
        let placement = create_object(
            &client,
            &server,
            &token,
            "placements",
            &json!({ "site_id": site, "name": format!("Geo slot: {}", item.name),
                "sizes": [{ "w": 320, "h": 50 }], "formats": ["banner"] }),
        )
        .await;
        let line_item = create_object(
            &client,
            &server,
            &token,
            "line-items",
            &json!({
                "campaign_id": campaign, "name": item.name,
                "start": format!("{today}T00:00:00"), "time_zone": "UTC",
                "tier": "standard", "channels": ["direct"], "pacing": "asap",
                "price": { "model": "cpm", "amount_micros": 2_000_000, "currency": "USD" },
                "targeting": item.targeting,
            }),
        )
        .await;
        let html = format!(
            "<a href=\"{{{{CLICK_URL}}}}\" target=\"_blank\" style=\"display:block;width:320px;\
             height:50px;background:#0f766e;color:#fff;font:bold 16px sans-serif;\
             text-align:center;line-height:50px\">{}</a>\
             <img src=\"{{{{IMPRESSION_URL}}}}\" width=\"1\" height=\"1\" alt=\"\">",
            item.name
        );
        create_object(
            &client,
            &server,
            &token,
            "creatives",
            &json!({ "line_item_id": line_item, "name": item.name, "size": { "w": 320, "h": 50 },
                "landing_url": "https://geo.example/", "content": { "type": "html", "html": html } }),
        )
        .await;
        let link = server.url(&format!(
            "/api/v1/line-items/{line_item}/placements/{placement}"
        ));
        common::put_ok(&client, &link, &token).await;
        placements.push((placement, line_item, item));
    }

    // The last link is in a snapshot the edge serves once Munich gets the radius line item:
    // every object before it is in that snapshot too.
    let (last, ..) = placements[placements.len() - 1];
    let probe = server.url(&format!("/ad.json?p={last}"));
    until_served(|| client.get(&probe).header("x-forwarded-for", MUNICH)).await;

    let ids: Vec<u64> = placements.iter().map(|(p, ..)| *p).collect();
    let page_url = page_with_tags(&server, &token, &ids, "").await;
    let visits = [NEW_YORK, MUNICH, LONDON, NOWHERE];
    let mut args = vec![page_url.as_str(), "--edge", base.as_str()];
    for address in visits {
        args.extend(["--visit", address]);
    }
    let result = run_node(&root, &chromium, "geo.mjs", &args, &out);
    let browser_ms = result["elapsed_ms"].as_u64().unwrap_or(0);

    let visited = result["visits"].as_array().unwrap();
    assert_eq!(visited.len(), visits.len(), "{result:#}");
    for (visit, address) in visited.iter().zip(visits) {
        assert_eq!(visit["address"], address);
        let expected: BTreeMap<u64, u64> = placements
            .iter()
            .filter(|(.., item)| item.serves.contains(&address))
            .map(|(placement, line_item, _)| (*placement, *line_item))
            .collect();

        // One /ad.json request for the five slots, answered with exactly the matching ads.
        let exchanges = visit["ad_json"].as_array().unwrap();
        assert_eq!(exchanges.len(), 1, "{address}: {visit:#}");
        assert_eq!(exchanges[0]["status"], 200, "{address}: {visit:#}");
        let served: BTreeMap<u64, u64> = exchanges[0]["body"]["ads"]
            .as_array()
            .unwrap_or_else(|| panic!("{address}: no ads in {:#}", exchanges[0]))
            .iter()
            .map(|ad| {
                (
                    u64_of(&ad["placement"], "placement"),
                    u64_of(&ad["line_item"], "line_item"),
                )
            })
            .collect();
        assert_eq!(
            served, expected,
            "{address}: the ads served (placement → line item)"
        );

        // On the page: the matching slots show their line item's creative, the others are
        // empty.
        let slots = visit["slots"].as_array().unwrap();
        assert_eq!(slots.len(), placements.len(), "{address}: {slots:#?}");
        for slot in slots {
            let placement = u64_of(&slot["placement"], "slot placement");
            let (.., item) = placements
                .iter()
                .find(|(p, ..)| *p == placement)
                .unwrap_or_else(|| panic!("{address}: a slot of no test placement: {slot:#}"));
            if expected.contains_key(&placement) {
                assert_eq!(slot["state"], "filled", "{address}: {slot:#}");
                assert_eq!(slot["iframes"], 1, "{address}: {slot:#}");
                assert_eq!(
                    str_of(&slot["ad"]["text"], "ad text"),
                    item.name,
                    "{address}: {slot:#}"
                );
            } else {
                assert_eq!(slot["state"], "empty", "{address}: {slot:#}");
                assert_eq!(slot["iframes"], 0, "{address}: {slot:#}");
            }
        }
        let beacons = visit["beacons"].as_array().unwrap();
        assert_eq!(beacons.len(), expected.len(), "{address}: {beacons:#?}");
        assert!(
            beacons.iter().all(|b| b["status"] == 200),
            "{address}: {beacons:#?}"
        );
        // Only loopback was contacted.
        for request in visit["requests"].as_array().unwrap() {
            assert_eq!(
                request["action"], "continued",
                "{address}: a request to another host: {request:#}"
            );
        }
    }

    // The report by region: one impression per served ad in its address's region, once the
    // aggregation (every second) has counted them all.
    let mut expected_regions: Vec<(String, u64)> = Vec::new();
    for address in placements.iter().flat_map(|(.., item)| item.serves.iter()) {
        let code = region_code_of(address);
        match expected_regions.iter_mut().find(|(c, _)| c == code) {
            Some((_, count)) => *count += 1,
            None => expected_regions.push((code.to_owned(), 1)),
        }
    }
    expected_regions.sort();
    let served: u64 = expected_regions.iter().map(|(_, n)| n).sum();
    let report_url = server.url(&format!(
        "/api/v1/reports?from={today}&granularity=day&tz=UTC&group_by=region"
    ));
    let mut report = Value::Null;
    for _ in 0..300 {
        report = get_json(&client, &report_url, Some(&token)).await;
        if report["totals"]["impressions"].as_u64() == Some(served) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut regions: Vec<(String, u64)> = report["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("a report: {report:#}"))
        .iter()
        .filter(|row| row["impressions"].as_u64() > Some(0))
        .map(|row| {
            (
                str_of(&row["region"], "region").to_owned(),
                u64_of(&row["impressions"], "impressions"),
            )
        })
        .collect();
    regions.sort();
    assert_eq!(
        regions, expected_regions,
        "impressions by region: {report:#}"
    );

    // The log: one impression per served ad, with the forwarded address's country and region.
    server.stop();
    let mut logged: Vec<LocatedImpression> = logged_events(&data)
        .iter()
        .filter(|e| e.kind == EventKind::Impression)
        .map(|e| (e.line_item, (e.country, e.region)))
        .collect();
    logged.sort_unstable();
    let mut expected: Vec<LocatedImpression> = placements
        .iter()
        .flat_map(|(_, line_item, item)| {
            item.serves
                .iter()
                .map(move |address| (*line_item, location_of(address)))
        })
        .collect();
    expected.sort_unstable();
    assert_eq!(logged, expected, "impressions (line item, country, region)");
    eprintln!(
        "browser geo test: passed in {:?} (browser {browser_ms} ms for {} visits)",
        started.elapsed(),
        visits.len()
    );
}

/// What the test's bidder answers for a placement: its bid's CPM (none: no bid) and how long
/// it waits first.
#[derive(Clone, Copy)]
struct MockBid {
    price: &'static str,
    delay: Duration,
}

/// An OpenRTB bidder on a loopback port, from a thread that lives as long as the test process:
/// it bids on each request's imp by its `tagid` (the placement id) as `bids` says, with markup
/// reading `Programmatic bid <price>`. Returns its endpoint.
fn mock_bidder(bids: std::sync::Arc<std::sync::Mutex<HashMap<String, MockBid>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let bids = std::sync::Arc::clone(&bids);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let body_at = loop {
                    if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        break end + 4;
                    }
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&data[..body_at]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while data.len() < body_at + length {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                }
                let request: Value =
                    serde_json::from_slice(&data[body_at..body_at + length]).unwrap_or_default();
                let tagid = request["imp"][0]["tagid"].as_str().unwrap_or_default();
                let bid = bids.lock().unwrap().get(tagid).copied();
                let answer = match bid {
                    Some(MockBid { price, delay }) => {
                        std::thread::sleep(delay);
                        json!({
                            "id": request["id"],
                            "seatbid": [{ "seat": "mockseat", "bid": [{
                                "id": "b1", "impid": "1", "price": price.parse::<f64>().unwrap(),
                                "adm": format!("<div style=\"width:300px;height:250px;background:#7c3aed;color:#fff;font:bold 18px sans-serif;line-height:250px;text-align:center\">Programmatic bid {price}</div>"),
                                "w": 300, "h": 250,
                            }]}],
                        })
                        .to_string()
                    }
                    None => String::new(),
                };
                let status = if answer.is_empty() {
                    "204 No Content"
                } else {
                    "200 OK"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            });
        }
    });
    format!("http://{address}/bid")
}

/// The unified auction in a browser: `marquee serve` with gateway mode and the test's bidder,
/// and a page of four 300×250 placements with programmatic demand (a 1 s auction), each with
/// its own line item at a 2.00 CPM: a remnant one against a 3.00 bid (the bid's ad shows), a
/// remnant one against a 1.00 bid (the line item's), a remnant one against a 9.00 bid 10 s
/// late (the line item's, the bidder timed out), and a sponsorship that does not compete
/// against a 50.00 bid (the sponsorship's, no auction). Then the report has both sides: three
/// direct impressions, one programmatic impression worth 0.003 (3.00 CPM), by placement and by
/// bidder; and an ad request to the slow bidder's placement is answered well before its 10 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn unified_auction_in_headless_chromium() {
    let started = Instant::now();
    let (root, chromium, _alone, scratch, data, out) = headless("marquee-browser-unified-").await;

    let bids = std::sync::Arc::new(std::sync::Mutex::new(HashMap::new()));
    let endpoint = mock_bidder(std::sync::Arc::clone(&bids));
    let config = scratch.path().join("marquee.toml");
    std::fs::write(
        &config,
        format!("[gateway]\nenabled = true\n[gateway.bidders.mock]\nendpoint = \"{endpoint}\"\n"),
    )
    .unwrap();
    let token = common::create_admin_token(&data);
    let crawlers = common::crawlers_for_headless_chromium(&data);
    let server = Server::start_with(
        &data,
        &["--config", config.to_str().unwrap()],
        &[("MARQUEE_TRAFFIC__CRAWLERS_FILE", crawlers.as_str())],
    );
    let base = server.base.clone();
    let client = reqwest::Client::new();
    let post = |path: &'static str, body: Value| {
        let (client, server, token) = (&client, &server, &token);
        async move { create_object(client, server, token, path, &body).await }
    };

    let publisher = post("publishers", json!({ "name": "Unified Daily" })).await;
    let site = post(
        "sites",
        json!({ "publisher_id": publisher, "name": "Unified Daily", "domain": "unified.example" }),
    )
    .await;
    let advertiser = post(
        "advertisers",
        json!({ "name": "Direct Shoes", "currency": "USD", "time_zone": "UTC" }),
    )
    .await;
    let campaign = post(
        "campaigns",
        json!({ "advertiser_id": advertiser, "name": "Direct" }),
    )
    .await;
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    // Name, tier, the bidder's answer; last a placement without programmatic demand, the
    // probe: once it serves, every object before it is in the edge's snapshot (so no request
    // before the browser's meets a placement whose line item is not there yet).
    let slots = [
        ("Remnant against 3.00", "remnant", "3.00", Duration::ZERO),
        ("Remnant against 1.00", "remnant", "1.00", Duration::ZERO),
        (
            "Remnant against a late 9.00",
            "remnant",
            "9.00",
            Duration::from_secs(10),
        ),
        ("Sponsorship", "sponsorship", "50.00", Duration::ZERO),
        ("Probe", "remnant", "", Duration::ZERO),
    ];
    let mut placements = Vec::new();
    for (name, tier, price, delay) in slots {
        let mut placement = json!({ "site_id": site, "name": name,
            "sizes": [{ "w": 300, "h": 250 }], "formats": ["banner"] });
        if !price.is_empty() {
            placement["programmatic"] = json!({ "bidders": ["mock"], "timeout_ms": 1_000 });
        }
        let placement = post("placements", placement).await;
        bids.lock()
            .unwrap()
            .insert(placement.to_string(), MockBid { price, delay });
        let line_item = json!({
            "campaign_id": campaign, "name": name,
            "start": format!("{today}T00:00:00"), "time_zone": "UTC",
            "tier": tier, "channels": ["direct"], "pacing": "asap",
            "price": { "model": "cpm", "amount_micros": 2_000_000, "currency": "USD" },
        });
        let line_item = post("line-items", line_item).await;
        let html = format!(
            "<a href=\"{{{{CLICK_URL}}}}\" target=\"_blank\" style=\"display:block;width:300px;\
             height:250px;background:#0f766e;color:#fff;font:bold 18px sans-serif;\
             text-align:center;line-height:250px\">{name}</a>\
             <img src=\"{{{{IMPRESSION_URL}}}}\" width=\"1\" height=\"1\" alt=\"\">"
        );
        post(
            "creatives",
            json!({ "line_item_id": line_item, "name": name, "size": { "w": 300, "h": 250 },
                "landing_url": "https://unified.example/",
                "content": { "type": "html", "html": html } }),
        )
        .await;
        let link = server.url(&format!(
            "/api/v1/line-items/{line_item}/placements/{placement}"
        ));
        common::put_ok(&client, &link, &token).await;
        placements.push(placement);
    }
    let [high, low, slow, sponsored, probe] = placements[..] else {
        unreachable!()
    };
    let placements = &placements[..4];
    // No goal, so no lease to wait for: each line item serves once it is in the snapshot.
    let probe_url = server.url(&format!("/ad.json?p={probe}"));
    until_served(|| client.get(&probe_url)).await;

    let page_url = page_with_tags(&server, &token, placements, "").await;
    let args = [
        page_url.as_str(),
        "--edge",
        base.as_str(),
        "--visit",
        "192.0.2.1",
    ];
    let result = run_node(&root, &chromium, "geo.mjs", &args, &out);
    let visit = &result["visits"][0];
    let shown: HashMap<u64, String> = visit["slots"]
        .as_array()
        .unwrap_or_else(|| panic!("no slots: {result:#}"))
        .iter()
        .map(|slot| {
            assert_eq!(slot["state"], "filled", "{slot:#}");
            (
                u64_of(&slot["placement"], "slot placement"),
                str_of(&slot["ad"]["text"], "ad text").to_owned(),
            )
        })
        .collect();
    assert_eq!(shown[&high], "Programmatic bid 3.00", "{visit:#}");
    assert_eq!(shown[&low], "Remnant against 1.00", "{visit:#}");
    assert_eq!(shown[&slow], "Remnant against a late 9.00", "{visit:#}");
    assert_eq!(shown[&sponsored], "Sponsorship", "{visit:#}");
    let beacons = visit["beacons"].as_array().unwrap();
    assert_eq!(beacons.len(), 4, "{beacons:#?}");
    assert!(beacons.iter().all(|b| b["status"] == 200), "{beacons:#?}");

    // The report, once the aggregation (every second) has counted the four impressions: the
    // direct ones and the bid's, with its revenue, by placement and by bidder.
    let report_url = |group_by: &str| {
        server.url(&format!(
            "/api/v1/reports?from={today}&granularity=day&tz=UTC&group_by={group_by}"
        ))
    };
    let mut report = Value::Null;
    for _ in 0..300 {
        report = get_json(&client, &report_url("placement"), Some(&token)).await;
        let totals = &report["totals"];
        if totals["impressions"].as_u64() == Some(3)
            && totals["programmatic_impressions"].as_u64() == Some(1)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let totals = &report["totals"];
    assert_eq!(totals["impressions"], 3, "{report:#}");
    assert_eq!(totals["spend"], "0.006000", "{report:#}");
    assert_eq!(totals["programmatic_impressions"], 1, "{report:#}");
    assert_eq!(totals["programmatic_revenue"], "0.003000", "{report:#}");
    assert_eq!(report["programmatic_currency"], "USD");
    let row = |placement: u64| {
        report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["placement"] == placement)
            .unwrap_or_else(|| panic!("placement {placement} in {report:#}"))
    };
    // (auctions, bid wins, direct wins, timeouts, direct impressions)
    let outcome = |placement: u64| {
        let r = row(placement);
        [
            "programmatic_auctions",
            "programmatic_wins",
            "programmatic_direct_wins",
            "programmatic_timeouts",
            "impressions",
        ]
        .map(|field| u64_of(&r[field], field))
    };
    assert_eq!(outcome(high), [1, 1, 0, 0, 0], "{report:#}");
    assert_eq!(outcome(low), [1, 0, 1, 0, 1], "{report:#}");
    assert_eq!(outcome(slow), [1, 0, 1, 1, 1], "{report:#}");
    assert_eq!(outcome(sponsored), [0, 0, 0, 0, 1], "{report:#}");
    assert_eq!(row(high)["fill_rate"], 1.0, "{report:#}");
    assert_eq!(row(sponsored)["fill_rate"], Value::Null, "{report:#}");

    let by_bidder = get_json(&client, &report_url("bidder"), Some(&token)).await;
    let mock = by_bidder["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["bidder_name"] == "mock")
        .unwrap_or_else(|| panic!("the bidder in {by_bidder:#}"));
    assert_eq!(mock["programmatic_requests"], 3, "{by_bidder:#}");
    assert_eq!(mock["programmatic_bids"], 2, "{by_bidder:#}");
    assert_eq!(mock["programmatic_timeouts"], 1, "{by_bidder:#}");
    assert_eq!(mock["programmatic_wins"], 1, "{by_bidder:#}");
    assert_eq!(mock["programmatic_revenue"], "0.003000", "{by_bidder:#}");

    // The late bidder never holds the answer past the placement's timeout: its ad request is
    // answered, with the line item, long before the bid's 10 s.
    let asked = Instant::now();
    let answer = common::json_of(client.get(server.url(&format!("/ad.json?p={slow}")))).await;
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(answer["ads"][0]["placement"], slow, "{answer}");
    assert_ne!(
        answer["ads"][0]["line_item"], 0,
        "the line item's: {answer}"
    );
    server.stop();
    eprintln!(
        "browser unified auction test: passed in {:?} (browser {} ms)",
        started.elapsed(),
        result["elapsed_ms"]
    );
}

/// The Prebid test's publisher site: the page (`tests/browser/prebid-page.html`, with the edge
/// and the placement filled in), Prebid.js's prebuilt file from `tests/browser/node_modules`,
/// and the mock bidder's endpoint (answering `{}`). Returns the port.
fn serve_prebid_site(root: &Path, edge: &str, placement: u64) -> u16 {
    let browser = root.join("tests/browser");
    let read = |path: &str| {
        std::fs::read(browser.join(path)).unwrap_or_else(|e| {
            panic!("{path}: {e} (scripts/test-deps.sh runs npm ci in tests/browser)")
        })
    };
    let page = String::from_utf8(read("prebid-page.html"))
        .unwrap()
        .replace("EDGE_BASE_URL", edge)
        .replace("PLACEMENT_ID", &placement.to_string());
    let prebid = read("node_modules/prebid.js/dist/not-for-prod/prebid.js");
    let script = "application/javascript; charset=utf-8";
    serve(move |path| match path {
        "/article.html" => Some(("text/html; charset=utf-8", page.clone().into_bytes())),
        "/prebid.js" => Some((script, prebid.clone())),
        "/mock-bid" => Some(("application/json", b"{}".to_vec())),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn prebid_bids_win_through_their_price_bucket_line_items() {
    let (root, chromium, _alone, _scratch, data, out) = headless("marquee-browser-prebid-").await;
    let data_arg = data.to_str().unwrap().to_owned();

    // No demo: the test's objects are the only ones.
    let token = common::create_admin_token(&data);
    let crawlers = common::crawlers_for_headless_chromium(&data);
    let server = Server::start_with(
        &data,
        &[],
        &[("MARQUEE_TRAFFIC__CRAWLERS_FILE", crawlers.as_str())],
    );
    let base = server.base.clone();
    let client = reqwest::Client::new();
    let create = |path: &'static str, body: Value| {
        let (client, server, token) = (&client, &server, &token);
        async move { create_object(client, server, token, path, &body).await }
    };
    let publisher = create("publishers", json!({ "name": "Daily Planet" })).await;
    let site = create(
        "sites",
        json!({ "publisher_id": publisher, "name": "Daily Planet", "domain": "planet.example" }),
    )
    .await;
    let placement = create(
        "placements",
        json!({ "site_id": site, "name": "Article rectangle",
            "sizes": [{ "w": 300, "h": 250 }], "formats": ["banner"] }),
    )
    .await;
    let advertiser = create(
        "advertisers",
        json!({ "name": "Planet direct sales", "currency": "USD", "time_zone": "UTC" }),
    )
    .await;
    let campaign = create(
        "campaigns",
        json!({ "advertiser_id": advertiser, "name": "Header bidding" }),
    )
    .await;
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let start = format!("{today}T00:00:00");

    // A direct line item at 3.00 in the price-priority tier, beside the Prebid set.
    let direct = create(
        "line-items",
        json!({
            "campaign_id": campaign, "name": "Direct remnant at 3.00", "start": start,
            "time_zone": "UTC", "tier": "remnant", "pacing": "asap",
            "price": { "model": "cpm", "amount": "3.00", "currency": "USD" },
        }),
    )
    .await;
    create(
        "creatives",
        json!({ "line_item_id": direct, "name": "Direct 300x250", "size": { "w": 300, "h": 250 },
            "landing_url": "https://planet.example/offer",
            "content": { "type": "html", "html": "<a href=\"{{CLICK_URL}}\" target=\"_blank\" \
                style=\"font:20px sans-serif\">Direct ad at 3.00</a>" } }),
    )
    .await;
    let link = server.url(&format!(
        "/api/v1/line-items/{direct}/placements/{placement}"
    ));
    common::put_ok(&client, &link, &token).await;

    // The Prebid set, from the command line.
    let (campaign_arg, placement_arg) = (campaign.to_string(), placement.to_string());
    let made = common::run(
        &[
            "prebid",
            "create-set",
            "--data",
            &data_arg,
            "--campaign",
            &campaign_arg,
            "--granularity",
            "low",
            "--placement",
            &placement_arg,
            "--size",
            "300x250",
            "--landing-url",
            "https://planet.example/",
            "--start",
            &start,
        ],
        &[],
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let set: Value = serde_json::from_slice(&made.stdout).unwrap();
    assert_eq!(set["line_items_created"], 10, "{set:#}");
    let bucket = |text: &str| {
        set["line_items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["hb_pb"] == text)
            .map(|l| u64_of(&l["id"], "line item id"))
            .unwrap_or_else(|| panic!("no bucket {text} in {set:#}"))
    };
    let four = bucket("4.00");

    // The set is in the edge's snapshot once its 4.00 line item answers hb_pb=4.00.
    let probe = server.url(&format!(
        "/ad.json?p={placement}&kv=hb_pb:4.00&kv=hb_adid:probe&gdpr=1"
    ));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = common::json_of(client.get(&probe)).await;
        if answer["ads"][0]["line_item"] == four {
            // The ad id reached the creative's markup.
            let html = str_of(&answer["ads"][0]["html"], "html");
            assert!(html.contains("var adId = \"probe\";"), "{html}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Prebid set never reached the edge: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Two visits to the publisher's page: the mock bidder bids 4.20 (bucket 4.00, above the direct 3.00: the bid
    // renders), then 2.60 (bucket 2.50: the direct line item serves).
    let port = serve_prebid_site(&root, &base, placement);
    let page = format!("http://localhost:{port}/article.html");
    let (high, low) = (format!("{page}?cpm=4.20"), format!("{page}?cpm=2.60"));
    let result = run_node(
        &root,
        &chromium,
        "prebid.mjs",
        &[
            "--edge",
            &base,
            &high,
            "Prebid winner at 4.20",
            &low,
            "Direct ad at 3.00",
        ],
        &out,
    );
    let visits = result["visits"].as_array().unwrap();
    assert_eq!(visits.len(), 2, "{result:#}");
    for (visit, bucket_text, line_item, shown, not_shown) in [
        (
            &visits[0],
            "4.00",
            four,
            "Prebid winner at 4.20",
            "Direct ad",
        ),
        (
            &visits[1],
            "2.50",
            direct,
            "Direct ad at 3.00",
            "Prebid winner",
        ),
    ] {
        let what = str_of(&visit["url"], "url");
        let slot = &visit["slot"];
        assert_eq!(slot["state"], "filled", "{what}: {visit:#}");
        // Prebid's targeting went to the tag as key-values.
        assert_eq!(slot["key_values"]["hb_pb"], bucket_text, "{what}: {slot:#}");
        assert_eq!(slot["key_values"]["hb_bidder"], "mock", "{what}: {slot:#}");
        let sandbox = str_of(&slot["sandbox"], "sandbox");
        assert!(
            sandbox.contains("allow-scripts") && !sandbox.contains("allow-same-origin"),
            "{what}: {sandbox}"
        );
        let exchanges = visit["ad_json"].as_array().unwrap();
        assert_eq!(exchanges.len(), 1, "{what}: {exchanges:#?}");
        let url = str_of(&exchanges[0]["url"], "/ad.json url");
        assert!(
            url.contains(&format!("kv=hb_pb%3A{bucket_text}")),
            "{what}: {url}"
        );
        let ad = &exchanges[0]["body"]["ads"][0];
        assert_eq!(ad["line_item"], line_item, "{what}: {ad:#}");
        let frames = visit["frames"].as_array().unwrap();
        let shows = |text: &str| {
            frames
                .iter()
                .any(|f| str_of(&f["text"], "frame text").contains(text))
        };
        assert!(shows(shown), "{what}: {frames:#?}");
        assert!(!shows(not_shown), "{what}: {frames:#?}");
    }
    // Nothing tried to leave the machine: no Prebid module, no creative.
    let left_machine: Vec<&Value> = result["network"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] != "continued")
        .collect();
    assert!(left_machine.is_empty(), "{left_machine:#?}");
    server.stop();
}
