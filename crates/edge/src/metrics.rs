//! `GET /metrics`: the edge's counters in the Prometheus text format (version 0.0.4), written
//! by hand from atomics. Recording costs a few relaxed atomic additions per request; only a
//! scrape walks and formats them. The names are documented in `docs/operations.md`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
use marquee_model::MetricsRefusal;

use crate::http::{self, Body};
use crate::{Edge, Stats};

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
    /// Everything handed to the manager's router (API, `/healthz`, `/snapshot/latest`).
    Manager,
}

const ENDPOINTS: [(Endpoint, &str); 12] = [
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
    (Endpoint::Manager, "manager"),
];

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

/// A fixed-bucket latency histogram of atomics.
#[derive(Debug, Default)]
struct Histogram {
    /// Per bucket (not cumulative; the last is `+Inf`).
    counts: [AtomicU64; BUCKETS_US.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    fn observe(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_US
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(BUCKETS_US.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

/// Requests by endpoint and outcome, and latency by endpoint.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: [[AtomicU64; OUTCOMES.len()]; ENDPOINTS.len()],
    latency: [Histogram; ENDPOINTS.len()],
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
        self.requests[e][outcome_index(outcome)].fetch_add(1, Ordering::Relaxed);
        self.latency[e].observe(elapsed);
    }

    /// Requests counted so far for an endpoint and outcome.
    pub fn requests(&self, endpoint: Endpoint, outcome: Outcome) -> u64 {
        self.requests[endpoint_index(endpoint)][outcome_index(outcome)].load(Ordering::Relaxed)
    }

    /// Requests answered so far for ads, tracking and bidding, whatever their outcome (probes
    /// and the manager's pages left out): the edge's traffic, for its heartbeat.
    pub fn traffic_total(&self) -> u64 {
        ENDPOINTS
            .iter()
            .enumerate()
            .filter(|(_, (e, _))| !matches!(e, Endpoint::Probe | Endpoint::Manager))
            .flat_map(|(i, _)| &self.requests[i])
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
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

pub(crate) fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
    );
}

fn gauge(out: &mut String, name: &str, help: &str, value: impl std::fmt::Display) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}

/// The whole exposition.
pub(crate) fn render(edge: &Edge) -> String {
    let mut out = String::with_capacity(8 * 1024);
    requests(&mut out, &edge.metrics);
    edge_counters(&mut out, &edge.stats);
    gate(&mut out, edge);
    event_log(&mut out, edge);
    replay_overflows(&mut out, edge);
    crate::quality::render_metrics(edge, &mut out);
    crate::geo::render_metrics(edge, &mut out);
    crate::bid::render_metrics(edge, &mut out);
    if let Some(gateway) = edge.gateway.as_ref() {
        gateway.render_metrics(&mut out);
    }
    if let Some(shared) = &edge.shared {
        shared.render_metrics(&mut out);
    }
    crate::pacing::render_metrics(edge, &mut out);
    snapshot(&mut out, edge);
    out
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Requests by endpoint and outcome, and their latency.
fn requests(out: &mut String, metrics: &Metrics) {
    out.push_str("# HELP marquee_edge_requests_total Requests answered by the edge, by endpoint and outcome.\n# TYPE marquee_edge_requests_total counter\n");
    for (e, (_, endpoint)) in ENDPOINTS.iter().enumerate() {
        for (o, (_, outcome)) in OUTCOMES.iter().enumerate() {
            let value = load(&metrics.requests[e][o]);
            // Every endpoint shows `ok`; other outcomes once they happened, so the series
            // stay few.
            if value > 0 || o == 0 {
                let _ = writeln!(
                    out,
                    "marquee_edge_requests_total{{endpoint=\"{endpoint}\",outcome=\"{outcome}\"}} {value}"
                );
            }
        }
    }
    out.push_str("# HELP marquee_edge_request_duration_seconds Time from the start of a request to its answer (body excluded), by endpoint.\n# TYPE marquee_edge_request_duration_seconds histogram\n");
    for (e, (_, endpoint)) in ENDPOINTS.iter().enumerate() {
        let histogram = &metrics.latency[e];
        let mut cumulative = 0;
        for (b, bound) in BUCKETS_US.iter().enumerate() {
            cumulative += load(&histogram.counts[b]);
            let _ = writeln!(
                out,
                "marquee_edge_request_duration_seconds_bucket{{endpoint=\"{endpoint}\",le=\"{}\"}} {cumulative}",
                *bound as f64 / 1e6
            );
        }
        cumulative += load(&histogram.counts[BUCKETS_US.len()]);
        let _ = writeln!(
            out,
            "marquee_edge_request_duration_seconds_bucket{{endpoint=\"{endpoint}\",le=\"+Inf\"}} {cumulative}\n\
             marquee_edge_request_duration_seconds_sum{{endpoint=\"{endpoint}\"}} {}\n\
             marquee_edge_request_duration_seconds_count{{endpoint=\"{endpoint}\"}} {cumulative}",
            load(&histogram.sum_ns) as f64 / 1e9
        );
    }
}

/// The ad path's and tracking's counters.
fn edge_counters(out: &mut String, stats: &Stats) {
    for (name, help, value) in [
        (
            "marquee_edge_decisions_total",
            "Ads chosen (one per placement served).",
            &stats.decisions,
        ),
        (
            "marquee_edge_no_ad_total",
            "Placements for which no line item could serve.",
            &stats.fallbacks,
        ),
        (
            "marquee_edge_shed_total",
            "Ad requests not started because max_in_flight were in progress; answered with the fallback at once.",
            &stats.shed,
        ),
        (
            "marquee_edge_late_total",
            "Ad requests abandoned at their deadline; answered with the fallback.",
            &stats.late,
        ),
        (
            "marquee_edge_bad_requests_total",
            "Ad requests with a bad query (400).",
            &stats.bad_requests,
        ),
        (
            "marquee_edge_shared_cap_refusals_total",
            "Ad decisions not served because Redis found a frequency cap full (filled on another edge).",
            &stats.shared_cap_refusals,
        ),
        (
            "marquee_edge_impressions_total",
            "Impressions counted (valid token, first time).",
            &stats.impressions,
        ),
        (
            "marquee_edge_clicks_total",
            "Clicks counted (valid token, first time).",
            &stats.clicks,
        ),
        (
            "marquee_edge_conversions_total",
            "Conversions counted (valid token, first time).",
            &stats.conversions,
        ),
        (
            "marquee_edge_invalid_tokens_total",
            "Tracking calls with a malformed, forged, altered, expired or wrong-kind token.",
            &stats.invalid_tokens,
        ),
        (
            "marquee_edge_repeats_total",
            "Tracking calls for a decision already counted.",
            &stats.repeats,
        ),
        (
            "marquee_edge_log_errors_total",
            "Events the event log refused (disk full, I/O error).",
            &stats.log_errors,
        ),
    ] {
        counter(out, name, help, load(value));
    }
}

/// The in-flight gate: requests in progress, queue delay, the bound.
fn gate(out: &mut String, edge: &Edge) {
    gauge(
        out,
        "marquee_edge_in_flight",
        "Ad requests in progress now.",
        edge.gate.in_flight(),
    );
    gauge(
        out,
        "marquee_edge_queue_delay_seconds",
        "How long the probe's last wake-up waited for a worker (past edge.max_queue_delay_ms, or three quarters of a request's deadline if longer, only a share of requests start).",
        edge.gate.queue_delay().as_secs_f64(),
    );
    gauge(
        out,
        "marquee_edge_max_in_flight",
        "The configured bound on ad requests in progress (0: none).",
        edge.gate.max().unwrap_or(0),
    );
}

/// The event log's counters.
fn event_log(out: &mut String, edge: &Edge) {
    let log = edge.log.counters();
    for (name, help, value) in [
        (
            "marquee_eventlog_appended_total",
            "Events appended to the event log.",
            log.appended,
        ),
        (
            "marquee_eventlog_appended_bytes_total",
            "Framed bytes of the appended events.",
            log.appended_bytes,
        ),
        (
            "marquee_eventlog_rejected_total",
            "Appends refused (closed, full or failed log).",
            log.rejected,
        ),
        (
            "marquee_eventlog_fsyncs_total",
            "Segment fsyncs.",
            log.fsyncs,
        ),
        (
            "marquee_eventlog_io_errors_total",
            "Write, fsync or file-creation failures (each stops its shard).",
            log.io_errors,
        ),
        (
            "marquee_eventlog_truncated_bytes_total",
            "Bytes cut from torn tails when the log was opened.",
            log.truncated_bytes,
        ),
    ] {
        counter(out, name, help, value);
    }
}

/// The replay guards' overflows, by kind.
fn replay_overflows(out: &mut String, edge: &Edge) {
    out.push_str("# HELP marquee_tracking_replay_overflows_total Times a replay guard's bucket share was full and emptied early (tracking.replay_capacity_per_minute too small for the traffic): repeats of the nonces forgotten count again on this edge.\n# TYPE marquee_tracking_replay_overflows_total counter\n");
    for (kind, guard) in edge.replay_guards() {
        let _ = writeln!(
            out,
            "marquee_tracking_replay_overflows_total{{kind=\"{kind}\"}} {}",
            guard.overflows()
        );
    }
}

/// The snapshot serving: loaded, version, age, swaps and rejections.
fn snapshot(out: &mut String, edge: &Edge) {
    let holder = &edge.holder;
    let current = holder.current();
    gauge(
        out,
        "marquee_snapshot_loaded",
        "1 when a snapshot is loaded (the edge is ready), else 0.",
        u8::from(current.is_some()),
    );
    if let Some(loaded) = &current {
        let snapshot = loaded.engine.snapshot();
        gauge(
            out,
            "marquee_snapshot_version",
            "Version (the store's change counter) of the snapshot serving.",
            snapshot.version,
        );
        let age = jiff::Timestamp::now().duration_since(snapshot.built_at);
        gauge(
            out,
            "marquee_snapshot_age_seconds",
            "Seconds since the serving snapshot was built.",
            age.as_secs_f64().max(0.0),
        );
    }
    counter(
        out,
        "marquee_snapshot_swaps_total",
        "Snapshots swapped in.",
        holder.swaps(),
    );
    counter(
        out,
        "marquee_snapshot_rejected_total",
        "Snapshots rejected (bad checksum or format, or not newer).",
        holder.rejected(),
    );
}
