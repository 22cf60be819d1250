//! Exact conversion between decimal text (CPM) and integer micros.
//!
//! Prices and floors arrive as JSON numbers or query-string decimals. Going through `f64` would
//! round (0.03 is not a binary fraction), so the digits are read as text and scaled by 10⁶ in
//! integer arithmetic; the only rounding is the one the caller chooses for digits past the
//! sixth decimal.

use std::fmt::Write as _;

/// Micros per currency unit: prices are CPM, so 1.25 is 1,250,000 micros.
pub const MICROS_PER_UNIT: i64 = 1_000_000;

/// What to do with digits past the sixth decimal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Up to the next micro (away from zero): floors, so that a bid at the rounded floor never
    /// undercuts the exchange's real floor.
    Up,
    /// To the nearest micro, halves away from zero: prices.
    Nearest,
}

/// Why decimal text is not a price.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error("empty number")]
    Empty,
    #[error("not a decimal number")]
    Syntax,
    #[error("number out of range for micros")]
    Overflow,
}

/// Significant digits kept exactly; later ones only steer rounding. 36 digits fit a `u128`
/// with room to scale.
const KEPT_DIGITS: u32 = 36;

/// Parses a decimal number (`1`, `0.03`, `-2.5`, `1.5e-3`: the JSON number grammar, leading
/// zeros tolerated) into micros.
pub fn parse_micros(text: &str, rounding: Rounding) -> Result<i64, DecimalError> {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return Err(DecimalError::Empty);
    }
    let (negative, mut at) = match bytes[0] {
        b'-' => (true, 1),
        _ => (false, 0),
    };
    let mut mantissa: u128 = 0;
    let mut kept: u32 = 0;
    // Power of ten the mantissa is scaled by.
    let mut exponent: i64 = 0;
    // A nonzero digit was dropped past `KEPT_DIGITS`.
    let mut dropped_nonzero = false;
    let mut take_digit = |digit: u8, fractional: bool, mantissa: &mut u128, exponent: &mut i64| {
        if kept < KEPT_DIGITS {
            if *mantissa != 0 || digit != 0 {
                *mantissa = *mantissa * 10 + u128::from(digit);
                kept += 1;
            }
            if fractional {
                *exponent -= 1;
            }
        } else {
            dropped_nonzero |= digit != 0;
            if !fractional {
                *exponent += 1;
            }
        }
    };
    while at < bytes.len() && bytes[at].is_ascii_digit() {
        take_digit(bytes[at] - b'0', false, &mut mantissa, &mut exponent);
        at += 1;
    }
    if at == usize::from(negative) {
        return Err(DecimalError::Syntax);
    }
    if at < bytes.len() && bytes[at] == b'.' {
        at += 1;
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            take_digit(bytes[at] - b'0', true, &mut mantissa, &mut exponent);
            at += 1;
        }
        if at == start {
            return Err(DecimalError::Syntax);
        }
    }
    if at < bytes.len() && (bytes[at] == b'e' || bytes[at] == b'E') {
        at += 1;
        let exp_negative = match bytes.get(at) {
            Some(b'-') => {
                at += 1;
                true
            }
            Some(b'+') => {
                at += 1;
                false
            }
            _ => false,
        };
        let start = at;
        let mut written: i64 = 0;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            // Saturate: anything past a few hundred is zero or overflow anyway.
            written = (written * 10 + i64::from(bytes[at] - b'0')).min(100_000);
            at += 1;
        }
        if at == start {
            return Err(DecimalError::Syntax);
        }
        exponent += if exp_negative { -written } else { written };
    }
    if at != bytes.len() {
        return Err(DecimalError::Syntax);
    }
    let magnitude = scale_to_micros(mantissa, exponent + 6, dropped_nonzero, rounding)?;
    let magnitude = i64::try_from(magnitude).map_err(|_| DecimalError::Overflow)?;
    Ok(if negative { -magnitude } else { magnitude })
}

/// `mantissa × 10^power`, rounded to an integer.
fn scale_to_micros(
    mantissa: u128,
    power: i64,
    dropped_nonzero: bool,
    rounding: Rounding,
) -> Result<u128, DecimalError> {
    if mantissa == 0 {
        return Ok(0);
    }
    if power >= 0 {
        let factor = u32::try_from(power)
            .ok()
            .and_then(|p| 10u128.checked_pow(p))
            .ok_or(DecimalError::Overflow)?;
        return mantissa.checked_mul(factor).ok_or(DecimalError::Overflow);
    }
    // A divisor past 10^38 leaves a quotient of zero with a nonzero remainder.
    let divisor = u32::try_from(-power)
        .ok()
        .and_then(|p| 10u128.checked_pow(p));
    let (quotient, remainder, divisor) = match divisor {
        Some(divisor) => (mantissa / divisor, mantissa % divisor, Some(divisor)),
        None => (0, mantissa, None),
    };
    let round_up = match rounding {
        Rounding::Up => remainder != 0 || dropped_nonzero,
        // Halves go up, so digits dropped past the kept precision cannot change the result.
        Rounding::Nearest => match divisor {
            Some(divisor) => remainder * 2 >= divisor,
            None => false,
        },
    };
    Ok(quotient + u128::from(round_up))
}

/// Appends micros as the shortest exact decimal: 1250000 → `1.25`, 3000000 → `3`,
/// 100 → `0.0001`, -500000 → `-0.5`.
pub fn write_micros(micros: i64, out: &mut String) {
    if micros < 0 {
        out.push('-');
    }
    let magnitude = micros.unsigned_abs();
    let units = magnitude / MICROS_PER_UNIT.unsigned_abs();
    let fraction = magnitude % MICROS_PER_UNIT.unsigned_abs();
    // Writing to a String cannot fail.
    let _ = write!(out, "{units}");
    if fraction == 0 {
        return;
    }
    let mut digits = [b'0'; 6];
    let mut rest = fraction;
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let used = digits.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
    out.push('.');
    for &digit in &digits[..used] {
        out.push(char::from(digit));
    }
}

/// [`write_micros`] into a new string.
pub fn format_micros(micros: i64) -> String {
    let mut out = String::with_capacity(12);
    write_micros(micros, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exactly() {
        let cases = [
            ("0.03", 30_000),
            ("1.25", 1_250_000),
            ("5", 5_000_000),
            ("5.0", 5_000_000),
            ("4.50", 4_500_000),
            ("0.751371", 751_371),
            ("0.0001", 100),
            ("-2.5", -2_500_000),
            ("1.5e-3", 1_500),
            ("1.5E+1", 15_000_000),
            ("12e2", 1_200_000_000),
            ("007", 7_000_000),
            ("0.030000000000000001", 30_000),
            ("0", 0),
            ("0.0", 0),
        ];
        for (text, micros) in cases {
            assert_eq!(parse_micros(text, Rounding::Nearest), Ok(micros), "{text}");
        }
    }

    #[test]
    fn rounds_past_the_sixth_decimal() {
        assert_eq!(parse_micros("0.0000001", Rounding::Up), Ok(1));
        assert_eq!(parse_micros("0.0000001", Rounding::Nearest), Ok(0));
        assert_eq!(parse_micros("0.0000005", Rounding::Nearest), Ok(1));
        assert_eq!(parse_micros("0.0000004999", Rounding::Nearest), Ok(0));
        assert_eq!(parse_micros("1.2345675", Rounding::Nearest), Ok(1_234_568));
        assert_eq!(parse_micros("1.2345671", Rounding::Up), Ok(1_234_568));
        assert_eq!(parse_micros("1.234567", Rounding::Up), Ok(1_234_567));
        assert_eq!(parse_micros("-0.0000005", Rounding::Nearest), Ok(-1));
        assert_eq!(parse_micros("1e-400", Rounding::Up), Ok(1));
        assert_eq!(parse_micros("1e-400", Rounding::Nearest), Ok(0));
        // A nonzero digit beyond the kept precision still rounds a floor up.
        let long = format!("1.{}1", "0".repeat(40));
        assert_eq!(parse_micros(&long, Rounding::Up), Ok(1_000_001));
        assert_eq!(parse_micros(&long, Rounding::Nearest), Ok(1_000_000));
    }

    #[test]
    fn refuses_what_is_not_a_number() {
        for text in [
            "", "-", ".", "1.", ".5", "1e", "1e+", "abc", "1.2.3", "1,5", " 1", "+1",
        ] {
            assert!(parse_micros(text, Rounding::Nearest).is_err(), "{text:?}");
        }
        assert_eq!(
            parse_micros("1e300", Rounding::Nearest),
            Err(DecimalError::Overflow)
        );
        assert_eq!(
            parse_micros("9223372036854.775808", Rounding::Nearest),
            Err(DecimalError::Overflow)
        );
        assert_eq!(
            parse_micros("9223372036854.775807", Rounding::Nearest),
            Ok(i64::MAX)
        );
    }

    #[test]
    fn formats_the_shortest_exact_decimal() {
        let cases = [
            (1_250_000, "1.25"),
            (3_000_000, "3"),
            (100, "0.0001"),
            (0, "0"),
            (-500_000, "-0.5"),
            (1, "0.000001"),
            (i64::MIN, "-9223372036854.775808"),
        ];
        for (micros, text) in cases {
            assert_eq!(format_micros(micros), text);
        }
    }
}
