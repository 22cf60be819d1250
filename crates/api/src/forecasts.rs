//! Forecasts (`docs/forecasting.md`): `POST /api/v1/forecasts` asks what a proposed line item
//! would get, `GET /api/v1/line-items/{id}/forecast` how a booked one is doing. The API reads
//! and checks the question; the manager's forecasting service ([`Forecasts`]) answers it, so
//! that this crate needs neither the snapshot compiler nor the forecast crate.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use jiff::Timestamp;
use marquee_model::{
    AdvertiserId, LineItem, LineItemId, ObjectKind, PlacementId, Principal, Violation,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::extract::{Body, Path};
use crate::objects::{ensure_access, parse_fields, parse_id};
use crate::read::read_object;
use crate::{ApiError, ApiState, ObjectWrite, check_currency};

/// Seconds in a UTC day: forecast ranges are whole days.
const DAY: i64 = 86_400;
/// The longest range a forecast covers, in days (the traffic model's horizon).
pub const MAX_RANGE_DAYS: i64 = 90;
/// Contending line items named in an answer at most, the largest first.
pub const MAX_CONTENDING: usize = 20;

/// A proposed line item to forecast, read and checked as the create endpoint reads one.
#[derive(Debug, Clone)]
pub struct Proposal {
    pub line_item: LineItem,
    /// The booked line item an edit would replace: it does not contend with itself.
    pub replaces: Option<LineItemId>,
    /// The placements it would be linked to (none: every placement, as for a line item
    /// without links).
    pub placements: Vec<PlacementId>,
    pub range: Range,
}

/// Whole UTC days, `start` inclusive, `end` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Range {
    pub start: Timestamp,
    pub end: Timestamp,
}

impl Range {
    /// `start..end` widened to whole UTC days, starting no earlier than `today`'s start (the
    /// past is not forecast), so that questions over the same days share the service's
    /// cached allocation.
    pub fn whole_days(start: Timestamp, end: Timestamp, now: Timestamp) -> Result<Range, String> {
        let today = now.as_second().div_euclid(DAY);
        let first = start.as_second().div_euclid(DAY).max(today);
        let last = (end.as_second() + DAY - 1).div_euclid(DAY);
        if last <= first {
            return Err("the range must end after today and after its start".into());
        }
        if last - first > MAX_RANGE_DAYS {
            return Err(format!("the range may span at most {MAX_RANGE_DAYS} days"));
        }
        let at = |day: i64| Timestamp::from_second(day * DAY).map_err(|e| e.to_string());
        Ok(Range {
            start: at(first)?,
            end: at(last)?,
        })
    }

    /// The `days` whole UTC days from `now`'s.
    pub fn days_from(now: Timestamp, days: i64) -> Range {
        let today = now.as_second().div_euclid(DAY);
        let at = |day: i64| Timestamp::from_second(day * DAY).unwrap_or(Timestamp::UNIX_EPOCH);
        Range {
            start: at(today),
            end: at(today + days),
        }
    }
}

/// What the service answers when it has something to say.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    Ready(T),
    /// Fewer whole days of sampled traffic are stored than a forecast needs.
    NotEnoughSample {
        days: usize,
        needed: usize,
    },
    /// No snapshot is published yet, or the forecaster for the latest one is still being
    /// built.
    NotReady,
    /// The line item is not in the published snapshot (paused, archived, ended, or under a
    /// paused campaign): nothing is booked to forecast.
    NotServing,
}

/// A proposed line item's availability, in impressions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Availability {
    pub matching: u64,
    pub available: u64,
    /// Its goal over the range in impressions (`None` without a goal).
    pub requested: Option<u64>,
    /// The chance that what is available reaches the goal.
    pub probability: Option<f64>,
    pub daily: Vec<DailyForecast>,
    /// The booked line items that take impressions it matches, most first (at most
    /// [`MAX_CONTENDING`]).
    pub contending: Vec<Contending>,
    /// Whole days of sampled traffic the forecast was fitted to.
    pub sample_days: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DailyForecast {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    pub matching: u64,
    pub available: u64,
    /// The range's goal spread evenly over the days it matches anything.
    pub requested: Option<u64>,
}

/// A booked line item contending for the same impressions; the service names it, the API
/// hides what the caller may not see.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contending {
    pub line_item_id: Option<u64>,
    pub name: Option<String>,
    #[serde(skip)]
    pub advertiser: AdvertiserId,
    /// Whether it belongs to another advertiser than the caller's (then unnamed).
    pub other_advertiser: bool,
    pub impressions: u64,
}

/// A booked line item's outlook, in impressions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// `on_track`, `at_risk` or `shortfall`.
    pub status: &'static str,
    pub goal: Option<u64>,
    pub expected: u64,
    pub shortfall: u64,
    pub probability: Option<f64>,
    /// What it delivered in its goal's metric before the range (lifetime goals only).
    pub delivered: Option<u64>,
    pub availability: Availability,
}

/// Why the service could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ForecastFailure {
    /// The proposal breaks a rule the snapshot compiler applies (422).
    #[error("{0}")]
    Invalid(marquee_model::ValidationError),
    #[error("forecast failed: {0}")]
    Internal(String),
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The forecasting service behind the endpoints (the manager's `ForecastService`).
pub trait Forecasts: Send + Sync + std::fmt::Debug {
    /// When "now" is, for ranges.
    fn now(&self) -> Timestamp;
    fn availability(
        &self,
        proposal: Proposal,
    ) -> BoxFuture<'_, Result<Outcome<Availability>, ForecastFailure>>;
    /// The outlook of a booked line item over the service's standard range.
    fn delivery(
        &self,
        line_item: LineItemId,
    ) -> BoxFuture<'_, Result<(Range, Outcome<Delivery>), ForecastFailure>>;
}

/// The handlers' state: the API's and the forecasting service.
#[derive(Debug, Clone)]
pub struct ForecastsState {
    pub api: ApiState,
    pub service: Arc<dyn Forecasts>,
}

impl crate::HasStore for ForecastsState {
    fn store(&self) -> &Arc<dyn marquee_store::Store> {
        &self.api.store
    }
}

/// Reads a proposal's body: the line item as the create endpoint takes it (whose `start` and
/// `end` are its flight), plus the range `from` and `to`, `placements` and, for an edit, `line_item_id`. Every unreadable field is reported
/// at once, as the create endpoint does.
pub async fn read_proposal(
    state: &ApiState,
    principal: &Principal,
    mut fields: Map<String, Value>,
    now: Timestamp,
) -> Result<Proposal, ApiError> {
    let mut problems = Vec::new();
    let mut instant = |name: &str, fields: &mut Map<String, Value>| match fields.remove(name) {
        Some(Value::String(text)) => match text.parse::<Timestamp>() {
            Ok(at) => Some(at),
            Err(_) => {
                problems.push(violation(
                    name,
                    "must be an RFC 3339 instant, e.g. 2026-12-01T00:00:00Z",
                ));
                None
            }
        },
        Some(_) => {
            problems.push(violation(name, "must be an RFC 3339 instant"));
            None
        }
        None => {
            problems.push(violation(name, "is required"));
            None
        }
    };
    let start = instant("from", &mut fields);
    let end = instant("to", &mut fields);
    let placements = match fields.remove("placements") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .enumerate()
            .filter_map(|(i, id)| match id.as_u64().filter(|&id| id > 0) {
                Some(id) => Some(PlacementId(id)),
                None => {
                    problems.push(violation(
                        &format!("placements[{i}]"),
                        "must be a positive integer id",
                    ));
                    None
                }
            })
            .collect(),
        Some(_) => {
            problems.push(violation("placements", "must be a list of placement ids"));
            Vec::new()
        }
    };
    let replaces = match fields.remove("line_item_id") {
        None | Some(Value::Null) => None,
        Some(id) => match id.as_u64().filter(|&id| id > 0) {
            Some(id) => Some(LineItemId(id)),
            None => {
                problems.push(violation("line_item_id", "must be a positive integer id"));
                None
            }
        },
    };
    let range = match (start, end) {
        (Some(start), Some(end)) => match Range::whole_days(start, end, now) {
            Ok(range) => Some(range),
            Err(message) => {
                problems.push(violation("to", &message));
                None
            }
        },
        _ => None,
    };
    // Problems found here are reported with the line item's own, all at once.
    let line_item: LineItem = read_object(Value::Object(fields), None, problems)?;
    let Some(range) = range else {
        return Err(ApiError::Internal(
            "a range that could not be read was not reported".into(),
        ));
    };
    // A forecast writes nothing, but the campaign must be the caller's, as for a create, and
    // its amounts are in the campaign's currency.
    must_exist(
        state,
        ObjectKind::Campaign,
        line_item.campaign_id.0,
        principal.scope(),
        "campaign_id",
    )
    .await?;
    check_currency(
        &*state.store,
        &line_item,
        ObjectWrite::Create,
        principal.scope(),
    )
    .await?;
    if let Some(id) = replaces {
        state
            .store
            .get(ObjectKind::LineItem, id.0, principal.scope())
            .await?;
    }
    for (i, placement) in placements.iter().enumerate() {
        // Placements are the publisher's: any caller may name them, as a link does.
        must_exist(
            state,
            ObjectKind::Placement,
            placement.0,
            None,
            &format!("placements[{i}]"),
        )
        .await?;
    }
    Ok(Proposal {
        line_item,
        replaces,
        placements,
        range,
    })
}

/// A missing object named by a field is a broken rule of that field (`422`), as a create's
/// missing parent is; it tells nothing about objects outside `scope`.
async fn must_exist(
    state: &ApiState,
    kind: ObjectKind,
    id: u64,
    scope: Option<u64>,
    field: &str,
) -> Result<(), ApiError> {
    match state.store.get(kind, id, scope).await {
        Ok(_) => Ok(()),
        Err(error @ marquee_store::StoreError::NotFound { .. }) => Err(ApiError::Invalid(
            marquee_model::ValidationError::single(field, error.to_string()),
        )),
        Err(other) => Err(other.into()),
    }
}

fn violation(path: &str, message: &str) -> Violation {
    Violation {
        path: path.into(),
        message: message.into(),
    }
}

/// Hides the contending line items of other advertisers from a tenant: an advertiser sees
/// how much they take, not who they are.
pub fn for_caller(mut availability: Availability, principal: &Principal) -> Availability {
    if let Some(owner) = principal.scope() {
        for contender in &mut availability.contending {
            if contender.advertiser.0 != owner {
                contender.line_item_id = None;
                contender.name = None;
                contender.other_advertiser = true;
            }
        }
    }
    availability
}

/// The JSON of an outcome: `status` and, unless ready, a `message` saying why.
fn outcome_body<T>(outcome: Outcome<T>, ready: impl FnOnce(T) -> Value) -> Value {
    match outcome {
        Outcome::Ready(answer) => ready(answer),
        Outcome::NotEnoughSample { days, needed } => json!({
            "status": "not_enough_sample",
            "message": format!(
                "forecasts need {needed} whole days of sampled traffic; {days} stored so far \
                 (the edges sample ad requests as they serve them: check again in {} days)",
                needed.saturating_sub(days)
            ),
            "sample_days": days,
            "sample_days_needed": needed,
        }),
        Outcome::NotReady => json!({
            "status": "not_ready",
            "message": "the forecaster for the latest snapshot is being built; ask again in a minute",
        }),
        Outcome::NotServing => json!({
            "status": "not_serving",
            "message": "the line item is not serving now (paused, archived, ended, or under a paused campaign): nothing is booked to forecast",
        }),
    }
}

fn range_fields(body: &mut Value, range: Range) {
    body["from"] = range.start.to_string().into();
    body["to"] = range.end.to_string().into();
}

fn failure(error: ForecastFailure) -> ApiError {
    match error {
        ForecastFailure::Invalid(error) => ApiError::Invalid(error),
        ForecastFailure::Internal(message) => ApiError::Internal(message),
    }
}

/// `POST /api/v1/forecasts`.
pub(crate) async fn propose(
    State(state): State<ForecastsState>,
    crate::Caller(principal): crate::Caller,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    let ForecastsState { api, service } = &state;
    ensure_access(&principal, ObjectKind::LineItem)?;
    let fields = parse_fields(&headers, &body as &Bytes)?;
    let proposal = read_proposal(api, &principal, fields, service.now()).await?;
    let range = proposal.range;
    let outcome = service.availability(proposal).await.map_err(failure)?;
    let mut body = outcome_body(outcome, |answer| {
        let mut body = serde_json::to_value(for_caller(answer, &principal)).unwrap_or_default();
        body["status"] = "ok".into();
        body
    });
    range_fields(&mut body, range);
    Ok(Json(body))
}

/// `GET /api/v1/line-items/{id}/forecast`.
pub(crate) async fn delivery(
    State(state): State<ForecastsState>,
    crate::Caller(principal): crate::Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let ForecastsState { api, service } = &state;
    ensure_access(&principal, ObjectKind::LineItem)?;
    let id = parse_id(&id)?;
    api.store
        .get(ObjectKind::LineItem, id, principal.scope())
        .await?;
    let (range, outcome) = service.delivery(LineItemId(id)).await.map_err(failure)?;
    let mut body = outcome_body(outcome, |mut answer| {
        answer.availability = for_caller(answer.availability, &principal);
        serde_json::to_value(answer).unwrap_or_default()
    });
    body["line_item_id"] = id.into();
    range_fields(&mut body, range);
    Ok(Json(body))
}
