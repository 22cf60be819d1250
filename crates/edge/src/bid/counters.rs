//! The bidder's counters, and their families on `/metrics`.

use std::sync::Arc;

use marquee_metrics::{Counter, Def, Labelled, Observed, Registry};

use super::bidder::Bidder;

/// The reasons a bid request is malformed, as its error types label them (`marquee-openrtb`'s
/// `ParseError` and `BodyError`, and the body read's own).
const BAD_REQUEST_REASONS: [&str; 13] = [
    "malformed_json",
    "openrtb3",
    "missing_id",
    "no_imps",
    "imp_id",
    "size",
    "duration",
    "currency",
    "deal_id",
    "too_large",
    "encoding",
    "gzip",
    "body_read",
];

/// The bidder's counters; exported as metrics.
#[derive(Debug)]
pub struct BidCounters {
    pub requests: Counter,
    pub bids: Counter,
    /// Requests answered without a bid.
    pub no_bids: Counter,
    /// Bids dropped because they failed the response validation.
    pub invalid_bids: Counter,
    /// Requests answered 204 at once because `max_in_flight` were in progress.
    pub shed: Counter,
    /// Requests answered 204 because their deadline (`tmax` less the margin) passed.
    pub late: Counter,
    pub test_requests: Counter,
    pub wins: Counter,
    pub billings: Counter,
    pub losses: Counter,
    /// Notices whose token was malformed, forged, expired or for another auction, or whose
    /// price could not be read.
    pub invalid_notices: Counter,
    /// Notices already counted (exchanges retry billing).
    pub repeated_notices: Counter,
    /// Notices of test requests: answered, not counted.
    pub test_notices: Counter,
    pub syncs: Counter,
    /// Malformed bid requests by reason, as [`BAD_REQUEST_REASONS`], then a reason not listed
    /// there (`other`).
    bad_requests: [Counter; BAD_REQUEST_REASONS.len() + 1],
}

impl Default for BidCounters {
    fn default() -> Self {
        BidCounters {
            requests: Counter::default(),
            bids: Counter::default(),
            no_bids: Counter::default(),
            invalid_bids: Counter::default(),
            shed: Counter::default(),
            late: Counter::default(),
            test_requests: Counter::default(),
            wins: Counter::default(),
            billings: Counter::default(),
            losses: Counter::default(),
            invalid_notices: Counter::default(),
            repeated_notices: Counter::default(),
            test_notices: Counter::default(),
            syncs: Counter::default(),
            bad_requests: std::array::from_fn(|_| Counter::default()),
        }
    }
}

impl BidCounters {
    pub(crate) fn bad_request(&self, label: &'static str) {
        let index = BAD_REQUEST_REASONS
            .iter()
            .position(|reason| *reason == label)
            .unwrap_or(BAD_REQUEST_REASONS.len());
        if let Some(counter) = self.bad_requests.get(index) {
            counter.inc();
        }
    }

    /// Malformed bid requests counted so far, by reason label.
    pub fn bad_requests(&self) -> Vec<(&'static str, u64)> {
        self.reasons()
            .map(|(reason, counter)| (reason, counter.get()))
            .collect()
    }

    fn reasons(&self) -> impl Iterator<Item = (&'static str, &Counter)> {
        BAD_REQUEST_REASONS
            .iter()
            .copied()
            .chain(["other"])
            .zip(&self.bad_requests)
    }
}

const BAD_REQUESTS: Def = Def::new(
    "marquee_bidder_bad_requests",
    "Malformed bid requests (400, 413), by reason.",
);
const USER_MATCHES: Def = Def::new(
    "marquee_bidder_user_matches",
    "User sync matches held in memory.",
);

/// The bidder's families.
pub(crate) fn register_metrics(registry: &mut Registry, bidder: &Bidder) {
    let counters = &bidder.counters;
    for (name, help, counter) in [
        (
            "marquee_bidder_requests",
            "Bid requests received.",
            &counters.requests,
        ),
        ("marquee_bidder_bids", "Bids sent.", &counters.bids),
        (
            "marquee_bidder_no_bids",
            "Bid requests answered without a bid (204, or nbr).",
            &counters.no_bids,
        ),
        (
            "marquee_bidder_invalid_bids",
            "Bids dropped because they failed the response checks.",
            &counters.invalid_bids,
        ),
        (
            "marquee_bidder_shed",
            "Bid requests answered 204 at once because max_in_flight were in progress.",
            &counters.shed,
        ),
        (
            "marquee_bidder_late",
            "Bid requests answered 204 because tmax less the margin passed.",
            &counters.late,
        ),
        (
            "marquee_bidder_test_requests",
            "Bid requests with test set (bid normally, nothing logged or counted).",
            &counters.test_requests,
        ),
        (
            "marquee_bidder_wins",
            "Win notices counted.",
            &counters.wins,
        ),
        (
            "marquee_bidder_billings",
            "Billing notices counted (each spends).",
            &counters.billings,
        ),
        (
            "marquee_bidder_losses",
            "Loss notices counted.",
            &counters.losses,
        ),
        (
            "marquee_bidder_invalid_notices",
            "Notices refused: malformed, forged or expired token, another auction, unreadable price.",
            &counters.invalid_notices,
        ),
        (
            "marquee_bidder_repeated_notices",
            "Notices for a bid already counted (retries).",
            &counters.repeated_notices,
        ),
        (
            "marquee_bidder_test_notices",
            "Notices of test requests (answered, not counted).",
            &counters.test_notices,
        ),
        (
            "marquee_bidder_syncs",
            "User matches recorded.",
            &counters.syncs,
        ),
    ] {
        Def::new(name, help).register(registry, counter.clone());
    }
    let reasons = counters
        .reasons()
        .map(|(reason, counter)| ([("reason", reason)], counter.clone()));
    BAD_REQUESTS.register(registry, Labelled::new(reasons));
    let syncs = Arc::clone(&bidder.syncs);
    USER_MATCHES.register(registry, Observed::new(move || syncs.len()));
}
