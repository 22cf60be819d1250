//! Events the traffic-quality screen judged invalid: logged with their reason, counted nowhere.

use jiff::Timestamp;
use marquee_eventlog::{Event, EventKind, InvalidReason};
use marquee_tracking::{Claims, TokenKind};

use crate::visitor::Visitor;
use crate::{Edge, events, worker};

/// Logs an event the traffic-quality screen judged invalid, with its reason (in the amount
/// field) and an id of its own: each invalid request is a record of its own. It is counted,
/// capped, charged and paced nowhere.
pub(crate) fn log_invalid(
    edge: &Edge,
    kind: TokenKind,
    claims: &Claims,
    reason: InvalidReason,
    visitor: &Visitor,
    now: Timestamp,
) {
    edge.quality.count(kind, reason);
    let event_kind = match kind {
        TokenKind::Impression => EventKind::InvalidImpression,
        TokenKind::Click => EventKind::InvalidClick,
        TokenKind::Conversion => EventKind::InvalidConversion,
    };
    let id = worker::random_u64();
    events::log(
        edge,
        Event {
            event_id: u128::from(id),
            ..events::tracked(event_kind, claims, now, visitor, i64::from(reason.code()))
        },
    );
}
