//! After the auction: every bidder hears how its bids did, through its win or loss notice with
//! the auction macros filled. Where a notice may go is `notice.rs`'s concern.

use marquee_model::Currency;
use marquee_openrtb::{AuctionMacros, Bid, BidRequest, LossReason, format_micros};

use crate::auction::{self, Entry, Outcome};
use crate::macros::{billed_by_caller, macros};
use crate::{Gateway, Source};

impl Gateway {
    /// Forwards the win notice of every winner in the answer that sent markup (but those the
    /// caller sends, [`billed_by_caller`]) and the loss notice of every other bid (a dropped
    /// winner included), macros filled, each only where its bidder's notice policy allows
    /// (`BidderClient::notify`); the internal bidder's are returned for the edge.
    pub(crate) fn send_notices(
        &self,
        request: &BidRequest<'_>,
        entries: &[Entry<'_>],
        sources: &[Source],
        outcomes: &[Outcome],
        currency: Currency,
    ) -> Vec<String> {
        let mut internal = Vec::new();
        for outcome in outcomes {
            let entry = &entries[outcome.entry];
            let source = sources[outcome.entry];
            let Some((seat, bid)) = entry.response.bids().nth(outcome.bid) else {
                continue;
            };
            let by_caller = billed_by_caller(source, entry, currency);
            let Some(url) = notice_url(request, entry, seat, bid, &outcome.result, by_caller)
            else {
                continue;
            };
            match source {
                Source::External(i) => self.bidders[i].notify(&url, self.config.notice_timeout),
                Source::Internal => internal.push(url),
            }
        }
        internal
    }
}

/// The notice a bid's `result` calls for, its macros filled; `None` when there is none to send
/// (a winner without markup or billed by the caller, a bid without the URL).
fn notice_url(
    request: &BidRequest<'_>,
    entry: &Entry<'_>,
    seat: Option<&str>,
    bid: &Bid<'_>,
    result: &auction::Result,
    by_caller: bool,
) -> Option<String> {
    let (template, price, loss, min_to_win) = match result {
        auction::Result::Won {
            price_to_bidder, ..
        } => {
            if bid.adm.as_deref().unwrap_or("").is_empty() || by_caller {
                return None;
            }
            (&bid.nurl, Some(*price_to_bidder), None, None)
        }
        auction::Result::Lost {
            reason,
            price,
            min_to_win,
        } => (&bid.lurl, *price, Some(*reason), *min_to_win),
        auction::Result::Dropped { reason } => (&bid.lurl, None, Some(*reason), None),
    };
    let template = template.as_deref().filter(|t| !t.is_empty())?;
    let price = price.map(format_micros);
    let loss = loss.map(|r: LossReason| r.0.to_string());
    let min_to_win = min_to_win.map(format_micros);
    let values = AuctionMacros {
        loss: loss.as_deref(),
        // A loss without a winner has no prices to tell: the macros become empty.
        price: Some(price.as_deref().unwrap_or("")),
        min_to_win: Some(min_to_win.as_deref().unwrap_or("")),
        ..macros(request, entry, bid, seat, None)
    };
    let mut url = String::with_capacity(template.len() + 32);
    marquee_openrtb::expand_macros(template, &values, &mut url);
    Some(url)
}
