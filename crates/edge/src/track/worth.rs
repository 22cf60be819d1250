//! What an event is worth: signed into a decision's tokens, and logged when it counts.

use marquee_model::{LineItemId, Price};
use marquee_snapshot::SnapshotData;
use marquee_tracking::{Claims, TokenKind};

/// What an event of `kind` is worth for a line item priced `price`, in micros of its
/// currency: for an impression the CPM rate (spend is the sum of rates / 1000, divided once
/// when aggregated, so no impression is rounded), for a click the CPC price; nothing for other
/// events or pricing. Signed into the decision's tokens, so that the price when the ad was
/// chosen is the one its beacon and click are logged at.
pub(crate) fn worth(price: &Price, kind: TokenKind) -> u64 {
    use marquee_model::PricingModel;
    match (kind, price.model) {
        (TokenKind::Impression, PricingModel::Cpm) | (TokenKind::Click, PricingModel::Cpc) => {
            u64::try_from(price.amount_micros.0).unwrap_or(0)
        }
        _ => 0,
    }
}

/// What a counted event of `kind` is worth: what its token carries for its own kind, else (a
/// version 1 token from before an upgrade, or an image tag's click, whose decision is made again
/// now) its line item's price now. Nothing for an exchange bid's tokens (no placement): what it
/// costs is the clearing price its billing notice brings.
pub(super) fn amount(data: &SnapshotData, claims: &Claims, kind: TokenKind) -> i64 {
    if claims.placement.is_none() {
        return 0;
    }
    let carried = claims.amount_micros.filter(|_| claims.kind == kind);
    let micros = match carried {
        Some(carried) => carried,
        None => data
            .line_item(LineItemId(claims.line_item))
            .map_or(0, |li| worth(&li.price, kind)),
    };
    i64::try_from(micros).unwrap_or(i64::MAX)
}
