//! Results of a run: the final table, the JSON for scripts, and the numbers the SVG charts draw.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::session::State;

/// Why a request got no response. Status codes are not errors: they are counted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The TCP connection or the HTTP handshake failed.
    Connect,
    /// No complete response within the request timeout.
    Timeout,
    /// The server closed the connection before the response was complete.
    Closed,
    /// The response was not valid HTTP/1.1.
    Parse,
    /// Any other I/O failure.
    Io,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 5] = [
        ErrorKind::Connect,
        ErrorKind::Timeout,
        ErrorKind::Closed,
        ErrorKind::Parse,
        ErrorKind::Io,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Closed => "closed",
            ErrorKind::Parse => "parse",
            ErrorKind::Io => "io",
        }
    }
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub min_ms: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// From a histogram of nanoseconds; all zero when it is empty.
    pub fn from_histogram(histogram: &Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return Latency::default();
        }
        let ms = |ns: u64| ns as f64 / 1e6;
        Latency {
            min_ms: ms(histogram.min()),
            mean_ms: histogram.mean() / 1e6,
            p50_ms: ms(histogram.value_at_quantile(0.5)),
            p90_ms: ms(histogram.value_at_quantile(0.9)),
            p99_ms: ms(histogram.value_at_quantile(0.99)),
            p999_ms: ms(histogram.value_at_quantile(0.999)),
            max_ms: ms(histogram.max()),
        }
    }
}

/// One second (or the last, partial interval) of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    /// Seconds since the start, at the end of this interval.
    pub t_s: f64,
    pub responses: u64,
    pub errors: u64,
    /// Responses per second in this interval.
    pub rate: f64,
    pub latency: Latency,
    /// User-session workload: this interval's answers by request kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<KindCounts>,
}

/// A count per user-session request kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    pub page_views: u64,
    pub ad_requests: u64,
    pub impressions: u64,
    pub clicks: u64,
}

impl KindCounts {
    pub fn get_mut(&mut self, kind: State) -> &mut u64 {
        match kind {
            State::PageView => &mut self.page_views,
            State::AdRequest => &mut self.ad_requests,
            State::Impression => &mut self.impressions,
            State::Click => &mut self.clicks,
        }
    }

    pub fn get(&self, kind: State) -> u64 {
        match kind {
            State::PageView => self.page_views,
            State::AdRequest => self.ad_requests,
            State::Impression => self.impressions,
            State::Click => self.clicks,
        }
    }

    pub fn add(&mut self, other: &KindCounts) {
        for kind in State::ALL {
            *self.get_mut(kind) += other.get(kind);
        }
    }
}

/// What the user-session workload did, in total or at one target. Requests of a kind were
/// sent: answered (by status) or failed (`errors`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionCounts {
    /// Ad requests sent.
    pub ad_requests: u64,
    pub ad_statuses: BTreeMap<u16, u64>,
    /// 200 answers carrying an ad with its impression beacon URL.
    pub ads: u64,
    /// 200 answers with an empty `ads` list: no ad (no fill, or the edge's fallback).
    pub no_ads: u64,
    /// Answers that were neither: another status, not the ad answer's JSON, or an ad without
    /// a beacon URL.
    pub ads_unreadable: u64,
    /// Impression beacons fired (at this target, for a target).
    pub impressions: u64,
    pub impression_statuses: BTreeMap<u16, u64>,
    /// Clicks fired.
    pub clicks: u64,
    pub click_statuses: BTreeMap<u16, u64>,
    /// Page views sent (only when the model gives them a path).
    pub page_views: u64,
    pub page_view_statuses: BTreeMap<u16, u64>,
    /// Requests without an answer (timeouts, refused or broken connections), by kind.
    pub errors: KindCounts,
}

impl SessionCounts {
    pub fn add(&mut self, other: &SessionCounts) {
        let merge = |into: &mut BTreeMap<u16, u64>, from: &BTreeMap<u16, u64>| {
            for (code, count) in from {
                *into.entry(*code).or_insert(0) += count;
            }
        };
        self.ad_requests += other.ad_requests;
        merge(&mut self.ad_statuses, &other.ad_statuses);
        self.ads += other.ads;
        self.no_ads += other.no_ads;
        self.ads_unreadable += other.ads_unreadable;
        self.impressions += other.impressions;
        merge(&mut self.impression_statuses, &other.impression_statuses);
        self.clicks += other.clicks;
        merge(&mut self.click_statuses, &other.click_statuses);
        self.page_views += other.page_views;
        merge(&mut self.page_view_statuses, &other.page_view_statuses);
        self.errors.add(&other.errors);
    }

    /// Sent requests of `kind` and their answers by status.
    pub fn kind_mut(&mut self, kind: State) -> (&mut u64, &mut BTreeMap<u16, u64>) {
        match kind {
            State::PageView => (&mut self.page_views, &mut self.page_view_statuses),
            State::AdRequest => (&mut self.ad_requests, &mut self.ad_statuses),
            State::Impression => (&mut self.impressions, &mut self.impression_statuses),
            State::Click => (&mut self.clicks, &mut self.click_statuses),
        }
    }
}

/// The user-session workload's own figures.
#[derive(Debug, Clone, Serialize)]
pub struct SessionReport {
    /// Where beacons and clicks went: `same`, `other` or `random` (see `--beacon-target`).
    pub beacon_target: &'static str,
    /// Sessions started (each with a new user, pinned to one target for its ads).
    pub sessions: u64,
    /// Impression and click visits that sent nothing: the session's last ad request brought
    /// no ad (or the ad had no such URL).
    pub skipped_no_ad: u64,
    /// Totals over all targets.
    #[serde(flatten)]
    pub total: SessionCounts,
    /// Latency of answered requests by kind (`page_view`, `ad_request`, `impression`,
    /// `click`; kinds never sent are left out), from the intended send time in open loop.
    pub latency: BTreeMap<&'static str, Latency>,
    /// The same counts per target, in the order given; beacons and clicks count at the target
    /// they were sent to.
    pub targets: Vec<TargetCounts>,
}

/// One target's share of a session run.
#[derive(Debug, Clone, Serialize)]
pub struct TargetCounts {
    pub url: String,
    #[serde(flatten)]
    pub counts: SessionCounts,
}

/// The result of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub url: String,
    pub workload: String,
    /// `open` (fixed rate) or `closed` (each connection sends when its last answer came).
    pub mode: &'static str,
    pub offered_rate: Option<f64>,
    pub connections: usize,
    pub threads: usize,
    pub keep_alive: bool,
    /// From the start to the last answer.
    pub elapsed_s: f64,
    /// Requests sent: responses plus errors.
    pub requests: u64,
    pub responses: u64,
    /// Responses per second.
    pub throughput: f64,
    /// 2xx responses per second.
    pub goodput: f64,
    /// Of responses (any status), from the intended send time in open loop.
    pub latency: Latency,
    pub statuses: BTreeMap<u16, u64>,
    /// 200 answers with a body: bids, or ads served.
    pub bids: u64,
    /// 204 answers: OpenRTB no-bids.
    pub no_bids: u64,
    pub errors: BTreeMap<&'static str, u64>,
    pub errors_total: u64,
    /// Open loop with `--max-wait`: requests not sent because no connection was free in time.
    pub unsent: u64,
    /// With `--deadline`: answers (any status) that took longer than it, to the histogram's
    /// resolution (0.1%).
    pub over_deadline: Option<u64>,
    pub non_2xx: u64,
    /// This load generator's own CPU over the run, in % of one core (user and system, all
    /// threads; `None` off Linux). Near 100 × `threads` the generator itself was the
    /// bottleneck: what it sent fell short of the plan, and the latencies include its own wait
    /// to read the answers.
    pub client_cpu_percent: Option<f64>,
    pub bytes_received: u64,
    /// User-session workload only: ads, beacons and clicks, in total and per target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionReport>,
    pub timeline: Vec<Tick>,
    /// All latencies in nanoseconds, for callers that need more than the summary.
    #[serde(skip)]
    pub histogram: Histogram<u64>,
}

impl Report {
    /// The final table, for people.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mode = match self.offered_rate {
            Some(rate) => format!("open loop at {} req/s", group(rate.round() as u64)),
            None => "closed loop".into(),
        };
        let keep_alive = if self.keep_alive {
            "keep-alive"
        } else {
            "new connection per request"
        };
        let mut row = |name: &str, value: String| {
            let _ = writeln!(out, "  {name:<12} {value}");
        };
        row("target", self.url.clone());
        row("workload", self.workload.clone());
        row(
            "load",
            format!(
                "{mode}, {} connections, {} thread(s), {keep_alive}",
                self.connections, self.threads
            ),
        );
        row("elapsed", format!("{:.2} s", self.elapsed_s));
        row(
            "requests",
            format!(
                "{} sent, {} answered, {} unsent (no free connection in time)",
                group(self.requests),
                group(self.responses),
                group(self.unsent)
            ),
        );
        row(
            "throughput",
            format!(
                "{} req/s ({} 2xx/s)",
                group(self.throughput.round() as u64),
                group(self.goodput.round() as u64)
            ),
        );
        let l = &self.latency;
        row(
            "latency",
            format!(
                "p50 {} · p90 {} · p99 {} · p99.9 {} · max {} (mean {})",
                ms(l.p50_ms),
                ms(l.p90_ms),
                ms(l.p99_ms),
                ms(l.p999_ms),
                ms(l.max_ms),
                ms(l.mean_ms)
            ),
        );
        let statuses = if self.statuses.is_empty() {
            "none".to_owned()
        } else {
            self.statuses
                .iter()
                .map(|(code, count)| format!("{code}: {}", group(*count)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(late) = self.over_deadline {
            row(
                "deadline",
                format!("{} answers slower than the deadline", group(late)),
            );
        }
        row("statuses", statuses);
        row(
            "bids",
            format!(
                "{} (200 with a body) · no-bids {} (204)",
                group(self.bids),
                group(self.no_bids)
            ),
        );
        let errors = if self.errors_total == 0 {
            "none".to_owned()
        } else {
            self.errors
                .iter()
                .filter(|(_, count)| **count > 0)
                .map(|(kind, count)| format!("{kind}: {}", group(*count)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        row("errors", errors);
        if let Some(percent) = self.client_cpu_percent {
            let busy = percent >= SATURATED_PERCENT * self.threads as f64;
            row(
                "client CPU",
                format!(
                    "{percent:.0}% of one core ({} thread(s)){}",
                    self.threads,
                    if busy {
                        ": the load generator was saturated; its latencies include its own wait"
                    } else {
                        ""
                    }
                ),
            );
        }
        if let Some(session) = &self.session {
            session_rows(&mut out, session);
        }
        out
    }
}

/// The user-session rows of the table: totals, latency by kind, then one line per target when
/// there are several.
fn session_rows(out: &mut String, session: &SessionReport) {
    let mut row = |name: &str, value: String| {
        let _ = writeln!(out, "  {name:<12} {value}");
    };
    let t = &session.total;
    row(
        "sessions",
        format!(
            "{} · beacons and clicks to the {} target",
            group(session.sessions),
            match session.beacon_target {
                "same" => "same (the ad's)",
                "other" => "other (never the ad's)",
                other => other,
            }
        ),
    );
    row(
        "ads",
        format!(
            "{} fetched: {} with an ad · {} empty · {} unreadable · {} no answer ({})",
            group(t.ad_requests),
            group(t.ads),
            group(t.no_ads),
            group(t.ads_unreadable),
            group(t.errors.ad_requests),
            statuses_text(&t.ad_statuses)
        ),
    );
    row(
        "beacons",
        format!(
            "{} fired ({}) · {} no answer · {} skipped (no ad)",
            group(t.impressions),
            statuses_text(&t.impression_statuses),
            group(t.errors.impressions),
            group(session.skipped_no_ad)
        ),
    );
    row(
        "clicks",
        format!(
            "{} fired ({}) · {} no answer",
            group(t.clicks),
            statuses_text(&t.click_statuses),
            group(t.errors.clicks)
        ),
    );
    if t.page_views > 0 || t.errors.page_views > 0 {
        row(
            "page views",
            format!(
                "{} sent ({})",
                group(t.page_views),
                statuses_text(&t.page_view_statuses)
            ),
        );
    }
    for (kind, l) in &session.latency {
        row(
            kind,
            format!(
                "latency p50 {} · p99 {} · max {}",
                ms(l.p50_ms),
                ms(l.p99_ms),
                ms(l.max_ms)
            ),
        );
    }
    if session.targets.len() > 1 {
        for target in &session.targets {
            let c = &target.counts;
            row(
                "target",
                format!(
                    "{}: {} ads fetched ({} with an ad) · {} beacons · {} clicks",
                    target.url,
                    group(c.ad_requests),
                    group(c.ads),
                    group(c.impressions),
                    group(c.clicks)
                ),
            );
        }
    }
}

fn statuses_text(statuses: &BTreeMap<u16, u64>) -> String {
    if statuses.is_empty() {
        return "no answers".into();
    }
    statuses
        .iter()
        .map(|(code, count)| format!("{code}: {}", group(*count)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Past this share of a core per thread (in %), the report calls the load generator saturated.
const SATURATED_PERCENT: f64 = 90.0;

/// One step of a sweep over offered rates.
#[derive(Debug, Clone, Serialize)]
pub struct SweepStep {
    pub offered_rate: f64,
    pub report: Report,
}

/// A compact table of a sweep, one line per offered rate.
pub fn sweep_table(steps: &[SweepStep]) -> String {
    let mut out = format!(
        "  {:>10} {:>10} {:>10} {:>9} {:>9} {:>8}\n",
        "offered/s", "answered/s", "2xx/s", "p50", "p99", "errors"
    );
    for step in steps {
        let r = &step.report;
        let _ = writeln!(
            out,
            "  {:>10} {:>10} {:>10} {:>9} {:>9} {:>8}",
            group(step.offered_rate.round() as u64),
            group(r.throughput.round() as u64),
            group(r.goodput.round() as u64),
            ms(r.latency.p50_ms),
            ms(r.latency.p99_ms),
            group(r.errors_total)
        );
    }
    out
}

/// How many recorded latencies (nanoseconds) exceed `deadline`. Values within the histogram's
/// resolution of it count as on time.
pub fn answers_over(histogram: &Histogram<u64>, deadline: std::time::Duration) -> u64 {
    let deadline_ns = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
    histogram.len() - histogram.count_between(0, deadline_ns)
}

/// Milliseconds with a precision that suits their size.
pub fn ms(value: f64) -> String {
    if value < 10.0 {
        format!("{value:.3} ms")
    } else if value < 1000.0 {
        format!("{value:.1} ms")
    } else {
        format!("{:.2} s", value / 1000.0)
    }
}

/// 1234567 → "1,234,567".
pub fn group(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(ms(0.4567), "0.457 ms");
        assert_eq!(ms(20.04), "20.0 ms");
        assert_eq!(ms(2500.0), "2.50 s");
    }

    #[test]
    fn answers_over_the_deadline_are_counted() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        let deadline = std::time::Duration::from_millis(120);
        assert_eq!(answers_over(&histogram, deadline), 0);
        for ms in [1, 50, 119, 120, 121, 300, 300, 5_000] {
            histogram.record(ms * 1_000_000).unwrap();
        }
        assert_eq!(answers_over(&histogram, deadline), 4);
        assert_eq!(answers_over(&histogram, std::time::Duration::ZERO), 8);
        assert_eq!(
            answers_over(&histogram, std::time::Duration::from_secs(1000)),
            0
        );
    }
}
