//! Links between line items and placements: which inventory a line item runs on.
//! Reading needs access to the line item; changing needs an admin token, because a link joins
//! one tenant's demand to another tenant's supply.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use marquee_model::{LineItemId, ObjectKind, PlacementId, Principal, Role};
use serde_json::{Value, json};

use marquee_store::Actor;

use crate::extract::Path;
use crate::objects::{ensure_visible, parse_id};
use crate::{ApiError, ApiState, Caller};

fn ensure_admin(principal: &Principal) -> Result<(), ApiError> {
    if principal.role == Role::Admin {
        return Ok(());
    }
    Err(ApiError::Forbidden(
        "only an admin token can link line items and placements".into(),
    ))
}

pub async fn list(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    ensure_visible(&*state.store, &principal, ObjectKind::LineItem, id).await?;
    let placements = state
        .store
        .placements_of(LineItemId(id), principal.scope())
        .await?;
    Ok(Json(
        json!({ "line_item_id": id, "placement_ids": placements }),
    ))
}

fn parse_pair(line_item: &str, placement: &str) -> Result<(LineItemId, PlacementId), ApiError> {
    let placement = placement
        .parse::<u64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            ApiError::bad_field(
                "placement_id",
                format!("{placement:?} is not a positive integer id"),
            )
        })?;
    Ok((LineItemId(parse_id(line_item)?), PlacementId(placement)))
}

pub async fn link(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path((line_item, placement)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    ensure_admin(&principal)?;
    let (line_item, placement) = parse_pair(&line_item, &placement)?;
    let created = state
        .store
        .link(line_item, placement, &Actor::token(&principal))
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = json!({ "line_item_id": line_item, "placement_id": placement, "created": created });
    Ok((status, Json(body)).into_response())
}

pub async fn unlink(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path((line_item, placement)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    ensure_admin(&principal)?;
    let (line_item, placement) = parse_pair(&line_item, &placement)?;
    if state
        .store
        .unlink(line_item, placement, &Actor::token(&principal))
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!(
            "line item {line_item} is not linked to placement {placement}"
        )))
    }
}
