//! What the API tests share: the routes over a store, tokens, a report read, and hour rows
//! committed as a run.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use marquee_api::{RouteTable, add_routes, hash_token};
use marquee_model::{ManualClock, Role};
use marquee_stats::{Counters, RowKey};
use marquee_store::{NewToken, Store};
use tower::ServiceExt;

/// The API's routes over `store`, with the default options.
pub(crate) fn router(store: &Arc<dyn Store>, clock: Arc<ManualClock>) -> Router {
    add_routes(
        RouteTable::new(),
        Arc::clone(store),
        clock,
        "https://ads.example.com",
    )
    .into_router("test", "0")
}

/// Commits a run of these hour rows (in any order) and their line-item totals.
pub(crate) async fn commit_hours(store: &dyn Store, mut hours: Vec<(RowKey, Counters)>) {
    hours.sort_unstable_by_key(|(k, _)| *k);
    store
        .commit_run(marquee_store::stats_suite::hour_rows(hours))
        .await
        .unwrap();
}

/// A new token `{prefix}_{role}_{owner}` of `role` for `owner_id`.
pub(crate) async fn token(
    store: &dyn Store,
    prefix: &str,
    role: Role,
    owner_id: Option<u64>,
) -> String {
    let token = format!("{prefix}_{role:?}_{owner_id:?}");
    store
        .create_token(
            NewToken {
                role,
                owner_id,
                hash: hash_token(&token),
                label: "t".into(),
            },
            &marquee_store::Actor::cli(),
        )
        .await
        .unwrap();
    token
}

/// `GET /api/v1/reports?{query}` with `token`: the status, the content type and the body.
pub(crate) async fn get_report(
    router: &Router,
    token: &str,
    query: &str,
) -> (StatusCode, String, String) {
    let request = Request::get(format!("/api/v1/reports?{query}"))
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}
