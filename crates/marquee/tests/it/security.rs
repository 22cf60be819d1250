//! Security of `marquee serve` end to end: every management route from the OpenAPI document
//! refuses anonymous and wrong-tenant calls; SQL-injection strings through every filter are
//! data; object names with XSS strings are escaped on every dashboard page; no open redirect
//! (click endpoint, sign-in); sign-in attempts are rate limited.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;

use common::{Server, create_advertiser_token, get_json, get_text, token_from};
use reqwest::StatusCode;
use reqwest::redirect::Policy;
use serde_json::{Value, json};

const PUBLIC: &str = "https://site.example";

struct Setup {
    server: Server,
    admin: String,
    /// A token of advertiser 1.
    tenant: String,
    client: reqwest::Client,
}

async fn setup(data: &std::path::Path) -> Setup {
    let server = Server::start_with(data, &["--demo"], &[("MARQUEE_EDGE__PUBLIC_URL", PUBLIC)]);
    let admin = token_from(&server.stderr_line("demo admin token"));
    let output = create_advertiser_token(data.to_str().unwrap(), "1");
    assert!(output.status.success(), "{output:?}");
    let tenant = token_from(&String::from_utf8_lossy(&output.stdout));
    let client = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    Setup {
        server,
        admin,
        tenant,
        client,
    }
}

async fn items(setup: &Setup, collection: &str) -> Vec<Value> {
    let url = setup.server.url(&format!("/api/v1/{collection}?limit=200"));
    let list = get_json(&setup.client, &url, Some(&setup.admin)).await;
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{url}: {list}"))
        .clone()
}

fn ids_where(items: &[Value], keep: impl Fn(&Value) -> bool) -> BTreeSet<u64> {
    items
        .iter()
        .filter(|item| keep(item))
        .map(|item| item["id"].as_u64().unwrap())
        .collect()
}

/// The ids advertiser 1 owns and the ids it does not, per demand collection.
struct Tenancy {
    own: Vec<(&'static str, BTreeSet<u64>)>,
    foreign: Vec<(&'static str, BTreeSet<u64>)>,
}

impl Tenancy {
    async fn of_advertiser_1(setup: &Setup) -> Tenancy {
        let campaigns = items(setup, "campaigns").await;
        let line_items = items(setup, "line-items").await;
        let creatives = items(setup, "creatives").await;
        let own_campaigns = ids_where(&campaigns, |c| c["advertiser_id"] == 1);
        let own_line_items = ids_where(&line_items, |l| {
            own_campaigns.contains(&l["campaign_id"].as_u64().unwrap())
        });
        let own_creatives = ids_where(&creatives, |c| {
            own_line_items.contains(&c["line_item_id"].as_u64().unwrap())
        });
        let all = |list: &[Value]| ids_where(list, |_| true);
        let foreign = |list: &[Value], own: &BTreeSet<u64>| -> BTreeSet<u64> {
            all(list).difference(own).copied().collect()
        };
        let advertisers = all(&items(setup, "advertisers").await);
        let own_advertisers = BTreeSet::from([1]);
        Tenancy {
            foreign: vec![
                ("advertisers", foreign_ids(&advertisers, &own_advertisers)),
                ("campaigns", foreign(&campaigns, &own_campaigns)),
                ("line-items", foreign(&line_items, &own_line_items)),
                ("creatives", foreign(&creatives, &own_creatives)),
            ],
            own: vec![
                ("advertisers", own_advertisers),
                ("campaigns", own_campaigns),
                ("line-items", own_line_items),
                ("creatives", own_creatives),
            ],
        }
    }

    fn foreign_of(&self, collection: &str) -> Option<&BTreeSet<u64>> {
        self.foreign
            .iter()
            .find(|(name, _)| *name == collection)
            .map(|(_, ids)| ids)
    }

    fn own_of(&self, collection: &str) -> Option<&BTreeSet<u64>> {
        self.own
            .iter()
            .find(|(name, _)| *name == collection)
            .map(|(_, ids)| ids)
    }
}

fn foreign_ids(all: &BTreeSet<u64>, own: &BTreeSet<u64>) -> BTreeSet<u64> {
    all.difference(own).copied().collect()
}

async fn call(
    setup: &Setup,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (StatusCode, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = setup.client.request(method, setup.server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    answer(request).await
}

/// Sends `request`: the status and body of its answer.
async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, String) {
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

/// The collection a path is about (`/api/v1/line-items/{id}/placements` → `line-items`).
fn collection_of(path: &str) -> &str {
    path.trim_start_matches("/api/v1/")
        .split('/')
        .next()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_management_route_refuses_anonymous_and_wrong_tenant_calls() {
    let data = tempfile::tempdir().unwrap();
    let setup = setup(data.path()).await;
    let tenancy = Tenancy::of_advertiser_1(&setup).await;
    let document = get_json(
        &setup.client,
        &setup.server.url("/api/v1/openapi.json"),
        None,
    )
    .await;
    let mut checked = 0;
    let mut public = Vec::new();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let method = method.to_ascii_uppercase();
            if operation["security"] == json!([]) {
                public.push(format!("{method} {path}"));
                continue;
            }
            checked += 1;
            // A forecast's body is a line item's: another tenant's line item, proposed.
            let forecast = path == "/api/v1/forecasts";
            let collection = if forecast {
                "line-items"
            } else {
                collection_of(path)
            };
            let foreign = tenancy.foreign_of(collection);
            // Supply objects are outside an advertiser's reach altogether: any id will do.
            let target = foreign.map_or(1, |ids| *ids.first().unwrap());
            // A library creative of advertiser 2's under its line item: foreign either way.
            let foreign_creative = tenancy
                .foreign_of("creatives")
                .map_or(1, |ids| *ids.first().unwrap());
            let concrete = path
                .replace("{id}", &target.to_string())
                .replace("{placement_id}", "1")
                .replace("{creative_id}", &foreign_creative.to_string());
            let concrete = if concrete == "/api/v1/reports" {
                "/api/v1/reports?from=2026-01-01&to=2027-01-01&group_by=advertiser&advertiser=2"
                    .to_owned()
            } else {
                concrete
            };
            // The foreign object itself as the body: a valid body, so only authorization can
            // refuse it.
            // Operations whose body is not an object's: valid bodies of their own.
            let own_body = if path.ends_with("/bulk") {
                Some(json!({ "action": "pause", "ids": [target] }))
            } else if path.ends_with("/approval") {
                Some(json!({ "state": "approved" }))
            } else if path.ends_with("/copy") {
                Some(json!({}))
            } else if path.contains("{creative_id}") && method == "PUT" {
                Some(json!({ "weight": 10 }))
            } else {
                None
            };
            let body = match method.as_str() {
                _ if own_body.is_some() => own_body,
                "PUT" | "POST" => {
                    let template = if path.ends_with("{id}") || method == "POST" {
                        let source = format!("/api/v1/{collection}/{target}");
                        let (_, text) =
                            call(&setup, "GET", &source, Some(&setup.admin), None).await;
                        let mut object: Value = serde_json::from_str(&text).unwrap();
                        let fields = object.as_object_mut().unwrap();
                        for generated in ["id", "created_at", "updated_at"] {
                            fields.remove(generated);
                        }
                        if method == "POST" {
                            fields.remove("version");
                        }
                        if forecast {
                            fields.insert("from".into(), json!("2026-12-01T00:00:00Z"));
                            fields.insert("to".into(), json!("2026-12-08T00:00:00Z"));
                        }
                        object
                    } else {
                        json!({})
                    };
                    Some(template)
                }
                _ => None,
            };

            for token in [
                None,
                Some("mq_0000000000000000000000000000000000000000000000000000000000000000"),
                Some("not-a-token"),
            ] {
                let (status, text) = call(&setup, &method, &concrete, token, body.as_ref()).await;
                assert_eq!(
                    status,
                    StatusCode::UNAUTHORIZED,
                    "{method} {concrete} with token {token:?} answered {status}: {text}"
                );
            }

            let (status, text) = call(
                &setup,
                &method,
                &concrete,
                Some(&setup.tenant),
                body.as_ref(),
            )
            .await;
            // A create under another tenant's parent answers as for a missing parent (422
            // naming the parent field), which tells nothing about its existence.
            // A bulk change answers per id: another tenant's object is not found there.
            let refused_each = path.ends_with("/bulk")
                && status == StatusCode::OK
                && serde_json::from_str::<Value>(&text).is_ok_and(|answer| {
                    answer["results"].as_array().is_some_and(|results| {
                        results.iter().all(|r| r["error"]["code"] == "not_found")
                    })
                });
            let refused = status == StatusCode::FORBIDDEN
                || status == StatusCode::NOT_FOUND
                || refused_each
                || (method == "POST"
                    && status == StatusCode::UNPROCESSABLE_ENTITY
                    && text.contains("no ")
                    && text.contains(" with id "));
            if method == "GET" && !path.contains('{') && status == StatusCode::OK {
                // A collection or report the tenant may read: nothing of another tenant in it.
                let answer: Value = serde_json::from_str(&text).unwrap();
                if let Some(foreign) = foreign {
                    for item in answer["items"].as_array().unwrap() {
                        let id = item["id"].as_u64().unwrap();
                        assert!(
                            !foreign.contains(&id),
                            "{concrete} showed {collection} {id} to advertiser 1"
                        );
                    }
                } else {
                    assert!(
                        !text.contains("\"advertiser_id\":2") && !text.contains("\"advertiser\":2"),
                        "{concrete} showed advertiser 2's rows to advertiser 1: {text}"
                    );
                }
                continue;
            }
            assert!(
                refused,
                "{method} {concrete} by advertiser 1 answered {status}: {text}"
            );
        }
    }
    assert!(
        checked >= 40,
        "only {checked} protected operations documented"
    );
    assert_eq!(
        public,
        ["GET /api/v1/openapi.json", "GET /healthz", "GET /metrics",],
        "the public operations changed: review them"
    );

    // Nothing was created, changed or deleted by the refused calls.
    for (collection, ids) in &tenancy.own {
        let now = ids_where(&items(&setup, collection).await, |_| true);
        let foreign = tenancy.foreign_of(collection).unwrap();
        assert_eq!(now.len(), ids.len() + foreign.len(), "{collection}");
    }
    for (collection, ids) in &tenancy.foreign {
        for id in ids {
            let (status, text) = call(
                &setup,
                "GET",
                &format!("/api/v1/{collection}/{id}"),
                Some(&setup.admin),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{collection} {id}: {text}");
            let object: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(object["version"], 1, "{collection} {id} was changed");
        }
    }
    println!("{checked} protected operations refused anonymous and wrong-tenant calls");
    setup.server.stop();
}

const INJECTIONS: [&str; 10] = [
    "' OR '1'='1",
    "1 OR 1=1",
    "1; DROP TABLE campaigns; --",
    "%' OR name LIKE '%",
    "\") OR 1=1 --",
    "' UNION SELECT id, token_hash FROM tokens --",
    "1' AND SLEEP(1) --",
    "\\",
    "'",
    "0x27 OR 0x31=0x31",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injection_strings_in_filters_are_data() {
    let data = tempfile::tempdir().unwrap();
    let setup = setup(data.path()).await;
    let tenancy = Tenancy::of_advertiser_1(&setup).await;
    let collections = [
        "advertisers",
        "campaigns",
        "line-items",
        "creatives",
        "publishers",
        "sites",
        "placements",
    ];
    let mut before = Vec::new();
    for collection in collections {
        before.push(items(&setup, collection).await.len());
    }
    let mut sent = 0;
    for collection in collections {
        for parameter in ["q", "status", "after", "limit", "parent_id"] {
            for injection in INJECTIONS {
                for (who, token) in [("admin", &setup.admin), ("advertiser 1", &setup.tenant)] {
                    let url = reqwest::Url::parse_with_params(
                        &setup.server.url(&format!("/api/v1/{collection}")),
                        [(parameter, injection)],
                    )
                    .unwrap();
                    let request = setup.client.get(url.clone()).bearer_auth(token);
                    let (status, text) = answer(request).await;
                    sent += 1;
                    assert!(!status.is_server_error(), "{url} as {who}: {status} {text}");
                    if status != StatusCode::OK {
                        assert!(status.is_client_error(), "{url}: {status}");
                        continue;
                    }
                    let answer: Value = serde_json::from_str(&text).unwrap();
                    let listed = answer["items"].as_array().unwrap();
                    // No name contains these strings: a search for one finds nothing.
                    if parameter == "q" {
                        assert!(listed.is_empty(), "{url} as {who} found {listed:?}");
                    }
                    if token == &setup.tenant
                        && let Some(own) = tenancy.own_of(collection)
                    {
                        for item in listed {
                            let id = item["id"].as_u64().unwrap();
                            assert!(own.contains(&id), "{url} leaked {collection} {id}");
                        }
                    }
                }
            }
        }
    }
    // Every parameter the reports route knows, from the route's own list.
    for parameter in marquee_api::REPORT_PARAMETERS {
        for injection in INJECTIONS {
            for token in [&setup.admin, &setup.tenant] {
                let mut query = vec![
                    ("from", "2026-01-01"),
                    ("to", "2027-01-01"),
                    ("group_by", "country"),
                ];
                query.retain(|(name, _)| *name != parameter);
                query.push((parameter, injection));
                let url =
                    reqwest::Url::parse_with_params(&setup.server.url("/api/v1/reports"), &query)
                        .unwrap();
                let request = setup.client.get(url.clone()).bearer_auth(token);
                let (status, text) = answer(request).await;
                sent += 1;
                assert!(
                    status.is_client_error() || status == StatusCode::OK,
                    "{url}: {status} {text}"
                );
                if status == StatusCode::OK && token == &setup.tenant {
                    assert!(
                        !text.contains("Globex"),
                        "{url} showed another advertiser's rows: {text}"
                    );
                }
            }
        }
    }
    // Every table is still there with the same rows.
    for (collection, count) in collections.iter().zip(before) {
        assert_eq!(items(&setup, collection).await.len(), count, "{collection}");
    }
    println!("{sent} requests with injection strings: no 5xx, no extra rows");
    setup.server.stop();
}

const SCRIPT: &str = "<script>alert(1)</script>";
const ATTRIBUTE: &str = "\"><img src=x onerror=alert(2)>";

/// Tries to sign in to the dashboard as the demo's admin: the answer, and the session cookie
/// when it succeeded.
async fn sign_in(setup: &Setup, password: &str) -> (reqwest::Response, Option<String>) {
    let next = "?next=https://evil.example/";
    common::sign_in(&setup.client, &setup.server.base, next, "admin", password).await
}

async fn create(setup: &Setup, collection: &str, body: Value) -> u64 {
    let (status, text) = call(
        setup,
        "POST",
        &format!("/api/v1/{collection}"),
        Some(&setup.admin),
        Some(&body),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{collection}: {text}");
    serde_json::from_str::<Value>(&text).unwrap()["id"]
        .as_u64()
        .unwrap()
}

/// An existing object of `collection` as a template for a new one named `name` under `parent`.
async fn copy_of(setup: &Setup, collection: &str, parent: Option<(&str, u64)>, name: &str) -> u64 {
    let (_, text) = call(
        setup,
        "GET",
        &format!("/api/v1/{collection}/1"),
        Some(&setup.admin),
        None,
    )
    .await;
    let mut object: Value = serde_json::from_str(&text).unwrap();
    let fields = object.as_object_mut().unwrap();
    for generated in ["id", "version", "created_at", "updated_at"] {
        fields.remove(generated);
    }
    fields.insert("name".into(), json!(name));
    if let Some((key, id)) = parent {
        fields.insert(key.into(), json!(id));
    }
    create(setup, collection, object).await
}

/// [`copy_of`] for each entry of `chain` in turn, `(collection, key of the parent's id, name)`:
/// each object after the first is put under the one copied before it. Returns their ids.
async fn copy_chain<const N: usize>(
    setup: &Setup,
    chain: [(&str, Option<&str>, String); N],
) -> [u64; N] {
    let mut ids = [0; N];
    for (i, (collection, parent_key, name)) in chain.into_iter().enumerate() {
        let parent = parent_key.map(|key| (key, ids[i - 1]));
        ids[i] = copy_of(setup, collection, parent, &name).await;
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_escapes_names_and_sign_in_is_safe() {
    let data = tempfile::tempdir().unwrap();
    let setup = setup(data.path()).await;
    let name = |kind: &str| format!("{kind} {SCRIPT} {ATTRIBUTE}");
    let [advertiser, campaign, line_item, creative] = copy_chain(
        &setup,
        [
            ("advertisers", None, name("advertiser")),
            ("campaigns", Some("advertiser_id"), name("campaign")),
            ("line-items", Some("campaign_id"), name("line item")),
            ("creatives", Some("line_item_id"), name("creative")),
        ],
    )
    .await;
    let [publisher, site, placement] = copy_chain(
        &setup,
        [
            ("publishers", None, name("publisher")),
            ("sites", Some("publisher_id"), name("site")),
            ("placements", Some("site_id"), name("placement")),
        ],
    )
    .await;

    // Signing in never follows a `next` parameter off the site.
    let (signed_in, session) = sign_in(&setup, "marquee-demo").await;
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed_in.headers()["location"], "/");
    let session = session.expect("a session cookie");

    let pages = [
        "/".to_owned(),
        "/advertisers".into(),
        format!("/advertisers/{advertiser}"),
        "/campaigns".into(),
        format!("/campaigns/{campaign}"),
        "/line-items".into(),
        format!("/line-items/{line_item}"),
        "/creatives".into(),
        format!("/creatives/{creative}"),
        "/publishers".into(),
        format!("/publishers/{publisher}"),
        "/sites".into(),
        format!("/sites/{site}"),
        "/placements".into(),
        format!("/placements/{placement}"),
        "/line-items/new".into(),
        "/creatives/new".into(),
        "/reports?from=2026-01-01&to=2027-01-01&group_by=line_item".into(),
        format!("/why-not-served?placement={placement}"),
        "/edges".into(),
    ];
    let mut shown = 0;
    for page in &pages {
        let response = setup
            .client
            .get(setup.server.url(page))
            .header("cookie", &session)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{page}: {body}");
        assert!(!body.contains(SCRIPT), "{page} shows a raw script tag");
        assert!(
            !body.contains("<img src=x onerror"),
            "{page} shows a raw img tag"
        );
        if body.contains("alert(1)") {
            shown += 1;
        }
    }
    assert!(
        shown >= 10,
        "the XSS names appeared (escaped) on only {shown} pages"
    );

    // A creative's own HTML is previewed in a sandboxed frame only.
    let request = setup
        .client
        .get(setup.server.url(&format!("/creatives/{creative}")))
        .header("cookie", &session);
    let page = common::text(request).await;
    if page.contains("<iframe") {
        assert!(page.contains("sandbox=\"allow-scripts\""), "{page}");
        assert!(!page.contains("allow-same-origin"), "{page}");
    }

    // Sign-in is rate limited: after 5 wrong passwords for a name, even the right one is
    // refused (429, with Retry-After) without being checked.
    for _ in 0..5 {
        let (refused, session) = sign_in(&setup, "guess").await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
        assert!(session.is_none());
    }
    let (limited, session) = sign_in(&setup, "marquee-demo").await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(session.is_none());
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=900).contains(&retry), "Retry-After {retry}");
    setup.server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_open_redirect_on_clicks() {
    let data = tempfile::tempdir().unwrap();
    let setup = setup(data.path()).await;
    common::wait_for_ad(&setup.client, &setup.server.base).await;
    let ad = get_text(&setup.client, &setup.server.url("/ad.json?placement=2")).await;
    let marker = "/t/c?t=";
    let start = ad.find(marker).expect("a click URL in the ad") + marker.len();
    let token: String = ad[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '%'))
        .collect();

    // Extra parameters cannot choose the target: it is the signed creative's landing URL.
    for extra in [
        "&url=https://evil.example/",
        "&redirect=https://evil.example/",
        "&r=//evil.example",
    ] {
        let response = setup
            .client
            .get(setup.server.url(&format!("/t/c?t={token}{extra}")))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_redirection(), "{}", response.status());
        let location = response.headers()["location"].to_str().unwrap();
        assert!(
            location.starts_with("https://") && !location.contains("evil.example"),
            "click went to {location}"
        );
    }
    // A forged or tampered token redirects nowhere.
    let mut tampered = token.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for forged in [
        "https%3A%2F%2Fevil.example%2F",
        "eyJhbGciOiJub25lIn0",
        tampered.as_str(),
    ] {
        let response = setup
            .client
            .get(
                setup
                    .server
                    .url(&format!("/t/c?t={forged}&url=https://evil.example/")),
            )
            .send()
            .await
            .unwrap();
        assert!(
            response.headers().get("location").is_none(),
            "a forged click token {forged} redirected"
        );
        assert!(response.status().is_client_error(), "{}", response.status());
    }
    setup.server.stop();
}
