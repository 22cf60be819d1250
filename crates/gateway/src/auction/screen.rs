//! The first stage: every bid checked against the request, its price adjusted and converted,
//! its floor met. A bid that passes is a [`Candidate`] for its imp; one that does not is lost
//! at once with its reason.

use marquee_model::{Currency, Micros, Rounding};
use marquee_openrtb::{Bid, BidRequest, Imp, LossReason, Rule, Violation, validate_response};

use super::money::{RateConverter, adjust};
use super::{Entry, Outcome, Result, Rules};

/// A valid bid, priced for ranking.
pub(super) struct Candidate<'e> {
    pub entry: usize,
    pub bid: usize,
    pub imp: usize,
    pub tier: u8,
    /// The bid in the answer currency, rounded down: what it ranks at.
    pub adjusted: i64,
    /// Its floor in the answer currency, rounded up: what the caller's own check needs.
    pub floor: i64,
    /// Its floor in the bidder's currency, rounded up: the least it pays.
    pub floor_to_bidder: i64,
    pub name: &'e str,
    pub bid_id: &'e str,
}

/// The bids of every entry sorted into candidates and the invalid bids' outcomes (those in
/// entry and bid order, their prices not yet told).
pub(super) fn screen<'e>(
    request: &BidRequest<'_>,
    entries: &'e [Entry<'_>],
    rules: Rules<'_>,
) -> (Vec<Outcome>, Vec<Candidate<'e>>) {
    let converter = RateConverter(rules.rates);
    let mut invalid = Vec::new();
    let mut candidates = Vec::new();
    for (e, entry) in entries.iter().enumerate() {
        let violations = validate_response(request, &entry.response, &converter).err();
        let violations = violations.unwrap_or_default();
        let checked = Checked {
            entry,
            index: e,
            violations: &violations,
            whole: violations.iter().find(|v| v.bid_id.is_none()),
            currency: Currency::try_from(entry.response.currency()).ok(),
        };
        for (b, (_, bid)) in entry.response.bids().enumerate() {
            let imp = request.imp.iter().position(|imp| imp.id == bid.impid);
            match screen_bid(request, &checked, b, bid, imp, rules) {
                Ok(candidate) => candidates.push(candidate),
                Err(reason) => invalid.push(Outcome {
                    entry: e,
                    bid: b,
                    imp,
                    result: Result::Lost {
                        reason,
                        price: None,
                        min_to_win: None,
                    },
                }),
            }
        }
    }
    (invalid, candidates)
}

/// One entry's answer after the validator.
struct Checked<'e, 'v> {
    entry: &'e Entry<'e>,
    index: usize,
    violations: &'v [Violation],
    /// A failure of the answer as a whole: every bid of it is lost.
    whole: Option<&'v Violation>,
    /// The answer's currency, when the gateway knows it.
    currency: Option<Currency>,
}

/// Bid `b` of an entry (`imp`: the index of the imp it names) as a candidate, or why it lost.
fn screen_bid<'e>(
    request: &BidRequest<'_>,
    checked: &Checked<'e, '_>,
    b: usize,
    bid: &'e Bid<'_>,
    imp: Option<usize>,
    rules: Rules<'_>,
) -> std::result::Result<Candidate<'e>, LossReason> {
    let own = checked
        .violations
        .iter()
        .find(|v| v.bid_id.as_deref() == Some(bid.id.as_ref()));
    // A bid naming one of its imp's deals is held to the deal's floor (`floor_for`, as the
    // validator does): missing it is OpenRTB's 101, not the imp's 100.
    let below_floor = match imp.zip(bid.dealid.as_deref()) {
        Some((i, id)) if request.imp[i].deal(id).is_some() => LossReason::BELOW_DEAL_FLOOR,
        _ => LossReason::BELOW_AUCTION_FLOOR,
    };
    if let Some(violation) = checked.whole.or(own) {
        return Err(match violation.rule {
            Rule::BelowFloor { .. } | Rule::FloorNotConvertible { .. } => below_floor,
            ref rule => rule.loss_reason(),
        });
    }
    let entry = checked.entry;
    let invalid = LossReason::INVALID_BID_RESPONSE;
    let imp = imp
        .filter(|&i| entry.sent.get(i).copied().unwrap_or(false))
        .ok_or(invalid)?;
    let currency = checked.currency.ok_or(invalid)?;
    let own_price = adjust(bid.price_micros, entry.price_permille).ok_or(invalid)?;
    let adjusted = rules
        .rates
        .convert(Micros(own_price), currency, rules.currency, Rounding::Down)
        .ok_or(invalid)?;
    let (floor, floor_to_bidder) = floors(
        &request.imp[imp],
        bid,
        own_price,
        currency,
        adjusted.0,
        rules,
    )
    .ok_or(below_floor)?;
    Ok(Candidate {
        entry: checked.index,
        bid: b,
        imp,
        tier: u8::from(!(rules.deals_first && bid.dealid.is_some())),
        adjusted: adjusted.0,
        floor,
        floor_to_bidder,
        name: entry.name,
        bid_id: &bid.id,
    })
}

/// The bid's floor in the answer currency and in the bidder's (both rounded up), when the bid
/// (`own_price` in `currency`, after the adjustment; `adjusted` in the answer currency) meets
/// it; `None` when it does not or the floor cannot be converted.
fn floors(
    imp: &Imp<'_>,
    bid: &Bid<'_>,
    own_price: i64,
    currency: Currency,
    adjusted: i64,
    rules: Rules<'_>,
) -> Option<(i64, i64)> {
    let rates = rules.rates;
    let (floor, floor_currency) = imp.floor_for(bid.dealid.as_deref());
    let floor_currency = Currency::try_from(floor_currency).ok()?;
    // Whether the floor is met is decided in the floor's currency, not the answer's: the bid
    // converted into it rounding down is at least the floor (whole micros) exactly when the
    // bid's value is, so a bid at a floor in its own currency meets it. In the answer currency
    // the bid rounded down and the floor rounded up fall a micro apart (1 EUR at 0.92: 1.086956
    // against 1.086957 USD). The adjustment may take a bid that met the floor as sent below it.
    let in_floor_currency =
        rates.convert(Micros(own_price), currency, floor_currency, Rounding::Down);
    in_floor_currency
        .filter(|met| met.0 >= floor && adjusted > 0)
        .and_then(|_| {
            let to = |c| rates.convert(Micros(floor), floor_currency, c, Rounding::Up);
            Some((to(rules.currency)?.0, to(currency)?.0))
        })
}
