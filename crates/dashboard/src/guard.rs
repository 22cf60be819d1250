//! Guard rails before archiving: archiving is final (the model has no way back), so the
//! dashboard first says what depends on the object — its active children, the active line
//! items linked to a placement, what it served today — and archives only once confirmed.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use jiff::Timestamp;
use marquee_api::Change;
use marquee_model::{ObjectKind, Status};
use marquee_store::{ListQuery, Record};

use crate::lists::{all_matching, child_kind};
use crate::objects::{may_write, singular, write_request};
use crate::{Dashboard, Nav, PageError, SignedIn, html, path_id};

fn plural(kind: ObjectKind, n: usize) -> String {
    let name = singular(kind);
    if n == 1 { name } else { format!("{name}s") }
}

/// A count with thousands separators: `1,240`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// What archiving `record` stops, in plain sentences: `3 active line items`, `a tag served
/// 1,240 times today`.
pub async fn consequences(
    dashboard: &Dashboard,
    user: &SignedIn,
    record: &Record,
) -> Result<Vec<String>, PageError> {
    let scope = user.principal().scope();
    let mut lines = Vec::new();
    // Active objects under it, level by level (archived ones stay archived anyway).
    let mut level = vec![record.meta.id];
    let mut kind = record.kind;
    let mut line_items = Vec::new();
    let mut placements = Vec::new();
    while let Some(child) = child_kind(kind) {
        let mut next = Vec::new();
        for parent in &level {
            let query = ListQuery {
                scope,
                status: Some(Status::Active),
                parent_id: Some(*parent),
                ..ListQuery::default()
            };
            let (records, _) = all_matching(dashboard, child, query).await?;
            next.extend(records.iter().map(|r| r.meta.id));
        }
        if !next.is_empty() {
            lines.push(format!(
                "{} active {} under it stop serving",
                next.len(),
                plural(child, next.len())
            ));
        }
        match child {
            ObjectKind::LineItem => line_items.clone_from(&next),
            ObjectKind::Placement => placements.clone_from(&next),
            _ => {}
        }
        (level, kind) = (next, child);
    }
    if record.kind == ObjectKind::Placement && user.is_admin() {
        // Links join one tenant's demand to another's supply: only admins see them all.
        let catalog = dashboard.store.catalog().await?;
        let linked = catalog
            .links
            .iter()
            .filter(|(line_item, p)| {
                p.0 == record.meta.id && catalog.line_items.iter().any(|l| l.meta.id == line_item.0)
            })
            .count();
        if linked > 0 {
            lines.push(format!(
                "{linked} active {} linked to it lose this placement",
                plural(ObjectKind::LineItem, linked)
            ));
        }
    }
    let ids = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let id = record.meta.id.to_string();
    let filter = match record.kind {
        ObjectKind::Advertiser => Some(("advertiser", id)),
        ObjectKind::Campaign if !line_items.is_empty() => Some(("line_item", ids(&line_items))),
        ObjectKind::LineItem => Some(("line_item", id)),
        ObjectKind::Placement => Some(("placement", id)),
        ObjectKind::Publisher | ObjectKind::Site if !placements.is_empty() => {
            Some(("placement", ids(&placements)))
        }
        _ => None,
    };
    if let Some((name, value)) = filter {
        let now = dashboard.clock.now();
        let midnight = now
            .to_zoned(jiff::tz::TimeZone::UTC)
            .start_of_day()
            .map_err(|e| PageError::Internal(e.to_string()))?
            .timestamp();
        let impressions = served_between(dashboard, user, name, value, midnight, now).await?;
        if impressions > 0 {
            lines.push(match record.kind {
                ObjectKind::Placement => format!(
                    "its tag served {} {} today (UTC)",
                    grouped(impressions),
                    if impressions == 1 { "time" } else { "times" }
                ),
                _ => format!("{} impressions served today (UTC)", grouped(impressions)),
            });
        }
    }
    Ok(lines)
}

async fn served_between(
    dashboard: &Dashboard,
    user: &SignedIn,
    filter: &str,
    value: String,
    from: Timestamp,
    to: Timestamp,
) -> Result<u64, PageError> {
    let instant = |t: Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let built = crate::pages::report(
        dashboard,
        user,
        &[
            ("from", instant(from)),
            ("to", instant(to)),
            ("granularity", "day".into()),
            ("tz", "UTC".into()),
            (filter, value),
        ],
    )
    .await?;
    Ok(u64::try_from(built.report.totals.impressions).unwrap_or(0))
}

#[derive(Template)]
#[template(path = "archive.html")]
struct ConfirmPage {
    nav: Nav,
    kind_name: String,
    collection: &'static str,
    id: u64,
    name: String,
    consequences: Vec<String>,
    /// Whether pausing is offered instead (it is active and the user may change it).
    can_pause: bool,
    /// Whether objects of its kind have children (which archiving stops too).
    has_children: bool,
}

// The same extractor list as the objects' update handler, deliberately: axum hands each handler
// its own arguments; what they do with them first is shared in `write_request`.

/// `POST /{collection}/{id}/archive`: without `confirm`, a page saying what archiving stops,
/// with the button that confirms; with it, archives.
pub async fn archive(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    path: Path<String>,
    body: Bytes,
    kind: ObjectKind,
) -> Result<Response, PageError> {
    let (user, form) = write_request(&dashboard, &headers, &body, kind, Change::Archive).await?;
    let id = path_id(path)?;
    let scope = user.principal().scope();
    if form.get("confirm") == "yes" {
        dashboard
            .store
            .archive(kind, id, scope, &user.actor())
            .await?;
        return Ok(Redirect::to(&format!("/{}/{id}", kind.collection())).into_response());
    }
    let record = dashboard.store.get(kind, id, scope).await?;
    if record.status == Status::Archived {
        return Ok(Redirect::to(&format!("/{}/{id}", kind.collection())).into_response());
    }
    let page = ConfirmPage {
        nav: Nav::new(&user, kind.collection()),
        kind_name: singular(kind),
        collection: kind.collection(),
        id,
        consequences: consequences(&dashboard, &user, &record).await?,
        can_pause: record.status == Status::Active
            && may_write(&user, kind, Change::Update).is_ok(),
        has_children: child_kind(kind).is_some(),
        name: record.name,
    };
    Ok(html(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_with_thousands_separators() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_240), "1,240");
        assert_eq!(grouped(12_345_678), "12,345,678");
    }
}
