//! How good the forecast is on traffic that went through real edges: four simulated weeks of
//! ad requests with a weekly pattern, growth and a holiday, sent hour by hour by the load
//! generator's user-session workload to an edge serving over HTTP on a simulated clock. The
//! edge's sampler keeps every request (a rate of 1 with a few thousand requests a day keeps the
//! statistics of 1% of a few hundred thousand), its event log holds the records, the manager's
//! aggregation stores them, and the backtest `marquee forecast backtest` runs
//! (`marquee_manager::forecast::backtest_latest`) fits on the first three weeks and is
//! measured on the fourth, over line items of every tier, broad and narrow.
//!
//! Run alone: `cargo test -p marquee --test it forecast_accuracy -- --include-ignored
//! --nocapture` (a few minutes; it prints the backtest's table).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use marquee_bench::load::{self, Plan};
use marquee_bench::session::SessionModel;
use marquee_bench::target::Target;
use marquee_bench::workload::{BeaconTarget, Workload, session_workload};
use marquee_edge::sampling::Sampling;
use marquee_edge::{Edge, EdgeConfig, Fallback, Limits};
use marquee_eventlog::EventLog;
use marquee_manager::forecast::{BacktestDays, backtest_latest, report};
use marquee_manager::{
    AggregationOptions, Aggregator, LocalLogSource, LogSource, Manager, ManagerOptions,
};
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, CampaignId, Channel, Clock, Creative, CreativeContent,
    Currency, Format, Goal, GoalMetric, HourRange, KeyValues, LineItem, LineItemId, Micros,
    PacingMode, Placement, PlacementId, Price, PricingModel, Publisher, PublisherId, RotationMode,
    Site, SiteId, Size, Status, Targeting, Tier, Weekday,
};
use marquee_store::{Actor, SqliteStore, Store};
use marquee_tracking::KeyRing;
use tokio::net::TcpListener;

/// Monday 2026-06-01T00:00:00Z: the first simulated day.
const START: i64 = 1_780_272_000;
const TRAIN_DAYS: u32 = 21;
const TEST_DAYS: u32 = 7;
/// Ad requests on a Monday of the first week; a week later 3% more.
const PER_DAY: f64 = 4_000.0;
const WEEKLY_GROWTH: f64 = 1.03;
/// Monday to Sunday.
const WEEKDAYS: [f64; 7] = [1.0, 1.02, 1.05, 1.0, 0.95, 0.75, 0.7];
/// A public holiday in the second training week (a Thursday) at 40% of a normal day.
const HOLIDAY: (u32, f64) = (10, 0.4);
/// Share of a day's requests in each UTC hour: quiet nights, a morning and an evening peak.
const HOURS: [f64; 24] = [
    1.0, 0.6, 0.4, 0.3, 0.3, 0.5, 1.2, 2.4, 3.6, 4.2, 4.4, 4.6, 5.0, 4.8, 4.6, 4.6, 4.8, 5.2, 6.0,
    6.6, 7.0, 6.2, 4.2, 2.2,
];

/// Placements: leaderboard and rectangle of a news site (101, 102), of a sports site (103,
/// 104).
const PLACEMENTS: [(u64, u64, (u32, u32)); 4] = [
    (101, 1, (728, 90)),
    (102, 1, (300, 250)),
    (103, 2, (728, 90)),
    (104, 2, (300, 250)),
];
/// What the session workload picks from at random for each ad request: placement and section,
/// twenty entries of 5% each.
const SLOTS: [(&str, usize); 8] = [
    ("101&kv=section:home", 4),
    ("101&kv=section:world", 2),
    ("102&kv=section:home", 3),
    ("102&kv=section:world", 1),
    ("103&kv=section:football", 3),
    ("103&kv=section:tennis", 1),
    ("104&kv=section:football", 4),
    ("104&kv=section:tennis", 2),
];

/// A line item of the test: tier, links, targeting, goal, pacing, price, time zone.
struct Spec {
    tier: Tier,
    placements: &'static [u64],
    targeting: Option<Targeting>,
    daily: Option<u64>,
    lifetime: Option<u64>,
    pacing: PacingMode,
    cpm_cents: i64,
    weight: u32,
    zone: &'static str,
}

const ALL: &[u64] = &[101, 102, 103, 104];

fn spec(tier: Tier, placements: &'static [u64]) -> Spec {
    Spec {
        tier,
        placements,
        targeting: None,
        daily: None,
        lifetime: None,
        pacing: PacingMode::Even,
        cpm_cents: 200,
        weight: 100,
        zone: "UTC",
    }
}

fn section(values: &[&str]) -> Targeting {
    Targeting::KeyValue(KeyValues {
        key: "section".into(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    })
}

fn weekend() -> Targeting {
    Targeting::DayOfWeek(vec![Weekday::Sat, Weekday::Sun])
}

fn hours(from: u8, to: u8) -> Targeting {
    Targeting::Hour(vec![HourRange { from, to }])
}

/// Twenty-four line items of every tier: broad ones (a site, a section on several
/// placements), narrow ones (a section on one placement, on weekends, in the evening), with
/// daily and lifetime goals or none, in UTC and in Berlin.
fn line_items() -> Vec<Spec> {
    use Tier::{House, Remnant, Sponsorship, Standard};
    vec![
        Spec {
            daily: Some(500),
            ..spec(Sponsorship, ALL)
        },
        Spec {
            targeting: Some(section(&["football"])),
            daily: Some(300),
            ..spec(Sponsorship, &[103, 104])
        },
        Spec {
            targeting: Some(section(&["tennis"])),
            daily: Some(60),
            ..spec(Sponsorship, &[103])
        },
        Spec {
            lifetime: Some(60_000),
            ..spec(Standard, &[101, 102])
        },
        Spec {
            daily: Some(400),
            pacing: PacingMode::FrontLoaded,
            ..spec(Standard, &[101])
        },
        Spec {
            weight: 200,
            daily: Some(900),
            ..spec(Standard, &[103, 104])
        },
        Spec {
            targeting: Some(section(&["home", "football"])),
            daily: Some(700),
            ..spec(Standard, ALL)
        },
        Spec {
            targeting: Some(hours(8, 20)),
            daily: Some(500),
            zone: "Europe/Berlin",
            ..spec(Standard, ALL)
        },
        Spec {
            targeting: Some(section(&["world"])),
            daily: Some(60),
            ..spec(Standard, &[102])
        },
        Spec {
            targeting: Some(Targeting::All(vec![section(&["tennis"]), weekend()])),
            daily: Some(40),
            ..spec(Standard, &[104])
        },
        Spec {
            targeting: Some(Targeting::All(vec![section(&["home"]), hours(18, 24)])),
            daily: Some(150),
            ..spec(Standard, &[101])
        },
        Spec {
            targeting: Some(Targeting::All(vec![
                section(&["tennis"]),
                hours(9, 17),
                Targeting::Not(Box::new(weekend())),
            ])),
            daily: Some(30),
            zone: "Europe/Berlin",
            ..spec(Standard, &[103])
        },
        Spec {
            targeting: Some(section(&["world"])),
            lifetime: Some(9_000),
            ..spec(Standard, &[101])
        },
        Spec {
            cpm_cents: 150,
            daily: Some(300),
            ..spec(Remnant, ALL)
        },
        Spec {
            cpm_cents: 80,
            daily: Some(400),
            ..spec(Remnant, &[101, 103])
        },
        Spec {
            cpm_cents: 150,
            daily: Some(250),
            ..spec(Remnant, &[102, 104])
        },
        Spec {
            targeting: Some(section(&["world"])),
            cpm_cents: 200,
            daily: Some(50),
            ..spec(Remnant, &[102])
        },
        Spec {
            targeting: Some(section(&["tennis"])),
            cpm_cents: 100,
            daily: Some(80),
            ..spec(Remnant, &[104])
        },
        Spec {
            targeting: Some(section(&["world"])),
            cpm_cents: 150,
            daily: Some(100),
            ..spec(Remnant, &[101, 102])
        },
        Spec {
            cpm_cents: 0,
            ..spec(House, ALL)
        },
        Spec {
            cpm_cents: 0,
            ..spec(House, &[101, 102])
        },
        Spec {
            targeting: Some(section(&["tennis"])),
            cpm_cents: 0,
            ..spec(House, &[103])
        },
        Spec {
            targeting: Some(Targeting::All(vec![section(&["tennis"]), weekend()])),
            cpm_cents: 0,
            ..spec(House, &[104])
        },
        Spec {
            targeting: Some(section(&["home"])),
            daily: Some(200),
            ..spec(Sponsorship, &[102])
        },
    ]
}

/// Ad requests of an hour of simulated day `day`.
fn requests(day: u32, hour: usize) -> u64 {
    let total: f64 = HOURS.iter().sum();
    let holiday = if day == HOLIDAY.0 { HOLIDAY.1 } else { 1.0 };
    let growth = WEEKLY_GROWTH.powf(f64::from(day) / 7.0);
    let daily = PER_DAY * growth * WEEKDAYS[day as usize % 7] * holiday;
    (daily * HOURS[hour] / total).round() as u64
}

/// The publisher, its sites and placements, one advertiser and campaign, and the line items
/// (each with a creative of either size), stored as the API would; the line items' ids and
/// each placement's id by its number in [`PLACEMENTS`].
async fn book(store: &dyn Store) -> (Vec<LineItemId>, Vec<(u64, u64)>) {
    let cli = Actor::cli();
    let publisher = Publisher {
        name: "Publisher".into(),
        status: Status::Active,
    };
    let publisher = id(store.create_object(&publisher, None, &cli).await.unwrap());
    let mut sites = Vec::new();
    for (n, domain) in ["news.example", "sport.example"].iter().enumerate() {
        let site = Site {
            publisher_id: PublisherId(publisher),
            name: format!("Site {n}"),
            status: Status::Active,
            domain: (*domain).into(),
        };
        sites.push(id(store.create_object(&site, None, &cli).await.unwrap()));
    }
    let mut placement_ids = Vec::new();
    for (number, site, (w, h)) in PLACEMENTS {
        let placement = Placement {
            site_id: SiteId(sites[site as usize - 1]),
            name: format!("Placement {number}"),
            status: Status::Active,
            sizes: vec![Size { w, h }],
            formats: vec![Format::Banner],
            image_tag: Default::default(),
            programmatic: None,
        };
        let stored = id(store.create_object(&placement, None, &cli).await.unwrap());
        placement_ids.push((number, stored));
    }
    let advertiser = Advertiser {
        name: "Advertiser".into(),
        status: Status::Active,
        currency: Currency::USD,
        time_zone: "UTC".into(),
        domains: vec!["brand.example".into()],
    };
    let advertiser = id(store.create_object(&advertiser, None, &cli).await.unwrap());
    let campaign = Campaign {
        advertiser_id: AdvertiserId(advertiser),
        name: "Campaign".into(),
        status: Status::Active,
        frequency_caps: Vec::new(),
        categories: Vec::new(),
        app_bundle: None,
    };
    let campaign = id(store.create_object(&campaign, None, &cli).await.unwrap());
    let mut booked = Vec::new();
    for (n, spec) in line_items().into_iter().enumerate() {
        let line_item = LineItem {
            campaign_id: CampaignId(campaign),
            name: format!("Line item {n}"),
            status: Status::Active,
            start: jiff::civil::date(2026, 1, 1).at(0, 0, 0, 0),
            end: Some(jiff::civil::date(2026, 12, 31).at(0, 0, 0, 0)),
            time_zone: spec.zone.into(),
            tier: spec.tier,
            weight: spec.weight,
            goal: (spec.daily.is_some() || spec.lifetime.is_some()).then_some(Goal {
                metric: GoalMetric::Impressions,
                daily: spec.daily,
                lifetime: spec.lifetime,
            }),
            pacing: spec.pacing,
            price: Price {
                model: PricingModel::Cpm,
                amount_micros: Micros(spec.cpm_cents * 10_000),
                currency: Currency::USD,
            },
            frequency_caps: Vec::new(),
            targeting: spec.targeting,
            rotation: RotationMode::Weighted,
            channels: vec![Channel::Direct],
            deals: Vec::new(),
            untokened_clicks: Default::default(),
            competes_with_programmatic: false,
        };
        let line_item = id(store.create_object(&line_item, None, &cli).await.unwrap());
        for (w, h) in [(728, 90), (300, 250)] {
            let creative = Creative {
                line_item_id: LineItemId(line_item),
                name: format!("Creative {w}x{h}"),
                status: Status::Active,
                size: Some(Size { w, h }),
                landing_url: "https://brand.example/".into(),
                weight: 100,
                content: CreativeContent::Html {
                    html: "<a href=\"{{CLICK_URL}}\">ad</a>".into(),
                },
                categories: Vec::new(),
                approval: marquee_model::Approval::Approved,
            };
            store.create_object(&creative, None, &cli).await.unwrap();
        }
        for number in spec.placements {
            let (_, placement) = placement_ids.iter().find(|(p, _)| p == number).unwrap();
            store
                .link(LineItemId(line_item), PlacementId(*placement), &cli)
                .await
                .unwrap();
        }
        booked.push(LineItemId(line_item));
    }
    (booked, placement_ids)
}

fn id<T>(stored: marquee_store::Stored<T>) -> u64 {
    stored.meta.id
}

// The edge is built as the edge crate's own tests build theirs (`crates/edge/tests/it/common`),
// deliberately repeated: those helpers are that test binary's, and this one needs sampling on.
/// An edge on a free loopback port, keeping every ad request's sample record in `log`, on
/// `clock`; the load generator's target for it.
async fn edge(dir: &Path, log: Arc<EventLog>, clock: Arc<dyn Clock>) -> (Arc<Edge>, Target) {
    let keys = KeyRing::new(1, [(1u8, &[9u8; 32][..])]).unwrap();
    let sampling = Sampling::new(1.0, u64::MAX, &keys);
    let edge = Edge::new(
        EdgeConfig {
            public_url: "http://127.0.0.1".into(),
            token_lifetime: Duration::from_secs(600),
            fallback: Fallback::Empty,
            cookies: false,
            country_header: None,
            data_dir: dir.join("edge"),
            // A debug build on a shared machine is slow: shedding would lose requests.
            limits: Limits {
                max_queue_delay: None,
                ..Limits::default()
            },
        },
        log,
        keys,
    )
    .with_sampling(sampling)
    .with_clock(clock);
    let edge = Arc::new(edge);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(marquee_edge::serve(
        listener,
        Arc::clone(&edge),
        None,
        Box::pin(std::future::pending()),
    ));
    let target = Target {
        addr,
        host: addr.to_string().parse().unwrap(),
        path: "/".into(),
        url: format!("http://{addr}/"),
    };
    (edge, target)
}

/// The session workload: each session a new user asking for about five ads (no beacons: the
/// sample is what is measured), each ad request for a slot of [`SLOTS`] at random, its
/// placement by its stored id (`placements`).
fn workload(target: &Target, placements: &[(u64, u64)]) -> Arc<Workload> {
    let slots: Vec<String> = SLOTS
        .iter()
        .flat_map(|(slot, n)| {
            let (number, section) = slot.split_once('&').unwrap();
            let (_, id) = placements
                .iter()
                .find(|(p, _)| p.to_string() == number)
                .unwrap();
            std::iter::repeat_n(format!("\"{id}&{section}\""), *n)
        })
        .collect();
    let model = SessionModel::from_toml(&format!(
        "start = \"ad_request\"\nplacements = [{}]\n\
         [transitions.ad_request]\nad_request = 0.8\n\
         [transitions.page_view]\nad_request = 1.0\n",
        slots.join(", ")
    ))
    .unwrap();
    let kind = session_workload(model, BeaconTarget::Same, vec![String::new()]).unwrap();
    Arc::new(Workload::new(
        kind,
        std::slice::from_ref(&target.host),
        &[],
        true,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "several simulated weeks through an edge: a few minutes; scripts/test.sh runs it"]
async fn the_backtest_through_real_edges_is_within_10_percent_broad_and_20_narrow() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(marquee_model::ManualClock::new(
        Timestamp::from_second(START).unwrap(),
    ));
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("marquee.db"), clock.clone()).unwrap());
    let (booked, placements) = book(store.as_ref()).await;
    let snapshots = dir.path().join("snapshots");
    let manager = Manager::open(
        Arc::clone(&store),
        clock.clone(),
        ManagerOptions {
            snapshot_dir: snapshots.clone(),
            keep: 2,
            compile_interval: Duration::from_secs(3_600),
        },
    )
    .await
    .unwrap();
    manager.refresh().await.unwrap();
    let published = manager.latest().expect("a snapshot is published");

    let log = Arc::new(EventLog::open(dir.path().join("events"), Default::default()).unwrap());
    let (edge, target) = edge(dir.path(), Arc::clone(&log), clock.clone()).await;
    edge.accept_snapshot(&published.bytes).unwrap();
    let source: Arc<dyn LogSource> = Arc::new(LocalLogSource::new("edge", Arc::clone(&log)));
    let aggregator = Aggregator::new(
        Arc::clone(&store),
        clock.clone(),
        vec![source],
        AggregationOptions::default(),
    );
    let plan = Plan {
        targets: vec![target.clone()],
        workload: workload(&target, &placements),
        connections: 4,
        threads: 1,
        rate: None,
        duration: None,
        requests: None,
        keep_alive: true,
        timeout: Duration::from_secs(30),
        max_wait: None,
        busy_poll: false,
        deadline: None,
        seed: 0,
        progress: false,
    };

    // Hour by hour: the hour's requests at its start, then the manager collects them.
    let mut sent = 0;
    for day in 0..TRAIN_DAYS + TEST_DAYS {
        for hour in 0..24 {
            let n = requests(day, hour);
            if n > 0 {
                let report = load::run(&Plan {
                    requests: Some(n),
                    seed: u64::from(day) * 24 + hour as u64,
                    ..plan.clone()
                })
                .await
                .unwrap();
                assert_eq!(report.statuses.get(&200), Some(&n), "{report:?}");
                sent += n;
            }
            aggregator.drain().await.unwrap();
            clock.advance(SignedDuration::from_hours(1));
        }
    }
    log.flush_and_close().unwrap();
    aggregator.drain().await.unwrap();

    let days = BacktestDays {
        train: TRAIN_DAYS,
        test: TEST_DAYS,
        rate: 1.0,
    };
    let result = backtest_latest(store.as_ref(), &snapshots, clock.now(), days)
        .await
        .unwrap();
    println!("{sent} ad requests\n{}", report(&result));

    // Broad: matching at least 10% of the test days' requests; narrow: at least 1%. Line
    // items with nothing available in the test days (below others that take all they match)
    // have no error to measure.
    let test_requests: u64 = (TRAIN_DAYS..TRAIN_DAYS + TEST_DAYS)
        .flat_map(|day| (0..24).map(move |hour| requests(day, hour)))
        .sum();
    let share = |matching: f64| matching / test_requests as f64;
    let mean = |errors: &[f64]| errors.iter().sum::<f64>() / errors.len().max(1) as f64;
    let errors_of = |broad: bool| -> Vec<f64> {
        result
            .line_items
            .iter()
            .filter(|li| li.available > 0.0 && share(li.matching) >= 0.01)
            .filter(|li| (share(li.matching) >= 0.1) == broad)
            .map(|li| li.available_error)
            .collect()
    };
    let (broad, narrow) = (errors_of(true), errors_of(false));
    println!(
        "available: broad {} line items, mean error {:.1}%; narrow {}, {:.1}%",
        broad.len(),
        mean(&broad) * 100.0,
        narrow.len(),
        mean(&narrow) * 100.0
    );
    assert_eq!(
        result.line_items.len(),
        booked.len(),
        "every line item matched"
    );
    assert!(broad.len() + narrow.len() >= 20);
    assert!(broad.len() >= 5 && narrow.len() >= 5);
    assert!(mean(&broad) <= 0.10, "broad: {broad:?}");
    assert!(mean(&narrow) <= 0.20, "narrow: {narrow:?}");
}
