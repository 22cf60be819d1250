//! One bid for a decision: its markup, its notice URLs with their signed token, and what the
//! response validation checks.

use std::borrow::Cow;

use marquee_engine::Decision;
use marquee_model::{Format, Rounding};
use marquee_openrtb::{Bid, Imp};
use marquee_snapshot::{LineItemEntry, SnapshotData};
use marquee_tracking::{Claims, TokenKind};
use rand::Rng;

use super::Auction;
use super::imp::{ImpView, deal_id, mtype};
use super::markup::markup;
use crate::notice::{self, NoticeClaims};
use crate::worker::Worker;

/// One bid for a decision. `None` when the creative cannot fill the imp after all (a native
/// request its assets do not satisfy).
pub(super) fn make_bid<'r>(
    auction: &Auction<'r>,
    imp: &'r Imp<'_>,
    view: &ImpView<'_>,
    decision: &Decision,
    worker: &mut Worker,
) -> Option<Bid<'r>> {
    let data: &'r SnapshotData = &auction.loaded.engine.snapshot().data;
    let creative = data.creative(decision.creative)?;
    let line_item = data.line_item(decision.line_item)?;
    let campaign = data.campaign(line_item.campaign_id);
    let advertiser = data.advertiser(line_item.advertiser_id);
    let claims = impression_claims(auction, decision, worker.rng.next_u64());
    let adm = markup(auction, creative, view, &claims, worker)?;
    let token = notice_token(auction, imp, decision, line_item, &claims);
    let base = auction.edge.config.public_url.trim_end_matches('/');
    let notice_url = |path: &str, extra: &str| {
        const MACROS: &str = "&auction=${AUCTION_ID}&imp=${AUCTION_IMP_ID}&p=${AUCTION_PRICE}";
        [base, path, "?t=", &token, MACROS, extra].concat()
    };
    let size = (decision.format == Format::Banner)
        .then_some(decision.size)
        .flatten();
    Some(Bid {
        id: Cow::Owned(format!("{:016x}", claims.nonce)),
        impid: Cow::Borrowed(&imp.id),
        price_micros: decision.bid_cpm.0,
        adm: Some(Cow::Owned(adm)),
        nurl: Some(Cow::Owned(notice_url("/openrtb2/win", ""))),
        burl: Some(Cow::Owned(notice_url("/openrtb2/bill", ""))),
        lurl: Some(Cow::Owned(notice_url(
            "/openrtb2/loss",
            "&r=${AUCTION_LOSS}",
        ))),
        adomain: advertiser
            .map(|a| {
                a.domains
                    .iter()
                    .map(|d| Cow::Borrowed(d.as_str()))
                    .collect()
            })
            .unwrap_or_default(),
        bundle: campaign
            .and_then(|c| c.app_bundle.as_deref())
            .map(Cow::Borrowed),
        cid: Some(Cow::Owned(line_item.campaign_id.0.to_string())),
        crid: Some(Cow::Owned(creative.id.0.to_string())),
        cat: data
            .categories_of(creative, line_item)
            .iter()
            .map(|c| Cow::Borrowed(c.as_str()))
            .collect(),
        dealid: decision
            .deal
            .and_then(|i| view.deals.get(i))
            .map(|d| Cow::Borrowed(deal_id(imp, d.id))),
        w: size.map(|s| s.w),
        h: size.map(|s| s.h),
        mtype: Some(mtype(decision.format)),
        ..Bid::default()
    })
}

/// The claims of the bid's `adm` impression beacon and click, identified by `nonce` (the bid
/// id). No placement: they are an exchange bid's, whose impression does not spend.
fn impression_claims(auction: &Auction<'_>, decision: &Decision, nonce: u64) -> Claims {
    Claims {
        kind: TokenKind::Impression,
        line_item: decision.line_item.0,
        creative: decision.creative.0,
        placement: None,
        user: auction.user,
        issued_at: auction.now.as_second(),
        lifetime: auction.edge.token_lifetime_secs(),
        nonce,
        // An exchange bid's beacon and click are worth nothing: its billing notice brings
        // the price.
        amount_micros: Some(0),
    }
}

/// The token of the bid's win, billing and loss notices.
fn notice_token(
    auction: &Auction<'_>,
    imp: &Imp<'_>,
    decision: &Decision,
    line_item: &LineItemEntry,
    claims: &Claims,
) -> String {
    let edge = auction.edge;
    // A bid in another currency than the line item's carries its price in the line item's
    // currency, so that its clearing price converts at the rates the bid was made with.
    let price_in_line_item_currency = (decision.currency != line_item.price.currency)
        .then(|| {
            edge.bidder.config.rates.convert(
                decision.bid_cpm,
                decision.currency,
                line_item.price.currency,
                Rounding::Up,
            )
        })
        .flatten()
        .map(|price| price.0);
    let mut token = String::with_capacity(notice::CONVERTED_TOKEN_LEN);
    notice::sign_into(
        &edge.keys,
        &NoticeClaims {
            nonce: claims.nonce,
            line_item: decision.line_item.0,
            creative: decision.creative.0,
            user: auction.user,
            price_micros: decision.bid_cpm.0,
            currency: decision.currency,
            exchange: notice::exchange_digest(&auction.exchange.name),
            auction: notice::digest(&[auction.auction_id, &imp.id]),
            test: auction.test,
            issued_at: claims.issued_at,
            lifetime: claims.lifetime,
            price_in_line_item_currency,
        },
        &mut token,
    );
    token
}
