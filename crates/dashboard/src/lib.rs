//! The web dashboard for ad ops: server-rendered pages (askama templates) served by the manager
//! at `/`, usable without JavaScript.
//!
//! - Sign-in with a user name and an Argon2id password hash ([`auth`]), a session cookie
//!   (`HttpOnly`, `SameSite=Lax`, `Secure` over https) and a CSRF token bound to the session
//!   on every form, checked on every POST (403 without it). The sign-in form's own token is
//!   made and verified under the server's [`auth::SignInKey`].
//! - Roles and tenancy exactly as the API's: the user's principal goes to the store with its
//!   scope, so an advertiser's user sees and edits only its own objects, and an object outside
//!   the scope answers as a missing one (404).
//! - Object forms ([`fields`], [`targeting`]) build the model's JSON and validate it with the
//!   model's own rules, as the API does; errors are shown at their fields.
//! - Delivery (home, line item pacing), reports (through the API's report builder, so scoping
//!   and numbers are the API's), charts as server-side SVG ([`chart`]), why-not-served (the
//!   engine's explain mode on the latest snapshot, the test request located by its IP address
//!   in the edges' geo databases when the dashboard has them) and the edges.
//!
//! [`router`] gives the routes; the binary merges them into the manager's router. Paths:
//! `/`, `/login`, `/logout`, `/assets/…`, `/uploads/…`, the object collections
//! (`/advertisers`, `/line-items`, …), `/reports`, `/reports.csv`, `/why-not-served`, `/edges`.

mod approval;
mod audit;
pub mod auth;
mod bulk;
pub mod chart;
pub mod fields;
mod forecast;
pub mod form;
mod guard;
pub mod limiter;
mod lists;
mod objects;
mod pages;
mod request_geo;
pub mod targeting;
mod upload;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use askama::Template;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use jiff::SignedDuration;
use marquee_api::ReportsState;
use marquee_geo::GeoSource;
use marquee_manager::Manager;
use marquee_model::{Clock, ObjectKind, Side};
use marquee_store::Store;

pub use auth::{SignedIn, hash_password};

/// The one stylesheet.
const STYLESHEET: &str = include_str!("../assets/dashboard.css");
/// The one script (progressive: pages work without it). A file, not inline, so that the
/// pages' policy allows scripts from this origin only.
const SCRIPT: &str = include_str!("../assets/dashboard.js");

/// Settings of the dashboard.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    /// The edges' public base URL, for generated ad tags and uploaded images' URLs.
    pub public_url: String,
    /// How long a session lasts after sign-in.
    pub session_lifetime: SignedDuration,
    /// Where uploaded creative images are kept (served at `/uploads/…`).
    pub uploads_dir: PathBuf,
    /// The most rows a report may have (`reports.max_rows`).
    pub report_max_rows: usize,
    /// Whether cookies are `Secure`: browsers reach the dashboard over https. The dashboard's
    /// own origin decides, not `public_url` (the edges' may differ from the manager's).
    pub secure_cookies: bool,
}

/// The dashboard's shared state.
#[derive(Debug)]
pub struct Dashboard {
    manager: Arc<Manager>,
    store: Arc<dyn Store>,
    reports: ReportsState,
    clock: Arc<dyn Clock>,
    options: DashboardOptions,
    sign_ins: limiter::SignInLimiter,
    hashing: auth::HashingSlots,
    /// Signs the sign-in form's tokens: the installation's key when given, else one made at
    /// random on first use (valid for this process only).
    sign_in_key: OnceLock<auth::SignInKey>,
    /// The geo databases the edges locate visitors with, for why-not-served's IP address.
    geo: Option<Arc<GeoSource>>,
}

impl Dashboard {
    pub fn new(manager: Arc<Manager>, clock: Arc<dyn Clock>, options: DashboardOptions) -> Self {
        let store = Arc::clone(manager.store());
        Dashboard {
            reports: ReportsState::new(
                Arc::clone(&store),
                Arc::clone(&clock),
                options.report_max_rows,
            ),
            manager,
            store,
            clock,
            options,
            sign_ins: limiter::SignInLimiter::new(limiter::SignInLimits::default()),
            hashing: auth::HashingSlots::for_this_machine(),
            sign_in_key: OnceLock::new(),
            geo: None,
        }
    }

    /// Names the gateway's bidders in reports and gives programmatic revenue's currency.
    pub fn with_programmatic(mut self, programmatic: marquee_api::ProgrammaticReports) -> Self {
        self.reports = self.reports.with_programmatic(programmatic);
        self
    }

    /// Locates why-not-served's test requests by their IP address in `geo`, the databases the
    /// edges use (without one, an address is not looked up).
    pub fn with_geo(self, geo: Option<Arc<GeoSource>>) -> Self {
        Dashboard { geo, ..self }
    }

    /// Signs the sign-in form's tokens with `key`: a key the installation keeps lets a form
    /// loaded before a restart still sign in after it.
    pub fn with_sign_in_key(self, key: auth::SignInKey) -> Self {
        Dashboard {
            sign_in_key: OnceLock::from(key),
            ..self
        }
    }

    /// The key of the sign-in form's tokens; without one given, a random one made now.
    fn sign_in_key(&self) -> Result<&auth::SignInKey, auth::AuthError> {
        if let Some(key) = self.sign_in_key.get() {
            return Ok(key);
        }
        // Two first requests at once may each make one: only the first set is ever used.
        let _ = self.sign_in_key.set(auth::SignInKey::random()?);
        self.sign_in_key
            .get()
            .ok_or_else(|| auth::AuthError::Random("no sign-in key".into()))
    }
}

/// Every dashboard route. Merge it with the manager's router; no path clashes with the API's
/// (`/api/…`), the edge's or the manager's own.
pub fn router(dashboard: Arc<Dashboard>) -> axum::Router {
    let mut router = axum::Router::new()
        .route("/", get(pages::home))
        .route("/login", get(pages::login_form).post(pages::login))
        .route("/logout", post(pages::logout))
        .route("/assets/dashboard.css", get(stylesheet))
        .route("/assets/dashboard.js", get(script))
        .route("/uploads/{file}", get(objects::uploaded))
        .route("/reports", get(pages::reports))
        .route("/reports.csv", get(pages::reports_csv))
        .route("/why-not-served", get(pages::why_not_served))
        .route("/edges", get(pages::edges))
        .route("/audit", get(audit::page))
        .route("/line-items/{id}/placements", post(objects::link_placement))
        .route("/line-items/{id}/creatives", post(objects::assign_creative))
        .route("/line-items/{id}/copy", post(objects::copy_line_item))
        .route("/creatives/{id}/approval", post(approval::review));
    for kind in ObjectKind::ALL {
        let collection = format!("/{}", kind.collection());
        router = router
            .route(
                &collection,
                get(move |s, h, q| lists::list(s, h, q, kind))
                    .post(move |s, h, b| objects::create(s, h, b, kind)),
            )
            .route(
                &format!("{collection}/new"),
                get(move |s, h, q| objects::new_form(s, h, q, kind)),
            )
            .route(
                &format!("{collection}/{{id}}"),
                get(move |s, h, p, q| objects::show(s, h, p, q, kind))
                    .post(move |s, h, p, b| objects::update(s, h, p, b, kind)),
            )
            .route(
                &format!("{collection}/{{id}}/archive"),
                post(move |s, h, p, b| guard::archive(s, h, p, b, kind)),
            )
            .route(
                &format!("{collection}/bulk"),
                post(move |s, h, b| bulk::bulk(s, h, b, kind)),
            );
    }
    router.with_state(dashboard)
}

async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", STYLESHEET)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// What the navigation shows: the user and the sections its role may open.
#[derive(Debug, Clone)]
pub struct Nav {
    pub user: String,
    pub role: &'static str,
    pub csrf: String,
    pub active: &'static str,
    pub demand: bool,
    pub supply: bool,
}

impl Nav {
    fn new(user: &SignedIn, active: &'static str) -> Nav {
        let side = user.role.side();
        Nav {
            user: user.name.clone(),
            role: user.role.as_str(),
            csrf: user.csrf_token.clone(),
            active,
            demand: side.is_none_or(|s| s == Side::Demand),
            supply: side.is_none_or(|s| s == Side::Supply),
        }
    }

    /// `class="active"` for the current section's link.
    pub fn class(&self, section: &str) -> &'static str {
        if self.active == section { "active" } else { "" }
    }
}

/// A page that stops the request: sign-in needed, forbidden, missing, bad input, failure.
#[derive(Debug)]
pub enum PageError {
    SignIn,
    Forbidden(String),
    NotFound(String),
    BadRequest(String),
    Internal(String),
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    title: &'a str,
    message: &'a str,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, title, message) = match &self {
            PageError::SignIn => return Redirect::to("/login").into_response(),
            PageError::Forbidden(m) => (StatusCode::FORBIDDEN, "Not allowed", m.as_str()),
            PageError::NotFound(m) => (StatusCode::NOT_FOUND, "Not found", m.as_str()),
            PageError::BadRequest(m) => (StatusCode::BAD_REQUEST, "Cannot do that", m.as_str()),
            PageError::Internal(m) => {
                tracing::error!(error = %m, "dashboard page failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Something went wrong",
                    "The server failed; the error is in its log.",
                )
            }
        };
        let page = MessagePage { title, message };
        (status, html(&page)).into_response()
    }
}

impl From<auth::AuthError> for PageError {
    fn from(error: auth::AuthError) -> Self {
        PageError::Internal(error.to_string())
    }
}

impl From<marquee_store::StoreError> for PageError {
    fn from(error: marquee_store::StoreError) -> Self {
        use marquee_store::StoreError as E;
        match error {
            E::NotFound { .. } | E::ParentNotFound { .. } => PageError::NotFound(error.to_string()),
            E::Migration(_) | E::Corrupt(_) | E::Backend(_) => {
                PageError::Internal(error.to_string())
            }
            other => PageError::BadRequest(other.to_string()),
        }
    }
}

impl From<marquee_api::WriteRefused> for PageError {
    fn from(error: marquee_api::WriteRefused) -> Self {
        PageError::Forbidden(error.to_string())
    }
}

impl From<marquee_api::ApiError> for PageError {
    fn from(error: marquee_api::ApiError) -> Self {
        use marquee_api::ApiError as E;
        match error {
            E::Forbidden(m) | E::ForbiddenFields { message: m, .. } => PageError::Forbidden(m),
            E::NotFound(m) => PageError::NotFound(m),
            E::Internal(m) => PageError::Internal(m),
            other => PageError::BadRequest(other.to_string()),
        }
    }
}

/// Renders a template as an HTML response (a failure to render is a 500).
fn html<T: Template>(page: &T) -> Response {
    match page.render() {
        Ok(body) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                // Pages run no inline code (only the script file they ship), and are never
                // framed.
                (
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(
                        "default-src 'self'; img-src 'self' https: http: data:; \
                         style-src 'self'; script-src 'self'; \
                         frame-src 'self'; frame-ancestors 'none'",
                    ),
                ),
                (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            ],
            body,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "template failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "template failed\n").into_response()
        }
    }
}

/// The signed-in user, or the sign-in page.
async fn require_user(dashboard: &Dashboard, headers: &HeaderMap) -> Result<SignedIn, PageError> {
    auth::signed_in(&*dashboard.store, headers, dashboard.clock.now())
        .await?
        .ok_or(PageError::SignIn)
}

/// The signed-in user if an admin; `refusal` (saying what is the admin's) as a 403 otherwise.
async fn require_admin(
    dashboard: &Dashboard,
    headers: &HeaderMap,
    refusal: &str,
) -> Result<SignedIn, PageError> {
    let user = require_user(dashboard, headers).await?;
    if !user.is_admin() {
        return Err(PageError::Forbidden(refusal.into()));
    }
    Ok(user)
}

/// Checks a POST's CSRF token against the session's; 403 otherwise.
fn check_csrf(user: &SignedIn, form: &form::FormData) -> Result<(), PageError> {
    if auth::same_secret(form.get(auth::CSRF_FIELD), &user.csrf_token) {
        return Ok(());
    }
    Err(PageError::Forbidden(
        "the form's security token is missing or stale; reload the page and try again".into(),
    ))
}

/// Whether the user's role may open objects of `kind` at all (the API's rule).
fn may_access(user: &SignedIn, kind: ObjectKind) -> Result<(), PageError> {
    if user.principal().may_access(kind) {
        return Ok(());
    }
    Err(PageError::Forbidden(format!(
        "{} users cannot open {}",
        user.role.as_str(),
        kind.collection()
    )))
}

/// The id in a path, or 404.
fn path_id(Path(id): Path<String>) -> Result<u64, PageError> {
    id.parse::<u64>()
        .ok()
        .filter(|&id| id > 0)
        .ok_or_else(|| PageError::NotFound(format!("{id:?} is not an id")))
}
