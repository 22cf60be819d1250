//! The few JSON writing primitives the hand-written serialisers need.

/// Appends `value` as a JSON string: quoted, with `"`, `\` and control characters escaped.
/// Runs without escapes are copied whole. An `adm` of a kilobyte or more goes through here on
/// every bid, so the escapes are found fast: long text without control characters (all markup
/// and URLs the edge writes; one vectorised pass tells) jumps from quote to backslash with
/// `memchr2`; short text (ids, domains: setting up either pass would cost more than the
/// search) and text with control characters is searched eight bytes at a time.
pub(crate) fn write_str(out: &mut String, value: &str) {
    const SHORT: usize = 64;
    out.reserve(value.len() + 2);
    out.push('"');
    let bytes = value.as_bytes();
    let by_words = bytes.len() < SHORT
        || bytes
            .iter()
            .fold(false, |found, &byte| found | (byte < 0x20));
    let next_escape = |from: usize| {
        let rest = bytes.get(from..)?;
        if by_words {
            next_escape_by_words(rest)
        } else {
            memchr::memchr2(b'"', b'\\', rest)
        }
        .map(|at| from + at)
    };
    let mut start = 0;
    let mut from = 0;
    while let Some(i) = next_escape(from) {
        let byte = bytes[i];
        from = i + 1;
        let escape = match byte {
            // A quote or backslash is itself after a backslash: the backslash goes in and the
            // byte stays in the run (one copy per escape instead of two; an `adm` has dozens).
            b'"' | b'\\' => {
                out.push_str(&value[start..i]);
                out.push('\\');
                start = i;
                continue;
            }
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            _ => "",
        };
        // Every escaped byte is ASCII, so these are character boundaries.
        out.push_str(&value[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        } else {
            out.push_str(escape);
        }
        start = from;
    }
    out.push_str(&value[start..]);
    out.push('"');
}

/// The offset of the first byte of `bytes` that JSON escapes, eight bytes at a time.
fn next_escape_by_words(bytes: &[u8]) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        let found = escape_mask(u64::from_le_bytes(eight));
        if found != 0 {
            // The lowest flagged byte is exact (see `escape_mask`).
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)
        .map(|i| at + i)
}

/// The high bit of each byte of `word` (little-endian) that is `"`, `\` or below 0x20, by the
/// classic "has a zero byte" and "has a byte less than n" bit tricks. A borrow can also flag a
/// byte above a flagged one, never one below, so the lowest flag is exact and 0 means none.
/// The request reader (`fast.rs`) finds the end of strings with it too.
pub(crate) fn escape_mask(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    below_space
        | zero_bytes(word ^ (ONES * u64::from(b'"')))
        | zero_bytes(word ^ (ONES * u64::from(b'\\')))
}

pub(crate) fn write_u64(out: &mut String, value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[at..] {
        out.push(char::from(digit));
    }
}

pub(crate) fn write_i64(out: &mut String, value: i64) {
    if value < 0 {
        out.push('-');
    }
    write_u64(out, value.unsigned_abs());
}

pub(crate) fn write_str_array<'s>(out: &mut String, values: impl IntoIterator<Item = &'s str>) {
    out.push('[');
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, value);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_through_a_json_parser() {
        for value in [
            "plain",
            "quote \" backslash \\",
            "line\nfeed\ttab\r",
            "\u{1}\u{1f}",
            "é ✓ 😀",
            "",
            "eight+ bytes of plain text, then a \" and a \\ and a \u{7}, then more plain",
            "\"\"\"\"\"\"\"\"\"",
            "ÿÿÿÿ\u{1f}ÿÿÿÿ<a href=\"x\">\t</a>",
        ] {
            let mut out = String::new();
            write_str(&mut out, value);
            let back: String = serde_json::from_str(&out).unwrap_or_default();
            assert_eq!(back, value, "{out}");
        }
    }

    #[test]
    fn every_ascii_byte_at_every_offset_of_a_word_round_trips() {
        // Short and long text take different searches.
        for base in ["abcdefghijklmnopq", &"abcdefghijklmnopq".repeat(5)] {
            for byte in 0u8..0x80 {
                for at in (0..17).chain(base.len() - 17..base.len()) {
                    let mut value = base.to_owned().into_bytes();
                    value[at] = byte;
                    let value = String::from_utf8(value).unwrap_or_default();
                    let mut out = String::new();
                    write_str(&mut out, &value);
                    let back: String = serde_json::from_str(&out).unwrap_or_default();
                    assert_eq!(back, value, "{out}");
                }
            }
        }
    }

    #[test]
    fn two_escapes_in_one_word_round_trip() {
        let near = [
            '"', '\\', '\n', '\u{0}', '\u{1}', '\u{1f}', ' ', '!', '#', '[', ']', 'a', 'é',
        ];
        for first in near {
            for second in near {
                for gap in 0..9 {
                    let value = format!("ab{first}{}{second}cdefgh", "x".repeat(gap));
                    let mut out = String::new();
                    write_str(&mut out, &value);
                    let back: String = serde_json::from_str(&out).unwrap_or_default();
                    assert_eq!(back, value, "{out}");
                }
            }
        }
    }

    proptest::proptest! {
        /// Both searches (with and without control characters) on any mix of plain text,
        /// escapes and multi-byte characters.
        #[test]
        fn any_string_round_trips(value in proptest::prop_oneof![
            "[\"\\\\\\x00-\\x1f a-z<>=/é✓😀]{0,160}",
            "[\"\\\\ a-z<>=/é✓😀]{0,160}",
        ]) {
            let mut out = String::new();
            write_str(&mut out, &value);
            let back: String = serde_json::from_str(&out).unwrap_or_default();
            proptest::prop_assert_eq!(back, value);
        }
    }

    #[test]
    fn integers() {
        let mut out = String::new();
        for value in [0, 7, -12, i64::MAX, i64::MIN] {
            out.clear();
            write_i64(&mut out, value);
            assert_eq!(out, value.to_string());
        }
        out.clear();
        write_u64(&mut out, u64::MAX);
        assert_eq!(out, u64::MAX.to_string());
    }
}
