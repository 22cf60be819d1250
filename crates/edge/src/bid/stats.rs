//! The bidder's counters, and their lines of `/metrics`.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Edge;
use crate::metrics::counter;

/// The bidder's counters; exported as metrics.
#[derive(Debug, Default)]
pub struct BidStats {
    pub requests: AtomicU64,
    pub bids: AtomicU64,
    /// Requests answered without a bid.
    pub no_bids: AtomicU64,
    /// Bids dropped because they failed the response validation.
    pub invalid_bids: AtomicU64,
    /// Requests answered 204 at once because `max_in_flight` were in progress.
    pub shed: AtomicU64,
    /// Requests answered 204 because their deadline (`tmax` less the margin) passed.
    pub late: AtomicU64,
    pub test_requests: AtomicU64,
    pub wins: AtomicU64,
    pub billings: AtomicU64,
    pub losses: AtomicU64,
    /// Notices whose token was malformed, forged, expired or for another auction, or whose
    /// price could not be read.
    pub invalid_notices: AtomicU64,
    /// Notices already counted (exchanges retry billing).
    pub repeated_notices: AtomicU64,
    /// Notices of test requests: answered, not counted.
    pub test_notices: AtomicU64,
    pub syncs: AtomicU64,
    /// Malformed bid requests by reason label (rare: a lock is fine here).
    bad_requests: Mutex<Vec<(&'static str, u64)>>,
}

impl BidStats {
    pub(crate) fn bad_request(&self, label: &'static str) {
        let mut counts = self
            .bad_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }

    /// Malformed bid requests counted so far, by reason label.
    pub fn bad_requests(&self) -> Vec<(&'static str, u64)> {
        self.bad_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The bidder's lines of `/metrics`.
pub(crate) fn render_metrics(edge: &Edge, out: &mut String) {
    let stats = &edge.bidder.stats;
    for (name, help, value) in [
        (
            "marquee_bidder_requests_total",
            "Bid requests received.",
            &stats.requests,
        ),
        ("marquee_bidder_bids_total", "Bids sent.", &stats.bids),
        (
            "marquee_bidder_no_bids_total",
            "Bid requests answered without a bid (204, or nbr).",
            &stats.no_bids,
        ),
        (
            "marquee_bidder_invalid_bids_total",
            "Bids dropped because they failed the response checks.",
            &stats.invalid_bids,
        ),
        (
            "marquee_bidder_shed_total",
            "Bid requests answered 204 at once because max_in_flight were in progress.",
            &stats.shed,
        ),
        (
            "marquee_bidder_late_total",
            "Bid requests answered 204 because tmax less the margin passed.",
            &stats.late,
        ),
        (
            "marquee_bidder_test_requests_total",
            "Bid requests with test set (bid normally, nothing logged or counted).",
            &stats.test_requests,
        ),
        (
            "marquee_bidder_wins_total",
            "Win notices counted.",
            &stats.wins,
        ),
        (
            "marquee_bidder_billings_total",
            "Billing notices counted (each spends).",
            &stats.billings,
        ),
        (
            "marquee_bidder_losses_total",
            "Loss notices counted.",
            &stats.losses,
        ),
        (
            "marquee_bidder_invalid_notices_total",
            "Notices refused: malformed, forged or expired token, another auction, unreadable price.",
            &stats.invalid_notices,
        ),
        (
            "marquee_bidder_repeated_notices_total",
            "Notices for a bid already counted (retries).",
            &stats.repeated_notices,
        ),
        (
            "marquee_bidder_test_notices_total",
            "Notices of test requests (answered, not counted).",
            &stats.test_notices,
        ),
        (
            "marquee_bidder_syncs_total",
            "User matches recorded.",
            &stats.syncs,
        ),
    ] {
        counter(out, name, help, value.load(Ordering::Relaxed));
    }
    out.push_str("# HELP marquee_bidder_bad_requests_total Malformed bid requests (400, 413), by reason.\n# TYPE marquee_bidder_bad_requests_total counter\n");
    for (label, count) in stats.bad_requests() {
        let _ = writeln!(
            out,
            "marquee_bidder_bad_requests_total{{reason=\"{label}\"}} {count}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP marquee_bidder_user_matches User sync matches held in memory.\n# TYPE marquee_bidder_user_matches gauge\nmarquee_bidder_user_matches {}",
        edge.bidder.syncs.len()
    );
}
