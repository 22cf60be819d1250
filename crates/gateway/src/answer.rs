//! The answer to the caller: each winning bid at its clearing price, grouped by seat, and the
//! final check of the whole, which drops what fails it.

use std::borrow::Cow;

use marquee_model::Currency;
use marquee_openrtb::{
    Bid, BidRequest, BidResponse, LossReason, Rule, SeatBid, Violation, format_micros,
    validate_response,
};

use crate::auction::{self, Entry, Outcome, RateConverter};
use crate::macros::{billed_by_caller, macros};
use crate::{Gateway, Source};

/// A bid placed in the answer: its id there, its seat, the index of its outcome.
type Placed<'e> = (String, &'e str, usize);

impl Gateway {
    /// The answer: each winning bid at its clearing price in `currency`, its markup and
    /// billing URL with the macros filled (but the internal bidder's billing and win notice
    /// URLs, see [`billed_by_caller`]), its other members as the bidder wrote them (`ext`
    /// included), grouped by seat; checked once more as a whole. The winners that
    /// check drops (all of them when the answer fails as a whole) become `Dropped` in
    /// `outcomes`: they are not offered, so they must not hear they won. Each bid offered is
    /// added to `bidders` with its bidder's name.
    pub(crate) fn answer(
        &self,
        request: &BidRequest<'_>,
        entries: &[Entry<'_>],
        sources: &[Source],
        outcomes: &mut [Outcome],
        currency: Currency,
        bidders: &mut Vec<(String, String)>,
    ) -> Option<String> {
        let mut seatbid: Vec<SeatBid<'_>> = Vec::new();
        let mut placed: Vec<Placed<'_>> = Vec::new();
        for (o, outcome) in outcomes.iter().enumerate() {
            let auction::Result::Won {
                clearing,
                price_to_bidder,
            } = outcome.result
            else {
                continue;
            };
            let entry = &entries[outcome.entry];
            let Some((seat, bid)) = entry.response.bids().nth(outcome.bid) else {
                continue;
            };
            let by_caller = billed_by_caller(sources[outcome.entry], entry, currency);
            let mut out = offered(request, entry, seat, bid, price_to_bidder, by_caller);
            out.price_micros = clearing;
            let mut id = bid.id.to_string();
            if placed.iter().any(|(placed_id, ..)| *placed_id == id) {
                id = format!("{}:{id}", entry.name);
            }
            out.id = Cow::Owned(id.clone());
            let seat_name = seat.unwrap_or(entry.name);
            placed.push((id, seat_name, o));
            add_to_seat(&mut seatbid, seat_name, out);
        }
        if seatbid.is_empty() {
            return None;
        }
        let response = BidResponse {
            id: Cow::Borrowed(request.id.as_ref()),
            seatbid,
            bidid: None,
            cur: Some(Cow::Borrowed(currency.as_str())),
            nbr: None,
        };
        let answer = self.final_check(request, response, &placed, outcomes);
        for (id, _, o) in placed {
            if !matches!(outcomes[o].result, auction::Result::Dropped { .. }) {
                let source = sources[outcomes[o].entry];
                bidders.push((id, self.name_of(source).to_owned()));
            }
        }
        answer
    }

    /// The answer as JSON once it passes `validate_response`: the bids that fail it are taken
    /// out and their outcomes become `Dropped`; nothing is left when it fails as a whole.
    fn final_check(
        &self,
        request: &BidRequest<'_>,
        mut response: BidResponse<'_>,
        placed: &[Placed<'_>],
        outcomes: &mut [Outcome],
    ) -> Option<String> {
        let converter = RateConverter(&self.config.rates);
        let Err(violations) = validate_response(request, &response, &converter) else {
            return Some(response.to_json());
        };
        let mut dropped: Vec<&str> = Vec::new();
        for (id, seat, o) in placed {
            if let Some(reason) = dropped_for(&violations, id, seat) {
                outcomes[*o].result = auction::Result::Dropped { reason };
                dropped.push(id);
            }
        }
        self.stats.dropped_winners.inc_by(dropped.len() as u64);
        if violations.iter().any(|v| v.bid_id.is_none()) {
            return None;
        }
        for seat in &mut response.seatbid {
            seat.bid.retain(|bid| !dropped.contains(&bid.id.as_ref()));
        }
        response.seatbid.retain(|s| !s.bid.is_empty());
        (!response.seatbid.is_empty()).then(|| response.to_json())
    }
}

/// A winning bid as offered (its id and price still the bidder's): markup and URLs filled
/// with the auction macros at `price_to_bidder`, but those the caller fills (`by_caller`).
fn offered<'b>(
    request: &BidRequest<'_>,
    entry: &Entry<'_>,
    seat: Option<&str>,
    bid: &Bid<'b>,
    price_to_bidder: i64,
    by_caller: bool,
) -> Bid<'b> {
    let price = format_micros(price_to_bidder);
    let macros = macros(request, entry, bid, seat, Some(&price));
    let fill = |template: &Option<Cow<'_, str>>| -> Option<Cow<'static, str>> {
        let template = template.as_deref().filter(|t| !t.is_empty())?;
        let mut out = String::with_capacity(template.len() + 16);
        marquee_openrtb::expand_macros(template, &macros, &mut out);
        Some(Cow::Owned(out))
    };
    let adm = fill(&bid.adm);
    // Our own win notice is the caller's to send, as our billing notice is; an external
    // bidder's goes to the caller only without markup (the caller fetches it from there), the
    // gateway sending it otherwise.
    let nurl = if by_caller {
        bid.nurl.clone().filter(|n| !n.is_empty())
    } else if adm.is_none() {
        fill(&bid.nurl)
    } else {
        None
    };
    let burl = if by_caller {
        bid.burl.clone().filter(|b| !b.is_empty())
    } else {
        fill(&bid.burl)
    };
    Bid {
        adm,
        nurl,
        burl,
        lurl: None,
        ..bid.clone()
    }
}

/// Adds `bid` to the seat named `seat`, opening it when it is the first.
fn add_to_seat<'s>(seatbid: &mut Vec<SeatBid<'s>>, seat: &'s str, bid: Bid<'s>) {
    match seatbid.iter_mut().find(|s| s.seat.as_deref() == Some(seat)) {
        Some(open) => open.bid.push(bid),
        None => seatbid.push(SeatBid {
            bid: vec![bid],
            seat: Some(Cow::Borrowed(seat)),
        }),
    }
}

/// Why the final check drops a bid of the answer, if it does: its own failed rule, or one on
/// its seat (`bseat` naming the bidder, whose name is the seat of a bid without one); when the
/// answer fails as a whole for another reason, 1 (internal error): the bid did nothing wrong.
fn dropped_for(violations: &[Violation], id: &str, seat: &str) -> Option<LossReason> {
    let own = violations.iter().find(|v| {
        v.bid_id.as_deref() == Some(id)
            || matches!(&v.rule, Rule::SeatNotAllowed { seat: blocked } if blocked == seat)
    });
    match own {
        Some(violation) => Some(violation.rule.loss_reason()),
        None if violations.iter().any(|v| v.bid_id.is_none()) => Some(LossReason::INTERNAL_ERROR),
        None => None,
    }
}
