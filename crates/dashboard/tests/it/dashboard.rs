//! The dashboard through its router, in process: sign-in (wrong password, expiry by the
//! injected clock, the sign-in form's token), CSRF on posts, tenancy, form validation at the
//! field, and objects created through the forms as the store then holds them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use jiff::{SignedDuration, Timestamp};
use marquee_api::{GeoAvailability, GeoLocationSource};
use marquee_dashboard::Dashboard;
use marquee_geo::{GeoDatabase, GeoSource};
use marquee_manager::Manager;
use marquee_model::{ConnectionType, LineItem, ManualClock, ObjectKind, Role, Targeting};
use marquee_store::Store;
use marquee_store::test_postgres::{TestDatabase, store_on};
use tower::ServiceExt as _;

use crate::common::{self, PASSWORD};

mod roles;

struct Site {
    router: axum::Router,
    manager: Arc<Manager>,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    uploads: PathBuf,
    _dir: tempfile::TempDir,
    _postgres: Option<TestDatabase>,
}

#[derive(Debug)]
struct Answer {
    status: StatusCode,
    location: String,
    /// The Content-Security-Policy header.
    policy: String,
    cookies: Vec<String>,
    body: String,
    bytes: Vec<u8>,
}

impl Answer {
    /// Asserts the status, showing the body if it is another.
    #[track_caller]
    fn assert_status(&self, status: StatusCode) {
        assert_eq!(self.status, status, "{}", self.body);
    }
}

impl Site {
    async fn new() -> Site {
        Site::on(None).await
    }

    /// The site with the session of its admin, root.
    async fn as_root() -> (Site, String) {
        let site = Site::new().await;
        let admin = site.sign_in("root", PASSWORD).await.unwrap();
        (site, admin)
    }

    /// The dashboard on SQLite, or on PostgreSQL in `postgres` (a test database of its own).
    async fn on(postgres: Option<TestDatabase>) -> Site {
        Site::serving(postgres, "http://ads.test", false, None).await
    }

    /// Locating why-not-served's IP addresses in the demo geo database.
    async fn with_demo_geo() -> Site {
        let database = GeoDatabase::from_bytes(marquee_geo::demo::demo_database(), None).unwrap();
        let geo = Arc::new(GeoSource::fixed(database));
        Site::serving(None, "http://ads.test", false, Some(geo)).await
    }

    /// With the edges at `public_url`, the dashboard's own cookies `Secure` or not, and the
    /// geo databases of `geo`.
    async fn serving(
        postgres: Option<TestDatabase>,
        public_url: &str,
        secure_cookies: bool,
        geo: Option<Arc<GeoSource>>,
    ) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let clock = common::clock();
        let store = store_on(postgres.as_ref(), &dir.path().join("m.db"), clock.clone()).await;
        let uploads = dir.path().join("uploads");
        let manager = common::manager(&store, &clock, dir.path()).await;
        let options = common::options(public_url, &uploads, secure_cookies);
        let dashboard = Dashboard::new(Arc::clone(&manager), clock.clone(), options).with_geo(geo);
        let site = Site {
            router: marquee_dashboard::router(Arc::new(dashboard)),
            manager,
            store,
            clock,
            uploads,
            _dir: dir,
            _postgres: postgres,
        };
        site.user("root", Role::Admin, None).await;
        site
    }

    async fn user(&self, name: &str, role: Role, owner_id: Option<u64>) {
        common::add_user(self.store.as_ref(), name, role, owner_id).await;
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let header_text = |name| {
            response
                .headers()
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let location = header_text(header::LOCATION).concat();
        let policy = header_text(header::CONTENT_SECURITY_POLICY).concat();
        let cookies = header_text(header::SET_COOKIE);
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .unwrap();
        Answer {
            status,
            location,
            policy,
            cookies,
            body: String::from_utf8_lossy(&bytes).into_owned(),
            bytes: bytes.to_vec(),
        }
    }

    async fn get(&self, path: &str, cookie: &str) -> Answer {
        self.send(
            Request::get(path)
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    /// The site with root's session and Acme's campaign (as the forms hold its id).
    async fn with_acme_campaign() -> (Site, String, String) {
        let (site, admin) = Site::as_root().await;
        let campaign = acme_campaign(&site, &admin).await;
        (site, admin, campaign)
    }

    /// Creates a line item of `campaign` through the form and returns its id.
    async fn create_line_item(&self, session: &str, campaign: &str) -> u64 {
        self.create(session, "line-items", &line_item_form(campaign))
            .await
    }

    /// The stored object `id` of type `T`.
    async fn stored<T: marquee_model::Object>(&self, id: u64) -> T {
        let record = self.store.get(T::KIND, id, None).await.unwrap();
        record.decode::<T>().unwrap().object
    }

    /// Whether the store holds no object of `kind`.
    async fn holds_none(&self, kind: ObjectKind) -> bool {
        self.store
            .list(kind, &Default::default())
            .await
            .unwrap()
            .is_empty()
    }

    /// Posts a multipart form (boundary `B`).
    async fn post_multipart(&self, path: &str, cookie: &str, body: Vec<u8>) -> Answer {
        self.send(
            Request::post(path)
                .header(header::COOKIE, cookie)
                .header(header::CONTENT_TYPE, "multipart/form-data; boundary=B")
                .body(Body::from(body))
                .unwrap(),
        )
        .await
    }

    /// Gets a page that must answer 200.
    async fn get_ok(&self, path: &str, cookie: &str) -> Answer {
        let page = self.get(path, cookie).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        page
    }

    async fn post(&self, path: &str, cookie: &str, form: &[(&str, &str)]) -> Answer {
        self.send(
            Request::post(path)
                .header(header::COOKIE, cookie)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(serde_urlencoded::to_string(form).unwrap()))
                .unwrap(),
        )
        .await
    }

    /// Signs in through the form; the session cookie (`name=value`) on success.
    async fn sign_in(&self, name: &str, password: &str) -> Result<String, Answer> {
        self.sign_in_from(None, name, password).await
    }

    /// Signs in through the form from `peer`, the address the server accepted the connection
    /// from (none in process, unless given).
    async fn sign_in_from(
        &self,
        peer: Option<SocketAddr>,
        name: &str,
        password: &str,
    ) -> Result<String, Answer> {
        let form = self.get("/login", "").await;
        let login_cookie = cookie_pair(&form.cookies[0]);
        let token = hidden(&form.body, "csrf");
        let fields = [
            ("csrf", token.as_str()),
            ("name", name),
            ("password", password),
        ];
        let mut request = Request::post("/login")
            .header(header::COOKIE, &login_cookie)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(peer) = peer {
            request = request.extension(ConnectInfo(peer));
        }
        let answer = self
            .send(
                request
                    .body(Body::from(serde_urlencoded::to_string(fields).unwrap()))
                    .unwrap(),
            )
            .await;
        if answer.status != StatusCode::SEE_OTHER {
            return Err(answer);
        }
        Ok(cookie_pair(
            answer
                .cookies
                .iter()
                .find(|c| c.starts_with("marquee_session="))
                .unwrap(),
        ))
    }

    /// The CSRF token of the session, as its pages carry it.
    async fn csrf(&self, session: &str) -> String {
        hidden(&self.get("/", session).await.body, "csrf")
    }

    /// Posts a form with the session's CSRF token; the id the redirect names.
    async fn create(&self, session: &str, collection: &str, form: &[(&str, &str)]) -> u64 {
        let csrf = self.csrf(session).await;
        let mut fields = vec![("csrf", csrf.as_str())];
        fields.extend_from_slice(form);
        let answer = self.post(&format!("/{collection}"), session, &fields).await;
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
        id_in(&answer.location)
    }
}

fn cookie_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

/// The value of the first hidden input named `name`.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

fn id_in(location: &str) -> u64 {
    location
        .trim_start_matches('/')
        .split(['/', '?'])
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

fn advertiser(name: &str) -> Vec<(&str, &str)> {
    vec![
        ("name", name),
        ("status", "active"),
        ("currency", "USD"),
        ("time_zone", "UTC"),
        ("domains", ""),
    ]
}

fn line_item_form(campaign: &str) -> Vec<(&str, &str)> {
    vec![
        ("campaign_id", campaign),
        ("name", "Winter sale"),
        ("status", "active"),
        ("start", "2026-11-01T00:00"),
        ("end", "2027-01-01T00:00"),
        ("time_zone", "Europe/Berlin"),
        ("tier", "standard"),
        ("weight", "100"),
        ("price.model", "cpm"),
        ("price.amount", "2.5"),
        ("price.currency", "USD"),
        ("goal.metric", "impressions"),
        ("goal.daily", "1000"),
        ("goal.lifetime", ""),
        ("pacing", "even"),
        ("rotation", "even"),
        ("channels", "direct"),
        ("deals", ""),
        ("untokened_clicks", "free"),
        ("cap_count", "2"),
        ("cap_window", "1d"),
        ("t_attr", "country"),
        ("t_op", "in"),
        ("t_values", "DE, AT"),
        ("t_attr", "device_type"),
        ("t_op", "not_in"),
        ("t_values", "tablet"),
    ]
}

/// The campaign form: an active campaign called `name` of the advertiser `owner`.
fn campaign_form<'a>(owner: &'a str, name: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("advertiser_id", owner),
        ("name", name),
        ("status", "active"),
        ("categories", ""),
        ("app_bundle", ""),
        ("cap_count", ""),
        ("cap_window", ""),
    ]
}

/// Two advertisers with a campaign each; returns the id of Acme's, as the forms hold it.
async fn acme_campaign(site: &Site, admin: &str) -> String {
    two_advertisers(site, admin).await.0.to_string()
}

/// The line item form with `changes` made to its fields.
fn line_item_form_with<'a>(
    campaign: &'a str,
    changes: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut form = line_item_form(campaign);
    for (key, value) in form.iter_mut() {
        if let Some((_, changed)) = changes.iter().find(|(k, _)| k == key) {
            *value = changed;
        }
    }
    form
}

/// The line item form with no targeting rows.
fn untargeted_line_item_form(campaign: &str) -> Vec<(&str, &str)> {
    line_item_form(campaign)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("t_"))
        .collect()
}

/// Two advertisers with a campaign each; returns the campaign ids.
async fn two_advertisers(site: &Site, admin: &str) -> (u64, u64) {
    let a = site.create(admin, "advertisers", &advertiser("Acme")).await;
    let b = site
        .create(admin, "advertisers", &advertiser("Globex"))
        .await;
    let campaign = |owner: u64, name: &'static str| {
        let owner = owner.to_string();
        async move {
            site.create(admin, "campaigns", &campaign_form(&owner, name))
                .await
        }
    };
    (
        campaign(a, "Acme winter").await,
        campaign(b, "Globex winter").await,
    )
}

#[tokio::test]
async fn a_wrong_password_or_unknown_user_gets_no_session() {
    let site = Site::new().await;
    let wrong = site.sign_in("root", "not the password").await.unwrap_err();
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("Wrong user name or password"));
    assert!(
        !wrong
            .cookies
            .iter()
            .any(|c| c.starts_with("marquee_session="))
    );
    let unknown = site.sign_in("nobody", PASSWORD).await.unwrap_err();
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);

    let session = site.sign_in("root", PASSWORD).await.unwrap();
    let home = site.get_ok("/", &session).await;
    assert!(home.body.contains("Today"));
    // Without a session every page sends the browser to the sign-in form.
    let anonymous = site.get("/line-items", "").await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert_eq!(anonymous.location, "/login");
}

#[tokio::test]
async fn an_overlong_user_name_fails_without_being_counted() {
    let site = Site::new().await;
    let long = "n".repeat(257);
    // More attempts than a name is allowed, none refused as too many: none was counted.
    for _ in 0..6 {
        let answer = site.sign_in(&long, PASSWORD).await.unwrap_err();
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        assert!(answer.body.contains("Wrong user name or password"));
        assert!(!answer.body.contains(&long));
    }
    // A name at the limit is counted as any other.
    let longest = "n".repeat(256);
    for _ in 0..5 {
        let answer = site.sign_in(&longest, PASSWORD).await.unwrap_err();
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    }
    let answer = site.sign_in(&longest, PASSWORD).await.unwrap_err();
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
}

/// No user name holds a NUL (PostgreSQL cannot even compare text holding one): such a name is
/// a wrong sign-in, neither looked up nor counted, on every store.
#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]
async fn a_user_name_with_a_nul_is_a_wrong_sign_in_on_every_store() {
    for site in [
        Site::new().await,
        Site::on(Some(TestDatabase::create().await)).await,
    ] {
        for _ in 0..6 {
            let answer = site.sign_in("ro\0ot", PASSWORD).await.unwrap_err();
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
            assert!(answer.body.contains("Wrong user name or password"));
        }
        // Nor in the name filter of a list.
        let admin = site.sign_in("root", PASSWORD).await.unwrap();
        let list = site.get("/advertisers?q=Ac%00me", &admin).await;
        assert_eq!(list.status, StatusCode::BAD_REQUEST, "{}", list.body);
        assert!(list.body.contains("NUL"), "{}", list.body);
    }
}

/// An attempt is counted as failed before its password is checked (so that concurrent guesses
/// cannot all pass the limiter together), and a success gives it back: users behind one
/// address sign in as often as they like.
#[tokio::test]
async fn successful_sign_ins_do_not_count_against_their_address() {
    let site = Site::new().await;
    let office: SocketAddr = "192.0.2.7:50000".parse().unwrap();
    // More successes than the address may fail (20).
    for _ in 0..21 {
        site.sign_in_from(Some(office), "root", PASSWORD)
            .await
            .unwrap();
    }
    // Failures still count: 20 from the address close it.
    for i in 0..20 {
        let name = format!("guess{i}");
        let answer = site
            .sign_in_from(Some(office), &name, PASSWORD)
            .await
            .unwrap_err();
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    }
    let closed = site
        .sign_in_from(Some(office), "root", PASSWORD)
        .await
        .unwrap_err();
    assert_eq!(closed.status, StatusCode::TOO_MANY_REQUESTS);
}

/// The cookies a sign-in sets: the sign-in form's, then the session's.
async fn sign_in_cookies(site: &Site) -> (String, String) {
    let form = site.get("/login", "").await;
    let token = hidden(&form.body, "csrf");
    let answer = site
        .post(
            "/login",
            &cookie_pair(&form.cookies[0]),
            &[("csrf", &token), ("name", "root"), ("password", PASSWORD)],
        )
        .await;
    let session = answer
        .cookies
        .iter()
        .find(|c| c.starts_with("marquee_session="))
        .unwrap();
    (form.cookies[0].clone(), session.clone())
}

#[tokio::test]
async fn the_session_cookie_is_http_only_and_same_site() {
    let site = Site::new().await;
    let (_, session) = sign_in_cookies(&site).await;
    assert!(session.contains("HttpOnly"));
    assert!(session.contains("SameSite=Lax"));
    assert!(session.contains("Max-Age=43200"));
    assert!(!session.contains("Secure"), "plain http in this test");
}

/// Split roles: the edges' URL and the dashboard's origin differ; the dashboard's decides.
#[tokio::test]
async fn cookies_are_secure_by_the_dashboard_s_origin_not_the_edges() {
    let plain_dashboard = Site::serving(None, "https://ads.test", false, None).await;
    let (form, session) = sign_in_cookies(&plain_dashboard).await;
    assert!(!form.contains("Secure"), "{form}");
    assert!(!session.contains("Secure"), "{session}");
    let tls_dashboard = Site::serving(None, "http://ads.test", true, None).await;
    let (form, session) = sign_in_cookies(&tls_dashboard).await;
    assert!(form.ends_with("; Secure"), "{form}");
    assert!(session.ends_with("; Secure"), "{session}");
}

#[tokio::test]
async fn a_session_expires_by_the_clock() {
    let site = Site::new().await;
    let session = site.sign_in("root", PASSWORD).await.unwrap();
    site.clock.advance(SignedDuration::from_hours(11));
    assert_eq!(site.get("/", &session).await.status, StatusCode::OK);
    site.clock.advance(SignedDuration::from_hours(1));
    let expired = site.get("/", &session).await;
    assert_eq!(expired.status, StatusCode::SEE_OTHER);
    assert_eq!(expired.location, "/login");
}

#[tokio::test]
async fn sign_out_ends_the_session() {
    let site = Site::new().await;
    let session = site.sign_in("root", PASSWORD).await.unwrap();
    let csrf = site.csrf(&session).await;
    let out = site.post("/logout", &session, &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(site.get("/", &session).await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn the_sign_in_form_needs_its_own_token() {
    let site = Site::new().await;
    let no_cookie = site
        .post(
            "/login",
            "",
            &[("csrf", "x"), ("name", "root"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(no_cookie.status, StatusCode::FORBIDDEN);
    let form = site.get("/login", "").await;
    let mismatch = site
        .post(
            "/login",
            &cookie_pair(&form.cookies[0]),
            &[("csrf", "forged"), ("name", "root"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(mismatch.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn every_post_needs_the_csrf_token_of_its_session() {
    let site = Site::new().await;
    let session = site.sign_in("root", PASSWORD).await.unwrap();
    let other = site.sign_in("root", PASSWORD).await.unwrap();
    let other_token = site.csrf(&other).await;
    let form = advertiser("Acme");
    let without = site.post("/advertisers", &session, &form).await;
    assert_eq!(without.status, StatusCode::FORBIDDEN);
    assert!(without.body.contains("security token"));
    let mut foreign = vec![("csrf", other_token.as_str())];
    foreign.extend_from_slice(&form);
    assert_eq!(
        site.post("/advertisers", &session, &foreign).await.status,
        StatusCode::FORBIDDEN,
        "another session's token"
    );
    assert!(site.holds_none(ObjectKind::Advertiser).await);
    let id = site.create(&session, "advertisers", &form).await;
    assert_eq!(
        site.store
            .get(ObjectKind::Advertiser, id, None)
            .await
            .unwrap()
            .name,
        "Acme"
    );
}

#[tokio::test]
async fn a_line_item_made_through_the_form_has_its_targeting_and_cap() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let id = site.create_line_item(&admin, &campaign).await;
    let stored: LineItem = site.stored::<LineItem>(id).await;
    assert_eq!(stored.frequency_caps.len(), 1);
    assert_eq!(stored.frequency_caps[0].count, 2);
    assert_eq!(
        stored.targeting,
        Some(Targeting::All(vec![
            Targeting::Country(vec!["DE".into(), "AT".into()]),
            Targeting::Not(Box::new(Targeting::DeviceType(vec![
                marquee_model::DeviceType::Tablet
            ]))),
        ]))
    );
    assert_eq!(stored.price.amount_micros, marquee_model::Micros(2_500_000));
    // The page shows it back as rows, with its pacing section.
    let page = site
        .get_ok(&format!("/line-items/{id}?saved=1"), &admin)
        .await;
    assert!(page.body.contains("Saved."));
    assert!(page.body.contains("value=\"DE, AT\""));
    assert!(page.body.contains("id=\"pacing\""));
}

/// Metro, postal code, AS number and connection type rows are stored as their leaves and shown
/// back; the connection types as a select of their values.
#[tokio::test]
async fn geo_and_network_rows_round_trip_through_the_form() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let mut form: Vec<(&str, &str)> = untargeted_line_item_form(&campaign);
    form.extend([
        ("t_attr", "metro"),
        ("t_op", "in"),
        ("t_values", "807, 501"),
        ("t_attr", "postal"),
        ("t_op", "not_in"),
        ("t_values", "10115"),
        ("t_attr", "asn"),
        ("t_op", "in"),
        ("t_values", "AS3320"),
        ("t_attr", "connection_type"),
        ("t_op", "in"),
        ("t_values", ""),
        ("t_choice_3", "cellular"),
        ("t_choice_3", "satellite"),
    ]);
    let id = site.create(&admin, "line-items", &form).await;
    let stored = site.stored::<LineItem>(id).await;
    assert_eq!(
        stored.targeting,
        Some(Targeting::All(vec![
            Targeting::Metro(vec![807, 501]),
            Targeting::Not(Box::new(Targeting::Postal(vec!["10115".into()]))),
            Targeting::Asn(vec![3320]),
            Targeting::ConnectionType(vec![ConnectionType::Cellular, ConnectionType::Satellite]),
        ]))
    );
    let page = site.get(&format!("/line-items/{id}"), &admin).await;
    assert!(page.body.contains("value=\"807, 501\""), "{}", page.body);
    assert!(page.body.contains("value=\"10115\""));
    assert!(page.body.contains("value=\"3320\""));
    let select = page
        .body
        .split("<select name=\"t_choice_3\"")
        .nth(1)
        .and_then(|rest| rest.split("</select>").next())
        .unwrap();
    assert!(!select.contains(" hidden"), "{select}");
    assert!(select.contains("value=\"cellular\" selected"), "{select}");
    assert!(select.contains("value=\"satellite\" selected"), "{select}");
    assert!(!select.contains("value=\"corporate\" selected"), "{select}");
}

/// A line item's page warns, in the API's words, about geo targeting the edges cannot match
/// on ad requests, by where they learn a request's location.
#[tokio::test]
async fn a_line_item_page_warns_about_geo_targeting_without_a_geo_source() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    // Country DE, not device tablet.
    let id = site.create_line_item(&admin, &campaign).await;
    let untargeted: Vec<(&str, &str)> = untargeted_line_item_form(&campaign);
    let untargeted = site.create(&admin, "line-items", &untargeted).await;
    let warning = "<p class=\"warning\" role=\"status\">geo targeting (country) cannot match ad \
                   requests: no geo database is configured (geo.database) and no country header \
                   (edge.country_header)</p>";
    let page = site.get(&format!("/line-items/{id}"), &admin).await;
    assert!(page.body.contains(warning), "{}", page.body);
    let page = site.get(&format!("/line-items/{untargeted}"), &admin).await;
    assert!(!page.body.contains("class=\"warning\""), "{}", page.body);

    site.manager.set_geo_availability(GeoAvailability {
        location: GeoLocationSource::CountryHeaderOnly,
        network: false,
    });
    let page = site.get(&format!("/line-items/{id}"), &admin).await;
    assert!(!page.body.contains("class=\"warning\""), "{}", page.body);
}

/// Why-not-served takes the request's region, city, metro, postal code, AS number and
/// connection type, and names the geo attribute that rejects a line item.
#[tokio::test]
async fn why_not_served_takes_the_requests_whole_location() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let mut form: Vec<(&str, &str)> = untargeted_line_item_form(&campaign);
    let rows = [
        ("region", "US-CA"),
        ("city", "San Francisco"),
        ("metro", "807"),
        ("postal", "94103"),
        ("asn", "7922"),
        ("connection_type", "cable_dsl"),
    ];
    for (attribute, values) in rows {
        form.extend([("t_attr", attribute), ("t_op", "in"), ("t_values", values)]);
    }
    let id = site.create(&admin, "line-items", &form).await;
    let placement = news_placement(&site, &admin).await;
    site.manager.refresh().await.unwrap();
    let verdict = |query: String| {
        let site = &site;
        let admin = admin.clone();
        async move {
            let page = site
                .get_ok(
                    &format!("/why-not-served?placement={placement}&{query}"),
                    &admin,
                )
                .await;
            outcome(&page.body, id)
        }
    };
    let everywhere = "region=us-ca&city=San+Francisco&metro=807&postal=94103&asn=7922\
                      &connection=cable_dsl";
    // No creative: targeting holds, the line item fails later.
    let holds = verdict(everywhere.to_owned()).await;
    assert!(!holds.contains("targeting"), "{holds}");
    for (field, other, reason) in [
        (
            "region=us-ca",
            "region=US-NY",
            "region — request: US-NY; targeted: US-CA",
        ),
        (
            "city=San+Francisco",
            "city=Oakland",
            "city — request: Oakland; targeted: San Francisco",
        ),
        (
            "metro=807",
            "metro=501",
            "metro — request: 501; targeted: 807",
        ),
        (
            "postal=94103",
            "postal=94110",
            "postal — request: 94110; targeted: 94103",
        ),
        (
            "asn=7922",
            "asn=3320",
            "asn — request: AS3320; targeted: AS7922",
        ),
        (
            "connection=cable_dsl",
            "connection=cellular",
            "connection_type — request: cellular; targeted: cable/DSL",
        ),
    ] {
        let shown = verdict(everywhere.replace(field, other)).await;
        assert_eq!(shown, format!("targeting: {reason}"));
    }
    // Without an address or the field, and without a geo database, the value is unknown.
    let shown = verdict(everywhere.replace("region=us-ca", "region=")).await;
    assert_eq!(
        shown,
        "region: unknown — no geo database configured; targeted: US-CA"
    );
    let page = site
        .get(
            &format!("/why-not-served?placement={placement}&metro=eight"),
            &admin,
        )
        .await;
    assert!(page.body.contains("is not a DMA code"), "{}", page.body);
}

/// Why-not-served locates an IP address in the geo database and explains geo targeting with
/// the request's value beside the targeted ones; a field typed in the form replaces what the
/// lookup gave.
#[tokio::test]
async fn why_not_served_locates_the_request_by_its_ip_address() {
    let site = Site::with_demo_geo().await;
    let admin = site.sign_in("root", PASSWORD).await.unwrap();
    let (placement, germany, america) = one_line_item_per_country(&site, &admin).await;
    let explain = |query: &str| {
        let site = &site;
        let path = format!("/why-not-served?placement={placement}&{query}");
        let admin = admin.clone();
        async move {
            let page = site.get_ok(&path, &admin).await;
            page.body
        }
    };

    let berlin = explain("ip=10.1.2.3").await;
    assert!(
        berlin.contains("Resolved location: 10.1.2.3 → DE · DE-BE · Berlin · 10115 · "),
        "{berlin}"
    );
    assert!(
        berlin.contains(&format!("Serves: Germany (#{germany})")),
        "{berlin}"
    );
    assert_eq!(outcome(&berlin, germany), "serves");
    assert_eq!(
        outcome(&berlin, america),
        "targeting: country — request: DE; targeted: US"
    );

    // What if the visitor were in the United States.
    let what_if = explain("ip=10.1.2.3&country=us").await;
    assert_eq!(
        outcome(&what_if, germany),
        "targeting: country — request: US; targeted: DE"
    );
    assert_eq!(
        outcome(&what_if, america),
        "no creative fits the placement&#39;s sizes and formats"
    );

    let elsewhere = explain("ip=203.0.113.7").await;
    assert!(
        elsewhere.contains("Resolved location: 203.0.113.7 → not in the geo database"),
        "{elsewhere}"
    );
    assert_eq!(
        outcome(&elsewhere, america),
        "country: unknown — 203.0.113.7 is not in the geo database; targeted: US"
    );

    let nothing = explain("ip=").await;
    assert!(!nothing.contains("Resolved location"), "{nothing}");
    assert_eq!(
        outcome(&nothing, germany),
        "country: unknown — no IP address or country given; targeted: DE"
    );

    let malformed = explain("ip=10.1.2").await;
    assert!(
        malformed.contains("10.1.2&#34; is not an IP address such as 203.0.113.7"),
        "{malformed}"
    );
    assert!(!malformed.contains("id=\"verdicts\""), "{malformed}");
}

/// Without a geo database an address is not looked up, and the page says so.
#[tokio::test]
async fn why_not_served_without_a_geo_database_says_so() {
    let (site, admin) = Site::as_root().await;
    let (placement, _, america) = one_line_item_per_country(&site, &admin).await;
    let page = site
        .get_ok(
            &format!("/why-not-served?placement={placement}&ip=10.1.2.3"),
            &admin,
        )
        .await;
    assert!(
        page.body
            .contains("Resolved location: 10.1.2.3 is not looked up — no geo database configured"),
        "{}",
        page.body
    );
    assert_eq!(
        outcome(&page.body, america),
        "country: unknown — no geo database configured; targeted: US"
    );
}

/// A placement on a news site, for test requests.
async fn news_placement(site: &Site, admin: &str) -> u64 {
    news_placement_named(site, admin, "Top").await
}

/// A placement called `name` on a news site of a new publisher.
async fn news_placement_named(site: &Site, admin: &str, name: &str) -> u64 {
    let publisher = site
        .create(
            admin,
            "publishers",
            &[("name", "Daily News"), ("status", "active")],
        )
        .await
        .to_string();
    let news = site
        .create(
            admin,
            "sites",
            &[
                ("publisher_id", publisher.as_str()),
                ("name", "News"),
                ("status", "active"),
                ("domain", "news.example"),
            ],
        )
        .await
        .to_string();
    site.create(
        admin,
        "placements",
        &[
            ("site_id", news.as_str()),
            ("name", name),
            ("status", "active"),
            ("sizes", "300x250"),
            ("formats", "banner"),
            ("image_tag", "off"),
        ],
    )
    .await
}

/// A placement, a line item "Germany" targeting country DE with a creative that fits it, and
/// one "America" targeting US without a creative; published. Returns their ids.
async fn one_line_item_per_country(site: &Site, admin: &str) -> (u64, u64, u64) {
    let (campaign, _) = two_advertisers(site, admin).await;
    let campaign = campaign.to_string();
    let targeting = |name: &'static str, country: &'static str| {
        let mut form: Vec<(&str, &str)> = line_item_form(&campaign)
            .into_iter()
            .filter(|(k, _)| !k.starts_with("t_") && *k != "name")
            .collect();
        form.extend([
            ("name", name),
            ("t_attr", "country"),
            ("t_op", "in"),
            ("t_values", country),
        ]);
        form
    };
    let germany = site
        .create(admin, "line-items", &targeting("Germany", "DE"))
        .await;
    let america = site
        .create(admin, "line-items", &targeting("America", "US"))
        .await;
    let creative = upload_creative(
        site,
        admin,
        &germany.to_string(),
        "https://shop.example/boots",
    )
    .await;
    assert_eq!(creative.status, StatusCode::SEE_OTHER, "{}", creative.body);
    let placement = news_placement(site, admin).await;
    site.manager.refresh().await.unwrap();
    (placement, germany, america)
}

/// The outcome cell of `line_item`'s row in a why-not-served page.
fn outcome(body: &str, line_item: u64) -> String {
    let row = format!("/line-items/{line_item}\"");
    let at = body.find(&row).unwrap_or_else(|| panic!("{body}"));
    body[at..]
        .split("<td>")
        .nth(1)
        .and_then(|cell| cell.split("</td>").next())
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_rule_broken_in_a_form_is_shown_at_its_field() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let csrf = site.csrf(&admin).await;
    let mut form = vec![("csrf", csrf.as_str())];
    form.extend(line_item_form(&campaign).into_iter().map(|(k, v)| {
        if k == "end" {
            (k, "2026-10-01T00:00")
        } else {
            (k, v)
        }
    }));
    let answer = site.post("/line-items", &admin, &form).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    let field = answer.body.find("data-field=\"end\"").unwrap();
    let next_field = answer.body[field + 1..].find("data-field=").unwrap() + field + 1;
    let end_field = &answer.body[field..next_field];
    assert!(end_field.contains("field-error"), "{end_field}");
    assert!(end_field.contains("must be after start"), "{end_field}");
    // What was typed stays in the form.
    assert!(answer.body.contains("value=\"Winter sale\""));
    assert!(site.holds_none(ObjectKind::LineItem).await);
}

/// A spend goal typed as "500" is 500 units of the advertiser's currency, and the line item's
/// page shows it back as money: in the form, in the pacing text and on the chart's axis.
#[tokio::test]
async fn a_spend_goal_is_typed_and_shown_in_the_currency() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let form = line_item_form_with(
        &campaign,
        &[
            ("price.amount", "4.50"),
            ("goal.metric", "spend"),
            ("goal.daily", "500"),
            ("goal.lifetime", "12000"),
        ],
    );
    let id = site.create(&admin, "line-items", &form).await;
    let stored: LineItem = site.stored::<LineItem>(id).await;
    let goal = stored.goal.unwrap();
    assert_eq!(goal.daily, Some(500_000_000), "500 dollars, not 500 micros");
    assert_eq!(goal.lifetime, Some(12_000_000_000));
    assert_eq!(stored.price.amount_micros, marquee_model::Micros(4_500_000));
    let page = site.get_ok(&format!("/line-items/{id}"), &admin).await;
    let daily = field_block(&page.body, "goal.daily");
    assert!(daily.contains("value=\"500.00\""), "{daily}");
    assert!(
        daily.contains("<span class=\"unit\" data-spend-only>$</span>"),
        "{daily}"
    );
    assert!(field_block(&page.body, "price.amount").contains("value=\"4.50\""));
    let pacing = &page.body[page.body.find("id=\"pacing\"").unwrap()..];
    assert!(
        pacing.contains("$500.00 a day, $12,000.00 in all"),
        "{pacing}"
    );
    // The chart's axis is in dollars (a round ceiling of the curve), never in micros.
    assert!(pacing.contains(">$0</text>"), "{pacing}");
    assert!(!pacing.contains("M</text>"), "{pacing}");
    assert!(!pacing.contains(".000000"), "{pacing}");
}

/// Three mistakes of three kinds (a value the model does not know, an amount with too many
/// decimals, a rule across fields) come back at once: a summary at the top linking to each
/// field, each message beside its field, and everything typed still in the form.
#[tokio::test]
async fn every_mistake_in_a_form_is_shown_at_once_and_nothing_typed_is_lost() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let csrf = site.csrf(&admin).await;
    let mut form = vec![("csrf", csrf.as_str())];
    form.extend(line_item_form(&campaign).into_iter().map(|(k, v)| match k {
        "end" => (k, "2026-10-01T00:00"),
        "goal.metric" => (k, "spend"),
        "goal.daily" => (k, "12.345"),
        _ => (k, v),
    }));
    // The first targeting row becomes a device the model does not know.
    for (name, value) in [("t_attr", "device_type"), ("t_values", "mobile")] {
        let row = form.iter().position(|(k, _)| *k == name).unwrap();
        form[row].1 = value;
    }
    let answer = site.post("/line-items", &admin, &form).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    let summary_start = answer.body.find("class=\"error-summary\"").unwrap();
    let summary_end = answer.body[summary_start..].find("</div>").unwrap() + summary_start;
    let summary = &answer.body[summary_start..summary_end];
    assert!(summary.contains("3 things to fix"), "{summary}");
    for (anchor, message) in [
        ("#f-end", "must be after start"),
        ("#f-goal.daily", "has more decimals than USD has (2)"),
        (
            "#f-targeting",
            "Device must be one of: desktop, phone, tablet",
        ),
    ] {
        assert!(
            summary.contains(&format!("href=\"{anchor}\"")),
            "{anchor}: {summary}"
        );
        assert!(summary.contains(message), "{message}: {summary}");
    }
    for word in ["variant", "expected", "`", "micros"] {
        assert!(!summary.contains(word), "{word}: {summary}");
    }
    assert!(field_block(&answer.body, "end").contains("must be after start"));
    assert!(field_block(&answer.body, "goal.daily").contains("has more decimals"));
    assert!(field_block(&answer.body, "targeting").contains("Device must be one of"));
    // Each anchor names an element of the page.
    for id in ["f-end", "f-goal.daily", "f-targeting"] {
        assert!(answer.body.contains(&format!("id=\"{id}\"")), "{id}");
    }
    // Nothing typed is lost.
    for kept in [
        "value=\"Winter sale\"",
        "value=\"12.345\"",
        "value=\"2026-10-01T00:00\"",
        "value=\"mobile\"",
        "value=\"2.5\"",
    ] {
        assert!(answer.body.contains(kept), "{kept} lost");
    }
    assert!(site.holds_none(ObjectKind::LineItem).await);
}

/// The part of a form page that shows field `name`: its input, help and errors.
fn field_block<'a>(body: &'a str, name: &str) -> &'a str {
    let start = body
        .find(&format!("data-field=\"{name}\""))
        .unwrap_or_else(|| panic!("no field {name}"));
    let end = body[start + 1..]
        .find("data-field=")
        .map_or(body.len(), |next| start + 1 + next);
    &body[start..end]
}

#[tokio::test]
async fn a_line_item_form_starts_in_the_advertisers_currency_and_shows_the_rule_at_its_field() {
    let (site, admin) = Site::as_root().await;
    let mut euros = advertiser("Euros");
    euros[2] = ("currency", "EUR");
    let advertiser_id = site.create(&admin, "advertisers", &euros).await;
    let owner = advertiser_id.to_string();
    let campaign = site
        .create(&admin, "campaigns", &campaign_form(&owner, "Winter"))
        .await
        .to_string();

    // A new line item starts in the advertiser's currency under a campaign. (The
    // advertiser's own user books none: line items are the publisher's.)
    let form = site
        .get_ok(&format!("/line-items/new?parent={campaign}"), &admin)
        .await;
    let currency = field_block(&form.body, "price.currency");
    assert!(currency.contains("value=\"EUR\""), "{currency}");
    site.user("euro-ops", Role::Advertiser, Some(advertiser_id))
        .await;
    let tenant = site.sign_in("euro-ops", PASSWORD).await.unwrap();
    let form = site.get("/line-items/new", &tenant).await;
    assert_eq!(form.status, StatusCode::FORBIDDEN);

    // Another currency is refused at its field, naming both; nothing is stored.
    let csrf = site.csrf(&admin).await;
    let mut post = vec![("csrf", csrf.as_str())];
    post.extend(line_item_form(&campaign));
    let answer = site.post("/line-items", &admin, &post).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    let currency = field_block(&answer.body, "price.currency");
    assert!(currency.contains("field-error"), "{currency}");
    assert!(
        currency.contains(&format!(
            "must be EUR, the currency of advertiser {advertiser_id}, not USD"
        )),
        "{currency}"
    );
    assert!(site.holds_none(ObjectKind::LineItem).await);

    // In its currency it is made; then the advertiser's currency is held at its field.
    for field in &mut post {
        if field.0 == "price.currency" {
            field.1 = "EUR";
        }
    }
    let answer = site.post("/line-items", &admin, &post).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let line_item = id_in(&answer.location);
    let mut change = vec![("csrf", csrf.as_str()), ("version", "1")];
    change.extend(advertiser("Euros"));
    let answer = site
        .post(&format!("/advertisers/{advertiser_id}"), &admin, &change)
        .await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    let currency = field_block(&answer.body, "currency");
    assert!(
        currency.contains(&format!(
            "cannot change from EUR to USD while line items are priced in another currency \
             (EUR: line item {line_item})"
        )),
        "{currency}"
    );
}

#[tokio::test]
async fn an_advertiser_cannot_open_another_advertisers_line_item() {
    let (site, admin) = Site::as_root().await;
    let (acme_campaign, globex_campaign) = two_advertisers(&site, &admin).await;
    let acme_campaign = acme_campaign.to_string();
    let globex_campaign = globex_campaign.to_string();
    let own = site
        .create(&admin, "line-items", &line_item_form(&acme_campaign))
        .await;
    let foreign = site
        .create(&admin, "line-items", &line_item_form(&globex_campaign))
        .await;
    let acme = site
        .store
        .get(ObjectKind::Campaign, acme_campaign.parse().unwrap(), None)
        .await
        .unwrap()
        .owner_id;
    site.user("acme-ops", Role::Advertiser, Some(acme)).await;
    let alice = site.sign_in("acme-ops", PASSWORD).await.unwrap();

    assert_eq!(
        site.get(&format!("/line-items/{own}"), &alice).await.status,
        StatusCode::OK
    );
    let refused = site.get(&format!("/line-items/{foreign}"), &alice).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert!(!refused.body.contains("Winter sale"));
    let list = site.get("/line-items", &alice).await;
    assert!(list.body.contains(&format!("/line-items/{own}\"")));
    assert!(!list.body.contains(&format!("/line-items/{foreign}\"")));
    // Nor change it, nor reach the supply side or another advertiser's campaign in a form.
    let csrf = site.csrf(&alice).await;
    let mut form = vec![("csrf", csrf.as_str()), ("version", "1")];
    form.extend(line_item_form(&globex_campaign));
    let update = site
        .post(&format!("/line-items/{foreign}"), &alice, &form)
        .await;
    assert_eq!(update.status, StatusCode::NOT_FOUND);
    assert_eq!(
        site.get("/placements", &alice).await.status,
        StatusCode::FORBIDDEN
    );
    let mut create = vec![("csrf", csrf.as_str())];
    create.extend(line_item_form(&globex_campaign));
    let made = site.post("/line-items", &alice, &create).await;
    assert_eq!(
        made.status,
        StatusCode::FORBIDDEN,
        "line items are the publisher's"
    );
    assert_eq!(
        site.get("/edges", &alice).await.status,
        StatusCode::FORBIDDEN
    );

    // Why-not-served offers an advertiser no publisher's placement names.
    news_placement_named(&site, &admin, "Secret slot").await;
    assert!(
        site.get("/why-not-served", &admin)
            .await
            .body
            .contains("Secret slot")
    );
    let offered = site.get_ok("/why-not-served", &alice).await;
    assert!(!offered.body.contains("Secret slot"));
}

/// An advertiser's own record carries what the operator decides for it (a paused advertiser
/// is on a credit hold; its domains are what exchanges check their block lists against): its
/// users read it but cannot change or archive it.
#[tokio::test]
async fn an_advertiser_user_reads_its_advertiser_but_cannot_change_it() {
    let (site, admin) = Site::as_root().await;
    let mut held = advertiser("Acme");
    held[1] = ("status", "paused");
    let acme = site.create(&admin, "advertisers", &held).await;
    site.user("acme-ops", Role::Advertiser, Some(acme)).await;
    let alice = site.sign_in("acme-ops", PASSWORD).await.unwrap();
    let path = format!("/advertisers/{acme}");

    let page = site.get_ok(&path, &alice).await;
    assert!(
        page.body
            .contains("Only an admin can change this advertiser.")
    );
    assert!(!page.body.contains(">Save</button>"));
    assert!(!page.body.contains(">Archive</button>"));
    let csrf = site.csrf(&alice).await;
    let mut release = vec![("csrf", csrf.as_str()), ("version", "1")];
    release.extend(advertiser("Acme"));
    release.retain(|(k, _)| *k != "domains");
    release.push(("domains", "someone-else.example"));
    let refused = site.post(&path, &alice, &release).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("only an admin can change advertisers")
    );
    let archive = site
        .post(&format!("{path}/archive"), &alice, &[("csrf", &csrf)])
        .await;
    assert_eq!(archive.status, StatusCode::FORBIDDEN);
    let stored = site
        .store
        .get(ObjectKind::Advertiser, acme, None)
        .await
        .unwrap();
    assert_eq!(stored.status, marquee_model::Status::Paused);
    assert_eq!(stored.meta.version, 1);
    // The admin still changes it.
    let admin_csrf = site.csrf(&admin).await;
    release[0] = ("csrf", admin_csrf.as_str());
    let saved = site.post(&path, &admin, &release).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert!(
        site.get(&path, &admin)
            .await
            .body
            .contains(">Save</button>")
    );
}

#[tokio::test]
async fn reports_render_charts_and_csv_for_the_signed_in_user() {
    let (site, admin) = Site::as_root().await;
    // Without `to`: the report ends at the site's clock's now.
    let page = site
        .get_ok(
            "/reports?from=2026-11-01&granularity=day&group_by=line_item",
            &admin,
        )
        .await;
    assert!(page.body.contains("<svg class=\"chart\""));
    assert!(page.body.contains("data-impressions=\"0\""));
    let csv = site
        .get_ok(
            "/reports.csv?from=2026-11-01&to=2026-12-01&granularity=day",
            &admin,
        )
        .await;
    assert!(csv.body.starts_with("time,requests,"), "{}", csv.body);
    // Two ticked "Group by" boxes send the key twice: both apply, on the page and in the CSV.
    let two = "from=2026-11-01&to=2026-12-01&granularity=day&group_by=line_item&group_by=country";
    let page = site.get_ok(&format!("/reports?{two}"), &admin).await;
    for dimension in ["line_item", "country"] {
        assert!(
            page.body
                .contains(&format!("value=\"{dimension}\" checked")),
            "{dimension} stays ticked"
        );
    }
    let csv = site.get_ok(&format!("/reports.csv?{two}"), &admin).await;
    assert!(
        csv.body
            .starts_with("time,line_item,line_item_name,country,requests,"),
        "{}",
        csv.body
    );
    let bad = site.get_ok("/reports?from=yesterday", &admin).await;
    assert!(bad.body.contains("is not a date"));
}

/// Programmatic demand on the Reports page: by bidder, beside direct delivery (bidder 0,
/// "direct"); a bidder this manager's configuration does not name shows by id; its
/// impressions and revenue in their own columns.
#[tokio::test]
async fn reports_show_programmatic_demand_by_bidder() {
    use marquee_stats::{Counters, RowKey, bidder_id};
    let (site, admin) = Site::as_root().await;
    // Rows of the same shape as the API's programmatic report test, deliberately: each crate's
    // test states the rows it reads.
    let key = |creative: u64| RowKey {
        line_item: 0,
        bucket: 1_795_000_000 / 3_600 * 3_600,
        creative,
        placement: 0,
        country: *b"DE",
        region: [0; 3],
        device: 1,
    };
    // 500 impressions of winning bids at a net 3.00 CPM: 1.50 of revenue.
    let bid = Counters {
        programmatic_auctions: 600,
        programmatic_requests: 600,
        programmatic_bids: 550,
        programmatic_wins: 500,
        programmatic_impressions: 500,
        programmatic_cpm_micros: 500 * 3_000_000,
        ..Counters::default()
    };
    let no_bid = Counters {
        no_bids: 1,
        ..Counters::default()
    };
    let mut hours = vec![(key(bidder_id("alpha")), bid), (key(0), no_bid)];
    hours.sort_unstable_by_key(|(k, _)| *k);
    site.store
        .commit_run(marquee_store::stats_suite::hour_rows(hours))
        .await
        .unwrap();
    let page = site
        .get_ok(
            "/reports?from=2026-11-18&tz=UTC&granularity=day&group_by=bidder",
            &admin,
        )
        .await;
    assert!(
        page.body.contains(
            "<th>programmatic auctions</th><th>programmatic bids</th><th>programmatic timeouts</th>\
             <th>programmatic wins</th><th>programmatic impressions</th><th>programmatic revenue</th>"
        ),
        "{}",
        page.body
    );
    assert!(page.body.contains("<td>direct</td>"), "{}", page.body);
    let alpha = format!("<td>#{}</td>", bidder_id("alpha"));
    let row = &page.body[page
        .body
        .find(&alpha)
        .unwrap_or_else(|| panic!("{}", page.body))..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.ends_with("<td>600</td><td>550</td><td>0</td><td>500</td><td>500</td><td>1.50</td>"),
        "{row}"
    );
    assert!(
        page.body.contains("value=\"bidder\" checked"),
        "bidder is a dimension of the form"
    );
}

/// Invalid traffic shows beside the billing figures, never in them: the report table's invalid
/// columns and the breakdown by reason under it, the CSV's invalid columns, and today's count
/// on the home page.
#[tokio::test]
async fn reports_and_home_show_invalid_traffic_by_reason() {
    use marquee_stats::{Counters, EventKind, InvalidReason, RowKey};

    let (site, admin) = Site::as_root().await;
    // The site's clock is 2026-11-18T11:06:40Z. Refused before any ad was decided (no line
    // item): 3 crawler impressions and 2 image tags without a cache buster; one valid
    // no-bid.
    let mut counters = Counters {
        no_bids: 1,
        ..Counters::default()
    };
    for (reason, times) in [
        (InvalidReason::Crawler, 3),
        (InvalidReason::NoCacheBuster, 2),
    ] {
        for _ in 0..times {
            counters.record(EventKind::InvalidImpression, i64::from(reason.code()));
        }
    }
    counters.record(
        EventKind::InvalidClick,
        i64::from(InvalidReason::TooFast.code()),
    );
    let hours = vec![(
        RowKey {
            line_item: 0,
            bucket: 1_795_000_000 / 3_600 * 3_600,
            creative: 0,
            placement: 0,
            country: *b"DE",
            region: *b"BY\0",
            device: 1,
        },
        counters,
    )];
    site.store
        .commit_run(marquee_store::stats_suite::hour_rows(hours))
        .await
        .unwrap();

    let page = site
        .get_ok("/reports?from=2026-11-18&tz=UTC&granularity=day", &admin)
        .await;
    assert!(
        page.body
            .contains("<th>spend</th><th>invalid impressions</th><th>invalid clicks</th>"),
        "{}",
        page.body
    );
    // The day's row: no impressions, clicks or spend (with two decimals: an admin's report
    // sums advertisers' currencies); 5 invalid impressions, 1 invalid click.
    assert!(
        page.body
            .contains("<td>0</td><td>0</td><td></td><td>0.00</td><td>5</td><td>1</td>"),
        "{}",
        page.body
    );
    let reasons = &page.body[page.body.find("id=\"invalid-reasons\"").unwrap()..];
    for (reason, count) in [
        ("crawler", 3),
        ("no_cache_buster", 2),
        ("too_fast", 1),
        ("datacenter", 0),
    ] {
        assert!(
            reasons.contains(&format!("<td>{reason}</td><td>{count}</td>")),
            "{reason}: {reasons}"
        );
    }
    assert!(reasons.contains("<th>total</th><th>6</th>"), "{reasons}");

    let csv = site
        .get_ok(
            "/reports.csv?from=2026-11-18&tz=UTC&granularity=day",
            &admin,
        )
        .await;
    let mut lines = csv.body.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let values: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| values[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(column("impressions"), "0");
    assert_eq!(column("invalid_impressions"), "5");
    assert_eq!(column("invalid_clicks"), "1");
    assert_eq!(column("invalid_crawler"), "3");
    assert_eq!(column("invalid_no_cache_buster"), "2");
    assert_eq!(column("invalid_too_fast"), "1");

    let home = site.get_ok("/", &admin).await;
    let invalid = &home.body[home.body.find("id=\"invalid-today\"").unwrap()..];
    assert!(
        invalid.contains("): 6; yesterday at this time: 0."),
        "{invalid}"
    );
}

/// A PNG's signature and header chunk (300×250): all the dashboard reads of an image.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x01\x2c\0\0\0\xfa\x08\x06\0\0\0";

/// Posts the creative form for `line_item` with [`PNG`] as its uploaded image.
async fn upload_creative(site: &Site, session: &str, line_item: &str, landing_url: &str) -> Answer {
    let csrf = site.csrf(session).await;
    let mut body = Vec::new();
    for (name, value) in [
        ("csrf", csrf.as_str()),
        ("line_item_id", line_item),
        ("name", "Uploaded banner"),
        ("status", "active"),
        ("size", "300x250"),
        ("landing_url", landing_url),
        ("weight", "1"),
        ("content.type", "image"),
        ("content.image_url", ""),
        ("content.alt", "Boots"),
        ("categories", ""),
    ] {
        body.extend_from_slice(
            format!("--B\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        b"--B\r\nContent-Disposition: form-data; name=\"image_file\"; filename=\"b.png\"\r\n\
          Content-Type: image/png\r\n\r\n",
    );
    body.extend_from_slice(PNG);
    body.extend_from_slice(b"\r\n--B--\r\n");
    site.post_multipart("/creatives", session, body).await
}

/// The files in the uploads directory (none when it was never made).
fn uploaded_files(site: &Site) -> Vec<PathBuf> {
    match std::fs::read_dir(&site.uploads) {
        Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", site.uploads.display()),
    }
}

#[tokio::test]
async fn a_refused_creative_leaves_no_uploaded_file() {
    let (site, admin) = Site::as_root().await;
    let (acme, globex) = two_advertisers(&site, &admin).await;
    let line_item = |campaign: u64| {
        let campaign = campaign.to_string();
        let site = &site;
        let admin = &admin;
        async move {
            site.create(admin, "line-items", &line_item_form(&campaign))
                .await
                .to_string()
        }
    };
    let own = line_item(acme).await;
    let foreign = line_item(globex).await;
    let acme_owner = site
        .store
        .get(ObjectKind::Campaign, acme, None)
        .await
        .unwrap()
        .owner_id;
    site.user("acme-ops", Role::Advertiser, Some(acme_owner))
        .await;
    let alice = site.sign_in("acme-ops", PASSWORD).await.unwrap();
    for (session, line_item, landing_url, refused_at) in [
        // The creative's own rules.
        (&admin, own.as_str(), "not a url", "landing_url"),
        // The store's: no such line item, or not in the user's scope.
        (&admin, "999", "https://shop.example/", "line_item_id"),
        (
            &alice,
            foreign.as_str(),
            "https://shop.example/",
            "line_item_id",
        ),
    ] {
        let answer = upload_creative(&site, session, line_item, landing_url).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{line_item}: {}",
            answer.body
        );
        assert!(
            field_block(&answer.body, refused_at).contains("field-error"),
            "{refused_at}: {}",
            answer.body
        );
        assert_eq!(uploaded_files(&site), Vec::<PathBuf>::new(), "{line_item}");
    }
    let answer = upload_creative(&site, &alice, &own, "https://shop.example/").await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(uploaded_files(&site).len(), 1);
}

#[tokio::test]
async fn an_uploaded_image_becomes_the_creatives_picture() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let line_item = site.create_line_item(&admin, &campaign).await.to_string();
    let answer = upload_creative(&site, &admin, &line_item, "https://shop.example/").await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let creative = site
        .stored::<marquee_model::Creative>(id_in(&answer.location))
        .await;
    let marquee_model::CreativeContent::Image { image_url, alt } = creative.content else {
        panic!("not an image: {:?}", creative.content);
    };
    assert_eq!(alt, "Boots");
    let path = image_url
        .strip_prefix("http://ads.test")
        .expect("the public URL");
    assert!(
        path.starts_with("/uploads/") && path.ends_with(".png"),
        "{path}"
    );
    let served = site.get_ok(path, "").await;
    assert_eq!(served.bytes, PNG);
    assert_eq!(
        site.get("/uploads/..%2Fm.db", "").await.status,
        StatusCode::NOT_FOUND
    );
}

/// Pages run only the script file the dashboard ships: no inline script, and a policy that
/// would refuse one.
#[tokio::test]
async fn pages_run_only_the_shipped_script() {
    let (site, admin) = Site::as_root().await;
    let page = site.get_ok("/line-items/new", &admin).await;
    assert!(
        page.policy.contains("script-src 'self';"),
        "{}",
        page.policy
    );
    assert!(!page.policy.contains("unsafe-inline"), "{}", page.policy);
    assert!(
        page.body
            .contains("<script src=\"/assets/dashboard.js\"></script>")
    );
    assert_eq!(page.body.matches("<script").count(), 1, "{}", page.body);
    let script = site.get_ok("/assets/dashboard.js", "").await;
    assert!(script.body.contains("data-when") || script.body.contains("dataset.when"));
}

/// A stored row of `line_item` in `bucket`, on no placement, country or device.
fn row_key(line_item: u64, bucket: i64) -> marquee_stats::RowKey {
    marquee_stats::RowKey {
        line_item,
        bucket,
        creative: 0,
        placement: 0,
        country: [0, 0],
        region: [0; 3],
        device: 0,
    }
}

fn impressions(count: i64) -> marquee_stats::Counters {
    marquee_stats::Counters {
        impressions: count,
        ..marquee_stats::Counters::default()
    }
}

/// The home page's "yesterday at this time" counts yesterday up to this very moment: at 11:06
/// it weighs today's 11:00–11:06 against yesterday's, not against yesterday's whole 11:00 hour.
/// Ten impressions a minute both days: no change.
#[tokio::test]
async fn yesterday_at_this_time_is_up_to_the_same_minute() {
    use marquee_model::Clock;
    use marquee_stats::{Counters, line_item_totals};
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let line_item = site.create_line_item(&admin, &campaign).await;
    // 2026-11-18T11:06:40Z; the admin's days are UTC.
    let now = site.clock.now();
    assert_eq!(now.as_second().rem_euclid(86_400), 11 * 3_600 + 400);
    let ten = impressions(10);
    let key = |bucket: i64| row_key(line_item, bucket);
    let today = now.as_second() - now.as_second().rem_euclid(86_400);
    let mut run = marquee_store::RunWrite {
        now,
        ..marquee_store::RunWrite::default()
    };
    for day in [today - 86_400, today] {
        // Every minute of yesterday up to 12:00, and of today up to now.
        let until = if day == today {
            now.as_second()
        } else {
            day + 12 * 3_600
        };
        let mut minute = day;
        while minute < until {
            run.minutes.push((key(minute), ten));
            let hour = minute - minute.rem_euclid(3_600);
            match run.hours.last_mut() {
                Some((k, c)) if k.bucket == hour => c.add(&ten),
                _ => run.hours.push((key(hour), ten)),
            }
            minute += 60;
        }
        let total = run
            .hours
            .iter()
            .filter(|(k, _)| k.bucket >= day && k.bucket < day + 86_400)
            .fold(Counters::default(), |mut sum, (_, c)| {
                sum.add(c);
                sum
            });
        run.days.push((key(day), total));
    }
    run.line_item_hours = line_item_totals(&run.hours);
    site.store.commit_run(run).await.unwrap();

    let home = site.get_ok("/", &admin).await;
    // 11 hours and 7 minutes (11:00 to 11:06) of ten a minute, both days.
    assert!(
        home.body.contains("yesterday at this time: 6670"),
        "{}",
        home.body
    );
    assert!(home.body.contains("+0%"), "{}", home.body);
}

/// The pacing section of a line item in Kolkata, whose days start at :30 UTC: the hour row
/// that holds its day's start is counted once, not in both "before today" and "today".
#[tokio::test]
async fn a_half_hour_zone_s_lifetime_delivery_counts_each_hour_once() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let form = line_item_form_with(
        &campaign,
        &[
            ("time_zone", "Asia/Kolkata"),
            ("goal.daily", ""),
            ("goal.lifetime", "100000"),
        ],
    );
    let line_item = site.create(&admin, "line-items", &form).await;
    // Today in Kolkata (2026-11-18) began at 2026-11-17T18:30Z, inside the 18:00Z hour, which
    // holds 100 impressions.
    let hour: Timestamp = "2026-11-17T18:00:00Z".parse().unwrap();
    hundred_impressions_in_hour(&site, line_item, hour).await;
    assert_pacing_shows_a_hundred(&site, &admin, line_item, "Kolkata").await;
}

/// Commits 100 impressions of `line_item` in the hour starting at `hour`: its hour, line item
/// hour and day rows, and the minute 40 minutes in.
async fn hundred_impressions_in_hour(site: &Site, line_item: u64, hour: Timestamp) {
    let key = |bucket: i64| row_key(line_item, bucket);
    let hundred = impressions(100);
    let hours = vec![(key(hour.as_second()), hundred)];
    let run = marquee_store::RunWrite {
        minutes: vec![(key(hour.as_second() + 40 * 60), hundred)],
        line_item_hours: marquee_stats::line_item_totals(&hours),
        days: vec![(
            key(hour.as_second() - hour.as_second().rem_euclid(86_400)),
            hundred,
        )],
        hours,
        now: hour,
        ..marquee_store::RunWrite::default()
    };
    site.store.commit_run(run).await.unwrap();
}

/// The line item's pacing section counts those 100 impressions once.
async fn assert_pacing_shows_a_hundred(site: &Site, admin: &str, line_item: u64, case: &str) {
    let page = site
        .get_ok(&format!("/line-items/{line_item}"), admin)
        .await;
    assert!(
        page.body.contains("100 impressions delivered"),
        "{case}: {}",
        &page.body[page.body.find("id=\"pacing\"").unwrap_or(0)..]
    );
}

/// A lifetime goal's delivery before today counts from the hour its flight starts in: a report
/// holds the hours that *start* in its range, so asking from the flight's start (a local
/// midnight at :30 UTC in Kolkata, or 14:30 in Berlin) would leave out that first hour.
#[tokio::test]
async fn lifetime_delivery_counts_the_hour_the_flight_starts_in() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    for (zone, start, hour) in [
        // 00:00 on 1 November in Kolkata is 18:30Z on 31 October.
        ("Asia/Kolkata", "2026-11-01T00:00", "2026-10-31T18:00:00Z"),
        // 14:30 on 1 November in Berlin is 13:30Z.
        ("Europe/Berlin", "2026-11-01T14:30", "2026-11-01T13:00:00Z"),
    ] {
        let form = line_item_form_with(
            &campaign,
            &[
                ("time_zone", zone),
                ("start", start),
                ("goal.daily", ""),
                ("goal.lifetime", "100000"),
            ],
        );
        let line_item = site.create(&admin, "line-items", &form).await;
        let hour: Timestamp = hour.parse().unwrap();
        hundred_impressions_in_hour(&site, line_item, hour).await;
        assert_pacing_shows_a_hundred(&site, &admin, line_item, zone).await;
    }
}

#[tokio::test]
async fn an_object_page_shows_its_history_with_who_changed_what() {
    let (site, admin) = Site::as_root().await;
    let acme = site
        .create(&admin, "advertisers", &advertiser("Acme"))
        .await;
    let csrf = site.csrf(&admin).await;
    let mut rename = vec![("csrf", csrf.as_str()), ("version", "1")];
    rename.extend(advertiser("Acme Corp"));
    let path = format!("/advertisers/{acme}");
    let saved = site.post(&path, &admin, &rename).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);

    let page = site.get_ok(&path, &admin).await;
    let history = &page.body[page.body.find("id=\"history\"").expect("a History section")..];
    let update = history.find(">update<").expect("the update");
    let create = history.find(">create<").expect("the create");
    assert!(update < create, "newest first");
    assert!(history.contains("user:root"));
    assert!(
        history.contains("<code>name</code>: Acme → Acme Corp"),
        "{history}"
    );
    assert!(
        !history[..create].contains("<code>currency</code>"),
        "only changed fields"
    );
}

/// Posts `form` with the session's CSRF token to `path`.
/// Posts to the archive route of the object `id` in `collection`, confirmed or not.
async fn archive(
    site: &Site,
    session: &str,
    collection: &str,
    id: impl std::fmt::Display,
    confirm: bool,
) -> Answer {
    let path = format!("/{collection}/{id}/archive");
    let form: &[(&str, &str)] = if confirm { &[("confirm", "yes")] } else { &[] };
    post_with_csrf(site, session, &path, form).await
}

async fn post_with_csrf(site: &Site, session: &str, path: &str, form: &[(&str, &str)]) -> Answer {
    let csrf = site.csrf(session).await;
    let mut fields = vec![("csrf", csrf.as_str())];
    fields.extend_from_slice(form);
    site.post(path, session, &fields).await
}

/// The lists carry what a trafficker scans (parent by name, flight, tier, price in the
/// advertiser's currency, goal, delivery against the curve, pacing), sort by any column,
/// filter by the parent's name, and list a line item whose campaign is archived as stopped,
/// not active.
#[tokio::test]
async fn lists_show_names_and_delivery_and_sort_and_filter_by_them() {
    let (site, admin) = Site::as_root().await;
    let (acme, globex) = two_advertisers(&site, &admin).await;
    let (acme, globex) = (acme.to_string(), globex.to_string());
    let winter = site
        .create(&admin, "line-items", &line_item_form(&acme))
        .await;
    let form = line_item_form_with(
        &globex,
        &[
            ("name", "Autumn push"),
            ("tier", "sponsorship"),
            ("price.amount", "4"),
        ],
    );
    let autumn = site.create(&admin, "line-items", &form).await;
    // 100 impressions today (the clock stands at 2026-11-18 11:06 UTC).
    hundred_impressions_in_hour(&site, winter, "2026-11-18T10:00:00Z".parse().unwrap()).await;

    let list = site.get_ok("/line-items", &admin).await;
    for text in [
        format!("<a href=\"/campaigns/{acme}\">Acme winter</a>"),
        format!("<a href=\"/campaigns/{globex}\">Globex winter</a>"),
        "2026-11-01 → 2027-01-01".into(),
        "$2.50 CPM".into(),
        "$4.00 CPM".into(),
        "sponsorship".into(),
        "impressions 1000 a day".into(),
        "active creatives".into(),
        "aria-sort=\"ascending\"".into(),
    ] {
        assert!(list.body.contains(&text), "{text}: {}", list.body);
    }
    // Delivered today against where the curve stands, and the verdict from the same view as
    // the line item's page.
    let row = |body: &str, id: u64| {
        let start = body
            .find(&format!("<a href=\"/line-items/{id}\">"))
            .unwrap_or_else(|| panic!("no row {id}: {body}"));
        body[start..].split("</tr>").next().unwrap().to_owned()
    };
    let winter_row = row(&list.body, winter);
    assert!(winter_row.contains("100 / "), "{winter_row}");
    assert!(winter_row.contains("class=\"pace "), "{winter_row}");

    let names = |body: &str| {
        let autumn_at = body.find("Autumn push").unwrap();
        let winter_at = body.find(">Winter sale<").unwrap();
        autumn_at < winter_at
    };
    assert!(!names(&list.body), "by id: Winter sale first");
    assert!(names(&site.get("/line-items?sort=name", &admin).await.body));
    assert!(!names(
        &site.get("/line-items?sort=-name", &admin).await.body
    ));
    let by_tier = site.get("/line-items?sort=-tier", &admin).await.body;
    assert!(names(&by_tier), "sponsorship ranks above standard");
    assert!(by_tier.contains("aria-sort=\"descending\""));
    let by_delivery = site.get("/line-items?sort=-delivered", &admin).await.body;
    assert!(!names(&by_delivery), "Winter sale delivered more");

    // The parent filter takes a name (any part of it, any case) or an id.
    let globex_only = site.get("/line-items?parent=GLOBEX", &admin).await.body;
    assert!(globex_only.contains("Autumn push") && !globex_only.contains(">Winter sale<"));
    assert!(globex_only.contains("<datalist id=\"parent-names\"><option value=\"Acme winter\">"));
    let by_id = site
        .get(&format!("/line-items?parent={acme}"), &admin)
        .await
        .body;
    assert!(!by_id.contains("Autumn push") && by_id.contains(">Winter sale<"));
    assert_eq!(
        site.get("/line-items?sort=colour", &admin).await.status,
        StatusCode::BAD_REQUEST
    );

    // Its campaign archived, Autumn push is stopped by it, in the list and on its page.
    let archived = archive(&site, &admin, "campaigns", globex, true).await;
    assert_eq!(archived.status, StatusCode::SEE_OTHER, "{}", archived.body);
    let active = site.get("/line-items?status=active", &admin).await.body;
    assert!(!active.contains("Autumn push") && active.contains(">Winter sale<"));
    let stopped = site.get("/line-items?status=stopped", &admin).await.body;
    let autumn_row = row(&stopped, autumn);
    assert!(
        autumn_row.contains("status stopped")
            && autumn_row.contains("its campaign “Globex winter” is archived")
            && autumn_row.contains("<span class=\"pace stopped\">not serving (stopped)</span>"),
        "{autumn_row}"
    );
    let page = site
        .get(&format!("/line-items/{autumn}"), &admin)
        .await
        .body;
    assert!(
        page.contains("Not serving: its campaign “Globex winter” is archived"),
        "{page}"
    );
}

/// Archiving asks first, saying what depends on the object; only the confirming post
/// archives. An archived placement's page says archived, never active, and its children
/// say which parent stops them.
#[tokio::test]
async fn archiving_asks_first_with_what_depends_on_it() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let line_item = site.create_line_item(&admin, &campaign).await;
    hundred_impressions_in_hour(&site, line_item, "2026-11-18T10:00:00Z".parse().unwrap()).await;
    let placement = news_placement(&site, &admin).await;
    let linked = post_with_csrf(
        &site,
        &admin,
        &format!("/line-items/{line_item}/placements"),
        &[("placement", &placement.to_string())],
    )
    .await;
    assert_eq!(linked.status, StatusCode::SEE_OTHER, "{}", linked.body);
    let news = site
        .store
        .get(ObjectKind::Placement, placement, None)
        .await
        .unwrap()
        .parent_id
        .unwrap();

    let status = |kind: ObjectKind, id: u64| {
        let store = Arc::clone(&site.store);
        async move { store.get(kind, id, None).await.unwrap().status }
    };
    let ask = archive(&site, &admin, "campaigns", &campaign, false).await;
    assert_eq!(ask.status, StatusCode::OK, "{}", ask.body);
    assert!(
        ask.body
            .contains("1 active line item under it stop serving"),
        "{}",
        ask.body
    );
    assert!(
        ask.body.contains("100 impressions served today (UTC)"),
        "{}",
        ask.body
    );
    assert!(ask.body.contains("name=\"confirm\" value=\"yes\""));
    assert!(ask.body.contains("pause it</a> instead"));
    assert_eq!(
        status(ObjectKind::Campaign, campaign.parse().unwrap()).await,
        marquee_model::Status::Active
    );
    let ask = archive(&site, &admin, "placements", placement, false).await;
    assert!(
        ask.body
            .contains("1 active line item linked to it lose this placement"),
        "{}",
        ask.body
    );
    let ask = post_with_csrf(&site, &admin, &format!("/sites/{news}/archive"), &[]).await;
    assert!(
        ask.body
            .contains("1 active placement under it stop serving"),
        "{}",
        ask.body
    );

    let done = archive(&site, &admin, "sites", news, true).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(
        status(ObjectKind::Site, news).await,
        marquee_model::Status::Archived
    );
    let page = site
        .get(&format!("/placements/{placement}"), &admin)
        .await
        .body;
    assert!(
        page.contains("Not serving: its site “News” is archived"),
        "{page}"
    );
    let placements = site.get("/placements", &admin).await.body;
    assert!(
        placements.contains("<span class=\"status stopped\">stopped</span>"),
        "{placements}"
    );

    archive(&site, &admin, "placements", placement, true).await;
    let page = site
        .get(&format!("/placements/{placement}"), &admin)
        .await
        .body;
    assert!(
        page.contains("This placement is <strong>archived</strong>"),
        "{page}"
    );
    let status_field = field_block(&page, "status");
    assert!(
        !status_field.contains("<select") && status_field.contains(">archived<"),
        "{status_field}"
    );
}

/// Posts a creative form with `file` (named `filename`) as its upload, or none, and the kept
/// image a refused form carried back, if given.
async fn post_creative(
    site: &Site,
    session: &str,
    line_item: &str,
    size: &str,
    file: Option<(&str, &[u8])>,
    kept: Option<(&str, &str)>,
) -> Answer {
    let csrf = site.csrf(session).await;
    let mut fields = vec![
        ("csrf", csrf.as_str()),
        ("line_item_id", line_item),
        ("name", "Boots banner"),
        ("status", "active"),
        ("size", size),
        ("landing_url", "https://shop.example/"),
        ("weight", "1"),
        ("content.type", "image"),
        ("content.image_url", ""),
        ("content.alt", "Boots"),
        ("categories", ""),
    ];
    if let Some((name, bytes)) = kept {
        fields.extend([("kept_upload_name", name), ("kept_upload", bytes)]);
    }
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--B\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    if let Some((filename, bytes)) = file {
        body.extend_from_slice(
            format!(
                "--B\r\nContent-Disposition: form-data; name=\"image_file\"; \
                 filename=\"{filename}\"\r\nContent-Type: image/png\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--B--\r\n");
    site.post_multipart("/creatives", session, body).await
}

/// An upload is judged by its content: text named `.png` is refused with a plain message;
/// an image whose size differs from the declared one is refused at the size, and the image
/// comes back with the form so that fixing the size saves it without choosing the file
/// again; an empty size is taken from the image; a size no linked placement takes is a
/// warning on the saved creative, not a refusal.
#[tokio::test]
async fn uploads_are_sniffed_and_sized_and_kept_when_the_form_is_refused() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let line_item = site.create_line_item(&admin, &campaign).await.to_string();

    let text = post_creative(
        &site,
        &admin,
        &line_item,
        "300x250",
        Some(("notes.png", b"just some notes\n")),
        None,
    )
    .await;
    text.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        field_block(&text.body, "image_file")
            .contains("“notes.png” is text, not an image: upload a PNG, JPEG, GIF or WebP file"),
        "{}",
        text.body
    );
    assert!(!text.body.contains("name=\"kept_upload\""));

    let wrong = post_creative(
        &site,
        &admin,
        &line_item,
        "728x90",
        Some(("boots.png", PNG)),
        None,
    )
    .await;
    wrong.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        field_block(&wrong.body, "size").contains("the image is 300×250, not 728×90"),
        "{}",
        wrong.body
    );
    assert!(
        wrong
            .body
            .contains("Kept from your last try: <strong>boots.png</strong> (300×250)")
    );
    assert_eq!(uploaded_files(&site), Vec::<PathBuf>::new());
    let kept = hidden(&wrong.body, "kept_upload");
    let fixed = post_creative(
        &site,
        &admin,
        &line_item,
        "",
        None,
        Some(("boots.png", &kept)),
    )
    .await;
    assert_eq!(fixed.status, StatusCode::SEE_OTHER, "{}", fixed.body);
    assert_eq!(uploaded_files(&site).len(), 1);
    let creative = site
        .stored::<marquee_model::Creative>(id_in(&fixed.location))
        .await;
    assert_eq!(creative.size, Some(marquee_model::Size { w: 300, h: 250 }));

    // Linked to a 300×250 placement only, a 728×90 creative is saved with a warning.
    let placement = news_placement(&site, &admin).await;
    post_with_csrf(
        &site,
        &admin,
        &format!("/line-items/{line_item}/placements"),
        &[("placement", &placement.to_string())],
    )
    .await;
    let page = site
        .get(&format!("/creatives/{}", id_in(&fixed.location)), &admin)
        .await
        .body;
    assert!(!page.contains("class=\"warning notice\""), "{page}");
    let csrf = site.csrf(&admin).await;
    let leaderboard = site
        .post(
            "/creatives",
            &admin,
            &[
                ("csrf", csrf.as_str()),
                ("line_item_id", line_item.as_str()),
                ("name", "Wide"),
                ("status", "active"),
                ("size", "728x90"),
                ("landing_url", "https://shop.example/"),
                ("weight", "1"),
                ("content.type", "html"),
                ("content.html", "<b>wide</b>"),
                ("categories", ""),
            ],
        )
        .await;
    leaderboard.assert_status(StatusCode::SEE_OTHER);
    let page = site.get(&leaderboard.location, &admin).await.body;
    assert!(
        page.contains("No placement its line item reaches takes 728×90 (they take 300×250)"),
        "{page}"
    );
}

/// A new placement without a site asked for picks none: the form does not post the first
/// site as if chosen.
#[tokio::test]
async fn a_new_child_without_its_parent_picks_none() {
    let (site, admin) = Site::as_root().await;
    news_placement(&site, &admin).await;
    let form = site.get("/placements/new", &admin).await.body;
    let parent = field_block(&form, "site_id");
    assert!(
        parent.contains("<option value=\"\" selected>choose a site</option>"),
        "{parent}"
    );
    let form = site.get("/placements/new?parent=12345", &admin).await.body;
    assert!(field_block(&form, "site_id").contains("<option value=\"\" selected>"));
    // Posted so, the form is refused at the site, with what was typed kept.
    let csrf = site.csrf(&admin).await;
    let refused = site
        .post(
            "/placements",
            &admin,
            &[
                ("csrf", csrf.as_str()),
                ("site_id", ""),
                ("name", "Orphan"),
                ("status", "active"),
                ("sizes", "300x250"),
                ("formats", "banner"),
                ("image_tag", "off"),
            ],
        )
        .await;
    refused.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        field_block(&refused.body, "site_id").contains("field-error"),
        "{}",
        refused.body
    );
    assert!(refused.body.contains("value=\"Orphan\""));
}

/// Why-not-served puts the request's value beside the targeted ones for attributes other
/// than location too, and shows one line item when asked (by any part of its name, or id).
#[tokio::test]
async fn why_not_served_shows_request_and_targeted_values_and_one_line_item() {
    let (site, admin, campaign) = Site::with_acme_campaign().await;
    let mut form: Vec<(&str, &str)> = untargeted_line_item_form(&campaign);
    form.extend([
        ("t_attr", "device_type"),
        ("t_op", "in"),
        ("t_values", "desktop, tablet"),
    ]);
    let desktops = site.create(&admin, "line-items", &form).await;
    for (key, value) in form.iter_mut() {
        if *key == "name" {
            *value = "Second opinion";
        }
    }
    let second = site.create(&admin, "line-items", &form).await;
    let placement = news_placement(&site, &admin).await;
    site.manager.refresh().await.unwrap();
    let page = site
        .get_ok(
            &format!("/why-not-served?placement={placement}&device=phone"),
            &admin,
        )
        .await;
    assert_eq!(
        outcome(&page.body, desktops),
        "targeting: device_type — request: phone; targeted: desktop, tablet"
    );
    assert!(
        page.body.contains("<option value=\"Second opinion\">"),
        "{}",
        page.body
    );
    let only = site
        .get(
            &format!("/why-not-served?placement={placement}&device=phone&line_item=SECOND"),
            &admin,
        )
        .await
        .body;
    assert!(only.contains(&format!("/line-items/{second}\"")), "{only}");
    assert!(
        !only.contains(&format!("/line-items/{desktops}\"")),
        "{only}"
    );
    let by_id = site
        .get(
            &format!("/why-not-served?placement={placement}&line_item={desktops}"),
            &admin,
        )
        .await
        .body;
    assert!(
        by_id.contains(&format!("/line-items/{desktops}\"")),
        "{by_id}"
    );
    assert!(
        !by_id.contains(&format!("/line-items/{second}\"")),
        "{by_id}"
    );
}
