//! The auction, pure: every bid checked against the request, then per imp the best valid bid
//! wins at a first or second price. No I/O, no clock; the same answers and bids give the same
//! outcome whatever order the answers came in.
//!
//! Prices are compared in the answer currency after each bidder's price adjustment ("adjusted
//! micros"), converted rounding down (a bid never counts for more than it offers). Whether a
//! bid meets its floor is decided in the floor's currency, exactly; one that does is answered
//! at least at the floor converted rounding up, so the caller's check finds it met. Ranking:
//! tier (deal bids first when `deals_first`), adjusted price (high first), bidder name, bid id.
//! Clearing: the gateway's auction type, or the winning deal's own `at` when it has one (1, 2,
//! or 3: the deal's floor is its price). The prices a bidder is told (`${AUCTION_PRICE}`,
//! `${AUCTION_MIN_TO_WIN}`) are put back into its currency and before its adjustment, rounding
//! up, the clearing price never above its bid nor below its floor; the answer's price is never
//! above what the winner is told it pays, but for that floor rounding (less than a micro).
//!
//! The stages, in order: `screen` (each bid checked and priced, or lost with its reason),
//! `clear::rank` (per imp, best first), `clear::clear_imp` (each imp's winner and losers),
//! `clear::tell_prices` (the invalid bids hear their imp's prices). `money` holds the
//! conversions they share.

mod clear;
mod money;
mod screen;

use marquee_model::{Currency, CurrencyRates};
use marquee_openrtb::{BidRequest, BidResponse, LossReason};

use crate::config::AuctionKind;

pub use money::RateConverter;

/// One bidder's answer, parsed.
#[derive(Debug)]
pub(crate) struct Entry<'b> {
    /// The bidder's registry name (ties go to the name first in order).
    pub name: &'b str,
    pub price_permille: u32,
    pub response: BidResponse<'b>,
    /// Which of the request's imps (by index) it was sent.
    pub sent: Vec<bool>,
}

/// What became of one bid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Result {
    Won {
        /// What the winner pays, in the answer currency (adjusted micros).
        clearing: i64,
        /// The same in the bidder's currency and terms: its `${AUCTION_PRICE}`.
        price_to_bidder: i64,
    },
    Lost {
        reason: LossReason,
        /// The winner's clearing price in the bidder's terms (none when nothing won or the
        /// bid was invalid).
        price: Option<i64>,
        /// The lowest bid that would have won, in the bidder's terms (likewise).
        min_to_win: Option<i64>,
    },
    /// Won here, but the final check of the answer dropped it: never offered upstream, so it
    /// hears a loss (without prices: nothing won its imp upstream) and is not counted a win.
    Dropped { reason: LossReason },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Index of the entry and of the bid in `response.bids()` order.
    pub entry: usize,
    pub bid: usize,
    /// Index of the imp in the request (none for a bid naming no imp it was sent).
    pub imp: Option<usize>,
    pub result: Result,
}

/// The rules of one auction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules<'c> {
    pub kind: AuctionKind,
    pub deals_first: bool,
    pub currency: Currency,
    pub rates: &'c CurrencyRates,
}

/// Runs the auction: one [`Outcome`] per bid of every entry, winners first, then the losers to
/// the winners, then the invalid bids.
pub(crate) fn run(
    request: &BidRequest<'_>,
    entries: &[Entry<'_>],
    rules: Rules<'_>,
) -> Vec<Outcome> {
    let (mut invalid, mut candidates) = screen::screen(request, entries, rules);
    clear::rank(&mut candidates);
    let mut won = Vec::new();
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for group in candidates.chunk_by(|a, b| a.imp == b.imp) {
        let Some((imp, winner, lost)) = clear::clear_imp(request, entries, rules, group) else {
            continue;
        };
        won.push(imp);
        winners.push(winner);
        losers.extend(lost);
    }
    clear::tell_prices(&mut invalid, &won, entries, rules);
    winners.extend(losers);
    winners.extend(invalid);
    winners
}

/// Counts per entry, for metrics: (valid bids, wins). A dropped winner was valid here but won
/// nothing.
pub(crate) fn tally(entries: usize, outcomes: &[Outcome]) -> Vec<(u64, u64)> {
    let mut counts = vec![(0, 0); entries];
    for outcome in outcomes {
        let Some(slot) = counts.get_mut(outcome.entry) else {
            continue;
        };
        match outcome.result {
            Result::Won { .. } => *slot = (slot.0 + 1, slot.1 + 1),
            Result::Dropped { .. }
            | Result::Lost {
                reason: LossReason::LOST_TO_HIGHER_BID | LossReason::LOST_TO_DEAL_BID,
                ..
            } => slot.0 += 1,
            Result::Lost { .. } => {}
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUEST: &str = r#"{"id":"r","imp":[{"id":"1","banner":{"w":300,"h":250}}]}"#;

    fn answer(price: &str) -> String {
        format!(
            r#"{{"id":"r","seatbid":[{{"bid":[{{"id":"b","impid":"1","price":{price},"adm":"x","w":300,"h":250}}]}}]}}"#
        )
    }

    fn winner(request: &BidRequest<'_>, entries: &[Entry<'_>]) -> (usize, i64) {
        let rates = CurrencyRates::new(Currency::USD);
        let rules = Rules {
            kind: AuctionKind::FirstPrice,
            deals_first: true,
            currency: Currency::USD,
            rates: &rates,
        };
        let outcomes = run(request, entries, rules);
        match outcomes[0].result {
            Result::Won { clearing, .. } => (outcomes[0].entry, clearing),
            _ => panic!("no winner: {outcomes:?}"),
        }
    }

    #[test]
    fn ties_go_by_name_whatever_the_order_and_adjustments_rank() {
        let request = BidRequest::parse(REQUEST.as_bytes()).unwrap();
        let (two, three) = (answer("2"), answer("3"));
        let entry = |name, text: &'static str, permille| Entry {
            name,
            price_permille: permille,
            response: BidResponse::parse(text.as_bytes()).unwrap(),
            sent: vec![true],
        };
        let two: &'static str = Box::leak(two.into_boxed_str());
        let three: &'static str = Box::leak(three.into_boxed_str());
        let forward = [entry("a", two, 1000), entry("b", two, 1000)];
        let backward = [entry("b", two, 1000), entry("a", two, 1000)];
        assert_eq!(winner(&request, &forward), (0, 2_000_000));
        assert_eq!(
            winner(&request, &backward),
            (1, 2_000_000),
            "a, wherever it is"
        );
        // 3 at 600 ‰ counts as 1.8: the plain 2 wins.
        let adjusted = [entry("a", three, 600), entry("b", two, 1000)];
        assert_eq!(winner(&request, &adjusted), (1, 2_000_000));
        let outcomes = run(
            &request,
            &[entry("a", three, 600)],
            Rules {
                kind: AuctionKind::FirstPrice,
                deals_first: true,
                currency: Currency::USD,
                rates: &CurrencyRates::new(Currency::USD),
            },
        );
        assert_eq!(
            outcomes[0].result,
            Result::Won {
                clearing: 1_800_000,
                price_to_bidder: 3_000_000
            },
            "the bidder is told its price before the adjustment"
        );
    }
}
