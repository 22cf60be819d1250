//! Win and loss notices go only to the bidder's own hosts: a bidder answering with an `nurl` or
//! `lurl` on another host (here `localhost`, while its endpoint is `127.0.0.1`) does not make
//! the gateway call that host, and the refusal is counted; `notice_hosts` lets such a host in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{Behaviour, MockBidder, gateway, request, run, winners};

/// A bidder bidding `price` whose notice URLs point at `base`.
async fn bidder(name: &str, price: &str, base: &str) -> MockBidder {
    MockBidder::start(
        name,
        Behaviour {
            price: price.into(),
            notice_base: Some(base.to_owned()),
            ..Behaviour::default()
        },
    )
    .await
}

fn notices(gateway: &marquee_gateway::Gateway, name: &str) -> (u64, u64, u64) {
    let stats = gateway.bidder_stats(name).unwrap();
    (
        stats.notices.get(),
        stats.notice_errors.get(),
        stats.notices_refused.get(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_to_a_host_other_than_the_endpoints_are_not_sent_and_are_counted() {
    // Stands for an internal service the bidders would like the gateway to call.
    let target = MockBidder::start("target", Behaviour::default()).await;
    let elsewhere = format!("http://localhost:{}", target.address.port());
    let high = bidder("high", "2", &elsewhere).await;
    let low = bidder("low", "1", &elsewhere).await;
    // Its own host, but with user info.
    let sneaky = bidder(
        "sneaky",
        "0.5",
        &format!("http://admin:admin@127.0.0.1:{}", target.address.port()),
    )
    .await;
    let gateway = gateway(&[&high, &low, &sneaky], |_| {});
    let body = request(&["1"], "0", &[]);
    let answer = run(&gateway, &body).await;
    let text = answer.response.expect("a bid");
    assert_eq!(winners(&text)[0].0, "high");
    assert!(
        text.contains(&format!("{elsewhere}/bill")),
        "the billing URL is the caller's to call, passed on as before: {text}"
    );
    // Refusals are decided before any task is spawned; give a sent notice time to arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        target.notices(),
        Vec::<String>::new(),
        "no notice reached the other host"
    );
    assert_eq!(notices(&gateway, "high"), (0, 0, 1), "the win notice");
    assert_eq!(notices(&gateway, "low"), (0, 0, 1), "the loss notice");
    assert_eq!(notices(&gateway, "sneaky"), (0, 0, 1), "user info");
    let metrics = common::metrics(&gateway);
    for name in ["high", "low", "sneaky"] {
        assert!(
            metrics.contains(&format!(
                "marquee_gateway_bidder_notices_refused_total{{bidder=\"{name}\"}} 1"
            )),
            "{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notice_hosts_let_notices_to_another_host_through() {
    let target = MockBidder::start("target", Behaviour::default()).await;
    let elsewhere = format!("http://localhost:{}", target.address.port());
    let high = bidder("high", "2", &elsewhere).await;
    let low = bidder("low", "1", &elsewhere).await;
    let gateway = gateway(&[&high, &low], |config| {
        for spec in &mut config.bidders {
            spec.notice_hosts = vec!["win.example.com".into(), "LOCALHOST".into()];
        }
    });
    let body = request(&["1"], "0", &[]);
    let answer = run(&gateway, &body).await;
    assert_eq!(winners(&answer.response.expect("a bid"))[0].0, "high");
    let mut received = target.wait_notices(2).await;
    received.sort();
    assert_eq!(
        received,
        ["/loss?imp=1&r=102&p=2&m=2.000001", "/win?imp=1&p=2&c=USD"]
    );
    // The counters move once the answer to the notice is read.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while notices(&gateway, "low").0 == 0 && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(notices(&gateway, "low"), (1, 0, 0));
    assert_eq!(notices(&gateway, "high").2, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_notice_hosts_entry_names_the_bidder_and_the_key() {
    let mut spec = marquee_gateway::BidderSpec::new("b1", "http://127.0.0.1:9/bid");
    spec.notice_hosts = vec!["win.example.com:8080".into()];
    let error = common::config_error(spec);
    assert!(
        error.contains("\"b1\"")
            && error.contains("notice_hosts")
            && error.contains("win.example.com:8080"),
        "{error}"
    );
}
