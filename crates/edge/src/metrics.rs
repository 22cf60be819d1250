//! `GET /metrics`: the edge's families, registered once with name, help and unit on the
//! edge's `marquee-metrics` registry when it is built (`registry`), and encoded as OpenMetrics
//! or the Prometheus text format at each scrape. Recording on request paths is a relaxed atomic
//! addition on a handle made with the edge; counts other parts keep for their own use (the
//! event log's, the replay guards', the snapshot holder's, the leases') are read at the scrape.
//! The names are documented in `docs/operations.md`.

use std::sync::Arc;
use std::time::Duration;

use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
pub use marquee_metrics::Format;
use marquee_metrics::{
    Counter, Def, Histogram, Labelled, Observed, ObservedCounter, ObservedCounterBy, ObservedSome,
    Registry, Unit,
};
use marquee_model::MetricsRefusal;

use crate::http::{self, Body};
use crate::{Edge, EdgeCounters};

/// What a request asked for, as labelled in metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Ad,
    AdJson,
    Impression,
    Click,
    Conversion,
    TagJs,
    /// `/openrtb2/bid`, `/openrtb2/bid/{exchange}`.
    Bid,
    /// `/openrtb2/auction`, `/openrtb2/auction/{exchange}` (gateway mode).
    Auction,
    /// `/openrtb2/win`, `/openrtb2/bill`, `/openrtb2/loss`.
    Notice,
    /// `/sync`, `/sync/out`.
    Sync,
    /// `/metrics`, `/readyz`.
    Probe,
    /// `/profiles`: audience profiles uploaded by the operator.
    Profiles,
    /// `/gateway/...`: the gateway's bidder registry.
    GatewayRegistry,
    /// `/log/...`: the event log served to the manager.
    LogService,
    /// Everything handed to the manager's router (API, `/healthz`, `/snapshot/latest`).
    Manager,
}

const ENDPOINTS: [(Endpoint, &str); 15] = [
    (Endpoint::Ad, "ad"),
    (Endpoint::AdJson, "ad_json"),
    (Endpoint::Impression, "impression"),
    (Endpoint::Click, "click"),
    (Endpoint::Conversion, "conversion"),
    (Endpoint::TagJs, "tag_js"),
    (Endpoint::Bid, "bid"),
    (Endpoint::Auction, "auction"),
    (Endpoint::Notice, "notice"),
    (Endpoint::Sync, "sync"),
    (Endpoint::Probe, "probe"),
    (Endpoint::Profiles, "profiles"),
    (Endpoint::GatewayRegistry, "gateway_registry"),
    (Endpoint::LogService, "log"),
    (Endpoint::Manager, "manager"),
];

impl Endpoint {
    /// The operator's and the manager's endpoints, as opposed to the traffic the edge serves.
    fn is_operations(self) -> bool {
        matches!(
            self,
            Endpoint::Probe
                | Endpoint::Profiles
                | Endpoint::GatewayRegistry
                | Endpoint::LogService
                | Endpoint::Manager
        )
    }
}

/// How a request ended, as labelled in metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered as asked: an ad, a counted or repeated beacon, a page.
    Ok,
    /// An ad request answered with the fallback, or a bid request with no bid: nothing may
    /// serve, or no snapshot yet.
    Fallback,
    /// Not started: too many requests in progress; answered at once with the fallback.
    Shed,
    /// Started, but abandoned at its deadline; answered with the fallback.
    Late,
    /// A 4xx answer (bad query, unknown path).
    ClientError,
    /// A 5xx answer.
    ServerError,
}

const OUTCOMES: [(Outcome, &str); 6] = [
    (Outcome::Ok, "ok"),
    (Outcome::Fallback, "fallback"),
    (Outcome::Shed, "shed"),
    (Outcome::Late, "late"),
    (Outcome::ClientError, "client_error"),
    (Outcome::ServerError, "server_error"),
];

impl Outcome {
    pub(crate) fn from_status(status: hyper::StatusCode) -> Outcome {
        if status.is_server_error() {
            Outcome::ServerError
        } else if status.is_client_error() {
            Outcome::ClientError
        } else {
            Outcome::Ok
        }
    }
}

/// Upper bounds of the latency buckets, in microseconds (the last bucket, `+Inf`, is implied).
const BUCKETS_US: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
    5_000_000,
];

/// Requests by endpoint and outcome, and latency by endpoint: one handle per series, made
/// with the edge.
#[derive(Debug)]
pub struct Metrics {
    requests: [[Counter; OUTCOMES.len()]; ENDPOINTS.len()],
    latency: [Histogram; ENDPOINTS.len()],
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: std::array::from_fn(|_| std::array::from_fn(|_| Counter::default())),
            latency: std::array::from_fn(|_| Histogram::new(&BUCKETS_US)),
        }
    }
}

fn endpoint_index(endpoint: Endpoint) -> usize {
    ENDPOINTS
        .iter()
        .position(|(e, _)| *e == endpoint)
        .unwrap_or(0)
}

fn outcome_index(outcome: Outcome) -> usize {
    OUTCOMES
        .iter()
        .position(|(o, _)| *o == outcome)
        .unwrap_or(0)
}

impl Metrics {
    /// Counts one answered request.
    pub fn record(&self, endpoint: Endpoint, outcome: Outcome, elapsed: Duration) {
        let e = endpoint_index(endpoint);
        self.requests[e][outcome_index(outcome)].inc();
        self.latency[e].observe(elapsed);
    }

    /// Requests counted so far for an endpoint and outcome.
    pub fn requests(&self, endpoint: Endpoint, outcome: Outcome) -> u64 {
        self.requests[endpoint_index(endpoint)][outcome_index(outcome)].get()
    }

    /// Requests answered so far for ads, tracking and bidding, whatever their outcome (the
    /// operator's endpoints and the manager's pages left out): the edge's traffic, for its
    /// heartbeat.
    pub fn traffic_total(&self) -> u64 {
        ENDPOINTS
            .iter()
            .enumerate()
            .filter(|(_, (e, _))| !e.is_operations())
            .flat_map(|(i, _)| &self.requests[i])
            .map(Counter::get)
            .sum()
    }

    fn register(&self, registry: &mut Registry) {
        let requests = ENDPOINTS
            .iter()
            .zip(&self.requests)
            .flat_map(|((_, endpoint), counts)| {
                OUTCOMES
                    .iter()
                    .zip(counts)
                    .map(move |((_, outcome), count)| {
                        (
                            [("endpoint", *endpoint), ("outcome", *outcome)],
                            count.clone(),
                        )
                    })
            });
        REQUESTS.register(registry, Labelled::new(requests));
        let latency = ENDPOINTS
            .iter()
            .zip(&self.latency)
            .map(|((_, endpoint), histogram)| ([("endpoint", *endpoint)], histogram.clone()));
        REQUEST_DURATION.register(registry, Labelled::new(latency));
    }
}

/// The answer to a scrape `edge.metrics_access` refused: the reason, no metric data.
pub(crate) fn refused(refusal: MetricsRefusal) -> Response<Body> {
    let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
    let mut answer = http::text(status, format!("{refusal}\n"));
    if status == StatusCode::UNAUTHORIZED {
        answer
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    answer
}

/// The edge's families in `format`.
pub(crate) fn encode(edge: &Edge, format: Format) -> String {
    marquee_metrics::encode(&edge.registry, format)
}

/// A registry of every family of `edge` as it is now: its own, then its parts' (screen, geo,
/// bidder, gateway, Redis, pacing), then the snapshot's.
pub(crate) fn registry(edge: &Edge) -> Registry {
    let mut registry = Registry::default();
    edge.metrics.register(&mut registry);
    register_counters(&mut registry, &edge.counters);
    register_gate(&mut registry, edge);
    register_event_log(&mut registry, edge);
    register_replay_overflows(&mut registry, edge);
    crate::quality::register_metrics(&mut registry, &edge.quality.counters);
    if let Some(geo) = &edge.geo {
        crate::geo::register_metrics(&mut registry, geo);
    }
    crate::bid::register_metrics(&mut registry, &edge.bidder);
    if let Some(gateway) = &edge.gateway {
        gateway.register_metrics(&mut registry);
    }
    if let Some(shared) = &edge.shared {
        shared.register_metrics(&mut registry);
    }
    crate::pacing::register_metrics(&mut registry, &edge.pacing);
    register_snapshot(&mut registry, edge);
    registry
}

const REQUESTS: Def = Def::new(
    "marquee_edge_requests",
    "Requests answered by the edge, by endpoint and outcome.",
);
const REQUEST_DURATION: Def = Def::new(
    "marquee_edge_request_duration",
    "Time from the start of a request to its answer (body excluded), by endpoint.",
)
.with_unit(Unit::Seconds);

/// The ad path's and tracking's counters.
fn register_counters(registry: &mut Registry, counters: &EdgeCounters) {
    for (name, help, counter) in [
        (
            "marquee_edge_decisions",
            "Ads chosen (one per placement served).",
            &counters.decisions,
        ),
        (
            "marquee_edge_no_ad",
            "Placements for which no line item could serve.",
            &counters.fallbacks,
        ),
        (
            "marquee_edge_shed",
            "Ad requests not started because max_in_flight were in progress; answered with the fallback at once.",
            &counters.shed,
        ),
        (
            "marquee_edge_late",
            "Ad requests abandoned at their deadline; answered with the fallback.",
            &counters.late,
        ),
        (
            "marquee_edge_bad_requests",
            "Ad requests with a bad query (400).",
            &counters.bad_requests,
        ),
        (
            "marquee_edge_shared_cap_refusals",
            "Ad decisions not served because Redis found a frequency cap full (filled on another edge).",
            &counters.shared_cap_refusals,
        ),
        (
            "marquee_edge_impressions",
            "Impressions counted (valid token, first time).",
            &counters.impressions,
        ),
        (
            "marquee_edge_clicks",
            "Clicks counted (valid token, first time).",
            &counters.clicks,
        ),
        (
            "marquee_edge_conversions",
            "Conversions counted (valid token, first time).",
            &counters.conversions,
        ),
        (
            "marquee_edge_invalid_tokens",
            "Tracking calls with a malformed, forged, altered, expired or wrong-kind token.",
            &counters.invalid_tokens,
        ),
        (
            "marquee_edge_repeats",
            "Tracking calls for a decision already counted.",
            &counters.repeats,
        ),
        (
            "marquee_edge_log_errors",
            "Events the event log refused (disk full, I/O error).",
            &counters.log_errors,
        ),
    ] {
        Def::new(name, help).register(registry, counter.clone());
    }
}

const IN_FLIGHT: Def = Def::new("marquee_edge_in_flight", "Ad requests in progress now.");
const QUEUE_DELAY: Def = Def::new(
    "marquee_edge_queue_delay",
    "How long the probe's last wake-up waited for a worker (past edge.max_queue_delay_ms, or three quarters of a request's deadline if longer, only a share of requests start).",
)
.with_unit(Unit::Seconds);
const MAX_IN_FLIGHT: Def = Def::new(
    "marquee_edge_max_in_flight",
    "The configured bound on ad requests in progress (0: none).",
);

/// The in-flight gate: requests in progress, queue delay, the bound.
fn register_gate(registry: &mut Registry, edge: &Edge) {
    let gate = Arc::clone(&edge.gate);
    IN_FLIGHT.register(registry, Observed::new(move || gate.in_flight()));
    let gate = Arc::clone(&edge.gate);
    QUEUE_DELAY.register(
        registry,
        Observed::new(move || gate.queue_delay().as_secs_f64()),
    );
    let max = edge.gate.max().unwrap_or(0);
    MAX_IN_FLIGHT.register(registry, Observed::new(move || max));
}

/// The event log's counters, read from the log at each scrape.
fn register_event_log(registry: &mut Registry, edge: &Edge) {
    type Read = fn(&marquee_eventlog::Counters) -> u64;
    let counters: [(Def, Read); 7] = [
        (
            Def::new(
                "marquee_eventlog_appended",
                "Records appended to the event log (counter records included).",
            ),
            |c| c.appended,
        ),
        (
            Def::new(
                "marquee_eventlog_appended",
                "Framed bytes of the appended records.",
            )
            .with_unit(Unit::Bytes),
            |c| c.appended_bytes,
        ),
        (
            Def::new(
                "marquee_eventlog_counted",
                "Bids and no-bids counted into the event log's counter records.",
            ),
            |c| c.counted,
        ),
        (
            Def::new(
                "marquee_eventlog_rejected",
                "Appends and counts refused (closed, full or failed log).",
            ),
            |c| c.rejected,
        ),
        (
            Def::new("marquee_eventlog_fsyncs", "Segment fsyncs."),
            |c| c.fsyncs,
        ),
        (
            Def::new(
                "marquee_eventlog_io_errors",
                "Write, fsync or file-creation failures (each stops its shard).",
            ),
            |c| c.io_errors,
        ),
        (
            Def::new(
                "marquee_eventlog_truncated",
                "Bytes cut from torn tails when the log was opened.",
            )
            .with_unit(Unit::Bytes),
            |c| c.truncated_bytes,
        ),
    ];
    for (def, read) in counters {
        let log = Arc::clone(&edge.log);
        def.register(
            registry,
            ObservedCounter::new(move || read(&log.counters())),
        );
    }
}

const REPLAY_OVERFLOWS: Def = Def::new(
    "marquee_tracking_replay_overflows",
    "Times a replay guard's bucket share was full and emptied early (tracking.replay_capacity_per_minute too small for the traffic): repeats of the nonces forgotten count again on this edge.",
);

/// The replay guards' overflows, by kind.
fn register_replay_overflows(registry: &mut Registry, edge: &Edge) {
    let guards = edge
        .replay_guards()
        .map(|(kind, guard)| (kind, Arc::clone(guard)));
    let read = move || {
        guards
            .iter()
            .map(|(kind, guard)| ((*kind).to_owned(), guard.overflows()))
            .collect()
    };
    REPLAY_OVERFLOWS.register(registry, ObservedCounterBy::new("kind", read));
}

const SNAPSHOT_LOADED: Def = Def::new(
    "marquee_snapshot_loaded",
    "1 when a snapshot is loaded (the edge is ready), else 0.",
);
const SNAPSHOT_VERSION: Def = Def::new(
    "marquee_snapshot_version",
    "Version (the store's change counter) of the snapshot serving.",
);
const SNAPSHOT_AGE: Def = Def::new(
    "marquee_snapshot_age",
    "Seconds since the serving snapshot was built.",
)
.with_unit(Unit::Seconds);
const SNAPSHOT_SWAPS: Def = Def::new("marquee_snapshot_swaps", "Snapshots swapped in.");
const SNAPSHOT_REJECTED: Def = Def::new(
    "marquee_snapshot_rejected",
    "Snapshots rejected (bad checksum or format, or not newer).",
);

/// The snapshot serving: loaded, version, age (these two only with a snapshot), swaps and
/// rejections.
fn register_snapshot(registry: &mut Registry, edge: &Edge) {
    let holder = Arc::clone(&edge.holder);
    SNAPSHOT_LOADED.register(
        registry,
        Observed::new(move || i64::from(holder.current().is_some())),
    );
    let holder = Arc::clone(&edge.holder);
    SNAPSHOT_VERSION.register(registry, ObservedSome::new(move || holder.version()));
    let holder = Arc::clone(&edge.holder);
    let age = move || {
        let built_at = holder.current()?.engine.snapshot().built_at;
        let age = jiff::Timestamp::now().duration_since(built_at);
        Some(age.as_secs_f64().max(0.0))
    };
    SNAPSHOT_AGE.register(registry, ObservedSome::new(age));
    let holder = Arc::clone(&edge.holder);
    SNAPSHOT_SWAPS.register(registry, ObservedCounter::new(move || holder.swaps()));
    let holder = Arc::clone(&edge.holder);
    SNAPSHOT_REJECTED.register(registry, ObservedCounter::new(move || holder.rejected()));
}
