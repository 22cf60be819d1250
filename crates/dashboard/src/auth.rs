//! Sign-in: argon2 password hashes, sessions in a cookie, CSRF tokens bound to the session.
//!
//! - A session id is 32 random bytes sent to the browser (base16) in an `HttpOnly`,
//!   `SameSite=Lax` cookie (`Secure` when the dashboard is served over https); only its
//!   SHA-256 is stored, so a database leak yields no usable session.
//! - Each session has its own CSRF token (synchronizer pattern): every form carries it in a
//!   hidden field and every POST must send it back, compared in constant time; else 403.
//! - Expiry is judged here, by the injected clock, against the stored `expires_at`.
//! - The sign-in form itself carries a token bound to a short-lived pre-session cookie, so a
//!   foreign site cannot sign a browser into an account of its choosing.

use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use axum::http::HeaderMap;
use axum::http::header;
use jiff::Timestamp;
use marquee_model::{Principal, Role};
use marquee_store::{NewSession, SessionRecord, Store, StoreError, UserRecord};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "marquee_session";
/// Name of the cookie that binds the sign-in form's token.
pub const LOGIN_COOKIE: &str = "marquee_login";
/// Name of the hidden form field with the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot hash the password: {0}")]
    Hash(String),
    #[error("no randomness available: {0}")]
    Random(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The signed-in user, as every page sees it.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub user_id: u64,
    pub name: String,
    pub role: Role,
    pub owner_id: Option<u64>,
    pub csrf_token: String,
}

impl SignedIn {
    fn from_session(session: SessionRecord) -> SignedIn {
        let UserRecord {
            id,
            name,
            role,
            owner_id,
            ..
        } = session.user;
        SignedIn {
            user_id: id,
            name,
            role,
            owner_id,
            csrf_token: session.csrf_token,
        }
    }

    /// The principal the store and the API's rules see: the same roles and scopes as a token.
    pub fn principal(&self) -> Principal {
        Principal {
            token_id: self.user_id,
            role: self.role,
            owner_id: self.owner_id,
        }
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// Hashes a password with Argon2id and a random salt, as a PHC string.
pub fn hash_password(password: &str) -> Result<String, AuthError> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|e| AuthError::Hash(e.to_string()))
}

/// Whether `password` matches the PHC string `hash` (parameters are read from the hash).
pub fn verify_password(password: &str, hash: &str) -> bool {
    Argon2::default()
        .verify_password(password.as_bytes(), hash)
        .is_ok()
}

/// 32 random bytes as 64 hex digits.
pub fn random_token() -> Result<String, AuthError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(hex::encode(bytes))
}

fn session_hash(session_id: &str) -> [u8; 32] {
    Sha256::digest(session_id.as_bytes()).into()
}

/// Compares two secrets in time independent of where they differ.
pub fn same_secret(sent: &str, expected: &str) -> bool {
    marquee_model::same_secret(sent.as_bytes(), expected.as_bytes())
}

/// The value of cookie `name` in the request, if any.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, path `/`, Secure when asked.
pub fn set_cookie(name: &str, value: &str, max_age_secs: i64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}")
}

/// Bounds how many password checks run at once. Each is an Argon2id hash of about 19 MiB on
/// tokio's blocking pool, which the SQLite store's calls share: a flood of sign-ins would
/// otherwise queue hundreds of them, take gigabytes and stall the store. Past the bound an
/// attempt is refused at once rather than queued.
#[derive(Debug)]
pub struct HashingSlots {
    slots: Arc<Semaphore>,
}

impl HashingSlots {
    pub fn new(slots: usize) -> Self {
        HashingSlots {
            slots: Arc::new(Semaphore::new(slots)),
        }
    }

    /// Two slots per core (at least two): enough to keep the cores busy hashing, little
    /// memory, and most of the blocking pool left to the store.
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        HashingSlots::new((2 * cores).max(2))
    }

    /// A slot, or `None` when every slot is taken.
    pub fn try_take(&self) -> Option<HashingSlot> {
        Arc::clone(&self.slots)
            .try_acquire_owned()
            .ok()
            .map(|permit| HashingSlot { _permit: permit })
    }
}

/// A taken slot of [`HashingSlots`], free again when dropped.
#[derive(Debug)]
pub struct HashingSlot {
    _permit: OwnedSemaphorePermit,
}

/// Checks a user name and password in `slot`; the user on success. A missing user costs a hash
/// too, so timing does not tell which names exist.
pub async fn check_password(
    store: &dyn Store,
    name: &str,
    password: &str,
    slot: HashingSlot,
) -> Result<Option<UserRecord>, AuthError> {
    let user = store.find_user(name).await?;
    let hash = user.as_ref().map(|u| u.password_hash.as_str());
    let password = password.to_owned();
    let stored = hash.map(str::to_owned);
    let matches = tokio::task::spawn_blocking(move || {
        // The slot goes with the hash, not with the request: a client that hangs up does not
        // stop the hash, so neither does it free the slot.
        let _slot = slot;
        match stored {
            Some(hash) => verify_password(&password, &hash),
            None => {
                // Same work as a real check, result ignored.
                let _ = hash_password(&password);
                false
            }
        }
    })
    .await
    .unwrap_or(false);
    Ok(user.filter(|_| matches))
}

/// Starts a session for `user`: the session id for the cookie.
pub async fn start_session(
    store: &dyn Store,
    user: &UserRecord,
    expires_at: Timestamp,
) -> Result<String, AuthError> {
    let session_id = random_token()?;
    store
        .create_session(NewSession {
            hash: session_hash(&session_id),
            user_id: user.id,
            csrf_token: random_token()?,
            expires_at,
        })
        .await?;
    Ok(session_id)
}

/// The signed-in user of a request: its session cookie names a stored session that has not
/// expired at `now`.
pub async fn signed_in(
    store: &dyn Store,
    headers: &HeaderMap,
    now: Timestamp,
) -> Result<Option<SignedIn>, AuthError> {
    let Some(session_id) = cookie(headers, SESSION_COOKIE) else {
        return Ok(None);
    };
    let Some(session) = store.find_session(&session_hash(session_id)).await? else {
        return Ok(None);
    };
    if session.expires_at <= now {
        return Ok(None);
    }
    Ok(Some(SignedIn::from_session(session)))
}

/// Ends the session the request's cookie names, if any.
pub async fn end_session(store: &dyn Store, headers: &HeaderMap) -> Result<(), AuthError> {
    if let Some(session_id) = cookie(headers, SESSION_COOKIE) {
        store.delete_session(&session_hash(session_id)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct horse ", &hash));
        assert!(!verify_password("", &hash));
        assert!(!verify_password("correct horse", "not a phc string"));
        assert_ne!(hash, hash_password("correct horse").unwrap(), "salted");
    }

    #[test]
    fn hashing_slots_refuse_past_their_bound_until_one_is_free() {
        let slots = HashingSlots::new(2);
        let mut taken: Vec<HashingSlot> = (0..2).map(|_| slots.try_take().unwrap()).collect();
        // Every attempt past the bound is refused at once, not queued.
        for _ in 0..3 {
            assert!(slots.try_take().is_none());
        }
        drop(taken.pop());
        assert!(slots.try_take().is_some());
        assert!(HashingSlots::for_this_machine().slots.available_permits() >= 2);
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; marquee_session_x=2"),
        );
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("marquee_session=abc"),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, "a"), Some("1"));
        assert_eq!(cookie(&headers, "b"), None);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("ab", "abc"));
        assert!(!same_secret("", "abc"));
    }

    #[test]
    fn session_cookies_are_http_only_and_same_site() {
        let plain = set_cookie(SESSION_COOKIE, "v", 60, false);
        assert_eq!(
            plain,
            "marquee_session=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=60"
        );
        assert!(set_cookie(SESSION_COOKIE, "v", 60, true).ends_with("; Secure"));
    }
}
