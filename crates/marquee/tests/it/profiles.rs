//! User profiles through the real binary, embedded default (no Redis): a CSV and a JSON upload
//! to `POST /profiles` with the report of refused rows, a line item targeted on a segment and
//! an attribute served only to the users whose profile has both, a page unable to claim an
//! attribute, and the profiles kept across a restart; bid requests targeted on the profile of
//! the user they name; with Redis, an upload to one edge targeted on another, for ad and bid
//! requests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{
    Server, get_json, id_named, line_item_for_german_iphone, metrics_page, openrtb_sample,
    redis_url, token_from, update_line_item,
};
use serde_json::{Value, json};

const NEWS_MOBILE: u64 = 3;
const SECRET: &str = "profiles-test-secret-0123";

fn start(data: &std::path::Path) -> Server {
    Server::start_with(
        data,
        &["--demo"],
        &[
            ("MARQUEE_EDGE__COUNTRY_HEADER", "x-country"),
            ("MARQUEE_AGGREGATION__TOKEN", SECRET),
        ],
    )
}

/// The line item served to `uid` at the mobile news placement, if any.
async fn served(client: &reqwest::Client, server: &Server, uid: &str, extra: &str) -> Option<u64> {
    let url = server.url(&format!("/ad.json?p={NEWS_MOBILE}&uid={uid}{extra}"));
    line_item_for_german_iphone(client, &url).await
}

/// Line item 1 ("Boots DACH mobile") is also targeted on `rule`, over the API.
async fn target_line_item_1_also(
    client: &reqwest::Client,
    server: &Server,
    admin: &str,
    rule: Value,
) {
    update_line_item(client, &server.base, admin, 1, |item| {
        item["targeting"] = match item["targeting"].take() {
            Value::Null => rule,
            before => json!({"all": [before, rule]}),
        };
    })
    .await;
}

/// The demo line item that bids on exchanges' 300x250 banners.
const EXCHANGE_BANNERS: &str = "Open exchange banners";

/// The id of the line item called `name`.
async fn line_item_named(
    client: &reqwest::Client,
    server: &Server,
    admin: &str,
    name: &str,
) -> u64 {
    let list = get_json(client, &server.url("/api/v1/line-items"), Some(admin)).await;
    id_named(&list, name)
}

/// The line item called `name` is targeted on `rule` alone, over the API.
async fn target_line_item_named(
    client: &reqwest::Client,
    server: &Server,
    admin: &str,
    name: &str,
    rule: Value,
) {
    let id = line_item_named(client, server, admin, name).await;
    update_line_item(client, &server.base, admin, id, |item| {
        item["targeting"] = rule;
    })
    .await;
}

/// The status of the answer to a bid request (a 300x250 banner) for our user `uid`, named in
/// `user.buyeruid`.
async fn bid_status(client: &reqwest::Client, server: &Server, uid: &str) -> u16 {
    let mut request = openrtb_sample("iab-2.6/iab-2.6-req-1-simple-banner.json");
    request["user"]["buyeruid"] = json!(uid);
    client
        .post(server.url("/openrtb2/bid"))
        .json(&request)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn upload(
    client: &reqwest::Client,
    server: &Server,
    content_type: &str,
    body: String,
) -> (u16, Value) {
    let response = client
        .post(server.url("/profiles"))
        .bearer_auth(SECRET)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Waits until `check` holds, for at most 10 s.
async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    mut check: impl FnMut() -> F,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploaded_profiles_are_targeted_and_kept() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let admin = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::new();
    eventually("an ad", || async {
        served(&client, &server, "anyone", "").await == Some(1)
    })
    .await;

    // Line item 1 now also needs the segment `vip` and tier gold.
    let profile_rule = json!({"all": [
        {"segment": ["vip"]},
        {"key_value": {"key": "u_tier", "values": ["gold"]}}
    ]});
    target_line_item_1_also(&client, &server, &admin, profile_rule).await;
    eventually("the targeting on the edge", || async {
        served(&client, &server, "alice", "").await.is_none()
    })
    .await;

    let refused = client
        .post(server.url("/profiles"))
        .body("user,segments,attributes\n")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    let csv = "user,segments,attributes\n\
               alice,vip|news,tier=gold\n\
               bob,vip,tier=silver\n\
               ,vip,\n\
               carol,vip,Tier=gold\n"
        .to_owned();
    let (status, report) = upload(&client, &server, "text/csv", csv).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["accepted"], 2);
    assert_eq!(report["store"], "memory");
    let rejected = report["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 2, "{report}");
    assert_eq!(report["rejected_total"], 2, "{report}");
    assert_eq!(rejected[0]["at"], "line 4");
    assert_eq!(rejected[1]["at"], "line 5");
    assert!(rejected[1]["reason"].as_str().unwrap().contains("\"Tier\""));

    assert_eq!(served(&client, &server, "alice", "").await, Some(1));
    assert_eq!(
        served(&client, &server, "bob", "").await,
        None,
        "tier silver"
    );
    assert_eq!(
        served(&client, &server, "bob", "&kv=u_tier:gold").await,
        None,
        "the page cannot claim an attribute"
    );
    assert_eq!(
        served(&client, &server, "dave", "").await,
        None,
        "no profile"
    );

    let (status, report) = upload(
        &client,
        &server,
        "application/json",
        json!({"profiles": [
            {"user": "bob", "segments": ["vip"], "attributes": {"tier": "gold"}},
            {"user": "erin", "segments": "vip"}
        ]})
        .to_string(),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["accepted"], 1);
    assert_eq!(report["rejected"][0]["at"], "profiles[1]");
    assert_eq!(served(&client, &server, "bob", "").await, Some(1));

    let (status, report) = upload(&client, &server, "text/csv", "name,x\n".into()).await;
    assert_eq!(status, 400);
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("user,segments,attributes")
    );

    server.stop();
    let server = start(data.path());
    eventually("alice's profile after a restart", || async {
        served(&client, &server, "alice", "").await == Some(1)
    })
    .await;
    assert_eq!(served(&client, &server, "bob", "").await, Some(1));
    server.stop();
}

/// Exchange traffic: the profile of the user a bid request names is targeted like an ad
/// request's, its segments and its attributes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bid_requests_target_the_profile_of_the_user_they_name() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path());
    let admin = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::new();
    eventually("a bid", || async {
        bid_status(&client, &server, "anyone").await == 200
    })
    .await;
    let csv = "user,segments,attributes
alice,vip,tier=gold
bob,vip,tier=silver
"
    .to_owned();
    let (status, report) = upload(&client, &server, "text/csv", csv).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["accepted"], 2);
    let rule = json!({"all": [
        {"segment": ["vip"]},
        {"key_value": {"key": "u_tier", "values": ["gold"]}}
    ]});
    target_line_item_named(&client, &server, &admin, EXCHANGE_BANNERS, rule).await;
    eventually("the targeting on the edge", || async {
        bid_status(&client, &server, "dave").await == 204
    })
    .await;
    assert_eq!(bid_status(&client, &server, "alice").await, 200);
    assert_eq!(
        bid_status(&client, &server, "bob").await,
        204,
        "tier silver"
    );
    server.stop();
}

/// With `[redis]`: an upload to one edge is written to Redis and targeted on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn profiles_uploaded_to_one_edge_reach_another_through_redis() {
    let redis = redis_url();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let servers: Vec<Server> = dirs
        .iter()
        .map(|dir| {
            Server::start_with(
                dir.path(),
                &["--demo"],
                &[
                    ("MARQUEE_EDGE__COUNTRY_HEADER", "x-country"),
                    ("MARQUEE_AGGREGATION__TOKEN", SECRET),
                    ("MARQUEE_EDGE__DEADLINE_MS", "2000"),
                    ("MARQUEE_REDIS__URL", &redis),
                    ("MARQUEE_REDIS__TIMEOUT_MS", "1000"),
                ],
            )
        })
        .collect();
    let client = reqwest::Client::new();
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    // Each server has its own demo database: the same targeting is set on both.
    for server in &servers {
        let admin = token_from(&server.stderr_line("demo admin token"));
        let rule = json!({"segment": ["redis-vip"]});
        target_line_item_1_also(&client, server, &admin, rule.clone()).await;
        target_line_item_named(&client, server, &admin, EXCHANGE_BANNERS, rule).await;
    }
    let user = format!("redis-user-{run}");
    let csv = format!("user,segments,attributes\n{user},redis-vip,\n");
    let (status, report) = upload(&client, &servers[0], "text/csv", csv).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["store"], "redis");
    assert_eq!(report["accepted"], 1);
    // The other edge never asked about this user before, so nothing stale is cached there.
    // Once its snapshot has the targeting, a user without a profile gets no line item 1...
    let other = &servers[1];
    // (A fresh user each time: the line item's cap of 3 would otherwise hide it too.)
    let attempt = std::sync::atomic::AtomicUsize::new(0);
    eventually("the targeting on the other edge", || async {
        let n = attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        served(&client, other, &format!("no-profile-{run}-{n}"), "")
            .await
            .is_none()
    })
    .await;
    // ...and the uploaded one does.
    assert_eq!(served(&client, other, &user, "").await, Some(1));
    // A bid request does not wait for Redis: the user's profile is in the other edge's cache
    // now (the ad request read it), so the exchange line item bids for them, and not for a
    // user without a profile once the targeting is there.
    eventually("the bid targeting on the other edge", || async {
        let n = attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bid_status(&client, other, &format!("no-profile-{run}-{n}")).await == 204
    })
    .await;
    assert_eq!(bid_status(&client, other, &user).await, 200);
    // A user the cache does not hold goes without a profile once; the fetch it starts lets
    // the next bid request see it.
    let bidder = format!("redis-bidder-{run}");
    let csv = format!("user,segments,attributes\n{bidder},redis-vip,\n");
    let (status, report) = upload(&client, &servers[0], "text/csv", csv).await;
    assert_eq!(status, 200, "{report}");
    eventually("the fetched profile on the other edge", || async {
        bid_status(&client, other, &bidder).await == 200
    })
    .await;
    let text = metrics_page(&client, &other.base).await;
    assert!(text.contains("marquee_redis_breaker_state 0\n"), "{text}");
    for server in servers {
        server.stop();
    }
}
