//! Checks a response against its request before it is sent: every rule an exchange would
//! reject a bid for, each violation naming the bid and the rule.

use std::fmt;

use crate::decimal::format_micros;
use crate::enums::{CreativeAttribute, LossReason, MarkupType};
use crate::request::{BidRequest, Imp};
use crate::response::{Bid, BidResponse};
use crate::seen::Seen;

/// Converts an amount between currencies.
pub trait CurrencyConverter {
    /// `micros` of `from` expressed in `to`, or `None` when the rate is unknown. Floors are
    /// converted with it, so implementations should round up.
    fn convert(&self, micros: i64, from: &str, to: &str) -> Option<i64>;
}

impl<F: Fn(i64, &str, &str) -> Option<i64>> CurrencyConverter for F {
    fn convert(&self, micros: i64, from: &str, to: &str) -> Option<i64> {
        self(micros, from, to)
    }
}

/// A converter that knows no rates: only same-currency comparisons succeed.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoConversion;

impl CurrencyConverter for NoConversion {
    fn convert(&self, micros: i64, from: &str, to: &str) -> Option<i64> {
        (from == to).then_some(micros)
    }
}

/// Longest id a bidder chooses that a response may carry (its currency, seats, and each bid's
/// id and dealid), in bytes; as long as the model allows a deal id. Violations copy these ids, a
/// bid's into each of its own, so this bounds what a response's violations take. The response
/// id and the imp ids echo the request's: an exchange's long ids are not refused, and a bid
/// naming an imp the request lacks is refused as such.
pub const MAX_ID_BYTES: usize = 128;

/// One broken rule: which bid (none for response-level rules) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub bid_id: Option<String>,
    pub imp_id: Option<String>,
    pub rule: Rule,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.bid_id, &self.imp_id) {
            (Some(bid), Some(imp)) => write!(f, "bid {bid:?} for imp {imp:?}: {}", self.rule),
            _ => write!(f, "response: {}", self.rule),
        }
    }
}

/// The rules [`validate_response`] checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    ResponseId {
        expected: String,
        found: String,
    },
    CurrencyNotAllowed {
        currency: String,
    },
    SeatNotAllowed {
        seat: String,
    },
    EmptyBidId,
    DuplicateBidId,
    UnknownImp,
    SecondBidForImp,
    NonPositivePrice {
        price_micros: i64,
    },
    BelowFloor {
        price_micros: i64,
        floor_micros: i64,
        currency: String,
    },
    FloorNotConvertible {
        from: String,
        to: String,
    },
    UnknownDeal {
        dealid: String,
    },
    PrivateAuctionNeedsDeal,
    DealSeatNotAllowed {
        seat: String,
    },
    DealAdvertiserNotAllowed,
    MarkupTypeMissing,
    MarkupTypeNotOffered {
        mtype: MarkupType,
    },
    SizeMissing,
    SizeNotAllowed {
        w: u32,
        h: u32,
    },
    BlockedAttribute {
        attr: CreativeAttribute,
    },
    BlockedCategory {
        cat: String,
    },
    BlockedAdvertiser {
        domain: String,
    },
    /// The request blocks categories and the bid names none: nothing shows it is allowed.
    CategoryUndeclared,
    /// The request blocks advertisers and the bid names no `adomain`.
    AdvertiserUndeclared,
    BlockedApp {
        bundle: String,
    },
    InsecureUrl {
        field: &'static str,
    },
    NoMarkup,
    /// An id longer than [`MAX_ID_BYTES`], named by its place in the response. It refuses the
    /// whole response (no `bid_id`): every other violation would copy the id.
    IdTooLong {
        path: String,
        len: usize,
    },
}

impl Rule {
    /// The loss reason an exchange would report for this rule.
    pub fn loss_reason(&self) -> LossReason {
        match self {
            Self::ResponseId { .. } => LossReason::INVALID_AUCTION_ID,
            Self::UnknownDeal { .. } | Self::PrivateAuctionNeedsDeal => LossReason::INVALID_DEAL_ID,
            Self::SeatNotAllowed { .. } => LossReason::BUYER_SEAT_BLOCKED,
            Self::NonPositivePrice { .. } => LossReason::MISSING_BID_PRICE,
            Self::BelowFloor { .. } | Self::FloorNotConvertible { .. } => {
                LossReason::BELOW_AUCTION_FLOOR
            }
            Self::DealSeatNotAllowed { .. } | Self::DealAdvertiserNotAllowed => {
                LossReason::CREATIVE_FILTERED_NOT_ALLOWED_IN_DEAL
            }
            Self::MarkupTypeMissing | Self::MarkupTypeNotOffered { .. } => {
                LossReason::CREATIVE_FILTERED_FORMAT
            }
            Self::SizeMissing | Self::SizeNotAllowed { .. } => LossReason::CREATIVE_FILTERED_SIZE,
            Self::BlockedAttribute { .. } => LossReason::CREATIVE_FILTERED_ATTRIBUTE,
            Self::BlockedCategory { .. } | Self::CategoryUndeclared => {
                LossReason::CREATIVE_FILTERED_CATEGORY
            }
            Self::BlockedAdvertiser { .. } | Self::AdvertiserUndeclared => {
                LossReason::CREATIVE_FILTERED_ADVERTISER
            }
            Self::BlockedApp { .. } => LossReason::CREATIVE_FILTERED_APP_BUNDLE,
            Self::InsecureUrl { .. } => LossReason::CREATIVE_FILTERED_NOT_SECURE,
            Self::NoMarkup => LossReason::MISSING_MARKUP,
            Self::CurrencyNotAllowed { .. }
            | Self::EmptyBidId
            | Self::DuplicateBidId
            | Self::UnknownImp
            | Self::SecondBidForImp
            | Self::IdTooLong { .. } => LossReason::INVALID_BID_RESPONSE,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ResponseId { expected, found } => {
                write!(f, "response id {found:?} is not the request's {expected:?}")
            }
            Self::CurrencyNotAllowed { currency } => {
                write!(f, "currency {currency} is not among the request's `cur`")
            }
            Self::SeatNotAllowed { seat } => {
                write!(f, "seat {seat:?} is not allowed by wseat/bseat")
            }
            Self::EmptyBidId => f.write_str("bid id is empty"),
            Self::DuplicateBidId => f.write_str("bid id repeats another bid's"),
            Self::UnknownImp => f.write_str("impid names no imp of the request"),
            Self::SecondBidForImp => {
                f.write_str("another bid of the same seat already answers this imp")
            }
            Self::NonPositivePrice { price_micros } => {
                write!(f, "price {} is not positive", format_micros(*price_micros))
            }
            Self::BelowFloor {
                price_micros,
                floor_micros,
                currency,
            } => write!(
                f,
                "price {} is below the floor {} {currency}",
                format_micros(*price_micros),
                format_micros(*floor_micros)
            ),
            Self::FloorNotConvertible { from, to } => {
                write!(f, "floor in {from} cannot be converted to {to}")
            }
            Self::UnknownDeal { dealid } => write!(f, "deal {dealid:?} is not offered on this imp"),
            Self::PrivateAuctionNeedsDeal => f.write_str("private auction takes only deal bids"),
            Self::DealSeatNotAllowed { seat } => {
                write!(f, "seat {seat:?} is not in the deal's wseat")
            }
            Self::DealAdvertiserNotAllowed => {
                f.write_str("no advertiser domain is in the deal's wadomain")
            }
            Self::MarkupTypeMissing => {
                f.write_str("mtype is needed: the imp offers several media types")
            }
            Self::MarkupTypeNotOffered { mtype } => {
                write!(f, "mtype {} is not offered by the imp", mtype.0)
            }
            Self::SizeMissing => f.write_str("banner bid without w/h"),
            Self::SizeNotAllowed { w, h } => {
                write!(f, "size {w}x{h} is not among the imp's banner sizes")
            }
            Self::BlockedAttribute { attr } => {
                write!(f, "creative attribute {} is blocked (battr)", attr.0)
            }
            Self::BlockedCategory { cat } => write!(f, "category {cat:?} is blocked (bcat)"),
            Self::BlockedAdvertiser { domain } => {
                write!(f, "advertiser {domain:?} is blocked (badv)")
            }
            Self::CategoryUndeclared => {
                f.write_str("the request blocks categories (bcat) and the bid names none (cat)")
            }
            Self::AdvertiserUndeclared => f.write_str(
                "the request blocks advertisers (badv) and the bid names none (adomain)",
            ),
            Self::BlockedApp { bundle } => write!(f, "app {bundle:?} is blocked (bapp)"),
            Self::InsecureUrl { field } => {
                write!(f, "{field} has an http: URL but the imp is secure")
            }
            Self::NoMarkup => f.write_str("neither adm nor nurl"),
            Self::IdTooLong { path, len } => {
                write!(
                    f,
                    "{path} is {len} bytes, more than the {MAX_ID_BYTES} allowed"
                )
            }
        }
    }
}

/// Checks `response` against `request`. Floors in another currency than the response's are
/// converted with `converter`; one it cannot convert fails the bid (fail closed).
pub fn validate_response(
    request: &BidRequest<'_>,
    response: &BidResponse<'_>,
    converter: &dyn CurrencyConverter,
) -> Result<(), Vec<Violation>> {
    let too_long = ids_too_long(response);
    if !too_long.is_empty() {
        return Err(too_long);
    }
    let mut violations = Vec::new();
    let mut response_rule = |rule| {
        violations.push(Violation {
            bid_id: None,
            imp_id: None,
            rule,
        })
    };
    if response.id != request.id {
        response_rule(Rule::ResponseId {
            expected: request.id.to_string(),
            found: response.id.to_string(),
        });
    }
    let currency = response.currency();
    if !request.allows_currency(currency) {
        response_rule(Rule::CurrencyNotAllowed {
            currency: currency.to_owned(),
        });
    }
    for seat in &response.seatbid {
        let name = seat.seat.as_deref().unwrap_or("");
        if !request.allows_seat(name) {
            response_rule(Rule::SeatNotAllowed {
                seat: name.to_owned(),
            });
        }
    }
    let mut bid_ids = Seen::new();
    let mut answered_imps = Seen::new();
    for (seat, bid) in response.bids() {
        let mut check = BidCheck {
            bid,
            violations: &mut violations,
        };
        if bid.id.is_empty() {
            check.fail(Rule::EmptyBidId);
        } else if !bid_ids.insert(bid.id.as_ref()) {
            check.fail(Rule::DuplicateBidId);
        }
        check.request_rules(request);
        match request.imp_by_id(&bid.impid) {
            None => check.fail(Rule::UnknownImp),
            Some(imp) => {
                // Per seat: the seats of one response bid for different buyers and compete
                // with each other like any other bids.
                if !answered_imps.insert((seat, bid.impid.as_ref())) {
                    check.fail(Rule::SecondBidForImp);
                }
                check.imp_rules(imp, seat.unwrap_or(""), currency, converter);
            }
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

/// Every id longer than [`MAX_ID_BYTES`], each a violation of the whole response that names
/// where it is without copying it.
fn ids_too_long(response: &BidResponse<'_>) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut check = |id: &str, path: &dyn Fn() -> String| {
        if id.len() > MAX_ID_BYTES {
            violations.push(Violation {
                bid_id: None,
                imp_id: None,
                rule: Rule::IdTooLong {
                    path: path(),
                    len: id.len(),
                },
            });
        }
    };
    check(response.currency(), &|| "cur".to_owned());
    for (s, seat) in response.seatbid.iter().enumerate() {
        check(seat.seat.as_deref().unwrap_or(""), &|| {
            format!("seatbid[{s}].seat")
        });
        for (b, bid) in seat.bid.iter().enumerate() {
            let path = |field| move || format!("seatbid[{s}].bid[{b}].{field}");
            check(&bid.id, &path("id"));
            check(bid.dealid.as_deref().unwrap_or(""), &path("dealid"));
        }
    }
    violations
}

struct BidCheck<'r> {
    bid: &'r Bid<'r>,
    violations: &'r mut Vec<Violation>,
}

impl BidCheck<'_> {
    fn fail(&mut self, rule: Rule) {
        self.violations.push(Violation {
            bid_id: Some(self.bid.id.to_string()),
            imp_id: Some(self.bid.impid.to_string()),
            rule,
        });
    }

    /// Rules that need only the request-level lists.
    fn request_rules(&mut self, request: &BidRequest<'_>) {
        let bid = self.bid;
        if bid.price_micros <= 0 {
            self.fail(Rule::NonPositivePrice {
                price_micros: bid.price_micros,
            });
        }
        if bid.adm.as_deref().unwrap_or("").is_empty()
            && bid.nurl.as_deref().unwrap_or("").is_empty()
        {
            self.fail(Rule::NoMarkup);
        }
        // A bid's `cat` in another taxonomy than the request's `bcat` cannot be matched
        // against it (`IAB1` means different things in 1.0 and 2.x), so such a bid declares no
        // category it can be checked by.
        let cat: &[_] = if request.bcat_taxonomy_is(bid.cattax) {
            &bid.cat
        } else {
            &[]
        };
        // The first blocked value only: a bid may repeat one thousands of times.
        let blocked_cat = cat.iter().find(|cat| {
            request
                .bcat
                .iter()
                .any(|blocked| category_within(cat, blocked))
        });
        if let Some(cat) = blocked_cat {
            self.fail(Rule::BlockedCategory {
                cat: cat.to_string(),
            });
        }
        // A block list is kept only if every bid declares what it would be checked against.
        if !request.bcat.is_empty() && cat.is_empty() {
            self.fail(Rule::CategoryUndeclared);
        }
        if !request.badv.is_empty() && bid.adomain.is_empty() {
            self.fail(Rule::AdvertiserUndeclared);
        }
        let blocked_domain = bid.adomain.iter().find(|domain| {
            request
                .badv
                .iter()
                .any(|blocked| domain_within(domain, blocked))
        });
        if let Some(domain) = blocked_domain {
            self.fail(Rule::BlockedAdvertiser {
                domain: domain.to_string(),
            });
        }
        if let Some(bundle) = bid.bundle.as_deref()
            && request.bapp.iter().any(|blocked| blocked == bundle)
        {
            self.fail(Rule::BlockedApp {
                bundle: bundle.to_owned(),
            });
        }
    }

    fn imp_rules(
        &mut self,
        imp: &Imp<'_>,
        seat: &str,
        currency: &str,
        converter: &dyn CurrencyConverter,
    ) {
        let bid = self.bid;
        let deal = match bid.dealid.as_deref() {
            Some(dealid) => {
                let deal = imp.deal(dealid);
                if deal.is_none() {
                    self.fail(Rule::UnknownDeal {
                        dealid: dealid.to_owned(),
                    });
                }
                deal
            }
            None => None,
        };
        if deal.is_none() && imp.is_private_auction() {
            self.fail(Rule::PrivateAuctionNeedsDeal);
        }
        if let Some(deal) = deal {
            if !deal.wseat.is_empty() && !deal.wseat.iter().any(|s| s == seat) {
                self.fail(Rule::DealSeatNotAllowed {
                    seat: seat.to_owned(),
                });
            }
            let allowed_advertiser = deal.wadomain.is_empty()
                || bid.adomain.iter().any(|domain| {
                    deal.wadomain
                        .iter()
                        .any(|allowed| domain_within(domain, allowed))
                });
            if !allowed_advertiser {
                self.fail(Rule::DealAdvertiserNotAllowed);
            }
        }
        let (floor, floor_currency) = match deal {
            Some(deal) => (deal.bidfloor_micros, deal.bidfloorcur.as_ref()),
            None => (imp.bidfloor_micros, imp.bidfloorcur.as_ref()),
        };
        if floor > 0 && bid.price_micros > 0 {
            match converter.convert(floor, floor_currency, currency) {
                None => self.fail(Rule::FloorNotConvertible {
                    from: floor_currency.to_owned(),
                    to: currency.to_owned(),
                }),
                Some(floor) if bid.price_micros < floor => self.fail(Rule::BelowFloor {
                    price_micros: bid.price_micros,
                    floor_micros: floor,
                    currency: currency.to_owned(),
                }),
                Some(_) => {}
            }
        }
        match bid.mtype.or_else(|| imp.single_media()) {
            None => self.fail(Rule::MarkupTypeMissing),
            Some(mtype) if !imp.offers(mtype) => self.fail(Rule::MarkupTypeNotOffered { mtype }),
            Some(mtype) => self.media_rules(imp, mtype),
        }
        if imp.secure {
            // `secure` is about what the page loads: the markup, and `burl`, which a client may
            // fire. `nurl` and `lurl` are fired server to server, where https buys the page
            // nothing.
            let urls = [("adm", &bid.adm), ("burl", &bid.burl)];
            for (field, value) in urls {
                if value
                    .as_deref()
                    .is_some_and(marquee_model::has_insecure_url)
                {
                    self.fail(Rule::InsecureUrl { field });
                }
            }
        }
    }

    /// Size and blocked attributes of the media type the bid answers.
    fn media_rules(&mut self, imp: &Imp<'_>, mtype: MarkupType) {
        let bid = self.bid;
        let blocked: &[CreativeAttribute] = match mtype {
            MarkupType::BANNER => imp.banner.as_ref().map_or(&[], |b| &b.battr),
            MarkupType::VIDEO => imp.video.as_ref().map_or(&[], |v| &v.battr),
            MarkupType::AUDIO => imp.audio.as_ref().map_or(&[], |a| &a.battr),
            MarkupType::NATIVE => imp.native.as_ref().map_or(&[], |n| &n.battr),
            _ => &[],
        };
        // The first blocked attribute only, like categories.
        if let Some(&attr) = bid.attr.iter().find(|attr| blocked.contains(attr)) {
            self.fail(Rule::BlockedAttribute { attr });
        }
        if mtype != MarkupType::BANNER {
            return;
        }
        let mut sizes = imp.banner_sizes().peekable();
        if sizes.peek().is_none() {
            return;
        }
        match (bid.w, bid.h) {
            (Some(w), Some(h)) => {
                if !sizes.any(|size| size == (w, h)) {
                    self.fail(Rule::SizeNotAllowed { w, h });
                }
            }
            _ => self.fail(Rule::SizeMissing),
        }
    }
}

/// `cat` is `blocked` or one of its subcategories (`IAB25` blocks `IAB25-3`).
fn category_within(cat: &str, blocked: &str) -> bool {
    cat.strip_prefix(blocked)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// `domain` is `parent` or a subdomain of it, ignoring case.
fn domain_within(domain: &str, parent: &str) -> bool {
    let (domain, parent) = (domain.trim(), parent.trim());
    if domain.len() < parent.len() {
        return false;
    }
    let split = domain.len() - parent.len();
    domain.is_char_boundary(split)
        && domain[split..].eq_ignore_ascii_case(parent)
        && (split == 0 || domain.as_bytes()[split - 1] == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_and_domains() {
        assert!(category_within("IAB25", "IAB25"));
        assert!(category_within("IAB25-3", "IAB25"));
        assert!(!category_within("IAB250", "IAB25"));
        assert!(!category_within("IAB2", "IAB25"));
        assert!(domain_within("apple.com", "apple.com"));
        assert!(domain_within("Shop.Apple.com", "apple.COM"));
        assert!(!domain_within("pineapple.com", "apple.com"));
        assert!(!domain_within("com", "apple.com"));
    }
}
