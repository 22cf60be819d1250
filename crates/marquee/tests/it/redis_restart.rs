//! Redis restarted mid-run under an edge: `marquee serve --demo` with
//! `[redis]` on a `redis-server` of the test's own (the binary `scripts/test-deps.sh`
//! installs), asked for ads in a loop. Redis is killed (`kill -9`) and started again on the same
//! port: every request is answered throughout, the breaker opens while Redis is away (the
//! metrics say so) and closes again once it is back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{RedisServer, free_port, get_as_german_iphone, metrics_page, required_metric};

struct Client {
    http: reqwest::Client,
    base: String,
    answered: usize,
}

impl Client {
    /// Asks for an ad; it must be answered with one. The demo's capped line item serves
    /// placement 3 to mobile users in Germany: its caps go through Redis.
    async fn ad(&mut self) {
        // A new user each time: the edge caches a user's state for a while.
        let url = format!(
            "{}/ad.json?p=3&uid=restart-{}-{}",
            self.base,
            std::process::id(),
            self.answered
        );
        let response = get_as_german_iphone(&self.http, &url).await;
        assert_eq!(response.status(), reqwest::StatusCode::OK);
        self.answered += 1;
    }

    async fn breaker(&self) -> f64 {
        let text = metrics_page(&self.http, &self.base).await;
        required_metric(&text, "marquee_redis_breaker_state")
    }

    /// Asks for ads until the breaker is `closed` or not (open or half open, probing), for at
    /// most 10 s.
    async fn until_breaker(&mut self, closed: bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while (self.breaker().await == 0.0) != closed {
            self.ad().await;
            if Instant::now() > deadline {
                let text = metrics_page(&self.http, &self.base).await;
                let redis: Vec<&str> = text
                    .lines()
                    .filter(|l| l.starts_with("marquee_redis"))
                    .collect();
                panic!("breaker never closed={closed}: {redis:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn an_edge_keeps_answering_through_a_redis_restart_and_its_breaker_recovers() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let port = free_port();
    let redis = RedisServer::start(port);
    let data = tempfile::tempdir().unwrap();
    let redis_url = format!("redis://127.0.0.1:{port}");
    let server = common::demo_with_redis(data.path(), &redis_url, "300");
    let mut client = Client {
        http: reqwest::Client::new(),
        base: server.url(""),
        answered: 0,
    };
    common::wait_for_ad(&client.http, &client.base).await;
    for _ in 0..20 {
        client.ad().await;
    }
    assert_eq!(client.breaker().await, 0.0, "closed while Redis answers");

    drop(redis);
    client.until_breaker(false).await;
    for _ in 0..20 {
        client.ad().await;
    }
    let redis = RedisServer::start(port);
    client.until_breaker(true).await;
    for _ in 0..20 {
        client.ad().await;
    }
    println!(
        "redis restart: {} requests, all answered; breaker opened while away, closed once back",
        client.answered
    );
    server.stop();
    drop(redis);
}
