#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Native: which creatives satisfy which requests, and the response written for `adm`.

use marquee_openrtb::{
    DataAssetType, ImageAssetType, MismatchReason, NativeCreative, NativeError, NativeImage,
    NativeMismatch, NativeRequest,
};
use serde_json::{Value, json};

fn sample(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/testdata/spec-samples/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

const IMPRESSION: &[&str] = &["https://edge.test/t/i?t=abc"];
const CLICK: &[&str] = &["https://edge.test/t/c?t=abc"];

/// A creative that fills the spec samples: title, body, sponsor, main image and icon.
fn full_creative() -> NativeCreative<'static> {
    NativeCreative {
        title: Some("Learn about this \"awesome\" thing"),
        body: Some("All about it."),
        sponsored_by: Some("Brand"),
        call_to_action: Some("Buy"),
        image: Some(NativeImage {
            url: "https://cdn.test/main.jpg",
            w: Some(1200),
            h: Some(627),
            mime: Some("image/jpeg"),
        }),
        icon: Some(NativeImage {
            url: "https://cdn.test/icon.png",
            w: Some(80),
            h: Some(80),
            mime: None,
        }),
        link_url: "https://brand.test/landing",
        click_trackers: CLICK,
        impression_trackers: IMPRESSION,
    }
}

fn response(creative: &NativeCreative<'_>, request: &NativeRequest<'_>) -> Value {
    let text = creative.to_response(request).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_full_creative_answers_the_1_2_sample() {
    let text = sample("native1__request__v1.2__content-context.json");
    let request = NativeRequest::parse(&text).unwrap();
    let creative = full_creative();
    assert_eq!(creative.satisfies(&request), Ok(()));
    let written = response(&creative, &request);
    // Asset 4 (video) is optional and cannot be filled: left out. The others in request
    // order, required ones flagged.
    assert_eq!(
        written,
        json!({
            "ver": "1.2",
            "assets": [
                {"id": 123, "required": 1, "title": {"text": "Learn about this \"awesome\" thing"}},
                {"id": 128, "img": {"url": "https://cdn.test/main.jpg", "w": 1200, "h": 627}},
                {"id": 124, "required": 1, "img": {"url": "https://cdn.test/icon.png", "w": 80, "h": 80}},
                {"id": 126, "required": 1, "data": {"value": "Brand"}},
                {"id": 127, "required": 1, "data": {"value": "All about it."}}
            ],
            "link": {"url": "https://brand.test/landing", "clicktrackers": ["https://edge.test/t/c?t=abc"]},
            // This placement tracks impressions by script only: pixels go the older way.
            "imptrackers": ["https://edge.test/t/i?t=abc"]
        })
    );
}

#[test]
fn pixel_impression_trackers_go_in_eventtrackers_where_the_placement_takes_them() {
    let text = sample("native1__request__v1.2__social-context.json");
    let request = NativeRequest::parse(&text).unwrap();
    let written = response(&full_creative(), &request);
    assert_eq!(
        written["eventtrackers"],
        json!([{"event": 1, "method": 1, "url": "https://edge.test/t/i?t=abc"}])
    );
    assert!(written.get("imptrackers").is_none());
}

#[test]
fn older_requests_get_imptrackers_and_their_wrapper_back() {
    let text = sample("native1__request__v1.1__social-context.json");
    let request = NativeRequest::parse(&text).unwrap();
    let written = response(&full_creative(), &request);
    assert_eq!(written["ver"], "1.1");
    assert_eq!(
        written["imptrackers"],
        json!(["https://edge.test/t/i?t=abc"])
    );
    assert!(written.get("eventtrackers").is_none());

    let wrapped_text = format!("{{\"native\":{text}}}");
    let wrapped = NativeRequest::parse(&wrapped_text).unwrap();
    let written = response(&full_creative(), &wrapped);
    assert_eq!(written["native"]["ver"], "1.1");
    assert_eq!(written["native"]["assets"].as_array().unwrap().len(), 5);
    assert_eq!(
        written["native"]["link"]["url"],
        "https://brand.test/landing"
    );
}

#[test]
fn a_request_without_version_gets_1_2_and_no_trackers_means_none_written() {
    let request =
        NativeRequest::parse(r#"{"assets":[{"id":1,"required":1,"title":{"len":90}}]}"#).unwrap();
    let creative = NativeCreative {
        impression_trackers: &[],
        click_trackers: &[],
        ..full_creative()
    };
    let written = response(&creative, &request);
    assert_eq!(
        written,
        json!({"ver": "1.2", "assets": [{"id": 1, "required": 1, "title": {"text": "Learn about this \"awesome\" thing"}}],
               "link": {"url": "https://brand.test/landing"}})
    );
}

fn mismatch(request: &str, creative: &NativeCreative<'_>) -> NativeMismatch {
    let request = NativeRequest::parse(request).unwrap();
    let error = creative.satisfies(&request).unwrap_err();
    let mut out = String::new();
    assert_eq!(
        creative.write_response(&request, &mut out),
        Err(error.clone())
    );
    assert!(
        out.is_empty(),
        "nothing is written for a creative that does not match"
    );
    error
}

#[test]
fn required_assets_the_creative_cannot_fill() {
    let creative = full_creative();
    assert_eq!(
        mismatch(
            r#"{"assets":[{"id":1,"required":1,"title":{"len":10}}]}"#,
            &creative
        ),
        NativeMismatch {
            asset_id: 1,
            reason: MismatchReason::TitleTooLong { chars: 32, max: 10 }
        }
    );
    let untitled = NativeCreative {
        title: None,
        ..full_creative()
    };
    let iconless = NativeCreative {
        icon: None,
        ..full_creative()
    };
    // One row a required asset the creative cannot fill: the request, the creative, and why.
    let cases = [
        (
            r#"{"assets":[{"id":2,"required":1,"title":{"len":90}}]}"#,
            &untitled,
            MismatchReason::NoTitle,
        ),
        (
            r#"{"assets":[{"id":3,"required":1,"img":{"type":2,"wmin":10,"hmin":10}}]}"#,
            &iconless,
            MismatchReason::NoImage(ImageAssetType::LOGO),
        ),
        (
            r#"{"assets":[{"id":4,"required":1,"img":{"type":3,"wmin":1300,"hmin":600}}]}"#,
            &creative,
            MismatchReason::ImageSize { w: 1200, h: 627 },
        ),
        // `w`/`h` without minimums are exact.
        (
            r#"{"assets":[{"id":5,"required":1,"img":{"type":3,"w":1200,"h":628}}]}"#,
            &creative,
            MismatchReason::ImageSize { w: 1200, h: 627 },
        ),
        (
            r#"{"assets":[{"id":6,"required":1,"img":{"type":3,"mimes":["image/png"]}}]}"#,
            &creative,
            MismatchReason::ImageMime,
        ),
        (
            r#"{"assets":[{"id":7,"required":1,"data":{"type":1,"len":3}}]}"#,
            &creative,
            MismatchReason::DataTooLong { chars: 5, max: 3 },
        ),
        (
            r#"{"assets":[{"id":8,"required":1,"data":{"type":3}}]}"#,
            &creative,
            MismatchReason::NoData(DataAssetType::RATING),
        ),
        (
            r#"{"assets":[{"id":9,"required":1,"video":{"mimes":["video/mp4"]}}]}"#,
            &creative,
            MismatchReason::VideoAsset,
        ),
    ];
    for (request, creative, reason) in cases {
        assert_eq!(mismatch(request, creative).reason, reason, "{request}");
    }
    assert_eq!(
        mismatch(
            r#"{"assets":[{"id":9,"required":1,"video":{}}]}"#,
            &creative
        )
        .to_string(),
        "native asset 9: video assets are not supported"
    );
}

#[test]
fn images_that_fit() {
    let fits = |request: &str| {
        let request = NativeRequest::parse(request).unwrap();
        full_creative().satisfies(&request).is_ok()
    };
    assert!(fits(
        r#"{"assets":[{"id":1,"required":1,"img":{"type":3,"w":1200,"h":627}}]}"#
    ));
    assert!(fits(
        r#"{"assets":[{"id":1,"required":1,"img":{"type":3,"wmin":1200,"hmin":600,"w":1,"h":1}}]}"#
    ));
    assert!(fits(
        r#"{"assets":[{"id":1,"required":1,"img":{"type":3,"mimes":["IMAGE/JPEG"]}}]}"#
    ));
    // No type: the main image. Icons have no known MIME type, so any list passes.
    assert!(fits(r#"{"assets":[{"id":1,"required":1,"img":{}}]}"#));
    assert!(fits(
        r#"{"assets":[{"id":1,"required":1,"img":{"type":1,"mimes":["image/png"]}}]}"#
    ));
    // An image of unknown size is taken to fit.
    let size_unknown = NativeCreative {
        image: Some(NativeImage {
            url: "https://cdn.test/x.jpg",
            ..NativeImage::default()
        }),
        ..full_creative()
    };
    let request = NativeRequest::parse(
        r#"{"assets":[{"id":1,"required":1,"img":{"type":3,"wmin":5000,"hmin":5000}}]}"#,
    )
    .unwrap();
    assert_eq!(size_unknown.satisfies(&request), Ok(()));
    let written: Value =
        serde_json::from_str(&size_unknown.to_response(&request).unwrap()).unwrap();
    assert_eq!(
        written["assets"][0]["img"],
        json!({"url": "https://cdn.test/x.jpg"})
    );
}

#[test]
fn title_length_counts_characters_not_bytes() {
    let creative = NativeCreative {
        title: Some("Ünïcödé ✓"),
        ..full_creative()
    };
    let request =
        NativeRequest::parse(r#"{"assets":[{"id":1,"required":1,"title":{"len":9}}]}"#).unwrap();
    assert_eq!(creative.satisfies(&request), Ok(()));
}

#[test]
fn malformed_native_requests() {
    assert_eq!(
        NativeRequest::parse(r#"{"ver":"1.2"}"#).unwrap_err(),
        NativeError::NoAssets
    );
    assert_eq!(
        NativeRequest::parse(
            r#"{"assets":[{"id":1,"title":{"len":1}},{"id":1,"data":{"type":1}}]}"#
        )
        .unwrap_err(),
        NativeError::DuplicateAssetId(1)
    );
    assert_eq!(
        NativeRequest::parse(r#"{"assets":[{"id":4}]}"#).unwrap_err(),
        NativeError::AssetKind(4)
    );
    assert_eq!(
        NativeRequest::parse(r#"{"assets":[{"id":4,"title":{"len":1},"data":{"type":1}}]}"#)
            .unwrap_err(),
        NativeError::AssetKind(4)
    );
    let Err(NativeError::Json(error)) =
        NativeRequest::parse(r#"{"native":{"assets":[{"id":"one","title":{}}]}}"#)
    else {
        panic!("parsed");
    };
    assert_eq!(error.path, "native.assets[0].id");
    let Err(NativeError::Json(error)) = NativeRequest::parse(r#"{"assets":[{"id":1,"data":{}}]}"#)
    else {
        panic!("parsed");
    };
    assert_eq!(error.path, "assets[0].data");
    assert!(error.message.contains("type"), "{error}");
    assert!(matches!(
        NativeRequest::parse("PAYLOAD"),
        Err(NativeError::Json(_))
    ));
}
