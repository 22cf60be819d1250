//! Reading the low-entropy User-Agent Client Hints, which Chromium-based browsers send on every
//! request: `Sec-CH-UA-Mobile` (a structured-header boolean), `Sec-CH-UA-Platform` (a string)
//! and `Sec-CH-UA` (a list of quoted brands with a `v` parameter). A value that does not parse
//! is as good as absent: the User-Agent answers instead.

use crate::families::{browser, os};
use crate::ua::MAX_LEN;

/// `?1` (the browser considers itself mobile) or `?0`.
pub(crate) fn mobile(value: &str) -> Option<bool> {
    match value.trim_matches(is_ows) {
        "?1" => Some(true),
        "?0" => Some(false),
        _ => None,
    }
}

/// The platform's family. The values are those the specification lists; others (`"Fuchsia"`,
/// `"Unknown"`, `""`) leave the question to the User-Agent.
pub(crate) fn platform(value: &str) -> Option<&'static str> {
    let name = value
        .trim_matches(is_ows)
        .strip_prefix('"')?
        .strip_suffix('"')?;
    Some(match name {
        "Android" => os::ANDROID,
        "Chrome OS" | "Chromium OS" => os::CHROME_OS,
        "iOS" => os::IOS,
        "Linux" => os::LINUX,
        "macOS" => os::MACOS,
        "Windows" => os::WINDOWS,
        _ => return None,
    })
}

/// The browser family the brand list names. Brands we do not know are ignored, among them the
/// deliberately odd "GREASE" brands (`"Not-A.Brand"`, `"Not)A;Brand"`, …) browsers add so that
/// parsers cope with any name. A specific brand wins over "Google Chrome", which wins over
/// "Chromium" (listed by every Chromium-based browser). A list that does not parse, or is
/// longer than any a browser sends, names none.
pub(crate) fn brands(value: &str) -> Option<&'static str> {
    let bytes = value.as_bytes();
    if bytes.len() > MAX_LEN {
        return None;
    }
    let mut best: Option<(u8, &'static str)> = None;
    let mut at = 0;
    loop {
        at = skip_ows(bytes, at);
        let (name, after) = quoted(bytes, at)?;
        if let Some((rank, family)) = brand(name)
            && best.is_none_or(|(best_rank, _)| rank > best_rank)
        {
            best = Some((rank, family));
        }
        // Parameters (`;v="124"`) up to the next member.
        at = after;
        loop {
            match bytes.get(at) {
                None => return best.map(|(_, family)| family),
                Some(b',') => {
                    at += 1;
                    break;
                }
                Some(b'"') => at = quoted(bytes, at)?.1,
                Some(_) => at += 1,
            }
        }
    }
}

/// Ranks: what a browser lists as itself beats the engine it is built on.
fn brand(name: &[u8]) -> Option<(u8, &'static str)> {
    Some(match name {
        b"Microsoft Edge" => (2, browser::EDGE),
        b"Opera" | b"Opera GX" => (2, browser::OPERA),
        b"Samsung Internet" => (2, browser::SAMSUNG_INTERNET),
        b"YaBrowser" | b"Yandex" => (2, browser::YANDEX),
        b"Android WebView" => (2, browser::WEBVIEW),
        b"Google Chrome" => (1, browser::CHROME),
        b"Chromium" => (0, browser::CHROMIUM),
        _ => return None,
    })
}

/// A structured-header string starting at `at`: its raw contents (escapes left in) and the
/// position after its closing quote. `None` if there is no string there or it never ends.
fn quoted(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let start = at + 1;
    let mut i = start;
    loop {
        match bytes.get(i)? {
            b'"' => return Some((bytes.get(start..i)?, i + 1)),
            // Only `\"` and `\\` are valid escapes.
            b'\\' => match bytes.get(i + 1)? {
                b'"' | b'\\' => i += 2,
                _ => return None,
            },
            _ => i += 1,
        }
    }
}

fn skip_ows(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|&b| b == b' ' || b == b'\t') {
        at += 1;
    }
    at
}

fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mobile_is_a_boolean() {
        assert_eq!(mobile("?1"), Some(true));
        assert_eq!(mobile(" ?0 "), Some(false));
        for bad in ["", "?", "1", "?2", "?1?", "true", "\"?1\""] {
            assert_eq!(mobile(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn platform_is_a_quoted_name() {
        assert_eq!(platform("\"Android\""), Some(os::ANDROID));
        assert_eq!(platform(" \"macOS\""), Some(os::MACOS));
        assert_eq!(platform("\"Chrome OS\""), Some(os::CHROME_OS));
        for bad in [
            "",
            "\"",
            "\"\"",
            "Windows",
            "\"Windows",
            "Windows\"",
            "\"Unknown\"",
            "\"Fuchsia\"",
            "\"windows\"",
        ] {
            assert_eq!(platform(bad), None, "{bad:?}");
        }
    }
}
