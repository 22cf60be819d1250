//! A bid request's events: each bid, and each imp without a bid as a no-bid with its reason,
//! counted in the event log; test requests log nothing.

use marquee_engine::Decision;
use marquee_eventlog::{Event, EventKind};
use marquee_openrtb::{Bid, BidRequest};

use super::Auction;
use super::no_bid::no_bid_code;
use super::validate::Checked;
use crate::events;
use crate::worker;

/// Every imp of `request` without a bid in `checked`, logged as a no-bid with its reason.
pub(super) fn log_no_bids(auction: &Auction<'_>, request: &BidRequest<'_>, checked: &Checked<'_>) {
    let bids = &checked.response.seatbid[0].bid;
    for imp in &request.imp {
        if bids.iter().any(|b| b.impid == imp.id) {
            continue;
        }
        let reason = if checked.dropped.iter().any(|d| *d == imp.id) {
            no_bid_code::INVALID_BID
        } else {
            no_bid_code::NO_MATCH
        };
        log_no_bid(auction, reason);
    }
}

/// Every bid of `checked` counted, in the metrics and the log.
pub(super) fn log_bids(auction: &Auction<'_>, checked: &Checked<'_>) {
    let bids = &checked.response.seatbid[0].bid;
    for (bid, decision) in bids.iter().zip(&checked.decisions) {
        auction.edge.bidder.counters.bids.inc();
        log_bid(auction, bid, decision);
    }
}

/// A bid counted in the log (test requests log nothing).
fn log_bid(auction: &Auction<'_>, bid: &Bid<'_>, decision: &Decision) {
    if auction.test {
        return;
    }
    let nonce = u64::from_str_radix(&bid.id, 16).unwrap_or(0);
    events::count(
        auction.edge,
        Event {
            device: auction.device,
            amount_micros: bid.price_micros,
            event_id: u128::from(nonce),
            ..events::bidder(
                EventKind::Bid,
                auction.now,
                decision.line_item.0,
                decision.creative.0,
                auction.user,
            )
        },
    );
}

/// A no-bid for one imp counted in the log, its reason in `creative` (test requests log
/// nothing).
fn log_no_bid(auction: &Auction<'_>, reason: u64) {
    if auction.test {
        return;
    }
    let id = worker::random_u64();
    events::count(
        auction.edge,
        Event {
            device: auction.device,
            event_id: u128::from(id),
            ..events::bidder(EventKind::NoBid, auction.now, 0, reason, auction.user)
        },
    );
}
