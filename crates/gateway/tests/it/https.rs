//! HTTPS bidders, over real TLS: a test CA made here signs the mock bidders' certificates. With
//! the CA in `tls_ca_file` the gateway gets their bids, over HTTP/2 when the bidder offers it
//! (ALPN) and HTTP/1.1 when not, and sends their win and loss notices over HTTPS; without it the
//! handshake fails, which is a counted error of that bidder and no bid.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use hyper::Version;

use common::tls::{H2_AND_HTTP1, HTTP1_ONLY, TestCa};
use common::{Behaviour, MockBidder, gateway, request, run, winners};

fn bidding(price: &str) -> Behaviour {
    Behaviour {
        price: price.into(),
        ..Behaviour::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_bidders_bid_over_the_version_they_offer_and_hear_their_notices_over_https() {
    let ca = TestCa::new();
    let h2 = MockBidder::start_tls("h2", bidding("2"), ca.acceptor(H2_AND_HTTP1)).await;
    let http1 = MockBidder::start_tls("http1", bidding("1"), ca.acceptor(HTTP1_ONLY)).await;
    assert!(h2.spec().endpoint.starts_with("https://127.0.0.1:"));
    let ca_file = ca.ca_file().to_owned();
    let gateway = gateway(&[&h2, &http1], |config| {
        config.tls_ca_file = Some(ca_file);
    });
    let body = request(&["1"], "0", &[]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.expect("a bid from the https bidders");
    assert_eq!(winners(&text)[0].0, "h2");
    assert!(
        text.contains(&format!("\"burl\":\"https://{}/bill?p=2\"", h2.address)),
        "the billing URL goes to the caller over https, price filled: {text}"
    );
    // The win notice to the winner, the loss notice to the other, both over https.
    assert_eq!(h2.wait_notices(1).await, ["/win?imp=1&p=2&c=USD"]);
    assert_eq!(
        http1.wait_notices(1).await,
        ["/loss?imp=1&r=102&p=2&m=2.000001"]
    );
    assert_eq!(
        h2.versions(),
        [Version::HTTP_2, Version::HTTP_2],
        "HTTP/2 negotiated over TLS for the bid and the notice"
    );
    assert_eq!(
        http1.versions(),
        [Version::HTTP_11, Version::HTTP_11],
        "HTTP/1.1 where the bidder offers only that"
    );
    for name in ["h2", "http1"] {
        let stats = gateway.bidder_stats(name).unwrap();
        assert_eq!((stats.requests.get(), stats.errors.get()), (1, 0), "{name}");
    }
    // The counter moves once the notice's answer is read.
    let until = Instant::now() + Duration::from_secs(10);
    while gateway.bidder_stats("http1").unwrap().notices.get() == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = gateway.bidder_stats("http1").unwrap();
    assert_eq!((stats.notices.get(), stats.notice_errors.get()), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_bidder_whose_ca_is_not_trusted_is_a_counted_failure_not_a_bid() {
    let ca = TestCa::new();
    let untrusted =
        MockBidder::start_tls("untrusted", bidding("5"), ca.acceptor(H2_AND_HTTP1)).await;
    let plain = MockBidder::start("plain", bidding("1")).await;
    // The platform's roots only: the test CA is not among them.
    let gateway = gateway(&[&untrusted, &plain], |_| {});
    let body = request(&["1"], "0", &[]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.expect("the cleartext bidder's bid");
    assert_eq!(winners(&text)[0].0, "plain", "{text}");
    assert_eq!(
        untrusted.requests(),
        0,
        "no request went over the failed handshake"
    );
    // The mock reads the client's alert after the auction is over.
    let until = Instant::now() + Duration::from_secs(10);
    while untrusted.handshake_failures() == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(untrusted.handshake_failures(), 1);
    let stats = gateway.bidder_stats("untrusted").unwrap();
    assert_eq!(
        (stats.requests.get(), stats.errors.get(), stats.bids.get()),
        (1, 1, 0)
    );
    let metrics = common::metrics(&gateway);
    assert!(
        metrics.contains("marquee_gateway_bidder_errors_total{bidder=\"untrusted\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_is_for_cleartext_endpoints_only() {
    let mut spec = marquee_gateway::BidderSpec::new("b1", "https://127.0.0.1:9/bid");
    spec.http2 = true;
    let error = common::config_error(spec);
    assert!(
        error.contains("\"b1\"") && error.contains("http2"),
        "{error}"
    );
}
