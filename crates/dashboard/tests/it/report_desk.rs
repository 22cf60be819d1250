//! The Reports page as a trafficker builds a report: names beside ids in the table and the
//! CSV, filters typed as names with suggestions of the user's own objects only, date presets
//! resolved against the injected clock, and the comparison with the previous period.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use jiff::{SignedDuration, Timestamp};
use marquee_dashboard::{Dashboard, DashboardOptions, hash_password};
use marquee_manager::{Manager, ManagerOptions};
use marquee_model::{ManualClock, ObjectKind, Role};
use marquee_stats::{Counters, RowKey};
use marquee_store::stats_suite::create_named;
use marquee_store::{NewUser, RunWrite, SqliteStore, Store};
use tower::ServiceExt as _;

const PASSWORD: &str = "correct horse battery";
/// The clock: 2026-11-18 11:06:40 UTC.
const NOW: i64 = 1_795_000_000;

/// Acme Travel runs "Homepage takeover" (10 impressions this hour, 5 the same hour yesterday)
/// on Daily News's "Sidebar, top"; Borealis Bank runs "Secret launch" (40 this hour).
struct Desk {
    router: axum::Router,
    store: Arc<dyn Store>,
    acme: u64,
    takeover: u64,
    sidebar: u64,
    _manager: Arc<Manager>,
    _dir: tempfile::TempDir,
}

struct Page {
    status: StatusCode,
    body: String,
    cookies: Vec<String>,
}

fn hour(line_item: u64, placement: u64, bucket: i64, impressions: i64) -> (RowKey, Counters) {
    (
        RowKey {
            line_item,
            bucket,
            creative: 0,
            placement,
            country: *b"DE",
            region: [0; 3],
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
    async fn new() -> Desk {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(Timestamp::from_second(NOW).unwrap()));
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("d.db"), clock.clone()).unwrap());
        let s = store.as_ref();
        let zone = r#"{"time_zone":"UTC","currency":"USD"}"#;
        let acme = create_named(s, ObjectKind::Advertiser, None, "Acme Travel", zone).await;
        let borealis = create_named(s, ObjectKind::Advertiser, None, "Borealis Bank", zone).await;
        let winter = create_named(s, ObjectKind::Campaign, Some(acme), "Winter", "{}").await;
        let launch = create_named(s, ObjectKind::Campaign, Some(borealis), "Launch", "{}").await;
        let takeover = create_named(
            s,
            ObjectKind::LineItem,
            Some(winter),
            "Homepage takeover",
            "{}",
        )
        .await;
        let secret =
            create_named(s, ObjectKind::LineItem, Some(launch), "Secret launch", "{}").await;
        let news = create_named(s, ObjectKind::Publisher, None, "Daily News", "{}").await;
        let site = create_named(s, ObjectKind::Site, Some(news), "News", "{}").await;
        let sidebar =
            create_named(s, ObjectKind::Placement, Some(site), "Sidebar, top", "{}").await;
        let this_hour = NOW / 3_600 * 3_600;
        let mut hours = vec![
            hour(takeover, sidebar, this_hour, 10),
            hour(takeover, sidebar, this_hour - 86_400, 5),
            hour(secret, sidebar, this_hour, 40),
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
        let manager = Manager::open(
            Arc::clone(&store),
            clock.clone(),
            ManagerOptions {
                snapshot_dir: dir.path().join("snapshots"),
                keep: 2,
                compile_interval: Duration::from_secs(1),
            },
        )
        .await
        .unwrap();
        let dashboard = Dashboard::new(
            Arc::clone(&manager),
            clock,
            DashboardOptions {
                public_url: "http://ads.test".into(),
                session_lifetime: SignedDuration::from_hours(12),
                uploads_dir: dir.path().join("uploads"),
                report_max_rows: 10_000,
                secure_cookies: false,
            },
        );
        Desk {
            router: marquee_dashboard::router(Arc::new(dashboard)),
            store,
            acme,
            takeover,
            sidebar,
            _manager: manager,
            _dir: dir,
        }
    }

    async fn send(&self, request: Request<Body>) -> Page {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let cookies = response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
            .collect();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .unwrap();
        Page {
            status,
            body: String::from_utf8_lossy(&bytes).into_owned(),
            cookies,
        }
    }

    async fn get(&self, path: &str, cookie: &str) -> Page {
        let request = Request::get(path)
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap();
        self.send(request).await
    }

    /// A user of `role`, signed in through the form: its session cookie.
    async fn signed_in(&self, name: &str, role: Role, owner_id: Option<u64>) -> String {
        self.store
            .create_user(NewUser {
                name: name.into(),
                role,
                owner_id,
                password_hash: hash_password(PASSWORD).unwrap(),
            })
            .await
            .unwrap();
        let form = self.get("/login", "").await;
        let marker = "name=\"csrf\" value=\"";
        let start = form.body.find(marker).unwrap() + marker.len();
        let csrf = form.body[start..].split('"').next().unwrap();
        let fields = [("csrf", csrf), ("name", name), ("password", PASSWORD)];
        let answer = self
            .send(
                Request::post("/login")
                    .header(header::COOKIE, &form.cookies[0])
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(Body::from(serde_urlencoded::to_string(fields).unwrap()))
                    .unwrap(),
            )
            .await;
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
        answer
            .cookies
            .into_iter()
            .find(|c| c.starts_with("marquee_session="))
            .unwrap()
    }
}

/// The options of the datalist `id`.
fn suggestions(html: &str, id: &str) -> Vec<String> {
    let start = html
        .find(&format!("<datalist id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no datalist {id}"));
    let list = &html[start..];
    let list = &list[..list.find("</datalist>").unwrap()];
    list.split("<option value=\"")
        .skip(1)
        .map(|option| option.split('"').next().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_table_and_csv_name_each_object_and_filters_take_names() {
    let desk = Desk::new().await;
    let admin = desk.signed_in("root", Role::Admin, None).await;
    let query = "from=2026-11-18&tz=UTC&granularity=day&group_by=line_item&group_by=placement";
    let page = desk.get(&format!("/reports?{query}"), &admin).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let takeover = format!("<td>Homepage takeover (#{})</td>", desk.takeover);
    let sidebar = format!("<td>Sidebar, top (#{})</td>", desk.sidebar);
    assert!(page.body.contains(&takeover), "{}", page.body);
    assert!(page.body.contains(&sidebar), "{}", page.body);
    assert!(page.body.contains("tick several to combine them"));
    assert_eq!(
        suggestions(&page.body, "line-item-names"),
        vec!["Homepage takeover", "Secret launch"]
    );
    assert_eq!(
        suggestions(&page.body, "advertiser-names"),
        vec!["Acme Travel", "Borealis Bank"]
    );
    assert_eq!(
        suggestions(&page.body, "placement-names"),
        vec!["Sidebar, top"]
    );
    let csv = desk.get(&format!("/reports.csv?{query}"), &admin).await;
    assert!(
        csv.body
            .starts_with("time,line_item,line_item_name,placement,placement_name,"),
        "{}",
        csv.body
    );
    assert!(
        csv.body.contains(&format!(
            ",{},Homepage takeover,{},\"Sidebar, top\",",
            desk.takeover, desk.sidebar
        )),
        "{}",
        csv.body
    );
    // A name in a filter, as typed or picked from the suggestions.
    let filtered = desk
        .get(
            &format!("/reports?{query}&line_item=homepage+takeover&advertiser=Acme+Travel"),
            &admin,
        )
        .await;
    assert!(filtered.body.contains(&takeover), "{}", filtered.body);
    assert!(
        !filtered.body.contains("Secret launch ("),
        "{}",
        filtered.body
    );
    // A name that matches nothing is told beside the form, as is an id out of scope.
    let unknown = desk
        .get(&format!("/reports?{query}&line_item=Homepage"), &admin)
        .await;
    assert_eq!(unknown.status, StatusCode::OK);
    assert!(
        unknown
            .body
            .contains("line_item: no line item is named &#34;Homepage&#34;")
            || unknown
                .body
                .contains("line_item: no line item is named &quot;Homepage&quot;"),
        "{}",
        unknown.body
    );
    let missing = desk
        .get(&format!("/reports?{query}&line_item=9999"), &admin)
        .await;
    assert_eq!(missing.status, StatusCode::OK);
    assert!(missing.body.contains("no line item with id 9999"));
}

#[tokio::test]
async fn a_tenant_is_offered_and_shown_its_own_names_only() {
    let desk = Desk::new().await;
    let acme = desk
        .signed_in("acme", Role::Advertiser, Some(desk.acme))
        .await;
    let page = desk
        .get(
            "/reports?from=2026-11-18&granularity=day&group_by=line_item&group_by=placement",
            &acme,
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(
        suggestions(&page.body, "line-item-names"),
        vec!["Homepage takeover"]
    );
    assert_eq!(
        suggestions(&page.body, "advertiser-names"),
        vec!["Acme Travel"]
    );
    assert!(suggestions(&page.body, "placement-names").is_empty());
    for foreign in ["Secret launch", "Borealis Bank", "Sidebar, top"] {
        assert!(!page.body.contains(foreign), "{foreign}: {}", page.body);
    }
    // The publisher's placement by id, the advertiser's own line item by name.
    assert!(page.body.contains(&format!("<td>#{}</td>", desk.sidebar)));
    assert!(
        page.body
            .contains(&format!("<td>Homepage takeover (#{})</td>", desk.takeover))
    );
}

#[tokio::test]
async fn a_preset_with_compare_shows_the_previous_period_beside_each_figure() {
    let desk = Desk::new().await;
    let admin = desk.signed_in("root", Role::Admin, None).await;
    let query = "period=today&compare=previous&tz=UTC&granularity=hour&group_by=line_item";
    let page = desk.get(&format!("/reports?{query}"), &admin).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    // Today by the injected clock, beside the whole of yesterday.
    assert!(
        page.body.contains(
            "2026-11-18 00:00 – 2026-11-19 00:00, compared with 2026-11-17 00:00 – 2026-11-18 00:00"
        ),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("<option value=\"today\" selected>Today</option>")
    );
    assert!(
        page.body
            .contains("name=\"compare\" value=\"previous\" checked")
    );
    let takeover = format!("<td>Homepage takeover (#{})</td>", desk.takeover);
    let row = &page.body[page.body.find(&takeover).unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(
            "<td>10<span class=\"previous\">prev 5 <span class=\"up\">+100%</span></span></td>"
        ),
        "{row}"
    );
    // The chart draws the previous period and says so in its legend.
    assert!(page.body.contains("impressions, previous period</li>"));
    let csv = desk.get(&format!("/reports.csv?{query}"), &admin).await;
    assert_eq!(csv.status, StatusCode::OK);
    let header = csv.body.lines().next().unwrap();
    assert!(header.contains(",previous_impressions,"), "{header}");
    assert!(header.contains(",change_impressions_percent,"), "{header}");
    assert!(csv.body.contains("Homepage takeover"));
}
