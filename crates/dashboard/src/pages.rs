//! Sign-in, home, reports, the line item pacing view, why-not-served and edges.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, civil};
use marquee_api::{BuiltReport, FilterNames};
use marquee_engine::{Context, Engine, FullSpeed, Geo, NoCaps, Outcome, Request, Scratch};
use marquee_model::{
    Advertiser, Channel, Currency, CurrencyRates, DeviceType, GoalMetric, LineItem, LineItemId,
    Micros, ObjectKind, PlacementId, Role, Stored, Targeting,
};
use marquee_pacing::{Schedule, TrafficProfile};
use marquee_snapshot::Snapshot;
use marquee_stats::{Counters, Dimension, Value as DimValue};
use marquee_store::ListQuery;
use rand::SeedableRng as _;
use rand::rngs::SmallRng;
use serde::Deserialize;

use crate::auth::{self, LOGIN_COOKIE, SESSION_COOKIE};
use crate::chart::{self, Series};
use crate::form::FormData;
use crate::limiter::MAX_NAME_BYTES;
use crate::request_geo::{Lookup, RequestGeo};
use crate::{Dashboard, Nav, PageError, SignedIn, check_csrf, html, require_admin, require_user};

/// How long the sign-in form's token lives.
const LOGIN_FORM_SECS: i64 = 1_800;
/// When to try again after a sign-in refused because every hashing slot was taken: a hash
/// takes a fraction of a second, so slots free up quickly.
const BUSY_RETRY_SECS: i64 = 2;

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    token: String,
    name: String,
    error: Option<String>,
}

fn with_cookies(mut response: Response, cookies: &[String]) -> Response {
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

fn login_page(
    dashboard: &Dashboard,
    name: String,
    error: Option<String>,
) -> Result<Response, PageError> {
    let token = dashboard.sign_in_key()?.issue(dashboard.clock.now())?;
    let cookie = auth::set_cookie(
        LOGIN_COOKIE,
        &token,
        LOGIN_FORM_SECS,
        dashboard.options.secure_cookies,
    );
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    let page = LoginPage { token, name, error };
    Ok(with_cookies(
        (status, html(&page)).into_response(),
        &[cookie],
    ))
}

pub async fn login_form(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    if auth::signed_in(&*dashboard.store, &headers, dashboard.clock.now())
        .await?
        .is_some()
    {
        return Ok(Redirect::to("/").into_response());
    }
    login_page(&dashboard, String::new(), None)
}

/// The sign-in form again with 429 and `Retry-After`: the attempt was not checked.
fn too_many(
    dashboard: &Dashboard,
    name: String,
    message: String,
    wait: SignedDuration,
) -> Result<Response, PageError> {
    let mut page = login_page(dashboard, name, Some(message))?;
    *page.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    if let Ok(value) = HeaderValue::from_str(&wait.as_secs().to_string()) {
        page.headers_mut().insert(header::RETRY_AFTER, value);
    }
    Ok(page)
}

pub async fn login(
    State(dashboard): State<Arc<Dashboard>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let form =
        FormData::parse(&headers, &body).map_err(|e| PageError::BadRequest(e.to_string()))?;
    let now = dashboard.clock.now();
    // The field must equal the cookie (a foreign page cannot read the cookie to copy it), and
    // the value must be one this server issued lately (a client cannot make one up to plant in
    // both).
    let bound = auth::cookie(&headers, LOGIN_COOKIE).unwrap_or("");
    if bound.is_empty()
        || !auth::same_secret(form.get(auth::CSRF_FIELD), bound)
        || !dashboard
            .sign_in_key()?
            .verifies(bound, now, LOGIN_FORM_SECS)
    {
        return Err(PageError::Forbidden(
            "the sign-in form's security token is missing or stale; reload the page".into(),
        ));
    }
    let name = form.get("name").to_owned();
    // No user has such a name (users are made from command-line arguments, which hold no NUL;
    // PostgreSQL cannot even compare text holding one). None is looked up or counted for such a
    // name: it is neither kept in the limiter's table nor echoed back into the form.
    if name.len() > MAX_NAME_BYTES || name.contains('\0') {
        return login_page(
            &dashboard,
            String::new(),
            Some("Wrong user name or password.".into()),
        );
    }
    // Passwords are taken as typed: no trimming.
    let password = form
        .fields
        .iter()
        .find(|(k, _)| k == "password")
        .map_or("", |(_, v)| v.as_str());
    // The address the server accepted the connection from (no forwarded header is trusted).
    let address = peer.map(|Extension(ConnectInfo(peer))| peer.ip());
    // A slot first: an attempt refused for want of one is not counted against the name.
    let Some(slot) = dashboard.hashing.try_take() else {
        return too_many(
            &dashboard,
            name,
            "Too many sign-ins at once; try again in a few seconds.".into(),
            SignedDuration::from_secs(BUSY_RETRY_SECS),
        );
    };
    let reservation = match dashboard.sign_ins.reserve(&name, address, now) {
        Ok(reservation) => reservation,
        Err(wait) => {
            let minutes = wait.as_secs().unsigned_abs().div_ceil(60);
            return too_many(
                &dashboard,
                name,
                format!("Too many failed sign-ins; try again in {minutes} minute(s)."),
                wait,
            );
        }
    };
    // A failed check stays counted: the reservation is simply dropped.
    let Some(user) = auth::check_password(&*dashboard.store, &name, password, slot).await? else {
        return login_page(
            &dashboard,
            name,
            Some("Wrong user name or password.".into()),
        );
    };
    dashboard.sign_ins.succeeded(reservation);
    let lifetime = dashboard.options.session_lifetime;
    let session =
        auth::start_session(&*dashboard.store, &user, dashboard.clock.now() + lifetime).await?;
    let secure = dashboard.options.secure_cookies;
    Ok(with_cookies(
        Redirect::to("/").into_response(),
        &[
            auth::set_cookie(SESSION_COOKIE, &session, lifetime.as_secs(), secure),
            auth::set_cookie(LOGIN_COOKIE, "", 0, secure),
        ],
    ))
}

pub async fn logout(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    let form =
        FormData::parse(&headers, &body).map_err(|e| PageError::BadRequest(e.to_string()))?;
    check_csrf(&user, &form)?;
    auth::end_session(&*dashboard.store, &headers).await?;
    Ok(with_cookies(
        Redirect::to("/login").into_response(),
        &[auth::set_cookie(
            SESSION_COOKIE,
            "",
            0,
            dashboard.options.secure_cookies,
        )],
    ))
}

/// Builds a report through the API's builder (same scoping, limits and numbers).
pub(crate) async fn report(
    dashboard: &Dashboard,
    user: &SignedIn,
    params: &[(&str, String)],
) -> Result<BuiltReport, PageError> {
    let query =
        serde_urlencoded::to_string(params).map_err(|e| PageError::Internal(e.to_string()))?;
    let uri: Uri = format!("/api/v1/reports?{query}")
        .parse()
        .map_err(|e: axum::http::uri::InvalidUri| PageError::BadRequest(e.to_string()))?;
    Ok(marquee_api::build_report(&dashboard.reports, &user.principal(), &uri).await?)
}

/// The zone the user's days are counted in: its advertiser's, else UTC (as reports do).
async fn user_zone(dashboard: &Dashboard, user: &SignedIn) -> Result<TimeZone, PageError> {
    if user.role != Role::Advertiser {
        return Ok(TimeZone::UTC);
    }
    let Some(owner) = user.owner_id else {
        return Ok(TimeZone::UTC);
    };
    let advertiser: Stored<Advertiser> = dashboard
        .store
        .get(ObjectKind::Advertiser, owner, None)
        .await?
        .decode()?;
    Ok(TimeZone::get(&advertiser.object.time_zone).unwrap_or(TimeZone::UTC))
}

/// One figure on the home page, today against yesterday at the same time.
pub struct Figure {
    pub label: &'static str,
    pub today: String,
    pub yesterday: String,
    /// `+12%`, `−3%`, or empty when yesterday had nothing.
    pub change: String,
    pub up: bool,
}

fn figure(label: &'static str, today: f64, yesterday: f64, show: impl Fn(f64) -> String) -> Figure {
    let change = if yesterday > 0.0 {
        let percent = (today - yesterday) / yesterday * 100.0;
        format!(
            "{}{:.0}%",
            if percent >= 0.0 { "+" } else { "−" },
            percent.abs()
        )
    } else {
        String::new()
    };
    Figure {
        label,
        today: show(today),
        yesterday: show(yesterday),
        change,
        up: today >= yesterday,
    }
}

/// An amount of money (in micros, possibly fractional: a pacing curve's point) as people
/// read it, rounded to the currency's decimals: `$1,234.50`, `¥500`. Without one currency
/// (spend summed over advertisers in several), a plain amount with two decimals.
pub fn money(currency: Option<Currency>, micros: f64) -> String {
    let decimals = currency.map_or(2, Currency::decimals);
    let step = 10f64.powi(6 - decimals as i32);
    let rounded = Micros(((micros / step).round() * step) as i64);
    match currency {
        Some(currency) => currency.format(rounded),
        None => rounded.plain_in(Currency::USD),
    }
}

/// A report's currency as the model's type (the report names it as text).
fn report_currency(built: &BuiltReport) -> Option<Currency> {
    built
        .currency
        .as_deref()
        .and_then(|code| Currency::try_from(code).ok())
}

fn ctr(counters: &Counters) -> f64 {
    counters.ctr().unwrap_or(0.0) * 100.0
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    nav: Nav,
    date: String,
    zone: String,
    currency: String,
    figures: Vec<Figure>,
    /// Invalid impressions, clicks and conversions today and yesterday at this time: never in
    /// the figures above.
    invalid_today: i64,
    invalid_yesterday: i64,
    chart: String,
}

fn instant(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub async fn home(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    let zone = user_zone(&dashboard, &user).await?;
    let now = dashboard.clock.now();
    let today = now.to_zoned(zone.clone()).date();
    let yesterday = today
        .yesterday()
        .map_err(|e| PageError::Internal(e.to_string()))?;
    let day_ago = (now - SignedDuration::from_hours(24)).max(Timestamp::UNIX_EPOCH);
    let hourly = report(
        &dashboard,
        &user,
        &[
            ("from", today.to_string()),
            ("to", instant(now)),
            ("granularity", "hour".into()),
        ],
    )
    .await?;
    // Yesterday up to this moment: its whole hours from hour rows, the hour then in progress
    // from minute rows (its hour row would weigh that whole hour against today's first
    // minutes of it).
    let yesterday_start = yesterday
        .to_zoned(zone.clone())
        .map_err(|e| PageError::Internal(e.to_string()))?
        .timestamp();
    let hour_start = marquee_stats::hour_start(day_ago).max(yesterday_start);
    let mut before = Counters::default();
    for (from, to, granularity) in [
        (yesterday_start, hour_start, "hour"),
        (hour_start, day_ago, "minute"),
    ] {
        if to <= from {
            continue;
        }
        let part = report(
            &dashboard,
            &user,
            &[
                ("from", instant(from)),
                ("to", instant(to)),
                ("granularity", granularity.into()),
            ],
        )
        .await?;
        before.add(&part.report.totals);
    }
    let (t, y) = (&hourly.report.totals, &before);
    let count = |v: f64| format!("{v:.0}");
    let figures = vec![
        figure(
            "Impressions",
            t.impressions as f64,
            y.impressions as f64,
            count,
        ),
        figure("Clicks", t.clicks as f64, y.clicks as f64, count),
        figure(
            "Spend",
            t.spend_micros() as f64,
            y.spend_micros() as f64,
            |v| money(report_currency(&hourly), v),
        ),
        figure("CTR", ctr(t), ctr(y), |v| format!("{v:.2}%")),
    ];
    let labels: Vec<String> = (0..24).map(|h| format!("{h:02}:00")).collect();
    let mut by_hour = vec![0.0; 24];
    for row in &hourly.report.rows {
        if let Some(slot) = by_hour.get_mut(usize::from(row.start.hour().unsigned_abs())) {
            *slot += row.counters.impressions as f64;
        }
    }
    let shown = usize::from(now.to_zoned(zone.clone()).hour().unsigned_abs()) + 1;
    by_hour.truncate(shown);
    let chart = chart::line_chart(
        "Impressions by hour today",
        &labels,
        &[Series {
            label: "impressions".into(),
            values: by_hour,
            dashed: false,
        }],
        "",
    );
    let page = HomePage {
        nav: Nav::new(&user, "home"),
        date: today.to_string(),
        zone: hourly.zone_name.clone(),
        // One advertiser's spend is in its currency (the API keeps its line items' prices in
        // it); several advertisers' spend adds up amounts in each one's own.
        currency: hourly.currency.as_ref().map_or_else(
            || "summed over advertisers, each in its own currency".into(),
            |currency| format!("in {currency}"),
        ),
        figures,
        invalid_today: hourly.report.totals.invalid_total(),
        invalid_yesterday: before.invalid_total(),
        chart,
    };
    Ok(html(&page))
}

/// The report form's date presets, as the API names them, and as people read them.
const PERIODS: [(&str, &str); 7] = [
    ("today", "Today"),
    ("yesterday", "Yesterday"),
    ("last_7_days", "Last 7 days"),
    ("last_30_days", "Last 30 days"),
    ("this_month", "This month"),
    ("last_month", "Last month"),
    ("custom", "Custom (from and to)"),
];

/// The report form's parameters, as the API names them.
#[derive(Debug, Default)]
pub struct ReportParams {
    from: String,
    to: String,
    granularity: String,
    /// Comma-separated, as the API takes it.
    group_by: String,
    advertiser: String,
    line_item: String,
    placement: String,
    country: String,
    region: String,
    device: String,
    tz: String,
    /// A date preset (`today`, `last_7_days`, …) or `custom` (from and to as typed).
    period: String,
    /// `previous` to compare with the period of the same length right before.
    compare: String,
}

impl ReportParams {
    /// The parameters of a query string. The form sends `group_by` once per box ticked, so
    /// repeated values are joined (a derived `Deserialize` refuses a repeated key); of another
    /// repeated key the last wins. Keys the form does not have are ignored.
    fn from_query(query: Option<&str>) -> Result<ReportParams, PageError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| PageError::BadRequest(format!("malformed query string: {e}")))?;
        let mut params = ReportParams::default();
        let mut group_by: Vec<String> = Vec::new();
        for (key, value) in pairs {
            let field = match key.as_str() {
                "group_by" => {
                    group_by.extend(
                        value
                            .split(',')
                            .map(str::trim)
                            .filter(|d| !d.is_empty())
                            .map(str::to_owned),
                    );
                    continue;
                }
                "from" => &mut params.from,
                "to" => &mut params.to,
                "granularity" => &mut params.granularity,
                "advertiser" => &mut params.advertiser,
                "line_item" => &mut params.line_item,
                "placement" => &mut params.placement,
                "country" => &mut params.country,
                "region" => &mut params.region,
                "device" => &mut params.device,
                "tz" => &mut params.tz,
                "period" => &mut params.period,
                "compare" => &mut params.compare,
                _ => continue,
            };
            *field = value;
        }
        params.group_by = group_by.join(",");
        Ok(params)
    }

    /// Whether a preset, rather than from and to, sets the range.
    fn preset(&self) -> bool {
        !self.period.is_empty() && self.period != "custom"
    }

    /// The non-empty parameters, with defaults: from yesterday, by hour. A preset leaves from
    /// and to out: the API resolves it in the report's zone against its clock.
    fn query(&self, now: Timestamp) -> Vec<(&'static str, String)> {
        let default_from = (now - SignedDuration::from_hours(24))
            .to_zoned(TimeZone::UTC)
            .date()
            .to_string();
        let mut query = if self.preset() {
            vec![("period", self.period.clone())]
        } else {
            vec![(
                "from",
                if self.from.is_empty() {
                    default_from
                } else {
                    self.from.clone()
                },
            )]
        };
        query.extend([(
            "granularity",
            if self.granularity.is_empty() {
                "hour".into()
            } else {
                self.granularity.clone()
            },
        )]);
        let to = if self.preset() { "" } else { self.to.as_str() };
        for (key, value) in [
            ("to", to),
            ("group_by", &self.group_by),
            ("advertiser", &self.advertiser),
            ("line_item", &self.line_item),
            ("placement", &self.placement),
            ("country", &self.country),
            ("region", &self.region),
            ("device", &self.device),
            ("tz", &self.tz),
            ("compare", &self.compare),
        ] {
            let value = value.trim();
            if !value.is_empty() {
                query.push((key, value.to_owned()));
            }
        }
        query
    }
}

pub struct ReportTable {
    pub headings: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    pub totals: Vec<Cell>,
    /// The report's invalid traffic (impressions, clicks and conversions) by reason, every
    /// reason, and the sum.
    pub invalid_by_reason: Vec<(&'static str, i64)>,
    pub invalid_total: i64,
}

#[derive(Template)]
#[template(path = "reports.html")]
struct ReportsPage {
    nav: Nav,
    periods: [(&'static str, &'static str); 7],
    params: ReportParams,
    from: String,
    granularity: String,
    dimensions: Vec<(&'static str, bool)>,
    /// Suggestions for the name filters: the user's own objects (every one for an admin).
    names: FilterNames,
    /// Whether the user's reports may filter by advertiser and line item (not a publisher's).
    demand_filters: bool,
    error: Option<String>,
    zone: String,
    currency: String,
    /// Programmatic revenue's currency (the gateway's), empty without one.
    programmatic_currency: String,
    table: Option<ReportTable>,
    /// The range the report covers, and the previous period's when comparing.
    covered: String,
    previous: String,
    impressions: i64,
    line: String,
    bars: String,
    csv: String,
}

fn dim_text(value: &DimValue) -> String {
    match value {
        DimValue::Id(id) => format!("#{id}"),
        DimValue::Text(text) => (*text).to_owned(),
        DimValue::Country(code) | DimValue::Region(code) => code.clone(),
    }
}

/// A dimension's cell: an object or a configured bidder by its name beside its id (where the
/// user may read the name), direct delivery (bidder 0) as such; other values as [`dim_text`].
fn dim_cell(built: &BuiltReport, dimension: Dimension, value: &DimValue) -> String {
    match (dimension, value, built.name(dimension, value)) {
        (Dimension::Bidder, DimValue::Id(0), _) => "direct".to_owned(),
        (_, DimValue::Id(id), Some(name)) => format!("{name} (#{id})"),
        _ => dim_text(value),
    }
}

/// The money of a report's rows: the spend in the advertiser's currency, the programmatic
/// revenue in the gateway's.
#[derive(Clone, Copy)]
struct RowMoney {
    spend_micros: i64,
    revenue_micros: i64,
    currency: Option<Currency>,
    programmatic_currency: Option<Currency>,
}

/// A row's metrics as shown and as numbers (what a change is taken of); the money is the
/// row's share of the totals (rows add up to them). Invalid traffic comes after the spend,
/// apart from the figures it is never part of; programmatic demand (the unified auction's)
/// last, beside direct delivery.
fn metric_cells(c: &Counters, m: RowMoney) -> Vec<(String, Option<f64>)> {
    let rate = |r: Option<f64>| {
        (
            r.map_or_else(String::new, |r| format!("{:.2}%", r * 100.0)),
            r,
        )
    };
    let count = |n: i64| (n.to_string(), Some(n as f64));
    let amount = |currency, micros: i64| (money(currency, micros as f64), Some(micros as f64));
    vec![
        count(c.impressions),
        count(c.clicks),
        rate(c.ctr()),
        amount(m.currency, m.spend_micros),
        count(c.invalid_impressions),
        count(c.invalid_clicks),
        count(c.ad_requests()),
        rate(c.fill_rate()),
        count(c.programmatic_auctions),
        count(c.programmatic_bids),
        count(c.programmatic_timeouts),
        count(c.programmatic_wins),
        count(c.programmatic_impressions),
        amount(m.programmatic_currency, m.revenue_micros),
    ]
}

/// A table cell: its value, and when comparing, the previous period's and the change.
pub struct Cell {
    pub value: String,
    /// Empty unless comparing a metric.
    pub previous: String,
    /// `+12%`, `−3%`, or empty when the previous period had nothing.
    pub change: String,
    pub up: bool,
}

impl Cell {
    fn plain(value: String) -> Cell {
        Cell {
            value,
            previous: String::new(),
            change: String::new(),
            up: true,
        }
    }
}

/// Metric cells, each beside the previous period's value when there is one.
fn compared(
    now: Vec<(String, Option<f64>)>,
    before: Option<Vec<(String, Option<f64>)>>,
) -> Vec<Cell> {
    let Some(before) = before else {
        return now
            .into_iter()
            .map(|(value, _)| Cell::plain(value))
            .collect();
    };
    now.into_iter()
        .zip(before)
        .map(|((value, n), (previous, p))| {
            let (change, up) = match (n, p) {
                (Some(n), Some(p)) if p != 0.0 => {
                    let percent = (n - p) / p * 100.0;
                    let sign = if percent >= 0.0 { "+" } else { "−" };
                    (format!("{sign}{:.0}%", percent.abs()), percent >= 0.0)
                }
                _ => (String::new(), true),
            };
            Cell {
                value,
                previous: if previous.is_empty() {
                    "–".into()
                } else {
                    previous
                },
                change,
                up,
            }
        })
        .collect()
}

fn table(built: &BuiltReport) -> ReportTable {
    let currency = report_currency(built);
    let programmatic_currency = built.programmatic.currency();
    let row_money = |spend_micros: i64, revenue_micros: i64| RowMoney {
        spend_micros,
        revenue_micros,
        currency,
        programmatic_currency,
    };
    let mut headings = vec!["time".to_owned()];
    headings.extend(
        built
            .spec
            .group_by
            .iter()
            .map(|d| d.as_str().replace('_', " ")),
    );
    headings.extend(
        [
            "impressions",
            "clicks",
            "CTR",
            "spend",
            "invalid impressions",
            "invalid clicks",
            "ad requests",
            "fill rate",
            "programmatic auctions",
            "programmatic bids",
            "programmatic timeouts",
            "programmatic wins",
            "programmatic impressions",
            "programmatic revenue",
        ]
        .map(String::from),
    );
    let nothing = || metric_cells(&Counters::default(), row_money(0, 0));
    let rows = built
        .report
        .rows
        .iter()
        .map(|row| {
            let mut cells = vec![Cell::plain(
                row.start.strftime("%Y-%m-%d %H:%M").to_string(),
            )];
            cells.extend(
                built
                    .spec
                    .group_by
                    .iter()
                    .zip(&row.values)
                    .map(|(&d, v)| Cell::plain(dim_cell(built, d, v))),
            );
            // A row the previous period did not have compares with nothing: zeros.
            let before = built.previous.as_ref().map(|_| {
                built.previous_row(row).map_or_else(nothing, |b| {
                    metric_cells(&b.counters, row_money(b.spend_micros, b.revenue_micros))
                })
            });
            cells.extend(compared(
                metric_cells(
                    &row.counters,
                    row_money(row.spend_micros, row.revenue_micros),
                ),
                before,
            ));
            cells
        })
        .collect();
    let mut totals = vec![Cell::plain("total".to_owned())];
    totals.extend(
        built
            .spec
            .group_by
            .iter()
            .map(|_| Cell::plain(String::new())),
    );
    let totals_of = |c: &Counters| {
        metric_cells(
            c,
            row_money(c.spend_micros(), c.programmatic_revenue_micros()),
        )
    };
    totals.extend(compared(
        totals_of(&built.report.totals),
        built.previous.as_ref().map(|p| totals_of(&p.report.totals)),
    ));
    let totals_counters = &built.report.totals;
    ReportTable {
        headings,
        rows,
        totals,
        invalid_by_reason: totals_counters
            .invalid_by_reason()
            .into_iter()
            .map(|(reason, count)| (reason.label(), count))
            .collect(),
        invalid_total: totals_counters.invalid_total(),
    }
}

/// Impressions and clicks per time bucket (summed over the dimensions); when comparing, the
/// previous period's impressions in the same buckets, dashed.
fn line_chart(built: &BuiltReport) -> String {
    let format = match built.spec.granularity {
        marquee_stats::Granularity::Day => "%m-%d",
        _ => "%m-%d %H:%M",
    };
    // Bucket number → label and sums (impressions, clicks, programmatic, previous).
    let mut buckets: std::collections::BTreeMap<i64, (String, [f64; 4])> = Default::default();
    for row in &built.report.rows {
        let (_, sums) = buckets
            .entry(built.bucket_number(row, false))
            .or_insert_with(|| (row.start.strftime(format).to_string(), [0.0; 4]));
        sums[0] += row.counters.impressions as f64;
        sums[1] += row.counters.clicks as f64;
        sums[2] += row.counters.programmatic_impressions as f64;
    }
    if let Some(previous) = &built.previous {
        for row in &previous.report.rows {
            // Buckets of the previous period past the report's last one are not drawn.
            if let Some((_, sums)) = buckets.get_mut(&built.bucket_number(row, true)) {
                sums[3] += row.counters.impressions as f64;
            }
        }
    }
    let labels: Vec<String> = buckets.values().map(|(label, _)| label.clone()).collect();
    let column = |i: usize| buckets.values().map(|(_, sums)| sums[i]).collect();
    let mut series = vec![
        Series {
            label: "impressions".into(),
            values: column(0),
            dashed: false,
        },
        Series {
            label: "clicks".into(),
            values: column(1),
            dashed: false,
        },
        Series {
            label: "programmatic impressions".into(),
            values: column(2),
            dashed: true,
        },
    ];
    if built.previous.is_some() {
        series.push(Series {
            label: "impressions, previous period".into(),
            values: column(3),
            dashed: true,
        });
    }
    chart::line_chart("Impressions and clicks over time", &labels, &series, "")
}

/// Impressions by the first grouping dimension, largest first (at most 12 bars).
fn bar_chart(built: &BuiltReport) -> String {
    if built.spec.group_by.is_empty() {
        return String::new();
    }
    let mut sums: Vec<(String, f64)> = Vec::new();
    for row in &built.report.rows {
        let Some(value) = row.values.first() else {
            continue;
        };
        let label = dim_cell(built, built.spec.group_by[0], value);
        match sums.iter_mut().find(|(l, _)| *l == label) {
            Some((_, sum)) => *sum += row.counters.impressions as f64,
            None => sums.push((label, row.counters.impressions as f64)),
        }
    }
    sums.sort_by(|a, b| b.1.total_cmp(&a.1));
    sums.truncate(12);
    chart::bar_chart(
        &format!("Impressions by {}", built.spec.group_by[0].as_str()),
        &sums,
    )
}

pub async fn reports(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    let params = ReportParams::from_query(query.as_deref())?;
    let query = params.query(dashboard.clock.now());
    let csv = serde_urlencoded::to_string(&query).unwrap_or_default();
    let result = report(&dashboard, &user, &query).await;
    let value = |key: &str| {
        query
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let grouped: Vec<&str> = params.group_by.split(',').map(str::trim).collect();
    let allowed = |d: &marquee_stats::Dimension| user.role != Role::Publisher || !d.is_demand();
    let dimensions = marquee_stats::Dimension::ALL
        .iter()
        .filter(|d| allowed(d))
        .map(|d| (d.as_str(), grouped.contains(&d.as_str())))
        .collect();
    let names = marquee_api::filter_names(&dashboard.reports, &user.principal()).await?;
    let mut page = ReportsPage {
        nav: Nav::new(&user, "reports"),
        periods: PERIODS,
        from: value("from"),
        granularity: value("granularity"),
        params,
        dimensions,
        names,
        demand_filters: user.role != Role::Publisher,
        covered: String::new(),
        previous: String::new(),
        error: None,
        zone: String::new(),
        currency: String::new(),
        programmatic_currency: String::new(),
        table: None,
        impressions: 0,
        line: String::new(),
        bars: String::new(),
        csv,
    };
    match result {
        Ok(built) => {
            page.zone = built.zone_name.clone();
            page.currency = built.currency.clone().unwrap_or_default();
            page.programmatic_currency = built
                .programmatic
                .currency()
                .map_or_else(String::new, |c| c.as_str().to_owned());
            page.impressions = built.report.totals.impressions;
            let range = |spec: &marquee_stats::ReportSpec| {
                let (from, to) = spec.covered();
                let local = |t: Timestamp| {
                    t.to_zoned(spec.zone.clone())
                        .strftime("%Y-%m-%d %H:%M")
                        .to_string()
                };
                format!("{} – {}", local(from), local(to))
            };
            page.covered = range(&built.spec);
            if let Some(previous) = &built.previous {
                page.previous = range(&previous.spec);
            }
            page.table = Some(table(&built));
            page.line = line_chart(&built);
            page.bars = bar_chart(&built);
        }
        // A filter naming an id out of the user's scope is told beside the form, as a mistyped
        // name is.
        Err(PageError::BadRequest(message) | PageError::NotFound(message)) => {
            page.error = Some(message);
        }
        Err(other) => return Err(other),
    }
    Ok(html(&page))
}

// Starts as `reports` does, deliberately: the CSV is that page's table, read from the same
// parameters by the same user.
pub async fn reports_csv(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    let params = ReportParams::from_query(query.as_deref())?;
    let built = report(&dashboard, &user, &params.query(dashboard.clock.now())).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"report.csv\"",
            ),
        ],
        marquee_api::report_csv(&built),
    )
        .into_response())
}

/// A line item's pacing as its page shows it.
pub struct PacingView {
    /// `on pace`, `behind`, `ahead`, `stopped` or `outside its flight`.
    pub status: &'static str,
    /// The status as a CSS class.
    pub status_class: String,
    pub metric: &'static str,
    pub period: &'static str,
    pub delivered: String,
    pub target: String,
    /// Delivered as a percentage of the curve's value now; none while the curve is below 1.
    pub share: Option<String>,
    /// The same share as a number (1.0 is on the curve), for sorting lists.
    pub share_ratio: Option<f64>,
    pub goal: String,
    pub chart: String,
    /// Share of eligible requests it takes part in; none before the first pacing round.
    pub throttle: Option<String>,
    pub bid_multiplier: Option<String>,
    pub lease: Option<LeaseView>,
}

pub struct LeaseView {
    pub limit: String,
    pub used: String,
    pub committed: String,
    pub live_edges: usize,
}

fn metric_name(metric: GoalMetric) -> &'static str {
    match metric {
        GoalMetric::Impressions => "impressions",
        GoalMetric::Clicks => "clicks",
        GoalMetric::Spend => "spend",
    }
}

/// An amount in a goal's metric as text: spend (in micros) in the line item's currency, a
/// count as a whole number.
fn amount(metric: GoalMetric, currency: Currency, value: f64) -> String {
    match metric {
        GoalMetric::Spend => money(Some(currency), value),
        GoalMetric::Impressions | GoalMetric::Clicks => format!("{value:.0}"),
    }
}

fn in_metric(metric: GoalMetric, counters: &Counters) -> f64 {
    match metric {
        GoalMetric::Impressions => counters.impressions as f64,
        GoalMetric::Clicks => counters.clicks as f64,
        GoalMetric::Spend => counters.spend_micros() as f64,
    }
}

/// Where delivery stands against its goal today: delivered per hour (cumulative) against
/// the goal curve of the line item's pacing mode, with the controller's throttle and the
/// budget lease as the manager holds them. `None` without a goal.
pub async fn pacing_view(
    dashboard: &Dashboard,
    user: &SignedIn,
    line_item: &Stored<LineItem>,
) -> Result<Option<PacingView>, PageError> {
    let Ok(schedule) = Schedule::for_line_item(&line_item.object) else {
        return Ok(None);
    };
    let goal = schedule.goal();
    let metric = goal.metric;
    let currency = line_item.object.price.currency;
    let amount = |value: f64| amount(metric, currency, value);
    let now = dashboard.clock.now();
    let day = match schedule.day(now) {
        Ok(day) => day,
        Err(error) => return Err(PageError::Internal(error.to_string())),
    };
    let zone = schedule.zone().clone();
    let profile = TrafficProfile::default();
    let daily = goal.daily.is_some();
    let target_at = |t: Timestamp| {
        schedule
            .targets(t, &profile)
            .ok()
            .and_then(|targets| {
                if daily {
                    targets.today
                } else {
                    targets.lifetime
                }
            })
            .unwrap_or(0.0)
    };
    let id = line_item.meta.id.to_string();
    let zone_name = line_item.object.time_zone.clone();
    let day_start = day.start.min(now);
    // Delivery is stored by UTC hour: before today and today meet at the hour the local day
    // starts in (inside an hour in Kolkata), so that no hour row is counted on both sides.
    let split = marquee_stats::hour_start(day_start);
    let mut cumulative = 0.0;
    if !daily {
        let (flight_start, _) = line_item
            .object
            .flight()
            .ok_or_else(|| PageError::Internal("flight cannot be placed".into()))?;
        if flight_start < split {
            let before = report(
                dashboard,
                user,
                &[
                    // A report holds the hours that start in its range: from the hour
                    // the flight starts in, since nothing is delivered before it.
                    ("from", instant(marquee_stats::hour_start(flight_start))),
                    ("to", instant(split)),
                    ("granularity", "day".into()),
                    ("line_item", id.clone()),
                    ("tz", zone_name.clone()),
                ],
            )
            .await?;
            cumulative = in_metric(metric, &before.report.totals);
        }
    }
    let hours: Vec<Timestamp> = (0..=24)
        .map(|h| day.start + SignedDuration::from_hours(h))
        .take_while(|t| *t <= day.end)
        .collect();
    let mut delivered_by_hour = vec![0.0; hours.len()];
    if now > split {
        let today = report(
            dashboard,
            user,
            &[
                ("from", instant(split)),
                ("to", instant(now)),
                ("granularity", "hour".into()),
                ("line_item", id),
                ("tz", zone_name),
            ],
        )
        .await?;
        for row in &today.report.rows {
            let offset = (row.start.timestamp() - day.start).get_seconds() / 3_600;
            if let Some(slot) = usize::try_from(offset)
                .ok()
                .and_then(|i| delivered_by_hour.get_mut(i))
            {
                *slot += in_metric(metric, &row.counters);
            }
        }
    }
    // Cumulative delivery at the end of each hour so far; the curve at every hour boundary.
    let mut delivered = vec![cumulative];
    for (i, t) in hours.iter().enumerate().skip(1) {
        if *t > now + SignedDuration::from_hours(1) {
            break;
        }
        cumulative += delivered_by_hour[i - 1];
        delivered.push(cumulative);
    }
    let delivered_now = cumulative;
    let target_now = target_at(now);
    // The day's end belongs to the next day, whose curve starts again at 0: end just before.
    let last_instant = day.end - SignedDuration::from_secs(1);
    let planned: Vec<f64> = hours
        .iter()
        .map(|t| target_at((*t).min(last_instant)))
        .collect();
    let labels: Vec<String> = hours
        .iter()
        .map(|t| t.to_zoned(zone.clone()).strftime("%H:%M").to_string())
        .collect();
    let (control, lease) = match dashboard.manager.pacing() {
        Some(pacing) => pacing.line_item_state(LineItemId(line_item.meta.id)).await,
        None => (None, None),
    };
    let status = if control.is_some_and(|c| c.stopped) {
        "stopped"
    } else if !schedule.in_flight(now) {
        "outside its flight"
    } else if target_now < 1.0 || (0.9..=1.1).contains(&(delivered_now / target_now)) {
        "on pace"
    } else if delivered_now < target_now {
        "behind"
    } else {
        "ahead"
    };
    // The chart's axis is in what the text says: currency units for spend, not micros.
    let (unit, per_unit) = match metric {
        GoalMetric::Spend => (currency.symbol(), Micros::PER_UNIT as f64),
        GoalMetric::Impressions | GoalMetric::Clicks => (String::new(), 1.0),
    };
    let in_units = |values: Vec<f64>| values.into_iter().map(|v| v / per_unit).collect();
    let goal_text = match (goal.daily, goal.lifetime) {
        (Some(d), Some(l)) => format!("{} a day, {} in all", amount(d as f64), amount(l as f64)),
        (Some(d), None) => format!("{} a day", amount(d as f64)),
        (None, Some(l)) => format!("{} in all", amount(l as f64)),
        (None, None) => String::new(),
    };
    Ok(Some(PacingView {
        status,
        status_class: status.replace(' ', "-"),
        metric: metric_name(metric),
        period: if daily {
            "today"
        } else {
            "since the flight started"
        },
        delivered: amount(delivered_now),
        target: amount(target_now),
        // People judge pace as a share of where the curve stands.
        share: (target_now >= 1.0).then(|| format!("{:.0}%", delivered_now / target_now * 100.0)),
        share_ratio: (target_now >= 1.0).then(|| delivered_now / target_now),
        goal: goal_text,
        chart: chart::line_chart(
            &match metric {
                GoalMetric::Spend => format!("Spend in {currency} against the goal curve"),
                _ => format!("Delivered {} against the goal curve", metric_name(metric)),
            },
            &labels,
            &[
                Series {
                    label: "goal curve".into(),
                    values: in_units(planned),
                    dashed: true,
                },
                Series {
                    label: "delivered".into(),
                    values: in_units(delivered),
                    dashed: false,
                },
            ],
            &unit,
        ),
        throttle: control.map(|c| format!("{:.1}%", f64::from(c.throttle_ppm) / 10_000.0)),
        bid_multiplier: control
            .map(|c| format!("{:.2}×", f64::from(c.bid_multiplier_permille) / 1_000.0)),
        lease: lease.map(|u| LeaseView {
            limit: amount(u.limit as f64),
            used: amount(u.used as f64),
            committed: amount(u.committed as f64),
            live_edges: u.live_edges,
        }),
    }))
}

#[derive(Debug, Deserialize, Default)]
pub struct ExplainParams {
    #[serde(default)]
    placement: String,
    /// The visitor's IP address, looked up in the geo databases.
    #[serde(default)]
    ip: String,
    #[serde(default)]
    country: String,
    #[serde(default)]
    region: String,
    #[serde(default)]
    city: String,
    #[serde(default)]
    metro: String,
    #[serde(default)]
    postal: String,
    #[serde(default)]
    asn: String,
    #[serde(default)]
    connection: String,
    #[serde(default)]
    device: String,
    #[serde(default)]
    key_values: String,
    #[serde(default)]
    time: String,
    #[serde(default)]
    page_url: String,
    /// Only the line items whose id this is, or whose name holds it (any case).
    #[serde(default)]
    line_item: String,
}

impl ExplainParams {
    /// Whether line item `id` called `name` is one the form asks to see.
    fn shows(&self, id: u64, name: &str) -> bool {
        let wanted = self.line_item.trim();
        wanted.is_empty()
            || wanted.parse::<u64>().is_ok_and(|w| w == id)
            || name.to_lowercase().contains(&wanted.to_lowercase())
    }

    /// The form as targeting spells its values: no surrounding spaces, country and region
    /// codes in capitals. The page shows them so.
    fn normalized(self) -> ExplainParams {
        let trimmed = |text: String| text.trim().to_owned();
        ExplainParams {
            ip: trimmed(self.ip),
            country: self.country.trim().to_ascii_uppercase(),
            region: self.region.trim().to_ascii_uppercase(),
            city: trimmed(self.city),
            metro: trimmed(self.metro),
            postal: trimmed(self.postal),
            asn: trimmed(self.asn),
            ..self
        }
    }

    /// Where the test request comes from, as the form's location fields say.
    fn geo(&self) -> Result<Geo<'_>, String> {
        Ok(Geo {
            country: text(&self.country),
            region: text(&self.region),
            city: text(&self.city),
            point: None,
            metro: number(&self.metro, "a DMA code")?,
            postal: text(&self.postal),
            asn: number(&self.asn, "an AS number")?,
            connection_type: choice(&self.connection, "a connection type")?,
        })
    }
}

/// Text from the form; `None` when empty.
fn text(value: &str) -> Option<&str> {
    Some(value).filter(|v| !v.is_empty())
}

/// A number from the form; `None` when empty.
fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<Option<T>, String> {
    match text {
        "" => Ok(None),
        text => text
            .parse()
            .map(Some)
            .map_err(|_| format!("{text:?} is not {what}")),
    }
}

/// One of a model enum's values, by its JSON name; `None` when empty.
fn choice<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<Option<T>, String> {
    match text {
        "" => Ok(None),
        text => serde_json::from_value(serde_json::Value::String(text.to_owned()))
            .map(Some)
            .map_err(|_| format!("{text:?} is not {what}")),
    }
}

pub struct VerdictRow {
    pub id: u64,
    pub name: String,
    pub won: bool,
    pub reason: String,
}

#[derive(Template)]
#[template(path = "explain.html")]
struct ExplainPage {
    nav: Nav,
    params: ExplainParams,
    placements: Vec<(u64, String, bool)>,
    devices: &'static [&'static str],
    connections: &'static [&'static str],
    error: Option<String>,
    /// The IP address and the location it resolved to.
    resolved: Option<String>,
    snapshot: Option<u64>,
    verdicts: Option<Vec<VerdictRow>>,
    winner: Option<String>,
    /// The names of the line items the user may see, offered by the line item filter.
    line_item_names: Vec<String>,
}

const DEVICES: &[&str] = &["desktop", "phone", "tablet", "ctv", "console", "other"];

/// Ad requests convert nothing (no floor, no bid currency), as at the edge.
static AD_REQUEST_RATES: CurrencyRates = CurrencyRates::new(Currency::USD);

/// What the test request says beyond its location, for a targeting miss's "request:" side.
struct RequestFacts {
    device: String,
    placement: u64,
    site: Option<u64>,
    domain: Option<String>,
    page_url: String,
    key_values: String,
    at: Timestamp,
}

impl RequestFacts {
    /// The request's value of a non-geo attribute as the page shows it.
    fn value(&self, attribute: &str) -> String {
        let or_none = |text: &str| {
            if text.trim().is_empty() {
                "none given".to_owned()
            } else {
                text.trim().to_owned()
            }
        };
        match attribute {
            "device_type" => or_none(&self.device),
            "placement" => self.placement.to_string(),
            "site" => self.site.map_or_else(|| "none".into(), |s| s.to_string()),
            "domain" => self.domain.clone().unwrap_or_else(|| "none".into()),
            "page_url" => or_none(&self.page_url),
            "key_value" => or_none(&self.key_values),
            "day_of_week" => self.at.strftime("%A (UTC)").to_string().to_lowercase(),
            "hour" => self.at.strftime("%H:%M UTC").to_string(),
            _ => "not part of this test request".into(),
        }
    }

    /// A targeting miss on a non-geo attribute, in the geo misses' words: `targeting:
    /// device_type — request: phone; targeted: desktop, tablet`.
    fn miss(&self, blamed: &str, targeting: &Targeting) -> Option<String> {
        let attribute = blamed.strip_prefix("not ").unwrap_or(blamed);
        let mut targeted: Vec<String> = Vec::new();
        for leaf in targeting.leaves().filter(|l| l.attribute() == attribute) {
            let json = serde_json::to_value(leaf).ok()?;
            let payload = json.as_object()?.values().next()?.clone();
            let items = match payload {
                serde_json::Value::Array(items) => items,
                other => vec![other],
            };
            for item in items {
                let text = match item {
                    serde_json::Value::String(text) => text,
                    serde_json::Value::Object(map)
                        if map.contains_key("key") && map.contains_key("values") =>
                    {
                        // A key-value leaf: `section=sport|news`.
                        let values: Vec<String> = map["values"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect();
                        format!("{}={}", map["key"].as_str().unwrap_or(""), values.join("|"))
                    }
                    other => other.to_string(),
                };
                if !targeted.contains(&text) {
                    targeted.push(text);
                }
            }
        }
        if targeted.is_empty() {
            return None;
        }
        Some(format!(
            "targeting: {blamed} — request: {}; targeted: {}",
            self.value(attribute),
            targeted.join(", ")
        ))
    }
}

/// Why a rule eliminated a line item, in words; a targeting miss with the request's value
/// beside the values `targeting` (the line item's) lists for the attribute.
fn reason(
    outcome: &Outcome,
    targeting: Option<&Targeting>,
    request: &RequestGeo<'_>,
    facts: &RequestFacts,
) -> String {
    use marquee_engine::Elimination as E;
    let Outcome::Eliminated(elimination) = outcome else {
        return "serves".into();
    };
    match elimination {
        E::Channel => "does not take this channel".into(),
        E::Deal => "deal rules".into(),
        E::Targeting(attribute) => targeting
            .and_then(|targeting| {
                request
                    .miss(attribute, targeting)
                    .or_else(|| facts.miss(attribute, targeting))
            })
            .unwrap_or_else(|| format!("targeting or placement links reject it ({attribute})")),
        E::Stopped => "stopped by pacing (goal reached or held)".into(),
        E::Dates => "outside its flight".into(),
        E::BlockedAdvertiser => "advertiser blocked".into(),
        E::BlockedApp => "app blocked".into(),
        E::Creative => "no creative fits the placement's sizes and formats".into(),
        E::Media => "video or audio rules".into(),
        E::Native => "native assets".into(),
        E::Secure => "no https creative".into(),
        E::BlockedCategory => "category blocked".into(),
        E::FrequencyCap => "frequency cap reached".into(),
        E::Pacing => "left out by pacing".into(),
        E::Currency => "no currency rate".into(),
        E::Floor => "under the floor".into(),
        E::NotExamined => "too many candidates in its tier; not examined".into(),
        E::OutrankedByTier => "a higher tier won".into(),
        E::NotChosen => "another line item of its tier was chosen".into(),
    }
}

/// The line item that would serve, and each line item's outcome.
type Explained = (Option<u64>, Vec<(u64, Outcome)>);

/// The explained decision for the test request from `geo`, on the engine's snapshot.
fn explain(
    engine: &Engine,
    params: &ExplainParams,
    geo: Geo<'_>,
    placement: u64,
    now: Timestamp,
) -> Result<Explained, String> {
    let data = &engine.snapshot().data;
    let entry = data.placement(PlacementId(placement)).ok_or_else(|| {
        format!("placement {placement} is not in the latest snapshot (paused, archived or new)")
    })?;
    let domain = data.site(entry.site_id).map(|s| s.domain.as_str());
    let device_type: Option<DeviceType> = choice(&params.device, "a device type")?;
    let pairs: Vec<(&str, &str)> = params
        .key_values
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let request = Request {
        channel: Channel::Direct,
        placement: Some(PlacementId(placement)),
        site: Some(entry.site_id),
        slot: marquee_engine::Slot {
            sizes: &entry.sizes,
            formats: &entry.formats,
            ..marquee_engine::Slot::default()
        },
        domain,
        page_url: Some(params.page_url.trim()).filter(|u| !u.is_empty()),
        device: marquee_engine::Device {
            device_type,
            ..marquee_engine::Device::default()
        },
        geo,
        key_values: &pairs,
        ..Request::at(now)
    };
    let mut rng = SmallRng::seed_from_u64(now.as_nanosecond() as u64);
    let mut scratch = Scratch::default();
    let mut context = Context {
        rng: &mut rng,
        caps: &NoCaps,
        pacing: &FullSpeed,
        rates: &AD_REQUEST_RATES,
        scratch: &mut scratch,
    };
    let (decision, verdicts) = engine.explain(&request, &mut context);
    Ok((
        decision.map(|d| d.line_item.0),
        verdicts
            .into_iter()
            .map(|v| (v.line_item.0, v.outcome))
            .collect(),
    ))
}

/// The placements the test request may name: every active one, by name, for an admin; for
/// an advertiser (who may not list the supply side, as in the API) the placements its own
/// line items are linked to, by id.
async fn placement_choices(
    dashboard: &Dashboard,
    user: &SignedIn,
    selected: &str,
) -> Result<Vec<(u64, String, bool)>, PageError> {
    let choice = |id: u64, label: String| (id, label, id.to_string() == selected);
    if user.is_admin() {
        let placements = dashboard
            .store
            .list(
                ObjectKind::Placement,
                &ListQuery {
                    status: Some(marquee_model::Status::Active),
                    limit: marquee_store::MAX_PAGE,
                    ..ListQuery::default()
                },
            )
            .await?;
        return Ok(placements
            .into_iter()
            .map(|p| choice(p.meta.id, format!("{} (#{})", p.name, p.meta.id)))
            .collect());
    }
    let scope = user.principal().scope();
    let own = dashboard
        .store
        .list(
            ObjectKind::LineItem,
            &ListQuery {
                scope,
                status: Some(marquee_model::Status::Active),
                limit: marquee_store::MAX_PAGE,
                ..ListQuery::default()
            },
        )
        .await?;
    let mut ids = std::collections::BTreeSet::new();
    for line_item in own {
        let linked = dashboard
            .store
            .placements_of(LineItemId(line_item.meta.id), scope)
            .await?;
        ids.extend(linked.into_iter().map(|p| p.0));
    }
    Ok(ids
        .into_iter()
        .map(|id| choice(id, format!("placement #{id}")))
        .collect())
}

pub async fn why_not_served(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Query(params): Query<ExplainParams>,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    if user.role == Role::Publisher {
        return Err(PageError::Forbidden(
            "why-not-served shows line items: it is for admins and advertisers".into(),
        ));
    }
    let placements = placement_choices(&dashboard, &user, &params.placement).await?;
    let mut page = ExplainPage {
        nav: Nav::new(&user, "why-not-served"),
        placements,
        devices: DEVICES,
        connections: crate::targeting::CONNECTION_TYPES,
        error: None,
        resolved: None,
        snapshot: None,
        verdicts: None,
        winner: None,
        line_item_names: Vec::new(),
        params: params.normalized(),
    };
    if page.params.placement.is_empty() {
        return Ok(html(&page));
    }
    let placement = page.params.placement.parse::<u64>().map_err(|_| {
        PageError::BadRequest(format!("{:?} is not a placement id", page.params.placement))
    })?;
    let now = match page.params.time.trim() {
        "" => dashboard.clock.now(),
        text => text
            .parse::<civil::DateTime>()
            .ok()
            .or_else(|| format!("{text}:00").parse::<civil::DateTime>().ok())
            .and_then(|t| TimeZone::UTC.to_timestamp(t).ok())
            .ok_or_else(|| {
                PageError::BadRequest(format!("{text:?} is not a time such as 2026-12-01T08:00"))
            })?,
    };
    let lookup = match Lookup::resolve(dashboard.geo.as_deref(), &page.params.ip) {
        Ok(lookup) => lookup,
        Err(message) => {
            page.error = Some(message);
            return Ok(html(&page));
        }
    };
    page.resolved = lookup.describe();
    let typed = match page.params.geo() {
        Ok(typed) => typed,
        Err(message) => {
            page.error = Some(message);
            return Ok(html(&page));
        }
    };
    let request_geo = RequestGeo::new(typed, &lookup);
    let Some(published) = dashboard.manager.latest() else {
        page.error = Some("no snapshot has been published yet".into());
        return Ok(html(&page));
    };
    let snapshot = Snapshot::decode(&published.bytes)
        .map_err(|e| PageError::Internal(format!("latest snapshot: {e}")))?;
    page.snapshot = Some(snapshot.version);
    let engine = Engine::new(Arc::new(snapshot));
    let data = &engine.snapshot().data;
    let entry = data.placement(PlacementId(placement));
    let facts = RequestFacts {
        device: page.params.device.clone(),
        placement,
        site: entry.map(|e| e.site_id.0),
        domain: entry
            .and_then(|e| data.site(e.site_id))
            .map(|s| s.domain.clone()),
        page_url: page.params.page_url.clone(),
        key_values: page.params.key_values.clone(),
        at: now,
    };
    match explain(&engine, &page.params, request_geo.geo, placement, now) {
        Ok((winner, verdicts)) => {
            let names: HashMap<u64, String> = dashboard
                .store
                .list(
                    ObjectKind::LineItem,
                    &ListQuery {
                        scope: user.principal().scope(),
                        limit: marquee_store::MAX_PAGE,
                        ..ListQuery::default()
                    },
                )
                .await?
                .into_iter()
                .map(|r| (r.meta.id, r.name))
                .collect();
            // An advertiser sees only its own line items, and which line item won only if
            // it is its own.
            let visible = |id: u64| {
                user.owner_id.is_none()
                    || data
                        .line_item(LineItemId(id))
                        .is_some_and(|li| Some(li.advertiser_id.0) == user.owner_id)
            };
            page.winner = winner.filter(|&id| visible(id)).map(|id| {
                names
                    .get(&id)
                    .map_or_else(|| format!("#{id}"), |n| format!("{n} (#{id})"))
            });
            page.line_item_names = verdicts
                .iter()
                .filter(|(id, _)| visible(*id))
                .filter_map(|(id, _)| names.get(id).cloned())
                .collect();
            let params = &page.params;
            page.verdicts = Some(
                verdicts
                    .into_iter()
                    .filter(|(id, _)| visible(*id))
                    .filter(|(id, _)| params.shows(*id, names.get(id).map_or("", String::as_str)))
                    .map(|(id, outcome)| VerdictRow {
                        id,
                        name: names.get(&id).cloned().unwrap_or_default(),
                        won: outcome == Outcome::Won,
                        reason: reason(
                            &outcome,
                            data.line_item(LineItemId(id))
                                .and_then(|li| li.targeting.as_ref()),
                            &request_geo,
                            &facts,
                        ),
                    })
                    .collect(),
            );
        }
        Err(message) => page.error = Some(message),
    }
    Ok(html(&page))
}

pub struct EdgeRow {
    pub id: String,
    pub address: String,
    pub snapshot: String,
    pub current: bool,
    pub age: String,
    pub lag: String,
    pub rate: String,
    pub live: bool,
}

#[derive(Template)]
#[template(path = "edges.html")]
struct EdgesPage {
    nav: Nav,
    edges: Vec<EdgeRow>,
    published: Option<u64>,
}

pub async fn edges(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let user = require_admin(&dashboard, &headers, "the edges page is for admins").await?;
    let edges = dashboard
        .manager
        .edges()
        .into_iter()
        .map(|e| EdgeRow {
            id: e.id,
            address: e.address,
            snapshot: e.snapshot_version.map_or_else(
                || "none".into(),
                |v| format!("{} (rev {})", v >> 32, v & 0xffff_ffff),
            ),
            current: e.snapshot_current,
            age: e
                .snapshot_age
                .map_or_else(String::new, |a| format!("{:.0} s", a.as_secs_f64())),
            lag: e.log_lag.map_or_else(String::new, |l| {
                format!("{} bytes, {} s behind", l.backlog_bytes, l.behind_secs)
            }),
            rate: format!("{:.1}/s", e.request_rate),
            live: e.live,
        })
        .collect();
    let page = EdgesPage {
        nav: Nav::new(&user, "edges"),
        edges,
        published: dashboard.manager.latest().map(|p| p.header.version >> 32),
    };
    Ok(html(&page))
}
