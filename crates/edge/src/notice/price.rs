//! A notice's clearing price: read (decrypted where the exchange has price keys), never more
//! than we bid, and expressed in the line item's currency.

use marquee_model::{LineItemId, Micros, Rounding};
use marquee_openrtb::{PriceError, parse_notice_price};

use super::{NotCounted, NoticeClaims, NoticeKind};
use crate::{Edge, Loaded};

/// The clearing price of a notice of `kind` whose token carries `claims`, from its `price`
/// parameter, in micros of the bid's currency.
pub(super) fn clearing(
    edge: &Edge,
    kind: NoticeKind,
    price: Option<&str>,
    claims: &NoticeClaims,
) -> Result<i64, NotCounted> {
    let crypto = edge
        .bidder
        .by_digest(claims.exchange)
        .and_then(|e| e.crypto.as_ref());
    let clearing = match (crypto, kind) {
        // An exchange with price keys sends its win and billing prices encrypted. A plain or
        // missing one may come from anyone who saw the notice URL (every bid answer carries
        // it, and the bid endpoint answers whoever asks): not counted. (No trimming at the
        // start: a token's first `+`, sent unescaped, comes back from form decoding as a space.)
        (Some(keys), NoticeKind::Win | NoticeKind::Billing) => price
            .map(|p| keys.decrypt(p.trim_end()))
            .and_then(Result::ok)
            .ok_or(NotCounted::Invalid(
                "price not encrypted with the exchange's keys",
            ))
            .map(|micros| i64::try_from(micros).unwrap_or(i64::MAX))?,
        _ => match price.map(|p| parse_notice_price(p, crypto)) {
            Some(Ok(micros)) => i64::try_from(micros).unwrap_or(i64::MAX),
            // Without a price (or with the macro left as it was) our bid is what was paid at
            // most.
            None | Some(Err(PriceError::Unsubstituted | PriceError::Empty)) => claims.price_micros,
            Some(Err(_)) if kind == NoticeKind::Loss => 0,
            Some(Err(_)) => return Err(NotCounted::Invalid("price unreadable")),
        },
    };
    // Never more than we bid: an exchange's clearing price above it is an error on its side.
    Ok(clearing.min(claims.price_micros))
}

/// A clearing price in the bid's currency expressed in the line item's, rounded up (spend is
/// never under-counted): at the bid's own rate when its token carries its price in the line
/// item's currency, else at the configured rates (tokens of earlier builds); unchanged when
/// the bid was in the line item's currency, or the line item is gone or no rate is known.
pub(super) fn in_line_item_currency(
    edge: &Edge,
    loaded: Option<&Loaded>,
    claims: &NoticeClaims,
    clearing: i64,
) -> i64 {
    if let Some(price) = claims.price_in_line_item_currency
        && claims.price_micros > 0
    {
        // clearing × price in the line item's currency / price in the bid's, rounded up.
        let numerator = i128::from(clearing) * i128::from(price);
        let denominator = i128::from(claims.price_micros);
        let quotient =
            numerator.div_euclid(denominator) + i128::from(numerator.rem_euclid(denominator) != 0);
        return i64::try_from(quotient).unwrap_or(clearing);
    }
    let Some(line_item) = loaded.and_then(|l| {
        l.engine
            .snapshot()
            .data
            .line_item(LineItemId(claims.line_item))
    }) else {
        return clearing;
    };
    edge.bidder
        .config
        .rates
        .convert(
            Micros(clearing),
            claims.currency,
            line_item.price.currency,
            Rounding::Up,
        )
        .map_or(clearing, |m| m.0)
}
