//! The bid rules: channels, deals and private auctions, deal floors, currency conversion, bid
//! multipliers, blocked advertisers, apps and categories, secure imps, video and audio media
//! rules, native assets, and the candidate cap of a crowded tier.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashSet;

use common::{
    Harness, banner, exchange_line_item, line_item, native, now, outcome, snapshot, vast,
};
use marquee_engine::{
    Control, ControlArray, Deal, Elimination, Engine, Floor, ImageNeed, MAX_CANDIDATES_PER_TIER,
    MediaRules, NativeNeeds, NoCaps, Outcome, Request, Slot, TextNeed, Verdict,
};
use marquee_model::{
    Channel, CreativeId, Currency, Format, LineItemId, Micros, PlacementId, PricingModel, Size,
    Tier,
};
use marquee_snapshot::Channels;

const USD: Currency = Currency::USD;
const BOTH: Channels = Channels {
    direct: true,
    exchange: true,
};

fn usd(cpm: i64) -> Option<Floor> {
    Some(Floor {
        cpm: Micros(cpm),
        currency: USD,
    })
}

/// A 300x250 banner imp of an exchange's bid request.
fn bid_request() -> Request<'static> {
    let mut request = Request::at(now());
    request.channel = Channel::Exchange;
    request.slot = Slot {
        sizes: &common::SIZES,
        ..Slot::default()
    };
    request
}

fn eliminated(why: Elimination) -> Outcome {
    Outcome::Eliminated(why)
}

fn explain(h: &mut Harness, request: &Request<'_>) -> Vec<Verdict> {
    h.explain(request, &NoCaps, &marquee_engine::FullSpeed).1
}

#[test]
fn line_items_take_part_only_in_their_channels() {
    let direct = line_item(1, Tier::Standard, None);
    let exchange = exchange_line_item(2, Tier::Standard, None);
    let mut both = line_item(3, Tier::Standard, None);
    both.channels = BOTH;
    both.placements = vec![PlacementId(9)];
    let mut h = Harness::new(Engine::new(snapshot(
        vec![direct, exchange, both],
        None,
        vec![],
    )));

    let mut ad_request = bid_request();
    ad_request.channel = Channel::Direct;
    ad_request.placement = Some(PlacementId(1));
    let verdicts = explain(&mut h, &ad_request);
    assert_eq!(outcome(&verdicts, 1), Outcome::Won);
    assert_eq!(outcome(&verdicts, 2), eliminated(Elimination::Channel));
    assert_eq!(
        outcome(&verdicts, 3),
        eliminated(Elimination::Targeting("placement (not linked)".into()))
    );

    // On an exchange, placement links do not apply, and a placement in the request is ignored.
    let mut bid = bid_request();
    bid.placement = Some(PlacementId(1));
    let verdicts = explain(&mut h, &bid);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Channel));
    let winners: HashSet<u64> = (0..200)
        .map(|_| h.decide(&bid).expect("a bid").line_item.0)
        .collect();
    assert_eq!(winners, HashSet::from([2, 3]));
}

#[test]
fn deal_line_items_bid_only_into_their_deals_and_open_ones_only_in_open_auctions() {
    let mut deal = exchange_line_item(1, Tier::Sponsorship, None);
    deal.deals = vec!["D1".into(), "D2".into()];
    let open = exchange_line_item(2, Tier::Standard, None);
    let mut h = Harness::new(Engine::new(snapshot(vec![deal, open], None, vec![])));

    let offered = [
        Deal {
            id: "D9",
            floor: None,
        },
        Deal {
            id: "D2",
            floor: None,
        },
    ];
    let mut request = bid_request();
    request.slot.deals = &offered;
    let decision = h.decide(&request).expect("the deal line item bids");
    assert_eq!(decision.line_item, LineItemId(1));
    assert_eq!(
        decision.deal,
        Some(1),
        "the position of D2 in the imp's deals"
    );

    request.slot.deals = &[];
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Deal));
    assert_eq!(outcome(&verdicts, 2), Outcome::Won);
    assert_eq!(h.decide(&request).expect("open bid").deal, None);

    request.slot.private_auction = true;
    request.slot.deals = &offered;
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), Outcome::Won);
    assert_eq!(outcome(&verdicts, 2), eliminated(Elimination::Deal));

    request.slot.deals = &offered[..1];
    assert_eq!(
        h.decide(&request),
        None,
        "a private auction of someone else's deal"
    );
}

#[test]
fn a_deal_floor_replaces_the_imp_floor() {
    let mut li = exchange_line_item(1, Tier::Standard, None);
    li.deals = vec!["D1".into(), "D2".into()];
    let mut h = Harness::new(Engine::new(snapshot(vec![li], None, vec![])));
    let mut request = bid_request();
    request.slot.floor = usd(2_000_000);

    let cheap_deal = [Deal {
        id: "D1",
        floor: usd(500_000),
    }];
    request.slot.deals = &cheap_deal;
    assert_eq!(h.decide(&request).expect("bids").deal, Some(0));

    let deal_without_floor = [Deal {
        id: "D1",
        floor: None,
    }];
    request.slot.deals = &deal_without_floor;
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Floor));

    let two_deals = [
        Deal {
            id: "D1",
            floor: usd(1_500_000),
        },
        Deal {
            id: "D2",
            floor: usd(800_000),
        },
    ];
    request.slot.deals = &two_deals;
    let decision = h.decide(&request).expect("bids on the deal it can afford");
    assert_eq!(decision.deal, Some(1));
    assert_eq!(decision.bid_cpm, Micros(1_000_000));
}

#[test]
fn bids_are_converted_into_the_bid_currency_rounding_down_and_floors_rounding_up() {
    let mut li = exchange_line_item(1, Tier::Standard, None);
    li.price.currency = Currency::EUR;
    let mut h = Harness::new(Engine::new(snapshot(vec![li], None, vec![])));
    h.rates.set(Currency::EUR, "0.92").unwrap();
    let mut request = bid_request();
    request.bid_currency = Some(USD);

    // 1.00 EUR = 1.0869565… USD: the bid rounds down.
    let decision = h.decide(&request).expect("bids");
    assert_eq!(
        (decision.bid_cpm, decision.currency),
        (Micros(1_086_956), USD)
    );
    request.slot.floor = usd(1_086_956);
    assert!(h.decide(&request).is_some(), "equal to the floor");
    request.slot.floor = usd(1_086_957);
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Floor));

    // Without a bid currency it bids in its own; the USD floor is converted up into EUR:
    // 1.086957 USD × 0.92 = 1.00000044 EUR, which 1.00 EUR does not meet.
    request.bid_currency = None;
    assert_eq!(h.decide(&request), None);
    request.slot.floor = usd(1_086_956);
    let decision = h
        .decide(&request)
        .expect("0.99999952 EUR rounds up to 1.000000");
    assert_eq!(
        (decision.bid_cpm, decision.currency),
        (Micros(1_000_000), Currency::EUR)
    );

    // A floor in the line item's own currency is met exactly, whatever the bid currency: a
    // 1.00 EUR line item meets a 1.00 EUR floor in a USD auction, and bids the floor converted
    // up (1.086957), a micro above its own value's conversion, which would miss it.
    request.bid_currency = Some(USD);
    request.slot.floor = Some(Floor {
        cpm: Micros(1_000_000),
        currency: Currency::EUR,
    });
    let decision = h.decide(&request).expect("meets the floor");
    assert_eq!(
        (decision.bid_cpm, decision.currency),
        (Micros(1_086_957), USD)
    );

    let gbp = Currency::try_from("GBP").unwrap();
    request.bid_currency = Some(gbp);
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Currency));
}

#[test]
fn the_bid_is_the_value_times_the_multiplier_in_integers() {
    let mut cpm = exchange_line_item(1, Tier::Standard, None);
    cpm.price.amount_micros = Micros(999_999);
    let mut cpc = exchange_line_item(2, Tier::Standard, None);
    cpc.price.model = PricingModel::Cpc;
    cpc.price.amount_micros = Micros(500_000);
    let controls = ControlArray::new(2);
    controls.set(
        0,
        Control {
            bid_multiplier_permille: 333,
            ..Control::FULL_SPEED
        },
    );
    controls.set(
        1,
        Control {
            ctr_ppm: 2_500,
            bid_multiplier_permille: 1_200,
            ..Control::FULL_SPEED
        },
    );
    let mut h = Harness::new(Engine::new(snapshot(vec![cpm, cpc], None, vec![])));
    let mut bids = std::collections::HashMap::new();
    for _ in 0..200 {
        let d = h
            .decide_with(&bid_request(), &NoCaps, &controls)
            .expect("bids");
        bids.insert(d.line_item.0, d.bid_cpm);
    }
    // 999,999 × 333 / 1000 = 332,999.667, rounded down.
    assert_eq!(bids[&1], Micros(332_999));
    // 0.50 per click × 0.25% × 1000 = 1.25 CPM, × 1.2 = 1.50.
    assert_eq!(bids[&2], Micros(1_500_000));
}

#[test]
fn a_zero_bid_is_no_bid_on_an_exchange() {
    let mut free = line_item(1, Tier::House, None);
    free.channels = BOTH;
    free.price.amount_micros = Micros::ZERO;
    let mut h = Harness::new(Engine::new(snapshot(vec![free], None, vec![])));
    let verdicts = explain(&mut h, &bid_request());
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Floor));
    let mut ad_request = bid_request();
    ad_request.channel = Channel::Direct;
    assert!(h.decide(&ad_request).is_some(), "house ads serve for free");
}

#[test]
fn blocked_advertisers_apps_and_categories_eliminate() {
    let li = exchange_line_item(1, Tier::Standard, None);
    let mut travel = banner(10, 1, 300, 250);
    travel.categories = vec!["IAB20-3".into()];
    let mut shopping = banner(11, 1, 300, 250);
    shopping.categories = vec!["IAB22".into()];
    let mut h = Harness::new(Engine::new(snapshot(
        vec![li],
        Some(vec![travel, shopping]),
        vec![],
    )));

    let mut request = bid_request();
    // The advertiser's domain is shop.example.com: a parent domain blocks it.
    request.blocked.advertisers = &["other.com", "EXAMPLE.com"];
    let verdicts = explain(&mut h, &request);
    assert_eq!(
        outcome(&verdicts, 1),
        eliminated(Elimination::BlockedAdvertiser)
    );
    request.blocked.advertisers = &["example.co"];
    assert!(h.decide(&request).is_some());

    request.blocked.apps = &["com.example.shop"];
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::BlockedApp));
    request.blocked.apps = &["com.example"];

    // IAB20 blocks the travel creative's IAB20-3: only the shopping one may serve.
    request.blocked.categories = &["IAB20"];
    for _ in 0..50 {
        assert_eq!(h.decide(&request).expect("bids").creative, CreativeId(11));
    }
    request.blocked.categories = &["IAB20", "IAB22"];
    let verdicts = explain(&mut h, &request);
    assert_eq!(
        outcome(&verdicts, 1),
        eliminated(Elimination::BlockedCategory)
    );
}

/// Under `badv` an advertiser without domains, and under `bcat` a creative whose categories
/// and campaign's are empty, cannot show they are allowed (the bid would name no `adomain` or
/// `cat`, which exchanges drop and the response check refuses): eliminated as blocked. Without
/// the lists they bid.
#[test]
fn what_names_no_domain_or_category_counts_as_blocked_under_the_lists() {
    let li = exchange_line_item(1, Tier::Standard, None);
    let mut snapshot = snapshot(vec![li], None, vec![]);
    let data = &mut std::sync::Arc::get_mut(&mut snapshot).unwrap().data;
    data.advertisers[0].domains.clear();
    assert!(data.campaigns[0].categories.is_empty());
    assert!(data.creatives.iter().all(|c| c.categories.is_empty()));
    let mut h = Harness::new(Engine::new(snapshot));

    let mut request = bid_request();
    assert!(h.decide(&request).is_some(), "no lists: it bids");
    request.blocked.advertisers = &["other.example"];
    let verdicts = explain(&mut h, &request);
    assert_eq!(
        outcome(&verdicts, 1),
        eliminated(Elimination::BlockedAdvertiser)
    );
    request.blocked.advertisers = &[];
    request.blocked.categories = &["IAB25"];
    let verdicts = explain(&mut h, &request);
    assert_eq!(
        outcome(&verdicts, 1),
        eliminated(Elimination::BlockedCategory)
    );
}

#[test]
fn creatives_without_categories_inherit_their_campaigns() {
    let li = exchange_line_item(1, Tier::Standard, None);
    let mut own = banner(10, 1, 300, 250);
    own.categories = vec!["IAB3".into()];
    let inheriting = banner(11, 1, 300, 250);
    let mut snapshot = snapshot(vec![li], Some(vec![own, inheriting]), vec![]);
    std::sync::Arc::get_mut(&mut snapshot)
        .unwrap()
        .data
        .campaigns[0]
        .categories = vec!["IAB22-1".into()];
    let mut h = Harness::new(Engine::new(snapshot));
    let mut request = bid_request();
    request.blocked.categories = &["IAB22"];
    for _ in 0..50 {
        assert_eq!(h.decide(&request).expect("bids").creative, CreativeId(10));
    }
    request.blocked.categories = &["IAB3"];
    for _ in 0..50 {
        assert_eq!(h.decide(&request).expect("bids").creative, CreativeId(11));
    }
}

#[test]
fn secure_imps_take_only_https_creatives() {
    let li = exchange_line_item(1, Tier::Standard, None);
    let mut plain = banner(10, 1, 300, 250);
    plain.secure = false;
    let leaderboard = banner(11, 1, 728, 90);
    let mut h = Harness::new(Engine::new(snapshot(
        vec![li],
        Some(vec![plain, leaderboard]),
        vec![],
    )));
    let mut request = bid_request();
    assert_eq!(h.decide(&request).expect("bids").creative, CreativeId(10));
    request.slot.secure = true;
    // The leaderboard does not fit; the rectangle fits but is not secure: the furthest
    // creative names the reason.
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Secure));
    let sizes = [Size { w: 300, h: 250 }, Size { w: 728, h: 90 }];
    request.slot.sizes = &sizes;
    let decision = h.decide(&request).expect("the secure leaderboard");
    assert_eq!(decision.creative, CreativeId(11));
    assert_eq!(decision.format, Format::Banner);
    assert_eq!(decision.size, Some(Size { w: 728, h: 90 }));
}

#[test]
fn video_and_audio_creatives_meet_the_media_rules() {
    let li = exchange_line_item(1, Tier::Standard, None);
    let video = vast(10, 1, 15, &["video/mp4"], &[3, 7]);
    let audio = vast(11, 1, 30, &["audio/mp4"], &[9]);
    let mut h = Harness::new(Engine::new(snapshot(
        vec![li],
        Some(vec![video, audio]),
        vec![],
    )));
    let mut request = bid_request();
    request.slot.sizes = &[];
    request.slot.formats = &[Format::Video];
    request.slot.video = MediaRules {
        mimes: &["video/x-flv", "VIDEO/MP4"],
        min_duration: Some(5),
        max_duration: Some(30),
        durations: &[],
        protocols: &[2, 3],
    };
    let decision = h.decide(&request).expect("the video creative");
    assert_eq!(decision.creative, CreativeId(10));
    assert_eq!((decision.format, decision.size), (Format::Video, None));

    let media_rejects = |h: &mut Harness, rules: MediaRules<'static>| {
        let mut request = request;
        request.slot.video = rules;
        outcome(&explain(h, &request), 1) == eliminated(Elimination::Media)
    };
    let rules = request.slot.video;
    assert!(media_rejects(
        &mut h,
        MediaRules {
            mimes: &["video/webm"],
            ..rules
        }
    ));
    assert!(media_rejects(
        &mut h,
        MediaRules {
            max_duration: Some(10),
            ..rules
        }
    ));
    assert!(media_rejects(
        &mut h,
        MediaRules {
            min_duration: Some(20),
            ..rules
        }
    ));
    assert!(media_rejects(
        &mut h,
        MediaRules {
            protocols: &[2, 8],
            ..rules
        }
    ));
    assert!(media_rejects(
        &mut h,
        MediaRules {
            durations: &[6, 30],
            ..rules
        }
    ));
    assert!(!media_rejects(
        &mut h,
        MediaRules {
            durations: &[15],
            max_duration: Some(10),
            ..rules
        }
    ));

    request.slot.formats = &[Format::Audio];
    request.slot.audio = MediaRules {
        mimes: &["audio/mp4"],
        protocols: &[9, 10],
        ..MediaRules::default()
    };
    let decision = h.decide(&request).expect("the audio creative");
    assert_eq!(
        (decision.creative, decision.format),
        (CreativeId(11), Format::Audio)
    );

    request.slot.formats = &[];
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), eliminated(Elimination::Creative));
}

#[test]
fn native_creatives_need_the_required_assets() {
    let li = exchange_line_item(1, Tier::Standard, None);
    let mut without_icon = native(11, 2);
    if let marquee_snapshot::Content::Native(assets) = &mut without_icon.content {
        assets.icon_url = None;
        assets.icon_size = None;
    }
    let other = exchange_line_item(2, Tier::Standard, None);
    let mut h = Harness::new(Engine::new(snapshot(
        vec![li, other],
        Some(vec![native(10, 1), without_icon]),
        vec![],
    )));
    let text = |max| Some(TextNeed { max_chars: max });
    // The Native 1.2 samples: title ≤ 140, icon ≥ 50×50, sponsor ≤ 25, description ≤ 140.
    let sample = NativeNeeds {
        title: text(Some(140)),
        body: text(Some(140)),
        sponsored_by: text(Some(25)),
        icon: Some(ImageNeed {
            min_w: 50,
            min_h: 50,
        }),
        ..NativeNeeds::default()
    };
    let mut request = bid_request();
    request.slot.sizes = &[];
    request.slot.formats = &[Format::Native];
    request.slot.native = sample;
    let verdicts = explain(&mut h, &request);
    assert_eq!(outcome(&verdicts, 1), Outcome::Won);
    assert_eq!(outcome(&verdicts, 2), eliminated(Elimination::Native));

    let rejects = |h: &mut Harness, needs: NativeNeeds| {
        let mut request = request;
        request.slot.native = needs;
        outcome(&explain(h, &request), 1) == eliminated(Elimination::Native)
    };
    assert!(rejects(
        &mut h,
        NativeNeeds {
            title: text(Some(39)),
            ..sample
        }
    ));
    assert!(!rejects(
        &mut h,
        NativeNeeds {
            title: text(Some(40)),
            ..sample
        }
    ));
    assert!(rejects(
        &mut h,
        NativeNeeds {
            main_image: Some(ImageNeed {
                min_w: 1200,
                min_h: 628,
            }),
            ..sample
        }
    ));
    assert!(!rejects(
        &mut h,
        NativeNeeds {
            main_image: Some(ImageNeed::default()),
            call_to_action: text(None),
            ..sample
        }
    ));
    assert!(rejects(
        &mut h,
        NativeNeeds {
            sponsored_by: text(Some(3)),
            ..sample
        }
    ));
}

#[test]
fn a_crowded_tier_is_sampled_and_every_line_item_gets_its_turn() {
    let count = 200;
    let line_items = (1..=count)
        .map(|id| exchange_line_item(id, Tier::Standard, None))
        .collect();
    let mut h = Harness::new(Engine::new(snapshot(line_items, None, vec![])));
    let request = bid_request();

    let verdicts = explain(&mut h, &request);
    let examined = verdicts
        .iter()
        .filter(|v| v.outcome != eliminated(Elimination::NotExamined))
        .count();
    assert_eq!(examined, MAX_CANDIDATES_PER_TIER);
    assert_eq!(
        verdicts
            .iter()
            .filter(|v| v.outcome == Outcome::Won)
            .count(),
        1
    );

    let winners: HashSet<LineItemId> = (0..4_000)
        .map(|_| h.decide(&request).expect("bids").line_item)
        .collect();
    assert_eq!(winners.len(), count as usize, "no line item is starved");
}

#[test]
fn a_tier_whose_sample_has_no_survivor_falls_to_the_next_tier() {
    // More sponsorship candidates than are examined, all under the floor: the standard line
    // item wins, and explain tells examined from unexamined sponsorships.
    let mut line_items: Vec<_> = (1..=100)
        .map(|id| {
            let mut li = exchange_line_item(id, Tier::Sponsorship, None);
            li.price.amount_micros = Micros(100_000);
            li
        })
        .collect();
    line_items.push(exchange_line_item(101, Tier::Standard, None));
    let mut h = Harness::new(Engine::new(snapshot(line_items, None, vec![])));
    let mut request = bid_request();
    request.slot.floor = usd(500_000);
    let (decision, verdicts) = h.explain(&request, &NoCaps, &marquee_engine::FullSpeed);
    assert_eq!(decision.expect("bids").line_item, LineItemId(101));
    let floor = verdicts
        .iter()
        .filter(|v| v.outcome == eliminated(Elimination::Floor))
        .count();
    let unexamined = verdicts
        .iter()
        .filter(|v| v.outcome == eliminated(Elimination::NotExamined))
        .count();
    assert_eq!((floor, unexamined), (MAX_CANDIDATES_PER_TIER, 100 - 64));
}
