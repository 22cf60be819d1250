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
    fn micros_display_and_checked_arithmetic() {
        assert_eq!(Micros(2_500_000).to_string(), "2.500000");
        assert_eq!(Micros(-1).to_string(), "-0.000001");
        assert_eq!(Micros(i64::MAX).checked_add(Micros(1)), None);
        assert_eq!(Micros(5).checked_sub(Micros(7)), Some(Micros(-2)));
    }
}
