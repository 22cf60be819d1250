//! Counting an impression, click or conversion once: its nonce is claimed in the kind's replay
//! guard, the event logged with what it is worth, and what counting it has left to do settled
//! once the log has it (`settle.rs`).

use std::sync::Arc;

use jiff::Timestamp;
use marquee_eventlog::EventKind;
use marquee_tracking::{Claims, TokenKind};

use super::settle::{commit_and_settle, settle};
use super::worth::amount;
use crate::visitor::Visitor;
use crate::{Edge, Loaded, events};

/// One event to count once.
#[derive(Clone, Copy)]
pub(crate) struct TrackedEvent {
    pub(crate) kind: TokenKind,
    pub(crate) claims: Claims,
    /// Until when its nonce is remembered.
    pub(crate) expires_at: i64,
    pub(crate) now: Timestamp,
    pub(crate) source: Source,
}

/// Whether [`count_once`] counted its event or found it counted before.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    First,
    Repeat,
}

/// Where a counted event's decision was made, which says what counting it has left to do.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A signed token of a decision an edge of this installation made: its impression was
    /// reserved on that edge's budget lease and is settled here, and it is recorded against
    /// the user's frequency caps.
    Token,
    /// An image tag's request, which is its own decision: its impression is reserved and
    /// settled at once, and not recorded against caps (a cap the image filled must not change
    /// which ad another image of the same cache buster shows: the draw is seeded by it).
    ImageTag,
}

/// Counts an impression, click or conversion once: its nonce is claimed in the kind's replay
/// guard (remembered until `expires_at`), the event logged with what it is worth — in strict
/// mode durable once the fsync that covers it is done — and only once the log has it, counted,
/// charged to the line item's budget lease and recorded against caps. An event the log refused
/// or lost is none of these, and its nonce is forgotten so that a retry counts.
pub(crate) async fn count_once(
    edge: &Arc<Edge>,
    loaded: Option<Arc<Loaded>>,
    event: TrackedEvent,
    visitor: &Visitor,
) -> Counted {
    let TrackedEvent {
        kind, claims, now, ..
    } = event;
    if !edge
        .replay_guard(kind)
        .first_time(claims.nonce, event.expires_at, now.as_second())
    {
        edge.counters.repeats.inc();
        return Counted::Repeat;
    }
    let amount = loaded
        .as_deref()
        .map_or(0, |l| amount(&l.engine.snapshot().data, &claims, kind));
    let logged = events::tracked(event_kind(kind, &claims), &claims, now, visitor, amount);
    commit_and_settle(edge, &logged, move |edge, result| {
        settle(edge, loaded.as_deref(), &event, result);
    })
    .await;
    Counted::First
}

/// Until when the replay guard remembers an image tag's event, which has no token to expire:
/// the end of the current window of a grid of token lifetimes offset by the nonce. Every
/// fetch of the same image or click within one window files it under the same expiry, so
/// repeats are found wherever in the window they come (an expiry of fetch time + lifetime
/// would file each fetch in the bucket of its own minute, where the first is not). A re-fetch
/// after the window's end counts again on this edge (with a gap `g`, probability `g` /
/// lifetime); the manager dedupes it by event id.
pub(crate) fn untokened_expiry(claims: &Claims, now: i64) -> i64 {
    let lifetime = i64::from(claims.lifetime.max(1));
    // Below `lifetime`, itself below 2^32: fits.
    let phase = i64::try_from(claims.nonce % lifetime.unsigned_abs()).unwrap_or(0);
    now - (now - phase).rem_euclid(lifetime) + lifetime
}

fn event_kind(kind: TokenKind, claims: &Claims) -> EventKind {
    match kind {
        TokenKind::Impression if crate::ad::is_programmatic(claims) => {
            EventKind::ProgrammaticImpression
        }
        TokenKind::Impression => EventKind::Impression,
        TokenKind::Click => EventKind::Click,
        TokenKind::Conversion => EventKind::Conversion,
    }
}
