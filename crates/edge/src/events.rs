//! Events as the edge logs them: built from a tracking token's claims or from a bid, and
//! appended to the log (billing events go through `track::commit_and_settle` instead), or, for
//! bids and no-bids, counted in it.

use jiff::Timestamp;
use marquee_eventlog::{AppendError, Event, EventKind};
use marquee_tracking::Claims;
use std::num::NonZeroU64;

use crate::Edge;
use crate::visitor::Visitor;

/// The event of the decision `claims` describe, seen from `visitor`.
pub(crate) fn tracked(
    kind: EventKind,
    claims: &Claims,
    now: Timestamp,
    visitor: &Visitor,
    amount_micros: i64,
) -> Event {
    Event {
        kind,
        time_micros: now.as_microsecond(),
        line_item: claims.line_item,
        creative: claims.creative,
        placement: claims.placement.map_or(0, NonZeroU64::get),
        user: claims.user,
        country: visitor.country_bytes(),
        region: visitor.region_bytes(),
        device: visitor.device_type().map_or(0, |d| d as u8 + 1),
        amount_micros,
        event_id: u128::from(claims.nonce),
    }
}

/// An event of the bidder (a bid, a no-bid, a notice): no placement, no location.
pub(crate) fn bidder(
    kind: EventKind,
    now: Timestamp,
    line_item: u64,
    creative: u64,
    user: u64,
) -> Event {
    Event {
        kind,
        time_micros: now.as_microsecond(),
        line_item,
        creative,
        placement: 0,
        user,
        country: [0, 0],
        region: [0; 3],
        device: 0,
        amount_micros: 0,
        event_id: 0,
    }
}

/// Appends a non-billing event; a failure is counted, never fails the answer. Whether the log
/// took it.
pub(crate) fn log(edge: &Edge, event: Event) -> bool {
    logged(edge, edge.log.append(&event).map(drop))
}

/// Counts a bid or a no-bid in the log (it becomes part of a counter record: see
/// `EventLog::count`); a failure is counted as [`log`]'s, never fails the answer.
pub(crate) fn count(edge: &Edge, event: Event) {
    logged(edge, edge.log.count(&event));
}

fn logged(edge: &Edge, result: Result<(), AppendError>) -> bool {
    match result {
        Ok(()) => true,
        Err(error) => {
            edge.counters.log_errors.inc();
            tracing::warn!(%error, "event not logged");
            false
        }
    }
}
