//! Decision time per request and index build time, for 1,000, 10,000 and 100,000 line items
//! under three inventory shapes (see `workload.rs`), and one bid request's imp against 1,000
//! and 100,000 exchange line items shaped like the bid path's benchmark (`bid`). Run:
//! `cargo bench -p marquee-engine --bench decide`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/workload.rs"]
mod workload;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use marquee_engine::{
    Blocked, Context, Deal, Decision, Engine, Floor, FullSpeed, NoCaps, Request, Scratch, Slot,
    User,
};
use marquee_model::{Channel, Currency, CurrencyRates, DeviceType, Format, Micros, Size};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use workload::Inventory;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const INVENTORIES: [Inventory; 3] = [Inventory::Growing, Inventory::Fixed, Inventory::Unlinked];

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    for inventory in INVENTORIES {
        for line_items in SIZES {
            let engine = Engine::new(workload::snapshot(line_items, inventory, 1));
            let data = workload::requests(4_096, line_items, inventory, 2);
            let sizes = [workload::SIZE];
            let segment_refs: Vec<Vec<&str>> = data
                .iter()
                .map(|r| r.segments.iter().map(String::as_str).collect())
                .collect();
            let kv_refs: Vec<Vec<(&str, &str)>> = data
                .iter()
                .map(|r| r.key_values.iter().map(|(k, v)| (*k, v.as_str())).collect())
                .collect();
            let requests: Vec<Request<'_>> = data
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut request = Request::at(workload::now());
                    request.channel = inventory.channel();
                    request.placement = r.placement;
                    request.slot = Slot {
                        sizes: &sizes,
                        ..Slot::default()
                    };
                    request.geo.country = Some(&r.country);
                    request.device.device_type = Some(r.device);
                    request.key_values = &kv_refs[i];
                    request.user = User {
                        id: None,
                        segments: &segment_refs[i],
                    };
                    request
                })
                .collect();
            let mut scratch = Scratch::default();
            let matched: usize = requests
                .iter()
                .map(|r| engine.matching(r, &mut scratch).len())
                .sum();
            eprintln!(
                "{}/{line_items}: {:.1} line items match per request on average; index {:.1} MB",
                inventory.name(),
                matched as f64 / requests.len() as f64,
                engine.index_heap_bytes() as f64 / 1e6
            );
            let mut rng = SmallRng::seed_from_u64(3);
            let rates = CurrencyRates::new(Currency::USD);
            let mut next = 0;
            group.bench_with_input(
                BenchmarkId::new(inventory.name(), line_items),
                &requests,
                |b, requests| {
                    b.iter(|| {
                        next = (next + 1) % requests.len();
                        black_box(decide_once(
                            &engine,
                            &requests[next],
                            &mut rng,
                            &rates,
                            &mut scratch,
                        ))
                    })
                },
            );
        }
    }
    group.finish();
}

/// One imp like `crates/openrtb/testdata/marquee/bench-request.json`'s, mapped as the bidder
/// maps it: a secure 728×90 banner taking three sizes, a 0.85 USD floor, the deal at 2.50 USD,
/// `bcat` and `badv`, a known country, device type and page domain, a user id.
fn bid(c: &mut Criterion) {
    let mut group = c.benchmark_group("bid");
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    let sizes = [
        Size { w: 728, h: 90 },
        Size { w: 970, h: 90 },
        Size { w: 468, h: 60 },
    ];
    let deals = [Deal {
        id: workload::BID_DEAL,
        floor: Some(Floor {
            cpm: Micros(2_500_000),
            currency: Currency::USD,
        }),
    }];
    let mut request = Request::at(workload::now());
    request.channel = Channel::Exchange;
    request.slot = Slot {
        sizes: &sizes,
        formats: &[Format::Banner],
        floor: Some(Floor {
            cpm: Micros(850_000),
            currency: Currency::USD,
        }),
        deals: &deals,
        secure: true,
        ..Slot::default()
    };
    request.domain = Some("site3.example.com");
    request.geo.country = Some("AB");
    request.device.device_type = Some(DeviceType::Desktop);
    request.user.id = Some("mq-01HF8Z3K9Q");
    request.blocked = Blocked {
        categories: &["IAB25", "IAB26", "IAB7-39"],
        advertisers: &["competitor.example", "blocked-brand.example"],
        apps: &[],
    };
    request.bid_currency = Some(Currency::USD);
    let rates = CurrencyRates::new(Currency::USD);
    for line_items in [1_000, 100_000] {
        let engine = Engine::new(workload::bid_snapshot(line_items, 1));
        let mut scratch = Scratch::default();
        eprintln!(
            "bid/{line_items}: {} line items match",
            engine.matching(&request, &mut scratch).len()
        );
        let mut rng = SmallRng::seed_from_u64(3);
        group.bench_function(BenchmarkId::from_parameter(line_items), |b| {
            b.iter(|| {
                black_box(decide_once(
                    &engine,
                    &request,
                    &mut rng,
                    &rates,
                    &mut scratch,
                ))
            })
        });
    }
    group.finish();
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_index");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for line_items in SIZES {
        let snapshot = workload::snapshot(line_items, Inventory::Growing, 1);
        group.bench_with_input(
            BenchmarkId::from_parameter(line_items),
            &snapshot,
            |b, s| {
                b.iter_batched(
                    || s.clone(),
                    |s| black_box(Engine::new(s)),
                    BatchSize::LargeInput,
                )
            },
        );
    }
    group.finish();
}

criterion_group!(benches, decide, bid, build);
criterion_main!(benches);

/// One decision without caps or pacing: what the benchmarks time.
fn decide_once(
    engine: &Engine,
    request: &Request<'_>,
    rng: &mut SmallRng,
    rates: &CurrencyRates,
    scratch: &mut Scratch,
) -> Option<Decision> {
    let mut context = Context {
        rng,
        caps: &NoCaps,
        pacing: &FullSpeed,
        rates,
        scratch,
    };
    engine.decide(request, &mut context)
}
