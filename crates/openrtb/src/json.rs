//! The few JSON writing primitives the hand-written serialisers need.

/// Appends `value` as a JSON string: quoted, with `"`, `\` and control characters escaped.
/// Runs without escapes are copied whole.
pub(crate) fn write_str(out: &mut String, value: &str) {
    out.reserve(value.len() + 2);
    out.push('"');
    let bytes = value.as_bytes();
    let mut start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
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
        start = i + 1;
    }
    out.push_str(&value[start..]);
    out.push('"');
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
        ] {
            let mut out = String::new();
            write_str(&mut out, value);
            let back: String = serde_json::from_str(&out).unwrap_or_default();
            assert_eq!(back, value, "{out}");
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
