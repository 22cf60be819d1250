//! Validation rules of every managed object, exercised through the JSON documents clients send.
//!
//! Each kind starts from one valid document. Every rule gets one case that changes that document
//! with a JSON merge patch (RFC 7386: objects merge, `null` removes a field, anything else
//! replaces) and names the exact path of the violation it must produce. The targeting rules have
//! their own unit tests in `src/targeting.rs`; here we only check that their paths are prefixed
//! with `targeting.`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use marquee_model::{
    Advertiser, Campaign, CapWindow, Channel, Creative, CreativeContent, Currency, Format,
    HTML_MACROS, LIVE_STATISTIC_PREFIX, LIVE_STATISTICS, LineItem, MAX_AMOUNT_MICROS,
    MAX_PRICE_MICROS, MAX_SPEND_GOAL_MICROS, Micros, Object, Placement, Price, PricingModel,
    Publisher, Site, Tier,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Parses `json` as a `T`, panicking with the document and the error if it does not parse.
fn parse<T: Object>(json: Value) -> T {
    match serde_json::from_value(json.clone()) {
        Ok(object) => object,
        Err(e) => panic!("{} does not parse: {e}\n{json:#}", T::KIND.name()),
    }
}

/// The paths of all violations of `json` parsed as a `T`; empty when it is valid.
fn violations_of<T: Object>(json: Value) -> Vec<String> {
    match parse::<T>(json).validate() {
        Ok(()) => Vec::new(),
        Err(e) => e.violations.into_iter().map(|v| v.path).collect(),
    }
}

/// The parse error of `json` as a `T`; panics if it parses.
fn parse_error<T: Object>(json: Value) -> String {
    match serde_json::from_value::<T>(json.clone()) {
        Ok(object) => panic!("{json:#}\nparsed, but should not: {object:?}"),
        Err(e) => e.to_string(),
    }
}

/// Applies a JSON merge patch (RFC 7386) to `target`.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(target) = target else {
        unreachable!("just made an object")
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// `base` with `patch` merged in.
fn patched(base: &Value, patch: &Value) -> Value {
    let mut doc = base.clone();
    merge(&mut doc, patch);
    doc
}

/// Runs `(description, patch, expected path)` cases: each patched document must have exactly
/// one violation, at the expected path.
fn assert_cases<T: Object>(base: &Value, cases: &[(&str, Value, &str)]) {
    assert_eq!(
        violations_of::<T>(base.clone()),
        Vec::<String>::new(),
        "base is valid"
    );
    for (description, patch, path) in cases {
        let found = violations_of::<T>(patched(base, patch));
        assert_eq!(
            found,
            vec![path.to_string()],
            "{} case {description:?}: patch {patch}",
            T::KIND.name()
        );
    }
}

/// Runs `(description, patch)` cases that must stay valid (the edges of each rule).
fn assert_valid<T: Object>(base: &Value, cases: &[(&str, Value)]) {
    for (description, patch) in cases {
        let found = violations_of::<T>(patched(base, patch));
        assert_eq!(
            found,
            Vec::<String>::new(),
            "{} case {description:?} should be valid: patch {patch}",
            T::KIND.name()
        );
    }
}

fn caps(windows: impl IntoIterator<Item = &'static str>) -> Value {
    windows
        .into_iter()
        .map(|window| json!({"count": 1, "window": window}))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// One valid document per kind
// ---------------------------------------------------------------------------------------------

fn advertiser() -> Value {
    json!({
        "name": "Acme Shoes",
        "status": "active",
        "currency": "EUR",
        "time_zone": "Europe/Berlin",
        "domains": ["acme.example", "shop.acme.example"]
    })
}

fn campaign() -> Value {
    json!({
        "advertiser_id": 1,
        "name": "Spring sale",
        "status": "active",
        "frequency_caps": [{"count": 3, "window": "1d"}, {"count": 10, "window": "1w"}],
        "categories": ["IAB22", "IAB22-4"],
        "app_bundle": "com.acme.shoes"
    })
}

fn line_item() -> Value {
    json!({
        "campaign_id": 2,
        "name": "Spring sale – home page",
        "status": "active",
        "start": "2026-03-01T00:00:00",
        "end": "2026-04-01T00:00:00",
        "time_zone": "Europe/Berlin",
        "tier": "standard",
        "weight": 100,
        "goal": {"metric": "impressions", "daily": 10000, "lifetime": 300000},
        "pacing": "even",
        "price": {"model": "cpm", "amount_micros": 2500000, "currency": "EUR"},
        "frequency_caps": [{"count": 2, "window": "1h"}, {"count": 5, "window": "1d"}],
        "targeting": {"all": [{"country": ["DE", "AT"]}, {"device_type": ["phone"]}]},
        "rotation": "weighted",
        "channels": ["direct", "exchange"],
        "deals": ["AB-Agency1-0001", "1452f.eadb4.7aaa"],
        "untokened_clicks": "free",
        "competes_with_programmatic": false
    })
}

/// A creative with `content`; `size` is left out when `None`.
fn creative_with(content: Value, size: Option<Value>) -> Value {
    let mut doc = json!({
        "line_item_id": 3,
        "name": "Spring banner",
        "status": "active",
        "landing_url": "https://acme.example/spring",
        "weight": 100,
        "content": content,
        "categories": ["IAB22-4"],
        "approval": { "state": "approved" }
    });
    if let Some(size) = size {
        doc["size"] = size;
    }
    doc
}

fn medium_rectangle() -> Option<Value> {
    Some(json!({"w": 300, "h": 250}))
}

fn image() -> Value {
    creative_with(
        json!({
            "type": "image",
            "image_url": "https://cdn.acme.example/spring.png",
            "alt": "Spring sale"
        }),
        medium_rectangle(),
    )
}

const GOOD_HTML: &str = concat!(
    r#"<a href="{{CLICK_URL}}" target="_blank"><img src="https://cdn.acme.example/b.png"></a>"#,
    r#"<img src="{{IMPRESSION_URL}}&cb={{CACHE_BUSTER}}" width="1" height="1">"#
);

fn html() -> Value {
    creative_with(
        json!({"type": "html", "html": GOOD_HTML}),
        medium_rectangle(),
    )
}

fn third_party_tag() -> Value {
    creative_with(
        json!({
            "type": "third_party_tag",
            "tag": "<script src=\"https://ads.other.example/tag.js?click={{CLICK_URL_ENC}}\"></script>"
        }),
        medium_rectangle(),
    )
}

fn native() -> Value {
    creative_with(
        json!({
            "type": "native",
            "title": "Spring sale",
            "body": "Up to 50% off all shoes",
            "sponsored_by": "Acme",
            "image_url": "https://cdn.acme.example/native.png",
            "icon_url": "https://cdn.acme.example/icon.png",
            "call_to_action": "Shop now",
            "image_size": {"w": 1200, "h": 627},
            "icon_size": {"w": 80, "h": 80}
        }),
        None,
    )
}

fn vast_xml() -> Value {
    creative_with(
        json!({
            "type": "vast",
            "xml": "<?xml version=\"1.0\"?><VAST version=\"4.2\"><Ad id=\"1\"/></VAST>",
            "duration_secs": 30,
            "mimes": ["video/mp4", "video/webm"],
            "protocols": [7, 13]
        }),
        None,
    )
}

fn vast_url() -> Value {
    creative_with(
        json!({
            "type": "vast",
            "url": "https://ads.other.example/vast.xml",
            "duration_secs": 15,
            "mimes": ["audio/mpeg"],
            "protocols": [3]
        }),
        None,
    )
}

fn publisher() -> Value {
    json!({"name": "Daily News", "status": "active"})
}

fn site() -> Value {
    json!({
        "publisher_id": 1,
        "name": "Daily News web",
        "status": "active",
        "domain": "news.example.com"
    })
}

fn placement() -> Value {
    json!({
        "site_id": 2,
        "name": "Home page top",
        "status": "active",
        "sizes": [{"w": 728, "h": 90}, {"w": 970, "h": 250}],
        "formats": ["banner", "native"],
        "image_tag": "off",
        "programmatic": {
            "enabled": true,
            "bidders": ["alpha", "beta"],
            "timeout_ms": 300,
            "floor_micros": 500000,
            "revenue_share_permille": 100
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Valid documents
// ---------------------------------------------------------------------------------------------

/// Calls the generic function `$check::<Kind>` with a valid document of every kind.
macro_rules! on_every_kind {
    ($check:ident) => {
        $check::<Advertiser>(advertiser());
        $check::<Campaign>(campaign());
        $check::<LineItem>(line_item());
        $check::<Creative>(image());
        $check::<Publisher>(publisher());
        $check::<Site>(site());
        $check::<Placement>(placement());
    };
}

#[test]
fn valid_documents_parse_validate_and_round_trip() {
    fn check<T: Object>(doc: Value) {
        let object = parse::<T>(doc.clone());
        assert_eq!(object.validate(), Ok(()), "{}", T::KIND.name());
        // Every field is spelled out in the documents, so serialising gives them back exactly.
        assert_eq!(
            serde_json::to_value(&object).unwrap(),
            doc,
            "{}",
            T::KIND.name()
        );
    }
    on_every_kind!(check);
}

#[test]
fn every_creative_type_has_a_valid_document() {
    for doc in [
        image(),
        html(),
        third_party_tag(),
        native(),
        vast_xml(),
        vast_url(),
    ] {
        assert_eq!(
            violations_of::<Creative>(doc.clone()),
            Vec::<String>::new(),
            "{doc:#}"
        );
    }
    let native: Creative = parse(native());
    assert!(matches!(native.content, CreativeContent::Native { .. }));
    assert_eq!(native.size, None);
}

#[test]
fn programmatic_settings_default_and_are_bounded() {
    let mut doc = placement();
    doc["programmatic"] = json!({});
    let placement_read: Placement = parse(doc.clone());
    let settings = placement_read.programmatic.expect("set");
    assert!(settings.enabled && settings.bidders.is_empty());
    assert_eq!(settings.timeout_ms, 300);
    assert_eq!(settings.floor_micros, Micros(0));
    assert_eq!(settings.revenue_share_permille, 0);
    assert_eq!(parse::<Placement>(placement()).validate(), Ok(()));

    doc["programmatic"] = json!({
        "timeout_ms": 5,
        "floor_micros": -1,
        "revenue_share_permille": 1000,
        "bidders": ["a", "a", ""]
    });
    assert_eq!(
        violations_of::<Placement>(doc),
        [
            "programmatic.timeout_ms",
            "programmatic.floor_micros",
            "programmatic.revenue_share_permille",
            "programmatic.bidders[1]",
            "programmatic.bidders[2]",
        ]
    );
    let mut li = line_item();
    li.as_object_mut()
        .expect("object")
        .remove("competes_with_programmatic");
    assert!(
        !parse::<LineItem>(li).competes_with_programmatic,
        "off unless told"
    );
}

#[test]
fn minimal_documents_get_defaults() {
    let li: LineItem = parse(json!({
        "campaign_id": 2,
        "name": "Minimal",
        "start": "2026-03-01T00:00:00",
        "time_zone": "UTC",
        "price": {"model": "cpc", "amount_micros": 300000, "currency": "USD"}
    }));
    assert_eq!(li.validate(), Ok(()));
    assert_eq!(li.status, marquee_model::Status::Active);
    assert_eq!(li.tier, Tier::Standard);
    assert_eq!(li.weight, 100);
    assert_eq!(li.end, None);
    assert_eq!(li.goal, None);
    assert_eq!(li.targeting, None);
    assert!(li.frequency_caps.is_empty());
    assert_eq!(
        li.channels,
        vec![Channel::Direct],
        "direct only unless told"
    );
    assert!(li.deals.is_empty());

    let creative: Creative = parse(json!({
        "line_item_id": 3,
        "name": "Minimal",
        "landing_url": "http://acme.example/",
        "size": {"w": 1, "h": 1},
        "content": {"type": "image", "image_url": "https://cdn.acme.example/a.gif"}
    }));
    assert_eq!(creative.validate(), Ok(()));
    assert_eq!(creative.weight, 100);
    assert!(creative.categories.is_empty());

    let campaign: Campaign = parse(json!({"advertiser_id": 1, "name": "Minimal"}));
    assert!(campaign.categories.is_empty());
    assert_eq!(campaign.app_bundle, None);
}

#[test]
fn objects_stored_before_the_bidder_fields_still_load() {
    // A VAST creative written before media types and protocols existed loads (the snapshot
    // then offers it only to requests that constrain neither); writing it again needs them.
    let old_vast: Creative = parse(json!({
        "line_item_id": 3,
        "name": "Old video",
        "landing_url": "https://acme.example/",
        "content": {"type": "vast", "url": "https://ads.other.example/v.xml", "duration_secs": 15}
    }));
    let CreativeContent::Vast {
        mimes, protocols, ..
    } = &old_vast.content
    else {
        panic!("not VAST: {old_vast:?}");
    };
    assert!(mimes.is_empty() && protocols.is_empty());
    assert_eq!(old_vast.content.format(), Format::Video);
    let paths: Vec<String> = old_vast
        .validate()
        .unwrap_err()
        .violations
        .into_iter()
        .map(|v| v.path)
        .collect();
    assert_eq!(paths, ["content.mimes", "content.protocols"]);

    let old_native: Creative = parse(json!({
        "line_item_id": 3,
        "name": "Old native",
        "landing_url": "https://acme.example/",
        "content": {"type": "native", "title": "T", "sponsored_by": "S",
                    "image_url": "https://cdn.acme.example/n.png"}
    }));
    assert_eq!(old_native.validate(), Ok(()));
}

// ---------------------------------------------------------------------------------------------
// The name rule, common to all kinds
// ---------------------------------------------------------------------------------------------

#[test]
fn name_rule_applies_to_every_kind() {
    fn check<T: Object>(base: Value) {
        assert_cases::<T>(
            &base,
            &[
                ("empty", json!({"name": ""}), "name"),
                ("only white space", json!({"name": " \t "}), "name"),
                ("201 characters", json!({"name": "n".repeat(201)}), "name"),
                ("bell character", json!({"name": "Spring\u{7}sale"}), "name"),
                ("new line", json!({"name": "Spring\nsale"}), "name"),
            ],
        );
        assert_valid::<T>(
            &base,
            &[
                ("200 characters", json!({"name": "n".repeat(200)})),
                ("200 two-byte characters", json!({"name": "é".repeat(200)})),
            ],
        );
    }
    on_every_kind!(check);
}

// ---------------------------------------------------------------------------------------------
// One table per kind: (description, merge patch, the one expected violation path)
// ---------------------------------------------------------------------------------------------

#[test]
fn advertiser_rules() {
    // Over the limit and full of duplicates: the limit is the one violation, so the list's
    // other checks were never run.
    let same_1001 = vec!["acme.example"; 1001];
    let distinct_1000: Vec<String> = (0..1000).map(|i| format!("d{i}.example")).collect();
    #[rustfmt::skip]
    let cases = [
        ("unknown time zone",   json!({"time_zone": "Mars/Olympus_Mons"}),                           "time_zone"),
        ("empty time zone",     json!({"time_zone": ""}),                                            "time_zone"),
        ("upper-case domain",   json!({"domains": ["acme.example", "Shop.acme.example"]}),           "domains[1]"),
        ("single-label domain", json!({"domains": ["acme"]}),                                        "domains[0]"),
        ("URL as domain",       json!({"domains": ["https://acme.example"]}),                        "domains[0]"),
        ("duplicate domain",    json!({"domains": ["acme.example", "b.example", "acme.example"]}),   "domains[2]"),
        ("1001 domains, all the same", json!({"domains": same_1001}),                               "domains"),
    ];
    assert_cases::<Advertiser>(&advertiser(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("no domains",          json!({"domains": []})),
        ("UTC",                 json!({"time_zone": "UTC"})),
        ("hyphens and digits",  json!({"domains": ["my-shop2.example.co.uk"]})),
        ("1000 domains",        json!({"domains": distinct_1000})),
    ];
    assert_valid::<Advertiser>(&advertiser(), &valid);
}

#[test]
fn campaign_rules() {
    let nine = caps(["1m", "2m", "3m", "4m", "5m", "6m", "7m", "8m", "9m"]);
    let eight = caps(["1m", "2m", "3m", "4m", "5m", "6m", "7m", "8m"]);
    #[rustfmt::skip]
    let cases = [
        ("nine caps",        json!({"frequency_caps": nine}),                                "frequency_caps"),
        ("count 0",          json!({"frequency_caps": [{"count": 0, "window": "1d"}]}),      "frequency_caps[0].count"),
        ("same window spelled differently",
                             json!({"frequency_caps": [{"count": 1, "window": "1h"},
                                                       {"count": 3, "window": "24h"},
                                                       {"count": 5, "window": "1d"}]}),      "frequency_caps[2].window"),
        ("category IAB27",   json!({"categories": ["IAB27"]}),                               "categories[0]"),
        ("category IAB0",    json!({"categories": ["IAB1", "IAB0"]}),                        "categories[1]"),
        ("category IAB01",   json!({"categories": ["IAB01"]}),                               "categories[0]"),
        ("subcategory 0",    json!({"categories": ["IAB1-0"]}),                              "categories[0]"),
        ("lower-case iab",   json!({"categories": ["iab1"]}),                                "categories[0]"),
        ("no number",        json!({"categories": ["IAB"]}),                                 "categories[0]"),
        ("trailing hyphen",  json!({"categories": ["IAB1-"]}),                               "categories[0]"),
        ("duplicate",        json!({"categories": ["IAB1", "IAB1"]}),                        "categories[1]"),
        ("21 categories",    json!({"categories": (1..=21).map(|i| format!("IAB1-{i}")).collect::<Vec<_>>()}), "categories"),
        ("21 categories, all the same", json!({"categories": vec!["IAB1"; 21]}),              "categories"),
        ("bundle with space", json!({"app_bundle": "com.acme shoes"}),                       "app_bundle"),
        ("empty bundle",     json!({"app_bundle": ""}),                                      "app_bundle"),
    ];
    assert_cases::<Campaign>(&campaign(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("no caps",          json!({"frequency_caps": []})),
        ("eight caps",       json!({"frequency_caps": eight})),
        ("IAB26-99",         json!({"categories": ["IAB26-99", "IAB1"]})),
        ("no categories",    json!({"categories": []})),
        ("store id bundle",  json!({"app_bundle": "628677149"})),
        ("no bundle",        json!({"app_bundle": null})),
    ];
    assert_valid::<Campaign>(&campaign(), &valid);
}

#[test]
fn line_item_rules() {
    let nine = caps(["1h", "2h", "3h", "4h", "5h", "6h", "7h", "8h", "9h"]);
    let nine_same = caps(["1h"; 9]);
    let placements_same = vec![1; 10_001];
    #[rustfmt::skip]
    let cases = [
        ("unknown time zone",        json!({"time_zone": "Berlin"}),                              "time_zone"),
        ("end before start",         json!({"end": "2026-02-01T00:00:00"}),                       "end"),
        ("end equals start",         json!({"end": "2026-03-01T00:00:00"}),                       "end"),
        ("flat pricing without end", json!({"end": null, "price": {"model": "flat"},
                                            "channels": ["direct"], "deals": []}),               "end"),
        ("weight 0",                 json!({"weight": 0}),                                        "weight"),
        ("weight 1001",              json!({"weight": 1001}),                                     "weight"),
        ("goal with neither amount", json!({"goal": {"daily": null, "lifetime": null}}),          "goal"),
        ("daily 0",                  json!({"goal": {"daily": 0}}),                               "goal.daily"),
        ("lifetime 0",               json!({"goal": {"daily": null, "lifetime": 0}}),             "goal.lifetime"),
        ("daily above lifetime",     json!({"goal": {"daily": 300_001}}),                         "goal.daily"),
        ("negative price",           json!({"price": {"amount_micros": -1}}),                     "price.amount_micros"),
        ("nine caps",                json!({"frequency_caps": nine}),                             "frequency_caps"),
        ("nine caps, all one window", json!({"frequency_caps": nine_same}),                       "frequency_caps"),
        ("count 0",                  json!({"frequency_caps": [{"count": 2, "window": "1h"},
                                                               {"count": 0, "window": "1d"}]}),   "frequency_caps[1].count"),
        ("duplicate window",         json!({"frequency_caps": [{"count": 2, "window": "1w"},
                                                               {"count": 5, "window": "7d"}]}),   "frequency_caps[1].window"),
        ("targeting error",          json!({"targeting": {"all": [{"country": ["DE"]},
                                                                  {"language": ["deu"]}]}}),      "targeting.all[1].language[0]"),
        ("targeting error at root",  json!({"targeting": {"all": []}}),                           "targeting.all"),
        ("10,001 placements, all the same",
                                     json!({"targeting": {"all": [{"placement": placements_same}]}}),
                                                                                                  "targeting.all[0].placement"),
        ("no channel",               json!({"channels": [], "deals": []}),                        "channels"),
        ("duplicate channel",          json!({"channels": ["direct", "exchange", "direct"]}),       "channels[2]"),
        ("flat pricing on exchange", json!({"price": {"model": "flat"}}),                         "channels"),
        ("deals without exchange",   json!({"channels": ["direct"]}),                             "deals"),
        ("deal id with a space",     json!({"deals": ["AB Agency"]}),                             "deals[0]"),
        ("deal id empty",            json!({"deals": ["D1", ""]}),                                "deals[1]"),
        ("deal id of 129 bytes",     json!({"deals": ["d".repeat(129)]}),                         "deals[0]"),
        ("duplicate deal",           json!({"deals": ["D1", "D1"]}),                              "deals[1]"),
        ("101 deals",                json!({"deals": (0..101).map(|i| format!("D{i}")).collect::<Vec<_>>()}), "deals"),
        ("101 deals, all the same",  json!({"deals": vec!["D1"; 101]}),                           "deals"),
    ];
    assert_cases::<LineItem>(&line_item(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("open-ended CPM",           json!({"end": null})),
        ("flat with end",            json!({"price": {"model": "flat"}, "channels": ["direct"],
                                            "deals": []})),
        ("exchange only",            json!({"channels": ["exchange"]})),
        ("exchange, open auction",   json!({"deals": []})),
        ("deal id of 128 bytes",     json!({"deals": ["d".repeat(128)]})),
        ("CPC on exchange",          json!({"price": {"model": "cpc"}})),
        ("weight 1",                 json!({"weight": 1})),
        ("weight 1000",              json!({"weight": 1000})),
        ("no goal",                  json!({"goal": null})),
        ("lifetime only",            json!({"goal": {"daily": null}})),
        ("daily only",               json!({"goal": {"lifetime": null}})),
        ("daily equals lifetime",    json!({"goal": {"daily": 300_000}})),
        ("free",                     json!({"price": {"amount_micros": 0}})),
        ("no targeting",             json!({"targeting": null})),
        ("one-minute flight",        json!({"end": "2026-03-01T00:01:00"})),
    ];
    assert_valid::<LineItem>(&line_item(), &valid);
}

/// Every event of a CPM or CPC line item carries its price, and the aggregation drops an event
/// above `MAX_AMOUNT_MICROS`: a price above `MAX_PRICE_MICROS` (leaving room for the largest bid
/// multiplier) is refused where it is written, naming the field, instead of its impressions and
/// spend vanishing from reports. A flat price is carried by no event. Goal amounts stop at what
/// the aggregation can count.
#[test]
fn prices_and_goal_amounts_stay_within_what_the_aggregation_counts() {
    assert_eq!(MAX_PRICE_MICROS * 10, MAX_AMOUNT_MICROS);
    // A premium CPM in rupiah (1,500,000 IDR, about $90) is well within.
    let top = MAX_PRICE_MICROS;
    let spend = |goal: Value| json!({"goal": goal});
    let most_spend = MAX_SPEND_GOAL_MICROS;
    #[rustfmt::skip]
    let cases = [
        ("CPM above the limit",      json!({"price": {"amount_micros": top + 1}}),               "price.amount_micros"),
        ("CPC above the limit",      json!({"price": {"model": "cpc", "amount_micros": top + 1}}), "price.amount_micros"),
        ("spend goal, lifetime too large",
                                     spend(json!({"metric": "spend", "daily": null,
                                                  "lifetime": most_spend + 1})),                 "goal.lifetime"),
        ("spend goal, daily too large",
                                     spend(json!({"metric": "spend", "daily": most_spend + 1,
                                                  "lifetime": null})),                           "goal.daily"),
        ("impressions beyond i64",   spend(json!({"daily": null,
                                                  "lifetime": i64::MAX.unsigned_abs() + 1})),    "goal.lifetime"),
    ];
    assert_cases::<LineItem>(&line_item(), &cases);
    #[rustfmt::skip]
    let valid = [
        ("1,500,000 IDR CPM",        json!({"price": {"amount_micros": 1_500_000_000_000_i64, "currency": "IDR"}})),
        ("CPM at the limit",         json!({"price": {"amount_micros": top}})),
        ("CPC at the limit",         json!({"price": {"model": "cpc", "amount_micros": top}})),
        ("flat above it",            json!({"price": {"model": "flat", "amount_micros": top * 100},
                                            "channels": ["direct"], "deals": []})),
        ("spend goal at the limit",  spend(json!({"metric": "spend", "daily": null, "lifetime": most_spend}))),
    ];
    assert_valid::<LineItem>(&line_item(), &valid);
    let message = parse::<LineItem>(patched(
        &line_item(),
        &json!({"price": {"amount_micros": 1_500_000_000_000_000_i64}}),
    ))
    .validate()
    .unwrap_err()
    .to_string();
    assert!(
        message.starts_with(
            "price.amount_micros: must be at most 10000000000000 (10000000.000000 in the currency)"
        ),
        "{message}"
    );
}

/// A flat price is paid for the flight: no event spends anything, so a spend goal on it would
/// read 0 delivered for ever and run behind at full throttle. Refused, naming the goal's
/// metric; impressions and clicks goals stay fine.
#[test]
fn a_spend_goal_needs_a_price_per_impression_or_click() {
    let flat = json!({"model": "flat", "amount_micros": 5_000_000_000_i64, "currency": "EUR"});
    let direct = |goal: Value| json!({"price": flat.clone(), "channels": ["direct"], "deals": [], "goal": goal});
    #[rustfmt::skip]
    let cases = [
        ("spend goal, flat price",   direct(json!({"metric": "spend", "daily": 1_000_000, "lifetime": null})),
                                                                                                  "goal.metric"),
    ];
    assert_cases::<LineItem>(&line_item(), &cases);
    #[rustfmt::skip]
    let valid = [
        ("impressions goal, flat",   direct(json!({"metric": "impressions"}))),
        ("clicks goal, flat",        direct(json!({"metric": "clicks"}))),
        ("spend goal, CPM",          json!({"goal": {"metric": "spend", "daily": 1_000_000, "lifetime": null}})),
        ("spend goal, CPC",          json!({"price": {"model": "cpc"},
                                            "goal": {"metric": "spend", "daily": 1_000_000, "lifetime": null}})),
    ];
    assert_valid::<LineItem>(&line_item(), &valid);
}

#[test]
fn creative_common_rules() {
    #[rustfmt::skip]
    let cases = [
        ("landing_url ftp",        json!({"landing_url": "ftp://acme.example/"}),           "landing_url"),
        ("landing_url mailto",     json!({"landing_url": "mailto:ads@acme.example"}),       "landing_url"),
        ("landing_url unparsable", json!({"landing_url": "not a url"}),                     "landing_url"),
        ("landing_url relative",   json!({"landing_url": "/spring"}),                       "landing_url"),
        ("weight 0",               json!({"weight": 0}),                                    "weight"),
        ("weight 1001",            json!({"weight": 1001}),                                 "weight"),
        ("image without size",     json!({"size": null}),                                   "size"),
        ("width 0",                json!({"size": {"w": 0}}),                               "size.w"),
        ("height 10001",           json!({"size": {"h": 10_001}}),                          "size.h"),
        ("image_url javascript",   json!({"content": {"image_url": "javascript:alert(1)"}}), "content.image_url"),
        ("image_url unparsable",   json!({"content": {"image_url": "https://"}}),           "content.image_url"),
        ("bad category",           json!({"categories": ["IAB22-4", "Shoes"]}),             "categories[1]"),
    ];
    assert_cases::<Creative>(&image(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("weight 1",               json!({"weight": 1})),
        ("weight 1000",            json!({"weight": 1000})),
        ("http landing_url",       json!({"landing_url": "http://acme.example/?q=1#x"})),
        ("size 1x1",               json!({"size": {"w": 1, "h": 1}})),
        ("size 10000x10000",       json!({"size": {"w": 10_000, "h": 10_000}})),
    ];
    assert_valid::<Creative>(&image(), &valid);
}

#[test]
fn creative_markup_rules() {
    let too_big = "a".repeat(100_001);
    #[rustfmt::skip]
    let cases = [
        ("html without size",      json!({"size": null}),                                              "size"),
        ("html empty",             json!({"content": {"html": ""}}),                                   "content.html"),
        ("html blank",             json!({"content": {"html": " \n\t "}}),                             "content.html"),
        ("html too big",           json!({"content": {"html": too_big}}),                              "content.html"),
        ("html unknown macro",     json!({"content": {"html": "<a href=\"{{CLICK}}\">x</a>"}}),        "content.html"),
        ("html lower-case macro",  json!({"content": {"html": "<a href=\"{{click_url}}\">x</a>"}}),    "content.html"),
        ("html unterminated {{",   json!({"content": {"html": "<a href=\"{{CLICK_URL\">x</a>"}}),      "content.html"),
        ("html unknown statistic", json!({"content": {"html": "<b>{{STAT:VISITS}}</b>"}}),             "content.html"),
        ("html statistic as macro", json!({"content": {"html": "<b>{{IMPRESSIONS_TODAY}}</b>"}}),      "content.html"),
        ("html key-value, bad key", json!({"content": {"html": "<b>{{KV:Hb Adid}}</b>"}}),             "content.html"),
        ("html key-value, no key", json!({"content": {"html": "<b>{{KV:}}</b>"}}),                     "content.html"),
    ];
    assert_cases::<Creative>(&html(), &cases);

    // A third-party tag follows the same markup rules, at content.tag.
    #[rustfmt::skip]
    let cases = [
        ("tag without size",       json!({"size": null}),                                              "size"),
        ("tag empty",              json!({"content": {"tag": ""}}),                                    "content.tag"),
        ("tag too big",            json!({"content": {"tag": too_big}}),                               "content.tag"),
        ("tag unknown macro",      json!({"content": {"tag": "<script>{{USER_ID}}</script>"}}),        "content.tag"),
        ("tag unterminated {{",    json!({"content": {"tag": "<script>{{CACHE_BUSTER}} {{</script>"}}), "content.tag"),
        ("tag unknown statistic",  json!({"content": {"tag": "<script>{{STAT:rank}}</script>"}}),     "content.tag"),
    ];
    assert_cases::<Creative>(&third_party_tag(), &cases);

    let all_macros: String = HTML_MACROS.iter().map(|m| format!("{{{{{m}}}}}")).collect();
    let all_statistics: String = LIVE_STATISTICS
        .iter()
        .map(|s| format!("{{{{{LIVE_STATISTIC_PREFIX}{s}}}}}"))
        .collect();
    #[rustfmt::skip]
    let valid = [
        ("exactly 100000 bytes",   json!({"content": {"html": "a".repeat(100_000)}})),
        ("every macro",            json!({"content": {"html": all_macros}})),
        ("every live statistic",   json!({"content": {"html": all_statistics}})),
        ("}} without {{",          json!({"content": {"html": "<div>}}</div>"}})),
        ("key-value macros",       json!({"content": {"html": "<script>var id = \"{{KV:hb_adid}}\", s = '{{KV:hb_size}}';</script>"}})),
    ];
    assert_valid::<Creative>(&html(), &valid);
}

#[test]
fn an_unknown_live_statistic_is_named_with_the_known_ones() {
    let creative = parse::<Creative>(patched(
        &html(),
        &json!({"content": {"html": "<b>{{STAT:VISITS_TODAY}}</b>"}}),
    ));
    let error = creative.validate().expect_err("unknown statistic");
    let message = &error.violations[0].message;
    assert!(
        message.contains("unknown live statistic {{STAT:VISITS_TODAY}}")
            && message.contains("STAT:IMPRESSIONS_TODAY"),
        "{message}"
    );
}

#[test]
fn creative_native_rules() {
    #[rustfmt::skip]
    let cases = [
        ("title empty",            json!({"content": {"title": ""}}),                              "content.title"),
        ("title blank",            json!({"content": {"title": "   "}}),                           "content.title"),
        ("title 91 characters",    json!({"content": {"title": "t".repeat(91)}}),                  "content.title"),
        ("sponsored_by empty",     json!({"content": {"sponsored_by": ""}}),                       "content.sponsored_by"),
        ("image_url data URL",     json!({"content": {"image_url": "data:image/png;base64,AAAA"}}), "content.image_url"),
        ("icon_url relative",      json!({"content": {"icon_url": "icon.png"}}),                   "content.icon_url"),
        ("bad size",               json!({"size": {"w": 10_001, "h": 1}}),                         "size.w"),
        ("image size without image", json!({"content": {"image_url": null}}),                      "content.image_size"),
        ("icon size 0 wide",       json!({"content": {"icon_size": {"w": 0}}}),                    "content.icon_size.w"),
    ];
    assert_cases::<Creative>(&native(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("title 90 characters",    json!({"content": {"title": "ü".repeat(90)}})),
        ("no images",              json!({"content": {"image_url": null, "icon_url": null,
                                                      "image_size": null, "icon_size": null}})),
        ("images of unknown size", json!({"content": {"image_size": null, "icon_size": null}})),
        ("with a size",            json!({"size": {"w": 1200, "h": 627}})),
    ];
    assert_valid::<Creative>(&native(), &valid);
}

#[test]
fn creative_vast_rules() {
    let too_big = format!("<VAST>{}</VAST>", "a".repeat(100_000));
    #[rustfmt::skip]
    let cases = [
        ("both xml and url",       json!({"content": {"url": "https://ads.other.example/v.xml"}}), "content"),
        ("neither xml nor url",    json!({"content": {"xml": null}}),                              "content"),
        ("xml without <VAST",      json!({"content": {"xml": "<html></html>"}}),                   "content.xml"),
        ("xml too big",            json!({"content": {"xml": too_big}}),                           "content.xml"),
        ("duration 0",             json!({"content": {"duration_secs": 0}}),                       "content.duration_secs"),
        ("duration 3601",          json!({"content": {"duration_secs": 3601}}),                    "content.duration_secs"),
        ("no mimes",               json!({"content": {"mimes": []}}),                              "content.mimes"),
        ("upper-case mime",        json!({"content": {"mimes": ["Video/MP4"]}}),                   "content.mimes[0]"),
        ("mime without subtype",   json!({"content": {"mimes": ["video/mp4", "video"]}}),          "content.mimes[1]"),
        ("duplicate mime",         json!({"content": {"mimes": ["video/mp4", "video/mp4"]}}),      "content.mimes[1]"),
        ("21 mimes, all the same", json!({"content": {"mimes": vec!["video/mp4"; 21]}}),           "content.mimes"),
        ("audio and video mixed",  json!({"content": {"mimes": ["video/mp4", "audio/mp4"]}}),      "content.mimes"),
        ("no protocols",           json!({"content": {"protocols": []}}),                          "content.protocols"),
        ("protocol 15",            json!({"content": {"protocols": [7, 15]}}),                     "content.protocols[1]"),
        ("protocol 0",             json!({"content": {"protocols": [0]}}),                         "content.protocols[0]"),
        ("duplicate protocol",     json!({"content": {"protocols": [7, 7]}}),                      "content.protocols[1]"),
    ];
    assert_cases::<Creative>(&vast_xml(), &cases);

    #[rustfmt::skip]
    let cases = [
        ("url not http",           json!({"content": {"url": "ftp://ads.other.example/v.xml"}}),   "content.url"),
    ];
    assert_cases::<Creative>(&vast_url(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("duration 1",             json!({"content": {"duration_secs": 1}})),
        ("duration 3600",          json!({"content": {"duration_secs": 3600}})),
        ("DAAST document",         json!({"content": {"xml": "<DAAST version=\"1.0\"></DAAST>",
                                                      "mimes": ["audio/mp4"], "protocols": [9]}})),
        ("VPAID mime",             json!({"content": {"mimes": ["application/javascript"]}})),
        ("protocol 14",            json!({"content": {"protocols": [14]}})),
    ];
    assert_valid::<Creative>(&vast_xml(), &valid);
}

#[test]
fn publisher_has_only_the_name_rule() {
    assert_eq!(
        violations_of::<Publisher>(publisher()),
        Vec::<String>::new()
    );
    assert_eq!(
        violations_of::<Publisher>(json!({"name": "Minimal"})),
        Vec::<String>::new()
    );
    assert_eq!(
        violations_of::<Publisher>(json!({"name": ""})),
        vec!["name"]
    );
}

// One table of rule cases a kind, deliberately the same shape as the others: each reads as that
// kind's rules.
#[test]
fn site_rules() {
    #[rustfmt::skip]
    let cases = [
        ("upper case",             json!({"domain": "News.example.com"}),                         "domain"),
        ("single label",           json!({"domain": "localhost"}),                                "domain"),
        ("underscore",             json!({"domain": "news_site.example.com"}),                    "domain"),
        ("URL",                    json!({"domain": "https://news.example.com/"}),                "domain"),
        ("empty label",            json!({"domain": "news..example.com"}),                        "domain"),
        ("leading hyphen",         json!({"domain": "-news.example.com"}),                        "domain"),
        ("label of 64",            json!({"domain": format!("{}.example.com", "a".repeat(64))}),  "domain"),
    ];
    assert_cases::<Site>(&site(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("label of 63",            json!({"domain": format!("{}.example.com", "a".repeat(63))})),
    ];
    assert_valid::<Site>(&site(), &valid);
}

#[test]
fn placement_rules() {
    let same_101 = vec![json!({"w": 300, "h": 250}); 101];
    let distinct_100: Vec<Value> = (1..=100).map(|w| json!({"w": w, "h": 250})).collect();
    #[rustfmt::skip]
    let cases = [
        ("no formats",             json!({"formats": []}),                                          "formats"),
        ("duplicate format",       json!({"formats": ["banner", "native", "banner"]}),              "formats[2]"),
        ("banner without sizes",   json!({"sizes": []}),                                            "sizes"),
        ("duplicate size",         json!({"sizes": [{"w": 728, "h": 90}, {"w": 728, "h": 90}]}),    "sizes[1]"),
        ("height 0",               json!({"sizes": [{"w": 728, "h": 0}]}),                          "sizes[0].h"),
        ("width 10001",            json!({"sizes": [{"w": 728, "h": 90}, {"w": 10_001, "h": 90}]}), "sizes[1].w"),
        ("101 sizes, all the same", json!({"sizes": same_101}),                                     "sizes"),
    ];
    assert_cases::<Placement>(&placement(), &cases);

    #[rustfmt::skip]
    let valid = [
        ("video without sizes",    json!({"sizes": [], "formats": ["video"]})),
        ("native and audio",       json!({"sizes": [], "formats": ["native", "audio"]})),
        ("no sizes field",         json!({"sizes": null, "formats": ["video"]})),
        ("100 sizes",              json!({"sizes": distinct_100})),
    ];
    assert_valid::<Placement>(&placement(), &valid);
}

// ---------------------------------------------------------------------------------------------
// All violations at once
// ---------------------------------------------------------------------------------------------

#[test]
fn all_violations_are_reported_at_once() {
    let line_item = patched(
        &line_item(),
        &json!({
            "name": "",
            "time_zone": "Nowhere/Land",
            "end": "2026-01-01T00:00:00",
            "weight": 0,
            "goal": {"daily": 0, "lifetime": 0},
            "price": {"amount_micros": -5},
            "frequency_caps": [{"count": 0, "window": "1d"}, {"count": 1, "window": "24h"}],
            "targeting": {"all": [{"country": ["de"]}]}
        }),
    );
    assert_eq!(
        violations_of::<LineItem>(line_item),
        vec![
            "name",
            "time_zone",
            "end",
            "weight",
            "goal.daily",
            "goal.lifetime",
            "price.amount_micros",
            "frequency_caps[0].count",
            "frequency_caps[1].window",
            "targeting.all[0].country[0]",
        ]
    );

    let creative = patched(
        &html(),
        &json!({
            "name": "\u{0}",
            "landing_url": "javascript:void(0)",
            "weight": 5000,
            "size": {"w": 0, "h": 0},
            "content": {"html": "{{A}} {{B}} {{CLICK_URL}}"}
        }),
    );
    assert_eq!(
        violations_of::<Creative>(creative),
        vec![
            "name",
            "landing_url",
            "weight",
            "size.w",
            "size.h",
            "content.html",
            "content.html"
        ]
    );

    let vast = patched(
        &vast_xml(),
        &json!({"content": {"url": "x", "duration_secs": 0}}),
    );
    assert_eq!(
        violations_of::<Creative>(vast),
        vec!["content", "content.duration_secs"]
    );

    let placement = patched(
        &placement(),
        &json!({
            "formats": ["banner", "banner", "video", "video"],
            "sizes": [{"w": 0, "h": 90}, {"w": 0, "h": 90}]
        }),
    );
    assert_eq!(
        violations_of::<Placement>(placement),
        vec![
            "formats[1]",
            "formats[3]",
            "sizes[1]",
            "sizes[0].w",
            "sizes[1].w"
        ]
    );

    let advertiser = patched(
        &advertiser(),
        &json!({"time_zone": "", "domains": ["A.example", "A.example"]}),
    );
    assert_eq!(
        violations_of::<Advertiser>(advertiser),
        vec!["time_zone", "domains[1]", "domains[0]", "domains[1]"]
    );
}

#[test]
fn validation_error_lists_paths_and_messages() {
    let doc = patched(&line_item(), &json!({"weight": 0, "goal": {"daily": 0}}));
    let err = parse::<LineItem>(doc).validate().unwrap_err();
    assert!(
        err.violations.iter().all(|v| !v.message.is_empty()),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.starts_with("weight: "), "{text}");
    assert!(text.contains("; goal.daily: "), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Parse-level errors
// ---------------------------------------------------------------------------------------------

#[test]
fn unknown_fields_are_rejected_everywhere() {
    /// Each `(where, patch, field)` adds the unknown `field` somewhere in `base`.
    fn rejects<T: Object>(base: Value, cases: &[(&str, Value, &str)]) {
        for (place, patch, field) in cases {
            let error = parse_error::<T>(patched(&base, patch));
            assert!(
                error.contains("unknown field") && error.contains(field),
                "{} {place}: {error}",
                T::KIND.name()
            );
        }
    }
    #[rustfmt::skip]
    rejects::<Advertiser>(advertiser(), &[
        ("top level",      json!({"website": "x"}),                                                  "website"),
    ]);
    #[rustfmt::skip]
    rejects::<Campaign>(campaign(), &[
        ("top level",      json!({"budget": 1}),                                                     "budget"),
        ("frequency cap",  json!({"frequency_caps": [{"count": 1, "window": "1d", "per": "user"}]}), "per"),
    ]);
    #[rustfmt::skip]
    rejects::<LineItem>(line_item(), &[
        ("top level",      json!({"priority": 1}),                                                   "priority"),
        ("goal",           json!({"goal": {"hourly": 5}}),                                           "hourly"),
        ("price",          json!({"price": {"floor": 1}}),                                           "floor"),
        ("frequency cap",  json!({"frequency_caps": [{"count": 1, "window": "1d", "scope": "x"}]}),  "scope"),
    ]);
    #[rustfmt::skip]
    rejects::<Creative>(image(), &[
        ("top level",      json!({"click_url": "x"}),                                                "click_url"),
        ("size",           json!({"size": {"depth": 1}}),                                            "depth"),
        ("image content",  json!({"content": {"width": 300}}),                                       "width"),
    ]);
    #[rustfmt::skip]
    rejects::<Creative>(html(), &[
        ("html content",   json!({"content": {"css": "x"}}),                                         "css"),
        ("another type's field",
                           json!({"content": {"image_url": "https://cdn.acme.example/a.png"}}),      "image_url"),
    ]);
    #[rustfmt::skip]
    rejects::<Creative>(third_party_tag(), &[
        ("tag content",    json!({"content": {"vendor": "x"}}),                                      "vendor"),
    ]);
    #[rustfmt::skip]
    rejects::<Creative>(native(), &[
        ("native content", json!({"content": {"rating": 5}}),                                        "rating"),
    ]);
    #[rustfmt::skip]
    rejects::<Creative>(vast_xml(), &[
        ("vast content",   json!({"content": {"skippable": true}}),                                  "skippable"),
    ]);
    #[rustfmt::skip]
    rejects::<Publisher>(publisher(), &[
        ("top level",      json!({"country": "DE"}),                                                 "country"),
    ]);
    #[rustfmt::skip]
    rejects::<Site>(site(), &[
        ("top level",      json!({"url": "https://news.example.com"}),                               "url"),
    ]);
    #[rustfmt::skip]
    rejects::<Placement>(placement(), &[
        ("top level",      json!({"floor": 1}),                                                      "floor"),
        ("size",           json!({"sizes": [{"w": 728, "h": 90, "unit": "px"}]}),                    "unit"),
    ]);
}

#[test]
fn content_type_must_be_known_and_present() {
    let error = parse_error::<Creative>(patched(&image(), &json!({"content": {"type": "video"}})));
    assert!(error.contains("unknown variant"), "{error}");
    let error = parse_error::<Creative>(patched(&image(), &json!({"content": {"type": null}})));
    assert!(error.contains("type"), "{error}");
    let error = parse_error::<Creative>(patched(&html(), &json!({"content": {"html": null}})));
    assert!(error.contains("missing field"), "{error}");
}

#[test]
fn currency_must_be_three_upper_case_letters() {
    for bad in ["eur", "Eur", "EURO", "EU", "", "E1R"] {
        let error = parse_error::<Advertiser>(patched(&advertiser(), &json!({"currency": bad})));
        assert!(error.contains("ISO 4217"), "{bad:?}: {error}");
        let error =
            parse_error::<LineItem>(patched(&line_item(), &json!({"price": {"currency": bad}})));
        assert!(error.contains("ISO 4217"), "{bad:?}: {error}");
    }
    let advertiser: Advertiser = parse(patched(&advertiser(), &json!({"currency": "USD"})));
    assert_eq!(advertiser.currency, Currency::USD);
}

#[test]
fn bad_cap_windows_do_not_parse() {
    for bad in [
        "0d",
        "1y",
        "90s",
        "367d",
        "d",
        "1.5h",
        "",
        "0m",
        "53w",
        "-1d",
        "+1d",
        " 1d",
        "1d ",
        "1D",
        "1 d",
        "1dd",
        "4294967295m",
    ] {
        let doc = patched(
            &campaign(),
            &json!({"frequency_caps": [{"count": 1, "window": bad}]}),
        );
        let error = parse_error::<Campaign>(doc);
        assert!(error.contains("must be a whole number"), "{bad:?}: {error}");
        assert!(
            serde_json::from_value::<CapWindow>(json!(bad)).is_err(),
            "{bad:?}"
        );
    }
    // Not a string at all.
    assert!(serde_json::from_value::<CapWindow>(json!(3600)).is_err());
}

#[test]
fn cap_windows_round_trip_in_their_largest_whole_unit() {
    for (written, seconds, serialised) in [
        ("1m", 60, "1m"),
        ("90m", 5_400, "90m"),
        ("60m", 3_600, "1h"),
        ("1440m", 86_400, "1d"),
        ("24h", 86_400, "1d"),
        ("36h", 129_600, "36h"),
        ("168h", 604_800, "1w"),
        ("14d", 1_209_600, "2w"),
        ("52w", 31_449_600, "52w"),
        ("366d", 31_622_400, "366d"),
        ("007d", 604_800, "1w"),
    ] {
        let window: CapWindow = serde_json::from_value(json!(written)).unwrap();
        assert_eq!(window.seconds(), seconds, "{written}");
        assert_eq!(
            serde_json::to_value(window).unwrap(),
            json!(serialised),
            "{written}"
        );
        assert_eq!(window.to_string(), serialised, "{written}");
        // And the serialised form parses back to the same window.
        let again: CapWindow = serde_json::from_value(json!(serialised)).unwrap();
        assert_eq!(again, window, "{written}");
    }
    assert_eq!(CapWindow::from_seconds(5_400).unwrap().to_string(), "90m");
    assert!(CapWindow::from_seconds(59).is_err());
    assert!(CapWindow::from_seconds(90).is_err());
    assert!(CapWindow::from_seconds(366 * 86_400 + 60).is_err());
}

#[test]
fn unknown_enum_values_do_not_parse() {
    let cases: &[(&str, Value)] = &[
        ("tier", json!({"tier": "gold"})),
        ("tier in the wrong case", json!({"tier": "Standard"})),
        ("status", json!({"status": "deleted"})),
        ("pacing", json!({"pacing": "fast"})),
        ("rotation", json!({"rotation": "random"})),
        ("goal metric", json!({"goal": {"metric": "views"}})),
        ("pricing model", json!({"price": {"model": "cpa"}})),
    ];
    for (description, patch) in cases {
        let error = parse_error::<LineItem>(patched(&line_item(), patch));
        assert!(error.contains("unknown variant"), "{description}: {error}");
    }
    let error = parse_error::<Placement>(patched(&placement(), &json!({"formats": ["popup"]})));
    assert!(error.contains("unknown variant"), "{error}");

    for (tier, expected) in [
        ("house", Tier::House),
        ("remnant", Tier::Remnant),
        ("standard", Tier::Standard),
        ("sponsorship", Tier::Sponsorship),
    ] {
        let li: LineItem = parse(patched(&line_item(), &json!({"tier": tier})));
        assert_eq!(li.tier, expected);
    }
}

#[test]
fn wrong_json_types_do_not_parse() {
    for patch in [
        json!({"weight": -1}),
        json!({"weight": "100"}),
        json!({"start": "2026-03-01T00:00:00Z"}),
        json!({"end": "2026-13-01T00:00:00"}),
        json!({"campaign_id": "2"}),
        json!({"frequency_caps": {"count": 1, "window": "1d"}}),
    ] {
        assert!(
            serde_json::from_value::<LineItem>(patched(&line_item(), &patch)).is_err(),
            "{patch}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Flight resolution
// ---------------------------------------------------------------------------------------------

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

#[test]
fn flight_resolves_local_times_in_the_line_item_zone() {
    // Winter (CET, +01:00) start, summer (CEST, +02:00) end.
    let li: LineItem = parse(patched(
        &line_item(),
        &json!({"start": "2026-03-01T00:00:00", "end": "2026-07-01T00:00:00"}),
    ));
    assert_eq!(
        li.flight(),
        Some((ts("2026-02-28T23:00:00Z"), Some(ts("2026-06-30T22:00:00Z"))))
    );

    let open: LineItem = parse(patched(
        &line_item(),
        &json!({"start": "2026-06-15T12:30:00", "end": null, "time_zone": "America/New_York"}),
    ));
    assert_eq!(open.flight(), Some((ts("2026-06-15T16:30:00Z"), None)));

    let unknown: LineItem = parse(patched(&line_item(), &json!({"time_zone": "Mars/Base"})));
    assert_eq!(unknown.flight(), None);
}

#[test]
fn flight_resolves_a_local_time_in_a_dst_gap() {
    // Clocks in Berlin jump from 02:00 CET to 03:00 CEST on 2026-03-29; 02:30 never happens.
    let li: LineItem = parse(patched(
        &line_item(),
        &json!({"start": "2026-03-29T02:30:00", "end": "2026-04-29T00:00:00"}),
    ));
    assert_eq!(li.validate(), Ok(()));
    let (start, end) = li.flight().expect("resolves");
    // 02:30 read with either offset: +02:00 gives 00:30Z, +01:00 gives 01:30Z.
    assert!(
        (ts("2026-03-29T00:30:00Z")..=ts("2026-03-29T01:30:00Z")).contains(&start),
        "{start}"
    );
    assert_eq!(end, Some(ts("2026-04-28T22:00:00Z")));

    // A time repeated when the clocks go back (2026-10-25, 02:00–03:00 twice) resolves too.
    let li: LineItem = parse(patched(
        &line_item(),
        &json!({"start": "2026-10-25T02:30:00", "end": "2026-11-01T00:00:00"}),
    ));
    let (start, _) = li.flight().expect("resolves");
    assert!(
        (ts("2026-10-25T00:30:00Z")..=ts("2026-10-25T01:30:00Z")).contains(&start),
        "{start}"
    );
}

/// A line item that passes validation has a flight that ends after it starts.
#[test]
fn a_flight_ending_before_its_resolved_start_is_refused() {
    // 02:30 does not exist in Berlin that night; it resolves to 03:30 local, after the end.
    let li: LineItem = parse(patched(
        &line_item(),
        &json!({"start": "2026-03-29T02:30:00", "end": "2026-03-29T03:00:00", "goal": null}),
    ));
    let paths: Vec<String> = li
        .validate()
        .expect_err("refused")
        .violations
        .into_iter()
        .map(|v| v.path)
        .collect();
    assert_eq!(paths, ["end"]);
    // Just past the gap it is fine, and resolves in order.
    let li: LineItem = parse(patched(
        &line_item(),
        &json!({"start": "2026-03-29T02:30:00", "end": "2026-03-29T04:00:00", "goal": null}),
    ));
    assert_eq!(li.validate(), Ok(()));
    let (start, end) = li.flight().expect("resolves");
    assert!(end.expect("has an end") > start);
}

/// A line item that passes validation always has a flight that resolves.
#[test]
fn flights_outside_the_supported_years_are_refused() {
    let li: LineItem = parse(patched(
        &line_item(),
        &json!({
            "start": "9999-12-31T00:00:00",
            "end": "9999-12-31T23:59:59",
            "time_zone": "UTC",
            "goal": null
        }),
    ));
    let paths: Vec<String> = li
        .validate()
        .expect_err("refused")
        .violations
        .into_iter()
        .map(|v| v.path)
        .collect();
    assert_eq!(paths, ["start", "end"]);
    let li: LineItem = parse(patched(
        &line_item(),
        &json!({"start": "2200-12-31T00:00:00", "end": "2200-12-31T23:59:59", "time_zone": "UTC", "goal": null}),
    ));
    assert_eq!(li.validate(), Ok(()));
    assert!(li.flight().is_some());
}

// ---------------------------------------------------------------------------------------------
// Money
// ---------------------------------------------------------------------------------------------

#[test]
fn micros_are_bare_json_integers() {
    assert_eq!(
        serde_json::to_value(Micros(2_500_000)).unwrap(),
        json!(2_500_000)
    );
    assert_eq!(serde_json::to_string(&Micros(-1)).unwrap(), "-1");
    assert_eq!(
        serde_json::from_value::<Micros>(json!(2_500_000)).unwrap(),
        Micros(2_500_000)
    );
    assert_eq!(
        serde_json::from_value::<Micros>(json!(i64::MAX)).unwrap(),
        Micros(i64::MAX)
    );
    for bad in [
        json!("2500000"),
        json!(2.5),
        json!({"micros": 1}),
        json!(u64::MAX),
    ] {
        assert!(
            serde_json::from_value::<Micros>(bad.clone()).is_err(),
            "{bad}"
        );
    }

    let price = Price {
        model: PricingModel::Cpm,
        amount_micros: Micros(1_250_000),
        currency: Currency::EUR,
    };
    assert_eq!(
        serde_json::to_value(price).unwrap(),
        json!({"model": "cpm", "amount_micros": 1250000, "currency": "EUR"})
    );
    let li: LineItem = parse(line_item());
    assert_eq!(li.price.amount_micros, Micros(2_500_000));
}
