//! Filling prepared ad code: literal text is copied, each hole gets its per-request value.

use marquee_snapshot::{AdCode, Hole, Part};

/// The per-request values of an ad's holes. Every value is safe in HTML text and in a
/// quoted attribute, either quote: URLs built by the edge (base64url tokens, no quotes or `<`),
/// numbers, and a cache buster restricted to alphanumerics.
#[derive(Debug)]
pub struct Values<'a> {
    pub click_url: &'a str,
    pub impression_url: &'a str,
    pub cache_buster: &'a str,
    pub placement: u64,
    pub timestamp: i64,
}

pub fn fill(code: &AdCode, values: &Values<'_>, out: &mut String) {
    let mut digits = itoa::Buffer::new();
    for part in &code.parts {
        match part {
            Part::Text(text) => out.push_str(text),
            Part::Hole(Hole::ClickUrl) => out.push_str(values.click_url),
            Part::Hole(Hole::ClickUrlEncoded) => {
                out.extend(url::form_urlencoded::byte_serialize(
                    values.click_url.as_bytes(),
                ));
            }
            Part::Hole(Hole::ImpressionUrl) => out.push_str(values.impression_url),
            Part::Hole(Hole::CacheBuster) => out.push_str(values.cache_buster),
            Part::Hole(Hole::PlacementId) => out.push_str(digits.format(values.placement)),
            Part::Hole(Hole::Timestamp) => out.push_str(digits.format(values.timestamp)),
        }
    }
}

/// A cache buster from the request, kept only if it is short and alphanumeric, so that it can
/// go into HTML unescaped.
pub fn safe_cache_buster(given: Option<&str>) -> Option<&str> {
    given.filter(|cb| {
        !cb.is_empty() && cb.len() <= 32 && cb.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Appends `text` as a JSON string literal (with quotes).
pub fn json_string(text: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // `<` escaped too, so the string is also safe inside a <script> element.
            '<' => out.push_str("\\u003c"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_filled_in_order() {
        let code = AdCode {
            parts: vec![
                Part::Text("<a href=\"".into()),
                Part::Hole(Hole::ClickUrl),
                Part::Text("\">".into()),
                Part::Hole(Hole::PlacementId),
                Part::Text("</a><script src=\"x?c=".into()),
                Part::Hole(Hole::ClickUrlEncoded),
                Part::Text("&cb=".into()),
                Part::Hole(Hole::CacheBuster),
                Part::Text("&t=".into()),
                Part::Hole(Hole::Timestamp),
                Part::Text("\"></script><img src=\"".into()),
                Part::Hole(Hole::ImpressionUrl),
                Part::Text("\">".into()),
            ],
        };
        let mut out = String::new();
        fill(
            &code,
            &Values {
                click_url: "http://e/t/c?t=AB",
                impression_url: "http://e/t/i?t=CD",
                cache_buster: "42",
                placement: 7,
                timestamp: 1_700_000_000,
            },
            &mut out,
        );
        assert_eq!(
            out,
            "<a href=\"http://e/t/c?t=AB\">7</a><script src=\"x?c=http%3A%2F%2Fe%2Ft%2Fc%3Ft%3DAB&cb=42&t=1700000000\"></script><img src=\"http://e/t/i?t=CD\">"
        );
    }

    #[test]
    fn only_plain_cache_busters_pass() {
        assert_eq!(safe_cache_buster(Some("123abc")), Some("123abc"));
        for bad in ["", "1\"><script>", "a b", &"9".repeat(33)] {
            assert_eq!(safe_cache_buster(Some(bad)), None, "{bad}");
        }
    }

    #[test]
    fn json_strings_escape_what_they_must() {
        let mut out = String::new();
        json_string("a\"b\\c\n</script>\u{2028}", &mut out);
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\u003c/script>\\u2028\"");
    }
}
