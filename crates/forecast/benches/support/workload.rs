//! A synthetic publisher for the forecast's benchmark and backtest: placements of skewed
//! popularity, traffic with a daily curve, a weekly pattern (quieter weekends), growth of 3% a
//! week, day-to-day noise and one holiday, visitors from a dozen countries on four devices,
//! section key-values, segments and returning users; line items of every tier with goals,
//! caps, hour targeting and placement links. Everything comes from one seeded generator.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use jiff::Timestamp;
use marquee_forecast::{Sample, SampleRecord};
use marquee_model::{
    CapWindow, DeviceType, Format, FrequencyCap, Goal, GoalMetric, HourRange, KeyValues,
    LineItemId, PacingMode, PlacementId, PublisherId, SiteId, Size, Targeting, Tier,
};
use marquee_snapshot::{
    LineItemEntry, PlacementEntry, PublisherEntry, SiteEntry, Snapshot, SnapshotData, fixtures,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus as Rng;

pub const COUNTRIES: [&str; 12] = [
    "US", "DE", "GB", "FR", "IT", "ES", "NL", "PL", "SE", "AT", "CH", "BE",
];
const DEVICES: [(DeviceType, f64); 4] = [
    (DeviceType::Desktop, 0.45),
    (DeviceType::Phone, 0.40),
    (DeviceType::Tablet, 0.10),
    (DeviceType::Ctv, 0.05),
];
pub const SECTIONS: usize = 12;
pub const SEGMENTS: usize = 6;
const USERS: u64 = 400_000;

/// Traffic share of each UTC hour (a day's curve, quiet at night).
fn hour_weights() -> [f64; 24] {
    std::array::from_fn(|h| {
        let x = (h as f64 - 14.0) / 24.0 * std::f64::consts::TAU;
        1.0 + 0.8 * x.cos()
    })
}

#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub placements: u64,
    pub line_items: usize,
    /// Days of sample before the split, and after it.
    pub train_days: i64,
    pub test_days: i64,
    /// Sampled requests on an average weekday at the start.
    pub per_day: f64,
    pub rate: f64,
}

#[derive(Debug)]
pub struct World {
    pub snapshot: Arc<Snapshot>,
    pub sample: Sample,
    /// The end of the training days, and of the test days.
    pub split: Timestamp,
    pub end: Timestamp,
}

/// The split: a Monday at midnight UTC.
pub fn split() -> Timestamp {
    "2026-11-16T00:00:00Z".parse().unwrap()
}

/// Ranks drawn with Zipf's law (rank r with weight 1 / r^s). A deliberate copy of the engine
/// benchmarks' own: benches of two crates share no module, and no production crate may carry it.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut total = 0.0;
        let mut cdf: Vec<f64> = (0..n)
            .map(|rank| {
                total += 1.0 / ((rank + 1) as f64).powf(s);
                total
            })
            .collect();
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { cdf }
    }

    pub fn draw(&self, rng: &mut Rng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

fn pick<T: Copy>(rng: &mut Rng, table: &[(T, f64)]) -> T {
    let mut u: f64 = rng.random();
    for &(item, p) in table {
        if u < p {
            return item;
        }
        u -= p;
    }
    table[table.len() - 1].0
}

pub fn world(shape: Shape, seed: u64) -> World {
    let mut rng = Rng::seed_from_u64(seed);
    let snapshot = snapshot(shape, &mut rng);
    let mut sample = Sample::new(shape.rate).unwrap();
    let placements = Zipf::new(shape.placements as usize, 0.8);
    let countries = Zipf::new(COUNTRIES.len(), 1.0);
    let sections = Zipf::new(SECTIONS, 0.9);
    let users = Zipf::new(1_000, 0.6);
    let hours = hour_weights();
    let hour_total: f64 = hours.iter().sum();
    let hour_table: Vec<(usize, f64)> = hours
        .iter()
        .enumerate()
        .map(|(h, w)| (h, w / hour_total))
        .collect();
    let first_day = split().as_second() / 86_400 - shape.train_days;
    let holiday = first_day + shape.train_days - 10;
    for d in 0..shape.train_days + shape.test_days {
        let day = first_day + d;
        let weekday = (day + 3).rem_euclid(7);
        let weekly = match weekday {
            5 => 0.75,
            6 => 0.7,
            _ => 1.0,
        };
        let growth = 1.03f64.powf(d as f64 / 7.0);
        let noise = 1.0 + 0.03 * (rng.random::<f64>() * 2.0 - 1.0);
        let special = if day == holiday { 0.35 } else { 1.0 };
        let n = (shape.per_day * weekly * growth * noise * special) as usize;
        for _ in 0..n {
            let hour = pick(&mut rng, &hour_table) as i64;
            let minute = (day * 1_440 + hour * 60 + rng.random_range(0..60)) as u32;
            let country = countries.draw(&mut rng);
            let device = pick(&mut rng, &DEVICES);
            let os = match device {
                DeviceType::Desktop => ["Windows", "macOS"][rng.random_range(0..2)],
                DeviceType::Phone | DeviceType::Tablet => {
                    ["iOS", "Android"][rng.random_range(0..2)]
                }
                _ => "Other",
            };
            let segments: Vec<String> = (0..SEGMENTS)
                .filter(|_| rng.random_bool(0.15))
                .map(|s| format!("g{s}"))
                .collect();
            // Returning users: a Zipf-popular bucket, then one of its users.
            let user = (users.draw(&mut rng) as u64) * (USERS / 1_000)
                + rng.random_range(0..USERS / 1_000)
                + 1;
            sample.push(&SampleRecord {
                minute,
                user: user.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                placement: PlacementId(1 + placements.draw(&mut rng) as u64),
                device_type: Some(device),
                os: Some(os.to_owned()),
                country: Some(COUNTRIES[country].to_owned()),
                region: Some(format!("{}-{}", COUNTRIES[country], rng.random_range(0..3))),
                key_values: vec![(
                    "section".to_owned(),
                    format!("s{}", sections.draw(&mut rng)),
                )],
                segments,
                ..SampleRecord::default()
            });
        }
    }
    World {
        snapshot,
        sample,
        split: split(),
        end: Timestamp::from_second(split().as_second() + shape.test_days * 86_400).unwrap(),
    }
}

/// Line items: tiers in turn (sponsorship, standard ×2, remnant, house); a mix of placement
/// links, countries, devices, sections, segments, evening hours and caps; daily goals on
/// reserved tiers sized to their traffic, so that some deliver and some fall short.
pub fn snapshot(shape: Shape, rng: &mut Rng) -> Arc<Snapshot> {
    let tiers = [
        Tier::Sponsorship,
        Tier::Standard,
        Tier::Standard,
        Tier::Remnant,
        Tier::House,
    ];
    let start = split().as_second() - shape.train_days * 86_400;
    let end = split().as_second() + 60 * 86_400;
    let line_items = (0..shape.line_items)
        .map(|i| {
            let tier = tiers[i % tiers.len()];
            let mut leaves = Vec::new();
            if rng.random_bool(0.5) {
                let n = 1 + rng.random_range(0..4);
                leaves.push(Targeting::Country(
                    (0..n)
                        .map(|_| COUNTRIES[rng.random_range(0..COUNTRIES.len())].to_owned())
                        .collect(),
                ));
            }
            if rng.random_bool(0.3) {
                let device = DEVICES[rng.random_range(0..DEVICES.len())].0;
                leaves.push(Targeting::DeviceType(vec![device]));
            }
            if rng.random_bool(0.25) {
                leaves.push(Targeting::KeyValue(KeyValues {
                    key: "section".to_owned(),
                    values: (0..1 + rng.random_range(0..4))
                        .map(|_| format!("s{}", rng.random_range(0..SECTIONS)))
                        .collect(),
                }));
            }
            if rng.random_bool(0.15) {
                leaves.push(Targeting::Segment(vec![format!(
                    "g{}",
                    rng.random_range(0..SEGMENTS)
                )]));
            }
            if rng.random_bool(0.15) {
                leaves.push(Targeting::Hour(vec![HourRange { from: 17, to: 23 }]));
            }
            let mut placements: Vec<PlacementId> = if rng.random_bool(0.4) {
                (0..3 + rng.random_range(0..8))
                    .map(|_| PlacementId(1 + rng.random_range(0..shape.placements)))
                    .collect()
            } else {
                Vec::new()
            };
            placements.sort_unstable();
            placements.dedup();
            let reserved = matches!(tier, Tier::Sponsorship | Tier::Standard);
            let goal = reserved.then(|| Goal {
                metric: GoalMetric::Impressions,
                daily: Some(rng.random_range(2_000..200_000)),
                lifetime: None,
            });
            let caps = if rng.random_bool(0.1) {
                vec![FrequencyCap {
                    count: 3,
                    window: CapWindow::try_from("1d".to_owned()).unwrap(),
                }]
            } else {
                Vec::new()
            };
            LineItemEntry {
                tier,
                weight: 1 + rng.random_range(0..100),
                flight_start: start,
                flight_end: Some(end),
                goal,
                pacing: PacingMode::Even,
                price: fixtures::cpm(100_000 * rng.random_range(1..50)),
                frequency_caps: caps,
                targeting: match leaves.len() {
                    0 => None,
                    1 => leaves.pop(),
                    _ => Some(Targeting::All(leaves)),
                },
                placements,
                ..fixtures::line_item(i as u64 + 1)
            }
        })
        .collect();
    let sites = 4;
    Arc::new(Snapshot {
        version: 1,
        built_at: split(),
        data: SnapshotData {
            campaigns: vec![fixtures::campaign(1, 1)],
            line_items,
            publishers: vec![PublisherEntry { id: PublisherId(1) }],
            sites: (1..=sites)
                .map(|s| SiteEntry {
                    id: SiteId(s),
                    publisher_id: PublisherId(1),
                    domain: format!("site{s}.example.com"),
                })
                .collect(),
            placements: (1..=shape.placements)
                .map(|p| PlacementEntry {
                    id: PlacementId(p),
                    site_id: SiteId(1 + p % sites),
                    sizes: vec![Size { w: 300, h: 250 }],
                    formats: vec![Format::Banner],
                    image_tag: Default::default(),
                    programmatic: None,
                })
                .collect(),
            ..SnapshotData::default()
        },
    })
}

/// A proposal to forecast: standard tier, German and Austrian desktops on the sport section,
/// 50,000 impressions a day.
pub fn proposal(shape: Shape) -> LineItemEntry {
    LineItemEntry {
        id: LineItemId(1_000_000),
        tier: Tier::Standard,
        weight: 50,
        goal: Some(Goal {
            metric: GoalMetric::Impressions,
            daily: Some(50_000),
            lifetime: None,
        }),
        targeting: Some(Targeting::All(vec![
            Targeting::Country(vec!["DE".to_owned(), "AT".to_owned()]),
            Targeting::DeviceType(vec![DeviceType::Desktop]),
        ])),
        placements: Vec::new(),
        ..snapshot_line_item(shape)
    }
}

pub fn snapshot_line_item(shape: Shape) -> LineItemEntry {
    LineItemEntry {
        id: LineItemId(0),
        weight: 1,
        flight_start: split().as_second() - shape.train_days * 86_400,
        flight_end: Some(split().as_second() + 60 * 86_400),
        pacing: PacingMode::Even,
        ..fixtures::line_item(0)
    }
}
