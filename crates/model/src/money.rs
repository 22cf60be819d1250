use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An amount of money in millionths of the currency unit (1 USD = 1,000,000 micros).
/// Integer so that sums are exact; checked arithmetic so that overflow is an error, not a wrap.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(transparent)]
#[schemars(transparent)]
pub struct Micros(pub i64);

impl Micros {
    pub const ZERO: Micros = Micros(0);
    pub const PER_UNIT: i64 = 1_000_000;

    pub fn checked_add(self, other: Micros) -> Option<Micros> {
        self.0.checked_add(other.0).map(Micros)
    }

    pub fn checked_sub(self, other: Micros) -> Option<Micros> {
        self.0.checked_sub(other.0).map(Micros)
    }

    /// Reads an amount as people write it in `currency` (`2.50`, `500`, `-1.5`): digits with
    /// at most one point and at most the currency's decimals, read exactly (no floating point).
    pub fn parse_in(text: &str, currency: Currency) -> Result<Micros, AmountError> {
        let bad = || AmountError::NotAnAmount {
            text: text.to_owned(),
            example: currency.example(),
        };
        let trimmed = text.trim();
        let (negative, digits) = match trimmed.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if (whole.is_empty() && fraction.is_empty())
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !fraction.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        // Zeros past the currency's decimals change nothing (`2.500` is 2.50 dollars).
        let significant = fraction.trim_end_matches('0');
        if significant.len() > currency.decimals() as usize {
            return Err(AmountError::TooManyDecimals {
                text: text.to_owned(),
                currency,
            });
        }
        let too_large = || AmountError::TooLarge {
            text: text.to_owned(),
        };
        let whole: i64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_large())?
        };
        // At most four decimals remain (no currency has more), so this parse cannot fail.
        let fraction: i64 = format!("{significant:0<6}").parse().map_err(|_| bad())?;
        let micros = whole
            .checked_mul(Self::PER_UNIT)
            .and_then(|m| m.checked_add(fraction))
            .ok_or_else(too_large)?;
        Ok(Micros(if negative { -micros } else { micros }))
    }

    /// The amount as a plain decimal in `currency`, exact: the currency's decimals, more only
    /// when the amount has them (2,500,000 micros is `2.50` in USD and `2.5` in JPY: an amount
    /// is never rounded). No symbol and no grouping, so it reads back with [`Micros::parse_in`]
    /// when its decimals fit the currency.
    pub fn plain_in(self, currency: Currency) -> String {
        let text = self.to_string();
        let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
        let kept = fraction
            .trim_end_matches('0')
            .len()
            .max(currency.decimals() as usize);
        if kept == 0 {
            whole.to_owned()
        } else {
            format!("{whole}.{}", &fraction[..kept])
        }
    }
}

/// Why text is not an amount of money in a currency. The messages are for people: they name
/// the text and say how to write it.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum AmountError {
    #[error(
        "{text:?} is not an amount: write digits with a point before the decimals, such as {example}"
    )]
    NotAnAmount { text: String, example: &'static str },
    #[error("{text:?} has more decimals than {currency} has ({})", currency.decimals_text())]
    TooManyDecimals { text: String, currency: Currency },
    #[error("{text:?} is too large")]
    TooLarge { text: String },
}

impl fmt::Display for Micros {
    /// Formats as a decimal amount with six places, e.g. `2.500000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let unit = Self::PER_UNIT.unsigned_abs();
        write!(f, "{sign}{}.{:06}", abs / unit, abs % unit)
    }
}

/// The largest amount one event may carry, in micros of the line item's currency: 100,000,000
/// currency units per mille (an impression's CPM rate, a billing notice's clearing CPM) or per
/// click. The aggregation (`marquee-stats`) drops an event above it as corrupt, so prices are
/// held below it when written ([`MAX_PRICE_MICROS`]).
///
/// Why this much: in a high-denomination currency a premium price is millions of units (a
/// $100 CPM is about 1,600,000 IDR, 2,500,000 VND, 9,000,000 LBP). Why not more: the
/// aggregation sums amounts in `i64` (saturating), which holds 9.2 × 10¹² units; one event at
/// this limit is 1/92,000 of that, so no single corrupt record can move a sum near its end.
pub const MAX_AMOUNT_MICROS: i64 = 100_000_000 * Micros::PER_UNIT;

/// The largest CPM or CPC price a line item may have: a tenth of [`MAX_AMOUNT_MICROS`], so that
/// a bid raised by the largest bid multiplier pacing may apply (`pacing.max_bid_permille`, at
/// most 10,000 ‰) and the clearing price it brings back stay within what the aggregation counts.
/// 10,000,000 currency units.
pub const MAX_PRICE_MICROS: i64 = MAX_AMOUNT_MICROS / 10;

/// The largest spend goal amount (daily or lifetime), in micros: what the aggregation can
/// count. Spend is summed as per-mille amounts (CPM rates, 1,000 × the spend) in `i64`, so a
/// period's spend is measurable up to `i64::MAX / 1,000` micros, about 9.2 × 10⁹ currency
/// units.
pub const MAX_SPEND_GOAL_MICROS: u64 = (i64::MAX / 1_000).unsigned_abs();

/// An ISO 4217 currency code: three upper-case ASCII letters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency([u8; 3]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("currency must be an ISO 4217 code of three upper-case letters, got {0:?}")]
pub struct CurrencyError(pub String);

impl Currency {
    pub const USD: Currency = Currency(*b"USD");
    pub const EUR: Currency = Currency(*b"EUR");

    pub fn as_str(&self) -> &str {
        // Only upper-case ASCII letters are ever stored, which are valid UTF-8.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }

    /// Decimal places of the currency's minor unit, as ISO 4217 lists them: 0 for the yen,
    /// the won or the CFA franc, 3 for the dinars of Bahrain, Jordan or Kuwait, 2 for most.
    /// A code this list does not know gets 2.
    pub fn decimals(self) -> u32 {
        match &self.0 {
            b"BIF" | b"CLP" | b"DJF" | b"GNF" | b"ISK" | b"JPY" | b"KMF" | b"KRW" | b"PYG"
            | b"RWF" | b"UGX" | b"UYI" | b"VND" | b"VUV" | b"XAF" | b"XOF" | b"XPF" => 0,
            b"BHD" | b"IQD" | b"JOD" | b"KWD" | b"LYD" | b"OMR" | b"TND" => 3,
            b"CLF" | b"UYW" => 4,
            _ => 2,
        }
    }

    /// The symbol shown before an amount: `$`, `€`, `£`, `¥` and a few more that people read
    /// without doubt; otherwise the code and a space (`CHF 12.00`), never a guess.
    pub fn symbol(self) -> String {
        let symbol = match &self.0 {
            b"USD" => "$",
            b"EUR" => "€",
            b"GBP" => "£",
            b"JPY" => "¥",
            b"INR" => "₹",
            b"KRW" => "₩",
            b"CAD" => "CA$",
            b"AUD" => "A$",
            b"BRL" => "R$",
            b"CNY" => "CN¥",
            _ => return format!("{} ", self.as_str()),
        };
        symbol.to_owned()
    }

    /// An amount for people: symbol, thousands grouped, the currency's decimals (more only
    /// when the amount has them): `$1,234.50`, `¥500`, `CHF 12.00`, `-€3.10`.
    pub fn format(self, amount: Micros) -> String {
        let plain = amount.plain_in(self);
        let (sign, digits) = match plain.strip_prefix('-') {
            Some(rest) => ("-", rest),
            None => ("", plain.as_str()),
        };
        let (whole, fraction) = match digits.split_once('.') {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (digits, None),
        };
        let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
        for (i, digit) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        match fraction {
            Some(fraction) => format!("{sign}{}{grouped}.{fraction}", self.symbol()),
            None => format!("{sign}{}{grouped}", self.symbol()),
        }
    }

    /// How an amount in the currency is written, for messages: `2.50`, `500`, `2.500`.
    pub fn example(self) -> &'static str {
        match self.decimals() {
            0 => "500",
            3 => "2.500",
            4 => "2.5000",
            _ => "2.50",
        }
    }

    fn decimals_text(self) -> String {
        match self.decimals() {
            0 => "none: write a whole amount".to_owned(),
            n => n.to_string(),
        }
    }
}

impl TryFrom<&str> for Currency {
    type Error = CurrencyError;
    fn try_from(code: &str) -> Result<Self, Self::Error> {
        match code.as_bytes() {
            &[a, b, c] if [a, b, c].iter().all(u8::is_ascii_uppercase) => Ok(Currency([a, b, c])),
            _ => Err(CurrencyError(code.to_owned())),
        }
    }
}

impl TryFrom<String> for Currency {
    type Error = CurrencyError;
    fn try_from(code: String) -> Result<Self, Self::Error> {
        Currency::try_from(code.as_str())
    }
}

impl From<Currency> for String {
    fn from(c: Currency) -> String {
        c.as_str().to_owned()
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Currency({})", self.as_str())
    }
}

impl JsonSchema for Currency {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Currency".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[A-Z]{3}$",
            "description": "ISO 4217 currency code"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn currency_accepts_only_three_upper_case_letters() {
        assert_eq!(Currency::try_from("EUR"), Ok(Currency::EUR));
        for bad in ["eur", "EU", "EURO", "E1R", ""] {
            assert!(Currency::try_from(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn amounts_read_exactly_in_the_currency_decimals() {
        let jpy = Currency::try_from("JPY").unwrap();
        let kwd = Currency::try_from("KWD").unwrap();
        assert_eq!(
            Micros::parse_in("500", Currency::USD),
            Ok(Micros(500_000_000))
        );
        assert_eq!(
            Micros::parse_in("2.5", Currency::USD),
            Ok(Micros(2_500_000))
        );
        assert_eq!(Micros::parse_in(" .05 ", Currency::EUR), Ok(Micros(50_000)));
        assert_eq!(
            Micros::parse_in("-1.25", Currency::USD),
            Ok(Micros(-1_250_000))
        );
        assert_eq!(
            Micros::parse_in("2.500", Currency::USD),
            Ok(Micros(2_500_000))
        );
        assert_eq!(Micros::parse_in("1.234", kwd), Ok(Micros(1_234_000)));
        assert_eq!(Micros::parse_in("500", jpy), Ok(Micros(500_000_000)));
        assert_eq!(
            Micros::parse_in("2.125", Currency::USD)
                .unwrap_err()
                .to_string(),
            "\"2.125\" has more decimals than USD has (2)"
        );
        assert_eq!(
            Micros::parse_in("500.5", jpy).unwrap_err().to_string(),
            "\"500.5\" has more decimals than JPY has (none: write a whole amount)"
        );
        for bad in ["", ".", "1,5", "1.2.3", "2e3", "$5", "+1", "- 1"] {
            assert!(
                matches!(
                    Micros::parse_in(bad, Currency::USD),
                    Err(AmountError::NotAnAmount { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            Micros::parse_in("99999999999999", Currency::USD),
            Err(AmountError::TooLarge { .. })
        ));
    }

    #[test]
    fn amounts_show_in_the_currency_decimals_with_its_symbol() {
        let jpy = Currency::try_from("JPY").unwrap();
        let chf = Currency::try_from("CHF").unwrap();
        assert_eq!(Micros(2_500_000).plain_in(Currency::USD), "2.50");
        assert_eq!(Micros(500_000_000).plain_in(jpy), "500");
        assert_eq!(
            Micros(2_125_000).plain_in(Currency::USD),
            "2.125",
            "never rounded"
        );
        assert_eq!(Currency::USD.format(Micros(1_234_500_000)), "$1,234.50");
        assert_eq!(Currency::EUR.format(Micros(-3_100_000)), "-€3.10");
        assert_eq!(jpy.format(Micros(1_500_000_000_000)), "¥1,500,000");
        assert_eq!(chf.format(Micros(12_000_000)), "CHF 12.00");
        assert_eq!(Currency::USD.format(Micros(0)), "$0.00");
        for (text, currency) in [("2.50", Currency::USD), ("500", jpy), ("0.07", chf)] {
            let micros = Micros::parse_in(text, currency).unwrap();
            assert_eq!(micros.plain_in(currency), text);
        }
    }

    #[test]
    fn micros_display_and_checked_arithmetic() {
        assert_eq!(Micros(2_500_000).to_string(), "2.500000");
        assert_eq!(Micros(-1).to_string(), "-0.000001");
        assert_eq!(Micros(i64::MAX).checked_add(Micros(1)), None);
        assert_eq!(Micros(5).checked_sub(Micros(7)), Some(Micros(-2)));
    }
}
