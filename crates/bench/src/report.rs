//! Results of a run: the final table, the JSON for scripts, and the numbers the SVG charts draw.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

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
        out
    }
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
