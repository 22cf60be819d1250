//! Values read when a scrape encodes them: state a component keeps for its own use (a
//! breaker's state, a queue's length, per line item figures) is not copied into gauges on
//! every change.

use std::fmt;

use prometheus_client::encoding::{EncodeGaugeValue, EncodeMetric, MetricEncoder};
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
}
