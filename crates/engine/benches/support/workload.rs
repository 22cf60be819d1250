//! A synthetic but skewed workload for the engine benchmarks: popular countries carry many
//! line items, rare key-values and segments few. Shared by `benches/decide.rs` and
//! `examples/footprint.rs`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use jiff::Timestamp;
use marquee_model::{
    CampaignId, Channel, DeviceType, HourRange, KeyValues, PacingMode, PlacementId, RotationMode,
    Size, Targeting, Tier,
};
use marquee_snapshot::{
    AdvertiserEntry, CampaignEntry, Channels, Content, CreativeEntry, LineItemEntry, Snapshot,
    SnapshotData, fixtures,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

pub const COUNTRIES: usize = 50;
pub const SECTIONS: usize = 200;
pub const SEGMENTS: usize = 5_000;
const DEVICES: [DeviceType; 4] = [
    DeviceType::Desktop,
    DeviceType::Phone,
    DeviceType::Tablet,
    DeviceType::Ctv,
];
pub const SIZE: Size = Size { w: 300, h: 250 };

/// How line items are tied to placements.
#[derive(Debug, Clone, Copy)]
pub enum Inventory {
    /// Placements grow with the line items (one per 10): a larger network.
    Growing,
    /// 1,000 placements whatever the line item count.
    Fixed,
    /// No placement links: line items that bid on exchange traffic (channel `exchange`),
    /// measured with bid requests.
    Unlinked,
}

impl Inventory {
    pub fn placements(self, line_items: usize) -> u64 {
        match self {
            Inventory::Growing => (line_items as u64 / 10).max(1),
            Inventory::Fixed => 1_000,
            Inventory::Unlinked => 0,
        }
    }

    /// The channel its line items take part in and its requests come from.
    pub fn channel(self) -> Channel {
        match self {
            Inventory::Growing | Inventory::Fixed => Channel::Direct,
            Inventory::Unlinked => Channel::Exchange,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Inventory::Growing => "growing",
            Inventory::Fixed => "fixed",
            Inventory::Unlinked => "unlinked",
        }
    }
}

/// Draws ranks 0..n with probability proportional to 1 / (rank + 1)^s. The forecasting
/// benchmark keeps a deliberate copy (benches of two crates share no module).
#[derive(Debug)]
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

    pub fn sample(&self, rng: &mut SmallRng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

pub fn country(rank: usize) -> String {
    let a = (b'A' + (rank / 26) as u8) as char;
    let b = (b'A' + (rank % 26) as u8) as char;
    format!("{a}{b}")
}

pub fn now() -> Timestamp {
    "2026-11-18T12:00:00Z".parse().unwrap()
}

pub fn snapshot(line_items: usize, inventory: Inventory, seed: u64) -> Arc<Snapshot> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let countries = Zipf::new(COUNTRIES, 1.1);
    let sections = Zipf::new(SECTIONS, 1.0);
    let segments = Zipf::new(SEGMENTS, 0.9);
    let placements = inventory.placements(line_items);
    let tiers = [
        Tier::Sponsorship,
        Tier::Standard,
        Tier::Standard,
        Tier::Remnant,
        Tier::House,
    ];
    let mut entries = Vec::with_capacity(line_items);
    let mut creatives = Vec::with_capacity(line_items);
    for i in 0..line_items as u64 {
        let mut leaves = Vec::new();
        let roll: f64 = rng.random();
        if roll >= 0.05 {
            let n = 1 + rng.random_range(0..3usize);
            leaves.push(Targeting::Country(
                (0..n)
                    .map(|_| country(countries.sample(&mut rng)))
                    .collect(),
            ));
            let d = DEVICES[rng.random_range(0..DEVICES.len())];
            leaves.push(Targeting::DeviceType(vec![d, DeviceType::Desktop]));
            if rng.random_bool(0.5) {
                leaves.push(Targeting::KeyValue(KeyValues {
                    key: "section".into(),
                    values: vec![format!("s{}", sections.sample(&mut rng))],
                }));
            }
            if rng.random_bool(0.2) {
                leaves.push(Targeting::Segment(
                    (0..3)
                        .map(|_| format!("g{}", segments.sample(&mut rng)))
                        .collect(),
                ));
            }
            if rng.random_bool(0.1) {
                leaves.push(Targeting::Hour(vec![HourRange { from: 6, to: 22 }]));
            }
            if rng.random_bool(0.1) {
                leaves.push(Targeting::Not(Box::new(Targeting::Country(vec![country(
                    0,
                )]))));
            }
        }
        let mut linked: Vec<PlacementId> = (0..if placements == 0 { 0 } else { 5 })
            .map(|_| PlacementId(1 + rng.random_range(0..placements)))
            .collect();
        linked.sort_unstable();
        linked.dedup();
        entries.push(LineItemEntry {
            tier: tiers[rng.random_range(0..tiers.len())],
            weight: 1 + rng.random_range(0..1000u32),
            flight_start: now().as_second() - 86_400,
            flight_end: Some(now().as_second() + 30 * 86_400),
            time_zone: "Europe/Berlin".into(),
            pacing: PacingMode::Even,
            price: fixtures::cpm(100_000 + rng.random_range(0..5_000_000i64)),
            targeting: (!leaves.is_empty()).then_some(Targeting::All(leaves)),
            placements: linked,
            channels: Channels::from(&[inventory.channel()][..]),
            ..fixtures::line_item(i + 1)
        });
        creatives.push(CreativeEntry {
            size: Some(SIZE),
            ..fixtures::html_creative(i + 1, i + 1)
        });
    }
    Arc::new(Snapshot {
        version: 1,
        built_at: now(),
        data: SnapshotData {
            advertisers: Vec::new(),
            campaigns: vec![fixtures::campaign(1, 1)],
            line_items: entries,
            creatives,
            publishers: Vec::new(),
            sites: Vec::new(),
            placements: Vec::new(),
            assignments: Vec::new(),
        },
    })
}

/// Owned request data; the benchmark borrows `Request`s from it.
#[derive(Debug)]
pub struct RequestData {
    pub placement: Option<PlacementId>,
    pub country: String,
    pub device: DeviceType,
    pub key_values: Vec<(&'static str, String)>,
    pub segments: Vec<String>,
}

pub fn requests(
    count: usize,
    line_items: usize,
    inventory: Inventory,
    seed: u64,
) -> Vec<RequestData> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let countries = Zipf::new(COUNTRIES, 1.1);
    let sections = Zipf::new(SECTIONS, 1.0);
    let segments = Zipf::new(SEGMENTS, 0.9);
    let placements = inventory.placements(line_items);
    (0..count)
        .map(|_| RequestData {
            placement: (placements > 0).then(|| PlacementId(1 + rng.random_range(0..placements))),
            country: country(countries.sample(&mut rng)),
            device: DEVICES[rng.random_range(0..DEVICES.len())],
            key_values: vec![("section", format!("s{}", sections.sample(&mut rng)))],
            segments: (0..rng.random_range(0..6))
                .map(|_| format!("g{}", segments.sample(&mut rng)))
                .collect(),
        })
        .collect()
}

/// Resident set size of this process in bytes (Linux).
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Exchange line items like `bench/bid-line-items.sh` makes for the bid path's measurement:
/// a third target 1–4 of 30 countries, a quarter a device type, a fifth a page domain, the
/// rest nothing; one banner each among seven sizes; mostly remnant; one in twenty buys the
/// deal [`BID_DEAL`]; 50 campaigns with one category each, one advertiser.
pub fn bid_snapshot(line_items: usize, seed: u64) -> Arc<Snapshot> {
    const CATEGORIES: [&str; 10] = [
        "IAB1", "IAB2", "IAB3", "IAB5", "IAB8", "IAB9", "IAB13", "IAB17", "IAB19", "IAB20",
    ];
    const BANNERS: [(u32, u32); 7] = [
        (300, 250),
        (728, 90),
        (160, 600),
        (320, 50),
        (970, 90),
        (468, 60),
        (300, 600),
    ];
    let mut rng = SmallRng::seed_from_u64(seed);
    let campaigns = (1..=50u64)
        .map(|id| CampaignEntry {
            categories: vec![CATEGORIES[(id as usize - 1) % CATEGORIES.len()].into()],
            ..fixtures::campaign(id, 1)
        })
        .collect();
    let mut entries = Vec::with_capacity(line_items);
    let mut creatives = Vec::with_capacity(line_items);
    for i in 0..line_items as u64 {
        let kind: f64 = rng.random();
        let targeting = if kind < 0.35 {
            let n = rng.random_range(1..=4);
            Some(Targeting::Country(
                (0..n).map(|_| country(rng.random_range(0..30))).collect(),
            ))
        } else if kind < 0.6 {
            Some(Targeting::DeviceType(vec![
                DEVICES[rng.random_range(0..DEVICES.len())],
            ]))
        } else if kind < 0.8 {
            Some(Targeting::Domain(vec![format!(
                "site{}.example.com",
                rng.random_range(0..8)
            )]))
        } else {
            None
        };
        entries.push(LineItemEntry {
            campaign_id: CampaignId(1 + i % 50),
            tier: if rng.random_range(0..10) < 8 {
                Tier::Remnant
            } else {
                Tier::Standard
            },
            flight_start: now().as_second() - 86_400,
            pacing: PacingMode::Even,
            price: fixtures::cpm(rng.random_range(1..=50) * 100_000),
            targeting,
            rotation: RotationMode::Even,
            channels: Channels::from(&[Channel::Exchange][..]),
            deals: if i % 20 == 0 {
                vec![BID_DEAL.into()]
            } else {
                Vec::new()
            },
            ..fixtures::line_item(i + 1)
        });
        let (w, h) = BANNERS[rng.random_range(0..BANNERS.len())];
        creatives.push(CreativeEntry {
            size: Some(Size { w, h }),
            landing_url: "https://bench-brand.example/".into(),
            content: Content::Image {
                image_url: "https://cdn.example.com/bench.png".into(),
                alt: "Bench".into(),
            },
            ..fixtures::html_creative(i + 1, i + 1)
        });
    }
    Arc::new(Snapshot {
        version: 1,
        built_at: now(),
        data: SnapshotData {
            advertisers: vec![AdvertiserEntry {
                domains: vec!["bench-brand.example".into()],
                ..fixtures::advertiser(1)
            }],
            campaigns,
            line_items: entries,
            creatives,
            publishers: Vec::new(),
            sites: Vec::new(),
            placements: Vec::new(),
            assignments: Vec::new(),
        },
    })
}

/// The deal of `crates/openrtb/testdata/marquee/bench-request.json`.
pub const BID_DEAL: &str = "DEAL-2026-0042";
