//! Errors of parsing: where in the JSON, and which structural rule.

use serde::Deserialize;

/// Longest message kept from the JSON parser: it may quote the offending value, and the
/// message goes back to the exchange in a 400.
const MAX_MESSAGE: usize = 200;

/// Malformed JSON, or a value of the wrong type, at a path such as `imp[0].banner.w`
/// (`.` is the document itself).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct JsonError {
    pub path: String,
    pub message: String,
}

/// Why a bid request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed request: {0}")]
    Json(#[from] JsonError),
    #[error("invalid request: {0}")]
    Invalid(#[from] RequestError),
}

impl ParseError {
    /// A short, fixed label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Json(_) => "malformed_json",
            Self::Invalid(e) => e.label(),
        }
    }
}

/// A structural rule the request breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("this is an OpenRTB 3.0 request; only 2.5 and 2.6 are accepted")]
    OpenRtb3,
    #[error("`id` is missing or empty")]
    MissingId,
    #[error("`imp` is missing or empty")]
    NoImps,
    #[error("imp[{index}].id is missing or empty")]
    EmptyImpId { index: usize },
    #[error("imp[{index}].id {id:?} repeats an earlier imp's id")]
    DuplicateImpId { index: usize, id: String },
    #[error(
        "{path}: size {w}x{h} is not sane (each side at most {max})",
        max = crate::request::MAX_DIMENSION
    )]
    InvalidSize { path: String, w: u32, h: u32 },
    #[error("{path}: minduration {min} is above maxduration {max}")]
    DurationRange { path: String, min: u32, max: u32 },
    #[error("{path}: {code:?} is not an ISO 4217 currency code")]
    InvalidCurrency { path: String, code: String },
    #[error("{path}.id is missing or empty")]
    EmptyDealId { path: String },
    #[error("{path}.id {id:?} repeats an earlier deal's id")]
    DuplicateDealId { path: String, id: String },
}

impl RequestError {
    /// A short, fixed label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::OpenRtb3 => "openrtb3",
            Self::MissingId => "missing_id",
            Self::NoImps => "no_imps",
            Self::EmptyImpId { .. } | Self::DuplicateImpId { .. } => "imp_id",
            Self::InvalidSize { .. } => "size",
            Self::DurationRange { .. } => "duration",
            Self::InvalidCurrency { .. } => "currency",
            Self::EmptyDealId { .. } | Self::DuplicateDealId { .. } => "deal_id",
        }
    }
}

/// Deserialises `T` from JSON. The fast path is plain serde_json; only a failure pays for a
/// second pass that records the path to the error.
pub(crate) fn from_slice<'a, T: Deserialize<'a>>(input: &'a [u8]) -> Result<T, JsonError> {
    // Checking UTF-8 once over the whole input (vectorised) and parsing it as `str` costs less
    // than serde_json checking every string it meets; invalid UTF-8 falls to the slice parser,
    // which locates it.
    let parsed = match std::str::from_utf8(input) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(input),
    };
    parsed.map_err(|first| locate::<T>(input, &first))
}

fn locate<'a, T: Deserialize<'a>>(input: &'a [u8], first: &serde_json::Error) -> JsonError {
    let mut deserializer = serde_json::Deserializer::from_slice(input);
    let path = match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Err(error) => {
            return JsonError {
                path: error.path().to_string(),
                message: shorten(error.inner().to_string()),
            };
        }
        // The value itself was fine: what failed is after it (trailing characters).
        Ok(_) => ".".to_owned(),
    };
    JsonError {
        path,
        message: shorten(first.to_string()),
    }
}

fn shorten(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    message
}
