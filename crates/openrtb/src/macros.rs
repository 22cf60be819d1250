//! The standard auction macros (OpenRTB 2.6 §4.4) and the price a notice brings back.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::crypto::{PriceCrypto, PriceError};
use crate::decimal::{self, Rounding};

/// Values for the auction macros. A macro whose value is `None` is left as it is, like any
/// `${...}` this list does not name.
#[derive(Clone, Copy, Debug, Default)]
pub struct AuctionMacros<'v> {
    /// `${AUCTION_ID}`: the request's id.
    pub auction_id: Option<&'v str>,
    /// `${AUCTION_BID_ID}`: the response's `bidid`.
    pub bid_id: Option<&'v str>,
    /// `${AUCTION_IMP_ID}`: the imp won.
    pub imp_id: Option<&'v str>,
    /// `${AUCTION_SEAT_ID}`: the seat that bid.
    pub seat_id: Option<&'v str>,
    /// `${AUCTION_AD_ID}`: the bid's `adid`.
    pub ad_id: Option<&'v str>,
    /// `${AUCTION_PRICE}`: clearing price, a decimal (see [`crate::write_micros`]) or an
    /// encrypted token.
    pub price: Option<&'v str>,
    /// `${AUCTION_CURRENCY}`.
    pub currency: Option<&'v str>,
    /// `${AUCTION_MBR}`: market bid ratio (clearing price ÷ bid).
    pub mbr: Option<&'v str>,
    /// `${AUCTION_LOSS}`: a loss reason code.
    pub loss: Option<&'v str>,
    /// `${AUCTION_MIN_TO_WIN}`: the lowest bid that would have won.
    pub min_to_win: Option<&'v str>,
}

impl<'v> AuctionMacros<'v> {
    fn value(&self, name: &str) -> Option<&'v str> {
        match name {
            "AUCTION_ID" => self.auction_id,
            "AUCTION_BID_ID" => self.bid_id,
            "AUCTION_IMP_ID" => self.imp_id,
            "AUCTION_SEAT_ID" => self.seat_id,
            "AUCTION_AD_ID" => self.ad_id,
            "AUCTION_PRICE" => self.price,
            "AUCTION_CURRENCY" => self.currency,
            "AUCTION_MBR" => self.mbr,
            "AUCTION_LOSS" => self.loss,
            "AUCTION_MIN_TO_WIN" => self.min_to_win,
            _ => None,
        }
    }
}

/// What a macro value keeps as it is: RFC 3986's unreserved characters. Prices, currencies,
/// UUIDs and web-safe base64 price tokens are made of these only, so they arrive unchanged.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Appends `template` to `out` with every known macro replaced by its value, percent-encoded
/// (see [`KEPT`]): ids come from exchanges and bidders, and one with `&`, `#`, a quote or `<`
/// must not change the URL or the markup it is put into.
pub fn expand_macros(template: &str, values: &AuctionMacros<'_>, out: &mut String) {
    out.reserve(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        // The name is read up to its first other character, which must be the `}`: searching
        // ahead for `}` first would read the rest of `${ ${ ${ …}` at every `${`.
        let end = after
            .bytes()
            .position(|b| !is_name_byte(b))
            .unwrap_or(after.len());
        out.push_str(&rest[..start]);
        if after.as_bytes().get(end) != Some(&b'}') {
            // Not a macro (`${A ${AUCTION_ID}`, or unclosed): keep the `${` and look again
            // after it.
            out.push_str("${");
            rest = after;
            continue;
        }
        match values.value(&after[..end]) {
            Some(value) => out.extend(utf8_percent_encode(value, KEPT)),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
}

/// A byte a macro name may hold.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// Longest plain decimal price accepted from a notice; encrypted tokens are longer.
const MAX_DECIMAL_CHARS: usize = 24;

/// Reads the `${AUCTION_PRICE}` a notice brings back (already URL-decoded) into micros: a
/// plain decimal (exact, rounded to the nearest micro past six decimals) or, when it is not
/// one, an encrypted token, which needs the exchange's keys.
pub fn parse_notice_price(text: &str, crypto: Option<&PriceCrypto>) -> Result<u64, PriceError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(PriceError::Empty);
    }
    if text.starts_with("${") {
        return Err(PriceError::Unsubstituted);
    }
    let plain = text.len() <= MAX_DECIMAL_CHARS
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-');
    if plain {
        let micros = decimal::parse_micros(text, Rounding::Nearest)?;
        return u64::try_from(micros).map_err(|_| PriceError::Negative);
    }
    crypto.ok_or(PriceError::NoKeys)?.decrypt(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(template: &str, values: &AuctionMacros<'_>) -> String {
        let mut out = String::new();
        expand_macros(template, values, &mut out);
        out
    }

    #[test]
    fn expands_every_standard_macro() {
        let values = AuctionMacros {
            auction_id: Some("a"),
            bid_id: Some("b"),
            imp_id: Some("i"),
            seat_id: Some("s"),
            ad_id: Some("ad"),
            price: Some("1.25"),
            currency: Some("USD"),
            mbr: Some("0.8"),
            loss: Some("102"),
            min_to_win: Some("1.3"),
        };
        let template = "x?id=${AUCTION_ID}&b=${AUCTION_BID_ID}&i=${AUCTION_IMP_ID}\
            &s=${AUCTION_SEAT_ID}&ad=${AUCTION_AD_ID}&p=${AUCTION_PRICE}&c=${AUCTION_CURRENCY}\
            &m=${AUCTION_MBR}&l=${AUCTION_LOSS}&w=${AUCTION_MIN_TO_WIN}";
        assert_eq!(
            expand(template, &values),
            "x?id=a&b=b&i=i&s=s&ad=ad&p=1.25&c=USD&m=0.8&l=102&w=1.3"
        );
    }

    #[test]
    fn values_are_percent_encoded_where_they_could_break_a_url_or_markup() {
        let values = AuctionMacros {
            auction_id: Some("a b&c=d#e\"<f>/ü"),
            price: Some("YWJjMTIz-_~.9"),
            ..AuctionMacros::default()
        };
        assert_eq!(
            expand(
                "https://x.example/w?id=${AUCTION_ID}&p=${AUCTION_PRICE}",
                &values
            ),
            "https://x.example/w?id=a%20b%26c%3Dd%23e%22%3Cf%3E%2F%C3%BC&p=YWJjMTIz-_~.9"
        );
    }

    #[test]
    fn leaves_unknown_unset_and_unclosed_macros() {
        let values = AuctionMacros {
            price: Some("2"),
            ..AuctionMacros::default()
        };
        assert_eq!(
            expand(
                "${AUCTION_PRICE}${OTHER}${AUCTION_LOSS}$${AUCTION_PRICE}${auction_price}${",
                &values
            ),
            "2${OTHER}${AUCTION_LOSS}$2${auction_price}${"
        );
        assert_eq!(expand("", &values), "");
        assert_eq!(expand("no macros", &values), "no macros");
        assert_eq!(expand("${AUCTION_PRICE", &values), "${AUCTION_PRICE");
        assert_eq!(expand("${A ${AUCTION_PRICE}", &values), "${A 2");
    }

    /// The expansion as first written: search ahead for `}`, then check the name. Quadratic on
    /// `${ ${ ${ … }`, but plainly right; the fast one must agree with it.
    fn expand_by_definition(template: &str, values: &AuctionMacros<'_>) -> String {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else { break };
            let name = &after[..end];
            out.push_str(&rest[..start]);
            if !name.bytes().all(is_name_byte) {
                out.push_str("${");
                rest = after;
                continue;
            }
            match values.value(name) {
                Some(value) => out.extend(utf8_percent_encode(value, KEPT)),
                None => out.push_str(&rest[start..start + 2 + end + 1]),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// A price that must be encoded, so a replaced macro shows.
    fn price_only() -> AuctionMacros<'static> {
        AuctionMacros {
            price: Some("2&"),
            ..AuctionMacros::default()
        }
    }

    #[test]
    fn unclosed_macros_one_after_another_are_copied() {
        // Bidder markup: every `${` starts a name that a space ends.
        let open = "${ ".repeat(50_000);
        assert_eq!(
            expand(&format!("{open}}}"), &price_only()),
            format!("{open}}}")
        );
        assert_eq!(
            expand(&format!("{open}${{AUCTION_PRICE}}"), &price_only()),
            format!("{open}2%26")
        );
        let names = "${AUCTION_PRICE".repeat(10_000);
        assert_eq!(
            expand(&format!("{names}}}"), &price_only()),
            format!("{}2%26", "${AUCTION_PRICE".repeat(9_999))
        );
        for template in ["${ ${ ${A}", "${${AUCTION_PRICE}}", "$${", "${A:B}${-}${}"] {
            assert_eq!(
                expand(template, &price_only()),
                expand_by_definition(template, &price_only()),
                "{template}"
            );
        }
    }

    proptest::proptest! {
        /// Any mix of macro names, braces, dollars and other characters expands as defined.
        #[test]
        fn expands_as_defined(template in "(\\$\\{|\\}|\\$|AUCTION_PRICE|AUCTION_LOSS|[A_: é-]){0,24}") {
            proptest::prop_assert_eq!(
                expand(&template, &price_only()),
                expand_by_definition(&template, &price_only())
            );
        }
    }

    #[test]
    fn notice_prices() {
        assert_eq!(parse_notice_price("1.25", None), Ok(1_250_000));
        assert_eq!(parse_notice_price(" 0.0001 ", None), Ok(100));
        assert_eq!(parse_notice_price("3", None), Ok(3_000_000));
        assert_eq!(parse_notice_price("", None), Err(PriceError::Empty));
        assert_eq!(
            parse_notice_price("${AUCTION_PRICE}", None),
            Err(PriceError::Unsubstituted)
        );
        assert_eq!(parse_notice_price("-1", None), Err(PriceError::Negative));
        assert!(matches!(
            parse_notice_price("1.2.3", None),
            Err(PriceError::Decimal(_))
        ));
        assert_eq!(
            parse_notice_price("YWJjMTIzZGVmNDU2Z2hpN7fhCuPemCce_6msaw", None),
            Err(PriceError::NoKeys)
        );
    }
}
