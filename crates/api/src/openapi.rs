//! OpenAPI operations and schemas for the management API. Object schemas are derived from the
//! model types (schemars), so the document follows the code.

use marquee_model::{LineItem, Object, ObjectKind};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

pub fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn json_content(schema: Value) -> Value {
    json!({ "application/json": { "schema": schema } })
}

/// A response with a JSON body of `schema`.
pub fn response(description: &str, schema: Value) -> Value {
    json!({ "description": description, "content": json_content(schema) })
}

pub(crate) fn error_response(description: &str) -> Value {
    response(description, schema_ref("Error"))
}

/// The error responses every authenticated operation can give.
fn common_errors(responses: &mut Map<String, Value>) {
    responses.insert("401".into(), error_response("missing or unknown token"));
    responses.insert(
        "403".into(),
        error_response("the token's role may not do this"),
    );
}

fn id_parameter(name: &str, description: &str) -> Value {
    json!({
        "name": name, "in": "path", "required": true, "description": description,
        "schema": { "type": "integer", "format": "int64", "minimum": 1 }
    })
}

fn query_parameter(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema })
}

/// An authenticated operation.
pub fn operation(
    summary: String,
    tag: &str,
    parameters: Vec<Value>,
    request: Option<Value>,
    mut responses: Map<String, Value>,
) -> Value {
    common_errors(&mut responses);
    let mut op = json!({
        "summary": summary,
        "tags": [tag],
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(schema) = request {
        op["requestBody"] = json!({ "required": true, "content": json_content(schema) });
    }
    op
}

/// An operation that needs no token.
pub fn public_operation(summary: &str, tag: &str, responses: Map<String, Value>) -> Value {
    json!({ "summary": summary, "tags": [tag], "security": [], "responses": responses })
}

pub fn responses(entries: impl IntoIterator<Item = (u16, Value)>) -> Map<String, Value> {
    entries
        .into_iter()
        .map(|(status, body)| (status.to_string(), body))
        .collect()
}

fn label(kind: ObjectKind) -> String {
    kind.name().replace('_', " ")
}

/// The documentation of the five operations on one kind of object.
#[derive(Debug)]
pub struct ObjectOperations {
    pub list: Value,
    pub create: Value,
    pub get: Value,
    pub update: Value,
    pub archive: Value,
}

pub fn object_operations<T: Object>() -> ObjectOperations {
    let kind = T::KIND;
    let tag = kind.collection();
    let name = T::schema_name();
    let resource = schema_ref(&format!("{name}Resource"));
    let id = || vec![id_parameter("id", &format!("{} id", label(kind)))];
    let invalid = || {
        (
            422,
            error_response("a field breaks a rule; `fields` names each"),
        )
    };
    let unreadable = || {
        (
            400,
            error_response(
                "malformed JSON, or fields that cannot be read (unknown, missing, of the wrong \
                 type, an amount with more decimals than its currency has); `fields` names \
                 each, with the rules the rest breaks",
            ),
        )
    };
    let missing = || (404, error_response("no such object visible to this token"));
    let mut list_parameters = vec![
        query_parameter(
            "status",
            "only objects with this status",
            json!({ "type": "string", "enum": ["active", "paused", "archived"] }),
        ),
        query_parameter(
            "q",
            "only objects whose name contains this (case-insensitive)",
            json!({ "type": "string" }),
        ),
        query_parameter(
            "after",
            "only ids greater than this (the previous page's `next_after`)",
            json!({ "type": "integer", "minimum": 1 }),
        ),
        query_parameter(
            "limit",
            "page size",
            json!({ "type": "integer", "minimum": 1, "maximum": crate::objects::MAX_LIMIT, "default": 50 }),
        ),
    ];
    if let Some(parent) = kind.parent() {
        list_parameters.push(query_parameter(
            "parent_id",
            &format!("only children of this {}", label(parent)),
            json!({ "type": "integer", "minimum": 1 }),
        ));
    }
    let page = json!({
        "type": "object",
        "required": ["items", "next_after"],
        "properties": {
            "items": { "type": "array", "items": resource.clone() },
            "next_after": { "type": "integer", "nullable": true, "description": "pass as `after` for the next page; null on the last page" }
        }
    });
    let mut create = operation(
        format!("Create a {}", label(kind)),
        tag,
        vec![],
        Some(schema_ref(&name)),
        responses([
            (201, response("created", resource.clone())),
            unreadable(),
            invalid(),
        ]),
    );
    create["requestBody"]["content"]["application/json"]["example"] = crate::example(kind);
    ObjectOperations {
        list: operation(
            format!("List {}", kind.collection()),
            tag,
            list_parameters,
            None,
            responses([(200, response("one page", page)), unreadable()]),
        ),
        create,
        get: operation(
            format!("Read a {}", label(kind)),
            tag,
            id(),
            None,
            responses([(200, response("the object", resource.clone())), missing()]),
        ),
        update: operation(
            format!("Replace a {} (send the `version` you read)", label(kind)),
            tag,
            id(),
            Some(schema_ref(&format!("{name}Update"))),
            responses([
                (200, response("updated", resource.clone())),
                unreadable(),
                missing(),
                (
                    409,
                    error_response("stale version (`current_version` says the latest) or archived"),
                ),
                invalid(),
            ]),
        ),
        archive: operation(
            format!("Archive a {}", label(kind)),
            tag,
            id(),
            None,
            responses([(200, response("archived", resource)), missing()]),
        ),
    }
}

pub fn link_list_operation() -> Value {
    operation(
        "Placements a line item is linked to".into(),
        "links",
        vec![id_parameter("id", "line item id")],
        None,
        responses([
            (
                200,
                response(
                    "linked placements",
                    json!({ "type": "object", "properties": {
                        "line_item_id": { "type": "integer" },
                        "placement_ids": { "type": "array", "items": { "type": "integer" } }
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

pub fn tags_operation() -> Value {
    operation(
        "Ad tags of a placement (async JavaScript, iframe, image)".into(),
        "placements",
        vec![id_parameter("id", "placement id")],
        None,
        responses([
            (
                200,
                response(
                    "the tags, as HTML to paste into a page",
                    json!({ "type": "object", "properties": {
                        "placement_id": { "type": "integer" },
                        "async": { "type": "string" },
                        "iframe": { "type": "string" },
                        "image": { "type": "string" },
                        "note": { "type": "string" }
                    }}),
                ),
            ),
            (
                404,
                error_response("no such placement visible to this token"),
            ),
        ]),
    )
}

pub fn link_operation(link: bool) -> Value {
    let parameters = vec![
        id_parameter("id", "line item id"),
        id_parameter("placement_id", "placement id"),
    ];
    let result = if link {
        responses([
            (201, response("linked", json!({ "type": "object" }))),
            (
                200,
                response("was already linked", json!({ "type": "object" })),
            ),
            (404, error_response("no such line item or placement")),
        ])
    } else {
        responses([
            (204, json!({ "description": "unlinked" })),
            (404, error_response("no such link")),
        ])
    };
    let summary = if link {
        "Link a line item to a placement (admin)"
    } else {
        "Unlink a line item from a placement (admin)"
    };
    operation(summary.into(), "links", parameters, None, result)
}

/// The answer fields of an availability forecast, in impressions.
fn availability_schema() -> Value {
    let count = json!({ "type": "integer", "minimum": 0 });
    json!({ "type": "object", "properties": {
        "status": { "type": "string", "enum": ["ok", "not_enough_sample", "not_ready"],
            "description": "`ok` with the figures below; otherwise a `message` says why there are none (`not_enough_sample`: with `sample_days` and `sample_days_needed`)" },
        "message": { "type": "string" },
        "from": { "type": "string", "format": "date-time", "description": "the range forecast: whole UTC days, from today at the earliest" },
        "to": { "type": "string", "format": "date-time" },
        "matching": count,
        "available": count,
        "requested": { "type": ["integer", "null"], "description": "the goal over the range, in impressions (null without a goal)" },
        "probability": { "type": ["number", "null"], "description": "chance that what is available reaches the goal" },
        "sample_days": count,
        "sample_days_needed": count,
        "daily": { "type": "array", "items": { "type": "object", "properties": {
            "date": { "type": "string", "format": "date" },
            "matching": count, "available": count,
            "requested": { "type": ["integer", "null"] }
        }}},
        "contending": { "type": "array", "description": "booked line items taking impressions it matches, most first (at most 20); those of another advertiser than a tenant caller's are unnamed", "items": { "type": "object", "properties": {
            "line_item_id": { "type": ["integer", "null"] },
            "name": { "type": ["string", "null"] },
            "other_advertiser": { "type": "boolean" },
            "impressions": count
        }}}
    }})
}

pub fn forecast_operation() -> Value {
    let mut request = json!({ "allOf": [schema_ref(&LineItem::schema_name()), { "type": "object",
    "required": ["from", "to"],
    "properties": {
        "from": { "type": "string", "format": "date-time", "description": "start of the range (widened to whole UTC days, from today at the earliest; at most 90 days)" },
        "to": { "type": "string", "format": "date-time" },
        "placements": { "type": "array", "items": { "type": "integer", "minimum": 1 }, "description": "the placements it would be linked to; none: every placement" },
        "line_item_id": { "type": "integer", "minimum": 1, "description": "the booked line item this proposal would replace (an edit): it does not contend with itself" }
    }}]});
    request["description"] =
        "a line item as the create endpoint takes it, plus the range and its placements".into();
    operation(
        "Forecast a proposed line item: matching, available and contending impressions".into(),
        "forecasts",
        Vec::new(),
        Some(request),
        responses([
            (
                200,
                response(
                    "the forecast, or why there is none yet",
                    availability_schema(),
                ),
            ),
            (400, error_response("a field cannot be read")),
            (
                422,
                error_response("the line item breaks a rule, or names an unknown placement"),
            ),
        ]),
    )
}

pub fn delivery_forecast_operation() -> Value {
    let count = json!({ "type": "integer", "minimum": 0 });
    operation(
        "Delivery outlook of a booked line item over the next 30 days".into(),
        "forecasts",
        vec![id_parameter("id", "line item id")],
        None,
        responses([
            (
                200,
                response(
                    "the outlook, or why there is none",
                    json!({ "type": "object", "properties": {
                        "status": { "type": "string", "enum": ["on_track", "at_risk", "shortfall", "not_enough_sample", "not_ready", "not_serving"] },
                        "message": { "type": "string" },
                        "line_item_id": count,
                        "from": { "type": "string", "format": "date-time" },
                        "to": { "type": "string", "format": "date-time" },
                        "goal": { "type": ["integer", "null"], "description": "its goal over the range, in impressions" },
                        "expected": count,
                        "shortfall": count,
                        "probability": { "type": ["number", "null"] },
                        "delivered": { "type": ["integer", "null"], "description": "delivered before the range, in the goal's metric (spend in micros); lifetime goals only" },
                        "availability": availability_schema()
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

/// Adds the schemas every document needs: the objects' own, their stored form (`…Resource`:
/// plus id, version, timestamps), their update form (`…Update`: plus the version read), and
/// the error body.
pub fn add_schemas(
    schemas: &mut Map<String, Value>,
    mut generator: SchemaGenerator,
    object_names: &[String],
) {
    let mut definitions = generator.take_definitions(true);
    crate::amounts::document(&mut definitions);
    for name in object_names {
        let Some(base) = definitions.get(name) else {
            continue;
        };
        let resource = with_properties(
            base,
            &[
                ("id", json!({ "type": "integer", "minimum": 1 })),
                ("version", json!({ "type": "integer", "minimum": 1 })),
                (
                    "created_at",
                    json!({ "type": "string", "format": "date-time" }),
                ),
                (
                    "updated_at",
                    json!({ "type": "string", "format": "date-time" }),
                ),
            ],
        );
        let update = with_properties(
            base,
            &[(
                "version",
                json!({ "type": "integer", "minimum": 1, "description": "the version this update is based on" }),
            )],
        );
        let resource = if *name == LineItem::schema_name() {
            with_optional_property(
                resource,
                "warnings",
                json!({
                    "type": "array", "items": { "type": "string" },
                    "description": "Why the line item may not serve as written, e.g. geo targeting that ad requests cannot match without a geo source; present only when there is something to say (create, read and update answers). Ignored in an update."
                }),
            )
        } else {
            resource
        };
        schemas.insert(format!("{name}Resource"), resource);
        schemas.insert(format!("{name}Update"), update);
    }
    schemas.extend(definitions);
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": { "error": {
                "type": "object",
                "required": ["status", "code", "message"],
                "properties": {
                    "status": { "type": "integer" },
                    "code": { "type": "string" },
                    "message": { "type": "string" },
                    "fields": { "type": "array", "items": {
                        "type": "object",
                        "properties": { "path": { "type": "string" }, "message": { "type": "string" } }
                    }},
                    "current_version": { "type": "integer" }
                }
            }}
        }),
    );
}

/// A schema with one more property, not required.
fn with_optional_property(mut schema: Value, name: &str, property: Value) -> Value {
    schema["properties"][name] = property;
    schema
}

/// A copy of an object schema with extra required properties.
fn with_properties(base: &Value, extra: &[(&str, Value)]) -> Value {
    let mut schema = base.clone();
    for (name, property) in extra {
        schema["properties"][*name] = property.clone();
        match schema["required"].as_array_mut() {
            Some(required) => required.push(json!(name)),
            None => schema["required"] = json!([name]),
        }
    }
    schema
}
