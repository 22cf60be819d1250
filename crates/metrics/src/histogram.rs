//! Latency on request paths: a histogram and a time counter of plain atomics.
//!
//! Not `prometheus_client::metrics::histogram::Histogram`: its `observe` takes a mutex, and
//! these are recorded by every request on every worker. Here an observation is a scan of at
//! most a few dozen bounds and two relaxed `fetch_add`s; a scrape reads the buckets one by
//! one (a scrape racing observations may see a sum a little ahead of the counts, never
//! counts out of step with each other's total).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::{MetricType, TypedMetric};

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
}

fn nanos(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Debug)]
struct Buckets {
    /// Upper bounds in microseconds, ascending; `+Inf` is implied after the last.
    bounds_us: &'static [u64],
    /// Per bucket, not cumulative; one more than the bounds (`+Inf`).
    counts: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

/// A duration histogram with fixed buckets (register it with [`crate::Unit::Seconds`]).
/// Clones share their counts.
#[derive(Debug, Clone)]
pub struct Histogram(Arc<Buckets>);

impl Histogram {
    /// `bounds_us`: the buckets' upper bounds (inclusive, as Prometheus's `le`), in
    /// microseconds, ascending.
    pub fn new(bounds_us: &'static [u64]) -> Histogram {
        Histogram(Arc::new(Buckets {
            bounds_us,
            counts: (0..=bounds_us.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }))
    }

    pub fn observe(&self, elapsed: Duration) {
        let buckets = &*self.0;
        let us = micros(elapsed);
        let index = buckets
            .bounds_us
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(buckets.bounds_us.len());
        if let Some(count) = buckets.counts.get(index) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        buckets.sum_ns.fetch_add(nanos(elapsed), Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.0
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets = &*self.0;
        let bounds = buckets
            .bounds_us
            .iter()
            .map(|&us| us as f64 / 1e6)
            // prometheus-client writes `+Inf` for this bound.
            .chain([f64::MAX]);
        let counted: Vec<(f64, u64)> = bounds
            .zip(buckets.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        let count = counted.iter().map(|(_, n)| n).sum();
        let sum = buckets.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(
            sum,
            count,
            &counted,
            None::<&HashMap<usize, Exemplar<NoLabelSet, f64>>>,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// Time spent, as a counter of seconds (register it with [`crate::Unit::Seconds`]): whole
/// nanoseconds in one atomic, so adding is one `fetch_add` (a float counter would loop on a
/// compare-and-swap) and nothing is lost to rounding.
#[derive(Debug, Clone, Default)]
pub struct DurationCounter(Arc<AtomicU64>);

impl DurationCounter {
    pub fn add(&self, elapsed: Duration) {
        self.0.fetch_add(nanos(elapsed), Ordering::Relaxed);
    }

    pub fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

impl TypedMetric for DurationCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for DurationCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, f64>(&self.get().as_secs_f64(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Def, Format, Labelled, Registry, Unit, encode};

    const LATENCY: Def = Def::new("marquee_test_latency", "Latency.").with_unit(Unit::Seconds);

    #[test]
    fn buckets_are_inclusive_cumulative_and_in_seconds() {
        let a = Histogram::new(&[1_000, 5_000]);
        let b = Histogram::new(&[1_000, 5_000]);
        for us in [1_000, 1_001, 7_000] {
            a.observe(Duration::from_micros(us));
        }
        let mut registry = Registry::default();
        let family = Labelled::new([
            ([("bidder", "a")], a.clone()),
            ([("bidder", "b")], b.clone()),
        ]);
        LATENCY.register(&mut registry, family);
        let text = encode(&registry, Format::OpenMetrics);
        for line in [
            "# TYPE marquee_test_latency_seconds histogram",
            "marquee_test_latency_seconds_sum{bidder=\"a\"} 0.009001",
            "marquee_test_latency_seconds_count{bidder=\"a\"} 3",
            "marquee_test_latency_seconds_bucket{le=\"0.001\",bidder=\"a\"} 1",
            "marquee_test_latency_seconds_bucket{le=\"0.005\",bidder=\"a\"} 2",
            "marquee_test_latency_seconds_bucket{le=\"+Inf\",bidder=\"a\"} 3",
            "marquee_test_latency_seconds_bucket{le=\"+Inf\",bidder=\"b\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert_eq!(a.count(), 3);
    }

    #[test]
    fn time_spent_counts_seconds() {
        let spent = DurationCounter::default();
        spent.add(Duration::from_micros(2_007));
        let mut registry = Registry::default();
        Def::new("marquee_test_spent", "Time.")
            .with_unit(Unit::Seconds)
            .register(&mut registry, spent);
        let text = encode(&registry, Format::Text);
        assert!(
            text.contains("marquee_test_spent_seconds_total 0.002007\n"),
            "{text}"
        );
    }
}
