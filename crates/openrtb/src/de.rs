//! Field deserialisers shared by the request, response and native types.
//!
//! serde borrows a `Cow<'a, str>` field only when the field's type is exactly that; inside an
//! `Option` or a `Vec` it silently allocates every string. These helpers borrow in all three
//! shapes (and allocate only for strings with escapes, which cannot be borrowed).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

use crate::decimal::{self, Rounding};

/// A string borrowed from the input when it has no escapes.
struct BorrowedStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for BorrowedStr<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = BorrowedStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

pub(crate) fn cow<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Cow<'de, str>, D::Error> {
    BorrowedStr::deserialize(deserializer).map(|s| s.0)
}

pub(crate) fn opt_cow<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'de, str>>, D::Error> {
    Option::<BorrowedStr>::deserialize(deserializer).map(|s| s.map(|s| s.0))
}

pub(crate) fn cow_vec<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Cow<'de, str>>, D::Error> {
    // Same layout, so the collect reuses the vector's allocation.
    Vec::<BorrowedStr>::deserialize(deserializer).map(|v| v.into_iter().map(|s| s.0).collect())
}

/// `"USD"`, the default currency of floors and responses.
pub(crate) fn usd<'a>() -> Cow<'a, str> {
    Cow::Borrowed("USD")
}

/// An OpenRTB flag: `0` / `1`, and `false` / `true`, which some exchanges send.
struct FlagVisitor;

impl Visitor<'_> for FlagVisitor {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0 or 1")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(de::Unexpected::Unsigned(v), &self)),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
        }
    }
}

struct Flag(bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FlagVisitor).map(Flag)
    }
}

pub(crate) fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Flag::deserialize(deserializer).map(|f| f.0)
}

pub(crate) fn opt_flag<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<bool>, D::Error> {
    Option::<Flag>::deserialize(deserializer).map(|f| f.map(|f| f.0))
}

/// A JSON number read as exact decimal text.
fn micros<'de, D: Deserializer<'de>>(deserializer: D, rounding: Rounding) -> Result<i64, D::Error> {
    let raw = <&'de RawValue>::deserialize(deserializer)?;
    let text = raw.get();
    if !text.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        return Err(de::Error::custom(format_args!(
            "expected a number, found {}",
            text.chars().take(20).collect::<String>()
        )));
    }
    decimal::parse_micros(text, rounding).map_err(de::Error::custom)
}

/// A floor (CPM) in micros, rounded up past the sixth decimal; never negative.
pub(crate) fn floor_micros<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let micros = micros(deserializer, Rounding::Up)?;
    if micros < 0 {
        return Err(de::Error::custom("a floor cannot be negative"));
    }
    Ok(micros)
}

/// A bid price (CPM) in micros, rounded to the nearest micro.
pub(crate) fn price_micros<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    micros(deserializer, Rounding::Nearest)
}
