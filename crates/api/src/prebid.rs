//! The Prebid line item set generator, `POST /api/v1/campaigns/{id}/prebid-line-items` (and
//! `marquee prebid create-set`): one price-priority line item per price bucket of a Prebid.js
//! price granularity, each targeting `hb_pb` = its bucket at a CPM of the bucket in the
//! advertiser's currency, with a Prebid creative per size (`marquee_model::prebid::creative_html`),
//! linked to the placements.
//!
//! Idempotent: line items are found again by name (`<set name> hb_pb=<bucket>`), so a second
//! call, or one after a failure part-way, creates only what is missing (creatives by name and
//! size, links). A line item of that name with another price, tier or targeting is a conflict
//! (409) and nothing is created. Every object is made through the store with the caller as
//! its [`Actor`], so each create and link is audited like any other write.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use jiff::civil;
use marquee_model::prebid::{self, BucketRange, GRANULARITY_NAMES, Granularity, PRICE_KEY};
use marquee_model::{
    Advertiser, Campaign, Channel, Creative, CreativeContent, KeyValues, LineItem, LineItemId,
    Micros, Object, ObjectKind, PacingMode, Placement, PlacementId, Price, PricingModel, Principal,
    RotationMode, Size, Status, Targeting, Tier, UntokenedClicks, ValidationError, Violation,
};
use marquee_store::{Actor, ListQuery, MAX_PAGE, Store};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::extract::{Body, Path};
use crate::objects::{ensure_access, parse_fields, parse_id};
use crate::{ApiError, ApiState, Caller, Change, ObjectWrite, check_currency, check_write};

/// Fields of a set request.
const FIELDS: [&str; 8] = [
    "name",
    "granularity",
    "placement_ids",
    "sizes",
    "landing_url",
    "start",
    "end",
    "time_zone",
];

/// A line item set to make under one campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct SetRequest {
    pub campaign_id: u64,
    /// The line items' names start with it (`Prebid` unless given).
    pub name: String,
    pub granularity: Granularity,
    /// Linked to every line item; none means every placement (a line item without links).
    pub placement_ids: Vec<PlacementId>,
    /// One Prebid creative of each size per line item.
    pub sizes: Vec<Size>,
    /// Where a click on the creative's own frame goes (Prebid's ads carry their own).
    pub landing_url: String,
    pub start: civil::DateTime,
    pub end: Option<civil::DateTime>,
    /// The advertiser's time zone unless given.
    pub time_zone: Option<String>,
}

/// What a set call made or found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetOutcome {
    pub line_items: Vec<SetLineItem>,
    pub creatives_created: usize,
    pub links_created: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetLineItem {
    pub id: u64,
    pub name: String,
    /// The `hb_pb` value it targets, which is also its CPM.
    pub bucket: String,
    pub created: bool,
}

impl SetOutcome {
    pub fn created(&self) -> usize {
        self.line_items.iter().filter(|l| l.created).count()
    }

    pub fn json(&self, request: &SetRequest) -> Value {
        json!({
            "campaign_id": request.campaign_id,
            "granularity": request.granularity.name(),
            "line_items_created": self.created(),
            "line_items_existing": self.line_items.len() - self.created(),
            "creatives_created": self.creatives_created,
            "links_created": self.links_created,
            "line_items": self.line_items.iter().map(|l| json!({
                "id": l.id, "name": l.name, PRICE_KEY: l.bucket, "created": l.created,
            })).collect::<Vec<_>>(),
        })
    }
}

fn violation(path: impl Into<String>, message: impl Into<String>) -> Violation {
    Violation {
        path: path.into(),
        message: message.into(),
    }
}

/// Reads a set request: every field that cannot be read is listed in one 400, every rule the
/// rest breaks in one 422 (rules that need the campaign are checked by [`make_set`]).
pub fn read_set(campaign_id: u64, fields: Map<String, Value>) -> Result<SetRequest, ApiError> {
    let mut unreadable = Vec::new();
    for key in fields.keys() {
        if !FIELDS.contains(&key.as_str()) {
            unreadable.push(violation(
                key.clone(),
                format!("is not a field here; the fields are: {}", FIELDS.join(", ")),
            ));
        }
    }
    fn field<T: DeserializeOwned>(
        fields: &Map<String, Value>,
        name: &str,
        what: &str,
        unreadable: &mut Vec<Violation>,
    ) -> Option<T> {
        let value = fields.get(name).filter(|v| !v.is_null())?;
        match serde_json::from_value(value.clone()) {
            Ok(read) => Some(read),
            Err(_) => {
                unreadable.push(violation(name, format!("must be {what}")));
                None
            }
        }
    }
    let name: Option<String> = field(&fields, "name", "text", &mut unreadable);
    let granularity = fields
        .get("granularity")
        .filter(|g| !g.is_null())
        .map(|g| read_granularity(g, &mut unreadable));
    let placement_ids: Option<Vec<u64>> = field(
        &fields,
        "placement_ids",
        "a list of placement ids",
        &mut unreadable,
    );
    let sizes: Option<Vec<Size>> = field(
        &fields,
        "sizes",
        "a list of sizes such as {\"w\": 300, \"h\": 250}",
        &mut unreadable,
    );
    let landing_url: Option<String> = field(&fields, "landing_url", "a URL", &mut unreadable);
    let date_time = "a date and time such as 2026-12-01T00:00:00";
    let start: Option<civil::DateTime> = field(&fields, "start", date_time, &mut unreadable);
    let end: Option<civil::DateTime> = field(&fields, "end", date_time, &mut unreadable);
    let time_zone: Option<String> = field(&fields, "time_zone", "text", &mut unreadable);
    for required in ["granularity", "sizes", "landing_url", "start"] {
        if fields.get(required).is_none_or(Value::is_null) {
            unreadable.push(violation(required, "is required"));
        }
    }
    if !unreadable.is_empty() {
        let error = ValidationError {
            violations: unreadable,
        };
        return Err(ApiError::BadRequest {
            message: format!("{} invalid field(s): {error}", error.violations.len()),
            fields: error.violations,
        });
    }
    let (Some(Some(granularity)), Some(sizes), Some(landing_url), Some(start)) =
        (granularity, sizes, landing_url, start)
    else {
        return Err(ApiError::bad_request("the set request is incomplete"));
    };
    let request = SetRequest {
        campaign_id,
        name: name.unwrap_or_else(|| "Prebid".to_owned()),
        granularity,
        placement_ids: placement_ids
            .unwrap_or_default()
            .into_iter()
            .map(PlacementId)
            .collect(),
        sizes,
        landing_url,
        start,
        end,
        time_zone,
    };
    let mut rules = Vec::new();
    request.check(&mut rules);
    if rules.is_empty() {
        Ok(request)
    } else {
        Err(ApiError::Invalid(ValidationError { violations: rules }))
    }
}

/// A standard granularity's name, or `{"ranges": [{"max": "5", "increment": "0.05"}, …],
/// "precision": 2}` with amounts as decimal text.
fn read_granularity(value: &Value, unreadable: &mut Vec<Violation>) -> Option<Granularity> {
    let names = GRANULARITY_NAMES.join(", ");
    if let Some(name) = value.as_str() {
        let named = Granularity::named(name);
        if named.is_none() {
            unreadable.push(violation(
                "granularity",
                format!("must be one of: {names}, or custom ranges; {name:?} is not"),
            ));
        }
        return named;
    }
    let Some(custom) = value.as_object() else {
        unreadable.push(violation(
            "granularity",
            format!("must be one of: {names}, or an object with ranges"),
        ));
        return None;
    };
    let before = unreadable.len();
    for key in custom.keys() {
        if key != "ranges" && key != "precision" {
            unreadable.push(violation(
                format!("granularity.{key}"),
                "is not a field here; the fields are: ranges, precision",
            ));
        }
    }
    let precision = match custom.get("precision") {
        None => 2,
        Some(p) => match p.as_u64().and_then(|p| u32::try_from(p).ok()) {
            Some(p) => p,
            None => {
                unreadable.push(violation("granularity.precision", "must be a whole number"));
                0
            }
        },
    };
    let mut ranges = Vec::new();
    match custom.get("ranges").and_then(Value::as_array) {
        None => unreadable.push(violation(
            "granularity.ranges",
            "is required: a list of {\"max\": \"5\", \"increment\": \"0.05\"}",
        )),
        Some(items) => {
            for (i, item) in items.iter().enumerate() {
                let mut amount = |key: &str| {
                    let text = item.get(key).and_then(Value::as_str);
                    let read = text.and_then(prebid::parse_amount);
                    if read.is_none() {
                        unreadable.push(violation(
                            format!("granularity.ranges[{i}].{key}"),
                            "must be an amount as text, such as \"0.05\"",
                        ));
                    }
                    read
                };
                let max = amount("max");
                let increment = amount("increment");
                if let (Some(max), Some(increment)) = (max, increment) {
                    ranges.push(BucketRange { max, increment });
                }
            }
        }
    }
    (unreadable.len() == before).then_some(Granularity::Custom { ranges, precision })
}

/// Longest set name: a line item's name adds ` hb_pb=` and the bucket.
const MAX_SET_NAME_CHARS: usize = 100;

impl SetRequest {
    fn check(&self, rules: &mut Vec<Violation>) {
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_SET_NAME_CHARS {
            rules.push(violation(
                "name",
                format!("must be 1 to {MAX_SET_NAME_CHARS} characters"),
            ));
        } else if name.chars().any(char::is_control) {
            rules.push(violation("name", "must not contain control characters"));
        }
        for problem in self.granularity.check() {
            rules.push(violation("granularity", problem));
        }
        if self.sizes.is_empty() {
            rules.push(violation("sizes", "must list at least one size"));
        }
        for (i, size) in self.sizes.iter().enumerate() {
            if self.sizes[..i].contains(size) {
                rules.push(violation(format!("sizes[{i}]"), "is listed twice"));
            }
        }
        for (i, id) in self.placement_ids.iter().enumerate() {
            if id.0 == 0 {
                rules.push(violation(format!("placement_ids[{i}]"), "ids start at 1"));
            } else if self.placement_ids[..i].contains(id) {
                rules.push(violation(format!("placement_ids[{i}]"), "is listed twice"));
            }
        }
    }
}

/// The line item of one bucket.
fn line_item(
    request: &SetRequest,
    advertiser: &Advertiser,
    bucket: Micros,
    text: &str,
) -> LineItem {
    LineItem {
        campaign_id: marquee_model::CampaignId(request.campaign_id),
        name: format!("{} {PRICE_KEY}={text}", request.name.trim()),
        status: Status::Active,
        start: request.start,
        end: request.end,
        time_zone: request
            .time_zone
            .clone()
            .unwrap_or_else(|| advertiser.time_zone.clone()),
        tier: Tier::Remnant,
        weight: 100,
        goal: None,
        pacing: PacingMode::default(),
        price: Price {
            model: PricingModel::Cpm,
            amount_micros: bucket,
            currency: advertiser.currency,
        },
        frequency_caps: Vec::new(),
        targeting: Some(Targeting::KeyValue(KeyValues {
            key: PRICE_KEY.to_owned(),
            values: vec![text.to_owned()],
        })),
        rotation: RotationMode::default(),
        channels: vec![Channel::Direct],
        deals: Vec::new(),
        untokened_clicks: UntokenedClicks::default(),
        competes_with_programmatic: false,
    }
}

fn creative(request: &SetRequest, line_item: u64, size: Size) -> Creative {
    Creative {
        line_item_id: LineItemId(line_item),
        name: creative_name(size),
        status: Status::Active,
        size: Some(size),
        landing_url: request.landing_url.clone(),
        weight: 100,
        content: CreativeContent::Html {
            html: prebid::creative_html().to_owned(),
        },
        categories: Vec::new(),
        approval: marquee_model::Approval::Approved,
    }
}

fn creative_name(size: Size) -> String {
    format!("Prebid creative {}x{}", size.w, size.h)
}

/// Whether a stored line item is the one this set would make for its name.
fn same_line_item(stored: &LineItem, made: &LineItem) -> bool {
    stored.price == made.price && stored.tier == made.tier && stored.targeting == made.targeting
}

/// Every child of `parent` of kind `T` visible in `scope`, archived ones left out.
async fn children<T: Object>(
    store: &dyn Store,
    parent: u64,
    scope: Option<u64>,
) -> Result<Vec<marquee_model::Stored<T>>, ApiError> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_objects::<T>(&ListQuery {
                scope,
                parent_id: Some(parent),
                after,
                limit: MAX_PAGE,
                ..ListQuery::default()
            })
            .await?;
        let full = page.len() == MAX_PAGE as usize;
        after = page.last().map(|s| s.meta.id);
        out.extend(
            page.into_iter()
                .filter(|s| s.object.status() != Status::Archived),
        );
        if !full {
            return Ok(out);
        }
    }
}

/// Makes what is missing of the set `request` describes, as `actor` within `scope` (see the
/// module's documentation). The caller has checked that `actor` may link placements, if the
/// set names any.
pub async fn make_set(
    store: &dyn Store,
    request: &SetRequest,
    scope: Option<u64>,
    actor: &Actor,
) -> Result<SetOutcome, ApiError> {
    let campaign = store
        .get_object::<Campaign>(request.campaign_id, scope)
        .await?
        .object;
    let advertiser = store
        .get_object::<Advertiser>(campaign.advertiser_id.0, scope)
        .await?
        .object;
    let currency = advertiser.currency;
    let precision = request.granularity.precision();
    let buckets: Vec<(Micros, String)> = request
        .granularity
        .buckets()
        .into_iter()
        .map(|b| (b, prebid::bucket_text(b, precision)))
        .collect();

    // Every rule that needs the stored objects, all at once, before anything is written.
    let mut rules = Vec::new();
    if let Some((_, text)) = buckets
        .iter()
        .find(|(bucket, text)| Micros::parse_in(text, currency).ok() != Some(*bucket))
    {
        rules.push(violation(
            "granularity",
            format!(
                "bucket {text} is not an amount in {currency}, the advertiser's currency; use \
                 custom ranges whose amounts {currency} can write"
            ),
        ));
    }
    for (i, id) in request.placement_ids.iter().enumerate() {
        if store.get_object::<Placement>(id.0, None).await.is_err() {
            rules.push(violation(
                format!("placement_ids[{i}]"),
                format!("there is no placement {id}"),
            ));
        }
    }
    if let Some((bucket, text)) = buckets.first() {
        let sample = line_item(request, &advertiser, *bucket, text);
        if let Err(invalid) = sample.validate() {
            rules.extend(invalid.violations.into_iter().filter(|v| {
                // The rest is ours, and right.
                ["start", "end", "time_zone", "name"]
                    .iter()
                    .any(|f| v.path == *f || v.path.starts_with(&format!("{f}.")))
            }));
        }
        if rules.is_empty() {
            check_currency(store, &sample, ObjectWrite::Create, scope).await?;
        }
    }
    for (i, size) in request.sizes.iter().enumerate() {
        if let Err(invalid) = creative(request, 1, *size).validate() {
            for v in invalid.violations {
                let path = match v.path.as_str() {
                    "size" => format!("sizes[{i}]"),
                    path if path.starts_with("size.") => format!("sizes[{i}]{}", &path[4..]),
                    "landing_url" if i == 0 => "landing_url".to_owned(),
                    _ => continue,
                };
                rules.push(violation(path, v.message));
            }
        }
    }
    if !rules.is_empty() {
        return Err(ApiError::Invalid(ValidationError { violations: rules }));
    }

    let existing: HashMap<String, marquee_model::Stored<LineItem>> =
        children::<LineItem>(store, request.campaign_id, scope)
            .await?
            .into_iter()
            .map(|s| (s.object.name.clone(), s))
            .collect();
    let planned: Vec<LineItem> = buckets
        .iter()
        .map(|(bucket, text)| line_item(request, &advertiser, *bucket, text))
        .collect();
    if let Some((stored, made)) = planned.iter().find_map(|made| {
        existing
            .get(&made.name)
            .filter(|stored| !same_line_item(&stored.object, made))
            .map(|stored| (stored, made))
    }) {
        return Err(ApiError::Conflict {
            message: format!(
                "line item {} {:?} of this campaign has another price, tier or targeting than \
                 this set would give it; archive or rename it, or name the set differently",
                stored.meta.id, made.name
            ),
            current_version: None,
        });
    }

    let mut outcome = SetOutcome {
        line_items: Vec::with_capacity(planned.len()),
        creatives_created: 0,
        links_created: 0,
    };
    for (made, (_, text)) in planned.iter().zip(&buckets) {
        let (id, created) = match existing.get(&made.name) {
            Some(stored) => (stored.meta.id, false),
            None => (store.create_object(made, scope, actor).await?.meta.id, true),
        };
        let have: Vec<Creative> = if created {
            Vec::new()
        } else {
            children::<Creative>(store, id, scope)
                .await?
                .into_iter()
                .map(|s| s.object)
                .collect()
        };
        for size in &request.sizes {
            let wanted = creative(request, id, *size);
            if !have
                .iter()
                .any(|c| c.name == wanted.name && c.size == wanted.size)
            {
                store.create_object(&wanted, scope, actor).await?;
                outcome.creatives_created += 1;
            }
        }
        for placement in &request.placement_ids {
            if store.link(LineItemId(id), *placement, actor).await? {
                outcome.links_created += 1;
            }
        }
        outcome.line_items.push(SetLineItem {
            id,
            name: made.name.clone(),
            bucket: text.clone(),
            created,
        });
    }
    Ok(outcome)
}

/// `POST /api/v1/campaigns/{id}/prebid-line-items`.
pub(crate) async fn create(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    let campaign = parse_id(&id)?;
    check_may_make(&principal)?;
    // Another tenant's campaign answers 404 whatever the body says: it is found (in the
    // caller's scope) before the body is read.
    state
        .store
        .get(ObjectKind::Campaign, campaign, principal.scope())
        .await?;
    let request = read_set(campaign, parse_fields(&headers, &body)?)?;
    let outcome = make_set(
        &*state.store,
        &request,
        principal.scope(),
        &Actor::token(&principal),
    )
    .await?;
    let status = if outcome.created() + outcome.creatives_created + outcome.links_created > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(outcome.json(&request))).into_response())
}

/// Line items and creatives are written as by their own endpoints: only an admin books line
/// items, so only an admin makes a set (and links it to placements).
fn check_may_make(principal: &Principal) -> Result<(), ApiError> {
    for kind in [ObjectKind::LineItem, ObjectKind::Creative] {
        ensure_access(principal, kind)?;
        check_write(principal, kind, Change::Create)?;
    }
    Ok(())
}

/// The OpenAPI operation.
pub fn operation_doc() -> Value {
    use crate::openapi::{operation, response, responses, schema_ref};
    let amount = json!({ "type": "string", "example": "0.05" });
    let request = json!({
        "type": "object",
        "required": ["granularity", "sizes", "landing_url", "start"],
        "additionalProperties": false,
        "properties": {
            "name": { "type": "string", "default": "Prebid", "description": "the line items are named `<name> hb_pb=<bucket>`" },
            "granularity": {
                "description": "a Prebid.js price granularity: low, medium, high, auto or dense, or custom ranges (each from the previous max, amounts as decimal text)",
                "oneOf": [
                    { "type": "string", "enum": GRANULARITY_NAMES },
                    { "type": "object", "required": ["ranges"], "additionalProperties": false, "properties": {
                        "precision": { "type": "integer", "minimum": 0, "maximum": prebid::MAX_PRECISION, "default": 2 },
                        "ranges": { "type": "array", "items": { "type": "object", "required": ["max", "increment"], "properties": { "max": amount, "increment": amount } } }
                    }}
                ]
            },
            "placement_ids": { "type": "array", "items": { "type": "integer", "minimum": 1 }, "description": "linked to every line item; none: every placement" },
            "sizes": { "type": "array", "items": schema_ref("Size"), "minItems": 1 },
            "landing_url": { "type": "string", "format": "uri" },
            "start": { "type": "string", "example": "2026-12-01T00:00:00" },
            "end": { "type": "string", "example": "2027-01-01T00:00:00" },
            "time_zone": { "type": "string", "description": "the advertiser's unless given" }
        }
    });
    let outcome = json!({ "type": "object", "properties": {
        "campaign_id": { "type": "integer" },
        "granularity": { "type": "string" },
        "line_items_created": { "type": "integer" },
        "line_items_existing": { "type": "integer" },
        "creatives_created": { "type": "integer" },
        "links_created": { "type": "integer" },
        "line_items": { "type": "array", "items": { "type": "object", "properties": {
            "id": { "type": "integer" }, "name": { "type": "string" },
            "hb_pb": { "type": "string" }, "created": { "type": "boolean" }
        }}}
    }});
    operation(
        "Make a Prebid price-priority line item set under a campaign (idempotent)".into(),
        "prebid",
        vec![json!({
            "name": "id", "in": "path", "required": true, "description": "campaign id",
            "schema": { "type": "integer", "format": "int64", "minimum": 1 }
        })],
        Some(request),
        responses([
            (
                201,
                response("the set, with what was created", outcome.clone()),
            ),
            (
                200,
                response("the set existed whole; nothing created", outcome),
            ),
            (
                400,
                response(
                    "fields that cannot be read, all of them",
                    schema_ref("Error"),
                ),
            ),
            (
                404,
                response(
                    "no such campaign visible to this token",
                    schema_ref("Error"),
                ),
            ),
            (
                409,
                response(
                    "a line item of a bucket's name differs; nothing created",
                    schema_ref("Error"),
                ),
            ),
            (
                422,
                response("rules broken, all of them", schema_ref("Error")),
            ),
        ]),
    )
}
