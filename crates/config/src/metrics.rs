//! `[metrics]`: who may read `/metrics`.

use serde::{Deserialize, Serialize};

use crate::ConfigError;

/// Who may read `/metrics` on the edge and the manager (its series name every line item's
/// budget and spend, and the ad port is public).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSection {
    /// Bearer token scrapers send (`Authorization: Bearer <token>`), from any address; at least
    /// 16 printable ASCII characters, no spaces. Unset: only loopback peers may scrape.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "secret_text"
    )]
    pub token: Option<String>,
}

/// A secret that must be text. The environment's parser reads `MARQUEE_…=0123…` as a number,
/// which would drop leading zeros and put the value into figment's type error (and so into
/// logs): a number is refused with advice instead, and never echoed.
fn secret_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("text")
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(text.to_owned()))
        }
        fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Self::Value, E> {
            Ok(Some(text))
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(not_text())
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Err(not_text())
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(not_text())
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(not_text())
        }
    }
    fn not_text<E: serde::de::Error>() -> E {
        E::custom(
            "must be text; a value of digits only is read as a number from the environment: \
             quote it (MARQUEE_METRICS__TOKEN='\"…\"') or use letters too",
        )
    }
    deserializer.deserialize_any(Text)
}

/// The token is a secret: `Debug` (a logged configuration) says only whether one is set.
impl std::fmt::Debug for MetricsSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsSection")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The shortest `metrics.token` accepted: guessing must not be an option.
pub const METRICS_TOKEN_MIN_LEN: usize = 16;

impl MetricsSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        // The token's value is never echoed: error messages end up in logs.
        let message = if token.is_empty() {
            "is empty; leave it unset to serve metrics to loopback addresses only".to_owned()
        } else if !token.bytes().all(|b| b.is_ascii_graphic()) {
            "must be printable ASCII without spaces (it is sent in an HTTP header)".to_owned()
        } else if token.len() < METRICS_TOKEN_MIN_LEN {
            format!(
                "is {} characters; it must be at least {METRICS_TOKEN_MIN_LEN}",
                token.len()
            )
        } else {
            return Ok(());
        };
        Err(ConfigError::value("metrics.token", message))
    }
}
