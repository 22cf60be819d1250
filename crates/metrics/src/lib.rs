//! One way to expose metrics for every Marquee component, on a `prometheus-client`
//! [`Registry`] that the process owns (there is no global registry).
//!
//! A component declares each family once as a [`Def`] (name, help, unit), creates its metric
//! handles when it is built, resolving every labelled child then ([`Labelled`]), and registers
//! them with [`Def::register`] into the registry it is given. Recording is a relaxed atomic
//! operation on a handle the component keeps: no lock, no allocation, no label lookup.
//! Values that live elsewhere are read when a scrape encodes them ([`Observed`],
//! [`ObservedBy`], [`ObservedSome`], [`ObservedCounter`], [`ObservedCounterBy`]). [`encode`]
//! writes a registry as OpenMetrics or Prometheus text.
//!
//! Names follow the Prometheus conventions, checked by [`check`]: `marquee_` and snake case;
//! a counter's name is given without `_total` (the encoder appends it to the samples); a
//! declared unit is appended to the name by the encoder and never written into it.

pub mod check;
mod histogram;
mod labelled;
mod observed;
mod text;

pub use histogram::{DurationCounter, Histogram};
pub use labelled::Labelled;
pub use observed::{Observed, ObservedBy, ObservedCounter, ObservedCounterBy, ObservedSome};
pub use prometheus_client;
pub use prometheus_client::registry::Registry;
pub use text::{CONTENT_TYPE_OPENMETRICS, CONTENT_TYPE_TEXT, Format, encode};

use std::sync::atomic::AtomicU64;

use prometheus_client::registry::Metric;

/// A counter: one relaxed `fetch_add` per increment.
pub type Counter = prometheus_client::metrics::counter::Counter<u64>;
/// An integer gauge: one relaxed atomic operation per update.
pub type Gauge = prometheus_client::metrics::gauge::Gauge<i64>;
/// A floating-point gauge (its bits in an `AtomicU64`).
pub type FloatGauge = prometheus_client::metrics::gauge::Gauge<f64, AtomicU64>;

/// The base units our families use (Prometheus wants base units: seconds, not milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Bytes,
}

impl Unit {
    fn prometheus(self) -> prometheus_client::registry::Unit {
        match self {
            Unit::Seconds => prometheus_client::registry::Unit::Seconds,
            Unit::Bytes => prometheus_client::registry::Unit::Bytes,
        }
    }
}

/// A family's name, help and unit, declared once (usually as a `const`).
#[derive(Debug, Clone, Copy)]
pub struct Def {
    /// Without the unit and, for a counter, without `_total`: the encoder appends both.
    pub name: &'static str,
    /// One sentence; a full stop is added if missing.
    pub help: &'static str,
    pub unit: Option<Unit>,
}

impl Def {
    pub const fn new(name: &'static str, help: &'static str) -> Def {
        Def {
            name,
            help,
            unit: None,
        }
    }

    pub const fn with_unit(self, unit: Unit) -> Def {
        Def {
            unit: Some(unit),
            ..self
        }
    }

    /// Registers `metric` (a handle sharing its values with the caller's) under this family.
    pub fn register(&self, registry: &mut Registry, metric: impl Metric) {
        // prometheus-client appends the full stop itself.
        let help = self.help.strip_suffix('.').unwrap_or(self.help);
        match self.unit {
            Some(unit) => registry.register_with_unit(self.name, help, unit.prometheus(), metric),
            None => registry.register(self.name, help, metric),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: Def = Def::new("marquee_test_runs", "Runs.");
    const READ: Def = Def::new("marquee_test_read", "Bytes read").with_unit(Unit::Bytes);

    #[test]
    fn a_family_is_named_once_and_recorded_through_its_handle() {
        let mut registry = Registry::default();
        let runs = Counter::default();
        RUNS.register(&mut registry, runs.clone());
        let read = Counter::default();
        READ.register(&mut registry, read.clone());
        runs.inc();
        read.inc_by(512);
        let text = encode(&registry, Format::OpenMetrics);
        assert_eq!(
            text,
            "# HELP marquee_test_runs Runs.\n\
             # TYPE marquee_test_runs counter\n\
             marquee_test_runs_total 1\n\
             # HELP marquee_test_read_bytes Bytes read.\n\
             # TYPE marquee_test_read_bytes counter\n\
             # UNIT marquee_test_read_bytes bytes\n\
             marquee_test_read_bytes_total 512\n\
             # EOF\n"
        );
    }
}
