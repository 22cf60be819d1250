//! The sign-in form's token is the server's: a value the client made up, planted in the cookie
//! and posted in the field alike, is refused; the token the form was served with signs in, also
//! under the same key after a restart; an old one does not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use jiff::SignedDuration;
use marquee_dashboard::Dashboard;
use marquee_dashboard::auth::SignInKey;
use marquee_manager::Manager;
use marquee_model::{ManualClock, Role};
use marquee_store::{SqliteStore, Store};
use tower::ServiceExt as _;

use crate::common::{self, PASSWORD};

struct Site {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    manager: Arc<Manager>,
}

impl Site {
    async fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let clock = common::clock();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("m.db"), clock.clone()).unwrap());
        let manager = common::manager(&store, &clock, dir.path()).await;
        common::add_user(store.as_ref(), "root", Role::Admin, None).await;
        Site {
            dir,
            clock,
            manager,
        }
    }

    /// The dashboard's routes, with `key` when given (else a key of its own, made at random).
    fn router(&self, key: Option<SignInKey>) -> axum::Router {
        let dashboard = Dashboard::new(
            Arc::clone(&self.manager),
            self.clock.clone(),
            common::options("http://ads.test", &self.dir.path().join("uploads"), false),
        );
        let dashboard = match key {
            Some(key) => dashboard.with_sign_in_key(key),
            None => dashboard,
        };
        marquee_dashboard::router(Arc::new(dashboard))
    }
}

/// `GET /login`: the token of its cookie and of its form's hidden field.
async fn form(router: &axum::Router) -> (String, String) {
    let response = router
        .clone()
        .oneshot(Request::get("/login").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .find_map(|v| v.split(';').next()?.strip_prefix("marquee_login="))
        .expect("the sign-in form's cookie")
        .to_owned();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = String::from_utf8(body.to_vec()).unwrap();
    let marker = "name=\"csrf\" value=\"";
    let start = body.find(marker).expect("a csrf field") + marker.len();
    let field = body[start..].split('"').next().unwrap().to_owned();
    (cookie, field)
}

/// `POST /login` as root with its password, `cookie` as the sign-in cookie and `field` as the
/// form's token: the status.
async fn post(router: &axum::Router, cookie: &str, field: &str) -> StatusCode {
    let body =
        serde_urlencoded::to_string([("csrf", field), ("name", "root"), ("password", PASSWORD)])
            .unwrap();
    router
        .clone()
        .oneshot(
            Request::post("/login")
                .header(header::COOKIE, format!("marquee_login={cookie}"))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(body))
                .unwrap(),
        )
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn a_token_the_client_made_up_is_refused_in_cookie_and_field_alike() {
    let site = Site::new().await;
    let router = site.router(None);
    // Whatever shape it takes, a value the server did not issue is refused, the correct
    // password notwithstanding.
    let (issued, _) = form(&router).await;
    let (time, nonce) = issued.rsplit_once('.').unwrap().0.split_once('.').unwrap();
    let planted = [
        "attacker".to_owned(),
        "0".repeat(64),
        format!("{time}.{nonce}.{}", "0".repeat(64)),
        format!(
            "{time}.{}.{}",
            "1".repeat(32),
            issued.rsplit_once('.').unwrap().1
        ),
    ];
    for value in &planted {
        assert_eq!(
            post(&router, value, value).await,
            StatusCode::FORBIDDEN,
            "{value}"
        );
    }
    // Nothing was counted against the user name: the server's token still signs in.
    let (cookie, field) = form(&router).await;
    assert_eq!(cookie, field);
    assert_eq!(post(&router, &cookie, &field).await, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn the_server_s_token_signs_in_under_its_key_only_and_only_for_a_while() {
    let site = Site::new().await;
    let key = SignInKey::random().unwrap();
    let router = site.router(Some(key.clone()));
    let (cookie, field) = form(&router).await;
    // The field must match the cookie even when both are the server's.
    let (other, _) = form(&router).await;
    assert_eq!(post(&router, &other, &field).await, StatusCode::FORBIDDEN);
    // Another process with another key refuses it; one with the same key (the installation's,
    // after a restart) accepts it.
    assert_eq!(
        post(&site.router(None), &cookie, &field).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post(&site.router(Some(key)), &cookie, &field).await,
        StatusCode::SEE_OTHER
    );
    // Past the form's 30 minutes the token is stale, whatever the cookie's own lifetime.
    let (cookie, field) = form(&router).await;
    site.clock.advance(SignedDuration::from_mins(31));
    assert_eq!(post(&router, &cookie, &field).await, StatusCode::FORBIDDEN);
}
