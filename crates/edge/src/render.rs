//! Filling prepared ad code: literal text is copied, each hole gets its per-request value.

use std::borrow::Cow;

use marquee_snapshot::{AdCode, Hole, Part};

/// The per-request values of an ad's holes. Every value is safe in HTML text and in a
/// quoted attribute, either quote: URLs built by the edge (base64url tokens, no quotes or `<`),
/// numbers, a cache buster restricted to alphanumerics, and key-values percent-encoded.
#[derive(Debug)]
pub struct Values<'a> {
    pub click_url: &'a str,
    pub impression_url: &'a str,
    pub cache_buster: &'a str,
    pub placement: u64,
    pub timestamp: i64,
    /// The ad request's key-values, for `{{KV:key}}` (none in a bid request).
    pub key_values: &'a [(Cow<'a, str>, Cow<'a, str>)],
}

/// Appends the first value of `key` in `key_values`, percent-encoded outside `A-Z a-z 0-9 -
/// . _ ~`: safe in HTML text, in a quoted attribute and in a JavaScript string, whatever the
/// page sent. Nothing when the request has no such key.
fn push_key_value(key_values: &[(Cow<'_, str>, Cow<'_, str>)], key: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let Some((_, value)) = key_values.iter().find(|(k, _)| k == key) else {
        return;
    };
    for &byte in value.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
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
            Part::KeyValue(key) => push_key_value(values.key_values, key, out),
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

/// Appends `text` as a JSON string literal (with quotes) that is also safe as JavaScript inside a
/// `<script>` element: `<` and the line separators U+2028 and U+2029 are escaped as well. Runs
/// without escapes are copied whole: the JS and JSON answers carry a kilobyte of ad code with a
/// few dozen escapes, and a character at a time cost more than the rest of the request.
pub fn json_string(text: &str, out: &mut String) {
    /// The bytes that start an escape: `"`, `\`, `<`, control characters, and 0xE2, the lead
    /// byte of U+2028 and U+2029 (and of other characters, which pass unchanged).
    const STARTS_ESCAPE: [bool; 256] = {
        let mut table = [false; 256];
        let mut byte = 0;
        while byte < 0x20 {
            table[byte] = true;
            byte += 1;
        }
        table[b'"' as usize] = true;
        table[b'\\' as usize] = true;
        table[b'<' as usize] = true;
        table[0xe2] = true;
        table
    };
    out.reserve(text.len() + 2);
    out.push('"');
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut from = 0;
    while let Some(found) = bytes
        .get(from..)
        .and_then(|rest| rest.iter().position(|&b| STARTS_ESCAPE[usize::from(b)]))
    {
        let at = from + found;
        let (escape, len) = match bytes[at] {
            b'"' => ("\\\"", 1),
            b'\\' => ("\\\\", 1),
            b'\n' => ("\\n", 1),
            b'\r' => ("\\r", 1),
            b'\t' => ("\\t", 1),
            b'<' => ("\\u003c", 1),
            0xe2 => match bytes.get(at + 1..at + 3) {
                Some([0x80, 0xa8]) => ("\\u2028", 3),
                Some([0x80, 0xa9]) => ("\\u2029", 3),
                _ => {
                    from = at + 1;
                    continue;
                }
            },
            _ => ("", 1),
        };
        // Every escape starts at an ASCII byte or a character's lead byte: a boundary.
        out.push_str(&text[start..at]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let control = bytes[at];
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(control >> 4)]));
            out.push(char::from(HEX[usize::from(control & 0xf)]));
        } else {
            out.push_str(escape);
        }
        from = at + len;
        start = from;
    }
    out.push_str(&text[start..]);
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
                key_values: &[],
            },
            &mut out,
        );
        assert_eq!(
            out,
            "<a href=\"http://e/t/c?t=AB\">7</a><script src=\"x?c=http%3A%2F%2Fe%2Ft%2Fc%3Ft%3DAB&cb=42&t=1700000000\"></script><img src=\"http://e/t/i?t=CD\">"
        );
    }

    #[test]
    fn key_values_fill_percent_encoded_and_missing_ones_empty() {
        let code = AdCode {
            parts: vec![
                Part::Text("<script>var id = \"".into()),
                Part::KeyValue("hb_adid".into()),
                Part::Text("\", pb = '".into()),
                Part::KeyValue("hb_pb".into()),
                Part::Text("', none = \"".into()),
                Part::KeyValue("absent".into()),
                Part::Text("\";</script>".into()),
            ],
        };
        let key_values = [
            (Cow::from("hb_pb"), Cow::from("2.50")),
            (Cow::from("hb_adid"), Cow::from("a1\"</script><b x='é'>")),
            (Cow::from("hb_pb"), Cow::from("9.99")),
        ];
        let mut out = String::new();
        fill(
            &code,
            &Values {
                click_url: "",
                impression_url: "",
                cache_buster: "1",
                placement: 1,
                timestamp: 0,
                key_values: &key_values,
            },
            &mut out,
        );
        assert_eq!(
            out,
            "<script>var id = \"a1%22%3C%2Fscript%3E%3Cb%20x%3D%27%C3%A9%27%3E\", pb = '2.50', none = \"\";</script>"
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
        out.clear();
        // Other characters with U+2028's lead byte pass unescaped.
        json_string("€ ✓\u{2029}\u{1}\u{1f}x\u{7f}", &mut out);
        assert_eq!(out, "\"€ ✓\\u2029\\u0001\\u001fx\u{7f}\"");
    }

    proptest::proptest! {
        /// Every string comes back whole from a JSON parser, and its literal holds nothing
        /// that could end a `<script>` element or a JavaScript line.
        #[test]
        fn any_text_round_trips_and_is_script_safe(
            text in "[ab <>/\"\\\\\n\t\\x00\\x1f€✓\u{2028}\u{2029}é]{0,120}"
        ) {
            let mut out = String::new();
            json_string(&text, &mut out);
            let back: String = serde_json::from_str(&out).unwrap_or_default();
            proptest::prop_assert_eq!(&back, &text);
            let unsafe_in_script = ['<', '\u{2028}', '\u{2029}', '\n', '\u{0}'];
            proptest::prop_assert!(!out.contains(unsafe_in_script), "{}", out);
        }
    }
}
