//! A family whose children are all known when its component is built.

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// A labelled family with a fixed set of children, encoded in the order given.
///
/// Not `prometheus_client::metrics::family::Family`: its `get_or_create` takes a lock and
/// hashes the labels on every call. Here the component keeps each child's handle from the
/// start and records through it; the family only holds clones for encoding. Clones share the
/// children.
#[derive(Debug)]
pub struct Labelled<S, M>(Arc<[(S, M)]>);

impl<S, M> Clone for Labelled<S, M> {
    fn clone(&self) -> Self {
        Labelled(Arc::clone(&self.0))
    }
}

impl<S, M> Labelled<S, M> {
    /// `children`: each label set with a handle sharing its values with the one recorded to.
    pub fn new(children: impl IntoIterator<Item = (S, M)>) -> Labelled<S, M> {
        Labelled(children.into_iter().collect())
    }
}

impl<S, M: TypedMetric> TypedMetric for Labelled<S, M> {
    const TYPE: MetricType = M::TYPE;
}

impl<S: EncodeLabelSet, M: EncodeMetric + TypedMetric> EncodeMetric for Labelled<S, M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, metric) in self.0.iter() {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Counter, Def, Format, Registry, encode};

    #[test]
    fn children_are_encoded_in_their_order_and_share_their_values() {
        let [error, timeout] = [Counter::default(), Counter::default()];
        let family = Labelled::new([
            ([("kind", "error")], error.clone()),
            ([("kind", "timeout")], timeout.clone()),
        ]);
        let mut registry = Registry::default();
        Def::new("marquee_test_errors", "Errors.").register(&mut registry, family);
        timeout.inc();
        assert_eq!(
            encode(&registry, Format::Text),
            "# HELP marquee_test_errors_total Errors.\n\
             # TYPE marquee_test_errors_total counter\n\
             marquee_test_errors_total{kind=\"error\"} 0\n\
             marquee_test_errors_total{kind=\"timeout\"} 1\n"
        );
    }
}
