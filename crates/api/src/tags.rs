//! Ad tags per placement, for a publisher to paste into its pages. They call the edge at the
//! configured public ad URL.

use axum::Json;
use axum::extract::{Path, State};
use marquee_model::{Kind, Placement};
use serde_json::{Value, json};

use crate::objects::{ensure_visible, parse_id};
use crate::{ApiError, ApiState, Caller};

/// The three tags of a placement.
pub fn tags(base: &str, placement_id: u64, placement: &Placement) -> Value {
    let base = base.trim_end_matches('/');
    let (w, h) = placement.sizes.first().map_or((300, 250), |s| (s.w, s.h));
    let asynchronous = format!(
        "<ins class=\"marquee\" data-placement=\"{placement_id}\" style=\"display:inline-block;width:{w}px;height:{h}px\"></ins>\n\
         <script async src=\"{base}/tag.js\"></script>"
    );
    let iframe = format!(
        "<iframe src=\"{base}/ad?placement={placement_id}&amp;format=html&amp;cb=[CACHEBUSTER]\" \
         width=\"{w}\" height=\"{h}\" scrolling=\"no\" frameborder=\"0\" style=\"border:0\" \
         sandbox=\"allow-scripts allow-popups allow-popups-to-escape-sandbox\"></iframe>"
    );
    let image = format!(
        "<a href=\"{base}/ad?placement={placement_id}&amp;format=click&amp;cb=[CACHEBUSTER]\" target=\"_blank\">\
         <img src=\"{base}/ad?placement={placement_id}&amp;format=img&amp;cb=[CACHEBUSTER]\" width=\"{w}\" height=\"{h}\" alt=\"Advertisement\" border=\"0\"></a>"
    );
    json!({
        "placement_id": placement_id,
        "async": asynchronous,
        "iframe": iframe,
        "image": image,
        "note": "replace [CACHEBUSTER] with a random number per page view (the async tag needs none); use the same number in both halves of the image tag"
    })
}

pub async fn get(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    ensure_visible(&*state.store, &principal, Kind::Placement, id).await?;
    let placement = state
        .store
        .get_object::<Placement>(id, principal.scope())
        .await?;
    Ok(Json(tags(&state.ad_url, id, &placement.object)))
}
