//! The `marquee_redis_*` metrics: the counters the other modules bump, and their Prometheus
//! text ([`SharedState::render_metrics`]).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::breaker::BreakerState;
use crate::round_trip::Fallback;
use crate::state::SharedState;

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) round_trips: AtomicU64,
    pub(crate) round_trip_micros: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) fallbacks_breaker: AtomicU64,
    pub(crate) fallbacks_timeout: AtomicU64,
    pub(crate) fallbacks_error: AtomicU64,
    pub(crate) fallbacks_no_time: AtomicU64,
    pub(crate) cache_refusals: AtomicU64,
    /// Counts queued for the flush (charges are not counted here).
    pub(crate) queued: AtomicU64,
    pub(crate) flushed: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
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
        bump(counter, 1);
        reason
    }

    /// Counts a round trip that completed, and the time it took.
    pub(crate) fn completed(&self, took: Duration) {
        bump(&self.round_trips, 1);
        bump(
            &self.round_trip_micros,
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        );
    }
}

impl SharedState {
    /// Appends the `marquee_redis_*` metrics in Prometheus text format.
    pub fn render_metrics(&self, out: &mut String) {
        let counters = &self.inner.counters;
        render_breaker(out, self.breaker_state());
        render_round_trips(out, counters);
        render_fallbacks(out, counters);
        render_write_behind(out, counters, self.queued());
        render_budget_spent(out, &self.inner.budgets.totals_seen());
    }
}

/// A metric's `# HELP` and `# TYPE` lines.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn render_breaker(out: &mut String, state: BreakerState) {
    let name = "marquee_redis_breaker_state";
    header(
        out,
        name,
        "gauge",
        "Shared-state circuit breaker: 0 closed, 1 open (answers from local state), 2 half open (probing).",
    );
    let _ = writeln!(out, "{name} {}", state.gauge());
}

fn render_round_trips(out: &mut String, c: &Counters) {
    let name = "marquee_redis_round_trips";
    header(out, name, "counter", "Round trips to Redis that completed.");
    let _ = writeln!(out, "{name} {}", load(&c.round_trips));
    let name = "marquee_redis_round_trip_seconds_total";
    header(out, name, "counter", "Time spent in completed round trips.");
    let seconds = load(&c.round_trip_micros) as f64 / 1e6;
    let _ = writeln!(out, "{name} {seconds:.6}");
    let name = "marquee_redis_errors";
    header(
        out,
        name,
        "counter",
        "Round trips that failed (error or timeout).",
    );
    for (kind, counter) in [("error", &c.errors), ("timeout", &c.timeouts)] {
        let _ = writeln!(out, "{name}{{kind=\"{kind}\"}} {}", load(counter));
    }
}

fn render_fallbacks(out: &mut String, c: &Counters) {
    let name = "marquee_redis_fallbacks";
    header(
        out,
        name,
        "counter",
        "Checks decided from local state instead of Redis, by reason.",
    );
    for (reason, counter) in [
        ("breaker_open", &c.fallbacks_breaker),
        ("timeout", &c.fallbacks_timeout),
        ("error", &c.fallbacks_error),
        ("no_time", &c.fallbacks_no_time),
    ] {
        let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {}", load(counter));
    }
    let name = "marquee_redis_cache_refusals";
    header(
        out,
        name,
        "counter",
        "Checks refused from the cache of full caps, without a round trip.",
    );
    let _ = writeln!(out, "{name} {}", load(&c.cache_refusals));
}

fn render_write_behind(out: &mut String, c: &Counters, pending: usize) {
    let name = "marquee_redis_write_behind";
    header(
        out,
        name,
        "counter",
        "Counts queued for Redis, sent, and dropped (queue full).",
    );
    for (stage, counter) in [
        ("queued", &c.queued),
        ("flushed", &c.flushed),
        ("dropped", &c.dropped),
    ] {
        let _ = writeln!(out, "{name}{{stage=\"{stage}\"}} {}", load(counter));
    }
    let name = "marquee_redis_write_behind_pending";
    header(
        out,
        name,
        "gauge",
        "Counts and charges waiting for the next flush.",
    );
    let _ = writeln!(out, "{name} {pending}");
}

/// `totals`: (line item, shared total), sorted by line item.
fn render_budget_spent(out: &mut String, totals: &[(u64, u64)]) {
    let name = "marquee_redis_budget_spent";
    header(
        out,
        name,
        "gauge",
        "A line item's shared budget counter (all edges, lease units), read back every second for each line item this edge has charged.",
    );
    for (line_item, total) in totals {
        let _ = writeln!(out, "{name}{{line_item=\"{line_item}\"}} {total}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::caps::CapRule;
    use crate::config::SharedConfig;
    use crate::keys::Scope;

    /// Dashboards and alerts read these names and labels: the text stays as it is.
    #[tokio::test]
    async fn the_text_keeps_its_names_labels_and_order() {
        let config = SharedConfig {
            flush_interval: Duration::from_secs(3600),
            ..SharedConfig::new("redis://127.0.0.1:1")
        };
        let state = SharedState::new(config, Arc::new(marquee_model::SystemClock)).unwrap();
        let c = &state.inner.counters;
        let counters = [
            &c.round_trips,
            &c.round_trip_micros,
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
            bump(counter, 1_000 * i + 7);
        }
        state.inner.budgets.saw([(9, 500), (3, 40)]);
        state.charge_later(3, 2);
        let rule = CapRule {
            scope: Scope::LineItem(1),
            window_seconds: 60,
            limit: 1,
        };
        state.count_later(1, &[rule], state.cap_count());
        let mut out = String::from("before\n");
        state.render_metrics(&mut out);
        assert_eq!(out, EXPECTED);
    }

    const EXPECTED: &str = r#"before
# HELP marquee_redis_breaker_state Shared-state circuit breaker: 0 closed, 1 open (answers from local state), 2 half open (probing).
# TYPE marquee_redis_breaker_state gauge
marquee_redis_breaker_state 0
# HELP marquee_redis_round_trips Round trips to Redis that completed.
# TYPE marquee_redis_round_trips counter
marquee_redis_round_trips 1007
# HELP marquee_redis_round_trip_seconds_total Time spent in completed round trips.
# TYPE marquee_redis_round_trip_seconds_total counter
marquee_redis_round_trip_seconds_total 0.002007
# HELP marquee_redis_errors Round trips that failed (error or timeout).
# TYPE marquee_redis_errors counter
marquee_redis_errors{kind="error"} 3007
marquee_redis_errors{kind="timeout"} 4007
# HELP marquee_redis_fallbacks Checks decided from local state instead of Redis, by reason.
# TYPE marquee_redis_fallbacks counter
marquee_redis_fallbacks{reason="breaker_open"} 5007
marquee_redis_fallbacks{reason="timeout"} 6007
marquee_redis_fallbacks{reason="error"} 7007
marquee_redis_fallbacks{reason="no_time"} 8007
# HELP marquee_redis_cache_refusals Checks refused from the cache of full caps, without a round trip.
# TYPE marquee_redis_cache_refusals counter
marquee_redis_cache_refusals 9007
# HELP marquee_redis_write_behind Counts queued for Redis, sent, and dropped (queue full).
# TYPE marquee_redis_write_behind counter
marquee_redis_write_behind{stage="queued"} 10008
marquee_redis_write_behind{stage="flushed"} 11007
marquee_redis_write_behind{stage="dropped"} 12007
# HELP marquee_redis_write_behind_pending Counts and charges waiting for the next flush.
# TYPE marquee_redis_write_behind_pending gauge
marquee_redis_write_behind_pending 2
# HELP marquee_redis_budget_spent A line item's shared budget counter (all edges, lease units), read back every second for each line item this edge has charged.
# TYPE marquee_redis_budget_spent gauge
marquee_redis_budget_spent{line_item="3"} 40
marquee_redis_budget_spent{line_item="9"} 500
"#;
}
