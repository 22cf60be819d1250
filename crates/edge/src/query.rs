//! The ad request's query string. Known parameters are checked and a malformed one is refused
//! by name; unknown ones are ignored, because publishers' tags and CDNs add their own.

use std::borrow::Cow;

use marquee_model::{PlacementId, Size};
use url::form_urlencoded;

/// What the caller wants back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdFormat {
    /// The iframe document (iframe tag).
    Html,
    /// A script that writes the ad into the page (async tag, one placement).
    Js,
    /// A redirect to the image (image tag, e-mail).
    Img,
    /// The image tag's click: a redirect to the landing URL of the ad `img` showed for the same
    /// placement and cache buster.
    Click,
}

#[derive(Debug, Default)]
pub struct AdQuery<'q> {
    pub placements: Vec<PlacementId>,
    pub sizes: Vec<Size>,
    pub key_values: Vec<(Cow<'q, str>, Cow<'q, str>)>,
    pub page_url: Option<Cow<'q, str>>,
    pub user_id: Option<Cow<'q, str>>,
    pub cache_buster: Option<Cow<'q, str>>,
    pub format: Option<AdFormat>,
    /// The page element the script fills (`js` format).
    pub element: Option<Cow<'q, str>>,
    /// `gdpr=1` says the request is subject to the GDPR; then consent must be given.
    pub gdpr: Option<bool>,
    /// `gdpr_consent`: the IAB TCF v2 consent string.
    pub consent: Option<Cow<'q, str>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("query parameter `{name}`: {problem}")]
pub struct QueryError {
    pub name: &'static str,
    pub problem: String,
}

fn bad(name: &'static str, problem: impl Into<String>) -> QueryError {
    QueryError {
        name,
        problem: problem.into(),
    }
}

/// Most placements one request may ask for.
pub const MAX_PLACEMENTS: usize = 16;
const MAX_VALUE_BYTES: usize = 2_048;

pub fn parse(query: &str) -> Result<AdQuery<'_>, QueryError> {
    let mut out = AdQuery::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if value.len() > MAX_VALUE_BYTES {
            return Err(QueryError {
                name: "(value)",
                problem: format!("the value of `{key}` is longer than {MAX_VALUE_BYTES} bytes"),
            });
        }
        match key.as_ref() {
            "placement" | "p" => {
                for id in value.split(',') {
                    let id =
                        id.parse::<u64>().ok().filter(|id| *id > 0).ok_or_else(|| {
                            bad("placement", format!("{id:?} is not a placement id"))
                        })?;
                    if out.placements.len() == MAX_PLACEMENTS {
                        return Err(bad(
                            "placement",
                            format!("at most {MAX_PLACEMENTS} per request"),
                        ));
                    }
                    out.placements.push(PlacementId(id));
                }
            }
            "size" => {
                for size in value.split(',') {
                    out.sizes.push(parse_size(size)?);
                }
            }
            "kv" => {
                let (k, v) = value
                    .split_once(':')
                    .ok_or_else(|| bad("kv", format!("{value:?} is not key:value")))?;
                out.key_values
                    .push((Cow::Owned(k.to_owned()), Cow::Owned(v.to_owned())));
            }
            "url" => out.page_url = Some(value),
            "uid" => out.user_id = Some(value),
            "cb" => out.cache_buster = Some(value),
            "el" => out.element = Some(value),
            "gdpr_consent" => out.consent = Some(value),
            "gdpr" => {
                out.gdpr = Some(match value.as_ref() {
                    "0" => false,
                    // `1`, or a tag's placeholder left unfilled (ours, the IAB macro) or filled
                    // with nothing: not known not to apply, so it applies.
                    "1" | "" | "[GDPR]" | "${GDPR}" => true,
                    other => return Err(bad("gdpr", format!("{other:?} is not 0 or 1"))),
                });
            }
            "format" => {
                out.format = Some(match value.as_ref() {
                    "html" => AdFormat::Html,
                    "js" => AdFormat::Js,
                    "img" => AdFormat::Img,
                    "click" => AdFormat::Click,
                    other => {
                        return Err(bad(
                            "format",
                            format!("{other:?} is not html, js, img or click"),
                        ));
                    }
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

fn parse_size(text: &str) -> Result<Size, QueryError> {
    let parsed = text.split_once('x').and_then(|(w, h)| {
        let size = Size {
            w: w.parse().ok()?,
            h: h.parse().ok()?,
        };
        (size.w > 0 && size.h > 0 && size.w <= Size::MAX_SIDE && size.h <= Size::MAX_SIDE)
            .then_some(size)
    });
    parsed.ok_or_else(|| {
        bad(
            "size",
            format!("{text:?} is not WIDTHxHEIGHT such as 300x250"),
        )
    })
}

impl AdQuery<'_> {
    /// Whether this user may be identified (a first-party id stored or read, a user key for
    /// caps, a profile): not under the GDPR, or with a TCF v2 consent string recording consent
    /// to Purpose 1 ([`marquee_model::may_identify`]).
    pub fn may_identify(&self) -> bool {
        marquee_model::may_identify(self.gdpr, self.consent.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_parameter() {
        let q = parse("placement=7,9&size=300x250&kv=section:sport&kv=a%3Ab:c&url=https%3A%2F%2Fx.example%2Fa%3Fb%3D1&uid=u1&cb=123&format=js&el=slot1&gdpr=1&gdpr_consent=CLcVDxRMWfGmWAVAHCENAXCkAKDAADnAABRgA5mdfCKZuYJez-NQm0TBMYA4oCAAGQYIAAAAAAEAIAEgAA.argAC0gAAAAAAAAAAAA&utm=x")
            .expect("parses");
        assert_eq!(q.placements, [PlacementId(7), PlacementId(9)]);
        assert_eq!(q.sizes, [Size { w: 300, h: 250 }]);
        assert_eq!(q.key_values[0], ("section".into(), "sport".into()));
        assert_eq!(q.key_values[1], ("a".into(), "b:c".into()));
        assert_eq!(q.page_url.as_deref(), Some("https://x.example/a?b=1"));
        assert_eq!(q.format, Some(AdFormat::Js));
        assert!(q.may_identify());
    }

    #[test]
    fn malformed_parameters_are_named() {
        for (query, name) in [
            ("placement=abc", "placement"),
            ("placement=0", "placement"),
            ("size=300", "size"),
            ("size=0x250", "size"),
            ("kv=novalue", "kv"),
            ("gdpr=yes", "gdpr"),
            ("format=pdf", "format"),
        ] {
            assert_eq!(parse(query).expect_err(query).name, name, "{query}");
        }
        let many = (1..=17)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            parse(&format!("p={many}")).expect_err("too many").name,
            "placement"
        );
    }

    /// A CMP's "reject all" (every purpose refused) and the IAB specification's example
    /// (purposes 1, 3, 9 and 10 consented to).
    const REJECT_ALL: &str = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA";
    const ACCEPT: &str =
        "CLcVDxRMWfGmWAVAHCENAXCkAKDAADnAABRgA5mdfCKZuYJez-NQm0TBMYA4oCAAGQYIAAAAAAEAIAEgAA";

    #[test]
    fn consent_gates_identification() {
        let may = |query: &str| parse(query).expect(query).may_identify();
        assert!(!may("gdpr=1"));
        assert!(!may("gdpr=1&gdpr_consent="));
        assert!(!may(&format!("gdpr=1&gdpr_consent={REJECT_ALL}")));
        assert!(
            !may("gdpr=1&gdpr_consent=CO"),
            "a string that is no TC string"
        );
        assert!(may(&format!("gdpr=1&gdpr_consent={ACCEPT}")));
        assert!(may("gdpr=0"));
        assert!(may(&format!("gdpr=0&gdpr_consent={REJECT_ALL}")));
        assert!(may(""));
        assert!(!may(&format!("gdpr_consent={REJECT_ALL}")));
    }

    #[test]
    fn unfilled_tag_placeholders_are_no_consent() {
        // The iframe and image tags as pasted without filling their consent placeholders, in
        // our form and the IAB macros', or filled with nothing: answered, without identifying.
        for query in [
            "p=1&gdpr=[GDPR]&gdpr_consent=[GDPR_CONSENT]",
            "p=1&gdpr=%5BGDPR%5D&gdpr_consent=%5BGDPR_CONSENT%5D",
            "p=1&gdpr=${GDPR}&gdpr_consent=${GDPR_CONSENT_123}",
            "p=1&gdpr=%24%7BGDPR%7D&gdpr_consent=%24%7BGDPR_CONSENT_123%7D",
            "p=1&gdpr=&gdpr_consent=",
        ] {
            let q = parse(query).expect(query);
            assert_eq!(q.gdpr, Some(true), "{query}");
            assert!(!q.may_identify(), "{query}");
        }
        let filled = format!("p=1&gdpr=1&gdpr_consent={ACCEPT}");
        assert!(parse(&filled).expect("ok").may_identify());
    }
}
