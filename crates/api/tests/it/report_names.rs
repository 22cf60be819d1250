//! Names beside ids in `GET /api/v1/reports`: `*_name` fields and CSV columns, filters that take
//! names, and tenancy (a tenant never sees, nor resolves, another's names).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use marquee_api::{FilterNames, ReportsState, RouteTable, add_routes, hash_token};
use marquee_model::{ManualClock, ObjectKind, Principal, Role};
use marquee_stats::{Counters, RowKey};
use marquee_store::stats_suite::create_named;
use marquee_store::{NewToken, RunWrite, SqliteStore, Store};
use serde_json::Value;
use tempfile::TempDir;
use tower::ServiceExt;

/// The hour every row of the desk's delivery is in.
const HOUR: &str = "2026-12-01T10:00:00Z";

/// Acme Travel (Berlin, EUR) runs "Homepage takeover", "Run of site" and "run of site" in
/// its "Winter, 2026" campaign; Borealis Bank runs "Secret launch". Daily News has the
/// placements "Sidebar, top" and "=1+1" (a name a spreadsheet would take for a formula).
pub(crate) struct Desk {
    router: Router,
    pub(crate) store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    pub(crate) acme: u64,
    borealis: u64,
    daily_news: u64,
    pub(crate) takeover: u64,
    pub(crate) run_of_site: u64,
    secret: u64,
    pub(crate) sidebar: u64,
    formula: u64,
    _dir: TempDir,
}

pub(crate) fn hour_row(
    at: &str,
    line_item: u64,
    placement: u64,
    impressions: i64,
) -> (RowKey, Counters) {
    (
        RowKey {
            line_item,
            bucket: at.parse::<jiff::Timestamp>().unwrap().as_second(),
            creative: 0,
            placement,
            country: *b"DE",
            region: *b"BY\0",
            device: 1,
        },
        Counters {
            decisions: impressions,
            impressions,
            cpm_micros: impressions * 2_000_000,
            ..Counters::default()
        },
    )
}

impl Desk {
    pub(crate) async fn new() -> Desk {
        let dir = TempDir::new().unwrap();
        let clock = Arc::new(ManualClock::new("2026-12-03T12:00:00Z".parse().unwrap()));
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("n.db"), clock.clone()).unwrap());
        let new = |kind, parent, name: &'static str, body: &'static str| {
            let store = Arc::clone(&store);
            async move { create_named(store.as_ref(), kind, parent, name, body).await }
        };
        let zone = r#"{"time_zone":"Europe/Berlin","currency":"EUR"}"#;
        let acme = new(ObjectKind::Advertiser, None, "Acme Travel", zone).await;
        let borealis = new(ObjectKind::Advertiser, None, "Borealis Bank", zone).await;
        let winter = new(ObjectKind::Campaign, Some(acme), "Winter, 2026", "{}").await;
        let launch = new(ObjectKind::Campaign, Some(borealis), "Launch", "{}").await;
        let takeover = new(
            ObjectKind::LineItem,
            Some(winter),
            "Homepage takeover",
            "{}",
        )
        .await;
        let run_of_site = new(ObjectKind::LineItem, Some(winter), "Run of site", "{}").await;
        new(ObjectKind::LineItem, Some(winter), "run of site", "{}").await;
        let secret = new(ObjectKind::LineItem, Some(launch), "Secret launch", "{}").await;
        let daily_news = new(ObjectKind::Publisher, None, "Daily News", "{}").await;
        let site = new(ObjectKind::Site, Some(daily_news), "News", "{}").await;
        let sidebar = new(ObjectKind::Placement, Some(site), "Sidebar, top", "{}").await;
        let formula = new(ObjectKind::Placement, Some(site), "=1+1", "{}").await;
        let mut hours = vec![
            hour_row(HOUR, takeover, sidebar, 10),
            hour_row(HOUR, run_of_site, formula, 20),
            hour_row(HOUR, secret, sidebar, 40),
        ];
        hours.sort_unstable_by_key(|(k, _)| *k);
        store
            .commit_run(RunWrite {
                line_item_hours: marquee_stats::line_item_totals(&hours),
                hours,
                ..RunWrite::default()
            })
            .await
            .unwrap();
        let router = add_routes(
            RouteTable::new(),
            Arc::clone(&store),
            clock.clone(),
            "https://ads.example.com",
        )
        .into_router("test", "0");
        Desk {
            router,
            store,
            clock,
            acme,
            borealis,
            daily_news,
            takeover,
            run_of_site,
            secret,
            sidebar,
            formula,
            _dir: dir,
        }
    }

    pub(crate) async fn token(&self, role: Role, owner_id: Option<u64>) -> String {
        let token = format!("mq_names_{role:?}_{owner_id:?}");
        self.store
            .create_token(NewToken {
                role,
                owner_id,
                hash: hash_token(&token),
                label: "t".into(),
            })
            .await
            .unwrap();
        token
    }

    /// Moves the clock forward by `hours`.
    pub(crate) fn advance_hours(&self, hours: i64) {
        self.clock.advance(jiff::SignedDuration::from_hours(hours));
    }

    pub(crate) async fn get(&self, token: &str, query: &str) -> (StatusCode, String) {
        let request = Request::get(format!("/api/v1/reports?{query}"))
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    pub(crate) async fn json(&self, token: &str, query: &str) -> Value {
        let (status, body) = self.get(token, query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The report's rows as `(line item id, placement id)` pairs.
    async fn pairs(&self, token: &str, filter: &str) -> Vec<(u64, u64)> {
        let query =
            format!("from=2026-12-01&to=2026-12-02&tz=UTC&group_by=line_item,placement&{filter}");
        let report = self.json(token, &query).await;
        report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                (
                    row["line_item"].as_u64().unwrap(),
                    row["placement"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    /// The message of a refused report, checked to be a 400 naming `field`.
    pub(crate) async fn refused(&self, token: &str, filter: &str, field: &str) -> String {
        let (status, body) = self.get(token, &format!("from=2026-12-01&{filter}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{filter}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["fields"][0]["path"], field, "{body}");
        body["error"]["fields"][0]["message"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

#[tokio::test]
async fn rows_carry_each_object_s_name_beside_its_id() {
    let desk = Desk::new().await;
    let admin = desk.token(Role::Admin, None).await;
    let report = desk
        .json(
            &admin,
            "from=2026-12-01&to=2026-12-02&tz=UTC\
             &group_by=advertiser,campaign,line_item,publisher,site,placement,country",
        )
        .await;
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let takeover = rows
        .iter()
        .find(|row| row["line_item"] == desk.takeover)
        .unwrap();
    assert_eq!(takeover["advertiser"], desk.acme);
    assert_eq!(takeover["advertiser_name"], "Acme Travel");
    assert_eq!(takeover["campaign_name"], "Winter, 2026");
    assert_eq!(takeover["line_item_name"], "Homepage takeover");
    assert_eq!(takeover["publisher"], desk.daily_news);
    assert_eq!(takeover["publisher_name"], "Daily News");
    assert_eq!(takeover["site_name"], "News");
    assert_eq!(takeover["placement_name"], "Sidebar, top");
    assert_eq!(takeover["country"], "DE");
    assert!(
        takeover.get("country_name").is_none(),
        "codes have no names: {takeover}"
    );
}

#[tokio::test]
async fn csv_has_a_name_column_beside_each_id_quoted_and_never_a_formula() {
    let desk = Desk::new().await;
    let admin = desk.token(Role::Admin, None).await;
    let (status, body) = desk
        .get(
            &admin,
            "from=2026-12-01&to=2026-12-02&tz=UTC&group_by=campaign,placement&format=csv",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut lines = body.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("time,campaign,campaign_name,placement,placement_name,requests,"),
        "{body}"
    );
    let rows: Vec<&str> = lines.collect();
    assert!(
        rows.iter().any(|line| line.contains(&format!(
            ",\"Winter, 2026\",{},\"Sidebar, top\",",
            desk.sidebar
        ))),
        "{body}"
    );
    // A spreadsheet shows `=1+1` as text, not as 2.
    assert!(
        rows.iter()
            .any(|line| line.contains(&format!(",{},'=1+1,", desk.formula))),
        "{body}"
    );
}

#[tokio::test]
async fn filters_take_names_ids_or_both() {
    let desk = Desk::new().await;
    let admin = desk.token(Role::Admin, None).await;
    let (takeover, run, secret) = (desk.takeover, desk.run_of_site, desk.secret);
    let (sidebar, formula) = (desk.sidebar, desk.formula);
    assert_eq!(
        desk.pairs(&admin, "line_item=Homepage%20takeover").await,
        vec![(takeover, sidebar)]
    );
    // Case and surrounding spaces do not matter; names and ids mix.
    let mut mixed = desk
        .pairs(
            &admin,
            &format!("line_item=%20homepage%20TAKEOVER,{secret}"),
        )
        .await;
    mixed.sort_unstable();
    assert_eq!(mixed, vec![(takeover, sidebar), (secret, sidebar)]);
    // A name holding a comma is taken whole.
    let mut on_sidebar = desk.pairs(&admin, "placement=Sidebar,%20top").await;
    on_sidebar.sort_unstable();
    assert_eq!(on_sidebar, vec![(takeover, sidebar), (secret, sidebar)]);
    assert_eq!(
        desk.pairs(&admin, "placement=%3D1%2B1").await,
        vec![(run, formula)]
    );
    // An advertiser by name sets its time zone, as by id.
    let report = desk
        .json(&admin, "from=2026-12-01&advertiser=acme%20travel")
        .await;
    assert_eq!(report["time_zone"], "Europe/Berlin");
    assert_eq!(report["currency"], "EUR");
}

#[tokio::test]
async fn unknown_and_ambiguous_names_are_told_plainly() {
    let desk = Desk::new().await;
    let admin = desk.token(Role::Admin, None).await;
    assert_eq!(
        desk.refused(&admin, "line_item=Nope", "line_item").await,
        "no line item is named \"Nope\" (names match whole, ignoring case; ids and names are comma-separated)"
    );
    let ambiguous = desk
        .refused(&admin, "line_item=Run%20of%20site", "line_item")
        .await;
    assert!(
        ambiguous.starts_with("\"Run of site\" names 2 line items (#"),
        "{ambiguous}"
    );
    assert!(
        ambiguous.ends_with("); give the id of the one you mean"),
        "{ambiguous}"
    );
    assert_eq!(
        desk.refused(&admin, "line_item=0", "line_item").await,
        "\"0\" is not a positive integer id"
    );
    assert_eq!(
        desk.refused(&admin, "advertiser=Nobody", "advertiser")
            .await,
        "no advertiser is named \"Nobody\" (names match whole, ignoring case; ids and names are comma-separated)"
    );
}

#[tokio::test]
async fn a_tenant_neither_sees_nor_resolves_another_s_names() {
    let desk = Desk::new().await;
    let acme = desk.token(Role::Advertiser, Some(desk.acme)).await;
    // Borealis's line item is unknown to Acme, exactly as a made-up name.
    assert_eq!(
        desk.refused(&acme, "line_item=Secret%20launch", "line_item")
            .await,
        desk.refused(&acme, "line_item=Made%20up", "line_item")
            .await
            .replace("Made up", "Secret launch")
    );
    assert_eq!(
        desk.pairs(&acme, "line_item=homepage%20takeover").await,
        vec![(desk.takeover, desk.sidebar)]
    );
    // Its own objects by name; the publisher's placements by id only.
    let report = desk
        .json(
            &acme,
            "from=2026-12-01&to=2026-12-02&group_by=line_item,placement",
        )
        .await;
    for row in report["rows"].as_array().unwrap() {
        assert!(row["line_item_name"].is_string(), "{row}");
        assert!(row["placement"].is_u64(), "{row}");
        assert!(row["placement_name"].is_null(), "{row}");
    }
    let by_name = desk
        .refused(&acme, "placement=Sidebar,%20top", "placement")
        .await;
    assert!(by_name.starts_with("no placement is named"), "{by_name}");

    let publisher = desk.token(Role::Publisher, Some(desk.daily_news)).await;
    let report = desk
        .json(
            &publisher,
            "from=2026-12-01&to=2026-12-02&group_by=placement&placement=Sidebar,%20top",
        )
        .await;
    assert_eq!(report["rows"][0]["placement_name"], "Sidebar, top");
}

#[tokio::test]
async fn filter_suggestions_hold_the_caller_s_own_names_only() {
    let desk = Desk::new().await;
    let state = ReportsState::new(Arc::clone(&desk.store), desk.clock.clone(), 1_000);
    let principal = |role, owner_id| Principal {
        token_id: 1,
        role,
        owner_id,
    };
    let admin = marquee_api::filter_names(&state, &principal(Role::Admin, None))
        .await
        .unwrap();
    assert_eq!(admin.advertisers, vec!["Acme Travel", "Borealis Bank"]);
    assert_eq!(
        admin.line_items,
        vec![
            "Homepage takeover",
            "Run of site",
            "Secret launch",
            "run of site"
        ]
    );
    assert_eq!(admin.placements, vec!["=1+1", "Sidebar, top"]);
    let acme = marquee_api::filter_names(&state, &principal(Role::Advertiser, Some(desk.acme)))
        .await
        .unwrap();
    assert_eq!(
        acme,
        FilterNames {
            advertisers: vec!["Acme Travel".into()],
            line_items: vec![
                "Homepage takeover".into(),
                "Run of site".into(),
                "run of site".into()
            ],
            placements: Vec::new(),
        }
    );
    let borealis =
        marquee_api::filter_names(&state, &principal(Role::Advertiser, Some(desk.borealis)))
            .await
            .unwrap();
    assert_eq!(borealis.line_items, vec!["Secret launch"]);
    let publisher =
        marquee_api::filter_names(&state, &principal(Role::Publisher, Some(desk.daily_news)))
            .await
            .unwrap();
    assert_eq!(
        publisher,
        FilterNames {
            advertisers: Vec::new(),
            line_items: Vec::new(),
            placements: vec!["=1+1".into(), "Sidebar, top".into()],
        }
    );
}
