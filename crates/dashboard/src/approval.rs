//! The publisher's review of creatives on the creative page: the state an advertiser sees,
//! and Approve / Reject for admins (`POST /creatives/{id}/approval`), as the API's
//! `POST /api/v1/creatives/{id}/approval` does.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use marquee_model::{Approval, Creative, Object};

use crate::objects::read_form;
use crate::{Dashboard, PageError, SignedIn, path_id, require_admin};

/// What the creative page says about the review.
pub struct ApprovalView {
    /// `approved`, `pending` or `rejected`.
    pub state: &'static str,
    pub reason: String,
    /// Whether the user may approve or reject (an admin).
    pub can_review: bool,
}

impl ApprovalView {
    pub fn of(user: &SignedIn, creative: &Creative) -> ApprovalView {
        let reason = match &creative.approval {
            Approval::Rejected { reason } => reason.clone(),
            Approval::Approved | Approval::Pending => String::new(),
        };
        ApprovalView {
            state: creative.approval.state(),
            reason,
            can_review: user.is_admin(),
        }
    }
}

/// `POST /creatives/{id}/approval`: `state` (`approved` or `rejected`) and, for a rejection,
/// `reason`. Back to the creative page, which shows the new state.
pub async fn review(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let user = require_admin(
        &dashboard,
        &headers,
        "only an admin approves or rejects creatives",
    )
    .await?;
    let form = read_form(&user, &headers, &body)?;
    let id = path_id(path)?;
    let approval = Approval::parse(form.get("state"), form.get("reason"))
        .ok_or_else(|| PageError::BadRequest("choose approve or reject".into()))?;
    let mut stored = dashboard.store.get_object::<Creative>(id, None).await?;
    if stored.object.approval != approval {
        stored.object.approval = approval;
        stored.object.validate().map_err(|invalid| {
            PageError::BadRequest(format!(
                "{invalid}: go back and say why the creative is rejected"
            ))
        })?;
        dashboard
            .store
            .update_object(id, stored.meta.version, &stored.object, None, &user.actor())
            .await?;
    }
    Ok(Redirect::to(&format!("/creatives/{id}#approval")).into_response())
}
