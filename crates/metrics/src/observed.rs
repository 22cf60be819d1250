//! Values read when a scrape encodes them: state a component keeps for its own use (a
//! breaker's state, a queue's length, per line item figures, counts another crate keeps in its
//! own atomics) is not copied into metrics on every change.

use std::fmt;

use prometheus_client::encoding::{
    EncodeCounterValue, EncodeGaugeValue, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;

/// A gauge whose value `read` gives at each scrape.
pub struct Observed<F>(F);

impl<F> Observed<F> {
    pub fn new(read: F) -> Observed<F> {
        Observed(read)
    }
}

impl<F> fmt::Debug for Observed<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observed").finish_non_exhaustive()
    }
}

impl<F, N> EncodeMetric for Observed<F>
where
    F: Fn() -> N,
    N: EncodeGaugeValue,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&(self.0)())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// Gauges with one label whose values and series `read` gives at each scrape (per line item,
/// per bidder): `read` returns (label value, value) pairs in the order to encode.
pub struct ObservedBy<F> {
    label: &'static str,
    read: F,
}

impl<F> ObservedBy<F> {
    pub fn new(label: &'static str, read: F) -> ObservedBy<F> {
        ObservedBy { label, read }
    }
}

impl<F> fmt::Debug for ObservedBy<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedBy")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl<F, N> EncodeMetric for ObservedBy<F>
where
    F: Fn() -> Vec<(String, N)>,
    N: EncodeGaugeValue,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (value, gauge) in (self.read)() {
            let labels = [(self.label, value.as_str())];
            encoder.encode_family(&labels)?.encode_gauge(&gauge)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// A gauge whose value `read` gives at each scrape, without a sample while it gives `None`
/// (a value that does not exist yet, such as the age of a snapshot before one is loaded).
pub struct ObservedSome<F>(F);

impl<F> ObservedSome<F> {
    pub fn new(read: F) -> ObservedSome<F> {
        ObservedSome(read)
    }
}

impl<F> fmt::Debug for ObservedSome<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedSome").finish_non_exhaustive()
    }
}

impl<F, N> EncodeMetric for ObservedSome<F>
where
    F: Fn() -> Option<N>,
    N: EncodeGaugeValue,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        match (self.0)() {
            Some(value) => encoder.encode_gauge(&value),
            None => Ok(()),
        }
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// A counter whose value `read` gives at each scrape: a count another component keeps (an
/// event log's appends, a replay guard's overflows), exposed without counting twice.
pub struct ObservedCounter<F>(F);

impl<F> ObservedCounter<F> {
    pub fn new(read: F) -> ObservedCounter<F> {
        ObservedCounter(read)
    }
}

impl<F> fmt::Debug for ObservedCounter<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedCounter").finish_non_exhaustive()
    }
}

impl<F, N> EncodeMetric for ObservedCounter<F>
where
    F: Fn() -> N,
    N: EncodeCounterValue,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&(self.0)(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// Counters with one label whose values and series `read` gives at each scrape (per line
/// item, per kind): `read` returns (label value, value) pairs in the order to encode.
pub struct ObservedCounterBy<F> {
    label: &'static str,
    read: F,
}

impl<F> ObservedCounterBy<F> {
    pub fn new(label: &'static str, read: F) -> ObservedCounterBy<F> {
        ObservedCounterBy { label, read }
    }
}

impl<F> fmt::Debug for ObservedCounterBy<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedCounterBy")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl<F, N> EncodeMetric for ObservedCounterBy<F>
where
    F: Fn() -> Vec<(String, N)>,
    N: EncodeCounterValue,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (value, count) in (self.read)() {
            let labels = [(self.label, value.as_str())];
            encoder
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Def, Format, Registry, encode};

    #[test]
    fn observed_values_are_read_at_each_scrape() {
        let mut registry = Registry::default();
        Def::new("marquee_test_state", "State.").register(&mut registry, Observed::new(|| 2_i64));
        Def::new("marquee_test_spent", "Spent.").register(
            &mut registry,
            ObservedBy::new("line_item", || vec![("3".to_owned(), 40_i64)]),
        );
        assert_eq!(
            encode(&registry, Format::Text),
            "# HELP marquee_test_state State.\n\
             # TYPE marquee_test_state gauge\n\
             marquee_test_state 2\n\
             # HELP marquee_test_spent Spent.\n\
             # TYPE marquee_test_spent gauge\n\
             marquee_test_spent{line_item=\"3\"} 40\n"
        );
    }

    #[test]
    fn observed_counters_and_absent_values() {
        let mut registry = Registry::default();
        Def::new("marquee_test_runs", "Runs.")
            .register(&mut registry, ObservedCounter::new(|| 3_u64));
        Def::new("marquee_test_overflows", "Overflows.").register(
            &mut registry,
            ObservedCounterBy::new("kind", || vec![("click".to_owned(), 5_u64)]),
        );
        Def::new("marquee_test_age", "Age.")
            .register(&mut registry, ObservedSome::new(|| None::<f64>));
        assert_eq!(
            encode(&registry, Format::Text),
            "# HELP marquee_test_runs_total Runs.\n\
             # TYPE marquee_test_runs_total counter\n\
             marquee_test_runs_total 3\n\
             # HELP marquee_test_overflows_total Overflows.\n\
             # TYPE marquee_test_overflows_total counter\n\
             marquee_test_overflows_total{kind=\"click\"} 5\n\
             # HELP marquee_test_age Age.\n\
             # TYPE marquee_test_age gauge\n"
        );
    }
}
