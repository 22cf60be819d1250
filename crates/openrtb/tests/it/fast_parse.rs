#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The hand-written request reader against serde: whenever it answers, serde gives the same
//! value (the invariant of `src/fast.rs`); it answers for the ordinary requests (else the
//! speed-up would be fictional); and it bails out on what it cannot vouch for.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use marquee_openrtb::{BidRequest, FAST_READER_KEYS};
use proptest::prelude::*;

/// Checks the invariant on `body` and returns whether the fast reader answered. When it did,
/// serde must give the same value, and the whole parse (2.5 moves, checks) the same result.
fn agree(body: &[u8]) -> bool {
    let Some(fast) = BidRequest::read_json_fast(body) else {
        return false;
    };
    let serde = BidRequest::read_json_serde(body).unwrap_or_else(|e| {
        panic!(
            "fast reader answered {fast:?}\nbut serde refuses: {e}\nbody: {}",
            String::from_utf8_lossy(body)
        )
    });
    assert_eq!(
        format!("{fast:?}"),
        format!("{serde:?}"),
        "body: {}",
        String::from_utf8_lossy(body)
    );
    assert_eq!(
        format!("{:?}", BidRequest::parse(body)),
        format!("{:?}", BidRequest::parse_with_serde(body)),
    );
    true
}

/// Asserts agreement and that the fast reader answered.
fn fast(body: &str) -> BidRequest<'_> {
    assert!(agree(body.as_bytes()), "the fast reader bailed on {body}");
    BidRequest::read_json_fast(body.as_bytes()).unwrap()
}

/// Asserts that the fast reader bails, and returns serde's verdict (to check what it is).
fn bails(body: &str) -> Result<BidRequest<'_>, marquee_openrtb::JsonError> {
    assert!(
        BidRequest::read_json_fast(body.as_bytes()).is_none(),
        "the fast reader should leave {body} to serde"
    );
    BidRequest::read_json_serde(body.as_bytes())
}

fn testdata() -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "testdata"].iter().collect()
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json" || e == "txt") {
            out.push(path);
        }
    }
}

fn bench_request() -> Vec<u8> {
    std::fs::read(testdata().join("marquee/bench-request.json")).unwrap()
}

/// Files serde reads as a request that the fast reader leaves to serde, with why (none so far:
/// every request sample, and every other file serde reads as one, takes the fast path).
const BAILS_ON: &[(&str, &str)] = &[];

#[test]
fn every_sample_agrees_and_the_requests_take_the_fast_path() {
    let root = testdata();
    let mut files = Vec::new();
    json_files(&root, &mut files);
    files.sort();
    assert!(files.len() > 60, "{} files", files.len());
    let mut answered = Vec::new();
    let mut left_to_serde: Vec<String> = Vec::new();
    for path in &files {
        let body = std::fs::read(path).unwrap();
        let name = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if agree(&body) {
            answered.push(name);
        } else if BidRequest::read_json_serde(&body).is_ok() {
            left_to_serde.push(name);
        }
    }
    let expected: Vec<&str> = BAILS_ON.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        left_to_serde, expected,
        "files serde reads that the fast reader left to serde"
    );
    // The requests among them: 25 when this was written.
    let requests = answered
        .iter()
        .filter(|name| name.contains("req") || name.starts_with("marquee/"))
        .count();
    assert!(
        requests >= 25,
        "{requests} request samples took the fast path"
    );
}

#[test]
fn the_bench_request_takes_the_fast_path() {
    let body = bench_request();
    assert!(agree(&body));
    let request = BidRequest::read_json_fast(&body).unwrap();
    // `\/` in the page URL is decoded, so that string is owned; the others are borrowed.
    let site = request.site.as_ref().unwrap();
    assert!(matches!(site.page, Some(Cow::Owned(_))));
    assert_eq!(
        site.page.as_deref(),
        Some("https://news.example.com/world/2026/11/21/story-of-the-day.html")
    );
    assert!(matches!(site.domain, Some(Cow::Borrowed(_))));
    assert!(matches!(request.id, Cow::Borrowed(_)));
    assert!(request.cur.iter().all(|c| matches!(c, Cow::Borrowed(_))));
    assert_eq!(request.imp[0].bidfloor_micros, 850_000);
    let geo = request.device.as_ref().unwrap().geo.as_ref().unwrap();
    assert_eq!(geo.lat, Some(37.7749));
    assert_eq!(geo.lon, Some(-122.4194));
}

#[test]
fn escaped_strings_are_decoded_like_serde() {
    let body = r#"{"id":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20AC\ud83d\ude00\u0000 end","imp":[{"id":"\/1","tagid":"plain"}],
        "site":{"page":"https:\/\/x.example\/a?b=1&c=\u0032"},"cur":["U\u0053D"]}"#;
    let request = fast(body);
    assert!(matches!(request.id, Cow::Owned(_)));
    assert_eq!(request.id, "a\"b\\c/d\u{8}\u{c}\n\r\té€😀\u{0} end");
    assert_eq!(request.imp[0].id, "/1");
    assert!(matches!(request.imp[0].tagid, Some(Cow::Borrowed("plain"))));
    assert_eq!(
        request.site.unwrap().page.as_deref(),
        Some("https://x.example/a?b=1&c=2")
    );
    assert_eq!(request.cur, ["USD"]);
    // Non-ASCII text between escapes, and escapes at both ends.
    let request = fast(r#"{"id":"\"été ✓\n😀 and a longer run of plain text\t\u00e9\""}"#);
    assert_eq!(
        request.id,
        "\"été ✓\n😀 and a longer run of plain text\té\""
    );
    // Non-ASCII text without escapes is borrowed as it is.
    let request = fast(r#"{"id":"été ✓ 😀 long enough to span words"}"#);
    assert!(matches!(
        request.id,
        Cow::Borrowed("été ✓ 😀 long enough to span words")
    ));
}

#[test]
fn odd_escapes_and_control_characters_go_to_serde() {
    // Lone surrogates, which serde_json refuses in a string.
    assert!(bails(r#"{"id":"\ud83d"}"#).is_err());
    assert!(bails(r#"{"id":"\ud83dx"}"#).is_err());
    assert!(bails(r#"{"id":"\ud83d\u0041"}"#).is_err());
    assert!(bails(r#"{"id":"\ude00"}"#).is_err());
    // Bad escapes, short hex, a raw control character, an unterminated string.
    assert!(bails(r#"{"id":"\x41"}"#).is_err());
    assert!(bails(r#"{"id":"\u12"}"#).is_err());
    assert!(bails(r#"{"id":"\u12g4"}"#).is_err());
    assert!(bails("{\"id\":\"a\tb\"}").is_err());
    assert!(bails("{\"id\":\"a\u{1}\"}").is_err());
    assert!(bails(r#"{"id":"abc"#).is_err());
    // Escapes in a skipped value: any four hex digits, lone surrogates included, are fine.
    fast(r#"{"id":"r","x":"\ud83d \u12aF \" \\","y":{"\u0041":["\n"]}}"#);
    assert!(bails(r#"{"id":"r","x":"\q"}"#).is_err());
    assert!(bails("{\"id\":\"r\",\"x\":\"\u{1f}\"}").is_err());
    // DEL is not a control character for JSON.
    assert_eq!(fast("{\"id\":\"a\u{7f}\"}").id, "a\u{7f}");
}

#[test]
fn escaped_keys_go_to_serde() {
    // serde matches the decoded key; the fast reader leaves that to it.
    let request = bails(r#"{"\u0069d":"r1"}"#).unwrap();
    assert_eq!(request.id, "r1");
    assert!(bails(r#"{"i\"d":"r1"}"#).is_ok());
}

#[test]
fn duplicate_keys_go_to_serde_which_refuses_them() {
    for body in [
        r#"{"id":"a","id":"b"}"#,
        r#"{"id":"a","imp":[],"imp":[]}"#,
        r#"{"ext":null,"ext":{}}"#,
        r#"{"imp":[{"id":"1","bidfloor":1,"bidfloor":2}]}"#,
        r#"{"site":{"ref":"a","ref":"b"}}"#,
        r#"{"device":{"geo":{"type":1,"type":2}}}"#,
        r#"{"openrtb":{},"openrtb":{}}"#,
    ] {
        let error = bails(body).unwrap_err();
        assert!(error.message.contains("duplicate field"), "{body}: {error}");
    }
    // In a media object, the error leaves that media type out of its imp (here the only one).
    let body = r#"{"id":"r","imp":[{"id":"1","native":{"request":"{}","request":"{}"}}]}"#;
    assert!(bails(body).is_ok());
    let error = BidRequest::parse(body.as_bytes()).unwrap_err().to_string();
    assert!(error.contains("imp[0].native: duplicate field"), "{error}");
    // Unknown keys may repeat; renamed fields' Rust names are unknown keys.
    let request = fast(r#"{"id":"a","x":1,"x":2,"openrtb3":{},"openrtb3":1}"#);
    assert!(request.ext.is_none());
    let request = fast(r#"{"imp":[{"id":"1","bidfloor_micros":5}],"site":{"referrer":"r"}}"#);
    assert_eq!(request.imp[0].bidfloor_micros, 0);
    assert_eq!(request.site.unwrap().referrer, None);
    // Keys are case-sensitive.
    assert_eq!(fast(r#"{"ID":"a"}"#).id, "");
}

#[test]
fn null_is_the_member_absent() {
    let request = fast(
        r#"{"id":"r","site":null,"app":null,"device":{"ua":null,"dnt":null,"geo":{"lat":null,"type":null}},
        "user":{"yob":null,"geo":null,"eids":null,"data":[{"segment":null}]},"regs":{"gdpr":null,"coppa":null,"gpp_sid":null},
        "tmax":null,"ext":null,"source":{"schain":{"complete":null,"ver":null,"nodes":null}},"at":null,"cur":null,
        "bcat":null,"badv":null,"bapp":null,"wseat":null,"bseat":null,"wlang":null,"test":null,"allimps":null,"dooh":null,
        "imp":[{"id":"1","tagid":null,"exp":null,"bidfloor":null,"bidfloorcur":null,"secure":null,"instl":null,
        "banner":{"w":null,"h":null,"pos":null,"format":null,"mimes":null,"battr":null,"btype":null,"api":null},
        "video":{"mimes":null,"protocols":null,"battr":null,"w":null},"audio":null,"native":null,
        "pmp":{"private_auction":null,"deals":[{"id":"d","at":null,"bidfloor":null,"bidfloorcur":null,"wseat":null,"wadomain":null}]}}]}"#,
    );
    assert!(request.site.is_none() && request.tmax.is_none() && request.ext.is_none());
    assert_eq!(request.device.as_ref().unwrap().dnt, None);
    assert_eq!(request.at, marquee_openrtb::AuctionType::SECOND_PRICE);
    assert!(request.cur.is_empty() && request.bcat.is_empty() && !request.test);
    let imp = &request.imp[0];
    assert_eq!((imp.bidfloor_micros, imp.bidfloorcur.as_ref()), (0, "USD"));
    assert!(imp.banner.as_ref().unwrap().format.is_empty());
    assert!(imp.video.as_ref().unwrap().mimes.is_empty());
    let deal = &imp.pmp.as_ref().unwrap().deals[0];
    assert_eq!(
        (deal.bidfloor_micros, deal.bidfloorcur.as_ref()),
        (0, "USD")
    );
    // A format's `w` and `h`, and ids, are empty when null: the checks then say what is wrong.
    let request =
        fast(r#"{"id":null,"imp":[{"id":null,"banner":{"format":[{"w":null,"h":250}]}}]}"#);
    assert_eq!(request.imp[0].banner.as_ref().unwrap().format[0].w, 0);
    assert_eq!(
        BidRequest::parse(br#"{"id":null,"imp":[{"id":"1","banner":{}}]}"#).unwrap_err(),
        marquee_openrtb::RequestError::MissingId.into()
    );
    assert_eq!(
        BidRequest::parse(br#"{"id":"r","imp":null}"#).unwrap_err(),
        marquee_openrtb::RequestError::NoImps.into()
    );
    // `null` where a list holds a value is not an absent member: serde says what is wrong.
    for body in [
        r#"{"cur":[null]}"#,
        r#"{"imp":[null]}"#,
        r#"{"site":{"cat":[null]}}"#,
    ] {
        assert!(bails(body).is_err(), "{body}");
    }
    // A required member: `native.request` null leaves the native out of its imp, error named.
    let body = r#"{"id":"r","imp":[{"id":"1","native":{"request":null}}]}"#;
    assert!(bails(body).is_ok());
    let error = BidRequest::parse(body.as_bytes()).unwrap_err().to_string();
    assert!(
        error.contains("imp[0].native.request: invalid type: null"),
        "{error}"
    );
}

#[test]
fn integers_are_refused_where_serde_refuses_them() {
    let request = fast(
        r#"{"tmax":4294967295,"at":-2147483648,"imp":[{"id":"1","banner":{"w":0,"h":16384,"btype":[2147483647,-1]}}],"user":{"yob":-5}}"#,
    );
    assert_eq!(request.tmax, Some(u32::MAX));
    assert_eq!(request.at.0, i32::MIN);
    assert_eq!(request.user.unwrap().yob, Some(-5));
    for body in [
        r#"{"tmax":1.0}"#,
        r#"{"tmax":1e2}"#,
        r#"{"tmax":1E2}"#,
        r#"{"tmax":-1}"#,
        r#"{"tmax":-0}"#,
        r#"{"tmax":01}"#,
        r#"{"tmax":4294967296}"#,
        r#"{"tmax":18446744073709551616}"#,
        r#"{"tmax":"100"}"#,
        r#"{"tmax":true}"#,
        r#"{"tmax":-}"#,
        r#"{"at":2147483648}"#,
        r#"{"at":-2147483649}"#,
        r#"{"at":-0}"#,
        r#"{"at":1.5}"#,
    ] {
        assert!(bails(body).is_err(), "{body}");
    }
    let body = r#"{"id":"r","imp":[{"id":"1","banner":{"format":[{"w":-728}]}}]}"#;
    assert!(bails(body).is_ok());
    let error = BidRequest::parse(body.as_bytes()).unwrap_err().to_string();
    assert!(error.contains("imp[0].banner.format[0].w"), "{error}");
    // A format as an array of its fields: serde reads it, the fast reader leaves it to serde.
    let request = bails(r#"{"imp":[{"banner":{"format":[[728,90]]}}]}"#).unwrap();
    assert_eq!(request.imp[0].banner.as_ref().unwrap().format[0].w, 728);
}

#[test]
fn flags_are_true_false_0_or_1() {
    for (text, value) in [("true", true), ("false", false), ("0", false), ("1", true)] {
        let body = format!(
            r#"{{"test":{text},"allimps":{text},"regs":{{"coppa":{text},"gdpr":{text}}}}}"#
        );
        let request = fast(&body);
        assert_eq!(request.test, value);
        assert_eq!(request.regs.as_ref().unwrap().gdpr, Some(value));
    }
    for text in [
        "2", "-1", "-0", "1.0", "0e0", "\"1\"", "01", "tru", "truex", "nul", "[]",
    ] {
        let body = format!(r#"{{"test":{text}}}"#);
        assert!(bails(&body).is_err(), "{body}");
    }
}

#[test]
fn floors_are_read_as_exact_decimals() {
    let request = fast(
        r#"{"imp":[{"id":"1","bidfloor":0.03,"pmp":{"deals":[{"id":"d","bidfloor":1.5e-3},{"id":"e","bidfloor":0.0000001},{"id":"f","bidfloor":-0}]}}]}"#,
    );
    assert_eq!(request.imp[0].bidfloor_micros, 30_000);
    let deals = &request.imp[0].pmp.as_ref().unwrap().deals;
    assert_eq!(deals[0].bidfloor_micros, 1_500);
    assert_eq!(deals[1].bidfloor_micros, 1);
    assert_eq!(deals[2].bidfloor_micros, 0);
    assert_eq!(deals[0].bidfloorcur, "USD");
    for floor in ["-1", "\"1\"", "1e300", "01", "1.", ".5", "true"] {
        let body = format!(r#"{{"imp":[{{"bidfloor":{floor}}}]}}"#);
        assert!(bails(&body).is_err(), "{body}");
    }
}

#[test]
fn floats_are_serdes_bits() {
    for text in [
        "0",
        "-0",
        "-0.0",
        "1",
        "37.7749",
        "-122.4194",
        "1e-7",
        "2.2250738585072014e-308",
        "0.1e1",
        "123456789012345678901234567890",
        "-9223372036854775809",
        "1.7976931348623157e308",
        "5e-324",
        "0.30000000000000004",
    ] {
        let body = format!(r#"{{"device":{{"geo":{{"lat":{text},"lon":{text}}}}}}}"#);
        let request = fast(&body);
        let serde: f64 = serde_json::from_str(text).unwrap();
        let lat = request.device.unwrap().geo.unwrap().lat.unwrap();
        assert_eq!(lat.to_bits(), serde.to_bits(), "{text}");
    }
    for text in ["1e400", "-1e400", "\"1\"", "1.e1", "+1", "NaN"] {
        let body = format!(r#"{{"device":{{"geo":{{"lat":{text}}}}}}}"#);
        assert!(bails(&body).is_err(), "{body}");
    }
}

#[test]
fn raw_values_are_serdes_text() {
    let request = fast(
        "{\"ext\" : \n { \"a\" : [1, 2.5e3, \"x\\n\", true, null, {}] } \t,\"imp\":[{\"ext\":\"s\"},{\"ext\":-0.5},{\"ext\":[]}]}",
    );
    assert_eq!(
        request.ext.unwrap().get(),
        "{ \"a\" : [1, 2.5e3, \"x\\n\", true, null, {}] }"
    );
    assert_eq!(request.imp[0].ext.unwrap().get(), "\"s\"");
    assert_eq!(request.imp[1].ext.unwrap().get(), "-0.5");
    assert_eq!(request.imp[2].ext.unwrap().get(), "[]");
    assert!(bails(r#"{"ext":{"a":}}"#).is_err());
    assert!(bails(r#"{"ext":nul}"#).is_err());
    // An OpenRTB 3 envelope is kept too, so that the checks name it.
    let body = r#"{"openrtb":{"ver":"3.0","request":{}}}"#;
    assert!(agree(body.as_bytes()));
    assert!(BidRequest::parse(body.as_bytes()).is_err());
}

#[test]
fn unknown_fields_of_every_type_are_skipped() {
    let request = fast(
        r#"{"s":"x","n":-1.5E+3,"z":0,"t":true,"f":false,"u":null,"a":[],"o":{},
        "deep":{"a":[{"b":[[],{},[{"c":null}]]}],"d":"\""},"id":"r","imp":[{"id":"1","x":[1,[2,[3]]]}]}"#,
    );
    assert_eq!(request.id, "r");
    assert_eq!(request.imp.len(), 1);
    for body in [
        r#"{"x":}"#,
        r#"{"x":[1,]}"#,
        r#"{"x":{"a":1,}}"#,
        r#"{"x":{"a" 1}}"#,
        r#"{"x":{1:1}}"#,
        r#"{"x":[1 2]}"#,
        r#"{"x":[}"#,
        r#"{"x":{]}"#,
        r#"{"x":01}"#,
        r#"{"x":1.}"#,
        r#"{"x":-}"#,
        r#"{"x":1e}"#,
        r#"{"x":.5}"#,
        r#"{"x":+1}"#,
        r#"{"x":nul}"#,
        r#"{"x":True}"#,
        r#"{"x":'a'}"#,
        r#"{"x":[1]]}"#,
    ] {
        assert!(bails(body).is_err(), "{body}");
    }
}

#[test]
fn deep_nesting_in_an_unknown_field_neither_overflows_nor_disagrees() {
    for depth in [1, 100, 127, 128, 129, 1_000, 100_000] {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let body = format!(
                r#"{{"id":"r","x":{}1{},"imp":[{{"id":"1"}}]}}"#,
                open.repeat(depth),
                close.repeat(depth)
            );
            let answered = agree(body.as_bytes());
            assert_eq!(answered, depth <= 128, "depth {depth}");
            // serde's skip has no depth limit: it accepts them all.
            assert!(BidRequest::read_json_serde(body.as_bytes()).is_ok());
            // Unbalanced: refused by both.
            let cut = &body[..body.len() - 25];
            assert!(!agree(cut.as_bytes()));
        }
    }
}

#[test]
fn whitespace_is_allowed_wherever_json_allows_it() {
    let body = " \n\t\r{ \"id\" \n: \"r\" , \"imp\" : [ { \"id\" : \"1\" , \"banner\" : { \"w\" : 1 , \"h\" : 2 , \"format\" : [ ] , \"battr\" : [ 1 , 2 ] } } ] , \"cur\" : [ \"USD\" ] , \"test\" : 1 , \"site\" : null , \"x\" : [ 1 , { \"a\" : [ ] } ] } \r\n\t ";
    let request = fast(body);
    assert_eq!(request.imp[0].banner.as_ref().unwrap().battr.len(), 2);
    // Only JSON's four whitespace characters.
    assert!(bails("{\"id\":\u{c}\"r\"}").is_err());
    assert!(bails("\u{feff}{\"id\":\"r\"}").is_err());
}

#[test]
fn trailing_characters_and_other_shapes_go_to_serde() {
    assert!(bails(r#"{"id":"r"} x"#).is_err());
    assert!(bails(r#"{"id":"r"}{}"#).is_err());
    assert!(bails(r#"{"id":"r",}"#).is_err());
    assert!(bails(r#"{"id":"r""#).is_err());
    assert!(bails("").is_err());
    assert!(bails("null").is_err());
    assert!(bails("\"x\"").is_err());
    // serde reads a struct from an array of its fields; the fast reader leaves that to it.
    assert!(bails(r#"["r"]"#).is_ok());
    assert!(bails(r#"{"site":["s1"]}"#).is_ok());
    // Empty objects are requests with every default.
    let request = fast("{}");
    assert!(request.id.is_empty() && request.imp.is_empty());
    assert_eq!(request.at.0, 2);
    let request = fast(r#"{"imp":[{}],"site":{},"regs":{},"source":{"schain":{}}}"#);
    assert_eq!(request.imp[0].bidfloorcur, "USD");
    // A native object needs its request string: without it the native is left out of its imp.
    let body = r#"{"id":"r","imp":[{"id":"1","native":{"ver":"1.2"}}]}"#;
    assert!(bails(body).is_ok());
    let error = BidRequest::parse(body.as_bytes()).unwrap_err().to_string();
    assert!(
        error.contains("imp[0].native: missing field `request`"),
        "{error}"
    );
    fast(r#"{"imp":[{"native":{"request":"{\"ver\":\"1.2\"}","ver":"1.2","battr":[1]}}]}"#);
}

#[test]
fn invalid_utf8_goes_to_serde() {
    assert!(BidRequest::read_json_fast(b"{\"id\":\"\xff\"}").is_none());
    assert!(BidRequest::read_json_serde(b"{\"id\":\"\xff\"}").is_err());
}

/// Real field names, so that random objects hit the modelled fields and their readers: every
/// key the fast reader reads (the list its dispatch is generated from), an unknown one, and one
/// spelt with an escape (which the fast reader leaves to serde).
fn keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = FAST_READER_KEYS
        .iter()
        .flat_map(|(_, keys)| keys.iter().copied())
        .collect();
    let mut seen = std::collections::HashSet::new();
    keys.retain(|key| seen.insert(*key));
    keys.extend(["unknown", "\\u0069d"]);
    keys
}

/// Scalar JSON texts, ordinary and odd.
const SCALARS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "-0",
    "7",
    "728",
    "0.85",
    "1e2",
    "-2.5",
    "4294967296",
    "01",
    "null",
    "true",
    "false",
    "\"\"",
    "\"USD\"",
    "\"a\\/b\"",
    "\"\\u00e9\"",
    "\"\\ud83d\"",
    "\"x\\\"y\"",
    "[]",
    "{}",
    "[1,2]",
    "[\"a\",\"b\"]",
];

/// Random JSON values from a small grammar with the real field names.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = proptest::sample::select(SCALARS).prop_map(str::to_owned);
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5)
                .prop_map(|v| format!("[{}]", v.join(","))),
            proptest::collection::vec((proptest::sample::select(keys()), inner), 0..7).prop_map(
                |fields| {
                    let fields: Vec<String> = fields
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    format!("{{{}}}", fields.join(","))
                }
            ),
        ]
    })
}

/// An edit of a body: replace, insert or delete one byte.
#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

/// Bytes that matter to JSON, and a few that do not.
fn json_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        proptest::sample::select(b"{}[]\":,\\ \n0123456789-+.eEtrufalsn/ux".to_vec()),
        any::<u8>(),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), json_byte()).prop_map(|(at, b)| Edit::Replace(at, b)),
        (any::<usize>(), json_byte()).prop_map(|(at, b)| Edit::Insert(at, b)),
        any::<usize>().prop_map(Edit::Delete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    #[test]
    fn an_edited_bench_request_agrees(edits in proptest::collection::vec(edit(), 1..6)) {
        let mut body = bench_request();
        for edit in edits {
            match edit {
                Edit::Replace(at, byte) => {
                    let at = at % body.len();
                    body[at] = byte;
                }
                Edit::Insert(at, byte) => body.insert(at % (body.len() + 1), byte),
                Edit::Delete(at) => {
                    if !body.is_empty() {
                        body.remove(at % body.len());
                    }
                }
            }
        }
        agree(&body);
    }

    #[test]
    fn a_bench_request_with_a_value_replaced_agrees(
        start in any::<usize>(),
        length in 0usize..40,
        value in json_value(),
    ) {
        let mut body = bench_request();
        let start = start % body.len();
        let end = (start + length).min(body.len());
        body.splice(start..end, value.bytes());
        agree(&body);
    }

    #[test]
    fn random_objects_with_real_field_names_agree(
        fields in proptest::collection::vec((proptest::sample::select(keys()), json_value()), 0..10),
    ) {
        let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let body = format!("{{{}}}", fields.join(","));
        agree(body.as_bytes());
    }

    #[test]
    fn random_imps_with_real_field_names_agree(
        imps in proptest::collection::vec(json_value(), 0..3),
        site in json_value(),
    ) {
        let body = format!(r#"{{"id":"r","imp":[{}],"site":{site}}}"#, imps.join(","));
        agree(body.as_bytes());
    }
}
