//! A forecast for one line item over 30 days against 1,000 booked line items, from 28 days of
//! a 1% sample of 10 million requests a day (2.8 million records). Measured: fitting the
//! traffic model, building the forecaster (the representatives through the engine's index,
//! once per snapshot), allocating the booked line items over the range (once per snapshot and
//! range, printed) and one availability forecast against that allocation. Run:
//! `cargo bench -p marquee-forecast --bench forecast`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/workload.rs"]
mod workload;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use marquee_forecast::{Forecaster, TrafficModel};
use marquee_pacing::Period;
use workload::{Shape, proposal, world};

const SHAPE: Shape = Shape {
    placements: 50,
    line_items: 1_000,
    train_days: 28,
    test_days: 0,
    per_day: 100_000.0,
    rate: 0.01,
};

fn forecast(c: &mut Criterion) {
    let world = world(SHAPE, 7);
    let now = world.split;
    let range = Period {
        start: now,
        end: Timestamp::from_second(now.as_second() + 30 * 86_400).unwrap(),
    };
    let proposal = proposal(SHAPE);
    let started = Instant::now();
    let model = TrafficModel::fit(&world.sample, now);
    let fitted = started.elapsed();
    let forecaster = Forecaster::new(&world.snapshot, &model);
    let built = started.elapsed() - fitted;
    let cpu = on_cpu();
    forecaster.prepare(range).unwrap();
    let booked = started.elapsed() - fitted - built;
    let booked_cpu = on_cpu() - cpu;
    let availability = forecaster.availability(&proposal, range).unwrap();
    let asked = started.elapsed() - fitted - built - booked;
    // The same question again: on a busy host one figure of CPU time varies by 10%.
    let mut asked_cpu = vec![on_cpu() - cpu - booked_cpu];
    for _ in 0..4 {
        let before = on_cpu();
        black_box(forecaster.availability(&proposal, range).unwrap());
        asked_cpu.push(on_cpu() - before);
    }
    asked_cpu.sort();
    eprintln!(
        "{} records, {} profiles, {} classes; fit {fitted:?}, forecaster {built:?}, \
         book {booked:?} ({booked_cpu:?} on the CPU), availability {asked:?} (on the CPU: \
         median {:?} of 5, fastest {:?}); matching {:.0}, available {:.0}, {} contending, {} \
         impacted, probability {:?}",
        world.sample.len(),
        world.sample.profiles(),
        forecaster.classes(),
        asked_cpu[2],
        asked_cpu[0],
        availability.matching,
        availability.available,
        availability.contending.len(),
        availability.impact.len(),
        availability.probability,
    );
    let mut group = c.benchmark_group("forecast");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("fit_28_days", |b| {
        b.iter(|| black_box(TrafficModel::fit(&world.sample, now)))
    });
    group.bench_function("forecaster_1000_line_items", |b| {
        b.iter(|| black_box(Forecaster::new(&world.snapshot, &model)))
    });
    group.bench_function("availability_30_days", |b| {
        b.iter(|| black_box(forecaster.availability(&proposal, range).unwrap()))
    });
    group.finish();
}

/// Time this thread has spent on a CPU (Linux; zero elsewhere): on a host busy with other
/// builds, wall time says more about them than about the forecast.
fn on_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

criterion_group!(benches, forecast);
criterion_main!(benches);
