//! `GET /api/v1/audit`: the history of changes to managed objects and accounts (API tokens,
//! dashboard users), newest first. Admins see every entry; a tenant token sees only its own
//! objects' entries, as it reads only its own objects, and never accounts'.

use axum::Json;
use axum::extract::{Query, State};
use jiff::Timestamp;
use marquee_model::{ObjectKind, Principal, Role};
use marquee_store::{AuditAction, AuditEntry, AuditKind, AuditQuery, MAX_AUDIT_PAGE};
use serde_json::{Map, Value, json};

use crate::objects::ensure_access;
use crate::openapi::{operation, response, responses};
use crate::{ApiError, ApiState, Caller, amounts};

const DEFAULT_LIMIT: u32 = 50;
const PARAMETERS: [&str; 7] = [
    "object_kind",
    "object_id",
    "principal",
    "since",
    "until",
    "before",
    "limit",
];

pub async fn list(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let mut query = parse_query(&principal, params)?;
    let limit = query.limit as usize;
    // One entry more than asked tells whether another page exists.
    query.limit += 1;
    let mut entries = state.store.audit(&query).await?;
    let next_before = if entries.len() > limit {
        entries.truncate(limit);
        entries.last().map(|entry| entry.id)
    } else {
        None
    };
    let items: Vec<Value> = entries.iter().map(entry_json).collect();
    Ok(Json(json!({ "items": items, "next_before": next_before })))
}

fn parse_query(
    principal: &Principal,
    params: Vec<(String, String)>,
) -> Result<AuditQuery, ApiError> {
    let mut query = AuditQuery {
        limit: DEFAULT_LIMIT,
        ..AuditQuery::default()
    };
    if let (Some(side), Some(owner)) = (principal.role.side(), principal.scope()) {
        query.scope = Some((side, owner));
    }
    for (key, value) in params {
        match key.as_str() {
            "object_kind" => {
                let kind = ObjectKind::ALL
                    .into_iter()
                    .find(|k| k.collection() == value)
                    .map(AuditKind::Object)
                    .or_else(|| AuditKind::parse(&value))
                    .ok_or_else(|| {
                        ApiError::bad_field(
                            "object_kind",
                            "must be an object kind (line_item, …), api_token or user",
                        )
                    })?;
                match kind.object() {
                    Some(object) => ensure_access(principal, object)?,
                    None if principal.role != Role::Admin => {
                        return Err(ApiError::Forbidden(
                            "only an admin reads the history of accounts".into(),
                        ));
                    }
                    None => {}
                }
                query.object_kind = Some(kind);
            }
            "object_id" => query.object_id = Some(positive("object_id", &value)?),
            "principal" => query.principal = Some(value),
            "since" => query.since = Some(time("since", &value)?),
            "until" => query.until = Some(time("until", &value)?),
            "before" => query.before_id = Some(positive("before", &value)?),
            "limit" => {
                query.limit = value
                    .parse()
                    .ok()
                    .filter(|limit| (1..=MAX_AUDIT_PAGE).contains(limit))
                    .ok_or_else(|| {
                        ApiError::bad_field(
                            "limit",
                            format!("must be an integer from 1 to {MAX_AUDIT_PAGE}"),
                        )
                    })?;
            }
            unknown => {
                return Err(ApiError::bad_field(
                    unknown,
                    format!("unknown query parameter; known: {}", PARAMETERS.join(", ")),
                ));
            }
        }
    }
    if principal.role != Role::Admin && query.scope.is_none() {
        // A tenant role always has an owner; refuse rather than show everything.
        return Err(ApiError::Forbidden("this token has no owner".into()));
    }
    Ok(query)
}

fn positive(name: &str, value: &str) -> Result<u64, ApiError> {
    value
        .parse::<u64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::bad_field(name, "must be a positive integer"))
}

fn time(name: &str, value: &str) -> Result<Timestamp, ApiError> {
    value.parse().map_err(|_| {
        ApiError::bad_field(
            name,
            "must be an RFC 3339 time with an offset, e.g. 2026-01-31T00:00:00Z",
        )
    })
}

/// An entry as the API shows it: amounts in `changes` also as decimal text, as objects are
/// shown.
fn entry_json(entry: &AuditEntry) -> Value {
    json!({
        "id": entry.id,
        "at": entry.at.to_string(),
        "principal": entry.principal,
        "role": entry.role.as_str(),
        "object_kind": entry.object_kind.name(),
        "object_id": entry.object_id,
        "object_name": entry.object_name,
        "action": entry.action.as_str(),
        "changes": match entry.object_kind.object() {
            Some(kind) => present_changes(kind, &entry.changes),
            None => entry.changes.clone(),
        },
    })
}

/// Runs each side of an entry's `changes` (the before values, then the after values) through
/// [`amounts::present`], which adds the plain fields beside the micros ones: money reads as
/// objects show it. The dashboard's History shows the same.
pub fn present_changes(kind: ObjectKind, changes: &Value) -> Value {
    let Value::Object(changes) = changes else {
        return changes.clone();
    };
    let side = |which: &str| {
        let mut fields: Map<String, Value> = changes
            .iter()
            .map(|(field, pair)| (field.clone(), pair[which].clone()))
            .collect();
        let mut value = Value::Object(std::mem::take(&mut fields));
        amounts::present(kind, &mut value);
        value
    };
    let (before, after) = (side("before"), side("after"));
    let out: Map<String, Value> = changes
        .keys()
        .map(|field| {
            (
                field.clone(),
                json!({ "before": before[field], "after": after[field] }),
            )
        })
        .collect();
    Value::Object(out)
}

pub fn operation_doc() -> Value {
    let text = json!({ "type": "string" });
    let id = json!({ "type": "integer", "format": "int64", "minimum": 1 });
    let time = json!({ "type": "string", "format": "date-time" });
    let param = |name: &str, description: &str, schema: &Value| json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema });
    operation(
        "History of changes to managed objects and accounts, newest first".into(),
        "audit",
        vec![
            param(
                "object_kind",
                "only this kind (line_item or line-items, …; api_token or user: admin only)",
                &text,
            ),
            param("object_id", "only this object id", &id),
            param(
                "principal",
                "only changes by this principal: token:<id>, user:<name> or cli",
                &text,
            ),
            param("since", "only changes at or after this time", &time),
            param("until", "only changes before this time", &time),
            param(
                "before",
                "only entries with a smaller id: the previous page's next_before",
                &id,
            ),
            param(
                "limit",
                "entries per page (default 50)",
                &json!({ "type": "integer", "minimum": 1, "maximum": MAX_AUDIT_PAGE }),
            ),
        ],
        None,
        responses([(
            200,
            response(
                "entries, newest first, and the cursor of the next page (null on the last)",
                json!({ "type": "object", "properties": {
                    "items": { "type": "array", "items": { "type": "object", "properties": {
                        "id": { "type": "integer" },
                        "at": { "type": "string", "format": "date-time" },
                        "principal": { "type": "string" },
                        "role": { "type": "string", "enum": ["admin", "advertiser", "publisher"] },
                        "object_kind": { "type": "string" },
                        "object_id": { "type": "integer" },
                        "object_name": { "type": "string" },
                        "action": { "type": "string", "enum": AuditAction::ALL.map(AuditAction::as_str) },
                        "changes": {
                            "type": "object",
                            "description": "the changed fields only: {field: {before, after}}",
                            "additionalProperties": { "type": "object" }
                        }
                    }}},
                    "next_before": { "type": ["integer", "null"] }
                }}),
            ),
        )]),
    )
}
