//! The object lists a trafficker scans: per kind the columns that matter (flight, goal,
//! delivery against the curve, pacing verdict, tier, price in the advertiser's currency), the
//! parent by name, the status as it serves (a child of an archived or paused parent is
//! stopped), sortable by any column, searchable by name and filterable by the parent's name.
//!
//! Also [`Lineage`]: the chain of parents of an object, which object pages use to say that
//! a parent stops it.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use marquee_api::{Change, check_name_filter};
use marquee_model::{Approval, Creative, LineItem, ObjectKind, Placement, Site, Status};
use marquee_store::{ListQuery, MAX_PAGE, Record};
use serde::Deserialize;

use crate::objects::{may_write, singular, title};
use crate::{Dashboard, Nav, PageError, SignedIn, html, may_access, require_user};

/// Rows per list page.
const PAGE_ROWS: usize = 50;
/// The most matches a list sorts and filters: past it the page says to narrow the search.
const LIST_CAP: usize = 5_000;
/// Most parent names offered by the parent filter's autocomplete.
const PARENT_SUGGESTIONS: u32 = 500;

#[derive(Debug, Deserialize, Default)]
pub struct ListParams {
    #[serde(default)]
    q: String,
    #[serde(default)]
    status: String,
    /// The parent: its id, or a part of its name.
    #[serde(default)]
    parent: String,
    /// A column's key, `-` before it for descending.
    #[serde(default)]
    sort: String,
    #[serde(default)]
    page: String,
    /// Creatives only: `pending`, `rejected` or `approved` (the publisher's review queue).
    #[serde(default)]
    approval: String,
}

/// How a row serves: its own status, unless a parent stops it.
#[derive(Debug, Clone, PartialEq)]
pub struct Serving {
    /// `active`, `paused`, `archived` or `stopped` (by a parent).
    pub label: &'static str,
    /// Why a parent stops it: `campaign “Spring” is archived`.
    pub reason: Option<String>,
}

impl Serving {
    fn of(own: Status, stopper: Option<String>) -> Serving {
        match (own, stopper) {
            (Status::Active | Status::Paused, Some(reason)) => Serving {
                label: "stopped",
                reason: Some(reason),
            },
            (status, _) => Serving {
                label: status.as_str(),
                reason: None,
            },
        }
    }
}

/// The parents of objects, read once each: names for the lists and the first parent that is
/// not active, which stops every object under it.
pub struct Lineage<'a> {
    dashboard: &'a Dashboard,
    known: HashMap<(ObjectKind, u64), Option<Record>>,
}

impl<'a> Lineage<'a> {
    pub fn new(dashboard: &'a Dashboard) -> Self {
        Lineage {
            dashboard,
            known: HashMap::new(),
        }
    }

    /// The record, read without scope: callers only ask for parents of objects already read
    /// in scope, and a tenant's objects have parents of the same tenant.
    async fn get(&mut self, kind: ObjectKind, id: u64) -> Result<Option<&Record>, PageError> {
        if !self.known.contains_key(&(kind, id)) {
            let record = match self.dashboard.store.get(kind, id, None).await {
                Ok(record) => Some(record),
                Err(marquee_store::StoreError::NotFound { .. }) => None,
                Err(other) => return Err(other.into()),
            };
            self.known.insert((kind, id), record);
        }
        Ok(self.known.get(&(kind, id)).and_then(Option::as_ref))
    }

    /// The parent's name, when it has one.
    pub async fn parent_name(
        &mut self,
        kind: ObjectKind,
        parent: Option<u64>,
    ) -> Result<Option<String>, PageError> {
        let (Some(parent_kind), Some(id)) = (kind.parent(), parent) else {
            return Ok(None);
        };
        Ok(self.get(parent_kind, id).await?.map(|r| r.name.clone()))
    }

    /// The nearest parent (or grandparent, …) that is paused or archived, as a reason:
    /// `site “News” is archived`.
    pub async fn stopper(
        &mut self,
        kind: ObjectKind,
        parent: Option<u64>,
    ) -> Result<Option<String>, PageError> {
        let (mut kind, mut parent) = (kind, parent);
        while let (Some(parent_kind), Some(id)) = (kind.parent(), parent) {
            let Some(record) = self.get(parent_kind, id).await? else {
                return Ok(None);
            };
            if record.status != Status::Active {
                return Ok(Some(format!(
                    "its {} “{}” is {}",
                    singular(parent_kind),
                    record.name,
                    record.status.as_str()
                )));
            }
            (kind, parent) = (parent_kind, record.parent_id);
        }
        Ok(None)
    }

    /// How an object serves, its parents considered.
    pub async fn serving(&mut self, record: &Record) -> Result<Serving, PageError> {
        let stopper = self.stopper(record.kind, record.parent_id).await?;
        Ok(Serving::of(record.status, stopper))
    }
}

/// What a cell sorts by.
#[derive(Debug, Clone, PartialEq)]
enum SortKey {
    Text(String),
    Number(f64),
    /// No value: last in either direction.
    Missing,
}

impl SortKey {
    fn text(text: &str) -> SortKey {
        SortKey::Text(text.to_lowercase())
    }

    fn compare(&self, other: &SortKey, descending: bool) -> Ordering {
        let ordered = |o: Ordering| if descending { o.reverse() } else { o };
        match (self, other) {
            (SortKey::Missing, SortKey::Missing) => Ordering::Equal,
            (SortKey::Missing, _) => Ordering::Greater,
            (_, SortKey::Missing) => Ordering::Less,
            (SortKey::Number(a), SortKey::Number(b)) => ordered(a.total_cmp(b)),
            (SortKey::Text(a), SortKey::Text(b)) => ordered(a.cmp(b)),
            (SortKey::Number(_), SortKey::Text(_)) => ordered(Ordering::Less),
            (SortKey::Text(_), SortKey::Number(_)) => ordered(Ordering::Greater),
        }
    }
}

/// One cell of a list.
pub struct Cell {
    pub text: String,
    /// A link the text leads to.
    pub href: Option<String>,
    /// A CSS class for the text (`status active`, `pace behind`), empty for none.
    pub class: String,
    /// Shown under the text, smaller: why a parent stops the row.
    pub note: Option<String>,
    sort: SortKey,
}

impl Cell {
    fn plain(text: String, sort: SortKey) -> Cell {
        Cell {
            text,
            href: None,
            class: String::new(),
            note: None,
            sort,
        }
    }

    fn text(text: String) -> Cell {
        let sort = if text.is_empty() {
            SortKey::Missing
        } else {
            SortKey::text(&text)
        };
        Cell::plain(text, sort)
    }

    fn missing() -> Cell {
        Cell::plain("—".into(), SortKey::Missing)
    }
}

/// A column: its key in `sort=`, its heading, whether it holds numbers (right-aligned).
#[derive(Debug, Clone, Copy)]
struct Column {
    key: &'static str,
    label: &'static str,
    numeric: bool,
}

const fn column(key: &'static str, label: &'static str, numeric: bool) -> Column {
    Column {
        key,
        label,
        numeric,
    }
}

const ADVERTISER_COLUMNS: &[Column] = &[
    column("currency", "currency", false),
    column("time_zone", "time zone", false),
];
/// The last three come from pacing (see [`pacing_cells`]).
const LINE_ITEM_COLUMNS: &[Column] = &[
    column("flight", "flight", false),
    column("tier", "tier", false),
    column("price", "price", true),
    column("goal", "goal", false),
    column("delivered", "delivered / expected", true),
    column("pacing", "pacing", false),
];
const CREATIVE_COLUMNS: &[Column] = &[column("type", "type", false), column("size", "size", false)];
const SITE_COLUMNS: &[Column] = &[column("domain", "domain", false)];
const PLACEMENT_COLUMNS: &[Column] = &[
    column("sizes", "sizes", false),
    column("formats", "formats", false),
];

/// The columns of a kind after id, name, status and parent.
fn extra_columns(kind: ObjectKind) -> &'static [Column] {
    match kind {
        ObjectKind::Advertiser => ADVERTISER_COLUMNS,
        ObjectKind::LineItem => LINE_ITEM_COLUMNS,
        ObjectKind::Creative => CREATIVE_COLUMNS,
        ObjectKind::Site => SITE_COLUMNS,
        ObjectKind::Placement => PLACEMENT_COLUMNS,
        ObjectKind::Campaign | ObjectKind::Publisher => &[],
    }
}

/// Every column of a kind's list, in order.
fn columns(kind: ObjectKind) -> Vec<Column> {
    let mut columns = vec![
        column("id", "id", true),
        column("name", "name", false),
        column("status", "status", false),
    ];
    if let Some(parent) = kind.parent() {
        columns.push(Column {
            key: "parent",
            label: parent_label(parent),
            numeric: false,
        });
    }
    if let Some(child) = child_kind(kind) {
        columns.push(Column {
            key: "children",
            label: children_label(child),
            numeric: true,
        });
    }
    columns.extend_from_slice(extra_columns(kind));
    columns
}

/// The kind directly under `kind`, if any.
pub(crate) fn child_kind(kind: ObjectKind) -> Option<ObjectKind> {
    match kind {
        ObjectKind::Advertiser => Some(ObjectKind::Campaign),
        ObjectKind::Campaign => Some(ObjectKind::LineItem),
        ObjectKind::LineItem => Some(ObjectKind::Creative),
        ObjectKind::Publisher => Some(ObjectKind::Site),
        ObjectKind::Site => Some(ObjectKind::Placement),
        ObjectKind::Creative | ObjectKind::Placement => None,
    }
}

/// The heading of the count of active children (`active creatives`: none means a line item
/// has nothing to serve).
fn children_label(child: ObjectKind) -> &'static str {
    match child {
        ObjectKind::Campaign => "active campaigns",
        ObjectKind::LineItem => "active line items",
        ObjectKind::Creative => "active creatives",
        ObjectKind::Site => "active sites",
        ObjectKind::Placement => "active placements",
        ObjectKind::Advertiser | ObjectKind::Publisher => "",
    }
}

/// How many active children each parent has, counted over every active child in scope.
async fn active_children(
    dashboard: &Dashboard,
    child: ObjectKind,
    scope: Option<u64>,
) -> Result<HashMap<u64, usize>, PageError> {
    let query = ListQuery {
        scope,
        status: Some(Status::Active),
        ..ListQuery::default()
    };
    let (children, _) = all_matching(dashboard, child, query).await?;
    let mut counts = HashMap::new();
    for parent in children.iter().filter_map(|c| c.parent_id) {
        *counts.entry(parent).or_insert(0) += 1;
    }
    Ok(counts)
}

fn parent_label(parent: ObjectKind) -> &'static str {
    match parent {
        ObjectKind::Advertiser => "advertiser",
        ObjectKind::Campaign => "campaign",
        ObjectKind::LineItem => "line item",
        ObjectKind::Creative => "creative",
        ObjectKind::Publisher => "publisher",
        ObjectKind::Site => "site",
        ObjectKind::Placement => "placement",
    }
}

/// A serde enum's name as the API writes it (`sponsorship`, `cpm`).
fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        _ => String::new(),
    }
}

fn size_text(size: marquee_model::Size) -> String {
    format!("{}×{}", size.w, size.h)
}

/// The cells of the kind-specific columns whose values are in the object itself.
fn object_cells(record: &Record) -> Result<Vec<Cell>, PageError> {
    Ok(match record.kind {
        ObjectKind::Advertiser => {
            let advertiser = record.decode::<marquee_model::Advertiser>()?.object;
            vec![
                Cell::text(advertiser.currency.as_str().to_owned()),
                Cell::text(advertiser.time_zone),
            ]
        }
        ObjectKind::LineItem => {
            let line_item = record.decode::<LineItem>()?.object;
            // Midnights (most flights) as dates alone, to keep the column narrow.
            let format = |t: jiff::civil::DateTime| {
                if t.time() == jiff::civil::Time::midnight() {
                    t.strftime("%Y-%m-%d").to_string()
                } else {
                    t.strftime("%Y-%m-%d %H:%M").to_string()
                }
            };
            let flight = match line_item.end {
                Some(end) => format!("{} → {}", format(line_item.start), format(end)),
                None => format!("{} → open", format(line_item.start)),
            };
            let price = &line_item.price;
            let micros = price.amount_micros;
            vec![
                Cell::plain(
                    flight,
                    SortKey::text(&line_item.start.strftime("%Y-%m-%d %H:%M").to_string()),
                ),
                Cell::plain(
                    wire_name(&line_item.tier),
                    // Tiers sort by rank (sponsorship first when descending), not by name.
                    SortKey::Number(line_item.tier as u8 as f64),
                ),
                Cell::plain(
                    format!(
                        "{} {}",
                        crate::pages::money(Some(price.currency), micros.0 as f64),
                        wire_name(&price.model).to_uppercase()
                    ),
                    SortKey::Number(micros.0 as f64),
                ),
            ]
        }
        ObjectKind::Creative => {
            let creative = record.decode::<Creative>()?.object;
            let content = serde_json::to_value(&creative.content).unwrap_or_default();
            vec![
                Cell::text(
                    content
                        .get("type")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("")
                        .replace('_', " "),
                ),
                creative
                    .size
                    .map_or_else(Cell::missing, |s| Cell::text(size_text(s))),
            ]
        }
        ObjectKind::Site => vec![Cell::text(record.decode::<Site>()?.object.domain)],
        ObjectKind::Placement => {
            let placement = record.decode::<Placement>()?.object;
            let join = |items: Vec<String>| items.join(", ");
            vec![
                Cell::text(join(placement.sizes.into_iter().map(size_text).collect())),
                Cell::text(join(placement.formats.iter().map(wire_name).collect())),
            ]
        }
        ObjectKind::Campaign | ObjectKind::Publisher => Vec::new(),
    })
}

/// The pacing cells of a line item (goal, delivered against the curve, verdict), from the
/// same view as its page.
async fn pacing_cells(
    dashboard: &Dashboard,
    user: &SignedIn,
    record: &Record,
    serving: &Serving,
) -> Result<Vec<Cell>, PageError> {
    let line_item = record.decode::<LineItem>()?;
    let Some(view) = crate::pages::pacing_view(dashboard, user, &line_item).await? else {
        return Ok(vec![Cell::missing(), Cell::missing(), Cell::missing()]);
    };
    let share = view.share_ratio;
    let delivered = match &view.share {
        Some(share) => format!("{} / {} ({share})", view.delivered, view.target),
        None => format!("{} / {}", view.delivered, view.target),
    };
    Ok(vec![
        Cell::text(format!("{} {}", view.metric, view.goal)),
        Cell::plain(delivered, share.map_or(SortKey::Missing, SortKey::Number)),
        // A line item that does not serve (paused, archived, or stopped by a parent) is not
        // behind or ahead of anything: it says so rather than the curve's verdict.
        if serving.label == "active" {
            Cell {
                class: format!("pace {}", view.status_class),
                note: forecast_note(dashboard, record),
                ..Cell::text(view.status.to_owned())
            }
        } else {
            Cell {
                class: "pace stopped".into(),
                ..Cell::text(format!("not serving ({})", serving.label))
            }
        },
    ])
}

/// The delivery forecast of a line item over the next days, once the forecasting service has
/// computed it in the background (none before: the list never waits for a forecast).
fn forecast_note(dashboard: &Dashboard, record: &Record) -> Option<String> {
    let status = dashboard
        .manager
        .forecasts()?
        .status(marquee_model::LineItemId(record.meta.id))?;
    Some(format!("forecast: {}", status.as_str().replace('_', " ")))
}

struct Row {
    record: Record,
    serving: Serving,
    parent_name: Option<String>,
    cells: Vec<Cell>,
}

/// A column heading: a link that sorts by it (again: the other way).
pub struct Heading {
    pub label: &'static str,
    pub href: String,
    /// `ascending`, `descending` or `none`, for `aria-sort`.
    pub sorted: &'static str,
    pub numeric: bool,
}

#[derive(Template)]
#[template(path = "list.html")]
struct ListPage {
    nav: Nav,
    title: &'static str,
    collection: &'static str,
    parent_label: &'static str,
    /// Parent names for the parent filter's autocomplete.
    parent_names: Vec<String>,
    q: String,
    status: String,
    parent: String,
    /// The approval filter, offered on the creatives list only.
    approval: Option<String>,
    sort: String,
    headings: Vec<Heading>,
    /// Each row's cells, in the headings' order.
    rows: Vec<Vec<Cell>>,
    /// Each row's id and name, in the rows' order: what its checkbox selects.
    row_ids: Vec<(u64, String)>,
    /// Whether the user may pause, resume or archive these objects: the rows get checkboxes
    /// and the action bar.
    can_bulk: bool,
    numeric: Vec<bool>,
    matches: usize,
    capped: bool,
    cap: usize,
    previous: Option<String>,
    next: Option<String>,
    can_create: bool,
    /// The parent id to create under, when the filter names one parent.
    new_parent: Option<u64>,
}

/// Every record matching the store's filters, up to [`LIST_CAP`] (and whether it stopped
/// there).
pub(crate) async fn all_matching(
    dashboard: &Dashboard,
    kind: ObjectKind,
    mut query: ListQuery,
) -> Result<(Vec<Record>, bool), PageError> {
    let mut records = Vec::new();
    query.limit = MAX_PAGE;
    loop {
        let page = dashboard.store.list(kind, &query).await?;
        let full = page.len() == MAX_PAGE as usize;
        query.after = page.last().map(|r| r.meta.id);
        records.extend(page);
        if records.len() >= LIST_CAP {
            records.truncate(LIST_CAP);
            return Ok((records, true));
        }
        if !full {
            return Ok((records, false));
        }
    }
}

fn list_url(collection: &str, params: &[(&str, &str)]) -> String {
    let kept: Vec<(&str, &str)> = params
        .iter()
        .copied()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    match serde_urlencoded::to_string(kept) {
        Ok(query) if !query.is_empty() => format!("/{collection}?{query}"),
        _ => format!("/{collection}"),
    }
}

pub async fn list(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Query(params): Query<ListParams>,
    kind: ObjectKind,
) -> Result<Response, PageError> {
    let user = require_user(&dashboard, &headers).await?;
    may_access(&user, kind)?;
    let status = params.status.as_str();
    if !matches!(status, "" | "active" | "paused" | "archived" | "stopped") {
        return Err(PageError::BadRequest(format!("{status:?} is not a status")));
    }
    check_name_filter(&params.q)?;
    let approval = params.approval.as_str();
    if !approval.is_empty()
        && (kind != ObjectKind::Creative || !Approval::STATES.contains(&approval))
    {
        return Err(PageError::BadRequest(format!(
            "{approval:?} is not an approval state of this list"
        )));
    }
    let columns = columns(kind);
    let (sort_key, descending) = match params.sort.strip_prefix('-') {
        Some(key) => (key, true),
        None => (params.sort.as_str(), false),
    };
    let sort_index = match sort_key {
        "" => 0,
        key => columns.iter().position(|c| c.key == key).ok_or_else(|| {
            PageError::BadRequest(format!("{key:?} is not a column of this list"))
        })?,
    };
    let page_number = match params.page.trim() {
        "" => 1,
        text => text
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| PageError::BadRequest(format!("page {text:?} is not a number")))?,
    };
    let parent_filter = params.parent.trim();
    let parent_id = parent_filter.parse::<u64>().ok();
    let scope = user.principal().scope();
    let (records, capped) = all_matching(
        &dashboard,
        kind,
        ListQuery {
            scope,
            // Paused and archived are the row's own; active and stopped depend on parents.
            status: match status {
                "paused" => Some(Status::Paused),
                "archived" => Some(Status::Archived),
                _ => None,
            },
            parent_id,
            name_contains: Some(params.q.trim().to_owned()).filter(|q| !q.is_empty()),
            ..ListQuery::default()
        },
    )
    .await?;

    let mut lineage = Lineage::new(&dashboard);
    let needle = parent_filter.to_lowercase();
    let mut rows = Vec::new();
    for record in records {
        let parent_name = lineage.parent_name(kind, record.parent_id).await?;
        if parent_id.is_none()
            && !needle.is_empty()
            && !parent_name
                .as_deref()
                .is_some_and(|name| name.to_lowercase().contains(&needle))
        {
            continue;
        }
        if !approval.is_empty() && approval_state(&record)? != approval {
            continue;
        }
        let serving = lineage.serving(&record).await?;
        let keep = match status {
            "active" | "stopped" => serving.label == status,
            _ => true,
        };
        if keep {
            rows.push(Row {
                record,
                serving,
                parent_name,
                cells: Vec::new(),
            });
        }
    }

    // The pacing columns come from reports: computed for every row only to sort by them.
    let pacing_from = columns.len() - 3;
    let sorts_by_pacing = kind == ObjectKind::LineItem && sort_index >= pacing_from;
    let children = match child_kind(kind) {
        Some(child) => Some(active_children(&dashboard, child, scope).await?),
        None => None,
    };
    for row in &mut rows {
        row.cells = base_cells(kind, row);
        if let Some(counts) = &children {
            let n = counts.get(&row.record.meta.id).copied().unwrap_or(0);
            row.cells
                .push(Cell::plain(n.to_string(), SortKey::Number(n as f64)));
        }
        row.cells.extend(object_cells(&row.record)?);
        if sorts_by_pacing {
            row.cells
                .extend(pacing_cells(&dashboard, &user, &row.record, &row.serving).await?);
        }
    }
    if sort_index != 0 || descending {
        rows.sort_by(|a, b| {
            let (x, y) = (&a.cells[sort_index].sort, &b.cells[sort_index].sort);
            x.compare(y, descending)
                .then(a.record.meta.id.cmp(&b.record.meta.id))
        });
    }
    let matches = rows.len();
    let mut shown: Vec<Row> = rows
        .into_iter()
        .skip((page_number - 1) * PAGE_ROWS)
        .take(PAGE_ROWS)
        .collect();
    if kind == ObjectKind::LineItem && !sorts_by_pacing {
        for row in &mut shown {
            row.cells
                .extend(pacing_cells(&dashboard, &user, &row.record, &row.serving).await?);
        }
    }

    let collection = kind.collection();
    let base = [
        ("q", params.q.as_str()),
        ("status", status),
        ("parent", parent_filter),
        ("approval", approval),
    ];
    let url_with = |extra: &[(&str, &str)]| {
        let mut all = base.to_vec();
        all.extend_from_slice(extra);
        list_url(collection, &all)
    };
    let headings = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let current = i == sort_index && (sort_key == c.key || (sort_key.is_empty() && i == 0));
            let next = if current && !descending {
                format!("-{}", c.key)
            } else {
                c.key.to_owned()
            };
            Heading {
                label: c.label,
                href: url_with(&[("sort", next.as_str())]),
                sorted: match (current, descending) {
                    (false, _) => "none",
                    (true, false) => "ascending",
                    (true, true) => "descending",
                },
                numeric: c.numeric,
            }
        })
        .collect();
    let page_link =
        |n: usize| url_with(&[("sort", params.sort.as_str()), ("page", &n.to_string())]);
    let parent_names = match kind.parent() {
        Some(parent) if may_access(&user, parent).is_ok() => dashboard
            .store
            .list(
                parent,
                &ListQuery {
                    scope,
                    limit: PARENT_SUGGESTIONS,
                    ..ListQuery::default()
                },
            )
            .await?
            .into_iter()
            .map(|r| r.name)
            .collect(),
        _ => Vec::new(),
    };
    let page = ListPage {
        nav: Nav::new(&user, collection),
        title: title(kind),
        collection,
        parent_label: kind.parent().map_or("", parent_label),
        parent_names,
        q: params.q.clone(),
        status: status.to_owned(),
        parent: parent_filter.to_owned(),
        approval: (kind == ObjectKind::Creative).then(|| approval.to_owned()),
        sort: params.sort.clone(),
        headings,
        numeric: columns.iter().map(|c| c.numeric).collect(),
        row_ids: shown
            .iter()
            .map(|r| (r.record.meta.id, r.record.name.clone()))
            .collect(),
        rows: shown.into_iter().map(|r| r.cells).collect(),
        can_bulk: may_write(&user, kind, Change::Update).is_ok(),
        matches,
        capped,
        cap: LIST_CAP,
        previous: (page_number > 1).then(|| page_link(page_number - 1)),
        next: (page_number * PAGE_ROWS < matches).then(|| page_link(page_number + 1)),
        can_create: may_write(&user, kind, Change::Create).is_ok(),
        new_parent: parent_id,
    };
    Ok(html(&page))
}

/// A creative row's approval state.
fn approval_state(record: &Record) -> Result<&'static str, PageError> {
    Ok(record.decode::<Creative>()?.object.approval.state())
}

/// The id, name, status and parent cells.
fn base_cells(kind: ObjectKind, row: &Row) -> Vec<Cell> {
    let record = &row.record;
    let id = record.meta.id;
    let mut cells = vec![
        Cell::plain(id.to_string(), SortKey::Number(id as f64)),
        Cell {
            href: Some(format!("/{}/{id}", kind.collection())),
            ..Cell::text(record.name.clone())
        },
        Cell {
            class: format!("status {}", row.serving.label),
            note: row.serving.reason.clone(),
            ..Cell::text(row.serving.label.to_owned())
        },
    ];
    if let Some(parent_kind) = kind.parent() {
        cells.push(match record.parent_id {
            Some(parent) => Cell {
                href: Some(format!("/{}/{parent}", parent_kind.collection())),
                ..Cell::text(
                    row.parent_name
                        .clone()
                        .unwrap_or_else(|| format!("#{parent}")),
                )
            },
            None => Cell::missing(),
        });
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_values_sort_last_either_way() {
        let mut keys = vec![SortKey::Number(2.0), SortKey::Missing, SortKey::Number(1.0)];
        keys.sort_by(|a, b| a.compare(b, false));
        assert_eq!(
            keys,
            [SortKey::Number(1.0), SortKey::Number(2.0), SortKey::Missing]
        );
        keys.sort_by(|a, b| a.compare(b, true));
        assert_eq!(
            keys,
            [SortKey::Number(2.0), SortKey::Number(1.0), SortKey::Missing]
        );
    }

    #[test]
    fn a_parent_that_is_not_active_stops_what_would_serve() {
        let stopped = Serving::of(Status::Active, Some("its site “News” is archived".into()));
        assert_eq!(stopped.label, "stopped");
        assert_eq!(
            Serving::of(Status::Archived, Some("x".into())).label,
            "archived"
        );
        assert_eq!(Serving::of(Status::Paused, None).label, "paused");
    }
}
