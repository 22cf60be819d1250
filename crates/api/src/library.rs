//! The creative library, copying line items and bulk status changes.
//!
//! - A line item's creative assignments: `GET /api/v1/line-items/{id}/creatives`,
//!   `PUT` and `DELETE /api/v1/line-items/{id}/creatives/{creative_id}` (`{weight, start, end}`),
//!   and the other side, `GET /api/v1/creatives/{id}/line-items`. A line item may use only its
//!   own advertiser's creatives; the store refuses another's.
//! - `POST /api/v1/line-items/{id}/copy` (`{name}` optional): a paused copy in the same
//!   campaign sharing the original's placements and creatives.
//! - `POST /api/v1/{collection}/bulk` (`{action, ids}`): pause, resume or archive several
//!   objects, each on its own (not all or nothing), answered per id. [`apply_bulk`] is shared
//!   with the dashboard's lists.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use marquee_model::{
    CreativeAssignment, CreativeId, LineItem, LineItemId, Object, ObjectKind, Principal, Status,
};
use marquee_store::{Actor, Draft, Store, StoreError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::extract::{Body, Path};
use crate::objects::{ensure_access, ensure_visible, parse_fields, parse_id, resource};
use crate::openapi::{error_response, id_parameter, operation, response, responses, schema_ref};
use crate::{ApiError, ApiState, Caller, Change, check_write};

/// Most ids one bulk request names.
pub const MAX_BULK_IDS: usize = 200;

/// Weight of an assignment that names none: the creative weight's default.
const DEFAULT_WEIGHT: u32 = 100;

/// The JSON of an assignment, times in RFC 3339 (`null` for an open end).
fn assignment_json(a: &CreativeAssignment) -> Value {
    json!({
        "line_item_id": a.line_item_id.0,
        "creative_id": a.creative_id.0,
        "weight": a.weight,
        "start": a.start.map(|t| t.to_string()),
        "end": a.end.map(|t| t.to_string()),
    })
}

fn ensure_line_item_write(principal: &Principal) -> Result<(), ApiError> {
    ensure_access(principal, ObjectKind::LineItem)?;
    check_write(principal, ObjectKind::LineItem, Change::Update)?;
    Ok(())
}

pub async fn list(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    ensure_access(&principal, ObjectKind::LineItem)?;
    let assignments = state
        .store
        .assignments_of(LineItemId(id), principal.scope())
        .await?;
    let items: Vec<Value> = assignments.iter().map(assignment_json).collect();
    Ok(Json(json!({ "line_item_id": id, "assignments": items })))
}

pub async fn uses(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    ensure_visible(&*state.store, &principal, ObjectKind::Creative, id).await?;
    let assignments = state
        .store
        .assignments_to(CreativeId(id), principal.scope())
        .await?;
    let items: Vec<Value> = assignments.iter().map(assignment_json).collect();
    Ok(Json(json!({ "creative_id": id, "assignments": items })))
}

/// The body of an assignment: its weight (default 100) and optional flight.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AssignmentBody {
    #[serde(default = "default_weight")]
    weight: u32,
    #[serde(default)]
    start: Option<Timestamp>,
    #[serde(default)]
    end: Option<Timestamp>,
}

fn default_weight() -> u32 {
    DEFAULT_WEIGHT
}

fn parse_creative_id(text: &str) -> Result<u64, ApiError> {
    text.parse::<u64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            ApiError::bad_field(
                "creative_id",
                format!("{text:?} is not a positive integer id"),
            )
        })
}

/// An empty body reads as `{}`: every field of an assignment has a default.
fn body_fields(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    Ok(Value::Object(parse_fields(headers, body)?))
}

pub async fn assign(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path((line_item, creative)): Path<(String, String)>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    ensure_line_item_write(&principal)?;
    let line_item = parse_id(&line_item)?;
    let creative = parse_creative_id(&creative)?;
    let body: AssignmentBody = serde_json::from_value(body_fields(&headers, &body)?)
        .map_err(|e| ApiError::bad_request(format!("body: {e}")))?;
    let assignment = CreativeAssignment {
        line_item_id: LineItemId(line_item),
        creative_id: CreativeId(creative),
        weight: body.weight,
        start: body.start,
        end: body.end,
    };
    assignment.validate()?;
    let created = state
        .store
        .assign(
            assignment.clone(),
            principal.scope(),
            &Actor::token(&principal),
        )
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut body = assignment_json(&assignment);
    body["created"] = created.into();
    Ok((status, Json(body)).into_response())
}

pub async fn unassign(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path((line_item, creative)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    ensure_line_item_write(&principal)?;
    let line_item = parse_id(&line_item)?;
    let creative = parse_creative_id(&creative)?;
    let removed = state
        .store
        .unassign(
            LineItemId(line_item),
            CreativeId(creative),
            principal.scope(),
            &Actor::token(&principal),
        )
        .await?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!(
            "line item {line_item} has no assignment of creative {creative}"
        )))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CopyBody {
    #[serde(default)]
    name: Option<String>,
}

pub async fn copy(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    ensure_access(&principal, ObjectKind::LineItem)?;
    check_write(&principal, ObjectKind::LineItem, Change::Create)?;
    let id = parse_id(&id)?;
    let body: CopyBody = serde_json::from_value(body_fields(&headers, &body)?)
        .map_err(|e| ApiError::bad_request(format!("body: {e}")))?;
    let stored = copy_line_item(
        &*state.store,
        LineItemId(id),
        body.name,
        principal.scope(),
        &Actor::token(&principal),
    )
    .await?;
    let location = format!("/api/v1/line-items/{}", stored.meta.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(resource(&stored)?),
    )
        .into_response())
}

/// Longest name a copy gets by default: the name rule's limit.
const MAX_NAME_CHARS: usize = 200;

/// Copies a line item (see `Store::copy_line_item`) named `name`, or "Copy of" the original's
/// name (cut to the name rule's length), after checking the name as any line item's. Shared
/// with the dashboard's Copy button.
pub async fn copy_line_item(
    store: &dyn Store,
    id: LineItemId,
    name: Option<String>,
    scope: Option<u64>,
    by: &Actor,
) -> Result<marquee_model::Stored<LineItem>, ApiError> {
    let mut original = store.get_object::<LineItem>(id.0, scope).await?.object;
    let name = name.unwrap_or_else(|| {
        format!("Copy of {}", original.name)
            .chars()
            .take(MAX_NAME_CHARS)
            .collect()
    });
    // The original passed every rule; only the name is new.
    original.name = name.clone();
    original.validate()?;
    let record = store.copy_line_item(id, Some(name), scope, by).await?;
    Ok(record.decode::<LineItem>()?)
}

/// What a bulk request does to each object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    Pause,
    Resume,
    Archive,
}

impl BulkAction {
    pub fn parse(text: &str) -> Option<BulkAction> {
        match text {
            "pause" => Some(BulkAction::Pause),
            "resume" => Some(BulkAction::Resume),
            "archive" => Some(BulkAction::Archive),
            _ => None,
        }
    }

    fn change(self) -> Change {
        match self {
            BulkAction::Archive => Change::Archive,
            BulkAction::Pause | BulkAction::Resume => Change::Update,
        }
    }
}

/// What happened to one object of a bulk request.
#[derive(Debug)]
pub enum BulkOutcome {
    /// Changed as asked.
    Done,
    /// Already as asked: nothing written.
    Unchanged,
    Failed(ApiError),
}

/// Applies `action` to each of `ids` of `kind` in `scope`, one change (and one audit entry)
/// each, in order: one failing leaves the others as they are. The caller checks the role first
/// (`check_write` with the action's change).
pub async fn apply_bulk(
    store: &dyn Store,
    kind: ObjectKind,
    action: BulkAction,
    ids: &[u64],
    scope: Option<u64>,
    by: &Actor,
) -> Vec<(u64, BulkOutcome)> {
    let mut outcomes = Vec::with_capacity(ids.len());
    for &id in ids {
        let outcome = match apply_one(store, kind, action, id, scope, by).await {
            Ok(true) => BulkOutcome::Done,
            Ok(false) => BulkOutcome::Unchanged,
            Err(e) => BulkOutcome::Failed(e),
        };
        outcomes.push((id, outcome));
    }
    outcomes
}

/// Whether anything changed.
async fn apply_one(
    store: &dyn Store,
    kind: ObjectKind,
    action: BulkAction,
    id: u64,
    scope: Option<u64>,
    by: &Actor,
) -> Result<bool, ApiError> {
    let record = store.get(kind, id, scope).await?;
    let target = match action {
        BulkAction::Archive => {
            if record.status == Status::Archived {
                return Ok(false);
            }
            store.archive(kind, id, scope, by).await?;
            return Ok(true);
        }
        BulkAction::Pause => Status::Paused,
        BulkAction::Resume => Status::Active,
    };
    if record.status == target {
        return Ok(false);
    }
    if record.status == Status::Archived {
        return Err(StoreError::Archived { kind, id }.into());
    }
    let mut body: Value = serde_json::from_str(&record.body)
        .map_err(|e| ApiError::Internal(format!("{} {id}: {e}", kind.name())))?;
    body["status"] = target.as_str().into();
    let draft = Draft {
        parent_id: record.parent_id,
        name: record.name.clone(),
        status: target,
        body: body.to_string(),
    };
    store
        .update(kind, id, record.meta.version, draft, scope, by)
        .await?;
    Ok(true)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkBody {
    action: BulkAction,
    ids: Vec<u64>,
}

pub async fn bulk<T: Object>(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    let kind = T::KIND;
    let body: BulkBody = serde_json::from_value(Value::Object(parse_fields(&headers, &body)?))
        .map_err(|e| ApiError::bad_request(format!("body: {e}")))?;
    ensure_access(&principal, kind)?;
    check_write(&principal, kind, body.action.change())?;
    let mut ids = body.ids;
    if ids.is_empty() || ids.len() > MAX_BULK_IDS {
        return Err(ApiError::bad_field(
            "ids",
            format!("must name 1 to {MAX_BULK_IDS} ids"),
        ));
    }
    if ids.contains(&0) {
        return Err(ApiError::bad_field("ids", "must be positive integers"));
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(*id));
    let outcomes = apply_bulk(
        &*state.store,
        kind,
        body.action,
        &ids,
        principal.scope(),
        &Actor::token(&principal),
    )
    .await;
    let results: Vec<Value> = outcomes
        .iter()
        .map(|(id, outcome)| match outcome {
            BulkOutcome::Done => json!({ "id": id, "result": "done" }),
            BulkOutcome::Unchanged => json!({ "id": id, "result": "unchanged" }),
            BulkOutcome::Failed(e) => json!({
                "id": id,
                "result": "error",
                "error": { "code": e.code(), "message": e.to_string() }
            }),
        })
        .collect();
    Ok(Json(json!({ "results": results })))
}

fn assignment_schema() -> Value {
    json!({ "type": "object", "properties": {
        "line_item_id": { "type": "integer" },
        "creative_id": { "type": "integer" },
        "weight": { "type": "integer", "minimum": 1, "maximum": 1000 },
        "start": { "type": "string", "format": "date-time", "nullable": true },
        "end": { "type": "string", "format": "date-time", "nullable": true }
    }})
}

pub fn list_doc() -> Value {
    operation(
        "Library creatives a line item uses (not those uploaded under it)".into(),
        "library",
        vec![id_parameter("id", "line item id")],
        None,
        responses([
            (
                200,
                response(
                    "the line item's assignments, by creative id",
                    json!({ "type": "object", "properties": {
                        "line_item_id": { "type": "integer" },
                        "assignments": { "type": "array", "items": assignment_schema() }
                    }}),
                ),
            ),
            (
                404,
                error_response("no such line item visible to this token"),
            ),
        ]),
    )
}

pub fn uses_doc() -> Value {
    operation(
        "Line items that use a creative from the library (besides the one it was uploaded under)"
            .into(),
        "library",
        vec![id_parameter("id", "creative id")],
        None,
        responses([
            (
                200,
                response(
                    "the creative's assignments, by line item id",
                    json!({ "type": "object", "properties": {
                        "creative_id": { "type": "integer" },
                        "assignments": { "type": "array", "items": assignment_schema() }
                    }}),
                ),
            ),
            (
                404,
                error_response("no such creative visible to this token"),
            ),
        ]),
    )
}

pub fn assign_doc(assign: bool) -> Value {
    let parameters = vec![
        id_parameter("id", "line item id"),
        id_parameter("creative_id", "creative id, of the line item's advertiser"),
    ];
    if !assign {
        return operation(
            "Stop using a library creative on a line item".into(),
            "library",
            parameters,
            None,
            responses([
                (204, json!({ "description": "removed" })),
                (404, error_response("no such assignment")),
            ]),
        );
    }
    let request = json!({ "type": "object", "additionalProperties": false, "properties": {
        "weight": { "type": "integer", "minimum": 1, "maximum": 1000, "default": DEFAULT_WEIGHT },
        "start": { "type": "string", "format": "date-time", "description": "serves from then on; none: whenever the line item does" },
        "end": { "type": "string", "format": "date-time", "description": "serves until then (exclusive); none: whenever the line item does" }
    }});
    operation(
        "Use a library creative on a line item, or change its weight and flight there".into(),
        "library",
        parameters,
        Some(request),
        responses([
            (201, response("assigned", assignment_schema())),
            (
                200,
                response("assignment changed or as it was", assignment_schema()),
            ),
            (
                404,
                error_response("no such line item or creative visible to this token"),
            ),
            (409, error_response("the line item or creative is archived")),
            (
                422,
                error_response(
                    "weight or flight out of range, a creative of another advertiser, or the \
                     line item the creative was uploaded under",
                ),
            ),
        ]),
    )
}

pub fn copy_doc() -> Value {
    operation(
        "Copy a line item: paused, same campaign, targeting, caps, goal, placements and creatives (shared)".into(),
        "line items",
        vec![id_parameter("id", "line item id")],
        Some(json!({ "type": "object", "additionalProperties": false, "properties": {
            "name": { "type": "string", "description": "default: \"Copy of\" the original's name" }
        }})),
        responses([
            (201, response("the new line item", schema_ref("LineItemResource"))),
            (404, error_response("no such line item visible to this token")),
            (409, error_response("the line item is archived")),
        ]),
    )
}

pub fn bulk_doc(kind: ObjectKind) -> Value {
    operation(
        format!(
            "Pause, resume or archive several {} (each on its own: not all or nothing)",
            kind.collection()
        ),
        "bulk",
        Vec::new(),
        Some(
            json!({ "type": "object", "required": ["action", "ids"], "additionalProperties": false, "properties": {
                "action": { "type": "string", "enum": ["pause", "resume", "archive"] },
                "ids": { "type": "array", "items": { "type": "integer", "minimum": 1 }, "minItems": 1, "maxItems": MAX_BULK_IDS }
            }}),
        ),
        responses([(
            200,
            response(
                "one result per id, in order: done, unchanged (already so), or error with the error body's code and message",
                json!({ "type": "object", "properties": { "results": { "type": "array", "items": {
                    "type": "object", "properties": {
                        "id": { "type": "integer" },
                        "result": { "type": "string", "enum": ["done", "unchanged", "error"] },
                        "error": schema_ref("Error")
                    }
                }}}}),
            ),
        )]),
    )
}
