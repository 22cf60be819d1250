//! What a counted event does once the log has it: counted, recorded against the user's
//! frequency caps, charged to its line item's budget lease. Billing notices settle here too.

use std::sync::Arc;

use jiff::Timestamp;
use marquee_eventlog::{AppendError, Event};
use marquee_model::LineItemId;
use marquee_tracking::{Claims, TokenKind};

use super::count::{Source, TrackedEvent};
use crate::{Edge, Loaded, shared};

/// Appends a billing event ([`EventLog::commit`](marquee_eventlog::EventLog::commit)) and
/// runs `settle` with the outcome once the log gives it, whatever happens to the request
/// meanwhile.
///
/// Most commits are settled at once, here: in `group` durability and when the append is
/// refused, the log answers on the first poll (no task, no allocation). In `strict`
/// durability the answer waits for the fsync, and a client that disconnects meanwhile makes
/// hyper drop the handler's future: the event, already appended, would then be counted by the
/// manager but never charged to the budget lease or recorded against caps (and, if the fsync
/// failed, its nonce never forgotten). So the wait and `settle` run in a task of their own,
/// which the answer waits for but a dropped request cannot cancel. Charging before the wait
/// would have been simpler but not correct: an fsync that fails loses the event, which must
/// then be neither charged nor capped, and only the outcome of the wait tells.
pub(crate) async fn commit_and_settle<S>(edge: &Arc<Edge>, event: &Event, settle: S)
where
    S: FnOnce(&Edge, Result<(), AppendError>) + Send + 'static,
{
    use std::task::{Context, Poll, Waker};
    let mut durable = edge.log.commit(event);
    // A no-op waker is enough to ask: if the answer is not there yet, the task below polls
    // again with its own (the log replaces the registered waker), so no wake-up is lost.
    let first = std::pin::Pin::new(&mut durable).poll(&mut Context::from_waker(Waker::noop()));
    let durable = match first {
        Poll::Ready(logged) => return settle(edge, logged),
        Poll::Pending => durable,
    };
    let waiting = {
        let edge = Arc::clone(edge);
        async move { settle(&edge, durable.await) }
    };
    match tokio::runtime::Handle::try_current() {
        // A task that panicked has nothing left to do: the answer is the same either way.
        Ok(runtime) => {
            let _ = runtime.spawn(waiting).await;
        }
        Err(_) => waiting.await,
    }
}

/// What [`count_once`](super::count_once) does once the log has answered for its event.
pub(super) fn settle(
    edge: &Edge,
    loaded: Option<&Loaded>,
    event: &TrackedEvent,
    logged: Result<(), AppendError>,
) {
    let TrackedEvent {
        kind, ref claims, ..
    } = *event;
    if let Err(error) = logged {
        edge.replay_guard(kind)
            .forget(claims.nonce, event.expires_at, event.now.as_second());
        edge.counters.log_errors.inc();
        tracing::error!(%error, ?kind, "billing event not logged");
        return;
    }
    match kind {
        TokenKind::Impression => &edge.counters.impressions,
        TokenKind::Click => &edge.counters.clicks,
        TokenKind::Conversion => &edge.counters.conversions,
    }
    .inc();
    let Some(loaded) = loaded else {
        return;
    };
    // An exchange bid's impression (no placement) counts towards caps on billing.
    if kind == TokenKind::Impression && claims.placement.is_some() && event.source == Source::Token
    {
        record_delivery(edge, loaded, claims.user, claims.line_item, event.now);
    }
    bill(edge, loaded, claims, kind, event.source);
}

/// Counts a delivery (an impression, or an exchange's billing notice) against the user's
/// frequency caps.
pub(crate) fn record_delivery(
    edge: &Edge,
    loaded: &Loaded,
    user: u64,
    line_item: u64,
    now: Timestamp,
) {
    if user == 0 {
        return;
    }
    let data = &loaded.engine.snapshot().data;
    let Some(li) = data.line_item(LineItemId(line_item)) else {
        return;
    };
    let campaign_caps = data
        .campaign(li.campaign_id)
        .map_or(&[][..], |c| &c.frequency_caps[..]);
    edge.caps.record(
        user,
        (li.id, &li.frequency_caps),
        (li.campaign_id, campaign_caps),
        now,
    );
}

/// Charges a counted impression or click to the line item's budget lease: an impression
/// settles the reservation its decision made (an image tag's is its own decision: reserved and
/// settled at once), a click is charged as it comes. An exchange bid's impression (no
/// placement) is charged by its billing notice instead, and so is its click under a spend goal
/// (the exchange is paid its clearing price, not our price per click).
fn bill(edge: &Edge, loaded: &Loaded, claims: &Claims, kind: TokenKind, source: Source) {
    use marquee_pacing::Billable;
    let exchange = claims.placement.is_none();
    let spend_goal = || {
        crate::pacing::has_spend_goal(&loaded.engine.snapshot().data, LineItemId(claims.line_item))
    };
    // A click its token says is worth nothing (an image tag's click its line item does not
    // charge) spends nothing, so it takes nothing from a spend goal's lease.
    if kind == TokenKind::Click && claims.amount_micros == Some(0) && !exchange && spend_goal() {
        return;
    }
    let pacing = &edge.pacing;
    let charged = match kind {
        TokenKind::Impression if !exchange => {
            if source == Source::ImageTag {
                pacing.reserve(loaded, claims.line_item, claim_time(claims));
            }
            pacing.settle(loaded, claims.line_item, claims.issued_at)
        }
        TokenKind::Click if !exchange || !spend_goal() => {
            pacing.bill(loaded, claims.line_item, Billable::Click, None)
        }
        _ => return,
    };
    shared::charge(edge, claims.line_item, charged);
}

/// The instant a token's claims were issued at.
fn claim_time(claims: &Claims) -> Timestamp {
    Timestamp::from_second(claims.issued_at).unwrap_or(Timestamp::UNIX_EPOCH)
}
