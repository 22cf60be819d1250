//! Validated values the sections share, and the serde adapters that read them. Each type is
//! checked once, when the configuration is read; what holds one needs no further check.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ConfigError;

/// `value` within `min..=max`, or an error naming `key`.
pub(crate) fn in_range(key: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    Err(ConfigError::value(
        key,
        format!("is {value}; it must be between {min} and {max}"),
    ))
}

/// A duration key written as a whole number of one unit (`_ms`, `_secs`, `_hours`, `_days`):
/// the serde adapter (`#[serde(with = "…")]`) and the count in that unit, for range checks.
macro_rules! duration_unit {
    ($name:ident, $doc:literal, $from:expr, $count:expr) => {
        #[doc = $doc]
        pub(crate) mod $name {
            use std::time::Duration;

            use serde::{Deserialize, Deserializer, Serializer};

            /// The duration as the whole number written in the file.
            pub(crate) fn count(duration: &Duration) -> u64 {
                let count: fn(&Duration) -> u128 = $count;
                u64::try_from(count(duration)).unwrap_or(u64::MAX)
            }

            pub(crate) fn serialize<S: Serializer>(
                duration: &Duration,
                serializer: S,
            ) -> Result<S::Ok, S::Error> {
                serializer.serialize_u64(count(duration))
            }

            pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Duration, D::Error> {
                let from: fn(u64) -> Duration = $from;
                u64::deserialize(deserializer).map(from)
            }
        }
    };
}

duration_unit!(millis, "Milliseconds.", Duration::from_millis, |d| d
    .as_millis());
duration_unit!(secs, "Seconds.", Duration::from_secs, |d| u128::from(
    d.as_secs()
));
duration_unit!(
    hours,
    "Hours.",
    |n| Duration::from_secs(n.saturating_mul(3_600)),
    |d| u128::from(d.as_secs() / 3_600)
);
duration_unit!(
    days,
    "Days.",
    |n| Duration::from_secs(n.saturating_mul(86_400)),
    |d| u128::from(d.as_secs() / 86_400)
);

/// `Option<Duration>` in milliseconds: a key an exchange may leave to `[bidder]`.
pub(crate) mod optional_millis {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        duration: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match duration {
            Some(duration) => super::millis::serialize(duration, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        super::millis::deserialize(deserializer).map(Some)
    }
}

/// A value that an empty string means is absent (`public_url = ""` as if left out): read as
/// `None`, written back as `""` so that defaults and overrides round-trip through the file
/// format.
pub(crate) mod empty_is_none {
    use super::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer, T: Serialize>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => value.serialize(serializer),
            None => serializer.serialize_str(""),
        }
    }

    pub(crate) fn deserialize<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<String, Error: std::fmt::Display>,
    {
        let text = String::deserialize(deserializer)?;
        if text.is_empty() {
            return Ok(None);
        }
        T::try_from(text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }

    /// An exchange's override of such a value: `None` when the exchange leaves it to
    /// `[bidder]`, `Some(None)` when it sets it empty (none for that exchange).
    pub(crate) mod overridden {
        use super::{Deserializer, Serialize, Serializer};

        pub(crate) fn serialize<S: Serializer, T: Serialize>(
            value: &Option<Option<T>>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match value {
                Some(value) => super::serialize(value, serializer),
                None => serializer.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
        where
            D: Deserializer<'de>,
            T: TryFrom<String, Error: std::fmt::Display>,
        {
            super::deserialize(deserializer).map(Some)
        }
    }
}

/// A checked text value: serde reads it from a string through `TryFrom<String>` and writes it
/// back as the text it was given.
macro_rules! checked_text {
    ($(#[$meta:meta])* $name:ident, $check:expr) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(pub(crate) String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(text: String) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(&text)?;
                Ok($name(text))
            }
        }

        impl TryFrom<&str> for $name {
            type Error = String;
            fn try_from(text: &str) -> Result<Self, String> {
                $name::try_from(text.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// `Debug` shows the text (not for secrets, whose types hide it).
macro_rules! debug_as_text {
    ($name:ident) => {
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

/// `http://` and a host: a plain-HTTP address inside the deployment (TLS ends in front).
fn check_http(text: &str) -> Result<(), String> {
    match text.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(()),
        _ => Err(format!(
            "is {text:?}; it must be an http:// URL with a host"
        )),
    }
}

checked_text!(
    /// An `http://` URL with a host: the manager, an edge's log.
    HttpUrl,
    check_http
);
debug_as_text!(HttpUrl);

checked_text!(
    /// An `http://` or `https://` URL with a host: an external bidder of the gateway (real
    /// bidders are on the internet, behind TLS).
    BidderUrl,
    |text| {
        let rest = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"));
        match rest {
            Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(()),
            _ => Err(format!(
                "is {text:?}; it must be an http:// or https:// URL with a host"
            )),
        }
    }
);
debug_as_text!(BidderUrl);

checked_text!(
    /// An `http://` or `https://` URL: a passback, an exchange's user sync.
    WebUrl,
    |text| {
        if text.starts_with("https://") || text.starts_with("http://") {
            Ok(())
        } else {
            Err(format!("is {text:?}; it must be an http(s) URL"))
        }
    }
);
debug_as_text!(WebUrl);

checked_text!(
    /// A name that is a path segment: 1 to 64 letters, digits, `-` or `_` (exchanges,
    /// gateway bidders).
    Name,
    |text| {
        if is_name(text) {
            Ok(())
        } else {
            Err(format!(
                "is {text:?}; it must be 1 to 64 letters, digits, `-` or `_`"
            ))
        }
    }
);
debug_as_text!(Name);

/// 1 to 64 letters, digits, `-`, `_`.
pub(crate) fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// The shortest shared secret accepted (`aggregation.token`, `gateway.admin_token`).
pub const TOKEN_MIN_LEN: usize = 16;

checked_text!(
    /// A shared secret of at least [`TOKEN_MIN_LEN`] characters. Its value is never shown:
    /// not in errors, not in `Debug`.
    Token,
    |text| {
        if text.len() < TOKEN_MIN_LEN {
            Err(format!(
                "must be at least {TOKEN_MIN_LEN} characters (or empty for none)"
            ))
        } else {
            Ok(())
        }
    }
);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// A currency code: three upper-case letters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CurrencyCode([u8; 3]);

impl CurrencyCode {
    pub const USD: CurrencyCode = CurrencyCode(*b"USD");

    pub fn as_str(&self) -> &str {
        // Three ASCII letters, checked when made.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl TryFrom<String> for CurrencyCode {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        CurrencyCode::try_from(text.as_str())
    }
}

impl TryFrom<&str> for CurrencyCode {
    type Error = String;
    fn try_from(text: &str) -> Result<Self, String> {
        match text.as_bytes() {
            &[a, b, c] if [a, b, c].iter().all(u8::is_ascii_uppercase) => {
                Ok(CurrencyCode([a, b, c]))
            }
            _ => Err(format!("is {text:?}; it must be three upper-case letters")),
        }
    }
}

impl From<CurrencyCode> for String {
    fn from(code: CurrencyCode) -> String {
        code.as_str().to_owned()
    }
}

impl fmt::Display for CurrencyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for CurrencyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}
