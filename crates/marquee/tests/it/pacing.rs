//! Budgets through the binary: a demo line item given a small impression budget over the API
//! serves exactly that many impressions (beacons fired at once, so nothing is in flight and
//! the bound is the budget itself), then stops; the manager's `/metrics` shows its lease, and
//! the stop the next round decides reaches the edge's metrics within one pacing interval.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{
    Server, fire_impression, get_json, impression_token, metrics_page, token_from,
    update_line_item, wait_for_ad,
};
use serde_json::json;

const BUDGET: u64 = 12;

/// One ad at placement 1: its line item and, if any, its impression token.
async fn ad(client: &reqwest::Client, server: &Server) -> Option<(u64, String)> {
    let answer = get_json(client, &server.url("/ad.json?placement=1"), None).await;
    let ad = answer["ads"].get(0)?;
    let html = ad["html"].as_str()?;
    Some((
        ad["line_item"].as_u64()?,
        impression_token(html)?.to_owned(),
    ))
}

fn metric(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test]
async fn a_budgeted_line_item_stops_at_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &["--demo"],
        &[
            ("MARQUEE_PACING__INTERVAL_MS", "300"),
            ("MARQUEE_PACING__IN_FLIGHT_ALLOWANCE_MS", "0"),
            ("MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS", "200"),
        ],
    );
    let admin = token_from(&server.stderr_line("demo admin token"));
    let client = reqwest::Client::new();
    wait_for_ad(&client, &server.url("")).await;
    let (line_item, _) = ad(&client, &server).await.expect("an ad at placement 1");

    update_line_item(&client, &server.base, &admin, line_item, |item| {
        item["goal"] = json!({ "metric": "impressions", "lifetime": BUDGET });
        item["pacing"] = json!("asap");
    })
    .await;

    // The edge holds a lease once it has the snapshot with the goal and renewed.
    let series = |name: &str| format!("{name}{{line_item=\"{line_item}\"}}");
    let leased = Instant::now() + Duration::from_secs(20);
    loop {
        let text = metrics_page(&client, &server.base).await;
        if metric(&text, &series("marquee_lease_live_edges")) == Some(1) {
            break;
        }
        assert!(Instant::now() < leased, "no lease within 20 s:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Serve and fire until the line item has been absent for 300 ads in a row after the
    // budget could have been reached, for at most 60 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut delivered = 0;
    let mut absent_since_budget = 0;
    while Instant::now() < deadline && absent_since_budget < 300 {
        let served = ad(&client, &server).await;
        if let Some((_, token)) = served.filter(|(served, _)| *served == line_item) {
            fire_impression(&client, &server.base, &token).await;
            delivered += 1;
            absent_since_budget = 0;
        } else if delivered >= BUDGET {
            absent_since_budget += 1;
        }
    }
    assert_eq!(
        delivered, BUDGET,
        "impressions of line item {line_item} against its budget"
    );
    assert_eq!(absent_since_budget, 300, "it kept serving past its budget");

    // The edge reports what it billed with its next renewal (every lease_renew_ms at most).
    let reported = Instant::now() + Duration::from_secs(10);
    loop {
        let text = metrics_page(&client, &server.base).await;
        assert_eq!(metric(&text, &series("marquee_lease_limit")), Some(BUDGET));
        let used = metric(&text, &series("marquee_lease_used"));
        if used == Some(BUDGET) {
            break;
        }
        assert!(
            Instant::now() < reported,
            "used {used:?} after 10 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The aggregation counts the delivery, the next round stops the line item (goal reached),
    // and the edge applies that control with its next sync: measured from the manager's
    // metric to the edge's, within one pacing interval at the default (10 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut manager_stopped = None;
    loop {
        let text = metrics_page(&client, &server.base).await;
        if manager_stopped.is_none() && metric(&text, &series("marquee_pacing_stopped")) == Some(1)
        {
            manager_stopped = Some(Instant::now());
        }
        if let Some(at) = manager_stopped
            && metric(&text, &series("marquee_edge_pacing_stopped")) == Some(1)
        {
            let lag = at.elapsed();
            println!("control reached the edge {lag:?} after the manager set it");
            assert!(lag < Duration::from_secs(10), "{lag:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no stop within 20 s:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop();
}
