//! What real exchanges send that the spec allows: `null` for any optional member, a size pair
//! with one side, and a malformed media object in one imp, which leaves that media type out of
//! that imp instead of refusing the request.

use marquee_openrtb::{BidRequest, MarkupType, ParseError, RequestError};
use proptest::prelude::*;
use serde_json::Value;

fn parse(body: &str) -> Result<BidRequest<'_>, ParseError> {
    BidRequest::parse(body.as_bytes())
}

fn bench_request() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/marquee/bench-request.json"
    );
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_malformed_format_drops_the_banner_of_its_imp_only() {
    let body = r#"{"id":"r","imp":[
        {"id":"1","banner":{"format":[{"w":"300","h":250}]},"video":{"mimes":["video/mp4"]}},
        {"id":"2","banner":{"format":[{"w":728,"h":90}]}}]}"#;
    let request = parse(body).unwrap();
    let imp = &request.imp[0];
    assert!(imp.banner.is_none());
    assert!(imp.video.is_some());
    assert_eq!(imp.dropped.len(), 1);
    assert_eq!(imp.dropped[0].media, MarkupType::BANNER);
    let reason = imp.dropped[0].to_string();
    assert!(
        reason.contains("imp[0].banner.format[0].w: invalid type: string"),
        "{reason}"
    );
    assert_eq!(
        request.imp[1].banner_sizes().collect::<Vec<_>>(),
        [(728, 90)]
    );
    assert!(request.imp[1].dropped.is_empty());
    // The fast reader leaves such a body to serde, which gives the same request.
    assert!(BidRequest::read_json_fast(body.as_bytes()).is_none());
}

#[test]
fn unusable_video_mimes_drop_the_video_and_the_other_imp_stands() {
    let body = r#"{"id":"r","imp":[{"id":"1","video":{"mimes":"video/mp4"}},{"id":"2","banner":{"w":300,"h":250}}]}"#;
    let request = parse(body).unwrap();
    assert!(request.imp[0].video.is_none() && !request.imp[0].offers_any());
    assert!(
        request.imp[0].dropped[0]
            .to_string()
            .contains("imp[0].video.mimes")
    );
    assert!(request.imp[1].offers_any());
}

#[test]
fn broken_rules_drop_the_media_type_of_their_imp() {
    let body = r#"{"id":"r","imp":[{"id":"1","banner":{"w":300,"h":250},
        "video":{"mimes":["video/mp4"],"minduration":30,"maxduration":15},
        "audio":{"minduration":9,"maxduration":8}}]}"#;
    let request = parse(body).unwrap();
    let imp = &request.imp[0];
    assert_eq!(imp.single_media(), Some(MarkupType::BANNER));
    let dropped: Vec<_> = imp.dropped.iter().map(|d| d.media).collect();
    assert_eq!(dropped, [MarkupType::VIDEO, MarkupType::AUDIO]);
    assert!(matches!(
        &imp.dropped[0].error,
        ParseError::Invalid(RequestError::DurationRange { path, .. }) if path == "imp[0].video"
    ));
}

#[test]
fn a_request_with_nothing_usable_left_is_refused_with_the_first_reason() {
    let body = r#"{"id":"r","imp":[{"id":"1","banner":{"format":[{"w":1,"h":-2}]}},{"id":"2","native":{}}]}"#;
    match parse(body) {
        Err(ParseError::Json(error)) => assert_eq!(error.path, "imp[0].banner.format[0].h"),
        other => panic!("{other:?}"),
    }
    // An imp without any media type was never an error: nothing was dropped.
    assert!(parse(r#"{"id":"r","imp":[{"id":"1"}]}"#).is_ok());
}

#[test]
fn one_side_of_a_size_is_no_size() {
    // `w` alone: the formats give the sizes.
    let request =
        parse(r#"{"id":"r","imp":[{"id":"1","banner":{"w":300,"format":[{"w":320,"h":50}]}}]}"#)
            .unwrap();
    assert_eq!(
        request.imp[0].banner_sizes().collect::<Vec<_>>(),
        [(320, 50)]
    );
    // `h` alone and no formats: sizeless; a format entry with one side adds no size.
    let request =
        parse(r#"{"id":"r","imp":[{"id":"1","banner":{"h":250,"format":[{"w":300}]}}]}"#).unwrap();
    assert_eq!(request.imp[0].banner_sizes().count(), 0);
    assert!(request.imp[0].dropped.is_empty());
}

#[test]
fn a_prebid_server_request_with_nulls_is_read_by_both_readers() {
    let body = include_str!("../../testdata/marquee/prebid-server-nulls.json");
    let fast = BidRequest::read_json_fast(body.as_bytes()).expect("the fast reader answers");
    let serde = BidRequest::read_json_serde(body.as_bytes()).unwrap();
    assert_eq!(format!("{fast:?}"), format!("{serde:?}"));
    let request = parse(body).unwrap();
    assert_eq!(request.imp.len(), 2);
    assert_eq!(request.imp[0].banner_sizes().count(), 0);
    assert!(request.imp[0].video.is_some());
    assert!(request.bcat.is_empty());
    assert!(request.imp.iter().all(|imp| imp.dropped.is_empty()));
}

/// Every object member of `value`, as the path of keys and indexes that reaches it.
fn members(value: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                at.push(Step::Key(key.clone()));
                out.push(at.clone());
                members(inner, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                at.push(Step::Index(index));
                members(inner, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// The object holding the member at `path`, and the member's key.
fn parent<'v>(
    value: &'v mut Value,
    path: &[Step],
) -> Option<(&'v mut serde_json::Map<String, Value>, String)> {
    let (last, init) = path.split_last()?;
    let mut at = value;
    for step in init {
        at = match step {
            Step::Key(key) => at.get_mut(key)?,
            Step::Index(index) => at.get_mut(*index)?,
        };
    }
    match last {
        Step::Key(key) => Some((at.as_object_mut()?, key.clone())),
        Step::Index(_) => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Any optional members of a real request set to `null` read exactly as those members
    /// left out, by both readers, and the fast reader still answers.
    #[test]
    fn null_members_read_as_absent(picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..8)) {
        let original = bench_request();
        let mut paths = Vec::new();
        members(&original, &mut Vec::new(), &mut paths);
        // What an `ext` holds is kept as its text, not read: `null` there is not "absent".
        paths.retain(|path| {
            !path[..path.len() - 1].iter().any(|s| matches!(s, Step::Key(k) if k == "ext"))
        });
        let mut nulled = original.clone();
        let mut absent = original;
        for pick in picks {
            let path = pick.get(&paths);
            if let Some((object, key)) = parent(&mut nulled, path)
                && object.contains_key(&key)
            {
                object.insert(key.clone(), Value::Null);
            }
            if let Some((object, key)) = parent(&mut absent, path) {
                object.remove(&key);
            }
        }
        let nulled = serde_json::to_string(&nulled).unwrap();
        let absent = serde_json::to_string(&absent).unwrap();
        let Some(fast) = BidRequest::read_json_fast(nulled.as_bytes()) else {
            return Err(TestCaseError::fail(format!("the fast reader bailed on {nulled}")));
        };
        let serde = BidRequest::read_json_serde(nulled.as_bytes()).unwrap();
        prop_assert_eq!(format!("{fast:?}"), format!("{serde:?}"));
        let absent_serde = BidRequest::read_json_serde(absent.as_bytes()).unwrap();
        prop_assert_eq!(format!("{serde:?}"), format!("{absent_serde:?}"));
        prop_assert_eq!(
            format!("{:?}", BidRequest::parse(nulled.as_bytes())),
            format!("{:?}", BidRequest::parse(absent.as_bytes()))
        );
    }
}
