//! Sign-in: argon2 password hashes, sessions in a cookie, CSRF tokens bound to the session.
//!
//! - A session id is 32 random bytes sent to the browser (base16) in an `HttpOnly`,
//!   `SameSite=Lax` cookie (`Secure` when the dashboard is served over https); only its
//!   SHA-256 is stored, so a database leak yields no usable session.
//! - Each session has its own CSRF token (synchronizer pattern): every form carries it in a
//!   hidden field and every POST must send it back, compared in constant time; else 403.
//! - Expiry is judged here, by the injected clock, against the stored `expires_at`.
//! - The sign-in form itself carries a token the server made ([`SignInKey`]): its issue time
//!   and a random nonce, with an HMAC-SHA256 of both under a key only the server holds. It is
//!   sent in the form and in a short-lived pre-session cookie, and a sign-in is accepted only
//!   when the two are equal, the MAC verifies and the token is younger than its lifetime. A
//!   value the client makes up is refused, so a foreign site cannot plant one in the cookie
//!   and post it to sign a browser into an account of its choosing; a token it fetched from
//!   this server stays usable for its lifetime (see `SECURITY.md`).

use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use axum::http::HeaderMap;
use axum::http::header;
use hmac::{Hmac, KeyInit, Mac};
use jiff::Timestamp;
use marquee_model::{Principal, Role};
use marquee_store::{Actor, NewSession, SessionRecord, Store, StoreError, UserRecord};
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

    /// Who the audit log names for this user's changes.
    pub fn actor(&self) -> Actor {
        Actor::user(&self.name, self.role)
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

/// How many bytes a [`SignInKey`] has: SHA-256's block size, the longest key HMAC uses as it is.
pub const SIGN_IN_KEY_BYTES: usize = 64;

/// The server's key for sign-in form tokens.
#[derive(Clone)]
pub struct SignInKey([u8; SIGN_IN_KEY_BYTES]);

impl std::fmt::Debug for SignInKey {
    // Never the key itself: it could end up in a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignInKey(..)")
    }
}

/// What a sign-in token's MAC covers before its issue time and nonce, so that no MAC made
/// under the same key for another purpose can pass for one.
const SIGN_IN_LABEL: &[u8] = b"marquee sign-in form v1";
/// How far in the future a token's issue time may be: the clock may step back a little.
const SIGN_IN_SKEW_SECS: i64 = 60;

impl SignInKey {
    /// A fresh random key.
    pub fn random() -> Result<SignInKey, AuthError> {
        let mut bytes = [0u8; SIGN_IN_KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| AuthError::Random(e.to_string()))?;
        Ok(SignInKey(bytes))
    }

    /// A key written as 128 hex digits (surrounding white space ignored).
    pub fn from_hex(text: &str) -> Option<SignInKey> {
        let mut bytes = [0u8; SIGN_IN_KEY_BYTES];
        hex::decode_to_slice(text.trim(), &mut bytes).ok()?;
        Some(SignInKey(bytes))
    }

    /// The key as 128 hex digits, for the file it is kept in.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    fn mac(&self, issued: i64, nonce: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new(&self.0.into());
        mac.update(SIGN_IN_LABEL);
        mac.update(format!(".{issued}.{nonce}").as_bytes());
        mac
    }

    /// A new sign-in token issued at `now`: `ISSUED.NONCE.MAC`, the issue time in Unix
    /// seconds, a random 128-bit nonce and the MAC, both in hex.
    pub fn issue(&self, now: Timestamp) -> Result<String, AuthError> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| AuthError::Random(e.to_string()))?;
        let nonce = hex::encode(nonce);
        let issued = now.as_second();
        let tag = hex::encode(self.mac(issued, &nonce).finalize().into_bytes());
        Ok(format!("{issued}.{nonce}.{tag}"))
    }

    /// Whether `token` was issued under this key and is less than `lifetime_secs` old at `now`.
    pub fn verifies(&self, token: &str, now: Timestamp, lifetime_secs: i64) -> bool {
        let mut parts = token.split('.');
        let (Some(issued), Some(nonce), Some(tag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let (Ok(issued_secs), Ok(tag)) = (issued.parse::<i64>(), hex::decode(tag)) else {
            return false;
        };
        // Canonical text only: one issue time has one spelling.
        if issued_secs.to_string() != issued {
            return false;
        }
        // Constant-time comparison of the tag, done by the hmac crate.
        if self.mac(issued_secs, nonce).verify_slice(&tag).is_err() {
            return false;
        }
        let age = now.as_second().saturating_sub(issued_secs);
        (-SIGN_IN_SKEW_SECS..lifetime_secs).contains(&age)
    }
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
    fn sign_in_tokens_verify_under_their_key_for_their_lifetime_only() {
        let key = SignInKey::random().unwrap();
        let now = Timestamp::from_second(1_795_000_000).unwrap();
        let token = key.issue(now).unwrap();
        assert_ne!(token, key.issue(now).unwrap(), "a nonce each");
        assert!(key.verifies(&token, now, 60));
        assert!(key.verifies(&token, Timestamp::from_second(1_795_000_059).unwrap(), 60));
        assert!(!key.verifies(&token, Timestamp::from_second(1_795_000_060).unwrap(), 60));
        // Issued too far in the future of this clock.
        assert!(!key.verifies(&token, Timestamp::from_second(1_794_999_000).unwrap(), 60));
        assert!(!SignInKey::random().unwrap().verifies(&token, now, 60));
        // A different issue time (a later one, to outlive the lifetime), or the same spelled
        // otherwise, or any part changed, breaks the MAC or the format.
        let (issued, rest) = token.split_once('.').unwrap();
        for forged in [
            format!("1795000030.{rest}"),
            format!("+{issued}.{rest}"),
            format!("0{issued}.{rest}"),
            format!("{token}0"),
            format!("{token}.0"),
            token.replacen('.', "", 1),
            String::new(),
            "attacker".into(),
        ] {
            assert!(!key.verifies(&forged, now, 60), "{forged}");
        }
        let copy = SignInKey::from_hex(&format!(" {}\n", key.to_hex())).unwrap();
        assert!(copy.verifies(&token, now, 60));
        assert!(SignInKey::from_hex(&key.to_hex()[2..]).is_none());
        assert_eq!(format!("{key:?}"), "SignInKey(..)");
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
