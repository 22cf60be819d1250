//! Every placement of an ad request decided in turn on the worker's thread, each seeing the
//! caps of the ones before; then either the answer, or the decisions to count in Redis first.

use std::time::Instant;

use hyper::Response;
use jiff::Timestamp;
use marquee_model::{CampaignId, LineItemId};
use marquee_sharedstate::Profile;

use super::placement::{self, PageContext};
use super::{AdRequest, Decided, Served, answer, untokened, user};
use crate::http::Body;
use crate::metrics::Outcome;
use crate::shared::{self, EdgeCaps};
use crate::visitor::Visitor;
use crate::worker::Worker;
use crate::{Loaded, image_tag};

/// Where an ad request stands once the engine has decided.
pub(super) enum Step<'s> {
    /// The answer, and what its image tag request counts.
    Answered((Response<Body>, Outcome), Option<untokened::UntokenedEvent>),
    /// Decisions to count in Redis before answering, and the text their HTML ranges point in.
    Counting(Decided<'s>, String),
}

/// Decides every placement of `request` for `visitor`, with the worker's memory.
pub(super) fn decide<'s>(
    request: &AdRequest<'_>,
    loaded: &'s Loaded,
    visitor: &Visitor,
    profile: Option<&Profile>,
    worker: &mut Worker,
) -> Step<'s> {
    let edge = request.edge;
    let (user_id, set_cookie) =
        user::identify(edge, request.query, request.headers, &mut worker.rng);
    worker.text.clear();
    // The image tag's two requests (image, click) must reach the same decision: both draw
    // from a generator seeded by the placement and cache buster they share.
    let seeded = request
        .image_key
        .map(|key| std::mem::replace(&mut worker.rng, image_tag::rng(key)));
    let page = PageContext {
        edge,
        query: request.query,
        visitor,
        user_id: user_id.as_deref(),
        profile,
        now: Timestamp::now(),
    };
    let served = serve_all(&page, loaded, request, worker);
    if let Some(own) = seeded {
        worker.rng = own;
    }
    let Some(served) = served else {
        return Step::Answered(answer::late(request), None);
    };
    let data = &loaded.engine.snapshot().data;
    let counts_pending = request.shared.is_some()
        && served
            .iter()
            .any(|ad| shared::needs_count(data, ad.claims.user, ad.claims.line_item));
    let decided = Decided {
        served,
        user_id,
        set_cookie,
    };
    if counts_pending {
        // The answer waits for Redis: the text leaves the worker's buffer.
        return Step::Counting(decided, worker.text.clone());
    }
    Step::Answered(
        answer::finish(request, &decided, &worker.text),
        untokened::event_of(request, &decided),
    )
}

/// The ads of every placement that serves one; `None` once the deadline passed.
fn serve_all<'s>(
    page: &PageContext<'_>,
    loaded: &'s Loaded,
    request: &AdRequest<'_>,
    worker: &mut Worker,
) -> Option<Vec<Served<'s>>> {
    let placements = &request.query.placements;
    let mut served = Vec::with_capacity(placements.len());
    let mut decided: Vec<(LineItemId, CampaignId)> = Vec::new();
    for &placement in placements {
        let caps = EdgeCaps {
            local: &page.edge.caps,
            shared: request.shared,
            decided: &decided,
        };
        if Instant::now() >= request.deadline {
            return None;
        }
        if let Some(ad) = placement::serve_one(page, loaded, placement, &caps, worker) {
            let data = &loaded.engine.snapshot().data;
            shared::note_decision(&mut decided, placements.len(), data, ad.decision.line_item);
            served.push(ad);
        }
    }
    Some(served)
}
