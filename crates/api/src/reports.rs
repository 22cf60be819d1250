//! `GET /api/v1/reports`: delivery by time and dimensions, in JSON or CSV.
//!
//! Roles: an admin sees everything; an advertiser token only its own line items (and their
//! rows); a publisher token only rows served on its own placements, grouped by supply-side
//! dimensions. An id outside the caller's scope answers exactly as a missing one (404).
//!
//! Time zone: `tz` when given; otherwise the advertiser's (an advertiser token, or an admin's
//! `advertiser=` or line items of one advertiser); otherwise UTC. `from` and `to` are local
//! dates (`2026-12-01`), local times (`2026-12-01T08:00`) or instants (`…Z`, `…+01:00`);
//! `to` is exclusive and defaults to now. A report holds the stored buckets (minutes for
//! minute reports, hours otherwise) that start in `[from, to)`, and its answer's `from` and
//! `to` state the range those cover: each end moved forward to the next bucket boundary.
//!
//! Invalid traffic is reported beside the billing figures, never in them: every row and the
//! totals carry `invalid_impressions`, `invalid_clicks`, `invalid_conversions` and
//! `invalid_by_reason` (every reason; in CSV one `invalid_<reason>` column each), while
//! impressions, clicks, CTR and spend count valid events only. See `docs/reporting.md`.
//!
//! Programmatic demand (the unified auction among the gateway's bidders) is reported beside
//! direct delivery: every row carries the `programmatic_` metrics, the ad requests and the
//! fill rate; `group_by=bidder` splits them by bidder (named from `[gateway.bidders]`, see
//! [`ProgrammaticReports`]); revenue is in the gateway's currency (`programmatic_currency`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use jiff::tz::TimeZone;
use jiff::{Timestamp, civil};
use marquee_model::{Clock, Currency, Principal, Role, is_region_code};
use marquee_stats::{
    Counters, DEVICES, Dimension, Dimensions, Granularity, InvalidReason, Report, ReportRow,
    ReportSpec, Value as DimValue,
};
use marquee_store::Store;
use serde_json::{Map, Value, json};

use crate::openapi::{operation, response, responses, schema_ref};
use crate::{ApiError, Caller, HasStore};

/// The query parameters this route knows.
pub const PARAMETERS: [&str; 14] = [
    "from",
    "to",
    "granularity",
    "group_by",
    "line_item",
    "advertiser",
    "placement",
    "country",
    "region",
    "device",
    "tz",
    "format",
    "compare",
    "period",
];

/// The date presets of `period=`, besides `custom` (`from` and `to` as given).
const PERIODS: [&str; 6] = [
    "today",
    "yesterday",
    "last_7_days",
    "last_30_days",
    "this_month",
    "last_month",
];

/// The local days `[first, end)` a preset names on the day `today`, in the report's zone: whole
/// days, today's included by `today` and `this_month`; the last 7 and 30 days end yesterday.
fn period_days(period: &str, today: civil::Date) -> Option<(civil::Date, civil::Date)> {
    let first_of_month = today.first_of_month();
    Some(match period {
        "today" => (today, today.tomorrow().ok()?),
        "yesterday" => (today.yesterday().ok()?, today),
        "last_7_days" => (today.checked_sub(jiff::Span::new().days(7)).ok()?, today),
        "last_30_days" => (today.checked_sub(jiff::Span::new().days(30)).ok()?, today),
        "this_month" => (
            first_of_month,
            first_of_month
                .checked_add(jiff::Span::new().months(1))
                .ok()?,
        ),
        "last_month" => (
            first_of_month
                .checked_sub(jiff::Span::new().months(1))
                .ok()?,
            first_of_month,
        ),
        _ => return None,
    })
}

/// The longest range per granularity, in days: minute rows answer short ranges only.
fn max_days(granularity: Granularity) -> i64 {
    match granularity {
        Granularity::Minute => 31,
        Granularity::Hour | Granularity::Day => 3_660,
    }
}

/// What reports say of programmatic demand beyond the stored rows: the gateway's currency
/// (its revenue's) and its bidders' names by the id their events carry
/// ([`marquee_stats::bidder_id`]). A bidder no longer configured is shown by id only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgrammaticReports {
    currency: Option<Currency>,
    bidders: Vec<(u64, String)>,
}

impl ProgrammaticReports {
    /// The gateway's currency and bidder names (`[gateway]`'s `currency` and `bidders`).
    pub fn new(currency: Currency, names: impl IntoIterator<Item = String>) -> Self {
        ProgrammaticReports {
            currency: Some(currency),
            bidders: names
                .into_iter()
                .map(|name| (marquee_stats::bidder_id(&name), name))
                .collect(),
        }
    }

    /// The name of the bidder with this id, if it is configured.
    pub fn bidder_name(&self, id: u64) -> Option<&str> {
        self.bidders
            .iter()
            .find(|(known, _)| *known == id)
            .map(|(_, name)| name.as_str())
    }

    /// The currency of programmatic revenue, when a gateway is configured.
    pub fn currency(&self) -> Option<Currency> {
        self.currency
    }
}

/// The catalog view and the change counter it was read at.
type CachedDimensions = Option<(u64, Arc<Dimensions>)>;

/// State of the reports route: the store, a catalog view cached by change counter, limits.
#[derive(Debug, Clone)]
pub struct ReportsState {
    pub store: Arc<dyn Store>,
    /// "Now", where a report's `to` is left out.
    pub clock: Arc<dyn Clock>,
    pub max_rows: usize,
    pub programmatic: Arc<ProgrammaticReports>,
    dims: Arc<Mutex<CachedDimensions>>,
}

impl ReportsState {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, max_rows: usize) -> ReportsState {
        ReportsState {
            store,
            clock,
            max_rows,
            programmatic: Arc::default(),
            dims: Arc::default(),
        }
    }

    /// Names bidders and gives the currency of programmatic revenue.
    pub fn with_programmatic(mut self, programmatic: ProgrammaticReports) -> ReportsState {
        self.programmatic = Arc::new(programmatic);
        self
    }

    /// The catalog view, read again only when the change counter moved.
    async fn dimensions(&self) -> Result<Arc<Dimensions>, ApiError> {
        let counter = self.store.change_counter().await?;
        if let Ok(cached) = self.dims.lock()
            && let Some((at, dims)) = cached.as_ref()
            && *at == counter
        {
            return Ok(Arc::clone(dims));
        }
        let dims = Arc::new(self.store.dimensions().await?);
        if let Ok(mut cached) = self.dims.lock() {
            *cached = Some((counter, Arc::clone(&dims)));
        }
        Ok(dims)
    }
}

impl HasStore for ReportsState {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
}

/// The parsed query, before scoping.
#[derive(Debug, Default)]
struct Params {
    from: Option<String>,
    to: Option<String>,
    granularity: Option<String>,
    group_by: Vec<Dimension>,
    /// Ids or names, resolved in the caller's scope ([`resolve`]).
    line_items: Option<String>,
    advertiser: Option<String>,
    placements: Option<String>,
    countries: Option<Vec<String>>,
    regions: Option<Vec<String>>,
    devices: Option<Vec<u8>>,
    tz: Option<String>,
    format: Option<String>,
    /// `compare=previous`: the same report over the period of the same length right before.
    compare: bool,
    /// A date preset ([`PERIODS`]) or `custom`.
    period: Option<String>,
}

/// The objects a filter names: ids, names, or both, comma-separated. The whole text is first
/// taken as one name (a name may hold a comma); otherwise each part is an id when it is
/// digits, else a name. Names match whole, ignoring case, among the objects `principal` may
/// see the names of ([`may_name`]): another tenant's names resolve as unknown ones do.
fn resolve(
    field: &str,
    text: &str,
    dimension: Dimension,
    principal: &Principal,
    dims: &Dimensions,
) -> Result<Vec<u64>, ApiError> {
    let what = dimension.as_str().replace('_', " ");
    let named = |name: &str| -> Vec<u64> {
        dims.named(dimension, name)
            .into_iter()
            .filter(|&id| may_name(principal, dims, dimension, id))
            .collect()
    };
    let whole = text.trim();
    if whole.contains(',')
        && !whole.split(',').all(|part| is_digits(part.trim()))
        && let [id] = named(whole)[..]
    {
        return Ok(vec![id]);
    }
    whole
        .split(',')
        .map(|part| {
            let part = part.trim();
            if is_digits(part) {
                return match part.parse::<u64>() {
                    Ok(id) if id > 0 => Ok(id),
                    _ => Err(ApiError::bad_field(
                        field,
                        format!("{part:?} is not a positive integer id"),
                    )),
                };
            }
            match named(part)[..] {
                [id] => Ok(id),
                [] if part.is_empty() => Err(ApiError::bad_field(
                    field,
                    format!("an empty {what}: give ids or names, comma-separated"),
                )),
                [] => Err(ApiError::bad_field(
                    field,
                    format!(
                        "no {what} is named {part:?} (names match whole, ignoring case; ids and names are comma-separated)"
                    ),
                )),
                ref several => Err(ApiError::bad_field(
                    field,
                    format!(
                        "{part:?} names {} {what}s ({}); give the id of the one you mean",
                        several.len(),
                        several
                            .iter()
                            .map(|id| format!("#{id}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
            }
        })
        .collect()
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `principal` may see the name of object `id` of `dimension`: an admin every name, a
/// tenant those of its own objects (an advertiser its campaigns, line items and creatives; a
/// publisher its sites and placements), as every read of the API. An advertiser's rows by
/// placement show ids only: the placements are a publisher's.
fn may_name(principal: &Principal, dims: &Dimensions, dimension: Dimension, id: u64) -> bool {
    let Some(owner) = principal.scope() else {
        return principal.role == Role::Admin;
    };
    let of_advertiser = |line_item: Option<u64>| {
        line_item
            .and_then(|li| dims.line_item(li))
            .is_some_and(|li| li.advertiser == owner)
    };
    match (principal.role, dimension) {
        (Role::Admin, _) => true,
        (Role::Advertiser, Dimension::Advertiser) => id == owner,
        (Role::Advertiser, Dimension::Campaign) => dims.campaign(id) == Some(owner),
        (Role::Advertiser, Dimension::LineItem) => of_advertiser(Some(id)),
        (Role::Advertiser, Dimension::Creative) => of_advertiser(dims.creative(id)),
        (Role::Publisher, Dimension::Publisher) => id == owner,
        (Role::Publisher, Dimension::Site) => dims.site(id) == Some(owner),
        (Role::Publisher, Dimension::Placement) => {
            dims.placement(id).is_some_and(|p| p.publisher == owner)
        }
        _ => false,
    }
}

/// Whether a dimension's values are ids of objects (or bidders) that have names.
fn has_names(dimension: Dimension) -> bool {
    !matches!(
        dimension,
        Dimension::Country | Dimension::Region | Dimension::Device
    )
}

fn parse_params(uri: &Uri) -> Result<Params, ApiError> {
    let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map_err(|e| ApiError::bad_request(format!("malformed query string: {e}")))?;
    let mut p = Params::default();
    for (key, value) in pairs {
        if !PARAMETERS.contains(&key.as_str()) {
            return Err(ApiError::bad_field(
                key,
                format!("unknown parameter; known: {}", PARAMETERS.join(", ")),
            ));
        }
        match key.as_str() {
            "from" => p.from = Some(value),
            "to" => p.to = Some(value),
            "granularity" => p.granularity = Some(value),
            "group_by" => {
                for name in value.split(',').filter(|n| !n.is_empty()) {
                    let dimension = Dimension::parse(name).ok_or_else(|| {
                        ApiError::bad_field(
                            "group_by",
                            format!(
                                "{name:?} is not a dimension; use {}",
                                Dimension::ALL.map(Dimension::as_str).join(", ")
                            ),
                        )
                    })?;
                    if !p.group_by.contains(&dimension) {
                        p.group_by.push(dimension);
                    }
                }
            }
            "line_item" => p.line_items = Some(value),
            "advertiser" => p.advertiser = Some(value),
            "placement" => p.placements = Some(value),
            "country" => {
                let mut countries = Vec::new();
                for code in value.split(',') {
                    let code = code.trim();
                    if code == "unknown" {
                        countries.push(String::new());
                    } else if code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
                        countries.push(code.to_ascii_uppercase());
                    } else {
                        return Err(ApiError::bad_field(
                            "country",
                            format!("{code:?} is not a two-letter country code or `unknown`"),
                        ));
                    }
                }
                p.countries = Some(countries);
            }
            "region" => {
                let mut regions = Vec::new();
                for code in value.split(',') {
                    let code = code.trim();
                    if code == "unknown" {
                        regions.push(String::new());
                    } else if is_region_code(&code.to_ascii_uppercase()) {
                        regions.push(code.to_ascii_uppercase());
                    } else {
                        return Err(ApiError::bad_field(
                            "region",
                            format!(
                                "{code:?} is not an ISO 3166-2 code such as US-CA, or `unknown`"
                            ),
                        ));
                    }
                }
                p.regions = Some(regions);
            }
            "device" => {
                let mut devices = Vec::new();
                for name in value.split(',') {
                    let name = name.trim();
                    let code = if name == "unknown" {
                        Some(0)
                    } else {
                        DEVICES.iter().position(|d| !d.is_empty() && *d == name)
                    };
                    let code = code.ok_or_else(|| {
                        ApiError::bad_field(
                            "device",
                            format!(
                                "{name:?} is not a device type; use desktop, phone, tablet, ctv, console, other or unknown"
                            ),
                        )
                    })?;
                    // DEVICES has seven entries.
                    devices.push(code as u8);
                }
                p.devices = Some(devices);
            }
            "tz" => p.tz = Some(value),
            "format" => p.format = Some(value),
            "period" => p.period = Some(value),
            "compare" => {
                p.compare = match value.as_str() {
                    "previous" => true,
                    "" | "none" => false,
                    other => {
                        return Err(ApiError::bad_field(
                            "compare",
                            format!("{other:?} is not a comparison; use previous or none"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(p)
}

/// `2026-12-01`, `2026-12-01T08:00[:00]` (local, in `zone`) or an instant with an offset.
fn parse_time(field: &str, text: &str, zone: &TimeZone) -> Result<Timestamp, ApiError> {
    if let Ok(instant) = text.parse::<Timestamp>() {
        return Ok(instant);
    }
    let local = text.parse::<civil::DateTime>().ok().or_else(|| {
        text.parse::<civil::Date>()
            .ok()
            .map(|d| d.to_datetime(civil::Time::midnight()))
    });
    let bad = || {
        ApiError::bad_field(
            field,
            format!(
                "{text:?} is not a date (2026-12-01), a local time (2026-12-01T08:00) or an instant (2026-12-01T07:00:00Z)"
            ),
        )
    };
    let local = local.ok_or_else(bad)?;
    zone.to_timestamp(local).map_err(|_| bad())
}

fn not_found(what: &str, id: u64) -> ApiError {
    ApiError::NotFound(format!("no {what} with id {id}"))
}

/// Which line items and placements the caller may see and asked for; `None` means all.
struct Scope {
    line_items: Option<Vec<u64>>,
    placements: Option<Vec<u64>>,
    /// The advertiser whose zone and currency apply, when there is exactly one.
    advertiser: Option<u64>,
}

fn scope(principal: &Principal, p: &Params, dims: &Dimensions) -> Result<Scope, ApiError> {
    let owner = principal.scope();
    let refs = |field: &str, text: &Option<String>, dimension: Dimension| {
        text.as_deref()
            .map(|text| resolve(field, text, dimension, principal, dims))
            .transpose()
    };
    match principal.role {
        Role::Publisher => {
            if let Some(d) = p.group_by.iter().find(|d| d.is_demand()) {
                return Err(ApiError::Forbidden(format!(
                    "a publisher's reports group by placement, site, publisher, country and device, not {}",
                    d.as_str()
                )));
            }
            if p.line_items.is_some() || p.advertiser.is_some() {
                return Err(ApiError::Forbidden(
                    "a publisher's reports cannot filter by line item or advertiser".into(),
                ));
            }
            let own = dims.placements_of(owner.unwrap_or(0));
            let placements = match &refs("placement", &p.placements, Dimension::Placement)? {
                Some(asked) => {
                    if let Some(&id) = asked.iter().find(|id| !own.contains(id)) {
                        return Err(not_found("placement", id));
                    }
                    asked.clone()
                }
                None => own,
            };
            Ok(Scope {
                line_items: None,
                placements: Some(placements),
                advertiser: None,
            })
        }
        Role::Advertiser | Role::Admin => {
            let asked = match refs("advertiser", &p.advertiser, Dimension::Advertiser)? {
                None => None,
                Some(ids) => match ids[..] {
                    [id] => Some(id),
                    _ => return Err(ApiError::bad_field("advertiser", "takes one advertiser")),
                },
            };
            let line_items = refs("line_item", &p.line_items, Dimension::LineItem)?;
            let placements = refs("placement", &p.placements, Dimension::Placement)?;
            let advertiser = match (owner, asked) {
                (Some(own), Some(asked)) if asked != own => {
                    return Err(not_found("advertiser", asked));
                }
                (Some(own), _) => Some(own),
                (None, Some(asked)) => {
                    dims.advertiser(asked)
                        .ok_or_else(|| not_found("advertiser", asked))?;
                    Some(asked)
                }
                (None, None) => None,
            };
            let line_items = match (&line_items, advertiser) {
                (Some(asked), _) => {
                    for &id in asked {
                        let visible = dims
                            .line_item(id)
                            .is_some_and(|li| advertiser.is_none_or(|a| li.advertiser == a));
                        if !visible {
                            return Err(not_found("line item", id));
                        }
                    }
                    Some(asked.clone())
                }
                (None, Some(advertiser)) => Some(dims.line_items_of(advertiser)),
                (None, None) => None,
            };
            // Line items of one advertiser name its zone even without `advertiser=`.
            let advertiser = advertiser.or_else(|| {
                let ids = line_items.as_ref()?;
                let mut owners = ids
                    .iter()
                    .filter_map(|&id| dims.line_item(id))
                    .map(|li| li.advertiser);
                let first = owners.next()?;
                owners.all(|a| a == first).then_some(first)
            });
            if let Some(placements) = &placements
                && let Some(&id) = placements.iter().find(|&&id| dims.placement(id).is_none())
            {
                return Err(not_found("placement", id));
            }
            Ok(Scope {
                line_items,
                placements,
                advertiser,
            })
        }
    }
}

/// A report shaped for one caller: what was asked, in which zone and currency, and the rows.
#[derive(Debug, Clone)]
pub struct BuiltReport {
    pub spec: ReportSpec,
    /// IANA name of the report's zone.
    pub zone_name: String,
    /// The advertiser's currency, when the report is one advertiser's.
    pub currency: Option<String>,
    pub report: Report,
    /// Bidder names and the currency of programmatic revenue.
    pub programmatic: Arc<ProgrammaticReports>,
    /// The catalog the report was shaped with, and who asked: the names rows show.
    dims: Arc<Dimensions>,
    principal: Principal,
    /// With `compare=previous`: the period right before.
    pub previous: Option<Previous>,
}

impl BuiltReport {
    /// A row's bucket number from the start of its period: the report's, or the previous
    /// period's for one of its rows (`previous`).
    pub fn bucket_number(&self, row: &ReportRow, previous: bool) -> i64 {
        match (&self.previous, previous) {
            (Some(before), true) => place(&before.spec, row).0,
            _ => place(&self.spec, row).0,
        }
    }

    /// The previous period's row in the same place as `row` (same bucket number and values),
    /// when comparing and it had one.
    pub fn previous_row(&self, row: &ReportRow) -> Option<&ReportRow> {
        let previous = self.previous.as_ref()?;
        let index = previous.places.get(&place(&self.spec, row))?;
        previous.report.rows.get(*index)
    }

    /// The name of a row's `value` of `dimension`, where it has one the caller may see: an
    /// object's (advertiser, campaign, line item, creative, publisher, site, placement) or a
    /// configured bidder's.
    pub fn name(&self, dimension: Dimension, value: &DimValue) -> Option<&str> {
        let DimValue::Id(id) = *value else {
            return None;
        };
        match dimension {
            Dimension::Bidder => self.programmatic.bidder_name(id),
            _ if may_name(&self.principal, &self.dims, dimension, id) => {
                self.dims.name(dimension, id)
            }
            _ => None,
        }
    }
}

pub async fn get(
    State(state): State<ReportsState>,
    Caller(principal): Caller,
    uri: Uri,
) -> Result<Response, ApiError> {
    let p = parse_params(&uri)?;
    let format = match p.format.as_deref() {
        None | Some("json") => Format::Json,
        Some("csv") => Format::Csv,
        Some(other) => {
            return Err(ApiError::bad_field(
                "format",
                format!("{other:?} is not a format; use json or csv"),
            ));
        }
    };
    let built = build(&state, &principal, p).await?;
    Ok(match format {
        Format::Json => json_report(&built).into_response(),
        Format::Csv => (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"report.csv\"",
                ),
            ],
            csv_report(&built),
        )
            .into_response(),
    })
}

/// The report the query string `uri` asks for (the parameters of `GET /api/v1/reports`, less
/// `format`), with the same scoping and limits, for callers other than the API (the
/// dashboard).
pub async fn build_report(
    state: &ReportsState,
    principal: &Principal,
    uri: &Uri,
) -> Result<BuiltReport, ApiError> {
    build(state, principal, parse_params(uri)?).await
}

/// The CSV the API answers for a report.
pub fn report_csv(built: &BuiltReport) -> String {
    csv_report(built)
}

async fn build(
    state: &ReportsState,
    principal: &Principal,
    p: Params,
) -> Result<BuiltReport, ApiError> {
    let granularity = match p.granularity.as_deref() {
        None => Granularity::Hour,
        Some(text) => Granularity::parse(text).ok_or_else(|| {
            ApiError::bad_field(
                "granularity",
                format!("{text:?} is not a granularity; use minute, hour or day"),
            )
        })?,
    };
    let dims = state.dimensions().await?;
    let scope = scope(principal, &p, &dims)?;
    let (zone, zone_name) = match &p.tz {
        Some(name) => (
            TimeZone::get(name).map_err(|_| {
                ApiError::bad_field("tz", format!("{name:?} is not an IANA time zone"))
            })?,
            name.clone(),
        ),
        None => match scope.advertiser.and_then(|a| dims.advertiser(a)) {
            Some(advertiser) => (
                dims.zone(advertiser.zone).clone(),
                dims.zone_name(advertiser.zone).to_owned(),
            ),
            None => (TimeZone::UTC, "UTC".to_owned()),
        },
    };
    // A preset is days in the report's zone, counted from the clock's today there.
    let preset = match p.period.as_deref() {
        None | Some("custom") => None,
        Some(period) => {
            let today = state.clock.now().to_zoned(zone.clone()).date();
            let (first, end) = period_days(period, today).ok_or_else(|| {
                ApiError::bad_field(
                    "period",
                    format!(
                        "{period:?} is not a period; use {} or custom",
                        PERIODS.join(", ")
                    ),
                )
            })?;
            if p.from.is_some() || p.to.is_some() {
                return Err(ApiError::bad_field(
                    "period",
                    format!(
                        "{period:?} sets from and to: give either, not both (or period=custom)"
                    ),
                ));
            }
            Some((first.to_string(), end.to_string()))
        }
    };
    let (from_given, to_given) = match &preset {
        Some((from, to)) => (Some(from.as_str()), Some(to.as_str())),
        None => (p.from.as_deref(), p.to.as_deref()),
    };
    let from_text = from_given.ok_or_else(|| {
        ApiError::bad_field(
            "from",
            "is required: a date, local time or instant (or a period)",
        )
    })?;
    let from = parse_time("from", from_text, &zone)?;
    let to = match to_given {
        Some(text) => parse_time("to", text, &zone)?,
        None => {
            let now = state.clock.now();
            // A date is read in the report's zone, where today may not have begun yet.
            if now <= from {
                return Err(ApiError::bad_field(
                    "from",
                    format!(
                        "{from_text:?} in {zone_name} begins at {from}, after now (to defaults to now)"
                    ),
                ));
            }
            now
        }
    };
    if to <= from {
        return Err(ApiError::bad_field("to", "must be after from"));
    }
    let days = (to.as_second() - from.as_second()) / 86_400;
    if days > max_days(granularity) {
        return Err(ApiError::bad_field(
            "to",
            format!(
                "the range is {days} days; {} granularity allows at most {}",
                granularity.as_str(),
                max_days(granularity)
            ),
        ));
    }
    let spec = ReportSpec {
        granularity,
        zone,
        from,
        to,
        group_by: p.group_by.clone(),
        line_items: scope.line_items.clone(),
        placements: scope.placements.clone(),
        countries: p.countries.clone(),
        regions: p.regions.clone(),
        devices: p.devices.clone(),
    };
    let report = run(state, &spec, &dims).await?;
    // The period right before, as long as the one the report covers, with the same buckets.
    let previous = if p.compare {
        let (from, to) = spec.covered();
        let spec = ReportSpec {
            from: from - to.duration_since(from),
            to: from,
            ..spec.clone()
        };
        let report = run(state, &spec, &dims).await?;
        Some(Previous::new(&spec, report))
    } else {
        None
    };
    let currency = scope
        .advertiser
        .and_then(|a| dims.advertiser(a))
        .map(|a| a.currency.clone());
    Ok(BuiltReport {
        spec,
        zone_name,
        currency,
        report,
        programmatic: Arc::clone(&state.programmatic),
        dims,
        principal: *principal,
        previous,
    })
}

/// Reads and shapes one report, refusing one over the row limit.
async fn run(
    state: &ReportsState,
    spec: &ReportSpec,
    dims: &Dimensions,
) -> Result<Report, ApiError> {
    let limit = stored_row_limit(spec, dims, state.max_rows);
    let rows = state
        .store
        .report_rows_at_most(spec.row_query(), limit)
        .await?;
    if limit.is_some_and(|limit| rows.len() >= limit) {
        return Err(too_many_rows(state.max_rows));
    }
    let sketches = match spec.sketch_days(dims) {
        Some((first, last)) if spec.users_countable() => {
            state
                .store
                .sketches(spec.line_items.clone(), first, last)
                .await?
        }
        _ => Vec::new(),
    };
    let report = spec.shape(dims, &rows, &sketches);
    if report.rows.len() > state.max_rows {
        return Err(too_many_rows(state.max_rows));
    }
    Ok(report)
}

/// Where a row sits in its period: its bucket's number from the period's start (days for a day
/// report, counted in its zone) and its dimensions' values. A row and the previous period's row
/// in the same place are compared.
type Place = (i64, Vec<DimValue>);

fn place(spec: &ReportSpec, row: &ReportRow) -> Place {
    let (from, _) = spec.covered();
    let ordinal = match spec.granularity {
        Granularity::Day => {
            let first = from.to_zoned(spec.zone.clone()).date();
            row.start.date().duration_since(first).as_secs() / 86_400
        }
        Granularity::Hour => row.start.timestamp().duration_since(from).as_secs() / 3_600,
        Granularity::Minute => row.start.timestamp().duration_since(from).as_secs() / 60,
    };
    (ordinal, row.values.clone())
}

/// The same report over the period of the same length right before.
#[derive(Debug, Clone)]
pub struct Previous {
    pub spec: ReportSpec,
    pub report: Report,
    /// Row indexes by place.
    places: HashMap<Place, usize>,
}

impl Previous {
    fn new(spec: &ReportSpec, report: Report) -> Previous {
        let places = report
            .rows
            .iter()
            .enumerate()
            .map(|(index, row)| (place(spec, row), index))
            .collect();
        Previous {
            spec: spec.clone(),
            report,
            places,
        }
    }
}

/// The names a report's filters offer a caller (for a form's suggestions), each list sorted and
/// without repeats: every advertiser, line item and placement for an admin; a tenant's own
/// only, as [`may_name`] decides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterNames {
    pub advertisers: Vec<String>,
    pub line_items: Vec<String>,
    pub placements: Vec<String>,
}

/// The filter names `principal` may be offered, from the cached catalog view.
pub async fn filter_names(
    state: &ReportsState,
    principal: &Principal,
) -> Result<FilterNames, ApiError> {
    let dims = state.dimensions().await?;
    let names = |dimension: Dimension| {
        let mut names: Vec<String> = dims
            .names(dimension)
            .into_iter()
            .filter(|&(id, _)| may_name(principal, &dims, dimension, id))
            .map(|(_, name)| name.to_owned())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    Ok(FilterNames {
        advertisers: names(Dimension::Advertiser),
        line_items: names(Dimension::LineItem),
        placements: names(Dimension::Placement),
    })
}

/// How many stored rows to read at most: one more than a report of `max_rows` rows can be
/// made of, so that reaching it proves the report too large before it is shaped (and before
/// the whole range is loaded). `None`: no bound is known; the report is read whole and
/// checked once shaped.
fn stored_row_limit(spec: &ReportSpec, dims: &Dimensions, max_rows: usize) -> Option<usize> {
    spec.stored_rows_per_row(dims)?
        .checked_mul(max_rows)?
        .checked_add(1)
}

fn too_many_rows(max_rows: usize) -> ApiError {
    ApiError::bad_field(
        "granularity",
        format!(
            "the report has more than the {max_rows} rows allowed; narrow the range, use a coarser granularity or group by fewer dimensions"
        ),
    )
}

/// Spend in currency units with six decimals, from integer micros.
fn spend(micros: i64) -> String {
    marquee_model::Micros(micros).to_string()
}

/// A row's or the totals' metrics; `spend_micros` and `revenue_micros` are the row's shares
/// of the total spend and programmatic revenue (rows add up to the totals), or the totals' own.
fn metrics(
    counters: &Counters,
    spend_micros: i64,
    revenue_micros: i64,
    unique_users: Option<u64>,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("requests".into(), json!(counters.requests()));
    m.insert("decisions".into(), json!(counters.decisions));
    m.insert("bids".into(), json!(counters.bids));
    m.insert("wins".into(), json!(counters.wins));
    m.insert("billings".into(), json!(counters.billings));
    m.insert("impressions".into(), json!(counters.impressions));
    m.insert("clicks".into(), json!(counters.clicks));
    m.insert("ctr".into(), json!(counters.ctr()));
    m.insert("conversions".into(), json!(counters.conversions));
    m.insert("spend_micros".into(), json!(spend_micros));
    m.insert("spend".into(), json!(spend(spend_micros)));
    m.insert("unique_users".into(), json!(unique_users));
    m.insert(
        "invalid_impressions".into(),
        json!(counters.invalid_impressions),
    );
    m.insert("invalid_clicks".into(), json!(counters.invalid_clicks));
    m.insert(
        "invalid_conversions".into(),
        json!(counters.invalid_conversions),
    );
    let by_reason: Map<String, Value> = counters
        .invalid_by_reason()
        .into_iter()
        .map(|(reason, count)| (reason.label().to_owned(), json!(count)))
        .collect();
    m.insert("invalid_by_reason".into(), Value::Object(by_reason));
    m.insert("ad_requests".into(), json!(counters.ad_requests()));
    m.insert("fill_rate".into(), json!(counters.fill_rate()));
    for (name, value) in programmatic_counts(counters) {
        m.insert(name.into(), json!(value));
    }
    m.insert("programmatic_revenue_micros".into(), json!(revenue_micros));
    m.insert("programmatic_revenue".into(), json!(spend(revenue_micros)));
    m
}

/// The programmatic counts of a row, named as in the answer, in CSV column order.
fn programmatic_counts(c: &Counters) -> [(&'static str, i64); 7] {
    [
        ("programmatic_auctions", c.programmatic_auctions),
        ("programmatic_requests", c.programmatic_requests),
        ("programmatic_bids", c.programmatic_bids),
        ("programmatic_timeouts", c.programmatic_timeouts),
        ("programmatic_wins", c.programmatic_wins),
        ("programmatic_direct_wins", c.programmatic_direct_wins),
        ("programmatic_impressions", c.programmatic_impressions),
    ]
}

fn dim_value(value: &DimValue) -> Value {
    match value {
        DimValue::Id(id) => json!(id),
        DimValue::Text(text) => json!(text),
        DimValue::Country(code) | DimValue::Region(code) => json!(code),
    }
}

fn json_report(built: &BuiltReport) -> axum::Json<Value> {
    let (spec, report) = (&built.spec, &built.report);
    let local = |t: Timestamp| {
        t.to_zoned(spec.zone.clone())
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
    };
    let rows: Vec<Value> = report
        .rows
        .iter()
        .map(|row| {
            let mut object = Map::new();
            object.insert("time".into(), json!(local(row.start.timestamp())));
            for (&dimension, value) in spec.group_by.iter().zip(&row.values) {
                object.insert(dimension.as_str().into(), dim_value(value));
                if has_names(dimension) {
                    let name = built.name(dimension, value);
                    object.insert(format!("{}_name", dimension.as_str()), json!(name));
                }
            }
            let now = metrics(
                &row.counters,
                row.spend_micros,
                row.revenue_micros,
                row.unique_users,
            );
            if built.previous.is_some() {
                // A row the previous period did not have compares with nothing: zeros.
                let before = built.previous_row(row).map_or_else(
                    || metrics(&Counters::default(), 0, 0, None),
                    |b| {
                        metrics(
                            &b.counters,
                            b.spend_micros,
                            b.revenue_micros,
                            b.unique_users,
                        )
                    },
                );
                object.insert("change".into(), Value::Object(changes(&now, &before)));
                object.insert("previous".into(), Value::Object(before));
            }
            object.extend(now);
            Value::Object(object)
        })
        .collect();
    // The range the rows cover: the stored buckets that start in [from, to).
    let (from, to) = spec.covered();
    let totals = metrics(
        &report.totals,
        report.totals.spend_micros(),
        report.totals.programmatic_revenue_micros(),
        report.unique_users,
    );
    let previous = built.previous.as_ref().map(|previous| {
        let (from, to) = previous.spec.covered();
        let r = &previous.report;
        let totals = metrics(
            &r.totals,
            r.totals.spend_micros(),
            r.totals.programmatic_revenue_micros(),
            r.unique_users,
        );
        json!({ "from": local(from), "to": local(to), "totals": totals })
    });
    let change = previous
        .as_ref()
        .and_then(|p| p["totals"].as_object())
        .map(|before| changes(&totals, before));
    let mut answer = json!({
        "time_zone": built.zone_name,
        "granularity": spec.granularity.as_str(),
        "from": local(from),
        "to": local(to),
        "group_by": spec.group_by.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
        "currency": built.currency,
        "programmatic_currency": built.programmatic.currency().map(|c| c.as_str().to_owned()),
        "rows": rows,
        "totals": totals,
    });
    if let (Some(object), Some(previous), Some(change)) = (answer.as_object_mut(), previous, change)
    {
        object.insert("previous".into(), previous);
        object.insert("change".into(), Value::Object(change));
    }
    axum::Json(answer)
}

/// Each numeric metric's change in % from `before` to `now`; null where `before` was zero or
/// either is unknown. Money compares in micros (`spend_micros`, not `spend`).
fn changes(now: &Map<String, Value>, before: &Map<String, Value>) -> Map<String, Value> {
    now.iter()
        .filter(|(_, value)| value.is_number() || value.is_null())
        .filter(|(key, _)| {
            before
                .get(*key)
                .is_some_and(|v| v.is_number() || v.is_null())
        })
        .map(|(key, value)| {
            let change = change_percent(value.as_f64(), before.get(key).and_then(Value::as_f64));
            (key.clone(), json!(change))
        })
        .collect()
}

/// One metric of a CSV line: its column, its text, and its value as a number where it has one
/// (what a change in % is taken of).
struct CsvCell {
    column: String,
    text: String,
    number: Option<f64>,
}

/// A row's or the totals' metrics as CSV cells, in column order.
fn csv_metrics(
    c: &Counters,
    spend_micros: i64,
    revenue_micros: i64,
    unique_users: Option<u64>,
) -> Vec<CsvCell> {
    let count = |column: &str, value: i64| CsvCell {
        column: column.to_owned(),
        text: value.to_string(),
        number: Some(value as f64),
    };
    let ratio = |column: &str, value: Option<f64>| CsvCell {
        column: column.to_owned(),
        text: value.map_or(String::new(), |v| format!("{v:.6}")),
        number: value,
    };
    let money = |column: &str, micros: i64| CsvCell {
        column: column.to_owned(),
        text: spend(micros),
        number: Some(micros as f64),
    };
    let mut cells = vec![
        count("requests", c.requests()),
        count("decisions", c.decisions),
        count("bids", c.bids),
        count("wins", c.wins),
        count("billings", c.billings),
        count("impressions", c.impressions),
        count("clicks", c.clicks),
        ratio("ctr", c.ctr()),
        count("conversions", c.conversions),
        money("spend", spend_micros),
        CsvCell {
            column: "unique_users".into(),
            text: unique_users.map_or(String::new(), |u| u.to_string()),
            number: unique_users.map(|u| u as f64),
        },
        count("invalid_impressions", c.invalid_impressions),
        count("invalid_clicks", c.invalid_clicks),
        count("invalid_conversions", c.invalid_conversions),
    ];
    for (reason, value) in c.invalid_by_reason() {
        cells.push(count(&format!("invalid_{}", reason.label()), value));
    }
    cells.push(count("ad_requests", c.ad_requests()));
    cells.push(ratio("fill_rate", c.fill_rate()));
    for (name, value) in programmatic_counts(c) {
        cells.push(count(name, value));
    }
    cells.push(money("programmatic_revenue", revenue_micros));
    cells
}

/// The change from `previous` to `now` in %, when there was something before.
fn change_percent(now: Option<f64>, previous: Option<f64>) -> Option<f64> {
    match (now, previous) {
        (Some(now), Some(previous)) if previous != 0.0 => Some((now - previous) / previous * 100.0),
        _ => None,
    }
}

/// Appends a line's metric cells, and when comparing, the previous period's and the changes.
fn write_metrics(out: &mut String, cells: &[CsvCell], previous: Option<&[CsvCell]>) {
    for cell in cells {
        let _ = write!(out, ",{}", cell.text);
    }
    if let Some(previous) = previous {
        for cell in previous {
            let _ = write!(out, ",{}", cell.text);
        }
        for (now, before) in cells.iter().zip(previous) {
            let change = change_percent(now.number, before.number);
            let _ = write!(
                out,
                ",{}",
                change.map_or(String::new(), |c| format!("{c:.2}"))
            );
        }
    }
}

fn csv_report(built: &BuiltReport) -> String {
    let (spec, report) = (&built.spec, &built.report);
    let mut out = String::from("time");
    for &dimension in &spec.group_by {
        out.push(',');
        out.push_str(dimension.as_str());
        if has_names(dimension) {
            let _ = write!(out, ",{}_name", dimension.as_str());
        }
    }
    let columns = csv_metrics(&Counters::default(), 0, 0, None);
    for cell in &columns {
        let _ = write!(out, ",{}", cell.column);
    }
    if built.previous.is_some() {
        for cell in &columns {
            let _ = write!(out, ",previous_{}", cell.column);
        }
        for cell in &columns {
            let _ = write!(out, ",change_{}_percent", cell.column);
        }
    }
    out.push('\n');
    for row in &report.rows {
        let _ = write!(out, "{}", row.start.strftime("%Y-%m-%dT%H:%M:%S%:z"));
        for (&dimension, value) in spec.group_by.iter().zip(&row.values) {
            // Ids, country and region codes and device names (letters, digits, `-` and `_`):
            // never a comma or a quote. Names are people's text: quoted.
            match value {
                DimValue::Id(id) => {
                    let name = built.name(dimension, value).unwrap_or_default();
                    let _ = write!(out, ",{id},{}", csv_text(name));
                }
                DimValue::Text(text) => {
                    let _ = write!(out, ",{text}");
                }
                DimValue::Country(code) | DimValue::Region(code) => {
                    let _ = write!(out, ",{code}");
                }
            }
        }
        let cells = csv_metrics(
            &row.counters,
            row.spend_micros,
            row.revenue_micros,
            row.unique_users,
        );
        // A row the previous period did not have compares with nothing: zeros.
        let previous = built.previous.as_ref().map(|_| {
            built.previous_row(row).map_or_else(
                || csv_metrics(&Counters::default(), 0, 0, None),
                |before| {
                    csv_metrics(
                        &before.counters,
                        before.spend_micros,
                        before.revenue_micros,
                        before.unique_users,
                    )
                },
            )
        });
        write_metrics(&mut out, &cells, previous.as_deref());
        out.push('\n');
    }
    out
}

/// A text field of a CSV file: quoted when it holds a comma, a quote or a line break (RFC
/// 4180), and led by `'` when it starts as a formula would (`=`, `+`, `-`, `@`, a tab or a
/// carriage return), so that a spreadsheet opening the file shows a name rather than running
/// it.
fn csv_text(text: &str) -> String {
    let guarded = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if guarded.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

/// The OpenAPI operation of `GET /api/v1/reports`.
pub fn operation_doc() -> Value {
    let param = |name: &str, description: &str, schema: Value| json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema });
    let text = json!({ "type": "string" });
    let invalid_reasons: Map<String, Value> = InvalidReason::ALL
        .into_iter()
        .map(|reason| (reason.label().to_owned(), json!({ "type": "integer" })))
        .collect();
    let metric_properties = json!({
        "requests": { "type": "integer", "description": "decisions + bids + no-bids" },
        "decisions": { "type": "integer" },
        "bids": { "type": "integer" },
        "wins": { "type": "integer" },
        "billings": { "type": "integer" },
        "impressions": { "type": "integer" },
        "clicks": { "type": "integer" },
        "ctr": { "type": "number", "nullable": true, "description": "clicks per impression" },
        "conversions": { "type": "integer" },
        "spend_micros": { "type": "integer", "description": "a row's exact spend rounded to the micro, down or up, so that rows add up to the totals" },
        "spend": { "type": "string", "description": "spend in currency units, six decimals" },
        "unique_users": { "type": "integer", "nullable": true, "description": "HyperLogLog estimate; day rows grouped by nothing finer than line item in the zone the sketches were kept in (the advertiser's), and totals" },
        "invalid_impressions": { "type": "integer", "description": "impressions judged invalid traffic: never in impressions, spend, pacing or caps" },
        "invalid_clicks": { "type": "integer", "description": "clicks judged invalid traffic: never in clicks, ctr or spend" },
        "invalid_conversions": { "type": "integer", "description": "conversions judged invalid traffic: never in conversions" },
        "invalid_by_reason": {
            "type": "object",
            "description": "invalid impressions, clicks and conversions together, by reason; every reason is listed",
            "properties": invalid_reasons,
            "required": InvalidReason::ALL.map(InvalidReason::label)
        },
        "ad_requests": { "type": "integer", "description": "ad requests of placements with programmatic demand: decisions + programmatic auctions the direct line item did not win (an ad request that fills nothing without an auction is not logged)" },
        "fill_rate": { "type": "number", "nullable": true, "description": "(decisions + programmatic wins) / ad_requests; null on a row without programmatic auctions" },
        "programmatic_auctions": { "type": "integer", "description": "unified auctions of ad requests among the gateway's bidders (grouped by bidder: on the first bidder called)" },
        "programmatic_requests": { "type": "integer", "description": "bid requests sent: one per bidder called per auction" },
        "programmatic_bids": { "type": "integer", "description": "bids received" },
        "programmatic_timeouts": { "type": "integer", "description": "bidders that did not answer in the placement's timeout" },
        "programmatic_wins": { "type": "integer", "description": "auctions a bid won (its markup served)" },
        "programmatic_direct_wins": { "type": "integer", "description": "auctions the direct line item won" },
        "programmatic_impressions": { "type": "integer", "description": "winning bids' impressions counted" },
        "programmatic_revenue_micros": { "type": "integer", "description": "the publisher's revenue (bids net of the revenue share) in micros of programmatic_currency; rows add up to the totals" },
        "programmatic_revenue": { "type": "string", "description": "programmatic revenue in currency units, six decimals" }
    });
    let change_properties = json!({
        "type": "object",
        "description": "with compare=previous: each numeric metric's change in % from the previous period; null where that was zero (money as spend_micros and programmatic_revenue_micros)",
        "additionalProperties": { "type": "number", "nullable": true }
    });
    let previous_metrics = json!({
        "type": "object",
        "description": "with compare=previous: the metrics of the same place in the previous period (the same bucket number from its start and the same dimension values; zeros where it had no row)",
        "properties": metric_properties.clone()
    });
    let mut row_properties = metric_properties.clone();
    if let Some(properties) = row_properties.as_object_mut() {
        properties.insert("previous".into(), previous_metrics);
        properties.insert("change".into(), change_properties.clone());
    }
    if let Some(properties) = row_properties.as_object_mut() {
        for dimension in Dimension::ALL.into_iter().filter(|&d| has_names(d)) {
            let description = if dimension == Dimension::Bidder {
                "with group_by=bidder: the bidder's name, null for direct delivery (bidder 0) or a bidder no longer configured".to_owned()
            } else {
                format!(
                    "with group_by={0}: the {1}'s name beside its id; null where the caller may not read it (an advertiser's rows by site, placement or publisher)",
                    dimension.as_str(),
                    dimension.as_str().replace('_', " ")
                )
            };
            properties.insert(
                format!("{}_name", dimension.as_str()),
                json!({ "type": "string", "nullable": true, "description": description }),
            );
        }
    }
    operation(
        "Delivery report: metrics by time and dimensions, in the advertiser's time zone".into(),
        "reports",
        vec![
            param(
                "from",
                "start (inclusive), required unless `period` names a preset: a local date `2026-12-01`, local time `2026-12-01T08:00`, or instant `2026-12-01T07:00:00Z`. The report holds the buckets (minutes, or hours for hour and day reports) that start in [from, to); the answer's `from` and `to` are the range they cover",
                text.clone(),
            ),
            param(
                "to",
                "end (exclusive), same forms; default now. The bucket in progress at `to` counts whole: the answer's `to` is the next bucket boundary",
                text.clone(),
            ),
            param(
                "period",
                "a date preset instead of `from` and `to`: whole local days in the report's zone, counted from the server's today there (today and this_month include today; last_7_days and last_30_days end yesterday); `custom` takes `from` and `to`",
                json!({ "type": "string", "enum": ["today", "yesterday", "last_7_days", "last_30_days", "this_month", "last_month", "custom"] }),
            ),
            param(
                "compare",
                "`previous`: also the period of the same length right before the one covered; each row and the totals gain `previous` (the metrics then) and `change` (each numeric metric's change in %); in CSV, `previous_<metric>` and `change_<metric>_percent` columns",
                json!({ "type": "string", "enum": ["previous", "none"], "default": "none" }),
            ),
            param(
                "granularity",
                "row width",
                json!({ "type": "string", "enum": ["minute", "hour", "day"], "default": "hour" }),
            ),
            param(
                "group_by",
                "comma-separated dimensions",
                json!({ "type": "string", "example": "line_item,country" }),
            ),
            param(
                "line_item",
                "only these line items: ids or names, comma-separated (a name matches whole, ignoring case, among the line items the caller may read; an unknown or ambiguous name is a 400 naming it)",
                text.clone(),
            ),
            param(
                "advertiser",
                "only this advertiser's line items (its time zone applies): its id or its name",
                json!({ "type": "string", "example": "Acme Travel" }),
            ),
            param(
                "placement",
                "only these placements: ids or names, comma-separated, as line_item",
                text.clone(),
            ),
            param(
                "country",
                "only these countries (comma-separated ISO codes, `unknown`)",
                text.clone(),
            ),
            param(
                "region",
                "only these regions (comma-separated ISO 3166-2 codes such as US-CA, `unknown`)",
                text.clone(),
            ),
            param(
                "device",
                "only these device types (desktop, phone, tablet, ctv, console, other, unknown)",
                text.clone(),
            ),
            param(
                "tz",
                "IANA time zone overriding the advertiser's (default UTC without one)",
                text,
            ),
            param(
                "format",
                "answer format",
                json!({ "type": "string", "enum": ["json", "csv"], "default": "json" }),
            ),
        ],
        None,
        responses([
            (
                200,
                json!({
                    "description": "the report",
                    "content": {
                        "application/json": { "schema": {
                            "type": "object",
                            "properties": {
                                "time_zone": { "type": "string" },
                                "granularity": { "type": "string" },
                                "from": { "type": "string", "description": "start of the range covered: the asked `from` moved forward to the next bucket boundary" },
                                "to": { "type": "string", "description": "end (exclusive) of the range covered: the asked `to` moved forward to the next bucket boundary" },
                                "group_by": { "type": "array", "items": { "type": "string" } },
                                "currency": { "type": "string", "nullable": true },
                                "programmatic_currency": { "type": "string", "nullable": true, "description": "the gateway's currency, programmatic revenue's; null without a gateway" },
                                "rows": { "type": "array", "items": { "type": "object", "properties": row_properties } },
                                "totals": { "type": "object", "properties": metric_properties.clone() },
                                "previous": {
                                    "type": "object",
                                    "description": "with compare=previous: the previous period covered and its totals",
                                    "properties": {
                                        "from": { "type": "string" },
                                        "to": { "type": "string" },
                                        "totals": { "type": "object", "properties": metric_properties }
                                    }
                                },
                                "change": change_properties
                            }
                        }},
                        "text/csv": { "schema": { "type": "string" } }
                    }
                }),
            ),
            (
                400,
                response(
                    "a parameter is missing or malformed, or a filter's name matches no object the caller may read or several (named in `fields`)",
                    schema_ref("Error"),
                ),
            ),
            (
                404,
                response(
                    "an advertiser, line item or placement not visible to this token",
                    schema_ref("Error"),
                ),
            ),
            (
                503,
                response(
                    "too many reports are running; try again after `Retry-After` seconds",
                    schema_ref("Error"),
                ),
            ),
        ]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit's heavy report: hours by creative, placement, country and device, which the
    /// store answers one stored row per report row. The query asks for one row past the limit
    /// and no more, so a report over it is refused after `max_rows + 1` rows, not all of them.
    #[test]
    fn the_store_reads_one_row_past_what_a_report_may_hold() {
        let spec = ReportSpec {
            granularity: Granularity::Hour,
            zone: TimeZone::UTC,
            from: "2016-12-01T00:00:00Z".parse().unwrap(),
            to: "2026-12-01T00:00:00Z".parse().unwrap(),
            group_by: vec![
                Dimension::Creative,
                Dimension::Placement,
                Dimension::Country,
                Dimension::Device,
            ],
            line_items: Some(vec![1, 2]),
            placements: None,
            countries: None,
            regions: None,
            devices: None,
        };
        let dims = Dimensions::builder().build();
        assert_eq!(stored_row_limit(&spec, &dims, 100_000), Some(100_001));
        // Local days from UTC hours: up to 25 hours fold into a day in Berlin.
        let days = ReportSpec {
            granularity: Granularity::Day,
            zone: TimeZone::get("Europe/Berlin").unwrap(),
            group_by: Vec::new(),
            ..spec
        };
        assert_eq!(stored_row_limit(&days, &dims, 10), Some(251));
    }
}
