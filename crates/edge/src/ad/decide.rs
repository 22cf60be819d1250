//! Every placement of an ad request decided in turn on the worker's thread, each seeing the
//! caps of the ones before; then either the answer, or the decisions to count in Redis first.

use std::time::Instant;

use hyper::Response;
use jiff::Timestamp;
use marquee_engine::user_key;
use marquee_model::{CampaignId, LineItemId};
use marquee_sharedstate::Profile;
use rand::Rng;

use super::placement::{self, PageContext};
use super::programmatic::{self, Auction};
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
    /// Placements to auction among programmatic demand first.
    Auctioning(Auctioning<'s>),
}

/// An ad request with placements to auction: what is decided so far, and what the auctions
/// need of the page.
pub(super) struct Auctioning<'s> {
    decided: Decided<'s>,
    text: String,
    auctions: Vec<Auction<'s>>,
    now: Timestamp,
    request_id: u64,
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
    let page = page_context(
        request,
        visitor,
        user_id.as_deref(),
        profile,
        (edge.now(), 0),
    );
    let mut auctions = Vec::new();
    let served = serve_all(&page, loaded, request, worker, &mut auctions);
    if let Some(own) = seeded {
        worker.rng = own;
    }
    let Some(served) = served else {
        return Step::Answered(answer::late(request), None);
    };
    if !auctions.is_empty() {
        let now = page.now;
        return Step::Auctioning(Auctioning {
            decided: Decided {
                served,
                user_id,
                set_cookie,
            },
            text: worker.text.clone(),
            auctions,
            now,
            request_id: worker.rng.next_u64(),
        });
    }
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

/// What every placement of `request` shares; `(now, request id)`.
fn page_context<'a>(
    request: &'a AdRequest<'_>,
    visitor: &'a Visitor,
    user_id: Option<&'a str>,
    profile: Option<&'a Profile>,
    (now, request_id): (Timestamp, u64),
) -> PageContext<'a> {
    PageContext {
        edge: request.edge,
        query: request.query,
        visitor,
        user_id,
        user_key: user_id.map_or(0, user_key),
        profile,
        now,
        user_agent: std::str::from_utf8(request.client.user_agent()).ok(),
        ip: request.client.ip(),
        request_id,
    }
}

/// The auctions of an ad request's placements with programmatic demand, each placement's
/// winner added to what was decided.
pub(super) async fn auction<'s>(
    request: &AdRequest<'_>,
    loaded: &'s Loaded,
    visitor: &Visitor,
    auctioning: Auctioning<'s>,
) -> (Decided<'s>, String) {
    let Auctioning {
        mut decided,
        mut text,
        auctions,
        now,
        request_id,
    } = auctioning;
    let user_id = decided.user_id.clone();
    let page = page_context(
        request,
        visitor,
        user_id.as_deref(),
        None,
        (now, request_id),
    );
    programmatic::run(loaded, &page, &mut decided, &mut text, auctions).await;
    (decided, text)
}

/// The ads of every placement that serves one (those to auction go to `auctions`); `None`
/// once the deadline passed.
fn serve_all<'s>(
    page: &PageContext<'_>,
    loaded: &'s Loaded,
    request: &AdRequest<'_>,
    worker: &mut Worker,
    auctions: &mut Vec<Auction<'s>>,
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
        if let Some(ad) = placement::serve_one(page, loaded, placement, &caps, worker, auctions) {
            let data = &loaded.engine.snapshot().data;
            let line_item = LineItemId(ad.line_item);
            shared::note_decision(&mut decided, placements.len(), data, line_item);
            served.push(ad);
        }
    }
    Some(served)
}
