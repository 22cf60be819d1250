//! The `marquee_redis_*` metrics: the counters the other modules bump, and their families
//! ([`SharedState::register_metrics`]).

use std::sync::{Arc, Weak};
use std::time::Duration;

use marquee_metrics::{
    Counter, Def, DurationCounter, Labelled, Observed, ObservedBy, Registry, Unit,
};

use crate::round_trip::Fallback;
use crate::state::{Inner, SharedState};

const BREAKER_STATE: Def = Def::new(
    "marquee_redis_breaker_state",
    "Shared-state circuit breaker: 0 closed, 1 open (answers from local state), 2 half open (probing).",
);
const ROUND_TRIPS: Def = Def::new(
    "marquee_redis_round_trips",
    "Round trips to Redis that completed.",
);
const ROUND_TRIP_TIME: Def = Def::new(
    "marquee_redis_round_trip",
    "Time spent in completed round trips.",
)
.with_unit(Unit::Seconds);
const ERRORS: Def = Def::new(
    "marquee_redis_errors",
    "Round trips that failed (error or timeout).",
);
const FALLBACKS: Def = Def::new(
    "marquee_redis_fallbacks",
    "Checks decided from local state instead of Redis, by reason.",
);
const CACHE_REFUSALS: Def = Def::new(
    "marquee_redis_cache_refusals",
    "Checks refused from the cache of full caps, without a round trip.",
);
const WRITE_BEHIND: Def = Def::new(
    "marquee_redis_write_behind",
    "Counts queued for Redis, sent, and dropped (queue full).",
);
const WRITE_BEHIND_PENDING: Def = Def::new(
    "marquee_redis_write_behind_pending",
    "Counts and charges waiting for the next flush.",
);
const BUDGET_SPENT: Def = Def::new(
    "marquee_redis_budget_spent",
    "A line item's shared budget counter (all edges, lease units), read back every second for each line item this edge has charged.",
);

/// The counters' handles; recording is one relaxed atomic addition.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) round_trips: Counter,
    pub(crate) round_trip_time: DurationCounter,
    pub(crate) errors: Counter,
    pub(crate) timeouts: Counter,
    pub(crate) fallbacks_breaker: Counter,
    pub(crate) fallbacks_timeout: Counter,
    pub(crate) fallbacks_error: Counter,
    pub(crate) fallbacks_no_time: Counter,
    pub(crate) cache_refusals: Counter,
    /// Counts queued for the flush (charges are not counted here).
    pub(crate) queued: Counter,
    pub(crate) flushed: Counter,
    pub(crate) dropped: Counter,
}

impl Counters {
    /// Counts a fallback and returns it.
    pub(crate) fn fallback(&self, reason: Fallback) -> Fallback {
        let counter = match reason {
            Fallback::BreakerOpen => &self.fallbacks_breaker,
            Fallback::Timeout => &self.fallbacks_timeout,
            Fallback::Error => &self.fallbacks_error,
            Fallback::NoTime => &self.fallbacks_no_time,
        };
        counter.inc();
        reason
    }

    /// Counts a round trip that completed, and the time it took.
    pub(crate) fn completed(&self, took: Duration) {
        self.round_trips.inc();
        self.round_trip_time.add(took);
    }
}

/// `read` of the state behind `inner` at a scrape; `empty` once every clone of the state is
/// gone (a registry does not keep the connection and its flusher alive).
fn observe<T, F>(inner: &Arc<Inner>, empty: T, read: F) -> impl Fn() -> T + use<T, F>
where
    T: Clone,
    F: Fn(&Inner) -> T,
{
    let inner: Weak<Inner> = Arc::downgrade(inner);
    move || inner.upgrade().map_or_else(|| empty.clone(), |i| read(&i))
}

impl SharedState {
    /// Registers the `marquee_redis_*` families into `registry` (once per registry).
    pub fn register_metrics(&self, registry: &mut Registry) {
        let c = &self.inner.counters;
        let breaker = observe(&self.inner, 0_i64, |i| i64::from(i.breaker.state().gauge()));
        BREAKER_STATE.register(registry, Observed::new(breaker));
        ROUND_TRIPS.register(registry, c.round_trips.clone());
        ROUND_TRIP_TIME.register(registry, c.round_trip_time.clone());
        let errors = [("error", &c.errors), ("timeout", &c.timeouts)];
        ERRORS.register(registry, by("kind", errors));
        let fallbacks = [
            ("breaker_open", &c.fallbacks_breaker),
            ("timeout", &c.fallbacks_timeout),
            ("error", &c.fallbacks_error),
            ("no_time", &c.fallbacks_no_time),
        ];
        FALLBACKS.register(registry, by("reason", fallbacks));
        CACHE_REFUSALS.register(registry, c.cache_refusals.clone());
        let stages = [
            ("queued", &c.queued),
            ("flushed", &c.flushed),
            ("dropped", &c.dropped),
        ];
        WRITE_BEHIND.register(registry, by("stage", stages));
        let pending = observe(&self.inner, 0_i64, |i| {
            i64::try_from(i.write_behind.len()).unwrap_or(i64::MAX)
        });
        WRITE_BEHIND_PENDING.register(registry, Observed::new(pending));
        let spent = observe(&self.inner, Vec::new(), |i| {
            i.budgets
                .totals_seen()
                .into_iter()
                .map(|(line_item, total)| {
                    (
                        line_item.to_string(),
                        i64::try_from(total).unwrap_or(i64::MAX),
                    )
                })
                .collect()
        });
        BUDGET_SPENT.register(registry, ObservedBy::new("line_item", spent));
    }
}

/// A family of `counters` labelled `label`.
fn by<const N: usize>(
    label: &'static str,
    counters: [(&'static str, &Counter); N],
) -> Labelled<[(&'static str, &'static str); 1], Counter> {
    Labelled::new(counters.map(|(value, counter)| ([(label, value)], counter.clone())))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use marquee_metrics::Format;

    use super::*;
    use crate::caps::CapRule;
    use crate::config::SharedConfig;
    use crate::keys::Scope;

    fn state() -> SharedState {
        let config = SharedConfig {
            flush_interval: Duration::from_secs(3600),
            ..SharedConfig::new("redis://127.0.0.1:1")
        };
        SharedState::new(config, Arc::new(marquee_model::SystemClock)).unwrap()
    }

    /// Dashboards and alerts read these names and labels: the text stays as it is.
    #[tokio::test]
    async fn the_text_keeps_its_names_labels_and_order() {
        let state = state();
        let c = &state.inner.counters;
        let counters = [
            &c.round_trips,
            &c.errors,
            &c.timeouts,
            &c.fallbacks_breaker,
            &c.fallbacks_timeout,
            &c.fallbacks_error,
            &c.fallbacks_no_time,
            &c.cache_refusals,
            &c.queued,
            &c.flushed,
            &c.dropped,
        ];
        for (i, counter) in (1..).zip(counters) {
            counter.inc_by(1_000 * i + 7);
        }
        c.round_trip_time.add(Duration::from_micros(2_007));
        state.inner.budgets.saw([(9, 500), (3, 40)]);
        state.charge_later(3, 2);
        let rule = CapRule {
            scope: Scope::LineItem(1),
            window_seconds: 60,
            limit: 1,
        };
        state.count_later(1, &[rule], state.cap_count());
        let mut registry = Registry::default();
        state.register_metrics(&mut registry);
        assert_eq!(marquee_metrics::encode(&registry, Format::Text), EXPECTED);
    }

    /// Every family follows the naming conventions and is in the operator documentation,
    /// which names no `marquee_redis_*` metric that is not exposed.
    #[tokio::test]
    async fn the_families_are_conventional_and_documented() {
        let mut registry = Registry::default();
        state().register_metrics(&mut registry);
        let text = marquee_metrics::encode(&registry, Format::OpenMetrics);
        assert_eq!(
            marquee_metrics::check::convention_violations(&text),
            Vec::<String>::new()
        );
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/operations.md"
        ))
        .unwrap();
        let gaps = marquee_metrics::check::documentation_gaps(&text, &doc, &["marquee_redis_"]);
        assert_eq!(gaps, Vec::<String>::new());
    }

    const EXPECTED: &str = r#"# HELP marquee_redis_breaker_state Shared-state circuit breaker: 0 closed, 1 open (answers from local state), 2 half open (probing).
# TYPE marquee_redis_breaker_state gauge
marquee_redis_breaker_state 0
# HELP marquee_redis_round_trips_total Round trips to Redis that completed.
# TYPE marquee_redis_round_trips_total counter
marquee_redis_round_trips_total 1007
# HELP marquee_redis_round_trip_seconds_total Time spent in completed round trips.
# TYPE marquee_redis_round_trip_seconds_total counter
marquee_redis_round_trip_seconds_total 0.002007
# HELP marquee_redis_errors_total Round trips that failed (error or timeout).
# TYPE marquee_redis_errors_total counter
marquee_redis_errors_total{kind="error"} 2007
marquee_redis_errors_total{kind="timeout"} 3007
# HELP marquee_redis_fallbacks_total Checks decided from local state instead of Redis, by reason.
# TYPE marquee_redis_fallbacks_total counter
marquee_redis_fallbacks_total{reason="breaker_open"} 4007
marquee_redis_fallbacks_total{reason="timeout"} 5007
marquee_redis_fallbacks_total{reason="error"} 6007
marquee_redis_fallbacks_total{reason="no_time"} 7007
# HELP marquee_redis_cache_refusals_total Checks refused from the cache of full caps, without a round trip.
# TYPE marquee_redis_cache_refusals_total counter
marquee_redis_cache_refusals_total 8007
# HELP marquee_redis_write_behind_total Counts queued for Redis, sent, and dropped (queue full).
# TYPE marquee_redis_write_behind_total counter
marquee_redis_write_behind_total{stage="queued"} 9008
marquee_redis_write_behind_total{stage="flushed"} 10007
marquee_redis_write_behind_total{stage="dropped"} 11007
# HELP marquee_redis_write_behind_pending Counts and charges waiting for the next flush.
# TYPE marquee_redis_write_behind_pending gauge
marquee_redis_write_behind_pending 2
# HELP marquee_redis_budget_spent A line item's shared budget counter (all edges, lease units), read back every second for each line item this edge has charged.
# TYPE marquee_redis_budget_spent gauge
marquee_redis_budget_spent{line_item="3"} 40
marquee_redis_budget_spent{line_item="9"} 500
"#;
}
