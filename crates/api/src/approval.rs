//! `POST /api/v1/creatives/{id}/approval`: the publisher's review of a creative. Only an admin
//! approves or rejects; creates and updates never set the state from their body (see
//! [`crate::govern_write`]).

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use marquee_model::{Approval, Creative, Object, ObjectKind, Principal, Role};
use marquee_store::Actor;
use serde_json::{Value, json};

use crate::extract::{Body, Path};
use crate::objects::{ensure_access, parse_fields, parse_id, resource};
use crate::openapi::{error_response, operation, response, responses, schema_ref};
use crate::{ApiError, ApiState, Caller};

/// The approval a request body asks for: `{"state": "approved" | "pending" | "rejected",
/// "reason": "…"}`, the reason required for a rejection.
pub fn read_approval(body: &Value) -> Result<Approval, ApiError> {
    let Value::Object(fields) = body else {
        return Err(ApiError::bad_request("body must be a JSON object"));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["state", "reason"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_field(
            unknown.as_str(),
            "unknown field; known: state, reason",
        ));
    }
    let states = Approval::STATES.join(", ");
    let state = fields
        .get("state")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_field("state", format!("is required: one of {states}")))?;
    let reason = match fields.get("reason") {
        None | Some(Value::Null) => "",
        Some(Value::String(reason)) => reason,
        Some(_) => return Err(ApiError::bad_field("reason", "must be text")),
    };
    Approval::parse(state, reason)
        .ok_or_else(|| ApiError::bad_field("state", format!("must be one of {states}")))
}

fn ensure_admin(principal: &Principal) -> Result<(), ApiError> {
    if principal.role == Role::Admin {
        return Ok(());
    }
    Err(ApiError::Forbidden(
        "only an admin approves or rejects creatives: the publisher reviews what runs on its \
         pages"
            .into(),
    ))
}

pub async fn set(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    ensure_access(&principal, ObjectKind::Creative)?;
    let id = parse_id(&id)?;
    // A tenant learns nothing more than from a read: a creative outside its scope is missing.
    let mut stored = state
        .store
        .get_object::<Creative>(id, principal.scope())
        .await?;
    ensure_admin(&principal)?;
    let approval = read_approval(&Value::Object(parse_fields(&headers, &body)?))?;
    if stored.object.approval == approval {
        return Ok(Json(resource(&stored)?));
    }
    stored.object.approval = approval;
    stored.object.validate()?;
    let stored = state
        .store
        .update_object(
            id,
            stored.meta.version,
            &stored.object,
            principal.scope(),
            &Actor::token(&principal),
        )
        .await?;
    Ok(Json(resource(&stored)?))
}

pub fn operation_doc() -> Value {
    let mut op = operation(
        "Approve or reject a creative (admin)".into(),
        "creatives",
        vec![json!({
            "name": "id", "in": "path", "required": true, "description": "creative id",
            "schema": { "type": "integer", "format": "int64", "minimum": 1 }
        })],
        Some(json!({
            "type": "object",
            "required": ["state"],
            "properties": {
                "state": { "type": "string", "enum": Approval::STATES },
                "reason": { "type": "string", "description": "Why it is rejected: required with `rejected`, shown to the advertiser." }
            }
        })),
        responses([
            (
                200,
                response(
                    "the creative with its new approval",
                    schema_ref("CreativeResource"),
                ),
            ),
            (
                404,
                error_response("no such creative visible to this token"),
            ),
            (422, error_response("a rejection without a reason")),
        ]),
    );
    op["description"] = json!(
        "Only approved creatives serve. An admin's new creative is approved; an advertiser's new creative, or its change to a creative's content or landing URL, is pending until an admin approves it. The change is in the audit log as an update of the creative's `approval`."
    );
    op
}
