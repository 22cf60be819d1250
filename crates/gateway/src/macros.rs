//! The auction macros of a winning or losing bid, and who fills those of a winner's billing
//! and win notice URLs: the gateway, or the caller.

use marquee_model::Currency;
use marquee_openrtb::{AuctionMacros, Bid, BidRequest};

use crate::Source;
use crate::auction::Entry;

/// Whether a winner's billing and win notice URLs go to the caller with their auction macros
/// as the bidder wrote them, for the caller to fill and send as it does any bidder's (the
/// gateway then sends no win notice): only our own line items', when they bid in the answer's
/// currency.
///
/// An external bidder is billed at the gateway's price in its own terms (its currency, before
/// its adjustment), which only the gateway knows, so the gateway fills its `burl`. Our own line
/// items are billed by the caller directly: the operator pays the caller's clearing price, and
/// the edge's notice handler reads it as on `/openrtb2/bid` — for an exchange with price keys
/// only encrypted with them, so that nobody holding the URL can bill it. A price filled here
/// would be plain (refused there), and handing out a billable encrypted price to whoever asks
/// for an auction would undo that rule. The win notice follows the same rule: filled here, its
/// plain price was refused on such an exchange and our win never logged. The caller's price is
/// in the answer's currency, so a bid in another currency (the exchange's currency differs
/// from `gateway.currency`) keeps the gateway's filling: read in the bid's currency, the
/// caller's would be wrong.
pub(crate) fn billed_by_caller(source: Source, entry: &Entry<'_>, currency: Currency) -> bool {
    matches!(source, Source::Internal) && entry.response.currency() == currency.as_str()
}

/// The macro values every notice and markup of a bid shares.
pub(crate) fn macros<'v>(
    request: &'v BidRequest<'_>,
    entry: &'v Entry<'_>,
    bid: &'v Bid<'_>,
    seat: Option<&'v str>,
    price: Option<&'v str>,
) -> AuctionMacros<'v> {
    AuctionMacros {
        auction_id: Some(&request.id),
        bid_id: entry.response.bidid.as_deref(),
        imp_id: Some(&bid.impid),
        seat_id: Some(seat.unwrap_or(entry.name)),
        ad_id: bid.adid.as_deref(),
        price,
        currency: Some(entry.response.currency()),
        mbr: None,
        loss: None,
        min_to_win: None,
    }
}
