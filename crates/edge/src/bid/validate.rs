//! The response checked before it leaves (`validate_response`): a bid that fails is dropped
//! and counted, never sent.

use std::borrow::Cow;

use marquee_engine::Decision;
use marquee_gateway::RateConverter;
use marquee_model::Currency;
use marquee_openrtb::{Bid, BidRequest, BidResponse, SeatBid, validate_response};

use super::Auction;

/// The response of the bids that passed the checks, each with its decision, and the imps
/// whose bid was dropped.
pub(super) struct Checked<'r> {
    pub(super) response: BidResponse<'r>,
    pub(super) decisions: Vec<Decision>,
    pub(super) dropped: Vec<String>,
}

/// The response of `bids` in `currency` for `request`, less the bids that fail the checks.
pub(super) fn checked<'r>(
    auction: &Auction<'r>,
    request: &'r BidRequest<'_>,
    currency: &'r Currency,
    bids: Vec<Bid<'r>>,
    mut decisions: Vec<Decision>,
) -> Checked<'r> {
    let exchange = auction.exchange;
    let mut response = BidResponse {
        id: Cow::Borrowed(&request.id),
        seatbid: vec![SeatBid {
            bid: bids,
            seat: Some(Cow::Borrowed(&exchange.seat)),
        }],
        bidid: None,
        cur: Some(Cow::Borrowed(currency.as_str())),
        nbr: None,
    };
    let converter = RateConverter(&auction.edge.bidder.config.rates);
    let Err(violations) = validate_response(request, &response, &converter) else {
        return Checked {
            response,
            decisions,
            dropped: Vec::new(),
        };
    };
    for violation in &violations {
        tracing::warn!(%violation, "bid dropped: it fails the response checks");
    }
    // A violation not tied to one bid (the response as a whole) leaves nothing to send.
    let whole = violations.iter().any(|v| v.bid_id.is_none());
    let bids = &mut response.seatbid[0].bid;
    let keep: Vec<bool> = bids
        .iter()
        .map(|bid| {
            !whole
                && !violations
                    .iter()
                    .any(|v| v.bid_id.as_deref() == Some(bid.id.as_ref()))
        })
        .collect();
    let dropped: Vec<String> = bids
        .iter()
        .zip(&keep)
        .filter(|(_, keep)| !**keep)
        .map(|(bid, _)| bid.impid.to_string())
        .collect();
    let mut kept = keep.iter();
    bids.retain(|_| kept.next().copied().unwrap_or(false));
    let mut kept = keep.iter();
    decisions.retain(|_| kept.next().copied().unwrap_or(false));
    auction
        .edge
        .bidder
        .counters
        .invalid_bids
        .inc_by(dropped.len() as u64);
    Checked {
        response,
        decisions,
        dropped,
    }
}
