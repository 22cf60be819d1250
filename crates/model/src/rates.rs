//! Currency conversion for bids and floors, in integers only.
//!
//! A table holds, for each currency, how many units of it one unit of the base currency buys,
//! given as an exact decimal (`"0.92"`) and kept as an integer scaled by 10^9. A conversion
//! multiplies and divides once in 128-bit integers, so it is exact up to one final rounding,
//! whose direction the caller chooses: a floor converted into the bid currency rounds up (a bid
//! that meets the converted floor meets the original), a price converted down (never bid more
//! than the line item pays).

use std::fmt;

use crate::{Currency, Micros};

/// Which way a conversion rounds a result that falls between two whole micros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// Towards negative infinity.
    Down,
    /// Towards positive infinity.
    Up,
}

/// Why a rate is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    #[error(
        "rate {0:?} must be a decimal number such as 0.92 or 1100, with at most {max} decimal places",
        max = CurrencyRates::RATE_DECIMALS
    )]
    Syntax(String),
    #[error("rate {0:?} must be greater than 0 and at most 1000000000")]
    Range(String),
    #[error("the base currency {0} has the rate 1 by definition; got {1:?}")]
    Base(Currency, String),
}

/// Exchange rates against one base currency. Pure data: the edge's configuration supplies it.
#[derive(Clone, PartialEq, Eq)]
pub struct CurrencyRates {
    base: Currency,
    /// Units of each currency per unit of `base`, times 10^9; sorted by currency, base absent.
    rates: Vec<(Currency, u64)>,
}

impl CurrencyRates {
    /// Decimal places a rate may have.
    pub const RATE_DECIMALS: u32 = 9;
    const SCALE: u64 = 1_000_000_000;
    const MAX_RATE: u64 = 1_000_000_000 * Self::SCALE;

    /// A table that knows only `base`: every currency converts to itself and nothing else.
    pub const fn new(base: Currency) -> CurrencyRates {
        CurrencyRates {
            base,
            rates: Vec::new(),
        }
    }

    pub fn base(&self) -> Currency {
        self.base
    }

    /// Sets how many units of `currency` one unit of the base buys, e.g. `"0.92"`.
    pub fn set(&mut self, currency: Currency, rate: &str) -> Result<(), RateError> {
        let scaled = parse_rate(rate)?;
        if currency == self.base {
            if scaled != Self::SCALE {
                return Err(RateError::Base(currency, rate.to_owned()));
            }
            return Ok(());
        }
        match self.rates.binary_search_by_key(&currency, |(c, _)| *c) {
            Ok(i) => self.rates[i].1 = scaled,
            Err(i) => self.rates.insert(i, (currency, scaled)),
        }
        Ok(())
    }

    /// Whether `currency` can be converted (it is the base or has a rate).
    pub fn knows(&self, currency: Currency) -> bool {
        self.scaled_rate(currency).is_some()
    }

    fn scaled_rate(&self, currency: Currency) -> Option<u64> {
        if currency == self.base {
            return Some(Self::SCALE);
        }
        self.rates
            .binary_search_by_key(&currency, |(c, _)| *c)
            .ok()
            .map(|i| self.rates[i].1)
    }

    /// `amount` in `from` expressed in `to`, rounded as asked; `None` when either currency has
    /// no rate or the result does not fit in `Micros`. The same currency converts to itself
    /// unchanged, whether or not the table knows it.
    pub fn convert(
        &self,
        amount: Micros,
        from: Currency,
        to: Currency,
        rounding: Rounding,
    ) -> Option<Micros> {
        if from == to {
            return Some(amount);
        }
        let numerator = i128::from(amount.0) * i128::from(self.scaled_rate(to)?);
        let denominator = i128::from(self.scaled_rate(from)?);
        let floor = numerator.div_euclid(denominator);
        let result = match rounding {
            Rounding::Down => floor,
            Rounding::Up if numerator.rem_euclid(denominator) != 0 => floor + 1,
            Rounding::Up => floor,
        };
        i64::try_from(result).ok().map(Micros)
    }
}

impl fmt::Debug for CurrencyRates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        map.entry(&self.base.as_str(), &"1");
        for (currency, scaled) in &self.rates {
            let whole = scaled / Self::SCALE;
            let fraction = format!("{:09}", scaled % Self::SCALE);
            let fraction = fraction.trim_end_matches('0');
            let rate = if fraction.is_empty() {
                whole.to_string()
            } else {
                format!("{whole}.{fraction}")
            };
            map.entry(&currency.as_str(), &rate);
        }
        map.finish()
    }
}

/// A decimal such as `0.92` or `1100` as an integer scaled by 10^9.
fn parse_rate(text: &str) -> Result<u64, RateError> {
    let syntax = || RateError::Syntax(text.to_owned());
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || (text.contains('.') && fraction.is_empty())
        || fraction.len() > CurrencyRates::RATE_DECIMALS as usize
    {
        return Err(syntax());
    }
    let range = || RateError::Range(text.to_owned());
    let whole: u64 = whole.parse().map_err(|_| range())?;
    let mut scaled_fraction = 0u64;
    for (place, digit) in fraction.bytes().enumerate() {
        let power = CurrencyRates::RATE_DECIMALS - 1 - place as u32;
        scaled_fraction += u64::from(digit - b'0') * 10u64.pow(power);
    }
    let scaled = whole
        .checked_mul(CurrencyRates::SCALE)
        .and_then(|w| w.checked_add(scaled_fraction))
        .ok_or_else(range)?;
    if scaled == 0 || scaled > CurrencyRates::MAX_RATE {
        return Err(range());
    }
    Ok(scaled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn currency(code: &str) -> Currency {
        Currency::try_from(code).expect("valid code")
    }

    fn table() -> CurrencyRates {
        let mut rates = CurrencyRates::new(Currency::USD);
        rates.set(Currency::EUR, "0.92").expect("valid");
        rates.set(currency("GBP"), "0.79").expect("valid");
        rates.set(currency("JPY"), "151.5").expect("valid");
        rates
    }

    #[test]
    fn conversion_is_exact_then_rounded_once_in_the_asked_direction() {
        let rates = table();
        // 1.00 USD = 0.92 EUR exactly.
        let one_usd = Micros(1_000_000);
        for rounding in [Rounding::Down, Rounding::Up] {
            assert_eq!(
                rates.convert(one_usd, Currency::USD, Currency::EUR, rounding),
                Some(Micros(920_000))
            );
        }
        // 1.00 EUR = 1/0.92 USD = 1.0869565217… USD.
        let one_eur = Micros(1_000_000);
        assert_eq!(
            rates.convert(one_eur, Currency::EUR, Currency::USD, Rounding::Down),
            Some(Micros(1_086_956))
        );
        assert_eq!(
            rates.convert(one_eur, Currency::EUR, Currency::USD, Rounding::Up),
            Some(Micros(1_086_957))
        );
        // Cross rate without passing through a rounded base amount: 5.00 GBP in EUR is
        // 5 × 0.92 / 0.79 = 5.8227848101… EUR.
        let gbp = currency("GBP");
        assert_eq!(
            rates.convert(Micros(5_000_000), gbp, Currency::EUR, Rounding::Up),
            Some(Micros(5_822_785))
        );
        assert_eq!(
            rates.convert(Micros(5_000_000), gbp, Currency::EUR, Rounding::Down),
            Some(Micros(5_822_784))
        );
        // Negative amounts round towards the asked infinity too.
        assert_eq!(
            rates.convert(Micros(-1), Currency::EUR, Currency::USD, Rounding::Down),
            Some(Micros(-2))
        );
        assert_eq!(
            rates.convert(Micros(-1), Currency::EUR, Currency::USD, Rounding::Up),
            Some(Micros(-1))
        );
    }

    #[test]
    fn a_floor_rounded_up_is_never_undercut() {
        let rates = table();
        let gbp = currency("GBP");
        for floor in [1, 7, 30_000, 4_500_000, 123_456_789] {
            let floor = Micros(floor);
            let in_eur = rates
                .convert(floor, gbp, Currency::EUR, Rounding::Up)
                .expect("known");
            // The converted floor, taken back, is at least the original floor.
            let back = rates
                .convert(in_eur, Currency::EUR, gbp, Rounding::Down)
                .expect("known");
            assert!(back >= floor, "{floor:?} -> {in_eur:?} -> {back:?}");
        }
    }

    #[test]
    fn unknown_currencies_and_overflow_give_none() {
        let rates = table();
        let chf = currency("CHF");
        assert_eq!(
            rates.convert(Micros(1), chf, Currency::USD, Rounding::Up),
            None
        );
        assert_eq!(
            rates.convert(Micros(1), Currency::USD, chf, Rounding::Up),
            None
        );
        // A currency converts to itself even when the table does not know it.
        assert_eq!(
            rates.convert(Micros(42), chf, chf, Rounding::Up),
            Some(Micros(42))
        );
        assert_eq!(
            rates.convert(
                Micros(i64::MAX),
                Currency::USD,
                currency("JPY"),
                Rounding::Up
            ),
            None
        );
        assert!(rates.knows(Currency::USD) && rates.knows(Currency::EUR) && !rates.knows(chf));
    }

    #[test]
    fn rates_are_exact_decimals() {
        let mut rates = CurrencyRates::new(Currency::EUR);
        for good in ["1", "0.000000001", "1000000000", "1.5", "0150.250"] {
            assert_eq!(rates.set(Currency::USD, good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".5",
            "1.",
            "1,5",
            "-1",
            "1e3",
            "0.0000000001",
            " 1",
            "NaN",
        ] {
            assert!(
                matches!(rates.set(Currency::USD, bad), Err(RateError::Syntax(_))),
                "{bad:?} accepted"
            );
        }
        for out_of_range in ["0", "0.000", "1000000000.1", "99999999999999999999"] {
            assert!(
                matches!(
                    rates.set(Currency::USD, out_of_range),
                    Err(RateError::Range(_))
                ),
                "{out_of_range:?} accepted"
            );
        }
        assert!(matches!(
            rates.set(Currency::EUR, "1.1"),
            Err(RateError::Base(..))
        ));
        assert_eq!(rates.set(Currency::EUR, "1.000"), Ok(()));
        rates.set(Currency::USD, "1.08").expect("valid");
        assert_eq!(
            format!("{rates:?}"),
            r#"{"EUR": "1", "USD": "1.08"}"#,
            "a later rate replaces an earlier one"
        );
    }
}
