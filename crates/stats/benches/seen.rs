//! What pruning the dedupe set costs the manager per aggregation run, with a million ids
//! within the retention window (a server counting a few hundred callbacks a second for a
//! token lifetime of an hour). Runs come once a second, so the cutoff moves a second per run.
//!
//! ```text
//! cargo bench -p marquee-stats --bench seen
//! ```
//!
//! `prune walk` is one prune that walks every entry; `prune per run` is the cost of a run's
//! prune as the aggregator calls it (the walk once per `PRUNE_STEP_SECS` of cutoff).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use marquee_stats::EventKind;
use marquee_stats::{PRUNE_STEP_SECS, Pending, Seen};

const IDS: u128 = 1_000_000;

/// A set of `IDS` ids whose events are far newer than any cutoff below, so nothing is dropped
/// and every walk is whole.
fn full_set() -> Seen {
    let mut seen = Seen::default();
    let mut run = Pending::default();
    for id in 1..=IDS {
        seen.check_and_add(
            &mut run,
            id.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            EventKind::Impression,
            i64::MAX / 2,
        );
    }
    seen.apply(run);
    seen
}

fn prune(c: &mut Criterion) {
    let mut seen = full_set();
    let mut cutoff = 0;
    c.bench_function("prune walk (1M ids)", |b| {
        b.iter(|| {
            cutoff += PRUNE_STEP_SECS;
            seen.prune(cutoff)
        });
    });
    c.bench_function("prune per run (1M ids, cutoff +1 s a run)", |b| {
        b.iter(|| {
            cutoff += 1;
            seen.prune(cutoff)
        });
    });
}

criterion_group!(benches, prune);
criterion_main!(benches);
