//! Money between a bidder's terms and the answer's: the rate converter the validator uses, a
//! bidder's price adjustment, and the conversions either way with their roundings.

use marquee_model::{Currency, CurrencyRates, Micros, Rounding};
use marquee_openrtb::CurrencyConverter;

use super::{Entry, Rules};

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

/// `price` × `permille` / 1000, rounded down.
pub(super) fn adjust(price: i64, permille: u32) -> Option<i64> {
    i64::try_from(i128::from(price) * i128::from(permille) / 1000).ok()
}

/// An amount in the answer currency, in `entry`'s currency and before its adjustment, rounded
/// up.
pub(super) fn to_bidder(amount: i64, entry: &Entry<'_>, rules: Rules<'_>) -> Option<i64> {
    let currency = Currency::try_from(entry.response.currency()).ok()?;
    let converted = rules
        .rates
        .convert(Micros(amount), rules.currency, currency, Rounding::Up)?;
    unadjust(converted.0, entry.price_permille)
}

/// An amount in a bidder's currency before its adjustment: × 1000 / `permille`, rounded up.
pub(super) fn unadjust(amount: i64, permille: u32) -> Option<i64> {
    let permille = i128::from(permille.max(1));
    i64::try_from((i128::from(amount) * 1000 + permille - 1) / permille).ok()
}

/// An amount in `entry`'s currency (as it bid, no adjustment) in the answer currency, rounded
/// down.
pub(super) fn from_bidder(amount: i64, entry: &Entry<'_>, rules: Rules<'_>) -> Option<i64> {
    let currency = Currency::try_from(entry.response.currency()).ok()?;
    let converted =
        rules
            .rates
            .convert(Micros(amount), currency, rules.currency, Rounding::Down)?;
    Some(converted.0)
}
