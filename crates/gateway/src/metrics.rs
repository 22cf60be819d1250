//! Per-bidder counters and call latency, relaxed atomics formatted only when `/metrics` is
//! scraped (Prometheus text, written by hand like the edge's).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the call latency buckets, in milliseconds (`+Inf` implied).
const BUCKETS_MS: [u64; 11] = [1, 2, 5, 10, 20, 30, 50, 75, 100, 200, 500];

/// One bidder's counters.
#[derive(Debug, Default)]
pub struct BidderStats {
    /// Calls sent.
    pub requests: AtomicU64,
    /// Valid bids received.
    pub bids: AtomicU64,
    /// Bids received that failed the checks.
    pub invalid_bids: AtomicU64,
    /// Auctions won (one per imp won).
    pub wins: AtomicU64,
    /// Answers without a bid (204, or a response without bids).
    pub no_bids: AtomicU64,
    /// Calls the auction stopped waiting for.
    pub timeouts: AtomicU64,
    /// Of those, answers that came afterwards (ignored).
    pub late: AtomicU64,
    /// Transport errors, bad statuses, unreadable answers.
    pub errors: AtomicU64,
    /// Requests it was not called for because its calls in flight were at the limit.
    pub skipped_at_limit: AtomicU64,
    /// Requests it was not called for because its health score throttled it.
    pub skipped_unhealthy: AtomicU64,
    /// Win and loss notices forwarded, and those that failed.
    pub notices: AtomicU64,
    pub notice_errors: AtomicU64,
    /// Notices not sent because the bidder's notice policy refused their URL or address.
    pub notices_refused: AtomicU64,
    latency: [AtomicU64; BUCKETS_MS.len() + 1],
    latency_sum_us: AtomicU64,
}

impl BidderStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        if n > 0 {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Records the time a call took until its answer was read.
    pub(crate) fn observe(&self, elapsed: Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_MS
            .iter()
            .position(|&bound| ms < bound)
            .unwrap_or(BUCKETS_MS.len());
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// The gateway's own counters.
#[derive(Debug, Default)]
pub struct GatewayStats {
    pub auctions: AtomicU64,
    /// Auctions answered with at least one bid.
    pub filled: AtomicU64,
    /// Winning bids dropped by the final check of the answer.
    pub dropped_winners: AtomicU64,
}

type Counter = (&'static str, &'static str, fn(&BidderStats) -> &AtomicU64);

const COUNTERS: [Counter; 13] = [
    ("requests", "Calls sent to the bidder.", |s| &s.requests),
    ("bids", "Valid bids received from the bidder.", |s| &s.bids),
    (
        "invalid_bids",
        "Bids received that failed the checks.",
        |s| &s.invalid_bids,
    ),
    ("wins", "Imps the bidder won.", |s| &s.wins),
    ("no_bids", "Answers without a bid.", |s| &s.no_bids),
    ("timeouts", "Calls the auction stopped waiting for.", |s| {
        &s.timeouts
    }),
    (
        "late",
        "Answers that came after the auction stopped waiting (ignored).",
        |s| &s.late,
    ),
    (
        "errors",
        "Transport errors, bad statuses and unreadable answers.",
        |s| &s.errors,
    ),
    (
        "skipped_at_limit",
        "Auctions the bidder was left out of because its calls in flight were at the limit.",
        |s| &s.skipped_at_limit,
    ),
    (
        "skipped_unhealthy",
        "Auctions the bidder was left out of because its health score throttled it.",
        |s| &s.skipped_unhealthy,
    ),
    (
        "notices",
        "Win and loss notices forwarded to the bidder.",
        |s| &s.notices,
    ),
    (
        "notice_errors",
        "Notices that failed (unreadable URL, transport error, non-2xx, time-out).",
        |s| &s.notice_errors,
    ),
    (
        "notices_refused",
        "Notices not sent: not an http(s) URL, user info, a host not allowed for the bidder, or an internal address.",
        |s| &s.notices_refused,
    ),
];

/// Appends the gateway's metrics; `bidders` gives each bidder's name, stats, health score,
/// calls in flight and whether it is enabled.
pub(crate) fn render<'a>(
    out: &mut String,
    gateway: &GatewayStats,
    bidders: impl Iterator<Item = (&'a str, &'a BidderStats, u32, usize, bool)> + Clone,
) {
    render_gateway(out, gateway);
    render_bidder_counters(out, bidders.clone());
    render_bidder_gauges(out, bidders.clone());
    render_latency(out, bidders);
}

fn render_gateway(out: &mut String, gateway: &GatewayStats) {
    for (name, help, value) in [
        (
            "marquee_gateway_auctions_total",
            "Auction requests the gateway ran.",
            &gateway.auctions,
        ),
        (
            "marquee_gateway_filled_total",
            "Auctions answered with at least one bid.",
            &gateway.filled,
        ),
        (
            "marquee_gateway_dropped_winners_total",
            "Winning bids dropped by the final check of the answer.",
            &gateway.dropped_winners,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            BidderStats::get(value)
        );
    }
}

fn render_bidder_counters<'a>(
    out: &mut String,
    bidders: impl Iterator<Item = (&'a str, &'a BidderStats, u32, usize, bool)> + Clone,
) {
    for (suffix, help, field) in COUNTERS {
        let _ = writeln!(
            out,
            "# HELP marquee_gateway_bidder_{suffix}_total {help}\n# TYPE marquee_gateway_bidder_{suffix}_total counter"
        );
        for (bidder, stats, ..) in bidders.clone() {
            let _ = writeln!(
                out,
                "marquee_gateway_bidder_{suffix}_total{{bidder=\"{bidder}\"}} {}",
                BidderStats::get(field(stats))
            );
        }
    }
}

fn render_bidder_gauges<'a>(
    out: &mut String,
    bidders: impl Iterator<Item = (&'a str, &'a BidderStats, u32, usize, bool)> + Clone,
) {
    for (metric, help, pick) in [
        (
            "marquee_gateway_bidder_health",
            "Health score of the bidder, 0 to 1000 (below the threshold it is throttled).",
            0usize,
        ),
        (
            "marquee_gateway_bidder_in_flight",
            "Calls to the bidder in flight.",
            1,
        ),
        (
            "marquee_gateway_bidder_enabled",
            "1 when the bidder takes part in auctions.",
            2,
        ),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge");
        for (bidder, _, health, in_flight, enabled) in bidders.clone() {
            let value = match pick {
                0 => health as usize,
                1 => in_flight,
                _ => usize::from(enabled),
            };
            let _ = writeln!(out, "{metric}{{bidder=\"{bidder}\"}} {value}");
        }
    }
}

fn render_latency<'a>(
    out: &mut String,
    bidders: impl Iterator<Item = (&'a str, &'a BidderStats, u32, usize, bool)>,
) {
    let name = "marquee_gateway_bidder_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time from sending a call to having its answer read, per bidder.\n# TYPE {name} histogram"
    );
    for (bidder, stats, ..) in bidders {
        let mut cumulative = 0;
        for (i, count) in stats.latency.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = BUCKETS_MS.get(i).map_or_else(
                || "+Inf".to_owned(),
                |ms| format!("{}", *ms as f64 / 1000.0),
            );
            let _ = writeln!(
                out,
                "{name}_bucket{{bidder=\"{bidder}\",le=\"{le}\"}} {cumulative}"
            );
        }
        let sum = stats.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{bidder=\"{bidder}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{bidder=\"{bidder}\"}} {cumulative}");
    }
}
