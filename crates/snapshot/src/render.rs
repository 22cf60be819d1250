//! Ad code prepared when the snapshot is compiled: each servable creative becomes the HTML
//! document of its iframe, as literal text with holes. The edge fills the holes per request by
//! appending strings; it runs no template engine.

use std::collections::HashMap;

use marquee_model::{Creative, CreativeContent, KEY_VALUE_MACRO_PREFIX, LIVE_STATISTIC_PREFIX};
use serde::{Deserialize, Serialize};

/// The live statistics of one creative at one moment, rendered as text into its ad code where
/// the markup says `{{STAT:NAME}}` (names in [`marquee_model::LIVE_STATISTICS`]). Every value
/// renders as digits (and one dot), so it is safe anywhere in HTML.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveValues {
    pub impressions_today: u64,
    pub clicks_today: u64,
    /// Clicks per impression today in hundredths of a percent (`125` renders `1.25`).
    pub ctr_today_basis_points: u64,
    /// 1 for the first; 0 when the line item is not ranked.
    pub rank: u32,
    pub rank_of: u32,
}

impl LiveValues {
    /// The text of statistic `name` (without the `STAT:` prefix), or `None` for an unknown
    /// name.
    pub fn text(&self, name: &str) -> Option<String> {
        Some(match name {
            "IMPRESSIONS_TODAY" => self.impressions_today.to_string(),
            "CLICKS_TODAY" => self.clicks_today.to_string(),
            "CTR_TODAY" => format!(
                "{}.{:02}",
                self.ctr_today_basis_points / 100,
                self.ctr_today_basis_points % 100
            ),
            "RANK" => self.rank.to_string(),
            "RANK_OF" => self.rank_of.to_string(),
            _ => return None,
        })
    }
}

/// Live values by creative id, for [`compile_live`](crate::compile_live).
pub type LiveTable = HashMap<u64, LiveValues>;

/// Whether a creative's markup uses any `{{STAT:NAME}}` variable, so that the manager keeps
/// its values current.
pub fn uses_live_statistics(creative: &Creative) -> bool {
    let markup = match &creative.content {
        CreativeContent::Html { html } => html,
        CreativeContent::ThirdPartyTag { tag } => tag,
        _ => return false,
    };
    markup.contains(&format!("{{{{{LIVE_STATISTIC_PREFIX}"))
}

/// Literal text with holes, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdCode {
    pub parts: Vec<Part>,
}

/// Variants are only ever appended (snapshots encode them by position).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Part {
    Text(String),
    Hole(Hole),
    /// The ad request's key-value of this key (`{{KV:key}}`), which the edge fills
    /// percent-encoded (see [`marquee_model::KEY_VALUE_MACRO_PREFIX`]).
    KeyValue(String),
}

/// A per-request value. Every value the edge puts in a hole is safe in HTML text and in a
/// quoted attribute, either quote (URLs it builds, numbers, percent-encoded text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Hole {
    /// The signed click redirect.
    ClickUrl,
    /// The same, percent-encoded, for creatives that pass it on as a parameter.
    ClickUrlEncoded,
    /// The signed impression beacon.
    ImpressionUrl,
    CacheBuster,
    PlacementId,
    /// Unix seconds of the request.
    Timestamp,
}

impl AdCode {
    /// Whether the code already loads the impression beacon itself.
    fn has(&self, hole: Hole) -> bool {
        self.parts.contains(&Part::Hole(hole))
    }

    fn text(&mut self, text: &str) {
        match self.parts.last_mut() {
            Some(Part::Text(last)) => last.push_str(text),
            _ => self.parts.push(Part::Text(text.to_owned())),
        }
    }

    fn hole(&mut self, hole: Hole) {
        self.parts.push(Part::Hole(hole));
    }

    /// Appends creative markup, turning `{{MACROS}}` and `{{KV:key}}` into holes or, for values
    /// known now (ids, live statistics), into text. Validation has refused unknown macros; any left stay
    /// as written. A live statistic without values yet renders as zero.
    fn markup(&mut self, markup: &str, creative_id: u64, line_item_id: u64, live: LiveValues) {
        let mut rest = markup;
        while let Some(open) = rest.find("{{") {
            self.text(&rest[..open]);
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                self.text(&rest[open..]);
                return;
            };
            let name = &after[..close];
            match name {
                "CLICK_URL" => self.hole(Hole::ClickUrl),
                "CLICK_URL_ENC" => self.hole(Hole::ClickUrlEncoded),
                "IMPRESSION_URL" => self.hole(Hole::ImpressionUrl),
                "CACHE_BUSTER" => self.hole(Hole::CacheBuster),
                "PLACEMENT_ID" => self.hole(Hole::PlacementId),
                "TIMESTAMP" => self.hole(Hole::Timestamp),
                "CREATIVE_ID" => self.text(&creative_id.to_string()),
                "LINE_ITEM_ID" => self.text(&line_item_id.to_string()),
                _ if name.starts_with(KEY_VALUE_MACRO_PREFIX) => self.parts.push(Part::KeyValue(
                    name[KEY_VALUE_MACRO_PREFIX.len()..].to_owned(),
                )),
                _ => match name
                    .strip_prefix(LIVE_STATISTIC_PREFIX)
                    .and_then(|statistic| live.text(statistic))
                {
                    Some(value) => self.text(&value),
                    None => self.text(&rest[open..open + 2 + close + 2]),
                },
            }
            rest = &after[close + 2..];
        }
        self.text(rest);
    }
}

/// Escapes text for HTML content and quoted attributes (either quote).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

// Our own markup quotes its attributes with `'`: the same HTML, but an `adm` carries it as a
// JSON string, where every `"` costs an escape on every bid. Values in them are escaped with
// `escape_html` (which escapes `'` too) or are the edge's URLs and numbers (see
// `edge.public_url`'s check).
const HEAD: &str = "<!doctype html><html><head><meta charset='utf-8'>\
<style>html,body{margin:0;padding:0;overflow:hidden}a img{border:0;display:block}</style>\
</head><body>";
const TAIL: &str = "</body></html>";

/// The iframe document of a creative, or `None` for creatives that are not display ads
/// (VAST video goes out through the bidder). Live statistics render as zero; see
/// [`ad_code_live`].
pub fn ad_code(creative_id: u64, creative: &Creative) -> Option<AdCode> {
    ad_code_live(creative_id, creative, LiveValues::default())
}

/// The same with the creative's live statistics rendered from `live`.
pub fn ad_code_live(creative_id: u64, creative: &Creative, live: LiveValues) -> Option<AdCode> {
    let line_item_id = creative.line_item_id.0;
    let mut code = AdCode { parts: Vec::new() };
    code.text(HEAD);
    match &creative.content {
        CreativeContent::Image { image_url, alt } => {
            let (w, h) = creative.size.map_or((0, 0), |s| (s.w, s.h));
            code.text("<a href='");
            code.hole(Hole::ClickUrl);
            code.text(&format!(
                "' target='_blank' rel='noopener noreferrer'><img src='{}' width='{w}' height='{h}' alt='{}'></a>",
                escape_html(image_url),
                escape_html(alt)
            ));
        }
        CreativeContent::Html { html } => code.markup(html, creative_id, line_item_id, live),
        CreativeContent::ThirdPartyTag { tag } => code.markup(tag, creative_id, line_item_id, live),
        CreativeContent::Native {
            title,
            body,
            sponsored_by,
            image_url,
            icon_url,
            call_to_action,
            ..
        } => {
            code.text("<a href='");
            code.hole(Hole::ClickUrl);
            code.text("' target='_blank' rel='noopener noreferrer' style='display:block;font:14px sans-serif;color:#111;text-decoration:none'>");
            for (url, class) in [(image_url, "image"), (icon_url, "icon")] {
                if let Some(url) = url {
                    code.text(&format!(
                        "<img class='{class}' src='{}' alt='' style='max-width:100%'>",
                        escape_html(url)
                    ));
                }
            }
            code.text(&format!(
                "<strong>{}</strong><p>{}</p><small>{}</small>",
                escape_html(title),
                escape_html(body),
                escape_html(sponsored_by)
            ));
            if let Some(cta) = call_to_action {
                code.text(&format!("<span class='cta'>{}</span>", escape_html(cta)));
            }
            code.text("</a>");
        }
        CreativeContent::Vast { .. } => return None,
    }
    if !code.has(Hole::ImpressionUrl) {
        code.text("<img src='");
        code.hole(Hole::ImpressionUrl);
        code.text("' width='1' height='1' alt='' style='position:absolute;left:-9999px'>");
    }
    code.text(TAIL);
    Some(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use marquee_model::{LineItemId, Size, Status};

    fn creative(content: CreativeContent) -> Creative {
        Creative {
            line_item_id: LineItemId(7),
            name: "c".into(),
            status: Status::Active,
            size: Some(Size { w: 300, h: 250 }),
            landing_url: "https://shop.example.com/".into(),
            weight: 100,
            content,
            categories: Vec::new(),
            approval: marquee_model::Approval::Approved,
        }
    }

    fn fill(code: &AdCode) -> String {
        code.parts
            .iter()
            .map(|part| match part {
                Part::Text(t) => t.clone(),
                Part::Hole(h) => format!("[{h:?}]"),
                Part::KeyValue(key) => format!("[KV {key}]"),
            })
            .collect()
    }

    #[test]
    fn html_macros_become_holes_or_ids() {
        let code = ad_code(
            42,
            &creative(CreativeContent::Html {
                html: "<a href=\"{{CLICK_URL}}\">{{CREATIVE_ID}}/{{LINE_ITEM_ID}}</a>{{CACHE_BUSTER}}{{TIMESTAMP}}{{PLACEMENT_ID}}".into(),
            }),
        )
        .expect("servable");
        let filled = fill(&code);
        assert!(
            filled.contains("<a href=\"[ClickUrl]\">42/7</a>[CacheBuster][Timestamp][PlacementId]"),
            "{filled}"
        );
        assert!(filled.ends_with("<img src='[ImpressionUrl]' width='1' height='1' alt='' style='position:absolute;left:-9999px'></body></html>"));
    }

    #[test]
    fn key_value_macros_become_key_value_holes() {
        let code = ad_code(
            3,
            &creative(CreativeContent::Html {
                html: "<script>var id = \"{{KV:hb_adid}}\";</script>".into(),
            }),
        )
        .expect("servable");
        assert!(
            code.parts.contains(&Part::KeyValue("hb_adid".into())),
            "{code:?}"
        );
        assert!(fill(&code).contains("var id = \"[KV hb_adid]\";"));
    }

    #[test]
    fn live_statistics_render_as_numbers() {
        let html = creative(CreativeContent::Html {
            html: "{{STAT:IMPRESSIONS_TODAY}} seen, {{STAT:CLICKS_TODAY}} clicks, \
                   {{STAT:CTR_TODAY}}%, #{{STAT:RANK}} of {{STAT:RANK_OF}}"
                .into(),
        });
        assert!(uses_live_statistics(&html));
        let live = LiveValues {
            impressions_today: 1234,
            clicks_today: 5,
            ctr_today_basis_points: 40,
            rank: 2,
            rank_of: 3,
        };
        let filled = fill(&ad_code_live(9, &html, live).expect("servable"));
        assert!(
            filled.contains("1234 seen, 5 clicks, 0.40%, #2 of 3"),
            "{filled}"
        );
        let filled = fill(&ad_code(9, &html).expect("servable"));
        assert!(
            filled.contains("0 seen, 0 clicks, 0.00%, #0 of 0"),
            "{filled}"
        );
        let plain = creative(CreativeContent::Html {
            html: "<b>{{CLICK_URL}}</b>".into(),
        });
        assert!(!uses_live_statistics(&plain));
    }

    #[test]
    fn a_creative_firing_its_own_impression_gets_no_second_pixel() {
        let code = ad_code(
            1,
            &creative(CreativeContent::ThirdPartyTag {
                tag: "<script src=\"https://ads.example.net/t.js?imp={{IMPRESSION_URL}}&click={{CLICK_URL_ENC}}\"></script>".into(),
            }),
        )
        .expect("servable");
        assert_eq!(fill(&code).matches("[ImpressionUrl]").count(), 1);
    }

    #[test]
    fn image_fields_are_escaped() {
        let code = ad_code(
            1,
            &creative(CreativeContent::Image {
                image_url: "https://cdn.example.com/a.png?x=1&y=\"2\"&z='3'".into(),
                alt: "<script>alert('1')</script>".into(),
            }),
        )
        .expect("servable");
        let filled = fill(&code);
        // Attributes are quoted with `'`, so a `'` in a value must not end one.
        assert!(filled.contains(
            "src='https://cdn.example.com/a.png?x=1&amp;y=&quot;2&quot;&amp;z=&#39;3&#39;'"
        ));
        assert!(filled.contains("alt='&lt;script&gt;alert(&#39;1&#39;)&lt;/script&gt;'"));
        assert!(!filled.contains("<script>"));
    }

    #[test]
    fn video_is_not_display_code() {
        let vast = creative(CreativeContent::Vast {
            xml: None,
            url: Some("https://ads.example.net/vast.xml".into()),
            duration_secs: 15,
            mimes: vec!["video/mp4".into()],
            protocols: vec![3],
        });
        assert_eq!(ad_code(1, &vast), None);
    }
}
