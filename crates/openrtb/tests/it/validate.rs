#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Each response rule: a bid that passes, and the change that breaks it.

use std::borrow::Cow;

use marquee_openrtb::{
    Bid, BidRequest, BidResponse, CreativeAttribute, CurrencyConverter, LossReason, MarkupType,
    NoConversion, Rule, SeatBid, Violation, validate_response,
};

const REQUEST: &str = r#"{
  "id": "auction-1",
  "cur": ["USD", "EUR"],
  "wseat": ["marquee", "other"],
  "bseat": ["other"],
  "bcat": ["IAB25", "IAB7-39"],
  "badv": ["blocked.example"],
  "bapp": ["com.blocked.app"],
  "imp": [
    {"id": "banner", "bidfloor": 1.0, "banner": {"w": 300, "h": 250, "format": [{"w": 728, "h": 90}], "battr": [8]}},
    {"id": "eur", "bidfloor": 2.0, "bidfloorcur": "EUR", "banner": {}},
    {"id": "deal", "bidfloor": 0.5, "banner": {"w": 300, "h": 250},
     "pmp": {"private_auction": 1, "deals": [
       {"id": "gold", "bidfloor": 3.0, "wseat": ["marquee"], "wadomain": ["brand.example"]},
       {"id": "open", "bidfloor": 0.75}]}},
    {"id": "secure", "secure": 1, "banner": {}},
    {"id": "multi", "banner": {}, "video": {"mimes": ["video/mp4"], "battr": [6]}}
  ]
}"#;

fn request() -> BidRequest<'static> {
    BidRequest::parse(REQUEST.as_bytes()).unwrap()
}

/// A bid on the banner imp that breaks no rule.
fn good_bid() -> Bid<'static> {
    Bid {
        id: "b1".into(),
        impid: "banner".into(),
        price_micros: 1_500_000,
        adm: Some("<a href=\"https://brand.example\">ad</a>".into()),
        nurl: Some("https://edge.test/win?p=${AUCTION_PRICE}".into()),
        burl: Some("https://edge.test/bill?p=${AUCTION_PRICE}".into()),
        adomain: vec!["brand.example".into()],
        cat: vec!["IAB1".into()],
        crid: Some("c1".into()),
        w: Some(300),
        h: Some(250),
        mtype: Some(MarkupType::BANNER),
        ..Bid::default()
    }
}

fn response(bids: Vec<Bid<'static>>) -> BidResponse<'static> {
    BidResponse {
        id: "auction-1".into(),
        seatbid: vec![SeatBid {
            bid: bids,
            seat: Some("marquee".into()),
        }],
        cur: Some("USD".into()),
        ..BidResponse::default()
    }
}

/// The rules one bid breaks (after applying `change` to a good one).
fn rules_for(change: impl FnOnce(&mut Bid<'static>)) -> Vec<Rule> {
    let mut bid = good_bid();
    change(&mut bid);
    rules_of(&response(vec![bid]), &NoConversion)
}

fn rules_of(response: &BidResponse<'_>, converter: &dyn CurrencyConverter) -> Vec<Rule> {
    match validate_response(&request(), response, converter) {
        Ok(()) => Vec::new(),
        Err(violations) => violations.into_iter().map(|v| v.rule).collect(),
    }
}

#[test]
fn a_good_bid_passes() {
    assert_eq!(rules_for(|_| {}), vec![]);
    // Every listed banner size, the preferred one included.
    assert_eq!(rules_for(|b| (b.w, b.h) = (Some(728), Some(90))), vec![]);
    // The banner imp offers only banner, so mtype may be left out.
    assert_eq!(rules_for(|b| b.mtype = None), vec![]);
    // At the floor exactly.
    assert_eq!(rules_for(|b| b.price_micros = 1_000_000), vec![]);
    // nurl alone is markup enough (fetched on win).
    assert_eq!(rules_for(|b| b.adm = None), vec![]);
}

#[test]
fn floor() {
    assert_eq!(
        rules_for(|b| b.price_micros = 999_999),
        vec![Rule::BelowFloor {
            price_micros: 999_999,
            floor_micros: 1_000_000,
            currency: "USD".into()
        }]
    );
    assert_eq!(
        rules_for(|b| b.price_micros = 0),
        vec![Rule::NonPositivePrice { price_micros: 0 }]
    );
    assert_eq!(
        rules_for(|b| b.price_micros = -5),
        vec![Rule::NonPositivePrice { price_micros: -5 }]
    );
}

#[test]
fn floor_in_another_currency() {
    let eur_bid = |price_micros| Bid {
        id: "e".into(),
        impid: "eur".into(),
        price_micros,
        w: None,
        h: None,
        ..good_bid()
    };
    // 1 EUR = 1.1 USD, rounded up as a floor conversion should be.
    let rates = |micros: i64, from: &str, to: &str| match (from, to) {
        (a, b) if a == b => Some(micros),
        ("EUR", "USD") => Some((micros * 11 + 9) / 10),
        _ => None,
    };
    assert_eq!(
        rules_of(&response(vec![eur_bid(2_200_000)]), &rates),
        vec![]
    );
    assert_eq!(
        rules_of(&response(vec![eur_bid(2_199_999)]), &rates),
        vec![Rule::BelowFloor {
            price_micros: 2_199_999,
            floor_micros: 2_200_000,
            currency: "USD".into()
        }]
    );
    // A floor the caller cannot convert fails closed.
    assert_eq!(
        rules_of(&response(vec![eur_bid(100_000_000)]), &NoConversion),
        vec![Rule::FloorNotConvertible {
            from: "EUR".into(),
            to: "USD".into()
        }]
    );
    // Bidding in the floor's currency needs no rate.
    let mut in_euros = response(vec![eur_bid(2_000_000)]);
    in_euros.cur = Some("EUR".into());
    assert_eq!(rules_of(&in_euros, &NoConversion), vec![]);
}

#[test]
fn deals_and_private_auctions() {
    let on_deal = |dealid: Option<&'static str>, price_micros| {
        rules_for(move |b| {
            b.impid = "deal".into();
            b.dealid = dealid.map(Cow::Borrowed);
            b.price_micros = price_micros;
        })
    };
    assert_eq!(on_deal(Some("gold"), 3_000_000), vec![]);
    // The deal's floor, not the imp's.
    assert!(matches!(
        on_deal(Some("gold"), 2_999_999)[..],
        [Rule::BelowFloor {
            floor_micros: 3_000_000,
            ..
        }]
    ));
    assert_eq!(on_deal(Some("open"), 750_000), vec![]);
    assert_eq!(
        on_deal(Some("nope"), 5_000_000),
        vec![
            Rule::UnknownDeal {
                dealid: "nope".into()
            },
            Rule::PrivateAuctionNeedsDeal
        ]
    );
    assert_eq!(
        on_deal(None, 5_000_000),
        vec![Rule::PrivateAuctionNeedsDeal]
    );
    // A deal id on an imp without that deal.
    assert_eq!(
        rules_for(|b| b.dealid = Some("gold".into())),
        vec![Rule::UnknownDeal {
            dealid: "gold".into()
        }]
    );
    // The gold deal allows one seat and one advertiser.
    let mut other_seat = response(vec![Bid {
        impid: "deal".into(),
        dealid: Some("gold".into()),
        price_micros: 3_000_000,
        ..good_bid()
    }]);
    other_seat.seatbid[0].seat = Some("third".into());
    let rules = rules_of(&other_seat, &NoConversion);
    assert!(rules.contains(&Rule::DealSeatNotAllowed {
        seat: "third".into()
    }));
    assert_eq!(
        rules_for(|b| {
            b.impid = "deal".into();
            b.dealid = Some("gold".into());
            b.price_micros = 3_000_000;
            b.adomain = vec!["else.example".into()];
        }),
        vec![Rule::DealAdvertiserNotAllowed]
    );
}

#[test]
fn sizes() {
    assert_eq!(
        rules_for(|b| (b.w, b.h) = (Some(320), Some(50))),
        vec![Rule::SizeNotAllowed { w: 320, h: 50 }]
    );
    assert_eq!(rules_for(|b| b.h = None), vec![Rule::SizeMissing]);
    // An imp that names no size takes any.
    assert_eq!(
        rules_for(|b| {
            b.impid = "secure".into();
            (b.w, b.h) = (Some(1), Some(1));
        }),
        vec![]
    );
}

#[test]
fn blocked_categories_advertisers_apps_and_attributes() {
    assert_eq!(
        rules_for(|b| b.cat = vec!["IAB1".into(), "IAB25-3".into()]),
        vec![Rule::BlockedCategory {
            cat: "IAB25-3".into()
        }]
    );
    assert_eq!(rules_for(|b| b.cat = vec!["IAB7-3".into()]), vec![]);
    // The request has `bcat` and `badv`: a bid that names no category or no advertiser domain
    // cannot show it is allowed.
    assert_eq!(rules_for(|b| b.cat.clear()), vec![Rule::CategoryUndeclared]);
    // `bcat` is in IAB 1.0 (the request's default taxonomy): categories of another taxonomy
    // are not matched against it, blocked or not, and count as undeclared.
    for cat in ["IAB25-3", "IAB7-3"] {
        assert_eq!(
            rules_for(|b| {
                b.cat = vec![cat.into()];
                b.cattax = Some(2);
            }),
            vec![Rule::CategoryUndeclared],
            "{cat}"
        );
    }
    assert_eq!(
        rules_for(|b| {
            b.cat = vec!["IAB25-3".into()];
            b.cattax = Some(1);
        }),
        vec![Rule::BlockedCategory {
            cat: "IAB25-3".into()
        }],
        "1 is the default, said out loud"
    );
    // A request whose `bcat` is in another taxonomy (`cattax` 2, IAB Content Taxonomy 2.0):
    // only a bid in that taxonomy is checked against it; IAB 1.0 codes are undeclared there.
    let mut in_2_0 = request();
    in_2_0.cattax = Some(2);
    let rules_in_2_0 = |cat: &str, cattax: Option<u32>| {
        let mut bid = good_bid();
        bid.cat = vec![cat.to_owned().into()];
        bid.cattax = cattax;
        match validate_response(&in_2_0, &response(vec![bid]), &NoConversion) {
            Ok(()) => Vec::new(),
            Err(violations) => violations.into_iter().map(|v| v.rule).collect(),
        }
    };
    assert_eq!(rules_in_2_0("IAB7-3", None), vec![Rule::CategoryUndeclared]);
    assert_eq!(
        rules_in_2_0("IAB25-3", Some(1)),
        vec![Rule::CategoryUndeclared]
    );
    assert_eq!(rules_in_2_0("IAB7-3", Some(2)), vec![]);
    assert_eq!(
        rules_in_2_0("IAB25-3", Some(2)),
        vec![Rule::BlockedCategory {
            cat: "IAB25-3".into()
        }]
    );
    assert_eq!(
        rules_for(|b| b.adomain.clear()),
        vec![Rule::AdvertiserUndeclared]
    );
    assert_eq!(
        rules_for(|b| b.adomain = vec!["shop.Blocked.example".into()]),
        vec![Rule::BlockedAdvertiser {
            domain: "shop.Blocked.example".into()
        }]
    );
    assert_eq!(
        rules_for(|b| b.bundle = Some("com.blocked.app".into())),
        vec![Rule::BlockedApp {
            bundle: "com.blocked.app".into()
        }]
    );
    assert_eq!(
        rules_for(|b| b.bundle = Some("com.fine.app".into())),
        vec![]
    );
    assert_eq!(
        rules_for(|b| b.attr = vec![CreativeAttribute::TEXT_ONLY, CreativeAttribute::POP]),
        vec![Rule::BlockedAttribute {
            attr: CreativeAttribute::POP
        }]
    );
}

#[test]
fn media_types() {
    assert_eq!(
        rules_for(|b| b.mtype = Some(MarkupType::VIDEO)),
        vec![Rule::MarkupTypeNotOffered {
            mtype: MarkupType::VIDEO
        }]
    );
    let on_multi = |mtype| {
        rules_for(move |b| {
            b.impid = "multi".into();
            b.mtype = mtype;
            b.attr = vec![CreativeAttribute::VIDEO_AUTO_PLAY];
        })
    };
    assert_eq!(on_multi(None), vec![Rule::MarkupTypeMissing]);
    // The video's battr applies to a video bid, not to a banner bid.
    assert_eq!(
        on_multi(Some(MarkupType::VIDEO)),
        vec![Rule::BlockedAttribute {
            attr: CreativeAttribute::VIDEO_AUTO_PLAY
        }]
    );
    assert_eq!(on_multi(Some(MarkupType::BANNER)), vec![]);
}

#[test]
fn secure_imps_take_no_http_urls() {
    let on_secure = |change: fn(&mut Bid<'static>)| {
        rules_for(move |b| {
            b.impid = "secure".into();
            change(b);
        })
    };
    assert_eq!(on_secure(|_| {}), vec![]);
    assert_eq!(
        on_secure(|b| b.adm = Some("<img src='HTTP://cdn.example/x.gif'>".into())),
        vec![Rule::InsecureUrl { field: "adm" }]
    );
    // A namespace name is not fetched: every VAST 4 document declares one over http.
    assert_eq!(
        on_secure(|b| b.adm = Some(
            "<img xmlns='http://www.w3.org/2000/svg' src='https://cdn.example/x.gif'>".into()
        )),
        vec![]
    );
    // A client may fire the billing URL from the page: it must be https.
    assert_eq!(
        on_secure(|b| b.burl = Some("http://edge.test/bill".into())),
        vec![Rule::InsecureUrl { field: "burl" }]
    );
    // Win and loss notices go server to server (the gateway, which has no TLS client, fires
    // them): `secure` does not apply.
    assert_eq!(
        on_secure(|b| {
            b.nurl = Some("http://edge.test/win".into());
            b.lurl = Some("http://edge.test/loss".into());
        }),
        vec![]
    );
    // Nor does it where the imp is not secure.
    assert_eq!(
        rules_for(|b| b.burl = Some("http://edge.test/bill".into())),
        vec![]
    );
}

#[test]
fn markup_ids_and_imps() {
    assert_eq!(
        rules_for(|b| {
            b.adm = None;
            b.nurl = Some(String::new().into());
        }),
        vec![Rule::NoMarkup]
    );
    assert_eq!(rules_for(|b| b.id = "".into()), vec![Rule::EmptyBidId]);
    assert_eq!(
        rules_for(|b| b.impid = "ghost".into()),
        vec![Rule::UnknownImp]
    );
    let twice = response(vec![
        good_bid(),
        Bid {
            id: "b2".into(),
            ..good_bid()
        },
    ]);
    assert_eq!(rules_of(&twice, &NoConversion), vec![Rule::SecondBidForImp]);
    // Another seat of the same response may answer the imp: each seat bids for its own buyer.
    let mut two_seats = response(vec![good_bid()]);
    two_seats.seatbid.push(SeatBid {
        bid: vec![Bid {
            id: "b2".into(),
            ..good_bid()
        }],
        seat: Some("other-buyer".into()),
    });
    let mut any_seat = request();
    any_seat.wseat.clear();
    assert_eq!(
        validate_response(&any_seat, &two_seats, &NoConversion),
        Ok(())
    );
    let same_id = response(vec![
        good_bid(),
        Bid {
            impid: "secure".into(),
            ..good_bid()
        },
    ]);
    assert_eq!(
        rules_of(&same_id, &NoConversion),
        vec![Rule::DuplicateBidId]
    );
}

#[test]
fn response_level_rules() {
    let mut wrong = response(vec![good_bid()]);
    wrong.id = "other".into();
    wrong.cur = Some("GBP".into());
    wrong.seatbid[0].seat = Some("other".into());
    let violations = validate_response(&request(), &wrong, &NoConversion).unwrap_err();
    let rules: Vec<&Rule> = violations.iter().map(|v| &v.rule).collect();
    assert_eq!(
        rules[..3],
        [
            &Rule::ResponseId {
                expected: "auction-1".into(),
                found: "other".into()
            },
            &Rule::CurrencyNotAllowed {
                currency: "GBP".into()
            },
            &Rule::SeatNotAllowed {
                seat: "other".into()
            },
        ]
    );
    assert_eq!(violations[0].bid_id, None);
    assert_eq!(
        violations[1].to_string(),
        "response: currency GBP is not among the request's `cur`"
    );
    // Without a seat, a request with wseat refuses the bid.
    let mut no_seat = response(vec![good_bid()]);
    no_seat.seatbid[0].seat = None;
    assert_eq!(
        rules_of(&no_seat, &NoConversion),
        vec![Rule::SeatNotAllowed { seat: "".into() }]
    );
    // An empty response is valid (a no-bid).
    assert_eq!(rules_of(&response(vec![]), &NoConversion), vec![]);
}

#[test]
fn violations_name_the_bid_and_map_to_loss_reasons() {
    let mut bid = good_bid();
    bid.price_micros = 500_000;
    let violations: Vec<Violation> =
        validate_response(&request(), &response(vec![bid]), &NoConversion).unwrap_err();
    assert_eq!(violations[0].bid_id.as_deref(), Some("b1"));
    assert_eq!(violations[0].imp_id.as_deref(), Some("banner"));
    assert_eq!(
        violations[0].to_string(),
        "bid \"b1\" for imp \"banner\": price 0.5 is below the floor 1 USD"
    );
    assert_eq!(
        violations[0].rule.loss_reason(),
        LossReason::BELOW_AUCTION_FLOOR
    );
    assert_eq!(
        Rule::SizeMissing.loss_reason(),
        LossReason::CREATIVE_FILTERED_SIZE
    );
}

#[test]
fn a_blocked_element_repeated_is_one_violation() {
    // One bid of a 256 KiB response can repeat a blocked value thousands of times: one
    // violation per rule keeps the answer as small as the bid.
    let rules = rules_for(|b| {
        b.cat = vec!["IAB1".into(); 8_000];
        b.cat.extend(vec![Cow::Borrowed("IAB25-3"); 8_000]);
        b.adomain = vec!["blocked.example".into(); 8_000];
        b.attr = vec![CreativeAttribute::POP; 8_000];
    });
    assert_eq!(
        rules,
        vec![
            Rule::BlockedCategory {
                cat: "IAB25-3".into()
            },
            Rule::BlockedAdvertiser {
                domain: "blocked.example".into()
            },
            Rule::BlockedAttribute {
                attr: CreativeAttribute::POP
            },
        ]
    );
}

#[test]
fn an_overlong_id_is_refused_without_being_copied() {
    let long = "x".repeat(128 * 1024);
    let mut bid = good_bid();
    bid.id = long.clone().into();
    // Would break more rules, each of which would copy the id.
    bid.cat = vec!["IAB25".into(); 16_000];
    bid.price_micros = 0;
    let violations = validate_response(&request(), &response(vec![bid]), &NoConversion)
        .expect_err("an over-long bid id is refused");
    assert_eq!(
        violations,
        vec![Violation {
            bid_id: None,
            imp_id: None,
            rule: Rule::IdTooLong {
                path: "seatbid[0].bid[0].id".into(),
                len: long.len()
            }
        }]
    );
    let message = violations[0].to_string();
    assert_eq!(
        message,
        "response: seatbid[0].bid[0].id is 131072 bytes, more than the 128 allowed"
    );
    assert_eq!(
        violations[0].rule.loss_reason(),
        LossReason::INVALID_BID_RESPONSE
    );
}

#[test]
fn every_id_a_violation_would_copy_is_bounded() {
    let long = || Cow::Owned("y".repeat(129));
    let paths_of = |response: &BidResponse<'_>| -> Vec<String> {
        validate_response(&request(), response, &NoConversion)
            .unwrap_err()
            .into_iter()
            .map(|v| match v.rule {
                Rule::IdTooLong { path, len: 129 } if v.bid_id.is_none() => path,
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    };
    let mut whole = response(vec![good_bid()]);
    whole.cur = Some(long());
    whole.seatbid[0].seat = Some(long());
    assert_eq!(paths_of(&whole), ["cur", "seatbid[0].seat"]);
    let bids = response(vec![
        good_bid(),
        Bid {
            id: "b2".into(),
            ..good_bid()
        },
        Bid {
            id: "b3".into(),
            impid: "deal".into(),
            dealid: Some(long()),
            ..good_bid()
        },
    ]);
    assert_eq!(paths_of(&bids), ["seatbid[0].bid[2].dealid"]);
    // 128 bytes is allowed.
    assert_eq!(rules_for(|b| b.id = "z".repeat(128).into()), vec![]);
}

/// The response id and imp ids echo the exchange's request: long ones are no reason to refuse
/// our own answer.
#[test]
fn long_ids_the_request_chose_are_echoed_not_refused() {
    let long = "r".repeat(300);
    let mut request = request();
    request.id = Cow::Owned(long.clone());
    request.imp[0].id = Cow::Owned(long.clone());
    let mut answer = response(vec![Bid {
        impid: Cow::Owned(long.clone()),
        ..good_bid()
    }]);
    answer.id = Cow::Owned(long);
    assert_eq!(validate_response(&request, &answer, &NoConversion), Ok(()));
}
