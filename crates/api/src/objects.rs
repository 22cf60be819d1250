//! Create, read, list, update and archive, written once for every kind of object.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use marquee_model::{Meta, Object, ObjectKind, Principal, Status, Stored};
use marquee_store::{Actor, ListQuery, Store};
use serde_json::{Map, Value};

use crate::amounts;
use crate::extract::{Body, Path, Query};
use crate::geo::{GeoAvailability, warnings};
use crate::read::read_object;
use crate::{
    ApiError, ApiState, Caller, Change, ObjectWrite, check_currency, check_write, govern_write,
};

/// Largest page a list call returns.
pub const MAX_LIMIT: u32 = 200;
const DEFAULT_LIMIT: u32 = 50;

/// Fields the server owns: accepted in an update body so that GET, edit, PUT works, but never
/// written from it.
const READ_ONLY_FIELDS: [&str; 4] = ["id", "created_at", "updated_at", "warnings"];

/// The JSON of a stored object: its fields plus `id`, `version`, `created_at`, `updated_at`.
pub fn resource<T: Object>(stored: &Stored<T>) -> Result<Value, ApiError> {
    let mut fields = match serde_json::to_value(&stored.object) {
        Ok(Value::Object(fields)) => fields,
        Ok(_) | Err(_) => {
            return Err(ApiError::Internal(format!(
                "{} {} does not serialise to an object",
                T::KIND.name(),
                stored.meta.id
            )));
        }
    };
    let Meta {
        id,
        version,
        created_at,
        updated_at,
    } = stored.meta;
    fields.insert("id".into(), id.into());
    fields.insert("version".into(), version.into());
    fields.insert("created_at".into(), created_at.to_string().into());
    fields.insert("updated_at".into(), updated_at.to_string().into());
    let mut fields = Value::Object(fields);
    amounts::present(T::KIND, &mut fields);
    Ok(fields)
}

pub(crate) fn ensure_access(principal: &Principal, kind: ObjectKind) -> Result<(), ApiError> {
    if principal.may_access(kind) {
        return Ok(());
    }
    Err(ApiError::Forbidden(format!(
        "a {} token cannot access {}",
        principal.role.as_str(),
        kind.collection()
    )))
}

pub fn parse_id(text: &str) -> Result<u64, ApiError> {
    match text.parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(ApiError::bad_field(
            "id",
            format!("{text:?} is not a positive integer id"),
        )),
    }
}

/// Requests with a body must say it is JSON (or say nothing).
fn ensure_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let is_json = content_type
        .to_str()
        .map(|ct| ct.split(';').next().unwrap_or("").trim() == "application/json")
        .unwrap_or(false);
    if is_json {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType(
            "Content-Type must be application/json".into(),
        ))
    }
}

pub(crate) fn parse_fields(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Map<String, Value>, ApiError> {
    ensure_json(headers)?;
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err(ApiError::bad_request("body must be a JSON object")),
        Err(e) => Err(ApiError::bad_request(format!(
            "body is not valid JSON: {e}"
        ))),
    }
}

pub async fn create<T: Object>(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    ensure_access(&principal, T::KIND)?;
    check_write(&principal, T::KIND, Change::Create)?;
    let object: T = read_object(
        Value::Object(parse_fields(&headers, &body)?),
        None,
        Vec::new(),
    )?;
    let object = govern_write(&principal, None, object)?;
    check_currency(
        &*state.store,
        &object,
        ObjectWrite::Create,
        principal.scope(),
    )
    .await?;
    let stored = state
        .store
        .create_object(&object, principal.scope(), &Actor::token(&principal))
        .await?;
    let location = format!("/api/v1/{}/{}", T::KIND.collection(), stored.meta.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(resource_with_warnings(&stored, state.geo)?),
    )
        .into_response())
}

pub async fn get<T: Object>(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    ensure_access(&principal, T::KIND)?;
    let stored = state
        .store
        .get_object::<T>(parse_id(&id)?, principal.scope())
        .await?;
    Ok(Json(resource_with_warnings(&stored, state.geo)?))
}

/// Query parameters of a list call; anything else is refused by name.
const LIST_PARAMETERS: [&str; 5] = ["status", "parent_id", "q", "after", "limit"];

fn parse_list_query(
    principal: &Principal,
    params: Vec<(String, String)>,
) -> Result<ListQuery, ApiError> {
    let mut query = ListQuery {
        scope: principal.scope(),
        limit: DEFAULT_LIMIT,
        ..ListQuery::default()
    };
    for (key, value) in params {
        match key.as_str() {
            "status" => {
                query.status = Some(Status::parse(&value).ok_or_else(|| {
                    ApiError::bad_field("status", "must be active, paused or archived")
                })?);
            }
            "parent_id" => query.parent_id = Some(parse_param_id("parent_id", &value)?),
            "after" => query.after = Some(parse_param_id("after", &value)?),
            "q" => {
                check_name_filter(&value)?;
                query.name_contains = Some(value);
            }
            "limit" => {
                query.limit = value
                    .parse()
                    .ok()
                    .filter(|limit| (1..=MAX_LIMIT).contains(limit))
                    .ok_or_else(|| {
                        ApiError::bad_field(
                            "limit",
                            format!("must be an integer from 1 to {MAX_LIMIT}"),
                        )
                    })?;
            }
            unknown => {
                return Err(ApiError::bad_field(
                    unknown,
                    format!(
                        "unknown query parameter; known: {}",
                        LIST_PARAMETERS.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(query)
}

/// A name filter (`q`) must be text every store can compare: PostgreSQL refuses the NUL
/// character in text, which would otherwise surface as a server error there only.
pub fn check_name_filter(q: &str) -> Result<(), ApiError> {
    if q.contains('\0') {
        return Err(ApiError::bad_field(
            "q",
            "must not contain the NUL character (%00)",
        ));
    }
    Ok(())
}

fn parse_param_id(name: &str, value: &str) -> Result<u64, ApiError> {
    value
        .parse::<u64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::bad_field(name, "must be a positive integer"))
}

pub async fn list<T: Object>(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    ensure_access(&principal, T::KIND)?;
    let mut query = parse_list_query(&principal, params)?;
    let limit = query.limit as usize;
    // One row more than asked tells whether another page exists.
    query.limit += 1;
    let mut rows = state.store.list_objects::<T>(&query).await?;
    let next_after = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|row| row.meta.id)
    } else {
        None
    };
    let items = rows.iter().map(resource).collect::<Result<Vec<_>, _>>()?;
    Ok(Json(
        serde_json::json!({ "items": items, "next_after": next_after }),
    ))
}

pub async fn update<T: Object>(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    ensure_access(&principal, T::KIND)?;
    check_write(&principal, T::KIND, Change::Update)?;
    let id = parse_id(&id)?;
    let mut fields = parse_fields(&headers, &body)?;
    let version = match fields.remove("version") {
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|v| *v > 0)
            .ok_or_else(|| ApiError::bad_field("version", "must be a positive integer"))?,
        Some(_) => return Err(ApiError::bad_field("version", "must be a positive integer")),
        None => {
            return Err(ApiError::bad_field(
                "version",
                "is required: send the version you read, so a concurrent change is not overwritten",
            ));
        }
    };
    if let Some(body_id) = fields.get("id")
        && body_id.as_u64() != Some(id)
    {
        return Err(ApiError::bad_field(
            "id",
            "does not match the id in the path",
        ));
    }
    for field in READ_ONLY_FIELDS {
        fields.remove(field);
    }
    // What it replaces tells which field of an amount pair an edit moved (`amounts`).
    let stored = state.store.get_object::<T>(id, principal.scope()).await?;
    let object: T = read_object(Value::Object(fields), Some(&stored.object), Vec::new())?;
    let object = govern_write(&principal, Some(&stored.object), object)?;
    check_currency(
        &*state.store,
        &object,
        ObjectWrite::Update(id),
        principal.scope(),
    )
    .await?;
    let stored = state
        .store
        .update_object(
            id,
            version,
            &object,
            principal.scope(),
            &Actor::token(&principal),
        )
        .await?;
    Ok(Json(resource_with_warnings(&stored, state.geo)?))
}

pub async fn archive<T: Object>(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    ensure_access(&principal, T::KIND)?;
    check_write(&principal, T::KIND, Change::Archive)?;
    let record = state
        .store
        .archive(
            T::KIND,
            parse_id(&id)?,
            principal.scope(),
            &Actor::token(&principal),
        )
        .await?;
    Ok(Json(resource(&record.decode::<T>()?)?))
}

/// [`resource`] plus `warnings` (see [`GeoAvailability::line_item_warnings`]) when there are
/// any: the answer of a create, read or update.
fn resource_with_warnings<T: Object>(
    stored: &Stored<T>,
    geo: GeoAvailability,
) -> Result<Value, ApiError> {
    let mut body = resource(stored)?;
    let warnings = warnings(&stored.object, geo);
    if !warnings.is_empty()
        && let Value::Object(fields) = &mut body
    {
        fields.insert("warnings".into(), warnings.into());
    }
    Ok(body)
}

/// Used by link handlers: the line item must be visible to the caller.
pub(crate) async fn ensure_visible(
    store: &dyn Store,
    principal: &Principal,
    kind: ObjectKind,
    id: u64,
) -> Result<(), ApiError> {
    ensure_access(principal, kind)?;
    store.get(kind, id, principal.scope()).await?;
    Ok(())
}
