//! Compile, encode and decode a synthetic catalog of 1,000 and of 100,000 line items.
//!
//! Run: `cargo bench -p marquee-snapshot --bench compile` (add `-- --quick` for a fast pass).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use jiff::civil::date;
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, CampaignId, CapWindow, Catalog, Channel, Creative,
    CreativeContent, Currency, DeviceType, Format, FrequencyCap, Goal, GoalMetric, HourRange,
    KeyValues, LineItem, LineItemId, Meta, Micros, PacingMode, Placement, PlacementId, Price,
    PricingModel, Publisher, PublisherId, RotationMode, Site, SiteId, Size, Status, Stored,
    Targeting, Tier,
};
use marquee_snapshot::{Snapshot, compile};

// A deliberate copy of the SplitMix64 in the other crates' benches and tests: no dev-only
// crate serves them all, and a production crate must not carry test helpers.
/// Deterministic pseudo-random numbers (splitmix64), so every run builds the same catalog.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `count` distinct items of `from`.
    fn pick<T: Clone + PartialEq>(&mut self, from: &[T], count: usize) -> Vec<T> {
        let mut picked: Vec<T> = Vec::with_capacity(count);
        while picked.len() < count.min(from.len()) {
            let item = &from[self.below(from.len() as u64) as usize];
            if !picked.contains(item) {
                picked.push(item.clone());
            }
        }
        picked
    }

    /// One to `up_to` distinct items of `from`.
    fn pick_some<T: Clone + PartialEq>(&mut self, from: &[T], up_to: u64) -> Vec<T> {
        let count = 1 + self.below(up_to) as usize;
        self.pick(from, count)
    }
}

const COUNTRIES: &[&str] = &[
    "DE", "AT", "CH", "FR", "IT", "ES", "NL", "BE", "PL", "SE", "DK", "US", "GB", "CA",
];
const DEVICES: &[DeviceType] = &[
    DeviceType::Desktop,
    DeviceType::Phone,
    DeviceType::Tablet,
    DeviceType::Ctv,
];
const SECTIONS: &[&str] = &[
    "news", "sport", "finance", "travel", "auto", "tech", "food", "health", "culture", "games",
];
const ZONES: &[&str] = &[
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Tokyo",
    "UTC",
];
const SIZES: &[Size] = &[
    Size { w: 300, h: 250 },
    Size { w: 728, h: 90 },
    Size { w: 160, h: 600 },
    Size { w: 320, h: 50 },
];

const PLACEMENTS: u64 = 1_000;
const LINKS_PER_LINE_ITEM: usize = 10;

fn stored<T>(id: u64, object: T) -> Stored<T> {
    let at = Timestamp::UNIX_EPOCH;
    Stored {
        meta: Meta {
            id,
            version: 1,
            created_at: at,
            updated_at: at,
        },
        object,
    }
}

fn cap(count: u32, window: &str) -> Vec<FrequencyCap> {
    CapWindow::try_from(window.to_owned())
        .map(|window| vec![FrequencyCap { count, window }])
        .unwrap_or_default()
}

/// A catalog of `line_items` line items (100 per advertiser, 10 per campaign), each with a
/// targeting expression of four leaves (countries, device types, a key-value, hours), two
/// creatives and links to 10 of 1,000 placements (10 per site, 10 sites per publisher).
fn catalog(line_items: u64) -> Catalog {
    let mut rng = Rng(line_items);
    let mut c = Catalog {
        version: line_items,
        ..Catalog::default()
    };
    let campaigns = line_items.div_ceil(10);
    let advertisers = campaigns.div_ceil(10);
    for id in 1..=advertisers {
        c.advertisers.push(stored(
            id,
            Advertiser {
                name: format!("Advertiser {id}"),
                status: Status::Active,
                currency: Currency::EUR,
                time_zone: "Europe/Berlin".into(),
                domains: vec![format!("brand{id}.example.com")],
            },
        ));
    }
    // One loop a kind, each building its objects field by field: deliberately the same shape, as a
    // helper would have to take every field anyway.
    for id in 1..=campaigns {
        c.campaigns.push(stored(
            id,
            Campaign {
                advertiser_id: AdvertiserId(id.div_ceil(10)),
                name: format!("Campaign {id}"),
                status: Status::Active,
                frequency_caps: cap(10, "1d"),
                categories: vec![format!("IAB{}", 1 + id % 26)],
                app_bundle: None,
            },
        ));
    }
    let placements = PLACEMENTS;
    let sites = placements / 10;
    for id in 1..=sites / 10 {
        c.publishers.push(stored(
            id,
            Publisher {
                name: format!("Publisher {id}"),
                status: Status::Active,
            },
        ));
    }
    for id in 1..=sites {
        c.sites.push(stored(
            id,
            Site {
                publisher_id: PublisherId(id.div_ceil(10)),
                name: format!("Site {id}"),
                status: Status::Active,
                domain: format!("site{id}.example.com"),
            },
        ));
    }
    // Same shape as the loops above and below, deliberately (one a kind).
    for id in 1..=placements {
        c.placements.push(stored(
            id,
            Placement {
                site_id: SiteId(id.div_ceil(10)),
                name: format!("Placement {id}"),
                status: Status::Active,
                sizes: rng.pick(SIZES, 2),
                formats: vec![Format::Banner],
                image_tag: Default::default(),
                programmatic: None,
            },
        ));
    }
    let all_placements: Vec<u64> = (1..=placements).collect();
    for id in 1..=line_items {
        let from = rng.below(20) as u8;
        let targeting = Targeting::All(vec![
            Targeting::Country(
                rng.pick_some(COUNTRIES, 3)
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            ),
            Targeting::DeviceType(rng.pick_some(DEVICES, 2)),
            Targeting::KeyValue(KeyValues {
                key: "section".into(),
                values: rng
                    .pick_some(SECTIONS, 3)
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            }),
            Targeting::Hour(vec![HourRange { from, to: from + 4 }]),
        ]);
        let start_day = 1 + rng.below(28) as i8;
        c.line_items.push(stored(
            id,
            LineItem {
                campaign_id: CampaignId(id.div_ceil(10)),
                name: format!("Line item {id}"),
                status: Status::Active,
                start: date(2026, 11, start_day).at(0, 0, 0, 0),
                end: Some(date(2027, 1, start_day).at(0, 0, 0, 0)),
                time_zone: ZONES[rng.below(ZONES.len() as u64) as usize].into(),
                tier: [Tier::Sponsorship, Tier::Standard, Tier::Remnant][rng.below(3) as usize],
                weight: 1 + rng.below(1_000) as u32,
                goal: Some(Goal {
                    metric: GoalMetric::Impressions,
                    daily: Some(10_000),
                    lifetime: Some(1_000_000),
                }),
                pacing: PacingMode::Even,
                price: Price {
                    model: PricingModel::Cpm,
                    amount_micros: Micros(500_000 + rng.below(5_000_000) as i64),
                    currency: Currency::EUR,
                },
                frequency_caps: cap(3, "1d"),
                targeting: Some(targeting),
                rotation: RotationMode::Weighted,
                // Half of the line items also bid on exchanges.
                channels: if id % 2 == 0 {
                    vec![Channel::Direct, Channel::Exchange]
                } else {
                    vec![Channel::Direct]
                },
                deals: Vec::new(),
                untokened_clicks: Default::default(),
                competes_with_programmatic: false,
            },
        ));
        for k in 0..2 {
            let creative = id * 2 - 1 + k;
            c.creatives.push(stored(
                creative,
                Creative {
                    line_item_id: LineItemId(id),
                    name: format!("Creative {creative}"),
                    status: Status::Active,
                    size: Some(SIZES[k as usize]),
                    landing_url: format!("https://brand{}.example.com/offer", id.div_ceil(100)),
                    weight: 100,
                    content: CreativeContent::Image {
                        image_url: format!("https://cdn.example.com/c/{creative}.png"),
                        alt: String::new(),
                    },
                    categories: Vec::new(),
                    approval: marquee_model::Approval::Approved,
                },
            ));
        }
        for placement in rng.pick(&all_placements, LINKS_PER_LINE_ITEM) {
            c.links.push((LineItemId(id), PlacementId(placement)));
        }
    }
    c
}

fn bench(c: &mut Criterion) {
    let built_at: Timestamp = "2026-11-21T12:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    for line_items in [1_000u64, 100_000] {
        let catalog = catalog(line_items);
        let snapshot = compile(&catalog, built_at);
        let bytes = snapshot.encode();
        eprintln!(
            "{line_items} line items: {} in the snapshot, {} creatives, encoded size {} bytes",
            snapshot.data.line_items.len(),
            snapshot.data.creatives.len(),
            bytes.len()
        );

        let mut group = c.benchmark_group("snapshot");
        if line_items > 10_000 {
            group.sample_size(10);
        }
        group.bench_function(BenchmarkId::new("compile", line_items), |b| {
            b.iter(|| compile(black_box(&catalog), built_at))
        });
        group.bench_function(BenchmarkId::new("encode", line_items), |b| {
            b.iter(|| black_box(&snapshot).encode())
        });
        group.bench_function(BenchmarkId::new("decode", line_items), |b| {
            b.iter(|| Snapshot::decode(black_box(&bytes)))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
