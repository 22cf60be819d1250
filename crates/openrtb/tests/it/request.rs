#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Request parsing: defaults, borrowing, leniency the spec asks for, 2.5 moves, and every
//! structural error.

use std::borrow::Cow;

use marquee_openrtb::{
    AuctionType, BidRequest, CreativeAttribute, DeviceType, Geo, MAX_DIMENSION, MarkupType,
    ParseError, RequestError, VideoPlcmt,
};

fn parse(body: &str) -> Result<BidRequest<'_>, ParseError> {
    BidRequest::parse(body.as_bytes())
}

fn invalid(body: &str) -> RequestError {
    match parse(body) {
        Err(ParseError::Invalid(error)) => error,
        other => panic!("expected a structural error, got {other:?}"),
    }
}

/// `(path, message)` of a JSON error.
fn json_error(body: &str) -> (String, String) {
    match parse(body) {
        Err(ParseError::Json(error)) => (error.path, error.message),
        other => panic!("expected a JSON error, got {other:?}"),
    }
}

const MINIMAL: &str = r#"{"id":"r1","imp":[{"id":"1","banner":{}}]}"#;

#[test]
fn defaults_are_the_spec_defaults() {
    let request = parse(MINIMAL).unwrap();
    assert_eq!(request.at, AuctionType::SECOND_PRICE);
    assert_eq!(request.tmax, None);
    assert!(!request.test && !request.allimps);
    assert!(request.cur.is_empty() && request.bcat.is_empty() && request.wseat.is_empty());
    assert!(request.allows_currency("JPY"));
    assert!(!request.coppa());
    let imp = &request.imp[0];
    assert_eq!(imp.bidfloor_micros, 0);
    assert_eq!(imp.bidfloorcur, "USD");
    assert!(!imp.secure && !imp.instl);
    assert_eq!(imp.single_media(), Some(MarkupType::BANNER));
    assert_eq!(imp.banner_sizes().count(), 0);
    assert!(request.site.is_none() && request.regs.is_none());
}

#[test]
fn strings_without_escapes_are_borrowed() {
    let body = r#"{"id":"plain","imp":[{"id":"1","tagid":"t\"q","banner":{"mimes":["image/png","a\/b"]}}],
        "bcat":["IAB1"],"site":{"page":"https:\/\/x.test\/"},"user":{"id":"u"}}"#;
    let request = parse(body).unwrap();
    assert!(matches!(request.id, Cow::Borrowed("plain")));
    assert!(matches!(request.bcat[0], Cow::Borrowed("IAB1")));
    assert!(matches!(
        request.user.as_ref().unwrap().id,
        Some(Cow::Borrowed("u"))
    ));
    let imp = &request.imp[0];
    // Escaped strings cannot be borrowed; they are unescaped into owned ones.
    assert!(matches!(&imp.tagid, Some(Cow::Owned(s)) if s == "t\"q"));
    let mimes = &imp.banner.as_ref().unwrap().mimes;
    assert!(matches!(mimes[0], Cow::Borrowed("image/png")));
    assert!(matches!(&mimes[1], Cow::Owned(s) if s == "a/b"));
    assert_eq!(
        request.site.as_ref().unwrap().page.as_deref(),
        Some("https://x.test/")
    );
}

#[test]
fn flags_take_integers_and_booleans() {
    let request = parse(
        r#"{"id":"r","test":true,"allimps":1,"imp":[{"id":"1","secure":1,"instl":false,"banner":{},
            "pmp":{"private_auction":true,"deals":[]}}],"regs":{"coppa":1,"gdpr":0}}"#,
    )
    .unwrap();
    assert!(request.test && request.allimps && request.coppa());
    assert!(request.imp[0].secure && !request.imp[0].instl);
    assert!(request.imp[0].is_private_auction());
    assert_eq!(request.regs.as_ref().unwrap().gdpr, Some(false));

    let (path, message) = json_error(r#"{"id":"r","imp":[{"id":"1","secure":2,"banner":{}}]}"#);
    assert_eq!(path, "imp[0].secure");
    assert!(message.contains("expected 0 or 1"), "{message}");
    let (path, _) = json_error(r#"{"id":"r","imp":[{"id":"1","banner":{}}],"test":"1"}"#);
    assert_eq!(path, "test");
}

#[test]
fn unknown_fields_and_enumeration_values_are_accepted() {
    let request = parse(
        r#"{"id":"r","at":501,"imp":[{"id":"1","banner":{"battr":[999],"vcm":1,"future":{"x":[1]}},
            "rwdd":1}],"device":{"devicetype":42,"new":null},"dooh":{"venuetypeid":1},"ext":{"a":1}}"#,
    )
    .unwrap();
    assert_eq!(request.at, AuctionType(501));
    assert_eq!(
        request.device.as_ref().unwrap().devicetype,
        Some(DeviceType(42))
    );
    assert_eq!(
        request.imp[0].banner.as_ref().unwrap().battr,
        vec![CreativeAttribute(999)]
    );
    assert_eq!(request.ext.map(|e| e.get()), Some(r#"{"a":1}"#));
    // Absent objects may come as null.
    assert!(parse(r#"{"id":"r","imp":[{"id":"1","banner":{}}],"site":null,"user":null}"#).is_ok());
}

#[test]
fn floors_are_read_exactly() {
    let floor = |value: &str| -> Result<i64, (String, String)> {
        let body = format!(r#"{{"id":"r","imp":[{{"id":"1","banner":{{}},"bidfloor":{value}}}]}}"#);
        match BidRequest::parse(body.as_bytes()) {
            Ok(request) => Ok(request.imp[0].bidfloor_micros),
            Err(ParseError::Json(e)) => Err((e.path, e.message)),
            Err(other) => panic!("{other}"),
        }
    };
    assert_eq!(floor("0.03"), Ok(30_000));
    assert_eq!(floor("1.1"), Ok(1_100_000));
    assert_eq!(floor("2"), Ok(2_000_000));
    assert_eq!(floor("1e-2"), Ok(10_000));
    // Past the sixth decimal a floor rounds up, so a bid at our floor never undercuts theirs.
    assert_eq!(floor("0.0000001"), Ok(1));
    assert_eq!(floor("0.1234561"), Ok(123_457));
    let (path, message) = floor("-1").unwrap_err();
    assert_eq!(path, "imp[0].bidfloor");
    assert!(message.contains("negative"), "{message}");
    let (path, message) = floor("\"0.5\"").unwrap_err();
    assert_eq!(path, "imp[0].bidfloor");
    assert!(message.contains("expected a number"), "{message}");
    assert!(floor("1e300").is_err());
}

#[test]
fn currencies_are_upper_cased_and_checked() {
    let request = parse(
        r#"{"id":"r","cur":["eur"],"imp":[{"id":"1","banner":{},"bidfloorcur":"gbp",
            "pmp":{"deals":[{"id":"d","bidfloorcur":"Chf"}]}}]}"#,
    )
    .unwrap();
    assert_eq!(request.cur, vec!["EUR"]);
    assert!(request.allows_currency("EUR") && !request.allows_currency("USD"));
    assert_eq!(request.imp[0].bidfloorcur, "GBP");
    assert_eq!(request.imp[0].floor_for(Some("d")), (0, "CHF"));
    assert_eq!(
        invalid(r#"{"id":"r","imp":[{"id":"1","banner":{},"bidfloorcur":"US$"}]}"#),
        RequestError::InvalidCurrency {
            path: "imp[0].bidfloorcur".into(),
            code: "US$".into()
        }
    );
    assert!(matches!(
        invalid(r#"{"id":"r","cur":["USDX"],"imp":[{"id":"1","banner":{}}]}"#),
        RequestError::InvalidCurrency { path, .. } if path == "cur[0]"
    ));
}

#[test]
fn every_structural_rule_has_its_error() {
    assert_eq!(
        invalid(r#"{"imp":[{"id":"1","banner":{}}]}"#),
        RequestError::MissingId
    );
    assert_eq!(
        invalid(r#"{"id":"","imp":[{"id":"1","banner":{}}]}"#),
        RequestError::MissingId
    );
    assert_eq!(invalid(r#"{"id":"r"}"#), RequestError::NoImps);
    assert_eq!(invalid(r#"{"id":"r","imp":[]}"#), RequestError::NoImps);
    assert_eq!(
        invalid(r#"{"id":"r","imp":[{"id":"1","banner":{}},{"banner":{}}]}"#),
        RequestError::EmptyImpId { index: 1 }
    );
    assert_eq!(
        invalid(r#"{"id":"r","imp":[{"id":"1","banner":{}},{"id":"1","video":{}}]}"#),
        RequestError::DuplicateImpId {
            index: 1,
            id: "1".into()
        }
    );
    // A width without a height is no size, not an error (both are optional).
    let request = parse(r#"{"id":"r","imp":[{"id":"1","banner":{"w":300}}]}"#).unwrap();
    assert_eq!(request.imp[0].banner_sizes().count(), 0);
    let too_wide = format!(
        r#"{{"id":"r","imp":[{{"id":"1","banner":{{"format":[{{"w":300,"h":250}},{{"w":{},"h":90}}]}}}}]}}"#,
        MAX_DIMENSION + 1
    );
    assert!(matches!(
        invalid(&too_wide),
        RequestError::InvalidSize { path, .. } if path == "imp[0].banner.format[1]"
    ));
    assert!(parse(r#"{"id":"r","imp":[{"id":"1","video":{"w":0,"h":480}}]}"#).is_ok());
    assert!(matches!(
        invalid(r#"{"id":"r","imp":[{"id":"1","video":{"w":640,"h":16385}}]}"#),
        RequestError::InvalidSize { path, .. } if path == "imp[0].video"
    ));
    assert_eq!(
        invalid(r#"{"id":"r","imp":[{"id":"1","video":{"minduration":30,"maxduration":15}}]}"#),
        RequestError::DurationRange {
            path: "imp[0].video".into(),
            min: 30,
            max: 15
        }
    );
    assert!(matches!(
        invalid(r#"{"id":"r","imp":[{"id":"1","audio":{"minduration":31,"maxduration":30}}]}"#),
        RequestError::DurationRange { path, .. } if path == "imp[0].audio"
    ));
    assert_eq!(
        invalid(r#"{"id":"r","imp":[{"id":"1","banner":{},"pmp":{"deals":[{"bidfloor":1}]}}]}"#),
        RequestError::EmptyDealId {
            path: "imp[0].pmp.deals[0]".into()
        }
    );
    assert_eq!(
        invalid(
            r#"{"id":"r","imp":[{"id":"1","banner":{},"pmp":{"deals":[{"id":"d"},{"id":"d"}]}}]}"#
        ),
        RequestError::DuplicateDealId {
            path: "imp[0].pmp.deals[1]".into(),
            id: "d".into()
        }
    );
    // Sizes that are fine: both zero (interstitial, flexible), a format with ratios only.
    assert!(parse(r#"{"id":"r","imp":[{"id":"1","instl":1,"banner":{"w":0,"h":0,"format":[{"wratio":16,"hratio":9}]}}]}"#).is_ok());
}

#[test]
fn json_errors_name_the_path_and_stay_short() {
    let (path, message) = json_error(r#"{"id":"r","imp":[{"id":"1","banner":{"w":"300"}}]}"#);
    assert_eq!(path, "imp[0].banner.w");
    assert!(
        message.starts_with("invalid type: string \"300\""),
        "{message}"
    );
    let (path, _) =
        json_error(r#"{"id":"r","imp":[{"id":"1","banner":{"format":[{"w":1,"h":-2}]}}]}"#);
    assert_eq!(path, "imp[0].banner.format[0].h");
    let (path, _) = json_error(r#"{"id":7,"imp":[]}"#);
    assert_eq!(path, "id");
    let (path, _) = json_error(r#""request""#);
    assert_eq!(path, ".");
    // serde reads a struct from an array of its fields in order: an empty one has no id.
    assert_eq!(invalid("[]"), RequestError::MissingId);
    let (path, message) = json_error("");
    assert_eq!(path, ".");
    assert!(message.contains("EOF"), "{message}");
    let (path, message) = json_error(&format!("{MINIMAL} trailing"));
    assert_eq!(path, ".");
    assert!(message.contains("trailing"), "{message}");
    let long = format!(
        r#"{{"id":"r","imp":[{{"id":"1","banner":{{"w":"{}"}}}}]}}"#,
        "9".repeat(5000)
    );
    let (_, message) = json_error(&long);
    assert!(message.chars().count() <= 201, "{}", message.len());
    let error = parse(r#"{"id":"r","imp":[{"id":"1","banner":{"w":"300"}}]}"#).unwrap_err();
    assert_eq!(error.label(), "malformed_json");
    assert_eq!(invalid(r#"{"id":"r"}"#).label(), "no_imps");
}

#[test]
fn deep_nesting_costs_no_stack() {
    let depth = 100_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    // Skipped and raw values are walked without recursion: accepted.
    let in_ext = format!(r#"{{"id":"r","imp":[{{"id":"1","banner":{{}}}}],"ext":{nested}}}"#);
    assert!(parse(&in_ext).is_ok());
    let in_unknown = format!(r#"{{"id":"r","imp":[{{"id":"1","banner":{{}},"x":{nested}}}]}}"#);
    assert!(parse(&in_unknown).is_ok());
    // Where a typed value is expected, the first array is already the error.
    let typed = format!(r#"{{"id":"r","imp":[{{"id":"1","banner":{nested}}}]}}"#);
    assert!(matches!(parse(&typed), Err(ParseError::Json(_))));
}

#[test]
fn values_in_2_6_places_win_over_2_5_extensions() {
    let request = parse(
        r#"{"id":"r","imp":[{"id":"1","video":{"plcmt":2,"placement":5}}],
            "regs":{"gdpr":0,"us_privacy":"1NNN","ext":{"gdpr":1,"us_privacy":"1YYY"}},
            "user":{"consent":"new","eids":[{"source":"new.example","uids":[]}],
                    "ext":{"consent":"old","eids":[{"source":"old.example","uids":[]}]}},
            "source":{"schain":{"complete":0,"ver":"1.0","nodes":[]},
                      "ext":{"schain":{"complete":1,"ver":"old","nodes":[]}}}}"#,
    )
    .unwrap();
    let regs = request.regs.as_ref().unwrap();
    assert_eq!(
        (regs.gdpr, regs.us_privacy.as_deref()),
        (Some(false), Some("1NNN"))
    );
    let user = request.user.as_ref().unwrap();
    assert_eq!(user.consent.as_deref(), Some("new"));
    assert_eq!(user.eids[0].source, "new.example");
    let schain = request.source.as_ref().unwrap().schain.as_ref().unwrap();
    assert_eq!((schain.complete, schain.ver.as_ref()), (false, "1.0"));
    let video = request.imp[0].video.as_ref().unwrap();
    assert_eq!(video.plcmt, Some(VideoPlcmt::ACCOMPANYING_CONTENT));
}

#[test]
fn placement_maps_to_plcmt() {
    let plcmt = |placement: i32| {
        let body =
            format!(r#"{{"id":"r","imp":[{{"id":"1","video":{{"placement":{placement}}}}}]}}"#);
        let request = BidRequest::parse(body.as_bytes()).unwrap();
        request.imp[0].video.as_ref().unwrap().plcmt
    };
    assert_eq!(plcmt(1), Some(VideoPlcmt::INSTREAM));
    assert_eq!(plcmt(2), Some(VideoPlcmt::NO_CONTENT_STANDALONE));
    assert_eq!(plcmt(3), Some(VideoPlcmt::NO_CONTENT_STANDALONE));
    assert_eq!(plcmt(4), Some(VideoPlcmt::NO_CONTENT_STANDALONE));
    assert_eq!(plcmt(5), Some(VideoPlcmt::INTERSTITIAL));
    assert_eq!(plcmt(77), None);
}

#[test]
fn a_malformed_2_5_extension_is_located() {
    let (path, message) =
        json_error(r#"{"id":"r","imp":[{"id":"1","banner":{}}],"regs":{"ext":{"gdpr":"yes"}}}"#);
    assert_eq!(path, "regs.ext.gdpr");
    assert!(message.contains("0 or 1"), "{message}");
    let (path, _) = json_error(
        r#"{"id":"r","imp":[{"id":"1","banner":{}}],"user":{"ext":{"eids":[{"source":5}]}}}"#,
    );
    assert_eq!(path, "user.ext.eids[0].source");
    let (path, _) = json_error(r#"{"id":"r","imp":[{"id":"1","banner":{}}],"source":{"ext":"x"}}"#);
    assert_eq!(path, "source.ext");
}

#[test]
fn imp_helpers() {
    let request = parse(
        r#"{"id":"r","imp":[{"id":"1","bidfloor":0.5,"banner":{"w":300,"h":250,"format":[{"w":728,"h":90},{"w":0,"h":0}]},
            "video":{"mimes":["video/mp4"]},
            "pmp":{"private_auction":1,"deals":[{"id":"d1","bidfloor":2,"bidfloorcur":"EUR"}]}}]}"#,
    )
    .unwrap();
    let imp = request.imp_by_id("1").unwrap();
    assert!(request.imp_by_id("2").is_none());
    assert!(imp.offers(MarkupType::BANNER) && imp.offers(MarkupType::VIDEO));
    assert!(!imp.offers(MarkupType::NATIVE) && !imp.offers(MarkupType(9)));
    assert_eq!(imp.single_media(), None);
    assert_eq!(
        imp.banner_sizes().collect::<Vec<_>>(),
        vec![(728, 90), (300, 250)]
    );
    assert_eq!(imp.floor_for(Some("d1")), (2_000_000, "EUR"));
    assert_eq!(imp.floor_for(Some("nope")), (500_000, "USD"));
    assert_eq!(imp.floor_for(None), (500_000, "USD"));
    assert!(imp.is_private_auction());
}

#[test]
fn geo_codes_become_targeting_s() {
    let geo = |country: Option<&'static str>, region: Option<&'static str>| Geo {
        country: country.map(Cow::Borrowed),
        region: region.map(Cow::Borrowed),
        ..Geo::default()
    };
    let alpha2 = |country| geo(Some(country), None).country_alpha2().map(str::to_owned);
    assert_eq!(alpha2("USA").as_deref(), Some("US"));
    assert_eq!(alpha2("deu").as_deref(), Some("DE"));
    assert_eq!(alpha2("GBR").as_deref(), Some("GB"));
    assert_eq!(alpha2("IND").as_deref(), Some("IN"));
    assert_eq!(alpha2("DE").as_deref(), Some("DE"), "two letters as sent");
    assert_eq!(alpha2("XYZ"), None);
    assert_eq!(alpha2("US A"), None);
    assert_eq!(alpha2("Ü"), None);
    assert_eq!(geo(None, None).country_alpha2(), None);

    let code = |geo: &Geo<'_>, country: Option<&str>| {
        let mut buf = [0u8; 8];
        geo.region_code(country, &mut buf).map(str::to_owned)
    };
    let california = geo(Some("USA"), Some("CA"));
    assert_eq!(
        code(&california, california.country_alpha2()).as_deref(),
        Some("US-CA")
    );
    assert_eq!(code(&california, None), None, "no country, no code");
    let bavaria = geo(Some("DEU"), Some("DE-BY"));
    assert_eq!(
        code(&bavaria, None).as_deref(),
        Some("DE-BY"),
        "a whole code"
    );
    let long = geo(Some("USA"), Some("CALIFORNIA"));
    assert_eq!(code(&long, Some("US")), None, "longer than any code");

    let metro = |text: &'static str| {
        Geo {
            metro: Some(Cow::Borrowed(text)),
            ..Geo::default()
        }
        .metro_code()
    };
    assert_eq!(metro("807"), Some(807));
    assert_eq!(metro(" 501 "), Some(501));
    assert_eq!(metro("SF Bay"), None);
    assert_eq!(Geo::default().metro_code(), None);
}
