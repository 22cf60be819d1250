//! Decision time per request and index build time, for 1,000, 10,000 and 100,000 line items
//! under three inventory shapes (see `workload.rs`). Run:
//! `cargo bench -p marquee-engine --bench decide`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/workload.rs"]
mod workload;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use marquee_engine::{Context, Engine, FullSpeed, NoCaps, Request, Scratch, Slot, User};
use marquee_model::{Currency, CurrencyRates};
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
                        let mut context = Context {
                            rng: &mut rng,
                            caps: &NoCaps,
                            pacing: &FullSpeed,
                            rates: &rates,
                            scratch: &mut scratch,
                        };
                        next = (next + 1) % requests.len();
                        black_box(engine.decide(&requests[next], &mut context))
                    })
                },
            );
        }
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

criterion_group!(benches, decide, build);
criterion_main!(benches);
