//! Live statistics through the binary: an unknown `{{STAT:…}}` name is a 422 naming
//! `content.html`; a creative given `{{STAT:IMPRESSIONS_TODAY}}` after its line item's
//! impressions were aggregated serves that count from the edge, rendered by the manager.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{
    Server, fire_impression, get_json, impression_token, put_json, token_from, wait_for_ad,
};
use serde_json::Value;

/// Impressions of the house line item to fire.
const FIRED: usize = 5;

/// One ad at placement 1 (the house line item fills it): line item, creative, HTML.
async fn ad(client: &reqwest::Client, server: &Server) -> Option<(u64, u64, String)> {
    let answer: Value = get_json(client, &server.url("/ad.json?placement=1"), None).await;
    let ad = answer["ads"].get(0)?;
    Some((
        ad["line_item"].as_u64()?,
        ad["creative"].as_u64()?,
        ad["html"].as_str()?.to_owned(),
    ))
}

async fn impressions_today(client: &reqwest::Client, server: &Server, token: &str) -> i64 {
    let now = jiff::Timestamp::now();
    let url = server.url(&format!(
        "/api/v1/reports?from={}&to={}&granularity=minute",
        now - jiff::SignedDuration::from_hours(1),
        now + jiff::SignedDuration::from_hours(1)
    ));
    let report = get_json(client, &url, Some(token)).await;
    report["totals"]["impressions"].as_i64().unwrap()
}

#[tokio::test]
async fn a_live_statistic_reaches_the_edge_rendered_by_the_manager() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--demo"]);
    let token = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::new();
    wait_for_ad(&client, &server.base).await;

    let list = get_json(
        &client,
        &server.url("/api/v1/creatives?q=Subscribe%20leaderboard"),
        Some(&token),
    )
    .await;
    let mut creative = list["items"][0].clone();
    let id = creative["id"].as_u64().unwrap();
    let house = creative["line_item_id"].as_u64().unwrap();
    let url = server.url(&format!("/api/v1/creatives/{id}"));

    let mut unknown = creative.clone();
    unknown["content"]["html"] = Value::from("<b>{{STAT:VISITS_TODAY}}</b>");
    let refused = put_json(&client, &url, &token, &unknown).await;
    assert_eq!(refused.status(), 422);
    let body = refused.text().await.unwrap();
    assert!(
        body.contains("content.html") && body.contains("unknown live statistic"),
        "{body}"
    );

    // Impressions of the house line item only (other ads are fetched but never fired).
    let mut fired = 0;
    for _ in 0..200 {
        if fired == FIRED {
            break;
        }
        let Some((line_item, _, html)) = ad(&client, &server).await else {
            continue;
        };
        if line_item != house {
            continue;
        }
        let token = impression_token(&html).unwrap();
        fire_impression(&client, &server.base, token).await;
        fired += 1;
    }
    assert_eq!(
        fired, FIRED,
        "the house line item was not served often enough"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while impressions_today(&client, &server, &token).await < FIRED as i64 {
        assert!(
            Instant::now() < deadline,
            "impressions not aggregated in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The creative starts using the statistic: its first render reads the aggregates.
    creative["content"]["html"] = Value::from(
        "<a href=\"{{CLICK_URL}}\">Read by <b id=\"live\">{{STAT:IMPRESSIONS_TODAY}}</b> today</a>",
    );
    let updated = put_json(&client, &url, &token, &creative).await;
    assert_eq!(updated.status(), 200, "{}", updated.text().await.unwrap());
    let expected = format!("<b id=\"live\">{FIRED}</b>");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some((_, served, html)) = ad(&client, &server).await
            && served == id
            && html.contains("id=\"live\"")
        {
            assert!(html.contains(&expected), "{html}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the live creative was not served in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop();
}
