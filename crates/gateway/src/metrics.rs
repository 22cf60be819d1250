//! Per-bidder counters and call latency, and their families
//! ([`Gateway::register_metrics`](crate::Gateway::register_metrics)). Every handle is made
//! with its bidder, so recording is one relaxed atomic addition (a latency, a few).

use std::time::Duration;

use marquee_metrics::{Counter, Def, Histogram, Labelled, ObservedBy, Registry, Unit};

/// Upper bounds of the call latency buckets, in microseconds (`+Inf` implied).
const BUCKETS_US: [u64; 11] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 50_000, 75_000, 100_000, 200_000, 500_000,
];

/// One bidder's counters.
#[derive(Debug)]
pub struct BidderStats {
    /// Calls sent.
    pub requests: Counter,
    /// Valid bids received.
    pub bids: Counter,
    /// Bids received that failed the checks.
    pub invalid_bids: Counter,
    /// Auctions won (one per imp won).
    pub wins: Counter,
    /// Answers without a bid (204, or a response without bids).
    pub no_bids: Counter,
    /// Calls the auction stopped waiting for.
    pub timeouts: Counter,
    /// Of those, answers that came afterwards (ignored).
    pub late: Counter,
    /// Transport errors, bad statuses, unreadable answers.
    pub errors: Counter,
    /// Requests it was not called for because its calls in flight were at the limit.
    pub skipped_at_limit: Counter,
    /// Requests it was not called for because its health score throttled it.
    pub skipped_unhealthy: Counter,
    /// Win and loss notices forwarded, and those that failed.
    pub notices: Counter,
    pub notice_errors: Counter,
    /// Notices not sent because the bidder's notice policy refused their URL or address.
    pub notices_refused: Counter,
    latency: Histogram,
}

impl Default for BidderStats {
    fn default() -> Self {
        BidderStats {
            requests: Counter::default(),
            bids: Counter::default(),
            invalid_bids: Counter::default(),
            wins: Counter::default(),
            no_bids: Counter::default(),
            timeouts: Counter::default(),
            late: Counter::default(),
            errors: Counter::default(),
            skipped_at_limit: Counter::default(),
            skipped_unhealthy: Counter::default(),
            notices: Counter::default(),
            notice_errors: Counter::default(),
            notices_refused: Counter::default(),
            latency: Histogram::new(&BUCKETS_US),
        }
    }
}

impl BidderStats {
    /// Records the time a call took until its answer was read.
    pub(crate) fn observe(&self, elapsed: Duration) {
        self.latency.observe(elapsed);
    }
}

/// The gateway's own counters.
#[derive(Debug, Default)]
pub struct GatewayStats {
    pub auctions: Counter,
    /// Auctions answered with at least one bid.
    pub filled: Counter,
    /// Winning bids dropped by the final check of the answer.
    pub dropped_winners: Counter,
}

const AUCTIONS: Def = Def::new(
    "marquee_gateway_auctions",
    "Auction requests the gateway ran.",
);
const FILLED: Def = Def::new(
    "marquee_gateway_filled",
    "Auctions answered with at least one bid.",
);
const DROPPED_WINNERS: Def = Def::new(
    "marquee_gateway_dropped_winners",
    "Winning bids dropped by the final check of the answer.",
);

/// A per-bidder counter family and where its handle is in a bidder's stats.
type BidderCounter = (Def, fn(&BidderStats) -> &Counter);

const BIDDER_COUNTERS: [BidderCounter; 13] = [
    (
        Def::new(
            "marquee_gateway_bidder_requests",
            "Calls sent to the bidder.",
        ),
        |s| &s.requests,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_bids",
            "Valid bids received from the bidder.",
        ),
        |s| &s.bids,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_invalid_bids",
            "Bids received that failed the checks.",
        ),
        |s| &s.invalid_bids,
    ),
    (
        Def::new("marquee_gateway_bidder_wins", "Imps the bidder won."),
        |s| &s.wins,
    ),
    (
        Def::new("marquee_gateway_bidder_no_bids", "Answers without a bid."),
        |s| &s.no_bids,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_timeouts",
            "Calls the auction stopped waiting for.",
        ),
        |s| &s.timeouts,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_late",
            "Answers that came after the auction stopped waiting (ignored).",
        ),
        |s| &s.late,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_errors",
            "Transport errors, bad statuses and unreadable answers.",
        ),
        |s| &s.errors,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_skipped_at_limit",
            "Auctions the bidder was left out of because its calls in flight were at the limit.",
        ),
        |s| &s.skipped_at_limit,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_skipped_unhealthy",
            "Auctions the bidder was left out of because its health score throttled it.",
        ),
        |s| &s.skipped_unhealthy,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_notices",
            "Win and loss notices forwarded to the bidder.",
        ),
        |s| &s.notices,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_notice_errors",
            "Notices that failed (unreadable URL, transport error, non-2xx, time-out).",
        ),
        |s| &s.notice_errors,
    ),
    (
        Def::new(
            "marquee_gateway_bidder_notices_refused",
            "Notices not sent: not an http(s) URL, user info, a host not allowed for the bidder, or an internal address.",
        ),
        |s| &s.notices_refused,
    ),
];

const HEALTH: Def = Def::new(
    "marquee_gateway_bidder_health",
    "Health score of the bidder, 0 to 1000 (below the threshold it is throttled).",
);
const IN_FLIGHT: Def = Def::new(
    "marquee_gateway_bidder_in_flight",
    "Calls to the bidder in flight.",
);
const ENABLED: Def = Def::new(
    "marquee_gateway_bidder_enabled",
    "1 when the bidder takes part in auctions.",
);
const LATENCY: Def = Def::new(
    "marquee_gateway_bidder_latency",
    "Time from sending a call to having its answer read, per bidder.",
)
.with_unit(Unit::Seconds);

/// A bidder's state at a scrape: health score, calls in flight, enabled.
pub(crate) type ReadState = dyn Fn() -> (i64, i64, bool) + Send + Sync;

/// Registers the gateway's families; `bidders` gives each bidder's name, counters and a
/// reader of its state.
pub(crate) fn register(
    registry: &mut Registry,
    gateway: &GatewayStats,
    bidders: &[(String, &BidderStats, std::sync::Arc<ReadState>)],
) {
    AUCTIONS.register(registry, gateway.auctions.clone());
    FILLED.register(registry, gateway.filled.clone());
    DROPPED_WINNERS.register(registry, gateway.dropped_winners.clone());
    for (def, field) in BIDDER_COUNTERS {
        let children = bidders
            .iter()
            .map(|(name, stats, _)| ([("bidder", name.clone())], field(stats).clone()));
        def.register(registry, Labelled::new(children));
    }
    let states: Vec<_> = bidders
        .iter()
        .map(|(name, _, read)| (name.clone(), std::sync::Arc::clone(read)))
        .collect();
    let gauge = |pick: fn((i64, i64, bool)) -> i64| {
        let states = states.clone();
        ObservedBy::new("bidder", move || {
            states
                .iter()
                .map(|(name, read)| (name.clone(), pick(read())))
                .collect()
        })
    };
    HEALTH.register(registry, gauge(|(health, ..)| health));
    IN_FLIGHT.register(registry, gauge(|(_, in_flight, _)| in_flight));
    ENABLED.register(registry, gauge(|(.., enabled)| i64::from(enabled)));
    let latency = bidders
        .iter()
        .map(|(name, stats, _)| ([("bidder", name.clone())], stats.latency.clone()));
    LATENCY.register(registry, Labelled::new(latency));
}

#[cfg(test)]
mod tests {
    use marquee_metrics::{Format, check, encode};

    use super::*;
    use crate::{BidderSpec, Gateway, GatewayConfig};

    /// Every family follows the naming conventions and is in the operator documentation,
    /// which names no `marquee_gateway_*` metric that is not exposed.
    #[tokio::test]
    async fn the_families_are_conventional_and_documented() {
        let gateway = Gateway::new(GatewayConfig {
            bidders: vec![BidderSpec::new("alpha", "http://127.0.0.1:1/bid")],
            internal_bidder: Some("marquee".to_owned()),
            ..GatewayConfig::default()
        })
        .unwrap();
        gateway
            .bidder_stats("alpha")
            .unwrap()
            .observe(Duration::from_millis(3));
        let mut registry = Registry::default();
        gateway.register_metrics(&mut registry);
        let text = encode(&registry, Format::OpenMetrics);
        assert_eq!(check::convention_violations(&text), Vec::<String>::new());
        for line in [
            "marquee_gateway_bidder_enabled{bidder=\"marquee\"} 1",
            "marquee_gateway_bidder_health{bidder=\"alpha\"} 1000",
            "marquee_gateway_bidder_latency_seconds_bucket{le=\"0.005\",bidder=\"alpha\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/operations.md"
        ))
        .unwrap();
        let gaps = check::documentation_gaps(&text, &doc, &["marquee_gateway_"]);
        assert_eq!(gaps, Vec::<String>::new());
    }
}
