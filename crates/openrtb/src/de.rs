//! Field deserialisers shared by the request, response and native types.
//!
//! serde borrows a `Cow<'a, str>` field only when the field's type is exactly that; inside an
//! `Option` or a `Vec` it silently allocates every string. These helpers borrow in all three
//! shapes (and allocate only for strings with escapes, which cannot be borrowed).
//!
//! `null` for an optional member is read as the member absent, whatever its type: exchanges
//! written in Go send `"bcat": null`, `"mimes": null`, `"w": null` for what they leave out.
//! Only a member without a default (`native.request`) refuses it.

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

/// A required string (`null` is an error, located at the member).
pub(crate) fn cow<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Cow<'de, str>, D::Error> {
    BorrowedStr::deserialize(deserializer).map(|s| s.0)
}

/// A string whose absence (and `null`) is empty: the checks after parsing say when it must
/// not be (`id`, `imp.id`, a deal's `id`).
pub(crate) fn cow_or_empty<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Cow<'de, str>, D::Error> {
    opt_cow(deserializer).map(Option::unwrap_or_default)
}

/// A currency whose absence (and `null`) is `USD`.
pub(crate) fn cow_or_usd<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Cow<'de, str>, D::Error> {
    opt_cow(deserializer).map(|s| s.unwrap_or_else(usd))
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
    Option::<Vec<BorrowedStr>>::deserialize(deserializer)
        .map(|v| v.unwrap_or_default().into_iter().map(|s| s.0).collect())
}

/// Any member with a `Default`: `null` is the default, as the member absent.
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

/// A media object of an imp (`banner`, `video`, `audio`, `native`) read on its own, so that a
/// malformed one is left out of its imp (see [`Unreadable`]) instead of refusing the request.
pub(crate) fn media<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Unreadable,
{
    let Some(raw) = Option::<&'de RawValue>::deserialize(deserializer)? else {
        return Ok(None);
    };
    Ok(Some(
        crate::error::from_slice(raw.get().as_bytes()).unwrap_or_else(T::unreadable),
    ))
}

/// A media object that could not be read: it stands in its imp's field, error attached, until
/// the checks after parsing move the error to `Imp::dropped` and empty the field.
pub(crate) trait Unreadable {
    fn unreadable(error: crate::error::JsonError) -> Self;
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

/// A flag; `null` is `0`, as the flag absent.
pub(crate) fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Option::<Flag>::deserialize(deserializer).map(|f| f.is_some_and(|f| f.0))
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

/// A floor (CPM) in micros, rounded up past the sixth decimal; never negative. `null` is no
/// floor, as the member absent.
pub(crate) fn floor_micros<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let Some(micros) = Option::<Micros>::deserialize(deserializer)? else {
        return Ok(0);
    };
    let micros = micros.0;
    if micros < 0 {
        return Err(de::Error::custom("a floor cannot be negative"));
    }
    Ok(micros)
}

/// A floor's number, for `Option` to tell it from `null`.
struct Micros(i64);

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        micros(deserializer, Rounding::Up).map(Micros)
    }
}

/// A bid price (CPM) in micros, rounded to the nearest micro.
pub(crate) fn price_micros<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    micros(deserializer, Rounding::Nearest)
}
