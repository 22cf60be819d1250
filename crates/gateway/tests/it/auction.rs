//! The gateway against several mock bidders on loopback: all bid, some time out, one answers
//! invalid bids, one is at its in-flight limit, deals under a private auction, second-price
//! clearing, currency conversion, notices with their macros, 2.5 + gzip + h2c bidders, the
//! health score. No test measures time: slow bidders are far slower than the deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{Behaviour, MockBidder, deadline, gateway, request, run, winners};
use marquee_gateway::{AuctionKind, InternalBidder, Media, OpenRtbVersion, RateConverter};
use marquee_model::{Currency, CurrencyRates};
use marquee_openrtb::{BidRequest, BidResponse, NoConversion, validate_response};

fn bidding(price: &str) -> Behaviour {
    Behaviour {
        price: price.into(),
        ..Behaviour::default()
    }
}

fn count(counter: &marquee_metrics::Counter) -> u64 {
    counter.get()
}

/// The answer is a valid OpenRTB response to the request.
fn assert_valid(request: &str, answer: &str) {
    let request = BidRequest::parse(request.as_bytes()).unwrap();
    let response = BidResponse::parse(answer.as_bytes()).unwrap();
    let checked = validate_response(&request, &response, &NoConversion);
    assert_eq!(checked, Ok(()), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_bid_the_highest_wins_and_every_bidder_hears_how_it_went() {
    let a = MockBidder::start("alpha", bidding("1")).await;
    let b = MockBidder::start("beta", bidding("2.5")).await;
    let c = MockBidder::start("gamma", bidding("1.75")).await;
    let gateway = gateway(&[&a, &b, &c], |_| {});
    let body = request(&["1", "2"], "0.5", &[]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.expect("a bid");
    assert_valid(&body, &text);
    assert_eq!(
        winners(&text),
        vec![
            (
                "beta".into(),
                "1".into(),
                2_500_000,
                Some("<div>beta at 2.5</div>".into())
            ),
            (
                "beta".into(),
                "2".into(),
                2_500_000,
                Some("<div>beta at 2.5</div>".into())
            ),
        ]
    );
    let response = BidResponse::parse(text.as_bytes()).unwrap();
    let (_, bid) = response.bids().next().unwrap();
    assert_eq!(bid.nurl, None, "the gateway sends the win notice itself");
    assert_eq!(bid.lurl, None);
    assert_eq!(
        bid.burl.as_deref(),
        Some(format!("http://{}/bill?p=2.5", b.address).as_str()),
        "billing goes to the bidder with the price filled"
    );
    for mock in [&a, &b, &c] {
        assert_eq!(mock.requests(), 1);
        let sent = mock.last_request();
        assert_eq!(sent["id"], "auction-1");
        assert!(sent["tmax"].as_u64().unwrap() <= 3_000, "{sent}");
    }
    let mut won = b.wait_notices(2).await;
    won.sort();
    assert_eq!(won, ["/win?imp=1&p=2.5&c=USD", "/win?imp=2&p=2.5&c=USD"]);
    let mut lost = a.wait_notices(2).await;
    lost.sort();
    assert_eq!(
        lost,
        [
            "/loss?imp=1&r=102&p=2.5&m=2.500001",
            "/loss?imp=2&r=102&p=2.5&m=2.500001"
        ],
        "lost to a higher bid, with the clearing price and the lowest winning bid"
    );
    assert_eq!(c.wait_notices(2).await.len(), 2);
    let stats = gateway.bidder_stats("beta").unwrap();
    assert_eq!((count(&stats.requests), count(&stats.bids)), (1, 2));
    assert_eq!(count(&stats.wins), 2);
    assert_eq!(count(&gateway.bidder_stats("alpha").unwrap().wins), 0);
    let metrics = common::metrics(&gateway);
    assert!(
        metrics.contains("marquee_gateway_bidder_wins_total{bidder=\"beta\"} 2"),
        "{metrics}"
    );
    assert!(metrics.contains("marquee_gateway_bidder_latency_seconds_count{bidder=\"gamma\"} 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidders_that_time_out_are_left_behind_and_their_late_answers_counted() {
    let fast = MockBidder::start("fast", bidding("1")).await;
    let slow = MockBidder::start(
        "slow",
        Behaviour {
            price: "9".into(),
            delay: Duration::from_millis(1_500),
            ..Behaviour::default()
        },
    )
    .await;
    let gateway = gateway(&[&fast, &slow], |c| c.late_grace = Duration::from_secs(5));
    let body = request(&["1"], "0", &[]);
    let started = Instant::now();
    let answer = gateway
        .auction(
            body.as_bytes(),
            "",
            |_| started + Duration::from_millis(400),
            None,
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "the auction did not wait for the slow bidder"
    );
    let text = answer.response.expect("the fast bidder's bid");
    assert_eq!(winners(&text)[0].0, "fast");
    let stats = gateway.bidder_stats("slow").unwrap();
    assert_eq!(count(&stats.timeouts), 1);
    let until = Instant::now() + Duration::from_secs(10);
    while count(&stats.late) == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        count(&stats.late),
        1,
        "the answer came later and was ignored"
    );
    assert!(
        slow.notices().is_empty(),
        "no notice for an answer not taken"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_bids_lose_with_their_reason() {
    let good = MockBidder::start("good", bidding("1")).await;
    let cheap = MockBidder::start("cheap", bidding("0.2")).await;
    let odd_size = MockBidder::start(
        "oddsize",
        Behaviour {
            price: "5".into(),
            size: (728, 90),
            ..Behaviour::default()
        },
    )
    .await;
    let broken = MockBidder::start(
        "broken",
        Behaviour {
            body: Some("{\"id\":".into()),
            ..Behaviour::default()
        },
    )
    .await;
    let stranger = MockBidder::start(
        "stranger",
        Behaviour {
            body: Some(
                r#"{"id":"auction-1","seatbid":[{"bid":[{"id":"x","impid":"9","price":7,"adm":"a","w":300,"h":250}]}]}"#
                    .into(),
            ),
            ..Behaviour::default()
        },
    )
    .await;
    let gateway = gateway(&[&good, &cheap, &odd_size, &broken, &stranger], |_| {});
    let body = request(&["1"], "0.5", &[]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.unwrap();
    assert_valid(&body, &text);
    assert_eq!(winners(&text)[0].0, "good");
    assert_eq!(
        cheap.wait_notices(1).await,
        ["/loss?imp=1&r=100&p=1&m=1.000001"],
        "below the floor"
    );
    assert_eq!(
        odd_size.wait_notices(1).await,
        ["/loss?imp=1&r=203&p=1&m=1.000001"],
        "a size the imp does not take"
    );
    for name in ["cheap", "oddsize", "stranger"] {
        let stats = gateway.bidder_stats(name).unwrap();
        assert_eq!(count(&stats.invalid_bids), 1, "{name}");
        assert_eq!(count(&stats.bids), 0, "{name}");
    }
    assert_eq!(count(&gateway.bidder_stats("broken").unwrap().errors), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_winner_dropped_with_the_whole_answer_hears_a_loss_not_a_win() {
    let alpha = MockBidder::start("alpha", Behaviour::default()).await;
    // No seat: its answer passes (the empty seat is not blocked), but ours names it "alpha",
    // which `bseat` blocks, so our answer fails as a whole.
    let base = format!("http://{}", alpha.address);
    let seatless = serde_json::json!({
        "id": "auction-1",
        "seatbid": [{"bid": [{
            "id": "a1", "impid": "1", "price": 2, "adm": "<div>alpha</div>",
            "w": 300, "h": 250, "mtype": 1,
            "nurl": format!("{base}/win?imp=${{AUCTION_IMP_ID}}&p=${{AUCTION_PRICE}}"),
            "lurl": format!("{base}/loss?imp=${{AUCTION_IMP_ID}}&r=${{AUCTION_LOSS}}&p=${{AUCTION_PRICE}}&m=${{AUCTION_MIN_TO_WIN}}"),
        }]}],
    });
    alpha.set(|b| b.body = Some(seatless.to_string()));
    let gateway = gateway(&[&alpha], |_| {});
    let mut body: serde_json::Value = serde_json::from_str(&request(&["1"], "0.5", &[])).unwrap();
    body["bseat"] = serde_json::json!(["alpha"]);
    let answer = run(&gateway, &body.to_string()).await;
    assert_eq!(answer.response, None);
    // Its only notice: a loss, buyer seat blocked (104), without prices (nothing won).
    assert_eq!(alpha.wait_notices(1).await, ["/loss?imp=1&r=104&p=&m="]);
    let stats = gateway.bidder_stats("alpha").unwrap();
    assert_eq!((count(&stats.bids), count(&stats.wins)), (1, 0));
    assert_eq!(count(&gateway.stats.dropped_winners), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_winner_dropped_from_the_answer_hears_a_loss_and_the_others_their_win() {
    let alpha = MockBidder::start("alpha", bidding("1")).await;
    // Second price, alone, no increment: imp 1 (no floor) clears at 0, which the final check
    // refuses (price not positive); imp 2 clears at its floor.
    let gateway = gateway(&[&alpha], |c| {
        c.auction = AuctionKind::SecondPrice {
            increment_micros: 0,
        }
    });
    let mut body: serde_json::Value =
        serde_json::from_str(&request(&["1", "2"], "0", &[])).unwrap();
    body["imp"][1]["bidfloor"] = serde_json::json!(0.5);
    let body = body.to_string();
    let answer = run(&gateway, &body).await;
    let text = answer.response.expect("imp 2's bid");
    assert_valid(&body, &text);
    assert_eq!(
        winners(&text),
        vec![(
            "alpha".into(),
            "2".into(),
            500_000,
            Some("<div>alpha at 0.5</div>".into())
        )]
    );
    let mut notices = alpha.wait_notices(2).await;
    notices.sort();
    assert_eq!(
        notices,
        ["/loss?imp=1&r=9&p=&m=", "/win?imp=2&p=0.5&c=USD"],
        "the dropped winner hears its failed rule's reason, never a win"
    );
    let stats = gateway.bidder_stats("alpha").unwrap();
    assert_eq!((count(&stats.bids), count(&stats.wins)), (2, 1));
    assert_eq!(count(&gateway.stats.dropped_winners), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidder_at_its_in_flight_limit_is_skipped_at_once() {
    let busy = MockBidder::start(
        "busy",
        Behaviour {
            price: "3".into(),
            delay: Duration::from_millis(800),
            ..Behaviour::default()
        },
    )
    .await;
    let idle = MockBidder::start("idle", bidding("1")).await;
    let gateway = std::sync::Arc::new(gateway(&[&busy, &idle], |c| {
        c.bidders[0].max_in_flight = 1;
    }));
    let body = request(&["1"], "0", &[]);
    let first = {
        let (gateway, body) = (std::sync::Arc::clone(&gateway), body.clone());
        tokio::spawn(async move { run(&gateway, &body).await })
    };
    let until = Instant::now() + Duration::from_secs(10);
    while busy.requests() == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = run(&gateway, &body).await;
    assert_eq!(winners(&second.response.unwrap())[0].0, "idle");
    let stats = gateway.bidder_stats("busy").unwrap();
    assert_eq!(count(&stats.skipped_at_limit), 1);
    assert_eq!(busy.requests(), 1, "the second auction never called it");
    let first = first.await.unwrap();
    assert_eq!(winners(&first.response.unwrap())[0].0, "busy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deals_win_a_private_auction_and_rank_first_in_an_open_one() {
    let open = MockBidder::start("open", bidding("5")).await;
    let deal = MockBidder::start(
        "deal",
        Behaviour {
            price: "1.5".into(),
            deal: Some("D1".into()),
            ..Behaviour::default()
        },
    )
    .await;
    let gateway = gateway(&[&open, &deal], |_| {});
    let with_deal = |private: u8| {
        let mut body: serde_json::Value =
            serde_json::from_str(&request(&["1"], "0.1", &[])).unwrap();
        body["imp"][0]["pmp"] = serde_json::json!({
            "private_auction": private,
            "deals": [{"id": "D1", "bidfloor": 1}],
        });
        body.to_string()
    };
    let private = with_deal(1);
    let answer = run(&gateway, &private).await;
    let text = answer.response.unwrap();
    assert_valid(&private, &text);
    assert_eq!(winners(&text)[0].0, "deal");
    assert_eq!(winners(&text)[0].2, 1_500_000);
    assert_eq!(
        open.wait_notices(1).await,
        ["/loss?imp=1&r=4&p=1.5&m=1.500001"],
        "an open bid in a private auction is invalid"
    );
    let public = with_deal(0);
    let answer = run(&gateway, &public).await;
    assert_eq!(winners(&answer.response.unwrap())[0].0, "deal");
    let notices = open.wait_notices(2).await;
    assert!(
        notices[1].starts_with("/loss?imp=1&r=103&"),
        "lost to a deal: {notices:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_price_clears_at_the_next_bid_plus_the_increment() {
    let a = MockBidder::start("a", bidding("3")).await;
    let b = MockBidder::start("b", bidding("2")).await;
    let gateway = gateway(&[&a, &b], |c| {
        c.auction = AuctionKind::SecondPrice {
            increment_micros: 10_000,
        }
    });
    let body = request(&["1"], "0.5", &[]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.unwrap();
    assert_eq!(
        winners(&text),
        vec![(
            "a".into(),
            "1".into(),
            2_010_000,
            Some("<div>a at 2.01</div>".into())
        )]
    );
    assert_eq!(a.wait_notices(1).await, ["/win?imp=1&p=2.01&c=USD"]);
    assert_eq!(
        b.wait_notices(1).await,
        ["/loss?imp=1&r=102&p=2.01&m=3.000001"]
    );
    // Alone, the winner pays the floor plus the increment.
    b.set(|b| b.status = 204);
    let answer = run(&gateway, &body).await;
    assert_eq!(winners(&answer.response.unwrap())[0].2, 510_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bids_in_other_currencies_are_converted_and_told_back_in_theirs() {
    let euro = MockBidder::start(
        "euro",
        Behaviour {
            price: "3".into(),
            currency: Some("EUR".into()),
            ..Behaviour::default()
        },
    )
    .await;
    let dollar = MockBidder::start("dollar", bidding("5")).await;
    let gateway = gateway(&[&euro, &dollar], |c| {
        let mut rates = CurrencyRates::new(Currency::USD);
        rates
            .set(Currency::try_from("EUR").unwrap(), "0.5")
            .unwrap();
        c.rates = rates;
    });
    let body = request(&["1"], "1", &["USD", "EUR"]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.unwrap();
    let response = BidResponse::parse(text.as_bytes()).unwrap();
    assert_eq!(response.currency(), "USD");
    assert_eq!(
        winners(&text)[0].0,
        "euro",
        "3 EUR is 6 USD at 0.5 EUR per USD"
    );
    assert_eq!(winners(&text)[0].2, 6_000_000);
    assert_eq!(euro.wait_notices(1).await, ["/win?imp=1&p=3&c=EUR"]);
    assert_eq!(
        dollar.wait_notices(1).await,
        ["/loss?imp=1&r=102&p=6&m=6.000001"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidders_get_their_imps_version_encoding_and_protocol() {
    let old = MockBidder::start("old", bidding("1")).await;
    let video_only = MockBidder::start("videoonly", bidding("1")).await;
    let h2 = MockBidder::start("htwo", bidding("2")).await;
    let gateway = gateway(&[&old, &video_only, &h2], |c| {
        c.bidders[0].version = OpenRtbVersion::V25;
        c.bidders[0].gzip = true;
        c.bidders[0].headers = vec![("x-api-key".into(), "k1".into())];
        c.bidders[1].media = vec![Media::Video];
        c.bidders[2].http2 = true;
    });
    let body = request(&["1"], "0", &[]);
    let answer = run(&gateway, &body).await;
    assert_eq!(winners(&answer.response.unwrap())[0].0, "htwo");
    let (sent, encoding, version) = old.record.lock().unwrap().requests[0].clone();
    assert_eq!(encoding.as_deref(), Some("gzip"));
    assert_eq!(version.as_deref(), Some("2.5"));
    assert_eq!(sent["regs"], serde_json::json!({"ext": {"gdpr": 1}}));
    assert_eq!(
        sent["user"],
        serde_json::json!({"ext": {"consent": "CPXXXX"}})
    );
    assert_eq!(video_only.requests(), 0, "no imp it takes");
    assert_eq!(h2.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_bidder_is_throttled_then_probed_back() {
    let flaky = MockBidder::start(
        "flaky",
        Behaviour {
            status: 500,
            ..Behaviour::default()
        },
    )
    .await;
    let gateway = gateway(&[&flaky], |c| {
        c.health.probe_interval = Duration::from_secs(3_600);
    });
    let body = request(&["1"], "0", &[]);
    for _ in 0..8 {
        let answer = run(&gateway, &body).await;
        assert!(answer.response.is_none());
    }
    let stats = gateway.bidder_stats("flaky").unwrap();
    assert_eq!(count(&stats.errors), 7, "six failures, then one probe");
    assert_eq!(count(&stats.skipped_unhealthy), 1);
    assert!(gateway.bidders()[0].throttled);
    gateway.set_enabled("flaky", false).unwrap();
    assert!(!gateway.bidders()[0].enabled);
    assert!(gateway.set_enabled("nobody", true).is_err());
}

/// A request whose one imp offers deal `D1` (floor 1) with the given deal `at`.
fn with_deal_at(at: u8) -> String {
    let mut body: serde_json::Value = serde_json::from_str(&request(&["1"], "0.1", &[])).unwrap();
    body["imp"][0]["pmp"] = serde_json::json!({
        "deals": [{"id": "D1", "bidfloor": 1, "at": at}],
    });
    body.to_string()
}

fn deal_bidding(price: &str) -> Behaviour {
    Behaviour {
        price: price.into(),
        deal: Some("D1".into()),
        ..Behaviour::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidders_hear_the_gateways_auction_type_and_are_charged_by_it() {
    let a = MockBidder::start("a", bidding("3")).await;
    let b = MockBidder::start("b", bidding("2")).await;
    // The caller says nothing (second price in 2.6); the gateway clears at first price.
    let first = gateway(&[&a, &b], |_| {});
    let body = request(&["1"], "0.5", &[]);
    let answer = run(&first, &body).await;
    assert_eq!(winners(&answer.response.unwrap())[0].2, 3_000_000);
    assert_eq!(a.last_request()["at"], 1, "first price, as charged");
    assert_eq!(b.last_request()["at"], 1);
    // The caller says first price; the gateway clears at second price.
    let second = gateway(&[&a, &b], |c| {
        c.auction = AuctionKind::SecondPrice {
            increment_micros: 10_000,
        }
    });
    let mut body: serde_json::Value = serde_json::from_str(&body).unwrap();
    body["at"] = 1.into();
    let body = body.to_string();
    let answer = run(&second, &body).await;
    assert_eq!(winners(&answer.response.unwrap())[0].2, 2_010_000);
    assert_eq!(a.last_request()["at"], 2, "second price, as charged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deal_clears_by_its_own_auction_type() {
    let open = MockBidder::start("open", bidding("0.8")).await;
    let high = MockBidder::start("high", deal_bidding("1.5")).await;
    let low = MockBidder::start("low", deal_bidding("1.2")).await;
    let gateway = gateway(&[&open, &high, &low], |_| {});
    // Fixed price (3): the deal's floor is the price, whatever the bid.
    let fixed = with_deal_at(3);
    let answer = run(&gateway, &fixed).await;
    let text = answer.response.unwrap();
    assert_valid(&fixed, &text);
    assert_eq!(
        winners(&text),
        vec![(
            "high".into(),
            "1".into(),
            1_000_000,
            Some("<div>high at 1</div>".into())
        )]
    );
    assert_eq!(high.wait_notices(1).await, ["/win?imp=1&p=1&c=USD"]);
    assert_eq!(
        high.last_request()["imp"][0]["pmp"]["deals"][0]["at"],
        3,
        "the deal reaches the bidders as the caller wrote it"
    );
    // Second price (2) under a first-price gateway: the next deal bid, no increment.
    let second = with_deal_at(2);
    let answer = run(&gateway, &second).await;
    let text = answer.response.unwrap();
    assert_eq!(winners(&text)[0].2, 1_200_000);
    assert_eq!(high.wait_notices(2).await[1], "/win?imp=1&p=1.2&c=USD");
    // First price (1): the bid.
    let first = with_deal_at(1);
    let answer = run(&gateway, &first).await;
    assert_eq!(winners(&answer.response.unwrap())[0].2, 1_500_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adjustment_above_1000_permille_never_asks_the_caller_for_more_than_the_winner_pays() {
    let boosted = MockBidder::start("boosted", bidding("2")).await;
    let plain = MockBidder::start("plain", bidding("2.5")).await;
    let first = gateway(&[&boosted, &plain], |c| c.bidders[0].price_permille = 1_500);
    let body = request(&["1"], "0.5", &[]);
    // 2 at 1500 ‰ ranks as 3 and beats 2.5, but pays 2: so does the caller.
    let answer = run(&first, &body).await;
    let text = answer.response.unwrap();
    assert_valid(&body, &text);
    assert_eq!(
        winners(&text),
        vec![(
            "boosted".into(),
            "1".into(),
            2_000_000,
            Some("<div>boosted at 2</div>".into())
        )]
    );
    assert_eq!(boosted.wait_notices(1).await, ["/win?imp=1&p=2&c=USD"]);
    assert_eq!(
        plain.wait_notices(1).await,
        ["/loss?imp=1&r=102&p=2&m=3.000001"],
        "the clearing price the answer carried"
    );
    // Second price: 2.5 + 0.01 to beat, in ranking terms, is 1.673334 in the winner's (rounded
    // up); the answer says that much, not 2.51.
    let second = gateway(&[&boosted, &plain], |c| {
        c.bidders[0].price_permille = 1_500;
        c.auction = AuctionKind::SecondPrice {
            increment_micros: 10_000,
        };
    });
    let answer = run(&second, &body).await;
    assert_eq!(winners(&answer.response.unwrap())[0].2, 1_673_334);
    assert_eq!(
        boosted.wait_notices(2).await[1],
        "/win?imp=1&p=1.673334&c=USD"
    );
}

/// Our own line items as the edge would answer for them, in `currency`.
struct OwnLineItems {
    currency: &'static str,
}

const OWN_BURL: &str = "https://ads.test/openrtb2/bill?t=T&auction=${AUCTION_ID}&imp=${AUCTION_IMP_ID}&p=${AUCTION_PRICE}";
const OWN_NURL: &str = "https://ads.test/openrtb2/win?t=T&p=${AUCTION_PRICE}";

impl InternalBidder for OwnLineItems {
    fn bid(&self, _json: &[u8], _currency: Currency) -> Option<bytes::Bytes> {
        let response = serde_json::json!({
            "id": "auction-1",
            "cur": self.currency,
            "seatbid": [{"seat": "marquee", "bid": [{
                "id": "own-1", "impid": "1", "price": 4, "adm": "<div>own</div>",
                "nurl": OWN_NURL,
                "burl": OWN_BURL,
                "adomain": ["own.test"], "crid": "c", "w": 300, "h": 250, "mtype": 1,
            }]}],
        });
        Some(response.to_string().into())
    }
}

/// Our billing and win notice URLs reach the caller with their macros, for it to fill with its
/// own clearing price (encrypted for an exchange with price keys) and send; the gateway sends
/// no win notice of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_own_billing_and_win_urls_are_left_for_the_caller_to_fill() {
    let other = MockBidder::start("other", bidding("1")).await;
    let gateway = gateway(&[&other], |c| {
        c.internal_bidder = Some("marquee".into());
        let mut rates = CurrencyRates::new(Currency::USD);
        rates
            .set(Currency::try_from("EUR").unwrap(), "0.5")
            .unwrap();
        c.rates = rates;
    });
    let body = request(&["1"], "0.5", &["USD", "EUR"]);
    let urls_of = |text: &str| {
        let response = BidResponse::parse(text.as_bytes()).unwrap();
        let (_, bid) = response.bids().next().unwrap();
        let url = |u: &Option<std::borrow::Cow<'_, str>>| u.as_deref().map(str::to_owned);
        (url(&bid.burl), url(&bid.nurl))
    };
    let own = OwnLineItems { currency: "USD" };
    let answer = gateway
        .auction(body.as_bytes(), "", |_| deadline(), Some(&own))
        .await
        .unwrap();
    let text = answer.response.unwrap();
    assert_eq!(winners(&text)[0].0, "marquee");
    // The caller fills it with its own clearing price, encrypted with the keys it shares with
    // us, as it would our bid on /openrtb2/bid.
    assert_eq!(
        urls_of(&text),
        (Some(OWN_BURL.into()), Some(OWN_NURL.into()))
    );
    assert_eq!(
        answer.internal_notices,
        Vec::<String>::new(),
        "no win notice with the gateway's plain price"
    );
    // In another currency than the answer's the caller's price could not be read against our
    // bid: the gateway fills it, as for any bidder.
    let own = OwnLineItems { currency: "EUR" };
    let answer = gateway
        .auction(body.as_bytes(), "", |_| deadline(), Some(&own))
        .await
        .unwrap();
    assert_eq!(
        urls_of(&answer.response.unwrap()),
        (
            Some("https://ads.test/openrtb2/bill?t=T&auction=auction-1&imp=1&p=4".into()),
            None
        ),
        "the gateway fills the billing URL and sends the win notice"
    );
    assert_eq!(
        answer.internal_notices,
        ["https://ads.test/openrtb2/win?t=T&p=4"],
        "the win notice, handled in process, has the gateway's price"
    );
}

/// One bid on imp 1 of `mock`, with `more` members (and the mock's loss notice).
fn bid_with(mock: &MockBidder, more: serde_json::Value) -> String {
    let mut bid = serde_json::json!({
        "id": "b1", "impid": "1", "price": 2, "adm": "<div>ad</div>",
        "lurl": format!("http://{}/loss?r=${{AUCTION_LOSS}}", mock.address),
        "adomain": ["brand.test"], "crid": "c", "w": 300, "h": 250, "mtype": 1,
    });
    for (key, value) in more.as_object().unwrap() {
        bid[key] = value.clone();
    }
    serde_json::json!({"id": "auction-1", "seatbid": [{"seat": "s1", "bid": [bid]}]}).to_string()
}

/// A bid's `ext` (here the DSA transparency an EU caller requires) and `cattax` reach the caller
/// as the bidder wrote them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bids_ext_reaches_the_caller_unchanged() {
    let mock = MockBidder::start("dsa", Behaviour::default()).await;
    let ext = r#"{"dsa":{"behalf":"X","paid":"Y","transparency":[{"domain":"d.test","dsaparams":[1,2]}]}}"#;
    let more = serde_json::json!({"cattax": 1, "cat": ["IAB3"], "ext": "EXT"});
    let body = bid_with(&mock, more).replace("\"EXT\"", ext);
    mock.set(|b| b.body = Some(body));
    let gateway = gateway(&[&mock], |_| {});
    let request = request(&["1"], "0.5", &[]);
    let answer = run(&gateway, &request).await;
    let text = answer.response.expect("a bid");
    assert!(
        text.contains(&format!(",\"cattax\":1,\"ext\":{ext}}}")),
        "{text}"
    );
    assert_valid(&request, &text);
}

/// The members of a bid the gateway does not read (a video pod's `dur` and `slotinpod`, `apis`,
/// the creative's languages, `tactic`, …) reach the caller as the bidder wrote them, unknown
/// codes included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bids_other_members_reach_the_caller_unchanged() {
    let mock = MockBidder::start("pod", Behaviour::default()).await;
    let members = serde_json::json!({
        "mtype": 2, "adm": "<VAST version=\"4.2\"></VAST>",
        "dur": 15, "slotinpod": -1, "apis": [2, 7, 500], "api": 2, "protocol": 7,
        "langb": "pt-BR", "language": "pt", "tactic": "retarget-7", "qagmediarating": 1,
        "wratio": 16, "hratio": 9,
    });
    mock.set(|b| b.body = Some(bid_with(&mock, members.clone())));
    let gateway = gateway(&[&mock], |_| {});
    let mut request: serde_json::Value =
        serde_json::from_str(&request(&["1"], "0.5", &[])).unwrap();
    request["imp"][0]["video"] = serde_json::json!({
        "mimes": ["video/mp4"], "protocols": [7], "podid": "pod-1", "maxduration": 30,
    });
    request["imp"][0].as_object_mut().unwrap().remove("banner");
    let request = request.to_string();
    let answer = run(&gateway, &request).await;
    let text = answer.response.expect("a bid");
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    let bid = &answer["seatbid"][0]["bid"][0];
    for (key, value) in members.as_object().unwrap() {
        assert_eq!(&bid[key], value, "{key} in {text}");
    }
    assert_valid(&request, &text);
}

/// A bidder answering for several buyers (one seat each) may bid on one imp from each seat:
/// the seats compete like separate bidders, the best wins and the other hears its loss (a second
/// bid for the imp was refused by position, whatever its price).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seats_of_one_bidder_compete_for_an_imp() {
    let mock = MockBidder::start("multi", Behaviour::default()).await;
    let seat = |name: &str, id: &str, price: &str| {
        let bid = bid_with(
            &mock,
            serde_json::json!({"id": id, "price": price.parse::<f64>().unwrap(), "adm": format!("<div>{name}</div>")}),
        );
        let mut bid: serde_json::Value = serde_json::from_str(&bid).unwrap();
        bid["seatbid"][0]["seat"] = serde_json::json!(name);
        bid["seatbid"][0].clone()
    };
    let body = serde_json::json!({
        "id": "auction-1",
        "seatbid": [seat("buyer-a", "b1", "2"), seat("buyer-b", "b2", "3")],
    });
    mock.set(|b| b.body = Some(body.to_string()));
    let gateway = gateway(&[&mock], |_| {});
    let request = request(&["1"], "0.5", &[]);
    let answer = run(&gateway, &request).await;
    let text = answer.response.expect("a bid");
    assert_valid(&request, &text);
    let winners = winners(&text);
    assert_eq!(winners.len(), 1, "{text}");
    assert_eq!(
        winners[0].3.as_deref(),
        Some("<div>buyer-b</div>"),
        "{text}"
    );
    assert_eq!(mock.wait_notices(1).await, ["/loss?r=102"]);
}

/// `bcat` is in IAB 1.0: a bid's categories in another taxonomy are not matched against it and
/// count as undeclared (loss 209), so a blocked category cannot pass under another code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_category_of_another_taxonomy_is_undeclared_under_bcat() {
    let mock = MockBidder::start("tax", Behaviour::default()).await;
    let gateway = gateway(&[&mock], |_| {});
    let mut request: serde_json::Value =
        serde_json::from_str(&request(&["1"], "0.5", &[])).unwrap();
    request["bcat"] = serde_json::json!(["IAB25"]);
    let request = request.to_string();
    let bid_in = |cattax: u32| {
        let body = bid_with(
            &mock,
            serde_json::json!({"cattax": cattax, "cat": ["IAB7"]}),
        );
        mock.set(|b| b.body = Some(body));
    };
    bid_in(2);
    let answer = run(&gateway, &request).await;
    assert_eq!(
        answer.response, None,
        "IAB7 of taxonomy 2 is not IAB 1.0's IAB7"
    );
    assert_eq!(mock.wait_notices(1).await, ["/loss?r=209"]);
    bid_in(1);
    let answer = run(&gateway, &request).await;
    assert!(answer.response.is_some(), "in IAB 1.0, IAB7 is allowed");
}

/// Rates with USD the base and 0.92 EUR to the dollar: 1 EUR is 1.0869565… USD, which no whole
/// number of micros is.
fn euro_rates() -> CurrencyRates {
    let mut rates = CurrencyRates::new(Currency::USD);
    rates
        .set(Currency::try_from("EUR").unwrap(), "0.92")
        .unwrap();
    rates
}

/// One imp with a floor of 1 EUR, and under `deal` a deal with that floor; no `cur`, so the
/// answer is in the gateway's USD.
fn euro_floor(deal: Option<serde_json::Value>) -> String {
    let mut body: serde_json::Value = serde_json::from_str(&request(&["1"], "1", &[])).unwrap();
    body["imp"][0]["bidfloorcur"] = "EUR".into();
    if let Some(deal) = deal {
        body["imp"][0]["pmp"] = serde_json::json!({ "deals": [deal] });
    }
    body.to_string()
}

fn euro_bidding(price: &str, deal: Option<&str>) -> Behaviour {
    Behaviour {
        price: price.into(),
        currency: Some("EUR".into()),
        deal: deal.map(Into::into),
        ..Behaviour::default()
    }
}

/// The answer passes the caller's own check, floors converted at `rates`.
fn assert_valid_at(rates: &CurrencyRates, request: &str, answer: &str) {
    let request = BidRequest::parse(request.as_bytes()).unwrap();
    let response = BidResponse::parse(answer.as_bytes()).unwrap();
    let checked = validate_response(&request, &response, &RateConverter(rates));
    assert_eq!(checked, Ok(()), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bid_at_a_floor_in_its_own_currency_meets_it_whatever_the_answer_currency() {
    let at = MockBidder::start("at", euro_bidding("1", None)).await;
    let under = MockBidder::start("under", euro_bidding("0.999999", None)).await;
    let gateway = gateway(&[&at, &under], |c| c.rates = euro_rates());
    let body = euro_floor(None);
    let answer = run(&gateway, &body).await;
    let text = answer.response.expect("1 EUR meets a 1 EUR floor");
    assert_eq!(
        BidResponse::parse(text.as_bytes()).unwrap().currency(),
        "USD"
    );
    // 1 EUR is 1.0869565 USD: 1.086956 rounded down, which the caller would find below its
    // floor converted rounding up, 1.086957; the answer says the latter.
    assert_eq!(winners(&text)[0].0, "at");
    assert_eq!(winners(&text)[0].2, 1_086_957);
    assert_valid_at(&euro_rates(), &body, &text);
    assert_eq!(at.wait_notices(1).await, ["/win?imp=1&p=1&c=EUR"]);
    assert_eq!(
        under.wait_notices(1).await,
        ["/loss?imp=1&r=100&p=1.000001&m=1.000001"],
        "a micro below the floor in its own currency is below it; it hears the answer's price \
         put back into euros rounding up"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_price_deal_in_another_currency_clears_at_its_floor() {
    let buyer = MockBidder::start("buyer", euro_bidding("1", Some("D1"))).await;
    let gateway = gateway(&[&buyer], |c| c.rates = euro_rates());
    let body = euro_floor(Some(
        serde_json::json!({"id": "D1", "bidfloor": 1, "bidfloorcur": "EUR", "at": 3}),
    ));
    // Bid at the deal's price, and above it: both pay the price, the caller 1 EUR rounded up
    // in USD.
    for (price, notices) in [("1", 1), ("1.2", 2)] {
        buyer.set(|b| b.price = price.into());
        let answer = run(&gateway, &body).await;
        let text = answer.response.expect("the deal clears");
        assert_eq!(winners(&text)[0].2, 1_086_957, "bid {price}");
        assert_valid_at(&euro_rates(), &body, &text);
        assert_eq!(
            buyer.wait_notices(notices).await[notices - 1],
            "/win?imp=1&p=1&c=EUR",
            "bid {price}: the buyer pays the deal's price, not its rounding through USD"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bid_below_its_deals_floor_loses_as_below_the_deal_floor() {
    // A micro under the deal's floor as sent (the validator's check), and above it as sent but
    // under it once adjusted (the auction's).
    let under = MockBidder::start("under", euro_bidding("0.999999", Some("D1"))).await;
    let adjusted = MockBidder::start("adjusted", euro_bidding("1.05", Some("D1"))).await;
    let open = MockBidder::start("open", euro_bidding("0.5", None)).await;
    let gateway = gateway(&[&under, &adjusted, &open], |c| {
        c.rates = euro_rates();
        c.bidders[1].price_permille = 900;
    });
    let body = euro_floor(Some(
        serde_json::json!({"id": "D1", "bidfloor": 1, "bidfloorcur": "EUR"}),
    ));
    let answer = run(&gateway, &body).await;
    assert_eq!(answer.response, None);
    assert_eq!(under.wait_notices(1).await, ["/loss?imp=1&r=101&p=&m="]);
    assert_eq!(adjusted.wait_notices(1).await, ["/loss?imp=1&r=101&p=&m="]);
    assert_eq!(
        open.wait_notices(1).await,
        ["/loss?imp=1&r=100&p=&m="],
        "the imp's own floor is still the auction floor"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_boosted_winner_at_the_floor_pays_the_floor() {
    // 2 at 1500 ‰ counts as 3; alone under second price it clears at the 1.8 floor, which in
    // its terms is 1.2: it pays the floor instead, and the answer says the floor.
    let boosted = MockBidder::start("boosted", bidding("2")).await;
    let gateway = gateway(&[&boosted], |c| {
        c.bidders[0].price_permille = 1_500;
        c.auction = AuctionKind::SecondPrice {
            increment_micros: 0,
        };
    });
    let body = request(&["1"], "1.8", &[]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.expect("a bid above the floor clears");
    assert_valid(&body, &text);
    assert_eq!(winners(&text)[0].2, 1_800_000);
    assert_eq!(boosted.wait_notices(1).await, ["/win?imp=1&p=1.8&c=USD"]);
}
