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

use marquee_model::{Currency, CurrencyRates, Micros, Rounding};
use marquee_openrtb::{
    AuctionType, Bid, BidRequest, BidResponse, CurrencyConverter, LossReason, Rule,
    validate_response,
};

use crate::config::AuctionKind;

/// Converts amounts between the currencies `validate_response` meets, by a rate table. It
/// rounds up because the validator converts floors with it.
#[derive(Clone, Copy, Debug)]
pub struct RateConverter<'a>(pub &'a CurrencyRates);

impl CurrencyConverter for RateConverter<'_> {
    fn convert(&self, micros: i64, from: &str, to: &str) -> Option<i64> {
        let from = Currency::try_from(from).ok()?;
        let to = Currency::try_from(to).ok()?;
        self.0
            .convert(Micros(micros), from, to, Rounding::Up)
            .map(|m| m.0)
    }
}

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

struct Candidate<'b> {
    entry: usize,
    bid: usize,
    imp: usize,
    tier: u8,
    /// The bid in the answer currency, rounded down: what it ranks at.
    adjusted: i64,
    /// Its floor in the answer currency, rounded up: what the caller's own check needs.
    floor: i64,
    /// Its floor in the bidder's currency, rounded up: the least it pays.
    floor_to_bidder: i64,
    name: &'b str,
    bid_id: &'b str,
}

/// Runs the auction: one [`Outcome`] per bid of every entry, winners first.
pub(crate) fn run(
    request: &BidRequest<'_>,
    entries: &[Entry<'_>],
    rules: Rules<'_>,
) -> Vec<Outcome> {
    let rates = rules.rates;
    let converter = RateConverter(rates);
    let mut outcomes = Vec::new();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for (e, entry) in entries.iter().enumerate() {
        let violations = validate_response(request, &entry.response, &converter).err();
        let violations = violations.unwrap_or_default();
        let whole = violations.iter().find(|v| v.bid_id.is_none());
        let currency = Currency::try_from(entry.response.currency()).ok();
        for (b, (_, bid)) in entry.response.bids().enumerate() {
            let imp = request.imp.iter().position(|imp| imp.id == bid.impid);
            let mut lost = |reason: LossReason| {
                outcomes.push(Outcome {
                    entry: e,
                    bid: b,
                    imp,
                    result: Result::Lost {
                        reason,
                        price: None,
                        min_to_win: None,
                    },
                })
            };
            let own = violations
                .iter()
                .find(|v| v.bid_id.as_deref() == Some(bid.id.as_ref()));
            // A bid naming one of its imp's deals is held to the deal's floor (`floor_for`, as
            // the validator does): missing it is OpenRTB's 101, not the imp's 100.
            let below_floor = match imp.zip(bid.dealid.as_deref()) {
                Some((i, id)) if request.imp[i].deal(id).is_some() => LossReason::BELOW_DEAL_FLOOR,
                _ => LossReason::BELOW_AUCTION_FLOOR,
            };
            if let Some(violation) = whole.or(own) {
                lost(match violation.rule {
                    Rule::BelowFloor { .. } | Rule::FloorNotConvertible { .. } => below_floor,
                    ref rule => rule.loss_reason(),
                });
                continue;
            }
            let Some(imp) = imp.filter(|&i| entry.sent.get(i).copied().unwrap_or(false)) else {
                lost(LossReason::INVALID_BID_RESPONSE);
                continue;
            };
            let Some(currency) = currency else {
                lost(LossReason::INVALID_BID_RESPONSE);
                continue;
            };
            let Some(own_price) = adjust(bid.price_micros, entry.price_permille) else {
                lost(LossReason::INVALID_BID_RESPONSE);
                continue;
            };
            let Some(adjusted) =
                rates.convert(Micros(own_price), currency, rules.currency, Rounding::Down)
            else {
                lost(LossReason::INVALID_BID_RESPONSE);
                continue;
            };
            let (floor, floor_currency) = request.imp[imp].floor_for(bid.dealid.as_deref());
            let Ok(floor_currency) = Currency::try_from(floor_currency) else {
                lost(below_floor);
                continue;
            };
            // Whether the floor is met is decided in the floor's currency, not the answer's: the
            // bid converted into it rounding down is at least the floor (whole micros) exactly
            // when the bid's value is, so a bid at a floor in its own currency meets it. In the
            // answer currency the bid rounded down and the floor rounded up fall a micro apart
            // (1 EUR at 0.92: 1.086956 against 1.086957 USD). The adjustment may take a bid that
            // met the floor as sent below it.
            let in_floor_currency =
                rates.convert(Micros(own_price), currency, floor_currency, Rounding::Down);
            let floors = in_floor_currency
                .filter(|met| met.0 >= floor && adjusted.0 > 0)
                .and_then(|_| {
                    let to = |c| rates.convert(Micros(floor), floor_currency, c, Rounding::Up);
                    Some((to(rules.currency)?.0, to(currency)?.0))
                });
            let Some((floor, floor_to_bidder)) = floors else {
                lost(below_floor);
                continue;
            };
            candidates.push(Candidate {
                entry: e,
                bid: b,
                imp,
                tier: u8::from(!(rules.deals_first && bid.dealid.is_some())),
                adjusted: adjusted.0,
                floor,
                floor_to_bidder,
                name: entry.name,
                bid_id: &bid.id,
            });
        }
    }
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
    let bid_of = |c: &Candidate<'_>| -> Option<(&Bid<'_>, &Entry<'_>)> {
        let entry = entries.get(c.entry)?;
        Some((entry.response.bids().nth(c.bid)?.1, entry))
    };
    let mut rest = Vec::new();
    // Per imp won: the clearing price and the winner's adjusted bid.
    let mut won: Vec<(usize, i64, i64)> = Vec::new();
    for group in candidates.chunk_by(|a, b| a.imp == b.imp) {
        let winner = &group[0];
        let runner_up = group
            .get(1)
            .filter(|c| c.tier == winner.tier)
            .map(|c| c.adjusted);
        let Some((bid, entry)) = bid_of(winner) else {
            continue;
        };
        let deal_at = bid
            .dealid
            .as_deref()
            .and_then(|id| request.imp[winner.imp].deal(id))
            .and_then(|deal| deal.at);
        // The most the winner may be answered at: its bid rounded down, or the floor rounded up
        // when that alone would take a bid that meets its floor below it (a micro more at
        // most, never above the bid rounded up, since the bid's value is at least the floor's).
        let most = winner.adjusted.max(winner.floor);
        let clearing = match clearing_of(rules.kind, deal_at) {
            Clearing::First => most,
            Clearing::Second { increment_micros } => runner_up
                .unwrap_or(0)
                .max(winner.floor)
                .saturating_add(increment_micros)
                .min(most),
            // The bid met the deal's floor (checked above), and the floor is the agreed price.
            Clearing::DealFloor => winner.floor,
        };
        // At the floor the clearing price is the floor itself, not its rounding into the answer
        // currency: a bid on a 1 EUR fixed-price deal in a USD answer pays 1 EUR, not a micro
        // more.
        let told = if clearing == winner.floor {
            unadjust(winner.floor_to_bidder, entry.price_permille)
        } else {
            to_bidder(clearing, entry, rules)
        };
        // Never less than the floor: above 1000 ‰ the clearing price put back into the bidder's
        // terms can fall below it (a second price at the floor, 1500 ‰: two thirds of it), and
        // the answer, capped by this below, would follow. The validator found the bid as sent
        // at or above the floor, so this never charges more than the bid.
        let price_to_bidder = told
            .unwrap_or(bid.price_micros)
            .max(winner.floor_to_bidder)
            .min(bid.price_micros);
        // Above 1000 ‰ an adjustment ranks a bid above what it pays (2 at 1500 ‰ counts as 3):
        // the caller is never asked for more than the winner pays, or the operator would pay
        // the difference. At or below 1000 ‰ this changes nothing (the winner pays as much or
        // more than the answer says). What the winner pays, converted rounding down, can fall
        // a micro below the floor rounded up, which the caller's check would refuse: the floor
        // is kept, less than a micro above what the winner pays, as both meet the floor.
        let clearing = from_bidder(price_to_bidder, entry, rules)
            .map_or(clearing, |paid| clearing.min(paid))
            .max(winner.floor);
        won.push((winner.imp, clearing, winner.adjusted));
        outcomes.push(Outcome {
            entry: winner.entry,
            bid: winner.bid,
            imp: Some(winner.imp),
            result: Result::Won {
                clearing,
                price_to_bidder,
            },
        });
        for loser in &group[1..] {
            let Some((_, entry)) = bid_of(loser) else {
                continue;
            };
            let reason = if loser.tier > winner.tier {
                LossReason::LOST_TO_DEAL_BID
            } else {
                LossReason::LOST_TO_HIGHER_BID
            };
            rest.push(Outcome {
                entry: loser.entry,
                bid: loser.bid,
                imp: Some(loser.imp),
                result: Result::Lost {
                    reason,
                    price: to_bidder(clearing, entry, rules),
                    min_to_win: to_bidder(winner.adjusted.saturating_add(1), entry, rules),
                },
            });
        }
    }
    // An invalid bid hears the same prices as a valid loser of its imp.
    for outcome in &mut outcomes {
        let Result::Lost {
            price, min_to_win, ..
        } = &mut outcome.result
        else {
            continue;
        };
        let Some(&(_, clearing, adjusted)) = won.iter().find(|w| Some(w.0) == outcome.imp) else {
            continue;
        };
        let Some(entry) = entries.get(outcome.entry) else {
            continue;
        };
        *price = to_bidder(clearing, entry, rules);
        *min_to_win = to_bidder(adjusted.saturating_add(1), entry, rules);
    }
    // Winners first, then the losers to the winners, then the invalid bids.
    let (mut ordered, invalid): (Vec<_>, Vec<_>) = outcomes
        .into_iter()
        .partition(|o| matches!(o.result, Result::Won { .. }));
    ordered.extend(rest);
    ordered.extend(invalid);
    ordered
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

/// `price` × `permille` / 1000, rounded down.
fn adjust(price: i64, permille: u32) -> Option<i64> {
    i64::try_from(i128::from(price) * i128::from(permille) / 1000).ok()
}

/// An amount in the answer currency, in `entry`'s currency and before its adjustment, rounded
/// up.
fn to_bidder(amount: i64, entry: &Entry<'_>, rules: Rules<'_>) -> Option<i64> {
    let currency = Currency::try_from(entry.response.currency()).ok()?;
    let converted = rules
        .rates
        .convert(Micros(amount), rules.currency, currency, Rounding::Up)?;
    unadjust(converted.0, entry.price_permille)
}

/// An amount in a bidder's currency before its adjustment: × 1000 / `permille`, rounded up.
fn unadjust(amount: i64, permille: u32) -> Option<i64> {
    let permille = i128::from(permille.max(1));
    i64::try_from((i128::from(amount) * 1000 + permille - 1) / permille).ok()
}

/// An amount in `entry`'s currency (as it bid, no adjustment) in the answer currency, rounded
/// down.
fn from_bidder(amount: i64, entry: &Entry<'_>, rules: Rules<'_>) -> Option<i64> {
    let currency = Currency::try_from(entry.response.currency()).ok()?;
    let converted =
        rules
            .rates
            .convert(Micros(amount), currency, rules.currency, Rounding::Down)?;
    Some(converted.0)
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
