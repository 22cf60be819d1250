//! API tokens: `mq_` followed by 64 hex digits (32 random bytes). Only the SHA-256 of a token is
//! stored; a fast hash is right here because tokens are long random secrets, not passwords.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use marquee_model::Principal;
use marquee_store::Store;
use sha2::{Digest, Sha256};

use crate::ApiError;

const PREFIX: &str = "mq_";

/// A new random token and its hash; show the token once, store the hash.
pub fn generate_token() -> Result<(String, [u8; 32]), getrandom::Error> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)?;
    let token = format!("{PREFIX}{}", hex::encode(secret));
    let hash = hash_token(&token);
    Ok((token, hash))
}

pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The authenticated caller, extracted from `Authorization: Bearer <token>`.
#[derive(Debug, Clone, Copy)]
pub struct Caller(pub Principal);

/// Anything that can authenticate a request for the management API.
pub trait HasStore {
    fn store(&self) -> &Arc<dyn Store>;
}

impl<S: HasStore + Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let value = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or(ApiError::Unauthorized(
                "missing Authorization header; send `Authorization: Bearer <token>`",
            ))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| t.starts_with(PREFIX))
            .ok_or(ApiError::Unauthorized(
                "malformed Authorization header; expected `Bearer mq_…`",
            ))?;
        let principal = state
            .store()
            .find_token(&hash_token(token))
            .await?
            .ok_or(ApiError::Unauthorized("unknown API token"))?;
        Ok(Caller(principal))
    }
}
