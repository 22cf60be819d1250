//! Bulk actions from the lists: pause, resume or archive the checked rows. Each object is
//! changed on its own (the API's `apply_bulk`: not all or nothing), and the page that follows
//! says what happened to each. Archiving first lists, for each object, what depends on it (the
//! single archive's confirmation, `guard::consequences`) and asks to confirm.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use marquee_api::{BulkAction, BulkOutcome, Change, MAX_BULK_IDS, apply_bulk};
use marquee_model::ObjectKind;

use crate::guard::consequences;
use crate::lists::child_kind;
use crate::objects::{may_write, read_form, singular, title};
use crate::{Dashboard, Nav, PageError, html};

/// One selected object on the page.
struct Item {
    id: u64,
    name: String,
    /// What happened to it; empty on the confirmation.
    outcome: String,
    class: &'static str,
    /// What archiving it stops (the confirmation), or why it failed.
    details: Vec<String>,
}

#[derive(Template)]
#[template(path = "bulk.html")]
struct BulkPage {
    nav: Nav,
    heading: String,
    title: &'static str,
    kind_name: String,
    collection: &'static str,
    items: Vec<Item>,
    /// Whether this is the archive confirmation (else the results).
    confirm: bool,
    has_children: bool,
}

/// `POST /{collection}/bulk` with `action` (pause, resume, archive) and the checked `id`s.
pub async fn bulk(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    body: Bytes,
    kind: ObjectKind,
) -> Result<Response, PageError> {
    let user = crate::require_user(&dashboard, &headers).await?;
    let form = read_form(&user, &headers, &body)?;
    let action = BulkAction::parse(form.get("action"))
        .ok_or_else(|| PageError::BadRequest("choose pause, resume or archive".into()))?;
    let change = match action {
        BulkAction::Archive => Change::Archive,
        BulkAction::Pause | BulkAction::Resume => Change::Update,
    };
    may_write(&user, kind, change)?;
    let mut ids = Vec::new();
    for text in form.all("id") {
        let id = text
            .parse::<u64>()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| PageError::BadRequest(format!("{text:?} is not an id")))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        return Err(PageError::BadRequest(
            "select at least one row with its checkbox first".into(),
        ));
    }
    if ids.len() > MAX_BULK_IDS {
        return Err(PageError::BadRequest(format!(
            "select at most {MAX_BULK_IDS} rows at once"
        )));
    }
    let scope = user.principal().scope();
    let plural = title(kind).to_lowercase();
    let mut page = BulkPage {
        nav: Nav::new(&user, kind.collection()),
        heading: String::new(),
        title: title(kind),
        kind_name: singular(kind),
        collection: kind.collection(),
        items: Vec::new(),
        confirm: false,
        has_children: child_kind(kind).is_some(),
    };
    if action == BulkAction::Archive && form.get("confirm") != "yes" {
        for id in ids {
            let record = dashboard.store.get(kind, id, scope).await?;
            page.items.push(Item {
                id,
                details: consequences(&dashboard, &user, &record).await?,
                name: record.name,
                outcome: String::new(),
                class: "",
            });
        }
        page.heading = format!("Archive {} {plural}?", page.items.len());
        page.confirm = true;
        return Ok(html(&page));
    }
    let outcomes = apply_bulk(&*dashboard.store, kind, action, &ids, scope, &user.actor()).await;
    let done = match action {
        BulkAction::Pause => "paused",
        BulkAction::Resume => "resumed",
        BulkAction::Archive => "archived",
    };
    let mut changed = 0;
    for (id, outcome) in outcomes {
        // Named when it can be read; a failure may be that it cannot.
        let name = match dashboard.store.get(kind, id, scope).await {
            Ok(record) => record.name,
            Err(_) => format!("{} {id}", singular(kind)),
        };
        let (outcome, class, details) = match outcome {
            BulkOutcome::Done => {
                changed += 1;
                (done.to_owned(), "status active", Vec::new())
            }
            BulkOutcome::Unchanged => (format!("already {done}"), "status", Vec::new()),
            BulkOutcome::Failed(e) => (
                "not changed".to_owned(),
                "status error",
                vec![e.to_string()],
            ),
        };
        page.items.push(Item {
            id,
            name,
            outcome,
            class,
            details,
        });
    }
    page.heading = format!("{} of {} {plural} {done}", changed, page.items.len());
    Ok(html(&page))
}
