//! `/audit`: the admin's Audit page, every entry of the audit log (objects, their approval, API
//! tokens and dashboard users) newest first, filtered by kind, object, who and date, and paged
//! as the API pages it (`GET /api/v1/audit`).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use marquee_store::{AuditKind, AuditQuery};
use serde::Deserialize;
use serde_json::Value;

use crate::{Dashboard, Nav, PageError, html, require_admin};

/// Entries on one page.
const PAGE_ROWS: u32 = 50;

#[derive(Debug, Deserialize, Default)]
pub struct AuditParams {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    object: String,
    #[serde(default)]
    who: String,
    /// First day shown, `YYYY-MM-DD` (UTC).
    #[serde(default)]
    from: String,
    /// Last day shown, `YYYY-MM-DD` (UTC), included.
    #[serde(default)]
    to: String,
    /// The previous page's last entry id: the next page starts below it.
    #[serde(default)]
    before: String,
}

/// One entry as the page shows it.
pub struct AuditRow {
    at: String,
    principal: String,
    role: &'static str,
    kind: &'static str,
    object: String,
    /// The object's page; none for accounts, which have none.
    href: Option<String>,
    action: &'static str,
    changes: Vec<(String, String, String)>,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    nav: Nav,
    kinds: Vec<(&'static str, String)>,
    kind: String,
    object: String,
    who: String,
    from: String,
    to: String,
    rows: Vec<AuditRow>,
    filtered: bool,
    next: Option<String>,
}

/// Each changed field with its before and after as text, money as the API shows it.
pub(crate) fn change_rows(kind: AuditKind, changes: &Value) -> Vec<(String, String, String)> {
    let show = |value: &Value| match value {
        Value::Null => "—".to_owned(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let presented = match kind.object() {
        Some(object) => marquee_api::present_changes(object, changes),
        None => changes.clone(),
    };
    match presented {
        Value::Object(fields) => fields
            .iter()
            .map(|(field, pair)| (field.clone(), show(&pair["before"]), show(&pair["after"])))
            .collect(),
        _ => Vec::new(),
    }
}

fn day(name: &str, text: &str) -> Result<Option<Date>, PageError> {
    match text.trim() {
        "" => Ok(None),
        text => text.parse::<Date>().map(Some).map_err(|_| {
            PageError::BadRequest(format!("{name} {text:?} is not a date like 2026-11-29"))
        }),
    }
}

fn id(name: &str, text: &str) -> Result<Option<u64>, PageError> {
    match text.trim() {
        "" => Ok(None),
        text => text
            .parse::<u64>()
            .ok()
            .filter(|id| *id > 0)
            .map(Some)
            .ok_or_else(|| PageError::BadRequest(format!("{name} {text:?} is not an id"))),
    }
}

fn query_of(params: &AuditParams) -> Result<AuditQuery, PageError> {
    let start_of = |date: Date| {
        date.to_zoned(TimeZone::UTC)
            .map(|zoned| zoned.timestamp())
            .map_err(|e| PageError::BadRequest(format!("{date}: {e}")))
    };
    let until = match day("to", &params.to)? {
        Some(date) => {
            let next = date
                .tomorrow()
                .map_err(|e| PageError::BadRequest(format!("to {date}: {e}")))?;
            Some(start_of(next)?)
        }
        None => None,
    };
    let kind = match params.kind.as_str() {
        "" => None,
        name => Some(
            AuditKind::parse(name)
                .ok_or_else(|| PageError::BadRequest(format!("{name:?} is not a kind")))?,
        ),
    };
    Ok(AuditQuery {
        scope: None,
        object_kind: kind,
        object_id: id("object", &params.object)?,
        principal: Some(params.who.trim().to_owned()).filter(|who| !who.is_empty()),
        since: day("from", &params.from)?.map(start_of).transpose()?,
        until,
        before_id: id("page", &params.before)?,
        // One more than shown tells whether another page exists.
        limit: PAGE_ROWS + 1,
    })
}

fn row(entry: marquee_store::AuditEntry) -> AuditRow {
    let kind = entry.object_kind;
    let href = kind
        .object()
        .map(|object| format!("/{}/{}", object.collection(), entry.object_id));
    AuditRow {
        at: entry.at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
        principal: entry.principal,
        role: entry.role.as_str(),
        kind: kind.name(),
        object: format!("{} (#{})", entry.object_name, entry.object_id),
        href,
        action: entry.action.as_str(),
        changes: change_rows(kind, &entry.changes),
    }
}

pub async fn page(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Query(params): Query<AuditParams>,
) -> Result<Response, PageError> {
    let user = require_admin(
        &dashboard,
        &headers,
        "the audit page is for admins; an object's own History shows its changes",
    )
    .await?;
    let query = query_of(&params)?;
    let mut entries = dashboard.store.audit(&query).await?;
    let more = entries.len() > PAGE_ROWS as usize;
    entries.truncate(PAGE_ROWS as usize);
    let next = match entries.last() {
        Some(last) if more => {
            let kept = [
                ("kind", params.kind.as_str()),
                ("object", params.object.trim()),
                ("who", params.who.trim()),
                ("from", params.from.trim()),
                ("to", params.to.trim()),
            ];
            let mut pairs: Vec<(&str, String)> = kept
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k, v.to_owned()))
                .collect();
            pairs.push(("before", last.id.to_string()));
            let query = serde_urlencoded::to_string(pairs)
                .map_err(|e| PageError::Internal(e.to_string()))?;
            Some(format!("/audit?{query}"))
        }
        _ => None,
    };
    let kinds = AuditKind::all()
        .map(|kind| (kind.name(), kind.name().replace('_', " ")))
        .collect();
    let filtered = [
        &params.kind,
        &params.object,
        &params.who,
        &params.from,
        &params.to,
    ]
    .iter()
    .any(|v| !v.trim().is_empty());
    let page = AuditPage {
        nav: Nav::new(&user, "audit"),
        kinds,
        kind: params.kind.clone(),
        object: params.object.trim().to_owned(),
        who: params.who.trim().to_owned(),
        from: params.from.trim().to_owned(),
        to: params.to.trim().to_owned(),
        rows: entries.into_iter().map(row).collect(),
        filtered,
        next,
    };
    Ok(html(&page))
}
