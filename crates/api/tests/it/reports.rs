//! `GET /api/v1/reports` against a real SQLite store holding aggregates: grouping, time zones,
//! roles and tenancy, CSV, and errors that name the parameter.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use jiff::SignedDuration;
use marquee_api::{
    ApiOptions, GeoAvailability, RouteTable, add_routes, add_routes_with, hash_token,
};
use marquee_model::{ManualClock, ObjectKind, Role};
use marquee_stats::{Counters, EventKind, Hll, InvalidReason, RowKey, SketchKey};
use marquee_store::{NewToken, RunWrite, SqliteStore, Store};
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

struct App {
    router: Router,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    /// Advertiser 1 (Berlin) has line items a1, a2; advertiser 2 (New York) has b1.
    a: u64,
    a1: u64,
    a2: u64,
    b: u64,
    b1: u64,
    publisher: u64,
    p1: u64,
    p2: u64,
    _dir: TempDir,
}

async fn create(store: &Arc<dyn Store>, kind: ObjectKind, parent: Option<u64>, body: &str) -> u64 {
    let name = format!("{kind:?}");
    marquee_store::stats_suite::create_named(store.as_ref(), kind, parent, &name, body).await
}

/// An advertiser whose reports are in `time_zone` and `currency`.
async fn advertiser(store: &Arc<dyn Store>, time_zone: &str, currency: &str) -> u64 {
    let body = json!({ "time_zone": time_zone, "currency": currency }).to_string();
    create(store, ObjectKind::Advertiser, None, &body).await
}

fn at(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>().unwrap().as_second()
}

fn row(
    line_item: u64,
    bucket: &str,
    placement: u64,
    country: &[u8; 2],
    impressions: i64,
) -> (RowKey, Counters) {
    (
        RowKey {
            line_item,
            bucket: at(bucket),
            creative: 0,
            placement,
            country: *country,
            // One region per country: Bavaria, Île-de-France, California.
            region: match country {
                b"DE" => *b"BY\0",
                b"FR" => *b"IDF",
                b"US" => *b"CA\0",
                _ => [0; 3],
            },
            device: 1,
        },
        Counters {
            decisions: impressions * 2,
            impressions,
            clicks: impressions / 2,
            cpm_micros: impressions * 2_000_000,
            ..Counters::default()
        },
    )
}

impl App {
    async fn new() -> App {
        let dir = TempDir::new().unwrap();
        let clock = Arc::new(ManualClock::new("2026-12-03T12:00:00Z".parse().unwrap()));
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("r.db"), clock.clone()).unwrap());
        let a = advertiser(&store, "Europe/Berlin", "EUR").await;
        let b = advertiser(&store, "America/New_York", "USD").await;
        let ca = create(&store, ObjectKind::Campaign, Some(a), "{}").await;
        let cb = create(&store, ObjectKind::Campaign, Some(b), "{}").await;
        let a1 = create(&store, ObjectKind::LineItem, Some(ca), "{}").await;
        let a2 = create(&store, ObjectKind::LineItem, Some(ca), "{}").await;
        let b1 = create(&store, ObjectKind::LineItem, Some(cb), "{}").await;
        let publisher = create(&store, ObjectKind::Publisher, None, "{}").await;
        let other_publisher = create(&store, ObjectKind::Publisher, None, "{}").await;
        let site = create(&store, ObjectKind::Site, Some(publisher), "{}").await;
        let other_site = create(&store, ObjectKind::Site, Some(other_publisher), "{}").await;
        let p1 = create(&store, ObjectKind::Placement, Some(site), "{}").await;
        let p2 = create(&store, ObjectKind::Placement, Some(other_site), "{}").await;

        // Hour rows in UTC: 23:00 on the 1st is midnight on the 2nd in Berlin.
        let mut hours = vec![
            row(a1, "2026-12-01T10:00:00Z", p1, b"DE", 10),
            row(a1, "2026-12-01T23:00:00Z", p1, b"DE", 20),
            row(a2, "2026-12-01T23:00:00Z", p2, b"FR", 40),
            row(b1, "2026-12-01T10:00:00Z", p1, b"US", 80),
        ];
        hours.sort_unstable_by_key(|(k, _)| *k);
        // A run writes every width; UTC day rows here are the hours' sums.
        let mut days: Vec<(RowKey, Counters)> = Vec::new();
        for (key, counters) in &hours {
            let day = RowKey {
                bucket: key.bucket - key.bucket.rem_euclid(86_400),
                ..*key
            };
            match days.iter_mut().find(|(k, _)| *k == day) {
                Some((_, sum)) => sum.add(counters),
                None => days.push((day, *counters)),
            }
        }
        days.sort_unstable_by_key(|(k, _)| *k);
        let mut minutes = vec![row(a1, "2026-12-01T10:07:00Z", p1, b"DE", 10)];
        minutes.sort_unstable_by_key(|(k, _)| *k);
        let mut users = Hll::new();
        for user in 0..30 {
            users.insert(user);
        }
        store
            .commit_run(RunWrite {
                minutes,
                line_item_hours: marquee_stats::line_item_totals(&hours),
                hours,
                days,
                sketches: vec![(
                    SketchKey {
                        line_item: a1,
                        day: 20_261_202,
                    },
                    users,
                )],
                ..RunWrite::default()
            })
            .await
            .unwrap();
        let router = add_routes(
            RouteTable::new(),
            Arc::clone(&store),
            clock.clone(),
            "https://ads.example.com",
        )
        .into_router("test", "0");
        App {
            router,
            store,
            clock,
            a,
            a1,
            a2,
            b,
            b1,
            publisher,
            p1,
            p2,
            _dir: dir,
        }
    }

    async fn token(&self, role: Role, owner_id: Option<u64>) -> String {
        let token = format!("mq_{role:?}_{owner_id:?}");
        self.store
            .create_token(NewToken {
                role,
                owner_id,
                hash: hash_token(&token),
                label: "t".into(),
            })
            .await
            .unwrap();
        token
    }

    /// Serves the routes again, with `options`.
    fn serve_with(&mut self, options: ApiOptions) {
        self.router = add_routes_with(
            RouteTable::new(),
            Arc::clone(&self.store),
            self.clock.clone(),
            "https://ads.example.com",
            options,
            GeoAvailability::default(),
        )
        .into_router("test", "0");
    }

    /// Commits a run of these hour rows (in any order).
    async fn commit_hours(&self, mut hours: Vec<(RowKey, Counters)>) {
        hours.sort_unstable_by_key(|(k, _)| *k);
        self.store
            .commit_run(marquee_store::stats_suite::hour_rows(hours))
            .await
            .unwrap();
    }

    /// The app with an admin's token.
    async fn with_admin() -> (App, String) {
        let app = App::new().await;
        let admin = app.admin().await;
        (app, admin)
    }

    /// The app with a token of advertiser `a` (Berlin, EUR).
    async fn with_advertiser_a() -> (App, String) {
        let app = App::new().await;
        let token = app.token(Role::Advertiser, Some(app.a)).await;
        (app, token)
    }

    async fn admin(&self) -> String {
        self.token(Role::Admin, None).await
    }

    async fn get(&self, token: &str, query: &str) -> (StatusCode, String, String) {
        let request = Request::get(format!("/api/v1/reports?{query}"))
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    async fn json(&self, token: &str, query: &str) -> Value {
        let (status, _, body) = self.get(token, query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

#[tokio::test]
async fn an_advertiser_sees_its_own_days_in_its_time_zone() {
    let (app, token) = App::with_advertiser_a().await;
    let report = app
        .json(
            &token,
            "from=2026-12-01&to=2026-12-03&granularity=day&group_by=line_item",
        )
        .await;
    assert_eq!(report["time_zone"], "Europe/Berlin");
    assert_eq!(report["currency"], "EUR");
    assert_eq!(report["from"], "2026-12-01T00:00:00+01:00");
    let rows = report["rows"].as_array().unwrap();
    let summary: Vec<(String, u64, i64)> = rows
        .iter()
        .map(|r| {
            (
                r["time"].as_str().unwrap().to_owned(),
                r["line_item"].as_u64().unwrap(),
                r["impressions"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("2026-12-01T00:00:00+01:00".into(), app.a1, 10),
            ("2026-12-02T00:00:00+01:00".into(), app.a1, 20),
            ("2026-12-02T00:00:00+01:00".into(), app.a2, 40),
        ],
        "another advertiser's line item never shows"
    );
    let a1_on_2nd = &rows[1];
    assert_eq!(a1_on_2nd["unique_users"], 30);
    assert_eq!(a1_on_2nd["requests"], 40);
    assert_eq!(a1_on_2nd["clicks"], 10);
    assert_eq!(a1_on_2nd["ctr"], 0.5);
    assert_eq!(a1_on_2nd["spend_micros"], 40_000);
    assert_eq!(a1_on_2nd["spend"], "0.040000");
    assert_eq!(report["totals"]["impressions"], 70);
    assert_eq!(report["totals"]["unique_users"], 30);

    // The sketches hold a line item's users over every country and device: filtered by
    // either, the users are unknown, not the unfiltered count.
    for filter in ["country=DE", "country=US", "device=desktop"] {
        let filtered = app
            .json(
                &token,
                &format!(
                    "from=2026-12-01&to=2026-12-03&granularity=day&group_by=line_item&{filter}"
                ),
            )
            .await;
        assert_eq!(
            filtered["totals"]["unique_users"],
            Value::Null,
            "{filter}: {filtered}"
        );
        for row in filtered["rows"].as_array().unwrap() {
            assert_eq!(row["unique_users"], Value::Null, "{filter}: {row}");
        }
    }

    // Its own advertiser id is fine; another's, or another's line item, is missing.
    let own = app
        .json(
            &token,
            &format!("from=2026-12-01&to=2026-12-04&advertiser={}", app.a),
        )
        .await;
    assert_eq!(own["totals"]["impressions"], 70);
    for query in [
        format!("from=2026-12-01&advertiser={}", app.b),
        format!("from=2026-12-01&line_item={}", app.b1),
    ] {
        let (status, _, body) = app.get(&token, &query).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{query}: {body}");
    }
}

#[tokio::test]
async fn an_admin_groups_and_filters_anything_in_any_zone() {
    let (app, admin) = App::with_admin().await;
    let all = app
        .json(
            &admin,
            "from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z&group_by=advertiser,country",
        )
        .await;
    assert_eq!(all["time_zone"], "UTC");
    assert_eq!(
        all["currency"],
        Value::Null,
        "several advertisers, several currencies"
    );
    assert_eq!(all["totals"]["impressions"], 150);
    let rows = all["rows"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["advertiser"] == app.b && r["country"] == "US" && r["impressions"] == 80)
    );

    // Regions: ISO 3166-2, grouped and filtered, case-insensitive on the way in.
    let regions = app
        .json(
            &admin,
            "from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z&group_by=region&region=us-ca,FR-IDF",
        )
        .await;
    let mut found: Vec<(String, i64)> = regions["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["region"].as_str().unwrap().to_owned(),
                r["impressions"].as_i64().unwrap(),
            )
        })
        .collect();
    found.sort();
    assert_eq!(found, vec![("FR-IDF".into(), 40), ("US-CA".into(), 80)]);
    assert_eq!(regions["totals"]["impressions"], 120);

    // One advertiser's line items bring its zone; `tz` overrides.
    let ny = app
        .json(
            &admin,
            &format!("from=2026-12-01&to=2026-12-02&line_item={}", app.b1),
        )
        .await;
    assert_eq!(ny["time_zone"], "America/New_York");
    assert_eq!(ny["rows"][0]["time"], "2026-12-01T05:00:00-05:00");
    let kolkata = app
        .json(
            &admin,
            &format!(
                "from=2026-12-01&to=2026-12-02&line_item={}&tz=Asia/Kolkata",
                app.b1
            ),
        )
        .await;
    assert_eq!(kolkata["rows"][0]["time"], "2026-12-01T15:30:00+05:30");

    // Minutes, filtered by country and device.
    let minutes = app
        .json(&admin, "from=2026-12-01T10:00:00Z&to=2026-12-01T11:00:00Z&granularity=minute&country=de&device=desktop")
        .await;
    assert_eq!(minutes["rows"].as_array().unwrap().len(), 1);
    assert_eq!(minutes["rows"][0]["time"], "2026-12-01T10:07:00+00:00");
    let none = app
        .json(
            &admin,
            "from=2026-12-01T10:00:00Z&to=2026-12-01T11:00:00Z&granularity=minute&device=phone",
        )
        .await;
    assert_eq!(none["rows"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn a_publisher_sees_only_its_placements_by_supply_dimensions() {
    let app = App::new().await;
    let token = app.token(Role::Publisher, Some(app.publisher)).await;
    let report = app.json(&token, "from=2026-12-01T00:00:00Z&to=2026-12-03T00:00:00Z&granularity=day&group_by=placement,site").await;
    let rows = report["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["placement"] == app.p1));
    assert_eq!(report["totals"]["impressions"], 110);
    assert_eq!(report["totals"]["unique_users"], Value::Null);
    let (status, _, _) = app.get(&token, "from=2026-12-01&group_by=line_item").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = app
        .get(&token, &format!("from=2026-12-01&placement={}", app.p2))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn csv_has_a_header_and_one_line_per_row() {
    let (app, admin) = App::with_admin().await;
    let (status, content_type, body) = app
        .get(&admin, &format!("from=2026-12-01&to=2026-12-03&granularity=day&group_by=line_item&advertiser={}&format=csv", app.a))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(
        lines[0],
        "time,line_item,line_item_name,requests,decisions,bids,wins,billings,impressions,clicks,ctr,conversions,spend,unique_users,\
         invalid_impressions,invalid_clicks,invalid_conversions,invalid_crawler,invalid_prefetch,\
         invalid_datacenter,invalid_rate,invalid_click_without_impression,invalid_too_fast,\
         invalid_untokened_disabled,invalid_repeat_conversion,invalid_no_cache_buster,\
         ad_requests,fill_rate,programmatic_auctions,programmatic_requests,programmatic_bids,\
         programmatic_timeouts,programmatic_wins,programmatic_direct_wins,\
         programmatic_impressions,programmatic_revenue"
    );
    assert_eq!(lines.len(), 4);
    assert_eq!(
        lines[2],
        format!(
            "2026-12-02T00:00:00+01:00,{},LineItem,40,40,0,0,0,20,10,0.500000,0,0.040000,30,0,0,0,0,0,0,0,0,0,0,0,0,\
             40,,0,0,0,0,0,0,0,0.000000",
            app.a1
        )
    );
}

#[tokio::test]
async fn bad_parameters_are_named() {
    let (app, admin) = App::with_admin().await;
    for (query, field) in [
        ("", "from"),
        ("from=yesterday", "from"),
        ("from=2026-12-02&to=2026-12-01", "to"),
        // Without `to` the report ends now (the clock's, 2026-12-03 12:00 UTC), before this
        // `from`.
        ("from=2026-12-04", "from"),
        ("from=2026-12-01&granularity=week", "granularity"),
        ("from=2026-12-01&group_by=planet", "group_by"),
        ("from=2026-12-01&line_item=x", "line_item"),
        ("from=2026-12-01&country=Germany", "country"),
        ("from=2026-12-01&region=Bavaria", "region"),
        ("from=2026-12-01&region=US-CALI", "region"),
        ("from=2026-12-01&device=toaster", "device"),
        ("from=2026-12-01&tz=Mars/Olympus", "tz"),
        ("from=2026-12-01&format=xml", "format"),
        ("from=2026-12-01&colour=blue", "colour"),
        ("from=2026-01-01&to=2026-12-01&granularity=minute", "to"),
    ] {
        let (status, _, body) = app.get(&admin, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["fields"][0]["path"], field, "{query}: {body}");
    }
    let (status, _, _) = app.get(&admin, "from=2026-12-01&advertiser=999").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_report_over_max_rows_is_refused_and_one_within_it_answers() {
    let mut app = App::new().await;
    app.serve_with(ApiOptions {
        report_max_rows: 1,
        ..ApiOptions::default()
    });
    let admin = app.admin().await;
    // Four stored hour rows, one per report row: refused once the store has read two.
    let query = "from=2026-12-01&to=2026-12-02&tz=UTC&group_by=line_item,placement,country";
    let (status, _, body) = app.get(&admin, query).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["fields"][0]["path"], "granularity", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than the 1 rows allowed"),
        "{body}"
    );
    let one = app
        .json(
            &admin,
            &format!(
                "from=2026-12-01&to=2026-12-02&tz=UTC&line_item={}&granularity=day",
                app.a1
            ),
        )
        .await;
    assert_eq!(one["rows"].as_array().unwrap().len(), 1, "{one}");
}

#[tokio::test]
async fn a_report_without_to_ends_at_the_clock_s_now() {
    let (app, admin) = App::with_admin().await;
    let (status, _, body) = app.get(&admin, "from=2026-12-01").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["to"], "2026-12-03T12:00:00+00:00", "{body}");
    app.clock.advance(SignedDuration::from_hours(30));
    let (_, _, body) = app.get(&admin, "from=2026-12-01").await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["to"], "2026-12-04T18:00:00+00:00", "{body}");
}

/// Sums a JSON report's `field` over its rows.
fn sum_rows(report: &Value, field: &str) -> i64 {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[field].as_i64().unwrap())
        .sum()
}

/// A report holds the stored buckets that start in `[from, to)` and says so: its `from` and
/// `to` are the bucket boundaries it covers. Adjacent reports therefore never count a bucket
/// twice, whatever their bounds; they used to widen `from` back to its bucket's start while
/// echoing it as asked, so 09:30–10:30 and 10:30–11:30 both counted the 10:00 hour.
#[tokio::test]
async fn adjacent_reports_never_count_a_bucket_twice_and_state_what_they_cover() {
    let (app, admin) = App::with_admin().await;
    // Hour rows at 10:00 (a1: 10, b1: 80) and 23:00 (a1: 20, a2: 40) on the 1st, UTC. Each
    // case: the range asked, the `from` and `to` the report states (where the case is about
    // them) and the impressions it counts.
    let mut reports = Vec::new();
    for (query, from, to, impressions) in [
        (
            "from=2026-12-01T09:30:00Z&to=2026-12-01T10:30:00Z&granularity=hour",
            Some("2026-12-01T10:00:00+00:00"),
            Some("2026-12-01T11:00:00+00:00"),
            90,
        ),
        (
            "from=2026-12-01T10:30:00Z&to=2026-12-01T11:30:00Z&granularity=hour",
            Some("2026-12-01T11:00:00+00:00"),
            None,
            0,
        ),
        // UTC days are counted in hours too: a day report from noon does not take the
        // morning (it used to read the whole day row).
        (
            "from=2026-12-01T12:00:00Z&to=2026-12-02T00:00:00Z&granularity=day",
            Some("2026-12-01T12:00:00+00:00"),
            None,
            60,
        ),
        (
            "from=2026-12-01T00:00:00Z&to=2026-12-01T12:00:00Z&granularity=day",
            None,
            Some("2026-12-01T12:00:00+00:00"),
            90,
        ),
        // Minutes: the minute holding an instant's seconds belongs to the next report.
        (
            "from=2026-12-01T10:06:30Z&to=2026-12-01T10:07:30Z&granularity=minute",
            Some("2026-12-01T10:07:00+00:00"),
            Some("2026-12-01T10:08:00+00:00"),
            10,
        ),
        (
            "from=2026-12-01T10:07:30Z&to=2026-12-01T10:08:30Z&granularity=minute",
            None,
            None,
            0,
        ),
        // A range in which no bucket starts is an empty report, not an error.
        (
            "from=2026-12-01T10:10:00Z&to=2026-12-01T10:50:00Z&granularity=hour",
            None,
            None,
            0,
        ),
    ] {
        let report = app.json(&admin, query).await;
        if let Some(from) = from {
            assert_eq!(report["from"], from, "{query}: {report}");
        }
        if let Some(to) = to {
            assert_eq!(report["to"], to, "{query}: {report}");
        }
        assert_eq!(
            report["totals"]["impressions"], impressions,
            "{query}: {report}"
        );
        reports.push(report);
    }
    let afternoon = &reports[2];
    assert_eq!(afternoon["rows"][0]["time"], "2026-12-01T00:00:00+00:00");
    let empty = &reports[6];
    assert_eq!(empty["from"], empty["to"], "{empty}");
    assert_eq!(empty["rows"].as_array().unwrap().len(), 0, "{empty}");
}

/// Sketches are kept per line item and day in its advertiser's zone. Per-row users in another
/// zone would be another day's users (a Berlin day under a New York date): `null`. The totals
/// count the users of every day the range touches in the sketches' own zone.
#[tokio::test]
async fn unique_users_are_not_matched_by_date_across_time_zones() {
    let (app, token) = App::with_advertiser_a().await;
    let new_york = app
        .json(
            &token,
            "from=2026-12-01&to=2026-12-03&granularity=day&group_by=line_item&tz=America/New_York",
        )
        .await;
    let rows = new_york["rows"].as_array().unwrap();
    assert!(!rows.is_empty(), "{new_york}");
    for row in rows {
        assert_eq!(row["unique_users"], Value::Null, "{row}");
    }
    assert_eq!(new_york["totals"]["unique_users"], 30, "{new_york}");

    // 18:00–24:00 on the 1st in New York is 00:00–06:00 on the 2nd in Berlin: the users
    // kept on Berlin's 2nd, not on its 1st (which has none).
    let evening = app
        .json(
            &token,
            "from=2026-12-01T18:00&to=2026-12-02&granularity=hour&tz=America/New_York",
        )
        .await;
    assert_eq!(evening["totals"]["impressions"], 60, "{evening}");
    assert_eq!(evening["totals"]["unique_users"], 30, "{evening}");

    // Another name of the same zone's days still gives them.
    let paris = app
        .json(
            &token,
            "from=2026-12-01&to=2026-12-03&granularity=day&group_by=line_item&tz=Europe/Paris",
        )
        .await;
    assert_eq!(paris["rows"][1]["unique_users"], 30, "{paris}");
}

/// Each row's spend is its exact amount rounded to the micro, down or up, so that the rows
/// add up to the total. Floored one by one, three impressions at a CPM of 0.0015 (1.5 micros each)
/// showed 0.000001 three times against a total of 0.000004.
#[tokio::test]
async fn rows_add_up_to_the_total_spend_in_json_and_csv() {
    let (app, admin) = App::with_admin().await;
    let hours: Vec<(marquee_stats::RowKey, Counters)> = ["01", "02", "03"]
        .iter()
        .map(|hour| {
            (
                RowKey {
                    line_item: app.b1,
                    bucket: at(&format!("2026-12-02T{hour}:00:00Z")),
                    creative: 0,
                    placement: app.p1,
                    country: *b"US",
                    region: [0; 3],
                    device: 1,
                },
                Counters {
                    impressions: 1,
                    cpm_micros: 1_500,
                    ..Counters::default()
                },
            )
        })
        .collect();
    app.commit_hours(hours).await;
    let query = format!(
        "from=2026-12-02T00:00:00Z&to=2026-12-02T06:00:00Z&line_item={}&tz=UTC",
        app.b1
    );
    let report = app.json(&admin, &query).await;
    assert_eq!(report["totals"]["spend_micros"], 4, "{report}");
    assert_eq!(sum_rows(&report, "spend_micros"), 4, "{report}");
    let (status, _, csv) = app.get(&admin, &format!("{query}&format=csv")).await;
    assert_eq!(status, StatusCode::OK, "{csv}");
    let spend_column = csv
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|c| c == "spend")
        .unwrap();
    let micros: i64 = csv
        .lines()
        .skip(1)
        .map(|line| {
            let spend = line.split(',').nth(spend_column).unwrap();
            (spend.parse::<f64>().unwrap() * 1e6).round() as i64
        })
        .sum();
    assert_eq!(micros, 4, "{csv}");
}

/// Invalid traffic is reported beside the billing figures, never in them: per row and in the
/// totals by kind and by reason (every reason listed, in JSON and in CSV), while impressions,
/// clicks, CTR and spend count the valid events alone. Invalid traffic refused before an ad
/// was decided (no line item) shows in its placement's publisher report.
/// Programmatic demand on the publisher's placement: two bidders' rows (line item 0, the
/// bidder's id in the creative column) beside a line item's. A publisher groups them by
/// bidder, named from the gateway's configuration; revenue is in the gateway's currency and
/// its rows add up to the total; the fill rate counts the auctions nothing filled.
#[tokio::test]
async fn programmatic_demand_is_reported_by_bidder_beside_direct_delivery() {
    use marquee_stats::bidder_id;
    let mut app = App::new().await;
    app.serve_with(ApiOptions {
        programmatic: marquee_api::ProgrammaticReports::new(
            marquee_model::Currency::USD,
            ["alpha".to_owned(), "beta".to_owned()],
        ),
        ..ApiOptions::default()
    });
    let key = |line_item: u64, creative: u64| RowKey {
        line_item,
        bucket: at("2026-12-02T05:00:00Z"),
        creative,
        placement: app.p1,
        country: *b"DE",
        region: [0; 3],
        device: 1,
    };
    // Three auctions: alpha won one (2 impressions' worth of beacons at 2.7001 net), the
    // direct line item one, nothing the third; beta timed out twice. The line item's decision
    // of the second auction, and one more without an auction.
    let alpha = Counters {
        programmatic_auctions: 3,
        programmatic_requests: 3,
        programmatic_bids: 2,
        programmatic_wins: 1,
        programmatic_direct_wins: 1,
        programmatic_impressions: 2,
        programmatic_cpm_micros: 2 * 2_700_100,
        ..Counters::default()
    };
    let beta = Counters {
        programmatic_requests: 3,
        programmatic_bids: 1,
        programmatic_timeouts: 2,
        programmatic_impressions: 1,
        programmatic_cpm_micros: 1_000_900,
        ..Counters::default()
    };
    let direct = Counters {
        decisions: 2,
        impressions: 2,
        cpm_micros: 2 * 2_000_000,
        ..Counters::default()
    };
    let hours = vec![
        (key(0, bidder_id("alpha")), alpha),
        (key(0, bidder_id("beta")), beta),
        (key(app.a1, 0), direct),
    ];
    app.commit_hours(hours).await;
    let publisher = app.token(Role::Publisher, Some(app.publisher)).await;
    let query = "from=2026-12-02T05:00:00Z&to=2026-12-02T06:00:00Z&tz=UTC&group_by=bidder";
    let report = app.json(&publisher, query).await;
    assert_eq!(report["programmatic_currency"], "USD", "{report}");
    let rows = report["rows"].as_array().unwrap();
    let by = |name: Option<&str>| {
        rows.iter()
            .find(|r| r["bidder_name"].as_str() == name)
            .unwrap_or_else(|| panic!("{name:?} in {report}"))
    };
    let (direct_row, alpha_row, beta_row) = (by(None), by(Some("alpha")), by(Some("beta")));
    assert_eq!(direct_row["bidder"], 0);
    assert_eq!(direct_row["impressions"], 2);
    assert_eq!(alpha_row["bidder"], bidder_id("alpha"));
    assert_eq!(alpha_row["programmatic_wins"], 1);
    assert_eq!(beta_row["programmatic_timeouts"], 2);
    // 5,400.2 and 1,000.9 micros; the rows
    // are 5,400 and 1,001 (the larger fraction gets the extra micro) to add up to 6,401.
    assert_eq!(alpha_row["programmatic_revenue_micros"], 5_400);
    assert_eq!(beta_row["programmatic_revenue_micros"], 1_001);
    let totals = &report["totals"];
    assert_eq!(totals["programmatic_revenue_micros"], 6_401);
    assert_eq!(totals["programmatic_revenue"], "0.006401");
    assert_eq!(totals["programmatic_impressions"], 3);
    assert_eq!(totals["impressions"], 2, "direct impressions apart");
    assert_eq!(totals["spend_micros"], 4_000);
    // Ad requests: 2 decisions + 3 auctions - the one the direct line item won = 4; filled:
    // 2 decisions + 1 bid.
    assert_eq!(totals["ad_requests"], 4);
    assert_eq!(totals["fill_rate"], 0.75);
    let (_, _, csv) = app.get(&publisher, &format!("{query}&format=csv")).await;
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .starts_with("time,bidder,bidder_name,requests"),
        "{csv}"
    );
    assert!(
        csv.contains(&format!(",{},alpha,", bidder_id("alpha"))),
        "{csv}"
    );
}

#[tokio::test]
async fn invalid_traffic_is_reported_by_reason_apart_from_billing_figures() {
    let (app, admin) = App::with_admin().await;
    let code = |reason: InvalidReason| i64::from(reason.code());
    let key = |line_item: u64, hour: &str| RowKey {
        line_item,
        bucket: at(&format!("2026-12-02T{hour}:00:00Z")),
        creative: 0,
        placement: app.p1,
        country: *b"DE",
        region: [0; 3],
        device: 1,
    };
    // Hour 05: 4 valid impressions at a CPM of 2 and one click at 0.25; 3 crawler impressions,
    // 2 too-fast clicks, 1 repeated conversion. Hour 06: 1 data-centre impression.
    let mut five = Counters {
        decisions: 4,
        impressions: 4,
        clicks: 1,
        cpm_micros: 4 * 2_000_000,
        cpc_micros: 250_000,
        ..Counters::default()
    };
    for (kind, reason, times) in [
        (EventKind::InvalidImpression, InvalidReason::Crawler, 3),
        (EventKind::InvalidClick, InvalidReason::TooFast, 2),
        (
            EventKind::InvalidConversion,
            InvalidReason::RepeatConversion,
            1,
        ),
    ] {
        for _ in 0..times {
            five.record(kind, code(reason));
        }
    }
    let mut six = Counters::default();
    six.record(
        EventKind::InvalidImpression,
        code(InvalidReason::Datacenter),
    );
    let mut refused = Counters::default();
    for _ in 0..5 {
        refused.record(
            EventKind::InvalidImpression,
            code(InvalidReason::UntokenedDisabled),
        );
    }
    let hours = vec![
        (key(app.a1, "05"), five),
        (key(app.a1, "06"), six),
        (key(0, "05"), refused),
    ];
    app.commit_hours(hours).await;

    let query = format!(
        "from=2026-12-02T05:00:00Z&to=2026-12-02T07:00:00Z&line_item={}&tz=UTC",
        app.a1
    );
    let report = app.json(&admin, &query).await;
    let totals = &report["totals"];
    assert_eq!(totals["impressions"], 4, "{report}");
    assert_eq!(totals["clicks"], 1);
    assert_eq!(totals["ctr"], 0.25);
    assert_eq!(totals["spend_micros"], 8_000 + 250_000, "valid events only");
    assert_eq!(totals["spend"], "0.258000");
    assert_eq!(totals["invalid_impressions"], 4);
    assert_eq!(totals["invalid_clicks"], 2);
    assert_eq!(totals["invalid_conversions"], 1);
    let by_reason = totals["invalid_by_reason"].as_object().unwrap();
    assert_eq!(by_reason.len(), InvalidReason::ALL.len(), "every reason");
    for reason in InvalidReason::ALL {
        let expected = match reason {
            InvalidReason::Crawler => 3,
            InvalidReason::TooFast => 2,
            InvalidReason::RepeatConversion | InvalidReason::Datacenter => 1,
            _ => 0,
        };
        assert_eq!(by_reason[reason.label()], expected, "{reason:?}");
    }
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["invalid_by_reason"]["crawler"], 3);
    assert_eq!(rows[0]["invalid_by_reason"]["datacenter"], 0);
    assert_eq!(rows[1]["invalid_impressions"], 1);
    assert_eq!(rows[1]["invalid_by_reason"]["datacenter"], 1);
    assert_eq!(rows[1]["impressions"], 0);
    assert_eq!(rows[1]["spend_micros"], 0);
    assert_eq!(sum_rows(&report, "invalid_impressions"), 4);

    let (status, _, csv) = app.get(&admin, &format!("{query}&format=csv")).await;
    assert_eq!(status, StatusCode::OK, "{csv}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines,
        [
            "time,requests,decisions,bids,wins,billings,impressions,clicks,ctr,conversions,spend,\
             unique_users,invalid_impressions,invalid_clicks,invalid_conversions,invalid_crawler,\
             invalid_prefetch,invalid_datacenter,invalid_rate,invalid_click_without_impression,\
             invalid_too_fast,invalid_untokened_disabled,invalid_repeat_conversion,\
             invalid_no_cache_buster,ad_requests,fill_rate,programmatic_auctions,\
             programmatic_requests,programmatic_bids,programmatic_timeouts,programmatic_wins,\
             programmatic_direct_wins,programmatic_impressions,programmatic_revenue",
            "2026-12-02T05:00:00+00:00,4,4,0,0,0,4,1,0.250000,0,0.258000,,3,2,1,3,0,0,0,0,2,0,1,0,\
             4,,0,0,0,0,0,0,0,0.000000",
            "2026-12-02T06:00:00+00:00,0,0,0,0,0,0,0,,0,0.000000,,1,0,0,0,0,1,0,0,0,0,0,0,\
             0,,0,0,0,0,0,0,0,0.000000",
        ]
    );

    // The refused requests had no line item: their placement's publisher sees them.
    let publisher = app.token(Role::Publisher, Some(app.publisher)).await;
    let report = app
        .json(
            &publisher,
            "from=2026-12-02T05:00:00Z&to=2026-12-02T06:00:00Z&tz=UTC&group_by=placement",
        )
        .await;
    assert_eq!(report["totals"]["invalid_impressions"], 8, "{report}");
    assert_eq!(
        report["totals"]["invalid_by_reason"]["untokened_disabled"],
        5
    );
    assert_eq!(report["totals"]["impressions"], 4);
}
