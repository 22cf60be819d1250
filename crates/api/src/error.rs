//! The one place where every failure becomes an HTTP status and a JSON body.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use marquee_model::{ValidationError, Violation};
use marquee_store::StoreError;
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    /// The role may not set these fields (see `roles::admin_fields`).
    #[error("{message}")]
    ForbiddenFields {
        message: String,
        fields: Vec<Violation>,
    },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The request could not be read: malformed JSON, unknown or mistyped fields, bad query.
    #[error("{message}")]
    BadRequest {
        message: String,
        fields: Vec<Violation>,
    },
    /// The request was read but breaks a rule.
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    #[error("{message}")]
    Conflict {
        message: String,
        current_version: Option<u64>,
    },
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The request body is over [`crate::MAX_BODY_BYTES`].
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The server is at capacity for this kind of request; the client should try again after
    /// `retry_after_secs`.
    #[error("{message}")]
    Unavailable {
        message: String,
        retry_after_secs: u64,
    },
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// A request field that could not be read, named by its path.
    pub fn bad_field(path: impl Into<String>, message: impl Into<String>) -> Self {
        let path = path.into();
        let message = message.into();
        ApiError::BadRequest {
            message: format!("{path}: {message}"),
            fields: vec![Violation { path, message }],
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::ForbiddenFields { .. } => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) | ApiError::ForbiddenFields { .. } => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::BadRequest { .. } => "bad_request",
            ApiError::Invalid(_) => "validation_failed",
            ApiError::Conflict { .. } => "conflict",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::Unavailable { .. } => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound { .. } => ApiError::NotFound(error.to_string()),
            // A parent outside the caller's scope looks exactly like a missing one.
            StoreError::ParentNotFound { kind, .. }
            | StoreError::ParentArchived { kind, .. }
            | StoreError::ParentImmutable { kind, .. } => {
                let field = match error {
                    StoreError::ParentImmutable { kind, .. } => kind.parent_field(),
                    _ => None,
                }
                .map_or_else(|| format!("{}_id", kind.name()), str::to_owned);
                ApiError::Invalid(ValidationError::single(field, error.to_string()))
            }
            StoreError::VersionConflict { current, .. } => ApiError::Conflict {
                message: error.to_string(),
                current_version: Some(current),
            },
            StoreError::Archived { .. } => ApiError::Conflict {
                message: error.to_string(),
                current_version: None,
            },
            StoreError::OtherAdvertiser { .. } | StoreError::UploadedUnder { .. } => {
                ApiError::Invalid(ValidationError::single("creative_id", error.to_string()))
            }
            StoreError::BadTokenOwner { .. }
            | StoreError::BadUserOwner { .. }
            | StoreError::UserNameTaken { .. }
            | StoreError::UnknownUser { .. } => ApiError::bad_request(error.to_string()),
            StoreError::Busy { retry_after_secs } => ApiError::Unavailable {
                message: error.to_string(),
                retry_after_secs,
            },
            StoreError::Migration(_)
            | StoreError::Corrupt(_)
            | StoreError::CheckpointMoved(_)
            | StoreError::Backend(_) => ApiError::Internal(error.to_string()),
        }
    }
}

/// An axum rejection by its status: the client's fault is a bad request, the rest (a route
/// whose parameters do not fit its handler) an internal error.
fn rejected(status: StatusCode, text: String) -> ApiError {
    if status.is_server_error() {
        ApiError::Internal(text)
    } else {
        ApiError::bad_request(text)
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(format!(
                "request body over the limit of {} bytes",
                crate::MAX_BODY_BYTES
            ))
        } else {
            rejected(rejection.status(), rejection.body_text())
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        if let PathRejection::FailedToDeserializePathParams(error) = &rejection
            && let ErrorKind::InvalidUtf8InPathParam { key } = error.kind()
        {
            return ApiError::bad_field(key.clone(), "is not valid UTF-8");
        }
        rejected(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        rejected(rejection.status(), rejection.body_text())
    }
}

impl From<crate::WriteRefused> for ApiError {
    fn from(error: crate::WriteRefused) -> Self {
        ApiError::Forbidden(error.to_string())
    }
}

impl From<crate::RuleError> for ApiError {
    fn from(error: crate::RuleError) -> Self {
        match error {
            crate::RuleError::Fields(refused) => ApiError::ForbiddenFields {
                message: refused.to_string(),
                fields: refused.violations(),
            },
            crate::RuleError::Json(detail) => ApiError::Internal(detail),
        }
    }
}

impl From<crate::CurrencyRuleError> for ApiError {
    fn from(error: crate::CurrencyRuleError) -> Self {
        match error {
            crate::CurrencyRuleError::Broken(violation) => ApiError::Invalid(violation),
            crate::CurrencyRuleError::Store(error) => error.into(),
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    status: u16,
    code: &'static str,
    message: String,
    #[serde(skip_serializing_if = "<[Violation]>::is_empty")]
    fields: &'a [Violation],
    #[serde(skip_serializing_if = "Option::is_none")]
    current_version: Option<u64>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let (message, fields, current_version) = match &self {
            ApiError::Internal(detail) => {
                // The detail may name tables or paths; log it, do not send it.
                tracing::error!(%detail, "internal error in management API");
                ("internal error".to_owned(), &[][..], None)
            }
            ApiError::Invalid(e) => (
                format!("{} invalid field(s): {e}", e.violations.len()),
                &e.violations[..],
                None,
            ),
            ApiError::BadRequest { message, fields }
            | ApiError::ForbiddenFields { message, fields } => (message.clone(), &fields[..], None),
            ApiError::Conflict {
                message,
                current_version,
            } => (message.clone(), &[][..], *current_version),
            other => (other.to_string(), &[][..], None),
        };
        let body = Body {
            error: ErrorBody {
                status: status.as_u16(),
                code: self.code(),
                message,
                fields,
                current_version,
            },
        };
        let mut response = (status, axum::Json(body)).into_response();
        match self {
            ApiError::Unauthorized(_) => {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            ApiError::Unavailable {
                retry_after_secs, ..
            } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, retry_after_secs.into());
            }
            _ => {}
        }
        response
    }
}
