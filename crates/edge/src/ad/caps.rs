//! Capped decisions counted in Redis before they are served (`[redis]`): one that Redis finds
//! full (another edge filled the cap) is not served.

use super::{AdRequest, Decided};
use crate::{Loaded, shared};

/// The decisions of `decided` that Redis allowed (or could not answer for, within the
/// request's deadline).
pub(super) async fn count_shared<'s>(
    request: &AdRequest<'_>,
    loaded: &Loaded,
    mut decided: Decided<'s>,
) -> Decided<'s> {
    let Some(shared) = request.shared else {
        return decided;
    };
    let edge = request.edge;
    let data = &loaded.engine.snapshot().data;
    let mut kept = Vec::with_capacity(decided.served.len());
    for ad in decided.served.drain(..) {
        let (user, line_item) = (ad.claims.user, ad.claims.line_item);
        if !shared::needs_count(data, user, line_item)
            || shared::count_decision(shared, data, user, line_item, request.deadline).await
        {
            kept.push(ad);
        } else {
            edge.counters.shared_cap_refusals.inc();
            edge.counters.fallbacks.inc();
        }
    }
    decided.served = kept;
    decided
}
