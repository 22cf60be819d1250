#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every sample in `testdata/` (sources in its README).

use std::borrow::Cow;
use std::path::PathBuf;

use marquee_openrtb::{
    App, Audio, Banner, Bid, BidRequest, BidResponse, Device, Imp, MarkupType, Native, NativeError,
    NativeRequest, NoConversion, ParseError, Pmp, RequestError, Rule, Site, Source, Video,
    VideoPlcmt, validate_response,
};
use serde::Deserialize;

fn read(path: &str) -> Vec<u8> {
    let full: PathBuf = [env!("CARGO_MANIFEST_DIR"), "testdata", path]
        .iter()
        .collect();
    std::fs::read(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn files(dir: &str, prefix: &str) -> Vec<String> {
    let full: PathBuf = [env!("CARGO_MANIFEST_DIR"), "testdata", dir]
        .iter()
        .collect();
    let mut names: Vec<String> = std::fs::read_dir(full)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(prefix))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    names.sort();
    names
}

const REQUESTS: &[&str] = &[
    "iab-2.6/iab-2.6-impl-7.9.6.1-dooh-banner-request.json",
    "iab-2.6/iab-2.6-impl-7.9.6.3-dooh-video-request.json",
    "iab-2.6/iab-2.6-req-1-simple-banner.json",
    "iab-2.6/iab-2.6-req-2-expandable-creative.json",
    "iab-2.6/iab-2.6-req-3-mobile.json",
    "iab-2.6/iab-2.6-req-4-video.json",
    "iab-2.6/iab-2.6-req-5-pmp-direct-deal.json",
    "bsm/breq.banner.json",
    "bsm/breq.exp.json",
    "bsm/breq.native.json",
    "bsm/breq.video.json",
    "marquee/moves-2.5.json",
    "marquee/moves-2.6.json",
    "marquee/bench-request.json",
    "marquee/bench-auction-request.json",
];

fn all_requests() -> Vec<String> {
    let mut all: Vec<String> = REQUESTS.iter().map(|s| s.to_string()).collect();
    all.extend(files("spec-samples", "openrtb2__bid-request__"));
    all
}

#[test]
fn every_request_sample_parses() {
    let all = all_requests();
    assert_eq!(all.len(), 15 + 11);
    for path in &all {
        let body = read(path);
        let request = BidRequest::parse(&body).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!request.id.is_empty(), "{path}");
        assert!(!request.imp.is_empty(), "{path}");
        for imp in &request.imp {
            assert!(
                imp.banner.is_some()
                    || imp.video.is_some()
                    || imp.audio.is_some()
                    || imp.native.is_some(),
                "{path}: imp {} offers nothing",
                imp.id
            );
        }
    }
}

#[test]
fn sample_values_are_read_as_the_spec_defines_them() {
    let body = read("iab-2.6/iab-2.6-impl-7.9.6.1-dooh-banner-request.json");
    let request = BidRequest::parse(&body).unwrap();
    assert_eq!(request.at.0, 1);
    let imp = &request.imp[0];
    assert_eq!(imp.id, "007");
    assert!(imp.secure);
    assert_eq!(imp.exp, Some(360));
    assert_eq!(
        (imp.bidfloor_micros, imp.bidfloorcur.as_ref()),
        (5_000_000, "GBP")
    );
    assert_eq!(
        imp.banner_sizes().collect::<Vec<_>>(),
        vec![(1080, 1920), (720, 1366), (1080, 1920)]
    );
    let deals = &imp.pmp.as_ref().unwrap().deals;
    assert_eq!(deals.len(), 3);
    assert_eq!(deals[0].bidfloor_micros, 4_500_000);
    // A deal without its own currency floors in USD (the spec default), not the imp's.
    assert_eq!(deals[0].bidfloorcur, "USD");
    assert_eq!(request.cur, vec!["GBP"]);

    let body = read("iab-2.6/iab-2.6-req-3-mobile.json");
    let request = BidRequest::parse(&body).unwrap();
    let imp = &request.imp[0];
    assert_eq!(imp.bidfloor_micros, 500_000);
    assert_eq!(imp.bidfloorcur, "USD");
    assert_eq!(request.at.0, 2);
    assert_eq!(request.badv.len(), 3);
    assert_eq!(request.bcat[0], "IAB25");
    let app = request.app.as_ref().unwrap();
    assert_eq!(app.bundle.as_deref(), Some("12345"));
    let device = request.device.as_ref().unwrap();
    assert_eq!(device.devicetype.map(|d| d.0), Some(1));
    assert_eq!(device.dnt, Some(false));

    let body = read("bsm/breq.video.json");
    let request = BidRequest::parse(&body).unwrap();
    assert!(request.imp[0].is_private_auction());
    assert_eq!(
        request.imp[1].floor_for(Some("1452f.eadb4.f9bc")),
        (2_500_000, "USD")
    );
    assert_eq!(request.imp[1].floor_for(None), (0, "USD"));
    assert_eq!(request.imp[2].bidfloor_micros, 2_000_000);
    assert_eq!(
        request.imp[2]
            .video
            .as_ref()
            .unwrap()
            .startdelay
            .map(|d| d.0),
        Some(-2)
    );
    // `user.uid` is not an OpenRTB field: ignored, so no user id.
    assert_eq!(request.user.as_ref().unwrap().id, None);

    let body = read("bsm/breq.banner.json");
    let request = BidRequest::parse(&body).unwrap();
    assert!(request.test);
    assert_eq!(request.tmax, Some(120));
    assert_eq!(request.imp[0].bidfloor_micros, 0);

    let body = read("bsm/breq.native.json");
    let request = BidRequest::parse(&body).unwrap();
    assert_eq!(request.wseat, vec!["771", "772"]);
    assert!(request.allows_seat("771"));
    assert!(!request.allows_seat("800"));
    assert!(!request.allows_seat("999"));
}

#[test]
fn openrtb3_and_invalid_json_are_refused_clearly() {
    let body = read("spec-samples/openrtb3__request.json");
    assert_eq!(
        BidRequest::parse(&body).map(|_| ()),
        Err(ParseError::Invalid(RequestError::OpenRtb3))
    );
    let body =
        read("iab-2.6/iab-2.6-impl-7.9.6.4-dooh-video-response.AS-PUBLISHED-invalid-json.txt");
    let error = BidResponse::parse(&body).unwrap_err();
    // The quote inside `adm` ends the string early; what follows is where a key should be.
    assert_eq!(error.path, "seatbid[0].bid[0].?");
    assert!(error.message.contains("line 15"), "{error}");
    let error = BidRequest::parse(&body).unwrap_err();
    assert_eq!(error.label(), "malformed_json");
    assert!(
        error.to_string().starts_with("malformed request: "),
        "{error}"
    );
}

/// What a 2.5 and a 2.6 sample must agree on. The published 2.5 and 2.6 samples are not
/// copies of each other (2.6 dropped `device.ip` here, a flash MIME type there, a second imp in
/// the mobile sample, segments in the expandable one), so the comparison covers what both send.
fn shared_view(request: &BidRequest<'_>, imp_ids: &[&str]) -> String {
    let mut view = format!(
        "id={} at={} tmax={:?} cur={:?} bcat={:?} badv={:?}\n",
        request.id, request.at.0, request.tmax, request.cur, request.bcat, request.badv
    );
    for id in imp_ids {
        let imp = request.imp_by_id(id).unwrap();
        view += &format!(
            "imp {} floor={} {} instl={} sizes={:?}",
            imp.id,
            imp.bidfloor_micros,
            imp.bidfloorcur,
            imp.instl,
            imp.banner_sizes().collect::<Vec<_>>()
        );
        if let Some(video) = &imp.video {
            view += &format!(
                " video {:?}-{:?} {:?} {:?}x{:?} {:?}",
                video.minduration,
                video.maxduration,
                video.protocols,
                video.w,
                video.h,
                video.linearity
            );
        }
        if let Some(pmp) = &imp.pmp {
            for deal in &pmp.deals {
                view += &format!(
                    " deal {} {} {} {:?} {:?}",
                    deal.id, deal.bidfloor_micros, deal.bidfloorcur, deal.at, deal.wseat
                );
            }
            view += &format!(" private={}", pmp.private_auction);
        }
        view.push('\n');
    }
    if let Some(site) = &request.site {
        view += &format!(
            "site {:?} {:?} {:?} {:?} {:?}\n",
            site.id,
            site.domain,
            site.page,
            site.cat,
            site.publisher.as_ref().and_then(|p| p.id.as_deref())
        );
    }
    if let Some(app) = &request.app {
        view += &format!("app {:?} {:?} {:?}\n", app.id, app.bundle, app.storeurl);
    }
    if let Some(user) = &request.user {
        view += &format!("user {:?}\n", user.id);
    }
    view
}

#[test]
fn spec_samples_in_2_5_and_2_6_map_to_the_same_values() {
    for name in [
        "expandable-creative",
        "mobile",
        "pmp-with-direct-deal",
        "simple-banner",
        "video",
    ] {
        let old = read(&format!(
            "spec-samples/openrtb2__bid-request__2.5__{name}.json"
        ));
        let new = read(&format!(
            "spec-samples/openrtb2__bid-request__2.6__{name}.json"
        ));
        let old = BidRequest::parse(&old).unwrap();
        let new = BidRequest::parse(&new).unwrap();
        assert_eq!(
            shared_view(&old, &["1"]),
            shared_view(&new, &["1"]),
            "{name}"
        );
    }
}

#[test]
fn extensions_of_2_5_move_to_their_2_6_places() {
    let old = read("marquee/moves-2.5.json");
    let new = read("marquee/moves-2.6.json");
    let old = BidRequest::parse(&old).unwrap();
    let new = BidRequest::parse(&new).unwrap();
    let moved = |r: &BidRequest<'_>| {
        let user = r.user.as_ref().unwrap();
        let source = r.source.as_ref().unwrap();
        let regs = r.regs.as_ref().unwrap();
        let video = r.imp[0].video.as_ref().unwrap();
        format!(
            "{} | {:?} {:?} | {:?} | {:?} {:?} | {:?} | {:?}",
            shared_view(r, &["1"]),
            regs.gdpr,
            regs.us_privacy,
            user.consent,
            user.eids
                .iter()
                .map(|e| (e.source.as_ref(), e.uids.len()))
                .collect::<Vec<_>>(),
            user.eids[0].uids[0].id,
            source.schain.as_ref().map(|s| (
                s.complete,
                s.ver.as_ref(),
                s.nodes
                    .iter()
                    .map(|n| (n.asi.as_ref(), n.sid.as_ref(), n.hp))
                    .collect::<Vec<_>>()
            )),
            video.plcmt,
        )
    };
    assert_eq!(moved(&old), moved(&new));
    let regs = old.regs.as_ref().unwrap();
    assert_eq!(regs.gdpr, Some(true));
    assert_eq!(regs.us_privacy.as_deref(), Some("1YNN"));
    assert_eq!(
        old.imp[0].video.as_ref().unwrap().plcmt,
        Some(VideoPlcmt::INSTREAM)
    );
    // The ext is still there for whoever wants the rest of it.
    assert!(old.user.as_ref().unwrap().ext.is_some());
}

#[test]
fn native_request_strings() {
    let body = read("spec-samples/openrtb2__bid-request__2.5__native-ad.json");
    let request = BidRequest::parse(&body).unwrap();
    let native = request.imp[0].native.as_ref().unwrap();
    // The published sample abbreviates the assets as `[ ... ]`: the bid request is fine, its
    // native request string is not, and says where.
    let Err(NativeError::Json(error)) = native.parse_request() else {
        panic!("the abbreviated native request parsed");
    };
    assert_eq!(error.path, "native");
    assert!(error.message.contains("column"), "{error}");

    let body = read("bsm/breq.native.json");
    let request = BidRequest::parse(&body).unwrap();
    let native = request.imp[0].native.as_ref().unwrap();
    assert!(matches!(native.parse_request(), Err(NativeError::Json(_))));

    let mut native_samples = files("spec-samples", "native1__request__");
    native_samples.push("bsm/native__request__request1.json".to_owned());
    assert_eq!(native_samples.len(), 6);
    for path in &native_samples {
        let text = String::from_utf8(read(path)).unwrap();
        let plain = NativeRequest::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!plain.wrapped);
        assert!(plain.assets.iter().any(|a| a.required), "{path}");
        // The 1.0/1.1 wrapper reads the same.
        let wrapped_text = format!("{{\"native\":{text}}}");
        let wrapped = NativeRequest::parse(&wrapped_text).unwrap();
        assert!(wrapped.wrapped);
        assert_eq!(
            format!("{:?}", plain.assets),
            format!("{:?}", wrapped.assets),
            "{path}"
        );
    }
    let text = String::from_utf8(read(
        "spec-samples/native1__request__v1.2__content-context.json",
    ))
    .unwrap();
    let request = NativeRequest::parse(&text).unwrap();
    assert_eq!(request.ver.as_deref(), Some("1.2"));
    assert_eq!(request.context.map(|c| c.0), Some(1));
    assert_eq!(request.plcmttype.map(|c| c.0), Some(11));
    assert_eq!(request.eventtrackers.len(), 2);
    assert!(request.privacy);
    let title = request.assets.iter().find(|a| a.id == 123).unwrap();
    assert_eq!(title.title.map(|t| t.len), Some(140));
    let icon = request.assets.iter().find(|a| a.id == 124).unwrap();
    let img = icon.img.as_ref().unwrap();
    assert_eq!(
        (img.wmin, img.hmin, img.image_type.map(|t| t.0)),
        (Some(50), Some(50), Some(1))
    );
}

const RESPONSES: &[&str] = &[
    "iab-2.6/iab-2.6-impl-7.1-nobid-with-nbr.json",
    "iab-2.6/iab-2.6-impl-7.9.6.2-dooh-banner-response.json",
    "iab-2.6/iab-2.6-resp-1-ad-served-on-win-notice.json",
    "iab-2.6/iab-2.6-resp-2-vast-inline.json",
    "iab-2.6/iab-2.6-resp-3-direct-deal-win-notice.json",
    "iab-2.6/iab-2.6-resp-4-native-inline.json",
    "bsm/bres.multi.json",
    "bsm/bres.pmp.json",
    "bsm/bres.single.json",
    "bsm/bres.vast.json",
];

#[test]
fn every_response_sample_parses_and_writes_back_the_same() {
    let mut all: Vec<String> = RESPONSES.iter().map(|s| s.to_string()).collect();
    all.extend(files("spec-samples", "openrtb2__bid-response__"));
    assert_eq!(all.len(), 18);
    for path in &all {
        let body = read(path);
        let response = BidResponse::parse(&body).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!response.id.is_empty(), "{path}");
        let written = response.to_json();
        assert_eq!(
            BidResponse::parse(written.as_bytes()),
            Ok(response),
            "{path}"
        );
    }
    let body = read("iab-2.6/iab-2.6-impl-7.1-nobid-with-nbr.json");
    let response = BidResponse::parse(&body).unwrap();
    assert_eq!(response.nbr.map(|n| n.0), Some(2));
    assert!(response.seatbid.is_empty());

    let body = read("bsm/bres.multi.json");
    let response = BidResponse::parse(&body).unwrap();
    let prices: Vec<i64> = response.bids().map(|(_, b)| b.price_micros).collect();
    assert_eq!(prices, vec![1_028_428, 49_580]);
    assert_eq!(response.currency(), "USD");

    let body = read("bsm/bid.json");
    let bid: Bid<'_> = serde_json::from_slice(&body).unwrap();
    assert_eq!(bid.price_micros, 751_371);
    assert_eq!(bid.dealid.as_deref(), Some("example_deal"));
}

#[test]
fn a_sample_pair_is_validated() {
    let request = read("iab-2.6/iab-2.6-impl-7.9.6.1-dooh-banner-request.json");
    let request = BidRequest::parse(&request).unwrap();
    let response = read("iab-2.6/iab-2.6-impl-7.9.6.2-dooh-banner-response.json");
    let response = BidResponse::parse(&response).unwrap();
    // As published, the response answers another request (its ids are the implementation
    // guide's usual placeholders).
    let rules: Vec<Rule> = validate_response(&request, &response, &NoConversion)
        .unwrap_err()
        .into_iter()
        .map(|v| v.rule)
        .collect();
    assert!(matches!(rules[0], Rule::ResponseId { .. }), "{rules:?}");
    assert!(rules.contains(&Rule::UnknownImp), "{rules:?}");

    // Pointed at the request, what is left is real: an http: billing URL on a secure imp, and
    // no markup (DOOH puts the image in a `banner` extension this crate does not read).
    let mut response = response;
    response.id = request.id.clone();
    response.seatbid[0].bid[0].impid = Cow::Borrowed("007");
    let violations = validate_response(&request, &response, &NoConversion).unwrap_err();
    let rules: Vec<&Rule> = violations.iter().map(|v| &v.rule).collect();
    assert_eq!(
        rules,
        vec![&Rule::NoMarkup, &Rule::InsecureUrl { field: "burl" }]
    );
    assert_eq!(
        violations[1].to_string(),
        "bid \"1\" for imp \"007\": burl has an http: URL but the imp is secure"
    );
    let bid = &mut response.seatbid[0].bid[0];
    bid.adm = Some(Cow::Borrowed(
        "<img src=\"https://adserver.example/c112.jpg\">",
    ));
    bid.burl = Some(Cow::Borrowed(
        "https://adserver.example/bill?p=${AUCTION_PRICE}",
    ));
    bid.mtype = Some(MarkupType::BANNER);
    assert_eq!(
        validate_response(&request, &response, &NoConversion),
        Ok(())
    );
}

/// A test-only reader for native responses (the crate writes them, it never reads them).
#[derive(Debug, Deserialize)]
struct NativeResponseReader {
    #[serde(default)]
    ver: Option<String>,
    link: LinkReader,
    #[serde(default)]
    assets: Vec<AssetReader>,
    #[serde(default)]
    imptrackers: Vec<String>,
    #[serde(default)]
    eventtrackers: Vec<EventTrackerReader>,
}

#[derive(Debug, Deserialize)]
struct LinkReader {
    url: String,
    #[serde(default)]
    clicktrackers: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct AssetReader {
    #[serde(default)]
    id: u32,
    #[serde(default)]
    title: Option<TextReader>,
    #[serde(default)]
    img: Option<ImageReader>,
    #[serde(default)]
    data: Option<ValueReader>,
    #[serde(default)]
    video: Option<VideoReader>,
}

#[derive(Debug, Deserialize)]
struct TextReader {
    text: String,
}

#[derive(Debug, Deserialize)]
struct ImageReader {
    url: String,
}

#[derive(Debug, Deserialize)]
struct ValueReader {
    value: String,
}

#[derive(Debug, Deserialize)]
struct VideoReader {
    vasttag: String,
}

#[derive(Debug, Deserialize)]
struct EventTrackerReader {
    event: i32,
    method: i32,
    url: String,
}

#[test]
fn native_response_samples_read_and_the_malformed_one_fails_cleanly() {
    let mut samples = files("spec-samples", "native1__response__");
    samples.push("bsm/native__response__response1.json".to_owned());
    assert_eq!(samples.len(), 6);
    for path in &samples {
        let reader: NativeResponseReader =
            serde_json::from_slice(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!reader.link.url.is_empty(), "{path}");
        assert!(reader.assets.len() >= 5, "{path}");
        for asset in &reader.assets {
            let filled = asset
                .title
                .as_ref()
                .map(|t| t.text.len())
                .or(asset.img.as_ref().map(|i| i.url.len()))
                .or(asset.data.as_ref().map(|d| d.value.len()))
                .or(asset.video.as_ref().map(|v| v.vasttag.len()));
            assert!(
                filled.is_some() || asset.id == 5,
                "{path}: asset {}",
                asset.id
            );
        }
    }
    let reader: NativeResponseReader =
        serde_json::from_slice(&read("spec-samples/native1__response__v1.2__clickout.json"))
            .unwrap();
    assert_eq!(
        reader.eventtrackers[0].url,
        "http://www.mytracker.com/tracker.js"
    );
    assert_eq!(
        (
            reader.eventtrackers[0].event,
            reader.eventtrackers[0].method
        ),
        (1, 2)
    );
    let reader: NativeResponseReader =
        serde_json::from_slice(&read("bsm/native__response__response1.json")).unwrap();
    assert_eq!(reader.ver.as_deref(), Some("1.1"));
    assert_eq!(reader.imptrackers, vec!["http://imptracker.com"]);
    assert!(reader.link.clicktrackers.is_empty());

    let malformed = read("bsm/native__response__response2.json");
    let error = serde_json::from_slice::<NativeResponseReader>(&malformed).unwrap_err();
    assert!(error.is_syntax() || error.is_eof(), "{error}");
    // Handed to the native request parser by mistake, it is a clear error too.
    let text = String::from_utf8(malformed).unwrap();
    assert!(matches!(
        NativeRequest::parse(&text),
        Err(NativeError::Json(_))
    ));
}

#[test]
fn per_object_fixtures_parse_into_their_types() {
    fn object<'a, T: Deserialize<'a>>(body: &'a [u8], path: &str) -> T {
        serde_json::from_slice(body).unwrap_or_else(|e| panic!("{path}: {e}"))
    }
    let app = read("bsm/app.json");
    let app: App<'_> = object(&app, "app");
    assert_eq!(app.bundle.as_deref(), Some("628677149"));
    let audio = read("bsm/audio.json");
    let audio: Audio<'_> = object(&audio, "audio");
    assert_eq!(
        audio.protocols.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![9, 10]
    );
    let banner = read("bsm/banner.json");
    let banner: Banner<'_> = object(&banner, "banner");
    assert_eq!((banner.w, banner.h), (Some(728), Some(90)));
    let device = read("bsm/device.json");
    let device: Device<'_> = object(&device, "device");
    let geo = device.geo.unwrap();
    assert_eq!(geo.country.as_deref(), Some("USA"));
    assert_eq!(geo.lat, Some(35.012345));
    let imp = read("bsm/impression.json");
    let imp: Imp<'_> = object(&imp, "impression");
    assert_eq!(imp.bidfloor_micros, 30_000);
    assert_eq!(
        imp.deal("DX-1985-010A").map(|d| d.bidfloor_micros),
        Some(2_500_000)
    );
    let native = read("bsm/native.json");
    let native: Native<'_> = object(&native, "native");
    assert_eq!(native.request, "PAYLOAD");
    let pmp = read("bsm/pmp.json");
    let pmp: Pmp<'_> = object(&pmp, "pmp");
    assert!(pmp.private_auction);
    assert_eq!(pmp.deals[1].bidfloor_micros, 2_600_000);
    assert_eq!(pmp.deals[1].at, None);
    let site = read("bsm/site.json");
    let site: Site<'_> = object(&site, "site");
    assert_eq!(site.publisher.unwrap().id.as_deref(), Some("8953"));
    let source = read("bsm/source.json");
    let source: Source<'_> = object(&source, "source");
    assert_eq!(source.tid.as_deref(), Some("transaction-id"));
    let video = read("bsm/video.json");
    let video: Video<'_> = object(&video, "video");
    assert_eq!(video.placement.map(|p| p.0), Some(1));

    // Objects this crate does not model ride along inside a request and are skipped.
    let content = String::from_utf8(read("bsm/content.quoted.json")).unwrap();
    let quantity = String::from_utf8(read("bsm/quantity.json")).unwrap();
    let body = format!(
        r#"{{"id":"r","imp":[{{"id":"1","banner":{{"w":1,"h":1}},"qty":{quantity}}}],"site":{{"content":{content}}}}}"#
    );
    assert!(BidRequest::parse(body.as_bytes()).is_ok());
}
