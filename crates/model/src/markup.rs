//! Whether ad markup would load anything over plain HTTP: the one rule both a creative's
//! `secure` flag (compiled into snapshots) and the bid response check on `secure` imps apply,
//! so that a creative the engine picks for a secure imp is never dropped by the check.

/// Whether `markup` holds an `http:` URL (any case) other than the value of an `xmlns`
/// attribute (an XML namespace name, never fetched: every VAST 4 document declares
/// `xmlns="http://www.iab.com/VAST"`). Looks only before each `:`, found by `memchr`'s
/// vectorised search, and allocates nothing: bid checks run it on every bid of a secure imp.
pub fn has_insecure_url(markup: &str) -> bool {
    let bytes = markup.as_bytes();
    memchr::memchr_iter(b':', bytes).any(|colon| {
        let Some(scheme) = colon.checked_sub(4) else {
            return false;
        };
        bytes
            .get(scheme..colon)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"http"))
            // `scheme` starts an ASCII run, so it is a character boundary.
            && !markup.get(..scheme).is_some_and(in_xmlns_attribute)
    })
}

/// Whether the text before a URL ends with `xmlns="` or `xmlns:prefix="` (either quote, any
/// case).
fn in_xmlns_attribute(before: &str) -> bool {
    let Some(before) = before
        .strip_suffix('"')
        .or_else(|| before.strip_suffix('\''))
    else {
        return false;
    };
    let Some(before) = before.trim_end().strip_suffix('=') else {
        return false;
    };
    let before = before.trim_end();
    let name_start = before
        .rfind(|c: char| c.is_ascii_whitespace() || c == '<')
        .map_or(0, |i| i + 1);
    let name = &before.as_bytes()[name_start..];
    name.eq_ignore_ascii_case(b"xmlns")
        || name
            .get(..6)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"xmlns:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_not_fetched_urls() {
        let vast = r#"<VAST version="4.2" xmlns="http://www.iab.com/VAST"
            xmlns:xsi='http://www.w3.org/2001/XMLSchema-instance'><Ad><InLine>
            <MediaFile>https://cdn.example/a.mp4</MediaFile></InLine></Ad></VAST>"#;
        assert!(!has_insecure_url(vast));
        assert!(!has_insecure_url(
            r#"<svg XMLNS = "HTTP://www.w3.org/2000/svg">"#
        ));
        assert!(has_insecure_url(&vast.replace("https://cdn", "http://cdn")));
        // An attribute that merely ends in "xmlns" is not a namespace declaration.
        assert!(has_insecure_url(r#"<a data-xmlns="http://x.example/">"#));
        assert!(has_insecure_url(r#"<img src="HTTP://x.example/a.png">"#));
        assert!(has_insecure_url("http://x.example/"));
        assert!(!has_insecure_url(
            "<p>https://x.example/ and mailto:a@b.example</p>"
        ));
        assert!(!has_insecure_url("ttp://not-a-scheme é:"));
        assert!(has_insecure_url("a:b https://y ttp: hTtP:z"));
        assert!(!has_insecure_url(":ttp: ttp:"));
        assert!(has_insecure_url("éhttp:"));
        assert!(!has_insecure_url("é:p:"));
    }
}
