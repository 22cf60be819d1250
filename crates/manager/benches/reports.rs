//! Report latency: a 30-day hourly report for one advertiser on the demo-size data set must
//! answer in under 100 ms. Measured through the API router (authentication, query
//! parsing, the SELECT, sketches, shaping in the advertiser's zone, JSON), in process.
//!
//! ```text
//! cargo bench -p marquee-manager --bench reports
//! ```
//!
//! Data: the demo catalog; for every hour of 30 days, a row for every line item × creative ×
//! linked placement × 10 countries × 4 device types (hour and day rows, as runs write them),
//! and a unique-users sketch per line item and day.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use marquee_api::{RouteTable, add_routes, hash_token};
use marquee_model::{Clock, Role, SystemClock};
use marquee_stats::{Counters, Hll, RowKey, SketchKey};
use marquee_store::{NewToken, RunWrite, SqliteStore, Store};
use tower::ServiceExt;

const DAYS: i64 = 30;
const COUNTRIES: [&[u8; 2]; 10] = [
    b"DE", b"FR", b"US", b"GB", b"NL", b"AT", b"CH", b"IT", b"ES", b"PL",
];
const RUNS: usize = 30;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("m.db"), Arc::clone(&clock)).unwrap());
    marquee_manager::demo::load(&*store, &*clock).await.unwrap();
    let catalog = store.catalog().await.unwrap();
    let slots = common::slots(&catalog);

    let now = clock.now().as_second();
    let today = now - now.rem_euclid(86_400);
    let first_day = today - DAYS * 86_400;
    let mut rows = 0usize;
    let mut users = Hll::new();
    for user in 0..5_000 {
        users.insert(user);
    }
    let fill = Instant::now();
    for day in 0..=DAYS {
        let day_start = first_day + day * 86_400;
        let mut hours = Vec::new();
        let mut days = Vec::new();
        for &(line_item, creative, placement) in &slots {
            for country in COUNTRIES {
                for device in 1..=4u8 {
                    let key = |bucket| RowKey {
                        line_item,
                        bucket,
                        creative,
                        placement,
                        country: *country,
                        region: [0; 3],
                        device,
                    };
                    let counters = Counters {
                        decisions: 120,
                        impressions: 100,
                        clicks: 2,
                        cpm_micros: 250_000_000,
                        ..Counters::default()
                    };
                    for hour in 0..24 {
                        hours.push((key(day_start + hour * 3_600), counters));
                    }
                    let mut daily = counters;
                    for _ in 1..24 {
                        daily.add(&counters);
                    }
                    days.push((key(day_start), daily));
                }
            }
        }
        hours.sort_unstable_by_key(|(k, _)| *k);
        days.sort_unstable_by_key(|(k, _)| *k);
        rows += hours.len();
        let day_number = {
            let date = jiff::Timestamp::from_second(day_start)
                .unwrap()
                .to_zoned(jiff::tz::TimeZone::UTC)
                .date();
            i32::from(date.year()) * 10_000 + i32::from(date.month()) * 100 + i32::from(date.day())
        };
        let sketches = catalog
            .line_items
            .iter()
            .map(|li| {
                (
                    SketchKey {
                        line_item: li.meta.id,
                        day: day_number,
                    },
                    users.clone(),
                )
            })
            .collect();
        store
            .commit_run(RunWrite {
                line_item_hours: marquee_stats::line_item_totals(&hours),
                hours,
                days,
                sketches,
                ..RunWrite::default()
            })
            .await
            .unwrap();
    }
    println!(
        "filled {rows} hour rows ({} slots × 10 countries × 4 devices × 24 h × {} days) in {:.1} s",
        slots.len(),
        DAYS + 1,
        fill.elapsed().as_secs_f64()
    );

    let token = "mq_bench_admin";
    store
        .create_token(
            NewToken {
                role: Role::Admin,
                owner_id: None,
                hash: hash_token(token),
                label: "bench".into(),
            },
            &marquee_store::Actor::cli(),
        )
        .await
        .unwrap();
    let router = add_routes(
        RouteTable::new(),
        Arc::clone(&store),
        Arc::clone(&clock),
        "http://bench",
    )
    .into_router("bench", "0");

    for advertiser in &catalog.advertisers {
        let from = jiff::Timestamp::from_second(now - DAYS * 86_400).unwrap();
        let uri = format!(
            "/api/v1/reports?from={from}&to={}&granularity=hour&advertiser={}",
            jiff::Timestamp::from_second(now).unwrap(),
            advertiser.meta.id
        );
        let mut times = Vec::with_capacity(RUNS);
        let mut answer_rows = 0;
        for _ in 0..RUNS {
            let request = Request::get(&uri)
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap();
            let started = Instant::now();
            let response = router.clone().oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            times.push(started.elapsed());
            let report: serde_json::Value = serde_json::from_slice(&body).unwrap();
            answer_rows = report["rows"].as_array().unwrap().len();
        }
        times.sort_unstable();
        let line_items = catalog
            .line_items
            .iter()
            .filter(|li| {
                catalog.campaigns.iter().any(|c| {
                    c.meta.id == li.object.campaign_id.0
                        && c.object.advertiser_id.0 == advertiser.meta.id
                })
            })
            .count();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "advertiser {} ({:?}, {line_items} line items): 30-day hourly report, {answer_rows} rows: median {:.1} ms, p90 {:.1} ms, max {:.1} ms over {RUNS} runs",
            advertiser.meta.id,
            advertiser.object.name,
            ms(times[RUNS / 2]),
            ms(times[RUNS * 9 / 10]),
            ms(times[RUNS - 1]),
        );
    }
}
