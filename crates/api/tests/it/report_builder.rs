//! The report builder's parameters of `GET /api/v1/reports`: date presets (`period=`) resolved
//! in the report's zone against the injected clock, and `compare=previous` (each metric beside
//! the period of the same length right before, and its change in %), in JSON and CSV.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use marquee_model::Role;
use marquee_store::RunWrite;
use serde_json::Value;

use crate::report_names::{Desk, hour_row};

/// The desk, with Acme's "Homepage takeover" also delivering 5 impressions the day before
/// (2026-11-30, 10:00 UTC).
async fn desk_with_a_day_before() -> Desk {
    let desk = Desk::new().await;
    let hours = vec![hour_row(
        "2026-11-30T10:00:00Z",
        desk.takeover,
        desk.sidebar,
        5,
    )];
    desk.store
        .commit_run(RunWrite {
            line_item_hours: marquee_stats::line_item_totals(&hours),
            hours,
            ..RunWrite::default()
        })
        .await
        .unwrap();
    desk
}

fn row_of(report: &Value, line_item: u64) -> &Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["line_item"] == line_item)
        .unwrap_or_else(|| panic!("no row of line item {line_item}: {report}"))
}

#[tokio::test]
async fn presets_are_whole_days_in_the_report_s_zone_by_the_clock() {
    let desk = Desk::new().await;
    let admin = desk.token(Role::Admin, None).await;
    // The clock reads 2026-12-03 12:00 UTC: 13:00 in Berlin, Acme's zone.
    for (period, from, to) in [
        ("today", "2026-12-03", "2026-12-04"),
        ("yesterday", "2026-12-02", "2026-12-03"),
        ("last_7_days", "2026-11-26", "2026-12-03"),
        ("last_30_days", "2026-11-03", "2026-12-03"),
        ("this_month", "2026-12-01", "2027-01-01"),
        ("last_month", "2026-11-01", "2026-12-01"),
    ] {
        let report = desk
            .json(&admin, &format!("period={period}&advertiser={}", desk.acme))
            .await;
        assert_eq!(report["time_zone"], "Europe/Berlin");
        assert_eq!(report["from"], format!("{from}T00:00:00+01:00"), "{period}");
        assert_eq!(report["to"], format!("{to}T00:00:00+01:00"), "{period}");
    }
    // Across midnight in Tokyo, today there is already tomorrow in UTC.
    let report = desk.json(&admin, "period=today&tz=Asia/Tokyo").await;
    assert_eq!(report["from"], "2026-12-03T00:00:00+09:00");
    desk.advance_hours(4);
    let report = desk.json(&admin, "period=today&tz=Asia/Tokyo").await;
    assert_eq!(report["from"], "2026-12-04T00:00:00+09:00");
    let custom = desk
        .json(&admin, "period=custom&from=2026-12-01&to=2026-12-02&tz=UTC")
        .await;
    assert_eq!(custom["from"], "2026-12-01T00:00:00+00:00");
    assert!(
        desk.refused(&admin, "period=fortnight", "period")
            .await
            .contains("is not a period; use today, yesterday, last_7_days")
    );
    let (status, body) = desk.get(&admin, "period=today&from=2026-12-01").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("give either, not both"), "{body}");
}

#[tokio::test]
async fn compare_shows_each_row_beside_the_same_place_in_the_period_before() {
    let desk = desk_with_a_day_before().await;
    let admin = desk.token(Role::Admin, None).await;
    let report = desk
        .json(
            &admin,
            "from=2026-12-01&to=2026-12-02&tz=UTC&group_by=line_item&compare=previous",
        )
        .await;
    assert_eq!(report["previous"]["from"], "2026-11-30T00:00:00+00:00");
    assert_eq!(report["previous"]["to"], "2026-12-01T00:00:00+00:00");
    // The same hour of the day before, the same line item.
    let takeover = row_of(&report, desk.takeover);
    assert_eq!(takeover["impressions"], 10);
    assert_eq!(takeover["previous"]["impressions"], 5);
    assert_eq!(takeover["change"]["impressions"], 100.0);
    assert_eq!(takeover["change"]["spend_micros"], 100.0);
    assert!(
        takeover["change"].get("spend").is_none(),
        "money compares in micros"
    );
    // Nothing the day before: zeros, and no change in % from nothing.
    let run = row_of(&report, desk.run_of_site);
    assert_eq!(run["previous"]["impressions"], 0);
    assert!(run["change"]["impressions"].is_null());
    assert_eq!(report["previous"]["totals"]["impressions"], 5);
    assert_eq!(report["change"]["impressions"], 1_300.0);
    // Day rows in Berlin: each day beside the day as far into the period before.
    let days = desk
        .json(
            &admin,
            "from=2026-12-01&to=2026-12-02&tz=Europe/Berlin&granularity=day&group_by=line_item&compare=previous",
        )
        .await;
    let takeover = row_of(&days, desk.takeover);
    assert_eq!(takeover["time"], "2026-12-01T00:00:00+01:00");
    assert_eq!(takeover["previous"]["impressions"], 5);
    // Without compare nothing changes in the answer.
    let plain = desk
        .json(
            &admin,
            "from=2026-12-01&to=2026-12-02&tz=UTC&group_by=line_item",
        )
        .await;
    assert!(plain.get("previous").is_none());
    assert!(row_of(&plain, desk.takeover).get("change").is_none());
    assert!(
        desk.refused(&admin, "compare=last_year", "compare")
            .await
            .contains("use previous or none")
    );
}

#[tokio::test]
async fn compared_csv_has_previous_and_change_columns() {
    let desk = desk_with_a_day_before().await;
    let admin = desk.token(Role::Admin, None).await;
    let (status, body) = desk
        .get(
            &admin,
            "from=2026-12-01&to=2026-12-02&tz=UTC&group_by=line_item&compare=previous&format=csv",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut lines = body.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no column {name}: {header:?}"))
    };
    let takeover = lines
        .map(|line| line.split(',').collect::<Vec<_>>())
        .find(|cells| cells[column("line_item_name")] == "Homepage takeover")
        .unwrap();
    assert_eq!(takeover[column("impressions")], "10");
    assert_eq!(takeover[column("previous_impressions")], "5");
    assert_eq!(takeover[column("change_impressions_percent")], "100.00");
    assert_eq!(takeover[column("previous_spend")], "0.010000");
    assert_eq!(takeover[column("change_clicks_percent")], "");
    assert_eq!(header.len(), takeover.len());
}
