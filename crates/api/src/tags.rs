//! Ad tags per placement, for a publisher to paste into its pages. They call the edge at the
//! configured public ad URL.

use axum::Json;
use axum::extract::State;
use marquee_model::{ObjectKind, Placement};
use serde_json::{Value, json};

use crate::extract::Path;
use crate::objects::{ensure_visible, parse_id};
use crate::{ApiError, ApiState, Caller};

/// The consent parameters of the iframe and image tags, with the placeholders a publisher (or
/// its ad server, as it fills the IAB macros `${GDPR}` and `${GDPR_CONSENT_…}`) replaces: `1` or
/// `0`, and the page's TCF v2 consent string. Left unfilled, the edge takes the GDPR to apply
/// without consent: ads, but no cookie and no user.
const CONSENT: &str = "&amp;gdpr=[GDPR]&amp;gdpr_consent=[GDPR_CONSENT]";

/// What the publisher fills in.
const NOTE: &str = "iframe and image tags: replace [CACHEBUSTER] with a random number per page view (the same number in both halves of the image tag), [GDPR] with 1 where the GDPR applies and 0 where it does not, and [GDPR_CONSENT] with the IAB TCF v2 consent string of the page's CMP (or nothing); left as they are, the visitor is not identified (no cookie, no frequency caps by user). An ad server filling IAB macros can take gdpr=${GDPR}&gdpr_consent=${GDPR_CONSENT_NNN} instead. The async tag needs none of this: tag.js asks the page's TCF v2 CMP (__tcfapi), or reads data-gdpr and data-gdpr-consent on its script element. Key-values for targeting (Prebid.js's hb_pb, hb_adid, …): data-kv-KEY=\"VALUE\" on the async tag's <ins>, or kv=KEY:VALUE added to the iframe tag's URL.";

/// The three tags of a placement.
pub fn tags(base: &str, placement_id: u64, placement: &Placement) -> Value {
    let base = base.trim_end_matches('/');
    let (w, h) = placement.sizes.first().map_or((300, 250), |s| (s.w, s.h));
    let asynchronous = format!(
        "<ins class=\"marquee\" data-placement=\"{placement_id}\" style=\"display:inline-block;width:{w}px;height:{h}px\"></ins>\n\
         <script async src=\"{base}/tag.js\"></script>"
    );
    let iframe = format!(
        "<iframe src=\"{base}/ad?placement={placement_id}&amp;format=html&amp;cb=[CACHEBUSTER]{CONSENT}\" \
         width=\"{w}\" height=\"{h}\" scrolling=\"no\" frameborder=\"0\" style=\"border:0\" \
         sandbox=\"allow-scripts allow-popups allow-popups-to-escape-sandbox\"></iframe>"
    );
    let image = format!(
        "<a href=\"{base}/ad?placement={placement_id}&amp;format=click&amp;cb=[CACHEBUSTER]{CONSENT}\" target=\"_blank\">\
         <img src=\"{base}/ad?placement={placement_id}&amp;format=img&amp;cb=[CACHEBUSTER]{CONSENT}\" width=\"{w}\" height=\"{h}\" alt=\"Advertisement\" border=\"0\"></a>"
    );
    json!({
        "placement_id": placement_id,
        "async": asynchronous,
        "iframe": iframe,
        "image": image,
        "note": NOTE,
    })
}

pub async fn get(
    State(state): State<ApiState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    ensure_visible(&*state.store, &principal, ObjectKind::Placement, id).await?;
    let placement = state
        .store
        .get_object::<Placement>(id, principal.scope())
        .await?;
    Ok(Json(tags(&state.ad_url, id, &placement.object)))
}

#[cfg(test)]
mod tests {
    use marquee_model::{Format, SiteId, Size, Status};

    use super::*;

    #[test]
    fn iframe_and_image_tags_carry_the_consent_placeholders() {
        let placement = Placement {
            site_id: SiteId(1),
            name: "Sidebar".into(),
            status: Status::default(),
            sizes: vec![Size { w: 300, h: 250 }],
            formats: vec![Format::Banner],
            image_tag: Default::default(),
            programmatic: None,
        };
        let tags = tags("https://ads.example.com/", 7, &placement);
        let text = |key: &str| tags[key].as_str().expect(key).to_owned();
        let consent = "&amp;gdpr=[GDPR]&amp;gdpr_consent=[GDPR_CONSENT]";
        assert!(text("iframe").contains(&format!(
            "src=\"https://ads.example.com/ad?placement=7&amp;format=html&amp;cb=[CACHEBUSTER]{consent}\""
        )));
        let image = text("image");
        for format in ["click", "img"] {
            assert!(
                image.contains(&format!("format={format}&amp;cb=[CACHEBUSTER]{consent}\"")),
                "{image}"
            );
        }
        // The async tag's script asks the page's CMP itself.
        assert!(!text("async").contains("gdpr"));
        let note = text("note");
        for placeholder in [
            "[CACHEBUSTER]",
            "[GDPR]",
            "[GDPR_CONSENT]",
            "__tcfapi",
            "data-kv-",
        ] {
            assert!(note.contains(placeholder), "{placeholder}: {note}");
        }
    }
}
