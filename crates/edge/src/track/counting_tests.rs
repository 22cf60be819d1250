//! Counting tracking calls and notices: only once the log has them (a retry of one the log
//! refused counts; a strict-mode event is settled even when its client hangs up), clicks with
//! their conversion token in the landing URL's query and counted only when redirected, image
//! tag fetches deduped within their window, and the replay guards' overflows exported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::pin::pin;
use std::task::{Context, Waker};
use std::time::Duration;

use marquee_eventlog::{Durability, EventLog};
use marquee_model::{
    CapWindow, Currency, FrequencyCap, Goal, GoalMetric, LineItemId, PricingModel,
};
use marquee_snapshot::{Content, LineItemEntry, fixtures};
use marquee_tracking::KeyRing;

use hyper::StatusCode;
use hyper::header::{self, HeaderValue};
use marquee_snapshot::CreativeEntry;

use super::click::CONVERSION_PARAMETER;
use super::*;
use crate::notice::{self, NoticeClaims, NoticeKind};
use crate::{EdgeConfig, Fallback, Limits};

/// A client the screen passes: no address, no headers.
fn anonymous() -> Client<'static> {
    static NO_HEADERS: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);
    Client::of(None, &hyper::Method::GET, &NO_HEADERS, &[])
}

const LINE_ITEM: u64 = 10;
const PLACEMENT: u64 = 5;
const LIFETIME: u32 = 600;

fn open_log(dir: &Path, strict: bool) -> EventLog {
    let interval = Duration::from_millis(5);
    let durability = if strict {
        Durability::Strict { interval }
    } else {
        Durability::Group { interval }
    };
    EventLog::open(
        dir,
        marquee_eventlog::Config {
            durability,
            ..marquee_eventlog::Config::default()
        },
    )
    .unwrap()
}

/// A log that refuses every append, as a shard stopped on a full disk does.
fn refusing_log(dir: &Path) -> EventLog {
    let log = open_log(dir, false);
    log.flush_and_close().unwrap();
    log
}

/// A snapshot with one CPM line item (an impression goal, so it has a budget lease, and a
/// frequency cap) and a creative per landing URL, ids 11, 12, …
fn snapshot(landings: &[&str]) -> Vec<u8> {
    snapshot_of(landings, |_| {})
}

/// [`snapshot`] with its line item changed by `change`.
fn snapshot_of(landings: &[&str], change: impl FnOnce(&mut LineItemEntry)) -> Vec<u8> {
    let mut line_item = LineItemEntry {
        goal: Some(Goal {
            metric: GoalMetric::Impressions,
            daily: None,
            lifetime: Some(1_000_000),
        }),
        price: fixtures::cpm(2_000_000),
        frequency_caps: vec![FrequencyCap {
            count: 3,
            window: CapWindow::from_seconds(3_600).unwrap(),
        }],
        ..fixtures::line_item(LINE_ITEM)
    };
    change(&mut line_item);
    let creatives = landings
        .iter()
        .zip(11..)
        .map(|(landing, id)| CreativeEntry {
            landing_url: (*landing).to_owned(),
            weight: 1,
            content: Content::Html {
                html: "<p>ad</p>".into(),
            },
            ..fixtures::html_creative(id, LINE_ITEM)
        })
        .collect();
    fixtures::snapshot(Timestamp::now(), vec![line_item], creatives)
        .encode_with_header()
        .1
}

fn new_edge(dir: &Path, log: EventLog, landings: &[&str]) -> Edge {
    new_edge_with(dir, log, &snapshot(landings))
}

fn new_edge_with(dir: &Path, log: EventLog, snapshot: &[u8]) -> Edge {
    let keys = KeyRing::new(1, [(1u8, &[9u8; 32][..])]).unwrap();
    let edge = Edge::new(
        EdgeConfig {
            public_url: "http://127.0.0.1".into(),
            token_lifetime: Duration::from_secs(u64::from(LIFETIME)),
            fallback: Fallback::Empty,
            cookies: false,
            country_header: None,
            data_dir: dir.join("edge"),
            limits: Limits::default(),
        },
        Arc::new(log),
        keys,
    );
    edge.accept_snapshot(snapshot).unwrap();
    edge
}

fn claims(kind: TokenKind, creative: u64, user: u64, nonce: u64) -> Claims {
    Claims {
        kind,
        line_item: LINE_ITEM,
        creative,
        placement: std::num::NonZeroU64::new(PLACEMENT),
        user,
        issued_at: Timestamp::now().as_second(),
        lifetime: LIFETIME,
        nonce,
        amount_micros: None,
    }
}

fn token_query(edge: &Edge, claims: &Claims) -> String {
    format!("t={}", edge.keys.sign(claims))
}

fn load(counter: &marquee_metrics::Counter) -> u64 {
    counter.get()
}

/// What this edge settled of the line item's reservations (its impressions).
fn settled(edge: &Edge) -> u64 {
    edge.pacing.resend_settlements();
    edge.pacing
        .releases()
        .settlements
        .iter()
        .filter(|s| s.line_item == LineItemId(LINE_ITEM))
        .map(|s| s.settled)
        .sum()
}

/// What the line item's budget lease was charged on this edge.
fn charged(edge: &Edge) -> u64 {
    edge.pacing
        .releases()
        .releases
        .iter()
        .filter(|r| r.line_item == LineItemId(LINE_ITEM))
        .map(|r| r.consumed)
        .sum()
}

fn location(answer: &Response<Body>) -> String {
    answer
        .headers()
        .get(header::LOCATION)
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_beacon_the_log_refused_is_not_counted_and_counts_when_fired_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut edge = Arc::new(new_edge(
        dir.path(),
        refusing_log(&dir.path().join("refusing")),
        &["https://shop.example/"],
    ));
    let query = token_query(&edge, &claims(TokenKind::Impression, 11, 77, 1));
    let headers = HeaderMap::new();
    let counters = |edge: &Edge| {
        let s = &edge.counters;
        (load(&s.impressions), load(&s.log_errors), load(&s.repeats))
    };

    let answer = track(&edge, TokenKind::Impression, &query, &headers, &anonymous()).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(counters(&edge), (0, 1, 0), "(counted, log errors, repeats)");
    assert_eq!(
        edge.caps.len(),
        0,
        "no cap recorded for an event not logged"
    );
    assert_eq!(settled(&edge), 0, "nothing settled for an event not logged");

    // Space is back; the browser fires the beacon again.
    Arc::get_mut(&mut edge).unwrap().log = Arc::new(open_log(&dir.path().join("events"), false));
    track(&edge, TokenKind::Impression, &query, &headers, &anonymous()).await;
    assert_eq!(counters(&edge), (1, 1, 0), "the retry counts");
    assert_eq!(edge.log.counters().appended, 1);
    assert_eq!(edge.caps.len(), 1, "the cap is recorded");
    assert_eq!(settled(&edge), 1, "its reservation is settled");

    // Once.
    track(&edge, TokenKind::Impression, &query, &headers, &anonymous()).await;
    assert_eq!(counters(&edge), (1, 1, 1));
    assert_eq!(settled(&edge), 1);
}

#[tokio::test]
async fn a_strict_beacon_is_charged_and_capped_even_if_its_client_hangs_up_during_the_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let edge = Arc::new(new_edge(
        dir.path(),
        open_log(&events, true),
        &["https://shop.example/"],
    ));
    let headers = HeaderMap::new();
    let sent = 50;
    let mut hung_up = 0;
    for nonce in 1..=sent {
        // A user each, so that every cap recorded is an entry of its own.
        let query = token_query(
            &edge,
            &claims(TokenKind::Impression, 11, 1_000 + nonce, nonce),
        );
        let client = anonymous();
        let mut request = pin!(track(
            &edge,
            TokenKind::Impression,
            &query,
            &headers,
            &client
        ));
        if request
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
        {
            // Waiting for the fsync: dropped here, as hyper drops the handler of a client
            // that went away.
            hung_up += 1;
        }
    }
    assert!(
        hung_up > 0,
        "every fsync was done before the first poll: nothing was tested"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while load(&edge.counters.impressions) < sent && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        load(&edge.counters.impressions),
        sent,
        "{hung_up} of {sent} clients hung up"
    );
    assert_eq!(edge.log.counters().appended, sent);
    assert_eq!(settled(&edge), sent, "every logged impression is settled");
    assert_eq!(
        edge.caps.len(),
        usize::try_from(sent).unwrap(),
        "and capped"
    );
}

#[tokio::test]
async fn a_click_s_conversion_token_goes_into_the_query_before_the_fragment() {
    let dir = tempfile::tempdir().unwrap();
    let landings = [
        "https://shop.example/p#offer",
        "https://shop.example/p?a=1&b=%20#offer",
        "https://shop.example",
    ];
    let edge = Arc::new(new_edge(
        dir.path(),
        open_log(&dir.path().join("events"), false),
        &landings,
    ));
    let expected = [
        "https://shop.example/p?mq_conv={}#offer",
        "https://shop.example/p?a=1&b=%20&mq_conv={}#offer",
        "https://shop.example/?mq_conv={}",
    ];
    for (nonce, (creative, expected)) in (11..).zip(expected).enumerate() {
        let click = claims(TokenKind::Click, creative, 77, nonce as u64);
        let query = token_query(&edge, &click);
        let answer = track(
            &edge,
            TokenKind::Click,
            &query,
            &HeaderMap::new(),
            &anonymous(),
        )
        .await;
        assert_eq!(answer.status(), StatusCode::FOUND);
        let location = location(&answer);
        let url = url::Url::parse(&location).unwrap();
        let token = url
            .query_pairs()
            .find(|(key, _)| key == CONVERSION_PARAMETER)
            .map(|(_, token)| token.into_owned())
            .unwrap_or_else(|| panic!("no conversion token in the query of {location}"));
        assert_eq!(location, expected.replace("{}", &token));
        let conversion = edge
            .keys
            .verify_kind(&token, TokenKind::Conversion, Timestamp::now().as_second())
            .unwrap();
        assert_eq!(
            (conversion.nonce, conversion.creative),
            (click.nonce, creative)
        );
    }
    assert_eq!(load(&edge.counters.clicks), 3);
}

#[tokio::test]
async fn a_click_is_counted_only_when_it_is_redirected() {
    let dir = tempfile::tempdir().unwrap();
    let landings = [
        // Passes creative validation (the URL parser drops the newline and encodes the
        // control), but as written it is no valid `Location` header.
        "https://shop.example/a\u{1}b\nc",
        // No URL at all (only a snapshot of an older build could hold it).
        "https://exa mple.example/\n",
    ];
    let edge = Arc::new(new_edge(
        dir.path(),
        open_log(&dir.path().join("events"), false),
        &landings,
    ));
    let headers = HeaderMap::new();
    let answer = track(
        &edge,
        TokenKind::Click,
        &token_query(&edge, &claims(TokenKind::Click, 11, 77, 1)),
        &headers,
        &anonymous(),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::FOUND);
    assert!(
        location(&answer).starts_with("https://shop.example/a%01bc?mq_conv="),
        "{}",
        location(&answer)
    );
    assert_eq!(load(&edge.counters.clicks), 1);

    let answer = track(
        &edge,
        TokenKind::Click,
        &token_query(&edge, &claims(TokenKind::Click, 12, 77, 2)),
        &headers,
        &anonymous(),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        load(&edge.counters.clicks),
        1,
        "a click answered 404 is not counted"
    );
    assert_eq!(edge.log.counters().appended, 1, "nor logged");
}

#[tokio::test]
async fn an_image_tag_fetched_again_within_its_window_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let edge = Arc::new(new_edge(
        dir.path(),
        open_log(&dir.path().join("events"), false),
        &["https://shop.example/"],
    ));
    let nonce = 123_456_789;
    let lifetime = i64::from(LIFETIME);
    let phase = i64::try_from(nonce % u64::from(LIFETIME)).unwrap();
    // The start of the next window of this nonce's grid.
    let base = Timestamp::now().as_second();
    let window = base - (base - phase).rem_euclid(lifetime) + lifetime;
    // Each fetch makes the decision again, so its claims are issued at the fetch.
    let fetch = |at: i64| {
        let claims = Claims {
            issued_at: at,
            ..claims(TokenKind::Impression, 11, 0, nonce)
        };
        let edge = Arc::clone(&edge);
        async move {
            let visitor = Visitor::default();
            let loaded = edge.holder.current();
            let event = TrackedEvent {
                kind: TokenKind::Impression,
                claims,
                expires_at: untokened_expiry(&claims, at),
                now: Timestamp::from_second(at).unwrap(),
                source: Source::ImageTag,
            };
            count_once(&edge, loaded, event, &visitor).await;
        }
    };
    fetch(window + 1).await;
    // Five minutes later: another minute's bucket by fetch time + lifetime, the same window.
    fetch(window + 301).await;
    fetch(window + lifetime - 1).await;
    assert_eq!(
        (
            load(&edge.counters.impressions),
            load(&edge.counters.repeats)
        ),
        (1, 2)
    );
    // In the next window it counts again on the edge (the manager dedupes it by event id).
    fetch(window + lifetime + 1).await;
    assert_eq!(load(&edge.counters.impressions), 2);
}

#[test]
fn image_tag_expiries_are_in_the_token_s_life_and_shared_by_a_window() {
    for lifetime in [60, 600, 3_600] {
        for nonce in [0, 1, 59, 12_345, u64::MAX] {
            let claims = Claims {
                lifetime,
                ..claims(TokenKind::Impression, 11, 0, nonce)
            };
            let mut previous = None;
            for now in (1_790_000_000..1_790_000_000 + 3 * i64::from(lifetime)).step_by(7) {
                let expiry = untokened_expiry(&claims, now);
                assert!(
                    expiry > now && expiry <= now + i64::from(lifetime),
                    "{lifetime} {nonce} {now}"
                );
                if let Some((before, at)) = previous
                    && expiry != before
                {
                    // A new window starts only where the last one ended.
                    assert!(at < before && before <= now, "{lifetime} {nonce} {now}");
                }
                previous = Some((expiry, now));
            }
        }
    }
}

#[tokio::test]
async fn a_billing_notice_the_log_refused_counts_when_the_exchange_retries() {
    let dir = tempfile::tempdir().unwrap();
    let mut edge = Arc::new(new_edge(
        dir.path(),
        refusing_log(&dir.path().join("refusing")),
        &["https://shop.example/"],
    ));
    let mut token = String::from("t=");
    notice::sign_into(
        &edge.keys,
        &NoticeClaims {
            nonce: 9,
            line_item: LINE_ITEM,
            creative: 11,
            user: 0,
            price_micros: 1_500_000,
            currency: Currency::USD,
            exchange: 0,
            auction: 1,
            test: false,
            issued_at: Timestamp::now().as_second(),
            lifetime: LIFETIME,
            price_in_line_item_currency: None,
        },
        &mut token,
    );
    let counters = |edge: &Edge| {
        let s = &edge.bidder.counters;
        (load(&s.billings), load(&s.repeated_notices))
    };
    notice::notice(&edge, NoticeKind::Billing, &token).await;
    assert_eq!(
        counters(&edge),
        (0, 0),
        "not counted while the log refuses it"
    );
    assert_eq!(load(&edge.counters.log_errors), 1);

    Arc::get_mut(&mut edge).unwrap().log = Arc::new(open_log(&dir.path().join("events"), false));
    notice::notice(&edge, NoticeKind::Billing, &token).await;
    assert_eq!(counters(&edge), (1, 0), "the exchange's retry counts");
    assert_eq!(edge.log.counters().appended, 1);
    notice::notice(&edge, NoticeKind::Billing, &token).await;
    assert_eq!(counters(&edge), (1, 1), "once");
}

#[test]
fn the_replay_capacity_sizes_every_guard_and_overflows_are_exported_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let edge = new_edge(dir.path(), open_log(&dir.path().join("events"), false), &[])
        .with_replay_capacity(32)
        // Set after the capacity, the bidder keeps it.
        .with_bidder(crate::BidderConfig::default());
    for (kind, guard) in edge.replay_guards() {
        assert_eq!(guard.capacity(), 32 * 61, "{kind}");
    }
    let now = 1_790_000_000;
    // Two slots per shard and minute: 1,000 nonces expiring in one minute overflow.
    for nonce in 0..1_000 {
        edge.replay_guard(TokenKind::Click)
            .first_time(nonce, now + 300, now);
    }
    let overflows = edge.replay_guard(TokenKind::Click).overflows();
    assert!(overflows > 0);
    let page = crate::metrics::encode(&edge, crate::metrics::Format::Text);
    for (kind, value) in [
        ("impression", 0),
        ("click", overflows),
        ("conversion", 0),
        ("win", 0),
        ("billing", 0),
        ("loss", 0),
    ] {
        let series =
            format!("marquee_tracking_replay_overflows_total{{kind=\"{kind}\"}} {value}\n");
        assert!(page.contains(&series), "no {series:?} in\n{page}");
    }
}

/// A CPC line item with a spend goal: a direct click spends its price, an exchange bid's click
/// (no placement) nothing, since the exchange's billing notice brings what that bid cost (before,
/// the exchange click charged the CPC price too, which the aggregation never counts).
#[tokio::test]
async fn an_exchange_click_does_not_charge_a_spend_goal() {
    let dir = tempfile::tempdir().unwrap();
    let cpc_spend = snapshot_of(&["https://shop.example/"], |li| {
        li.goal = Some(Goal {
            metric: GoalMetric::Spend,
            daily: None,
            lifetime: Some(1_000_000_000),
        });
        li.price.model = PricingModel::Cpc;
    });
    let edge = Arc::new(new_edge_with(
        dir.path(),
        open_log(&dir.path().join("events"), false),
        &cpc_spend,
    ));
    let headers = HeaderMap::new();
    let exchange_click = Claims {
        placement: None,
        ..claims(TokenKind::Click, 11, 77, 1)
    };
    let answer = track(
        &edge,
        TokenKind::Click,
        &token_query(&edge, &exchange_click),
        &headers,
        &anonymous(),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::FOUND);
    assert_eq!(load(&edge.counters.clicks), 1);
    assert_eq!(charged(&edge), 0, "the exchange click charges nothing");
    let direct_click = claims(TokenKind::Click, 11, 77, 2);
    track(
        &edge,
        TokenKind::Click,
        &token_query(&edge, &direct_click),
        &headers,
        &anonymous(),
    )
    .await;
    assert_eq!(charged(&edge), 2_000_000, "the direct click its price");
}

/// The screen on signed clicks: with `clicks_need_impression`, a click whose impression this
/// edge did not count is invalid; a click within the minimum delay of its decision is too fast;
/// a crawler's beacon is invalid. None of them is counted; each is logged.
#[tokio::test]
async fn signed_events_pass_the_screen_before_they_count() {
    use crate::quality::{Quality, QualityRules};
    use marquee_traffic::{CrawlerList, NetworkList, Watched};
    let dir = tempfile::tempdir().unwrap();
    let rules = QualityRules {
        clicks_need_impression: true,
        min_click_delay: Duration::from_secs(5),
        ..QualityRules::default()
    };
    let quality = Quality::new(
        rules,
        Watched::new(CrawlerList::builtin(), None),
        Watched::new(NetworkList::empty(), None),
    );
    let edge = Arc::new(
        new_edge(
            dir.path(),
            open_log(&dir.path().join("events"), false),
            &["https://shop.example/"],
        )
        .with_quality(quality),
    );
    let headers = HeaderMap::new();
    let fire = |kind: TokenKind, nonce: u64, age: i64, user_agent: Option<&'static str>| {
        let edge = Arc::clone(&edge);
        let mut headers = headers.clone();
        if let Some(user_agent) = user_agent {
            headers.insert(header::USER_AGENT, HeaderValue::from_static(user_agent));
        }
        async move {
            let claims = Claims {
                issued_at: Timestamp::now().as_second() - age,
                ..claims(kind, 11, 77, nonce)
            };
            let client = Client::of(None, &hyper::Method::GET, &headers, &[]);
            track(&edge, kind, &token_query(&edge, &claims), &headers, &client).await;
        }
    };
    let invalid = |kind, reason| edge.quality.counters.invalid(kind, reason);

    fire(TokenKind::Click, 1, 60, None).await;
    assert_eq!(load(&edge.counters.clicks), 0);
    assert_eq!(
        invalid(TokenKind::Click, InvalidReason::ClickWithoutImpression),
        1
    );
    fire(TokenKind::Impression, 1, 60, None).await;
    fire(TokenKind::Click, 1, 60, None).await;
    assert_eq!(load(&edge.counters.clicks), 1, "after its impression");

    fire(TokenKind::Impression, 2, 0, None).await;
    fire(TokenKind::Click, 2, 0, None).await;
    assert_eq!(load(&edge.counters.clicks), 1);
    assert_eq!(invalid(TokenKind::Click, InvalidReason::TooFast), 1);

    let bingbot = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";
    fire(TokenKind::Impression, 3, 60, Some(bingbot)).await;
    assert_eq!(load(&edge.counters.impressions), 2);
    assert_eq!(invalid(TokenKind::Impression, InvalidReason::Crawler), 1);
    // Each invalid event is in the log, beside the three counted ones.
    assert_eq!(edge.log.counters().appended, 3 + 3);
}
