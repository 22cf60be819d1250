//! Every imp of a bid request decided in turn on the worker's thread, each seeing the caps of
//! the ones before, and made into a bid.

use std::time::Instant;

use marquee_engine::{Context, Decision, Request};
use marquee_model::{CampaignId, LineItemId};
use marquee_openrtb::{Bid, BidRequest};

use super::Auction;
use super::imp::ImpView;
use super::make_bid::make_bid;
use crate::shared::{self, EdgeCaps};
use crate::worker::WORKER;

/// The bids of the request, each with its decision; `None` once the deadline passed.
pub(super) fn decide<'r>(
    auction: &Auction<'r>,
    request: &'r BidRequest<'_>,
    template: &Request<'_>,
    deadline: Instant,
) -> Option<(Vec<Bid<'r>>, Vec<Decision>)> {
    let (edge, loaded) = (auction.edge, auction.loaded);
    // One pacing view for all imps of the request.
    let paced = edge.pacing.view(loaded, auction.now);
    WORKER.with(|worker| {
        let worker = &mut *worker.borrow_mut();
        let mut bids: Vec<Bid<'_>> = Vec::with_capacity(request.imp.len());
        let mut decisions: Vec<Decision> = Vec::with_capacity(request.imp.len());
        let mut capped: Vec<(LineItemId, CampaignId)> = Vec::new();
        for imp in &request.imp {
            if Instant::now() >= deadline {
                return None;
            }
            let view = ImpView::new(request, imp, &auction.exchange.seat);
            // Nothing we can fill (an empty slot would mean "banner" to the engine).
            if view.formats.is_empty() {
                continue;
            }
            let imp_request = Request {
                slot: view.slot(imp),
                ..*template
            };
            let caps = EdgeCaps {
                local: &edge.caps,
                shared: edge.shared.as_ref(),
                decided: &capped,
            };
            let mut context = Context {
                rng: &mut worker.rng,
                caps: &caps,
                pacing: &paced,
                rates: &edge.bidder.config.rates,
                scratch: &mut worker.scratch,
            };
            let Some(decision) = loaded.engine.decide(&imp_request, &mut context) else {
                continue;
            };
            if let Some(bid) = make_bid(auction, imp, &view, &decision, worker) {
                let data = &loaded.engine.snapshot().data;
                shared::note_decision(&mut capped, request.imp.len(), data, decision.line_item);
                bids.push(bid);
                decisions.push(decision);
            }
        }
        Some((bids, decisions))
    })
}
