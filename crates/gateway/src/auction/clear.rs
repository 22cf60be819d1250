//! The later stages: candidates ranked per imp, the best one cleared at a first, second or
//! deal price, the rest lost to it with the prices they are told.

use marquee_openrtb::{AuctionType, Bid, BidRequest, LossReason};

use super::money::{from_bidder, to_bidder, unadjust};
use super::screen::Candidate;
use super::{Entry, Outcome, Result, Rules};
use crate::config::AuctionKind;

/// What one imp's auction settled: the clearing price and the winner's adjusted bid (both in
/// the answer currency), from which every loser of the imp hears its prices.
#[derive(Debug, Clone, Copy)]
pub(super) struct Won {
    pub imp: usize,
    pub clearing: i64,
    pub adjusted: i64,
}

/// Sorts candidates by imp, then rank: tier, adjusted price (high first), bidder name, bid id.
pub(super) fn rank(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(|a, b| {
        (
            a.imp,
            a.tier,
            std::cmp::Reverse(a.adjusted),
            a.name,
            a.bid_id,
        )
            .cmp(&(
                b.imp,
                b.tier,
                std::cmp::Reverse(b.adjusted),
                b.name,
                b.bid_id,
            ))
    });
}

/// The auction of one imp (`group`: its candidates, ranked): the winner's outcome and the
/// losers'. `None` when the winner's bid cannot be found (then nothing of the imp is told).
pub(super) fn clear_imp(
    request: &BidRequest<'_>,
    entries: &[Entry<'_>],
    rules: Rules<'_>,
    group: &[Candidate<'_>],
) -> Option<(Won, Outcome, Vec<Outcome>)> {
    let winner = group.first()?;
    let runner_up = group
        .get(1)
        .filter(|c| c.tier == winner.tier)
        .map(|c| c.adjusted);
    let (bid, entry) = bid_of(entries, winner)?;
    let (clearing, price_to_bidder) = winning_prices(request, winner, runner_up, bid, entry, rules);
    let won = Won {
        imp: winner.imp,
        clearing,
        adjusted: winner.adjusted,
    };
    let outcome = Outcome {
        entry: winner.entry,
        bid: winner.bid,
        imp: Some(winner.imp),
        result: Result::Won {
            clearing,
            price_to_bidder,
        },
    };
    let losers = group[1..]
        .iter()
        .filter_map(|loser| {
            let (_, entry) = bid_of(entries, loser)?;
            let reason = if loser.tier > winner.tier {
                LossReason::LOST_TO_DEAL_BID
            } else {
                LossReason::LOST_TO_HIGHER_BID
            };
            Some(Outcome {
                entry: loser.entry,
                bid: loser.bid,
                imp: Some(loser.imp),
                result: lost(reason, won, entry, rules),
            })
        })
        .collect();
    Some((won, outcome, losers))
}

/// An invalid bid hears the same prices as a valid loser of its imp (none when its imp had no
/// winner).
pub(super) fn tell_prices(
    invalid: &mut [Outcome],
    won: &[Won],
    entries: &[Entry<'_>],
    rules: Rules<'_>,
) {
    for outcome in invalid {
        let Result::Lost { reason, .. } = outcome.result else {
            continue;
        };
        let Some(&won) = won.iter().find(|w| Some(w.imp) == outcome.imp) else {
            continue;
        };
        let Some(entry) = entries.get(outcome.entry) else {
            continue;
        };
        outcome.result = lost(reason, won, entry, rules);
    }
}

/// A loss to `won`, with the prices in the loser's terms.
fn lost(reason: LossReason, won: Won, entry: &Entry<'_>, rules: Rules<'_>) -> Result {
    Result::Lost {
        reason,
        price: to_bidder(won.clearing, entry, rules),
        min_to_win: to_bidder(won.adjusted.saturating_add(1), entry, rules),
    }
}

fn bid_of<'e>(entries: &'e [Entry<'_>], c: &Candidate<'_>) -> Option<(&'e Bid<'e>, &'e Entry<'e>)> {
    let entry = entries.get(c.entry)?;
    Some((entry.response.bids().nth(c.bid)?.1, entry))
}

/// The winner's clearing price in the answer currency, and what it is told it pays (its
/// `${AUCTION_PRICE}`, in its currency and terms).
fn winning_prices(
    request: &BidRequest<'_>,
    winner: &Candidate<'_>,
    runner_up: Option<i64>,
    bid: &Bid<'_>,
    entry: &Entry<'_>,
    rules: Rules<'_>,
) -> (i64, i64) {
    let deal_at = bid
        .dealid
        .as_deref()
        .and_then(|id| request.imp[winner.imp].deal(id))
        .and_then(|deal| deal.at);
    // The most the winner may be answered at: its bid rounded down, or the floor rounded up
    // when that alone would take a bid that meets its floor below it (a micro more at most,
    // never above the bid rounded up, since the bid's value is at least the floor's).
    let most = winner.adjusted.max(winner.floor);
    let clearing = match clearing_of(rules.kind, deal_at) {
        Clearing::First => most,
        Clearing::Second { increment_micros } => runner_up
            .unwrap_or(0)
            .max(winner.floor)
            .saturating_add(increment_micros)
            .min(most),
        // The bid met the deal's floor (checked before), and the floor is the agreed price.
        Clearing::DealFloor => winner.floor,
    };
    // At the floor the clearing price is the floor itself, not its rounding into the answer
    // currency: a bid on a 1 EUR fixed-price deal in a USD answer pays 1 EUR, not a micro more.
    let told = if clearing == winner.floor {
        unadjust(winner.floor_to_bidder, entry.price_permille)
    } else {
        to_bidder(clearing, entry, rules)
    };
    // Never less than the floor: above 1000 ‰ the clearing price put back into the bidder's
    // terms can fall below it (a second price at the floor, 1500 ‰: two thirds of it), and the
    // answer, capped by this below, would follow. The validator found the bid as sent at or
    // above the floor, so this never charges more than the bid.
    let price_to_bidder = told
        .unwrap_or(bid.price_micros)
        .max(winner.floor_to_bidder)
        .min(bid.price_micros);
    // Above 1000 ‰ an adjustment ranks a bid above what it pays (2 at 1500 ‰ counts as 3): the
    // caller is never asked for more than the winner pays, or the operator would pay the
    // difference. At or below 1000 ‰ this changes nothing (the winner pays as much or more than
    // the answer says). What the winner pays, converted rounding down, can fall a micro below
    // the floor rounded up, which the caller's check would refuse: the floor is kept, less than
    // a micro above what the winner pays, as both meet the floor.
    let clearing = from_bidder(price_to_bidder, entry, rules)
        .map_or(clearing, |paid| clearing.min(paid))
        .max(winner.floor);
    (clearing, price_to_bidder)
}

/// How a winning bid clears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clearing {
    First,
    Second {
        increment_micros: i64,
    },
    /// At the deal's floor: a fixed-price deal (`at` = 3).
    DealFloor,
}

/// The gateway's auction type, unless the winning bid's deal sets its own `at`: deals reach the
/// bidders as the caller wrote them, and a deal's `at` overrides the request's, so it is the
/// rule the bidder bid under. A second-price deal under a first-price gateway has no
/// configured increment: it clears at the next bid or the floor exactly.
fn clearing_of(kind: AuctionKind, deal_at: Option<AuctionType>) -> Clearing {
    const FIXED_PRICE: AuctionType = AuctionType(3);
    let increment_micros = match kind {
        AuctionKind::FirstPrice => 0,
        AuctionKind::SecondPrice { increment_micros } => increment_micros,
    };
    match (deal_at, kind) {
        (Some(FIXED_PRICE), _) => Clearing::DealFloor,
        (Some(AuctionType::FIRST_PRICE), _) => Clearing::First,
        (Some(AuctionType::SECOND_PRICE), _) => Clearing::Second { increment_micros },
        // No deal `at`, or an exchange-specific one (500+) the gateway cannot know: its own.
        (_, AuctionKind::FirstPrice) => Clearing::First,
        (_, AuctionKind::SecondPrice { .. }) => Clearing::Second { increment_micros },
    }
}
