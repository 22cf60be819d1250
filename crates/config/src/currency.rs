//! `[currency]`: exchange rates for floors and bids in other currencies.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::value::CurrencyCode;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrencySection {
    /// The currency the rates are against.
    pub base: CurrencyCode,
    /// Units of each currency one unit of `base` buys, as decimal text: `{ EUR = "0.92" }`.
    /// Codes are taken in any case (environment variables reach them lower-cased); the rates
    /// are read by the money library, which names the one it cannot read.
    #[serde(deserialize_with = "rates")]
    pub rates: BTreeMap<CurrencyCode, String>,
}

impl Default for CurrencySection {
    fn default() -> Self {
        CurrencySection {
            base: CurrencyCode::USD,
            rates: BTreeMap::new(),
        }
    }
}

fn rates<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<CurrencyCode, String>, D::Error> {
    BTreeMap::<String, String>::deserialize(deserializer)?
        .into_iter()
        .map(|(code, rate)| {
            let upper = code.to_ascii_uppercase();
            CurrencyCode::try_from(upper.as_str())
                .map(|code| (code, rate))
                .map_err(|_| {
                    serde::de::Error::custom(format!("currency {upper:?} must be three letters"))
                })
        })
        .collect()
}
