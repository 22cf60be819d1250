//! Lists and forms of the seven managed objects, kind by kind through one code path.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use marquee_api::{
    Change, CurrencyRuleError, ObjectWrite, RuleError, admin_fields, check_currency, check_write,
    currency_under, govern_write,
};
use marquee_model::{
    Advertiser, Campaign, Creative, CreativeAssignment, CreativeId, Currency, LineItem, LineItemId,
    Object, ObjectKind, Placement, PlacementId, Principal, Publisher, Role, Site, Status,
};
use marquee_store::{AuditQuery, Draft, ListQuery, Record, StoreError};

use crate::lists::all_matching;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::fields::{self, Errors, UPLOAD_FIELD, Widget, add_error};
use crate::form::FormData;
use crate::targeting::{self, ATTRIBUTES};
use crate::upload::{self, ImageType};
use crate::{
    Dashboard, Nav, PageError, SignedIn, check_csrf, html, may_access, path_id, require_admin,
    require_user,
};

/// Most parents offered in a form's parent list.
const PARENT_CHOICES: u32 = 500;
/// Blank frequency-cap rows offered below the filled ones.
const BLANK_CAP_ROWS: usize = 2;
/// Blank targeting rows offered below the filled ones.
const BLANK_TARGETING_ROWS: usize = 3;

/// The section title of a kind.
pub fn title(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Advertiser => "Advertisers",
        ObjectKind::Campaign => "Campaigns",
        ObjectKind::LineItem => "Line items",
        ObjectKind::Creative => "Creatives",
        ObjectKind::Publisher => "Publishers",
        ObjectKind::Site => "Sites",
        ObjectKind::Placement => "Placements",
    }
}

pub(crate) fn singular(kind: ObjectKind) -> String {
    kind.name().replace('_', " ")
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Whether the user may make `change` to objects of `kind`, or the refusal (403): first the
/// side of the market, then the API's rule for top-level objects. Pages ask it too, to offer
/// only the buttons that would work.
pub(crate) fn may_write(
    user: &SignedIn,
    kind: ObjectKind,
    change: Change,
) -> Result<(), PageError> {
    may_access(user, kind)?;
    check_write(&user.principal(), kind, change)?;
    Ok(())
}

fn parse_optional_id(text: &str, what: &str) -> Result<Option<u64>, PageError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    text.trim()
        .parse::<u64>()
        .map(Some)
        .map_err(|_| PageError::BadRequest(format!("{what} {text:?} is not an id")))
}

/// One choice of a select or a check box.
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

/// One field as the form shows it.
pub struct FieldView {
    pub name: &'static str,
    pub label: &'static str,
    pub help: &'static str,
    /// `text`, `textarea`, `number`, `datetime-local`, `select`, `checks` or `fixed`.
    pub input: &'static str,
    pub value: String,
    pub choices: Vec<Choice>,
    pub errors: Vec<String>,
    /// Shown before the input: the currency's symbol of an amount of money.
    pub unit: Option<String>,
    /// The unit applies only to a spend goal (the script shows it as the metric changes):
    /// whether it is one now.
    pub unit_for_spend: Option<bool>,
    /// For the progressive script: shown only when field `.0` has value `.1` (`*`: any).
    pub when: Option<(&'static str, &'static str)>,
}

/// One line of the error summary at the top of a refused form.
pub struct SummaryItem {
    /// The id of the field's input (or section) to link to; none for the object as a whole.
    pub anchor: Option<String>,
    pub label: String,
    pub message: String,
}

/// The error summary: errors about the object as a whole first, then each field's in the
/// form's order, then the frequency-cap and targeting sections.
fn summary(kind: ObjectKind, errors: &Errors) -> Vec<SummaryItem> {
    let mut order: Vec<(&str, &str)> = vec![("$", "")];
    order.extend(fields::fields(kind).iter().map(|f| (f.name, f.label)));
    if kind == ObjectKind::Creative {
        order.push((UPLOAD_FIELD, "Upload an image"));
    }
    order.push(("frequency_caps", "Frequency caps"));
    order.push(("targeting", "Targeting"));
    let mut items = Vec::new();
    for (name, label) in order {
        for message in errors.get(name).into_iter().flatten() {
            items.push(SummaryItem {
                anchor: (name != "$").then(|| format!("f-{name}")),
                label: label.to_owned(),
                message: message.clone(),
            });
        }
    }
    // Errors filed under a name the form does not show still appear, unlinked.
    for (name, messages) in errors {
        if name != "$"
            && name != UPLOAD_FIELD
            && name != "frequency_caps"
            && name != "targeting"
            && !fields::fields(kind).iter().any(|f| f.name == name)
        {
            items.extend(messages.iter().map(|message| SummaryItem {
                anchor: None,
                label: name.clone(),
                message: message.clone(),
            }));
        }
    }
    items
}

pub struct CapRow {
    pub count: String,
    pub window: String,
}

pub struct TargetingRowView {
    /// The row's place in the form, from 0: its choices are posted as `t_choice_{index}`.
    pub index: usize,
    pub attribute: String,
    pub exclude: bool,
    pub values: String,
    pub choices: Vec<targeting::ChoiceSelect>,
}

/// What a line item's page shows besides its form.
pub struct LineItemExtras {
    pub pacing: Option<crate::pages::PacingView>,
    pub linked: Vec<(u64, String)>,
    /// Placements an admin may link (id, label).
    pub linkable: Vec<(u64, String)>,
    /// What the API answers for it in `warnings`: geo targeting ad requests cannot match.
    pub warnings: Vec<String>,
    /// The creatives it serves: those uploaded under it, then those from the library.
    pub creatives: Vec<CreativeUseView>,
    /// The advertiser's creatives it could add from the library.
    pub library: Vec<LibraryChoice>,
    /// Whether the user may change its creatives (and copy it).
    pub can_edit: bool,
    /// Its time zone, in which flights are entered and shown.
    pub time_zone: String,
}

/// A creative as a line item uses it.
pub struct CreativeUseView {
    pub id: u64,
    pub name: String,
    pub size: String,
    pub weight: u32,
    /// "always", or the assignment's flight in the line item's time zone.
    pub flight: String,
    /// Whether it comes from the library (an assignment that can be removed), rather than
    /// uploaded under this line item.
    pub assigned: bool,
}

/// A creative of the advertiser that a line item may add from the library.
pub struct LibraryChoice {
    pub id: u64,
    pub name: String,
    pub size: String,
}

pub struct PlacementTags {
    pub asynchronous: String,
    pub iframe: String,
    pub image: String,
}

#[derive(Template)]
#[template(path = "object.html")]
struct ObjectPage {
    nav: Nav,
    title: String,
    kind_name: String,
    action: String,
    id: Option<u64>,
    version: u64,
    archived: bool,
    saved: bool,
    /// Every error of a refused form, in the form's order, each linking to its field.
    summary: Vec<SummaryItem>,
    fields: Vec<FieldView>,
    caps: Option<Vec<CapRow>>,
    caps_errors: Vec<String>,
    targeting: Option<Vec<TargetingRowView>>,
    targeting_json: Option<String>,
    targeting_errors: Vec<String>,
    attributes: &'static [(&'static str, &'static str)],
    multipart: bool,
    children: Option<(&'static str, &'static str)>,
    line_item: Option<LineItemExtras>,
    tags: Option<PlacementTags>,
    preview: Option<String>,
    /// Whether the form has a Save (or Create) button: false for archived objects and for
    /// what the user's role may only read.
    can_save: bool,
    can_archive: bool,
    /// The object's audit entries, newest first (the latest [`HISTORY_ROWS`]).
    history: Vec<HistoryRow>,
    /// Why a parent keeps it from serving though its own status is not archived.
    stopped_by: Option<String>,
    /// Warnings that do not refuse anything (a creative no reachable placement takes).
    notices: Vec<String>,
    /// A creative's line items: the one it was uploaded under, then those using it from the
    /// library (id, label).
    used_by: Vec<(u64, String)>,
    /// An image kept from a refused creative form.
    kept_upload: Option<KeptUpload>,
    upload_errors: Vec<String>,
    /// A creative's review by the publisher.
    approval: Option<crate::approval::ApprovalView>,
    /// Whether the form offers "Check availability" (line items the user may save).
    forecastable: bool,
    /// The answer of "Check availability", shown beside the form as posted.
    forecast: Option<crate::forecast::ForecastView>,
}

/// Where a form's values come from: a stored object's JSON, or a posted form.
enum Source<'a> {
    Stored(&'a Value),
    Posted(&'a FormData),
}

async fn parent_choices(
    dashboard: &Dashboard,
    user: &SignedIn,
    parent: ObjectKind,
    selected: &str,
) -> Result<Vec<Choice>, PageError> {
    let records = dashboard
        .store
        .list(
            parent,
            &ListQuery {
                scope: user.principal().scope(),
                limit: PARENT_CHOICES,
                ..ListQuery::default()
            },
        )
        .await?;
    let mut choices: Vec<Choice> = records
        .into_iter()
        .filter(|r| r.status != Status::Archived)
        .map(|r| Choice {
            selected: r.meta.id.to_string() == selected,
            value: r.meta.id.to_string(),
            label: format!("{} (#{})", r.name, r.meta.id),
        })
        .collect();
    // Without a valid parent asked for, none is picked: the browser would otherwise show
    // (and post) the first one as if chosen.
    if !choices.iter().any(|c| c.selected) {
        choices.insert(
            0,
            Choice {
                value: String::new(),
                label: format!("choose a {}", singular(parent)),
                selected: true,
            },
        );
    }
    Ok(choices)
}

/// The form's fields with their values and errors. `fixed_parent` shows the parent as text.
async fn field_views(
    dashboard: &Dashboard,
    user: &SignedIn,
    kind: ObjectKind,
    source: &Source<'_>,
    fixed_parent: Option<&Record>,
    errors: &Errors,
) -> Result<Vec<FieldView>, PageError> {
    let source_text = |name: &str| match source {
        Source::Stored(json) => fields::get_path(json, name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        Source::Posted(form) => form.get(name).to_owned(),
    };
    let symbol = Currency::try_from(source_text("price.currency").as_str())
        .ok()
        .map(Currency::symbol);
    let spend_goal = source_text("goal.metric") == "spend";
    let mut views = Vec::new();
    for f in fields::fields(kind) {
        let value = match source {
            Source::Stored(json) => fields::display(f.widget, fields::get_path(json, f.name)),
            Source::Posted(form) => form.get(f.name).to_owned(),
        };
        let checked = match source {
            Source::Stored(json) => fields::checked(fields::get_path(json, f.name)),
            Source::Posted(form) => form.all(f.name).into_iter().map(str::to_owned).collect(),
        };
        let options = |options: &[&str], with_none: bool| {
            let none = with_none.then(|| Choice {
                value: String::new(),
                label: "none".into(),
                selected: value.is_empty(),
            });
            none.into_iter()
                .chain(options.iter().map(|o| Choice {
                    value: (*o).to_owned(),
                    label: o.replace('_', " "),
                    selected: *o == value,
                }))
                .collect::<Vec<_>>()
        };
        let (input, choices) = match f.widget {
            Widget::Text | Widget::OptText | Widget::List | Widget::Sizes | Widget::OptSize => {
                ("text", Vec::new())
            }
            Widget::Money | Widget::GoalAmount => ("amount", Vec::new()),
            Widget::TextArea => ("textarea", Vec::new()),
            Widget::Number | Widget::OptNumber => ("number", Vec::new()),
            Widget::DateTime | Widget::OptDateTime => ("datetime-local", Vec::new()),
            Widget::Select(o) => ("select", options(o, false)),
            Widget::OptSelect(o) => ("select", options(o, true)),
            Widget::Checks(o) => (
                "checks",
                o.iter()
                    .map(|o| Choice {
                        value: (*o).to_owned(),
                        label: o.replace('_', " "),
                        selected: checked.iter().any(|c| c == o),
                    })
                    .collect(),
            ),
            Widget::Parent(parent) => match fixed_parent {
                Some(record) => (
                    "fixed",
                    vec![Choice {
                        value: record.meta.id.to_string(),
                        label: format!("{} (#{})", record.name, record.meta.id),
                        selected: true,
                    }],
                ),
                None => (
                    "select",
                    parent_choices(dashboard, user, parent, &value).await?,
                ),
            },
        };
        // What the publisher decides shows as text to a tenant, and posts back unchanged.
        let decided = user.role != Role::Admin
            && admin_fields(kind).contains(&f.name.split('.').next().unwrap_or(f.name));
        let (input, choices) = if decided {
            let unit = matches!(f.widget, Widget::Money | Widget::GoalAmount)
                .then(|| symbol.clone())
                .flatten()
                .filter(|_| !value.is_empty());
            let label = match (&unit, value.as_str()) {
                (_, "") => "none".to_owned(),
                (Some(unit), text) => format!("{unit}{text}"),
                (None, text) => text.replace('_', " "),
            };
            let choice = Choice {
                value: value.clone(),
                label,
                selected: true,
            };
            ("fixed", vec![choice])
        } else {
            (input, choices)
        };
        let when = match f.when {
            fields::When::Always => None,
            fields::When::Equals(other, v) => Some((other, v)),
            fields::When::NotEmpty(other) => Some((other, "*")),
        };
        views.push(FieldView {
            name: f.name,
            label: f.label,
            help: f.help,
            input,
            value,
            choices,
            errors: errors.get(f.name).cloned().unwrap_or_default(),
            unit: match f.widget {
                Widget::Money | Widget::GoalAmount => symbol.clone(),
                _ => None,
            },
            unit_for_spend: (f.widget == Widget::GoalAmount).then_some(spend_goal),
            when,
        });
    }
    Ok(views)
}

fn cap_rows(source: &Source<'_>) -> Vec<CapRow> {
    let mut rows: Vec<CapRow> = match source {
        Source::Stored(json) => json
            .get("frequency_caps")
            .and_then(Value::as_array)
            .map(|caps| {
                caps.iter()
                    .map(|c| CapRow {
                        count: c.get("count").map(Value::to_string).unwrap_or_default(),
                        window: c
                            .get("window")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        Source::Posted(form) => form
            .all("cap_count")
            .into_iter()
            .zip(form.all("cap_window"))
            .filter(|(c, w)| !c.is_empty() || !w.is_empty())
            .map(|(c, w)| CapRow {
                count: c.to_owned(),
                window: w.to_owned(),
            })
            .collect(),
    };
    rows.extend((0..BLANK_CAP_ROWS).map(|_| CapRow {
        count: String::new(),
        window: String::new(),
    }));
    rows
}

fn targeting_editor(source: &Source<'_>) -> targeting::Editor {
    match source {
        Source::Stored(json) => targeting::editor_for(json.get("targeting")),
        Source::Posted(form) => targeting::rows_of_form(form),
    }
}

/// Everything the object page needs apart from the kind-specific extras.
#[allow(clippy::too_many_arguments)]
async fn object_page(
    dashboard: &Dashboard,
    user: &SignedIn,
    kind: ObjectKind,
    record: Option<&Record>,
    source: Source<'_>,
    parent: Option<&Record>,
    errors: &Errors,
) -> Result<ObjectPage, PageError> {
    let mut fields = field_views(dashboard, user, kind, &source, parent, errors).await?;
    let archived = record.is_some_and(|r| r.status == Status::Archived);
    if archived {
        // The form's status choices are active and paused only: say archived as text.
        for field in fields.iter_mut().filter(|f| f.name == "status") {
            field.input = "fixed";
            field.choices = vec![Choice {
                value: "archived".into(),
                label: "archived".into(),
                selected: true,
            }];
        }
    }
    let stopped_by = match record {
        Some(r) if !archived => {
            crate::lists::Lineage::new(dashboard)
                .stopper(kind, r.parent_id)
                .await?
        }
        _ => None,
    };
    let editor = targeting_editor(&source);
    let blank = targeting::Row::default();
    let targeting_rows: Vec<TargetingRowView> = editor
        .rows
        .iter()
        .filter(|r| !r.attribute.is_empty() || !r.values.is_empty())
        .chain(std::iter::repeat_n(&blank, BLANK_TARGETING_ROWS))
        .enumerate()
        .map(|(index, r)| {
            let (choices, values) = r.choice_selects();
            TargetingRowView {
                index,
                attribute: r.attribute.clone(),
                exclude: r.exclude,
                values,
                choices,
            }
        })
        .collect();
    let error_list = |name: &str| errors.get(name).cloned().unwrap_or_default();
    let (title, action) = match record {
        Some(r) => (
            format!(
                "{} #{}: {}",
                capitalized(&singular(kind)),
                r.meta.id,
                r.name
            ),
            format!("/{}/{}", kind.collection(), r.meta.id),
        ),
        None => (
            format!("New {}", singular(kind)),
            format!("/{}", kind.collection()),
        ),
    };
    let children = match kind {
        ObjectKind::Advertiser => Some(("campaigns", "Campaigns")),
        ObjectKind::Campaign => Some(("line-items", "Line items")),
        ObjectKind::LineItem => Some(("creatives", "Creatives")),
        ObjectKind::Publisher => Some(("sites", "Sites")),
        ObjectKind::Site => Some(("placements", "Placements")),
        ObjectKind::Creative | ObjectKind::Placement => None,
    };
    Ok(ObjectPage {
        nav: Nav::new(user, kind.collection()),
        title,
        kind_name: singular(kind),
        action,
        id: record.map(|r| r.meta.id),
        version: record.map_or(0, |r| r.meta.version),
        archived,
        saved: false,
        summary: summary(kind, errors),
        fields,
        caps: fields::has_caps(kind).then(|| cap_rows(&source)),
        caps_errors: error_list("frequency_caps"),
        targeting: fields::has_targeting(kind).then_some(targeting_rows),
        targeting_json: editor.json,
        targeting_errors: error_list("targeting"),
        attributes: ATTRIBUTES,
        multipart: kind == ObjectKind::Creative,
        children: record.and(children),
        line_item: None,
        tags: None,
        preview: None,
        approval: None,
        can_save: match record {
            Some(r) => {
                r.status != Status::Archived && may_write(user, kind, Change::Update).is_ok()
            }
            None => may_write(user, kind, Change::Create).is_ok(),
        },
        can_archive: record.is_some_and(|r| r.status != Status::Archived)
            && may_write(user, kind, Change::Archive).is_ok(),
        history: match record {
            Some(r) => history(dashboard, user, kind, r.meta.id).await?,
            None => Vec::new(),
        },
        stopped_by,
        notices: Vec::new(),
        used_by: Vec::new(),
        kept_upload: match &source {
            Source::Posted(form) => kept_upload(form),
            Source::Stored(_) => None,
        },
        upload_errors: error_list(UPLOAD_FIELD),
        forecastable: kind == ObjectKind::LineItem && !archived,
        forecast: None,
    })
}

/// Entries the History section of an object page shows.
const HISTORY_ROWS: u32 = 50;

/// One audit entry on an object page: who, when, what, and each changed field.
struct HistoryRow {
    at: String,
    principal: String,
    action: &'static str,
    /// Field, before, after: compact JSON, money as the API shows it (decimal and micros).
    changes: Vec<(String, String, String)>,
}

async fn history(
    dashboard: &Dashboard,
    user: &SignedIn,
    kind: ObjectKind,
    id: u64,
) -> Result<Vec<HistoryRow>, PageError> {
    let principal = user.principal();
    let query = AuditQuery {
        scope: principal.role.side().zip(principal.scope()),
        object_kind: Some(kind.into()),
        object_id: Some(id),
        limit: HISTORY_ROWS,
        ..AuditQuery::default()
    };
    Ok(dashboard
        .store
        .audit(&query)
        .await?
        .into_iter()
        .map(|entry| {
            let changes = crate::audit::change_rows(kind.into(), &entry.changes);
            HistoryRow {
                at: entry.at.to_string(),
                principal: entry.principal,
                action: entry.action.as_str(),
                changes,
            }
        })
        .collect())
}

#[derive(Debug, Deserialize, Default)]
pub struct NewParams {
    #[serde(default)]
    parent: String,
}

pub async fn new_form(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Query(params): Query<NewParams>,
    kind: ObjectKind,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    may_write(&user, kind, Change::Create)?;
    let mut defaults = fields::defaults(kind);
    let parent = parse_optional_id(&params.parent, "parent").ok().flatten();
    if let (Some(field), Some(parent)) = (kind.parent_field(), parent)
        && let Value::Object(map) = &mut defaults
    {
        map.insert(field.to_owned(), parent.into());
    }
    if kind == ObjectKind::LineItem {
        // Priced in its advertiser's currency, which the API requires: the campaign's
        // advertiser's, or the signed-in advertiser's.
        let scope = user.principal().scope();
        let under = match parent {
            Some(campaign) => Some((ObjectKind::Campaign, campaign)),
            None => scope.map(|advertiser| (ObjectKind::Advertiser, advertiser)),
        };
        if let Some((under, id)) = under
            && let Some(currency) = currency_under(&*dashboard.store, under, id, scope).await?
            && let Some(price) = defaults.get_mut("price").and_then(Value::as_object_mut)
        {
            price.insert("currency".into(), currency.as_str().into());
        }
    }
    let page = object_page(
        &dashboard,
        &user,
        kind,
        None,
        Source::Stored(&defaults),
        None,
        &Errors::new(),
    )
    .await?;
    Ok(html(&page))
}

/// What every handler that writes an object starts with: the signed-in user, the form it
/// posted (its CSRF token checked), and the user's right to make `change` to objects of `kind`,
/// checked in that order.
pub(crate) async fn write_request(
    dashboard: &Dashboard,
    headers: &HeaderMap,
    body: &Bytes,
    kind: ObjectKind,
    change: Change,
) -> Result<(SignedIn, FormData), PageError> {
    let user = require_user(dashboard, headers).await?;
    let form = read_form(&user, headers, body)?;
    may_write(&user, kind, change)?;
    Ok((user, form))
}

/// Reads a posted object form, checking the CSRF token first.
pub(crate) fn read_form(
    user: &SignedIn,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<FormData, PageError> {
    let form = FormData::parse(headers, body).map_err(|e| PageError::BadRequest(e.to_string()))?;
    check_csrf(user, &form)?;
    Ok(form)
}

/// The draft of a valid object, read in one pass as the API reads it and checked against the
/// objects around it as the API checks it (the rule that amounts are in their advertiser's
/// currency), or the errors to show.
async fn draft_as<T: Object>(
    dashboard: &Dashboard,
    form: &FormData,
    fixed_parent: Option<u64>,
    errors: Errors,
    write: ObjectWrite,
    principal: &Principal,
) -> Result<Result<Draft, Errors>, PageError> {
    let scope = principal.scope();
    let object = match fields::read::<T>(form, fixed_parent, errors) {
        Ok(object) => object,
        Err(errors) => return Ok(Err(errors)),
    };
    let mut errors = Errors::new();
    // The role's rules as the API applies them: the publisher's fields (shown fixed to a
    // tenant, so sent back unchanged) and a creative's approval.
    let before = match write {
        ObjectWrite::Update(id) => Some(dashboard.store.get_object::<T>(id, scope).await?.object),
        ObjectWrite::Create => None,
    };
    let object = match govern_write(principal, before.as_ref(), object) {
        Ok(object) => object,
        Err(RuleError::Fields(refused)) => {
            fields::file_violations(T::KIND, &refused.violations(), &mut errors);
            return Ok(Err(errors));
        }
        Err(RuleError::Json(detail)) => return Err(PageError::Internal(detail)),
    };
    match check_currency(&*dashboard.store, &object, write, scope).await {
        Ok(()) => {}
        Err(CurrencyRuleError::Broken(broken)) => {
            fields::file_violations(T::KIND, &broken.violations, &mut errors);
            return Ok(Err(errors));
        }
        Err(CurrencyRuleError::Store(error)) => return Err(error.into()),
    }
    Ok(Draft::of(&object).map_err(|e| {
        add_error(&mut errors, "$", e.to_string());
        errors
    }))
}

// The same parameters as `draft_as`, deliberately: this only picks the object type for it.
async fn draft(
    dashboard: &Dashboard,
    kind: ObjectKind,
    form: &FormData,
    fixed_parent: Option<u64>,
    errors: Errors,
    write: ObjectWrite,
    principal: &Principal,
) -> Result<Result<Draft, Errors>, PageError> {
    let (d, f, p, e, w, s) = (dashboard, form, fixed_parent, errors, write, principal);
    match kind {
        ObjectKind::Advertiser => draft_as::<Advertiser>(d, f, p, e, w, s).await,
        ObjectKind::Campaign => draft_as::<Campaign>(d, f, p, e, w, s).await,
        ObjectKind::LineItem => draft_as::<LineItem>(d, f, p, e, w, s).await,
        ObjectKind::Creative => draft_as::<Creative>(d, f, p, e, w, s).await,
        ObjectKind::Publisher => draft_as::<Publisher>(d, f, p, e, w, s).await,
        ObjectKind::Site => draft_as::<Site>(d, f, p, e, w, s).await,
        ObjectKind::Placement => draft_as::<Placement>(d, f, p, e, w, s).await,
    }
}

/// An uploaded image whose URL the form already names, kept on disk only once the object
/// naming it has been stored: a refused form leaves no file behind.
struct PendingUpload {
    /// The file name: the content's SHA-256 and the type's extension, so an image uploaded
    /// twice is one file.
    name: String,
    bytes: Vec<u8>,
}

impl PendingUpload {
    async fn save(self, dashboard: &Dashboard) -> Result<(), PageError> {
        let dir = &dashboard.options.uploads_dir;
        let path = dir.join(&self.name);
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| PageError::Internal(format!("{}: {e}", dir.display())))?;
        tokio::fs::write(&path, &self.bytes)
            .await
            .map_err(|e| PageError::Internal(format!("{}: {e}", path.display())))
    }
}

/// Hidden fields that carry an image from a refused form to the next post (its file name,
/// its bytes in base64), since browsers do not refill file inputs.
const KEPT_NAME: &str = "kept_upload_name";
const KEPT_BYTES: &str = "kept_upload";
/// The largest image a refused form carries back (in base64 it must fit the next post).
const MAX_KEPT_BYTES: usize = 1 << 20;

/// An image kept from a refused form, as the form shows it again.
pub struct KeptUpload {
    pub name: String,
    pub base64: String,
    /// A `data:` URL to show it.
    pub data_url: String,
    /// `300×250`, when its header says.
    pub size: Option<String>,
}

/// The image kept in a posted form's hidden fields, if any and if it is an image.
fn kept_upload(form: &FormData) -> Option<KeptUpload> {
    use base64::Engine as _;
    let text = form.get(KEPT_BYTES);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    let kind = ImageType::sniff(&bytes)?;
    Some(KeptUpload {
        name: form.get(KEPT_NAME).to_owned(),
        base64: text.to_owned(),
        data_url: format!("data:{};base64,{text}", kind.content_type()),
        size: kind.dimensions(&bytes).map(|s| format!("{}×{}", s.w, s.h)),
    })
}

/// Takes an uploaded image out of the form (or the one a refused form kept) and puts its
/// public URL in its place; the file is written by [`PendingUpload::save`] after the store
/// accepted the creative. The type is read from the bytes, not the name; the image's width
/// and height fill an empty size and must match a given one (or a multiple of it, for
/// high-density screens).
fn take_upload(
    dashboard: &Dashboard,
    form: &mut FormData,
    errors: &mut Errors,
) -> Option<PendingUpload> {
    use base64::Engine as _;
    let (filename, bytes) = match form.upload.take() {
        Some(upload) => (upload.filename, upload.bytes),
        None => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(form.get(KEPT_BYTES))
                .ok()
                .filter(|b| !b.is_empty())?;
            (form.get(KEPT_NAME).to_owned(), bytes)
        }
    };
    form.fields
        .retain(|(k, _)| k != KEPT_NAME && k != KEPT_BYTES);
    let label = if filename.is_empty() {
        "The upload".to_owned()
    } else {
        format!("“{filename}”")
    };
    let Some(image) = ImageType::sniff(&bytes) else {
        let what = if std::str::from_utf8(&bytes).is_ok() {
            "text"
        } else {
            "some other kind of file"
        };
        add_error(
            errors,
            UPLOAD_FIELD,
            format!(
                "{label} is {what}, not an image: upload a PNG, JPEG, GIF or WebP file \
                 (the file's content decides, not its name)"
            ),
        );
        return None;
    };
    // Kept for the next post whatever else the form gets wrong, so it need not be chosen
    // again.
    if bytes.len() <= MAX_KEPT_BYTES {
        form.fields.push((KEPT_NAME.into(), filename.clone()));
        form.fields.push((
            KEPT_BYTES.into(),
            base64::engine::general_purpose::STANDARD.encode(&bytes),
        ));
    }
    match (image.dimensions(&bytes), form.get("size")) {
        (None, _) => add_error(
            errors,
            UPLOAD_FIELD,
            format!("{label}: its width and height cannot be read; the file may be damaged"),
        ),
        (Some(found), "") => {
            form.fields.retain(|(k, _)| k != "size");
            form.fields
                .push(("size".into(), format!("{}x{}", found.w, found.h)));
        }
        (Some(found), declared) => {
            if let Some(declared) = fields::parse_size_text(declared)
                && !upload::fits(found, declared)
            {
                add_error(
                    errors,
                    "size",
                    format!(
                        "the image is {}×{}, not {}×{} (or a multiple of it for \
                         high-density screens): fix the size or upload the right image",
                        found.w, found.h, declared.w, declared.h
                    ),
                );
            }
        }
    }
    let name = format!(
        "{}.{}",
        hex::encode(Sha256::digest(&bytes)),
        image.extension()
    );
    let url = format!(
        "{}/uploads/{name}",
        dashboard.options.public_url.trim_end_matches('/')
    );
    form.fields.retain(|(k, _)| k != "content.image_url");
    form.fields.push(("content.image_url".into(), url));
    form.fields.retain(|(k, _)| k != "content.type");
    form.fields.push(("content.type".into(), "image".into()));
    Some(PendingUpload { name, bytes })
}

/// A posted object ready for the store, and the image to keep once it is stored.
struct Posted {
    draft: Draft,
    upload: Option<PendingUpload>,
}

/// The JSON and draft a post describes, or the errors to show.
async fn read_object(
    dashboard: &Dashboard,
    user: &SignedIn,
    kind: ObjectKind,
    form: &mut FormData,
    fixed_parent: Option<u64>,
    write: ObjectWrite,
) -> Result<Result<Posted, Errors>, PageError> {
    let mut errors = Errors::new();
    let upload = if kind == ObjectKind::Creative {
        take_upload(dashboard, form, &mut errors)
    } else {
        None
    };
    let principal = user.principal();
    Ok(draft(
        dashboard,
        kind,
        form,
        fixed_parent,
        errors,
        write,
        &principal,
    )
    .await?
    .map(|draft| Posted { draft, upload }))
}

/// A store refusal that belongs next to a field (a parent that is gone, a stale version).
fn store_errors(kind: ObjectKind, error: StoreError) -> Result<Errors, PageError> {
    let mut errors = Errors::new();
    match error {
        StoreError::ParentNotFound { .. } | StoreError::ParentArchived { .. } => {
            add_error(
                &mut errors,
                kind.parent_field().unwrap_or("$"),
                error.to_string(),
            );
        }
        StoreError::VersionConflict { current, .. } => add_error(
            &mut errors,
            "$",
            format!(
                "someone changed it since you opened it (now version {current}); reload to see \
                 the changes, then edit again"
            ),
        ),
        StoreError::Archived { .. } | StoreError::ParentImmutable { .. } => {
            add_error(&mut errors, "$", error.to_string());
        }
        other => return Err(other.into()),
    }
    Ok(errors)
}

async fn invalid_form(
    dashboard: &Dashboard,
    user: &SignedIn,
    kind: ObjectKind,
    record: Option<&Record>,
    form: &FormData,
    errors: &Errors,
) -> Result<Response, PageError> {
    let parent = match record.and_then(|r| r.parent_id) {
        Some(parent) => Some(parent_record(dashboard, kind, parent).await?),
        None => None,
    };
    let mut page = object_page(
        dashboard,
        user,
        kind,
        record,
        Source::Posted(form),
        parent.as_ref(),
        errors,
    )
    .await?;
    if let Some(record) = record {
        page.version = record.meta.version;
    }
    Ok((StatusCode::UNPROCESSABLE_ENTITY, html(&page)).into_response())
}

/// The form field of the line item form's "Check availability" button, and its value.
const CHECK: &str = "check";
const CHECK_AVAILABILITY: &str = "availability";

/// The line item form as posted with the forecast of what it describes ("Check
/// availability"): nothing is saved and nothing typed is lost; a form that cannot be read
/// shows its errors as a save would.
async fn checked_form(
    dashboard: &Dashboard,
    user: &SignedIn,
    record: Option<&Record>,
    form: &FormData,
) -> Result<Response, PageError> {
    let kind = ObjectKind::LineItem;
    let fixed_parent = record.and_then(|r| r.parent_id);
    let line_item = match fields::read::<LineItem>(form, fixed_parent, Errors::new()) {
        Ok(line_item) => line_item,
        Err(errors) => return invalid_form(dashboard, user, kind, record, form, &errors).await,
    };
    let write = record.map_or(ObjectWrite::Create, |r| ObjectWrite::Update(r.meta.id));
    match check_currency(
        &*dashboard.store,
        &line_item,
        write,
        user.principal().scope(),
    )
    .await
    {
        Ok(()) => {}
        Err(CurrencyRuleError::Broken(broken)) => {
            let mut errors = Errors::new();
            fields::file_violations(kind, &broken.violations, &mut errors);
            return invalid_form(dashboard, user, kind, record, form, &errors).await;
        }
        Err(CurrencyRuleError::Store(error)) => return Err(error.into()),
    }
    let forecast =
        crate::forecast::availability(dashboard, user, record.map(|r| r.meta.id), line_item)
            .await?;
    let parent = match fixed_parent {
        Some(parent) => Some(parent_record(dashboard, kind, parent).await?),
        None => None,
    };
    let mut page = object_page(
        dashboard,
        user,
        kind,
        record,
        Source::Posted(form),
        parent.as_ref(),
        &Errors::new(),
    )
    .await?;
    if let Some(record) = record {
        page.version = record.meta.version;
        page.line_item = Some(line_item_extras(dashboard, user, record).await?);
    }
    page.forecast = Some(forecast);
    Ok(html(&page))
}

pub async fn create(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    body: Bytes,
    kind: ObjectKind,
) -> Result<Response, PageError> {
    let (user, mut form) = write_request(&dashboard, &headers, &body, kind, Change::Create).await?;
    if kind == ObjectKind::LineItem && form.get(CHECK) == CHECK_AVAILABILITY {
        return checked_form(&dashboard, &user, None, &form).await;
    }
    let errors = match read_object(
        &dashboard,
        &user,
        kind,
        &mut form,
        None,
        ObjectWrite::Create,
    )
    .await?
    {
        Ok(Posted { draft, upload }) => match dashboard
            .store
            .create(kind, draft, user.principal().scope(), &user.actor())
            .await
        {
            Ok(record) => {
                if let Some(upload) = upload {
                    upload.save(&dashboard).await?;
                }
                return Ok(Redirect::to(&format!(
                    "/{}/{}?saved=1",
                    kind.collection(),
                    record.meta.id
                ))
                .into_response());
            }
            Err(error) => store_errors(kind, error)?,
        },
        Err(errors) => errors,
    };
    invalid_form(&dashboard, &user, kind, None, &form, &errors).await
}

/// The parent of an object, read without scope: the object itself was already read in scope,
/// and a tenant's objects have parents of the same tenant.
async fn parent_record(
    dashboard: &Dashboard,
    kind: ObjectKind,
    parent_id: u64,
) -> Result<Record, PageError> {
    let parent_kind = kind
        .parent()
        .ok_or_else(|| PageError::Internal(format!("{} has no parent kind", kind.name())))?;
    Ok(dashboard.store.get(parent_kind, parent_id, None).await?)
}

#[derive(Debug, Deserialize, Default)]
pub struct ShowParams {
    #[serde(default)]
    saved: Option<String>,
}

pub async fn show(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    path: Path<String>,
    Query(params): Query<ShowParams>,
    kind: ObjectKind,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    may_access(&user, kind)?;
    let id = path_id(path)?;
    // Set by the redirect after a create or update.
    let saved = params.saved.is_some();
    let record = dashboard
        .store
        .get(kind, id, user.principal().scope())
        .await?;
    let mut json: Value = serde_json::from_str(&record.body)
        .map_err(|e| PageError::Internal(format!("{} {id}: {e}", kind.name())))?;
    // Amounts as people write them (`price.amount`, a spend goal's `daily`), as the API shows.
    marquee_api::amounts::present(kind, &mut json);
    let parent = match record.parent_id {
        Some(parent) => Some(parent_record(&dashboard, kind, parent).await?),
        None => None,
    };
    let mut page = object_page(
        &dashboard,
        &user,
        kind,
        Some(&record),
        Source::Stored(&json),
        parent.as_ref(),
        &Errors::new(),
    )
    .await?;
    page.saved = saved;
    match kind {
        ObjectKind::LineItem => {
            page.line_item = Some(line_item_extras(&dashboard, &user, &record).await?);
        }
        ObjectKind::Placement => {
            let placement: Placement = record.decode::<Placement>()?.object;
            let tags = marquee_api::tags(&dashboard.options.public_url, id, &placement);
            let text = |key: &str| {
                tags.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            page.tags = Some(PlacementTags {
                asynchronous: text("async"),
                iframe: text("iframe"),
                image: text("image"),
            });
        }
        ObjectKind::Creative => {
            let creative = record.decode::<Creative>()?.object;
            page.preview = Some(preview(&creative));
            page.used_by = used_by(&dashboard, &user, id, &creative).await?;
            page.approval = Some(crate::approval::ApprovalView::of(&user, &creative));
            page.notices
                .extend(size_notice(&dashboard, &user, &creative).await?);
        }
        _ => {}
    }
    Ok(html(&page))
}

/// A warning when no placement the creative's line item is linked to takes its size: it
/// is saved, but will not serve until one does.
async fn size_notice(
    dashboard: &Dashboard,
    user: &SignedIn,
    creative: &Creative,
) -> Result<Option<String>, PageError> {
    let Some(size) = creative.size else {
        return Ok(None);
    };
    let linked = dashboard
        .store
        .placements_of(creative.line_item_id, user.principal().scope())
        .await?;
    if linked.is_empty() {
        return Ok(Some(
            "Its line item is linked to no placement yet, so it cannot serve anywhere.".into(),
        ));
    }
    let mut sizes = Vec::new();
    for PlacementId(id) in linked {
        // The placement belongs to a publisher, read without the advertiser's scope; only
        // its sizes are shown.
        let placement = match dashboard.store.get(ObjectKind::Placement, id, None).await {
            Ok(record) => record.decode::<Placement>()?.object,
            Err(StoreError::NotFound { .. }) => continue,
            Err(other) => return Err(other.into()),
        };
        if placement.status != Status::Active {
            continue;
        }
        if placement.sizes.is_empty() || placement.sizes.contains(&size) {
            return Ok(None);
        }
        sizes.extend(placement.sizes);
    }
    sizes.sort_by_key(|s| (s.w, s.h));
    sizes.dedup();
    let list: Vec<String> = sizes.iter().map(|s| format!("{}×{}", s.w, s.h)).collect();
    Ok(Some(if list.is_empty() {
        "No active placement its line item is linked to can show it, so it does not serve."
            .to_owned()
    } else {
        format!(
            "No placement its line item reaches takes {}×{} (they take {}): it is saved but \
             will not serve until a placement of that size is linked.",
            size.w,
            size.h,
            list.join(", ")
        )
    }))
}

/// A document for the preview iframe: the creative as a browser would show it (macros left
/// as written). Shown with `sandbox` and no same-origin, so its script cannot reach the
/// dashboard.
fn preview(creative: &Creative) -> String {
    use marquee_model::CreativeContent as C;
    use marquee_snapshot::escape_html;
    let body = match &creative.content {
        C::Image { image_url, alt } => format!(
            "<img src=\"{}\" alt=\"{}\" style=\"max-width:100%\">",
            escape_html(image_url),
            escape_html(alt)
        ),
        C::Html { html } => html.clone(),
        C::ThirdPartyTag { tag } => tag.clone(),
        C::Native { title, body, .. } => format!(
            "<strong>{}</strong><p>{}</p>",
            escape_html(title),
            escape_html(body)
        ),
        C::Vast { .. } => "<p>VAST creative: preview in a video player.</p>".to_owned(),
    };
    format!("<!doctype html><html><body style=\"margin:0\">{body}</body></html>")
}

async fn line_item_extras(
    dashboard: &Dashboard,
    user: &SignedIn,
    record: &Record,
) -> Result<LineItemExtras, PageError> {
    let scope = user.principal().scope();
    let line_item = record.decode::<LineItem>()?;
    let linked_ids = dashboard
        .store
        .placements_of(LineItemId(record.meta.id), scope)
        .await?;
    let mut linked = Vec::new();
    for PlacementId(id) in linked_ids {
        // The placement belongs to a publisher: shown by id to tenants, by name to admins.
        let label = if user.is_admin() {
            dashboard
                .store
                .get(ObjectKind::Placement, id, None)
                .await
                .map_or_else(|_| format!("#{id}"), |p| format!("{} (#{id})", p.name))
        } else {
            format!("#{id}")
        };
        linked.push((id, label));
    }
    let linkable = if user.is_admin() {
        dashboard
            .store
            .list(
                ObjectKind::Placement,
                &ListQuery {
                    status: Some(Status::Active),
                    limit: PARENT_CHOICES,
                    ..ListQuery::default()
                },
            )
            .await?
            .into_iter()
            .filter(|p| !linked.iter().any(|(id, _)| *id == p.meta.id))
            .map(|p| (p.meta.id, format!("{} (#{})", p.name, p.meta.id)))
            .collect()
    } else {
        Vec::new()
    };
    let (creatives, library) = creative_uses(dashboard, user, record, &line_item.object).await?;
    Ok(LineItemExtras {
        pacing: crate::pages::pacing_view(dashboard, user, &line_item).await?,
        linked,
        linkable,
        warnings: dashboard
            .manager
            .geo_availability()
            .line_item_warnings(&line_item.object),
        creatives,
        library,
        can_edit: record.status != Status::Archived
            && may_write(user, ObjectKind::LineItem, Change::Update).is_ok(),
        time_zone: line_item.object.time_zone.clone(),
    })
}

/// The line items that use a creative: the one it was uploaded under, then the library's.
async fn used_by(
    dashboard: &Dashboard,
    user: &SignedIn,
    id: u64,
    creative: &Creative,
) -> Result<Vec<(u64, String)>, PageError> {
    let scope = user.principal().scope();
    let name = |record: Result<Record, StoreError>, id: u64| {
        record.map_or_else(|_| format!("line item {id}"), |r| r.name)
    };
    let home = creative.line_item_id.0;
    let home_name = name(
        dashboard.store.get(ObjectKind::LineItem, home, scope).await,
        home,
    );
    let mut lines = vec![(home, format!("{home_name} (uploaded here)"))];
    let time_zone = |record: &Result<Record, StoreError>| {
        record
            .as_ref()
            .ok()
            .and_then(|r| r.decode::<LineItem>().ok())
            .map_or_else(|| "UTC".to_owned(), |li| li.object.time_zone)
    };
    for a in dashboard
        .store
        .assignments_to(CreativeId(id), scope)
        .await?
    {
        let li = a.line_item_id.0;
        let record = dashboard.store.get(ObjectKind::LineItem, li, scope).await;
        let zone = time_zone(&record);
        lines.push((
            li,
            format!(
                "{}, weight {}, {}",
                name(record, li),
                a.weight,
                flight_label(&a, &zone)
            ),
        ));
    }
    Ok(lines)
}

fn size_label(creative: &Creative) -> String {
    creative
        .size
        .map_or_else(|| "any size".to_owned(), |s| format!("{}×{}", s.w, s.h))
}

/// An instant as the line item's time zone shows it: `2026-12-01 00:00`.
fn local_time(at: jiff::Timestamp, zone: &str) -> String {
    let zone = jiff::tz::TimeZone::get(zone).unwrap_or(jiff::tz::TimeZone::UTC);
    at.to_zoned(zone).strftime("%Y-%m-%d %H:%M").to_string()
}

fn flight_label(a: &CreativeAssignment, zone: &str) -> String {
    match (a.start, a.end) {
        (None, None) => "whenever the line item serves".to_owned(),
        (Some(start), None) => format!("from {}", local_time(start, zone)),
        (None, Some(end)) => format!("until {}", local_time(end, zone)),
        (Some(start), Some(end)) => {
            format!("{} to {}", local_time(start, zone), local_time(end, zone))
        }
    }
}

/// The creatives a line item serves (its own, then the library's) and the advertiser's others
/// it could add from the library, by name.
async fn creative_uses(
    dashboard: &Dashboard,
    user: &SignedIn,
    record: &Record,
    line_item: &LineItem,
) -> Result<(Vec<CreativeUseView>, Vec<LibraryChoice>), PageError> {
    let scope = user.principal().scope();
    let (own, _) = all_matching(
        dashboard,
        ObjectKind::Creative,
        ListQuery {
            scope,
            parent_id: Some(record.meta.id),
            ..ListQuery::default()
        },
    )
    .await?;
    let mut uses = Vec::new();
    for c in own.iter().filter(|c| c.status != Status::Archived) {
        let creative = c.decode::<Creative>()?.object;
        uses.push(CreativeUseView {
            id: c.meta.id,
            name: c.name.clone(),
            size: size_label(&creative),
            weight: creative.weight,
            flight: "whenever the line item serves".to_owned(),
            assigned: false,
        });
    }
    let assignments = dashboard
        .store
        .assignments_of(LineItemId(record.meta.id), scope)
        .await?;
    for a in &assignments {
        let c = dashboard
            .store
            .get_object::<Creative>(a.creative_id.0, scope)
            .await?;
        uses.push(CreativeUseView {
            id: a.creative_id.0,
            name: c.object.name.clone(),
            size: size_label(&c.object),
            weight: a.weight,
            flight: flight_label(a, &line_item.time_zone),
            assigned: true,
        });
    }
    // The library: the advertiser's creatives, whichever line item they were uploaded under.
    let (all, _) = all_matching(
        dashboard,
        ObjectKind::Creative,
        ListQuery {
            scope: Some(record.owner_id),
            ..ListQuery::default()
        },
    )
    .await?;
    let mut library = Vec::new();
    for c in all {
        if c.status == Status::Archived || uses.iter().any(|u| u.id == c.meta.id) {
            continue;
        }
        let creative = c.decode::<Creative>()?.object;
        library.push(LibraryChoice {
            id: c.meta.id,
            size: size_label(&creative),
            name: c.name,
        });
    }
    library.sort_by_key(|c| c.name.to_lowercase());
    Ok((uses, library))
}

/// A `datetime-local` value in the line item's time zone, or `None` when empty.
fn read_local_time(
    text: &str,
    zone: &str,
    what: &str,
) -> Result<Option<jiff::Timestamp>, PageError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || PageError::BadRequest(format!("{what} {text:?} is not a date and time"));
    let civil: jiff::civil::DateTime = text.parse().map_err(|_| bad())?;
    let zone = jiff::tz::TimeZone::get(zone).map_err(|e| PageError::Internal(e.to_string()))?;
    Ok(Some(civil.to_zoned(zone).map_err(|_| bad())?.timestamp()))
}

/// `POST /line-items/{id}/creatives`: add a library creative (`creative`, `weight`, `start`,
/// `end` in the line item's time zone), or with `remove` set, stop using it.
pub async fn assign_creative(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (user, form) = write_request(
        &dashboard,
        &headers,
        &body,
        ObjectKind::LineItem,
        Change::Update,
    )
    .await?;
    let id = path_id(path)?;
    let scope = user.principal().scope();
    let creative = parse_optional_id(form.get("creative"), "creative")?
        .ok_or_else(|| PageError::BadRequest("choose a creative".into()))?;
    if !form.get("remove").is_empty() {
        dashboard
            .store
            .unassign(LineItemId(id), CreativeId(creative), scope, &user.actor())
            .await?;
        return Ok(Redirect::to(&format!("/line-items/{id}#creatives")).into_response());
    }
    let line_item = dashboard.store.get_object::<LineItem>(id, scope).await?;
    let zone = &line_item.object.time_zone;
    let weight = match form.get("weight").trim() {
        "" => 100,
        text => text
            .parse()
            .map_err(|_| PageError::BadRequest(format!("weight {text:?} is not a number")))?,
    };
    let assignment = CreativeAssignment {
        line_item_id: LineItemId(id),
        creative_id: CreativeId(creative),
        weight,
        start: read_local_time(form.get("start"), zone, "start")?,
        end: read_local_time(form.get("end"), zone, "end")?,
    };
    assignment
        .validate()
        .map_err(|e| PageError::BadRequest(e.to_string()))?;
    dashboard
        .store
        .assign(assignment, scope, &user.actor())
        .await?;
    Ok(Redirect::to(&format!("/line-items/{id}#creatives")).into_response())
}

/// `POST /line-items/{id}/copy`: a paused copy sharing its placements and creatives (the
/// API's `copy_line_item`), then its page.
pub async fn copy_line_item(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (user, _) = write_request(
        &dashboard,
        &headers,
        &body,
        ObjectKind::LineItem,
        Change::Create,
    )
    .await?;
    let id = path_id(path)?;
    let copy = marquee_api::copy_line_item(
        &*dashboard.store,
        LineItemId(id),
        None,
        user.principal().scope(),
        &user.actor(),
    )
    .await?;
    Ok(Redirect::to(&format!("/line-items/{}?saved=1", copy.meta.id)).into_response())
}

pub async fn update(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    path: Path<String>,
    body: Bytes,
    kind: ObjectKind,
) -> Result<Response, PageError> {
    let (user, mut form) = write_request(&dashboard, &headers, &body, kind, Change::Update).await?;
    let id = path_id(path)?;
    let scope = user.principal().scope();
    let record = dashboard.store.get(kind, id, scope).await?;
    let version = form
        .get("version")
        .parse::<u64>()
        .map_err(|_| PageError::BadRequest("the form has no version".into()))?;
    if kind == ObjectKind::LineItem && form.get(CHECK) == CHECK_AVAILABILITY {
        return checked_form(&dashboard, &user, Some(&record), &form).await;
    }
    let write = ObjectWrite::Update(id);
    let errors = match read_object(&dashboard, &user, kind, &mut form, record.parent_id, write)
        .await?
    {
        Ok(Posted { draft, upload }) => match dashboard
            .store
            .update(kind, id, version, draft, scope, &user.actor())
            .await
        {
            Ok(_) => {
                if let Some(upload) = upload {
                    upload.save(&dashboard).await?;
                }
                return Ok(
                    Redirect::to(&format!("/{}/{id}?saved=1", kind.collection())).into_response(),
                );
            }
            Err(error) => store_errors(kind, error)?,
        },
        Err(errors) => errors,
    };
    invalid_form(&dashboard, &user, kind, Some(&record), &form, &errors).await
}

/// `POST /line-items/{id}/placements`: link (or with `unlink` set, unlink) a placement.
/// Admins only, as in the API: a link joins one tenant's demand to another's supply.
pub async fn link_placement(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let user = require_admin(
        &dashboard,
        &headers,
        "only an admin can link line items to placements",
    )
    .await?;
    let form = read_form(&user, &headers, &body)?;
    let id = path_id(path)?;
    let placement = parse_optional_id(form.get("placement"), "placement")?
        .ok_or_else(|| PageError::BadRequest("choose a placement".into()))?;
    let (line_item, placement) = (LineItemId(id), PlacementId(placement));
    if form.get("unlink").is_empty() {
        dashboard
            .store
            .link(line_item, placement, &user.actor())
            .await?;
    } else {
        dashboard
            .store
            .unlink(line_item, placement, &user.actor())
            .await?;
    }
    Ok(Redirect::to(&format!("/line-items/{id}#placements")).into_response())
}

/// `GET /uploads/{file}`: an uploaded creative image (public, as ads are).
pub async fn uploaded(
    State(dashboard): State<Arc<Dashboard>>,
    Path(file): Path<String>,
) -> Response {
    let not_found = || (StatusCode::NOT_FOUND, "no such upload\n").into_response();
    let Some((hash, extension)) = file.split_once('.') else {
        return not_found();
    };
    let content_type = match extension {
        "png" => "image/png",
        "jpg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return not_found(),
    };
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return not_found();
    }
    match tokio::fs::read(dashboard.options.uploads_dir.join(&file)).await {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            bytes,
        )
            .into_response(),
        Err(_) => not_found(),
    }
}
